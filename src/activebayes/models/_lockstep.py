r"""Training an ensemble of small dense networks in lockstep.

An ensemble of E heads on frozen features (``LayerNorm -> Linear -> ReLU -> Linear``),
or of E small MLPs, trained one member after another spends most of its time on per-operation overhead:
each optimizer step runs a handful of tiny matrix products. Trained in lockstep, the
members' weights are stacked (``W_E_out_in``) and one step runs every member's
minibatch through batched products (``torch.baddbmm``).

Each member keeps everything it had when trained alone: its own generator and
minibatch order, its own loss (the summed loss ``sum_e L_e`` has ``dL/dtheta_e =
dL_e/dtheta_e``), its own Adam / SGD state (elementwise, so stacking changes nothing),
its own dropout masks in training (drawn from a generator seeded as ``fit`` seeds the
global RNG for that member alone) and its own early stopping. A member that stops leaves the stack (its rows of the
weights and of the optimizer's state are dropped), so the others do not pay for it.
The result equals sequential training up to rounding: a batched product may sum in
another order than ``F.linear``, and the stacked weights take PyTorch's fused Adam step
(one kernel per tensor instead of a dozen) (``tests/models/test_lockstep.py`` compares them).

Only members this module recognises are trained this way (:func:`stackable`); anything
else (batch norm, convolutions, other layers) is trained member by member.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from activebayes._seeding import draw_seed

__all__ = ["fit_lockstep", "stackable"]

_PLAIN = (nn.Flatten, nn.ReLU, nn.Identity)


@functools.cache
def _dropout_types() -> tuple[type, ...]:
    """The elementwise dropout layers (``F.dropout`` in training, the identity in eval); imported
    on first use, once (``forward`` asks for every layer of every step)."""
    from activebayes.models.dropout import ConsistentMCDropout

    return (nn.Dropout, ConsistentMCDropout)


def layers_of(member: nn.Module) -> list[nn.Module] | None:
    """The layers ``member`` applies in order: an ``nn.Sequential``'s, or an
    :class:`~activebayes.models.MLP`'s (``member.net``); ``None`` for anything else."""
    from activebayes.models.networks import MLP

    if type(member) is nn.Sequential:
        return list(member)
    if type(member) is MLP:
        return list(member.net)
    return None


def stackable(members: Sequence[nn.Module]) -> bool:
    """Whether ``members`` can be trained in lockstep: each an ``nn.Sequential`` (or
    ``MLP``) of the same ``Flatten`` / ``ReLU`` / ``Identity`` / affine-free ``LayerNorm`` /
    elementwise dropout / ``Linear`` layers, the ``Linear`` weights of the same shapes, dtype
    and device, all trainable."""
    if len(members) < 2:
        return False
    first = layers_of(members[0])
    if first is None:
        return False
    for member in members:
        layers = layers_of(member)
        if layers is None or len(layers) != len(first):
            return False
        for layer, ref in zip(layers, first, strict=True):
            if type(layer) is not type(ref):
                return False
            if isinstance(layer, _dropout_types()):
                if layer.p != ref.p:
                    return False
                continue
            if isinstance(layer, nn.Linear):
                if layer.bias is None or layer.weight.shape != ref.weight.shape:
                    return False
                if layer.weight.dtype != ref.weight.dtype or layer.weight.device != ref.weight.device:
                    return False
                if not (layer.weight.requires_grad and layer.bias.requires_grad):
                    return False
            elif isinstance(layer, nn.LayerNorm):
                if layer.elementwise_affine or layer.normalized_shape != ref.normalized_shape or layer.eps != ref.eps:
                    return False
            elif not isinstance(layer, _PLAIN):
                return False
    return True


