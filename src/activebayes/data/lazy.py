"""Inputs read on demand: :class:`LazyInputs`, the out-of-core stand-in for an inputs tensor.

An :class:`~activebayes.data.ArrayDataset` holds its inputs either as a float32
tensor ``[N, ...]`` in memory or as a :class:`LazyInputs`: an array-like of the
same shape whose rows are read from disk and normalised only when indexed. It
behaves like the tensor wherever the code reads rows:

- ``len(x)``, ``x.shape`` (a ``torch.Size``), ``x.ndim``, ``x.dtype`` (``torch.float32``);
- ``x[i]`` (one item ``[...]``), ``x[a:b]``, ``x[index_n]`` (a LongTensor / NumPy
  array / list of row ids, or a boolean mask ``[N]``) and ``x[index_n, ...]`` return
  float32 tensors, bitwise equal to what the in-memory dataset holds;
- ``x.rows(index_n)`` is a lazy view of those rows (nothing is read), which
  :func:`~activebayes.models.predict_log_probs` streams through in chunks;
- ``x.iter_chunks(n)`` yields the rows in order, chunk by chunk (with a progress bar).

Memory: reading ``n`` rows holds ``n`` rows (their pixels and their float32
inputs), whatever N. Two implementations:

- :class:`MemmapInputs`: a uint8 ``.npy`` array ``[N, C, H, W]`` or ``[N, H, W]``
  opened with ``np.load(mmap_mode="r")``; after each read the touched pages are
  released from the process (``madvise(MADV_DONTNEED)``; they stay in the OS page
  cache), so streaming through a pool larger than memory keeps the resident set
  bounded.
- :class:`~activebayes.data.image_folder.ImageFileInputs`: image files decoded
  (and resized) per item.

Both pickle as a file name (plus the row ids of a view), never as data, so they
can be sent to DataLoader workers: ``DataLoader(x, batch_size=None,
sampler=BatchSampler(SequentialSampler(x), 256, False))`` reads one batch per call.

Example:
    >>> import numpy as np, tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pixels.npy"
    >>> np.save(path, np.arange(24, dtype=np.uint8).reshape(6, 2, 2))
    >>> x = MemmapInputs(path, normalization=None, scale=1.0)
    >>> x.shape, x.dtype
    (torch.Size([6, 1, 2, 2]), torch.float32)
    >>> x[torch.tensor([5, 0])][:, 0, 0, 0].tolist()
    [20.0, 0.0]
    >>> x.rows([4, 5])[1:].flatten().tolist()
    [20.0, 21.0, 22.0, 23.0]
"""

from __future__ import annotations

import mmap
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ._core import DataError, as_index_tensor, normalize_pixels
from activebayes.errors import InvalidArgumentError, InvalidIndexError, InvalidTypeError

__all__ = ["LazyInputs", "MemmapInputs", "RowsView"]

_FAULT_AROUND_BYTES = 1 << 20


