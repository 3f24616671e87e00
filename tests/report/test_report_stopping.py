"""The report's stopping section: drawn from the recorded signals, the stop said in words, old runs still render."""

from __future__ import annotations

import dataclasses
import functools
import html
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from activebayes.experiment import run_experiment
from activebayes.records import LoopConfig
from activebayes.report import _stopping, write_report
from activebayes.rundir import RunDirectory
from activebayes.stopping import (
    ESTIMATED_ACCURACY,
    EXPECTED_ACCURACY,
    INFORMATION,
    REMAINING_CHANGE,
    STABLE_PREDICTIONS,
)
from tests.conftest import FAST_LOOP

SIGNALS = (REMAINING_CHANGE, STABLE_PREDICTIONS, EXPECTED_ACCURACY, INFORMATION, ESTIMATED_ACCURACY)


def _rounds(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rounds.jsonl").read_text().splitlines() if line.strip()]


def _section(page: str) -> str:
    return page.split('<section id="stopping">')[1].split("</section>")[0]


def _plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> Path:
    """A real run stopped by a no-test-set criterion: the expected accuracy changed by less than
    0.99 over 3 rounds (always true once 4 models exist: at 50 labels), with audits."""
    out = tmp_path_factory.mktemp("stop") / "run"
    config = LoopConfig(**{**FAST_LOOP, "strategy": "bald", "budget": 80, "stop_when": ("expected_accuracy=0.99",),
                           "audit_fraction": 0.3, "stop_set_size": 200})
    run_experiment(config, out, progress=False, report=False)
    return out


@pytest.fixture(scope="module")
def drawn(stopped_run, tmp_path_factory) -> tuple[str, list[tuple[tuple, dict]]]:
    """The run's report page and every call to the stopping figure (what it was drawn from)."""
    calls: list[tuple[tuple, dict]] = []
    original = _stopping.stopping_figure

    @functools.wraps(original)
    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_stopping, "stopping_figure", recording)
        path = write_report(stopped_run, output=tmp_path_factory.mktemp("page") / "report.html")
    return path.read_text(encoding="utf-8"), calls


def test_the_run_stopped_on_the_criterion(stopped_run):
    rounds = _rounds(stopped_run)
    assert rounds[-1]["stop_kind"] == EXPECTED_ACCURACY and rounds[-1]["n_labelled"] == 50


def test_the_figure_is_drawn_from_the_recorded_signals(stopped_run, drawn):
    page, calls = drawn
    ((args, _),) = calls
    strategy, (curves,), thresholds, split = args
    rounds = _rounds(stopped_run)
    assert strategy == "bald" and split == "test" and thresholds[EXPECTED_ACCURACY] == 0.99
    assert thresholds[STABLE_PREDICTIONS] == 0.99 and thresholds[INFORMATION] == 0.1  # the defaults
    assert curves.n_labelled_R.tolist() == [r["n_labelled"] for r in rounds]
    assert curves.accuracy_R.tolist() == [r["metrics"]["test_accuracy"] for r in rounds]
    for name in SIGNALS:  # the stable predictions: the 3-round mean kappa its criterion compares
        want = [r["signals"][name]["mean" if name == STABLE_PREDICTIONS else "value"] for r in rounds]
        got = curves.values[name].tolist()
        assert [None if math.isnan(v) else v for v in got] == want, name
        assert curves.fired[name].tolist() == [r["signals"][name]["fired"] for r in rounds], name
    assert curves.fired[EXPECTED_ACCURACY].tolist() == [False, False, False, True]
    # the audits made an interval, drawn around the estimate
    estimated = [r["signals"][ESTIMATED_ACCURACY] for r in rounds]
    assert any("low" in s for s in estimated)
    assert [s.get("low") for s in estimated] == [None if math.isnan(v) else v for v in curves.low_R.tolist()]
    assert 'data-figure="stopping-bald"><img src="data:image/png' in page


def test_the_stop_is_said_in_words_with_its_kind_and_labels(stopped_run, drawn):
    page, _ = drawn
    last = _rounds(stopped_run)[-1]
    sentence = f"bald, seed 0: stopped by {last['stop_kind']} at {last['n_labelled']} labels ({last['stop_reason']})."
    assert sentence in _plain(_section(page))
    assert "stopped by expected_accuracy at 50 labels" in sentence


