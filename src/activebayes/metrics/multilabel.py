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

__all__ = ["hamming_loss", "multilabel_precision_recall_f1"]


def _indicators(targets: object, predictions: object, mask: object | None, threshold: float):
    """``(targets, predictions, valid)`` as bool tensors of one shape ``[..., L]``."""
    targets_t = as_tensor(targets, "targets")
    preds_t = as_tensor(predictions, "predictions")
    if targets_t.ndim < 2:
        raise InvalidArgumentError(f"multi-label targets must be [..., L] 0/1 indicators, got shape {tuple(targets_t.shape)}")
    if preds_t.shape != targets_t.shape:
        raise InvalidArgumentError(
            f"predictions must have the targets' shape {tuple(targets_t.shape)}, got {tuple(preds_t.shape)}"
        )
    if targets_t.numel() == 0:
        raise InvalidArgumentError("targets is empty")
    check_finite(targets_t.double(), "targets")
    if not bool(((targets_t == 0) | (targets_t == 1)).all()):
        raise InvalidArgumentError("multi-label targets must hold only 0 and 1")
    if preds_t.is_floating_point():
        check_finite(preds_t, "predictions")
        if float(preds_t.min()) < 0 or float(preds_t.max()) > 1:
            raise InvalidArgumentError(
                "multi-label predictions must be 0/1 or probabilities in [0, 1]; apply torch.sigmoid to logits"
            )
        preds_b = preds_t >= threshold
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
    threshold: float = 0.5,
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
    threshold: float = 0.5,
    average: str | None = None,
    zero_division: float = 0.0,
) -> PrecisionRecallF1:
    """Per-label binary precision, recall and F1 over the valid positions.

    For label ``l``: ``TP_l = sum m [yhat = 1, y = 1]``, ``FP_l = sum m [yhat = 1, y = 0]``,
    ``FN_l = sum m [yhat = 0, y = 1]``; then ``P = TP / (TP + FP)``,
    ``R = TP / (TP + FN)``, ``F1 = 2 TP / (2 TP + FP + FN)``. Averages as in
    :func:`activebayes.metrics.f1_score` (``None``, "macro", "micro", "weighted").

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
