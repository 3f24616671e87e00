"""Batch selection from per-item scores: the result type, budgets, top-k and stochastic batches.

A strategy turns predictions into a :class:`Selection`: the chosen pool indices in
pick order and the score each had when it was picked. Per-item scores become a
batch here, either deterministically (top-k) or stochastically (Kirsch et al. 2021),
under two constraints: at most ``batch_size`` picks and, optionally, a labelling
cost per item with a total ``cost_budget``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._validation import check_finite, check_nonnegative_float, check_tensor
from activebayes.errors import InvalidArgumentError

__all__ = [
    "Selection",
    "BudgetPlan",
    "check_budget",
    "take_in_order",
    "stochastic_order",
    "STOCHASTIC_MODES",
]


@dataclass(frozen=True)
class Selection:
    """The items a strategy picked.

    Attributes:
        indices: ``LongTensor [B]``, pool indices in pick order (no repeats), on the CPU.
        scores: float64 ``Tensor [B]``, each item's score when it was picked: the
            per-item score for top-k and stochastic strategies; for BatchBALD the
            joint mutual information ``I[y_1..y_b; w]`` of the batch up to that pick.
        strategy: the canonical name of the strategy that produced it.

    ``B <= batch_size``; it is smaller only when a cost budget ran out.
    """

    indices: Tensor
    scores: Tensor
    strategy: str

    def __post_init__(self) -> None:
        assert self.indices.dtype == torch.long and self.indices.ndim == 1
        assert self.scores.shape == self.indices.shape

    def __len__(self) -> int:
        return int(self.indices.shape[0])

    def tolist(self) -> list[int]:
        """The picked indices as Python ints, in pick order."""
        return self.indices.tolist()


@dataclass(frozen=True)
class BudgetPlan:
    """Validated cost constraint: ``costs_N`` (float64, CPU) and the total ``cost_budget``."""

    costs_N: Tensor
    cost_budget: float

    def fits_N(self, spent: float) -> Tensor:
        """Mask of items whose cost still fits after spending ``spent`` (with a relative slack)."""
        return self.costs_N <= (self.cost_budget - spent) * (1 + 1e-12) + 1e-12


def check_budget(costs_N: Tensor | None, cost_budget: float | None, N: int) -> BudgetPlan | None:
    """Validate a per-item cost and total cost budget; ``None`` when there is no cost constraint."""
    if costs_N is None and cost_budget is None:
        return None
    if costs_N is None or cost_budget is None:
        missing = "cost_budget" if cost_budget is None else "costs_N"
        raise InvalidArgumentError(f"costs_N and cost_budget go together: {missing} is missing (got only the other one)")
    check_tensor(costs_N, "costs_N")
    if costs_N.shape != (N,):
        raise InvalidArgumentError(f"costs_N must have shape [N] = ({N},) (one cost per pool item), got {tuple(costs_N.shape)}")
    costs_N = costs_N.detach().to("cpu", torch.float64)
    check_finite(costs_N, "costs_N")
    if bool((costs_N < 0).any()):
        raise InvalidArgumentError(f"costs_N must be >= 0, got a minimum of {float(costs_N.min()):g}")
    cost_budget = check_nonnegative_float(cost_budget, "cost_budget")
    cheapest = float(costs_N.min())
    if cheapest > cost_budget:
        raise InvalidArgumentError(f"cost_budget {cost_budget:g} is too small: the cheapest pool item costs {cheapest:g}")
    return BudgetPlan(costs_N, cost_budget)


def cost_priority(scores_N: Tensor, plan: BudgetPlan | None, cost_aware: bool) -> Tensor:
    """``scores_N``, or ``scores / cost`` when ``cost_aware`` (free items first)."""
    if not cost_aware:
        return scores_N
    if plan is None:
        raise InvalidArgumentError("cost_aware=True needs costs_N and cost_budget")
    if bool((scores_N < 0).any()):
        raise InvalidArgumentError(
            "cost_aware=True needs non-negative scores (score per unit cost); this strategy's scores "
            f"go down to {float(scores_N.min()):g}"
        )
    costs_N = plan.costs_N.to(scores_N.device)
    return torch.where(costs_N > 0, scores_N / costs_N, torch.full_like(scores_N, math.inf))


def take_in_order(
    order_N: Tensor, scores_N: Tensor, batch_size: int, plan: BudgetPlan | None, strategy: str
) -> Selection:
    """Walk ``order_N`` (best first) and take items until ``batch_size`` or the budget is used.

    Without a budget the first ``batch_size`` entries are taken. With one, an item
    that no longer fits is skipped (a cheaper one further down may still fit); the
    total cost never exceeds the budget.
    """
    order_N = order_N.cpu()
    scores_N = scores_N.detach().to("cpu", torch.float64)
    if plan is None:
        picked = order_N[:batch_size]
        return Selection(picked.clone(), scores_N[picked], strategy)
    costs = plan.costs_N[order_N].tolist()
    remaining = plan.cost_budget
    cheapest = float(plan.costs_N.min())
    chosen: list[int] = []
    for position, cost in enumerate(costs):
        if len(chosen) == batch_size or remaining < cheapest:
            break
        if cost <= remaining * (1 + 1e-12) + 1e-12:
            chosen.append(position)
            remaining -= cost
    picked = order_N[torch.tensor(chosen, dtype=torch.long)]
    return Selection(picked, scores_N[picked], strategy)


def top_order(priority_N: Tensor, batch_size: int, plan: BudgetPlan | None) -> Tensor:
    """Indices by descending priority, equal priorities by ascending index: just the top
    ``batch_size`` without a budget.

    The tie order is fixed (``torch.topk`` leaves it to the device), so tied scores, common
    with variation ratios or saturated predictions, pick the same items on every device and
    in the streaming path (:func:`~activebayes.acquisition.streaming.lexicographic_top`)."""
    priority_N = priority_N.detach().cpu()
    candidates = torch.arange(priority_N.shape[0])
    if plan is None and batch_size < len(candidates):  # only the items tied with or above the k-th
        threshold = torch.topk(priority_N, batch_size).values[-1]
        candidates = torch.nonzero(priority_N >= threshold).squeeze(1)
    order = candidates[torch.argsort(priority_N[candidates], descending=True, stable=True)]
    return order if plan is not None else order[:batch_size]


STOCHASTIC_MODES = ("power", "softmax", "softrank")


def stochastic_log_weights(scores_N: Tensor, mode: str, beta: float) -> Tensor:
    """Log of the unnormalised sampling weights of stochastic batch acquisition.

    power: ``p ∝ s^β`` (needs ``s >= 0``; ``s = 0`` has weight 0); softmax:
    ``p ∝ exp(β s)``; softrank: ``p ∝ r^{-β}`` with ``r`` the rank (1 = highest score).
    ``β = 0`` is uniform sampling in every mode: ``0^0 = 1``, and an infinite priority
    (a free item under ``cost_aware``) gets weight 1 too, not NaN.
    """
    scores_N = scores_N.to(torch.float64)
    if mode == "power" and bool((scores_N < 0).any()):
        raise InvalidArgumentError(
            f"power sampling needs non-negative scores, got a minimum of {float(scores_N.min()):g}; "
            "use softmax or softrank"
        )
    if mode in STOCHASTIC_MODES and beta == 0:
        return torch.zeros_like(scores_N)
    if mode == "softmax":
        return beta * scores_N
    if mode == "power":
        return beta * torch.log(scores_N)
    if mode == "softrank":
        order_N = torch.argsort(scores_N, descending=True, stable=True)
        ranks_N = torch.empty_like(scores_N)
        ranks_N[order_N] = torch.arange(1, len(scores_N) + 1, dtype=torch.float64, device=scores_N.device)
        return -beta * torch.log(ranks_N)
    raise InvalidArgumentError(f"unknown stochastic mode {mode!r}; expected one of: {', '.join(STOCHASTIC_MODES)}")


def stochastic_order(
    scores_N: Tensor, mode: str, beta: float, generator: torch.Generator | None
) -> Tensor:
    """A random order of the whole pool: a sample without replacement from ``p ∝ weights``.

    Gumbel-top-k (Kool et al. 2019): ``argsort(log w + G)`` with i.i.d. standard Gumbel
    ``G`` is distributed as successive sampling without replacement. Items of weight 0
    come last, in uniformly random order. Noise is drawn on the CPU from ``generator``.
    """
    log_weights_N = stochastic_log_weights(scores_N.detach().cpu(), mode, beta)
    uniform_N = torch.rand(log_weights_N.shape, generator=generator, dtype=torch.float64)
    gumbel_N = -torch.log(-torch.log(uniform_N.clamp(min=1e-300, max=1 - 1e-16)))
    keys_N = log_weights_N + gumbel_N
    noise_order = torch.argsort(gumbel_N, descending=True)
    return noise_order[torch.argsort(keys_N[noise_order], descending=True, stable=True)]