def test_the_table_says_where_each_signal_fired_first(stopped_run, drawn):
    page, _ = drawn
    rounds = _rounds(stopped_run)
    row = re.findall(r"<tr>(.*?)</tr>", _section(page).split("<tbody>")[1])[0]
    cells = [_plain(c).strip() for c in re.findall(r"<td>(.*?)</td>", row)]
    assert cells[:2] == ["bald", "0"]
    for name, cell in zip(SIGNALS, cells[2:], strict=True):
        fired = [r for r in rounds if r["signals"][name]["fired"]]
        measured = any(r["signals"][name]["value"] is not None for r in rounds)
        want = ("never" if measured else "not measured") if not fired else (
            f"{fired[0]['n_labelled']} labels (test accuracy {fired[0]['metrics']['test_accuracy']:.4f})")
        assert cell == want, name
    assert cells[2 + SIGNALS.index(EXPECTED_ACCURACY)].startswith("50 labels")


def test_fired_rounds_are_marked_on_the_panels_and_the_learning_curve(stopped_run, drawn):
    _, calls = drawn
    ((args, kwargs),) = calls
    figure = _stopping.stopping_figure(*args, **kwargs)
    curve_ax, *panels = figure.axes[:6]
    expected_ax = panels[SIGNALS.index(EXPECTED_ACCURACY)]

    def vertical_lines(ax):
        return sorted({float(line.get_xdata()[0]) for line in ax.get_lines()
                       if line.get_linestyle() == ":" and len(set(line.get_xdata())) == 1})

    assert vertical_lines(expected_ax) == [50.0]
    assert 50.0 in vertical_lines(curve_ax)
    red = [line for line in expected_ax.get_lines() if line.get_color() == _stopping.FIRED_COLOUR
           and line.get_linestyle() == "None"]
    assert [list(line.get_xdata()) for line in red] == [[50]]


