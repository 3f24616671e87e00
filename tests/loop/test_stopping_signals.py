"""Stopping without a test set: the signals against independent references, and in the loop."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import binomtest
from sklearn.metrics import cohen_kappa_score, f1_score

from activebayes.errors import InvalidArgumentError
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.stopping import (
    ESTIMATED_ACCURACY,
    EXPECTED_ACCURACY,
    INFORMATION,
    STABLE_PREDICTIONS,
    cohen_kappa,
    decode_classes,
    encode_classes,
    expected_accuracy,
    parse_stop_when,
    per_predicted_label,
    predicted_decisions,
    remaining_change,
    total_information,
    exact_interval,
)
from tests.conftest import multilabel_toy


@pytest.mark.parametrize("seed", range(5))
def test_cohen_kappa_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, 200)
    b = np.where(rng.random(200) < 0.7, a, rng.integers(0, 4, 200))
    assert cohen_kappa(a, b, 4) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert cohen_kappa(a, a, 4) == pytest.approx(1.0)


@pytest.mark.parametrize(("k", "n", "confidence"), [(0, 5, 0.9), (3, 7, 0.9), (6, 6, 0.9), (19, 20, 0.95),
                                                    (50, 100, 0.8), (990, 1000, 0.9)])
def test_exact_interval_matches_scipy_clopper_pearson(k, n, confidence):
    want = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    low, high = exact_interval(k, n, confidence)
    assert low == pytest.approx(want.low, abs=1e-9) and high == pytest.approx(want.high, abs=1e-9)


@pytest.mark.parametrize("n", [6, 12, 30])
def test_exact_interval_covers_at_least_the_nominal_share_for_every_p(n):
    """Coverage summed exactly over the binomial: never below 90%, whatever the accuracy
    (Wilson's interval, used before, covered 87.5% on the MNIST-ssl stopping runs)."""
    from scipy.stats import binom

    intervals = [exact_interval(k, n, 0.9) for k in range(n + 1)]
    for p in np.linspace(0.01, 0.99, 99):
        coverage = sum(binom.pmf(k, n, p) for k, (lo, hi) in enumerate(intervals) if lo <= p <= hi)
        assert coverage >= 0.9 - 1e-9, (p, coverage)


def test_expected_accuracy_and_total_information_match_numpy_float64():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(30, 6, 4))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    probs = np.exp(log_probs)
    mean = probs.mean(1)
    want_accuracy = mean.max(-1).mean()
    entropy_of_mean = -(mean * np.log(mean)).sum(-1)
    mean_entropy = -(probs * log_probs).sum(-1).mean(1)
    want_information = 123 * (entropy_of_mean - mean_entropy).mean()
    tensor = torch.tensor(log_probs, dtype=torch.float32)
    assert expected_accuracy(tensor) == pytest.approx(want_accuracy, rel=1e-5)
    assert total_information(tensor, 123) == pytest.approx(want_information, rel=1e-4)


def test_class_codes_round_trip():
    classes = np.array([0, 9, 3, 700, 2])
    assert np.array_equal(decode_classes(encode_classes(classes)), classes)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1003])
def test_label_decisions_pack_to_bits_and_round_trip(n):
    bits = np.random.default_rng(n).integers(0, 2, n)
    text = encode_classes(bits, bits=True)
    assert np.array_equal(decode_classes(text), bits)
    if n > 1000:
        assert len(text) < len(encode_classes(bits)) / 10  # 1 bit an item, not 16


def _multilabel_log_probs(seed: int, S: int = 40, K: int = 6, C: int = 5) -> np.ndarray:
    """Per-label Bernoulli log p(y_c = 1) of K functions, float64."""
    logits = np.random.default_rng(seed).normal(scale=2.0, size=(S, K, C))
    return -np.logaddexp(0.0, -logits)


