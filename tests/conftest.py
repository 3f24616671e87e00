from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_MNIST = ROOT.parent / "shared" / "data" / "mnist"


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    if not (SHARED_MNIST / "t10k-labels-idx1-ubyte.gz").exists():
        pytest.skip(f"real MNIST files not found at {SHARED_MNIST}")
    return SHARED_MNIST
