"""Shared data and helpers of the adapter tests."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

#: environment variables trainers set for deterministic runs
DETERMINISM_ENV = ("CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING", "FLASH_ATTENTION_DETERMINISTIC")


def toy_dataset(n: int = 160, d: int = 6, classes: int = 3, seed: int = 0):
    """Gaussian blobs as an activebayes ArrayDataset (float32 inputs [n, d])."""
    from activebayes.data import from_arrays

    g = torch.Generator().manual_seed(seed)
    centres_C_D = 2.0 * torch.randn(classes, d, generator=g)
    y_N = torch.arange(n) % classes
    x_N_D = centres_C_D[y_N] + torch.randn(n, d, generator=g)
    return from_arrays(x_N_D.numpy(), y_N.numpy(), name="toy")


def seed_globals(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch's (CUDA's too, initialised, where available)."""
    if torch.cuda.is_available():
        torch.cuda.init()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def next_draws() -> list:
    """The next numbers of the global RNGs that :func:`seed_globals` seeds."""
    draws = [random.random(), float(np.random.rand()), torch.rand(3).tolist()]
    if torch.cuda.is_initialized():
        draws.append(torch.rand(3, device="cuda").tolist())
    return draws


def determinism_settings() -> tuple:
    """torch's deterministic-algorithms and cudnn flags and :data:`DETERMINISM_ENV`."""
    return (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
            {name: os.environ.get(name) for name in DETERMINISM_ENV})
