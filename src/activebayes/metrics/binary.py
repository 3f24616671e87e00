"""Binary classification: ROC / PR curves, AUROC, AUPRC, threshold sweep,
a chosen-threshold confusion matrix, and the positive-class weight for imbalance.

Scores are any real numbers where larger means "more positive" (probabilities of
class 1, logits, ...). An item is predicted positive when ``score >= threshold``
(scikit-learn's and seed 002's convention). Two-class probabilities ``[N, 2]``
or ``log_probs_N_K_C`` with C = 2 are accepted too: the score is then the
(mean) probability of ``pos_label``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import torch
from torch import Tensor

from activebayes._validation import check_choice, check_finite, check_positive_int
from activebayes.metrics._core import safe_divide
from activebayes.metrics._inputs import (
    as_tensor,
    check_labels,
    check_pos_label,
    check_same_length,
    check_zero_division,
    to_probs,
)
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "BinaryConfusion",
    "PrecisionRecallCurve",
    "RocCurve",
    "ThresholdSweep",
    "average_precision_score",
    "binary_confusion_matrix",
    "positive_class_weight",
    "precision_recall_curve",
    "roc_auc_score",
    "roc_curve",
    "threshold_sweep",
]


class _Unpackable:
    """Dataclass mixin: ``a, b, c = result`` unpacks the fields in order (like scikit-learn's tuples)."""

    def __iter__(self) -> Iterator[Tensor]:
        return iter(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]


@dataclass(frozen=True, eq=False)  # holds tensors / arrays: no elementwise ==
class RocCurve(_Unpackable):
    """ROC curve: false / true positive rates at decreasing thresholds (``thresholds[0] = inf``)."""

    fpr: Tensor
    tpr: Tensor
    thresholds: Tensor


@dataclass(frozen=True, eq=False)  # holds tensors / arrays: no elementwise ==
class PrecisionRecallCurve(_Unpackable):
    """PR curve at increasing thresholds; the last point is (recall 0, precision 1) with no threshold."""

    precision: Tensor
    recall: Tensor
    thresholds: Tensor


# --------------------------------------------------------------------------- inputs
def _binary_inputs(targets: object, scores: object, pos_label: int) -> tuple[Tensor, Tensor]:
    """``is_positive_N`` (bool) and float64 ``scores_N``."""
    pos_label = check_pos_label(pos_label)
    targets_N = check_labels(targets, "targets")
    scores_t = as_tensor(scores, "scores")
    if scores_t.ndim == 1:
        if not scores_t.is_floating_point():
            scores_t = scores_t.double()
        check_finite(scores_t, "scores")
        scores_N = scores_t.double()
    elif scores_t.ndim in (2, 3):
        probs_N_C = to_probs(scores_t, "scores")
        if probs_N_C.shape[-1] != 2:
            raise InvalidArgumentError(
                f"scores must be 1-D scores or two-class probabilities, got {probs_N_C.shape[-1]} classes"
            )
        check_pos_label(pos_label, 2)
        scores_N = probs_N_C[:, pos_label]
    else:
        raise InvalidArgumentError(f"scores must be [N] scores, got shape {tuple(scores_t.shape)}")
    check_same_length(targets_N, scores_N, "targets", "scores")
    present = targets_N.unique().tolist()
    if len(present) > 2 or (len(present) == 2 and pos_label not in present):
        raise InvalidArgumentError(
            f"targets must be binary with pos_label={pos_label} among them, got classes {present}"
        )
    return targets_N == pos_label, scores_N


def _clf_curve(is_pos_N: Tensor, scores_N: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Cumulative false / true positives at each distinct score, from the highest down."""
    order = torch.argsort(scores_N, descending=True, stable=True)
    scores_sorted = scores_N[order]
    pos_sorted = is_pos_N[order].double()
    distinct = torch.nonzero(scores_sorted[1:] != scores_sorted[:-1]).flatten()
    last = torch.cat([distinct, torch.tensor([scores_N.numel() - 1])])
    tps = pos_sorted.cumsum(0)[last]
    fps = (last + 1).double() - tps
    return fps, tps, scores_sorted[last]


# --------------------------------------------------------------------------- curves
def roc_curve(
    targets: object,
    scores: object,
    *,
    pos_label: int = 1,
    drop_intermediate: bool = True,
) -> RocCurve:
    """Receiver operating characteristic: ``TPR = TP / P`` against ``FPR = FP / N_neg``.

    One point per distinct score (positive iff ``score >= threshold``), plus
    (0, 0) at ``threshold = inf``. ``drop_intermediate`` drops points on a
    straight segment (same curve, fewer points), as scikit-learn does.

    Example:
        >>> fpr, tpr, thresholds = roc_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        >>> tpr.tolist()
        [0.0, 0.5, 0.5, 1.0, 1.0]
    """
    is_pos_N, scores_N = _binary_inputs(targets, scores, pos_label)
    fps, tps, thresholds = _clf_curve(is_pos_N, scores_N)
    if drop_intermediate and fps.numel() > 2:
        bend = (fps.diff(n=2) != 0) | (tps.diff(n=2) != 0)
        keep = torch.cat([torch.tensor([True]), bend, torch.tensor([True])])
        fps, tps, thresholds = fps[keep], tps[keep], thresholds[keep]
    zero = torch.zeros(1, dtype=torch.float64)
    fps, tps = torch.cat([zero, fps]), torch.cat([zero, tps])
    thresholds = torch.cat([torch.tensor([math.inf], dtype=torch.float64), thresholds])
    for count, rate, missing in ((fps, "fpr", "negative"), (tps, "tpr", "positive")):
        if not count[-1] > 0:  # scikit-learn's values, and as it does, a word: the curve is undefined
            warnings.warn(f"roc_curve: targets hold no {missing} item, so {rate} is undefined (NaN)",
                          UserWarning, stacklevel=2)
    fpr = fps / fps[-1] if fps[-1] > 0 else torch.full_like(fps, math.nan)
    tpr = tps / tps[-1] if tps[-1] > 0 else torch.full_like(tps, math.nan)
    return RocCurve(fpr=fpr, tpr=tpr, thresholds=thresholds)


def precision_recall_curve(
    targets: object,
    scores: object,
    *,
    pos_label: int = 1,
) -> PrecisionRecallCurve:
    """Precision ``TP / (TP + FP)`` and recall ``TP / P`` at every distinct score.

    Ordered by increasing threshold; a final point (precision 1, recall 0) has no
    threshold (scikit-learn's convention). Without positives recall is 1.

    Example:
        >>> curve = precision_recall_curve([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
        >>> [round(p, 4) for p in curve.precision.tolist()]
        [0.5, 0.6667, 0.5, 1.0, 1.0]
    """
    is_pos_N, scores_N = _binary_inputs(targets, scores, pos_label)
    fps, tps, thresholds = _clf_curve(is_pos_N, scores_N)
    precision = safe_divide(tps, tps + fps, 0.0)
    if not tps[-1] > 0:
        warnings.warn("precision_recall_curve: targets hold no positive item, so recall is undefined (1 by "
                      "convention)", UserWarning, stacklevel=2)
    recall = tps / tps[-1] if tps[-1] > 0 else torch.ones_like(tps)
    one, zero = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    return PrecisionRecallCurve(
        precision=torch.cat([precision.flip(0), one]),
        recall=torch.cat([recall.flip(0), zero]),
        thresholds=thresholds.flip(0),
    )


def _one_vs_rest(
    targets: object, scores: object, average: str | None, num_classes: int | None, binary_fn, what: str
) -> float | Tensor:
    targets_N = check_labels(targets, "targets")
    probs_N_C = to_probs(scores, "scores")
    C = probs_N_C.shape[-1]
    if num_classes is not None and check_positive_int(num_classes, "num_classes") != C:
        raise InvalidArgumentError(f"num_classes={num_classes} but scores have {C} classes")
    check_same_length(targets_N, probs_N_C, "targets", "scores")
    if int(targets_N.max()) >= C:
        raise InvalidArgumentError(f"targets must be < {C} (the number of score columns), got {int(targets_N.max())}")
    support_C = torch.bincount(targets_N, minlength=C)
    absent = (support_C == 0).nonzero().flatten().tolist()
    if absent:
        raise InvalidArgumentError(f"{what} is undefined for classes absent from targets: {absent}")
    values_C = torch.stack(
        [binary_fn(probs_N_C[:, c], (targets_N == c).long()).double() for c in range(C)]
    )
    if average is None:
        return values_C
    check_choice(average, "average", ("macro", "weighted"))
    if average == "macro":
        return float(values_C.mean())
    return float((values_C * support_C).sum() / support_C.sum())


def roc_auc_score(
    targets: object,
    scores: object,
    *,
    average: str | None = "macro",
    num_classes: int | None = None,
    pos_label: int = 1,
) -> float | Tensor:
    """Area under the ROC curve (AUROC): ``P(score of a positive > score of a negative)``.

    Binary: ``scores`` ``[N]``. Multiclass: probabilities ``[N, C]`` or
    ``log_probs_N_K_C``; one-vs-rest AUROC per class, averaged (``"macro"``,
    ``"weighted"`` by prevalence, ``None`` per class). Area computed by
    torchmetrics (trapezoidal rule, ties count one half).

    Example:
        >>> round(roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
        0.75
    """
    from torchmetrics.functional.classification import binary_auroc  # lazy (imports matplotlib)

    check_pos_label(pos_label)  # also where it goes unused (probabilities: one-vs-rest over every class)
    scores_t = as_tensor(scores, "scores")
    if scores_t.ndim == 1:
        is_pos_N, scores_N = _binary_inputs(targets, scores_t, pos_label)
        if bool(is_pos_N.all()) or not bool(is_pos_N.any()):
            raise InvalidArgumentError("roc_auc_score is undefined when targets hold only one class")
        return float(binary_auroc(scores_N, is_pos_N.long(), validate_args=False))
    return _one_vs_rest(
        targets, scores_t, average, num_classes,
        lambda s, t: binary_auroc(s, t, validate_args=False), "roc_auc_score",
    )


def average_precision_score(
    targets: object,
    scores: object,
    *,
    average: str | None = "macro",
    num_classes: int | None = None,
    pos_label: int = 1,
) -> float | Tensor:
    """Average precision (area under the PR curve as a step function).

    ``AP = sum_n (R_n - R_{n-1}) P_n`` over thresholds (no interpolation), as
    scikit-learn; computed by torchmetrics. Binary for ``[N]`` scores; one-vs-rest
    per class for ``[N, C]`` probabilities (averaged like :func:`roc_auc_score`).

    Example:
        >>> round(average_precision_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
        0.8333
    """
    from torchmetrics.functional.classification import binary_average_precision  # lazy

    check_pos_label(pos_label)  # also where it goes unused (probabilities: one-vs-rest over every class)
    scores_t = as_tensor(scores, "scores")
    if scores_t.ndim == 1:
        is_pos_N, scores_N = _binary_inputs(targets, scores_t, pos_label)
        if not bool(is_pos_N.any()):
            raise InvalidArgumentError("average_precision_score is undefined without positive targets")
        return float(binary_average_precision(scores_N, is_pos_N.long(), validate_args=False))
    return _one_vs_rest(
        targets, scores_t, average, num_classes,
        lambda s, t: binary_average_precision(s, t, validate_args=False), "average_precision_score",
    )


# --------------------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class BinaryConfusion:
    """A 2 x 2 confusion matrix ``[[TN, FP], [FN, TP]]`` and the rates read from it.

    Example (seed 002's validation set at threshold 0.5):
        >>> cm = BinaryConfusion.from_matrix([[7, 2], [1, 10]])
        >>> round(cm.precision, 4), round(cm.recall, 4), round(cm.fpr, 4)
        (0.8333, 0.9091, 0.2222)
    """

    tn: int
    fp: int
    fn: int
    tp: int
    threshold: float = math.nan

    @classmethod
    def from_matrix(cls, matrix: object, *, threshold: float = math.nan) -> BinaryConfusion:
        cm = as_tensor(matrix, "matrix")
        if tuple(cm.shape) != (2, 2):
            raise InvalidArgumentError(f"matrix must be 2 x 2 [[TN, FP], [FN, TP]], got shape {tuple(cm.shape)}")
        (tn, fp), (fn, tp) = cm.long().tolist()
        return cls(tn=tn, fp=fp, fn=fn, tp=tp, threshold=threshold)

    @property
    def matrix(self) -> Tensor:
        return torch.tensor([[self.tn, self.fp], [self.fn, self.tp]])

    def _div(self, a: int, b: int) -> float:
        return a / b if b else 0.0

    @property
    def precision(self) -> float:
        """``TP / (TP + FP)`` (0 when nothing is predicted positive)."""
        return self._div(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float:
        """``TP / (TP + FN)``, the true positive rate."""
        return self._div(self.tp, self.tp + self.fn)

    tpr = recall

    @property
    def fpr(self) -> float:
        """``FP / (FP + TN)``."""
        return self._div(self.fp, self.fp + self.tn)

    @property
    def tnr(self) -> float:
        """``TN / (TN + FP)``, the specificity."""
        return self._div(self.tn, self.tn + self.fp)

    @property
    def f1(self) -> float:
        return self._div(2 * self.tp, 2 * self.tp + self.fp + self.fn)

    @property
    def accuracy(self) -> float:
        return self._div(self.tp + self.tn, self.tp + self.tn + self.fp + self.fn)


def binary_confusion_matrix(
    targets: object, scores: object, *, threshold: float = 0.5, pos_label: int = 1
) -> BinaryConfusion:
    """Confusion matrix of the decision ``score >= threshold``.

    Example:
        >>> binary_confusion_matrix([0, 1, 1], [0.2, 0.6, 0.4], threshold=0.5).matrix.tolist()
        [[1, 0], [1, 1]]
    """
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):  # NumPy floats are real numbers
        raise InvalidTypeError(f"threshold must be a real number, got {type(threshold).__name__} {threshold!r}")
    if math.isnan(threshold):
        raise InvalidArgumentError("threshold must be a number, got nan (no score is >= nan: every item negative)")
    is_pos_N, scores_N = _binary_inputs(targets, scores, pos_label)
    pred_pos_N = scores_N >= threshold
    tp = int((pred_pos_N & is_pos_N).sum())
    fp = int((pred_pos_N & ~is_pos_N).sum())
    fn = int((~pred_pos_N & is_pos_N).sum())
    tn = int((~pred_pos_N & ~is_pos_N).sum())
    return BinaryConfusion(tn=tn, fp=fp, fn=fn, tp=tp, threshold=float(threshold))


@dataclass(frozen=True, eq=False)  # holds tensors / arrays: no elementwise ==
class ThresholdSweep:
    """Binary metrics at each threshold (all tensors ``[T]``, thresholds increasing)."""

    thresholds: Tensor
    tp: Tensor
    fp: Tensor
    tn: Tensor
    fn: Tensor
    precision: Tensor
    recall: Tensor
    f1: Tensor
    tpr: Tensor
    fpr: Tensor

    def best(self, metric: str = "f1") -> BinaryConfusion:
        """The confusion matrix at the threshold maximising ``metric`` (first on ties).

        ``metric``: "f1", "precision", "recall", "youden" (``TPR - FPR``) or "accuracy".
        """
        check_choice(metric, "metric", ("f1", "precision", "recall", "youden", "accuracy"))
        if metric == "youden":
            values = self.tpr - self.fpr
        elif metric == "accuracy":
            values = (self.tp + self.tn).double() / (self.tp + self.tn + self.fp + self.fn)
        else:
            values = getattr(self, metric)
        i = int(torch.nan_to_num(values, nan=-math.inf).argmax())
        return BinaryConfusion(
            tn=int(self.tn[i]), fp=int(self.fp[i]), fn=int(self.fn[i]), tp=int(self.tp[i]),
            threshold=float(self.thresholds[i]),
        )


def threshold_sweep(
    targets: object,
    scores: object,
    *,
    thresholds: int | Sequence[float] | Tensor | None = None,
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> ThresholdSweep:
    """Precision, recall, F1, TPR and FPR of ``score >= t`` for every threshold ``t``.

    Args:
        thresholds: ``None``: every distinct score; an int ``T``: ``T`` evenly
            spaced values in [0, 1]; or explicit values.
        zero_division: precision when nothing is predicted positive (and rates
            with an empty denominator).

    Example:
        >>> sweep = threshold_sweep([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], thresholds=[0.3, 0.5])
        >>> sweep.recall.tolist(), sweep.fpr.tolist()
        ([1.0, 0.5], [0.5, 0.0])
    """
    zero_division = check_zero_division(zero_division)
    is_pos_N, scores_N = _binary_inputs(targets, scores, pos_label)
    if thresholds is None:
        thresholds_T = scores_N.unique(sorted=True)
    elif isinstance(thresholds, int) and not isinstance(thresholds, bool):
        if thresholds < 2:
            raise InvalidArgumentError(f"thresholds as an int must be >= 2, got {thresholds}")
        thresholds_T = torch.linspace(0, 1, thresholds, dtype=torch.float64)
    else:
        thresholds_T = as_tensor(thresholds, "thresholds").double().flatten()
        check_finite(thresholds_T, "thresholds")
        if thresholds_T.numel() == 0:
            raise InvalidArgumentError("thresholds must not be empty")
        thresholds_T = thresholds_T.sort().values
    pos_sorted = scores_N[is_pos_N].sort().values
    neg_sorted = scores_N[~is_pos_N].sort().values
    # number of scores >= t = total - number of scores < t
    tp = pos_sorted.numel() - torch.searchsorted(pos_sorted, thresholds_T, right=False)
    fp = neg_sorted.numel() - torch.searchsorted(neg_sorted, thresholds_T, right=False)
    fn = pos_sorted.numel() - tp
    tn = neg_sorted.numel() - fp
    return ThresholdSweep(
        thresholds=thresholds_T,
        tp=tp, fp=fp, tn=tn, fn=fn,
        precision=safe_divide(tp, tp + fp, zero_division),
        recall=safe_divide(tp, tp + fn, zero_division),
        f1=safe_divide(2 * tp, 2 * tp + fp + fn, zero_division),
        tpr=safe_divide(tp, tp + fn, zero_division),
        fpr=safe_divide(fp, fp + tn, zero_division),
    )


# --------------------------------------------------------------------------- imbalance
def positive_class_weight(targets: object) -> Tensor:
    """``pos_weight`` for ``torch.nn.BCEWithLogitsLoss``: negatives / positives per label.

    With it, the positives' share of the loss equals the negatives' (seed 002):
    ``loss = -mean[w y log s(z) + (1 - y) log(1 - s(z))]`` with ``w = n_neg / n_pos``.

    Args:
        targets: 0/1 targets ``[N]`` (returns shape ``[1]``) or multi-label ``[N, L]``
            (returns ``[L]``).

    Example:
        >>> positive_class_weight([1, 0, 0, 0])
        tensor([3.])
    """
    targets_t = as_tensor(targets, "targets")
    if targets_t.ndim not in (1, 2) or targets_t.numel() == 0:
        raise InvalidArgumentError(f"targets must be non-empty [N] or [N, L], got shape {tuple(targets_t.shape)}")
    check_finite(targets_t.double(), "targets")
    if not bool(((targets_t == 0) | (targets_t == 1)).all()):
        raise InvalidArgumentError("targets must hold only 0 and 1")
    targets_N_L = targets_t.double().reshape(targets_t.shape[0], -1)
    n_pos_L = targets_N_L.sum(0)
    if bool((n_pos_L == 0).any()):
        raise InvalidArgumentError(
            f"positive_class_weight needs at least one positive per label; labels without: "
            f"{(n_pos_L == 0).nonzero().flatten().tolist()}"
        )
    n_neg_L = targets_N_L.shape[0] - n_pos_L
    return (n_neg_L / n_pos_L).to(torch.get_default_dtype())
