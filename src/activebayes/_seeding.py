"""Seeds and generators: the one place randomness is derived from.

Every random step of an experiment draws from a ``torch.Generator`` seeded by
``derive_seed(seed, *keys)``, so a round's randomness depends only on the run's
seed and the round's identity, never on what ran before it in the process.
That is what makes a resumed run identical to an uninterrupted one.

Functions that take ``generator: torch.Generator | int | None`` treat an ``int``
as a seed, draw from a generator, and draw from torch's global generator for
``None`` (so ``torch.manual_seed`` makes them reproducible): see
:func:`draw_seed` / :func:`as_generator`. :func:`mix_seed` is the cheap
integer-only mixer used for dropout masks (``mix(mask_seed, layer, k)``).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import torch


SEED_BITS = 63



def mix_seed(*keys: int) -> int:
    """A 63-bit seed from integer keys, stable across processes and platforms."""
    text = ",".join(str(int(key)) for key in keys).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") & (
        (1 << SEED_BITS) - 1
    )


def draw_seed(generator: torch.Generator | int | None, name: str = "generator") -> int:
    """One fresh 63-bit seed from ``generator`` (see module docstring)."""
    if generator is None:
        return int(torch.randint(0, 2**62, (), dtype=torch.int64))
    if isinstance(generator, bool):
        raise TypeError(f"{name} must be a torch.Generator, an int seed or None, got bool")
    if isinstance(generator, int):
        return mix_seed(generator)
    if isinstance(generator, torch.Generator):
        return int(torch.randint(0, 2**62, (), dtype=torch.int64, generator=generator))
    raise TypeError(
        f"{name} must be a torch.Generator, an int seed or None, got {type(generator).__name__}"
    )


def as_generator(generator: torch.Generator | int | None, name: str = "generator") -> torch.Generator:
    """A CPU generator: the one given, or a new one seeded from an int / the global RNG."""
    if isinstance(generator, torch.Generator):
        return generator
    return torch.Generator().manual_seed(draw_seed(generator, name))


@contextlib.contextmanager
def global_rng_seeded(seed: int) -> Iterator[None]:
    """Seed torch's global CPU generator inside the block; restore it afterwards.

    Default initialisers and ``nn.Dropout`` in training draw from the global
    generator; this makes them reproducible without leaking state.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def derive_seed(seed: int, *keys: object) -> int:
    """A 63-bit seed from ``seed`` and any number of keys (stable across processes)."""
    text = repr((int(seed), *keys)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") & ((1 << 63) - 1)


def make_generator(seed: int, *keys: object) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``derive_seed(seed, *keys)``."""
    return torch.Generator().manual_seed(derive_seed(seed, *keys))


def seeded_global_rng(seed: int, *keys: object) -> contextlib.AbstractContextManager[None]:
    """:func:`global_rng_seeded` with ``derive_seed(seed, *keys)``."""
    return global_rng_seeded(derive_seed(seed, *keys))
