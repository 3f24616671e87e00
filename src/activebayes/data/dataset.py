"""The dataset every part of activebayes works on: :class:`ArrayDataset`.

A dataset is a float32 input tensor ``inputs_N_...`` (e.g. ``[N, 1, 28, 28]``,
standardised) held in memory, or a :class:`~activebayes.data.LazyInputs` of the
same shape whose rows are read from disk on demand (pools larger than memory:
:func:`~activebayes.data.load_memmap`, ``image_folder(..., lazy=True)``), optional
integer labels ``targets_N`` in ``0 .. C-1`` (``None`` for
unlabelled data), the class names, a name, and for image folders the file path
of every item. Everything downstream (the pool, oracles, the loop) refers to
items by their row ``0 .. N-1`` in this dataset.

Example:
    >>> import numpy as np
    >>> ds = from_arrays(np.zeros((4, 2), dtype=np.float32), np.array([0, 1, 1, 0]))
    >>> len(ds), ds.num_classes, ds.input_shape
    (4, 2, (2,))
    >>> ds.subset([1, 2]).targets.tolist()
    [1, 1]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ._core import DataError, as_index_tensor, normalize_pixels
from .lazy import LazyInputs
from activebayes.errors import InvalidArgumentError, InvalidIndexError, InvalidTypeError

__all__ = ["ArrayDataset", "DataError", "from_arrays", "as_index_tensor", "normalize_pixels"]


@dataclass(frozen=True, eq=False)
class ArrayDataset:
    """Inputs, optional labels and class names.

    Attributes:
        inputs: float32 tensor ``[N, ...]`` (images ``[N, 1, H, W]``, standardised), or a
            :class:`~activebayes.data.LazyInputs` of that shape and dtype read on demand
            (indexing it gives the same float32 tensors; see :meth:`rows`).
        targets: int64 tensor ``[N]`` with values in ``0 .. C-1``, or for a multi-label task
            0/1 indicators ``targets_N_C`` (``[N, C]``, :attr:`multilabel`), or ``None`` when unlabelled.
            A multi-label row with no positive class is allowed here (a test set may have such
            items) but not in a pool: :meth:`~activebayes.data.Pool.create` refuses it,
            since a multi-label answer needs at least one class.
        classes: the C class names; ``targets == c`` means class ``classes[c]``.
        name: a short name ("digits", "mnist", a folder name, ...).
        paths: for image folders, the file of every item (``len(paths) == N``); else ``None``.
        item_ids: for tables, the stable id of every row (its id column, or a hash of its
            content; ``len(item_ids) == N``, unique), which the row's position is not; else ``None``.
        item_sha256: for tables, the hex SHA-256 of every row's input cells (its text and
            feature columns; :func:`~activebayes.data.table.row_content_sha256`), so that a row
            edited under the same id is told apart from the one a label was given for; else ``None``.
        normalization: ``(mean, std)`` such that ``inputs = (pixels - mean) / std`` with
            pixels scaled to ``[0, 1]``; ``None`` when the inputs are not images scaled that way.
            Used to turn inputs back into pictures (thumbnails).

    The dataclass is frozen (fields cannot be reassigned); the tensors are not
    copied, so do not modify them in place.
    """

    inputs: Tensor | LazyInputs
    targets: Tensor | None
    classes: tuple[str, ...]
    name: str
    paths: tuple[str, ...] | None = None
    normalization: tuple[float, float] | None = None
    item_ids: tuple[str, ...] | None = None
    item_sha256: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        inputs = self.inputs
        if not isinstance(inputs, Tensor | LazyInputs):
            raise InvalidTypeError(f"inputs must be a torch.Tensor or LazyInputs, got {type(inputs).__name__}")
        if inputs.dtype != torch.float32:
            raise InvalidTypeError(f"inputs must be float32, got dtype {inputs.dtype}; use from_arrays() to convert")
        if inputs.ndim < 2:
            raise InvalidArgumentError(f"inputs must have shape [N, ...] with at least 2 dimensions, got {tuple(inputs.shape)}")
        n_items = inputs.shape[0]
        if not isinstance(self.classes, tuple) or not all(isinstance(c, str) for c in self.classes):
            raise InvalidTypeError(f"classes must be a tuple of str, got {self.classes!r}")
        if len(set(self.classes)) != len(self.classes):
            raise InvalidArgumentError(f"classes must be unique, got {self.classes!r}")
        if not isinstance(self.name, str) or not self.name:
            raise InvalidArgumentError(f"name must be a non-empty str, got {self.name!r}")
        if self.targets is not None:
            targets = self.targets
            if not isinstance(targets, Tensor):
                raise InvalidTypeError(f"targets must be a torch.Tensor or None, got {type(targets).__name__}")
            if targets.dtype != torch.long:
                raise InvalidTypeError(f"targets must be int64 (LongTensor), got dtype {targets.dtype}")
            if not self.classes:
                raise InvalidArgumentError("classes must name at least one class when targets are given")
            if targets.ndim == 2:  # multi-label: 0/1 indicators targets_N_C
                if targets.shape != (n_items, len(self.classes)):
                    raise InvalidArgumentError(
                        f"multi-label targets must have shape [N, C] = [{n_items}, {len(self.classes)}], "
                        f"got {tuple(targets.shape)}")
                if n_items and not bool(((targets == 0) | (targets == 1)).all()):
                    raise InvalidArgumentError("multi-label targets [N, C] must hold only 0 and 1")
            elif targets.shape != (n_items,):
                raise InvalidArgumentError(f"targets must have shape [N] = [{n_items}] (or [N, C] 0/1 indicators "
                                           f"for a multi-label task), got {tuple(targets.shape)}")
            elif n_items and (int(targets.min()) < 0 or int(targets.max()) >= len(self.classes)):
                raise InvalidArgumentError(
                    f"targets must lie in 0 .. {len(self.classes) - 1} (C = {len(self.classes)} classes), "
                    f"got values from {int(targets.min())} to {int(targets.max())}"
                )
        if self.paths is not None:
            if not isinstance(self.paths, tuple) or not all(isinstance(p, str) for p in self.paths):
                raise InvalidTypeError("paths must be a tuple of str or None")
            if len(self.paths) != n_items:
                raise InvalidArgumentError(f"paths must have one entry per item ({n_items}), got {len(self.paths)}")
        if self.item_ids is not None:
            if not isinstance(self.item_ids, tuple) or not all(isinstance(i, str) for i in self.item_ids):
                raise InvalidTypeError("item_ids must be a tuple of str or None")
            if len(self.item_ids) != n_items:
                raise InvalidArgumentError(f"item_ids must have one entry per item ({n_items}), got {len(self.item_ids)}")
            if len(set(self.item_ids)) != n_items:
                raise InvalidArgumentError("item_ids must be unique")
        if self.item_sha256 is not None:
            if not isinstance(self.item_sha256, tuple) or not all(isinstance(i, str) for i in self.item_sha256):
                raise InvalidTypeError("item_sha256 must be a tuple of str or None")
            if self.item_ids is None or len(self.item_sha256) != n_items:
                raise InvalidArgumentError(f"item_sha256 needs item_ids and one entry per item ({n_items}), "
                                           f"got {len(self.item_sha256)}")
        if self.normalization is not None:
            mean, std = self.normalization
            if not std > 0:
                raise InvalidArgumentError(f"normalization std must be > 0, got {std}")

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def __repr__(self) -> str:
        labelled = "unlabelled" if self.targets is None else f"{self.num_classes} classes"
        return f"ArrayDataset(name={self.name!r}, N={len(self)}, input_shape={self.input_shape}, {labelled})"

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one item, e.g. ``(1, 28, 28)``."""
        return tuple(self.inputs.shape[1:])

    @property
    def num_classes(self) -> int:
        """C, the number of classes (``len(classes)``)."""
        return len(self.classes)

    @property
    def multilabel(self) -> bool:
        """Whether the targets are multi-label 0/1 indicators ``targets_N_C`` (``[N, C]``)."""
        return self.targets is not None and self.targets.ndim == 2

    @property
    def is_labelled(self) -> bool:
        """Whether the dataset carries targets."""
        return self.targets is not None

    @property
    def is_lazy(self) -> bool:
        """Whether the inputs are read from disk on demand (a :class:`LazyInputs`) rather than held in memory."""
        return isinstance(self.inputs, LazyInputs)

    def rows(self, indices: object) -> Tensor | LazyInputs:
        """The inputs of rows ``indices`` (in that order), as cheaply as the storage allows.

        In memory: the tensor ``inputs[indices]``. Out of core: a lazy view that
        reads nothing until indexed, so ``predict_log_probs(model, ds.rows(pool_N), K)``
        streams the rows from disk chunk by chunk instead of materialising
        ``[n, ...]`` float32 inputs. Either way ``rows(i)[j]`` equals ``inputs[i[j]]``.
        """
        index = self.check_indices(indices)
        if isinstance(self.inputs, LazyInputs):
            return self.inputs.rows(index)
        return self.inputs[index]

    def check_indices(self, indices: object, name: str = "indices") -> Tensor:
        """Validate dataset row indices (``0 <= i < N``) and return them as a LongTensor."""
        index = as_index_tensor(indices, name)
        if index.numel():
            low, high = int(index.min()), int(index.max())
            if low < 0 or high >= len(self):
                bad = low if low < 0 else high
                raise InvalidIndexError(f"{name} must lie in 0 .. {len(self) - 1} for dataset {self.name!r}, got {bad}")
        return index

    def subset(self, indices: object) -> ArrayDataset:
        """A new dataset holding rows ``indices`` (in that order).

        In-memory inputs are copied by indexing; lazy inputs become a lazy view (nothing is read).
        """
        index = self.check_indices(indices)
        return dataclasses.replace(
            self,
            inputs=self.rows(index),
            targets=None if self.targets is None else self.targets[index],
            paths=None if self.paths is None else tuple(self.paths[i] for i in index.tolist()),
            item_ids=None if self.item_ids is None else tuple(self.item_ids[i] for i in index.tolist()),
            item_sha256=None if self.item_sha256 is None else tuple(self.item_sha256[i] for i in index.tolist()),
        )


