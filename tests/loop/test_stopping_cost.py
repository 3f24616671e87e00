"""The stopping signals cost one prediction pass over the stop set per round, nothing more (counted, not timed)."""

from __future__ import annotations

from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.stopping import STABLE_PREDICTIONS

FAST = dict(dataset="digits", strategy="bald", initial_size=20, validation_size=50, batch_size=10, budget=50,
            num_samples=5, eval_samples=3, cold_start=None, fit_options={"max_epochs": 1})
PREDICT = ActiveLearningLoop._predict


def _counted_run(monkeypatch, **changes):
    calls: list[tuple[str, int, int]] = []

    def counting(self, inputs, *, key, num_samples):
        calls.append((key, len(inputs), num_samples))
        return PREDICT(self, inputs, key=key, num_samples=num_samples)

    monkeypatch.setattr(ActiveLearningLoop, "_predict", counting)
    result = ActiveLearningLoop(LoopConfig(**{**FAST, **changes})).run(progress=False)
    return result.rounds, calls


def test_one_pass_over_the_stop_set_per_round(monkeypatch):
    rounds, calls = _counted_run(monkeypatch, stop_set_size=300)
    stop_set = [c for c in calls if c[0] == "stop-set"]
    assert len(rounds) == 4 and stop_set == [("stop-set", 300, 3)] * len(rounds)  # eval_samples functions
    assert all(r.signals[STABLE_PREDICTIONS]["detail"] for r in rounds)
    assert all(r.seconds["signals"] >= 0 for r in rounds)
    # every other pass is the loop's own (evaluation, ranking): without a stop set they are the same
    rounds_off, calls_off = _counted_run(monkeypatch, stop_set_size=0)
    assert all(r.signals is None for r in rounds_off)
    assert [c for c in calls if c[0] != "stop-set"] == calls_off
