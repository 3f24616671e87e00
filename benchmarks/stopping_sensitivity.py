"""How much `remaining_change` depends on its window, margin and threshold, judged out of sample.

The window (16 models), margin (2 standard errors) and threshold (0.005) were chosen on the
even seeds of these runs with ``benchmarks/stopping_ideas.py``. This script asks whether
another setting would do better on the committed stopping runs
(``benchmarks/results/stopping_runs``, made by ``benchmarks/stopping.py``), without
training anything: each round's stored stop-set predictions are fitted again with the
library's :func:`activebayes.stopping.remaining_change` for every window, and each setting
is judged exactly as ``stopping.py`` judges the recommended one (the goal's
:func:`stopping.verdict` at the full budget, and stopping more than a point early on the
budgets cut short).

A setting is **chosen on the even seeds** (seed 0, 2, ...) of every protocol, the one
meeting the goal most often there without stopping more runs early than the current
setting does on those seeds, and **judged on the odd seeds**, which took no part in the
choice. Two choices are made: one held to the current setting's early stops at the full
budget only, one held to them on the cut budgets as well.

The grid, the chosen settings and every setting's counts go to
``benchmarks/results/stopping_sensitivity.json``; the table goes to ``docs/benchmarks.md``
between the ``stopping-sensitivity:begin`` / ``stopping-sensitivity:end`` markers.
It checks that the current setting fires where ``stopping.py`` says, on every run.

Usage::

    python benchmarks/stopping_sensitivity.py     # about 2 minutes on one CPU core
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stopping  # noqa: E402  (benchmarks/stopping.py: the runs, the goal and the tables)

RESULTS = stopping.ROOT / "benchmarks" / "results" / "stopping_sensitivity.json"
WINDOWS = (8, 10, 12, 14, 16)
MARGINS = (1.0, 1.5, 2.0, 3.0)
THRESHOLDS = (0.0025, 0.0035, 0.005, 0.0075, 0.01, 0.015, 0.02)
BEGIN, END = "<!-- stopping-sensitivity:begin -->", "<!-- stopping-sensitivity:end -->"


def current_setting() -> tuple[int, float, float]:
    from activebayes.stopping import CHANGE_MARGIN, CHANGE_WINDOW

    return CHANGE_WINDOW, CHANGE_MARGIN, stopping.RECOMMENDED_THRESHOLD


def drifts(rounds: list[dict], window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per round: the drift, its standard error and its decay, fitted over that round's model and the
    ``window - 1`` before it (NaN before the window fills), as a share of the stop set (multi-label: of
    the current model's predicted labels, :func:`activebayes.stopping.per_predicted_label`)."""
    from activebayes.stopping import decode_classes, per_predicted_label, remaining_change

    texts = [(r.get("signals") or {}).get("stable_predictions", {}).get("predictions") for r in rounds]
    multilabel = bool(texts[0]) and texts[0].startswith("bits:")
    classes_R_S = [None if t is None else decode_classes(t) for t in texts]
    labels_R = [r["n_labelled"] for r in rounds]
    drift_R, se_R, decay_R = np.full(len(rounds), np.nan), np.full(len(rounds), np.nan), np.zeros(len(rounds))
    for i in range(window - 1, len(rounds)):
        span = range(i - window + 1, i + 1)
        if any(classes_R_S[j] is None for j in span):
            continue
        fit = remaining_change([classes_R_S[j] for j in span], [labels_R[j] for j in span], horizon=1, margin=0.0)
        if fit is None:
            continue
        if multilabel:
            fit = per_predicted_label(fit, classes_R_S[i])
        drift_R[i], se_R[i], decay_R[i] = fit.drift, fit.drift_se, fit.decay
    return drift_R, se_R, decay_R


