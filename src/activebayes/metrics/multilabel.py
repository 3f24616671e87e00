"""Multi-label (per-label binary) metrics with an ignore mask for padded positions.

Targets are 0/1 indicators ``[..., L]`` (e.g. ``[N, L]`` or, for sequences,
``[B, T, L]``); predictions the same shape, as 0/1 or probabilities (thresholded
at ``threshold``). ``mask`` marks valid positions (True = counted); it has the
targets' shape or the shape without the label axis (``[B, T]`` for padded
sequences, broadcast over labels). Masked positions count nowhere: not as true
negatives either (seed 001's last question subtracts them by hand; here they
never enter).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import torch

from activebayes._validation import check_choice, check_finite
from activebayes.metrics._core import PrecisionRecallF1, prf_from_counts
from activebayes.metrics._inputs import (
    as_tensor,
    check_labels,
    check_same_length,
    check_zero_division,
    to_labels,
)
from activebayes.errors import InvalidArgumentError
from activebayes.metrics.predictive import predictive_probs

__all__ = ["DECISION_THRESHOLD", "DECISION_TOLERANCE", "MULTILABEL_HEADLINE", "evaluate_multilabel", "hamming_loss", "label_decisions",
           "multilabel_precision_recall_f1"]

#: a label is predicted when its probability is at least this (the evaluation's default ``threshold``)
DECISION_THRESHOLD = 0.5


#: a probability this little below the threshold counts as on it: the predictive mean is taken in
#: log space (and often stored as float32), so an exact 1/2 (5 of 10 members, samples 0.3 and 0.7)
#: comes back a rounding error low
DECISION_TOLERANCE = 1e-6


def label_decisions(probs: torch.Tensor | Sequence[float], threshold: float = DECISION_THRESHOLD) -> torch.Tensor:
    r"""The label decisions :math:`\hat y_c = [\bar p(y_c = 1) \ge 1/2]` as a bool tensor of ``probs``' shape.

    The one decision rule of multi-label runs: the evaluation, the loop's audit, the stopping signals,
    BADGE's label-vector embedding, training's validation F1 and the labelling app all use it, so they
    agree on a probability of exactly one half. A probability within :data:`DECISION_TOLERANCE` below
    ``threshold`` is on it (rounding of the log-space mean). ``probs``: a tensor, or a list of floats.

    >>> label_decisions(torch.tensor([0.2, 0.5, 0.9])).tolist()
    [False, True, True]
    """
    probs = torch.as_tensor(probs)
    return probs >= threshold - DECISION_TOLERANCE


def _shape(tensor: torch.Tensor) -> str:
    return "[" + ", ".join(str(d) for d in tensor.shape) + "]"


def _check_threshold(threshold: object) -> float:
    """A finite number strictly between 0 and 1 (a class is predicted when ``p >= threshold``)."""
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real):  # NumPy's float32 too
        raise InvalidArgumentError(f"threshold must be a number in (0, 1), got {threshold!r}")
    value = float(threshold)
    if not 0.0 < value < 1.0:  # also refuses nan and inf
        raise InvalidArgumentError(f"threshold must be a finite number in (0, 1) (a class is predicted when "
                                   f"p >= threshold), got {threshold!r}")
    return value


def _indicators(targets: object, predictions: object, mask: object | None, threshold: float,
                predictions_name: str = "predictions", targets_name: str = "targets"):
    """``(targets, predictions, valid)`` as bool tensors of one shape ``[..., L]``."""
    threshold = _check_threshold(threshold)
    targets_t = as_tensor(targets, targets_name)
    preds_t = as_tensor(predictions, predictions_name)
    if targets_t.ndim < 2:
        raise InvalidArgumentError(f"multi-label {targets_name} must be [..., L] 0/1 indicators, got shape "
                                   f"{tuple(targets_t.shape)}")
    if preds_t.shape != targets_t.shape:
        raise InvalidArgumentError(
            f"{predictions_name} {_shape(preds_t)} and {targets_name} {_shape(targets_t)} disagree in shape: "
            "multi-label predictions need one entry per target [..., L]"
        )
    if targets_t.numel() == 0:
        raise InvalidArgumentError(f"{targets_name} is empty")
    check_finite(targets_t.double(), targets_name)
    if not bool(((targets_t == 0) | (targets_t == 1)).all()):
        raise InvalidArgumentError(f"multi-label {targets_name} must hold only 0 and 1")
    if preds_t.is_floating_point():
        check_finite(preds_t, "predictions")
        if float(preds_t.min()) < 0 or float(preds_t.max()) > 1:
            raise InvalidArgumentError(
                "multi-label predictions must be 0/1 or probabilities in [0, 1]; apply torch.sigmoid to logits"
            )
        preds_b = label_decisions(preds_t, threshold)
    else:
        if not bool(((preds_t == 0) | (preds_t == 1)).all()):
            raise InvalidArgumentError("integer multi-label predictions must hold only 0 and 1")
        preds_b = preds_t.bool()
    if mask is None:
        valid = targets_t.new_ones(targets_t.shape, dtype=bool)
    else:
        mask_t = as_tensor(mask, "mask")
        if mask_t.shape == targets_t.shape[:-1]:
            mask_t = mask_t.unsqueeze(-1)
        elif mask_t.shape != targets_t.shape:
            raise InvalidArgumentError(
                f"mask must have shape {tuple(targets_t.shape)} or {tuple(targets_t.shape[:-1])}, "
                f"got {tuple(mask_t.shape)}"
            )
        if not bool(((mask_t == 0) | (mask_t == 1)).all()):
            raise InvalidArgumentError("mask must be boolean (True / 1 = valid position, False / 0 = padding)")
        valid = mask_t.bool().expand(targets_t.shape)
        if not bool(valid.any()):
            raise InvalidArgumentError("mask leaves no valid position")
    return targets_t.bool(), preds_b, valid


def hamming_loss(
    targets: object,
    predictions: object,
    *,
    mask: object | None = None,
    threshold: float = DECISION_THRESHOLD,
) -> float:
    """Fraction of (valid) label positions predicted wrongly.

    Multi-label ``[..., L]``: ``sum [yhat != y] * m / sum m`` over all positions with
    mask ``m``. Single-label ``[N]`` targets (with labels, probabilities or
    ``log_probs_N_K_C`` as predictions): ``1 - accuracy`` (as scikit-learn;
    torchmetrics' ``HammingDistance`` in seed 003).

    Example:
        >>> hamming_loss([[1, 0, 1], [0, 0, 0]], [[1, 1, 1], [1, 0, 0]], mask=[True, False])
        0.3333333333333333
    """
    targets_t = as_tensor(targets, "targets")
    if targets_t.ndim == 1:
        if mask is not None:
            raise InvalidArgumentError("mask is only supported for multi-label [..., L] targets")
        preds_t = as_tensor(predictions, "predictions")
        if preds_t.ndim >= 2 and not preds_t.is_floating_point():
            raise InvalidArgumentError(
                f"predictions {_shape(preds_t)} and targets {_shape(targets_t)} disagree in shape: with class ids "
                "[N] as targets, predictions are class ids [N] (or probabilities [N, C]); multi-label 0/1 "
                "predictions [N, L] need multi-label targets [N, L]")
        targets_N = check_labels(targets_t, "targets")
        preds_N, _ = to_labels(predictions, "predictions")
        check_same_length(targets_N, preds_N, "targets", "predictions")
        return float((preds_N != targets_N).double().mean())
    y, yhat, valid = _indicators(targets_t, predictions, mask, threshold)
    wrong = ((y != yhat) & valid).sum()
    return float(wrong.double() / valid.sum())


def multilabel_precision_recall_f1(
    targets: object,
    predictions: object,
    *,
    mask: object | None = None,
    threshold: float = DECISION_THRESHOLD,
    average: str | None = None,
    zero_division: float = 0.0,
) -> PrecisionRecallF1:
    """Per-label binary precision, recall and F1 over the valid positions.

    For label ``l``: ``TP_l = sum m [yhat = 1, y = 1]``, ``FP_l = sum m [yhat = 1, y = 0]``,
    ``FN_l = sum m [yhat = 0, y = 1]``; then ``P = TP / (TP + FP)``,
    ``R = TP / (TP + FN)``, ``F1 = 2 TP / (2 TP + FP + FN)``. Averages as in
    :func:`activebayes.metrics.f1_score` (``None``, "macro", "micro", "weighted"). A 0/0
    gives ``zero_division`` (default 0, as scikit-learn): per label, and for "micro" when
    there is no positive label and no positive prediction at all (as
    :func:`evaluate_multilabel`'s ``micro_f1``). ``threshold``: a finite number in (0, 1).

    Example:
        >>> out = multilabel_precision_recall_f1([[1, 0], [1, 1]], [[1, 1], [0, 1]])
        >>> out.precision.tolist(), out.recall.tolist()
        ([1.0, 0.5], [0.5, 1.0])
    """
    average_key = "none" if average is None else check_choice(average, "average", ("macro", "micro", "weighted"))
    zero_division = check_zero_division(zero_division)
    y, yhat, valid = _indicators(targets, predictions, mask, threshold)
    L = y.shape[-1]
    y, yhat, valid = y.reshape(-1, L), yhat.reshape(-1, L), valid.reshape(-1, L)
    tp_L = (y & yhat & valid).sum(0)
    pred_L = (yhat & valid).sum(0)
    true_L = (y & valid).sum(0)
    return prf_from_counts(tp_L, pred_L, true_L, average=average_key, zero_division=zero_division)


#: The headline metric of a multi-label run (see :func:`evaluate_multilabel`).
MULTILABEL_HEADLINE = "micro_f1"


def evaluate_multilabel(log_probs_N_K_C: object, targets_N_C: object, *,
                        threshold: float = DECISION_THRESHOLD) -> dict[str, Any]:
    r"""Evaluate a multi-label predictive: the loop's per-round metrics of a multi-label run.

    ``log_probs_N_K_C[n, k, c] = log P(y_c = 1 | x_n, w_k)`` (log-sigmoid, the multi-label
    posterior's convention); the predictive is ``p̄(n, c) = 1/K Σ_k exp(log_probs)`` and an
    item is predicted to carry class c when ``p̄(n, c) >= threshold``. With ``ŷ`` those
    predictions and ``y`` the 0/1 targets ``[N, C]``:

    - ``micro_f1`` (the **headline** of a multi-label run): ``2 ΣTP / (2 ΣTP + ΣFP + ΣFN)``
      pooled over all items and classes: every label decision counts once, so it moves
      smoothly with the labels acquired, and (unlike the Hamming loss) the many easy
      negatives of a sparse label vector do not dominate it. 0 when it is 0/0 (no positive
      label and no positive prediction in the whole set), as scikit-learn's default
      ``zero_division`` and :func:`multilabel_precision_recall_f1`'s;
    - ``macro_f1``: the mean over classes of ``2 TP_c / (2 TP_c + FP_c + FN_c)`` (0 for a
      class never present nor predicted); ``f1_per_class``, ``precision_per_class``
      (``TP_c / (TP_c + FP_c)``) and ``recall_per_class`` (``TP_c / (TP_c + FN_c)``), 0 where 0/0;
    - ``samples_f1``: the mean over items of ``2 |y ∩ ŷ| / (|y| + |ŷ|)`` (1 for an item
      with neither, as scikit-learn's ``zero_division=1``);
    - ``hamming_loss``: the share of wrong label decisions; ``subset_accuracy``: the share
      of items whose whole label vector is right;
    - ``nll``: mean over items of the summed binary cross-entropy of ``p̄``.

    ``threshold`` must be a finite number in (0, 1). Items with no positive label are
    allowed here (a test set may have them; a pool may not).

    Example:
        >>> lp = torch.log(torch.tensor([[[0.9, 0.2]], [[0.4, 0.7]]]))
        >>> m = evaluate_multilabel(lp, [[1, 0], [1, 1]])
        >>> m["subset_accuracy"], m["hamming_loss"], round(m["micro_f1"], 4)
        (0.5, 0.25, 0.8)
    """
    threshold = _check_threshold(threshold)
    lp = as_tensor(log_probs_N_K_C, "log_probs_N_K_C")
    if lp.ndim != 3 or not lp.is_floating_point():
        raise InvalidArgumentError(f"log_probs_N_K_C must be float [N, K, C] (log-sigmoid), got {tuple(lp.shape)}")
    targets_t = as_tensor(targets_N_C, "targets_N_C")
    if targets_t.ndim != 2:
        raise InvalidArgumentError(f"targets_N_C must be [N, C] 0/1 indicators, got shape {_shape(targets_t)}")
    if (lp.shape[0], lp.shape[2]) != tuple(targets_t.shape):
        what = " and ".join(w for w, bad in (("N (items)", lp.shape[0] != targets_t.shape[0]),
                                             ("C (classes)", lp.shape[2] != targets_t.shape[1])) if bad)
        raise InvalidArgumentError(f"log_probs_N_K_C {_shape(lp)} and targets_N_C {_shape(targets_t)} disagree in "
                                   f"{what}")
    lp = lp.double()
    check_finite(torch.where(torch.isneginf(lp), torch.zeros_like(lp), lp), "log_probs_N_K_C")
    if float(lp.max()) > 1e-4:
        raise InvalidArgumentError("log_probs_N_K_C must hold log P(y_c = 1) <= 0 (log-sigmoid of the logits)")
    probs_N_C = predictive_probs(lp).clamp(0.0, 1.0)
    y, yhat, _ = _indicators(targets_t, probs_N_C, None, threshold, targets_name="targets_N_C")
    n, c = y.shape
    per_class = prf_from_counts((y & yhat).sum(0), yhat.sum(0), y.sum(0), average="none", zero_division=0.0)
    micro = prf_from_counts((y & yhat).sum(0), yhat.sum(0), y.sum(0), average="micro", zero_division=0.0)
    overlap_N = (y & yhat).sum(1).double()
    sizes_N = (y.sum(1) + yhat.sum(1)).double()
    samples_N = torch.where(sizes_N > 0, 2 * overlap_N / sizes_N.clamp_min(1), torch.ones_like(sizes_N))
    p = probs_N_C.clamp(1e-12, 1 - 1e-12)
    bce_N = -(y.double() * p.log() + (1 - y.double()) * (1 - p).log()).sum(1)
    return {
        "num_items": int(n),
        "num_classes": int(c),
        "micro_f1": float(micro.f1),
        "macro_f1": float(per_class.f1.mean()),
        "samples_f1": float(samples_N.mean()),
        "hamming_loss": float((y != yhat).double().mean()),
        "subset_accuracy": float((y == yhat).all(1).double().mean()),
        "nll": float(bce_N.mean()),
        "f1_per_class": [float(v) for v in per_class.f1],
        "precision_per_class": [float(v) for v in per_class.precision],
        "recall_per_class": [float(v) for v in per_class.recall],
        "support_per_class": [int(v) for v in per_class.support],
    }
