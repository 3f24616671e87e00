"""Smoke test: benchmarks/inference.py --quick runs and finds equal results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "inference.py"


@pytest.mark.slow
def test_inference_benchmark_quick_mode(tmp_path):
    out = tmp_path / "results.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--no-baal", "--no-redux", "--threads", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "| activebayes predict_log_probs (batched tail) |" in run.stdout

    results = json.loads(out.read_text())
    assert results["speed"]["max_abs_diff"] < 1e-4
    assert [row["K"] for row in results["memory"]] == [4, 8]
    assert results["reorder"]["K"] == 16  # enough samples for the factorised conv2
    assert results["reorder"]["order_max_abs_diff"] == 0.0
    assert 0.0 < results["reorder"]["max_abs_diff"] < 1e-5  # factorised: float rounding, not 0
    assert len(results["reorder"]["times_s"]) == 3  # ours, layers one after another, original order
    assert all(row["peak_rss_mb"] > 0 for row in results["memory"])
