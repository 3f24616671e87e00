r"""Streaming plans: how a strategy scores a pool chunk by chunk (the model-free half of scoring).

:func:`activebayes.scoring.score_pool` reads, predicts and forgets the pool chunk by
chunk. What each chunk computes, what is kept of it, and how the kept rows become a
:class:`~activebayes.acquisition.Selection` is the strategy's knowledge, so it lives
here, next to the strategies, as a :class:`PoolPlan`: a :class:`ChunkWork` (``map``
one chunk's predictions to rows, ``reduce`` any union of rows to what the answer
needs) and ``finish`` (the kept rows -> the selection). A strategy's entry builds
its plan from a checked :class:`PoolRequest` (``Strategy.plan_pool``); the executors
(this process, or Ray in :mod:`activebayes.distributed`) only run the chunks.

Plans built here, for every strategy (see :mod:`activebayes.scoring` for why each is
exact whatever the chunking):

- :func:`per_item_plan`: a per-item score, top-k or stochastic (Gumbel-top-k with
  noise keyed by ``(seed, original index)``): each chunk keeps its own top ``B``; with
  a cost budget or softrank every score is kept;
- :func:`gather_plan`: the fallback: the whole ``[N, K, C]`` is gathered (or nothing,
  for strategies that read no predictions) and the strategy function runs once.

The built-in strategies add random (no pass at all), BatchBALD (a BALD pre-filter that
keeps the top ``M`` items' predictions) and BADGE (``[n, C]`` gradient factors per chunk)
in :mod:`activebayes.acquisition.strategies`.

Rows are a dict of tensors sharing their first dimension, one row per kept item, always
with an ``"index"`` column of original dataset indices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from activebayes._validation import Device
from activebayes._seeding import keyed_uniform
from activebayes.acquisition.badge import loss_gradient_factors
from activebayes.acquisition.scores import bald
from activebayes.acquisition.selection import (
    BudgetPlan,
    Priority,
    Selection,
    as_priority,
    cost_priority,
    lexicographic_order,
    stochastic_keys,
    take_in_order,
)

__all__ = [
    "AllLogProbs",
    "AllScores",
    "BaldPrefilter",
    "ChunkWork",
    "GradientFactors",
    "PoolPlan",
    "PoolRequest",
    "Rows",
    "TopCandidates",
    "aligned",
    "finish_in_order",
    "gather_plan",
    "gumbel_noise",
    "lexicographic_top",
    "order_keys",
    "per_item_plan",
]

Rows = dict[str, Tensor]


class ChunkWork(Protocol):
    """What a pass computes on every chunk of the pool, and how partial results merge.

    ``reduce`` keeps what the answer needs from any union of rows, and must satisfy
    ``reduce(a ∪ reduce(b)) == reduce(a ∪ b)``, so chunks can be merged in any order
    and grouping (on one machine or across a cluster). ``keep`` bounds the rows
    ``reduce`` returns (``None``: all rows are kept). A work travels to other processes
    (Ray): it must pickle.
    """

    needs_predictions: bool
    keep: int | None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows: ...

    def reduce(self, rows: Rows) -> Rows: ...


@dataclass(frozen=True)
class PoolRequest:
    """A checked request to pick ``batch_size`` of the candidates ``indices_N`` (what a plan reads).

    ``indices_N`` are original dataset indices, sorted and distinct; ``budget`` the cost
    constraint with costs in that order (or ``None``); ``options`` and ``inputs`` the
    strategy's options and extra inputs, checked (per-candidate inputs in the order of
    ``indices_N``); ``seed`` the selection seed (keyed noise, and :meth:`generator`).
    """

    name: str
    indices_N: Tensor
    batch_size: int
    budget: BudgetPlan | None
    options: Mapping[str, Any]
    inputs: Mapping[str, Tensor]
    seed: int
    device: Device = None
    progress: bool = False

    @property
    def N(self) -> int:
        return int(self.indices_N.shape[0])

    @property
    def device_name(self) -> str | None:
        """The device as a string (it travels to other processes), or ``None``."""
        return None if self.device is None else str(torch.device(self.device))

    def generator(self) -> torch.Generator:
        """A fresh generator seeded with :attr:`seed` (what the in-memory strategy functions draw from)."""
        return torch.Generator().manual_seed(self.seed)

    def in_original_indices(self, picked: Selection) -> Selection:
        """``picked`` (positions into ``indices_N``) with original dataset indices, named after the strategy."""
        return Selection(self.indices_N[picked.indices].clone(), picked.scores, self.name)


@dataclass(frozen=True)
class PoolPlan:
    """How one strategy scores a pool: ``work`` on every chunk (``None``: no pass), then ``finish``.

    ``finish`` gets the reduced rows of the pass (``None`` when there is no pass) and
    returns the :class:`Selection` in original dataset indices.
    """

    work: ChunkWork | None
    finish: Callable[[Rows | None], Selection]
    description: str = field(default="")


# ------------------------------------------------------------------------ orderings


def lexicographic_top(
    primary_N: Tensor, secondary_N: Tensor | None, indices_N: Tensor, k: int | None = None
) -> Tensor:
    """Positions ordered by ``primary`` desc, then ``secondary`` desc, then ``indices`` asc.

    Two keys of :func:`~activebayes.acquisition.selection.lexicographic_order` (any number
    of keys): the first ``k`` positions (all when ``k`` is ``None``), a total order on
    distinct indices, so the top ``k`` of a union equals the top ``k`` of the union of the
    parts' top ``k``.

    >>> lexicographic_top(torch.tensor([1., 3., 3., 2.]), None, torch.tensor([7, 9, 4, 5]), 2)
    tensor([2, 1])
    """
    keys = [primary_N] if secondary_N is None else [primary_N, secondary_N]
    return lexicographic_order(keys, indices_N, k)


def gumbel_noise(seed: int, indices_N: Tensor) -> Tensor:
    """Standard Gumbel noise ``-log(-log u_i)`` keyed by ``(seed, original index i)``."""
    return -torch.log(-torch.log(keyed_uniform(seed, indices_N)))


def order_keys(
    priority: Tensor | Priority, indices_N: Tensor, mode: str, beta: float, seed: int
) -> tuple[Tensor, ...]:
    """Sort keys (most significant first, for :func:`lexicographic_order`) of a per-item score strategy.

    top-k: the priority's keys (free items first under ``cost_aware``, then the value).
    Stochastic: :func:`~activebayes.acquisition.selection.stochastic_keys` with Gumbel
    noise keyed by ``(seed, original index)``: ``log w + G``, then ``G`` alone among items
    of weight 0 (so they come last, in random order).
    """
    if mode == "topk":
        return as_priority(priority).keys()
    return stochastic_keys(priority, gumbel_noise(seed, indices_N), mode, beta)


def finish_in_order(
    order: Tensor, scores_N: Tensor, indices_N: Tensor, batch_size: int, plan: BudgetPlan | None, name: str
) -> Selection:
    """Take items in ``order`` (positions) under the budget; the selection in original indices."""
    picked = take_in_order(order, scores_N, batch_size, plan, name)
    return Selection(indices_N[picked.indices].clone(), picked.scores, name)


def aligned(rows: Rows, column: str, indices_N: Tensor) -> Tensor:
    """``rows[column]`` in the order of ``indices_N`` (every candidate exactly once)."""
    order = torch.argsort(rows["index"])
    if not torch.equal(rows["index"][order], indices_N):
        raise RuntimeError(f"the executor returned {len(rows['index'])} rows for {len(indices_N)} candidates")
    return rows[column][order]


# ---------------------------------------------------------------------------- works


def _score(score_fn: Callable[..., Tensor], log_probs_n_K_C: Tensor, device: Device) -> Tensor:
    return score_fn(log_probs_n_K_C, device=device, chunk_size=None).detach().to("cpu", torch.float64)


@dataclass(frozen=True)
class AllScores:
    """Keep every item's score (``O(N)``): for cost budgets and softrank."""

    score_fn: Callable[..., Tensor]
    device: str | None = None
    needs_predictions: bool = True
    keep: int | None = None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        return {"index": indices_n, "score": _score(self.score_fn, log_probs_n_K_C, self.device)}

    def reduce(self, rows: Rows) -> Rows:
        return rows


