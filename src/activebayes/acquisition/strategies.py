"""Strategies: one object per strategy that knows itself, a registry, and :func:`select`.

The loop and the CLI pass strings; :func:`select` and
:func:`~activebayes.scoring.score_pool` look the name up in a registry and get a
:class:`Strategy`: everything about one strategy in one place -- its function (the
in-memory batch), the inputs it reads, its options (checked once, by
:func:`check_call`, for both callers), its defaults for a round
(:meth:`Strategy.context_defaults`), the strategy it hands over to before the first
label (:meth:`Strategy.for_context`) and its streaming plan over a pool of any size
(:meth:`Strategy.plan_pool`, see :mod:`.streaming`). Built in:

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

The registered score then also streams over big pools and runs on Ray. A strategy that
chooses a batch jointly registers its function and, to stream, a ``plan``
(``PoolRequest -> PoolPlan``: what each chunk keeps and how the kept rows become the
batch); without one, :func:`~activebayes.scoring.score_pool` gathers the whole
``[N, K, C]`` and calls the function.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from activebayes._seeding import as_generator, keyed_uniform
from activebayes._validation import (
    Device,
    check_bool,
    check_log_probs,
    check_nonnegative_float,
    check_positive_int,
    check_samples_disagree,
    check_torch_device,
    renamed_keyword,
    samples_argument,
)
from activebayes.acquisition import scores as _scores
from activebayes.acquisition._features import check_features
from activebayes.acquisition.badge import badge, badge_from_factors
from activebayes.acquisition.epig import DEFAULT_NUM_TARGETS, epig
from activebayes.acquisition.greedy_batchbald import DEFAULT_NUM_CONFIGURATIONS, batchbald
from activebayes.acquisition.selection import (
    BudgetPlan,
    Selection,
    check_budget,
    cost_priority,
    lexicographic_order,
    stochastic_order,
    take_in_order,
    top_order,
)
from activebayes.acquisition.streaming import (
    BaldPrefilter,
    GradientFactors,
    Planner,
    PoolPlan,
    PoolRequest,
    Rows,
    aligned,
    finish_in_order,
    gather_plan,
    per_item_plan,
)
from activebayes.acquisition.typicality import MAX_CLUSTERS, MIN_CLUSTER_SIZE, NUM_NEIGHBORS, typicality
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes._registry import Registry

__all__ = [
    "BATCHBALD_MEMORY_BYTES",
    "DEFAULT_PREFILTER",
    "INPUTS",
    "SCORE_MODES",
    "AcquisitionContext",
    "CheckedCall",
    "Strategy",
    "StrategyFn",
    "StrategyRegistry",
    "available_strategies",
    "check_call",
    "epig_strategy",
    "get_strategy",
    "register_strategy",
    "select",
    "score_function",
    "stochastic_strategy",
    "topk_strategy",
    "unregister_strategy",
]


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

_INPUT_SHAPES = {
    "target_log_probs_M_K_C": "[M, K, C] (target inputs, function samples, classes)",
    "features_N_D": "[N, D] (a representation of every pool item)",
    "labelled_features_L_D": "[L, D] (the same representation of the labelled items; L may be 0)",
}

#: Keyword arguments every strategy function receives from :func:`select` (not options).
_BASE_PARAMETERS = ("name", "generator", "plan", "device")

#: BatchBALD pre-filter size M when streaming (``score_pool``'s option ``prefilter``). Measured on
#: real MNIST (benchmarks/batchbald_prefilter.py, docs/big-pools.md): the batch of 10 from the top-M
#: BALD items of a 4,500 pool equals the full-pool BatchBALD batch in 6 of 6 runs for every
#: M >= 500 (5 of 6 at M = 200); 1,000 doubles that margin and keeps the greedy steps at about a
#: third of the full pool's time.
DEFAULT_PREFILTER = 1000

#: BatchBALD's default in a round (:meth:`Strategy.context_defaults`): the whole pool while its
#: ``[N, K, C]`` float32 predictions fit in this many bytes; beyond, a BALD pre-filter keeps the
#: best ``BATCHBALD_MEMORY_BYTES / (K C 4)`` items.
BATCHBALD_MEMORY_BYTES = 1 << 30


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
class AcquisitionContext:
    """One round's situation, which a strategy may tailor its default options to.

    ``pool_size``: candidates scored this round; ``num_classes``: C; ``n_labelled``:
    labels so far; ``batch_size``: labels acquired this round; ``num_samples``: K
    function samples per prediction (``None`` when unknown).
    """

    pool_size: int
    num_classes: int
    n_labelled: int
    batch_size: int
    num_samples: int | None = None


#: ``option_check(options, call) -> options``: a strategy's own check of its option values.
OptionCheck = Callable[[dict[str, Any], "CheckedCall"], dict[str, Any]]


@dataclass(frozen=True)
class Strategy:
    """A registry entry: everything about one strategy.

    ``fn`` computes the batch in memory (:class:`StrategyFn`). ``score_fn`` and ``mode``
    describe strategies that rank items by a per-item score
    (``score_fn(log_probs_n_K_C) -> scores_n``): ``mode`` is ``"topk"`` or a stochastic
    mode (``"power"``, ``"softmax"``, ``"softrank"``); both ``None`` for the others.

    ``inputs`` are the :data:`INPUTS` the strategy needs (``needs_predictions`` is
    ``"log_probs" in inputs``); ``optional_inputs`` those it reads when given.
    ``options`` are the names of its options, or ``None`` when it takes any
    (``**options``); ``stream_options`` the options only streaming reads (BatchBALD's
    ``prefilter``); ``renamed_options`` maps deprecated option names to their new names;
    ``option_check`` checks option values.

    ``planner`` builds the streaming plan (:meth:`plan_pool`); ``defaults`` maps an
    :class:`AcquisitionContext` to default options (:meth:`context_defaults`);
    ``without_labels`` names the strategy to run before the first label (``"random"``
    for strategies that read predictions: a model fit on nothing has nothing to say).

    ``mean_only`` says the strategy reads the K function samples only through their
    mean, the predictive ``p̄ = (1/K) sum_k p_k`` (entropy, margin, BADGE): the loop then
    predicts the pool with ``LoopConfig.mean_samples`` functions, as many as the
    evaluation's predictive, instead of ``num_samples`` (which a mutual information such
    as BALD's needs).

    ``disagreement`` says the strategy scores how the K function samples disagree (BALD,
    BatchBALD, EPIG, ...): one sample has no disagreement, every score would be 0, so
    :func:`check_call` refuses predictions with K = 1 (through
    :func:`~activebayes._validation.check_samples_disagree`, as :func:`batchbald` and
    :func:`epig` do when called directly).
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
    planner: Planner | None = None
    defaults: Callable[[AcquisitionContext], Mapping[str, Any]] | None = None
    stream_options: tuple[str, ...] = ()
    renamed_options: Mapping[str, str] = field(default_factory=dict)
    option_check: OptionCheck | None = None
    without_labels: str | None = None
    mean_only: bool = False
    disagreement: bool = False

    def check_num_samples(self, K: int, argument: str) -> None:
        """Refuse K = 1 function sample (given as ``argument``) for a strategy that scores their disagreement."""
        if self.disagreement:
            check_samples_disagree(K, argument, self.name)

    def check_option_names(self, names: Iterable[str], *, streamed: bool = False) -> None:
        """Refuse option names this strategy does not take (``InvalidTypeError``, as Python refuses
        an unknown keyword, listing those it takes); ``streamed``: a pool streamed by
        :func:`~activebayes.scoring.score_pool`, which also reads ``stream_options``. A deprecated
        name (``renamed_options``) passes: :func:`check_call` renames it, with a warning."""
        if self.options is None:  # a strategy function that takes **options
            return
        accepted = (*self.options, *(self.stream_options if streamed else ()))
        unknown = sorted(set(names) - set(accepted) - set(self.renamed_options))
        if unknown:
            listed = ", ".join(sorted(accepted)) or "none"
            streaming = [name for name in unknown if name in self.stream_options]
            hint = f" ({', '.join(streaming)}: only when streaming a pool, in score_pool)" if streaming else ""
            raise InvalidTypeError(
                f"strategy {self.name!r} got an unknown option {', '.join(map(repr, unknown))}; "
                f"its options are: {listed}{hint}"
            )

    def input_arguments(self) -> tuple[str, ...]:
        """The keyword arguments of :func:`select` this strategy reads (besides ``log_probs_N_K_C``)."""
        return tuple(INPUTS[key] for key in (*self.inputs, *self.optional_inputs) if key != "log_probs")

    @property
    def reads_features(self) -> bool:
        """Whether it reads a representation of the items (features of the pool or the labelled set)."""
        return bool({"features", "labelled_features"} & {*self.inputs, *self.optional_inputs})

    def context_defaults(self, context: AcquisitionContext) -> dict[str, Any]:
        """Default options for this round (e.g. typicality's cluster count, BatchBALD's pre-filter)."""
        return {} if self.defaults is None else dict(self.defaults(context))

    def for_context(self, context: AcquisitionContext) -> Strategy:
        """The strategy that acts in ``context``: itself, or ``without_labels`` before the first label."""
        if context.n_labelled == 0 and self.without_labels is not None:
            return get_strategy(self.without_labels)
        return self

    def plan_pool(self, request: PoolRequest) -> PoolPlan:
        """How :func:`~activebayes.scoring.score_pool` streams a pool for this strategy."""
        if self.planner is not None:
            return self.planner(request)
        if self.score_fn is not None and self.mode is not None:
            return per_item_plan(self.score_fn, self.mode)(request)
        return gather_plan(self.fn, self.needs_predictions, _check_gathered_targets)(request)



