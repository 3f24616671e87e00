"""Confusion matrix, accuracy, precision, recall and F1 (scikit-learn's names and arguments).

Predictions may be labels ``[N]``, probabilities ``[N, C]`` or the Bayesian
``log_probs_N_K_C`` ``[N, K, C]`` (averaged in probability space, then argmax).
Which classes count (``labels`` / ``num_classes``) follows scikit-learn: see
:func:`activebayes.metrics._inputs.resolve_labels`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from activebayes._validation import check_choice
from activebayes.metrics._core import (
    AVERAGES,
    PrecisionRecallF1,
    confusion_counts,
    prf_from_confusion,
)
from activebayes.metrics._inputs import (
    check_below,
    check_labels,
    check_pos_label,
    check_same_length,
    check_zero_division,
    resolve_labels,
    to_labels,
)
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "PrecisionRecallF1",
    "accuracy_score",
    "confusion_matrix",
    "f1_score",
    "precision_recall_fscore_support",
    "precision_score",
    "recall_score",
]


def _prepare(targets, predictions, labels, num_classes):
    targets_N = check_labels(targets, "targets")
    preds_N, implied = to_labels(predictions, "predictions")
    check_same_length(targets_N, preds_N, "targets", "predictions")
    label_ids_L, size = resolve_labels(labels, num_classes, targets_N, preds_N, implied)
    return targets_N, preds_N, label_ids_L, size, implied


def confusion_matrix(
    targets: object,
    predictions: object,
    *,
    labels: Sequence[int] | None = None,
    num_classes: int | None = None,
    normalize: str | None = None,
) -> Tensor:
    """Confusion matrix ``cm[i, j]``: items of true class ``labels[i]`` predicted as ``labels[j]``.

    Args:
        targets: true class ids ``[N]``.
        predictions: labels ``[N]``, probabilities ``[N, C]`` or ``log_probs_N_K_C``.
        labels: class ids to index rows / columns (default: ``0..C-1`` when
            ``num_classes`` or probabilities give C, else the ids present).
        normalize: ``None`` (counts, int64), ``"true"`` (rows sum to 1),
            ``"pred"`` (columns sum to 1) or ``"all"`` (float64).

    Returns:
        ``[L, L]`` tensor.

    Example:
        >>> confusion_matrix([0, 1, 1], [0, 1, 0]).tolist()
        [[1, 0], [1, 1]]
    """
    if normalize is not None:
        check_choice(normalize, "normalize", ("true", "pred", "all"))
    targets_N, preds_N, label_ids_L, size, implied = _prepare(targets, predictions, labels, num_classes)
    cm = confusion_counts(preds_N, targets_N, size)[label_ids_L][:, label_ids_L]
    if normalize is None:
        return cm
    cm = cm.double()
    if normalize == "true":
        den = cm.sum(1, keepdim=True)
    elif normalize == "pred":
        den = cm.sum(0, keepdim=True)
    else:
        den = cm.sum()
    return (cm / den).nan_to_num(0.0)


def accuracy_score(
    targets: object, predictions: object, *, normalize: bool = True
) -> float:
    """Fraction (or number, ``normalize=False``) of items whose predicted label equals the target.

    ``accuracy = (1 / N) sum_n [yhat_n = y_n]``; for probabilities the prediction
    is the argmax of the (mean) predictive distribution.

    Example:
        >>> accuracy_score([0, 1, 1, 2], [0, 1, 0, 2])
        0.75
    """
    if not isinstance(normalize, bool):
        raise InvalidTypeError(f"normalize must be a bool, got {normalize!r}")
    targets_N = check_labels(targets, "targets")
    preds_N, num_classes = to_labels(predictions, "predictions")
    check_same_length(targets_N, preds_N, "targets", "predictions")
    if num_classes is not None:
        check_below(targets_N, "targets", num_classes, given=False)
    correct = int((preds_N == targets_N).sum())
    return correct / targets_N.numel() if normalize else float(correct)


def precision_recall_fscore_support(
    targets: object,
    predictions: object,
    *,
    average: str | None = None,
    labels: Sequence[int] | None = None,
    num_classes: int | None = None,
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> PrecisionRecallF1:
    """Precision, recall and F1 together (one confusion matrix); see :func:`precision_score`.

    Returns a :class:`PrecisionRecallF1` with floats, or ``[L]`` tensors and the
    support for ``average=None``.
    """
    average_key = "none" if average is None else check_choice(average, "average", AVERAGES[:-1])
    zero_division = check_zero_division(zero_division)
    pos_label = check_pos_label(pos_label)
    targets_N, preds_N, label_ids_L, size, implied = _prepare(targets, predictions, labels, num_classes)
    if average_key == "binary":
        # scikit-learn: the data must be binary; only ``pos_label`` is reported.
        present = torch.cat([targets_N, preds_N]).unique().tolist()
        declared = num_classes if num_classes is not None else (implied or 0)
        if len(present) > 2 or declared > 2:
            raise InvalidArgumentError(
                f"average='binary' needs binary data, got classes {present} "
                f"(num_classes={num_classes}); choose average='macro', 'micro', 'weighted' or None"
            )
        if pos_label not in present and len(present) == 2:
            raise InvalidArgumentError(f"pos_label={pos_label} is not a valid label; the classes are {present}")
        label_ids_L = torch.tensor([pos_label])
        size = max(size, pos_label + 1)
    cm = confusion_counts(preds_N, targets_N, size)
    return prf_from_confusion(
        cm, label_ids_L, average=average_key, zero_division=zero_division, pos_label=pos_label
    )


_PRF_DOC = """{title}

    Per class ``c`` (one-vs-rest): ``{formula}``; 0/0 gives ``zero_division``.

    Args:
        targets: true class ids ``[N]`` (tensor, NumPy array or list).
        predictions: labels ``[N]``, probabilities ``[N, C]`` or ``log_probs_N_K_C``
            ``[N, K, C]`` (mean in probability space, then argmax).
        average: ``"binary"`` (class ``pos_label`` only), ``"macro"`` (unweighted
            mean of per-class values), ``"weighted"`` (mean weighted by support),
            ``"micro"`` (from the pooled counts; equals accuracy for single-label
            multiclass), or ``None`` (per-class ``[L]`` tensor).
        labels: class ids to include, in order (scikit-learn's ``labels``).
        num_classes: include ``0..C-1`` even when absent (as ``labels=range(C)``).
        pos_label: the positive class for ``average="binary"``.
        zero_division: value for 0/0: 0, 1 or nan (nan is skipped by averages).

    Example:
        >>> round({name}([0, 1, 0, 1, 0, 1, 1, 0], [0, 1, 0, 0, 1, 1, 0, 0], average="macro"), 4)
        {example}
    """


def precision_score(
    targets: object,
    predictions: object,
    *,
    average: str | None = "binary",
    labels: Sequence[int] | None = None,
    num_classes: int | None = None,
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> float | Tensor:
    return precision_recall_fscore_support(
        targets, predictions, average=average, labels=labels, num_classes=num_classes,
        pos_label=pos_label, zero_division=zero_division,
    ).precision


def recall_score(
    targets: object,
    predictions: object,
    *,
    average: str | None = "binary",
    labels: Sequence[int] | None = None,
    num_classes: int | None = None,
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> float | Tensor:
    return precision_recall_fscore_support(
        targets, predictions, average=average, labels=labels, num_classes=num_classes,
        pos_label=pos_label, zero_division=zero_division,
    ).recall


def f1_score(
    targets: object,
    predictions: object,
    *,
    average: str | None = "binary",
    labels: Sequence[int] | None = None,
    num_classes: int | None = None,
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> float | Tensor:
    return precision_recall_fscore_support(
        targets, predictions, average=average, labels=labels, num_classes=num_classes,
        pos_label=pos_label, zero_division=zero_division,
    ).f1


precision_score.__doc__ = _PRF_DOC.format(
    title="Precision ``TP / (TP + FP)``: of the items predicted as the class, the fraction that are.",
    formula="P_c = TP_c / (TP_c + FP_c)", name="precision_score", example="0.6333",
)
recall_score.__doc__ = _PRF_DOC.format(
    title="Recall ``TP / (TP + FN)``: of the items of the class, the fraction predicted as it.",
    formula="R_c = TP_c / (TP_c + FN_c)", name="recall_score", example="0.625",
)
f1_score.__doc__ = _PRF_DOC.format(
    title="F1, the harmonic mean of precision and recall, per class then averaged.\n\n"
    "    Macro-F1 is the mean of per-class F1 (0.6190 in the example), which is not the\n"
    "    harmonic mean of macro-precision and macro-recall (0.6291); see docs/metrics.md.",
    formula="F1_c = 2 TP_c / (2 TP_c + FP_c + FN_c)", name="f1_score", example="0.619",
)
