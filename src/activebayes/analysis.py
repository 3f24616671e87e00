"""Learning-curve analysis: labels needed to reach an accuracy, area under the curve, seeds.

A learning curve is one run's test accuracy after each round against the number
of labels the round's model was trained on: ``n_labelled_R`` (non-decreasing
ints) and ``accuracy_R`` (floats in ``[0, 1]``), one entry per round ``R``.
A strategy run with several seeds ``S`` has one curve per seed. Everything here
is a pure NumPy (float64) function of those arrays; the report
(:mod:`activebayes.report`) and the label-efficiency benchmark build on it.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "LearningCurve",
    "ReachSummary",
    "StrategySummary",
    "area_under_learning_curve",
    "labels_to_reach",
    "learning_curves_from_runs",
    "mean_learning_curve",
    "MeanCurve",
    "summarise_runs",
    "summarise_strategy",
]

CurveLike = Any  # LearningCurve or a (n_labelled_R, accuracy_R) pair


# --------------------------------------------------------------------------- validation


def _check_curve(n_labelled_R: object, accuracy_R: object) -> tuple[np.ndarray, np.ndarray]:
    n_R = np.asarray(n_labelled_R)
    acc_R = np.asarray(accuracy_R, dtype=np.float64)
    if n_R.ndim != 1:
        raise ValueError(f"n_labelled_R must be 1-D [R] (one label count per round), got shape {n_R.shape}")
    if acc_R.ndim != 1:
        raise ValueError(f"accuracy_R must be 1-D [R] (one accuracy per round), got shape {acc_R.shape}")
    if n_R.shape != acc_R.shape:
        raise ValueError(
            f"n_labelled_R and accuracy_R must have the same length, got {n_R.shape[0]} and {acc_R.shape[0]}"
        )
    if n_R.size == 0:
        raise ValueError("n_labelled_R is empty: a learning curve needs at least one round")
    if n_R.dtype.kind not in "iuf":
        raise TypeError(f"n_labelled_R must hold numbers, got dtype {n_R.dtype}")
    n_R = n_R.astype(np.float64)
    if not np.all(np.isfinite(n_R)) or np.any(n_R < 0):
        raise ValueError(f"n_labelled_R must hold finite counts >= 0, got {n_R.tolist()}")
    if np.any(np.diff(n_R) < 0):
        raise ValueError(f"n_labelled_R must be non-decreasing (rounds in order), got {n_R.tolist()}")
    if not np.all(np.isfinite(acc_R)):
        raise ValueError(f"accuracy_R must be finite, got {acc_R.tolist()}")
    return n_R, acc_R


def _check_target(target: object, name: str = "target") -> float:
    if isinstance(target, bool) or not isinstance(target, int | float | np.floating | np.integer):
        raise TypeError(f"{name} must be a number in (0, 1], got {target!r}")
    value = float(target)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"{name} must be an accuracy in (0, 1], got {target!r}")
    return value


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
        raise TypeError(f"normalise must be a bool, got {normalise!r}")
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
        raise TypeError(
            f"curves[{index}] must be a LearningCurve or a (n_labelled_R, accuracy_R) pair, "
            f"got {type(curve).__name__}"
        ) from None
    return _check_curve(n_R, acc_R)


def learning_curves_from_runs(
    runs: Mapping[tuple[str, int], tuple[Any, Sequence[Any]]],
    *,
    metric: str | None = None,
) -> dict[str, list[LearningCurve]]:
    """Learning curves per strategy from :func:`activebayes.experiment.load_runs` output.

    Args:
        runs: ``(strategy, seed) -> (LoopConfig, [RoundRecord])``. Round records may
            also be plain dicts as stored in ``rounds.jsonl``.
        metric: the accuracy key in each round's ``metrics``; default
            ``"test_accuracy"`` when the runs have it, else ``"validation_accuracy"``.

    Returns:
        ``strategy -> [LearningCurve]`` sorted by seed, strategies in first-seen
        order. Rounds without the metric are left out; runs with no such round
        are left out entirely.

    Example:
        >>> from types import SimpleNamespace as R
        >>> runs = {("bald", 0): (None, [R(n_labelled=20, metrics={"test_accuracy": 0.5}),
        ...                              R(n_labelled=30, metrics={"test_accuracy": 0.7})])}
        >>> learning_curves_from_runs(runs)["bald"][0].accuracy_R.tolist()
        [0.5, 0.7]
    """
    if not isinstance(runs, Mapping):
        raise TypeError(f"runs must be a mapping (strategy, seed) -> (config, rounds), got {type(runs).__name__}")
    records = {key: [_record_fields(r) for r in value[1]] for key, value in runs.items()}
    if metric is None:
        has_test = any("test_accuracy" in m for rounds in records.values() for _, m in rounds)
        metric = "test_accuracy" if has_test else "validation_accuracy"
    out: dict[str, list[LearningCurve]] = {}
    for (strategy, seed), rounds in records.items():
        points = [(n, m[metric]) for n, m in rounds if m.get(metric) is not None]
        out.setdefault(strategy, [])
        if points:
            n_R, acc_R = zip(*points, strict=True)
            out[strategy].append(LearningCurve(strategy, int(seed), np.asarray(n_R), np.asarray(acc_R), metric))
    return {s: sorted(c, key=lambda curve: curve.seed) for s, c in out.items() if c}


def _record_fields(record: Any) -> tuple[int, Mapping[str, Any]]:
    if isinstance(record, Mapping):
        return int(record["n_labelled"]), record.get("metrics") or {}
    return int(record.n_labelled), record.metrics or {}


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
            raise ValueError("values_S is empty: need at least one seed")
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
    targets: Iterable[float] = (0.9, 0.95),
    strategy: str | None = None,
) -> StrategySummary:
    """Summarise one strategy's curves (one per seed).

    Labels to reach each target: median, interquartile range (25th-75th
    percentile) and min / max over seeds, "not reached" treated as censored (see
    :class:`ReachSummary`); AULC (normalised, see
    :func:`area_under_learning_curve`) mean and std; final accuracy mean and std.

    Args:
        curves: ``[S]`` :class:`LearningCurve` objects or ``(n_labelled_R, accuracy_R)`` pairs.
        targets: accuracies in ``(0, 1]``.
        strategy: name to store (default: the curves' own, or ``""``).

    Example:
        >>> s = summarise_strategy([([10, 20], [0.8, 0.9]), ([10, 20], [0.9, 0.95])], targets=[0.9])
        >>> s.reach[0.9].median, s.aulc_mean
        (15.0, 0.8875)
    """
    if isinstance(curves, LearningCurve) or not isinstance(curves, Sequence) or len(curves) == 0:
        raise ValueError("curves must be a non-empty sequence of learning curves (one per seed)")
    pairs = [_as_pair(curve, i) for i, curve in enumerate(curves)]
    target_list = [_check_target(t, "targets") for t in targets]
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
    targets: Iterable[float] = (0.9, 0.95),
    metric: str | None = None,
) -> dict[str, StrategySummary]:
    """:func:`summarise_strategy` for every strategy of :func:`~activebayes.experiment.load_runs` output."""
    targets = tuple(targets)
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
        raise ValueError("curves must be a non-empty sequence of learning curves (one per seed)")
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