class _Stack:
    """The active members' ``Linear`` layers stacked: ``params`` alternates ``W_A_out_in``
    and ``b_A_out`` per layer, row ``a`` belonging to member ``active[a]``."""

    def __init__(self, members: Sequence[nn.Module], dropout_generators: Sequence[torch.Generator]) -> None:
        self.members = [layers_of(m) for m in members]
        self.layers = self.members[0]
        self.linear = [i for i, layer in enumerate(self.layers) if isinstance(layer, nn.Linear)]
        self.active = list(range(len(members)))
        self.dropout_generators = list(dropout_generators)
        with torch.no_grad():
            self.params = [torch.stack([getattr(m[i], name) for m in self.members]).requires_grad_()
                           for i in self.linear for name in ("weight", "bias")]

    def forward(self, x_A_b_D: Tensor, *, train: bool = False) -> Tensor:
        """Logits ``[A, b, C]``; ``train``: dropout layers drop (each member its own masks)."""
        j = 0
        for i, layer in enumerate(self.layers):
            if isinstance(layer, _dropout_types()):
                if train and layer.p > 0:
                    x_A_b_D = self._dropout(x_A_b_D, layer.p)
            elif i in self.linear:
                weight_A_out_in, bias_A_out = self.params[2 * j], self.params[2 * j + 1]
                x_A_b_D = torch.baddbmm(bias_A_out.unsqueeze(1), x_A_b_D, weight_A_out_in.transpose(1, 2))
                j += 1
            elif isinstance(layer, nn.LayerNorm):
                x_A_b_D = F.layer_norm(x_A_b_D, layer.normalized_shape, eps=layer.eps)
            elif isinstance(layer, nn.ReLU):
                x_A_b_D = torch.relu(x_A_b_D)
            # Flatten / Identity: the features are already [A, b, D]
        return x_A_b_D

    def _dropout(self, x_A_b_D: Tensor, p: float) -> Tensor:
        """``F.dropout`` in training, member ``active[a]``'s mask from its own generator."""
        if p >= 1.0:
            return torch.zeros_like(x_A_b_D)
        keep = torch.stack([torch.empty(x_A_b_D.shape[1:], dtype=x_A_b_D.dtype).bernoulli_(
            1.0 - p, generator=self.dropout_generators[e]) for e in self.active]).to(x_A_b_D.device)
        return x_A_b_D * keep / (1.0 - p)

    def snapshot(self, a: int) -> list[Tensor]:
        """Row ``a``'s weights (a copy)."""
        return [p[a].detach().clone() for p in self.params]

    def keep_rows(self, rows: list[int], optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Only ``rows`` stay in the stack; a new optimizer of the same kind carries their state."""
        index = torch.tensor(rows, device=self.params[0].device)
        old = self.params
        with torch.no_grad():
            self.params = [p.index_select(0, index).requires_grad_() for p in old]
        self.active = [self.active[r] for r in rows]
        new = type(optimizer)(self.params, **optimizer.defaults)
        for p_old, p_new in zip(old, self.params, strict=True):
            state = optimizer.state.get(p_old)
            if state:
                new.state[p_new] = {k: v.index_select(0, index) if torch.is_tensor(v) and v.ndim == p_old.ndim else v
                                    for k, v in state.items()}
        return new

    def write_back(self, states: Sequence[list[Tensor]]) -> None:
        """Member ``e``'s ``Linear`` layers get ``states[e]``."""
        with torch.no_grad():
            for member, state in zip(self.members, states, strict=True):
                for k, i in enumerate(self.linear):
                    member[i].weight.copy_(state[2 * k])
                    member[i].bias.copy_(state[2 * k + 1])


def fit_lockstep(members: Sequence[nn.Sequential], inputs: Tensor, targets: Tensor,
                 val: tuple[Tensor, Tensor] | None, generators: Sequence[torch.Generator], *,
                 optimizer: str, lr: float, weight_decay: float, momentum: float, batch_size: int,
                 step_size: int, target: int, max_epochs: int, stopping: Sequence,
                 epoch_indices, progress_bar=None) -> list[tuple[list, int]]:
    """Train ``members`` (:func:`stackable`) together; per member ``(history, best_epoch)``,
    with ``history`` as ``(epoch, train_loss, validation_loss, validation_accuracy)`` tuples.
    ``stopping[e]`` is member ``e``'s ``activebayes.models.training.EarlyStopping``.

    Member ``e`` draws its epochs' orders from ``generators[e]`` exactly as it would alone,
    after one seed for its dropout masks, as ``fit`` draws one for the global RNG."""
    E = len(members)
    # fit seeds the global RNG of each member's training with one draw from its generator
    stack = _Stack(members, [torch.Generator().manual_seed(draw_seed(g)) for g in generators])
    if optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(stack.params, lr=lr, weight_decay=weight_decay, fused=True)
    else:
        opt = torch.optim.SGD(stack.params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    device = stack.params[0].device
    features_N_D = inputs.reshape(inputs.shape[0], -1)
    n = features_N_D.shape[0]
    histories: list[list] = [[] for _ in range(E)]
    kept: list[list[Tensor] | None] = [None] * E
    steps = 0
    for epoch in range(1, max_epochs + 1):
        order_A_T = torch.stack([epoch_indices(n, target, generators[e]) for e in stack.active])
        total_A = torch.zeros(len(stack.active), dtype=torch.float64)
        seen = 0
        for start in range(0, order_A_T.shape[1], step_size):
            index_A_b = order_A_T[:, start : start + step_size]
            A, b = index_A_b.shape
            logits_A_b_C = stack.forward(features_N_D[index_A_b].to(device), train=True)
            y_A_b = targets[index_A_b].to(device)
            loss_A = F.cross_entropy(logits_A_b_C.reshape(A * b, -1), y_A_b.reshape(-1), reduction="none").view(A, b)
            loss_A = loss_A.mean(1)
            opt.zero_grad(set_to_none=True)
            loss_A.sum().backward()
            opt.step()
            total_A += loss_A.detach().double().cpu() * b
            seen += b
            steps += 1
        validation = _validate(stack, val, batch_size, device) if val is not None else [None] * len(stack.active)
        stay = []
        for a, e in enumerate(stack.active):
            train_loss = float(total_A[a]) / seen
            histories[e].append((epoch, train_loss, *(validation[a] or (None, None))))
            keep, stop = stopping[e].update(epoch, train_loss, steps, validation[a])
            if keep and (val is not None or stop or epoch == max_epochs):
                kept[e] = stack.snapshot(a)  # the best weights, or the last ones without validation
            if not stop and epoch < max_epochs:
                stay.append(a)
        if progress_bar is not None:
            progress_bar.update(1)
        if not stay:
            break
        if len(stay) < len(stack.active):
            opt = stack.keep_rows(stay, opt)
    stack.write_back(kept)
    return [(histories[e], stopping[e].best_epoch) for e in range(E)]


def _validate(stack: _Stack, val: tuple[Tensor, Tensor], batch_size: int,
              device: torch.device) -> list[tuple[float, float]]:
    """Per active member ``(mean cross-entropy, accuracy)`` on ``val``, chunked as ``fit`` does for one network."""
    inputs, targets = val
    features = inputs.reshape(inputs.shape[0], -1)
    A = len(stack.active)
    loss_A = torch.zeros(A, dtype=torch.float64)
    correct_A = torch.zeros(A, dtype=torch.long)
    chunk = max(batch_size, 256)
    with torch.no_grad():
        for start in range(0, features.shape[0], chunk):
            x = features[start : start + chunk].to(device)
            y = targets[start : start + chunk].to(device)
            logits_A_b_C = stack.forward(x.unsqueeze(0).expand(A, *x.shape))
            y_A_b = y.unsqueeze(0).expand(A, -1)
            loss_A += F.cross_entropy(logits_A_b_C.float().transpose(1, 2), y_A_b, reduction="none").sum(1).double().cpu()
            correct_A += (logits_A_b_C.argmax(dim=-1) == y_A_b).sum(1).cpu()
    n = features.shape[0]
    return [(float(loss_A[a]) / n, int(correct_A[a]) / n) for a in range(A)]
