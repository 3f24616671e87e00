"""Strategy registry and :func:`select`: names -> batch acquisition.

The loop and the CLI pass strings; :func:`select` looks the name up in a registry
and calls the strategy. Built in:

- ``random``: uniformly random (needs no predictions: pass the pool size ``N``);
- top-k of a score: ``entropy`` (aliases ``max_entropy``, ``predictive_entropy``),
  ``bald``, ``jackknife_bald``, ``variation_ratios``, ``mean_std``, ``margin``,
  ``least_confidence``;
- ``batchbald``: greedy BatchBALD (Kirsch et al. 2019), see :mod:`.greedy_batchbald`;
- stochastic batch acquisition (Kirsch et al. 2021): ``power_bald``, ``softmax_bald``,
  ``softrank_bald``, ``power_entropy``, ``softmax_entropy``, ``softrank_entropy``;
- ``epig``: top-k of EPIG (Bickford Smith et al. 2023), see :mod:`.epig`, and its batch
  form ``power_epig`` (stochastic batch acquisition on EPIG);
- ``badge``: BADGE (Ash et al. 2020), k-means++ over gradient embeddings, see :mod:`.badge`;
- ``typicality``: TypiClust (Hacohen et al. 2022), see :mod:`.typicality`.

Inputs. Every strategy declares what it reads (:data:`INPUTS`); :func:`select` takes
the extra ones as keyword arguments and checks them up front:

- ``"log_probs"``: ``log_probs_N_K_C`` (the first argument) -- predictions of the pool;
- ``"target_log_probs"``: ``target_log_probs_M_K_C`` -- predictions of M target inputs
  under the same K function samples (EPIG; optional: M pool items are sampled when absent);
- ``"features"``: ``features_N_D`` -- a representation of every pool item (BADGE: the
  penultimate features; typicality: e.g. a self-supervised embedding);
- ``"labelled_features"``: ``labelled_features_L_D`` -- the same representation of the L
  labelled items (typicality; L may be 0).

Plug in your own with a score function (``log_probs_N_K_C -> scores_N``) in two lines::

    register_strategy("my_score", topk_strategy(my_score_fn))
    select(log_probs_N_K_C, "my_score", 10)

The registered score then also streams over big pools and runs on Ray.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from activebayes._validation import check_log_probs, check_nonnegative_float, check_positive_int, unknown_name_message
from activebayes.acquisition import scores as _scores
from activebayes.acquisition._features import check_features
from activebayes.acquisition.badge import badge
from activebayes.acquisition.epig import DEFAULT_NUM_TARGETS, epig
from activebayes.acquisition.greedy_batchbald import DEFAULT_NUM_SAMPLES, batchbald
from activebayes.acquisition.selection import (
    BudgetPlan,
    Selection,
    check_budget,
    cost_priority,
    stochastic_order,
    take_in_order,
    top_order,
)
from activebayes.acquisition.typicality import MAX_CLUSTERS, MIN_CLUSTER_SIZE, NUM_NEIGHBORS, typicality
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "INPUTS",
    "SCORE_MODES",
    "Strategy",
    "StrategyFn",
    "StrategyRegistry",
    "available_strategies",
    "epig_strategy",
    "get_strategy",
    "register_strategy",
    "select",
    "score_function",
    "stochastic_strategy",
    "topk_strategy",
]

Device = torch.device | str | None

#: How a per-item score becomes a batch: top-k, or stochastic batch acquisition.
SCORE_MODES = ("topk", "power", "softmax", "softrank")

#: What a strategy may read, and the keyword argument of :func:`select` (and of the
#: strategy function) that carries it. ``log_probs`` is :func:`select`'s first argument
#: and reaches the strategy as ``predictions``.
INPUTS: Mapping[str, str] = {
    "log_probs": "log_probs_N_K_C",
    "target_log_probs": "target_log_probs_M_K_C",
    "features": "features_N_D",
    "labelled_features": "labelled_features_L_D",
}

#: Keyword arguments every strategy function receives from :func:`select` (not options).
_BASE_PARAMETERS = ("name", "generator", "plan", "device")


class StrategyFn(Protocol):
    """What a registered strategy implements.

    ``predictions`` is ``log_probs_N_K_C`` (already structurally checked) or, for
    strategies that do not read ``"log_probs"``, possibly the pool size ``N`` as an
    int. ``batch_size`` is validated (``1 <= batch_size <= N``) and ``plan`` is the
    validated cost budget or ``None``. Extra inputs (:data:`INPUTS`) arrive as keyword
    arguments named as there, checked for shape; the remaining keyword-only
    parameters are the strategy's options (found once, at registration, with
    :func:`inspect.signature`; a ``**options`` parameter accepts any option unchecked).
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
    that choose a batch jointly (BatchBALD, BADGE, typicality), ignore the model
    (random) or need more than the chunk's predictions (EPIG).

    ``inputs`` are the :data:`INPUTS` the strategy needs (``needs_predictions`` is
    ``"log_probs" in inputs``); ``optional_inputs`` those it reads when given.
    ``options`` are the names of its options, or ``None`` when it takes any
    (``**options``).
    """

    name: str
    fn: StrategyFn
    needs_predictions: bool = True
    aliases: tuple[str, ...] = field(default=())
    score_fn: Callable[..., Tensor] | None = None
    mode: str | None = None
    inputs: tuple[str, ...] = ("log_probs",)
    optional_inputs: tuple[str, ...] = ()
    options: tuple[str, ...] | None = None

    def input_arguments(self) -> tuple[str, ...]:
        """The keyword arguments of :func:`select` this strategy reads (besides ``log_probs_N_K_C``)."""
        return tuple(INPUTS[key] for key in (*self.inputs, *self.optional_inputs) if key != "log_probs")


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
        needs_predictions: bool | None = None,
        aliases: Iterable[str] = (),
        replace: bool = False,
        score_fn: Callable[..., Tensor] | None = None,
        mode: str | None = None,
        inputs: Iterable[str] | None = None,
        optional_inputs: Iterable[str] = (),
    ) -> Strategy:
        aliases = tuple(aliases)
        if score_fn is None and mode is None:  # built by topk_strategy / stochastic_strategy
            score_fn, mode = getattr(fn, "score_fn", None), getattr(fn, "mode", None)
        if score_fn is not None:
            score_fn = score_function(score_fn)
        for key in (name, *aliases):
            if not isinstance(key, str) or not key:
                raise InvalidArgumentError(f"strategy names must be non-empty strings, got {key!r}")
            if key in self._names and not replace:
                raise InvalidArgumentError(f"strategy name {key!r} is already registered (pass replace=True to override)")
        if not callable(fn):
            raise InvalidTypeError(f"fn must be callable, got {type(fn).__name__}")
        if mode is not None and mode not in SCORE_MODES:
            raise InvalidArgumentError(f"mode must be one of {', '.join(SCORE_MODES)} or None, got {mode!r}")
        if (mode is None) != (score_fn is None):
            raise InvalidArgumentError("score_fn and mode go together: give both (a per-item score) or neither")
        inputs, optional_inputs = _check_inputs(inputs, optional_inputs, needs_predictions)
        options = _strategy_options(fn, (*inputs, *optional_inputs))
        entry = Strategy(
            name, fn, "log_probs" in inputs, aliases, score_fn, mode, inputs, optional_inputs, options
        )
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
            raise InvalidArgumentError(unknown_name_message("strategy", name, self.names(aliases=True)))
        return self._entries[self._names[name]]

    def names(self, *, aliases: bool = False) -> list[str]:
        return sorted(self._names if aliases else self._entries)


def _check_inputs(
    inputs: Iterable[str] | None, optional_inputs: Iterable[str], needs_predictions: bool | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Validate a registration's ``inputs`` / ``optional_inputs`` against :data:`INPUTS`."""
    if inputs is None:
        inputs = ("log_probs",) if needs_predictions is None or needs_predictions else ()
    if isinstance(inputs, str) or isinstance(optional_inputs, str):
        raise InvalidTypeError("inputs and optional_inputs must be sequences of input names, not a str")
    inputs, optional = tuple(inputs), tuple(optional_inputs)
    for key in (*inputs, *optional):
        if key not in INPUTS:
            raise InvalidArgumentError(f"inputs must be names from {', '.join(INPUTS)}, got {key!r}")
    if len(set(inputs + optional)) != len(inputs + optional):
        raise InvalidArgumentError(f"inputs {inputs} and optional_inputs {optional} must not repeat a name")
    if "log_probs" in optional:
        raise InvalidArgumentError("'log_probs' cannot be optional: list it in inputs, or leave it out")
    if needs_predictions is not None and bool(needs_predictions) != ("log_probs" in inputs):
        raise InvalidArgumentError(
            f"needs_predictions={needs_predictions} contradicts inputs={inputs} "
            "(a strategy needs predictions exactly when 'log_probs' is among its inputs)"
        )
    return inputs, optional


