"""Bayesian heads compared: MC dropout, a deep ensemble and last-layer Laplace (issue 25).

Every head runs the default strategy (``LoopConfig``'s: typicality until 6 labels per
class, then BADGE) and random acquisition, on the protocols of
``benchmarks/label_efficiency.py``:

``digits``: the embedded scikit-learn digits (1,297 train: 100 validation, the rest the
pool; 500 test), the MLP (one hidden layer of 128), 20 balanced initial labels, 10 per
round up to 200 labels, K = 100 to score the pool and K = 20 for the test predictive.
The heads on that network: ``mc_dropout`` (its consistent MC dropout, p = 0.5),
``ensemble`` (5 independently initialised MLPs) and ``laplace`` (the MLP trained to its
MAP weights, then a last-layer Laplace posterior: full GGN, 1,290 parameters, prior
precision by marginal likelihood).

``mnist-ssl``: MNIST (5,000 training digits: 500 validation, 4,500 pool; the 10,000
test digits) with the self-supervised encoder (SimCLR, trained once per seed on the
training images without labels, cached) and each head on its frozen features, up to
``--budget`` labels (default 200).

Every (protocol, head, strategy, seed) is one run directory under
``benchmarks/results/posteriors_runs/<protocol>-<head>/<strategy>/seed_<seed>/``;
finished runs are skipped and unfinished ones resume, so the benchmark runs in pieces.
``--summarise`` writes ``benchmarks/results/posteriors.json``: per head and strategy
the median labels to 90% / 95% test accuracy, AULC, the mean seconds per round of
fitting (MAP fit + posterior) and of scoring the pool, and the label counts where the
default strategy's mean accuracy is below random's (with the same head) by more than
the seed spread.

Usage::

    python benchmarks/posteriors.py --protocol digits --seeds 0,1,2,3,4,5
    python benchmarks/posteriors.py --protocol mnist-ssl --seeds 0,1 --max-minutes 60
    python benchmarks/posteriors.py --summarise
    python benchmarks/posteriors.py --protocol mnist-ssl --time-round 150   # one round per head, on an idle machine
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

RUNS = ROOT / "benchmarks" / "results" / "posteriors_runs"
RESULTS_JSON = ROOT / "benchmarks" / "results" / "posteriors.json"
HEADS = ("mc_dropout", "ensemble", "laplace")


def protocol(name: str, budget: int | None, data_dir: str | None):
    from activebayes.loop import LoopConfig
    from activebayes.records import DEFAULT_STRATEGY

    defaults = LoopConfig()
    if name == "digits":
        base = LoopConfig(dataset="digits", model="mlp", initial="balanced", initial_size=20, validation_size=100,
                          batch_size=10, budget=budget or 200, num_samples=100, mean_samples=100, eval_samples=20,
                          checkpoints=False)
    elif name == "mnist-ssl":
        base = LoopConfig(dataset="mnist", data_dir=data_dir or "../shared/data/mnist", model="encoder_head",
                          representation="self-supervised", initial="balanced", initial_size=20,
                          validation_size=500, batch_size=10, budget=budget or 200, num_samples=100, mean_samples=100,
                          eval_samples=20, checkpoints=False)
    else:
        raise SystemExit(f"error: unknown --protocol {name!r}; expected digits or mnist-ssl")
    # the default strategy and its cold start, as a user gets them
    assert base.strategy == DEFAULT_STRATEGY and base.cold_start == defaults.cold_start
    return base


def _grid(args: argparse.Namespace):
    from activebayes.records import DEFAULT_STRATEGY
    from activebayes.rundir import Comparison, RunDirectory

    base = protocol(args.protocol, args.budget, args.data_dir)
    label = args.protocol
    if args.encoder_epochs is not None:  # another length of the encoder's training: its own runs
        base = base.replace(representation_options={**base.representation_options, "epochs": args.encoder_epochs})
        label = f"{args.protocol}-e{args.encoder_epochs}"
    seeds = tuple(int(s) for s in args.seeds.split(","))
    heads = tuple(args.heads.split(",")) if args.heads else HEADS
    strategies = (DEFAULT_STRATEGY, "random")
    jobs = []
    for seed in seeds:  # seeds outer: a partial benchmark covers every head early
        for head in heads:
            name = f"{label}-{head}"
            head_base = base.replace(posterior=head)
            comparison = Comparison(RUNS / name, head_base, strategies, seeds)
            if (RUNS / name / "comparison.json").is_file():
                stored = Comparison.read(RUNS / name)
                comparison = Comparison(RUNS / name, head_base, strategies,
                                        tuple(dict.fromkeys([*stored.seeds, *seeds])))
            comparison.write()
            for strategy in strategies:
                run_dir = comparison.run_dir(strategy, seed)
                if not RunDirectory(run_dir).is_finished():
                    jobs.append((name, head_base.replace(strategy=strategy, seed=seed), run_dir))
    return jobs


def run(args: argparse.Namespace) -> None:
    from label_efficiency import _run_one

    jobs = _grid(args)
    print(f"{len(jobs)} unfinished runs", flush=True)
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
    for job in jobs:
        if deadline is not None and time.monotonic() > deadline:
            print("time limit reached; continue later with the same command", file=sys.stderr)
            return
        print(_run_one(*job, args.threads, False), flush=True)


def summarise() -> dict:
    import numpy as np

    from activebayes.analysis import learning_curves_from_runs, summarise_strategy
    from activebayes.rundir import load_runs
    from label_efficiency import _rounds_below_random

    results: dict = {
        "generated": time.strftime("%Y-%m-%d"),
        "host": ("this project's 2-core CPU; each run on one thread beside one or two other benchmark processes, so "
                 "the per-round seconds here are upper bounds; round_seconds holds the idle timing (--time-round)"),
        "protocols": {},
    }
    for directory in sorted(p for p in RUNS.iterdir() if (p / "comparison.json").is_file()):
        runs = load_runs(directory)
        finished = {k: v for k, v in runs.items() if v[1] and v[1][-1].stop_reason is not None}
        head = next((h for h in HEADS if directory.name.endswith(f"-{h}")), None)
        if head is None:
            continue
        protocol_name = directory.name[: -len(head) - 1]
        unfinished = sorted(f"{s} seed {seed}" for (s, seed) in runs if (s, seed) not in finished)
        entries: dict = {}
        for strategy, curves in learning_curves_from_runs(finished).items() if finished else []:
            summary = summarise_strategy(curves, targets=(0.9, 0.95), strategy=strategy)
            per_seed = sorted(curves, key=lambda c: c.seed)
            rounds = [finished[(strategy, c.seed)][1] for c in per_seed]

            def mean_seconds(key: str) -> float:
                values = [r.seconds.get(key, 0.0) for run in rounds for r in run if r.acquired]
                return float(np.mean(values)) if values else float("nan")

            entries[strategy] = {
                "seeds": [c.seed for c in per_seed],
                "labels_to_90": [c.labels_to_reach(0.9) for c in per_seed],
                "labels_to_95": [c.labels_to_reach(0.95) for c in per_seed],
                "median_labels_to_90": summary.reach[0.9].median,
                "median_labels_to_95": summary.reach[0.95].median,
                "aulc_mean": summary.aulc_mean,
                "aulc_std": summary.aulc_std,
                "final_accuracy_mean": summary.final_accuracy_mean,
                "fit_seconds_per_round": mean_seconds("fit"),
                "score_seconds_per_round": mean_seconds("acquire"),
                "evaluate_seconds_per_round": mean_seconds("evaluate"),
                "learning_curves": [
                    {"seed": c.seed, "n_labelled": [int(v) for v in c.n_labelled_R],
                     "test_accuracy": [float(v) for v in c.accuracy_R]} for c in per_seed
                ],
            }
        _rounds_below_random(entries)
        results["protocols"].setdefault(protocol_name, {})[head] = {"runs": entries, "unfinished": unfinished}
    from activebayes._io import atomic_write_text

    if RESULTS_JSON.is_file():  # the round timings are measured separately (--time-round)
        results["round_seconds"] = json.loads(RESULTS_JSON.read_text()).get("round_seconds", {})
    atomic_write_text(RESULTS_JSON, json.dumps(results, indent=1) + "\n")
    print(_table(results))
    return results


def _table(results: dict) -> str:
    lines = ["| protocol | head | strategy | seeds | median labels to 90% | to 95% | AULC | fit s/round | score s/round | rounds below random |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for protocol_name, heads in results["protocols"].items():
        for head, data in heads.items():
            for strategy, e in data["runs"].items():
                lines.append(
                    f"| {protocol_name} | {head} | {strategy} | {len(e['seeds'])} | {e['median_labels_to_90']} | "
                    f"{e['median_labels_to_95']} | {e['aulc_mean']:.3f} | {e['fit_seconds_per_round']:.2f} | "
                    f"{e['score_seconds_per_round']:.2f} | {e.get('rounds_below_random', '-')} |")
    return "\n".join(lines)


def time_rounds(args: argparse.Namespace) -> dict:
    """Seconds of one round (fit + scoring the pool) per head at ``--time-round`` labels.

    Each head runs the protocol's default strategy (BADGE after ``LABELS`` balanced labels)
    for two rounds, ``--repeats`` times in a fresh directory, and the second round is
    timed: the first also loads the encoder and encodes the pool, which a run pays once,
    not per round. The medians go to ``posteriors.json`` under ``round_seconds``.
    """
    import statistics
    import tempfile

    import torch

    from activebayes.experiment import run_experiment

    torch.set_num_threads(args.threads)
    labels = args.time_round
    base = protocol(args.protocol, labels + 20, args.data_dir).replace(
        initial_size=labels, cold_start=None, evaluate_test=False, seed=0)  # BADGE from the start
    label = args.protocol
    if args.encoder_epochs is not None:
        base = base.replace(representation_options={**base.representation_options, "epochs": args.encoder_epochs})
        label = f"{args.protocol}-e{args.encoder_epochs}"
    heads = tuple(args.heads.split(",")) if args.heads else HEADS
    out: dict = {"protocol": label, "labels": labels, "threads": args.threads,
                 "load_average": round(os.getloadavg()[0], 2), "heads": {}}
    for head in heads:
        fit, score = [], []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as directory:
                run_experiment(base.replace(posterior=head), directory, progress=False, report=False)
                # the second round: the first also encodes the pool once (its features are then cached)
                record = json.loads((Path(directory) / "rounds.jsonl").read_text().splitlines()[1])
            fit.append(record["seconds"]["fit"])
            score.append(record["seconds"]["acquire"])
        out["heads"][head] = {"fit": round(statistics.median(fit), 3), "score": round(statistics.median(score), 3),
                              "round": round(statistics.median(f + s for f, s in zip(fit, score, strict=True)), 3)}
        print(f"{label} {head}: fit {out['heads'][head]['fit']:.2f} s + score "
              f"{out['heads'][head]['score']:.2f} s = {out['heads'][head]['round']:.2f} s a round at {labels} labels",
              flush=True)
    results = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.is_file() else {}
    results.setdefault("round_seconds", {})[f"{label}@{labels}"] = out
    from activebayes._io import atomic_write_text

    atomic_write_text(RESULTS_JSON, json.dumps(results, indent=1) + "\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", default="digits")
    parser.add_argument("--seeds", default="0,1,2,3,4,5")
    parser.add_argument("--heads", default=None, help="comma-separated subset of mc_dropout,ensemble,laplace")
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-minutes", type=float, default=None)
    parser.add_argument("--encoder-epochs", type=int, default=None,
                        help="train the self-supervised encoder for this many epochs (runs go to <protocol>-e<N>-<head>)")
    parser.add_argument("--summarise", action="store_true")
    parser.add_argument("--time-round", type=int, default=None, metavar="LABELS",
                        help="only time one round (fit + scoring) of each head at LABELS labels")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of --time-round (the median is kept)")
    args = parser.parse_args()
    if args.time_round:
        time_rounds(args)
    elif args.summarise:
        summarise()
    else:
        run(args)


if __name__ == "__main__":
    main()