def _to_tensor(values: object, name: str) -> Tensor:
    if isinstance(values, Tensor):
        return values.detach().cpu()
    if isinstance(values, np.ndarray):
        if values.dtype.kind not in "biuf":  # strings, objects, dates: torch cannot hold them
            hint = (" (class names? pass integer class ids and the names as classes=..., e.g. "
                    "np.unique(labels, return_inverse=True))") if values.dtype.kind in "USO" and name == "targets" else ""
            raise InvalidTypeError(f"{name} must be a numeric array, got dtype {values.dtype}{hint}")
        return torch.from_numpy(np.ascontiguousarray(values))
    if isinstance(values, Sequence) and not isinstance(values, str | bytes):
        array = np.asarray(values)
        if array.dtype.kind not in "biuf":
            hint = (" (class names? pass integer class ids and the names as classes=...)"
                    if array.dtype.kind in "USO" and name == "targets" else "")
            raise InvalidTypeError(f"{name} must hold numbers, got a sequence of dtype {array.dtype}{hint}")
        return torch.from_numpy(np.ascontiguousarray(array))
    raise InvalidTypeError(f"{name} must be a NumPy array or torch.Tensor, got {type(values).__name__}")


def from_arrays(
    inputs: object,
    targets: object | None = None,
    *,
    classes: Sequence[str] | None = None,
    name: str = "arrays",
) -> ArrayDataset:
    """Wrap NumPy arrays or tensors as an :class:`ArrayDataset`, validating them.

    Args:
        inputs: ``[N, ...]`` numbers (any real dtype; converted to float32 as they are,
            no scaling). A 1-D array is read as N scalar features ``[N, 1]``.
        targets: ``[N]`` integer labels in ``0 .. C-1``, ``[N, C]`` multi-label 0/1 indicators,
            or ``None`` for unlabelled data. Labels counted from 1 (no 0) are refused
            unless ``classes`` names class 0 too.
        classes: class names; default ``("0", "1", ..., str(max(targets)))`` (``"0" .. str(C-1)``
            for indicators).
            Required for unlabelled data that a person will label.
        name: dataset name.

    Raises ``TypeError`` / ``ValueError`` naming the argument for wrong dtypes,
    shapes, NaN / inf inputs, or labels outside the class set.

    Example:
        >>> ds = from_arrays(torch.randn(3, 5), [2, 0, 1], classes=["a", "b", "c"])
        >>> ds.classes, ds.targets.tolist()
        (('a', 'b', 'c'), [2, 0, 1])
    """
    x = _to_tensor(inputs, "inputs")
    if x.dtype == torch.bool or x.is_complex():
        raise InvalidTypeError(f"inputs must be real numbers, got dtype {x.dtype}")
    if x.ndim == 0:
        raise InvalidArgumentError("inputs must have shape [N, ...], got a scalar")
    if x.ndim == 1:
        x = x[:, None]
    x = x.to(torch.float32)
    if not bool(torch.isfinite(x).all()):
        n_bad = int((~torch.isfinite(x)).sum())
        raise InvalidArgumentError(f"inputs contains {n_bad} NaN or inf value(s)")
    y: Tensor | None = None
    if targets is not None:
        y = _to_tensor(targets, "targets")
        if y.is_floating_point():
            if not bool((y == y.round()).all()) or not bool(torch.isfinite(y).all()):
                raise InvalidTypeError(f"targets must be integer class ids, got non-integer values of dtype {y.dtype}")
        elif y.dtype == torch.bool or y.is_complex():
            raise InvalidTypeError(f"targets must be integer class ids, got dtype {y.dtype}")
        y = y.to(torch.long)
        if y.ndim not in (1, 2) or y.shape[0] != x.shape[0]:
            raise InvalidArgumentError(f"targets must have shape [N] = [{x.shape[0]}] (class ids) or [N, C] (multi-label "
                                       f"0/1 indicators) to match inputs, got {tuple(y.shape)}")
        if y.ndim == 2 and y.numel() and not bool(((y == 0) | (y == 1)).all()):
            raise InvalidArgumentError(f"targets of shape [N, C] = {list(y.shape)} are multi-label indicators and must "
                                       f"be 0 or 1, got values {sorted(set(y.unique().tolist()) - {0, 1})[:3]}")
        if y.numel() and int(y.min()) < 0:
            raise InvalidArgumentError(f"targets must be >= 0, got {int(y.min())}")
    if classes is None:
        if y is not None and y.ndim == 2:
            n_classes = y.shape[1]
        else:
            n_classes = 0 if y is None or y.numel() == 0 else int(y.max()) + 1
            if n_classes and int(y.min()) >= 1:  # no class 0: most likely ids counted from 1
                raise InvalidArgumentError(
                    f"targets hold class ids {int(y.min())} .. {n_classes - 1} and no 0: class ids count from 0, so "
                    f"class 0 would have no item (subtract 1), or give classes= naming all {n_classes}, 0 included")
        class_names = tuple(str(c) for c in range(n_classes))
    else:
        if isinstance(classes, str):
            raise InvalidTypeError("classes must be a sequence of names, got a single str")
        class_names = tuple(str(c) for c in classes)
    return ArrayDataset(inputs=x, targets=y, classes=class_names, name=name)
