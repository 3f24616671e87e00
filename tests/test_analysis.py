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
    labels_to_reach,
    learning_curves_from_runs,
    mean_learning_curve,
    summarise_runs,
    summarise_strategy,
)

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
    from activebayes.rundir import load_runs
    from activebayes.loop import LoopConfig

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
