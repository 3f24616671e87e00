"""Fixtures: a synthetic comparison directory (2 strategies x 2 seeds) and a single run."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_runs import tiny_png, write_comparison, write_run

from activebayes.loop import LoopConfig


@pytest.fixture(scope="session")
def comparison_dir(tmp_path_factory) -> Path:
    return write_comparison(tmp_path_factory.mktemp("cmp") / "compare")


@pytest.fixture(scope="session")
def comparison_report(comparison_dir) -> Path:
    """The comparison's report, drawn once per session (matplotlib figures cost ~0.5 s each)."""
    from activebayes.report import write_report

    return write_report(comparison_dir)


@pytest.fixture
def fast_figures(monkeypatch):
    """Figures are still built, but saved as a 1x1 PNG: for tests about text, not pictures."""
    import sys

    from activebayes.report import _figures

    def stub(figure):
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close(figure)
        return tiny_png()

    monkeypatch.setattr(_figures, "to_png", stub)


@pytest.fixture(scope="module")
def single_run_dir(tmp_path_factory) -> Path:
    config = LoopConfig(dataset="digits", strategy="batchbald", seed=7, initial_size=20, batch_size=10, budget=60)
    return write_run(tmp_path_factory.mktemp("run") / "run", config, rounds=5)
