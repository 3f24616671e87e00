r"""Frozen encoders for Bayesian heads: ours, a user's module or callable, or precomputed embeddings.

Three ways to give the features ``phi(x) [n, D]`` a head sits on:

- **ours**: the self-supervised :class:`~activebayes.models.Representation`
  (``--representation self-supervised``);
- **a user's encoder**: any ``nn.Module`` or callable mapping ``[n, ...]`` to ``[n, D]``
  (a pretrained ResNet without its classifier, a sentence embedder, ...);
- **precomputed embeddings**: a NumPy array (or ``np.load(..., mmap_mode="r")``)
  ``[N, D]`` aligned with the pool: :func:`embeddings_dataset` makes a dataset whose
  inputs *are* the embeddings, read on demand, so the encoder is the identity.

:class:`FrozenEncoder` runs an encoder without gradients, in eval mode, and remembers
each item's features by the content of its input row (blake2b of its bytes), so ``fit``
pays for the encoder once per labelled item and the pool is encoded once per run, not
once per epoch or round. :func:`encode_pool` encodes a whole pool, chunk by chunk;
:func:`compute_embeddings` does so once and caches the result by content: a fingerprint of the inputs' bytes and of the
encoder's weights (or a ``name`` for a callable) names an ``.npy`` file in
``cache_dir``, memory-mapped when read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from activebayes._io import NpyWriter, ensure_folder, remove_dead_writers_temps, renamed_error
from activebayes._threads import threads_for
from activebayes._validation import check_positive_int, check_torch_device
from activebayes.data.lazy import LazyInputs
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "EmbeddingInputs",
    "FrozenEncoder",
    "as_encoder_module",
    "compute_embeddings",
    "embeddings_dataset",
    "encode_pool",
    "encoder_fingerprint",
    "split_frozen",
]


class _CallableEncoder(nn.Module):
    """A plain callable ``[n, ...] -> [n, D]`` as an ``nn.Module`` (no parameters)."""

    def __init__(self, function: Callable[[Tensor], Tensor], name: str | None = None) -> None:
        super().__init__()
        self.function = function
        self.name = name or getattr(function, "__qualname__", type(function).__name__)

    def forward(self, inputs: Tensor) -> Tensor:
        out = self.function(inputs)
        if isinstance(out, Tensor):
            return out
        try:
            return torch.as_tensor(out)
        except (TypeError, ValueError, RuntimeError) as error:
            raise InvalidTypeError(
                f"encoder {self.name} must return features [n, D] as one tensor or array, got "
                f"{type(out).__name__}; return the features alone (e.g. lambda x: encoder(x)[0])"
            ) from error

    def extra_repr(self) -> str:
        return self.name


def as_encoder_module(encoder: Any) -> nn.Module:
    """An ``nn.Module`` for ``encoder``: a :class:`~activebayes.models.Representation`'s encoder,
    an ``nn.Module`` as is, or a callable wrapped."""
    from activebayes.models.representation import Representation

    if isinstance(encoder, Representation):
        return encoder.encoder
    if isinstance(encoder, nn.Module):
        return encoder
    if callable(encoder):
        return _CallableEncoder(encoder)
    raise InvalidTypeError(
        "encoder must be a Representation (train_or_load_representation), a torch.nn.Module or a callable "
        f"mapping inputs [n, ...] to features [n, D], got {type(encoder).__name__}"
    )


def encoder_fingerprint(encoder: Any) -> str:
    """A content hash of an encoder: its class and every parameter / buffer (name, shape, dtype, bytes).

    A callable without parameters is known by its qualified name only (give it a ``name``
    attribute that changes when it does).
    """
    module = as_encoder_module(encoder)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{type(module).__module__}.{type(module).__qualname__}".encode())
    if isinstance(module, _CallableEncoder):
        digest.update(module.name.encode())
    for name, tensor in module.state_dict().items():
        tensor = tensor.detach().to("cpu").contiguous()
        digest.update(repr((name, tuple(tensor.shape), str(tensor.dtype))).encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def _check_output(out: object, n: int, expected: tuple[int, ...] | None, what: str) -> Tensor:
    if not isinstance(out, Tensor) or out.ndim < 2 or out.shape[0] != n:
        got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
        raise InvalidArgumentError(f"{what} must map [n={n}, ...] inputs to features [n, D], got {got}")
    if expected is not None and tuple(out.shape[1:]) != expected:
        raise InvalidArgumentError(
            f"{what}'s output shape changed between calls: {list(expected)} per item first, now "
            f"{list(out.shape[1:])}; make it return one fixed-size feature vector per item (e.g. end with "
            "global pooling and nn.Flatten)"
        )
    return out


class FrozenEncoder(nn.Module):
    """An encoder run frozen (no gradient, eval mode), its features ``[n, D]`` remembered per input row.

    The encoder is frozen **in place**, not copied: a user's ``nn.Module`` gets
    ``requires_grad_(False)`` and stays in eval mode, so heads and rounds share it without
    a copy of its weights. Wrap ``copy.deepcopy(module)`` to keep training the module itself.

    Args:
        encoder: a :class:`~activebayes.models.Representation`, an ``nn.Module`` or a callable.
        cache: remember features by the bytes of each input row (at most ``max_items`` rows).
        max_items: the most rows remembered.

    The output shape per item is checked on every call: an encoder whose output shape
    changes between calls raises :class:`~activebayes.errors.InvalidArgumentError`.
    The cache is not pickled (Ray workers start empty) nor part of ``state_dict``.
    """

    def __init__(self, encoder: Any, *, cache: bool = True, max_items: int = 500_000) -> None:
        super().__init__()
        self.encoder = as_encoder_module(encoder)
        self.encoder.requires_grad_(False)
        self.cache = bool(cache)
        self.max_items = check_positive_int(max_items, "max_items")
        self._features: dict[bytes, Tensor] = {}
        self._item_shape: tuple[int, ...] | None = None
        self.train(self.training)

    def train(self, mode: bool = True) -> FrozenEncoder:
        super().train(mode)
        self.encoder.eval()
        return self

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_features"] = {}
        return state

    def _apply(self, fn, *args, **kwargs):  # .to(), .double(), ...: features change
        self._features = {}
        return super()._apply(fn, *args, **kwargs)

    def clear_cache(self) -> None:
        self._features = {}

    def _encode(self, inputs: Tensor) -> Tensor:
        with torch.no_grad():
            out = _check_output(self.encoder(inputs), inputs.shape[0], self._item_shape, "encoder")
        self._item_shape = tuple(out.shape[1:])
        return out.detach().reshape(out.shape[0], -1).float()

    def forward(self, inputs: Tensor) -> Tensor:
        try:
            if not self.cache:
                return self._encode(inputs)
            return cached_rows(self._features, inputs, self._encode, self.max_items)
        except RuntimeError as error:  # inputs of another width or dtype than the encoder's
            from activebayes.models.predict import is_input_error, unreadable_inputs

            if not is_input_error(error):
                raise
            raise unreadable_inputs(inputs, error) from error


def split_frozen(model: nn.Module) -> tuple[Callable[[Tensor], Tensor], nn.Module] | None:
    """``(encode, rest)`` with ``model(x) == rest(encode(x))`` when ``model`` starts with a
    frozen encoder, else ``None``.

    ``rest`` shares ``model``'s trainable modules (training ``rest`` trains ``model``), so
    ``fit`` encodes the labelled items once and trains the head on their features, and an
    ensemble of heads encodes each item once for all its members. Recognised: an
    ``nn.Sequential`` whose first module is a :class:`FrozenEncoder`, and any module with a
    ``split_frozen()`` method (:class:`~activebayes.models.EncoderClassifier`,
    :class:`~activebayes.models.Ensemble` of such members sharing one encoder,
    :class:`~activebayes.models.laplace.LastLayerLaplace` on such a body).
    """
    if isinstance(model, nn.Sequential) and len(model) > 1 and isinstance(model[0], FrozenEncoder):
        return model[0], nn.Sequential(*list(model)[1:])
    method = getattr(model, "split_frozen", None)
    return method() if callable(method) else None


def cached_rows(cache: dict[bytes, Tensor], inputs: Tensor, compute: Callable[[Tensor], Tensor],
                max_items: int) -> Tensor:
    """``compute(inputs)`` row by row through ``cache``, keyed by each row's content (shape,
    dtype and bytes): only rows not seen before are computed, and they are remembered while
    the cache holds at most ``max_items`` rows. The result is on ``inputs``' device."""
    rows = inputs.detach().to("cpu").contiguous()
    prefix = repr((tuple(rows.shape[1:]), str(rows.dtype))).encode()
    flat = rows.reshape(rows.shape[0], -1).numpy()
    keys = [hashlib.blake2b(prefix + row.tobytes(), digest_size=16).digest() for row in flat]
    missing = [i for i, key in enumerate(keys) if key not in cache]
    computed: dict[bytes, Tensor] = {}
    if missing:
        for i, feature in zip(missing, compute(inputs[missing]).detach().to("cpu"), strict=True):
            computed.setdefault(keys[i], feature)
        if len(cache) + len(computed) <= max_items:
            cache.update(computed)
    return torch.stack([cache.get(key, computed.get(key)) for key in keys]).to(inputs.device)


