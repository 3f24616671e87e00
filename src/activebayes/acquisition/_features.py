"""Validation of feature inputs ``[N, D]`` (internal): BADGE's and typicality's representations."""

from __future__ import annotations

import torch
from torch import Tensor

from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["check_features"]


def check_features(features: object, name: str, rows: int | None, *, dims: int | None = None) -> Tensor:
    """A finite floating point ``[rows, D]`` tensor (``rows`` / ``D`` checked when given)."""
    if not isinstance(features, Tensor):
        raise InvalidTypeError(f"{name} must be a torch.Tensor [N, D], got {type(features).__name__}")
    if features.ndim != 2:
        raise InvalidArgumentError(f"{name} must have 2 dimensions [N, D] (items, features), got shape {tuple(features.shape)}")
    if not features.is_floating_point():
        raise InvalidTypeError(f"{name} must be a floating point tensor, got dtype {features.dtype}")
    if rows is not None and features.shape[0] != rows:
        raise InvalidArgumentError(f"{name} must have one row per pool item ({rows}), got {features.shape[0]} rows")
    if features.shape[1] == 0:
        raise InvalidArgumentError(f"{name} must have at least one feature column, got shape {tuple(features.shape)}")
    if dims is not None and features.shape[1] != dims:
        raise InvalidArgumentError(f"{name} must have D={dims} feature columns (as features_N_D), got {features.shape[1]}")
    if not bool(torch.isfinite(features).all()):
        raise InvalidArgumentError(f"{name} must be finite, got {int((~torch.isfinite(features)).sum())} NaN or inf values")
    return features