def test_multilabel_signals_match_numpy_float64():
    """Decisions, the expected micro-F1 and BALD summed over labels, from the per-label
    Bernoulli posterior, against float64 formulas written out here."""
    log_p1 = _multilabel_log_probs(0)
    p1 = np.exp(log_p1)
    p0 = 1.0 - p1
    mean_p1 = p1.mean(1)
    tensor = torch.tensor(log_p1, dtype=torch.float64)
    decisions = predicted_decisions(tensor, multilabel=True)
    assert decisions.shape == (40 * 5,) and np.array_equal(decisions, (mean_p1 > 0.5).reshape(-1).astype(int))
    yhat = mean_p1 > 0.5
    tp, fp, fn = (yhat * mean_p1).sum(), (yhat * (1 - mean_p1)).sum(), ((1 - yhat) * mean_p1).sum()
    assert expected_accuracy(tensor, multilabel=True) == pytest.approx(2 * tp / (2 * tp + fp + fn), rel=1e-12)
    # a calibrated posterior's expected micro-F1 is close to the micro-F1 of labels drawn from it
    rng = np.random.default_rng(1)
    drawn = [f1_score((rng.random(mean_p1.shape) < mean_p1).reshape(-1), yhat.reshape(-1)) for _ in range(400)]
    assert expected_accuracy(tensor, multilabel=True) == pytest.approx(np.mean(drawn), abs=0.01)

    def h(q):
        return -(q * np.log(q) + (1 - q) * np.log(1 - q))

    bald_S = (h(mean_p1) - h(p1).mean(1)).sum(-1)  # I(y_c; w) summed over the labels
    assert total_information(tensor, 77, multilabel=True) == pytest.approx(77 * bald_S.mean(), rel=1e-9)
    assert np.all(p0 >= 0)


def test_remaining_change_on_label_decisions_counts_changed_decisions():
    """Three models' label decisions on 100 items x 4 labels: the fit's disagreements are
    shares of the 400 decisions (here 0, 8 and 8 changed between models 10 labels apart);
    a multi-label run reports them per predicted label (the last model predicts 16)."""
    base = np.zeros(400, dtype=int)
    second, third = base.copy(), base.copy()
    second[:8] = 1
    third[:16] = 1
    fit = remaining_change([base, second, third], [10, 20, 30], horizon=10, margin=0.0)
    # pairs: d(1,2) = 8/400 over 10 labels, d(2,3) = 8/400 over 10, d(1,3) = 16/400 over 20: floor 0, drift 0.002
    assert fit.floor == pytest.approx(0.0, abs=1e-12) and fit.drift == pytest.approx(0.002)
    assert fit.value == pytest.approx(0.02)
    per_label = per_predicted_label(fit, third)
    assert per_label.value == pytest.approx(0.02 * 400 / 16) and per_label.drift == pytest.approx(0.002 * 25)
    assert per_label.floor == pytest.approx(0.0, abs=1e-12) and per_label.horizon == 10


@pytest.mark.parametrize(
    ("specs", "match"),
    [
        (["nope"], "unknown criterion 'nope'"),
        (["information=2"], "information's threshold"),
        (["stable_predictions=0"], "stable_predictions's threshold"),
        (["estimated_accuracy"], "needs a threshold"),
        (["information=abc"], "must be a number"),
        (["remaining_change="], r"remaining_change= needs a number after '='"),
        ("remaining_change,remaining_change=0.02", "remaining_change is given twice"),
        (["information", "information=0.2"], "information is given twice"),
    ],
)
def test_bad_stop_when_names_the_flag(specs, match):
    with pytest.raises(InvalidArgumentError, match=match) as info:
        parse_stop_when(specs)
    assert "--stop-when" in str(info.value)


def test_parse_stop_when_fills_defaults():
    assert parse_stop_when("stable-predictions, information=0.05") == {STABLE_PREDICTIONS: 0.99, INFORMATION: 0.05}


def test_config_refuses_an_estimate_without_audits_and_a_stop_set():
    with pytest.raises(InvalidArgumentError, match="--audit-fraction"):
        LoopConfig(stop_when=("estimated_accuracy=0.9",))
    with pytest.raises(InvalidArgumentError, match="stop_set_size"):
        LoopConfig(stop_when=("information",), stop_set_size=0)
    with pytest.raises(InvalidArgumentError, match=r"stop_set_size \(--stop-set-size\) must be at least 100 .* got 1:"):
        LoopConfig(stop_when=("remaining_change",), stop_set_size=1)
    LoopConfig(stop_when=("remaining_change",), stop_set_size=100)
    LoopConfig(stop_set_size=1)  # signals recorded only: the run never stops on them
    with pytest.raises(InvalidArgumentError, match="audit_fraction"):
        LoopConfig(audit_fraction=1.5)


FAST = dict(dataset="digits", initial_size=20, validation_size=50, batch_size=10, num_samples=5, eval_samples=5,
            cold_start=None, fit_options={"max_epochs": 2}, stop_set_size=300)


