"""Summarise the text (``wordnet_nouns``) and multi-label (``mnist_pairs``) label-efficiency runs.

Reads the run directories ``benchmarks/label_efficiency.py`` caches under
``benchmarks/results/label_efficiency_runs/<task>/`` (finished runs only) and writes
``benchmarks/results/text_multilabel.json`` plus a markdown table on stdout (pasted into
docs/guides/text-and-tables.md). Nothing else is touched (docs/benchmarks.md is the
MNIST summary's).

Runs of the default schedule, a cold start then a strategy, cached by ``--cold-start S
--cold-start-labels N`` under ``<task>-cold-<S><N>/``, are summarised beside them as
``<S>-then-<strategy>`` (e.g. ``typicality-then-badge``, typicality until 6 labels per class,
the loop's default length), another length as ``<S><N>-then-<strategy>``.

Runs of BatchBALD on a BALD pre-filter of the ``M`` best-scoring items (``--prefilter M``),
cached under ``<task>-pf<M>/``, are summarised as ``batchbald-prefilter<M>``.

Targets are chosen from random's own curve, because the 90% / 95% accuracies of the
MNIST tables are out of reach on these tasks: with ``m(n)`` random's mean headline metric
over its seeds at ``n`` labels and ``B`` the budget,

- ``T_mid = floor_2(m(n_mid))``, ``n_mid`` the round closest to ``B / 2``,
- ``T_end = floor_2(m(B))``,

``floor_2`` rounding down to two decimals (:func:`activebayes.analysis.baseline_targets`, the
rule the report uses where no run reaches 90%). So random reaches ``T_end`` at about the
budget by construction, and a strategy that reaches it earlier saves labels. The headline
metric is the test accuracy (single-label) or the test micro-F1 (multi-label).
"Rounds below random" counts the label counts where a strategy's mean is below random's
by more than the larger of the two standard deviations over seeds (the main summary's rule).

Usage::

    python benchmarks/text_multilabel_summary.py [--tasks wordnet_nouns,mnist_pairs,mnist_pairs-batchbald_cnn]

The tasks not named keep their entries in the JSON file.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "results" / "label_efficiency_runs"
OUT = ROOT / "benchmarks" / "results" / "text_multilabel.json"


#: the suffixes ``label_efficiency.py`` appends after a cold start's ``-cold-<S><N>``
_AFTER_COLD_START = re.compile(r"(-training-[a-z]+)?(-mk\d+)?$")


def cold_start_variants(task: str) -> list[tuple[Path, re.Match]]:
    """The run folders of ``task`` with a cold start, each with the match of its
    ``cold-<S><N>`` part (strategy, labels). ``label_efficiency.py`` puts that part before
    its ``-training-<T>`` and ``-mk<K>`` suffixes, so the variants of
    ``<base>-training-paper`` are ``<base>-cold-<S><N>-training-paper``."""
    tail = _AFTER_COLD_START.search(task).group(0)
    base = task[: len(task) - len(tail)]
    found = []
    for variant in sorted(RUNS.glob(f"{base}-cold-*{tail}")):
        middle = variant.name[len(base) + 1 : len(variant.name) - len(tail)]
        match = re.fullmatch(r"cold-([a-z_]+?)(\d+)", middle)
        if match is not None and variant.is_dir():
            found.append((variant, match))
    return found


def summarise_task(task: str) -> dict | None:
    from activebayes.analysis import baseline_targets, learning_curves_from_runs, summarise_strategy
    from activebayes.records import COLD_START_LABELS_PER_CLASS, headline_metric
    from activebayes.rundir import load_runs

    runs = dict(load_runs(RUNS / task))
    for variant, match in cold_start_variants(task):  # the default schedule: a cold start, then the strategy
        for (strategy, seed), run in load_runs(variant).items():
            # the default length (COLD_START_LABELS_PER_CLASS a class) unnamed, any other named
            num_classes = len(run[1][0].class_counts) if run[1] else None
            labels = int(match.group(2))
            length = "" if labels == COLD_START_LABELS_PER_CLASS * (num_classes or 0) else str(labels)
            runs[(f"{match.group(1)}{length}-then-{strategy}", seed)] = run
    for variant in sorted(RUNS.glob(f"{task}-pf*")):  # BatchBALD on a BALD pre-filter of M items
        match = re.fullmatch(r"pf(\d+)", variant.name[len(task) + 1:])
        if match is None:
            continue
        for (strategy, seed), run in load_runs(variant).items():
            runs[(f"{strategy}-prefilter{match.group(1)}", seed)] = run
    finished = {k: v for k, v in runs.items() if v[1] and v[1][-1].stop_reason is not None}
    if not finished or not any(s == "random" for s, _ in finished):
        return None
    metric = headline_metric([r.metrics for _, rounds in finished.values() for r in rounds])
    curves = learning_curves_from_runs(finished, metric=metric)
    random_n = curves["random"][0].n_labelled_R
    targets = baseline_targets(curves["random"])  # the report's rule where 90% is out of reach
    out = {"metric": metric, "targets": list(targets), "target_rule": "floor_2 of random's mean at ~B/2 and at B",
           "strategies": {}}
    for strategy, strategy_curves in sorted(curves.items()):
        summary = summarise_strategy(strategy_curves, targets=targets, strategy=strategy)
        seeds = sorted(c.seed for c in strategy_curves)
        shared = [s for s in seeds if s in {c.seed for c in curves["random"]}]
        below = []
        if strategy != "random" and len(shared) >= 2:
            mine = np.array([c.accuracy_R for c in strategy_curves if c.seed in shared])
            rand = np.array([c.accuracy_R for c in curves["random"] if c.seed in shared])
            gap = mine.mean(0) - rand.mean(0)
            spread = np.maximum(mine.std(0), rand.std(0))
            below = [int(n) for n, g, s in zip(random_n, gap, spread, strict=True) if g < -s]
        out["strategies"][strategy] = {
            "seeds": seeds,
            "median_labels": {str(t): summary.reach[t].median for t in targets},
            "labels_per_seed": {str(t): [c.labels_to_reach(t) for c in sorted(strategy_curves, key=lambda c: c.seed)]
                                for t in targets},
            "aulc_mean": summary.aulc_mean,
            "aulc_std": summary.aulc_std,
            "final_mean": summary.final_accuracy_mean,
            "rounds_below_random": below,
        }
    return out


def markdown(task: str, result: dict) -> str:
    t1, t2 = result["targets"]
    lines = [f"**{task}** (headline `{result['metric']}`; targets {t1:.2f} / {t2:.2f} from random's curve)", "",
             f"| strategy | seeds | median labels to {t1:.2f} | median labels to {t2:.2f} | AULC (mean ± sd) "
             "| final | rounds below random |",
             "|---|---|---|---|---|---|---|"]
    for name, entry in result["strategies"].items():
        reach = [entry["median_labels"][str(t)] for t in (t1, t2)]
        fmt = ["not reached" if r is None else f"{r:g}" for r in reach]
        counts = entry["rounds_below_random"]
        below = (f"{len(counts)} rounds ({counts[0]}–{counts[-1]})" if len(counts) > 6
                 else ", ".join(map(str, counts)) or "none")
        lines.append(f"| {name} | {len(entry['seeds'])} | {fmt[0]} | {fmt[1]} | {entry['aulc_mean']:.4f} ± "
                     f"{entry['aulc_std']:.4f} | {entry['final_mean']:.4f} | {below} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default="wordnet_nouns,mnist_pairs,mnist_pairs-batchbald_cnn")
    args = parser.parse_args()
    results = {}
    for task in args.tasks.split(","):
        result = summarise_task(task)
        if result is None:
            print(f"{task}: no finished random run yet")
            continue
        results[task] = result
        print(markdown(task, result) + "\n")
    stored = json.loads(OUT.read_text()) if OUT.is_file() else {}
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**stored, **results}, indent=1) + "\n")
    tmp.replace(OUT)  # the tasks not summarised this time keep their stored entries


if __name__ == "__main__":
    main()
