"""A run given its own dataset from Python: config.json still names the default dataset
(digits), which the report must not load in its place: it would show the digits' class
names and the digits at the acquired indices, another dataset's items."""

from __future__ import annotations

import torch

from activebayes.data import ArrayDataset
from activebayes.experiment import run_experiment
from activebayes.loop import ActiveLearningLoop
from activebayes.records import LoopConfig
from activebayes.report import _data, write_report
from tests.conftest import FAST_LOOP

CLASSES = tuple(f"kind-{c}" for c in "abcdefghij")


def _own_dataset(n: int = 200) -> ArrayDataset:
    """10 classes of 8x8 'images', each item a constant image of its class's grey level (c / 9):
    nothing like a digit, so a digit shown in its place is told apart."""
    generator = torch.Generator().manual_seed(0)
    targets_N = torch.arange(n) % 10
    noise = 0.01 * torch.randn(n, 1, 8, 8, generator=generator)
    inputs = (targets_N.view(n, 1, 1, 1) / 9.0 + noise).float()
    return ArrayDataset(inputs, targets_N, classes=CLASSES, name="grey-levels")


def _run(tmp_path, report: bool):
    data = _own_dataset()
    config = LoopConfig(**{**FAST_LOOP, "budget": 30, "cold_start": None})  # dataset="digits": its default
    run_experiment(config, tmp_path / "run", progress=False, report=report,
                   loop_factory=lambda c: ActiveLearningLoop(c, dataset=data.subset(torch.arange(150)),
                                                             test=data.subset(torch.arange(150, 200))))
    return data


def test_the_report_does_not_load_the_configs_default_dataset_in_place_of_the_runs_own(tmp_path):
    _run(tmp_path, report=False)
    report = _data.ReportData(tmp_path / "run")
    assert report.given_dataset is not None and "grey-levels" in report.given_dataset
    assert report.class_names(10) is None  # not the digits' "0".."9"
    note = report.class_names_note(10)
    assert "given their own dataset from Python" in note and "write_report(DIR, dataset=...)" in note
    try:
        report.thumbnails([0, 1])
    except _data.DatasetUnavailable as error:
        assert "given their own dataset" in str(error)
    else:
        raise AssertionError("the report loaded another dataset's items")
    page = write_report(tmp_path / "run", output=tmp_path / "plain.html", progress=False).read_text()
    assert "given their own dataset from Python" in page and "kind-a" not in page
    assert "dataset digits" not in page and "a dataset given from Python (ArrayDataset &#x27;grey-levels&#x27;" in page


def test_given_the_dataset_the_report_shows_its_names_and_items(tmp_path):
    data = _run(tmp_path, report=False)
    report = _data.ReportData(tmp_path / "run", dataset=data.subset(torch.arange(150)))
    assert report.class_names(10) == list(CLASSES)
    pixels_B_H_W = report.thumbnails([3, 7])  # per-image min-max of near-constant images: their noise
    assert pixels_B_H_W.shape == (2, 8, 8)
    page = write_report(tmp_path / "run", output=tmp_path / "own.html", progress=False,
                        dataset=data.subset(torch.arange(150))).read_text()
    assert "kind-a" in page and "given their own dataset" not in page
    assert "dataset grey-levels (given from Python)" in page and "dataset digits" not in page


def test_run_experiment_writes_the_report_with_the_runs_own_dataset(tmp_path):
    _run(tmp_path, report=True)
    page = (tmp_path / "run" / "report.html").read_text()
    assert "Classes are named as in the dataset." in page and "kind-a" in page


def test_resume_of_such_a_run_on_the_command_line_is_one_error_line_and_names_no_dataset(tmp_path, capsys):
    from activebayes.cli import main

    _run(tmp_path, report=False)
    capsys.readouterr()
    assert main(["resume", str(tmp_path / "run"), "--budget", "40"]) != 0
    out, err = capsys.readouterr()
    assert out == ""  # not "resume: ... on digits ...", a resume that does not start
    assert err.startswith("error: ") and err.count("\n") == 1 and "resume it from Python" in err