def test_the_loop_records_every_signal_and_audits_uniform_items():
    config = LoopConfig(strategy="bald", budget=60, audit_fraction=0.3, **FAST)
    loop = ActiveLearningLoop(config)
    result = loop.run(progress=False)
    rounds = result.rounds
    assert [r.n_labelled for r in rounds] == [20, 30, 40, 50, 60]
    for r in rounds:
        assert set(r.signals) >= {STABLE_PREDICTIONS, EXPECTED_ACCURACY, INFORMATION, ESTIMATED_ACCURACY}
        assert not any(s["fired"] for name, s in r.signals.items() if name != "audit")  # none in stop_when
    assert rounds[0].signals[STABLE_PREDICTIONS]["value"] is None  # nothing to compare with yet
    assert all(r.signals[STABLE_PREDICTIONS]["value"] is not None for r in rounds[1:])
    # 3 audited items a round: their scores are NaN (not picked by BALD), answered and counted
    for r in rounds[:-1]:
        assert sum(math.isnan(s) for s in r.scores) == 3
        audit = r.signals["audit"]
        assert audit["n"] == 3 and 0 <= audit["correct"] <= 3
    n = sum(r.signals["audit"]["n"] for r in rounds[1:4])
    correct = sum(r.signals["audit"]["correct"] for r in rounds[1:4])
    assert rounds[-1].signals[ESTIMATED_ACCURACY]["value"] == pytest.approx(correct / n)
    # the stop set is fixed: the same items every round, drawn from the initially unlabelled pool
    assert len(loop.stop_set_N) == 300