class _Default:
    """Marks an argument left at its default (where ``None`` is a meaningful value)."""


class StrategyRegistry:
    """Maps names and aliases to :class:`Strategy` entries (the one registry type, shared with models and datasets)."""

    def __init__(self) -> None:
        self._registry: Registry[Strategy] = Registry("strategy")

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
        plan: Planner | None = None,
        defaults: Callable[[AcquisitionContext], Mapping[str, Any]] | None = None,
        stream_options: Iterable[str] = (),
        renamed_options: Mapping[str, str] | None = None,
        option_check: OptionCheck | None = None,
        without_labels: str | None | type[_Default] = _Default,
        mean_only: bool = False,
        disagreement: bool = False,
    ) -> Strategy:
        if mean_only and disagreement:
            raise InvalidArgumentError("mean_only and disagreement exclude each other: a strategy that reads only "
                                       "the samples' mean cannot score their disagreement")
        if score_fn is None and mode is None:  # built by topk_strategy / stochastic_strategy
            score_fn, mode = getattr(fn, "score_fn", None), getattr(fn, "mode", None)
        if score_fn is not None:
            score_fn = score_function(score_fn)
        if not callable(fn):
            raise InvalidTypeError(f"fn must be callable, got {type(fn).__name__}")
        if mode is not None and mode not in SCORE_MODES:
            raise InvalidArgumentError(f"mode must be one of {', '.join(SCORE_MODES)} or None, got {mode!r}")
        if (mode is None) != (score_fn is None):
            raise InvalidArgumentError("score_fn and mode go together: give both (a per-item score) or neither")
        for hook, label in ((plan, "plan"), (defaults, "defaults"), (option_check, "option_check")):
            if hook is not None and not callable(hook):
                raise InvalidTypeError(f"{label} must be callable or None, got {type(hook).__name__}")
        if isinstance(stream_options, str):
            raise InvalidTypeError("stream_options must be a sequence of option names, not a str")
        inputs, optional_inputs = _check_inputs(inputs, optional_inputs, needs_predictions)
        needs = "log_probs" in inputs
        if without_labels is _Default:
            without_labels = "random" if needs else None
        if option_check is None and mode in SCORE_MODES[1:]:
            option_check = _check_beta
        entry = Strategy(
            name, fn, needs, tuple(aliases), score_fn, mode, inputs, optional_inputs,
            _strategy_options(fn, (*inputs, *optional_inputs)), plan, defaults, tuple(stream_options),
            dict(renamed_options or {}), option_check, without_labels, bool(mean_only),  # type: ignore[arg-type]
            bool(disagreement),
        )
        return self._registry.register(name, entry, aliases=entry.aliases, replace=replace)

    def unregister(self, name: str) -> None:
        self._registry.unregister(name)

    def get(self, name: str) -> Strategy:
        return self._registry.get(name)

    def names(self, *, aliases: bool = False) -> list[str]:
        return self._registry.names(aliases=aliases)


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



