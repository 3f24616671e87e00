"""The file round trip (`activebayes query` / `import`) on the label store."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from activebayes.cli import main
from activebayes.data import load_dataset
from activebayes.labelling import LabellingProject

FAST = ["--max-epochs", "1", "--num-samples", "4", "--quiet"]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def make_image(path: Path, value: int) -> None:
    Image.fromarray(np.full((6, 6), value, dtype=np.uint8)).save(path)


def truth(path: str | Path) -> str:
    """The class of an image, from its content alone: its pixel value's tens digit, even or odd."""
    value = int(np.asarray(Image.open(path))[0, 0])
    return "even" if (value // 10) % 2 == 0 else "odd"


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def query_file(stdout: str) -> Path:
    return Path(next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("query: ")))


def test_folder_change_keeps_every_label_on_its_image(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(12):
        make_image(folder / f"img_{i:02d}.png", 10 * i + 5)
    # a relative --images path, stored absolute
    code, out, err = run(capsys, "query", "proj", "--images", "images", "--classes", "even,odd",
                         "--batch-size", 4, "--model", "mlp", *FAST)
    assert code == 0, err
    first = query_file(out)
    rows = read_rows(first)
    assert [r["item"].isdigit() for r in rows] == [True] * 4 and all(len(r["sha256"]) == 64 for r in rows)
    assert all(Path(r["path"]) == tmp_path / "images" / r["key"] for r in rows)  # the key: its path in the folder
    for row in rows:
        row["label"] = truth(row["path"])
    write_rows(first, rows)
    code, out, err = run(capsys, "import", first, "--project", "proj")
    assert code == 0 and "imported 4 new label(s)" in out, err

    # one labelled image removed, one new image added: the same count, other positions
    gone = Path(rows[0]["path"])
    gone.unlink()
    make_image(folder / "img_00a.png", 205)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run(capsys, "query", tmp_path / "proj", *["--quiet"])
    assert code == 0, err
    assert "1 new image(s): img_00a.png" in out and f"1 image(s) gone: {gone.name}" in out
    second = read_rows(query_file(out))
    assert not {r["item"] for r in second} & {r["item"] for r in rows}

    with LabellingProject.open(tmp_path / "proj") as project:
        with pytest.warns(UserWarning, match="1 labelled item.s. are no longer items of the project"):
            exported = read_rows(project.export(fmt="csv"))
        labelled = [r for r in exported if r["label"] and r["present"] == "true"]
        assert len(labelled) == 3
        for row in labelled:  # every label is the one given to that very image
            assert row["label"] == truth(row["path"])
        # the removed image's label is exported too, marked as gone
        assert [(r["key"], r["label"]) for r in exported if r["present"] == "false"] == [(gone.name, rows[0]["label"])]
        assert len(project.store.labels(present_only=False)) == 4  # the removed image's label is kept
        # the dataset positions moved; the loop's labelled set follows the items, not the positions
        loop = project.build_loop()
        for index, label in zip(loop.pool.labelled_indices.tolist(),
                                loop.pool.labels_of(loop.pool.labelled_indices).tolist(), strict=True):
            assert project.classes[label] == truth(project.dataset.paths[index])

    # the folder moved: naming its new place continues the project (it used to be refused as another
    # --images); the labels stay on their images, matched by path and content
    moved = tmp_path / "moved-images"
    folder.rename(moved)
    code, out, err = run(capsys, "query", tmp_path / "proj", "--images", moved, "--quiet")
    assert f"the image folder moved: {folder.resolve()} -> {moved.resolve()} (now stored)" in out, (out, err)
    with LabellingProject.open(tmp_path / "proj") as project:
        assert project.config.images == str(moved.resolve()) and not project.changes.any
        assert len(project.store.labels()) == 3


def test_an_images_folder_without_images_names_the_flag(tmp_path, capsys):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "notes.txt").write_text("no pictures here")
    for command in ("query", "label"):
        code, out, err = run(capsys, command, tmp_path / "proj", "--images", folder, "--classes", "a,b", *FAST)
        assert code == 1 and err.startswith(f"error: --images: {folder} holds no images (.bmp, ") \
            and err.count("\n") == 1, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # nothing half-made