def test_a_multilabel_run_records_the_signals_on_label_decisions_and_audits_label_sets():
    """The signals of a multi-label run compare label decisions ([S * C] bits a model); the
    audited answers count an item right when every label's decision is; a criterion stops it."""
    data = multilabel_toy()
    train, test = data.subset(torch.arange(250)), data.subset(torch.arange(250, 300))
    config = LoopConfig(strategy="multilabel_bald", budget=38, initial_size=8, validation_size=30, batch_size=6,
                        num_samples=6, eval_samples=4, cold_start=None, fit_options={"max_epochs": 2},
                        stop_set_size=100, audit_fraction=0.5, stop_when=("stable_predictions=0.05",))
    loop = ActiveLearningLoop(config, dataset=train, test=test)
    result = loop.run(progress=False)
    rounds = result.rounds
    for r in rounds:
        assert set(r.signals) >= {STABLE_PREDICTIONS, EXPECTED_ACCURACY, INFORMATION, ESTIMATED_ACCURACY}
        assert len(decode_classes(r.signals[STABLE_PREDICTIONS]["predictions"])) == 100 * 4
        assert "micro-F1" in r.signals[EXPECTED_ACCURACY]["detail"]
    # kappa over the decisions of successive models, two classes (as scikit-learn computes it)
    a, b = (decode_classes(r.signals[STABLE_PREDICTIONS]["predictions"]) for r in rounds[:2])
    assert rounds[1].signals[STABLE_PREDICTIONS]["value"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    # 3 audited items a round, right only when the whole label set is
    for r in rounds[:-1]:
        assert r.signals["audit"]["n"] == 3 and 0 <= r.signals["audit"]["correct"] <= 3
    # stable_predictions at kappa 0.05 over 3 rounds stops the run as soon as it is measured
    last = rounds[-1]
    assert last.stop_kind == STABLE_PREDICTIONS and last.n_labelled < config.budget
    assert "label decisions have stopped changing" in last.stop_reason
    assert not any(r.signals[STABLE_PREDICTIONS]["fired"] for r in rounds[:-1])


def test_a_multilabel_audit_answer_is_right_only_when_every_label_is():
    from activebayes.loop import _audit_answers

    class Proposal:
        ranking = [5, 6, 7]
        audit = [5, 6, 7]
        probs = [[0.9, 0.2, 0.6], [0.9, 0.2, 0.6], [0.4, 0.7, 0.1]]

    answers = torch.tensor([[1, 0, 1], [1, 1, 1], [0, 1, 0]])
    assert _audit_answers(Proposal(), torch.tensor([5, 6, 7]), answers) == {"n": 3, "correct": 2}


def test_a_signal_in_stop_when_stops_the_run_and_names_its_kind():
    config = LoopConfig(strategy="random", budget=200, stop_when=("information=0.99",), **FAST)
    result = ActiveLearningLoop(config).run(progress=False)
    last = result.rounds[-1]
    assert last.stop_kind == INFORMATION and last.n_labelled < 200
    assert "information" in last.stop_reason
    assert last.signals[INFORMATION]["fired"]
    assert not any(r.signals[INFORMATION]["fired"] for r in result.rounds[:-1])


def test_signals_are_reproduced_by_a_resumed_loop():
    config = LoopConfig(strategy="bald", budget=50, audit_fraction=0.2, **FAST)
    whole = ActiveLearningLoop(config).run(progress=False).rounds
    resumed = ActiveLearningLoop(config)
    resumed.restore(whole[:2])
    rest = resumed.run(progress=False).rounds[2:]
    assert [r.signals for r in rest] == [r.signals for r in whole[2:]]


@pytest.mark.parametrize("round_seeds", ["per_round", "shared"])
def test_round_seeds_shared_starts_every_round_from_the_same_random_stream(monkeypatch, round_seeds):
    config = LoopConfig(strategy="bald", budget=60, round_seeds=round_seeds, **FAST)
    loop = ActiveLearningLoop(config)
    initial: list[torch.Tensor] = []
    build = loop._build_posterior

    def spy(r):
        posterior = build(r)
        initial.append(next(posterior.module.parameters()).detach().clone())
        return posterior

    monkeypatch.setattr(loop, "_build_posterior", spy)
    loop.run()
    assert len(initial) >= 3
    same = [torch.equal(initial[0], w) for w in initial[1:]]
    assert all(same) if round_seeds == "shared" else not any(same)
    # the stop set's functions too: kappas come from the same draws each round when shared
    kappas = [r.signals["stable_predictions"]["value"] for r in loop.history[1:]]
    assert all(k is not None for k in kappas)


def test_round_seeds_rejects_unknown_values():
    with pytest.raises(InvalidArgumentError, match="round_seeds"):
        LoopConfig(round_seeds="sometimes")


# --------------------------------------------------------------------------- remaining change


def _noisy_copies(truth_S, n_models, flip, rng, num_classes=10):
    """``n_models`` labellings of the same items, each flipping its own random ``flip`` share."""
    out = []
    for _ in range(n_models):
        classes = truth_S.copy()
        flipped = rng.random(len(classes)) < flip
        classes[flipped] = (classes[flipped] + rng.integers(1, num_classes, flipped.sum())) % num_classes
        out.append(classes)
    return np.stack(out)


def _g(n: float, decay: float) -> float:
    """The integrated drift rate, written out in Python floats: d/dn g(n) = n^-decay."""
    return math.log(n) if decay == 1.0 else n ** (1.0 - decay) / (1.0 - decay)


@pytest.mark.parametrize("seed", range(4))
def test_remaining_change_fit_matches_scipy_linregress(seed):
    from scipy.stats import linregress

    from activebayes.stopping import CHANGE_DECAYS, CHANGE_MARGIN, remaining_change

    rng = np.random.default_rng(seed)
    classes_W_S = rng.integers(0, 4, size=(8, 300))
    n_W = np.sort(rng.choice(np.arange(20, 400, 10), size=8, replace=False))
    fit = remaining_change(classes_W_S, n_W, horizon=150)
    # the pairs, written out one by one in float64; one regression per decay, the smallest residual kept
    best = None
    for decay in CHANGE_DECAYS:
        lags, shares = [], []
        for i in range(8):
            for j in range(i + 1, 8):
                lags.append(_g(float(n_W[j]), decay) - _g(float(n_W[i]), decay))
                shares.append(float(np.mean(classes_W_S[i] != classes_W_S[j])))
        reference = linregress(lags, shares)
        rss = sum((y - reference.intercept - reference.slope * x) ** 2 for x, y in zip(lags, shares))
        if best is None or rss < best[0]:
            best = (rss, decay, reference)
    _, decay, reference = best
    assert fit.decay == decay and fit.n_labelled == n_W[-1]
    assert fit.drift == pytest.approx(reference.slope, rel=1e-7, abs=1e-15)
    assert fit.floor == pytest.approx(reference.intercept, rel=1e-9)
    assert fit.drift_se == pytest.approx(reference.stderr, rel=1e-7)
    n = float(n_W[-1])
    assert fit.value == pytest.approx(max(reference.slope + CHANGE_MARGIN * reference.stderr, 0.0)
                                      * (_g(n + 150, decay) - _g(n, decay)), rel=1e-7, abs=1e-15)


@pytest.mark.parametrize("decay", [0.0, 1.0, 2.0])
def test_remaining_change_finds_how_fast_the_drift_decays_and_projects_with_it(decay):
    """Models whose predictions move at a rate ``rate * n^-decay`` (plus retraining noise): the fit
    picks that decay, and projects the share still to move over the horizon."""
    from activebayes.stopping import remaining_change

    rng = np.random.default_rng(1)
    S = 20000
    truth_S = rng.integers(0, 10, S)
    order_S = rng.permutation(S)
    n_W = np.arange(100, 260, 10)
    rate = 0.3 * 100.0 ** decay / 100  # 0.3% of the stop set per label at n = 100, whatever the decay
    classes = []
    for n in n_W:
        c = truth_S.copy()
        noisy = rng.random(S) < 0.01
        c[noisy] = (c[noisy] + rng.integers(1, 10, noisy.sum())) % 10
        moved = order_S[: int(rate * (_g(float(n), decay) - _g(100.0, decay)) * S)]
        c[moved] = (truth_S[moved] + 5) % 10
        classes.append(c)
    fit = remaining_change(np.stack(classes), n_W, horizon=250, margin=0.0)
    assert fit.decay == decay
    assert fit.drift == pytest.approx(rate, rel=0.1)
    truth = rate * (_g(500.0, decay) - _g(250.0, decay))
    assert fit.value == pytest.approx(truth, rel=0.1)


def test_remaining_change_discounts_retraining_noise_that_kappa_does_not():
    from activebayes.stopping import CHANGE_WINDOW, REMAINING_CHANGE, SIGNALS, remaining_change

    rng = np.random.default_rng(0)
    truth_S = rng.integers(0, 10, 5000)
    n_W = np.arange(200, 200 + 10 * CHANGE_WINDOW, 10)
    # converged: every model is the same function plus its own 2% of retraining noise
    settled_W_S = _noisy_copies(truth_S, CHANGE_WINDOW, 0.02, rng)
    fit = remaining_change(settled_W_S, n_W, horizon=200)
    assert fit.floor == pytest.approx(0.04, abs=0.005)  # two models' noise disagree on ~2 * 2%
    assert fit.value < SIGNALS[REMAINING_CHANGE][0]  # fires at the default threshold...
    kappas = [cohen_kappa(a, b, 10) for a, b in zip(settled_W_S, settled_W_S[1:])]
    assert np.mean(kappas[-3:]) < 0.99  # ...where stabilising predictions at 0.99 never would
    # still learning: on top of the same noise, 0.1% of the items switch class per label
    order_S = rng.permutation(len(truth_S))
    drifting = []
    for k, n in enumerate(n_W):
        classes = settled_W_S[k].copy()
        moved = order_S[: int(0.001 * (n - n_W[0]) * len(truth_S))]
        classes[moved] = (truth_S[moved] + 5) % 10
        drifting.append(classes)
    fit = remaining_change(np.stack(drifting), n_W, horizon=200)
    assert fit.drift == pytest.approx(0.001, rel=0.15)
    assert fit.value > 0.15  # 0.1% per label over 200 labels: about 20% of the predictions


def test_remaining_change_needs_three_models_at_two_label_counts():
    from activebayes.stopping import remaining_change

    classes = np.zeros((8, 10), dtype=np.int64)
    assert remaining_change(classes[:2], [10, 20], 10) is None
    assert remaining_change(classes, [10] * 8, 10) is None
    assert remaining_change(classes, range(10, 90, 10), 10).value == 0.0  # identical models: nothing left


def test_remaining_change_refuses_label_counts_that_are_not_positive():
    from activebayes.stopping import remaining_change

    classes = np.zeros((4, 10), dtype=np.int64)
    with pytest.raises(InvalidArgumentError, match=r"n_labelled_W: expected label counts above 0, got \[0.0, 10.0"):
        remaining_change(classes, [0, 10, 20, 30], 10)


def test_a_recorded_entry_is_rejudged_with_its_own_decay_and_one_without_as_a_constant_drift():
    from activebayes.stopping import rejudge_remaining_change

    entry = {"value": 0.5, "fired": False, "drift": 2.0, "drift_se": 0.5, "floor": 0.03, "horizon": 10,
             "detail": "predictions are still changing: ..."}
    old = rejudge_remaining_change(entry, 100, 400, 0.005)  # written before the decay was fitted
    assert old["value"] == pytest.approx((2.0 + 2 * 0.5) * 100) and old["decay"] == 0.0
    new = rejudge_remaining_change({**entry, "decay": 2.0}, 100, 400, 0.005)
    assert new["value"] == pytest.approx((2.0 + 2 * 0.5) * (1 / 100 - 1 / 200)) and new["horizon"] == 100
    log = rejudge_remaining_change({**entry, "decay": 1.0}, 100, 130, 0.005)
    assert log["value"] == pytest.approx(3.0 * math.log(130 / 100)) and log["horizon"] == 30


def test_change_horizon_is_the_budget_left_and_at_most_as_many_labels_again():
    from activebayes.stopping import change_horizon

    assert change_horizon(100, 450) == 100
    assert change_horizon(400, 450) == 50
    assert change_horizon(100, None) == 100
    assert change_horizon(500, 450) == 0


def test_the_loop_records_the_remaining_change_from_the_windows_last_model():
    from activebayes.stopping import CHANGE_WINDOW, REMAINING_CHANGE, SIGNALS, change_horizon, remaining_change

    config = LoopConfig(strategy="random", budget=190, **FAST)
    rounds = ActiveLearningLoop(config).run(progress=False).rounds
    assert len(rounds) == 18 and CHANGE_WINDOW < 18
    for k, r in enumerate(rounds):
        entry = r.signals[REMAINING_CHANGE]
        if k < CHANGE_WINDOW - 1:
            assert entry["value"] is None and not entry["fired"]
            continue
        window = rounds[k - CHANGE_WINDOW + 1: k + 1]
        classes = [decode_classes(q.signals[STABLE_PREDICTIONS]["predictions"]) for q in window]
        horizon = change_horizon(r.n_labelled, 190)
        if horizon == 0:  # the last round: nothing left to change
            assert entry["value"] is None and "budget is spent" in entry["detail"]
            continue
        fit = remaining_change(classes, [q.n_labelled for q in window], horizon)
        assert entry["value"] == pytest.approx(fit.value) and entry["horizon"] == horizon
        assert entry["fired"] == (fit.value < SIGNALS[REMAINING_CHANGE][0])
        assert f"next {horizon} labels" in entry["detail"]


def test_the_remaining_change_is_reproduced_on_resume_and_never_bridges_lost_predictions():
    import dataclasses

    from activebayes.stopping import CHANGE_WINDOW, REMAINING_CHANGE

    config = LoopConfig(strategy="random", budget=20 + 10 * (CHANGE_WINDOW + 2), **FAST)
    whole = ActiveLearningLoop(config).run(progress=False).rounds
    resumed = ActiveLearningLoop(config)
    resumed.restore(whole[:CHANGE_WINDOW])
    rest = resumed.run(progress=False).rounds[CHANGE_WINDOW:]
    assert rest[0].signals[REMAINING_CHANGE]["value"] is not None  # (the last: the budget is spent)
    assert [r.signals for r in rest] == [r.signals for r in whole[CHANGE_WINDOW:]]
    # a record whose predictions were dropped (compacted) ends the window: no fit over a gap
    cut = [dataclasses.replace(r, signals={**r.signals, STABLE_PREDICTIONS: {
        k: v for k, v in r.signals[STABLE_PREDICTIONS].items() if k != "predictions"}}) if i == 5 else r
        for i, r in enumerate(whole[:CHANGE_WINDOW + 1])]
    resumed = ActiveLearningLoop(config)
    resumed.restore(cut)
    after_gap = resumed.run(progress=False).rounds[CHANGE_WINDOW + 1]
    assert whole[CHANGE_WINDOW + 1].signals[REMAINING_CHANGE]["value"] is not None
    assert after_gap.signals[REMAINING_CHANGE]["value"] is None  # too few models since the gap


def test_remaining_change_in_stop_when_stops_the_run_at_the_windows_last_model():
    from activebayes.stopping import CHANGE_WINDOW, REMAINING_CHANGE

    config = LoopConfig(strategy="random", budget=200, stop_when=("remaining_change=0.99",), **FAST)
    rounds = ActiveLearningLoop(config).run(progress=False).rounds
    last = rounds[-1]
    assert last.stop_kind == REMAINING_CHANGE  # 20, 30, ...: the first round with a full window
    assert len(rounds) == CHANGE_WINDOW and last.n_labelled == 20 + 10 * (CHANGE_WINDOW - 1)
    assert last.stop_reason.startswith("predictions have settled") and "stop below 99%" in last.stop_reason


def test_remaining_change_is_a_stop_when_criterion_with_its_range_checked():
    from activebayes.stopping import REMAINING_CHANGE

    assert parse_stop_when(["remaining_change"]) == {REMAINING_CHANGE: 0.005}
    assert parse_stop_when("remaining-change=0.05") == {REMAINING_CHANGE: 0.05}
    with pytest.raises(InvalidArgumentError, match=r"--stop-when.*remaining_change.*got 1.5"):
        parse_stop_when(["remaining_change=1.5"])


def test_the_stopping_benchmark_rejudges_the_remaining_change_as_the_loop_recorded_it(monkeypatch):
    """benchmarks/stopping.py recomputes the signal from stored predictions (for runs made
    before it existed): on a run that recorded it, it must fire exactly where the loop's did."""
    from activebayes.stopping import REMAINING_CHANGE
    from tests.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping as benchmark

    config = LoopConfig(strategy="random", budget=200, stop_when=("remaining_change=0.2",), **FAST)
    rounds = [r.to_dict() for r in ActiveLearningLoop(config).run(progress=False).rounds]
    recorded = next(i for i, r in enumerate(rounds) if r["signals"][REMAINING_CHANGE]["fired"])
    assert benchmark._fires(rounds, REMAINING_CHANGE, 0.2, budget=200) == recorded
    assert benchmark._fires(rounds, REMAINING_CHANGE, 1e-9, budget=200) is None


def test_the_stopping_benchmark_names_each_runs_folder_by_what_it_changes(monkeypatch, capsys):
    """--batch-size and --budget each get their own folder (runs of another protocol never mix
    with the committed ones); a budget not above the initial labels is a usage error."""
    from tests.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping as benchmark

    assert benchmark.run_name("digits") == "digits"
    assert benchmark.run_name("digits", batch_size=5) == "digits-b5"
    assert benchmark.run_name("wordnet_nouns", budget=2048) == "wordnet_nouns-budget2048"
    assert benchmark.run_name("mnist", "self-supervised", "shared", 50, None, 600) == "mnist-ssl-e50-shared-budget600"
    with pytest.raises(SystemExit):
        benchmark.main(["--dataset", "digits", "--budget", "20", "--seeds", "0"])
    assert "--budget must exceed the protocol's 20 initial labels, got 20" in capsys.readouterr().err


def test_the_stopping_benchmark_keeps_runs_made_after_the_choice_apart(monkeypatch, capsys):
    """--after-choice runs go to their own folder and are not summarised with the runs the default
    rule was chosen on (stopping_ideas.py --after-choice judges them)."""
    from tests.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping as benchmark

    seen = []
    monkeypatch.setattr(benchmark, "run", lambda dataset, seeds, *rest: seen.append((dataset, seeds, benchmark.RUNS)))
    monkeypatch.setattr(benchmark, "summarise", lambda *a, **k: pytest.fail("--after-choice summarised"))
    monkeypatch.setattr(benchmark, "RUNS", benchmark.RUNS)  # restored after the test
    assert benchmark.main(["--dataset", "digits", "--seeds", "12-13", "--after-choice"]) == 0
    assert seen == [("digits", [12, 13], benchmark.RUNS_AFTER)] and benchmark.RUNS_AFTER != ROOT / "benchmarks" / \
        "results" / "stopping_runs"
    with pytest.raises(SystemExit):
        benchmark.main(["--dataset", "digits", "--seeds", "0", "--after-choice", "--summarise"])
    assert "not --summarise" in capsys.readouterr().err


def test_a_stop_set_the_pool_cannot_fill_is_refused_naming_the_flag_but_the_default_shrinks():
    loop_config = LoopConfig(**{**FAST, "stop_set_size": 5000})
    with pytest.raises(InvalidArgumentError, match=r"stop_set_size \(--stop-set-size\).*at most \d+, got 5000"):
        ActiveLearningLoop(loop_config)
    # the default (1,000) is a size to aim for: a smaller pool gives a smaller stop set
    small = ActiveLearningLoop(LoopConfig(dataset="iris", initial_size=6, validation_size=10, batch_size=5,
                                          budget=16, cold_start=None, stop_when=("remaining_change",)))
    assert len(small.stop_set_N) == len(small.pool.unlabelled_indices) < 1000



def test_the_stopping_benchmark_measures_one_rounds_noise_and_the_hindsight_stop(monkeypatch):
    """The bound beside the criterion: one round's accuracy scatter around a straight trend is
    recovered from seeded Gaussian noise, and the hindsight stop is the last round that still
    saves a third of the labels spent after the curve flattened."""
    from tests.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping as benchmark

    rng = np.random.default_rng(0)
    sigma = 0.005
    accuracy = list(0.8 + 1e-4 * np.arange(2000) + rng.normal(0.0, sigma, 2000))
    assert benchmark.round_noise(accuracy) == pytest.approx(sigma, rel=0.05)
    assert benchmark.round_noise([0.9] * 12) == 0.0  # no scatter around a flat curve
    assert benchmark.round_noise([0.5, 0.6, 0.7, 0.8, 0.9]) is None  # too few rounds for 3 residuals

    labels = list(range(20, 301, 10))
    # budget 300: flat from 240 -> at least 20 labels to save -> 280; from 200 -> 33.3 -> 260
    assert labels[benchmark.hindsight_stop(labels, 300, 240)] == 280
    assert labels[benchmark.hindsight_stop(labels, 300, 200)] == 260
    assert labels[benchmark.hindsight_stop(labels, 300, 20)] == 200  # a third of 280 is 93.3 labels


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: expected_accuracy(torch.randn(5, 3, 4)), r"log_probs_S_K_C must hold log-probabilities \(<= 0\)"),
        (lambda: expected_accuracy(torch.log_softmax(torch.randn(5, 4), -1)), r"must have 3 dimensions \[S, K, C\]"),
        (lambda: predicted_decisions(torch.full((2, 3, 4), float("nan"))), "NaN"),
        (lambda: predicted_decisions(torch.randn(2, 3, 4).abs(), multilabel=True), r"log P\(y_c = 1\) <= 0"),
        (lambda: cohen_kappa([0, 1], [0, 1, 1], 2), r"two labellings \[S\] of the same S >= 1 items, got shapes "
                                                   r"\(2,\) and \(3,\)"),
        (lambda: cohen_kappa([], [], 2), "same S >= 1 items"),
        (lambda: cohen_kappa([0, 5], [0, 1], 2), r"class ids 0..1 \(num_classes=2\), got 0..5"),
    ],
)
def test_the_signal_helpers_refuse_what_the_acquisition_scores_refuse(call, match):
    """Not a number from nonsense: expected accuracy of raw logits came out as 2.07, of 2-D input as a mean over
    classes; kappa of unequal lengths was numpy's broadcast error."""
    with pytest.raises(InvalidArgumentError, match=match):
        call()


