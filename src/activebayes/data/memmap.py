"""The memory-mapped dataset format: a folder of ``.npy`` files read on demand.

A pool larger than memory is stored once as 8-bit pixels and read row by row
(:class:`~activebayes.data.MemmapInputs`); only the targets (``N`` integers) and the
pool's bookkeeping live in memory. The folder::

    pool/
      meta.json      what the arrays are (below)
      inputs.npy     uint8 [N, C, H, W] or [N, H, W] (read as [N, 1, H, W])
      targets.npy    optional: labels [N], uint8 or int64, in 0 .. C-1
      paths.txt      optional: one source path per item (UTF-8, one per line)

``meta.json`` (version 1)::

    {"format": "activebayes-memmap", "version": 1,
     "name": "mnist", "classes": ["0", ..., "9"], "n_items": 10000,
     "inputs": {"file": "inputs.npy", "dtype": "uint8", "shape": [10000, 28, 28], "sha256": "..."},
     "targets": {"file": "targets.npy", "dtype": "uint8", "shape": [10000], "sha256": "..."},  # or null
     "paths": {"file": "paths.txt", "sha256": "..."},                                           # or null
     "normalization": {"scale": 255.0, "mean": 0.1307, "std": 0.3081},   # std/mean null: pixels / scale
     "source": "free text: where the data came from"}

Each ``sha256`` is over content: the array's data bytes in C order (not the
``.npy`` header, which differs between NumPy versions), and the bytes of
``paths.txt``. Inputs are ``(pixels / scale - mean) / std``
(:func:`~activebayes.data.normalize_pixels`), exactly what the in-memory loaders
compute, so a converted dataset gives bitwise the same items.

Write one with :func:`~activebayes.data.convert_to_memmap` (IDX files, image
folders) or :func:`write_memmap` (arrays or chunks of them); read it with
:func:`load_memmap`, or ``load_dataset("memmap", data_dir=FOLDER, split=...)``
where ``FOLDER`` is such a folder (split ``"train"``) or holds one per split
(``FOLDER/train``, ``FOLDER/test``).

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp()) / "pool"
    >>> pixels = np.arange(4 * 9, dtype=np.uint8).reshape(4, 3, 3)
    >>> _ = write_memmap(folder, pixels, targets=np.array([0, 1, 1, 0]), classes=["a", "b"],
    ...                  name="toy", normalization=(0.5, 0.25), progress=False)
    >>> ds = load_memmap(folder, verify=True)
    >>> ds.is_lazy, len(ds), ds.input_shape, ds.targets.tolist()
    (True, 4, (1, 3, 3), [0, 1, 1, 0])
    >>> torch.equal(ds.inputs[2, 0], (torch.from_numpy(pixels[2]).float() / 255 - 0.5) / 0.25)
    True
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import re
import shutil
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .._io import (NpyWriter, _current_umask, _fsync_dir, atomic_write_text, ensure_folder,
                   remove_dead_writers_temps, renamed_error)
from ._core import DataError, MissingSplitError
from .dataset import ArrayDataset
from .image_folder import PixelStats
from .lazy import MemmapInputs, _release, check_npy_size
from activebayes import _progress
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "MEMMAP_FORMAT",
    "MEMMAP_VERSION",
    "MemmapMeta",
    "MemmapWriter",
    "is_memmap_folder",
    "load_memmap",
    "load_memmap_split",
    "memmap_content_sha256",
    "write_memmap",
]

MEMMAP_FORMAT = "activebayes-memmap"
MEMMAP_VERSION = 1
META_FILE = "meta.json"
INPUTS_FILE = "inputs.npy"
TARGETS_FILE = "targets.npy"
PATHS_FILE = "paths.txt"
_TARGET_DTYPES = ("uint8", "int64")


@dataclass(frozen=True)
class MemmapMeta:
    """The parsed ``meta.json`` of a memory-mapped dataset folder (see the module docstring)."""

    name: str
    classes: tuple[str, ...]
    n_items: int
    inputs_shape: tuple[int, ...]
    inputs_sha256: str
    inputs_dtype: str = "uint8"
    targets_dtype: str | None = None
    targets_sha256: str | None = None
    paths_sha256: str | None = None
    normalization: tuple[float, float] | None = None
    scale: float = 255.0
    source: str = ""
    version: int = MEMMAP_VERSION

    def to_json(self) -> dict[str, Any]:
        targets = None
        if self.targets_dtype is not None:
            targets = {"file": TARGETS_FILE, "dtype": self.targets_dtype, "shape": [self.n_items],
                       "sha256": self.targets_sha256}
        mean, std = self.normalization if self.normalization is not None else (None, None)
        return {
            "format": MEMMAP_FORMAT,
            "version": self.version,
            "name": self.name,
            "classes": list(self.classes),
            "n_items": self.n_items,
            "inputs": {"file": INPUTS_FILE, "dtype": self.inputs_dtype, "shape": list(self.inputs_shape),
                       "sha256": self.inputs_sha256},
            "targets": targets,
            "paths": None if self.paths_sha256 is None else {"file": PATHS_FILE, "sha256": self.paths_sha256},
            "normalization": {"scale": self.scale, "mean": mean, "std": std},
            "source": self.source,
        }

    @classmethod
    def read(cls, folder: Path) -> MemmapMeta:
        """Parse and validate ``folder/meta.json``; :class:`DataError` naming the file and the field."""
        path = folder / META_FILE
        if not path.is_file():
            what = "does not exist" if not folder.exists() else "has no meta.json"
            raise DataError(
                f"{path}: file not found: the memmap dataset folder {folder} {what} (expected meta.json, "
                f"{INPUTS_FILE} and optionally {TARGETS_FILE}, as written by convert_to_memmap)"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise DataError(f"{path}: expected a JSON object, got {type(data).__name__}")
        if data.get("format") != MEMMAP_FORMAT:
            raise DataError(f"{path}: format {data.get('format')!r}, expected {MEMMAP_FORMAT!r}")
        version = data.get("version")
        if not isinstance(version, int) or version < 1 or version > MEMMAP_VERSION:
            raise DataError(f"{path}: version {version!r} is not supported (this activebayes reads 1 .. {MEMMAP_VERSION})")

        def field(name: str, kind: type | tuple[type, ...], where: dict[str, Any] = data, label: str = "") -> Any:
            if name not in where:
                raise DataError(f"{path}: missing field {label + name!r}")
            value = where[name]
            if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
                raise DataError(f"{path}: field {label + name!r} must be {_kind_name(kind)}, got {value!r}")
            return value

        name = field("name", str)
        classes = field("classes", list)
        if not all(isinstance(c, str) for c in classes):
            raise DataError(f"{path}: field 'classes' must be a list of str, got {classes!r}")
        duplicated = [c for c, count in Counter(classes).items() if count > 1]
        if duplicated:
            raise DataError(f"{path}: field 'classes' must hold unique names, got "
                            f"{', '.join(map(repr, duplicated))} more than once")
        n_items = field("n_items", int)
        inputs = field("inputs", dict)
        _check_file_field(path, field("file", str, inputs, "inputs."), "inputs", INPUTS_FILE)
        inputs_dtype = field("dtype", str, inputs, "inputs.")
        shape = field("shape", list, inputs, "inputs.")
        if len(shape) not in (3, 4) or not all(isinstance(v, int) and v >= 0 for v in shape) or shape[0] != n_items:
            raise DataError(f"{path}: field 'inputs.shape' must be [N, C, H, W] or [N, H, W] with N = n_items "
                            f"= {n_items}, got {shape!r}")
        inputs_sha = field("sha256", str, inputs, "inputs.")
        targets = data.get("targets")
        targets_dtype = targets_sha = None
        if targets is not None:
            if not isinstance(targets, dict):
                raise DataError(f"{path}: field 'targets' must be an object or null, got {targets!r}")
            _check_file_field(path, field("file", str, targets, "targets."), "targets", TARGETS_FILE)
            targets_dtype = field("dtype", str, targets, "targets.")
            if targets_dtype not in _TARGET_DTYPES:
                raise DataError(f"{path}: field 'targets.dtype' must be one of {_TARGET_DTYPES}, got {targets_dtype!r}")
            targets_sha = field("sha256", str, targets, "targets.")
            if not classes:
                raise DataError(f"{path}: targets are given but 'classes' is empty")
        paths = data.get("paths")
        paths_sha = None
        if paths is not None:
            if not isinstance(paths, dict):
                raise DataError(f"{path}: field 'paths' must be an object or null, got {paths!r}")
            _check_file_field(path, field("file", str, paths, "paths."), "paths", PATHS_FILE)
            paths_sha = field("sha256", str, paths, "paths.")
        norm = field("normalization", dict)
        scale = field("scale", int | float, norm, "normalization.")
        mean, std = norm.get("mean"), norm.get("std")
        normalization = None
        if mean is not None or std is not None:
            if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (mean, std)):
                raise DataError(f"{path}: normalization mean and std must both be numbers or both null, "
                                f"got {mean!r} and {std!r}")
            if not std > 0:
                raise DataError(f"{path}: normalization std must be > 0, got {std!r}")
            normalization = (float(mean), float(std))
        if not (math.isfinite(scale) and scale > 0):  # inf made every input 0, nan every input nan
            raise DataError(f"{path}: field 'normalization.scale' must be a finite number > 0, got {scale!r}")
        return cls(
            name=name,
            classes=tuple(classes),
            n_items=n_items,
            inputs_shape=tuple(shape),
            inputs_sha256=inputs_sha,
            inputs_dtype=inputs_dtype,
            targets_dtype=targets_dtype,
            targets_sha256=targets_sha,
            paths_sha256=paths_sha,
            normalization=normalization,
            scale=float(scale),
            source=str(data.get("source", "")),
            version=version,
        )


def _check_file_field(path: Path, stored: str, what: str, expected: str) -> None:
    """``meta.json``'s ``{what}.file`` must name the file this format reads (the names are fixed)."""
    if stored != expected:
        raise DataError(f"{path}: field '{what}.file' is {stored!r}, but the {what} are read from "
                        f"{path.parent / expected}")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a str", int: "an int", list: "a list", dict: "an object", float: "a number"}
    kinds = kind if isinstance(kind, tuple) else getattr(kind, "__args__", (kind,))
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def is_memmap_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a ``meta.json`` of this format (not validated further)."""
    meta = Path(path) / META_FILE
    if not meta.is_file():
        return False
    try:
        return json.loads(meta.read_text(encoding="utf-8")).get("format") == MEMMAP_FORMAT
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return False


# --------------------------------------------------------------------------- reading


def memmap_content_sha256(array: np.ndarray, *, chunk_items: int = 8192, progress: bool = False,
                          desc: str = "sha256") -> str:
    """sha256 of an array's data bytes in C order, read in chunks (memory-mapped pages released as it goes)."""
    digest = hashlib.sha256()
    n_items = array.shape[0] if array.ndim else 1
    with tqdm(total=n_items, desc=desc, unit="item", disable=not progress, leave=False) as bar:
        for start in range(0, n_items, chunk_items):
            stop = min(n_items, start + chunk_items)
            digest.update(np.ascontiguousarray(array[start:stop]))
            if isinstance(array, np.memmap):
                _release(array, start, stop)
            bar.update(stop - start)
    return digest.hexdigest()


