"""Other rules for "when to stop labelling", judged out of sample like ``stopping_sensitivity.py``.

The default criterion, ``remaining_change``, fits the pairwise disagreement of the last W models
on the stop set as ``d_ij = f + delta (n_j - n_i)`` and fires when
``max(delta + m se, 0) * h < threshold`` with ``h = min(budget - n, n)``. This script asks whether
a different rule, re-judged offline from the committed runs' stored stop-set predictions
(``benchmarks/results/stopping_runs``; nothing is trained), does better. Families tried:

- ``linear drift``: the current rule (its grid is ``stopping_sensitivity.py``'s);
- ``decaying drift, alpha``: the drift per label decays as ``n^-alpha``, so the disagreement is
  regressed on ``g(n_j) - g(n_i)`` with ``g(n) = n^(1-alpha) / (1-alpha)`` (``log n`` for alpha = 1),
  and the change projected over the horizon is ``max(c + m se, 0) * (g(n + h) - g(n))``, the decaying
  rate integrated (alpha = 0 is the current rule); alpha fixed at 0.5 or 1, or per window the alpha
  of {0, 0.5, 1, 1.5, 2} with the smallest residual sum of squares (``fitted``);
- ``horizon floor q``: the linear rule, with the horizon held at least ``q n`` labels near the budget,
  ``h = max(min(budget - n, n), q n)`` (the firing itself still needs labels left);
- ``persistence``: the linear or log rule, firing only when it fired on this round and the one before
  (each judged at the same budget), against one noisy fit firing by chance.

Every family's free parameters (window of 8-16 models, margin, threshold) are **chosen on the even
seeds** exactly as ``stopping_sensitivity.choose`` chooses (the most runs meeting the goal without
more early stops than the current setting on those seeds: at the full budget, or on the cut budgets
too) and **judged on the odd seeds**. Judging is ``stopping_sensitivity``'s (``stopping.verdict`` at
the full budget, more than a point below the cut run's final accuracy on every 5th-round cut
budget); the current setting's row is checked against ``stopping.json`` (89 / 12 / 31, 66 of 966)
and its firing round against ``stopping._fires`` on every run. A last, hindsight line per family
gives the best any of its settings does on the odd seeds with no more early stops (at the full
budget and cut) than the current setting there; it is no choice, only a ceiling. A second table
makes each choice the other way round (chosen on the odd seeds, judged on the even ones), as a check
that a family's gain does not hang on which half chose it.

Prints the tables; writes nothing. ``--new-seeds-from N`` judges only the current and the chosen
settings, on the runs of the digits protocols with seeds from N on (run after the choice). Usage::

    python benchmarks/stopping_ideas.py     # about 3 minutes on one CPU core
    python benchmarks/stopping.py --dataset digits --seeds 12-17   # (and -shared, -b5: see below)
    python benchmarks/stopping_ideas.py --new-seeds-from 12
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import stopping  # noqa: E402
import stopping_sensitivity as sensitivity  # noqa: E402

WINDOWS = sensitivity.WINDOWS
MARGINS = sensitivity.MARGINS
THRESHOLDS = sensitivity.THRESHOLDS
ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0)  # the "fitted" family picks one of these per window
LAG = max(WINDOWS) - 1


def g_of(alpha: float):
    """The integrated drift rate: ``d/dn g(n) = n^-alpha``."""
    return np.log if alpha == 1.0 else (lambda n: n ** (1.0 - alpha) / (1.0 - alpha))


def disagreements(rounds: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """``D[i, k]``: share of the stop set on which round ``i``'s and round ``i - k``'s models disagree
    (NaN where either was not kept), and each round's multi-label rescaling
    (:func:`activebayes.stopping.per_predicted_label`'s ``S C / P``; 1 for single-label runs)."""
    from activebayes.stopping import decode_classes

    texts = [(r.get("signals") or {}).get("stable_predictions", {}).get("predictions") for r in rounds]
    classes = [None if t is None else decode_classes(t) for t in texts]
    D = np.full((len(rounds), LAG + 1), np.nan)
    scale = np.ones(len(rounds))
    for i, c in enumerate(classes):
        if c is None:
            continue
        if texts[i].startswith("bits:"):
            scale[i] = len(c) / max(int(c.sum()), 1)
        for k in range(1, min(LAG, i) + 1):
            if classes[i - k] is not None:
                D[i, k] = np.count_nonzero(c != classes[i - k]) / len(c)
    return D, scale


def fits(run: dict, window: int, alpha: float) -> np.ndarray:
    """Per round ``[floor, slope, se, residual sum of squares]`` of ``d_ab = f + c (g(n_b) - g(n_a))``
    over the pairs of the last ``window`` models (NaN before the window fills); floor, slope and se
    rescaled as the library rescales a multi-label fit."""
    D, n = run["D"], run["labels"].astype(np.float64)
    g = g_of(alpha)
    out = np.full((len(n), 4), np.nan)
    i_P, j_P = np.triu_indices(window, k=1)
    for t in range(window - 1, len(n)):
        span = np.arange(t - window + 1, t + 1)
        d_P = D[span[j_P], j_P - i_P]
        if np.isnan(d_P).any() or len(np.unique(n[span])) < 2:
            continue
        g_W = g(n[span])
        X = np.stack([np.ones(len(d_P)), g_W[j_P] - g_W[i_P]], axis=1)
        coef, *_ = np.linalg.lstsq(X, d_P, rcond=None)
        residual = d_P - X @ coef
        rss = float(residual @ residual)
        se = np.sqrt(max(rss / (len(d_P) - 2) * float(np.linalg.inv(X.T @ X)[1, 1]), 0.0))
        out[t] = [coef[0] * run["scale"][t], coef[1] * run["scale"][t], se * run["scale"][t], rss]
    return out


def horizon(n: np.ndarray, budget: int) -> np.ndarray:
    return np.maximum(0.0, np.minimum(budget - n, n))  # activebayes.stopping.change_horizon


# ---- the rules: (run, budget, window, margin, threshold) -> boolean "fires" per round -------------

def drift_rule(alpha, floor_q: float = 0.0, persist: int = 1):
    def fires(run, budget, window, margin, threshold):
        n = run["labels"].astype(np.float64)
        left = horizon(n, budget)
        h = np.maximum(left, floor_q * n)
        if alpha == "fitted":
            rss = np.stack([np.nan_to_num(run["fits"][window, a][:, 3], nan=np.inf) for a in ALPHAS], axis=1)
            pick = np.argmin(rss, axis=1)
            value_A = np.stack([np.maximum(run["fits"][window, a][:, 1] + margin * run["fits"][window, a][:, 2], 0)
                                * (g_of(a)(n + h) - g_of(a)(n)) for a in ALPHAS], axis=1)
            value = value_A[np.arange(len(n)), pick]
        else:
            F = run["fits"][window, alpha]
            g = g_of(alpha)
            value = np.maximum(F[:, 1] + margin * F[:, 2], 0.0) * (g(n + h) - g(n))
        fire = (value < threshold) & (left > 0)  # NaN compares False: not measured yet
        held = fire.copy()
        for s in range(1, persist):
            held[s:] &= fire[:-s]
            held[:s] = False
        return held
    return fires


FAMILIES = {
    "linear drift (the current rule's grid)": drift_rule(0.0),
    "decaying drift, alpha 0.5": drift_rule(0.5),
    "decaying drift, alpha 1 (log)": drift_rule(1.0),
    "decaying drift, alpha fitted per window": drift_rule("fitted"),
    "linear drift, horizon floor 0.25 n": drift_rule(0.0, floor_q=0.25),
    "linear drift, horizon floor 0.5 n": drift_rule(0.0, floor_q=0.5),
    "linear drift, horizon n (no budget)": drift_rule(0.0, floor_q=1.0),
    "linear drift, fired 2 rounds running": drift_rule(0.0, persist=2),
    "log drift, fired 2 rounds running": drift_rule(1.0, persist=2),
}


def judge(runs: dict, rule, window: int, margin: float, threshold: float) -> dict:
    """``stopping_sensitivity.judge`` with another rule: ``(verdict, cut budgets, cut budgets early)`` per run."""
    out = {}
    for key, run in runs.items():
        labels, accuracy = run["labels"], run["accuracy"]

        def first(k: int, budget: int):
            f = np.flatnonzero(rule(run, budget, window, margin, threshold)[: k + 1])
            return int(f[0]) if len(f) else None

        i = first(len(labels) - 1, run["budget"])
        below = None if i is None else round(100 * (run["final"] - accuracy[i]), 2)
        saved = 0 if i is None else run["budget"] - int(labels[i])
        early_cuts = 0
        for k, final in run["cuts"]:
            j = first(k, int(labels[k]))
            early_cuts += j is not None and round(100 * (final - accuracy[j]), 2) > 1.0
        out[key] = (stopping.verdict(below, saved, run["flattened"], run["flat"], run["budget"]),
                    len(run["cuts"]), early_cuts)
    return out


def load() -> dict:
    """``stopping_sensitivity.load``'s runs (its fits for the current window only), with every
    round's disagreements and this script's fits for every window and alpha."""
    from activebayes.stopping import CHANGE_WINDOW

    sensitivity.WINDOWS = (CHANGE_WINDOW,)
    try:
        runs = sensitivity.load()
    finally:
        sensitivity.WINDOWS = WINDOWS
    for run in runs.values():
        run["D"], run["scale"] = disagreements(run["rounds"])
        run["fits"] = {(w, a): fits(run, w, a) for w in WINDOWS for a in ALPHAS}
        # the linear fit is the library's
        drift, se = run["drifts"][CHANGE_WINDOW]
        mine = run["fits"][CHANGE_WINDOW, 0.0]
        assert np.allclose(mine[:, 1], drift, equal_nan=True, atol=1e-12)
        assert np.allclose(mine[:, 2], se, equal_nan=True, atol=1e-12)
    return runs


def choose(results: dict, base: dict, *, hold_cut_budgets: bool) -> tuple | None:
    """``stopping_sensitivity.choose``, held to the current setting's early stops on the even seeds
    (``base``: its judged runs) rather than to the family's own setting: the most runs meeting the goal
    there, then fewer early stops, fewer cut budgets early, the more cautious (larger margin and window,
    smaller threshold). ``None`` when no setting stops as few runs early."""
    limit = sensitivity.counts(base, "even")
    allowed = [key for key, judged in results.items()
               if sensitivity.counts(judged, "even")["early"] <= limit["early"]
               and (not hold_cut_budgets or sensitivity.counts(judged, "even")["cut_early"] <= limit["cut_early"])]
    if not allowed:
        return None
    return max(allowed, key=lambda key: (sensitivity.counts(results[key], "even")["met"],
                                         -sensitivity.counts(results[key], "even")["early"],
                                         -sensitivity.counts(results[key], "even")["cut_early"],
                                         key[1], key[0], -key[2]))


def swapped(judged: dict) -> dict:
    """The judged runs with even and odd seeds exchanged (seed 0 <-> 1, 2 <-> 3, ...)."""
    return {(name, f"seed_{int(seed.removeprefix('seed_')) ^ 1}"): v for (name, seed), v in judged.items()}


def cells(c: dict) -> str:
    return f"{c['met']} / {c['early']} / {c['late']}"


def line(family: str, key: tuple, picked: str, judged: dict) -> str:
    c = {s: sensitivity.counts(judged, s) for s in ("even", "odd", "all")}
    return (f"| {family} | ({key[0]}, {key[1]:g}, {key[2]:g}) | {picked} | {cells(c['even'])} | {cells(c['odd'])} | "
            f"{cells(c['all'])} | {c['all']['cut_early']} of {c['all']['cut_budgets']} "
            f"(odd {c['odd']['cut_early']}) |")


#: the settings the even-seed choice picked that also won on the held-out odd seeds (docs/benchmarks.md)
CHOSEN = (("linear drift", "linear drift (the current rule's grid)", None),
          ("decaying drift, alpha fitted per window", "decaying drift, alpha fitted per window", (16, 2.0, 0.005)),
          ("decaying drift, alpha 1 (log)", "decaying drift, alpha 1 (log)", (14, 1.5, 0.0075)))


def judge_new_seeds(first_seed: int, protocols: list[str]) -> int:
    """The current setting and the chosen ones on runs of ``protocols`` with seeds from
    ``first_seed`` on: seeds run after the choice, which took no part in it."""
    runs = {key: run for key, run in load().items()
            if key[0] in protocols and int(key[1].removeprefix("seed_")) >= first_seed}
    print(f"{len(runs)} runs of {', '.join(protocols)}, seeds {first_seed} on\n")
    print("| rule | setting (window, margin, threshold) | met / early / late | cut budgets stopped early |")
    print("| --- | --- | --- | --- |")
    for name, family, setting in CHOSEN:
        setting = setting or sensitivity.current_setting()
        c = sensitivity.counts(judge(runs, FAMILIES[family], *setting), "all")
        print(f"| {name} | ({setting[0]}, {setting[1]:g}, {setting[2]:g}) | {cells(c)} | "
              f"{c['cut_early']} of {c['cut_budgets']} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--new-seeds-from", type=int, default=None,
                        help="only judge the chosen settings on the runs with seeds from this one on")
    parser.add_argument("--protocols", default="digits,digits-b5,digits-shared",
                        help="with --new-seeds-from: the protocols, comma-separated")
    args = parser.parse_args(argv)
    if args.new_seeds_from is not None:
        return judge_new_seeds(args.new_seeds_from, args.protocols.split(","))
    tic = time.perf_counter()
    runs = load()
    current = sensitivity.current_setting()
    base = judge(runs, FAMILIES["linear drift (the current rule's grid)"], *current)
    sensitivity.check(runs, base)  # fires where stopping.py fires; 89 / 12 / 31 and 66 cut budgets early
    lines = ["| rule | setting (window, margin, threshold) | picked as | even seeds: met / early / late "
             "| odd seeds, held out: met / early / late | all seeds: met / early / late "
             "| cut budgets stopped early (all seeds; odd seeds) |",
             "| --- | --- | --- | --- | --- | --- | --- |",
             line("linear drift", current, "the current setting", base)]
    odd_limit = sensitivity.counts(base, "odd")
    c = {s: sensitivity.counts(base, s) for s in ("odd", "even")}
    swaps = ["| rule | early stops held | chosen on odd seeds | odd seeds: met / early / late, cut budgets early "
             "| even seeds, held out: met / early / late, cut budgets early |", "| --- | --- | --- | --- | --- |",
             f"| linear drift | the current setting | ({current[0]}, {current[1]:g}, {current[2]:g}) | "
             f"{cells(c['odd'])}, cut {c['odd']['cut_early']} | {cells(c['even'])}, cut {c['even']['cut_early']} |"]
    for family, rule in FAMILIES.items():
        results = {key: judge(runs, rule, *key) for key in itertools.product(WINDOWS, MARGINS, THRESHOLDS)}
        for hold, text in ((False, "even seeds, early held at full budget"), (True, "even seeds, early held on cuts too")):
            key = choose(results, base, hold_cut_budgets=hold)
            if key is None:
                lines.append(f"| {family} | – | {text}: no setting allowed | | | | |")
            else:
                lines.append(line(family, key, text, results[key]))
        swapped_results = {key: swapped(judged) for key, judged in results.items()}
        for hold in (False, True):  # the other way round: chosen on the odd seeds, judged on the even ones
            key = choose(swapped_results, swapped(base), hold_cut_budgets=hold)
            c = {s: sensitivity.counts(results[key], s) for s in ("odd", "even")} if key else None
            swaps.append(f"| {family} | {'on cuts too' if hold else 'full budget'} | "
                         + ("no setting allowed | | |" if key is None else
                            f"({key[0]}, {key[1]:g}, {key[2]:g}) | {cells(c['odd'])}, cut {c['odd']['cut_early']} | "
                            f"{cells(c['even'])}, cut {c['even']['cut_early']} |"))
        ceiling = [k for k, j in results.items() if sensitivity.counts(j, "odd")["early"] <= odd_limit["early"]
                   and sensitivity.counts(j, "odd")["cut_early"] <= odd_limit["cut_early"]]
        if ceiling:
            key = max(ceiling, key=lambda k: (sensitivity.counts(results[k], "odd")["met"],
                                              -sensitivity.counts(results[k], "odd")["early"]))
            lines.append(line(family, key, "*hindsight ceiling on odd seeds*", results[key]))
        print(f"{family}: {time.perf_counter() - tic:.0f} s", file=sys.stderr, flush=True)
    print("\n".join(lines))
    print("\nThe other way round (a check of the choice, not a second result): chosen on the odd seeds, "
          "judged on the even ones\n")
    print("\n".join(swaps))
    print(f"\n{len(runs)} runs, {len(FAMILIES)} families of {len(WINDOWS) * len(MARGINS) * len(THRESHOLDS)} settings, "
          f"{time.perf_counter() - tic:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
