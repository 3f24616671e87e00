"""Labelling projects over a table: identity by row id or content, bad input as one-line errors,
settings (a project's loop settings are LoopConfig's: its defaults, its checks), and the label
store's schema migration."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from activebayes.cli import main
from activebayes.errors import ActiveBayesError
from activebayes.labelling import AnswerFileError, LabellingProject, ProjectConfig, ProjectError
from activebayes.labelling.settings import DIFFERENT_DEFAULTS, LOOP_SETTINGS, TABLE_SETTINGS
from activebayes.labelling.store import SCHEMA_VERSION, ItemFile, LabelStore, LabelStoreError
from activebayes.records import LoopConfig
from tests.app.text_helpers import CLASSES, gloss_rows, text_config, write_csv


def _labels_by_text(project: LabellingProject) -> dict[str, str]:
    return {row["text"]: row["label"] for row in json.loads(project.export_text("json")) if row["label"]}


@pytest.mark.parametrize("id_column", ["id", None])
def test_labels_follow_the_rows_when_rows_are_reordered_or_inserted(tmp_path, id_column):
    rows = gloss_rows(8)
    table = write_csv(tmp_path / "glosses.csv", rows)
    with LabellingProject.create(tmp_path / "proj", text_config(table, id_column=id_column)) as project:
        keys = {item.key for item in project.store.items()}
        if id_column is None:  # the hash of the row's content, as load_table makes it
            assert all(key.startswith("sha256:") and len(key) == 23 for key in keys)
        else:
            assert keys == {row["id"] for row in rows}
        for k, item in enumerate(project.store.items()[:6]):
            project.store.answer(item.id, k % 3, "ann")
        before = _labels_by_text(project)
        loop, _ = project.advance(min_pending=10**12)
    assert len(before) == 6

    shuffled = list(rows)
    random.Random(0).shuffle(shuffled)
    shuffled.insert(3, {"id": "new-1", "text": "a brand new gloss about a plant", "y": "plant"})
    write_csv(table, shuffled)
    with LabellingProject.open(tmp_path / "proj") as project:
        assert _labels_by_text(project) == before  # each label is still on its text, not on its position
        assert len(project.changes.added) == 1 and not project.changes.removed and not project.changes.moved
        assert project.changes.summary()[0].startswith("1 new row(s): ")
        assert project.item_ids != list(range(1, len(shuffled) + 1))  # positions did change
        loop = project.build_loop()
        assert len(loop.dataset) == len(shuffled)
        for item, label in project.store.labels().items():
            assert project.item_content(item)["text"] in before and CLASSES[label] == before[
                project.item_content(item)["text"]]


def test_a_row_whose_text_changes_is_a_new_item_and_its_old_label_stays_with_the_old_text(tmp_path):
    rows = gloss_rows(4)
    table = write_csv(tmp_path / "glosses.csv", rows)
    with LabellingProject.create(tmp_path / "proj", text_config(table)) as project:
        first = next(item for item in project.store.items() if item.key == rows[0]["id"])
        project.store.answer(first.id, 0, "ann")
    rows[0] = {**rows[0], "text": rows[0]["text"] + " (edited)"}
    write_csv(table, rows)
    with LabellingProject.open(tmp_path / "proj") as project:
        assert project.changes.changed == [rows[0]["id"]] and project.changes.labelled_changed == 1
        assert project.store.labels() == {}  # the edited text is not labelled yet


def test_every_label_is_exported_beside_its_own_text_before_and_after_a_rescan(tmp_path, capsys):
    # with an id column, a CLI export (the app still running on the old scan) wrote an edited row's
    # label beside its new text (matched by id alone), and after a restart the labels of deleted and
    # edited rows were left out of every export without a word (4 labels, then 2)
    rows = gloss_rows(3)
    table = write_csv(tmp_path / "t.csv", rows)
    with LabellingProject.create(tmp_path / "proj", text_config(table)) as project:
        labelled = [item for item in project.store.items() if item.key in {r["id"] for r in rows[:4]}]
        for item in labelled:
            project.store.answer(item.id, 1, "ann")
    edited, deleted = rows[0]["id"], rows[1]["id"]
    changed = [{**r, "text": r["text"] + " (edited)"} if r["id"] == edited else r for r in rows if r["id"] != deleted]
    write_csv(table, changed)
    text_of = {r["id"]: r["text"] for r in rows}

    def exported(fmt: str = "csv") -> tuple[dict[str, dict[str, str]], str]:
        out = tmp_path / f"out.{'csv' if fmt == 'csv' else 'json'}"
        assert main(["export", str(tmp_path / "proj"), "--format", fmt, "--out", str(out), "--overwrite"]) == 0
        captured = capsys.readouterr()
        if fmt == "labelstudio":
            tasks = json.loads(out.read_text())
            return {t["data"]["activebayes_key"]: t for t in tasks if t["annotations"]}, captured.err + captured.out
        with open(out, newline="", encoding="utf-8") as handle:
            return {r["key"]: r for r in csv.DictReader(handle) if r["label"]}, captured.err + captured.out

    before, said = exported()  # the store still holds the scan made before the edit
    assert set(before) == {r["id"] for r in rows[:4]} and "exported 4 label(s)" in said
    assert before[edited]["text"] == "" and before[deleted]["text"] == ""  # never the edited text
    assert all(before[key]["text"] == text_of[key] for key in (rows[2]["id"], rows[3]["id"]))
    assert "2 item(s) of the project are not rows of" in said
    with LabellingProject.open(tmp_path / "proj"):  # what a restart of the app does: rescan
        pass
    after, said = exported()
    assert {key: (r["label"], r["text"], r["present"]) for key, r in after.items()} == {
        key: (CLASSES[1], "" if key in (edited, deleted) else text_of[key],
              "false" if key in (edited, deleted) else "true") for key in before}
    assert "exported 4 label(s)" in said and "2 labelled item(s) are no longer rows of the table" in said
    assert "exported with present = false" in said
    tasks, said = exported("labelstudio")  # tasks are items to show: the gone ones are left out, and said so
    assert set(tasks) == {rows[2]["id"], rows[3]["id"]} and "exported 2 label(s)" in said
    assert "left out of the Label Studio tasks" in said


def test_a_moved_table_is_given_again_at_its_new_place_and_keeps_every_label(tmp_path, capsys):
    # the table path is a fixed setting: a moved table used to leave the project stuck ("was created
    # with --table OLD"), the old path gone and the new one refused
    rows = gloss_rows(2)
    table = write_csv(tmp_path / "t.csv", rows)
    with LabellingProject.create(tmp_path / "proj", text_config(table)) as project:
        for item in project.store.items()[:3]:
            project.store.answer(item.id, 2, "ann")
        before = _labels_by_text(project)
    other = write_csv(tmp_path / "other.csv", rows)
    with pytest.raises(ProjectError, match="was created with --table"):  # the old one is still there: no move
        LabellingProject.open(tmp_path / "proj", settings={"table": str(other)})
    moved = tmp_path / "elsewhere" / "moved.csv"
    moved.parent.mkdir()
    table.rename(moved)
    with LabellingProject.open(tmp_path / "proj", settings={"table": str(moved)}) as project:
        assert project.config.table == str(moved.resolve())
        assert project.changes.summary() == [f"the table moved: {table} -> {moved.resolve()} (now stored)"]
        assert _labels_by_text(project) == before
    with LabellingProject.open(tmp_path / "proj") as project:  # stored: no flag needed any more
        assert not project.changes.any and project.config.table == str(moved.resolve())
    assert main(["export", str(tmp_path / "proj"), "--out", str(tmp_path / "e.csv")]) == 0
    assert "exported 3 label(s)" in capsys.readouterr().out


def test_a_feature_table_shows_rows_as_fields(tmp_path):
    rows = [{"name": f"row{i}", "size": str(i), "colour": "red" if i % 2 else "blue"} for i in range(6)]
    table = write_csv(tmp_path / "rows.csv", rows, columns=("name", "size", "colour"))
    config = ProjectConfig(table=str(table), feature_columns="size,colour", id_column="name", classes=("a", "b"),
                           batch_size=2, num_samples=4, eval_samples=2, cold_start=None)
    with LabellingProject.create(tmp_path / "proj", config) as project:
        assert project.item_kind == "row" and project.dataset.inputs.shape == (6, 3)
        item = next(i for i in project.store.items() if i.key == "row3")
        assert project.item_content(item.id) == {"kind": "row", "fields": [["size", "3"], ["colour", "red"]]}
        project.store.answer(item.id, 1, "ann")
        exported = {r["key"]: r for r in json.loads(project.export_text("json"))}
        assert exported["row3"]["fields"] == {"size": "3", "colour": "red"} and exported["row3"]["label"] == "b"
        assert '"size": "3"' in project.export_text("csv").replace('""', '"')


def test_label_flags_take_every_other_column_and_impute_missing_cells(tmp_path):
    from activebayes.cli import _open_project
    from activebayes.data.table import row_content_sha256

    rows = [{"name": f"row{i}", "size": "" if i == 2 else str(i), "colour": "red" if i % 2 else "blue"}
            for i in range(6)]
    table = write_csv(tmp_path / "rows.csv", rows, columns=("name", "size", "colour"))
    settings = {"table": str(table), "feature_columns": "*", "id_column": "name", "classes": "a,b", "batch_size": 2,
                "num_samples": 4, "cold_start": "none"}
    with pytest.raises(ActiveBayesError, match="row 3, column 'size': missing value.*--missing impute"):
        _open_project(str(tmp_path / "strict"), dict(settings), progress=False)
    assert not (tmp_path / "strict").exists()
    with _open_project(str(tmp_path / "proj"), {**settings, "missing": "impute"}, progress=False) as project:
        # '*' is pinned to the columns when the project is created
        assert project.config.feature_columns == ("size", "colour")
        assert project.config.table_options == {"missing": "impute"}
        assert project.dataset.inputs.shape == (6, 3)  # size, and colour one-hot
        item = next(i for i in project.store.items() if i.key == "row2")
        assert project.item_content(item.id) == {"kind": "row", "fields": [["size", ""], ["colour", "blue"]]}
        # identity: each row's content hash is over the columns '*' stands for, not over a column named '*'
        hashes = {i.key: i.sha256 for i in project.store.items()}
        assert len(set(hashes.values())) == 6
        assert hashes["row2"] == row_content_sha256(rows[2], ["size", "colour"])


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("case, expected", [
    ("no-column", "'text' is not a column of the table"),
    ("empty", "row 5, column 'text': empty text"),
    ("twice", "row 6, column 'id': id"),
    ("latin", "line 3 is not valid UTF-8"),
])
def test_bad_tables_are_one_line_errors_naming_the_row_or_column(tmp_path, capsys, case, expected):
    good = gloss_rows(3)
    if case == "no-column":
        table = write_csv(tmp_path / "t.csv", [{"id": r["id"], "y": r["y"]} for r in good], columns=("id", "y"))
    elif case == "empty":
        rows = [dict(r) for r in good]
        rows[4]["text"] = ""
        table = write_csv(tmp_path / "t.csv", rows)
    elif case == "twice":
        rows = [dict(r) for r in good]
        rows[5]["id"] = rows[1]["id"]
        table = write_csv(tmp_path / "t.csv", rows)
    else:
        table = tmp_path / "t.csv"
        table.write_bytes("id,text\n1,tea\n2,caf\xe9 au lait\n".encode("latin-1"))
    with pytest.raises(ActiveBayesError) as raised:
        LabellingProject.create(tmp_path / "proj", text_config(table))
    assert expected in str(raised.value) and "\n" not in str(raised.value)
    assert not (tmp_path / "proj").exists()  # all or nothing
    # the command line says it as one line, no traceback
    code = main(["label", str(tmp_path / "cli"), "--table", str(table), "--text-column", "text", "--id-column", "id",
                 "--classes", ",".join(CLASSES), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and expected in err and err.count("\n") == 1
    assert "Traceback" not in err and not (tmp_path / "cli").exists()


def test_label_refuses_a_missing_table_file_and_table_flags_without_a_table(tmp_path, capsys):
    pytest.importorskip("starlette")  # without the app extra, label says so before anything else
    assert main(["label", str(tmp_path / "p"), "--table", str(tmp_path / "nope.csv"), "--text-column", "text",
                 "--classes", "a,b", "-q"]) == 1
    assert capsys.readouterr().err == f"error: --table: no such file {tmp_path / 'nope.csv'}\n"
    assert main(["label", str(tmp_path / "p"), "--dataset", "digits", "--text-column", "text", "-q"]) == 1
    assert "--text-column: only with a table (--table FILE)" in capsys.readouterr().err


def test_project_config_checks_its_table_settings(tmp_path):
    table = write_csv(tmp_path / "t.csv", gloss_rows(2))
    with pytest.raises(ProjectError, match="exactly one of --dataset NAME, --images FOLDER or --table FILE, got "
                                           "--dataset and --table"):
        ProjectConfig(dataset="digits", table=str(table), text_column="text", classes=CLASSES)
    with pytest.raises(ProjectError, match="--classes is required with --table"):
        ProjectConfig(table=str(table), text_column="text")
    with pytest.raises(ActiveBayesError, match="text_column .* and / or feature_columns"):
        ProjectConfig(table=str(table), classes=CLASSES)
    with pytest.raises(ProjectError, match="--strategy 'margin' reads single-label predictions"):
        ProjectConfig(table=str(table), text_column="text", classes=CLASSES, strategy="margin",
                      table_options={"multilabel": True})
    with pytest.raises(ProjectError, match="--cold-start 'least_confidence' reads single-label predictions"):
        ProjectConfig(table=str(table), text_column="text", classes=CLASSES, cold_start="least_confidence",
                      table_options={"multilabel": True})
    # the converse, on a project that takes one answer per item, text, images or a dataset alike
    for source in ({"table": str(table), "text_column": "text", "classes": CLASSES},):
        with pytest.raises(ProjectError, match="--strategy 'multilabel_bald' is for multi-label projects"):
            ProjectConfig(**source, strategy="multilabel_bald")
        with pytest.raises(ProjectError, match="--cold-start 'multilabel_badge' is for multi-label projects"):
            ProjectConfig(**source, cold_start="multilabel_badge")
    # a built-in dataset's kind is known once it is loaded (mnist_pairs is multi-label): refused
    # when the project is created, before anything is written
    for setting in ({"strategy": "multilabel_bald"}, {"cold_start": "multilabel_badge"}):
        config = ProjectConfig(dataset="digits", **setting)
        flag, value = next(iter(setting.items()))
        with pytest.raises(ProjectError, match=f"--{flag.replace('_', '-')} '{value}' is for multi-label projects"):
            LabellingProject.create(tmp_path / "digits", config)
        assert not (tmp_path / "digits").exists()
    # bald means multilabel_bald on a multi-label project (the loop's counterpart)
    assert ProjectConfig(table=str(table), text_column="text", classes=CLASSES, strategy="bald",
                         table_options={"multilabel": True}).strategy == "bald"
    with pytest.raises(ProjectError, match="table_options 'label_column'"):
        ProjectConfig(table=str(table), text_column="text", classes=CLASSES, table_options={"label_column": "y"})
    config = ProjectConfig(table=str(table), text_column="text", classes=CLASSES, feature_columns="a, b")
    assert config.feature_columns == ("a", "b") and ProjectConfig.from_dict(config.to_dict()) == config


@pytest.mark.parametrize("args, expected", [
    (["--strategy", "multilabel_bald"], "--strategy 'multilabel_bald' is for multi-label projects"),
    (["--model", "batchbald_cnn"], "--model 'batchbald_cnn' needs images"),
    (["--id-column", "id", "--feature-columns", "*"], "--feature-columns '*' found no column besides the text and id"),
])
def test_settings_that_do_not_fit_the_items_leave_no_project(tmp_path, capsys, args, expected):
    """Refused before the project exists: a folder left behind could never be opened with other settings."""
    rows = gloss_rows(2)
    columns = ("id", "text") if "*" in args else ("id", "text", "y")  # '*' with nothing else to take
    table = write_csv(tmp_path / "t.csv", [{c: r[c] for c in columns} for r in rows], columns=columns)
    code = main(["query", str(tmp_path / "proj"), "--table", str(table), "--text-column", "text",
                 "--classes", ",".join(CLASSES), *args, "-q"])
    err = capsys.readouterr().err
    assert code == 1 and expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_label_column_in_the_file_is_ignored(tmp_path):
    rows = gloss_rows(3)
    rows[0]["y"] = "not-a-class"  # would be an error if the file's labels were read
    table = write_csv(tmp_path / "t.csv", rows)
    with LabellingProject.create(tmp_path / "proj", text_config(table)) as project:
        assert project.store.labels() == {} and project.dataset.targets is None


def test_reopening_with_another_encoder_is_refused_naming_both(tmp_path):
    table = write_csv(tmp_path / "t.csv", gloss_rows(3))
    LabellingProject.create(tmp_path / "proj", text_config(table)).close()
    with pytest.raises(ProjectError, match=r"--encoder \(not set\) \(this command: --encoder hashing\)"):
        LabellingProject.open(tmp_path / "proj", settings={"encoder": "hashing"})
    LabellingProject.open(tmp_path / "proj", settings={"table": str(table), "text_column": "text"}).close()


# --------------------------------------------------------------------------- settings: LoopConfig's, once

#: what the code before the settings had one home wrote (``ProjectConfig.to_dict()`` as the label
#: store keeps it, JSON) and the loop config it ran with: a default digits project (1797 items) ...
OLD_DEFAULT_STORED = {
    "dataset": "digits", "images": None, "classes": None, "data_dir": None, "strategy": "badge",
    "cold_start": "typicality", "model": "auto", "posterior": "mc_dropout", "batch_size": 10, "num_samples": 100,
    "eval_samples": 20, "seed": 0, "fit_options": {}, "lookahead": 100, "lease_seconds": 300.0,
    "audit_fraction": 0.0, "stop_when": [], "round_seeds": "per_round", "table": None, "text_column": None,
    "feature_columns": [], "id_column": None, "table_options": {}}
OLD_DEFAULT_LOOP = {
    "dataset": "digits", "data_dir": None, "dataset_options": {}, "download": False, "strategy": "badge",
    "model": "auto", "ensemble_size": None, "seed": 0, "initial": "empty", "initial_size": 0, "validation_size": 0,
    "batch_size": 10, "budget": 1797, "cost_budget": None, "costs_file": None, "num_samples": 100,
    "eval_samples": 20, "mean_samples": 20, "pool_subsample": None, "target_accuracy": None, "stop_when": (),
    "stop_set_size": 1000, "audit_fraction": 0.0, "plateau_patience": None, "plateau_min_delta": 0.0,
    "warm_start": False, "round_seeds": "per_round", "evaluate_test": True, "fit_options": {}, "model_options": {},
    "acquisition_options": {}, "cold_start": "typicality", "cold_start_labels": None, "training": "data",
    "representation": "none", "representation_options": {}, "posterior": "mc_dropout", "table": None,
    "text_column": None, "feature_columns": (), "label_column": None, "id_column": None, "table_options": {},
    "predict_batch_size": 512, "checkpoints": False, "device": None,
    "threads": None}  # a runtime setting added since (a labelling project's rounds use the app's count)
#: ... and a table project with every loop setting given (3 items)
OLD_TABLE_STORED = {
    "dataset": None, "images": None, "classes": ["noun", "verb"], "data_dir": None, "strategy": "bald",
    "cold_start": None, "model": "auto", "posterior": "ensemble", "batch_size": 4, "num_samples": 8,
    "eval_samples": 4, "seed": 3, "fit_options": {"max_epochs": 2}, "lookahead": 100, "lease_seconds": 300.0,
    "audit_fraction": 0.25, "stop_when": ["remaining_change"], "round_seeds": "shared",
    "table": "/data/glosses.csv", "text_column": "text", "feature_columns": [], "id_column": None,
    "table_options": {"encoder": "hashing"}}
OLD_TABLE_LOOP = {
    **OLD_DEFAULT_LOOP, "dataset": "table", "strategy": "bald", "seed": 3, "batch_size": 3, "budget": 3,
    "num_samples": 8, "eval_samples": 4, "stop_when": ("remaining_change",), "audit_fraction": 0.25,
    "round_seeds": "shared", "evaluate_test": False, "fit_options": {"max_epochs": 2}, "cold_start": None,
    "posterior": "ensemble", "table": "/data/glosses.csv", "text_column": "text",
    "table_options": {"encoder": "hashing", "classes": ["noun", "verb"]}}


def _default(f: dataclasses.Field):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def test_a_projects_loop_settings_default_to_the_loops():
    """Each setting a project shares with LoopConfig has LoopConfig's default, but the commented
    deliberate differences (``DIFFERENT_DEFAULTS``), each of which does differ."""
    loop = {f.name: f for f in dataclasses.fields(LoopConfig)}
    shared = {f.name: f for f in dataclasses.fields(ProjectConfig) if f.name in loop}
    assert set(shared) == {"dataset", "data_dir", *LOOP_SETTINGS, *TABLE_SETTINGS}  # a new one is placed
    for name, f in shared.items():
        expected = DIFFERENT_DEFAULTS[name] if name in DIFFERENT_DEFAULTS else _default(loop[name])
        assert _default(f) == expected, f"ProjectConfig.{name}'s default is not LoopConfig's"
    assert all(_default(loop[name]) != value for name, value in DIFFERENT_DEFAULTS.items())


@pytest.mark.parametrize("name, value", [
    ("dataset", "nope"), ("strategy", "nope"), ("cold_start", "nope"), ("model", "nope"), ("posterior", "nope"),
    ("batch_size", 0), ("batch_size", "10"), ("num_samples", 0), ("eval_samples", 0), ("seed", -1),
    ("fit_options", 3), ("audit_fraction", 1.5), ("stop_when", "nope"), ("round_seeds", "nope"),
    ("text_column", None), ("table_options", {"nope": 1}),
])  # data_dir, table, feature_columns and id_column: any name will do until the items are read
def test_an_invalid_loop_setting_is_an_error_naming_it(tmp_path, name, value):
    """LoopConfig's checks (and the loop's of the names), not copies of them."""
    source = ({"table": str(tmp_path / "t.csv"), "text_column": "text", "classes": CLASSES}
              if name in TABLE_SETTINGS else {"dataset": "digits"})
    with pytest.raises(ActiveBayesError, match=name) as info:
        ProjectConfig(**{**source, name: value})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("args, expected", [
    (["--strategy", "nope"], "error: --strategy: unknown strategy 'nope'"),
    (["--cold-start", "nope"], "error: --cold-start: unknown strategy 'nope'"),
    (["--model", "nope"], "error: --model: unknown model 'nope'"),  # as `run` words it
    (["--posterior", "nope"], "error: unknown --posterior 'nope'"),
    (["--round-seeds", "nope"], "error: unknown --round-seeds 'nope'"),
    (["--batch-size", "0"], "error: --batch-size must be >= 1, got 0"),
    (["--audit-fraction", "1.5"], "error: --audit-fraction must be in [0, 1), got 1.5"),
])
def test_label_shows_an_invalid_loop_setting_as_one_line_naming_its_flag(tmp_path, capsys, monkeypatch, args,
                                                                        expected):
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    import activebayes.app

    monkeypatch.setattr(activebayes.app, "serve", lambda *a, **k: pytest.fail("a bad setting was served"))
    assert main(["label", str(tmp_path / "p"), "--dataset", "digits", *args, "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "p").exists()


def test_a_project_takes_the_loops_strategy_names_aliases_too(tmp_path):
    """typiclust is typicality, as in ``activebayes run``; a multi-label project takes it too."""
    assert ProjectConfig(dataset="digits", cold_start="typiclust").loop_config(
        9, name="digits", evaluate_test=False).cold_start == "typiclust"
    ProjectConfig(table=str(tmp_path / "t.csv"), text_column="text", classes=CLASSES, cold_start="typiclust",
                  table_options={"multilabel": True})


def test_a_default_projects_loop_config_is_the_one_before():
    config = ProjectConfig(dataset="digits")
    assert json.loads(json.dumps(config.to_dict())) == OLD_DEFAULT_STORED
    loop = config.loop_config(1797, name="digits", evaluate_test=True).to_dict()
    assert list(loop) == list(OLD_DEFAULT_LOOP)
    for name, value in OLD_DEFAULT_LOOP.items():
        assert loop[name] == value, name


@pytest.mark.parametrize("stored, n_items, name, evaluate_test, expected", [
    (OLD_DEFAULT_STORED, 1797, "digits", True, OLD_DEFAULT_LOOP),
    (OLD_TABLE_STORED, 3, "table", False, OLD_TABLE_LOOP),
])
def test_a_stored_projects_settings_open_as_before(stored, n_items, name, evaluate_test, expected):
    """The stored form is unchanged: old settings open to the same settings and the same loop config."""
    config = ProjectConfig.from_dict(stored)
    assert json.loads(json.dumps(config.to_dict())) == stored
    assert config.loop_config(n_items, name=name, evaluate_test=evaluate_test).to_dict() == expected


def test_a_new_project_stores_its_settings_as_before(tmp_path):
    with LabellingProject.create(tmp_path / "p", ProjectConfig(dataset="digits")) as project:
        assert project.store.meta("project") == OLD_DEFAULT_STORED
    with LabellingProject.open(tmp_path / "p") as project:
        assert project.config == ProjectConfig.from_dict(OLD_DEFAULT_STORED)


# --------------------------------------------------------------------------- the store


def test_a_version_1_store_opens_and_is_migrated(tmp_path):
    path = tmp_path / "labels.sqlite"
    store = LabelStore.create(path, classes=["cat", "dog"])
    store.sync_items([ItemFile("a.png", "aa" * 32), ItemFile("b.png", "bb" * 32)])
    store.answer(1, 1, "ann")
    store.close()
    db = sqlite3.connect(path)  # what activebayes wrote before multi-label stores: version 1, no "multilabel"
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.execute("DELETE FROM meta WHERE key = 'multilabel'")
    db.commit()
    db.close()
    with LabelStore.open(path) as store:
        assert store.meta("schema_version") == SCHEMA_VERSION == 2 and store.multilabel is False
        assert store.meta("multilabel") is False and store.labels() == {1: 1}
        store.check_labels()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(LabelStoreError, match="schema version 3, this activebayes reads version 2"):
        LabelStore.open(path)


def test_a_store_opened_read_only_reads_and_never_writes(tmp_path):
    """``read_only`` (what `export` opens): every label read, a write refused by SQLite itself
    (root too), and a version 1 store read as it is, not migrated."""
    path = tmp_path / "labels.sqlite"
    with LabelStore.create(path, classes=["cat", "dog"]) as store:
        store.sync_items([ItemFile("a.png", "aa" * 32), ItemFile("b.png", "bb" * 32)])
        store.answer(1, 1, "ann")
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    db.execute("DELETE FROM meta WHERE key = 'multilabel'")
    db.commit()
    db.close()
    content = path.read_bytes()
    with LabelStore.open(path, read_only=True) as store:
        assert store.labels() == {1: 1} and store.multilabel is False and store.meta("schema_version") == 1
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.answer(2, 0, "ann")
    assert path.read_bytes() == content


def test_a_multilabel_store_keeps_sets_as_bitmasks(tmp_path):
    store = LabelStore.create(tmp_path / "labels.sqlite", classes=["a", "b", "c"], multilabel=True)
    store.sync_items([ItemFile("x", "aa" * 32), ItemFile("y", "bb" * 32)])
    with pytest.raises(LabelStoreError, match="non-empty set of classes, as a bitmask 1 .. 7"):
        store.answer(1, 0, "ann")
    with pytest.raises(LabelStoreError, match="got 8"):
        store.answer(1, 8, "ann")
    store.answer(1, 0b101, "ann")
    store.answer(2, 0b100, "ann")
    assert store.labels() == {1: 5, 2: 4} and store.class_counts() == [1, 0, 2]
    assert [(r["label"], r["labels"]) for r in store.export_rows()] == [("a|c", ["a", "c"]), ("c", ["c"])]
    with pytest.raises(LabelStoreError, match="at most 62 classes"):
        LabelStore.create(tmp_path / "big.sqlite", classes=[f"c{i}" for i in range(63)], multilabel=True)
    store.close()


# --------------------------------------------------------------------------- the file round trip


def test_query_files_of_a_text_project_carry_the_text_and_multilabel_sets_import(tmp_path):
    rows = gloss_rows(4)
    by_id = {row["id"]: row for row in rows}
    table = write_csv(tmp_path / "t.csv", rows)
    config = text_config(table, table_options={"multilabel": True})
    with LabellingProject.create(tmp_path / "proj", config) as project:
        query = project.query()
        with open(query.path, newline="", encoding="utf-8") as handle:
            written = list(csv.DictReader(handle))
        # a text has no file or picture: no empty path and thumbnail columns
        assert list(written[0]) == ["round", "rank", "item", "key", "sha256", "score", "text", "label"]
        assert all(r["text"] == by_id[project.store.item(int(r["item"])).key]["text"] for r in written)
        # each row names the item as the person knows it: the table's own row id
        assert [r["key"] for r in written] == [project.store.item(int(r["item"])).key for r in written]
        assert all(r["key"] in by_id for r in written)
        sets = ["food|plant", "food", "animal|plant", "plant"]  # "food" alone is class 1: the set {food}
        for row, value in zip(written, sets + [""] * len(written), strict=False):
            row["label"] = value
        bad = [dict(r) for r in written]
        bad[0]["label"] = "food|fish"
        write_csv(tmp_path / "bad.csv", bad, columns=list(written[0]))
        with pytest.raises(AnswerFileError) as raised:
            project.import_answers(tmp_path / "bad.csv", allow_partial=True)
        assert "label 'fish'" in str(raised.value.problems[0].text({}))
        write_csv(tmp_path / "answers.csv", written, columns=list(written[0]))
        project.import_answers(tmp_path / "answers.csv", allow_partial=True)
        stored = {int(r["item"]): project.store.labels().get(int(r["item"])) for r in written[:4]}
        assert list(stored.values()) == [0b110, 0b010, 0b101, 0b100]


def test_text_features_are_encoded_once_and_cached_in_the_project(tmp_path, monkeypatch):
    """The server and the trainer open the project separately: the second open reads the
    project's cached features instead of encoding every text again (a transformer encoder
    takes minutes on a big table)."""
    from activebayes.data import text as text_module

    rows = gloss_rows(6)
    table = write_csv(tmp_path / "glosses.csv", rows)
    calls = []
    original = text_module.TfidfEncoder.fit_transform
    monkeypatch.setattr(text_module.TfidfEncoder, "fit_transform",
                        lambda self, texts: calls.append(len(texts)) or original(self, texts))
    with LabellingProject.create(tmp_path / "proj", text_config(table)) as project:
        features = project.dataset.inputs[:].clone()
    assert calls == [len(rows)] and list((tmp_path / "proj" / "cache").glob("embeddings-*.npy"))
    with LabellingProject.open(tmp_path / "proj") as project:
        assert project.dataset.inputs[:].equal(features)
    assert calls == [len(rows)]  # read from the cache, not encoded again


def test_an_item_reads_as_its_row_in_a_project_opened_without_a_rescan(tmp_path):
    """The server and the trainer open a project without a rescan: the rows are read on the
    first item asked for, not left unread (the item would have read as no content)."""
    rows = gloss_rows(3)
    table = write_csv(tmp_path / "t.csv", rows)
    LabellingProject.create(tmp_path / "proj", text_config(table)).close()
    with LabellingProject.open(tmp_path / "proj", rescan=False) as project:
        assert project.item_kind == "text"
        item = project.store.items()[0]
        by_id = {row["id"]: row["text"] for row in rows}
        assert project.item_content(item.id) == {"kind": "text", "text": by_id[item.key]}


def test_the_export_command_writes_what_the_dashboard_exports(tmp_path, capsys):
    table = write_csv(tmp_path / "t.csv", gloss_rows(2))
    with LabellingProject.create(tmp_path / "proj", text_config(table)) as project:
        first = project.store.items()[0].id
        project.store.answer(first, 1, "ann")
        expected = {fmt: project.export_text(fmt) for fmt in ("csv", "json", "labelstudio")}
    assert main(["export", str(tmp_path / "proj")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("exported 1 label(s) of ") and out.strip().endswith("exports/labels.csv")
    assert (tmp_path / "proj" / "exports" / "labels.csv").read_text() == expected["csv"]
    for fmt in ("json", "labelstudio"):
        assert main(["export", str(tmp_path / "proj"), "--format", fmt, "--out", str(tmp_path / f"{fmt}.json")]) == 0
        assert (tmp_path / f"{fmt}.json").read_text() == expected[fmt]
    # without --format, --out's ending chooses; a format the ending contradicts is refused, nothing written
    assert main(["export", str(tmp_path / "proj"), "--out", str(tmp_path / "by_name.json")]) == 0
    assert (tmp_path / "by_name.json").read_text() == expected["json"]
    capsys.readouterr()
    for fmt, name in (("csv", "q.json"), ("json", "q.csv"), ("labelstudio", "q.csv")):
        assert main(["export", str(tmp_path / "proj"), "--format", fmt, "--out", str(tmp_path / name)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: --format {fmt} writes ") and "leave --format out" in err, err
        assert not (tmp_path / name).exists()
    assert main(["export", str(tmp_path / "nothing")]) == 1
    assert "is not a labelling project" in capsys.readouterr().err


def _chmod_tree(root: Path, folders: int, files: int) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(folders if path.is_dir() else files)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_project_exports_and_nothing_in_it_is_written(tmp_path, capsys):
    """`export` opens the store read-only: a read-only project exports what it exported before,
    answers still in the write-ahead log of a store that is open are read too, and a log
    that cannot be read there is a one-line error, never silently left out."""
    table = write_csv(tmp_path / "t.csv", gloss_rows(2))
    project = tmp_path / "proj"
    with LabellingProject.create(project, text_config(table)) as labelling:
        for k, item in enumerate(labelling.store.items()[:3]):
            labelling.store.answer(item.id, k % 3, "ann")
        before = labelling.export(tmp_path / "before.csv").read_text()
    files = {p: p.stat().st_mtime_ns for p in [project, *project.rglob("*")]}
    after = tmp_path / "after.csv"
    _chmod_tree(project, 0o500, 0o400)
    try:
        assert main(["export", str(project), "--out", str(after)]) == 0, capsys.readouterr().err
        assert after.read_text() == before and "exported 3 label(s)" in capsys.readouterr().out
        assert {p: p.stat().st_mtime_ns for p in [project, *project.rglob("*")]} == files  # nothing written
        assert main(["export", str(project)]) == 1  # the default file is inside the project
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and "exports" in err[0], err
    finally:
        _chmod_tree(project, 0o700, 0o600)

    # a server's answer, saved in the write-ahead log and not yet in the store file
    with LabellingProject.open(project, rescan=False) as labelling:
        labelling.store.answer(labelling.store.items()[3].id, 2, "ann")
        expected = labelling.export_text("csv")
        copy = tmp_path / "copy"  # a copy without the log's index (-shm): the log cannot be read read-only
        shutil.copytree(project, copy, ignore=shutil.ignore_patterns("*-shm"))
        assert (copy / "labels.sqlite-wal").stat().st_size > 0
        _chmod_tree(project, 0o500, 0o400)
        _chmod_tree(copy, 0o500, 0o400)
        try:
            assert main(["export", str(project), "--out", str(after)]) == 0, capsys.readouterr().err
            assert after.read_text() == expected != before
            capsys.readouterr()
            assert main(["export", str(copy), "--out", str(after)]) == 1
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "labels.sqlite-wal holds answers not yet in the store" in err[0], err
        finally:
            _chmod_tree(project, 0o700, 0o600)
            _chmod_tree(copy, 0o700, 0o600)
    assert main(["export", str(copy), "--out", str(after)]) == 0  # the same copy, writable
    assert after.read_text() == expected


def test_export_after_the_table_was_edited_or_moved_keeps_every_label(tmp_path, capsys):
    # export matches the stored items to the table's rows by key, not through the last scan: it
    # used to refuse ("changed while the project was open") until `label` rescanned the table
    rows = gloss_rows(2)
    table = write_csv(tmp_path / "t.csv", rows)
    with LabellingProject.create(tmp_path / "proj", text_config(table, id_column=None)) as project:
        labelled = project.store.items()[:3]
        for item in labelled:
            project.store.answer(item.id, 0, "ann")
        texts = [project.item_content(item.id)["text"] for item in labelled]
    edited = [dict(row) for row in rows][::-1]
    next(row for row in edited if row["text"] == texts[0])["text"] += " (edited)"
    edited.insert(1, {"id": "new", "text": "a row added later", "y": rows[0]["y"]})
    write_csv(table, edited)

    def exported(name: str) -> tuple[list[dict[str, str]], str]:
        assert main(["export", str(tmp_path / "proj"), "--out", str(tmp_path / name)]) == 0
        with open(tmp_path / name, newline="", encoding="utf-8") as handle:
            return [row for row in csv.DictReader(handle) if row["label"]], capsys.readouterr().err

    after_edit, err = exported("after_edit.csv")
    assert "1 item(s) of the project are not rows of" in err and "their labels are exported" in err
    assert [row["label"] for row in after_edit] == [CLASSES[0]] * 3
    assert [row["text"] for row in after_edit] == ["", texts[1], texts[2]]
    table.rename(tmp_path / "moved.csv")
    after_move, err = exported("after_move.csv")
    assert "the export's text / fields columns are empty" in err and "no such file" in err
    assert [(row["item"], row["label"], row["text"]) for row in after_move] == [
        (row["item"], row["label"], "") for row in after_edit]
