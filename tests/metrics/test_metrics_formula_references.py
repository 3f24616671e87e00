"""The formulas of docs/metrics.md checked against references the library did not compute.

Most metrics are already compared with scikit-learn, torchmetrics and NumPy in the other
modules of this folder; this one adds what they leave out: the seeds' printed numbers
(seed 001's macro-F1, seed 002's BCE) and the calibration bins' edges, where a
confidence lies exactly on ``b / B`` (an ensemble's or a random forest's vote share).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

from activebayes import metrics as M


def _votes(shares: list[tuple[int, int]]) -> torch.Tensor:
    """``[N, K, C]`` log-probabilities of K saturated functions: ``j`` of the ``K`` vote class 0,
    the others one class each of their own, so the predictive's top confidence is exactly ``j / K``."""
    K = max(k for _, k in shares)
    C = K + 1
    out = torch.full((len(shares), K, C), -math.inf, dtype=torch.float64)
    for n, (j, k) in enumerate(shares):
        assert k == K
        out[n, :j, 0] = 0.0
        for i in range(j, K):
            out[n, i, 1 + i - j] = 0.0
    return out


def _exact_bin(j: int, K: int, B: int) -> int:
    """Bin ``b`` holds ``[b/B, (b+1)/B)``, the last one also 1: in exact rational arithmetic."""
    return min(math.floor(Fraction(j, K) * B), B - 1)


