"""Penultimate features of a network: what BADGE's gradient embeddings and typicality read.

``penultimate_features(model, inputs) -> features_N_D`` runs the model and records,
with a forward pre-hook, the input of its last ``nn.Linear`` (``h`` in ``logits =
W h + b``). The model runs deterministically: ``eval()`` mode, so MC dropout layers
are the identity (the "mean" network; outside :func:`~activebayes.models.mc_sampling`)
and batch norm uses its running statistics; the train/eval flags are restored
afterwards. Deterministic features are what BADGE (Ash et al. 2020) uses: its
gradient embedding is defined for one network, not an average over dropout masks.

Inputs are read in chunks of ``batch_size`` items (tensors, ``(inputs, targets)``
tuples, inputs read on demand such as memory-mapped pools, or Datasets: the same
forms :func:`~activebayes.models.predict_log_probs` takes), so memory is one chunk's
activations plus the ``[N, D]`` result.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from activebayes._validation import check_positive_int, check_torch_device
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models.ensemble import Ensemble
from activebayes.models.predict import _Inputs, _model_device

__all__ = ["penultimate_features", "last_linear"]


def last_linear(model: nn.Module, *, name: str = "model",
                advice: str = "pass layer= the module whose input is the representation") -> nn.Linear:
    """The last ``nn.Linear`` in ``model.modules()`` order (registration order): the output layer
    of every reference network, and of most ``nn.Sequential`` classifiers. Without one:
    :class:`~activebayes.errors.InvalidArgumentError` naming ``name`` with the caller's ``advice``."""
    linears = [module for module in model.modules() if isinstance(module, nn.Linear)]
    if not linears:
        raise InvalidArgumentError(f"{name} ({type(model).__name__}) has no nn.Linear layer; {advice}")
    return linears[-1]


def penultimate_features(
    model: nn.Module,
    data: Tensor | tuple | Dataset,
    *,
    batch_size: int = 256,
    device: torch.device | str | None = None,
    layer: nn.Module | None = None,
) -> Tensor:
    r"""The input ``h(x)`` of the model's last linear layer for every item: float32 ``[N, D]`` on the CPU.

    Args:
        model: an ``nn.Module`` whose output layer is an ``nn.Linear`` (the reference
            networks, a user's classifier). An :class:`~activebayes.models.Ensemble` is
            refused: its members have different feature spaces; pass one member.
        data: inputs ``[N, ...]``, ``(inputs, targets)``, inputs read on demand
            (:class:`activebayes.data.LazyInputs`) or a Dataset yielding ``x`` or ``(x, y)``.
        batch_size: items per forward pass.
        device: run there (the model is moved there); default: where its parameters are.
        layer: record the input of this module instead of the last ``nn.Linear``
            (it must be called exactly once per forward, with a ``[n, D]`` input).

    Deterministic (dropout off, see the module docstring); no gradients.

    Example:
        >>> from activebayes.models import MLP
        >>> net = MLP(in_features=4, num_classes=3, hidden=(8,))
        >>> penultimate_features(net, torch.randn(10, 4)).shape
        torch.Size([10, 8])
    """
    if not isinstance(model, nn.Module):
        raise InvalidTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(model, Ensemble):
        raise InvalidTypeError(
            "model is an Ensemble: its members' penultimate features live in different spaces; "
            "pass one member, e.g. penultimate_features(ensemble.members[0], ...)"
        )
    batch_size = check_positive_int(batch_size, "batch_size")
    target = last_linear(model) if layer is None else layer
    if not isinstance(target, nn.Module) or not any(target is module for module in model.modules()):
        raise InvalidArgumentError("layer must be a module of model (one of model.modules())")
    inputs = _Inputs(data)
    if device is not None:
        model.to(check_torch_device(device, "device"))
    run_device = _model_device(model)

    captured: list[Tensor] = []

    def record(_module: nn.Module, args: tuple) -> None:
        captured.append(args[0])

    flags = {module: module.training for module in model.modules()}
    handle = target.register_forward_pre_hook(record)
    model.eval()
    chunks: list[Tensor] = []
    try:
        with torch.no_grad():
            for start, end, x_n in inputs.chunks(batch_size):
                captured.clear()
                model(x_n.to(run_device))
                if len(captured) != 1:
                    raise InvalidArgumentError(
                        f"the recorded layer ran {len(captured)} times in one forward pass, expected once; "
                        "pass layer= a module that runs once"
                    )
                features_n_D = captured[0]
                if not isinstance(features_n_D, Tensor) or features_n_D.ndim != 2 or features_n_D.shape[0] != end - start:
                    shape = tuple(features_n_D.shape) if isinstance(features_n_D, Tensor) else type(features_n_D).__name__
                    raise InvalidArgumentError(
                        f"the recorded layer's input must be [n, D] with n = {end - start} items, got {shape}"
                    )
                chunks.append(features_n_D.detach().float().cpu())
    finally:
        handle.remove()
        for module, flag in flags.items():
            module.training = flag
    return torch.cat(chunks)
