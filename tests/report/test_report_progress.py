"""The report's progress bar: over its sections, on a terminal only, silenced by ``--quiet`` and by
``progress=False`` (also from a run that writes its report), as every other long step."""

from __future__ import annotations

import shutil
import sys

import pytest

from activebayes import _progress
from activebayes.cli import main
from activebayes.experiment import resume_experiment
from activebayes.report import _figures, write_report

BAR = "section"  # the bar's unit: "report: 8/13 [00:01<00:00, 4.1section/s, per class]"


@pytest.fixture
def no_figures(monkeypatch):
    """Reports without figures (a second, not five): the bar does not depend on them."""
    monkeypatch.setattr(_figures, "matplotlib_missing", lambda: "not drawn in this test")


def _like_a_terminal(monkeypatch):
    """The captured stderr answers isatty() like a terminal's (set in the test body, where capture is active)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_write_report_draws_a_bar_over_the_sections_when_asked(comparison_dir, tmp_path, no_figures, capsys):
    write_report(comparison_dir, output=tmp_path / "shown.html", progress=True)
    err = capsys.readouterr().err
    assert "report:" in err and BAR in err and "/13" in err, err
    assert "per class" in err and "configuration" in err  # the section being drawn is named
    write_report(comparison_dir, output=tmp_path / "silent.html", progress=False)
    assert capsys.readouterr().err == ""
    assert (tmp_path / "shown.html").read_text() == (tmp_path / "silent.html").read_text()


def test_by_default_the_bar_follows_the_terminal_and_the_process_default(comparison_dir, tmp_path, no_figures,
                                                                          capsys, monkeypatch):
    monkeypatch.setattr(_progress, "_stderr_is_terminal", lambda: False)
    write_report(comparison_dir, output=tmp_path / "log.html")
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_progress, "_stderr_is_terminal", lambda: True)
    write_report(comparison_dir, output=tmp_path / "terminal.html")
    assert BAR in capsys.readouterr().err
    with _progress.default(False):  # --quiet, or progress=False around the call
        write_report(comparison_dir, output=tmp_path / "quiet.html")
    assert capsys.readouterr().err == ""


def test_a_run_writing_its_report_shows_the_bar_as_its_own_progress(comparison_dir, tmp_path, no_figures, capsys,
                                                                     monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(comparison_dir / "random" / "seed_0", run)  # finished: resuming only writes the report
    monkeypatch.setattr(_progress, "_stderr_is_terminal", lambda: True)
    resume_experiment(run, progress=False)
    assert capsys.readouterr().err == ""
    resume_experiment(run, progress=True)
    assert BAR in capsys.readouterr().err


def test_cli_report_bar_on_a_terminal_unless_quiet(comparison_dir, tmp_path, no_figures, capsys, monkeypatch):
    out = tmp_path / "report.html"
    command = ["report", str(comparison_dir), "--output", str(out)]
    assert not sys.stderr.isatty()
    assert main(command) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and f"report: {out}" in captured.out  # into a log: no bar
    _like_a_terminal(monkeypatch)
    assert main(command) == 0
    captured = capsys.readouterr()
    assert BAR in captured.err and "\r" in captured.err, captured.err
    assert BAR not in captured.out and f"report: {out}" in captured.out
    for quiet in ("-q", "--quiet"):
        assert main([*command, quiet]) == 0
        captured = capsys.readouterr()
        assert captured.err == "" and f"report: {out}" in captured.out