def _strategy_options(fn: Callable[..., Any], inputs: tuple[str, ...]) -> tuple[str, ...] | None:
    """The option names of a strategy function (once, at registration); ``None`` if it takes ``**options``.

    Checks that ``fn`` accepts what :func:`select` passes: two positional arguments, the
    keywords ``name``, ``generator``, ``plan``, ``device`` and one per extra input.
    """
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no introspectable signature (some builtins / C callables)
        return None
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    positional = [p for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    takes_varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    if len(positional) < 2 and not takes_varargs:
        raise InvalidTypeError(
            f"fn must take two positional arguments (predictions, batch_size), got the signature {inspect.signature(fn)}"
        )
    keywords = {p.name for p in parameters[2:] if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    keywords |= {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    required = (*_BASE_PARAMETERS, *(INPUTS[key] for key in inputs if key != "log_probs"))
    missing = [name for name in required if name not in keywords]
    if missing and not takes_any:
        raise InvalidTypeError(
            f"fn must accept the keyword arguments {', '.join(required)}; it lacks {', '.join(missing)}"
        )
    if takes_any:
        return None
    return tuple(sorted(keywords - set(required) - set(INPUTS.values())))


def score_function(score_fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Adapt a per-item score to the form the library calls: ``fn(log_probs_n_K_C, *, device, chunk_size)``.

    ``score_fn`` may be a plain ``fn(log_probs_N_K_C) -> scores_N``: ``device`` and
    ``chunk_size`` are passed only when it takes them (without ``device`` the
    predictions are moved there first). The result is checked: one finite score per item.
    """
    if getattr(score_fn, "_activebayes_score", False):
        return score_fn
    if not callable(score_fn):
        raise InvalidTypeError(f"score_fn must be callable, got {type(score_fn).__name__}")
    try:
        parameters = inspect.signature(score_fn).parameters.values()
    except (TypeError, ValueError):
        parameters = ()
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    accepted = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    passes_device = takes_any or "device" in accepted
    passes_chunk_size = takes_any or "chunk_size" in accepted
    label = getattr(score_fn, "__name__", repr(score_fn))

    def adapted(log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None) -> Tensor:
        keywords: dict[str, Any] = {}
        if passes_device:
            keywords["device"] = device
        elif device is not None:
            log_probs_N_K_C = log_probs_N_K_C.to(device)
        if passes_chunk_size:
            keywords["chunk_size"] = chunk_size
        scores_N = score_fn(log_probs_N_K_C, **keywords)
        N = int(log_probs_N_K_C.shape[0])
        if not isinstance(scores_N, Tensor) or tuple(scores_N.shape) != (N,):
            got = f"shape {tuple(scores_N.shape)}" if isinstance(scores_N, Tensor) else type(scores_N).__name__
            raise InvalidArgumentError(f"score function {label} must return a tensor of shape ({N},) "
                                       f"(one score per item), got {got}")
        if not torch.isfinite(scores_N).all():
            raise InvalidArgumentError(f"score function {label} returned NaN or infinite scores")
        return scores_N

    adapted._activebayes_score = True  # type: ignore[attr-defined]
    adapted.__name__ = label
    adapted.__doc__ = score_fn.__doc__
    return adapted


def topk_strategy(score_fn: Callable[..., Tensor]) -> StrategyFn:
    """Build a strategy that takes the ``batch_size`` highest ``score_fn(log_probs_N_K_C)``.

    ``score_fn`` maps ``log_probs_N_K_C`` to one score per item (larger = more worth
    labelling); it may take the keywords ``device`` and ``chunk_size`` (see
    :func:`score_function`). Registered with :func:`register_strategy`, the score also
    streams over big pools and runs on Ray. Options: ``cost_aware`` (rank by score per
    unit cost, needs ``costs_N`` / ``cost_budget``) and ``chunk_size`` (passed to the score).
    """
    score = score_function(score_fn)

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
        scores_N = score(predictions, device=device, chunk_size=chunk_size)
        order = top_order(cost_priority(scores_N, plan, cost_aware), batch_size, plan)
        return take_in_order(order, scores_N, batch_size, plan, name)

    strategy.__doc__ = f"Top-k of {score.__name__}."
    strategy.score_fn, strategy.mode = score, "topk"  # type: ignore[attr-defined]
    return strategy


def stochastic_strategy(score_fn: Callable[..., Tensor], mode: str) -> StrategyFn:
    """Stochastic batch acquisition (Kirsch, Farquhar, Atighehchian, Jesson, Branchaud-Charron, Gal 2021).

    Samples ``batch_size`` items without replacement with probability
    ``∝ s^β`` (power), ``∝ exp(β s)`` (softmax) or ``∝ rank^{-β}`` (softrank) of the
    score ``s``, by Gumbel-top-k. ``score_fn`` as for :func:`topk_strategy`. Options:
    ``beta`` (coldness, default 1; 0 is uniform, large approaches top-k),
    ``cost_aware``, ``chunk_size``. The reported scores are the items' plain scores ``s``.
    """
    if mode not in SCORE_MODES[1:]:
        raise InvalidArgumentError(f"mode must be one of {', '.join(SCORE_MODES[1:])}, got {mode!r}")
    score = score_function(score_fn)

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
        scores_N = score(predictions, device=device, chunk_size=chunk_size)
        order = stochastic_order(cost_priority(scores_N, plan, cost_aware), mode, beta, generator)
        return take_in_order(order, scores_N, batch_size, plan, name)

    strategy.__doc__ = f"Stochastic ({mode}) batch of {score.__name__}."
    strategy.score_fn, strategy.mode = score, mode  # type: ignore[attr-defined]
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
    num_samples: int = DEFAULT_NUM_SAMPLES,
    max_exact_configs: int | None = None,
    cost_aware: bool = False,
    dtype: torch.dtype | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
) -> Selection:
    """Greedy BatchBALD; the options are :func:`~activebayes.acquisition.batchbald`'s."""
    selection = batchbald(
        predictions, batch_size, num_samples=num_samples, max_exact_configs=max_exact_configs, generator=generator,
        cost_aware=cost_aware, device=device, dtype=dtype, chunk_size=chunk_size, progress=progress, plan=plan,
    )
    return Selection(selection.indices, selection.scores, name)


def _pool_targets(
    log_probs_N_K_C: Tensor, num_targets: int | None, target_log_probs_M_K_C: Tensor | None,
    generator: torch.Generator | None,
) -> Tensor:
    """EPIG's targets: the given ones, or ``num_targets`` pool rows drawn without replacement."""
    if target_log_probs_M_K_C is not None:
        if num_targets is not None:
            raise InvalidArgumentError(
                "num_targets sets how many pool items are sampled as targets; it cannot be combined with "
                "target_log_probs_M_K_C (got both)"
            )
        return target_log_probs_M_K_C
    M = check_positive_int(DEFAULT_NUM_TARGETS if num_targets is None else num_targets, "num_targets")
    N = int(log_probs_N_K_C.shape[0])
    rows_M = torch.randperm(N, generator=generator)[: min(M, N)].sort().values
    return log_probs_N_K_C[rows_M.to(log_probs_N_K_C.device)]


def epig_strategy(mode: str = "topk") -> StrategyFn:
    """EPIG (Bickford Smith et al. 2023) as a strategy: top-k (``"topk"``) or stochastic (``"power"``, ...).

    Target inputs: ``target_log_probs_M_K_C`` when given (predictions of M target inputs
    under the same K function samples); else ``num_targets`` (default
    :data:`~activebayes.acquisition.epig.DEFAULT_NUM_TARGETS` = 100, as in the paper's
    code) pool items drawn uniformly without replacement from ``generator``, whose
    predictions are the pool's own rows (so the same functions by construction).
    Options: ``num_targets``, ``cost_aware``, ``chunk_size``, and ``beta`` for the
    stochastic modes (the batch form: stochastic batch acquisition, Kirsch et al. 2023).
    """
    if mode not in SCORE_MODES:
        raise InvalidArgumentError(f"mode must be one of {', '.join(SCORE_MODES)}, got {mode!r}")

    def scores(predictions: Tensor, generator: torch.Generator | None, target: Tensor | None,
               num_targets: int | None, device: Device, chunk_size: int | None) -> Tensor:
        targets_M_K_C = _pool_targets(predictions, num_targets, target, generator)
        return epig(predictions, targets_M_K_C, device=device, chunk_size=chunk_size)

    if mode == "topk":

        def topk(
            predictions: Tensor,
            batch_size: int,
            *,
            name: str,
            generator: torch.Generator | None,
            plan: BudgetPlan | None,
            device: Device,
            target_log_probs_M_K_C: Tensor | None = None,
            num_targets: int | None = None,
            cost_aware: bool = False,
            chunk_size: int | None = None,
        ) -> Selection:
            scores_N = scores(predictions, generator, target_log_probs_M_K_C, num_targets, device, chunk_size)
            order = top_order(cost_priority(scores_N, plan, cost_aware), batch_size, plan)
            return take_in_order(order, scores_N, batch_size, plan, name)

        return topk

    def stochastic(
        predictions: Tensor,
        batch_size: int,
        *,
        name: str,
        generator: torch.Generator | None,
        plan: BudgetPlan | None,
        device: Device,
        target_log_probs_M_K_C: Tensor | None = None,
        num_targets: int | None = None,
        beta: float = 1.0,
        cost_aware: bool = False,
        chunk_size: int | None = None,
    ) -> Selection:
        beta = check_nonnegative_float(beta, "beta")
        scores_N = scores(predictions, generator, target_log_probs_M_K_C, num_targets, device, chunk_size)
        order = stochastic_order(cost_priority(scores_N, plan, cost_aware), mode, beta, generator)
        return take_in_order(order, scores_N, batch_size, plan, name)

    return stochastic


def _badge_strategy(
    predictions: Tensor,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: Device,
    features_N_D: Tensor,
    chunk_size: int | None = None,
) -> Selection:
    """BADGE: k-means++ seeding over gradient embeddings (see :func:`~activebayes.acquisition.badge.badge`)."""
    selection = badge(predictions, features_N_D, batch_size, generator=generator, plan=plan, device=device,
                      chunk_size=chunk_size)
    return Selection(selection.indices, selection.scores, name)


def _typicality_strategy(
    predictions: Tensor | int,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: Device,
    features_N_D: Tensor,
    labelled_features_L_D: Tensor,
    num_neighbors: int = NUM_NEIGHBORS,
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    max_clusters: int = MAX_CLUSTERS,
    num_clusters: int | None = None,
    max_iter: int = 100,
) -> Selection:
    """TypiClust (see :func:`~activebayes.acquisition.typicality.typicality`)."""
    selection = typicality(
        features_N_D, labelled_features_L_D, batch_size, generator=generator, num_neighbors=num_neighbors,
        min_cluster_size=min_cluster_size, max_clusters=max_clusters, num_clusters=num_clusters, max_iter=max_iter,
        plan=plan, device=device,
    )
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
    registry.register("epig", epig_strategy("topk"), optional_inputs=("target_log_probs",))
    registry.register("power_epig", epig_strategy("power"), optional_inputs=("target_log_probs",))
    registry.register("badge", _badge_strategy, inputs=("log_probs", "features"))
    registry.register("typicality", _typicality_strategy, inputs=("features", "labelled_features"),
                      aliases=("typiclust",))
    return registry


#: The registry behind :func:`select`; extend it with :func:`register_strategy`.
REGISTRY = _default_registry()


def register_strategy(
    name: str,
    fn: StrategyFn,
    *,
    needs_predictions: bool | None = None,
    aliases: Iterable[str] = (),
    replace: bool = False,
    score_fn: Callable[..., Tensor] | None = None,
    mode: str | None = None,
    inputs: Iterable[str] | None = None,
    optional_inputs: Iterable[str] = (),
) -> Strategy:
    """Register ``fn`` under ``name`` (and ``aliases``) so :func:`select` and the CLI find it.

    ``inputs`` (names from :data:`INPUTS`, default ``("log_probs",)``) are what the
    strategy needs, ``optional_inputs`` what it reads when given; they reach ``fn`` as
    keyword arguments. ``needs_predictions=False`` is short for ``inputs=()`` (the loop
    may skip inference and pass the pool size instead of ``log_probs_N_K_C``).
    ``score_fn`` with ``mode`` (see :class:`Strategy`) lets big pools be scored chunk
    by chunk and on Ray. ``fn``'s other keyword-only parameters are its options,
    checked by :func:`select`. Registering a taken name raises unless ``replace``.
    """
    return REGISTRY.register(name, fn, needs_predictions=needs_predictions, aliases=aliases, replace=replace,
                             score_fn=score_fn, mode=mode, inputs=inputs, optional_inputs=optional_inputs)


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
    cost_budget: float | None = None,
    device: Device = None,
    target_log_probs_M_K_C: Tensor | None = None,
    features_N_D: Tensor | None = None,
    labelled_features_L_D: Tensor | None = None,
    **options: Any,
) -> Selection:
    """Choose ``batch_size`` pool items to label with the named ``strategy``.

    Args:
        log_probs_N_K_C: predictions ``[N, K, C]`` (log-probabilities). For
            strategies that need no predictions (``"random"``, ``"typicality"``) the pool
            size ``N`` may be given instead.
        strategy: a name from :func:`available_strategies` (or an alias).
        batch_size: at most this many picks, ``1 <= batch_size <= N``.
        generator: seeds every random choice (random, stochastic, BatchBALD's sampled
            configurations, EPIG's sampled targets, BADGE's and k-means' seeding);
            ``None`` uses torch's global generator.
        costs_N: optional per-item labelling cost (``[N]``, >= 0), with ``cost_budget``.
        cost_budget: total labelling cost: items are taken in the strategy's order, skipping
            those that no longer fit; the total never exceeds ``cost_budget`` (fewer picks possible).
        device: compute there (e.g. ``"cuda"``); results come back on the CPU.
        target_log_probs_M_K_C: EPIG's target predictions ``[M, K, C]`` under the same K
            function samples (optional: without it M pool items are sampled).
        features_N_D: a representation of every pool item ``[N, D]`` (``"badge"``: the
            penultimate features; ``"typicality"``).
        labelled_features_L_D: the same representation of the L labelled items
            ``[L, D]`` (``"typicality"``; L may be 0).
        **options: strategy options, e.g. ``num_samples`` / ``max_exact_configs`` for
            ``"batchbald"``, ``beta`` for stochastic strategies, ``num_targets`` for EPIG,
            ``cost_aware=True`` to rank by score per unit cost, ``chunk_size``. An option
            the strategy does not have raises ``TypeError`` naming the ones it has.

    Each strategy's :class:`Strategy` entry says which inputs it needs
    (``get_strategy(name).inputs``); a missing one, or one it does not read, raises
    ``TypeError`` naming the argument.

    Returns:
        :class:`Selection` with ``indices`` (pick order), ``scores`` and ``strategy``.

    >>> lp = torch.log_softmax(torch.randn(100, 8, 10, generator=torch.Generator().manual_seed(0)), -1)
    >>> len(select(lp, "batchbald", 5, num_samples=1000, generator=torch.Generator().manual_seed(0)))
    5
    >>> select(100, "random", 3, generator=torch.Generator().manual_seed(0)).strategy
    'random'
    >>> len(select(lp, "epig", 4, num_targets=20, generator=torch.Generator().manual_seed(0)))
    4
    """
    entry = get_strategy(strategy)
    K_C: tuple[int, int] | None = None
    if isinstance(log_probs_N_K_C, int) and not isinstance(log_probs_N_K_C, bool):
        if entry.needs_predictions:
            raise InvalidTypeError(
                f"strategy {entry.name!r} needs predictions log_probs_N_K_C [N, K, C], got the int {log_probs_N_K_C}"
            )
        N = check_positive_int(log_probs_N_K_C, "log_probs_N_K_C (pool size)")
    else:
        check_log_probs(log_probs_N_K_C, values=False)
        N, K, C = log_probs_N_K_C.shape
        K_C = (int(K), int(C))
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    plan = check_budget(costs_N, cost_budget, N)
    if entry.options is not None:
        unknown = sorted(set(options) - set(entry.options))
        if unknown:
            accepted = ", ".join(entry.options) if entry.options else "none"
            raise InvalidTypeError(
                f"strategy {entry.name!r} got an unknown option {', '.join(map(repr, unknown))}; "
                f"its options are: {accepted}"
            )
    inputs = _check_select_inputs(
        entry, N, K_C,
        {
            "target_log_probs_M_K_C": target_log_probs_M_K_C,
            "features_N_D": features_N_D,
            "labelled_features_L_D": labelled_features_L_D,
        },
    )
    return entry.fn(
        log_probs_N_K_C, batch_size, name=entry.name, generator=generator, plan=plan, device=device,
        **inputs, **options,
    )


_INPUT_SHAPES = {
    "target_log_probs_M_K_C": "[M, K, C] (target inputs, function samples, classes)",
    "features_N_D": "[N, D] (a representation of every pool item)",
    "labelled_features_L_D": "[L, D] (the same representation of the labelled items; L may be 0)",
}


def _check_select_inputs(
    entry: Strategy, N: int, K_C: tuple[int, int] | None, given: dict[str, Tensor | None]
) -> dict[str, Tensor]:
    """Check the extra inputs :func:`select` got against the strategy's entry; return those to pass."""
    reads = entry.input_arguments()
    for argument, value in given.items():
        if value is not None and argument not in reads:
            what = ", ".join(INPUTS[key] for key in (*entry.inputs, *entry.optional_inputs)) or "only the pool size"
            raise InvalidTypeError(f"strategy {entry.name!r} does not read {argument}; it reads: {what}")
    for key in entry.inputs:
        argument = INPUTS[key]
        if key != "log_probs" and given[argument] is None:
            raise InvalidTypeError(f"strategy {entry.name!r} needs {argument} {_INPUT_SHAPES[argument]}, got None")
    target = given["target_log_probs_M_K_C"]
    if target is not None:
        check_log_probs(target, "target_log_probs_M_K_C", shape_doc=_INPUT_SHAPES["target_log_probs_M_K_C"])
        if K_C is not None and tuple(target.shape[1:]) != K_C:
            raise InvalidArgumentError(
                f"target_log_probs_M_K_C must have the pool's K={K_C[0]} function samples and C={K_C[1]} "
                f"classes (shape [M, {K_C[0]}, {K_C[1]}]), got {tuple(target.shape)}"
            )
    features = given["features_N_D"]
    if features is not None:
        check_features(features, "features_N_D", N)
    labelled = given["labelled_features_L_D"]
    if labelled is not None:
        check_features(labelled, "labelled_features_L_D", None,
                       dims=None if features is None else int(features.shape[1]))
    return {argument: value for argument, value in given.items() if value is not None}
