"""When the loop stops: criteria checked after each round's evaluation.

A criterion is a callable ``criterion(history, *, n_labelled, cost_spent)`` that returns
``None`` (go on) or a :class:`StopReason`: a machine-readable ``kind`` and a sentence
``detail`` for people. Records store both (``RoundRecord.stop_kind`` and
``RoundRecord.stop_reason``) and readers test the kind, never the wording.

``history`` ends with the current round's provisional record (its metrics are the
current model's), so a criterion sees every evaluation so far.

Example::

    >>> from activebayes.stopping import LabelBudget
    >>> LabelBudget(100)([], n_labelled=100, cost_spent=0.0)
    StopReason(kind='label_budget', detail='label budget reached (100 >= 100)')
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from activebayes._validation import check_nonnegative_float, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.records import LABEL_BUDGET_REACHED, headline_metric

if TYPE_CHECKING:
    from activebayes.records import RoundRecord

__all__ = [
    "COST_BUDGET",
    "CUSTOM",
    "DEFAULT_CRITERION",
    "EMPTY_POOL",
    "ESTIMATED_ACCURACY",
    "EXPECTED_ACCURACY",
    "INFORMATION",
    "LABEL_BUDGET",
    "PLATEAU",
    "REMAINING_CHANGE",
    "SIGNALS",
    "STABLE_PREDICTIONS",
    "TARGET",
    "ChangeFit",
    "CostBudget",
    "LabelBudget",
    "Plateau",
    "SignalCriterion",
    "StopReason",
    "StoppingCriterion",
    "TargetAccuracy",
    "change_horizon",
    "cohen_kappa",
    "exact_interval",
    "expected_accuracy",
    "first_stop",
    "integrated_drift",
    "largest_change",
    "normalise_stop_when",
    "parse_stop_when",
    "per_predicted_label",
    "predicted_decisions",
    "projected_change",
    "rejudge_remaining_change",
    "remaining_change",
    "remaining_change_signal",
    "round_signals",
    "shown_beside",
    "stable_predictions_means",
    "stop_kind_of",
    "total_information",
]

#: Kinds of stop (``StopReason.kind``).
LABEL_BUDGET = "label_budget"
COST_BUDGET = "cost_budget"
TARGET = "target"
PLATEAU = "plateau"
EMPTY_POOL = "empty_pool"
#: a user's criterion that returned a plain string
CUSTOM = "custom"


@dataclass(frozen=True)
class StopReason:
    """Why the loop stops: ``kind`` (one of the module's constants, or a user criterion's
    own) and ``detail``, a sentence for people."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return self.detail


class StoppingCriterion(Protocol):
    """Decides after a round's evaluation whether to stop; returns a reason or ``None``."""

    def __call__(
        self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float
    ) -> StopReason | str | None: ...


@dataclass(frozen=True)
class LabelBudget:
    """Stop once ``budget`` items are labelled."""

    budget: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", check_positive_int(self.budget, "budget", allow_zero=True))

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        if n_labelled >= self.budget:
            return StopReason(LABEL_BUDGET, f"{LABEL_BUDGET_REACHED} ({n_labelled} >= {self.budget})")
        return None


@dataclass(frozen=True)
class CostBudget:
    """Stop once not even the cheapest item (``min_cost``) fits in what is left of ``budget``."""

    budget: float
    min_cost: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "budget", check_nonnegative_float(self.budget, "budget"))
        object.__setattr__(self, "min_cost", check_nonnegative_float(self.min_cost, "min_cost"))

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        if cost_spent + self.min_cost > self.budget + 1e-9:
            return StopReason(COST_BUDGET, f"cost budget reached ({cost_spent:g} spent of {self.budget:g})")
        return None


@dataclass(frozen=True)
class TargetAccuracy:
    """Stop once ``metric`` reaches ``target`` (default: the headline metric, test accuracy
    when there is a test set, else validation accuracy)."""

    target: float
    metric: str | None = None

    def __post_init__(self) -> None:
        _check_metric_name(self.metric, optional=True)
        target = check_nonnegative_float(self.target, "target")
        if self.metric is None and target > 1.0:  # the headline metric is an accuracy (or micro-F1): a share
            raise InvalidArgumentError(f"target must be a share in [0, 1] (the headline metric is an accuracy), got "
                                       f"{target:g}; for {target:g}% pass {target / 100:g}")
        object.__setattr__(self, "target", target)

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        if not history:
            return None
        metrics = history[-1].metrics
        metric = self.metric or headline_metric(metrics)
        value = metrics.get(metric)
        if value is not None and value >= self.target:
            return StopReason(TARGET, f"target {metric} {self.target:g} reached ({value:.4f})")
        return None


@dataclass(frozen=True)
class Plateau:
    """Stop when ``metric`` has not improved by ``min_delta`` for ``patience`` rounds."""

    patience: int
    min_delta: float = 0.0
    metric: str = "validation_accuracy"

    def __post_init__(self) -> None:
        # patience 0 compared against no earlier round at all: max() of an empty list, at the first round
        object.__setattr__(self, "patience", check_positive_int(self.patience, "patience"))
        object.__setattr__(self, "min_delta", check_nonnegative_float(self.min_delta, "min_delta"))
        _check_metric_name(self.metric, optional=False)

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        values = [r.metrics.get(self.metric) for r in history]
        if len(values) <= self.patience or any(v is None for v in values):
            return None
        best_before = max(values[: -self.patience])
        if max(values[-self.patience :]) < best_before + self.min_delta:
            return StopReason(PLATEAU, f"plateau: {self.metric} did not improve for {self.patience} rounds")
        return None


def _check_metric_name(metric: object, *, optional: bool) -> None:
    if not (isinstance(metric, str) and metric) and not (optional and metric is None):
        expected = "a metric name such as 'validation_accuracy'" + (" or None" if optional else "")
        raise InvalidTypeError(f"metric must be {expected}, got {metric!r}")