@pytest.mark.parametrize("K", [10, 20, 30, 100])
@pytest.mark.parametrize("num_bins", [10, 15, 20])
def test_a_confidence_on_a_bin_edge_falls_in_the_bin_it_opens(K, num_bins):
    """Docs: bin b is [b/B, (b+1)/B). A vote share j/K equal to b/B opens bin b, whether the
    prediction comes as K samples or as their mean probabilities (before, about a third of such
    edges went to the bin below, by the rounding of the log-space mean or of the log / exp)."""
    shares = [(j, K) for j in range(max(1, K // 2), K + 1)]
    log_probs = _votes(shares)
    expected = np.bincount([_exact_bin(j, K, num_bins) for j, _ in shares], minlength=num_bins)
    targets = torch.zeros(len(shares), dtype=torch.long)
    from_samples = M.reliability_bins(targets, log_probs, num_bins=num_bins)
    from_means = M.reliability_bins(targets, log_probs.exp().mean(1), num_bins=num_bins)
    assert from_samples.counts.tolist() == expected.tolist()
    assert from_means.counts.tolist() == expected.tolist()


def test_ece_on_bin_edges_matches_an_exact_reference():
    """ECE = Σ_b n_b/N |acc_b - conf_b| with the bins found in exact arithmetic (10 voting members)."""
    K, B = 10, 15
    shares = [(j, K) for j in (5, 6, 6, 8, 8, 8, 9, 10, 10, 4)]
    log_probs = _votes(shares)
    rng = np.random.default_rng(0)
    targets = (rng.random(len(shares)) < 0.4).astype(np.int64)  # class 0 right, class 1 wrong
    conf = np.array([j / K for j, _ in shares])
    bins = np.array([_exact_bin(j, K, B) for j, _ in shares])
    correct = targets == 0
    ece = sum(abs(correct[bins == b].mean() - conf[bins == b].mean()) * (bins == b).mean() for b in set(bins))
    mce = max(abs(correct[bins == b].mean() - conf[bins == b].mean()) for b in set(bins))
    assert M.expected_calibration_error(targets, log_probs, num_bins=B) == pytest.approx(ece, abs=1e-12)
    assert M.expected_calibration_error(targets, log_probs, num_bins=B, norm="max") == pytest.approx(mce, abs=1e-12)
    # the per-round record and the streaming class bin the same way
    record = M.evaluate_classification(log_probs, torch.as_tensor(targets), num_classes=K + 1, num_bins=B)
    assert record["reliability"]["count"] == np.bincount(bins, minlength=B).tolist()
    assert record["ece"] == pytest.approx(ece, abs=1e-12)
    stream = M.Calibration(num_bins=B)
    stream.update(log_probs[:4], torch.as_tensor(targets[:4]))
    stream.update(log_probs[4:], torch.as_tensor(targets[4:]))
    assert float(stream.compute()["ece"]) == pytest.approx(ece, abs=1e-12)


def test_seed_001_macro_f1_and_its_per_class_counts():
    """Seed 001's worked numbers: class 0 P 3/5 R 3/4, class 1 P 2/3 R 2/4; macro-F1 0.6190476190476191,
    the harmonic mean of macro-P and macro-R 0.6291390728476821 (not an F1 of anything)."""
    y_true = [0, 1, 0, 1, 0, 1, 1, 0]
    y_pred = [0, 1, 0, 0, 1, 1, 0, 0]
    p = M.precision_score(y_true, y_pred, average=None)
    r = M.recall_score(y_true, y_pred, average=None)
    np.testing.assert_allclose(np.asarray(p, float), [3 / 5, 2 / 3], atol=1e-15)
    np.testing.assert_allclose(np.asarray(r, float), [3 / 4, 2 / 4], atol=1e-15)
    assert M.f1_score(y_true, y_pred, average="macro") == pytest.approx(0.6190476190476191, abs=1e-15)
    macro_p = M.precision_score(y_true, y_pred, average="macro")
    macro_r = M.recall_score(y_true, y_pred, average="macro")
    assert 2 * macro_p * macro_r / (macro_p + macro_r) == pytest.approx(0.6291390728476821, abs=1e-15)
    # micro: one pooled P and R, so there 2PR/(P+R) is the F1, and equals accuracy (single-label)
    micro = M.f1_score(y_true, y_pred, average="micro")
    assert micro == pytest.approx(5 / 8, abs=1e-15) == M.accuracy_score(y_true, y_pred)


def test_seed_002_binary_cross_entropy_and_confusion_numbers():
    """Seed 002: BCE of predictions (0.9, 0.2) for labels (1, 0) is 0.1643; the validation
    confusion matrix [[7, 2], [1, 10]] gives TPR 0.9091, FPR 0.2222, precision 0.8333."""
    assert M.log_loss([1, 0], [0.9, 0.2]) == pytest.approx(0.1643, abs=5e-5)
    assert M.log_loss([1, 0], [0.9, 0.2]) == pytest.approx(-(math.log(0.9) + math.log(0.8)) / 2, abs=1e-15)
    targets = [0] * 9 + [1] * 11
    scores = [0.1] * 7 + [0.9] * 2 + [0.1] + [0.9] * 10
    cm = M.binary_confusion_matrix(targets, scores, threshold=0.5)
    assert cm.matrix.tolist() == [[7, 2], [1, 10]]
    assert cm.tpr == pytest.approx(10 / 11) and cm.fpr == pytest.approx(2 / 9)
    assert cm.precision == pytest.approx(10 / 12) and cm.recall == pytest.approx(0.9091, abs=5e-5)


def test_brier_of_binary_probabilities_is_half_the_two_class_sum():
    """Docs: for [N] probabilities of class 1 the Brier score is 1/N Σ (p - y)², half the two-class sum."""
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 40)
    p = rng.random(40)
    two_class = np.stack([1 - p, p], 1)
    assert M.brier_score(y, p) == pytest.approx(np.mean((p - y) ** 2), abs=1e-15)
    assert M.brier_score(y, two_class) == pytest.approx(2 * M.brier_score(y, p), abs=1e-12)
    assert M.brier_score(y, two_class) == pytest.approx(
        skm.brier_score_loss(y, two_class, labels=[0, 1], scale_by_half=False), abs=1e-12)


def test_nll_of_the_model_average_not_the_mean_of_log_probabilities():
    """Docs' example: samples [0.02, 0.98], [0.8, 0.2], [0.8, 0.2] average to class 0 (0.54);
    the geometric mean would say class 1. NLL = -log p̄(y)."""
    probs = torch.tensor([[[0.02, 0.98], [0.8, 0.2], [0.8, 0.2]]], dtype=torch.float64)
    assert M.accuracy_score([0], probs.log()) == 1.0
    assert M.log_loss([0], probs.log()) == pytest.approx(-math.log(0.54), abs=1e-12)
    assert M.log_loss([1], probs.log()) == pytest.approx(-math.log(0.46), abs=1e-12)


def test_a_label_predicted_with_probability_exactly_one_half_is_present():
    """Docs (metrics.md, multilabel.md, stopping.md): a label is predicted when p̄ >= 1/2. Five of ten
    saturated ensemble members, or two samples 0.3 and 0.7, give p̄ = 1/2 exactly."""
    halves = torch.full((2, 10, 1), -math.inf, dtype=torch.float64)
    halves[:, :5, 0] = 0.0
    halves[1, :, 0] = torch.log(torch.tensor([0.3, 0.7] * 5, dtype=torch.float64))
    assert M.evaluate_multilabel(halves, [[1], [1]])["micro_f1"] == 1.0
