"""Strategy registry and :func:`select`: names -> batch acquisition.

The loop and the CLI pass strings; :func:`select` looks the name up in a registry
and calls the strategy. Built in:

- ``random``: uniformly random (needs no predictions: pass the pool size ``N``);
- top-k of a score: ``entropy`` (aliases ``max_entropy``, ``predictive_entropy``),
  ``bald``, ``jackknife_bald``, ``variation_ratios``, ``mean_std``, ``margin``,
  ``least_confidence``;
- ``batchbald``: greedy BatchBALD (Kirsch et al. 2019), see :mod:`.batchbald`;
- stochastic batch acquisition (Kirsch et al. 2021): ``power_bald``, ``softmax_bald``,
  ``softrank_bald``, ``power_entropy``, ``softmax_entropy``, ``softrank_entropy``.

Plug in your own with a score function in two lines::

    register_strategy("my_score", topk_strategy(my_score_fn))
    select(log_probs_N_K_C, "my_score", 10)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from activebayes._validation import check_log_probs, check_nonnegative_float, check_positive_int
from activebayes.acquisition import scores as _scores
from activebayes.acquisition.greedy_batchbald import batchbald
from activebayes.acquisition.selection import (
    BudgetPlan,
    Selection,
    check_budget,
    cost_priority,
    stochastic_order,
    take_in_order,
    top_order,
)

__all__ = [
    "SCORE_MODES",
    "Strategy",
    "StrategyFn",
    "StrategyRegistry",
    "available_strategies",
    "get_strategy",
    "register_strategy",
    "select",
    "stochastic_strategy",
    "topk_strategy",
]

Device = torch.device | str | None

#: How a per-item score becomes a batch: top-k, or stochastic batch acquisition.
SCORE_MODES = ("topk", "power", "softmax", "softrank")


class StrategyFn(Protocol):
    """What a registered strategy implements.

    ``predictions`` is ``log_probs_N_K_C`` (already structurally checked) or, for
    strategies registered with ``needs_predictions=False``, possibly the pool size
    ``N`` as an int. ``batch_size`` is validated (``1 <= batch_size <= N``) and
    ``plan`` is the validated cost budget or ``None``.
    """

    def __call__(
        self,
        predictions: Tensor | int,
        batch_size: int,
        *,
        name: str,
        generator: torch.Generator | None,
        plan: BudgetPlan | None,
        device: Device,
        **options: Any,
    ) -> Selection: ...


@dataclass(frozen=True)
class Strategy:
    """A registry entry: the canonical ``name``, the implementation and its metadata.

    ``score_fn`` and ``mode`` describe strategies that rank items by a per-item
    score (``score_fn(log_probs_n_K_C) -> scores_n``, so it can run chunk by chunk
    over a pool of any size): ``mode`` is ``"topk"`` or a stochastic mode
    (``"power"``, ``"softmax"``, ``"softrank"``). Both are ``None`` for strategies
    that choose a batch jointly (BatchBALD) or ignore the model (random).
    """

    name: str
    fn: StrategyFn
    needs_predictions: bool = True
    aliases: tuple[str, ...] = field(default=())
    score_fn: Callable[..., Tensor] | None = None
    mode: str | None = None


class StrategyRegistry:
    """Maps names and aliases to :class:`Strategy` entries."""

    def __init__(self) -> None:
        self._entries: dict[str, Strategy] = {}
        self._names: dict[str, str] = {}

    def register(
        self,
        name: str,
        fn: StrategyFn,
        *,
        needs_predictions: bool = True,
        aliases: Iterable[str] = (),
        replace: bool = False,
        score_fn: Callable[..., Tensor] | None = None,
        mode: str | None = None,
    ) -> Strategy:
        aliases = tuple(aliases)
        for key in (name, *aliases):
            if not isinstance(key, str) or not key:
                raise ValueError(f"strategy names must be non-empty strings, got {key!r}")
            if key in self._names and not replace:
                raise ValueError(f"strategy name {key!r} is already registered (pass replace=True to override)")
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        if mode is not None and mode not in SCORE_MODES:
            raise ValueError(f"mode must be one of {', '.join(SCORE_MODES)} or None, got {mode!r}")
        if (mode is None) != (score_fn is None):
            raise ValueError("score_fn and mode go together: give both (a per-item score) or neither")
        entry = Strategy(name, fn, bool(needs_predictions), aliases, score_fn, mode)
        self._entries[name] = entry
        for key in (name, *aliases):
            self._names[key] = name
        return entry

    def unregister(self, name: str) -> None:
        entry = self.get(name)
        del self._entries[entry.name]
        for key in (entry.name, *entry.aliases):
            self._names.pop(key, None)

    def get(self, name: str) -> Strategy:
        if not isinstance(name, str) or name not in self._names:
            raise ValueError(f"unknown strategy {name!r}; expected one of: {', '.join(self.names(aliases=True))}")
        return self._entries[self._names[name]]

    def names(self, *, aliases: bool = False) -> list[str]:
        return sorted(self._names if aliases else self._entries)


def topk_strategy(score_fn: Callable[..., Tensor]) -> StrategyFn:
    """Build a strategy that takes the ``batch_size`` highest ``score_fn(log_probs_N_K_C)``.

    Options: ``cost_aware`` (rank by score per unit cost, needs ``costs_N`` / ``budget``)
    and ``chunk_size`` (passed to the score).
    """

    def strategy(
        predictions: Tensor | int,
        batch_size: int,
        *,
        name: str,
        generator: torch.Generator | None,
        plan: BudgetPlan | None,
        device: Device,
        cost_aware: bool = False,
        chunk_size: int | None = None,
    ) -> Selection:
        scores_N = score_fn(predictions, device=device, chunk_size=chunk_size)
        order = top_order(cost_priority(scores_N, plan, cost_aware), batch_size, plan)
        return take_in_order(order, scores_N, batch_size, plan, name)

    strategy.__doc__ = f"Top-k of {getattr(score_fn, '__name__', 'a score')}."
    return strategy


def stochastic_strategy(score_fn: Callable[..., Tensor], mode: str) -> StrategyFn:
    """Stochastic batch acquisition (Kirsch, Farquhar, Atighehchian, Jesson, Branchaud-Charron, Gal 2021).

    Samples ``batch_size`` items without replacement with probability
    ``∝ s^β`` (power), ``∝ exp(β s)`` (softmax) or ``∝ rank^{-β}`` (softrank) of the
    score ``s``, by Gumbel-top-k. Options: ``beta`` (coldness, default 1; 0 is
    uniform, large approaches top-k), ``cost_aware``, ``chunk_size``. The reported
    scores are the items' plain scores ``s``.
    """

    def strategy(
        predictions: Tensor | int,
        batch_size: int,
        *,
        name: str,
        generator: torch.Generator | None,
        plan: BudgetPlan | None,
        device: Device,
        beta: float = 1.0,
        cost_aware: bool = False,
        chunk_size: int | None = None,
    ) -> Selection:
        beta = check_nonnegative_float(beta, "beta")
        scores_N = score_fn(predictions, device=device, chunk_size=chunk_size)
        order = stochastic_order(cost_priority(scores_N, plan, cost_aware), mode, beta, generator)
        return take_in_order(order, scores_N, batch_size, plan, name)

    return strategy


def _random_strategy(
    predictions: Tensor | int,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: Device,
    cost_aware: bool = False,
) -> Selection:
    """Uniformly random batch: top-k of i.i.d. uniform scores (a random permutation prefix)."""
    N = predictions if isinstance(predictions, int) else int(predictions.shape[0])
    scores_N = _scores.random_scores(N, generator=generator)
    order = top_order(cost_priority(scores_N, plan, cost_aware), batch_size, plan)
    return take_in_order(order, scores_N, batch_size, plan, name)


def _batchbald_strategy(
    predictions: Tensor | int,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: Device,
    **options: Any,
) -> Selection:
    selection = batchbald(predictions, batch_size, generator=generator, plan=plan, device=device, **options)
    return Selection(selection.indices, selection.scores, name)


def _default_registry() -> StrategyRegistry:
    registry = StrategyRegistry()
    registry.register("random", _random_strategy, needs_predictions=False)
    registry.register(
        "entropy", topk_strategy(_scores.predictive_entropy), aliases=("max_entropy", "predictive_entropy"),
        score_fn=_scores.predictive_entropy, mode="topk",
    )
    for score_name in ("bald", "jackknife_bald", "variation_ratios", "mean_std", "margin", "least_confidence"):
        score_fn = getattr(_scores, score_name)
        registry.register(score_name, topk_strategy(score_fn), score_fn=score_fn, mode="topk")
    registry.register("batchbald", _batchbald_strategy)
    for mode in ("power", "softmax", "softrank"):
        registry.register(f"{mode}_bald", stochastic_strategy(_scores.bald, mode), score_fn=_scores.bald, mode=mode)
        registry.register(f"{mode}_entropy", stochastic_strategy(_scores.predictive_entropy, mode),
                          score_fn=_scores.predictive_entropy, mode=mode)
    return registry


#: The registry behind :func:`select`; extend it with :func:`register_strategy`.
REGISTRY = _default_registry()


def register_strategy(
    name: str,
    fn: StrategyFn,
    *,
    needs_predictions: bool = True,
    aliases: Iterable[str] = (),
    replace: bool = False,
    score_fn: Callable[..., Tensor] | None = None,
    mode: str | None = None,
) -> Strategy:
    """Register ``fn`` under ``name`` (and ``aliases``) so :func:`select` and the CLI find it.

    ``needs_predictions=False`` tells the loop it may skip inference and pass the pool
    size instead of ``log_probs_N_K_C``. ``score_fn`` with ``mode`` (see
    :class:`Strategy`) lets big pools be scored chunk by chunk and on Ray.
    Registering a taken name raises unless ``replace``.
    """
    return REGISTRY.register(name, fn, needs_predictions=needs_predictions, aliases=aliases, replace=replace,
                             score_fn=score_fn, mode=mode)


def unregister_strategy(name: str) -> None:
    """Remove the strategy ``name`` (or the one an alias names) and its aliases."""
    REGISTRY.unregister(name)


def get_strategy(name: str) -> Strategy:
    """The :class:`Strategy` entry for ``name`` or an alias; unknown names raise ``ValueError``."""
    return REGISTRY.get(name)


def available_strategies(*, aliases: bool = False) -> list[str]:
    """Sorted canonical strategy names (with ``aliases=True`` also every alias)."""
    return REGISTRY.names(aliases=aliases)


def select(
    log_probs_N_K_C: Tensor | int,
    strategy: str,
    batch_size: int,
    *,
    generator: torch.Generator | None = None,
    costs_N: Tensor | None = None,
    budget: float | None = None,
    device: Device = None,
    **options: Any,
) -> Selection:
    """Choose ``batch_size`` pool items to label with the named ``strategy``.

    Args:
        log_probs_N_K_C: predictions ``[N, K, C]`` (log-probabilities). For
            strategies that need no predictions (``"random"``) the pool size ``N``.
        strategy: a name from :func:`available_strategies` (or an alias).
        batch_size: at most this many picks, ``1 <= batch_size <= N``.
        generator: seeds every random choice (random, stochastic, BatchBALD's sampled
            configurations); ``None`` uses torch's global generator.
        costs_N: optional per-item labelling cost (``[N]``, >= 0), with ``budget``.
        budget: total labelling cost: items are taken in the strategy's order, skipping
            those that no longer fit; the total never exceeds ``budget`` (fewer picks possible).
        device: compute there (e.g. ``"cuda"``); results come back on the CPU.
        **options: strategy options, e.g. ``num_samples`` / ``max_exact_configs`` for
            ``"batchbald"``, ``beta`` for stochastic strategies, ``cost_aware=True`` to
            rank by score per unit cost, ``chunk_size``.

    Returns:
        :class:`Selection` with ``indices`` (pick order), ``scores`` and ``strategy``.

    >>> lp = torch.log_softmax(torch.randn(100, 8, 10, generator=torch.Generator().manual_seed(0)), -1)
    >>> len(select(lp, "batchbald", 5, num_samples=1000, generator=torch.Generator().manual_seed(0)))
    5
    >>> select(100, "random", 3, generator=torch.Generator().manual_seed(0)).strategy
    'random'
    """
    entry = get_strategy(strategy)
    if isinstance(log_probs_N_K_C, int) and not isinstance(log_probs_N_K_C, bool):
        if entry.needs_predictions:
            raise TypeError(
                f"strategy {entry.name!r} needs predictions log_probs_N_K_C [N, K, C], got the int {log_probs_N_K_C}"
            )
        N = check_positive_int(log_probs_N_K_C, "log_probs_N_K_C (pool size)")
    else:
        check_log_probs(log_probs_N_K_C, values=False)
        N = int(log_probs_N_K_C.shape[0])
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise ValueError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    plan = check_budget(costs_N, budget, N)
    try:
        return entry.fn(
            log_probs_N_K_C, batch_size, name=entry.name, generator=generator, plan=plan, device=device, **options
        )
    except TypeError as error:
        if "unexpected keyword argument" in str(error):
            raise TypeError(f"strategy {entry.name!r} got an unknown option: {error}") from None
        raise