def first_stop(
    criteria: Iterable[StoppingCriterion],
    history: Sequence[RoundRecord],
    *,
    n_labelled: int,
    cost_spent: float,
    n_unlabelled: int,
) -> StopReason | None:
    """The first criterion that fires, else an empty pool, else ``None``. No side effects."""
    for criterion in criteria:
        reason = criterion(history, n_labelled=n_labelled, cost_spent=cost_spent)
        if isinstance(reason, str):
            reason = StopReason(CUSTOM, reason)
        if reason is not None:
            return reason
    if n_unlabelled == 0:
        return StopReason(EMPTY_POOL, "the unlabelled pool is empty")
    return None


#: how the stop sentences of records written before ``stop_kind`` was stored begin
_LEGACY_PREFIXES = (
    (LABEL_BUDGET_REACHED, LABEL_BUDGET),
    ("cost budget reached", COST_BUDGET),
    ("target ", TARGET),
    ("plateau:", PLATEAU),
    ("the unlabelled pool is empty", EMPTY_POOL),
)


def stop_kind_of(record: RoundRecord) -> str | None:
    """The kind of stop of ``record`` (``None`` if it did not stop the run).

    Records written before the kind was stored only have the sentence: its known
    beginnings are read here, and nowhere else.
    """
    if record.stop_reason is None:
        return None
    if record.stop_kind is not None:
        return record.stop_kind
    for prefix, kind in _LEGACY_PREFIXES:
        if record.stop_reason.startswith(prefix):
            return kind
    return CUSTOM


# --------------------------------------------------------------------------- without a test set
#
# Signals: measured every round from what a labelling project has (the round's posterior on
# a fixed stop set of pool items, and the answers to uniformly drawn audit items), recorded
# in ``RoundRecord.signals`` whether or not they stop the run; ``stop_when`` turns some of
# them into stopping criteria.

REMAINING_CHANGE = "remaining_change"
STABLE_PREDICTIONS = "stable_predictions"
EXPECTED_ACCURACY = "expected_accuracy"
INFORMATION = "information"
ESTIMATED_ACCURACY = "estimated_accuracy"

#: signal -> (default threshold, what the threshold means)
SIGNALS: dict[str, tuple[float | None, str]] = {
    REMAINING_CHANGE: (0.005, "share of the stop set's predictions still expected to change within the horizon, "
                             "in (0, 1)"),
    STABLE_PREDICTIONS: (0.99, "mean Cohen's kappa of successive models over the window, in (0, 1]"),
    EXPECTED_ACCURACY: (0.005, "largest change of the expected accuracy over the window, in (0, 1)"),
    INFORMATION: (0.1, "fraction of the first model's total information, in (0, 1)"),
    ESTIMATED_ACCURACY: (None, "accuracy the interval's lower bound must reach, in (0, 1)"),
}
#: rounds a signal looks back over (Bloodgood and Vijay-Shanker 2009 use 3 for kappa)
SIGNAL_WINDOW = 3
#: models the remaining-change fit looks back over (the current one included)
CHANGE_WINDOW = 16
#: the exponents of the drift rate's decay, ``n^-decay``, the remaining-change fit chooses from
#: (0: a constant drift per label; chosen out of sample, ``benchmarks/stopping_ideas.py``)
CHANGE_DECAYS = (0.0, 0.5, 1.0, 1.5, 2.0)
#: the remaining-change drift is taken this many standard errors above its estimate
CHANGE_MARGIN = 2.0
#: the signal recommended when a project has no test set (docs/concepts/stopping.md)
DEFAULT_CRITERION = REMAINING_CHANGE
#: two-sided confidence of the estimated-accuracy interval
AUDIT_CONFIDENCE = 0.9
#: the smallest stop set a run that stops on it may ask for: the signals move in steps of
#: 1 / S, and below 100 items one changed prediction is over 1%, twice the default criterion's threshold
MIN_STOP_SET = 100


def parse_stop_when(specs: Iterable[str] | Mapping[str, float | None] | str | None) -> dict[str, float | None]:
    """``["stable_predictions", "information=0.05"]`` -> ``{name: threshold}`` (defaults filled).

    ``specs``: a comma-separated string, a sequence of ``NAME`` / ``NAME=THRESHOLD`` strings
    (each may hold several, comma-separated), or a mapping ``{name: threshold}`` (``None``:
    the default threshold); ``None`` is none. A name may be written with hyphens
    (``remaining-change``) and surrounded by spaces.

    Unknown names, thresholds outside their range and empty criteria (``"a,,b"``, ``""``) raise
    :class:`~activebayes.errors.InvalidArgumentError`, a value of another type
    :class:`~activebayes.errors.InvalidTypeError`, each naming ``stop_when`` (``--stop-when``).
    """
    from activebayes.errors import InvalidArgumentError

    if specs is None:
        return {}
    out: dict[str, float | None] = {}
    for spec in _stop_when_specs(specs):
        name, equals, value = spec.strip().partition("=")
        name = name.strip().replace("-", "_")
        if name not in SIGNALS:
            raise InvalidArgumentError(
                f"stop_when (--stop-when): unknown criterion {name!r}; choose from {', '.join(SIGNALS)}")
        default, meaning = SIGNALS[name]
        if name in out:
            raise InvalidArgumentError(f"stop_when (--stop-when): {name} is given twice; give each criterion once")
        if equals and not value.strip():
            raise InvalidArgumentError(
                f"stop_when (--stop-when): {name}= needs a number after '=' ({meaning}), or no '=' for its default")
        if value.strip():
            try:
                threshold = float(value)
            except ValueError:
                raise InvalidArgumentError(
                    f"stop_when (--stop-when): {name}'s threshold must be a number ({meaning}), got {value!r}") from None
        elif default is None:
            raise InvalidArgumentError(
                f"stop_when (--stop-when): {name} needs a threshold, e.g. {name}=0.9 ({meaning})")
        else:
            threshold = default
        upper_ok = threshold <= 1.0 if name == STABLE_PREDICTIONS else threshold < 1.0
        if not (threshold > 0.0 and upper_ok):
            raise InvalidArgumentError(f"stop_when (--stop-when): {name}'s threshold is the {meaning}, got {threshold}")
        out[name] = threshold
    return out