# ----------------------------------------------------------------------- the one check


@dataclass(frozen=True)
class CheckedCall:
    """What :func:`check_call` returns: the checked arguments of one acquisition."""

    N: int
    batch_size: int
    budget: BudgetPlan | None
    inputs: dict[str, Tensor]
    options: dict[str, Any]
    streamed: bool = False


def check_call(
    entry: Strategy,
    predictions: Tensor | int,
    batch_size: int,
    *,
    costs_N: Tensor | None = None,
    cost_budget: float | None = None,
    inputs: Mapping[str, object] | None = None,
    options: Mapping[str, Any] | None = None,
    streamed: bool = False,
    order_N: Tensor | None = None,
) -> CheckedCall:
    """The one check of an acquisition's arguments against ``entry``, for :func:`select` and ``score_pool``.

    ``predictions`` is ``log_probs_N_K_C`` or the pool size ``N`` (an int: for strategies
    that read no predictions, or ``streamed=True`` when ``score_pool`` predicts later).
    ``inputs`` are the extra inputs by their :data:`INPUTS` argument names; per-item
    ones are reordered by ``order_N`` after the check. ``options``: deprecated names are
    renamed (with a ``DeprecationWarning``), unknown names raise ``TypeError`` listing the
    accepted ones, ``cost_aware`` needs a budget, and the strategy's ``option_check`` runs.
    """
    K_C: tuple[int, int] | None = None
    if isinstance(predictions, Tensor) and predictions.ndim == 0 and not predictions.is_floating_point():
        raise InvalidTypeError(
            f"log_probs_N_K_C must be predictions [N, K, C], or the pool size as an int for a strategy that reads "
            f"none; got a 0-d tensor ({int(predictions)}): pass int(...)")
    if isinstance(predictions, int) and not isinstance(predictions, bool):
        if entry.needs_predictions and not streamed:
            raise InvalidTypeError(
                f"strategy {entry.name!r} needs predictions log_probs_N_K_C [N, K, C], got the int {predictions}"
            )
        N = check_positive_int(predictions, "log_probs_N_K_C (pool size)")
    else:
        check_log_probs(predictions, values=False)
        N, K, C = (int(size) for size in predictions.shape)
        K_C = (K, C)
        entry.check_num_samples(K, samples_argument(predictions))
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    budget = check_budget(costs_N, cost_budget, N)
    checked_options = _check_option_names(entry, dict(options or {}), streamed)
    checked_inputs = _check_inputs_given(entry, N, K_C, dict(inputs or {}), order_N, streamed)
    call = CheckedCall(N, batch_size, budget, checked_inputs, checked_options, streamed)
    if checked_options.get("cost_aware", False) and budget is None:
        raise InvalidArgumentError("cost_aware=True needs costs_N and cost_budget")
    if entry.option_check is not None:
        call = CheckedCall(N, batch_size, budget, checked_inputs, entry.option_check(dict(checked_options), call),
                           streamed)
    return call


