"""Helpers shared by the adapters: optional imports, seeds, K passes under one sampling context."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn

from activebayes._seeding import draw_seed
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


def as_input_tensor(inputs: Any) -> Tensor:
    """Inputs ``[N, ...]`` as a tensor (a tuple ``(inputs, targets)`` gives its inputs)."""
    if isinstance(inputs, (tuple, list)) and len(inputs) == 2 and isinstance(inputs[0], Tensor):
        inputs = inputs[0]
    if isinstance(inputs, Tensor):
        return inputs
    if hasattr(inputs, "__len__") and hasattr(inputs, "__getitem__") and hasattr(inputs, "shape"):
        return torch.as_tensor(inputs[:])
    raise TypeError(f"inputs must be a tensor [N, ...] or (inputs, targets), got {type(inputs).__name__}")


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