def normalise_stop_when(specs: Iterable[str] | Mapping[str, float | None] | str) -> tuple[str, ...]:
    """``stop_when`` in the one form a config stores and compares: each criterion once, in the
    order of :data:`SIGNALS` (whatever order they were given in: the same criteria are the same
    run; when two fire in one round, the first in that order is named), as its canonical name,
    followed by ``=THRESHOLD`` only where the threshold is not the default one (so
    ``remaining-change``, ``" remaining_change"`` and ``remaining_change=0.005`` are all
    ``"remaining_change"``).

    Checked as :func:`parse_stop_when` checks it; ``None`` is refused (no criterion: ``()``).

    >>> normalise_stop_when("information=5e-2, remaining-change=0.005")
    ('remaining_change', 'information=0.05')
    >>> normalise_stop_when({"stable_predictions": 0.95})
    ('stable_predictions=0.95',)
    """
    from activebayes.errors import InvalidTypeError

    if specs is None:
        raise InvalidTypeError("stop_when (--stop-when) takes criteria NAME or NAME=THRESHOLD (a comma-separated "
                               "string, a list of them or a mapping {name: threshold}; () for none), got None")
    thresholds = parse_stop_when(specs)
    return tuple(name if thresholds[name] == SIGNALS[name][0] else f"{name}={thresholds[name]!r}"
                 for name in SIGNALS if name in thresholds)


def explicit_stop_when(specs: Iterable[str] | Mapping[str, float | None] | str) -> tuple[str, ...]:
    """``stop_when`` as a run directory stores it: :func:`normalise_stop_when`'s criteria, each
    with its threshold written out, so that a later release that changes a default cannot
    change what a stored run stops on.

    >>> explicit_stop_when("remaining_change, information=0.05")
    ('remaining_change=0.005', 'information=0.05')
    """
    thresholds = parse_stop_when(specs)  # every criterion has one (estimated_accuracy's must be given)
    return tuple(f"{name}={thresholds[name]!r}" for name in SIGNALS if name in thresholds)


def _stop_when_specs(specs: Any) -> list[str]:
    """The ``NAME[=THRESHOLD]`` strings of ``stop_when`` in any form :func:`parse_stop_when` takes,
    its type checked and empty criteria refused."""
    from activebayes.errors import InvalidArgumentError, InvalidTypeError

    what = "criteria NAME or NAME=THRESHOLD (a comma-separated string, a list of them or a mapping {name: threshold})"
    if isinstance(specs, Mapping):
        out = []
        for name, threshold in specs.items():
            if not isinstance(name, str):
                raise InvalidTypeError(f"stop_when (--stop-when) as a mapping takes criterion names as keys, got "
                                       f"{type(name).__name__} {name!r}")
            if threshold is None:
                out.append(name)
            elif isinstance(threshold, bool) or not isinstance(threshold, int | float):
                raise InvalidTypeError(f"stop_when (--stop-when): {name.strip()}'s threshold must be a number, got "
                                       f"{type(threshold).__name__} {threshold!r}")
            else:
                out.append(f"{name}={float(threshold)!r}")
        return out
    if isinstance(specs, str):
        texts = [specs]
    elif isinstance(specs, Iterable) and not isinstance(specs, bytes | bytearray):
        texts = list(specs)
        for text in texts:
            if not isinstance(text, str):
                raise InvalidTypeError(f"stop_when (--stop-when) takes {what}; got an item of type "
                                       f"{type(text).__name__}: {text!r}")
    else:
        raise InvalidTypeError(f"stop_when (--stop-when) takes {what}, got {type(specs).__name__} {specs!r}")
    out = []
    for text in texts:
        pieces = text.split(",")
        if not all(piece.strip() for piece in pieces):
            raise InvalidArgumentError(f"stop_when (--stop-when): an empty criterion in {text!r}; give NAME or "
                                       "NAME=THRESHOLD, separated by single commas (for no criterion, leave "
                                       "out stop_when (--stop-when))")
        out.extend(pieces)
    return out


def shown_beside(value: float, threshold: float | None, digits: int, *, percent: bool = False) -> str:
    """``value`` with ``digits`` decimals (a percentage with ``percent``), or with more where
    fewer would print it equal to ``threshold``, or on its other side, although it is not:
    a value that did not reach its threshold never reads as if it had.

    >>> shown_beside(0.9496, 0.95, 3), shown_beside(0.9576, 0.95, 3), shown_beside(0.0196, 0.02, 1, percent=True)
    ('0.9496', '0.958', '1.96%')
    """
    from decimal import ROUND_HALF_EVEN, Decimal

    suffix = "%" if percent else ""
    if threshold is None or not (math.isfinite(value) and math.isfinite(threshold)):
        return f"{value:.{digits}{'%' if percent else 'f'}}"
    scale = Decimal(100 if percent else 1)
    exact, bound = Decimal(repr(float(value))) * scale, Decimal(repr(float(threshold))) * scale
    for places in range(digits, digits + 12):
        rounded = exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN)
        if (rounded < bound) == (exact < bound) and (rounded > bound) == (exact > bound):
            break
    return f"{rounded:f}{suffix}"


def cohen_kappa(a_S: Any, b_S: Any, num_classes: int) -> float:
    r"""Cohen's kappa between two labellings of the same items.

    :math:`\kappa = (p_o - p_e) / (1 - p_e)` with :math:`p_o` the share of items where they
    agree and :math:`p_e = \sum_c p_a(c) p_b(c)` the agreement expected by chance from the
    two label frequencies. Two identical labellings with a single class give 1.
    """
    import numpy as np

    check_positive_int(num_classes, "num_classes")
    a_S, b_S = _class_ids(a_S, "a_S"), _class_ids(b_S, "b_S")
    if a_S.ndim != 1 or a_S.shape != b_S.shape or not len(a_S):
        raise InvalidArgumentError(f"a_S and b_S must be two labellings [S] of the same S >= 1 items, got shapes "
                                   f"{a_S.shape} and {b_S.shape}")
    if int(min(a_S.min(), b_S.min())) < 0 or int(max(a_S.max(), b_S.max())) >= num_classes:
        raise InvalidArgumentError(f"a_S and b_S must hold class ids 0..{num_classes - 1} (num_classes={num_classes}), "
                                   f"got {int(min(a_S.min(), b_S.min()))}..{int(max(a_S.max(), b_S.max()))}")
    n = len(a_S)
    observed = float((a_S == b_S).mean())
    expected = float((np.bincount(a_S, minlength=num_classes) * np.bincount(b_S, minlength=num_classes)).sum()) / n**2
    if expected >= 1.0:
        return 1.0 if observed == 1.0 else 0.0
    return (observed - expected) / (1.0 - expected)


