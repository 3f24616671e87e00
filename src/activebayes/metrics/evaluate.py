"""The per-round evaluation record: every classification metric in one JSON-ready dict."""

from __future__ import annotations

import math
from typing import Any

import torch

from activebayes._validation import check_positive_int
from activebayes.metrics._core import (
    calibration_sums,
    confusion_counts,
    ece_from_sums,
    prf_from_confusion,
)
from activebayes.metrics._inputs import as_tensor, check_below, check_labels, check_same_length, to_log_probs
from activebayes.errors import InvalidArgumentError

__all__ = ["evaluate_classification"]


def _looks_like_predictions(values: object) -> bool:
    """Whether ``values`` has the shape of predictions, ``[N, C]`` or ``[N, K, C]`` (targets are ``[N]``)."""
    try:
        return (values if isinstance(values, torch.Tensor) else torch.as_tensor(values)).ndim in (2, 3)
    except (TypeError, ValueError, RuntimeError):
        return False


def evaluate_classification(
    predictions: object,
    targets: object,
    *,
    num_classes: int,
    num_bins: int = 15,
) -> dict[str, Any]:
    """Evaluate a predictive distribution: accuracy, P/R/F1 (macro, micro, weighted, per class),
    NLL, Brier, ECE and the confusion matrix, as plain Python floats / ints / lists.

    Args:
        predictions: ``log_probs_N_K_C`` ``[N, K, C]`` (averaged in probability
            space) or probabilities ``[N, C]``.
        targets: true class ids ``[N]``.
        num_classes: C; every class counts, absent ones included (0/0 gives 0.0,
            so the record stays JSON-serialisable).
        num_bins: ECE bins.

    Returns:
        dict with ``accuracy``, ``precision_macro`` / ``recall_macro`` / ``f1_macro``,
        the same for ``_micro`` and ``_weighted``, ``precision_per_class``,
        ``recall_per_class``, ``f1_per_class``, ``support_per_class`` (lists of C),
        ``nll``, ``brier``, ``ece``, ``confusion_matrix`` (C x C nested list, rows =
        truth), ``num_items``, ``num_classes``, and ``reliability``: a dict of
        ``count`` / ``conf_sum`` / ``correct_sum`` lists (``num_bins`` equal-width
        confidence bins: items, summed top-class confidence, summed correctness).

    Example:
        >>> record = evaluate_classification([[0.9, 0.1], [0.3, 0.7]], [0, 0], num_classes=2)
        >>> record["accuracy"], record["confusion_matrix"]
        (0.5, [[1, 1], [0, 0]])
    """
    num_classes = check_positive_int(num_classes, "num_classes")  # a NumPy int becomes an int: the record is JSON
    num_bins = check_positive_int(num_bins, "num_bins")
    pred_t = as_tensor(predictions, "predictions")
    if pred_t.ndim == 1 and _looks_like_predictions(targets):
        raise InvalidArgumentError(
            f"predictions must be probabilities [N, C] or log_probs_N_K_C [N, K, C], got shape {tuple(pred_t.shape)}, "
            "and targets look like predictions: the order is evaluate_classification(predictions, targets)"
        )
    targets_N = check_labels(targets, "targets")
    if pred_t.ndim not in (2, 3):
        raise InvalidArgumentError(
            "predictions must be probabilities [N, C] or log_probs_N_K_C [N, K, C], "
            f"got shape {tuple(pred_t.shape)}"
        )
    log_probs_N_C = to_log_probs(pred_t, "predictions")
    check_same_length(targets_N, log_probs_N_C, "targets", "predictions")
    if log_probs_N_C.shape[-1] != num_classes:
        raise InvalidArgumentError(f"num_classes={num_classes} but predictions have {log_probs_N_C.shape[-1]} classes")
    check_below(targets_N, "targets", num_classes, given=True)
    preds_N = log_probs_N_C.argmax(-1)
    cm = confusion_counts(preds_N, targets_N, num_classes)
    label_ids = torch.arange(num_classes)
    record: dict[str, Any] = {
        "num_items": int(targets_N.numel()),
        "num_classes": num_classes,
        "accuracy": float(cm.diagonal().sum()) / targets_N.numel(),
    }
    for average in ("macro", "micro", "weighted"):
        prf = prf_from_confusion(cm, label_ids, average=average, zero_division=0.0)
        record[f"precision_{average}"] = prf.precision
        record[f"recall_{average}"] = prf.recall
        record[f"f1_{average}"] = prf.f1
    per_class = prf_from_confusion(cm, label_ids, average="none", zero_division=0.0)
    record["precision_per_class"] = [float(v) for v in per_class.precision]
    record["recall_per_class"] = [float(v) for v in per_class.recall]
    record["f1_per_class"] = [float(v) for v in per_class.f1]
    record["support_per_class"] = [int(v) for v in per_class.support]
    sums = calibration_sums(log_probs_N_C, targets_N, num_bins)
    n = float(sums["n"])
    record["nll"] = float(sums["nll_sum"]) / n
    record["brier"] = float(sums["brier_sum"]) / n
    record["ece"] = ece_from_sums(sums["count_B"], sums["conf_sum_B"], sums["correct_sum_B"])
    record["confusion_matrix"] = cm.tolist()
    # reliability bins (for the report's reliability diagram): items, summed confidence and correct per bin
    record["reliability"] = {
        "count": [int(v) for v in sums["count_B"]],
        "conf_sum": [float(v) for v in sums["conf_sum_B"]],
        "correct_sum": [float(v) for v in sums["correct_sum_B"]],
    }
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in record.values())
    return record
