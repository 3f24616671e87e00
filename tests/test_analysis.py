"""Learning-curve analysis against hand-checkable NumPy references."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from activebayes.analysis import (
    LearningCurve,
    ReachSummary,
    area_under_learning_curve,
    baseline_targets,
    check_targets,
    default_targets,
    final_metric,
    final_reliability,
    labels_to_reach,
    learning_curves_from_runs,
    mean_learning_curve,
    per_round_mean,
    phase_seconds,
    summarise_runs,
    summarise_strategy,
)
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics import evaluate_classification
from activebayes.records import LoopConfig
from activebayes.rundir import load_runs

_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # NumPy 2 renamed trapz


def _random_curve(rng: np.random.Generator, rounds: int = 12) -> tuple[np.ndarray, np.ndarray]:
    n_R = 20 + 10 * np.arange(rounds) + rng.integers(0, 3, size=rounds).cumsum()
    acc_R = np.clip(0.5 + 0.45 * (1 - np.exp(-np.arange(rounds) / 4)) + rng.normal(0, 0.02, rounds), 0, 1)
    return n_R, acc_R


# --------------------------------------------------------------------------- labels_to_reach


def test_labels_to_reach_hand_example():
    n_R = [20, 30, 40, 50]
    acc_R = [0.70, 0.905, 0.88, 0.96]
    assert labels_to_reach(n_R, acc_R, 0.9) == 30  # first crossing; the later dip does not undo it
    assert labels_to_reach(n_R, acc_R, 0.95) == 50
    assert labels_to_reach(n_R, acc_R, 0.905) == 30  # >= target, not >
    assert labels_to_reach(n_R, acc_R, 0.97) is None
    assert labels_to_reach(n_R, acc_R, 0.5) == 20


def test_labels_to_reach_matches_numpy_argmax_reference():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n_R, acc_R = _random_curve(rng)
        target = float(rng.uniform(0.5, 1.0))
        reached = acc_R >= target
        expected = int(n_R[np.argmax(reached)]) if reached.any() else None
        assert labels_to_reach(n_R, acc_R, target) == expected


@pytest.mark.parametrize(
    ("n_R", "acc_R", "target", "error", "match"),
    [
        ([10, 20], [0.5], 0.9, ValueError, "same length"),
        ([], [], 0.9, ValueError, "empty"),
        ([20, 10], [0.5, 0.6], 0.9, ValueError, "non-decreasing"),
        ([10, 20], [0.5, float("nan")], 0.9, ValueError, "finite"),
        ([[10, 20]], [[0.5, 0.6]], 0.9, ValueError, "1-D"),
        ([10, 20], [0.5, 0.6], 1.5, ValueError, r"target must be an accuracy in \(0, 1\]"),
        ([10, 20], [0.5, 0.6], "0.9", TypeError, "target must be a number"),
    ],
)
def test_labels_to_reach_rejects_bad_input(n_R, acc_R, target, error, match):
    with pytest.raises(error, match=match):
        labels_to_reach(n_R, acc_R, target)


# --------------------------------------------------------------------------- AULC


def test_aulc_hand_example():
    # trapezoids: 10 * (0.5 + 0.7) / 2 = 6, 20 * (0.7 + 0.9) / 2 = 16 -> 22 over a range of 30
    assert area_under_learning_curve([0, 10, 30], [0.5, 0.7, 0.9], normalise=False) == pytest.approx(22.0)
    assert area_under_learning_curve([0, 10, 30], [0.5, 0.7, 0.9]) == pytest.approx(22.0 / 30)


def test_aulc_matches_numpy_trapezoid():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n_R, acc_R = _random_curve(rng, rounds=int(rng.integers(2, 20)))
        area = _trapezoid(acc_R, x=n_R.astype(np.float64))
        assert area_under_learning_curve(n_R, acc_R, normalise=False) == pytest.approx(area, rel=1e-12)
        assert area_under_learning_curve(n_R, acc_R) == pytest.approx(area / (n_R[-1] - n_R[0]), rel=1e-12)


def test_aulc_properties():
    n_R = np.array([10, 25, 60, 100])
    assert area_under_learning_curve(n_R, np.full(4, 0.8)) == pytest.approx(0.8)  # constant curve -> its value
    acc_R = np.array([0.2, 0.5, 0.9, 1.0])
    assert 0.2 <= area_under_learning_curve(n_R, acc_R) <= 1.0
    # shifting the label axis changes nothing once normalised
    assert area_under_learning_curve(n_R + 50, acc_R) == pytest.approx(area_under_learning_curve(n_R, acc_R))
    # a single round: normalised area = its accuracy, raw area = 0
    assert area_under_learning_curve([20], [0.7]) == pytest.approx(0.7)
    assert area_under_learning_curve([20], [0.7], normalise=False) == 0.0
    with pytest.raises(TypeError, match="normalise"):
        area_under_learning_curve([1, 2], [0.1, 0.2], normalise=1)


# --------------------------------------------------------------------------- summaries


def test_reach_summary_all_reached_matches_numpy_percentiles():
    values = [120, 90, 200, 150, 95]
    summary = ReachSummary.from_values(0.9, values)
    assert summary.median == pytest.approx(np.median(values))
    assert summary.q25 == pytest.approx(np.percentile(values, 25))
    assert summary.q75 == pytest.approx(np.percentile(values, 75))
    assert (summary.minimum, summary.maximum) == (90, 200)
    assert summary.n_reached == summary.n_seeds == 5


def test_reach_summary_censored_values():
    # 3 of 5 seeds reach: sorted [90, 120, 150, inf, inf]
    summary = ReachSummary.from_values(0.95, [150, None, 90, None, 120])
    assert summary.n_reached == 3
    assert summary.median == 150.0  # the median seed did reach
    assert summary.q25 == pytest.approx(np.percentile([90, 120, 150, 1e9, 1e9], 25))
    assert summary.q75 is None  # would fall on a seed that never reached
    assert summary.maximum is None and summary.minimum == 90
    # 1 of 3 seeds: median is "not reached"
    summary = ReachSummary.from_values(0.95, [None, 300, None])
    assert summary.median is None and summary.minimum == 300
    # none reached
    summary = ReachSummary.from_values(0.95, [None, None])
    assert summary.median is None and summary.minimum is None and summary.n_reached == 0


def test_summarise_strategy_against_numpy():
    rng = np.random.default_rng(2)
    curves = [_random_curve(rng) for _ in range(4)]
    targets = (0.8, 0.9)
    summary = summarise_strategy(curves, targets=targets, strategy="bald")
    assert summary.strategy == "bald" and summary.n_seeds == 4
    for t in targets:
        expected = []
        for n_R, acc_R in curves:
            hit = np.flatnonzero(acc_R >= t)
            expected.append(int(n_R[hit[0]]) if hit.size else None)
        assert list(summary.reach[t].values_S) == expected
    areas = [_trapezoid(acc_R, x=n_R.astype(float)) / (n_R[-1] - n_R[0]) for n_R, acc_R in curves]
    assert summary.aulc_mean == pytest.approx(np.mean(areas))
    assert summary.aulc_std == pytest.approx(np.std(areas, ddof=1))
    finals = [acc_R[-1] for _, acc_R in curves]
    assert summary.final_accuracy_mean == pytest.approx(np.mean(finals))
    assert summary.final_accuracy_std == pytest.approx(np.std(finals, ddof=1))
    assert summary.final_n_labelled_S == tuple(int(n_R[-1]) for n_R, _ in curves)


def test_summarise_strategy_one_seed_and_errors():
    summary = summarise_strategy([([10, 20], [0.5, 0.95])], targets=[0.9])
    assert summary.aulc_std == 0.0 and summary.final_accuracy_std == 0.0
    assert summary.reach[0.9].median == 20.0
    with pytest.raises(ValueError, match="non-empty sequence"):
        summarise_strategy([])
    with pytest.raises(TypeError, match=r"curves\[0\]"):
        summarise_strategy([0.5])
    with pytest.raises(ValueError, match="targets"):
        summarise_strategy([([10, 20], [0.5, 0.6])], targets=[90])


def test_mean_learning_curve_against_numpy():
    a = ([10, 20, 30, 40], [0.5, 0.6, 0.7, 0.8])
    b = ([10, 20, 30], [0.4, 0.8, 0.9])  # stopped early
    c = ([10, 20, 30, 40], [0.6, 0.7, 0.75, 0.85])
    mean = mean_learning_curve([a, b, c])
    values = np.array([[0.5, 0.6, 0.7], [0.4, 0.8, 0.9], [0.6, 0.7, 0.75]])
    assert mean.n_labelled_P.tolist() == [10, 20, 30]
    np.testing.assert_allclose(mean.mean_P, values.mean(0))
    np.testing.assert_allclose(mean.std_P, values.std(0, ddof=1))
    np.testing.assert_allclose(mean.min_P, values.min(0))
    np.testing.assert_allclose(mean.max_P, values.max(0))
    assert mean.n_seeds == 3


# --------------------------------------------------------------------------- from runs


def _record(n, acc=None, val=None):
    metrics = {}
    if acc is not None:
        metrics["test_accuracy"] = acc
    if val is not None:
        metrics["validation_accuracy"] = val
    return SimpleNamespace(n_labelled=n, metrics=metrics)


def test_learning_curves_from_runs():
    runs = {
        ("random", 1): (None, [_record(20, 0.5), _record(30, 0.6)]),
        ("bald", 0): (None, [_record(20, 0.55), _record(30, 0.7), _record(40, 0.8)]),
        ("random", 0): (None, [_record(20, 0.52), {"n_labelled": 30, "metrics": {"test_accuracy": 0.65}}]),
        ("empty", 0): (None, []),
    }
    curves = learning_curves_from_runs(runs)
    assert list(curves) == ["random", "bald"]  # first-seen order; the empty run is left out
    assert [c.seed for c in curves["random"]] == [0, 1]
    assert curves["random"][0].accuracy_R.tolist() == [0.52, 0.65]
    assert curves["bald"][0].n_labelled_R.tolist() == [20, 30, 40]
    assert all(c.metric == "test_accuracy" for c in curves["bald"])
    summaries = summarise_runs(runs, targets=[0.6])
    assert summaries["random"].reach[0.6].values_S == (30, 30)
    assert summaries["bald"].reach[0.6].values_S == (30,)


def test_learning_curves_fall_back_to_validation_accuracy():
    runs = {("bald", 0): (None, [_record(20, val=0.4), _record(30, val=0.6)])}
    (curve,) = learning_curves_from_runs(runs)["bald"]
    assert curve.metric == "validation_accuracy" and curve.accuracy_R.tolist() == [0.4, 0.6]
    n_R, acc_R = curve  # unpacks like the (n, acc) pairs the plots take
    assert n_R.tolist() == [20, 30]


def test_learning_curves_from_real_run_directory_format(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(LoopConfig(strategy="bald", seed=3, budget=40).to_dict()))
    lines = []
    for r, (n, acc) in enumerate([(20, 0.61), (30, 0.74), (40, 0.83)]):
        lines.append(json.dumps({
            "round": r, "n_labelled": n, "acquired": [], "scores": [], "labels": [],
            "metrics": {"test_accuracy": acc}, "class_counts": [n // 10] * 10, "cost_spent": 0.0,
            "fit": {}, "seconds": {"fit": 0.1},
        }))
    (run / "rounds.jsonl").write_text("\n".join(lines) + "\n")
    (curve,) = learning_curves_from_runs(load_runs(run))["bald"]
    assert curve.seed == 3 and curve.labels_to_reach(0.8) == 40
    assert curve.area() == pytest.approx(((0.61 + 0.74) / 2 * 10 + (0.74 + 0.83) / 2 * 10) / 20)
    assert isinstance(curve, LearningCurve) and curve.final_accuracy == 0.83 and curve.final_n_labelled == 40


# --------------------------------------------------------------------------- other records over seeds


def _seed_rounds(rng: np.random.Generator, n_rounds: int, *, C: int = 4, start: int = 20) -> list[dict]:
    """Round records in the stored (rounds.jsonl) form with random values."""
    return [
        {
            "n_labelled": start + 10 * r,
            "class_counts": rng.integers(0, 9, C).tolist(),
            "seconds": {"fit": float(rng.random()), "evaluate": float(rng.random()),
                        **({"acquire": float(rng.random())} if r < n_rounds - 1 else {})},
            "metrics": {"test_ece": float(rng.random()), "test_recall_per_class": rng.random(C).tolist(),
                        "test_confusion_matrix": rng.integers(0, 20, (C, C)).tolist()},
        }
        for r in range(n_rounds)
    ]


def test_final_metric_against_numpy():
    rng = np.random.default_rng(40)
    seeds = [_seed_rounds(rng, n) for n in (5, 3, 4)]
    stats = final_metric(seeds, "test_ece")
    finals = np.array([rounds[-1]["metrics"]["test_ece"] for rounds in seeds])
    np.testing.assert_array_equal(stats.values_S, finals)
    assert stats.n_seeds == 3
    assert stats.mean == pytest.approx(finals.mean()) and stats.std == pytest.approx(finals.std(ddof=1))
    recall = final_metric(seeds, "test_recall_per_class")
    expected = np.array([rounds[-1]["metrics"]["test_recall_per_class"] for rounds in seeds])
    np.testing.assert_allclose(recall.mean, expected.mean(0))
    np.testing.assert_allclose(recall.std, expected.std(0, ddof=1))
    cm = final_metric(seeds, "test_confusion_matrix")
    np.testing.assert_array_equal(cm.total, sum(np.array(r[-1]["metrics"]["test_confusion_matrix"]) for r in seeds))
    # a seed without rounds, or without the key, is left out; one seed has std 0
    del seeds[1][-1]["metrics"]["test_ece"]
    one = final_metric([seeds[0], [], seeds[1]], "test_ece")
    assert one.values_S.tolist() == [finals[0]] and one.std == 0.0
    assert final_metric(seeds, "test_nothing") is None and final_metric([[], []], "test_ece") is None
    seeds[2][-1]["metrics"]["test_recall_per_class"] = [0.5]
    with pytest.raises(ValueError, match="differ in shape"):
        final_metric(seeds, "test_recall_per_class")


def test_per_round_mean_against_numpy():
    rng = np.random.default_rng(41)
    seeds = [_seed_rounds(rng, n) for n in (6, 4, 5)]
    mean = per_round_mean(seeds, lambda r: r["class_counts"])
    expected = np.mean([[r["class_counts"] for r in rounds[:4]] for rounds in seeds], axis=0)
    np.testing.assert_allclose(mean.mean_R, expected)
    assert mean.n_seeds == 3 and mean.n_labelled_R.tolist() == [20, 30, 40, 50]
    recall = per_round_mean(seeds, lambda r: r["metrics"]["test_recall_per_class"])
    np.testing.assert_allclose(
        recall.mean_R, np.mean([[r["metrics"]["test_recall_per_class"] for r in s[:4]] for s in seeds], axis=0)
    )
    seeds[1] = _seed_rounds(rng, 4, start=25)  # label counts that differ between seeds: no common x axis
    assert per_round_mean(seeds, lambda r: r["class_counts"]).n_labelled_R is None
    assert per_round_mean(seeds, lambda r: r.get("missing")) is None
    assert per_round_mean([seeds[0], []], lambda r: r["class_counts"]) is None
    with pytest.raises(TypeError, match="extract"):
        per_round_mean(seeds, "class_counts")
    with pytest.raises(TypeError, match="rounds_per_seed"):
        per_round_mean({"bald": seeds}, lambda r: r["class_counts"])


def test_phase_seconds_against_numpy():
    rng = np.random.default_rng(42)
    seeds = [_seed_rounds(rng, n) for n in (3, 5)]
    phases = ("fit", "evaluate", "acquire", "label")
    seconds = phase_seconds(seeds, phases)

    def row(r):
        return [r["seconds"].get(p, 0.0) for p in phases]

    np.testing.assert_allclose(seconds.per_round.mean_R, np.mean([[row(r) for r in s[:3]] for s in seeds], axis=0))
    np.testing.assert_allclose(seconds.totals.values_S, [np.sum([row(r) for r in s], axis=0) for s in seeds])
    assert seconds.totals.values_S[:, 3].tolist() == [0.0, 0.0]  # no round recorded a label phase
    assert phase_seconds([[], []], phases) is None


def test_final_reliability_pools_the_stored_bins_like_numpy_on_all_predictions():
    rng = np.random.default_rng(43)
    num_bins, C, N = 10, 3, 300
    targets = rng.integers(0, C, N)  # one test set, several seeds' models
    probs_S = []
    seeds = []
    for _ in range(3):
        logits = rng.normal(size=(N, C)) * rng.uniform(1, 4)
        probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        probs_S.append(probs)
        record = evaluate_classification(probs, targets, num_classes=C, num_bins=num_bins)
        seeds.append([{"metrics": {"test_reliability": {"count": [1] + [0] * (num_bins - 1),
                                                        "conf_sum": [0.1] + [0.0] * (num_bins - 1),
                                                        "correct_sum": [0] * num_bins}}},  # an earlier round
                      {"metrics": {f"test_{k}": v for k, v in record.items()}}])
    pooled = final_reliability(seeds)
    probs = np.concatenate(probs_S)
    y = np.tile(targets, 3)
    conf, correct = probs.max(1), probs.argmax(1) == y
    which = np.minimum(np.floor(conf * num_bins).astype(int), num_bins - 1)
    count = np.bincount(which, minlength=num_bins)
    gap = np.abs(np.bincount(which, conf, num_bins) - np.bincount(which, correct, num_bins))
    assert pooled.counts.tolist() == count.tolist()
    assert pooled.ece == pytest.approx(gap.sum() / (3 * N), abs=1e-12)
    per_seed = final_metric(seeds, "test_ece")
    assert pooled.ece <= per_seed.mean + 1e-12  # one shared test set: pooling can only cancel gaps
    assert final_reliability([[], seeds[0][:1][:0]]) is None


def test_check_targets():
    assert check_targets([0.9, 0.95, 0.9, 1]) == (0.9, 0.95, 1.0)
    with pytest.raises(ValueError, match=r"targets must be an accuracy in \(0, 1\], got 95"):
        check_targets([0.9, 95])
    with pytest.raises(TypeError, match="targets"):
        check_targets("0.9")
    with pytest.raises(ValueError, match="at least one"):
        check_targets([])


# --------------------------------------------------------------------------- default targets


def _floor2_targets(n_R, mean_R):
    """The reference rule in NumPy: the mean at the count closest to half the last, and at the last, floored."""
    n_R, mean_R = np.asarray(n_R, dtype=np.float64), np.asarray(mean_R, dtype=np.float64)
    mid = int(np.argmin(np.abs(n_R - n_R[-1] / 2)))
    return tuple(dict.fromkeys(float(np.floor(v * 100) / 100) for v in (mean_R[mid], mean_R[-1])))


def test_default_targets_read_from_random_or_the_weakest_strategy():
    from activebayes.analysis import CLASSIC_TARGETS, baseline_targets, default_targets

    rng = np.random.default_rng(4)
    n_R = np.arange(20, 520, 20)
    random_S_R = 0.2 + 0.25 * np.log(n_R / 20)[None] / np.log(25) + rng.normal(0, 0.01, (3, len(n_R)))
    bald_S_R = random_S_R + 0.03
    curves = {"bald": [(n_R, c) for c in bald_S_R], "random": [(n_R, c) for c in random_S_R]}
    assert default_targets(curves) == _floor2_targets(n_R, random_S_R.mean(0)) == baseline_targets(curves["random"])
    # without random: the strategy whose mean AULC is lowest
    weak = {"bald": curves["bald"], "margin": [(n_R, c - 0.05) for c in random_S_R]}
    assert default_targets(weak) == _floor2_targets(n_R, (random_S_R - 0.05).mean(0))
    # some seed at 0.9 anywhere: the classic pair
    curves["bald"][1] = (n_R, np.where(n_R == 300, 0.9, bald_S_R[1]))
    assert default_targets(curves) == CLASSIC_TARGETS
    # a flat curve gives one target, a curve at 0 none (the classic pair then)
    assert baseline_targets([(n_R, np.full(len(n_R), 0.4567))]) == (0.45,)
    assert default_targets({"random": [(n_R, np.zeros(len(n_R)))]}) == CLASSIC_TARGETS
    # seeds on different grids: their common label counts
    assert baseline_targets([([10, 20, 30, 40], [0.1, 0.2, 0.3, 0.4]), ([10, 20, 40], [0.3, 0.4, 0.5])]) == \
        _floor2_targets([10, 20, 40], [0.2, 0.3, 0.45])


# --------------------------------------------------------------------------- defects found by a user


def _multilabel_run(*f1_R: float) -> list[dict]:
    return [{"n_labelled": 20 + 10 * r, "metrics": {"test_micro_f1": f1, "test_hamming_loss": 0.1}}
            for r, f1 in enumerate(f1_R)]


def test_the_default_metric_is_the_runs_headline_micro_f1_for_multilabel_runs():
    runs = {("random", 0): (None, _multilabel_run(0.4, 0.5)), ("bald", 0): (None, _multilabel_run(0.4, 0.6))}
    curves = learning_curves_from_runs(runs)
    assert curves["bald"][0].metric == "test_micro_f1" and curves["bald"][0].accuracy_R.tolist() == [0.4, 0.6]
    assert summarise_runs(runs, targets=0.5)["random"].reach[0.5].values_S == (30,)


@pytest.mark.parametrize("call", [
    lambda runs: learning_curves_from_runs(runs, metric="tset_accuracy"),
    lambda runs: summarise_runs(runs, metric="accuracy"),
])
def test_an_unknown_metric_is_refused_with_the_metrics_the_records_hold(call):
    runs = {("bald", 0): (None, [_record(20, 0.5), _record(30, 0.6)])}
    with pytest.raises(InvalidArgumentError, match=r"metric must be one of .*\(test_accuracy\), got '"):
        call(runs)


def test_an_invalid_curve_names_its_run():
    runs = {("bald", 1): (None, [_record(20, 0.5), _record(30, float("nan"))])}
    with pytest.raises(InvalidArgumentError, match=r"run 'bald' seed 1 \(test_accuracy\): accuracy_R must hold finite"):
        learning_curves_from_runs(runs)


def test_baseline_targets_keep_exact_two_decimal_values():
    assert baseline_targets([([20, 60, 100], [0.3, 0.57, 0.58])]) == (0.57, 0.58)
    assert default_targets({"random": [([20, 60, 100], [0.3, 0.29, 0.58])]}) == (0.29, 0.58)
    assert baseline_targets([([20, 60, 100], [0.3, 0.579, 0.5899])]) == (0.57, 0.58)  # still rounded down


@pytest.mark.parametrize("acc_R", [[1, 2], [50.0, 60.0], [-0.1, 0.5]])
def test_accuracies_outside_0_1_are_refused(acc_R):
    with pytest.raises(InvalidArgumentError, match=r"accuracy_R must hold finite accuracies in \[0, 1\]"):
        area_under_learning_curve([50, 60], acc_R)


def test_accuracies_that_are_not_numbers_are_a_type_error():
    with pytest.raises(InvalidTypeError, match=r"accuracy_R must hold numbers, got \['a', 'b'\]"):
        area_under_learning_curve([1, 2], ["a", "b"])


def test_summarise_strategy_takes_one_target_as_a_number_and_refuses_a_string():
    curves = [([10, 20], [0.8, 0.95])]
    assert summarise_strategy(curves, targets=0.9).reach[0.9].values_S == (20,)
    assert check_targets(0.9) == (0.9,)
    with pytest.raises(InvalidTypeError, match="targets must be an accuracy in"):
        summarise_strategy(curves, targets="0.9")
    assert summarise_strategy(curves, targets=()).reach == {}  # the CLI's table asks for none