def _class_ids(values: Any, name: str) -> Any:
    """``values`` as int64 class ids; floats only when whole (``np.asarray(.., dtype=int64)`` truncated 1.7 to 1)."""
    import numpy as np

    array = np.asarray(values)
    whole = array.dtype.kind in "iub" or (array.dtype.kind == "f" and bool(np.isfinite(array).all())
                                          and bool((array == np.round(array)).all()))
    if not whole:
        raise InvalidArgumentError(f"{name} must hold integer class ids, got {array.dtype} values"
                                   + (f" such as {array.flat[0]!r}" if array.size else ""))
    return array.astype(np.int64)


def _checked_log_probs(log_probs_S_K_C: Any, multilabel: bool) -> Any:
    """``log_probs_S_K_C`` as given, once checked as the acquisition scores check it: ``[S, K, C]``,
    finite, log-probabilities (single-label: normalised over C; multi-label: each label's log P(y_c = 1))."""
    if multilabel:
        from activebayes.acquisition.multilabel import _check

        _check(log_probs_S_K_C, "log_probs_S_K_C")  # validates (its float64 copy is for the scores)
        return log_probs_S_K_C
    from activebayes._validation import check_log_probs

    return check_log_probs(log_probs_S_K_C, "log_probs_S_K_C", shape_doc="[S, K, C] (stop-set items, function "
                                                                         "samples, classes)")


def predicted_decisions(log_probs_S_K_C: Any, *, multilabel: bool = False) -> Any:
    r"""What the signals compare between models: the posterior predictive's decisions on the stop set.

    Single-label: the predicted class of each item, :math:`\arg\max_c \bar p(c \mid x_s)`, ``[S]``.
    Multi-label (``log_probs_S_K_C`` holds each label's :math:`\log p(y_c = 1)`): every item's
    every label decision, :math:`[\bar p(y_c = 1 \mid x_s) \ge 1/2]`, flattened item by item to
    ``[S * C]`` zeros and ones.
    """
    from activebayes.metrics.multilabel import label_decisions
    from activebayes.metrics.predictive import predictive_probs

    probs_S_C = predictive_probs(_checked_log_probs(log_probs_S_K_C, multilabel))
    if multilabel:
        return label_decisions(probs_S_C).reshape(-1).numpy().astype("int64")
    return probs_S_C.argmax(-1).numpy()


def expected_accuracy(log_probs_S_K_C: Any, *, multilabel: bool = False) -> float:
    r"""The posterior's own estimate of its accuracy on the items:
    :math:`\frac1S \sum_s \max_c \bar p(c \mid x_s)`, :math:`\bar p = \frac1K \sum_k p(c \mid x_s, w_k)`
    (exact when the predictive is calibrated).

    Multi-label, the headline metric instead: the expected micro-F1 of the decisions
    :math:`\hat y_{sc} = [\bar p_{sc} \ge 1/2]`, :math:`\bar p_{sc} = \bar p(y_c = 1 \mid x_s)`, as the
    ratio of the expected counts,
    :math:`2 \sum_{s,c} \hat y_{sc} \bar p_{sc} \,/\, (\sum_{s,c} \hat y_{sc} + \sum_{s,c} \bar p_{sc})`
    (:math:`2\,TP / (2\,TP + FP + FN)` with each count replaced by its expectation).
    """
    from activebayes.metrics.multilabel import label_decisions
    from activebayes.metrics.predictive import predictive_probs

    probs_S_C = predictive_probs(_checked_log_probs(log_probs_S_K_C, multilabel)).double()
    if multilabel:
        decisions_S_C = label_decisions(probs_S_C).double()
        denominator = float(decisions_S_C.sum() + probs_S_C.sum())
        return 2.0 * float((decisions_S_C * probs_S_C).sum()) / denominator if denominator > 0 else 0.0
    return float(probs_S_C.max(-1).values.mean())


def total_information(log_probs_S_K_C: Any, n_unlabelled: int, *, multilabel: bool = False) -> float:
    r"""The pool's summed BALD, estimated from the stop set: :math:`N_u \cdot \frac1S \sum_s I(y_s; w)`
    (multi-label: BALD summed over the labels, :math:`\sum_c I(y_{s,c}; w)`)."""
    from activebayes.acquisition import bald
    from activebayes.acquisition.multilabel import multilabel_bald

    n_unlabelled = check_positive_int(n_unlabelled, "n_unlabelled", allow_zero=True)  # a float 1e3 or -5: named
    per_item_S = multilabel_bald(log_probs_S_K_C) if multilabel else bald(log_probs_S_K_C)
    return float(per_item_S.double().mean()) * n_unlabelled


@dataclass(frozen=True)
class ChangeFit:
    """The remaining-change fit of one window of models (:func:`remaining_change`).

    Attributes:
        value: predictions still expected to change within ``horizon`` labels (a share of the
            stop set): ``max(drift + margin * drift_se, 0) * (g(n + horizon) - g(n))``, with
            ``g`` the integrated drift rate of :func:`integrated_drift`.
        drift: share of predictions changing per label at one label, beyond retraining noise; at
            ``n`` labels the rate is ``drift * n ** -decay``.
        drift_se: the least-squares standard error of ``drift``.
        floor: disagreement of two models trained on (nearly) the same labels: retraining noise.
        horizon: labels the change is projected over.
        decay: the exponent of the drift rate's decay, the one of :data:`CHANGE_DECAYS` whose
            fit leaves the smallest residual (0: a constant drift per label).
        n_labelled: labels the window's last model was trained on, where the projection starts.
    """

    value: float
    drift: float
    drift_se: float
    floor: float
    horizon: int
    decay: float
    n_labelled: int