def first_fire(fit_R: tuple, labels_R: np.ndarray, budget: int, margin: float, threshold: float) -> int | None:
    """The first round whose remaining change, projected to ``budget``, is below ``threshold``
    (:func:`activebayes.stopping.projected_change`, for every round at once)."""
    from activebayes.stopping import change_horizon, integrated_drift

    drift_R, se_R, decay_R = fit_R
    n_R = labels_R.astype(np.float64)
    horizon_R = np.array([change_horizon(int(n), budget) for n in labels_R], dtype=np.float64)
    span_R = np.zeros(len(n_R))
    for decay in np.unique(decay_R):
        at = decay_R == decay
        span_R[at] = integrated_drift(n_R[at] + horizon_R[at], decay) - integrated_drift(n_R[at], decay)
    value_R = np.maximum(drift_R + margin * se_R, 0.0) * span_R
    fires = np.flatnonzero((value_R < threshold) & (horizon_R > 0))  # NaN compares False: not measured yet
    return int(fires[0]) if len(fires) else None


def judge(runs: dict, window: int, margin: float, threshold: float) -> dict:
    """``(protocol, seed) -> (verdict at the full budget, cut budgets, cut budgets stopped > 1 point early)``."""
    out = {}
    for (name, seed), run in runs.items():
        fit_R = run["drifts"][window]
        labels_R, accuracy = run["labels"], run["accuracy"]
        i = first_fire(fit_R, labels_R, run["budget"], margin, threshold)
        below = None if i is None else round(100 * (run["final"] - accuracy[i]), 2)
        saved = 0 if i is None else run["budget"] - int(labels_R[i])
        early_cuts = 0
        for k, final in run["cuts"]:
            j = first_fire(tuple(a[: k + 1] for a in fit_R), labels_R[: k + 1], int(labels_R[k]), margin, threshold)
            early_cuts += j is not None and round(100 * (final - accuracy[j]), 2) > 1.0
        out[(name, seed)] = (stopping.verdict(below, saved, run["flattened"], run["flat"], run["budget"]),
                             len(run["cuts"]), early_cuts)
    return out


def counts(judged: dict, seeds: str) -> dict:
    """Totals over the even, odd or all seeds."""
    rows = [v for (_, seed), v in judged.items()
            if seeds == "all" or int(seed.removeprefix("seed_")) % 2 == (seeds == "odd")]
    return {"runs": len(rows), "met": sum(v[0] == "met" for v in rows), "early": sum(v[0] == "early" for v in rows),
            "late": sum(v[0] == "late" for v in rows), "cut_budgets": sum(v[1] for v in rows),
            "cut_early": sum(v[2] for v in rows)}


def load() -> dict:
    """Every committed stopping run, with what the goal needs and its fits for every window."""
    runs = {}
    for directory in sorted(p for p in stopping.RUNS.glob("*") if p.is_dir()):
        found = stopping.finished_runs(directory)
        if not found:
            continue
        metric = stopping._headline(found)
        budget = found[0][1][-1]["n_labelled"]
        for seed, rounds in found:
            labels = [r["n_labelled"] for r in rounds]
            accuracy = [r["metrics"][metric] for r in rounds]
            final = statistics.fmean(accuracy[-stopping.FINAL_ROUNDS:])
            flat = stopping.flat_from(labels, accuracy, final)
            cuts = [(k, statistics.fmean(accuracy[: k + 1][-stopping.FINAL_ROUNDS:]))
                    for k in range(stopping.CUT_FROM, len(rounds) - 1, stopping.CUT_EVERY)]
            runs[(directory.name, seed)] = {
                "rounds": rounds, "labels": np.array(labels), "accuracy": accuracy, "budget": budget,
                "final": round(final, 4), "flat": flat, "flattened": flat < labels[-stopping.FINAL_ROUNDS],
                "cuts": cuts, "drifts": {w: drifts(rounds, w) for w in WINDOWS}}
    return runs


