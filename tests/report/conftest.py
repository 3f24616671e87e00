"""Fixtures: a real comparison (2 strategies x 2 seeds on digits) written once by the product's own runner.

The report tests read exactly what :func:`activebayes.experiment.run_comparison`
writes, so a format the loop never produces cannot creep back in. Runtime: about
3 s for the runs and 4 s for the report, once per session.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from activebayes import plots
from activebayes.experiment import run_comparison
from activebayes.records import LoopConfig
from activebayes.report import write_report
from tests.conftest import FAST_LOOP

STRATEGIES = ("bald", "random")
SEEDS = (0, 1)
# activebayes.plots functions whose inputs the session report records (see comparison_report)
RECORDED = ("learning_curves", "reliability_diagram", "class_balance", "per_class_over_rounds",
            "confusion_matrix_plot", "image_grid")


@pytest.fixture(scope="session")
def comparison_dir(tmp_path_factory) -> Path:
    """``run_comparison`` of bald and random, seeds 0 and 1, 20 -> 40 labels (3 rounds each)."""
    out = tmp_path_factory.mktemp("real") / "compare"
    base = LoopConfig(**{**FAST_LOOP, "budget": 40})
    run_comparison(base, STRATEGIES, SEEDS, out, progress=False, report=False)
    return out


@pytest.fixture(scope="session")
def comparison_report(comparison_dir, tmp_path_factory) -> tuple[Path, dict[str, list[tuple[tuple, dict]]]]:
    """The comparison's report (drawn once per session), and every call to the plot functions it made.

    Returns ``(report path, {function name: [(args, kwargs), ...]})``: what each
    figure was drawn from, so tests can check the pictures' data, not only the text.
    """
    calls: dict[str, list[tuple[tuple, dict]]] = {name: [] for name in RECORDED}

    def recording(name, original):
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            calls[name].append((args, kwargs))
            return original(*args, **kwargs)

        return wrapper

    with pytest.MonkeyPatch.context() as patch:
        for name in RECORDED:
            patch.setattr(plots, name, recording(name, getattr(plots, name)))
        path = write_report(comparison_dir, output=tmp_path_factory.mktemp("report") / "report.html")
    return path, calls