def change_horizon(n_labelled: int, budget: int | None) -> int:
    """Labels the remaining change is projected over: what is left of the label budget, and
    at most as many labels again as so far (a project labelling its whole pool has no
    useful budget)."""
    if budget is None:
        return int(n_labelled)
    return max(0, min(int(budget) - int(n_labelled), int(n_labelled)))


def integrated_drift(n: Any, decay: float) -> Any:
    r"""The drift rate :math:`n^{-\alpha}` integrated over labels: :math:`g(n) = n^{1-\alpha}/(1-\alpha)`,
    or :math:`\log n` for :math:`\alpha = 1` (:func:`remaining_change`; ``decay`` is :math:`\alpha`).
    Defined up to a constant, which every difference cancels."""
    import numpy as np

    n = np.asarray(n, dtype=np.float64)
    if decay == 1.0:
        return np.log(n)
    return n ** (1.0 - decay) / (1.0 - decay)


def remaining_change(classes_W_S: Any, n_labelled_W: Sequence[int], horizon: int,
                     margin: float = CHANGE_MARGIN) -> ChangeFit | None:
    r"""How much of the predictions would still change in ``horizon`` more labels, beyond
    the noise of retraining.

    ``classes_W_S``: the predicted classes of ``W`` successive models on the same stop set,
    oldest first, trained on ``n_labelled_W`` labels. Every pair :math:`i < j` gives the share
    of items the two models label differently, :math:`d_{ij}`. Retraining alone makes two
    models disagree on a share :math:`f` of the items, whatever their label counts; learning
    adds a drift whose rate per label falls as learning curves slow down,
    :math:`\delta\,n^{-\alpha}`. Its integral :math:`g` (:func:`integrated_drift`) makes the model

    .. math:: d_{ij} = f + \delta\,\bigl(g(n_j) - g(n_i)\bigr),

    fitted by least squares over the :math:`W(W-1)/2` pairs for each :math:`\alpha` of
    :data:`CHANGE_DECAYS`, keeping the one with the smallest residual sum of squares. The value
    is :math:`\max(\hat\delta + m\,\widehat{\mathrm{se}}(\hat\delta), 0)\,\bigl(g(n + h) - g(n)\bigr)`:
    the share of predictions still expected to change over the horizon :math:`h` from the last
    model's :math:`n` labels. :math:`\alpha = 0` is a constant drift, :math:`\hat\delta h`. A
    changed prediction changes accuracy by at most one item, so the value also bounds the
    accuracy still to gain. Returns ``None`` when fewer than 3 models or fewer than 2 distinct
    label counts are given.
    """
    import numpy as np

    try:
        classes_W_S = np.asarray(classes_W_S)
    except ValueError:  # rows of different lengths: not the same stop set
        lengths = sorted({len(row) for row in classes_W_S})
        raise InvalidArgumentError(f"classes_W_S must be [W, S] (W models' predictions on the same S >= 1 items), "
                                   f"got rows of {', '.join(map(str, lengths))} items") from None
    n_W = np.asarray(n_labelled_W, dtype=np.float64)
    W = len(classes_W_S)
    if n_W.shape != (W,) or (W and (classes_W_S.ndim != 2 or classes_W_S.shape[1] == 0)):
        raise InvalidArgumentError(f"classes_W_S must be [W, S] (W models' predictions on the same S >= 1 items) "
                                   f"and n_labelled_W [W], got shapes {classes_W_S.shape} and {n_W.shape}")
    if not np.isfinite(n_W).all():
        raise InvalidArgumentError(f"n_labelled_W: expected label counts above 0, got {n_W.tolist()}")
    if W < 3 or len(np.unique(n_W)) < 2:
        return None
    if (n_W <= 0).any():
        raise InvalidArgumentError(f"n_labelled_W: expected label counts above 0, got {n_W.tolist()}")
    i_P, j_P = np.triu_indices(W, k=1)
    # row by row, in triu_indices' order (indexing all pairs at once copies W(W-1)/2 stop sets)
    S = classes_W_S.shape[-1]
    d_P = np.concatenate([np.count_nonzero(classes_W_S[i + 1:] != classes_W_S[i], axis=-1) / S for i in range(W - 1)])
    best = None
    for decay in CHANGE_DECAYS:
        g_W = integrated_drift(n_W, decay)
        X_P_2 = np.stack([np.ones(len(i_P)), g_W[j_P] - g_W[i_P]], axis=1)
        coef_2, *_ = np.linalg.lstsq(X_P_2, d_P, rcond=None)
        residual_P = d_P - X_P_2 @ coef_2
        rss = float(residual_P @ residual_P)
        if best is None or rss < best[0]:
            drift_se = math.sqrt(max(rss / (len(d_P) - 2) * float(np.linalg.inv(X_P_2.T @ X_P_2)[1, 1]), 0.0))
            best = (rss, decay, float(coef_2[0]), float(coef_2[1]), drift_se)
    _, decay, floor, drift, drift_se = best
    n = int(n_W[-1])
    value = projected_change(drift, drift_se, n, horizon, decay, margin)
    return ChangeFit(value=value, drift=drift, drift_se=drift_se, floor=floor, horizon=int(horizon), decay=decay,
                     n_labelled=n)


def projected_change(drift: float, drift_se: float, n_labelled: int, horizon: int, decay: float = 0.0,
                     margin: float = CHANGE_MARGIN) -> float:
    r"""The remaining change's value from its fit:
    :math:`\max(\hat\delta + m\,\widehat{\mathrm{se}}, 0)\,\bigl(g(n + h) - g(n)\bigr)` (:func:`remaining_change`)."""
    rate = max(drift + margin * drift_se, 0.0)
    if rate == 0.0 or horizon <= 0:
        return 0.0
    if decay == 0.0:
        return rate * horizon
    return rate * float(integrated_drift(n_labelled + horizon, decay) - integrated_drift(n_labelled, decay))