#: options that are switches wherever a strategy has them (a string "false" would read as True)
_SWITCHES = ("cost_aware", "progress")


def _check_option_names(entry: Strategy, options: dict[str, Any], streamed: bool) -> dict[str, Any]:
    for old, new in entry.renamed_options.items():
        if old in options:
            options[new] = renamed_keyword(options.get(new), options.pop(old), new, old, None, stacklevel=5)
    entry.check_option_names(options, streamed=streamed)
    for switch in _SWITCHES:
        if switch in options:
            options[switch] = check_bool(options[switch], switch)
    return options


def _check_inputs_given(
    entry: Strategy, N: int, K_C: tuple[int, int] | None, given: dict[str, object], order_N: Tensor | None,
    streamed: bool,
) -> dict[str, Tensor]:
    """Check the extra inputs against what ``entry`` reads; return those to pass (per-item ones reordered)."""
    given = {argument: value for argument, value in given.items() if value is not None}
    reads = entry.input_arguments()
    for argument in given:
        if argument not in INPUTS.values():
            where = "strategy_inputs" if streamed else "inputs"
            raise InvalidTypeError(
                f"{where} has an unknown input {argument!r}; expected any of {sorted(INPUTS.values())}"
            )
        if argument not in reads:
            what = ", ".join(INPUTS[key] for key in (*entry.inputs, *entry.optional_inputs)) or "only the pool size"
            raise InvalidTypeError(f"strategy {entry.name!r} does not read {argument}; it reads: {what}")
    for key in entry.inputs:
        argument = INPUTS[key]
        if key != "log_probs" and argument not in given:
            raise InvalidTypeError(f"strategy {entry.name!r} needs {argument} {_INPUT_SHAPES[argument]}, got None")
    target = given.get("target_log_probs_M_K_C")
    if target is not None:
        check_log_probs(target, "target_log_probs_M_K_C", shape_doc=_INPUT_SHAPES["target_log_probs_M_K_C"])
        _check_target_shape(target, K_C)
    features = given.get("features_N_D")
    if features is not None:
        check_features(features, "features_N_D", N)
        if order_N is not None:
            given["features_N_D"] = features[order_N]  # type: ignore[index]
    labelled = given.get("labelled_features_L_D")
    if labelled is not None:
        check_features(labelled, "labelled_features_L_D", None,
                       dims=None if features is None else int(features.shape[1]))  # type: ignore[union-attr]
    return given  # type: ignore[return-value]


