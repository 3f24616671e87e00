"""NLL, Brier, ECE and reliability bins against scikit-learn, torchmetrics and NumPy formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sklearn.metrics as skm
import torch
import torchmetrics.functional.classification as tmf

from activebayes import metrics as M


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=tol, rtol=0, equal_nan=True)


def _case(rng, N=80, C=None):
    C = C or int(rng.integers(2, 7))
    logits = rng.normal(size=(N, C)) * rng.uniform(0.5, 4)
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    y = rng.integers(0, C, N)
    return C, probs, y


def test_log_loss_and_brier_vs_sklearn_and_numpy():
    rng = np.random.default_rng(20)
    for _ in range(15):
        C, probs, y = _case(rng)
        _close(M.log_loss(y, probs), skm.log_loss(y, probs, labels=list(range(C))))
        ref_brier = np.mean(np.sum((probs - np.eye(C)[y]) ** 2, axis=1))  # sum over classes, mean over items
        _close(M.brier_score(y, probs), ref_brier)
        _close(M.brier_score(y, torch.as_tensor(probs)), skm.brier_score_loss(y, probs, labels=list(range(C)), scale_by_half=False))
    # binary 1-D probabilities of class 1: scikit-learn's binary Brier (positive class only)
    y = rng.integers(0, 2, 50)
    p = rng.random(50)
    _close(M.brier_score(y, p), skm.brier_score_loss(y, p))
    _close(M.brier_score(y, p), np.mean((p - y) ** 2))
    _close(M.log_loss(y, p), skm.log_loss(y, p))


def test_log_loss_clips_zero_probabilities():
    value = M.log_loss([1], [[1.0, 0.0]])
    assert math.isfinite(value)
    _close(value, -math.log(np.finfo(np.float64).eps))
    _close(value, skm.log_loss([1], [[1.0, 0.0]], labels=[0, 1]), tol=1e-3)


def test_bayesian_input_equals_mean_probabilities():
    gen = torch.Generator().manual_seed(1)
    N, K, C = 50, 7, 4
    log_probs_N_K_C = torch.log_softmax(2 * torch.randn(N, K, C, generator=gen, dtype=torch.float64), -1)
    mean_probs_N_C = log_probs_N_K_C.exp().mean(1)
    y = torch.randint(0, C, (N,), generator=gen)
    for fn in (M.log_loss, M.brier_score, M.expected_calibration_error):
        _close(fn(y, log_probs_N_K_C), fn(y, mean_probs_N_C), tol=1e-9)
    # NLL of the model average, not the average NLL of the samples
    _close(M.log_loss(y, log_probs_N_K_C), -np.log(mean_probs_N_C.numpy()[np.arange(N), y.numpy()]).mean())
    b1 = M.reliability_bins(y, log_probs_N_K_C, num_bins=10)
    b2 = M.reliability_bins(y, mean_probs_N_C, num_bins=10)
    assert b1.counts.tolist() == b2.counts.tolist()


@pytest.mark.parametrize("num_bins", [5, 15])
def test_ece_vs_torchmetrics_and_numpy(num_bins):
    rng = np.random.default_rng(21)
    for _ in range(10):
        C, probs, y = _case(rng, N=200)
        ours = M.expected_calibration_error(y, probs, num_bins=num_bins)
        ref = tmf.multiclass_calibration_error(
            torch.as_tensor(probs), torch.as_tensor(y), num_classes=C, n_bins=num_bins
        )
        _close(ours, ref, tol=1e-5)  # torchmetrics accumulates in float32
        # NumPy reference: equal-width bins [b/B, (b+1)/B), top-label confidence
        conf, pred = probs.max(1), probs.argmax(1)
        bins = np.minimum((conf * num_bins).astype(int), num_bins - 1)
        ece = sum(
            abs((pred[bins == b] == y[bins == b]).mean() - conf[bins == b].mean()) * (bins == b).mean()
            for b in range(num_bins) if (bins == b).any()
        )
        _close(ours, ece)
        mce = M.expected_calibration_error(y, probs, num_bins=num_bins, norm="max")
        ref_mce = tmf.multiclass_calibration_error(
            torch.as_tensor(probs), torch.as_tensor(y), num_classes=C, n_bins=num_bins, norm="max"
        )
        _close(mce, ref_mce, tol=1e-5)


def test_ece_puts_a_confidence_of_exactly_one_in_the_last_bin():
    """The docs' convention: the last bin is closed at 1 (torchmetrics gives 1.0 a bin of its own).

    5 items at 0.95, all right, and 5 at exactly 1.0, all wrong, share the last of 10 bins:
    |mean confidence 0.975 - accuracy 0.5| = 0.475, for ECE and MCE alike.
    """
    probs = np.array([[0.95, 0.05]] * 5 + [[1.0, 0.0]] * 5)
    y = np.array([0] * 5 + [1] * 5)
    _close(M.expected_calibration_error(y, probs, num_bins=10), 0.475)
    _close(M.expected_calibration_error(y, probs, num_bins=10, norm="max"), 0.475)
    ref = tmf.multiclass_calibration_error(torch.as_tensor(probs), torch.as_tensor(y), num_classes=2, n_bins=10)
    assert abs(float(ref) - 0.525) < 1e-6  # as the docs say, torchmetrics bins 1.0 apart


def test_ece_of_calibrated_predictor_is_near_zero_and_of_confidently_wrong_near_one():
    rng = np.random.default_rng(22)
    N, C = 20000, 3
    logits = rng.normal(size=(N, C)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    # perfectly calibrated: draw each label from the predicted distribution
    y = (rng.random(N)[:, None] > probs.cumsum(1)).sum(1)
    assert M.expected_calibration_error(y, probs) < 0.02
    bins = M.reliability_bins(y, probs, num_bins=10)
    full = bins.counts > 200
    assert torch.all((bins.accuracy[full] - bins.confidence[full]).abs() < 0.05)
    # confidently wrong: 0.999 on a class that is never the label
    wrong = np.full((N, C), 0.0005)
    wrong[np.arange(N), (y + 1) % C] = 0.999
    assert M.expected_calibration_error(y, wrong) > 0.99
    assert M.brier_score(y, wrong) > 1.9


def test_reliability_bins_fields():
    rng = np.random.default_rng(23)
    C, probs, y = _case(rng, N=300)
    bins = M.reliability_bins(y, probs, num_bins=8)
    assert bins.num_bins == 8 and bins.edges.shape == (9,)
    assert int(bins.counts.sum()) == 300
    nonempty = bins.counts > 0
    assert torch.all(bins.confidence[nonempty] >= bins.edges[:-1][nonempty] - 1e-12)
    assert torch.all(bins.confidence[nonempty] <= bins.edges[1:][nonempty] + 1e-12)
    assert torch.isnan(bins.accuracy[~nonempty]).all()
    weighted_gap = (bins.counts[nonempty] / 300 * (bins.accuracy - bins.confidence)[nonempty].abs()).sum()
    _close(bins.ece, weighted_gap)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: M.log_loss([0, 1], [[0.5, 0.6], [0.5, 0.5]]), "sum to 1"),
        (lambda: M.log_loss([0, 2], [[0.5, 0.5], [0.5, 0.5]]), "C=2"),
        (lambda: M.brier_score([0], [[math.nan, 1.0]]), "NaN"),
        (lambda: M.expected_calibration_error([0], [[0.5, 0.5]], num_bins=0), "num_bins"),
        (lambda: M.expected_calibration_error([0], [[0.5, 0.5]], norm="l3"), "norm"),
        (lambda: M.log_loss([0], torch.zeros(1, 2, 2)), "normalised"),
        (lambda: M.log_loss([0], [2.0]), r"\[0, 1\]"),
    ],
)
def test_calibration_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_evaluate_classification_reliability_bins_match_numpy():
    """The stored bins reproduce the record's ECE and a NumPy binning of the same predictions."""
    g = torch.Generator().manual_seed(3)
    probs = torch.softmax(3 * torch.randn(400, 5, generator=g, dtype=torch.float64), -1)
    targets = torch.randint(0, 5, (400,), generator=g)
    record = M.evaluate_classification(probs, targets, num_classes=5, num_bins=10)
    bins = record["reliability"]
    conf = probs.max(-1).values.numpy()
    correct = (probs.argmax(-1) == targets).numpy().astype(float)
    which = np.clip(np.ceil(conf * 10).astype(int) - 1, 0, 9)
    np.testing.assert_array_equal(bins["count"], np.bincount(which, minlength=10))
    np.testing.assert_allclose(bins["conf_sum"], np.bincount(which, weights=conf, minlength=10), atol=1e-9)
    np.testing.assert_allclose(bins["correct_sum"], np.bincount(which, weights=correct, minlength=10), atol=1e-9)
    count = np.asarray(bins["count"], dtype=float)
    ece = np.abs(np.asarray(bins["conf_sum"]) - np.asarray(bins["correct_sum"])).sum() / count.sum()
    assert record["ece"] == pytest.approx(ece, abs=1e-9)


