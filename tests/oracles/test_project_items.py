"""A labelling project's items under hostile or careless folders, exports and re-runs.

Issue 28 items 4-5 and issue 29 items 4-6 and 9: links out of the folder, special files and
decompression bombs are never items (skipped with a note, never a traceback); labels follow
their content through renames and swaps; exports neutralise formula prefixes; the same command
run again continues; numeric class names are read as names.
"""

from __future__ import annotations

import csv
import json
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from activebayes.cli import main
from activebayes.data import DataError
from activebayes.data.image_folder import decode_image
from activebayes.labelling import LabellingProject, ProjectConfig

FAST = ["--max-epochs", "1", "--num-samples", "4", "--model", "mlp", "--batch-size", "3", "--quiet"]


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def make_image(path: Path, value: int) -> None:
    Image.fromarray(np.full((6, 6), value, dtype=np.uint8)).save(path)


def bomb_png(path: Path, width: int = 20000, height: int = 20000) -> None:
    """A small PNG whose header claims ``width x height`` pixels (what a decompression bomb looks
    like to a reader before it decodes): a valid 1x1 PNG with its IHDR size patched."""
    make_image(path, 0)
    data = bytearray(path.read_bytes())
    start = data.index(b"IHDR")
    data[start + 4 : start + 12] = struct.pack(">II", width, height)
    data[start + 17 : start + 21] = struct.pack(">I", zlib.crc32(bytes(data[start : start + 17])))
    path.write_bytes(bytes(data))