def _check_target_shape(target_M_K_C: Tensor, K_C: tuple[int, int] | None) -> None:
    if K_C is not None and tuple(target_M_K_C.shape[1:]) != K_C:
        raise InvalidArgumentError(
            f"target_log_probs_M_K_C must have the pool's K={K_C[0]} function samples and C={K_C[1]} "
            f"classes (shape [M, {K_C[0]}, {K_C[1]}]), got {tuple(target_M_K_C.shape)}"
        )


def _check_gathered_targets(request: PoolRequest, log_probs_N_K_C: Tensor) -> None:
    """Once the pool's predictions are gathered: EPIG's targets must share their K and C."""
    target = request.inputs.get("target_log_probs_M_K_C")
    if target is not None:
        _check_target_shape(target, (int(log_probs_N_K_C.shape[1]), int(log_probs_N_K_C.shape[2])))


def _check_beta(options: dict[str, Any], call: CheckedCall) -> dict[str, Any]:
    """Stochastic batch acquisition: ``beta`` (coldness) is a finite number >= 0."""
    if "beta" in options:
        options["beta"] = check_nonnegative_float(options["beta"], "beta")
    return options


# ------------------------------------------------------------------ builders and built-in functions


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
    check_log_probs(log_probs_N_K_C)  # targets from the pool: a bad row is named as the pool's, not the targets'
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



# ------------------------------------------------------------------ built-in plans, defaults


