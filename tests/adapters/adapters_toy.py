"""Shared data of the adapter tests."""

from __future__ import annotations

import torch


def toy_dataset(n: int = 160, d: int = 6, classes: int = 3, seed: int = 0):
    """Gaussian blobs as an activebayes ArrayDataset (float32 inputs [n, d])."""
    from activebayes.data import from_arrays

    g = torch.Generator().manual_seed(seed)
    centres_C_D = 2.0 * torch.randn(classes, d, generator=g)
    y_N = torch.arange(n) % classes
    x_N_D = centres_C_D[y_N] + torch.randn(n, d, generator=g)
    return from_arrays(x_N_D.numpy(), y_N.numpy(), name="toy")
