"""Fixtures: a synthetic comparison directory (2 strategies x 2 seeds) and a single run."""

from __future__ import annotations

from pathlib import Path

import pytest
from synthetic_runs import write_comparison, write_run

from activebayes.loop import LoopConfig


@pytest.fixture(scope="module")
def comparison_dir(tmp_path_factory) -> Path:
    return write_comparison(tmp_path_factory.mktemp("cmp") / "compare")


@pytest.fixture(scope="module")
def single_run_dir(tmp_path_factory) -> Path:
    config = LoopConfig(dataset="digits", strategy="batchbald", seed=7, initial_size=20, batch_size=10, budget=60)
    return write_run(tmp_path_factory.mktemp("run") / "run", config, rounds=5)