def _random_plan(request: PoolRequest) -> PoolPlan:
    """Random over a pool: top-k of ``keyed_uniform(seed, index)``; nothing is read or predicted."""
    cost_aware = bool(request.options.get("cost_aware", False))

    def finish(rows: Rows | None) -> Selection:
        indices_N, budget, batch_size = request.indices_N, request.budget, request.batch_size
        scores_N = keyed_uniform(request.seed, indices_N)
        priority = cost_priority(scores_N, budget, cost_aware)
        order = lexicographic_order(priority.keys(), indices_N, batch_size if budget is None else None)
        return finish_in_order(order, scores_N, indices_N, batch_size, budget, request.name)

    return PoolPlan(None, finish, request.name)


def _batchbald_strategy(
    predictions: Tensor | int,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: Device,
    num_configurations: int = DEFAULT_NUM_CONFIGURATIONS,
    max_exact_configs: int | None = None,
    cost_aware: bool = False,
    dtype: torch.dtype | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
) -> Selection:
    """Greedy BatchBALD; the options are :func:`~activebayes.acquisition.batchbald`'s."""
    selection = batchbald(
        predictions, batch_size, num_configurations=num_configurations, max_exact_configs=max_exact_configs,
        generator=generator, cost_aware=cost_aware, device=device, dtype=dtype, chunk_size=chunk_size,
        progress=progress, plan=plan,
    )
    return Selection(selection.indices, selection.scores, name)


def _check_batchbald_options(options: dict[str, Any], call: CheckedCall) -> dict[str, Any]:
    if "prefilter" in options:
        prefilter = check_positive_int(options["prefilter"], "prefilter")
        if prefilter < call.batch_size:
            raise InvalidArgumentError(
                f"prefilter must be >= batch_size={call.batch_size} (candidates for the batch), got {prefilter}"
            )
    return options


