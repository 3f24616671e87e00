"""Deterministic seed derivation.

Every random step of an experiment draws from a ``torch.Generator`` seeded by
``derive_seed(seed, *keys)``, so a round's randomness depends only on the run's
seed and the round's identity, never on what ran before it in the process.
That is what makes a resumed run identical to an uninterrupted one.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import torch


def derive_seed(seed: int, *keys: object) -> int:
    """A 63-bit seed from ``seed`` and any number of keys (stable across processes)."""
    text = repr((int(seed), *keys)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") & ((1 << 63) - 1)


def make_generator(seed: int, *keys: object) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``derive_seed(seed, *keys)``."""
    return torch.Generator().manual_seed(derive_seed(seed, *keys))


@contextlib.contextmanager
def seeded_global_rng(seed: int, *keys: object) -> Iterator[None]:
    """Seed torch's global RNG inside the block and restore it afterwards.

    Some PyTorch ops (``nn.Dropout`` in training, default initialisers) draw from
    the global generator; this keeps them reproducible without leaking state.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(seed, *keys))
        yield