def test_a_failed_first_query_leaves_nothing_behind(tmp_path, capsys):
    folder = tmp_path / "images"
    folder.mkdir()
    for i in range(6):
        make_image(folder / f"img_{i}.png", 10 * i)
    project = tmp_path / "new" / "proj"
    for args, needle in [
        (["--images", tmp_path / "typo", "--classes", "a,b"], "typo"),
        (["--images", folder, "--classes", "a,a"], "classes"),
        (["--dataset", "digits", "--strategy", "telepathy"], "telepathy"),
        # opening it would refuse these classes ever after (the folder would be unusable)
        (["--dataset", "iris", "--classes", "a,b,c"], "--classes a,b,c differ from the classes of iris, "
                                                        "['setosa', 'versicolor', 'virginica']"),
        # the labelling commands have no --download: the advice is --data-dir alone
        (["--dataset", "mnist", "--data-dir", folder], "(or the same names without .gz, uncompressed). Give the "
                                                       "folder that holds them with --data-dir."),
    ]:
        code, out, err = run(capsys, "query", project, *args, *FAST)
        assert code != 0
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["images"]  # nothing half-made
    (folder / "broken.png").write_bytes(b"this is not a png")  # skipped with a note, not an error
    code, out, err = run(capsys, "query", project, "--images", folder, "--classes", "a,b", "--model", "mlp",
                         "--batch-size", 3, *FAST)
    assert code == 0, err
    assert "1 file(s) skipped" in out and "broken.png" in out
    assert (project / "labels.sqlite").is_file() and len(read_rows(query_file(out))) == 3


@pytest.fixture
def digits_project(tmp_path, capsys):
    project = tmp_path / "proj"
    code, out, err = run(capsys, "query", project, "--dataset", "digits", "--batch-size", 4, *FAST)
    assert code == 0, err
    return project, query_file(out), load_dataset("digits").targets


def fill_truth(path: Path, targets, **overrides: str) -> list[dict[str, str]]:
    """Fill in the true digit of every row (``overrides``: rank -> label text)."""
    rows = read_rows(path)
    with LabellingProject.open(path.parents[1], rescan=False) as project:
        for row in rows:
            index = project.index_of(int(row["item"]))
            row["label"] = overrides.get(row["rank"], str(int(targets[index])))
    write_rows(path, rows)
    return rows


def test_a_number_too_long_for_an_id_is_a_problem_of_its_row_not_a_traceback(digits_project, capsys, tmp_path):
    """A label or item cell of 100,000 digits ended the import with Python's traceback ("Exceeds the
    limit (4300 digits) for integer string conversion"), from a CSV and from JSON alike."""
    project, first, targets = digits_project
    long = "9" * 100_000
    shown = "'" + "9" * 39 + "... (100000 characters)"
    rows = fill_truth(first, targets, **{"0": long})
    code, out, err = run(capsys, "import", first, "--project", project)
    lines = err.rstrip("\n").splitlines()
    assert code == 1 and "Traceback" not in err and len(lines) == 2 and len(err) < 400, err
    assert lines[0].startswith(f"  row 1 (line 2): label {shown} for item {rows[0]['item']} is not a class; expected ")
    assert lines[1] == f"error: 1 problem(s) in {first}; nothing was imported"
    answers = tmp_path / "answers.json"
    answers.write_text(f'[{{"item": {long}, "label": 1}}]')
    code, out, err = run(capsys, "import", answers, "--project", project, "--allow-partial")
    lines = err.rstrip("\n").splitlines()
    assert code == 1 and "Traceback" not in err and len(lines) == 2, err
    assert lines == [f"  entry 1 of the list: item {shown} is too long to be an id",
                     f"error: 1 problem(s) in {answers}; nothing was imported"]


def test_import_lists_every_problem_with_the_flag_that_fixes_it(digits_project, capsys):
    project, first, targets = digits_project
    rows = fill_truth(first, targets)
    assert run(capsys, "import", first, "--project", project)[0] == 0
    stored = LabellingProject.open(project, rescan=False)
    before = stored.store.labels()
    stored.close()
    wrong = str((int(rows[0]["label"]) + 1) % 10)
    rows = fill_truth(first, targets, **{"0": wrong, "2": "", "3": "banana"})
    write_rows(first, [*rows, {**rows[1], "item": "99999", "label": "1"}])
    code, out, err = run(capsys, "import", first, "--project", project)
    assert code == 1
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: 4 problem(s) in") and lines[-1].endswith("nothing was imported")
    problems = "\n".join(lines[:-1])
    assert f"the file says '{wrong}' (pass --overwrite to accept)" in problems
    assert "has no label (pass --allow-partial to accept)" in problems
    assert "label 'banana'" in problems and "item 99999 is not an item of this project" in problems
    with LabellingProject.open(project, rescan=False) as again:
        assert again.store.labels() == before
    # both flags accept what they name; the label that is no class still is not
    code, out, err = run(capsys, "import", first, "--project", project, "--overwrite", "--allow-partial")
    assert code == 1 and "banana" in err and "--overwrite" not in err
    write_rows(first, rows)
    rows = fill_truth(first, targets, **{"0": wrong, "2": ""})
    code, out, err = run(capsys, "import", first, "--project", project, "--overwrite", "--allow-partial")
    assert code == 0, err
    assert "imported 0 new label(s), 1 replaced" in out