def config_for(folder: Path, classes=("a", "b")) -> ProjectConfig:
    return ProjectConfig(images=str(folder), classes=classes, cold_start=None, model="mlp",
                         fit_options={"max_epochs": 1})


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    """A filled-in query file: ``rows`` (dicts with the query's columns) as CSV."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def query_file(stdout: str) -> Path:
    return Path(next(line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("query: ")))


@pytest.fixture
def folder(tmp_path) -> Path:
    images = tmp_path / "images"
    images.mkdir()
    for i in range(6):
        make_image(images / f"img_{i}.png", 40 * i)
    return images


# --------------------------------------------------------------------------- issue 28 item 4


def test_links_out_special_files_and_bombs_are_never_items(tmp_path, folder):
    outside = tmp_path / "secret.png"
    make_image(outside, 7)
    (folder / "zz.png").symlink_to(outside)                 # a link out of the folder: refused
    (folder / "passwd.png").symlink_to("/etc/passwd")
    (folder / "inside.png").symlink_to(folder / "img_0.png")  # a link that stays inside: fine
    os.mkfifo(folder / "pipe.png")                          # a special file: never opened
    bomb_png(folder / "bomb.png")                           # 20000 x 20000 claimed
    (folder / "broken.png").write_bytes(b"not an image")
    with LabellingProject.create(tmp_path / "proj", config_for(folder)) as project:
        keys = {item.key for item in project.store.items()}
        assert keys == {f"img_{i}.png" for i in range(6)} | {"inside.png"}
        assert len(project.dataset) == 7 and project.item_ids  # positions <-> items agree
        skipped = dict(project.changes.skipped)
        assert set(skipped) == {"zz.png", "passwd.png", "bomb.png", "broken.png"}
        assert "outside the image folder" in skipped["zz.png"]
        assert "over the limit of 64,000,000 pixels" in skipped["bomb.png"]
        note = "\n".join(project.changes.summary())
        assert "4 file(s) skipped" in note and "bomb.png" in note
    with LabellingProject.open(tmp_path / "proj") as project:  # the rescan skips them the same way
        assert {item.key for item in project.store.items()} == keys
        assert not project.changes.added and len(project.changes.skipped) == 4


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path):
    bomb_png(tmp_path / "bomb.png")
    with pytest.raises(DataError, match=r"bomb\.png: image .*over the limit of 64,000,000 pixels"):
        decode_image(tmp_path / "bomb.png", (28, 28), True)
    bomb_png(tmp_path / "big.png", 9000, 9000)  # under PIL's own limit, over ours
    with pytest.raises(DataError, match=r"big\.png: image of 9000 x 9000 pixels is over the limit"):
        decode_image(tmp_path / "big.png", (28, 28), True)


def test_a_bomb_at_project_creation_is_a_note_not_a_traceback(tmp_path, folder, capsys):
    bomb_png(folder / "huge.png")
    code, out, err = run(capsys, "query", tmp_path / "proj", "--images", folder, "--classes", "a,b", *FAST)
    assert code == 0, err
    assert "1 file(s) skipped" in out and "huge.png" in out and "Traceback" not in out + err


# --------------------------------------------------------------------------- issue 29 items 5 and 6


def test_renamed_and_swapped_images_keep_their_labels(tmp_path, folder):
    with LabellingProject.create(tmp_path / "proj", config_for(folder)) as project:
        store = project.store
        by_key = {item.key: item.id for item in store.items()}
        for key, label in [("img_0.png", 0), ("img_1.png", 1), ("img_2.png", 1)]:
            store.answer(by_key[key], label, "ann")
    # swap the names of two labelled images, rename a third
    (folder / "img_0.png").rename(folder / "tmp.png")
    (folder / "img_1.png").rename(folder / "img_0.png")
    (folder / "tmp.png").rename(folder / "img_1.png")
    (folder / "img_2.png").rename(folder / "renamed.png")
    with LabellingProject.open(tmp_path / "proj") as project:
        rows = {row["key"]: row for row in project.store.export_rows(root=folder)}
        assert rows["img_1.png"]["label"] == "a" and rows["img_0.png"]["label"] == "b"  # followed their content
        assert rows["renamed.png"]["label"] == "b"
        assert rows["img_1.png"]["item"] == by_key["img_0.png"]  # the same item: identity is content + path
        assert len(project.store.labels()) == 3 and len(project.store.items()) == 6
        assert sorted(project.changes.moved) == [("img_0.png", "img_1.png"), ("img_1.png", "img_0.png"),
                                                 ("img_2.png", "renamed.png")]
        assert not project.changes.added and not project.changes.changed and not project.changes.removed
        # the loop's labelled set follows the items, not the positions
        loop = project.build_loop()
        assert loop.round == 0  # nothing committed yet; positions map back to the same items
        for item, label in project.store.labels().items():
            path = project.dataset.paths[project.index_of(item)]
            assert project.classes[label] == rows[Path(path).name]["label"]


def test_a_removed_image_that_comes_back_under_a_new_name_keeps_its_label(tmp_path, folder):
    with LabellingProject.create(tmp_path / "proj", config_for(folder)) as project:
        item = next(i.id for i in project.store.items() if i.key == "img_3.png")
        project.store.answer(item, 1, "ann")
    (folder / "img_3.png").rename(tmp_path / "away.png")
    with LabellingProject.open(tmp_path / "proj") as project:
        assert project.changes.removed == ["img_3.png"] and project.store.labels() == {}
    (tmp_path / "away.png").rename(folder / "back.png")
    with LabellingProject.open(tmp_path / "proj") as project:
        assert project.changes.returned == ["back.png"]
        assert project.store.labels() == {item: 1} and project.store.item(item).key == "back.png"


def test_a_broken_image_added_later_is_reported_and_skipped(tmp_path, folder, capsys):
    args = ["query", tmp_path / "proj", "--images", folder, "--classes", "a,b", *FAST]
    code, out, err = run(capsys, *args)
    assert code == 0, err
    first = query_file(out)
    rows = read_rows(first)
    for row in rows:
        row["label"] = "a"
    with first.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = run(capsys, "import", first, "--project", tmp_path / "proj")
    assert code == 0, err
    (folder / "new_but_broken.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    make_image(folder / "new_fine.png", 99)
    code, out, err = run(capsys, "query", tmp_path / "proj", "--quiet")  # the next round
    assert code == 0, err
    assert "new_but_broken.png" in out and "skipped" in out and "1 new image(s): new_fine.png" in out
    assert "round 1" in out
    with LabellingProject.open(tmp_path / "proj") as project:  # what the app's trainer does
        assert "new_but_broken.png" not in {item.key for item in project.store.items()}
        loop, proposal = project.advance(min_pending=10**12)
        assert proposal.stop_reason is None and proposal.round == 1


# --------------------------------------------------------------------------- issue 29 item 4


def test_the_same_command_again_continues_and_a_different_setting_names_both_values(tmp_path, folder, capsys,
                                                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "query", "proj", "--images", "images", "--classes", "a,b", *FAST)
    assert code == 0, err
    # the same settings again (the folder given absolute this time, spaces in the class list)
    code, out, err = run(capsys, "query", "proj", "--images", folder, "--classes", "a, b", *FAST)
    assert code != 0 and "have no label yet" in err  # it went on to the query step: the settings were accepted
    code, out, err = run(capsys, "query", "proj", "--images", "images", "--classes", "a,c", *FAST)
    assert code != 0
    line = err.strip().splitlines()
    assert len(line) == 1 and "--classes a,b" in line[0] and "--classes a,c" in line[0], err
    code, out, err = run(capsys, "query", "proj", "--batch-size", "4", "--quiet")
    assert code != 0 and "--batch-size 3" in err and "--batch-size 4" in err


# --------------------------------------------------------------------------- issue 28 item 5


def test_exports_neutralise_formula_prefixes(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    names = ["=HYPERLINK(1).png", "+cmd.png", "-2+3.png", "@SUM(1).png", "plain.png"]
    for i, name in enumerate(names):
        make_image(folder / name, 30 * i)
    with LabellingProject.create(tmp_path / "proj", config_for(folder, classes=("-1", "+x"))) as project:
        store = project.store
        for item in store.items():
            store.answer(item.id, item.id % 2, "=cmd|' /C calc'!A0" if item.id % 2 else "@ann")
        rows = read_rows(project.export(fmt="csv"))
        cells = [value for row in rows for value in row.values()]
        dangerous = [c for c in cells if c[:1] in ("=", "+", "-", "@") and c not in ("-1",)]
        assert dangerous == []
        assert {row["key"] for row in rows} == {"'" + n if n[0] in "=+-@" else n for n in names}
        assert {row["annotator"] for row in rows} == {"'=cmd|' /C calc'!A0", "'@ann"}
        assert {row["label"] for row in rows} == {"-1", "'+x"}  # a plain number is left alone
        exported = json.loads(project.export(fmt="json").read_text())  # JSON keeps the values as they are
        assert {row["key"] for row in exported} == set(names)


# --------------------------------------------------------------------------- issue 29 item 9


def test_numeric_class_names_are_read_as_names_and_an_id_is_refused(tmp_path, folder, capsys):
    code, out, err = run(capsys, "query", tmp_path / "proj", "--images", folder, "--classes", "3,2,1", *FAST)
    assert code == 0, err
    path = query_file(out)
    rows = read_rows(path)
    rows[0]["label"], rows[1]["label"], rows[2]["label"] = "1", "0", "3"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = run(capsys, "import", path, "--project", tmp_path / "proj")
    assert code != 0 and "label '0'" in err and "read as a class name" in err, err
    rows[1]["label"] = "2"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, out, err = run(capsys, "import", path, "--project", tmp_path / "proj")
    assert code == 0, err
    with LabellingProject.open(tmp_path / "proj") as project:
        stored = {row["item"]: row["label"] for row in project.store.export_rows()}
        assert [stored[int(r["item"])] for r in rows[:3]] == ["1", "2", "3"]  # names, not positions


def test_query_trains_on_the_device_given_and_refuses_one_the_machine_lacks(tmp_path, folder, capsys, monkeypatch):
    code, out, err = run(capsys, "query", tmp_path / "new", "--images", folder, "--classes", "a,b", "--device",
                         "tpu9", *FAST)
    assert code == 1 and err.count("\n") == 1 and "--device must be a device this machine has" in err, err
    assert not (tmp_path / "new").exists()  # refused before anything was written
    devices = []
    real_build = LabellingProject.build_loop

    def build(self):
        loop = real_build(self)
        devices.append(loop.config.device)
        return loop

    monkeypatch.setattr(LabellingProject, "build_loop", build)
    code, out, err = run(capsys, "query", tmp_path / "proj", "--images", folder, "--classes", "a,b", "--device",
                         "cpu", *FAST)
    assert code == 0, err
    assert devices and set(devices) == {"cpu"}


def test_images_added_or_removed_after_a_trained_round_do_not_stop_the_project(tmp_path, capsys):
    """The stopping signals compare a round's predictions with the last round's on the same
    items: after the folder changed they start again instead of comparing arrays of other items."""
    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(24):
        Image.fromarray(rng.integers(0, 256, (6, 6), dtype=np.uint8)).save(images / f"img_{i:02d}.png")
    project = tmp_path / "proj"
    args = ["--images", images, "--classes", "a,b", "--cold-start", "none", *FAST]
    for round_ in range(5):
        code, out, err = run(capsys, "query", project, *args)
        assert code == 0 and "Traceback" not in err, err
        answers = query_file(out)
        rows = read_rows(answers)
        for row in rows:
            row["label"] = "a" if int(row["item"]) % 2 else "b"
        write_rows(answers, rows)
        code, _, err = run(capsys, "import", answers, "--project", project)
        assert code == 0, err
        if round_ == 1:  # after the first trained round: 4 images added, an unlabelled one removed
            for i in range(24, 28):
                Image.fromarray(rng.integers(0, 256, (6, 6), dtype=np.uint8)).save(images / f"img_{i:02d}.png")
            labelled = {r["key"] for r in rows}
            next(p for p in sorted(images.iterdir()) if p.name not in labelled).unlink()
    with LabellingProject.open(project) as opened:
        signals = [r.signals["stable_predictions"] for r in opened._records() if r.signals]
    changed = [s["detail"].startswith("the items changed") for s in signals]
    assert sum(changed) == 1 and not changed[-1]  # once, at the round after the change
    assert signals[-1]["value"] is not None  # then compared again


def test_rows_of_queried_images_gone_or_changed_may_be_dropped(tmp_path, folder, capsys):
    """The import says to drop the row of a queried image that is gone (or changed); a file
    without those rows then imports, and the project goes on."""
    project = tmp_path / "proj"
    args = ["--images", folder, "--classes", "a,b", "--cold-start", "none", *FAST]
    code, out, err = run(capsys, "query", project, *args)
    assert code == 0, err
    answers = query_file(out)
    rows = read_rows(answers)
    gone, changed = rows[0]["key"], rows[1]["key"]
    (folder / gone).unlink()
    make_image(folder / changed, 255)
    for row in rows:
        row["label"] = "a"
    write_rows(answers, rows)
    code, _, err = run(capsys, "import", answers, "--project", project)
    assert code == 1 and f"({gone}): is no longer in the image folder; drop its row" in err
    assert f"({changed}): changed on disk after it was queried" in err
    write_rows(answers, rows[2:])
    code, _, err = run(capsys, "import", answers, "--project", project)
    assert code == 0, err
    code, out, err = run(capsys, "query", project, *args)
    assert code == 0 and "round 1" in out, err


def test_importing_a_file_without_labels_says_so(tmp_path, folder, capsys):
    code, out, err = run(capsys, "query", tmp_path / "proj", "--images", folder, "--classes", "a,b",
                         "--cold-start", "none", *FAST)
    assert code == 0, err
    code, out, err = run(capsys, "import", query_file(out), "--project", tmp_path / "proj", "--allow-partial")
    assert code == 0 and "nothing imported: the file holds no label yet; 0 labelled in total" in out, err
