"""Seeds and generators: the one place randomness is derived from.

Every random step of an experiment draws from a ``torch.Generator`` seeded by
``derive_seed(seed, *keys)``, so a round's randomness depends only on the run's
seed and the round's identity, never on what ran before it in the process.
That is what makes a resumed run identical to an uninterrupted one.

Functions that take ``generator: torch.Generator | int | None`` treat an ``int``
as a seed, draw from a generator, and draw from torch's global generator for
``None`` (so ``torch.manual_seed`` makes them reproducible): see
:func:`draw_seed` / :func:`as_generator`. Network classes take the same keyword to seed
their initial weights through :func:`seedable_init`. :func:`mix_seed` is the cheap
integer-only mixer used for dropout masks (``mix(mask_seed, layer, k)``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import numbers
import os
import random
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import torch
from activebayes.errors import InvalidTypeError


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
        raise InvalidTypeError(f"{name} must be a torch.Generator, an int seed or None, got bool")
    if isinstance(generator, numbers.Integral):  # an int seed, NumPy integers included
        return mix_seed(int(generator))
    if isinstance(generator, torch.Generator):
        return int(torch.randint(0, 2**62, (), dtype=torch.int64, generator=generator))
    raise InvalidTypeError(
        f"{name} must be a torch.Generator, an int seed or None, got {type(generator).__name__}"
    )


def as_generator(generator: torch.Generator | int | None, name: str = "generator") -> torch.Generator:
    """A CPU generator: the one given, or a new one seeded from an int / the global RNG."""
    if isinstance(generator, torch.Generator):
        return generator
    return torch.Generator().manual_seed(draw_seed(generator, name))


@contextlib.contextmanager
def global_rng_seeded(seed: int) -> Iterator[None]:
    """Seed torch's global generators inside the block; restore them afterwards.

    Default initialisers and ``nn.Dropout`` in training draw from the global
    generators; this makes them reproducible without leaking state. CUDA's generators
    are seeded and restored too when CUDA is already started (a model on a GPU has
    started it); otherwise they are left alone, so the block neither starts CUDA nor
    queues a seed for whoever starts it later (``torch.manual_seed`` would).
    """
    cuda = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else range(0)
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(seed)
        for device in cuda:
            torch.cuda.default_generators[device].manual_seed(seed)
        yield


_Init = TypeVar("_Init", bound=Callable[..., None])


def seedable_init(init: _Init) -> _Init:
    """Let an ``__init__`` seed its random initialisation with its ``generator`` keyword.

    The decorated ``__init__`` declares ``*, generator: torch.Generator | int | None = None``
    (so it shows in its signature and docs) and builds its layers as usual.
    ``generator=None`` runs it as written: default initialisers draw from torch's global
    RNG, as before.  A generator or an int seed runs it inside :func:`global_rng_seeded`
    with ``draw_seed(generator)``, as :func:`~activebayes.models.build_model` builds, so
    the weights depend on ``generator`` alone (``MLP(..., generator=s)`` equals
    ``build_model("mlp", ..., generator=s)``) and torch's global generators are left as
    they were.  The ``__init__`` itself then receives ``generator=None``.

    Example:
        >>> import torch.nn as nn
        >>> class Net(nn.Linear):
        ...     @seedable_init
        ...     def __init__(self, *, generator: torch.Generator | int | None = None) -> None:
        ...         super().__init__(4, 2)
        >>> torch.equal(Net(generator=1).weight, Net(generator=1).weight)
        True
    """
    parameter = inspect.signature(init).parameters.get("generator")
    if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY or parameter.default is not None:
        raise TypeError(f"{init.__qualname__} must declare a keyword-only generator=None to be seedable")

    @functools.wraps(init)
    def seeded(self: object, *args: object, generator: torch.Generator | int | None = None,
               **kwargs: object) -> None:
        if generator is None:
            init(self, *args, **kwargs)
            return
        with global_rng_seeded(draw_seed(generator)):
            init(self, *args, **kwargs)

    return seeded  # type: ignore[return-value]


#: environment variables that trainers set for deterministic runs (transformers'
#: ``enable_full_determinism``, Lightning's ``deterministic=True``)
DETERMINISM_ENV = ("CUBLAS_WORKSPACE_CONFIG", "CUDA_LAUNCH_BLOCKING", "FLASH_ATTENTION_DETERMINISTIC",
                   "ASCEND_LAUNCH_BLOCKING", "HCCL_DETERMINISTIC")


@contextlib.contextmanager
def global_state_restored() -> Iterator[None]:
    """Leave the caller's global randomness and determinism settings as they were.

    Restores, on exit (an exception included), Python's ``random``, NumPy's global RNG,
    torch's CPU generator and CUDA's (when CUDA was initialised before the block), and
    ``torch.use_deterministic_algorithms``, cudnn's ``deterministic`` / ``benchmark`` and
    :data:`DETERMINISM_ENV`: third-party trainers seed and set them (transformers'
    ``set_seed``), and a library must not change its user's streams.
    """
    python_state, numpy_state = random.getstate(), np.random.get_state()
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    cudnn = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    env = {name: os.environ.get(name) for name in DETERMINISM_ENV}
    devices = range(torch.cuda.device_count()) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = cudnn
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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


# --- counter-based per-item randomness -------------------------------------------------
#
# Distributed and streamed scoring need random numbers that belong to an item, not to
# the position it happens to have in a chunk: item ``i``'s draw is a pure function of
# ``(seed, i)``, so any partition of the pool, in any order, sees the same numbers.
# splitmix64 (Steele, Lea & Flood 2014, the finaliser of Java's SplittableRandom) is a
# bijective 64-bit mixer with full avalanche; it runs vectorised on int64 tensors
# (two's-complement wrapping multiplication, logical shifts emulated with a mask).

_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
_SPLITMIX_MUL1 = 0xBF58476D1CE4E5B9
_SPLITMIX_MUL2 = 0x94D049BB133111EB


def _as_int64(value: int) -> int:
    """The int64 with the same 64 bits as ``value`` (two's complement)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def _shift_right_logical(x: torch.Tensor, bits: int) -> torch.Tensor:
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64(x_N: torch.Tensor) -> torch.Tensor:
    """splitmix64 of every element of an int64 tensor (bits as unsigned 64-bit, wrapping).

    ``z = x + γ; z = (z ^ z >> 30) · m1; z = (z ^ z >> 27) · m2; z ^ z >> 31`` with
    ``γ = 0x9E3779B97F4A7C15``, ``m1 = 0xBF58476D1CE4E5B9``, ``m2 = 0x94D049BB133111EB``
    and logical shifts, all modulo 2^64. A bijection of the 64-bit words.

    >>> splitmix64(torch.tensor([0])).item() == _as_int64(0xE220A8397B1DCDAF)
    True
    """
    if x_N.dtype != torch.int64:
        raise InvalidTypeError(f"x_N must be an int64 tensor, got dtype {x_N.dtype}")
    z = x_N + _as_int64(_SPLITMIX_GAMMA)
    z = (z ^ _shift_right_logical(z, 30)) * _as_int64(_SPLITMIX_MUL1)
    z = (z ^ _shift_right_logical(z, 27)) * _as_int64(_SPLITMIX_MUL2)
    return z ^ _shift_right_logical(z, 31)


def keyed_uniform(seed: int, keys_N: torch.Tensor) -> torch.Tensor:
    """Uniform ``(0, 1)`` float64 numbers, one per key, a pure function of ``(seed, key)``.

    ``u = (⌊h / 2^11⌋ + 1/2) / 2^53`` with ``h = splitmix64(splitmix64(key) ⊕ s)`` and
    ``s`` a 63-bit hash of ``seed`` (:func:`mix_seed`): 53 random bits, never exactly 0
    or 1. Keys are item indices, so the number an item gets does not depend on how the
    pool is chunked, ordered or spread over machines.

    Args:
        seed: any int (e.g. a round's selection seed).
        keys_N: int64 tensor of keys (e.g. original dataset indices), any shape.

    Returns:
        float64 tensor shaped like ``keys_N``, on its device.

    >>> u = keyed_uniform(7, torch.arange(5))
    >>> bool(((u > 0) & (u < 1)).all()), torch.equal(u[2:], keyed_uniform(7, torch.arange(2, 5)))
    (True, True)
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise InvalidTypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not isinstance(keys_N, torch.Tensor) or keys_N.dtype != torch.int64:
        got = keys_N.dtype if isinstance(keys_N, torch.Tensor) else type(keys_N).__name__
        raise InvalidTypeError(f"keys_N must be an int64 tensor, got {got}")
    hashed = splitmix64(splitmix64(keys_N) ^ mix_seed(seed))
    return (_shift_right_logical(hashed, 11).to(torch.float64) + 0.5) * 2.0**-53