def check(runs: dict, judged: dict) -> None:
    """The current setting must fire where ``stopping.py`` fires, and be judged as it judges, on every run."""
    window, margin, threshold = current_setting()
    for (name, seed), run in runs.items():
        mine = first_fire(run["drifts"][window], run["labels"], run["budget"], margin, threshold)
        theirs = stopping._fires(run["rounds"], "remaining_change", threshold, run["budget"])
        if mine != theirs:
            raise SystemExit(f"{name} {seed}: fires at round {mine} here, at {theirs} in stopping.py")
    summary = json.loads(stopping.RESULTS.read_text())["protocols"]
    met = sum(int(p["criteria"][stopping.RECOMMENDED]["met_goal"].split(" of ")[0]) for p in summary.values())
    early = sum(p["criteria"][stopping.RECOMMENDED]["too_early"] for p in summary.values())
    cut_early = sum(p["cut_short"]["too_early"] for p in summary.values())
    mine = counts(judged, "all")
    if (mine["met"], mine["early"], mine["cut_early"]) != (met, early, cut_early):
        raise SystemExit(f"the current setting: {mine} here, {met} met, {early} early, {cut_early} cut budgets "
                         "early in stopping.json")


def choose(results: dict, current: tuple, *, hold_cut_budgets: bool) -> tuple:
    """The setting meeting the goal most often on the even seeds, stopping no more runs early there
    than the current setting (at the full budget; with ``hold_cut_budgets``, on the cut budgets too);
    ties go to fewer early stops, then to the current setting, then to the more cautious (larger margin
    and window, smaller threshold)."""
    limit = counts(results[current], "even")
    allowed = [key for key, judged in results.items()
               if counts(judged, "even")["early"] <= limit["early"]
               and (not hold_cut_budgets or counts(judged, "even")["cut_early"] <= limit["cut_early"])]
    return max(allowed, key=lambda key: (counts(results[key], "even")["met"],
                                         -counts(results[key], "even")["early"],
                                         -counts(results[key], "even")["cut_early"], key == current,
                                         key[1], key[0], -key[2]))


def summarise() -> dict:
    runs = load()
    current = current_setting()
    results = {(w, m, t): judge(runs, w, m, t) for w, m, t in itertools.product(WINDOWS, MARGINS, THRESHOLDS)}
    check(runs, results[current])
    chosen = {"full_budget": choose(results, current, hold_cut_budgets=False),
              "cut_budgets_too": choose(results, current, hold_cut_budgets=True)}

    def entry(key):
        return {"window": key[0], "margin": key[1], "threshold": key[2],
                **{seeds: counts(results[key], seeds) for seeds in ("even", "odd", "all")}}

    return {"runs": len(runs), "grid": {"windows": WINDOWS, "margins": MARGINS, "thresholds": THRESHOLDS},
            "current": entry(current), "chosen": {rule: entry(key) for rule, key in chosen.items()},
            "settings": [entry(key) for key in results]}


def _cells(c: dict) -> str:
    return f"{c['met']} / {c['early']} / {c['late']}"


def markdown(summary: dict) -> str:
    lines = ["| setting (window, margin, threshold) | picked as | even seeds: met / early / late "
             "| odd seeds, held out: met / early / late | all seeds: met / early / late "
             "| cut budgets stopped early (all seeds) |",
             "| --- | --- | --- | --- | --- | --- |"]
    picked = [("the current setting", summary["current"]),
              ("best on even seeds, early stops held at the full budget", summary["chosen"]["full_budget"]),
              ("best on even seeds, early stops held on cut budgets too", summary["chosen"]["cut_budgets_too"])]
    current = summary["current"]
    thresholds = [("the current window and margin", s) for s in summary["settings"]
                  if (s["window"], s["margin"]) == (current["window"], current["margin"])
                  and s["threshold"] != current["threshold"]]
    for label, s in picked + thresholds:
        lines.append(f"| ({s['window']}, {s['margin']:g}, {s['threshold']:g}) | {label} | {_cells(s['even'])} | "
                     f"{_cells(s['odd'])} | {_cells(s['all'])} | {s['all']['cut_early']} of "
                     f"{s['all']['cut_budgets']} |")
    return "\n".join(lines)


def main() -> int:
    from label_efficiency import write_between_markers

    from activebayes._io import atomic_write_text

    tic = time.perf_counter()
    summary = summarise()
    atomic_write_text(RESULTS, json.dumps(summary, indent=1) + "\n")
    table = markdown(summary)
    write_between_markers(stopping.DOCS, BEGIN, END, f"\n{table}\n")
    print(table)
    print(f"{len(summary['settings'])} settings on {summary['runs']} runs in {time.perf_counter() - tic:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
