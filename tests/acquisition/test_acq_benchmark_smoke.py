"""The benchmark script must keep running: its --quick mode takes seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "acquisition.py"


def test_benchmark_quick_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for line in ("(a) BALD scores", "(b) BatchBALD", "(c) BatchBALD", "activebayes"):
        assert line in out
    assert "DIFFER" not in out, out
