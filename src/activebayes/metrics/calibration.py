"""Calibration and proper scoring rules: NLL (log loss), Brier score, ECE, reliability bins.

Predictions are probabilities ``[N, C]`` or the Bayesian ``log_probs_N_K_C``
(the model average ``p(y | x) = (1/K) sum_k p_k(y | x)``, computed in log space).
A 1-D float input is the probability of class 1 of a binary problem.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._validation import check_choice, check_positive_int
from activebayes.metrics._core import calibration_bin_edges, calibration_sums, ece_from_sums
from activebayes.metrics._inputs import (
    as_tensor,
    check_labels,
    check_same_length,
    to_log_probs,
)

__all__ = [
    "ReliabilityBins",
    "brier_score",
    "expected_calibration_error",
    "log_loss",
    "reliability_bins",
]


def _prepare(targets: object, predictions: object) -> tuple[Tensor, Tensor]:
    targets_N = check_labels(targets, "targets")
    log_probs_N_C = to_log_probs(predictions, "predictions")
    check_same_length(targets_N, log_probs_N_C, "targets", "predictions")
    C = log_probs_N_C.shape[-1]
    if int(targets_N.max()) >= C:
        raise ValueError(
            f"targets must be class ids < C={C} (the predictions' classes), got {int(targets_N.max())}"
        )
    return targets_N, log_probs_N_C


def log_loss(targets: object, predictions: object) -> float:
    """Mean negative log-likelihood ``-(1/N) sum_n log p(y_n | x_n)`` (nats).

    For ``log_probs_N_K_C`` this is the NLL of the model average,
    ``log p(y | x) = logsumexp_k log p_k(y | x) - log K``, computed without
    leaving log space. ``log p`` is clipped at ``log(eps_float64)`` (as
    scikit-learn clips probabilities) so one confidently wrong item costs ~36
    nats instead of infinity.

    Example:
        >>> round(log_loss([1, 0], [[0.1, 0.9], [0.8, 0.2]]), 4)
        0.1643
    """
    targets_N, log_probs_N_C = _prepare(targets, predictions)
    sums = calibration_sums(log_probs_N_C, targets_N, 1)
    return float(sums["nll_sum"] / sums["n"])


def brier_score(targets: object, predictions: object) -> float:
    """Brier score (Brier 1950), the mean squared error of the probability vector.

    Multiclass, ``[N, C]`` or ``[N, K, C]`` input:
    ``BS = (1/N) sum_n sum_c (p(c | x_n) - [y_n = c])^2`` (sum over classes, mean
    over items; 0 is perfect, 2 is the worst). This is scikit-learn's
    ``brier_score_loss`` for multiclass input.

    Binary, ``[N]`` probabilities of class 1: ``(1/N) sum_n (p_n - y_n)^2``
    (scikit-learn's binary ``brier_score_loss``; half the two-class sum).

    Example:
        >>> round(brier_score([0, 1], [[0.8, 0.2], [0.4, 0.6]]), 4)
        0.2
    """
    targets_N, log_probs_N_C = _prepare(targets, predictions)
    sums = calibration_sums(log_probs_N_C, targets_N, 1)
    value = float(sums["brier_sum"] / sums["n"])
    if as_tensor(predictions, "predictions").ndim == 1:
        value /= 2  # binary convention: squared error of p(class 1) only
    return value


@dataclass(frozen=True, eq=False)  # holds tensors / arrays: no elementwise ==
class ReliabilityBins:
    """Reliability-diagram data: per confidence bin ``b`` (all tensors ``[B]``).

    Attributes:
        edges: bin edges ``[B + 1]`` on [0, 1].
        counts: items whose top-label confidence falls in the bin.
        confidence: mean top-label confidence in the bin (nan when empty).
        accuracy: fraction of those items predicted correctly (nan when empty).
        ece: ``sum_b (counts_b / N) |accuracy_b - confidence_b|``.
        mce: maximum calibration error ``max_b |accuracy_b - confidence_b|`` over non-empty bins.
    """

    edges: Tensor
    counts: Tensor
    confidence: Tensor
    accuracy: Tensor
    ece: float
    mce: float

    @property
    def num_bins(self) -> int:
        return self.counts.numel()

    @classmethod
    def from_sums(cls, count_B: Tensor, conf_sum_B: Tensor, correct_sum_B: Tensor) -> ReliabilityBins:
        nonempty = count_B > 0
        confidence = torch.where(nonempty, conf_sum_B / count_B.clamp(min=1), torch.nan)
        accuracy = torch.where(nonempty, correct_sum_B / count_B.clamp(min=1), torch.nan)
        gaps = (accuracy - confidence).abs()[nonempty]
        return cls(
            edges=calibration_bin_edges(count_B.numel()),
            counts=count_B.long(),
            confidence=confidence,
            accuracy=accuracy,
            ece=ece_from_sums(count_B, conf_sum_B, correct_sum_B),
            mce=float(gaps.max()) if gaps.numel() else float("nan"),
        )


def reliability_bins(targets: object, predictions: object, *, num_bins: int = 15) -> ReliabilityBins:
    """Bin items by top-label confidence ``max_c p(c | x)`` into ``num_bins`` equal-width bins.

    Bin ``b`` holds confidences in ``[b/B, (b+1)/B)`` (the last bin includes 1).
    See :class:`ReliabilityBins`; feed the result to
    :func:`activebayes.plots.reliability_diagram`.

    Example:
        >>> bins = reliability_bins([0, 1], [[0.9, 0.1], [0.7, 0.3]], num_bins=10)
        >>> bins.counts[6:].tolist(), round(bins.ece, 4)
        ([0, 1, 0, 1], 0.4)
    """
    check_positive_int(num_bins, "num_bins")
    targets_N, log_probs_N_C = _prepare(targets, predictions)
    sums = calibration_sums(log_probs_N_C, targets_N, num_bins)
    return ReliabilityBins.from_sums(sums["count_B"], sums["conf_sum_B"], sums["correct_sum_B"])


def expected_calibration_error(
    targets: object, predictions: object, *, num_bins: int = 15, norm: str = "l1"
) -> float:
    """Expected calibration error (Naeini et al. 2015; Guo et al. 2017).

    ``ECE = sum_b (n_b / N) |acc_b - conf_b|`` over ``num_bins`` equal-width bins of
    top-label confidence (``norm="l1"``); ``norm="max"`` gives the maximum
    calibration error ``max_b |acc_b - conf_b|``. 0 for a calibrated predictor,
    near 1 for one that is confidently wrong.

    Example:
        >>> round(expected_calibration_error([0, 1], [[0.9, 0.1], [0.7, 0.3]], num_bins=10), 4)
        0.4
    """
    check_choice(norm, "norm", ("l1", "max"))
    bins = reliability_bins(targets, predictions, num_bins=num_bins)
    return bins.ece if norm == "l1" else bins.mce