class LazyInputs(ABC):
    """A read-only float32 array ``[N, ...]`` whose rows are read when indexed (see the module docstring).

    Subclasses implement :meth:`_read` (rows in any order -> float32 ``[n, ...]``)
    and may override :meth:`_read_range` for contiguous rows.
    """

    dtype = torch.float32

    def __init__(self, shape: tuple[int, ...]) -> None:
        self._shape = torch.Size(shape)
        if len(self._shape) < 2:
            raise InvalidArgumentError(f"lazy inputs must have shape [N, ...] with at least 2 dimensions, got {tuple(shape)}")

    # ------------------------------------------------------------------ tensor-like
    @property
    def shape(self) -> torch.Size:
        """``[N, *item_shape]`` like ``Tensor.shape``."""
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def size(self, dim: int | None = None) -> torch.Size | int:
        return self._shape if dim is None else self._shape[dim]

    def __len__(self) -> int:
        return int(self._shape[0])

    @property
    def item_shape(self) -> tuple[int, ...]:
        return tuple(self._shape[1:])

    def __getitem__(self, key: object) -> Tensor:
        """Rows as a float32 tensor: ``int`` -> ``[...]``, ``slice`` / index array / mask -> ``[n, ...]``."""
        if isinstance(key, tuple):
            if not key:
                return self[slice(None)]
            first, rest = key[0], key[1:]
            rows = self[first]
            if not rest:
                return rows
            dropped = isinstance(first, int | np.integer) or (isinstance(first, Tensor) and first.ndim == 0)
            return rows[rest] if dropped else rows[(slice(None), *rest)]
        n_rows = len(self)
        if isinstance(key, int | np.integer) and not isinstance(key, bool):
            index = int(key)
            if not -n_rows <= index < n_rows:
                raise InvalidIndexError(f"index {index} is out of bounds for dimension 0 with size {n_rows}")
            index %= n_rows
            return self._read_range(index, index + 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(n_rows)
            if step == 1:
                return self._read_range(start, max(start, stop))
            return self._read_checked(np.arange(start, stop, step, dtype=np.int64))
        if isinstance(key, Tensor | np.ndarray) and key.ndim == 0:
            return self[int(key)]
        rows = self._index_array(key)
        shape = rows.shape
        out = self._read_checked(rows.reshape(-1))
        return out.reshape(*shape, *self.item_shape)

    def _index_array(self, key: object) -> np.ndarray:
        if (isinstance(key, Tensor) and key.dtype == torch.bool) or (
            isinstance(key, np.ndarray) and key.dtype == np.bool_
        ):
            mask = key.cpu().numpy() if isinstance(key, Tensor) else key
            if mask.shape != (len(self),):
                raise InvalidIndexError(f"a boolean mask must have shape [N] = [{len(self)}], got {tuple(mask.shape)}")
            return np.flatnonzero(mask)
        if isinstance(key, Tensor | np.ndarray) and key.ndim > 1:
            flat = as_index_tensor(key.reshape(-1), "index")
            return flat.numpy().reshape(tuple(key.shape))
        try:
            return as_index_tensor(key, "index").numpy()
        except TypeError:
            raise InvalidTypeError(
                f"lazy inputs are indexed with an int, a slice, a boolean mask or integer row ids "
                f"(tensor, NumPy array, list), got {type(key).__name__}"
            ) from None

    def _checked_rows(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` as int64 in ``0 .. N-1`` (negative ids count from the end); IndexError otherwise."""
        n_rows = len(self)
        rows = rows.astype(np.int64, copy=False)
        if rows.size:
            low, high = int(rows.min()), int(rows.max())
            if low < -n_rows or high >= n_rows:
                bad = low if low < -n_rows else high
                raise InvalidIndexError(f"index {bad} is out of bounds for dimension 0 with size {n_rows}")
            if low < 0:
                rows = np.where(rows < 0, rows + n_rows, rows)
        return rows

    def _read_checked(self, rows: np.ndarray) -> Tensor:
        rows = self._checked_rows(rows)
        if rows.size == 0:
            return torch.empty((0, *self.item_shape), dtype=torch.float32)
        if rows.size > 1 and bool(np.all(np.diff(rows) == 1)):
            return self._read_range(int(rows[0]), int(rows[-1]) + 1)
        return self._read(rows)

    # ------------------------------------------------------------------ views and passes
    def rows(self, indices: object) -> LazyInputs:
        """A lazy view of rows ``indices`` (in that order); nothing is read until it is indexed."""
        return RowsView(self, self._checked_rows(self._index_array(indices).reshape(-1)).copy())

    def iter_chunks(self, chunk_size: int = 4096, *, progress: bool = False, desc: str = "read") -> Iterator[Tensor]:
        """Every row in order, as float32 tensors of at most ``chunk_size`` rows."""
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise InvalidArgumentError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        with tqdm(total=len(self), desc=desc, unit="item", disable=not progress, leave=False) as bar:
            for start in range(0, len(self), chunk_size):
                chunk = self._read_range(start, min(len(self), start + chunk_size))
                bar.update(chunk.shape[0])
                yield chunk

    def __iter__(self) -> Iterator[Tensor]:
        for chunk in self.iter_chunks():
            yield from chunk

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={tuple(self.shape)}, dtype=torch.float32)"

    # ------------------------------------------------------------------ reading
    @abstractmethod
    def _read(self, rows: np.ndarray) -> Tensor:
        """Float32 inputs ``[n, ...]`` of rows ``rows`` (int64, in range, any order, n >= 1)."""

    def _read_range(self, start: int, stop: int) -> Tensor:
        """Float32 inputs of rows ``start .. stop - 1`` (``0 <= start <= stop <= N``)."""
        if stop <= start:
            return torch.empty((0, *self.item_shape), dtype=torch.float32)
        return self._read(np.arange(start, stop, dtype=np.int64))


class RowsView(LazyInputs):
    """Rows ``rows_n`` of another :class:`LazyInputs` (what :meth:`LazyInputs.rows` returns)."""

    def __init__(self, base: LazyInputs, rows_n: np.ndarray) -> None:
        super().__init__((len(rows_n), *base.item_shape))
        self.base = base
        self.rows_n = rows_n

    def _read(self, rows: np.ndarray) -> Tensor:
        return self.base._read_checked(self.rows_n[rows])

    def _read_range(self, start: int, stop: int) -> Tensor:
        return self.base._read_checked(self.rows_n[start:stop])

    def rows(self, indices: object) -> LazyInputs:
        return RowsView(self.base, self.rows_n[self._checked_rows(self._index_array(indices).reshape(-1))])


class MemmapInputs(LazyInputs):
    """Rows of a uint8 ``.npy`` file, memory-mapped, normalised per read with :func:`normalize_pixels`.

    Args:
        path: the ``.npy`` file, uint8 ``[N, C, H, W]`` or ``[N, H, W]`` (read as ``[N, 1, H, W]``).
        normalization: ``(mean, std)``: inputs are ``(pixels / scale - mean) / std``;
            ``None``: ``pixels / scale``.
        scale: the pixel value that means 1 (255 for 8-bit images).

    Raises :class:`DataError` naming the file when it is missing, not a ``.npy``
    file, not uint8, of the wrong rank, or shorter than its header says.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, normalization: tuple[float, float] | None, scale: float = 255.0
    ) -> None:
        self.path = Path(path)
        self.normalization = None if normalization is None else (float(normalization[0]), float(normalization[1]))
        self.scale = float(scale)
        array = _open_npy(self.path)
        shape = tuple(array.shape)
        self._stored_shape = shape
        super().__init__(shape if len(shape) == 4 else (shape[0], 1, *shape[1:]))
        self._array: np.memmap | None = array

    @property
    def array(self) -> np.memmap:
        """The memory-mapped uint8 array as stored (reopened after unpickling)."""
        if self._array is None:
            array = _open_npy(self.path)
            if tuple(array.shape) != self._stored_shape:
                raise DataError(f"{self.path}: changed on disk: shape {tuple(array.shape)}, expected {self._stored_shape}")
            self._array = array
        return self._array

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_array"] = None
        return state

    def _pixels(self, pixels: np.ndarray) -> Tensor:
        tensor = torch.from_numpy(pixels)
        if tensor.ndim == 3:
            tensor = tensor.unsqueeze(1)
        return normalize_pixels(tensor, self.normalization, scale=self.scale)

    def _read(self, rows: np.ndarray) -> Tensor:
        array = self.array
        pixels = array[rows]  # NumPy copies the rows out of the map
        _release(array, int(rows.min()), int(rows.max()) + 1)
        return self._pixels(np.asarray(pixels))

    def _read_range(self, start: int, stop: int) -> Tensor:
        if stop <= start:
            return torch.empty((0, *self.item_shape), dtype=torch.float32)
        array = self.array
        pixels = np.array(array[start:stop])  # a copy: the map's pages are released next
        _release(array, start, stop)
        return self._pixels(pixels)


def _open_npy(path: Path) -> np.memmap:
    if not path.is_file():
        raise DataError(f"{path}: file not found (expected a uint8 .npy array [N, C, H, W] or [N, H, W])")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError) as exc:  # EOFError: an empty file (an interrupted copy)
        size = path.stat().st_size
        raise DataError(
            f"{path}: not a readable .npy array ({exc}); the file holds {size} bytes: "
            "truncated or corrupt, convert the data again"
        ) from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    if array.dtype != np.uint8:
        raise DataError(f"{path}: expected uint8 pixels, got dtype {array.dtype}")
    if array.ndim not in (3, 4):
        raise DataError(f"{path}: expected shape [N, C, H, W] or [N, H, W], got {tuple(array.shape)}")
    check_npy_size(path, array)
    return array  # type: ignore[return-value]


def check_npy_size(path: Path, array: np.memmap) -> None:
    """Raise :class:`DataError` unless the file ``array`` maps ends where the array does: NumPy
    maps the bytes its header names and ignores any after them (a second write appended, or
    another file's bytes), which no checksum of the array's content would see."""
    expected = int(array.offset) + int(array.nbytes)
    size = path.stat().st_size
    if size != expected:
        raise DataError(f"{path}: the file holds {size} bytes, but its header describes {expected} "
                        f"({size - expected} bytes after the array {tuple(array.shape)} {array.dtype}): "
                        "corrupt or written twice, convert the data again")


def _release(array: np.ndarray, start: int, stop: int) -> None:
    """Drop the pages of rows ``start .. stop - 1`` from this process (they stay in the page cache).

    A read-only shared file mapping loses nothing: the next access faults the
    pages back in. Without this, every page ever touched counts in the process's
    resident set until the map is closed.
    """
    handle = getattr(array, "_mmap", None)
    advise = getattr(mmap, "MADV_DONTNEED", None)
    if handle is None or advise is None or not hasattr(handle, "madvise"):
        return
    row_bytes = int(np.prod(array.shape[1:], dtype=np.int64)) * array.itemsize
    offset = int(getattr(array, "offset", 0))
    delta = offset - offset // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
    # widened by _FAULT_AROUND_BYTES each side: a page fault also maps the neighbouring
    # pages of its aligned window (Linux "fault-around", 64 KiB by default), which
    # belong to the rows before and after
    begin = max(0, delta + start * row_bytes - _FAULT_AROUND_BYTES)
    end = delta + stop * row_bytes + _FAULT_AROUND_BYTES
    begin -= begin % mmap.PAGESIZE
    end = min(len(handle), end + (-end) % mmap.PAGESIZE)
    if end > begin:
        try:
            handle.madvise(advise, begin, end - begin)
        except (OSError, ValueError):
            pass
