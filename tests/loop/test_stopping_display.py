"""What the stopping signals show is what their criteria compare (new-user report on stopping:
D7, the stable predictions' 3-round mean; N1, no value below its threshold printed equal to it)."""

from __future__ import annotations

import math

import pytest
import torch

from activebayes.records import RoundRecord
from activebayes.stopping import (
    SIGNAL_WINDOW,
    STABLE_PREDICTIONS,
    encode_classes,
    round_signals,
    shown_beside,
    stable_predictions_means,
)

CLASSES_S = [s % 4 for s in range(40)]


def _record(r: int, kappa: float | None, **entry) -> RoundRecord:
    signals = {STABLE_PREDICTIONS: {"value": kappa, "predictions": encode_classes(CLASSES_S), "trained": True,
                                    **entry}}
    return RoundRecord(round=r, n_labelled=20 + 10 * r, acquired=[], scores=[], labels=[], metrics={},
                       class_counts=[], cost_spent=0.0, fit={}, seconds={}, signals=signals)


def _signals(history: list[RoundRecord], threshold: float) -> dict:
    """This round's signals for a model predicting ``CLASSES_S`` again (kappa 1 against the last)."""
    log_probs_S_K_C = torch.log(torch.nn.functional.one_hot(torch.tensor(CLASSES_S), 4).float() * 0.96 + 0.01)
    return round_signals(history, log_probs_S_K_C=log_probs_S_K_C[:, None, :], n_labelled=20 + 10 * len(history),
                         n_unlabelled=500, num_classes=4, thresholds={STABLE_PREDICTIONS: threshold}, budget=1000)


def test_the_window_mean_is_recorded_beside_the_single_round_kappa():
    """``value`` stays the single round's kappa (earlier runs and benchmarks/stopping.py read it);
    ``mean`` is the number the criterion compares with its threshold."""
    history = [_record(0, None), _record(1, 0.9), _record(2, 0.93)]
    entry = _signals(history, 0.95)[STABLE_PREDICTIONS]
    assert entry["value"] == 1.0
    assert entry["mean"] == pytest.approx((0.9 + 0.93 + 1.0) / 3)
    assert entry["fired"] is (entry["mean"] >= 0.95)
    assert _signals(history[:2], 0.95)[STABLE_PREDICTIONS]["mean"] is None  # the window is not full yet


def test_the_means_of_records_written_before_the_mean_was_kept_are_computed_as_recorded():
    history = [_record(0, None), _record(1, 0.9), _record(2, 0.93), _record(3, 0.96), _record(4, 0.99)]
    latest = _signals(history, 0.99)
    recorded = latest[STABLE_PREDICTIONS]["mean"]
    del latest[STABLE_PREDICTIONS]["mean"]  # as records written before the mean was kept
    computed = stable_predictions_means([r.signals for r in history] + [latest])
    assert computed[:3] == [None, None, None]  # the first round has no kappa: no full window before round 3
    assert computed[3] == (0.9 + 0.93 + 0.96) / SIGNAL_WINDOW and computed[4] == (0.93 + 0.96 + 0.99) / SIGNAL_WINDOW
    assert computed[5] == recorded  # equal, not approximately: the same sum round_signals made
    kept = [{STABLE_PREDICTIONS: {"value": 0.5, "mean": 0.123}}]
    assert stable_predictions_means(kept) == [0.123]  # a recorded mean is read as it is


def test_a_mean_just_below_the_threshold_is_not_printed_equal_to_it():
    """A 3-round mean of 0.94960 did not fire at 0.95; three decimals printed it as 0.950."""
    history = [_record(0, None), _record(1, 0.9244), _record(2, 0.9244)]
    entry = _signals(history, 0.95)[STABLE_PREDICTIONS]
    assert entry["mean"] == pytest.approx(0.9496) and not entry["fired"]
    assert "kappa 0.9496 over the last 3 rounds (stop at 0.95)" in entry["detail"]
    history = [_record(0, None), _record(1, 0.93), _record(2, 0.94)]  # far from it: three decimals as before
    assert "kappa 0.957 over the last 3 rounds" in _signals(history, 0.95)[STABLE_PREDICTIONS]["detail"]


@pytest.mark.parametrize(("value", "threshold", "digits", "percent", "text"), [
    (0.94960, 0.95, 3, False, "0.9496"),
    (0.95, 0.95, 3, False, "0.950"),
    (0.9576, 0.95, 3, False, "0.958"),
    (0.94996, 0.95, 3, False, "0.94996"),
    (0.95036, 0.95035, 3, False, "0.9504"),  # rounded to 0.950 it would read below the threshold
    (0.0049991, 0.005, 4, False, "0.004999"),
    (0.0196, 0.02, 1, True, "1.96%"),
    (0.0996, 0.1, 0, True, "9.96%"),
    (0.25, 0.1, 0, True, "25%"),
    (0.5, None, 3, False, "0.500"),
])
def test_shown_beside_prints_a_value_on_its_side_of_the_threshold(value, threshold, digits, percent, text):
    assert shown_beside(value, threshold, digits, percent=percent) == text


def test_shown_beside_leaves_a_number_that_is_not_finite_as_it_is():
    assert shown_beside(math.nan, 0.95, 3) == "nan"
