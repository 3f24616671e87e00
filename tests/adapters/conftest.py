from __future__ import annotations

import os

import pytest
import torch

# nothing is downloaded: the Hugging Face tests build tiny random configs
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture
def keep_global_state():
    """The next tests see the global RNGs and determinism settings as before, whatever a failing test left."""
    from activebayes._seeding import global_state_restored

    with global_state_restored():
        yield