def test_runs_written_before_signals_still_render(stopped_run, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(stopped_run, old)
    directory = RunDirectory(old)
    records = directory.read_rounds()
    directory.write_rounds([dataclasses.replace(r, signals=None, stop_kind=None) for r in records[:-1]]
                           + [dataclasses.replace(records[-1], signals=None, stop_kind=None,
                                                  stop_reason="label budget reached (50 >= 50)")])
    page = write_report(old).read_text()
    section = _plain(_section(page))
    assert "No stopping signals recorded for bald, seed 0" in section
    assert "stopped by label_budget at 50 labels" in section  # the kind read from the old sentence
    assert 'data-figure="stopping-' not in page
    assert '<section id="learning-curves">' in page and '<section id="config">' in page


def test_signal_curves_is_none_without_signals_and_reads_missing_values_as_nan(stopped_run):
    records = RunDirectory(stopped_run).read_rounds()
    assert _stopping.signal_curves([dataclasses.replace(r, signals=None) for r in records], 0, "test_accuracy") is None
    curves = _stopping.signal_curves(records, 0, "test_accuracy")
    assert np.isnan(curves.values[STABLE_PREDICTIONS][0])  # the first model has nothing to compare with


def test_a_signal_a_run_never_recorded_reads_not_recorded_not_never(stopped_run, tmp_path):
    """Runs made before the remaining change existed: its cell says so instead of 'never'."""
    old = tmp_path / "older"
    shutil.copytree(stopped_run, old)
    directory = RunDirectory(old)
    records = directory.read_rounds()
    directory.write_rounds([dataclasses.replace(r, signals={k: v for k, v in r.signals.items()
                                                             if k != REMAINING_CHANGE}) for r in records])
    section = _section(write_report(old).read_text())
    row = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>")[1])[0]
    cells = [_plain(c).strip() for c in re.findall(r"<td>(.*?)</td>", row)]
    assert cells[2 + SIGNALS.index(REMAINING_CHANGE)] == "not recorded"
    assert cells[2 + SIGNALS.index(EXPECTED_ACCURACY)].startswith("50 labels")


def test_a_signal_no_run_measured_says_so_instead_of_empty_axes(drawn):
    """The run stopped at 50 labels, before the 12 models the remaining change needs: its panel
    says it was not measured (not empty axes from -0.04 to 0.04), and its table cell too."""
    page, calls = drawn
    ((args, kwargs),) = calls
    figure = _stopping.stopping_figure(*args, **kwargs)
    panels = figure.axes[1:6]
    remaining = panels[SIGNALS.index(REMAINING_CHANGE)]
    assert [t.get_text() for t in remaining.texts] == ["not measured in this run"]
    assert not remaining.get_lines()
    assert remaining.get_xlim() == figure.axes[0].get_xlim()
    assert not panels[SIGNALS.index(EXPECTED_ACCURACY)].texts  # measured: drawn as before
    row = re.findall(r"<tr>(.*?)</tr>", _section(page).split("<tbody>")[1])[0]
    cells = [_plain(c).strip() for c in re.findall(r"<td>(.*?)</td>", row)]
    assert cells[2 + SIGNALS.index(REMAINING_CHANGE)] == "not measured"


def test_the_stable_predictions_panel_plots_what_its_criterion_compares():
    """A committed benchmark run, recorded before the window mean was kept: the panel's values are
    the 3-round means computed from the recorded kappas, and a round fired exactly where that
    mean reached the threshold (the single round's kappa crossing it does not fire)."""
    from tests.conftest import ROOT

    run = ROOT / "benchmarks" / "results" / "stopping_runs" / "digits" / "seed_0"
    records = RunDirectory(run).read_rounds()
    assert not any("mean" in (r.signals or {}).get(STABLE_PREDICTIONS, {}) for r in records)
    curves = _stopping.signal_curves(records, 0, "test_accuracy")
    means = curves.values[STABLE_PREDICTIONS]
    kappas = [(r.signals or {}).get(STABLE_PREDICTIONS, {}).get("value") for r in records]
    measured = np.flatnonzero(np.isfinite(means))
    assert measured.size > 3
    for i in measured:
        assert means[i] == pytest.approx(sum(kappas[i - 2: i + 1]) / 3, abs=0)
        assert curves.fired[STABLE_PREDICTIONS][i] == (means[i] >= 0.99)  # the run's threshold: the default
    # round 21: one model's kappa 0.991 above the threshold, the mean below it; it did not fire, and is not drawn above it
    assert kappas[21] >= 0.99 and means[21] < 0.99 and not curves.fired[STABLE_PREDICTIONS][21]


def test_the_expected_accuracy_panel_draws_the_change_its_criterion_compares_with_the_threshold(stopped_run, drawn):
    """The panel drew the expected accuracy but no threshold (its criterion compares the change over
    the window, another scale): a second axis now draws that change and the threshold line."""
    _, calls = drawn
    ((args, kwargs),) = calls
    figure = _stopping.stopping_figure(*args, **kwargs)
    records = RunDirectory(stopped_run).read_rounds()
    values = np.array([(r.signals or {})[EXPECTED_ACCURACY]["value"] or np.nan for r in records], dtype=float)
    change = _stopping.window_change(values)
    for r in range(len(values)):  # a NumPy reference: the largest step among the last 4 values
        window = values[max(r - 3, 0): r + 1]
        expected = np.abs(np.diff(window)).max() if r >= 3 and np.isfinite(window).all() else np.nan
        assert change[r] == expected or (np.isnan(change[r]) and np.isnan(expected))
    fired = [bool((r.signals or {})[EXPECTED_ACCURACY]["fired"]) for r in records]
    assert fired == [bool(c < 0.99) for c in change]  # what the run recorded, from the drawn numbers
    twin = next(ax for ax in figure.axes[6:] if "largest change over 3 rounds" in ax.get_ylabel())
    assert "stop below 0.99" in twin.get_ylabel()
    ys = [line.get_ydata() for line in twin.get_lines()]
    assert np.allclose(ys[0], change, equal_nan=True) and [0.99, 0.99] in [list(y) for y in ys]


def test_a_run_without_a_stop_set_says_so_not_that_it_is_old(tmp_path):
    out = tmp_path / "run"
    run_experiment(LoopConfig(**{**FAST_LOOP, "strategy": "random", "budget": 30, "stop_set_size": 0}), out,
                   progress=False, report=False)
    section = _plain(_section(write_report(out).read_text()))
    assert "No stopping signals measured for random, seed 0: run without a stop set (--stop-set-size 0)" in section
    assert "written before" not in section


def test_a_run_killed_before_its_first_round_is_not_finished_on_its_test_split(tmp_path):
    out = tmp_path / "run"
    config = LoopConfig(**{**FAST_LOOP, "strategy": "random"})
    RunDirectory(out).write_config(config)  # what a run killed while fitting its first model leaves
    page = write_report(out).read_text()
    overview = _plain(page.split('<section id="overview">')[1].split("</section>")[0])
    assert "Not finished: random seed 0 (no round finished yet)" in " ".join(overview.split())
    assert "test accuracy" in overview and "validation accuracy" not in overview
