"""Progress bars: on a terminal unless --quiet, never into a log, and also from steps deep inside a call."""

from __future__ import annotations

import csv
import random
import sys

import pytest

from activebayes import _progress
from activebayes.cli import main
from activebayes.experiment import run_experiment
from activebayes.loop import ActiveLearningLoop, LoopConfig
from tests.conftest import FAST_LOOP

FAST = ["--initial-size", "6", "--validation-size", "24", "--batch-size", "6", "--budget", "12", "--num-samples", "4",
        "--eval-samples", "4", "--max-epochs", "2", "--strategy", "random"]


def _texts(path):
    rng = random.Random(0)
    words = {"sport": ["goal", "match", "team", "score"], "science": ["atom", "cell", "lab", "theory"]}
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "text", "label"])
        for i in range(80):
            label = "sport" if i % 2 else "science"
            writer.writerow([f"t{i}", " ".join(rng.choice(words[label]) for _ in range(6)), label])
    return path


def _like_a_terminal(monkeypatch):
    """The captured stderr answers isatty() like a terminal's (set in the test body, where capture is active)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_shown_follows_the_argument_then_the_process_default_then_the_terminal(monkeypatch):
    monkeypatch.setattr(_progress, "_stderr_is_terminal", lambda: True)
    assert _progress.shown() is True and _progress.shown(False) is False
    with _progress.default(False):
        assert _progress.shown() is False and _progress.shown(True) is True
        with _progress.default(None):
            assert _progress.shown() is True
        assert _progress.shown() is False
    monkeypatch.setattr(_progress, "_stderr_is_terminal", lambda: False)
    assert _progress.shown() is False and _progress.for_command(False) is False


def test_quiet_silences_the_text_encoder_on_a_terminal(capsys, tmp_path, monkeypatch):
    _like_a_terminal(monkeypatch)
    monkeypatch.setenv("ACTIVEBAYES_CACHE_DIR", str(tmp_path / "cache"))  # the features are computed, not read
    table = _texts(tmp_path / "texts.csv")
    args = ["run", "--table", str(table), "--text-column", "text", "--label-column", "label", "--id-column", "id",
            "--test-size", "20", *FAST]
    assert main([*args, "--out", str(tmp_path / "loud")]) == 0
    assert "TF-IDF" in capsys.readouterr().err
    monkeypatch.setenv("ACTIVEBAYES_CACHE_DIR", str(tmp_path / "cache-2"))
    assert main([*args, "-q", "--out", str(tmp_path / "quiet")]) == 0
    assert capsys.readouterr().err == ""


def test_no_bars_are_written_when_stderr_is_not_a_terminal(capsys, tmp_path):
    assert not sys.stderr.isatty()
    assert main(["run", "--dataset", "digits", *FAST, "--out", str(tmp_path / "run")]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err and "\x1b[A" not in captured.err and "round" not in captured.err
    assert "run:" in captured.out  # the result lines still come


def test_the_loop_trains_its_representation_with_the_process_progress(monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def fake(*args, progress=None, **kwargs):
        seen["progress"] = progress
        raise Stop

    monkeypatch.setattr("activebayes.loop.train_or_load_representation", fake)
    config = LoopConfig(strategy="random", representation="self-supervised", **{**FAST_LOOP, "budget": 30})
    for default in (True, False):
        with _progress.default(default), pytest.raises(Stop):
            ActiveLearningLoop(config)
        assert seen["progress"] is default


def test_progress_false_silences_the_steps_inside_a_run(monkeypatch, tmp_path):
    inside = []
    original = ActiveLearningLoop.__init__

    def spy(self, *args, **kwargs):
        inside.append(_progress.shown())
        original(self, *args, **kwargs)

    monkeypatch.setattr(_progress, "_stderr_is_terminal", lambda: True)
    monkeypatch.setattr(ActiveLearningLoop, "__init__", spy)
    run_experiment(LoopConfig(strategy="random", **FAST_LOOP), tmp_path / "quiet", progress=False, report=False)
    run_experiment(LoopConfig(strategy="random", **FAST_LOOP), tmp_path / "loud", progress=True, report=False)
    assert inside == [False, True]


def test_an_interrupted_budget_raise_says_to_resume_with_the_budget(monkeypatch, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--dataset", "digits", *FAST, "-q", "--out", str(out)]) == 0
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("activebayes.cli.resume_experiment", interrupted)
    with pytest.raises(SystemExit) as stopped:
        main(["resume", str(out), "--budget", "18", "-q"])
    assert stopped.value.code == 130
    assert f"resume with `activebayes resume {out} --budget 18`" in capsys.readouterr().err
