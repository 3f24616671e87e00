"""The small base of :mod:`activebayes.data`: its error type, index validation and the pixel transform."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from ..errors import ActiveBayesError
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["DataError", "MissingSplitError", "as_index_tensor", "normalize_pixels"]


class DataError(ActiveBayesError, ValueError):
    """A data file or array is missing, corrupt, truncated or fails its checksum."""


class MissingSplitError(DataError):
    """The files of a dataset split are not there at all (not downloaded, or a folder without
    that split); unlike a corrupt file or a checksum mismatch, a caller may go on without the split."""


def normalize_pixels(pixels: Tensor, normalization: tuple[float, float] | None, *, scale: float = 255.0) -> Tensor:
    """Integer pixels to float32 inputs: ``(pixels / scale - mean) / std`` (``pixels / scale`` if ``None``).

    The one transform every image dataset applies (in memory, memory-mapped or
    read lazily from image files), in float32 and in this order, so all of them
    give bitwise identical inputs for the same pixels and constants.

    Example:
        >>> normalize_pixels(torch.tensor([0, 255], dtype=torch.uint8), (0.5, 0.5)).tolist()
        [-1.0, 1.0]
    """
    inputs = pixels.to(torch.float32, copy=True).div_(scale)
    if normalization is not None:
        mean, std = normalization
        inputs.sub_(mean).div_(std)
    return inputs


def as_index_tensor(indices: object, name: str = "indices") -> Tensor:
    """Turn a sequence / NumPy array / tensor of integer indices into a 1-D LongTensor.

    Raises ``TypeError`` for non-integer values (floats, bools) and ``ValueError``
    for anything that is not one-dimensional.
    """
    if isinstance(indices, Tensor):
        tensor = indices.detach().cpu()
    elif isinstance(indices, np.ndarray):
        tensor = torch.from_numpy(np.ascontiguousarray(indices))
    elif isinstance(indices, int | np.integer) and not isinstance(indices, bool):
        tensor = torch.tensor([int(indices)])
    elif isinstance(indices, Sequence | range):
        values = list(indices)
        for value in values:
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise InvalidTypeError(f"{name} must hold integers, got {type(value).__name__} {value!r}")
        tensor = torch.tensor([int(v) for v in values], dtype=torch.long)
    else:
        raise InvalidTypeError(f"{name} must be a sequence, NumPy array or tensor of integers, got {type(indices).__name__}")
    if tensor.dtype == torch.bool or tensor.is_floating_point() or tensor.is_complex():
        raise InvalidTypeError(f"{name} must hold integers, got dtype {tensor.dtype}")
    if tensor.ndim == 0:
        tensor = tensor.reshape(1)
    if tensor.ndim != 1:
        raise InvalidArgumentError(f"{name} must be one-dimensional, got shape {tuple(tensor.shape)}")
    return tensor.to(torch.long)
