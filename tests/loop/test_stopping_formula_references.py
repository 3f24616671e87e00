"""The stopping rules of docs/concepts/stopping.md against references written here.

The signals' values (kappa against scikit-learn, the exact interval against SciPy, the
remaining-change fit against ``linregress``, expected accuracy and information against
NumPy) are checked in test_stopping_signals.py. This module checks the rules that turn
them into a stop, as the docs state them, on a history written by hand: the expected
accuracy changed by less than its threshold in each of the last 3 rounds; the pool's
information fell below a fraction of the first model's; the Clopper-Pearson lower bound
of the last 3 rounds' pooled audits reached the threshold; and multi-label kappa is
two-class kappa over the S·C label decisions.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score

from activebayes.records import RoundRecord
from activebayes.stopping import (
    ESTIMATED_ACCURACY,
    EXPECTED_ACCURACY,
    INFORMATION,
    STABLE_PREDICTIONS,
    encode_classes,
    predicted_decisions,
    round_signals,
)

S, K, C = 60, 5, 3


def _log_probs(seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(2 * torch.randn(S, K, C, generator=g, dtype=torch.float64), -1)


def _record(r: int, signals: dict) -> RoundRecord:
    return RoundRecord(round=r, n_labelled=20 + 10 * r, acquired=[], scores=[], labels=[], metrics={},
                       class_counts=[], cost_spent=0.0, fit={}, seconds={}, signals=signals)


def _bald(p_S_K_C: np.ndarray) -> np.ndarray:
    def entropy(q):
        return -(q * np.log(q)).sum(-1)

    return entropy(p_S_K_C.mean(1)) - entropy(p_S_K_C).mean(1)


def _signals(history, log_probs, thresholds, n_unlabelled=400):
    return round_signals(history, log_probs_S_K_C=log_probs, n_labelled=20 + 10 * len(history),
                         n_unlabelled=n_unlabelled, num_classes=C, thresholds=thresholds, budget=1000)


@pytest.mark.parametrize(("changes", "fires"), [((0.004, -0.003, 0.0049), True), ((0.004, 0.006, 0.001), False),
                                                ((0.0, 0.0, 0.0051), False),
                                                ((0.0051, 0.001, -0.001), False)])
def test_expected_accuracy_fires_when_each_of_the_last_three_changes_is_below_the_threshold(changes, fires):
    log_probs = _log_probs(0)
    now = float(log_probs.exp().mean(1).max(-1).values.mean())  # 1/S Σ_s max_c p̄_s(c)
    values = [now]
    for change in reversed(changes):
        values.insert(0, values[0] - change)
    history = [_record(0, {EXPECTED_ACCURACY: {"value": 0.2}})]  # a fourth round back: outside the window
    history += [_record(r + 1, {EXPECTED_ACCURACY: {"value": v}}) for r, v in enumerate(values[:-1])]
    entry = _signals(history, log_probs, {EXPECTED_ACCURACY: 0.005})[EXPECTED_ACCURACY]
    assert entry["value"] == pytest.approx(now, abs=1e-12)
    assert entry["fired"] is fires


@pytest.mark.parametrize(("times_now", "fires"), [(None, False), (5.0, False), (20.0, True)])
def test_information_fires_below_a_fraction_of_the_first_models(times_now, fires):
    """I_pool = N_u · 1/S Σ_s I[y_s; w] (NumPy BALD); it fires below 0.1 of the first trained model's
    value (``times_now``: the first value as a multiple of the current one; None: not measured then)."""
    log_probs = _log_probs(1)
    expected = float(400 * _bald(log_probs.exp().numpy()).mean())
    first = None if times_now is None else times_now * expected
    history = [_record(0, {INFORMATION: {"value": None}}), _record(1, {INFORMATION: {"value": first}}),
               _record(2, {INFORMATION: {"value": 0.5 * expected}})]
    entry = _signals(history, log_probs, {INFORMATION: 0.1})[INFORMATION]
    assert entry["value"] == pytest.approx(expected, rel=1e-10)
    assert entry["fired"] is fires


def test_estimated_accuracy_pools_the_last_three_rounds_audits_into_a_clopper_pearson_bound():
    audits = [(10, 2), (12, 11), (9, 9), (8, 7)]  # (n, correct); the first is outside the window
    history = [_record(r, {"audit": {"n": n, "correct": k}}) for r, (n, k) in enumerate(audits)]
    n, k = 12 + 9 + 8, 11 + 9 + 7
    interval = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    for threshold in (interval.low - 0.01, interval.low + 0.01):
        entry = _signals(history, _log_probs(2), {ESTIMATED_ACCURACY: threshold})[ESTIMATED_ACCURACY]
        assert (entry["n"], entry["value"]) == (n, pytest.approx(k / n))
        assert entry["low"] == pytest.approx(interval.low, abs=1e-9)
        assert entry["high"] == pytest.approx(interval.high, abs=1e-9)
        assert entry["fired"] is (threshold <= interval.low)


def test_stable_predictions_is_the_mean_kappa_of_the_last_three_rounds():
    """κ = (p_o - p_e) / (1 - p_e) between successive models (scikit-learn), averaged over 3 rounds."""
    log_probs = _log_probs(3)
    now = predicted_decisions(log_probs)
    rng = np.random.default_rng(0)
    previous = np.where(rng.random(S) < 0.8, now, rng.integers(0, C, S))
    history = [_record(0, {STABLE_PREDICTIONS: {"value": 0.97, "trained": True}}),
               _record(1, {STABLE_PREDICTIONS: {"value": 0.99, "trained": True,
                                                "predictions": encode_classes(previous)}})]
    entry = _signals(history, log_probs, {STABLE_PREDICTIONS: 0.5})[STABLE_PREDICTIONS]
    kappa = cohen_kappa_score(previous, now)
    assert entry["value"] == pytest.approx(kappa, abs=1e-12)
    assert entry["mean"] == pytest.approx((0.97 + 0.99 + kappa) / 3, abs=1e-12)


def test_multilabel_kappa_is_two_class_kappa_over_every_label_decision():
    """Multi-label: decisions ŷ_sc = [p̄_sc >= 1/2] flattened item by item, kappa with two classes."""
    g = torch.Generator().manual_seed(4)
    log_p1 = torch.nn.functional.logsigmoid(2 * torch.randn(S, K, 4, generator=g, dtype=torch.float64))
    decisions = (log_p1.exp().mean(1) >= 0.5).reshape(-1).long().numpy()
    assert np.array_equal(predicted_decisions(log_p1, multilabel=True), decisions)
    rng = np.random.default_rng(1)
    previous = np.where(rng.random(decisions.size) < 0.9, decisions, 1 - decisions)
    history = [_record(0, {STABLE_PREDICTIONS: {"value": None, "trained": True,
                                                "predictions": encode_classes(previous, bits=True)}})]
    entry = round_signals(history, log_probs_S_K_C=log_p1, n_labelled=30, n_unlabelled=100, num_classes=4,
                          thresholds={}, multilabel=True)[STABLE_PREDICTIONS]
    assert entry["value"] == pytest.approx(cohen_kappa_score(previous, decisions), abs=1e-12)


def test_stored_predictions_keep_class_ids_beyond_uint16():
    """Class ids of 65,536 or more wrapped round in the stored stop-set predictions (uint16), so
    kappa compared the wrong classes; they are stored as uint32 then, and small ids as before."""
    import numpy as np

    from activebayes.stopping import decode_classes

    large = np.array([0, 7, 65_535, 65_536, 100_000])
    assert decode_classes(encode_classes(large)).tolist() == large.tolist()
    small = np.array([3, 1, 2])
    assert decode_classes(encode_classes(small)).tolist() == [3, 1, 2]
    assert not encode_classes(small).startswith("u4:")  # records written before read the same


def test_total_information_checks_its_pool_size():
    """n_unlabelled=-5 gave a negative total and 2.5 was truncated; both are named now."""
    import torch

    from activebayes.stopping import total_information

    log_probs_S_K_C = torch.log_softmax(torch.randn(5, 3, 4, generator=torch.Generator().manual_seed(0)), -1)
    with pytest.raises(ValueError, match=r"^n_unlabelled must be >= 0, got -5$"):
        total_information(log_probs_S_K_C, -5)
    with pytest.raises(TypeError, match=r"^n_unlabelled must be an int, got float 2.5$"):
        total_information(log_probs_S_K_C, 2.5)
    assert total_information(log_probs_S_K_C, 0) == 0.0


def test_remaining_change_names_predictions_on_different_stop_sets():
    """Rows of different lengths gave NumPy's 'setting an array element with a sequence'."""
    from activebayes.stopping import remaining_change

    with pytest.raises(ValueError, match=r"^classes_W_S must be \[W, S\] .*got rows of 2, 3 items$"):
        remaining_change([[0, 1, 2], [0, 1], [1, 1, 1]], [10, 20, 30], 50)