@dataclass(frozen=True)
class TopCandidates:
    """Keep each chunk's top ``keep`` items by a per-item key (exact distributed top-k).

    ``mode`` ``"topk"`` ranks by the score; ``"power"`` / ``"softmax"`` by
    ``log w(score) + G(seed, index)`` (the weights of an item need only its own score).
    """

    score_fn: Callable[..., Tensor]
    mode: str
    keep: int
    seed: int
    beta: float = 1.0
    device: str | None = None
    needs_predictions: bool = True

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        scores_n = _score(self.score_fn, log_probs_n_K_C, self.device)
        keys_n = order_keys(scores_n, indices_n, self.mode, self.beta, self.seed)
        return self.reduce({"index": indices_n, "score": scores_n, "keys": torch.stack(keys_n, dim=1)})

    def reduce(self, rows: Rows) -> Rows:
        top = lexicographic_order(rows["keys"].unbind(1), rows["index"], self.keep)
        return {key: value[top] for key, value in rows.items()}


@dataclass(frozen=True)
class BaldPrefilter:
    """Keep the ``keep`` items of highest BALD (under ``cost_aware``: free items first, then per unit
    cost; :func:`~activebayes.acquisition.selection.cost_priority`) with their predictions.

    Items that cost more than the whole ``cost_budget`` can never be picked: priority ``-inf``.
    """

    keep: int
    cost_budget: float | None = None
    cost_aware: bool = False
    device: str | None = None
    needs_predictions: bool = True

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        priority = Priority(_score(bald, log_probs_n_K_C, self.device))
        if costs_n is not None and self.cost_budget is not None:
            plan = BudgetPlan(costs_n.to(torch.float64), float(self.cost_budget))
            priority = cost_priority(priority.value_N, plan, self.cost_aware).masked(plan.fits_N(0.0))
        keys_n = torch.stack(priority.keys(), dim=1)
        return self.reduce({"index": indices_n, "keys": keys_n, "log_probs": log_probs_n_K_C.float()})

    def reduce(self, rows: Rows) -> Rows:
        top = lexicographic_order(rows["keys"].unbind(1), rows["index"], self.keep)
        return {key: value[top] for key, value in rows.items()}


