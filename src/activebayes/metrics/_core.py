"""Private maths written once: confusion-matrix counting, precision / recall / F1
from counts, calibration bin sums. The functional API and the streaming classes
are both thin layers over these helpers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

AVERAGES = ("binary", "macro", "micro", "weighted", "none")
# log p(y) is clipped at log(float64 eps) so a confidently wrong item costs ~36 nats, not inf
# (scikit-learn's log_loss clips probabilities at the same eps).
LOG_EPS = math.log(torch.finfo(torch.float64).eps)
# calibration bins: a confidence this many bin widths below an edge is taken to lie on it
# (float64 rounding of a value exactly on the edge is ~1e-15 of a bin width)
BIN_EDGE_TOLERANCE = 1e-9


# --------------------------------------------------------------------------- counting
def confusion_counts(preds_N: Tensor, targets_N: Tensor, num_classes: int) -> Tensor:
    """``cm_C_C[i, j]`` = number of items with true class ``i`` predicted as ``j`` (int64).

    Rows are truths, columns predictions (scikit-learn's convention). One
    ``bincount`` of ``i * C + j`` (what torchmetrics' ``multiclass_confusion_matrix``
    does too; calling it would import torchmetrics, and with it matplotlib.pyplot,
    on the loop's hot path, so the one line is written here).
    """
    flat = targets_N.long() * num_classes + preds_N.long()
    return torch.bincount(flat, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


# --------------------------------------------------------------------------- averaging
def safe_divide(num: Tensor, den: Tensor, zero_division: float) -> Tensor:
    num, den = num.double(), den.double()
    out = torch.full_like(num, zero_division)
    ok = den != 0
    out[ok] = num[ok] / den[ok]
    return out


def nan_average(values_L: Tensor, weights_L: Tensor | None = None) -> float:
    """Average ignoring NaNs (scikit-learn's ``_nanaverage``); all-zero weights fall back to the mean."""
    keep = ~torch.isnan(values_L)
    if values_L.numel() == 0 or not bool(keep.any()):
        return math.nan
    values_L = values_L[keep]
    if weights_L is None:
        return float(values_L.mean())
    weights_L = weights_L[keep].double()
    if float(weights_L.sum()) == 0:
        return float(values_L.mean())
    return float((values_L * weights_L).sum() / weights_L.sum())


@dataclass(frozen=True, eq=False)  # holds tensors / arrays: no elementwise ==
class PrecisionRecallF1:
    """Precision, recall and F1: floats for an average, ``[L]`` tensors for ``average=None``.

    ``support`` (items per class, ``TP + FN``) is set only for ``average=None``.
    """

    precision: float | Tensor
    recall: float | Tensor
    f1: float | Tensor
    support: Tensor | None = None


def prf_from_confusion(
    cm_C_C: Tensor,
    label_ids_L: Tensor,
    *,
    average: str,
    zero_division: float,
    pos_label: int = 1,
) -> PrecisionRecallF1:
    """Precision, recall, F1 and support of the classes ``label_ids_L`` from a confusion matrix.

    Per class ``c`` (one-vs-rest), ``TP = cm[c, c]``, ``FP = sum_i cm[i, c] - TP``,
    ``FN = sum_j cm[c, j] - TP``; see :func:`prf_from_counts`. ``"binary"`` reports
    class ``pos_label`` only.
    """
    cm = cm_C_C.double()
    tp_C, pred_C, true_C = cm.diagonal(), cm.sum(0), cm.sum(1)
    if average == "binary":
        label_ids_L = label_ids_L.new_tensor([pos_label])
        out = prf_from_counts(
            tp_C[label_ids_L], pred_C[label_ids_L], true_C[label_ids_L],
            average="none", zero_division=zero_division,
        )
        return PrecisionRecallF1(float(out.precision[0]), float(out.recall[0]), float(out.f1[0]))
    return prf_from_counts(
        tp_C[label_ids_L], pred_C[label_ids_L], true_C[label_ids_L],
        average=average, zero_division=zero_division,
    )


def prf_from_counts(
    tp_L: Tensor, pred_L: Tensor, true_L: Tensor, *, average: str, zero_division: float
) -> PrecisionRecallF1:
    """Per-class and averaged precision / recall / F1 from counts.

    ``tp_L`` true positives, ``pred_L = TP + FP`` predicted positives, ``true_L = TP + FN``
    actual positives (support)::

        P_c = TP / (TP + FP)      R_c = TP / (TP + FN)      F1_c = 2 TP / (2 TP + FP + FN)

    (``F1_c`` equals ``2 P_c R_c / (P_c + R_c)`` whenever both are defined.)
    A 0/0 gives ``zero_division``.

    Averages over the classes ``L``:

    - ``"macro"``: unweighted mean of the per-class values (NaNs from
      ``zero_division=nan`` are skipped). Macro-F1 is the mean of the F1_c, *not*
      ``2 P R / (P + R)`` of macro-P and macro-R.
    - ``"weighted"``: mean weighted by support ``TP + FN`` (plain mean if all supports are 0).
    - ``"micro"``: pool the counts first: ``sum TP / sum (TP + FP)`` etc.; with all
      classes of a single-label problem it equals accuracy.
    - ``"none"``: per-class tensors ``[L]`` and the support.
    """
    tp, pred, true = tp_L.double(), pred_L.double(), true_L.double()
    if average == "micro":
        tp, pred, true = tp.sum(0, keepdim=True), pred.sum(0, keepdim=True), true.sum(0, keepdim=True)
    precision = safe_divide(tp, pred, zero_division)
    recall = safe_divide(tp, true, zero_division)
    f1 = safe_divide(2 * tp, pred + true, zero_division)
    if average == "none":
        return PrecisionRecallF1(precision, recall, f1, true.long())
    if average == "micro":
        return PrecisionRecallF1(float(precision[0]), float(recall[0]), float(f1[0]))
    weights = true if average == "weighted" else None
    return PrecisionRecallF1(
        nan_average(precision, weights), nan_average(recall, weights), nan_average(f1, weights)
    )


# --------------------------------------------------------------------------- calibration
def calibration_bin_edges(num_bins: int) -> Tensor:
    return torch.linspace(0, 1, num_bins + 1, dtype=torch.float64)


def calibration_sums(
    log_probs_N_C: Tensor, targets_N: Tensor, num_bins: int
) -> dict[str, Tensor]:
    """Sufficient statistics for NLL, Brier and ECE (all sums, so they add across batches).

    Confidence is the top-label probability ``max_c p(c | x)``; bin ``b`` holds
    confidences in ``[b / B, (b + 1) / B)``, the last bin also 1.0 (torchmetrics puts 1.0 in
    a bin of its own). A confidence within :data:`BIN_EDGE_TOLERANCE` bin widths below an edge
    counts as on it: a vote share such as 8 of 10 ensemble members (0.8, an edge for
    ``B = 15``) comes out of the log-space mean, or of a log / exp round trip, an ulp low.
    """
    N, C = log_probs_N_C.shape
    probs_N_C = log_probs_N_C.exp()
    conf_N, pred_N = probs_N_C.max(-1)
    correct_N = (pred_N == targets_N).double()
    scaled_N = conf_N.double() * num_bins
    bin_N = torch.floor(scaled_N + BIN_EDGE_TOLERANCE).long().clamp(0, num_bins - 1)
    onehot_N_C = torch.nn.functional.one_hot(targets_N, C).double()
    return {
        "count_B": torch.bincount(bin_N, minlength=num_bins).double(),
        "conf_sum_B": torch.bincount(bin_N, weights=conf_N, minlength=num_bins),
        "correct_sum_B": torch.bincount(bin_N, weights=correct_N, minlength=num_bins),
        "nll_sum": -log_probs_N_C.gather(1, targets_N[:, None]).clamp(min=LOG_EPS).sum(),
        "brier_sum": ((probs_N_C - onehot_N_C) ** 2).sum(),
        "n": torch.tensor(float(N), dtype=torch.float64),
    }


def ece_from_sums(count_B: Tensor, conf_sum_B: Tensor, correct_sum_B: Tensor) -> float:
    """``ECE = sum_b (n_b / N) |acc_b - conf_b|`` (Naeini et al. 2015; Guo et al. 2017)."""
    n = float(count_B.sum())
    if n == 0:
        return math.nan
    return float((conf_sum_B - correct_sum_B).abs().sum() / n)