@functools.lru_cache(maxsize=4096)
def exact_interval(correct: int, n: int, confidence: float = AUDIT_CONFIDENCE) -> tuple[float, float]:
    r"""Clopper and Pearson's (1934) exact interval for a proportion from ``correct`` of ``n``.

    The bounds solve :math:`P(X \ge k \mid p_L) = \alpha/2` and
    :math:`P(X \le k \mid p_U) = \alpha/2` for :math:`X \sim \text{Binomial}(n, p)`,
    :math:`\alpha = 1 - \text{confidence}` (:math:`p_L = 0` when :math:`k = 0`, :math:`p_U = 1`
    when :math:`k = n`): its coverage is at least ``confidence`` for every :math:`p`.
    """
    n = check_positive_int(n, "n", allow_zero=True)
    correct = check_positive_int(correct, "correct", allow_zero=True)
    if correct > n:
        raise InvalidArgumentError(f"correct must be <= n={n} (a count of the n items), got {correct}")
    confidence = check_nonnegative_float(confidence, "confidence")
    if not 0.0 < confidence < 1.0:
        raise InvalidArgumentError(f"confidence must be in (0, 1), got {confidence:g}")
    if n == 0:
        return 0.0, 1.0
    alpha = 1.0 - confidence
    low = 0.0 if correct == 0 else _solve(lambda p: _binomial_tail(correct, n, p, upper=True) - alpha / 2, rising=True)
    high = 1.0 if correct == n else _solve(lambda p: _binomial_tail(correct, n, p, upper=False) - alpha / 2,
                                           rising=False)
    return low, high


def _binomial_tail(k: int, n: int, p: float, *, upper: bool) -> float:
    r""":math:`P(X \ge k)` (``upper``) or :math:`P(X \le k)` for :math:`X \sim \text{Binomial}(n, p)`, summed in log space."""
    if p <= 0.0:
        return 1.0 if (not upper or k == 0) else 0.0
    if p >= 1.0:
        return 1.0 if (upper or k == n) else 0.0
    terms = range(k, n + 1) if upper else range(0, k + 1)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
            for i in terms]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def _solve(f, *, rising: bool, iterations: int = 80) -> float:
    """The root of ``f`` on [0, 1] by bisection (``f`` rising or falling in p)."""
    lo, hi = 0.0, 1.0
    for _ in range(iterations):
        mid = (lo + hi) / 2
        if (f(mid) < 0) == rising:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def encode_classes(classes_S: Any, *, bits: bool = False) -> str:
    """Predicted classes as a compact string for a record: base64 of uint16 (``"u4:"`` and base64
    of uint32 when a class id is 65,536 or more), or with ``bits`` (zeros and ones: multi-label
    decisions) ``"bits:<count>:"`` and base64 of the packed bits."""
    import base64

    import numpy as np

    if bits:
        packed = np.packbits(np.asarray(classes_S, dtype=np.uint8))
        return f"bits:{len(classes_S)}:" + base64.b64encode(packed.tobytes()).decode("ascii")
    classes_S = np.asarray(classes_S, dtype=np.int64)
    if len(classes_S) and int(classes_S.max()) >= 2**16:  # uint16 would wrap them round without a word
        return "u4:" + base64.b64encode(classes_S.astype("<u4").tobytes()).decode("ascii")
    return base64.b64encode(classes_S.astype("<u2").tobytes()).decode("ascii")


def decode_classes(text: str) -> Any:
    """The classes (or decisions) :func:`encode_classes` wrote, as int64."""
    import base64

    import numpy as np

    if text.startswith("bits:"):
        _, count, data = text.split(":", 2)
        packed = np.frombuffer(base64.b64decode(data), dtype=np.uint8)
        return np.unpackbits(packed, count=int(count)).astype(np.int64)
    if text.startswith("u4:"):
        return np.frombuffer(base64.b64decode(text[3:]), dtype="<u4").astype(np.int64)
    return np.frombuffer(base64.b64decode(text), dtype="<u2").astype(np.int64)


@functools.lru_cache(maxsize=64)
def _decoded(text: str) -> Any:
    """:func:`decode_classes`, read-only and kept for the next rounds: a window of stored
    predictions is read again each round (and each threshold, when a run is judged again)."""
    classes = decode_classes(text)
    classes.setflags(write=False)
    return classes