def test_earlier_rounds_and_nothing_new(digits_project, capsys):
    project, first, targets = digits_project
    fill_truth(first, targets)
    assert run(capsys, "import", first, "--project", project)[0] == 0
    code, out, err = run(capsys, "query", project, "--quiet")
    assert code == 0 and "trained on 4 label(s) (4 new)" in out, err
    second = query_file(out)
    assert second.name == "query-0001.csv"
    # one spreadsheet with every row so far: round 0's rows are accepted and reported as such
    combined = second.parent / "all.csv"
    rows = read_rows(first) + fill_truth(second, targets)
    write_rows(combined, rows)
    code, out, err = run(capsys, "import", combined, "--project", project)
    assert code == 0, err
    assert "imported 4 new label(s); 8 labelled in total" in out
    assert "4 row(s) answer items of earlier queries (round 0: 4)" in out
    code, out, err = run(capsys, "import", combined, "--project", project)
    assert code == 0 and "nothing new: the 8 label(s) in the file were stored already" in out
    # an item that was never queried is named as such
    write_rows(combined, [*rows, {**rows[0], "item": "1000", "label": "3"}])
    code, out, err = run(capsys, "import", combined, "--project", project)
    assert code == 1 and "item 1000 was never queried" in err


def test_label_studio_export_and_import(digits_project, capsys, tmp_path):
    project, first, targets = digits_project
    fill_truth(first, targets)
    assert run(capsys, "import", first, "--project", project)[0] == 0
    with LabellingProject.open(project, rescan=False) as source:
        tasks_file = source.export(tmp_path / "tasks.json", fmt="labelstudio")
        expected = {source.store.item(i).key: y for i, y in source.store.labels().items()}
    tasks = json.loads(tasks_file.read_text())
    assert sum(bool(t["annotations"]) for t in tasks) == 4
    other = tmp_path / "other"
    assert run(capsys, "query", other, "--dataset", "digits", *FAST)[0] == 0
    code, out, err = run(capsys, "import", tasks_file, "--project", other)
    assert code == 0 and "imported 4 new label(s)" in out and "1293 task(s) without an annotation" in out, err
    with LabellingProject.open(other, rescan=False) as target:
        assert {target.store.item(i).key: y for i, y in target.store.labels().items()} == expected


def test_importing_a_csv_or_json_export_says_what_import_takes(digits_project, capsys, tmp_path):
    """A project's own CSV / JSON export, imported back, gave one "was never queried" line per
    item (blank labels included) and "N problem(s)"; it is one line saying what import takes."""
    project, first, targets = digits_project
    fill_truth(first, targets)
    assert run(capsys, "import", first, "--project", project)[0] == 0
    for fmt in ("csv", "json"):
        assert run(capsys, "export", project, "--out", tmp_path / f"labels.{fmt}")[0] == 0
        code, _, err = run(capsys, "import", tmp_path / f"labels.{fmt}", "--project", project)
        assert code == 1 and err.count("\n") == 1, err
        assert "is an export of a project (every item with its label, `activebayes export`), not a filled-in " \
               "query" in err and "never queried" not in err


# ----------------------------------------------------------------------------- the test split