def _batchbald_defaults(context: AcquisitionContext) -> dict[str, Any]:
    """BatchBALD on the whole pool while its ``[N, K, C]`` float32 predictions fit
    :data:`BATCHBALD_MEMORY_BYTES`, else on the BALD pre-filter of as many items as fit."""
    if context.num_samples is None:
        return {}
    per_item = context.num_samples * context.num_classes * 4
    return {"prefilter": max(context.batch_size, min(context.pool_size, BATCHBALD_MEMORY_BYTES // per_item))}


def _batchbald_plan(request: PoolRequest) -> PoolPlan:
    r"""BatchBALD on the ``prefilter`` items of highest BALD, whose ``[M, K, C]`` are kept while streaming.

    Why that loses little: the gain of adding item ``n`` to a batch ``A`` is
    ``I[y_n; w | y_A] <= BALD(n)``, so an item outside the pre-filter can gain at most
    the ``(M+1)``-th largest BALD score (see :mod:`activebayes.scoring`).
    """
    options = dict(request.options)
    keep = min(options.pop("prefilter", DEFAULT_PREFILTER), request.N)
    budget = request.budget
    options.setdefault("progress", request.progress)
    work = BaldPrefilter(keep, None if budget is None else budget.cost_budget,
                         bool(options.get("cost_aware", False)), request.device_name)

    def finish(rows: Rows | None) -> Selection:
        assert rows is not None
        order = torch.argsort(rows["index"])
        kept_M = rows["index"][order]
        log_probs_M_K_C = rows["log_probs"][order]
        budget_M = None
        if budget is not None:
            budget_M = BudgetPlan(budget.costs_N[torch.searchsorted(request.indices_N, kept_M)], budget.cost_budget)
        picked = batchbald(log_probs_M_K_C, min(request.batch_size, keep), generator=request.generator(),
                           plan=budget_M, device=request.device, **options)
        return Selection(kept_M[picked.indices].clone(), picked.scores, request.name)

    return PoolPlan(work, finish, f"BALD pre-filter to {keep:,}")


def _badge_plan(request: PoolRequest) -> PoolPlan:
    """BADGE streams ``[n, C]`` gradient factors ``p̄ - e_ŷ`` per chunk (the K samples enter only
    through them), then k-means++ seeding runs on the merged rows and the features."""

    def finish(rows: Rows | None) -> Selection:
        assert rows is not None
        picked = badge_from_factors(aligned(rows, "factors", request.indices_N), request.inputs["features_N_D"],
                                    request.batch_size, generator=request.generator(), plan=request.budget,
                                    device=request.device)
        return request.in_original_indices(picked)

    return PoolPlan(GradientFactors(request.device_name), finish, "BADGE gradient factors")


def _typicality_defaults(context: AcquisitionContext) -> dict[str, Any]:
    """As many clusters as the labelled set plus this round's batch (TypiClust), whatever the lookahead."""
    return {"num_clusters": context.n_labelled + context.batch_size}


def _default_registry() -> StrategyRegistry:
    registry = StrategyRegistry()
    registry.register("random", _random_strategy, needs_predictions=False, plan=_random_plan)
    registry.register(
        "entropy", topk_strategy(_scores.predictive_entropy), aliases=("max_entropy", "predictive_entropy"),
        score_fn=_scores.predictive_entropy, mode="topk", mean_only=True,
    )
    for score_name in ("bald", "jackknife_bald", "variation_ratios", "mean_std", "margin", "least_confidence"):
        score_fn = getattr(_scores, score_name)
        registry.register(score_name, topk_strategy(score_fn), score_fn=score_fn, mode="topk",
                          mean_only=score_name in ("margin", "least_confidence"),
                          disagreement=score_name not in ("margin", "least_confidence"))
    registry.register("batchbald", _batchbald_strategy, plan=_batchbald_plan, defaults=_batchbald_defaults,
                      stream_options=("prefilter",), renamed_options={"num_samples": "num_configurations"},
                      option_check=_check_batchbald_options, disagreement=True)
    for mode in ("power", "softmax", "softrank"):
        registry.register(f"{mode}_bald", stochastic_strategy(_scores.bald, mode), score_fn=_scores.bald, mode=mode,
                          disagreement=True)
        registry.register(f"{mode}_entropy", stochastic_strategy(_scores.predictive_entropy, mode),
                          score_fn=_scores.predictive_entropy, mode=mode, mean_only=True)
    registry.register("epig", epig_strategy("topk"), optional_inputs=("target_log_probs",), disagreement=True)
    registry.register("power_epig", epig_strategy("power"), optional_inputs=("target_log_probs",), disagreement=True)
    registry.register("badge", _badge_strategy, inputs=("log_probs", "features"), plan=_badge_plan,
                      mean_only=True)
    registry.register("typicality", _typicality_strategy, inputs=("features", "labelled_features"),
                      aliases=("typiclust",), defaults=_typicality_defaults)
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
    plan: Planner | None = None,
    defaults: Callable[[AcquisitionContext], Mapping[str, Any]] | None = None,
    stream_options: Iterable[str] = (),
    renamed_options: Mapping[str, str] | None = None,
    option_check: OptionCheck | None = None,
    without_labels: str | None | type[_Default] = _Default,
    mean_only: bool = False,
    disagreement: bool = False,
) -> Strategy:
    """Register ``fn`` under ``name`` (and ``aliases``) so :func:`select`, ``score_pool``, the loop and the CLI find it.

    ``inputs`` (names from :data:`INPUTS`, default ``("log_probs",)``) are what the
    strategy needs, ``optional_inputs`` what it reads when given; they reach ``fn`` as
    keyword arguments. ``needs_predictions=False`` is short for ``inputs=()`` (the loop
    may skip inference and pass the pool size instead of ``log_probs_N_K_C``).
    ``fn``'s other keyword-only parameters are its options, checked by :func:`check_call`.

    How it streams over a big pool (``score_pool``, also on Ray): ``score_fn`` with
    ``mode`` (see :class:`Strategy`) for a per-item score; or ``plan``, a function
    ``PoolRequest -> PoolPlan`` (:mod:`activebayes.acquisition.streaming`: what each chunk
    keeps and how the kept rows become the :class:`Selection`); with neither the whole
    ``[N, K, C]`` is gathered and ``fn`` called. ``stream_options`` are options only the
    plan reads. ``defaults(context)`` gives default options for a round
    (:class:`AcquisitionContext`); ``option_check(options, call)`` checks option values;
    ``renamed_options`` maps deprecated option names to new ones; ``without_labels``
    names the strategy to run before the first label (default: ``"random"`` when the
    strategy reads predictions, else none); ``mean_only=True`` declares that ``fn`` reads
    the K samples only through their mean (the loop then predicts with
    ``LoopConfig.mean_samples`` functions); ``disagreement=True`` declares that it scores
    how the K samples disagree (predictions with K = 1 are then refused). Registering a
    taken name raises unless ``replace``.
    """
    return REGISTRY.register(name, fn, needs_predictions=needs_predictions, aliases=aliases, replace=replace,
                             score_fn=score_fn, mode=mode, inputs=inputs, optional_inputs=optional_inputs,
                             plan=plan, defaults=defaults, stream_options=stream_options,
                             renamed_options=renamed_options, option_check=option_check,
                             without_labels=without_labels, mean_only=mean_only, disagreement=disagreement)


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
    generator: torch.Generator | int | None = None,
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
            configurations, EPIG's sampled targets, BADGE's and k-means' seeding): a
            ``torch.Generator`` or an int seed; ``None`` uses torch's global generator.
            An int ``seed`` stands for ``torch.Generator().manual_seed(mix_seed(seed))``
            (:mod:`activebayes._seeding`). That is not the stream of
            :func:`~activebayes.scoring.score_pool`'s ``selection_seed``: there, random and
            stochastic strategies use noise keyed by ``(seed, original index)``, which no
            generator reproduces, and the other strategies ``torch.Generator().manual_seed(seed)``;
            pass that generator here to get ``score_pool``'s picks.
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
        **options: strategy options, e.g. ``num_configurations`` / ``max_exact_configs`` for
            ``"batchbald"`` (``num_samples`` is the deprecated name of ``num_configurations``),
            ``beta`` for stochastic strategies, ``num_targets`` for EPIG,
            ``cost_aware=True`` to rank by score per unit cost, ``chunk_size``. An option
            the strategy does not have raises ``TypeError`` naming the ones it has.

    Each strategy's :class:`Strategy` entry says which inputs it needs
    (``get_strategy(name).inputs``); a missing one, or one it does not read, raises
    ``TypeError`` naming the argument. The checks are :func:`check_call`'s, shared with
    :func:`~activebayes.scoring.score_pool`.

    Returns:
        :class:`Selection` with ``indices`` (pick order), ``scores`` and ``strategy``.

    >>> lp = torch.log_softmax(torch.randn(100, 8, 10, generator=torch.Generator().manual_seed(0)), -1)
    >>> len(select(lp, "batchbald", 5, num_configurations=1000, generator=torch.Generator().manual_seed(0)))
    5
    >>> select(100, "random", 3, generator=torch.Generator().manual_seed(0)).strategy
    'random'
    >>> len(select(lp, "epig", 4, num_targets=20, generator=torch.Generator().manual_seed(0)))
    4
    """
    entry = get_strategy(strategy)
    if isinstance(log_probs_N_K_C, numbers.Integral) and not isinstance(log_probs_N_K_C, bool):
        log_probs_N_K_C = int(log_probs_N_K_C)  # a pool size from NumPy (np.int64) is a pool size
    if generator is not None:  # an int seeds a generator; anything else is named now, not deep in a strategy
        generator = as_generator(generator, "generator")
    check_torch_device(device)  # named now for every strategy, also those that move tensors themselves
    call = check_call(
        entry, log_probs_N_K_C, batch_size, costs_N=costs_N, cost_budget=cost_budget, options=options,
        inputs={
            "target_log_probs_M_K_C": target_log_probs_M_K_C,
            "features_N_D": features_N_D,
            "labelled_features_L_D": labelled_features_L_D,
        },
    )
    return entry.fn(
        log_probs_N_K_C, call.batch_size, name=entry.name, generator=generator, plan=call.budget, device=device,
        **call.inputs, **call.options,
    )
