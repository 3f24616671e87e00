"""Helpers shared by the adapters: optional imports, seeds, K passes under one sampling context."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from activebayes._seeding import draw_seed
from activebayes.errors import InvalidTypeError
from activebayes.models.dropout import _SamplingContext, mc_dropout_layers


def require(module: str, package: str, what: str) -> ModuleType:
    """Import ``module`` or fail with the one line that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f"{what} needs the {package!r} package: pip install \"activebayes[adapters]\" (or pip install {package})"
        ) from error


def seed_from(generator: torch.Generator | int | None) -> int:
    """A 63-bit seed: an int as is, else one drawn from ``generator`` (None: the global RNG)."""
    return draw_seed(generator)


def _array_tensor(array: np.ndarray, name: str, what: str = "a NumPy array") -> Tensor:
    """A NumPy array of numbers as a tensor (``torch.as_tensor``: same dtype, no copy where it can)."""
    if array.dtype.kind not in "biuf":
        hint = ("; encode the labels as class ids 0..C-1 (e.g. sklearn.preprocessing.LabelEncoder)"
                if name.endswith("targets") else "")
        raise InvalidTypeError(f"{name} must hold numbers, got {what} of dtype {array.dtype}{hint}")
    # a view with negative strides (x[::-1]) cannot be shared: copied
    return torch.as_tensor(array if all(step >= 0 for step in array.strides) else array.copy())


def from_numpy(data: Any, name: str) -> Any:
    """``data`` with its NumPy arrays as tensors: an array, or the arrays of a pair ``(inputs, targets)``
    (named ``name inputs`` / ``name targets`` in errors); anything else (tensors, lazy inputs, a
    Dataset) as it is. What every adapter's ``fit`` and ``log_probs`` read first, so NumPy is
    accepted wherever tensors are."""
    if isinstance(data, np.ndarray):
        return _array_tensor(data, name)
    if isinstance(data, tuple | list) and len(data) == 2 and any(isinstance(v, np.ndarray) for v in data):
        return tuple(_array_tensor(value, f"{name} {part}") if isinstance(value, np.ndarray) else value
                     for value, part in zip(data, ("inputs", "targets")))
    return data


def as_number_tensor(value: Any, name: str) -> Tensor:
    """``value`` (a tensor, an array, a list, a pandas Series) as a tensor of numbers, or a one-line error."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return _array_tensor(value, name)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:  # a ragged list
        raise InvalidTypeError(f"{name} must be numbers [N], got {type(value).__name__} ({error})") from None
    return _array_tensor(array, name, type(value).__name__)


def as_input_tensor(inputs: Any) -> Tensor:
    """Inputs ``[N, ...]`` as a tensor (a tuple ``(inputs, targets)`` gives its inputs)."""
    inputs = from_numpy(inputs, "inputs")
    if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and isinstance(inputs[0], Tensor):
        inputs = inputs[0]
    if isinstance(inputs, Tensor):
        return inputs
    if hasattr(inputs, "__len__") and hasattr(inputs, "__getitem__") and hasattr(inputs, "shape"):
        return torch.as_tensor(inputs[:])
    raise InvalidTypeError(f"inputs must be a tensor or NumPy array [N, ...] or (inputs, targets), "
                           f"got {type(inputs).__name__}")


def sample_by_sample(module: nn.Module, forward: Callable[[], Tensor]) -> Tensor:
    """Run ``forward()`` once per sample id of an open expanding MC context, rows item-major.

    Inside ``mc_sampling(module, ids, expand=True)`` an expanding layer turns ``[n, ...]``
    into ``[n * k, ...]``, which breaks models that carry per-item tensors past their
    first dropout layer (a transformer's attention mask). Here each sample id gets a
    full pass with that id's masks applied to every item (``expand=False``), and the
    logits ``[n, C]`` of the k passes are laid out as the expanding path would lay
    them out (row ``i * k + j``: item ``i`` under sample ``ids[j]``). Outside a context,
    or in a non-expanding one, ``forward()`` runs once.
    """
    layers = mc_dropout_layers(module)
    context = layers[0]._context if layers else None
    if context is None or not context.expand or module.training:
        return forward()
    outputs = []
    try:
        for sample_id in context.sample_ids:
            single = _SamplingContext([sample_id], expand=False)
            for layer in layers:
                layer._context = single
            outputs.append(forward())
    finally:
        for layer in layers:
            layer._context = context
    context.expanded = True
    logits_n_k_C = torch.stack(outputs, dim=1)
    return logits_n_k_C.reshape(-1, logits_n_k_C.shape[-1])


def scalar_summary(values: dict[str, Any]) -> dict[str, Any]:
    """The JSON-friendly scalars of a mapping of numbers / 0-d tensors."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, bool | int | str) or value is None:
            out[str(key)] = value
        elif isinstance(value, float):
            out[str(key)] = value if value == value and abs(value) != float("inf") else None
    return out
