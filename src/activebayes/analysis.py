"""Learning-curve analysis: labels needed to reach an accuracy, area under the curve, seeds.

A learning curve is one run's test accuracy after each round against the number
of labels the round's model was trained on: ``n_labelled_R`` (non-decreasing
ints) and ``accuracy_R`` (floats in ``[0, 1]``), one entry per round ``R``.
A strategy run with several seeds ``S`` has one curve per seed. Everything here
is a pure NumPy (float64) function of those arrays; the report
(:mod:`activebayes.report`) and the label-efficiency benchmark build on it.

Besides the curves, the other per-round records of a strategy's seeds are
aggregated here too: a final-round metric over seeds (:func:`final_metric`,
mean and sample standard deviation), the final round's reliability bins pooled
over seeds (:func:`final_reliability`), a per-round quantity averaged over
seeds (:func:`per_round_mean`: class counts, per-class recall, seconds).
``rounds_per_seed`` is always one list of round records per seed (the
``RoundRecord`` objects :func:`activebayes.rundir.load_runs` returns, or the
plain dicts of ``rounds.jsonl``).

The two headline numbers, as in Gal, Islam & Ghahramani 2017 (Table 1: labels
to reach 10 % / 5 % MNIST test error) and Kirsch, van Amersfoort & Gal 2019
(median labels to reach 90 % / 95 % accuracy):

* **labels to reach** ``t``: ``min { n_r : a_r >= t }``, the first label count
  whose model reaches the target (``None`` when no round does);
* **area under the learning curve** (AULC): the trapezoid integral of accuracy
  over labels, divided by the label range, i.e. the mean accuracy over the
  labelling budget (in ``[0, 1]``; higher is better).

Example:
    >>> import numpy as np
    >>> n_R, acc_R = np.array([20, 30, 40]), np.array([0.6, 0.8, 0.9])
    >>> labels_to_reach(n_R, acc_R, 0.75)
    30
    >>> round(area_under_learning_curve(n_R, acc_R), 4)   # (0.7*10 + 0.85*10) / 20
    0.775
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics.calibration import ReliabilityBins
from activebayes.records import headline_metric

__all__ = [
    "LearningCurve",
    "MeanCurve",
    "OverSeeds",
    "PerRoundMean",
    "PhaseSeconds",
    "ReachSummary",
    "StrategySummary",
    "CLASSIC_TARGETS",
    "area_under_learning_curve",
    "baseline_targets",
    "check_targets",
    "default_targets",
    "final_metric",
    "final_reliability",
    "labels_to_reach",
    "learning_curves_from_runs",
    "mean_learning_curve",
    "per_round_mean",
    "phase_seconds",
    "summarise_runs",
    "summarise_strategy",
]

CurveLike = Any  # LearningCurve or a (n_labelled_R, accuracy_R) pair


# --------------------------------------------------------------------------- validation


def _check_curve(n_labelled_R: object, accuracy_R: object) -> tuple[np.ndarray, np.ndarray]:
    n_R = np.asarray(n_labelled_R)
    acc_R = np.asarray(accuracy_R)
    if n_R.ndim != 1:
        raise InvalidArgumentError(f"n_labelled_R must be 1-D [R] (one label count per round), got shape {n_R.shape}")
    if acc_R.ndim != 1:
        raise InvalidArgumentError(f"accuracy_R must be 1-D [R] (one accuracy per round), got shape {acc_R.shape}")
    if n_R.shape != acc_R.shape:
        raise InvalidArgumentError(
            f"n_labelled_R and accuracy_R must have the same length, got {n_R.shape[0]} and {acc_R.shape[0]}"
        )
    if n_R.size == 0:
        raise InvalidArgumentError("n_labelled_R is empty: a learning curve needs at least one round")
    if n_R.dtype.kind not in "iuf":
        raise InvalidTypeError(f"n_labelled_R must hold numbers, got dtype {n_R.dtype}")
    if acc_R.dtype.kind not in "iuf":
        raise InvalidTypeError(f"accuracy_R must hold numbers, got {acc_R.tolist()} (dtype {acc_R.dtype})")
    acc_R = acc_R.astype(np.float64)
    n_R = n_R.astype(np.float64)
    if not np.all(np.isfinite(n_R)) or np.any(n_R < 0):
        raise InvalidArgumentError(f"n_labelled_R must hold finite counts >= 0, got {n_R.tolist()}")
    if np.any(np.diff(n_R) < 0):
        raise InvalidArgumentError(f"n_labelled_R must be non-decreasing (rounds in order), got {n_R.tolist()}")
    if not np.all((acc_R >= 0.0) & (acc_R <= 1.0)):  # also false for nan
        raise InvalidArgumentError(f"accuracy_R must hold finite accuracies in [0, 1], got {acc_R.tolist()}")
    return n_R, acc_R


def _check_target(target: object, name: str = "target") -> float:
    if isinstance(target, bool) or not isinstance(target, int | float | np.floating | np.integer):
        raise InvalidTypeError(f"{name} must be a number in (0, 1], got {target!r}")
    value = float(target)
    if not 0.0 < value <= 1.0:
        raise InvalidArgumentError(f"{name} must be an accuracy in (0, 1], got {target!r}")
    return value


def check_targets(targets: Iterable[float] | float, name: str = "targets") -> tuple[float, ...]:
    """Target accuracies as a tuple of floats in ``(0, 1]``, duplicates dropped, order kept;
    a single number is one target.

    Example:
        >>> check_targets([0.9, 0.95, 0.9])
        (0.9, 0.95)
        >>> check_targets(0.9)
        (0.9,)
    """
    values = _target_tuple(targets, name)
    if not values:
        raise InvalidArgumentError(f"{name} must hold at least one accuracy in (0, 1], got none")
    return values


def _target_tuple(targets: object, name: str = "targets") -> tuple[float, ...]:
    """``targets`` (one number, or a sequence of them, possibly none) checked, duplicates dropped."""
    if isinstance(targets, int | float | np.floating | np.integer) and not isinstance(targets, bool):
        targets = (targets,)
    if isinstance(targets, str | bytes) or not isinstance(targets, Iterable):
        raise InvalidTypeError(f"{name} must be an accuracy in (0, 1] or a sequence of them, got {targets!r}")
    return tuple(dict.fromkeys(_check_target(t, name) for t in targets))


# --------------------------------------------------------------------------- one curve


def labels_to_reach(n_labelled_R: object, accuracy_R: object, target: float) -> int | None:
    """The first number of labels at which accuracy reaches ``target``; ``None`` if it never does.

    ``labels_to_reach = min { n_r : a_r >= target }`` over rounds ``r`` in order
    (the first crossing, as in Gal et al. 2017 Table 1; a later dip below the
    target does not undo it).

    Args:
        n_labelled_R: ``[R]`` labels each round's model was trained on (non-decreasing).
        accuracy_R: ``[R]`` that model's test accuracy.
        target: accuracy in ``(0, 1]``.

    Example:
        >>> labels_to_reach([20, 30, 40], [0.5, 0.91, 0.89], 0.9)
        30
        >>> labels_to_reach([20, 30, 40], [0.5, 0.6, 0.7], 0.9) is None
        True
    """
    n_R, acc_R = _check_curve(n_labelled_R, accuracy_R)
    target = _check_target(target)
    hits = np.flatnonzero(acc_R >= target)
    return None if hits.size == 0 else int(round(n_R[hits[0]]))


def area_under_learning_curve(n_labelled_R: object, accuracy_R: object, *, normalise: bool = True) -> float:
    """Area under the learning curve by the trapezoid rule over the number of labels.

    ``A = sum_{r=1}^{R-1} (n_r - n_{r-1}) (a_r + a_{r-1}) / 2``.

    With ``normalise=True`` (default) it is divided by the label range
    ``n_{R-1} - n_0``, which makes it the mean accuracy over the labelling budget,
    a number in ``[0, 1]`` comparable across budgets of different sizes (a curve
    at constant accuracy ``a`` gives ``a``). A single-round curve has no range;
    its normalised area is its one accuracy (the limit of a constant curve) and
    its unnormalised area is 0.

    Args:
        n_labelled_R: ``[R]`` label counts (non-decreasing).
        accuracy_R: ``[R]`` accuracies.
        normalise: divide by the label range (see above).

    Example:
        >>> area_under_learning_curve([0, 10, 30], [0.5, 0.7, 0.9], normalise=False)
        22.0
        >>> area_under_learning_curve([0, 10, 30], [0.5, 0.7, 0.9])
        0.7333333333333333
    """
    if not isinstance(normalise, bool):
        raise InvalidTypeError(f"normalise must be a bool, got {normalise!r}")
    n_R, acc_R = _check_curve(n_labelled_R, accuracy_R)
    widths = np.diff(n_R)
    area = float(np.sum(widths * (acc_R[1:] + acc_R[:-1]) / 2.0))
    if not normalise:
        return area
    span = float(n_R[-1] - n_R[0])
    if span == 0.0:
        return float(acc_R.mean())
    return area / span


# --------------------------------------------------------------------------- many curves


@dataclass(frozen=True)
class LearningCurve:
    """One run's learning curve: ``n_labelled_R`` against ``accuracy_R``.

    ``metric`` names the accuracy used (``"test_accuracy"``, or
    ``"validation_accuracy"`` for runs without a test set).
    """

    strategy: str
    seed: int
    n_labelled_R: np.ndarray
    accuracy_R: np.ndarray
    metric: str = "test_accuracy"

    def __post_init__(self) -> None:
        n_R, acc_R = _check_curve(self.n_labelled_R, self.accuracy_R)
        object.__setattr__(self, "n_labelled_R", n_R.astype(np.int64))
        object.__setattr__(self, "accuracy_R", acc_R)

    def __iter__(self):  # unpack as ``n_R, acc_R = curve``; the plots take such pairs
        return iter((self.n_labelled_R, self.accuracy_R))

    def labels_to_reach(self, target: float) -> int | None:
        return labels_to_reach(self.n_labelled_R, self.accuracy_R, target)

    def area(self, *, normalise: bool = True) -> float:
        return area_under_learning_curve(self.n_labelled_R, self.accuracy_R, normalise=normalise)

    @property
    def final_accuracy(self) -> float:
        return float(self.accuracy_R[-1])

    @property
    def final_n_labelled(self) -> int:
        return int(self.n_labelled_R[-1])


def _as_pair(curve: CurveLike, index: int) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(curve, LearningCurve):
        return curve.n_labelled_R.astype(np.float64), curve.accuracy_R
    try:
        n_R, acc_R = curve
    except (TypeError, ValueError):
        raise InvalidTypeError(
            f"curves[{index}] must be a LearningCurve or a (n_labelled_R, accuracy_R) pair, "
            f"got {type(curve).__name__}"
        ) from None
    return _check_curve(n_R, acc_R)


def learning_curves_from_runs(
    runs: Mapping[tuple[str, int], tuple[Any, Sequence[Any]]],
    *,
    metric: str | None = None,
) -> dict[str, list[LearningCurve]]:
    """Learning curves per strategy from :func:`activebayes.rundir.load_runs` output.

    Args:
        runs: ``(strategy, seed) -> (LoopConfig, [RoundRecord])``. Round records may
            also be plain dicts as stored in ``rounds.jsonl``.
        metric: the accuracy key in each round's ``metrics``; default the runs' headline
            (:func:`activebayes.records.headline_metric`: ``"test_accuracy"`` when the runs
            have it, else ``"validation_accuracy"``; ``"test_micro_f1"`` for multi-label runs).

    Returns:
        ``strategy -> [LearningCurve]`` sorted by seed, strategies in first-seen
        order. Rounds without the metric are left out; runs with no such round
        are left out entirely.

    Raises:
        InvalidArgumentError: ``metric`` is in none of the rounds' metrics (the message
            lists those they hold), or a run's curve is invalid (the message names the run).

    Example:
        >>> from types import SimpleNamespace as R
        >>> runs = {("bald", 0): (None, [R(n_labelled=20, metrics={"test_accuracy": 0.5}),
        ...                              R(n_labelled=30, metrics={"test_accuracy": 0.7})])}
        >>> learning_curves_from_runs(runs)["bald"][0].accuracy_R.tolist()
        [0.5, 0.7]
    """
    if not isinstance(runs, Mapping):
        raise InvalidTypeError(f"runs must be a mapping (strategy, seed) -> (config, rounds), got {type(runs).__name__}")
    records = {key: [_record_fields(r, key, i) for i, r in enumerate(_run_rounds(value, key))]
               for key, value in runs.items()}
    all_metrics = [m for rounds in records.values() for _, m in rounds]
    metric = headline_metric(all_metrics) if metric is None else _check_metric(metric, all_metrics)
    out: dict[str, list[LearningCurve]] = {}
    for (strategy, seed), rounds in records.items():
        points = [(n, m[metric]) for n, m in rounds if m.get(metric) is not None]
        out.setdefault(strategy, [])
        if points:
            out[strategy].append(_run_curve(strategy, seed, points, metric))
    return {s: sorted(c, key=lambda curve: curve.seed) for s, c in out.items() if c}


def _run_rounds(value: Any, key: Any) -> Sequence[Any]:
    try:
        _, rounds = value
    except (TypeError, ValueError):
        raise InvalidTypeError(f"runs[{key!r}] must be a (config, rounds) pair, got {type(value).__name__}") from None
    return rounds


def _check_metric(metric: object, all_metrics: Sequence[Mapping[str, Any]]) -> str:
    if not isinstance(metric, str):
        raise InvalidTypeError(f"metric must be a metric name (str), got {metric!r}")
    held = sorted({k for m in all_metrics for k, v in m.items() if isinstance(v, int | float) and not isinstance(v, bool)})
    if held and not any(m.get(metric) is not None for m in all_metrics):
        raise InvalidArgumentError(f"metric must be one of the metrics the round records hold ({', '.join(held)}), got {metric!r}")
    return metric


def _run_curve(strategy: str, seed: Any, points: list[tuple[int, Any]], metric: str) -> LearningCurve:
    n_R, acc_R = zip(*points, strict=True)
    try:
        return LearningCurve(strategy, int(seed), np.asarray(n_R), np.asarray(acc_R), metric)
    except (InvalidArgumentError, InvalidTypeError) as error:
        raise type(error)(f"run {strategy!r} seed {seed} ({metric}): {error}") from None


def _record_fields(record: Any, key: Any, index: int) -> tuple[int, Mapping[str, Any]]:
    n_labelled, metrics = _field(record, "n_labelled"), _field(record, "metrics") or {}
    where = f"run {key!r} round record {index}"
    if isinstance(n_labelled, bool) or not isinstance(n_labelled, int | np.integer):
        raise InvalidTypeError(f"{where}: n_labelled must be an int, got {n_labelled!r}")
    if not isinstance(metrics, Mapping):
        raise InvalidTypeError(f"{where}: metrics must be a mapping, got {type(metrics).__name__}")
    return int(n_labelled), metrics


# --------------------------------------------------------------------------- summaries


def _censored_quantile(sorted_S: np.ndarray, q: float) -> float | None:
    """``np.percentile(values, 100 q)`` (linear) where ``inf`` means "not reached".

    Returns ``None`` when the quantile depends on a value that was not reached.
    """
    position = (sorted_S.size - 1) * q
    lo, hi = math.floor(position), math.ceil(position)
    weight = position - lo
    if math.isinf(sorted_S[lo]) or (weight > 0 and math.isinf(sorted_S[hi])):
        return None
    return float(sorted_S[lo] + weight * (sorted_S[hi] - sorted_S[lo]))


@dataclass(frozen=True)
class ReachSummary:
    """Labels to reach one target accuracy, over seeds.

    ``values_S`` holds each seed's labels (``None``: not reached). The
    statistics treat "not reached" as infinitely many labels (a censored
    value): the median, quartiles and maximum are ``None`` when they would fall
    on a seed that did not reach the target; the minimum is ``None`` only when
    no seed reached it. Quantiles interpolate linearly (``np.percentile``'s
    default).
    """

    target: float
    values_S: tuple[int | None, ...]
    median: float | None
    q25: float | None
    q75: float | None
    minimum: int | None
    maximum: int | None

    @property
    def n_reached(self) -> int:
        return sum(v is not None for v in self.values_S)

    @property
    def n_seeds(self) -> int:
        return len(self.values_S)

    @classmethod
    def from_values(cls, target: float, values_S: Sequence[int | None]) -> ReachSummary:
        if len(values_S) == 0:
            raise InvalidArgumentError("values_S is empty: need at least one seed")
        sorted_S = np.sort(np.array([math.inf if v is None else float(v) for v in values_S]))
        maximum = None if math.isinf(sorted_S[-1]) else int(sorted_S[-1])
        minimum = None if math.isinf(sorted_S[0]) else int(sorted_S[0])
        return cls(
            target=float(target),
            values_S=tuple(values_S),
            median=_censored_quantile(sorted_S, 0.5),
            q25=_censored_quantile(sorted_S, 0.25),
            q75=_censored_quantile(sorted_S, 0.75),
            minimum=minimum,
            maximum=maximum,
        )


@dataclass(frozen=True)
class StrategySummary:
    """One strategy's learning curves summarised over seeds.

    Attributes:
        n_seeds: number of curves (seeds).
        reach: ``target -> ReachSummary`` (labels to reach each target).
        aulc_S: normalised area under each seed's curve; ``aulc_mean`` / ``aulc_std``
            their mean and sample standard deviation (``ddof=1``; 0 for one seed).
        final_accuracy_S: each seed's last-round accuracy, with mean and std (ddof=1).
        final_n_labelled_S: each seed's last-round label count.
    """

    strategy: str
    n_seeds: int
    reach: Mapping[float, ReachSummary]
    aulc_S: tuple[float, ...]
    aulc_mean: float
    aulc_std: float
    final_accuracy_S: tuple[float, ...]
    final_accuracy_mean: float
    final_accuracy_std: float
    final_n_labelled_S: tuple[int, ...] = field(default=())


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else 0.0


def summarise_strategy(
    curves: Sequence[CurveLike],
    *,
    targets: Iterable[float] | float = (0.9, 0.95),
    strategy: str | None = None,
) -> StrategySummary:
    """Summarise one strategy's curves (one per seed).

    Labels to reach each target: median, interquartile range (25th-75th
    percentile) and min / max over seeds, "not reached" treated as censored (see
    :class:`ReachSummary`); AULC (normalised, see
    :func:`area_under_learning_curve`) mean and std; final accuracy mean and std.

    Args:
        curves: ``[S]`` :class:`LearningCurve` objects or ``(n_labelled_R, accuracy_R)`` pairs.
        targets: accuracies in ``(0, 1]`` (one number: one target).
        strategy: name to store (default: the curves' own, or ``""``).

    Example:
        >>> s = summarise_strategy([([10, 20], [0.8, 0.9]), ([10, 20], [0.9, 0.95])], targets=[0.9])
        >>> s.reach[0.9].median, s.aulc_mean
        (15.0, 0.8875)
    """
    if isinstance(curves, LearningCurve) or not isinstance(curves, Sequence) or len(curves) == 0:
        raise InvalidArgumentError("curves must be a non-empty sequence of learning curves (one per seed)")
    pairs = [_as_pair(curve, i) for i, curve in enumerate(curves)]
    target_list = _target_tuple(targets)
    if strategy is None:
        strategy = curves[0].strategy if isinstance(curves[0], LearningCurve) else ""
    reach = {
        t: ReachSummary.from_values(t, [labels_to_reach(n_R, acc_R, t) for n_R, acc_R in pairs]) for t in target_list
    }
    aulc_S = tuple(area_under_learning_curve(n_R, acc_R) for n_R, acc_R in pairs)
    final_S = tuple(float(acc_R[-1]) for _, acc_R in pairs)
    aulc_mean, aulc_std = _mean_std(aulc_S)
    final_mean, final_std = _mean_std(final_S)
    return StrategySummary(
        strategy=strategy,
        n_seeds=len(pairs),
        reach=reach,
        aulc_S=aulc_S,
        aulc_mean=aulc_mean,
        aulc_std=aulc_std,
        final_accuracy_S=final_S,
        final_accuracy_mean=final_mean,
        final_accuracy_std=final_std,
        final_n_labelled_S=tuple(int(round(n_R[-1])) for n_R, _ in pairs),
    )


def summarise_runs(
    runs: Mapping[tuple[str, int], tuple[Any, Sequence[Any]]],
    *,
    targets: Iterable[float] | float = (0.9, 0.95),
    metric: str | None = None,
) -> dict[str, StrategySummary]:
    """:func:`summarise_strategy` for every strategy of :func:`~activebayes.rundir.load_runs` output
    (``metric`` as in :func:`learning_curves_from_runs`: by default the runs' headline)."""
    targets = _target_tuple(targets)
    return {
        strategy: summarise_strategy(curves, targets=targets, strategy=strategy)
        for strategy, curves in learning_curves_from_runs(runs, metric=metric).items()
    }


@dataclass(frozen=True)
class MeanCurve:
    """Curves averaged over seeds on the label counts that every seed has (``[P]`` points)."""

    n_labelled_P: np.ndarray
    mean_P: np.ndarray
    std_P: np.ndarray
    min_P: np.ndarray
    max_P: np.ndarray
    n_seeds: int


def mean_learning_curve(curves: Sequence[CurveLike]) -> MeanCurve:
    """Mean, sample std (``ddof=1``; 0 for one seed), min and max over seeds, pointwise.

    Only label counts present in every curve are kept (runs stopped early by a
    target accuracy are shorter); for a repeated count in one curve its last
    round is used.

    Example:
        >>> m = mean_learning_curve([([10, 20, 30], [0.5, 0.7, 0.8]), ([10, 20], [0.6, 0.9])])
        >>> m.n_labelled_P.tolist(), m.mean_P.round(3).tolist()
        ([10, 20], [0.55, 0.8])
    """
    if isinstance(curves, LearningCurve) or not isinstance(curves, Sequence) or len(curves) == 0:
        raise InvalidArgumentError("curves must be a non-empty sequence of learning curves (one per seed)")
    lookups = []
    for i, curve in enumerate(curves):
        n_R, acc_R = _as_pair(curve, i)
        lookups.append({int(round(n)): a for n, a in zip(n_R, acc_R, strict=True)})
    common = sorted(set.intersection(*(set(d) for d in lookups)))
    values_S_P = np.array([[d[n] for n in common] for d in lookups], dtype=np.float64).reshape(len(lookups), len(common))
    std = values_S_P.std(axis=0, ddof=1) if len(lookups) > 1 else np.zeros(len(common))
    return MeanCurve(
        n_labelled_P=np.asarray(common, dtype=np.int64),
        mean_P=values_S_P.mean(axis=0),
        std_P=std,
        min_P=values_S_P.min(axis=0) if common else np.zeros(0),
        max_P=values_S_P.max(axis=0) if common else np.zeros(0),
        n_seeds=len(lookups),
    )


#: The labels-needed table's targets where some run reaches the first (MNIST-like tasks).
CLASSIC_TARGETS = (0.9, 0.95)


def baseline_targets(curves: Sequence[CurveLike]) -> tuple[float, ...]:
    r"""Two targets read from a baseline's curves (one per seed), for tasks where 90% is out of reach.

    With :math:`m(n)` the baseline's mean over seeds (:func:`mean_learning_curve`) and
    :math:`B` its last label count,

    .. math:: T_\mathrm{mid} = \lfloor m(n_\mathrm{mid}) \rfloor_2, \qquad
              T_\mathrm{end} = \lfloor m(B) \rfloor_2,

    :math:`n_\mathrm{mid}` the label count closest to :math:`B / 2` and
    :math:`\lfloor\cdot\rfloor_2` rounding down to two decimals. The baseline reaches
    :math:`T_\mathrm{end}` at about its budget by construction, so a strategy that gets there
    earlier saved labels. A target given twice is given once; one that is not above 0 is dropped.

    Example:
        >>> baseline_targets([([20, 60, 100], [0.31, 0.418, 0.473]), ([20, 60, 100], [0.29, 0.40, 0.47])])
        (0.4, 0.47)
    """
    mean = mean_learning_curve(curves)
    n_P, m_P = mean.n_labelled_P, mean.mean_P
    if len(n_P) == 0:
        return ()
    mid = int(np.argmin(np.abs(n_P - n_P[-1] / 2)))
    targets: list[float] = []
    for value in (m_P[mid], m_P[-1]):
        target = _floor_2(float(value))
        if target > 0 and target not in targets:
            targets.append(target)
    return tuple(targets)


def _floor_2(value: float) -> float:
    """``value`` rounded down to two decimals; a value that is two decimals (0.58, stored as
    0.57999...) stays itself."""
    return math.floor(value * 100 + 1e-9) / 100


def default_targets(curves: Mapping[str, Sequence[CurveLike]], *, baseline: str = "random") -> tuple[float, ...]:
    """The labels-needed table's targets for these curves (``strategy -> [curve per seed]``).

    :data:`CLASSIC_TARGETS` when some seed's curve reaches 0.9; otherwise
    :func:`baseline_targets` of the ``baseline`` strategy's curves, or, without it, of the
    strategy whose mean area under the curve is lowest (text and table tasks, multi-label
    F1: 90% is out of reach and every cell would read "not reached").

    Example:
        >>> default_targets({"bald": [([20, 40], [0.8, 0.93])]})
        (0.9, 0.95)
        >>> default_targets({"random": [([20, 60, 100], [0.3, 0.41, 0.47])], "bald": [([20, 60, 100], [0.3, 0.45, 0.5])]})
        (0.41, 0.47)
    """
    pairs = {strategy: [_as_pair(curve, i) for i, curve in enumerate(seeds)]
             for strategy, seeds in curves.items() if len(seeds)}
    if not pairs:
        return CLASSIC_TARGETS
    if any(float(np.max(acc_R)) >= CLASSIC_TARGETS[0] for seeds in pairs.values() for _, acc_R in seeds if len(acc_R)):
        return CLASSIC_TARGETS
    if baseline not in pairs:
        baseline = min(pairs, key=lambda s: float(np.mean([area_under_learning_curve(n, a) for n, a in pairs[s]])))
    return baseline_targets(pairs[baseline]) or CLASSIC_TARGETS


# --------------------------------------------------------------------------- other records over seeds

RoundsPerSeed = Sequence[Sequence[Any]]  # one list of round records (RoundRecord or stored dict) per seed


def _field(record: Any, name: str) -> Any:
    return record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)


def _check_rounds_per_seed(rounds_per_seed: object) -> list[Sequence[Any]]:
    if isinstance(rounds_per_seed, str | bytes | Mapping) or not isinstance(rounds_per_seed, Sequence):
        raise InvalidTypeError(
            f"rounds_per_seed must be a sequence with one list of round records per seed, "
            f"got {type(rounds_per_seed).__name__}"
        )
    for s, rounds in enumerate(rounds_per_seed):
        if isinstance(rounds, str | bytes | Mapping) or not isinstance(rounds, Sequence):
            raise InvalidTypeError(f"rounds_per_seed[{s}] must be a list of round records, got {type(rounds).__name__}")
    return list(rounds_per_seed)


@dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class OverSeeds:
    """One quantity from each of ``S`` seeds: ``values_S`` (float64 ``[S]`` or ``[S, ...]``).

    ``mean`` and ``std`` are taken over seeds, pointwise (``std`` is the sample
    standard deviation, ``ddof=1``, and zeros for one seed); ``total`` is the
    sum over seeds (e.g. confusion matrices of the same test set).
    """

    values_S: np.ndarray

    def __post_init__(self) -> None:
        values = np.asarray(self.values_S, dtype=np.float64)
        if values.ndim == 0 or values.shape[0] == 0:
            raise InvalidArgumentError(f"values_S must hold one value per seed, at least one, got shape {values.shape}")
        object.__setattr__(self, "values_S", values)

    @property
    def n_seeds(self) -> int:
        return int(self.values_S.shape[0])

    @property
    def mean(self) -> np.ndarray | float:
        mean = self.values_S.mean(axis=0)
        return float(mean) if mean.ndim == 0 else mean

    @property
    def std(self) -> np.ndarray | float:
        if self.n_seeds == 1:
            std = np.zeros(self.values_S.shape[1:])
        else:
            std = self.values_S.std(axis=0, ddof=1)
        return float(std) if std.ndim == 0 else std

    @property
    def total(self) -> np.ndarray | float:
        total = self.values_S.sum(axis=0)
        return float(total) if total.ndim == 0 else total


def final_metric(rounds_per_seed: RoundsPerSeed, key: str) -> OverSeeds | None:
    """``metrics[key]`` of each seed's last round, over seeds.

    Seeds with no rounds yet, or whose last round lacks ``key``, are left out;
    ``None`` when no seed has it. Values may be numbers or equally shaped lists
    (per-class values, confusion matrices).

    Example:
        >>> rounds = [[{"metrics": {"test_ece": 0.2}}, {"metrics": {"test_ece": 0.1}}],
        ...           [{"metrics": {"test_ece": 0.3}}]]
        >>> stats = final_metric(rounds, "test_ece")
        >>> stats.values_S.tolist(), round(stats.mean, 3)
        ([0.1, 0.3], 0.2)
    """
    values = []
    for rounds in _check_rounds_per_seed(rounds_per_seed):
        value = (_field(rounds[-1], "metrics") or {}).get(key) if rounds else None
        if value is not None:
            values.append(np.asarray(value, dtype=np.float64))
    if not values:
        return None
    shapes = sorted({v.shape for v in values})
    if len(shapes) != 1:
        raise InvalidArgumentError(f"the seeds' final {key!r} differ in shape: {shapes}")
    return OverSeeds(np.stack(values))


def final_reliability(rounds_per_seed: RoundsPerSeed, key: str = "test_reliability") -> ReliabilityBins | None:
    """The reliability bins of each seed's last round, pooled over seeds.

    The stored bins (``metrics[key]``, see
    :meth:`~activebayes.metrics.ReliabilityBins.from_record`) are added with
    :meth:`~activebayes.metrics.ReliabilityBins.pool`, so the result is the
    reliability of all seeds' test predictions together, and its ``ece`` is the
    *pooled* ECE (at most the mean of the seeds' ECEs when the seeds share one
    test set). ``None`` when no seed stored bins.

    Example:
        >>> seed_0 = [{"metrics": {"test_reliability": {"count": [0, 10], "conf_sum": [0, 8], "correct_sum": [0, 6]}}}]
        >>> seed_1 = [{"metrics": {"test_reliability": {"count": [0, 10], "conf_sum": [0, 8], "correct_sum": [0, 10]}}}]
        >>> round(final_reliability([seed_0, seed_1]).ece, 6)   # the seeds' ECEs are 0.2 and 0.2
        0.0
    """
    bins = []
    for s, rounds in enumerate(_check_rounds_per_seed(rounds_per_seed)):
        record = (_field(rounds[-1], "metrics") or {}).get(key) if rounds else None
        if record is not None:
            bins.append(ReliabilityBins.from_record(record, name=f"seed {s}'s final {key}"))
    return ReliabilityBins.pool(bins) if bins else None


@dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class PerRoundMean:
    """A per-round quantity averaged over seeds on the ``R`` rounds every seed has.

    Attributes:
        mean_R: ``[R]`` or ``[R, ...]`` mean over seeds, round by round.
        n_labelled_R: ``[R]`` the rounds' label counts when all seeds agree on them, else ``None``.
        n_seeds: seeds averaged.
    """

    mean_R: np.ndarray
    n_labelled_R: np.ndarray | None
    n_seeds: int


def per_round_mean(rounds_per_seed: RoundsPerSeed, extract: Callable[[Any], Any]) -> PerRoundMean | None:
    """The mean over seeds of ``extract(round)``, round by round, on the rounds every seed has.

    Runs of a comparison that is still running (or stopped early) are shorter:
    only the first ``R = min_s R_s`` rounds are averaged. ``None`` when a seed
    has no rounds or ``extract`` gives ``None`` for one of those rounds (records
    that do not hold the quantity).

    Args:
        rounds_per_seed: one list of round records per seed.
        extract: ``round record -> number or list`` (the same shape every round).

    Example:
        >>> seeds = [[{"n_labelled": 20, "class_counts": [1, 1]}, {"n_labelled": 30, "class_counts": [3, 1]}],
        ...          [{"n_labelled": 20, "class_counts": [1, 1]}]]
        >>> m = per_round_mean(seeds, lambda r: r["class_counts"])
        >>> m.mean_R.tolist(), m.n_labelled_R.tolist(), m.n_seeds
        ([[1.0, 1.0]], [20], 2)
    """
    runs = _check_rounds_per_seed(rounds_per_seed)
    if not callable(extract):
        raise InvalidTypeError(f"extract must be a callable round -> value, got {type(extract).__name__}")
    if not runs:
        return None
    length = min(len(rounds) for rounds in runs)
    if length == 0:
        return None
    stacks = []
    for rounds in runs:
        values = [extract(r) for r in rounds[:length]]
        if any(v is None for v in values):
            return None
        stacks.append(np.asarray(values, dtype=np.float64))
    shapes = sorted({stack.shape for stack in stacks})
    if len(shapes) != 1:
        raise InvalidArgumentError(f"the seeds' per-round values differ in shape: {shapes}")
    counts = {tuple(int(_field(r, "n_labelled")) for r in rounds[:length]) for rounds in runs}
    n_labelled_R = np.asarray(counts.pop(), dtype=np.int64) if len(counts) == 1 else None
    return PerRoundMean(mean_R=np.mean(stacks, axis=0), n_labelled_R=n_labelled_R, n_seeds=len(stacks))


@dataclass(frozen=True, eq=False)  # holds arrays: no elementwise ==
class PhaseSeconds:
    """Seconds spent per phase (``phases``, ``P`` of them).

    Attributes:
        per_round: mean over seeds of each round's seconds, ``mean_R`` ``[R, P]``.
        totals: each run's total seconds per phase, ``values_S`` ``[S, P]``.
    """

    phases: tuple[str, ...]
    per_round: PerRoundMean
    totals: OverSeeds


def phase_seconds(rounds_per_seed: RoundsPerSeed, phases: Sequence[str]) -> PhaseSeconds | None:
    """Seconds per phase (a phase a round did not run counts 0), per round and per run.

    Example:
        >>> seeds = [[{"n_labelled": 20, "seconds": {"fit": 1.0, "acquire": 0.5}}, {"n_labelled": 30, "seconds": {"fit": 2.0}}]]
        >>> t = phase_seconds(seeds, ("fit", "acquire"))
        >>> t.per_round.mean_R.tolist(), t.totals.values_S.tolist()
        ([[1.0, 0.5], [2.0, 0.0]], [[3.0, 0.5]])
    """
    phases = tuple(phases)
    runs = [rounds for rounds in _check_rounds_per_seed(rounds_per_seed) if rounds]

    def seconds_P(record: Any) -> list[float]:
        seconds = _field(record, "seconds") or {}
        return [float(seconds.get(p, 0.0)) for p in phases]

    per_round = per_round_mean(runs, seconds_P)
    if per_round is None:
        return None
    totals = OverSeeds(np.array([np.sum([seconds_P(r) for r in rounds], axis=0) for rounds in runs]))
    return PhaseSeconds(phases=phases, per_round=per_round, totals=totals)