def load_memmap(path: str | os.PathLike[str], *, verify: bool = False, progress: bool = False) -> ArrayDataset:
    """Open a memory-mapped dataset folder as an :class:`ArrayDataset` with lazy inputs.

    Args:
        path: the folder (``meta.json``, ``inputs.npy``, optional ``targets.npy`` / ``paths.txt``).
        verify: also recompute every file's content sha256 and compare it with
            ``meta.json`` (reads the whole pool once, with a progress bar when
            ``progress``). Without it, only the structure is checked: formats, dtypes,
            shapes, sizes (a truncated file is caught), label range, path count.
        progress: progress bars for ``verify``.

    Returns a dataset whose ``inputs`` is a :class:`~activebayes.data.MemmapInputs`
    (rows read and normalised when indexed) and whose ``targets`` (int64) and
    ``paths`` are in memory. Raises :class:`DataError` naming the file, what was
    expected and what was found.
    """
    folder = Path(path).expanduser().absolute()  # workers elsewhere (Ray actors) open it by this path
    meta = MemmapMeta.read(folder)
    inputs_path = folder / INPUTS_FILE
    inputs = MemmapInputs(inputs_path, normalization=meta.normalization, scale=meta.scale)
    if tuple(inputs.array.shape) != meta.inputs_shape:
        raise DataError(
            f"{inputs_path}: shape {tuple(inputs.array.shape)}, but {META_FILE} says {meta.inputs_shape}"
        )
    if str(inputs.array.dtype) != meta.inputs_dtype:
        raise DataError(f"{folder / META_FILE}: field 'inputs.dtype' is {meta.inputs_dtype!r}, but "
                        f"{inputs_path} holds {inputs.array.dtype}")
    targets = None
    if meta.targets_dtype is not None:
        targets_path = folder / TARGETS_FILE
        if not targets_path.is_file():
            raise DataError(f"{targets_path}: file not found ({META_FILE} says the dataset has targets)")
        try:
            mapped = np.load(targets_path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise DataError(f"{targets_path}: not a readable .npy array ({exc}): truncated or corrupt") from None
        check_npy_size(targets_path, mapped)
        labels = np.array(mapped)
        del mapped
        if labels.dtype != np.dtype(meta.targets_dtype) or labels.shape != (meta.n_items,):
            raise DataError(
                f"{targets_path}: expected {meta.targets_dtype} labels of shape ({meta.n_items},), "
                f"got {labels.dtype} of shape {labels.shape}"
            )
        if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= len(meta.classes)):
            raise DataError(
                f"{targets_path}: labels must lie in 0 .. {len(meta.classes) - 1} ({len(meta.classes)} classes), "
                f"got values from {int(labels.min())} to {int(labels.max())}"
            )
        if verify:
            _check_sha(targets_path, hashlib.sha256(np.ascontiguousarray(labels).tobytes()).hexdigest(),
                       meta.targets_sha256)
        targets = torch.from_numpy(labels.astype(np.int64))
    paths = None
    if meta.paths_sha256 is not None:
        paths_path = folder / PATHS_FILE
        if not paths_path.is_file():
            raise DataError(f"{paths_path}: file not found ({META_FILE} says the dataset has paths)")
        blob = paths_path.read_bytes()
        if verify:
            _check_sha(paths_path, hashlib.sha256(blob).hexdigest(), meta.paths_sha256)
        lines = blob.decode("utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) != meta.n_items:
            raise DataError(f"{paths_path}: expected {meta.n_items} lines (one path per item), got {len(lines)}")
        paths = tuple(lines)
    if verify:
        found = memmap_content_sha256(inputs.array, progress=progress, desc=f"verify {meta.name}")
        _check_sha(inputs_path, found, meta.inputs_sha256)
    return ArrayDataset(
        inputs=inputs,
        targets=targets,
        classes=meta.classes,
        name=meta.name,
        paths=paths,
        normalization=meta.normalization,
    )


def _check_sha(path: Path, found: str, expected: str | None) -> None:
    if found != expected:
        raise DataError(
            f"{path}: content checksum mismatch: sha256 {found}, expected {expected} ({META_FILE}); "
            "the file changed after it was written or is corrupt: convert the data again"
        )


def load_memmap_split(
    split: str,
    *,
    data_dir: str | os.PathLike[str] | None,
    download: bool = False,
    mirrors: Sequence[str] | None = None,
    progress: bool = False,
) -> ArrayDataset:
    """The ``"memmap"`` entry of :func:`~activebayes.data.load_dataset`.

    ``data_dir`` is a memmap dataset folder (used for split ``"train"``) or a folder
    holding one per split (``data_dir/train``, ``data_dir/test``).
    """
    del download, mirrors  # nothing to download: the folder is written by convert_to_memmap
    if data_dir is None:
        raise DataError(
            "dataset 'memmap' needs data_dir=<folder written by convert_to_memmap> "
            "(or a folder holding train/ and test/ such folders)"
        )
    root = Path(data_dir).expanduser()
    folders = [root / split] + ([root] if split == "train" else [])
    for folder in folders:
        if is_memmap_folder(folder):
            return load_memmap(folder, progress=progress)
    for folder in folders:  # a meta.json that is damaged or not this format's: MemmapMeta.read says what is wrong
        if (folder / META_FILE).is_file():
            return load_memmap(folder, progress=progress)
    looked = [str(folder / META_FILE) for folder in folders]
    raise MissingSplitError(
        f"memmap dataset split {split!r} not found: looked for {' and '.join(looked)}. "
        f"Write it with `activebayes convert SOURCE {root / split}{' --split test' if split == 'test' else ''}` "
        f"(convert_to_memmap(SOURCE, {str(root / split)!r}))"
        + ("; or run without a test set (--no-test, evaluate_test=False)" if split == "test" else "")
    )


# --------------------------------------------------------------------------- writing


class MemmapWriter:
    """Write a memmap dataset folder chunk by chunk, atomically.

    Everything goes into a temporary folder next to ``destination`` that is
    renamed into place by :meth:`finish`; on any error (or :meth:`abort`) it is
    removed and ``destination`` is untouched. The temporary folders of writers
    of the same ``destination`` that were killed mid-way are removed as a new
    one starts. ``inputs.npy`` is written with ordinary writes into space
    reserved up front, so a full disk is an :class:`OSError` naming
    ``destination`` (never a ``SIGBUS``), as every other error of the file system is. Chunks must come in row order; the
    content sha256 and the pixel statistics are accumulated as they pass, so the
    pool is never held in memory.

    Args:
        destination: the folder to create. If it exists it must be a memmap dataset
            folder and ``overwrite=True`` (any other folder is never replaced).
        n_items: the number of rows ``inputs.npy`` will hold.
        item_shape: the shape of one row, ``(C, H, W)`` or ``(H, W)``.
        overwrite: replace an existing memmap dataset folder at ``destination``.
    """

    def __init__(self, destination: str | os.PathLike[str], *, n_items: int, item_shape: Sequence[int],
                 overwrite: bool = False) -> None:
        self.destination = Path(destination).expanduser()
        check_destination(self.destination, overwrite=overwrite)
        item_shape = tuple(int(v) for v in item_shape)
        if len(item_shape) not in (2, 3) or min(item_shape) < 1:
            raise InvalidArgumentError(f"item_shape must be (C, H, W) or (H, W) with positive sizes, got {item_shape}")
        if isinstance(n_items, bool) or not isinstance(n_items, int) or n_items < 0:
            raise InvalidArgumentError(f"n_items must be an int >= 0, got {n_items!r}")
        self.n_items = n_items
        self.item_shape = item_shape
        ensure_folder(self.destination.parent)
        _remove_stale_temps(self.destination)
        try:
            self.tmp = Path(tempfile.mkdtemp(dir=self.destination.parent, prefix=_temp_prefix(self.destination),
                                             suffix=_TEMP_SUFFIX))
        except OSError as error:  # a read-only or full disk: name the folder the user gave, not ours
            if error.errno is not None:
                error.filename, error.filename2 = str(self.destination), None
            raise
        try:
            os.chmod(self.tmp, 0o777 & ~_current_umask())
            # ordinary writes into space reserved up front: a full disk is an OSError (ENOSPC)
            # here, never the SIGBUS that kills a process writing through a memory map
            self._inputs = NpyWriter(self.tmp / INPUTS_FILE, dtype=np.uint8, shape=(n_items, *item_shape))
        except OSError as error:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise self._named(error) from None
        except BaseException:
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise
        self._digest = hashlib.sha256()
        self.stats = PixelStats()
        self.written = 0

    def write(self, pixels: np.ndarray) -> None:
        """Append rows ``pixels`` (uint8 ``[n, *item_shape]``)."""
        pixels = np.asarray(pixels)
        if pixels.dtype != np.uint8:
            raise InvalidTypeError(f"pixels must be uint8, got dtype {pixels.dtype}")
        if tuple(pixels.shape[1:]) != self.item_shape or pixels.ndim != len(self.item_shape) + 1:
            raise InvalidArgumentError(f"pixels must have shape [n, {', '.join(map(str, self.item_shape))}], "
                             f"got {tuple(pixels.shape)}")
        n = pixels.shape[0]
        if self.written + n > self.n_items:
            raise InvalidArgumentError(f"more rows than n_items = {self.n_items}: {self.written} + {n}")
        pixels = np.ascontiguousarray(pixels)
        try:
            self._inputs.write(pixels)
        except OSError as error:
            raise self._named(error) from None
        self._digest.update(pixels)
        self.stats.update(pixels)
        self.written += n

    def finish(
        self,
        *,
        name: str,
        classes: Sequence[str],
        targets: np.ndarray | torch.Tensor | Sequence[int] | None = None,
        paths: Sequence[str] | None = None,
        normalization: tuple[float, float] | None | str = "standardize",
        scale: float = 255.0,
        source: str = "",
    ) -> Path:
        """Write targets, paths and ``meta.json``, then rename the folder into place; returns it.

        ``normalization``: ``(mean, std)``, ``None`` (inputs = pixels / scale) or
        ``"standardize"``: the exact mean and std of the pixels written (as
        :func:`~activebayes.data.image_folder` computes them).
        """
        try:
            if self.written != self.n_items:
                raise InvalidArgumentError(f"{self.written} rows were written, expected n_items = {self.n_items}")
            if not isinstance(name, str) or not name:
                raise InvalidArgumentError(f"name must be a non-empty str, got {name!r}")
            class_names = tuple(str(c) for c in classes)
            if len(set(class_names)) != len(class_names):
                raise InvalidArgumentError(f"classes must be unique, got {list(class_names)}")
            if (isinstance(scale, bool) or not isinstance(scale, numbers.Real)
                    or not (math.isfinite(scale) and scale > 0)):
                raise InvalidArgumentError(f"scale must be a finite number > 0, got {scale!r}")
            if isinstance(normalization, str):
                if normalization != "standardize":
                    raise InvalidArgumentError(f"normalization must be (mean, std), None or 'standardize', got {normalization!r}")
                normalization = self.stats.normalization() if self.n_items else None
            elif normalization is not None:
                mean, std = (float(v) for v in normalization)
                if not (math.isfinite(mean) and math.isfinite(std) and std > 0):
                    raise InvalidArgumentError(f"normalization must be finite (mean, std) with std > 0, got {normalization!r}")
                normalization = (mean, std)
            self._inputs.close()
            targets_dtype = targets_sha = None
            if targets is not None:
                labels = _labels_array(targets, self.n_items, len(class_names))
                np.save(self.tmp / TARGETS_FILE, labels)
                targets_dtype, targets_sha = str(labels.dtype), hashlib.sha256(labels.tobytes()).hexdigest()
            paths_sha = None
            if paths is not None:
                paths = [str(p) for p in paths]
                if len(paths) != self.n_items:
                    raise InvalidArgumentError(f"paths must have one entry per item ({self.n_items}), got {len(paths)}")
                if any("\n" in p or "\r" in p for p in paths):
                    raise InvalidArgumentError("paths must not contain line breaks")
                blob = "".join(p + "\n" for p in paths).encode("utf-8")
                (self.tmp / PATHS_FILE).write_bytes(blob)
                paths_sha = hashlib.sha256(blob).hexdigest()
            meta = MemmapMeta(
                name=name,
                classes=class_names,
                n_items=self.n_items,
                inputs_shape=(self.n_items, *self.item_shape),
                inputs_sha256=self._digest.hexdigest(),
                targets_dtype=targets_dtype,
                targets_sha256=targets_sha,
                paths_sha256=paths_sha,
                normalization=normalization,
                scale=float(scale),
                source=source,
            )
            atomic_write_text(self.tmp / META_FILE, json.dumps(meta.to_json(), indent=2) + "\n")
            for file in self.tmp.iterdir():
                _fsync_file(file)
            _fsync_dir(self.tmp)
            _move_into_place(self.tmp, self.destination)
            del self._inputs
        except OSError as error:
            self.abort()
            raise self._named(error) from None
        except BaseException:
            self.abort()
            raise
        return self.destination

    def abort(self) -> None:
        """Remove the temporary folder (``destination`` stays as it was)."""
        inputs = self.__dict__.pop("_inputs", None)
        if inputs is not None:
            inputs.discard()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _named(self, error: OSError) -> OSError:
        """``error`` naming ``destination`` (the folder the user gave), not the temporary folder:
        ``mm: no space left on device``, not ``.mm.123.x1y2.tmp/inputs.npy``."""
        return renamed_error(error, self.tmp, self.destination)

    def __enter__(self) -> MemmapWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            self.abort()


_TEMP_SUFFIX = ".tmp"


def _temp_prefix(destination: Path) -> str:
    """The start of the temporary folder's name: ``.NAME.PID.`` (``mkdtemp`` adds 8 random
    characters and :data:`_TEMP_SUFFIX`); the pid tells a dead writer's folder from a live one's."""
    return f".{destination.name}.{os.getpid()}."


def _remove_stale_temps(destination: Path) -> None:
    """Remove the temporary folders that writers of ``destination`` killed mid-way left behind:
    exactly ``.NAME.PID.XXXXXXXX.tmp`` next to it, of a pid not running on this machine."""
    pattern = re.compile(rf"\.{re.escape(destination.name)}\.([0-9]+)\.[a-z0-9_]{{8}}{re.escape(_TEMP_SUFFIX)}")
    remove_dead_writers_temps(destination.parent, pattern, folders=True)


def check_destination(destination: Path, *, overwrite: bool) -> None:
    """Fail early unless ``destination`` is free, or an existing memmap dataset folder to overwrite."""
    if not destination.exists():
        return
    if destination.is_dir() and not any(destination.iterdir()):
        return  # an empty folder made for it: used as it is
    if not is_memmap_folder(destination):  # never replaced, so overwrite=True is no advice to give
        if (destination / META_FILE).is_file():
            what = f"a folder whose {META_FILE} is damaged or not of format {MEMMAP_FORMAT!r}"
        else:
            what = f"{'a folder' if destination.is_dir() else 'a file'}, no {META_FILE} of format {MEMMAP_FORMAT!r}"
        raise DataError(
            f"{destination} exists and is not a memmap dataset folder ({what}); refusing to replace it, even with "
            "overwrite=True: choose another destination, or remove it yourself if it is not needed"
        )
    if not overwrite:
        raise DataError(f"{destination} already exists; pass overwrite=True (--overwrite) to replace it")


def _labels_array(targets: object, n_items: int, n_classes: int) -> np.ndarray:
    labels = np.asarray(targets.cpu() if isinstance(targets, torch.Tensor) else targets)
    if labels.dtype.kind not in "iu":
        raise InvalidTypeError(f"targets must be integers, got dtype {labels.dtype}")
    if labels.shape != (n_items,):
        raise InvalidArgumentError(f"targets must have shape [N] = [{n_items}], got {labels.shape}")
    if labels.size and (int(labels.min()) < 0 or int(labels.max()) >= n_classes):
        raise InvalidArgumentError(f"targets must lie in 0 .. {n_classes - 1} ({n_classes} classes), "
                         f"got {int(labels.min())} .. {int(labels.max())}")
    return labels.astype(np.uint8 if n_classes <= 256 else np.int64)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _move_into_place(tmp: Path, destination: Path) -> None:
    """Rename ``tmp`` to ``destination``; an existing destination (checked to be ours) is swapped out first."""
    old = None
    if destination.exists():
        old = Path(tempfile.mkdtemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".old"))
        os.rmdir(old)
        os.rename(destination, old)
    try:
        os.rename(tmp, destination)
    except BaseException:
        if old is not None:
            os.rename(old, destination)
        raise
    _fsync_dir(destination.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_memmap(
    destination: str | os.PathLike[str],
    pixels: np.ndarray | Iterable[np.ndarray],
    *,
    n_items: int | None = None,
    targets: np.ndarray | torch.Tensor | Sequence[int] | None = None,
    classes: Sequence[str] | None = None,
    name: str | None = None,
    paths: Sequence[str] | None = None,
    normalization: tuple[float, float] | None | str = "standardize",
    source: str = "",
    overwrite: bool = False,
    chunk_items: int = 8192,
    progress: bool | None = None,
) -> Path:
    """Write uint8 pixels (one array, or chunks of rows) as a memmap dataset folder, atomically.

    Args:
        destination: the folder to create (see :class:`MemmapWriter` for ``overwrite``).
        pixels: uint8 ``[N, C, H, W]`` / ``[N, H, W]`` array (NumPy or torch), or an iterable of
            such chunks (then ``n_items`` is required; only one chunk is in memory at a time).
            Channels first: ``[N, H, W, 3]`` images warn (``pixels.transpose(0, 3, 1, 2)``).
        chunk_items: rows written at a time from one array.
        targets: labels ``[N]`` in ``0 .. C-1`` or ``None``.
        classes: class names; default ``"0" .. str(max(targets))`` (none without targets).
        name: dataset name; default the destination folder's name.
        paths: one source path per item, or ``None``.
        normalization: ``(mean, std)``, ``None`` (inputs = pixels / 255) or
            ``"standardize"`` (the pixels' own exact mean and std).
        progress: a progress bar over the items written (``None``, the default: when stderr is
            a terminal).

    Returns the destination folder.
    """
    progress = _progress.shown(progress)
    order = "; the order is write_memmap(destination, pixels, ...)"
    if not isinstance(destination, str | os.PathLike):
        raise InvalidTypeError(f"destination must be a folder path, got {type(destination).__name__}"
                               + (order if isinstance(pixels, str | os.PathLike) else ""))
    if isinstance(pixels, str | bytes | os.PathLike):
        raise InvalidTypeError(f"pixels must be a uint8 array or an iterable of such chunks, got a path {pixels!r}"
                               f"{order}; to convert files, use convert_to_memmap(source, destination)")
    destination = Path(destination).expanduser()
    if isinstance(chunk_items, bool) or not isinstance(chunk_items, numbers.Integral) or chunk_items < 1:
        raise InvalidArgumentError(f"chunk_items must be an int >= 1, got {chunk_items!r}")
    chunk_items = int(chunk_items)
    if isinstance(pixels, torch.Tensor):  # one tensor is one array, not an iterable of rows
        pixels = pixels.detach().cpu().numpy()
    if isinstance(pixels, np.ndarray):
        _warn_if_channels_last(pixels.shape)
        if n_items is not None and n_items != pixels.shape[0]:
            raise InvalidArgumentError(f"n_items = {n_items} does not match pixels of shape {pixels.shape}")
        n_items = int(pixels.shape[0])
        array = pixels
        chunks: Iterator[np.ndarray] = (array[i : i + chunk_items] for i in range(0, n_items, chunk_items))
        item_shape = tuple(array.shape[1:])
        first = None
    else:
        if n_items is None:
            raise InvalidArgumentError("n_items is required when pixels is an iterable of chunks")
        chunks = iter(pixels)
        first = next(chunks, None)
        if first is None:
            raise InvalidArgumentError("pixels yielded no chunk")
        first = np.asarray(first.detach().cpu() if isinstance(first, torch.Tensor) else first)
        item_shape = tuple(first.shape[1:])
        _warn_if_channels_last(first.shape)
    if targets is not None:  # checked before any pixel is written
        labels = np.asarray(targets.detach().cpu() if isinstance(targets, torch.Tensor) else targets)
        if labels.shape != (n_items,):
            raise InvalidArgumentError(f"targets must have shape [N] = [{n_items}] (one label per item), "
                                       f"got {labels.shape}")
        if labels.dtype.kind in "iu" and labels.size and int(labels.min()) < 0:
            first_bad = int(np.flatnonzero(labels < 0)[0])
            raise InvalidArgumentError(
                f"targets must be class ids >= 0, got {int(labels[first_bad])} at item {first_bad} "
                "(an 'unlabelled' marker has no place here: write targets=None)")
        if classes is None:
            classes = tuple(str(c) for c in range(int(labels.max()) + 1 if labels.size else 0))
    elif classes is None:
        classes = ()
    if paths is not None and len(paths) != n_items:
        raise InvalidArgumentError(f"paths must have one entry per item ({n_items}), got {len(paths)}")
    with MemmapWriter(destination, n_items=n_items, item_shape=item_shape, overwrite=overwrite) as writer:
        with tqdm(total=n_items, desc=f"write {destination.name}", unit="item", disable=not progress,
                  leave=False) as bar:
            for chunk in _chain(first, chunks):
                writer.write(chunk)
                bar.update(len(chunk))
        return writer.finish(name=name or destination.name, classes=classes, targets=targets, paths=paths,
                             normalization=normalization, source=source)


def _warn_if_channels_last(shape: tuple[int, ...]) -> None:
    """``[N, H, W, 3]`` (PIL's and most NumPy images' layout) would be read as H channels of
    W x 3 images; memmap items are channels first."""
    if len(shape) == 4 and shape[-1] in (1, 3, 4) and shape[1] not in (1, 3, 4):
        warnings.warn(
            f"pixels of shape {tuple(shape)} look channels-last ([N, H, W, C]); memmap items are [C, H, W], "
            f"so these would be {shape[1]} channels of {shape[2]} x {shape[3]} images. "
            "Pass pixels.transpose(0, 3, 1, 2) (NumPy) or pixels.permute(0, 3, 1, 2) (torch)",
            UserWarning, stacklevel=3)


def _chain(first: np.ndarray | None, rest: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    if first is not None:
        yield first
    for chunk in rest:
        yield chunk.detach().cpu().numpy() if isinstance(chunk, torch.Tensor) else chunk
