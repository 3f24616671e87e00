"""Calibration and proper scoring rules: NLL (log loss), Brier score, ECE, reliability bins.

Predictions are probabilities ``[N, C]`` or the Bayesian ``log_probs_N_K_C``
(the model average ``p(y | x) = (1/K) sum_k p_k(y | x)``, computed in log space).
A 1-D float input is the probability of class 1 of a binary problem.

Reliability bins are sums (items, summed confidence, summed correctness per
bin), so bins of several seeds, rounds or batches add up:
:meth:`ReliabilityBins.pool` gives the bins of all their items together, and
the ECE of the pooled bins is the ECE of the pooled predictions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._validation import check_choice, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics._core import calibration_bin_edges, calibration_sums, ece_from_sums
from activebayes.metrics._inputs import (
    as_tensor,
    check_labels,
    check_same_length,
    to_log_probs,
)

__all__ = [
    "RECORD_KEYS",
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
        raise InvalidArgumentError(
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


#: The keys of the stored form of :class:`ReliabilityBins` (``evaluate_classification``'s
#: ``"reliability"`` entry, one list of ``B`` numbers each).
RECORD_KEYS = ("count", "conf_sum", "correct_sum")


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
        conf_sum: summed top-label confidence of the bin's items (float64).
        correct_sum: number of the bin's items predicted correctly (float64).

    Build it with :func:`reliability_bins` (from predictions), :meth:`from_sums`,
    :meth:`from_record` (the form a run stores) or :meth:`pool` (several bins together).
    """

    edges: Tensor
    counts: Tensor
    confidence: Tensor
    accuracy: Tensor
    ece: float
    mce: float
    conf_sum: Tensor
    correct_sum: Tensor

    @property
    def num_bins(self) -> int:
        return self.counts.numel()

    @property
    def num_items(self) -> int:
        """N, the items binned (``counts.sum()``)."""
        return int(self.counts.sum())

    @classmethod
    def from_sums(cls, count_B: Tensor, conf_sum_B: Tensor, correct_sum_B: Tensor) -> ReliabilityBins:
        count_B, conf_sum_B, correct_sum_B = (t.double() for t in (count_B, conf_sum_B, correct_sum_B))
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
            conf_sum=conf_sum_B,
            correct_sum=correct_sum_B,
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Sequence[float]], *, name: str = "record") -> ReliabilityBins:
        """The bins a run stores: ``{"count": [B], "conf_sum": [B], "correct_sum": [B]}``.

        This is the ``"reliability"`` entry of
        :func:`~activebayes.metrics.evaluate_classification` (``test_reliability``
        in a round's metrics); :meth:`to_record` writes it.

        Example:
            >>> bins = ReliabilityBins.from_record({"count": [0, 2], "conf_sum": [0.0, 1.6], "correct_sum": [0, 1]})
            >>> bins.accuracy.tolist()[1], round(bins.ece, 4)
            (0.5, 0.3)
        """
        if not isinstance(record, Mapping):
            raise InvalidTypeError(
                f"{name} must be a mapping with keys {', '.join(RECORD_KEYS)}, got {type(record).__name__}"
            )
        missing = [key for key in RECORD_KEYS if key not in record]
        if missing:
            raise InvalidArgumentError(
                f"{name} must have the keys {', '.join(RECORD_KEYS)}; missing {', '.join(missing)} "
                f"(got keys: {', '.join(sorted(map(str, record))) or 'none'})"
            )
        try:
            count_B, conf_sum_B, correct_sum_B = (
                torch.as_tensor(record[key], dtype=torch.float64) for key in RECORD_KEYS
            )
        except (TypeError, ValueError, RuntimeError) as error:
            raise InvalidTypeError(f"{name} must hold lists of numbers, could not convert: {error}") from None
        shapes = {key: tuple(t.shape) for key, t in zip(RECORD_KEYS, (count_B, conf_sum_B, correct_sum_B), strict=True)}
        if count_B.ndim != 1 or count_B.numel() == 0 or len(set(shapes.values())) != 1:
            raise InvalidArgumentError(f"{name} must hold three lists of the same length B >= 1, got shapes {shapes}")
        _check_sums(count_B, conf_sum_B, correct_sum_B, name)
        return cls.from_sums(count_B, conf_sum_B, correct_sum_B)

    def to_record(self) -> dict[str, list[float] | list[int]]:
        """The stored form (see :meth:`from_record`): plain lists, JSON-ready."""
        return {
            "count": [int(v) for v in self.counts],
            "conf_sum": [float(v) for v in self.conf_sum],
            "correct_sum": [float(v) for v in self.correct_sum],
        }

    @classmethod
    def pool(cls, bins: Sequence[ReliabilityBins]) -> ReliabilityBins:
        """The bins of all items of several bins together (seeds, rounds or batches).

        Counts, confidence sums and correct sums add bin by bin, so the pooled
        bin's confidence and accuracy are the count-weighted means of the parts',
        and the pooled ECE

        ``ECE_pool = sum_b |sum_s (conf_sum_sb - correct_sum_sb)| / sum_s N_s``

        is the ECE of the pooled predictions. It is not the mean of the parts'
        ECEs: a part's over-confidence and another's under-confidence in the same
        bin cancel, so with parts of equal size ``ECE_pool <= mean_s ECE_s``
        (triangle inequality).

        Args:
            bins: ``[S]`` :class:`ReliabilityBins` with the same number of bins.

        Example:
            >>> a = ReliabilityBins.from_record({"count": [2, 0], "conf_sum": [0.8, 0.0], "correct_sum": [0, 0]})
            >>> b = ReliabilityBins.from_record({"count": [2, 0], "conf_sum": [0.8, 0.0], "correct_sum": [2, 0]})
            >>> round(a.ece, 2), round(b.ece, 2), round(ReliabilityBins.pool([a, b]).ece, 2)
            (0.4, 0.6, 0.1)
        """
        if isinstance(bins, ReliabilityBins) or not isinstance(bins, Sequence):
            raise InvalidTypeError(f"bins must be a sequence of ReliabilityBins, got {type(bins).__name__}")
        if len(bins) == 0:
            raise InvalidArgumentError("bins must hold at least one ReliabilityBins, got none")
        for i, part in enumerate(bins):
            if not isinstance(part, ReliabilityBins):
                raise InvalidTypeError(f"bins[{i}] must be a ReliabilityBins, got {type(part).__name__}")
        sizes = [part.num_bins for part in bins]
        if len(set(sizes)) != 1:
            raise InvalidArgumentError(f"bins must all have the same number of bins, got {sizes}")
        return cls.from_sums(
            torch.stack([part.counts.double() for part in bins]).sum(0),
            torch.stack([part.conf_sum for part in bins]).sum(0),
            torch.stack([part.correct_sum for part in bins]).sum(0),
        )


def _check_sums(count_B: Tensor, conf_sum_B: Tensor, correct_sum_B: Tensor, name: str) -> None:
    """Stored sums must be possible: counts whole and >= 0, 0 <= sums <= counts (up to rounding)."""
    if not bool(torch.isfinite(torch.stack([count_B, conf_sum_B, correct_sum_B])).all()):
        raise InvalidArgumentError(f"{name} must hold finite numbers")
    if bool((count_B < 0).any()) or not bool((count_B == count_B.round()).all()):
        raise InvalidArgumentError(f"{name}['count'] must hold whole numbers >= 0, got {count_B.tolist()}")
    slack = 1e-9 * count_B.clamp(min=1)
    for key, sums in (("conf_sum", conf_sum_B), ("correct_sum", correct_sum_B)):
        if bool((sums < -slack).any()) or bool((sums > count_B + slack).any()):
            raise InvalidArgumentError(
                f"{name}[{key!r}] must lie in [0, count] bin by bin (a sum of values in [0, 1]), "
                f"got {sums.tolist()} for counts {count_B.tolist()}"
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