# --------------------------------------------------------------------------- pooling stored bins


def _numpy_bins(probs: np.ndarray, y: np.ndarray, num_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(count_B, conf_mean_B, acc_B)`` by NumPy: equal-width bins [b/B, (b+1)/B), the last one closed."""
    conf, correct = probs.max(1), (probs.argmax(1) == y).astype(np.float64)
    which = np.minimum(np.floor(conf * num_bins).astype(int), num_bins - 1)
    count = np.bincount(which, minlength=num_bins).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return count, np.bincount(which, conf, num_bins) / count, np.bincount(which, correct, num_bins) / count


def _numpy_ece(probs: np.ndarray, y: np.ndarray, num_bins: int) -> float:
    count, conf, acc = _numpy_bins(probs, y, num_bins)
    full = count > 0
    return float(np.sum(count[full] / count.sum() * np.abs(acc[full] - conf[full])))


def test_pooled_bins_equal_numpy_bins_of_the_pooled_predictions():
    """Pool the bins runs store (evaluate_classification's record) and compare with NumPy on all items at once."""
    rng = np.random.default_rng(30)
    num_bins, C = 10, 4
    parts = []
    for N in (150, 90, 260):  # seeds of different test-set sizes
        _, probs, y = _case(rng, N=N, C=C)
        parts.append((probs, y))
    records = [M.evaluate_classification(p, y, num_classes=C, num_bins=num_bins)["reliability"] for p, y in parts]
    pooled = M.ReliabilityBins.pool([M.ReliabilityBins.from_record(r) for r in records])
    all_probs = np.concatenate([p for p, _ in parts])
    all_y = np.concatenate([y for _, y in parts])
    count, conf, acc = _numpy_bins(all_probs, all_y, num_bins)
    np.testing.assert_array_equal(pooled.counts.numpy(), count)
    _close(pooled.confidence, conf, tol=1e-12)
    _close(pooled.accuracy, acc, tol=1e-12)
    _close(pooled.ece, _numpy_ece(all_probs, all_y, num_bins), tol=1e-12)
    assert pooled.num_items == 500
    # the pooled ECE is the ECE of the pooled predictions, not the mean of the parts' ECEs
    per_part = [_numpy_ece(p, y, num_bins) for p, y in parts]
    assert abs(pooled.ece - np.mean(per_part)) > 1e-3
    weighted = np.average(per_part, weights=[len(y) for _, y in parts])
    assert pooled.ece <= weighted + 1e-12  # triangle inequality, bin by bin


def test_pooled_ece_is_at_most_the_mean_for_equal_sizes_and_cancels_opposite_errors():
    rng = np.random.default_rng(31)
    bins = []
    for _ in range(4):
        _, probs, y = _case(rng, N=200, C=3)
        bins.append(M.reliability_bins(y, probs, num_bins=15))
    pooled = M.ReliabilityBins.pool(bins)
    assert pooled.ece <= np.mean([b.ece for b in bins]) + 1e-12
    # one seed over-confident, one under-confident in the same bin: the pooled bin is calibrated
    over = M.ReliabilityBins.from_record({"count": [0, 10], "conf_sum": [0.0, 8.0], "correct_sum": [0, 6]})
    under = M.ReliabilityBins.from_record({"count": [0, 10], "conf_sum": [0.0, 8.0], "correct_sum": [0, 10]})
    _close([over.ece, under.ece, M.ReliabilityBins.pool([over, under]).ece], [0.2, 0.2, 0.0], tol=1e-12)


def test_record_round_trip_and_sums():
    rng = np.random.default_rng(32)
    _, probs, y = _case(rng, N=120, C=5)
    record = M.evaluate_classification(probs, y, num_classes=5, num_bins=8)
    bins = M.ReliabilityBins.from_record(record["reliability"])
    assert bins.to_record() == record["reliability"]
    _close(bins.ece, record["ece"], tol=1e-12)
    direct = M.reliability_bins(y, probs, num_bins=8)
    assert bins.counts.tolist() == direct.counts.tolist()
    _close(bins.conf_sum, direct.conf_sum, tol=1e-12)
    _close(bins.correct_sum, direct.correct_sum, tol=1e-12)
    single = M.ReliabilityBins.pool([bins])
    _close([single.ece, single.mce], [bins.ece, bins.mce], tol=0)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: M.ReliabilityBins.pool([]), ValueError, "at least one"),
        (lambda: M.ReliabilityBins.pool(M.reliability_bins([0], [[0.6, 0.4]])), TypeError, "sequence"),
        (lambda: M.ReliabilityBins.pool([{"count": [1]}]), TypeError, r"bins\[0\] must be a ReliabilityBins"),
        (lambda: M.ReliabilityBins.pool([M.reliability_bins([0], [[0.6, 0.4]], num_bins=n) for n in (5, 6)]),
         ValueError, r"same number of bins, got \[5, 6\]"),
        (lambda: M.ReliabilityBins.from_record({"counts": [1], "confidence": [0.5]}), ValueError,
         "missing count, conf_sum, correct_sum"),
        (lambda: M.ReliabilityBins.from_record([1, 2]), TypeError, "mapping"),
        (lambda: M.ReliabilityBins.from_record({"count": [1, 2], "conf_sum": [0.5], "correct_sum": [1]}),
         ValueError, "same length"),
        (lambda: M.ReliabilityBins.from_record({"count": [1.5], "conf_sum": [0.5], "correct_sum": [1]}),
         ValueError, "whole numbers"),
        (lambda: M.ReliabilityBins.from_record({"count": [1], "conf_sum": [0.5], "correct_sum": [2]}),
         ValueError, r"\[0, count\]"),
    ],
)
def test_pool_and_record_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