# --------------------------------------------------------------------------- precomputed embeddings


class EmbeddingInputs(LazyInputs):
    """A float array ``[N, D]`` (NumPy, possibly memory-mapped) read on demand as float32 rows."""

    def __init__(self, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise InvalidTypeError(f"embeddings must be a NumPy array [N, D], got {type(array).__name__}")
        if array.ndim != 2 or not np.issubdtype(array.dtype, np.floating):
            raise InvalidArgumentError(
                f"embeddings must be a 2-d float array [N, D], got shape {array.shape} and dtype {array.dtype}"
            )
        super().__init__(tuple(int(s) for s in array.shape))
        self.array = array

    def _read(self, rows: np.ndarray) -> Tensor:
        return torch.from_numpy(np.asarray(self.array[rows], dtype=np.float32))

    def _read_range(self, start: int, stop: int) -> Tensor:
        return torch.from_numpy(np.array(self.array[start:stop], dtype=np.float32))


def embeddings_dataset(dataset: Any, embeddings: np.ndarray | Tensor, *, name: str | None = None) -> Any:
    """``dataset`` with its inputs replaced by precomputed ``embeddings`` (one row per item, same order).

    ``embeddings``: a tensor or NumPy array ``[N, D]``; a memory-mapped array
    (``np.load(path, mmap_mode="r")``) stays on disk and is read chunk by chunk. Heads built
    on the result use the identity encoder.
    """
    from activebayes.data.dataset import ArrayDataset

    if not isinstance(dataset, ArrayDataset):
        raise InvalidTypeError(f"dataset must be an activebayes ArrayDataset, got {type(dataset).__name__}")
    if isinstance(embeddings, Tensor):
        if embeddings.ndim != 2 or not embeddings.is_floating_point():
            raise InvalidArgumentError(
                f"embeddings must be a 2-d float array [N, D], got shape {tuple(embeddings.shape)} and dtype {embeddings.dtype}"
            )
        inputs: Tensor | EmbeddingInputs = embeddings.detach().to("cpu", torch.float32)
    else:
        inputs = EmbeddingInputs(np.asarray(embeddings) if not isinstance(embeddings, np.ndarray) else embeddings)
    if inputs.shape[0] != len(dataset):
        raise InvalidArgumentError(
            f"embeddings have {inputs.shape[0]} rows but the pool {dataset.name!r} has {len(dataset)} items; "
            "give one embedding row per pool item, in the pool's order"
        )
    # the items keep their identity (image files, table row ids): only their inputs change
    return ArrayDataset(inputs=inputs, targets=dataset.targets, classes=dataset.classes,
                        name=name or f"{dataset.name}-embeddings", paths=dataset.paths, item_ids=dataset.item_ids,
                        item_sha256=dataset.item_sha256)


# --------------------------------------------------------------------------- encoding a pool once

_MEMORY_CACHE: OrderedDict[str, Tensor] = OrderedDict()
_MEMORY_CACHE_ENTRIES = 4


def _inputs_fingerprint(inputs: Any, chunk: int) -> str:
    from activebayes.models.predict import _Inputs

    data = _Inputs(inputs)
    digest = hashlib.blake2b(digest_size=16)
    first = data.get(0, 1)
    digest.update(repr((len(data), tuple(first.shape[1:]), str(first.dtype))).encode())
    for _, _, x in data.chunks(chunk):
        digest.update(x.detach().to("cpu").contiguous().numpy().tobytes())
    return digest.hexdigest()


@contextlib.contextmanager
def _module_state_kept(module: nn.Module, *, moved: bool) -> Iterator[None]:
    """Restore ``module``'s train/eval flags, its parameters' ``requires_grad`` and, when it is
    ``moved``, its device afterwards (:class:`FrozenEncoder` freezes the module in place)."""
    training = {m: m.training for m in module.modules()}
    requires_grad = {p: p.requires_grad for p in module.parameters()}
    device = next((t.device for t in module.parameters()), None) if moved else None
    try:
        yield
    finally:
        if device is not None:
            module.to(device)
        for parameter, flag in requires_grad.items():
            parameter.requires_grad_(flag)
        for m, flag in training.items():
            m.training = flag


def _cached_embeddings(key: str, path: Path | None) -> Tensor | EmbeddingInputs | None:
    """The embeddings of ``key`` computed before: the ``.npy`` file at ``path``, else this process's memory."""
    if path is not None and path.is_file():
        return EmbeddingInputs(np.load(path, mmap_mode="r"))
    if path is None and key in _MEMORY_CACHE:
        _MEMORY_CACHE.move_to_end(key)
        return _MEMORY_CACHE[key]
    return None


def encode_pool(
    encoder: Any,
    inputs: Any,
    *,
    batch_size: int = 1024,
    device: torch.device | str | None = None,
) -> Tensor:
    """The encoder's features of every input, ``[N, ...] -> features_N_D`` (float32, CPU), kept nowhere.

    The one place a whole pool is encoded: :func:`compute_embeddings` caches what this
    computes, and :func:`activebayes.models.representation.features` is this for the
    self-supervised encoder. The encoder runs in eval mode without gradients, ``batch_size``
    items per call (inside :func:`activebayes._threads.threads_for`); a module's train/eval
    flags, ``requires_grad`` flags and device are restored afterwards.

    Args:
        encoder: a Representation, an ``nn.Module`` or a callable ``[n, ...] -> [n, D]``.
        inputs: a tensor ``[N, ...]``, lazy inputs (a memory-mapped pool) or a Dataset.
        batch_size: items per encoder call.
        device: run the encoder there.

    Example:
        >>> encode_pool(torch.nn.Flatten(), torch.ones(5, 2, 3)).shape
        torch.Size([5, 6])
    """
    check_positive_int(batch_size, "batch_size")
    module = as_encoder_module(encoder)
    with _module_state_kept(module, moved=device is not None):
        frozen = _frozen(module, device)
        out: np.ndarray | None = None
        data = _data(inputs)
        with contextlib.closing(_encoded_chunks(frozen, data, batch_size, device)) as chunks:
            for start, end, features in chunks:
                if out is None:
                    out = np.empty((len(data), features.shape[1]), dtype=np.float32)
                out[start:end] = features
        assert out is not None
        return torch.from_numpy(out)


def compute_embeddings(
    encoder: Any,
    inputs: Any,
    *,
    batch_size: int = 1024,
    cache_dir: str | os.PathLike[str] | None = None,
    device: torch.device | str | None = None,
) -> Tensor | EmbeddingInputs:
    """The encoder's features of every input, computed once (:func:`encode_pool`) and cached by content.

    The key is ``blake2b(inputs bytes) + encoder_fingerprint(encoder)``. With ``cache_dir``
    the features are written chunk by chunk to ``cache_dir/<key>.npy`` (memory holds one
    chunk, whatever N) and returned memory-mapped (:class:`EmbeddingInputs`); a later
    call with the same inputs and encoder reads that file. Without it they are computed
    in memory (float32 ``[N, D]``) and the last few results kept in this process.

    Args:
        encoder: a Representation, an ``nn.Module`` or a callable ``[n, ...] -> [n, D]``.
        inputs: a tensor ``[N, ...]``, lazy inputs (a memory-mapped pool) or a Dataset.
        batch_size: items per encoder call.
        cache_dir: where the ``.npy`` files live (``None``: in memory).
        device: run the encoder there.

    The encoder runs in eval mode without gradients; a module's train/eval flags,
    ``requires_grad`` flags and device are restored afterwards, so it can still be trained.
    """
    check_positive_int(batch_size, "batch_size")
    key = f"{_inputs_fingerprint(inputs, batch_size)}-{encoder_fingerprint(encoder)}"
    path = None if cache_dir is None else Path(cache_dir) / f"embeddings-{key}.npy"
    cached = _cached_embeddings(key, path)
    if cached is not None:
        return cached
    if path is None:
        result = encode_pool(encoder, inputs, batch_size=batch_size, device=device)
        _MEMORY_CACHE[key] = result
        while len(_MEMORY_CACHE) > _MEMORY_CACHE_ENTRIES:
            _MEMORY_CACHE.popitem(last=False)
        return result
    module = as_encoder_module(encoder)
    with _module_state_kept(module, moved=device is not None):
        return _encode_to_file(_frozen(module, device), _data(inputs), path, batch_size, device)


def _frozen(module: nn.Module, device: torch.device | str | None) -> FrozenEncoder:
    frozen = FrozenEncoder(module, cache=False)
    if device is not None:
        frozen.to(check_torch_device(device, "device"))
    return frozen


def _data(inputs: Any) -> Any:
    from activebayes.models.predict import _Inputs

    return _Inputs(inputs)


def _encoded_chunks(frozen: FrozenEncoder, data: Any, batch_size: int,
                    device: torch.device | str | None) -> Iterator[tuple[int, int, np.ndarray]]:
    """``(start, end, features [end - start, D] float32)`` of consecutive chunks of ``data``."""
    run_device = next((t.device for t in frozen.parameters()), torch.device(device or "cpu"))
    with threads_for(frozen.encoder, lambda: tuple(data.get(0, 1).shape[1:]), min(len(data), batch_size)):
        for start, end, x in data.chunks(batch_size):
            yield start, end, frozen(x.to(run_device)).cpu().numpy()


def _encode_to_file(frozen: FrozenEncoder, data: Any, path: Path, batch_size: int,
                    device: torch.device | str | None) -> EmbeddingInputs:
    """:func:`compute_embeddings`' work with a ``cache_dir``: every input encoded chunk by chunk
    into the ``.npy`` file at ``path`` (written under a temporary name, then renamed)."""
    ensure_folder(path.parent)
    _remove_stale_temps(path)
    tmp = path.with_suffix(f".{os.getpid()}{_TEMP_SUFFIX}")
    writer: NpyWriter | None = None
    try:
        with contextlib.closing(_encoded_chunks(frozen, data, batch_size, device)) as chunks:
            for _, _, features in chunks:
                if writer is None:
                    # ordinary writes into space reserved up front: a full disk is an OSError
                    # (ENOSPC) here, never the SIGBUS of a write through a memory map
                    writer = NpyWriter(tmp, dtype=np.float32, shape=(len(data), features.shape[1]))
                writer.write(features)
        assert writer is not None
        writer.close()
        os.replace(tmp, path)
    except OSError as error:
        if writer is not None:
            writer.discard()
        tmp.unlink(missing_ok=True)
        raise renamed_error(error, tmp, path) from None
    except BaseException:  # an encoder error, Ctrl-C: no full-size temporary file is left behind
        if writer is not None:
            writer.discard()
        tmp.unlink(missing_ok=True)
        raise
    return EmbeddingInputs(np.load(path, mmap_mode="r"))


#: ``embeddings-<key>.<pid>`` + this: a cache file being written by process ``pid``
_TEMP_SUFFIX = ".tmp.npy"


def _remove_stale_temps(path: Path) -> None:
    """Remove the temporary files of ``path`` left by writers that were killed mid-way (SIGKILL):
    exactly ``<name>.<pid>.tmp.npy`` next to it, of a pid not running on this machine."""
    pattern = re.compile(rf"{re.escape(path.stem)}\.([0-9]+){re.escape(_TEMP_SUFFIX)}")
    remove_dead_writers_temps(path.parent, pattern, folders=False)
