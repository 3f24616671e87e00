from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small models gain nothing from intra-op threads; on a shared 2-core machine
    (CI runs pytest -n 2) they oversubscribe the CPU and run ~10x slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