@dataclass(frozen=True)
class GradientFactors:
    """Keep every item's BADGE gradient factor ``a = p̄ - e_ŷ`` (``[N, C]`` float64, not ``[N, K, C]``)."""

    device: str | None = None
    needs_predictions: bool = True
    keep: int | None = None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        return {"index": indices_n, "factors": loss_gradient_factors(log_probs_n_K_C, device=self.device)}

    def reduce(self, rows: Rows) -> Rows:
        return rows


@dataclass(frozen=True)
class AllLogProbs:
    """Keep every item's predictions ``[N, K, C]`` (in memory): strategies without a streaming plan."""

    needs_predictions: bool = True
    keep: int | None = None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        return {"index": indices_n, "log_probs": log_probs_n_K_C}

    def reduce(self, rows: Rows) -> Rows:
        return rows


# ---------------------------------------------------------------------------- plans

Planner = Callable[[PoolRequest], PoolPlan]


def per_item_plan(score_fn: Callable[..., Tensor], mode: str) -> Planner:
    """The plan of a per-item score ranked top-k (``mode="topk"``) or sampled (``"power"``, ...).

    Without a cost budget (and for every mode but softrank) each chunk keeps its own top
    ``batch_size`` by ``(key desc, index asc)``; otherwise every score is kept and the
    order walked under the budget.
    """

    def plan(request: PoolRequest) -> PoolPlan:
        name, indices_N, batch_size, budget = request.name, request.indices_N, request.batch_size, request.budget
        beta = float(request.options.get("beta", 1.0))
        cost_aware = bool(request.options.get("cost_aware", False))
        if budget is None and mode != "softrank":
            def finish_top(rows: Rows | None) -> Selection:
                assert rows is not None
                order = lexicographic_order(rows["keys"].unbind(1), rows["index"], batch_size)
                return finish_in_order(order, rows["score"], rows["index"], batch_size, None, name)

            work = TopCandidates(score_fn, mode, batch_size, request.seed, beta, request.device_name)
            return PoolPlan(work, finish_top, name)

        def finish_all(rows: Rows | None) -> Selection:
            assert rows is not None
            scores_N = aligned(rows, "score", indices_N)
            priority = cost_priority(scores_N, budget, cost_aware)
            keys_N = order_keys(priority, indices_N, mode, beta, request.seed)
            order = lexicographic_order(keys_N, indices_N, batch_size if budget is None else None)
            return finish_in_order(order, scores_N, indices_N, batch_size, budget, name)

        return PoolPlan(AllScores(score_fn, request.device_name), finish_all, name)

    return plan


def gather_plan(fn: Callable[..., Selection], needs_predictions: bool,
                check_gathered: Callable[[PoolRequest, Tensor], None] | None = None) -> Planner:
    """The fallback plan: gather the whole ``[N, K, C]`` (nothing if ``needs_predictions`` is
    false: the pool size is passed instead) and run the strategy function ``fn`` once on it,
    as :func:`~activebayes.acquisition.select` would. ``check_gathered`` checks the gathered
    predictions against the inputs (e.g. EPIG's targets must share K and C)."""

    def plan(request: PoolRequest) -> PoolPlan:
        def finish(rows: Rows | None) -> Selection:
            predictions: Tensor | int = request.N
            if rows is not None:
                predictions = aligned(rows, "log_probs", request.indices_N)
                if check_gathered is not None:
                    check_gathered(request, predictions)
            picked = fn(predictions, request.batch_size, name=request.name, generator=request.generator(),
                        plan=request.budget, device=request.device, **request.inputs, **request.options)
            return request.in_original_indices(picked)

        return PoolPlan(AllLogProbs() if needs_predictions else None, finish, f"predict for {request.name}")

    return plan