@pytest.mark.parametrize(("call", "error", "message"), [
    # cohen_kappa read 0.5 and 1.7 as classes 0 and 1 (np.asarray(..., dtype=int64) truncates)
    (lambda s: s.cohen_kappa([0.5, 1.7, 2.0], [0, 1, 1], 3), ValueError,
     r"^a_S must hold integer class ids, got float64 values such as "),
    (lambda s: s.cohen_kappa([0, 1], [float("nan"), 1], 3), ValueError, r"^b_S must hold integer class ids"),
    # exact_interval: Python's 'max() arg is an empty sequence', 'math domain error', or (0, 1) for confidence 2
    (lambda s: s.exact_interval(12, 10), ValueError, r"^correct must be <= n=10 \(a count of the n items\), got 12$"),
    (lambda s: s.exact_interval(-1, 10), ValueError, r"^correct must be >= 0, got -1$"),
    (lambda s: s.exact_interval(5, 10, 2.0), ValueError, r"^confidence must be in \(0, 1\), got 2$"),
    # remaining_change: NumPy's IndexError, a 0-d concatenate error, LAPACK's 'SVD did not converge', a NaN fit
    (lambda s: s.remaining_change([[0, 1], [0, 1], [1, 1]], [1, 2], 10), ValueError,
     r"^classes_W_S must be \[W, S\] .* got shapes \(3, 2\) and \(2,\)$"),
    (lambda s: s.remaining_change([0, 1, 1], [1, 2, 3], 10), ValueError, r"^classes_W_S must be \[W, S\]"),
    (lambda s: s.remaining_change(np.zeros((3, 0)), [1, 2, 3], 10), ValueError, r"^classes_W_S must be \[W, S\]"),
    (lambda s: s.remaining_change([[0, 1], [0, 1], [1, 1]], [1, 2, float("nan")], 10), ValueError,
     r"^n_labelled_W: expected label counts above 0, got \[1.0, 2.0, nan\]$"),
])
def test_the_signal_helpers_name_bad_input(call, error, message):
    import activebayes.stopping as stopping

    with pytest.raises(error, match=message):
        call(stopping)