def round_signals(
    history: Sequence[RoundRecord],
    *,
    log_probs_S_K_C: Any,
    n_labelled: int,
    n_unlabelled: int,
    num_classes: int,
    thresholds: Mapping[str, float | None],
    budget: int | None = None,
    multilabel: bool = False,
    stop_set: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Every signal of the current round, from the stop set's predictions and the history.

    Each entry: ``value`` (``None`` while it cannot be measured yet), ``fired`` (against
    ``thresholds[name]``, or the default threshold), ``detail`` (plain words), and
    what the next round needs (the stop set's predicted classes). The stable predictions'
    ``value`` is this round's kappa against the last round's model, and its ``mean`` the
    mean kappa over the last :data:`SIGNAL_WINDOW` rounds: the number the criterion compares
    with its threshold (``None`` until the window is full; records written before it was
    kept: :func:`stable_predictions_means` computes it from the values). ``budget``: the run's
    label budget, which bounds the remaining change's horizon (:func:`change_horizon`).
    ``multilabel``: ``log_probs_S_K_C`` holds per-label Bernoulli log-probabilities; the
    signals then compare label decisions (:func:`predicted_decisions`; kappa over them with
    two classes, the remaining change :func:`per_predicted_label`) and the expected accuracy
    is the expected micro-F1. ``stop_set``: a key of the stop set's items (:func:`stop_set_key`);
    predictions of earlier rounds are compared only where it is the same (a labelling
    project's items may be added or removed between rounds).
    """
    window = SIGNAL_WINDOW
    previous = [r.signals or {} for r in history]
    predicted_S = predicted_decisions(log_probs_S_K_C, multilabel=multilabel)
    if multilabel:
        num_classes = 2
    out: dict[str, dict[str, Any]] = {}

    def threshold(name: str) -> float | None:
        return thresholds.get(name, SIGNALS[name][0])

    # 1. stabilising predictions (Bloodgood and Vijay-Shanker 2009)
    last = previous[-1].get(STABLE_PREDICTIONS) if previous else None
    kappa = None
    changed_items = False
    if n_labelled > 0 and last is not None and last.get("predictions") and last.get("trained"):
        if _same_stop_set(last, stop_set, len(predicted_S)):
            kappa = cohen_kappa(decode_classes(last["predictions"]), predicted_S, num_classes)
        else:
            changed_items = True
    kappas = [p.get(STABLE_PREDICTIONS, {}).get("value") for p in previous[-(window - 1):]] + [kappa]
    kappas = kappas[-window:]
    fired, detail, mean = False, "predictions are still being compared", None
    if changed_items:
        detail = "the items changed since the last round: predictions are compared again from the next round"
    t = threshold(STABLE_PREDICTIONS)
    if kappa is not None and len(kappas) == window and all(k is not None for k in kappas):
        mean = sum(kappas) / window
        fired = t is not None and mean >= t
        detail = (f"{'label decisions' if multilabel else 'predictions'} have {'stopped' if fired else 'not stopped'} "
                  f"changing: kappa {shown_beside(mean, t, 3)} "
                  f"over the last {window} rounds (stop at {t:g})")
    out[STABLE_PREDICTIONS] = {"value": kappa, "mean": mean, "fired": fired, "detail": detail,
                               "predictions": encode_classes(predicted_S, bits=multilabel), "trained": n_labelled > 0}
    if stop_set is not None:
        out[STABLE_PREDICTIONS]["stop_set"] = stop_set

    # 1b. predictions still expected to change, beyond retraining noise (the recommended default)
    out[REMAINING_CHANGE] = remaining_change_signal(history, predicted_S, n_labelled, budget,
                                                    threshold(REMAINING_CHANGE), multilabel=multilabel,
                                                    stop_set=stop_set)

    # 2. expected accuracy under the posterior, and its change
    accuracy = expected_accuracy(log_probs_S_K_C, multilabel=multilabel) if n_labelled > 0 else None
    values = [p.get(EXPECTED_ACCURACY, {}).get("value") for p in previous[-window:]] + [accuracy]
    fired, detail = False, "not measured before the first model"
    t = threshold(EXPECTED_ACCURACY)
    if accuracy is not None:
        detail = (f"the model expects a micro-F1 of {accuracy:.1%} on the pool" if multilabel
                  else f"the model expects {accuracy:.1%} accuracy on the pool")
        change = largest_change(values) if len(values) == window + 1 else None
        if change is not None:
            fired = t is not None and change < t
            detail += (f"; it changed by at most {shown_beside(change, t, 4)} over the last {window} rounds "
                       f"(stop below {t:g})")
    out[EXPECTED_ACCURACY] = {"value": accuracy, "fired": fired, "detail": detail}

    # 3. the pool's total information, against the first model's
    info = total_information(log_probs_S_K_C, n_unlabelled, multilabel=multilabel) if n_labelled > 0 else None
    first = next((p[INFORMATION]["value"] for p in previous
                  if p.get(INFORMATION, {}).get("value") is not None), info)
    fired, detail = False, "not measured before the first model"
    t = threshold(INFORMATION)
    if info is not None and first:
        ratio = info / first
        fired = t is not None and len(previous) > 0 and ratio < t
        detail = (f"the pool holds {shown_beside(ratio, t, 0, percent=True)} of the information it held at the "
                  f"first model (stop below {100 * t:g}%)")
    out[INFORMATION] = {"value": info, "fired": fired, "detail": detail}

    # 4. accuracy estimated from the answers to uniformly drawn audit items
    audits = [p.get("audit") for p in previous[-window:] if p.get("audit")]
    n = sum(a["n"] for a in audits)
    correct = sum(a["correct"] for a in audits)
    t = threshold(ESTIMATED_ACCURACY)
    if n:
        low, high = exact_interval(correct, n)
        fired = t is not None and low >= t
        what = "subset accuracy (every label right)" if multilabel else "accuracy"
        detail = (f"{what} estimated from {n} uniformly drawn answers: {correct / n:.1%} "
                  f"({AUDIT_CONFIDENCE:.0%} interval {shown_beside(low, t, 1, percent=True)}-{high:.1%})")
        out[ESTIMATED_ACCURACY] = {"value": correct / n, "low": low, "high": high, "n": n, "fired": fired,
                                   "detail": detail}
    else:
        out[ESTIMATED_ACCURACY] = {"value": None, "fired": False,
                                   "detail": "no audited answers yet: they come with the acquired batches "
                                             "when audit_fraction (--audit-fraction) is above 0"}
    return out


def largest_change(values: Sequence[float | None]) -> float | None:
    """The largest change between successive ``values``: what the expected-accuracy criterion
    compares with its threshold, over the last :data:`SIGNAL_WINDOW` + 1 values. ``None`` when
    fewer than two are given or any is missing (``None`` or NaN)."""
    if len(values) < 2 or any(v is None or math.isnan(v) for v in values):
        return None
    return max(abs(b - a) for a, b in zip(values, values[1:], strict=False))


def stable_predictions_means(signals: Sequence[Mapping[str, Any] | None]) -> list[float | None]:
    """Each round's mean kappa over the last :data:`SIGNAL_WINDOW` rounds, from the rounds'
    ``signals`` in order: the number the stable-predictions criterion compares with its
    threshold (``None`` where the window was not full). The recorded ``mean``, or, in records
    written before it was kept, the mean of the recorded single-round ``value`` s, as
    :func:`round_signals` computed it."""
    values = [((s or {}).get(STABLE_PREDICTIONS) or {}).get("value") for s in signals]
    means: list[float | None] = []
    for i, s in enumerate(signals):
        entry = (s or {}).get(STABLE_PREDICTIONS) or {}
        if "mean" in entry:
            means.append(entry["mean"])
            continue
        window = values[max(0, i - SIGNAL_WINDOW + 1): i + 1]
        measured = len(window) == SIGNAL_WINDOW and all(v is not None for v in window)
        means.append(sum(window) / SIGNAL_WINDOW if measured else None)
    return means


def stop_set_key(identities: Sequence[str]) -> str:
    """A short key of the stop set's items (their ids, paths or positions, in order)."""
    import hashlib

    return hashlib.sha256("\n".join(identities).encode("utf-8")).hexdigest()[:16]


def _same_stop_set(entry: Mapping[str, Any], stop_set: str | None, size: int) -> bool:
    """Whether a record's stop-set predictions are of the same items as this round's (records
    without a key: when their sizes agree)."""
    if entry.get("stop_set") is not None and stop_set is not None:
        return entry["stop_set"] == stop_set
    return len(_decoded(entry["predictions"])) == size


def remaining_change_signal(history: Sequence[RoundRecord], predicted_S: Any, n_labelled: int,
                            budget: int | None, threshold: float | None, *,
                            multilabel: bool = False, stop_set: str | None = None) -> dict[str, Any]:
    """The remaining-change entry of :func:`round_signals`: the last ``CHANGE_WINDOW`` trained
    models' stop-set predictions (the earlier ones read from their records; multi-label: their
    label decisions). Also how a stored run is judged again at another threshold
    (``benchmarks/stopping.py``)."""
    window: list[tuple[Any, int]] = [(predicted_S, int(n_labelled))] if n_labelled > 0 else []
    for record in reversed(history):  # the latest trained models, as long as their predictions were kept
        if len(window) == CHANGE_WINDOW:
            break
        entry = (record.signals or {}).get(STABLE_PREDICTIONS) or {}
        if not entry.get("trained"):
            continue
        if not entry.get("predictions") or not _same_stop_set(entry, stop_set, len(predicted_S)):
            break  # not kept, or of other items (a project's items changed): the window starts after it
        window.append((_decoded(entry["predictions"]), int(record.n_labelled)))
    window.reverse()
    if len(window) < CHANGE_WINDOW:
        return {"value": None, "fired": False,
                "detail": f"measured from the {CHANGE_WINDOW}th trained model on ({len(window)} so far)"}
    horizon = change_horizon(n_labelled, budget)
    if horizon == 0:
        return {"value": None, "fired": False, "detail": "the label budget is spent: no labels left to change them"}
    fit = remaining_change([c for c, _ in window], [n for _, n in window], horizon)
    if fit is None:
        return {"value": None, "fired": False, "detail": "the last models were trained on the same labels"}
    if multilabel:  # changed decisions per predicted label, not per decision: see per_predicted_label
        fit = per_predicted_label(fit, predicted_S)
    return _change_entry(fit, threshold, "predicted labels" if multilabel else "predictions")


def _change_entry(fit: ChangeFit, threshold: float | None, what: str) -> dict[str, Any]:
    fired = threshold is not None and fit.value < threshold
    detail = (f"{what} {'have settled' if fired else 'are still changing'}: about "
              f"{shown_beside(fit.value, threshold, 1, percent=True)} of them "
              f"would change in the next {fit.horizon} labels, beyond the {fit.floor:.1%} that retraining alone "
              f"changes (stop below {100 * threshold:g}%)")
    return {"value": fit.value, "fired": fired, "detail": detail, "drift": fit.drift, "drift_se": fit.drift_se,
            "floor": fit.floor, "horizon": fit.horizon, "decay": fit.decay}


def rejudge_remaining_change(entry: Mapping[str, Any], n_labelled: int, budget: int | None,
                             threshold: float | None) -> dict[str, Any]:
    """A recorded remaining-change entry (:func:`remaining_change_signal`) as a run to label
    ``budget`` would have recorded it: the fit is the same (the same models), the horizon
    (:func:`change_horizon`) and so the value and whether it fired are not. How a run continued
    to a larger budget (``activebayes resume DIR --budget N``) keeps its rounds those of a run
    started with that budget. Entries without a fit are returned as they are."""
    if entry.get("value") is None or entry.get("drift") is None:
        return dict(entry)
    horizon = change_horizon(n_labelled, budget)
    if horizon == 0:
        return {"value": None, "fired": False, "detail": "the label budget is spent: no labels left to change them"}
    what = str(entry.get("detail", "predictions")).split(" have settled")[0].split(" are still changing")[0]
    decay = float(entry.get("decay", 0.0))  # entries written before the decay was fitted: a constant drift
    fit = ChangeFit(value=projected_change(entry["drift"], entry["drift_se"], n_labelled, horizon, decay),
                    drift=entry["drift"], drift_se=entry["drift_se"], floor=entry["floor"], horizon=horizon,
                    decay=decay, n_labelled=int(n_labelled))
    return _change_entry(fit, threshold, what)


def per_predicted_label(fit: ChangeFit, decisions_D: Any) -> ChangeFit:
    r"""A multi-label fit over label decisions, rescaled from a share of all :math:`S C` decisions
    to a share of the :math:`P` labels the current model predicts present (its ones in
    ``decisions_D``): every term times :math:`S C / P`.

    Most decisions of a sparse label vector are easy negatives, so a share of all of them
    hides how much the headline moves: changing :math:`m` decisions changes the micro-F1,
    :math:`2\,TP / (|\hat Y| + |Y|)`, by up to about :math:`m / P` when :math:`|\hat Y| \approx |Y|
    = P`, but the Hamming accuracy only by :math:`m / (S C)`.
    """
    import dataclasses

    import numpy as np

    decisions_D = np.asarray(decisions_D)
    scale = len(decisions_D) / max(int(decisions_D.sum()), 1)
    drift, drift_se = fit.drift * scale, fit.drift_se * scale
    # the value from the scaled fit, as a run judged again at another budget computes it (rejudge_remaining_change)
    return dataclasses.replace(fit, value=projected_change(drift, drift_se, fit.n_labelled, fit.horizon, fit.decay),
                               drift=drift, drift_se=drift_se, floor=fit.floor * scale)


@dataclass(frozen=True)
class SignalCriterion:
    """Stop when signal ``name`` fired this round (its value is computed by :func:`round_signals`)."""

    name: str

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        signal = (history[-1].signals or {}).get(self.name) if history else None
        if signal and signal.get("fired"):
            return StopReason(self.name, signal["detail"])
        return None