def test_only_a_missing_test_split_turns_the_learning_curve_off(tmp_path):
    """A dataset without a test split has no test curve; a test split that is there but broken
    (here truncated) is an error, never silently dropped."""
    from activebayes.data import DataError, write_memmap
    from activebayes.labelling import ProjectConfig

    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    for split in ("train", "test"):
        write_memmap(data / split, rng.integers(0, 256, (12, 8, 8), dtype=np.uint8), targets=[0, 1] * 6,
                     classes=["a", "b"], name="blocks", progress=False)
    config = ProjectConfig(dataset="memmap", data_dir=str(data), model="mlp", batch_size=4)
    with LabellingProject.create(tmp_path / "proj", config) as project:
        assert project.test_dataset is not None and len(project.test_dataset) == 12

    inputs = next((data / "test").glob("inputs*"))
    inputs.write_bytes(inputs.read_bytes()[:-64])  # truncated: the split is there, but corrupt
    with LabellingProject.open(tmp_path / "proj") as project, pytest.raises(DataError, match="test"):
        project.test_dataset  # noqa: B018

    for path in (data / "test").iterdir():
        path.unlink()
    (data / "test").rmdir()  # no test split at all: the project goes on without a test curve
    with LabellingProject.open(tmp_path / "proj") as project:
        assert project.test_dataset is None


def test_an_answers_file_is_read_once(digits_project, monkeypatch):
    project_dir, query, targets = digits_project
    fill_truth(query, targets)
    reads = []
    read_bytes = Path.read_bytes

    def counting(self):
        if self.name == query.name:
            reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counting)
    with LabellingProject.open(project_dir, rescan=False) as project:
        assert project.import_answers(query).stored == 4
    assert len(reads) == 1


def test_a_project_trains_the_posterior_it_was_created_with(tmp_path, capsys):
    """`--posterior laplace` is a project setting: the loop the project builds uses a last-layer
    Laplace head, the same flag again continues the project, another value is refused."""
    from activebayes.models.laplace import LastLayerLaplace

    project = tmp_path / "proj"
    code, out, err = run(capsys, "query", project, "--dataset", "digits", "--posterior", "laplace", *FAST)
    assert code == 0, err
    rows = read_rows(query_file(out))
    digits = load_dataset("digits")
    with LabellingProject.open(project) as labelling:
        assert labelling.config.posterior == "laplace"
        for row in rows:
            row["label"] = labelling.classes[int(digits.targets[labelling.index_of(int(row["item"]))])]
    write_rows(query_file(out), rows)
    assert run(capsys, "import", query_file(out), "--project", project)[0] == 0
    code, out, err = run(capsys, "query", project, "--posterior", "laplace", "--quiet")
    assert code == 0 and "trained on" in out, err
    with LabellingProject.open(project) as labelling:
        loop = labelling.build_loop()
        assert loop.config.posterior == "laplace"
        proposal = loop.propose()  # round 1, fitted on the imported labels
        assert isinstance(loop.posterior.module, LastLayerLaplace) and loop.posterior.module.prior_precision > 0
        assert proposal.fit["laplace_log_marginal_likelihood"] < 0
    code, out, err = run(capsys, "query", project, "--posterior", "ensemble", "--quiet")
    assert code != 0 and "--posterior" in err and "laplace" in err and "ensemble" in err
    code, out, err = run(capsys, "query", tmp_path / "other", "--dataset", "digits", "--posterior", "gaussian")
    assert code != 0 and "posterior" in err and "mc_dropout" in err and "Traceback" not in err


def test_a_partial_import_says_to_finish_the_file_before_the_next_batch(digits_project, capsys):
    project, first, targets = digits_project
    fill_truth(first, targets, **{"2": ""})
    code, out, err = run(capsys, "import", first, "--project", project, "--allow-partial")
    assert code == 0, err
    # `query` refuses while an item is unanswered: the hint says so instead of suggesting it
    assert out.rstrip().endswith(f"1 item(s) of {first} have no label yet: fill them in and import it again; "
                                 f"then the next batch: activebayes query {project}")
    code, _, err = run(capsys, "query", project, "--quiet")
    assert code != 0 and "have no label yet" in err
    fill_truth(first, targets)
    code, out, err = run(capsys, "import", first, "--project", project)
    assert code == 0 and out.rstrip().endswith(f"next batch: activebayes query {project}"), err


def test_a_label_studio_task_with_a_huge_id_is_named_in_a_short_problem(tmp_path):
    """A task id of 5,000 digits was repeated whole in its problem line."""
    from activebayes.labelling.interchange import read_label_studio

    tasks = tmp_path / "tasks.json"
    tasks.write_text(f'[{{"id": {"9" * 5000}, "data": 3}}, {{"id": 7, "data": 3}}]', encoding="utf-8")
    problems = read_label_studio(tasks, items=[], classes=["a"]).problems
    assert problems[0].startswith("task 0 (id '9999") and "(5000 characters)" in problems[0] and len(problems[0]) < 200
    assert problems[1] == "task 1 (id 7): not a Label Studio task (an object with 'data')"
