"""The report on directories that are corrupt, mixed, incomplete or multi-label: a one-line error
naming the file (or folder), or text that says what is missing or unfinished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from activebayes.records import LoopConfig
from activebayes.report import write_report
from activebayes.rundir import RunDirectory, RunDirectoryError, load_runs
from tests.report.test_report import _row, _section, _table, _text


def _copy(comparison_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "cmp"
    shutil.copytree(comparison_dir, copy)
    return copy


def _edit_rounds(run_dir: Path, edit) -> None:
    path = run_dir / "rounds.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    edit(rows)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _set(row: dict, key: str, value) -> None:
    row[key] = value


# --------------------------------------------------------------------------- B1, B2: round records


@pytest.mark.parametrize("edit, match", [
    (lambda rows: rows[1].pop("n_labelled"), "n_labelled is missing"),
    (lambda rows: _set(rows[1], "n_labelled", "abc"), r"n_labelled must be an integer, got 'abc' \(a string\)"),
    (lambda rows: _set(rows[1], "metrics", [1, 2]), r"metrics must be an object, got \[1, 2\] \(a list\)"),
    (lambda rows: _set(rows[1]["metrics"], "test_accuracy", "x"), r"metrics\['test_accuracy'\] must be a number"),
    (lambda rows: _set(rows[1], "class_counts", [1, 2]), "class_counts must have 10 classes as in the previous"),
    (lambda rows: _set(rows[1], "seconds", {"fit": "x"}), r"seconds\['fit'\] must be a number, got 'x'"),
    (lambda rows: _set(rows[1], "round", "1"), r"round must be an integer, got '1' \(a string\)"),
    (lambda rows: _set(rows[1]["metrics"], "test_accuracy", float("nan")),
     r"metrics\['test_accuracy'\] must be a number in \[0, 1\], got nan"),
    (lambda rows: _set(rows[2], "n_labelled", 5), r"n_labelled must be a count >= the previous round's \(30\), got 5"),
    (lambda rows: rows.__setitem__(1, [1]), "expected a JSON object, got a list"),
    (lambda rows: _set(rows[1], "labels", [float("nan")] + rows[1]["labels"][1:]),
     r"labels\[0\] must be a class id \(an integer >= 0\), got nan"),
    (lambda rows: _set(rows[1], "labels", ["seven"] + rows[1]["labels"][1:]), r"labels\[0\] must be a class id"),
    (lambda rows: _set(rows[1], "labels", rows[1]["labels"][1:]), r"labels must have one entry per acquired item"),
    (lambda rows: _set(rows[1], "acquired", [-3] + rows[1]["acquired"][1:]), r"acquired\[0\] must be an item index"),
    (lambda rows: _set(rows[1], "acquired", [rows[1]["acquired"][1]] + rows[1]["acquired"][1:]),
     r"acquired\[1\] repeats item \d+, acquired earlier in the same round"),
])
def test_a_round_record_with_wrong_types_is_named_by_file_and_line(comparison_dir, tmp_path, edit, match):
    copy = _copy(comparison_dir, tmp_path)
    _edit_rounds(copy / "random" / "seed_0", edit)
    line = 3 if match.endswith("got 5") else 2
    where = rf"{copy / 'random' / 'seed_0' / 'rounds.jsonl'}:{line} is not a valid round record: "
    with pytest.raises(RunDirectoryError, match=where + match):
        write_report(copy)


def test_a_rounds_file_that_is_not_utf8_is_named_by_file_and_line(comparison_dir, tmp_path):
    copy = _copy(comparison_dir, tmp_path)
    path = copy / "random" / "seed_0" / "rounds.jsonl"
    lines = path.read_bytes().count(b"\n")
    path.write_bytes(path.read_bytes() + b"\xff\xfe garbage\n")
    with pytest.raises(RunDirectoryError, match=rf"{path}:{lines + 1} is not UTF-8 text"):
        write_report(copy)


# --------------------------------------------------------------------------- A1: runs that do not belong


def test_a_folder_holding_another_seeds_run_is_refused(comparison_dir, tmp_path):
    copy = _copy(comparison_dir, tmp_path)
    shutil.rmtree(copy / "bald" / "seed_0")
    shutil.copytree(copy / "bald" / "seed_1", copy / "bald" / "seed_0")
    match = rf"{copy / 'bald' / 'seed_0'} does not hold the run comparison.json lists there \(seed: 1 in its"
    with pytest.raises(RunDirectoryError, match=match):
        write_report(copy)
    with pytest.raises(RunDirectoryError, match=match):  # Python's load_runs too: it would key it as seed 1
        load_runs(copy)


def test_a_run_with_another_config_is_refused_as_resume_refuses_it(comparison_dir, tmp_path):
    copy = _copy(comparison_dir, tmp_path)
    config_path = copy / "bald" / "seed_1" / "config.json"
    stored = json.loads(config_path.read_text())
    stored.pop("settings_sha256")  # as a config written by hand (or before fingerprints) has none
    config_path.write_text(json.dumps({**stored, "cold_start": "typicality"}))
    with pytest.raises(RunDirectoryError, match=r"bald/seed_1 does not hold the run comparison.json lists there "
                                                r"\(cold_start: 'typicality' in its config.json, None in"):
        write_report(copy)
    with pytest.raises(RunDirectoryError, match="cold_start: 'typicality' there"):  # the same check
        RunDirectory(copy / "bald" / "seed_1").check_config(LoopConfig.from_stored({**stored, "cold_start": None}))


# --------------------------------------------------------------------------- A4, A5, A7: what the tables say


def test_unfinished_runs_are_named_in_the_overview_and_the_aulc_table(comparison_dir, tmp_path, fast_figures):
    copy = _copy(comparison_dir, tmp_path)
    cut = RunDirectory(copy / "random" / "seed_0")
    cut.write_rounds(cut.read_rounds()[:1])
    cut.summary_path.unlink()
    page = write_report(copy).read_text()
    assert "Not finished: random seed 0 (20 labels so far)." in _text(_section(page, "overview"))
    aulc = _section(page, "aulc")
    assert _row(aulc, "random")["not finished"] == "seed 0 (20 labels)"
    assert _row(aulc, "bald")["not finished"] == "—"


def test_the_time_total_is_every_phase_as_in_the_overview(comparison_dir, tmp_path, fast_figures):
    copy = _copy(comparison_dir, tmp_path)
    _edit_rounds(copy / "bald" / "seed_0", lambda rows: [r["seconds"].update(signals=100.0) for r in rows])
    page = write_report(copy).read_text()
    overview = {(r["strategy"], r["seed"]): float(r["seconds"]) for r in _table(_section(page, "overview"))}
    row = _row(_section(page, "time"), "bald")
    assert float(row["signals"]) >= 150.0  # 3 rounds x 100 s in seed 0, mean over 2 seeds
    expected = (overview[("bald", "0")] + overview[("bald", "1")]) / 2
    assert float(row["total"]) == pytest.approx(expected, abs=0.06)


def test_runs_comparison_json_lists_that_are_missing_are_named(comparison_dir, tmp_path, fast_figures):
    copy = _copy(comparison_dir, tmp_path)
    shutil.rmtree(copy / "random")
    text = _text(_section(write_report(copy).read_text(), "overview"))
    assert "Comparison of 2 strategies (bald, random), 2 run(s)" in text
    assert "random seed 0 (random/seed_0); random seed 1 (random/seed_1). No run at all of random." in text
    for strategy in ("bald", "random"):
        shutil.rmtree(copy / strategy, ignore_errors=True)
    text = _text(_section(write_report(copy).read_text(), "overview"))
    assert "Comparison of 2 strategies (bald, random), 0 run(s)" in text and "4 run(s) that are not" in text


# --------------------------------------------------------------------------- A6: multi-label and table runs


def _as_multilabel(rows: list[dict]) -> None:
    """The records a multi-label run writes: micro-F1 as its headline, no confusion matrix, no ECE."""
    for row in rows:
        f1 = row["metrics"]["test_accuracy"]
        row["metrics"] = {"test_micro_f1": f1, "test_macro_f1": f1, "validation_micro_f1": f1}


def test_multilabel_and_table_runs_are_described_as_such(comparison_dir, tmp_path, fast_figures):
    copy = _copy(comparison_dir, tmp_path)
    table = tmp_path / "items.csv"
    table.write_text("text,label\na,0\n")
    as_table = {"dataset": "table", "table": str(table), "text_column": "text", "label_column": "label"}
    for run_dir in sorted(copy.glob("*/seed_*")):
        _edit_rounds(run_dir, _as_multilabel)
        config = json.loads((run_dir / "config.json").read_text())
        config.pop("settings_sha256")  # as a config written by hand (or before fingerprints) has none
        (run_dir / "config.json").write_text(json.dumps({**config, **as_table}))
    comparison = json.loads((copy / "comparison.json").read_text())
    comparison["base"].update(as_table)
    (copy / "comparison.json").write_text(json.dumps(comparison))
    page = write_report(copy, targets=(0.99,)).read_text()
    assert "No finished rounds yet" not in page
    assert "Not shown: a multi-label run has no confusion matrix" in _text(_section(page, "confusion"))
    calibration = _text(_section(page, "calibration"))
    assert "shown under Final metrics" not in calibration and "records no reliability bins nor ECE" in calibration
    stopping = _text(_section(page, "stopping"))
    assert "test accuracy" not in stopping and "test micro-F1 and each stopping signal" in stopping
    reach = _text(_section(page, "labels-to-reach"))
    assert "best micro-F1 of any seed" in reach and "best accuracy" not in reach
    acquired = _text(_section(page, "acquired"))
    assert "unknown dataset" not in acquired and "rows of a table, which the report does not show as pictures" in acquired


def test_an_output_that_is_not_a_report_is_kept(comparison_dir, tmp_path, fast_figures, capsys):
    """`report DIR --output notes.html` replaced whatever the file held; only a report is replaced now."""
    from activebayes.cli import main

    notes = tmp_path / "notes.html"
    notes.write_text("<html>my notes</html>", encoding="utf-8")
    assert main(["report", str(comparison_dir), "--output", str(notes)]) == 1
    assert capsys.readouterr().err == (f"error: --output: {notes} exists and is not a report this package "
                                       "wrote; it is kept: choose another file, or delete it first\n")
    assert notes.read_text(encoding="utf-8") == "<html>my notes</html>"
    report = tmp_path / "report.html"
    assert main(["report", str(comparison_dir), "--output", str(report)]) == 0
    first = report.stat().st_mtime_ns
    assert main(["report", str(comparison_dir), "--output", str(report)]) == 0  # a report: replaced
    assert report.stat().st_mtime_ns >= first
    with pytest.raises(ValueError, match=r"^output \(--output\): .* is not a report"):
        write_report(comparison_dir, output=notes)
