"""Batch selection from per-item scores: the result type, budgets, top-k and stochastic batches.

A strategy turns predictions into a :class:`Selection`: the chosen pool indices in
pick order and the score each had when it was picked. Per-item scores become a
batch here, either deterministically (top-k) or stochastically (Kirsch et al. 2021),
under two constraints: at most ``batch_size`` picks and, optionally, a labelling
cost per item with a total ``cost_budget``. Every path (top-k, stochastic, BatchBALD's
greedy step, the streamed pool) ranks by one :class:`Priority`: under ``cost_aware`` the
free items first by score, then the paid ones by score per unit cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._validation import check_finite, check_nonnegative_float, check_tensor
from activebayes.errors import InvalidArgumentError

__all__ = [
    "Selection",
    "BudgetPlan",
    "Priority",
    "check_budget",
    "lexicographic_order",
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


@dataclass(frozen=True)
class Priority:
    """The order a strategy takes items in, best first: a two-part key.

    Attributes:
        value_N: float ``Tensor [N]``, larger first.
        free_N: bool ``Tensor [N]`` or ``None``: under ``cost_aware`` the items that cost
            nothing, which come before every other item whatever their values.

    Under ``cost_aware`` (:func:`cost_priority`) ``value_N`` is the score of a free item
    and the score per unit cost of a paid one: the free items ranked by score, then the
    paid ones by score per cost. (A single ``score / cost`` gives every free item the
    same ``inf``, and would leave free items to the index order.) Equal keys go to the
    lower index (:func:`lexicographic_order`).

    >>> p = Priority(torch.tensor([0.2, 0.9, 0.5]), torch.tensor([True, False, True]))
    >>> lexicographic_order(p.keys(), torch.arange(3))
    tensor([2, 0, 1])
    """

    value_N: Tensor
    free_N: Tensor | None = None

    def keys(self) -> tuple[Tensor, ...]:
        """The sort keys, most significant first (all float64, for the streaming rows)."""
        value_N = self.value_N.to(torch.float64)
        return (value_N,) if self.free_N is None else (self.free_N.to(value_N), value_N)

    def masked(self, keep_N: Tensor) -> Priority:
        """Items outside ``keep_N`` go last: value ``-inf``, not free (e.g. taken, or over the budget)."""
        keep_N = keep_N.to(self.value_N.device)
        value_N = torch.where(keep_N, self.value_N, torch.full_like(self.value_N, -math.inf))
        return Priority(value_N, None if self.free_N is None else self.free_N & keep_N)


def as_priority(priority: Tensor | Priority) -> Priority:
    """A plain score tensor is a :class:`Priority` without free items."""
    return priority if isinstance(priority, Priority) else Priority(priority)


def cost_priority(scores_N: Tensor, plan: BudgetPlan | None, cost_aware: bool) -> Priority:
    """The :class:`Priority` of a cost budget: ``scores_N``, or under ``cost_aware`` the free
    items first by score, then the others by score per unit cost."""
    if not cost_aware:
        return Priority(scores_N)
    if plan is None:
        raise InvalidArgumentError("cost_aware=True needs costs_N and cost_budget")
    if bool((scores_N < 0).any()):
        raise InvalidArgumentError(
            "cost_aware=True needs non-negative scores (score per unit cost); this strategy's scores "
            f"go down to {float(scores_N.min()):g}"
        )
    costs_N = plan.costs_N.to(scores_N.device)
    free_N = costs_N == 0
    return Priority(torch.where(free_N, scores_N, scores_N / costs_N), free_N)


def _sort_descending(order: Tensor, keys: Sequence[Tensor]) -> Tensor:
    """``order`` stably re-sorted by ``keys`` descending, most significant first (a key equal
    on all of ``order``, e.g. "free" when no item is free, changes nothing and is skipped)."""
    for key in reversed(keys):
        values = key[order]
        if not bool((values == values[:1]).all()):
            order = order[torch.argsort(values, descending=True, stable=True)]
    return order


def _could_be_first(keys: Sequence[Tensor], k: int, positions: Tensor | None = None) -> Tensor:
    """The positions (all when ``None``) that may be among the first ``k`` by ``keys``: at or above
    the ``k``-th largest first key, and of those tied with it, the ones the further keys may put
    among the first."""
    first = keys[0] if positions is None else keys[0][positions]
    threshold = torch.topk(first, k).values[-1]
    kept = torch.nonzero(first >= threshold).squeeze(1)
    if positions is not None:
        kept = positions[kept]
    if len(keys) == 1 or len(kept) <= k:
        return kept
    tied = keys[0][kept] == threshold
    above = kept[~tied]
    return torch.cat([above, _could_be_first(keys[1:], k - len(above), kept[tied])])


def lexicographic_order(keys: Sequence[Tensor], indices_N: Tensor, k: int | None = None) -> Tensor:
    """Positions ordered by ``keys`` descending (the first key most significant), then ``indices`` asc.

    Returns the first ``k`` positions (all when ``k`` is ``None``). On distinct indices
    this is a total order that does not depend on the positions' order, so the first
    ``k`` of a union equal the first ``k`` of the union of the parts' first ``k`` (the
    streaming path relies on it). For ``k`` much smaller than N only the items that may
    be among the first ``k`` are sorted.

    >>> lexicographic_order([torch.tensor([1., 3., 3., 2.])], torch.tensor([7, 9, 4, 5]), 2)
    tensor([2, 1])
    """
    keys = [key.detach().cpu() for key in keys]
    N = int(indices_N.shape[0])
    positions = _could_be_first(keys, k) if k is not None and k < N else torch.arange(N)
    in_positions = indices_N[positions]
    if not bool((in_positions[1:] >= in_positions[:-1]).all()):  # already by index (in memory): no sort
        positions = positions[torch.argsort(in_positions, stable=True)]
    order = _sort_descending(positions, keys)
    return order if k is None else order[:k]


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


def top_order(priority: Tensor | Priority, batch_size: int, plan: BudgetPlan | None) -> Tensor:
    """Indices by descending priority, equal priorities by ascending index: just the top
    ``batch_size`` without a budget.

    The tie order is fixed (``torch.topk`` leaves it to the device), so tied scores, common
    with variation ratios or saturated predictions, pick the same items on every device and
    in the streaming path (:func:`lexicographic_order` there too)."""
    keys = as_priority(priority).keys()
    return lexicographic_order(keys, torch.arange(keys[0].shape[0]), None if plan is not None else batch_size)


STOCHASTIC_MODES = ("power", "softmax", "softrank")


def stochastic_log_weights(priority: Tensor | Priority, mode: str, beta: float) -> Tensor:
    """Log of the unnormalised sampling weights of stochastic batch acquisition.

    power: ``p ∝ s^β`` (needs ``s >= 0``; ``s = 0`` has weight 0); softmax:
    ``p ∝ exp(β s)``; softrank: ``p ∝ r^{-β}`` with ``r`` the rank (1 = first in the
    priority's order). ``β = 0`` is uniform sampling in every mode: ``0^0 = 1``, and an
    infinite score gets weight 1 too, not NaN. ``s`` is the priority's value: under
    ``cost_aware`` the score of a free item (whose weight is infinite before the others':
    see :func:`stochastic_keys`), the score per unit cost of a paid one.
    """
    priority = as_priority(priority)
    scores_N = priority.value_N.to(torch.float64)
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
        order_N = lexicographic_order(priority.keys(), torch.arange(len(scores_N))).to(scores_N.device)
        ranks_N = torch.empty_like(scores_N)
        ranks_N[order_N] = torch.arange(1, len(scores_N) + 1, dtype=torch.float64, device=scores_N.device)
        return -beta * torch.log(ranks_N)
    raise InvalidArgumentError(f"unknown stochastic mode {mode!r}; expected one of: {', '.join(STOCHASTIC_MODES)}")


def stochastic_keys(priority: Tensor | Priority, gumbel_N: Tensor, mode: str, beta: float) -> tuple[Tensor, ...]:
    """Sort keys (most significant first) of a Gumbel-top-k sample: ``log w + G``, then ``G``
    alone among items of weight 0 (so they come last, in random order).

    Under ``cost_aware`` a free item's weight ``(s / 0)^β`` or ``exp(β s / 0)`` is infinite
    for ``β > 0`` in power and softmax modes: the free items come first, sampled among
    themselves by the weights of their scores, then the paid ones by score per cost.
    (Softrank's weights are finite: the free items hold the first ranks.)
    """
    priority = as_priority(priority)
    log_weights_N = stochastic_log_weights(priority, mode, beta)
    log_weights_N = torch.nan_to_num(log_weights_N, nan=0.0, posinf=math.inf, neginf=-math.inf)  # 0^0 = 1
    gumbel_N = gumbel_N.to(log_weights_N)
    keys: tuple[Tensor, ...] = (log_weights_N + gumbel_N, gumbel_N)
    if priority.free_N is not None and beta > 0 and mode != "softrank":
        keys = (priority.free_N.to(log_weights_N),) + keys
    return keys


def stochastic_order(
    priority: Tensor | Priority, mode: str, beta: float, generator: torch.Generator | None
) -> Tensor:
    """A random order of the whole pool: a sample without replacement from ``p ∝ weights``.

    Gumbel-top-k (Kool et al. 2019): ``argsort(log w + G)`` with i.i.d. standard Gumbel
    ``G`` is distributed as successive sampling without replacement. Items of weight 0
    come last, in uniformly random order; free items under ``cost_aware`` first
    (:func:`stochastic_keys`). Noise is drawn on the CPU from ``generator``.
    """
    priority = as_priority(priority)
    priority = Priority(priority.value_N.detach().cpu(),
                        None if priority.free_N is None else priority.free_N.detach().cpu())
    uniform_N = torch.rand(priority.value_N.shape, generator=generator, dtype=torch.float64)
    gumbel_N = -torch.log(-torch.log(uniform_N.clamp(min=1e-300, max=1 - 1e-16)))
    noise_order = torch.argsort(gumbel_N, descending=True)
    return _sort_descending(noise_order, stochastic_keys(priority, gumbel_N, mode, beta)[:-1])
