"""When to stop without a test set: how early each stopping signal fires, and what it costs.

Each seed runs the default strategy (typicality, then BADGE) once to the protocol's
budget with every signal recorded each round (``activebayes.stopping.round_signals``)
and ``audit_fraction`` of each batch drawn uniformly at random. Because the signals
are recorded whether or not they stop a run, one run per seed tells where each
criterion *would* have stopped it:

- labels at the first round it fires, test accuracy there, the gap to the best test
  accuracy the run reaches by its budget (points lost by stopping), labels saved;
- "too early": the gap is more than 1 point;
- for the accuracy estimate from the audited answers: its error against the test
  accuracy of the models that predicted those answers, and how often that accuracy
  lies inside the stated 90% interval (coverage).

Runs are cached under ``benchmarks/cache/stopping/`` (resumable); the summary goes to
``benchmarks/results/stopping.json``.

Usage::

    python benchmarks/stopping.py --dataset digits --seeds 0-5
    python benchmarks/stopping.py --summarise
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "benchmarks" / "cache" / "stopping"
RESULTS = ROOT / "benchmarks" / "results" / "stopping.json"

#: the threshold each criterion is judged at (the defaults; the estimate's is a target)
CRITERIA = {
    "stable_predictions": 0.99,
    "expected_accuracy": 0.005,
    "information": 0.1,
    "estimated_accuracy": 0.9,
}


def protocol(dataset: str, data_dir: str | None):
    from activebayes.loop import LoopConfig

    common = dict(initial="balanced", initial_size=20, batch_size=10, checkpoints=False, audit_fraction=0.2,
                  stop_set_size=1000, mean_samples=100)  # BADGE scored with K = 100, as in the measured runs
    if dataset == "digits":
        return LoopConfig(dataset="digits", model="mlp", validation_size=100, budget=450, **common)
    if dataset in ("mnist", "repeated_mnist"):
        return LoopConfig(dataset=dataset, data_dir=data_dir or str(ROOT.parent / "shared" / "data" / "mnist"),
                          model="batchbald_cnn", validation_size=500, budget=300, **common)
    raise SystemExit(f"unknown --dataset {dataset!r}: digits, mnist or repeated_mnist")


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def run(dataset: str, seeds: list[int], data_dir: str | None, representation: str, threads: int | None = None) -> None:
    from activebayes.experiment import run_experiment

    if threads:
        import torch

        torch.set_num_threads(threads)

    for seed in seeds:
        config = protocol(dataset, data_dir).replace(seed=seed)
        if representation != "none":  # the encoder with an MC dropout head on its frozen features
            config = config.replace(model="encoder_head", representation=representation)
        name = dataset + ("-ssl" if representation != "none" else "")
        tic = time.perf_counter()
        run_experiment(config, CACHE / name / f"seed_{seed}", progress=False)
        print(f"{name} seed {seed}: {time.perf_counter() - tic:.0f} s", flush=True)


def _fires(rounds: list[dict], name: str, threshold: float) -> int | None:
    """Index of the first round where ``name`` fires at ``threshold`` (re-judged from its value)."""
    from activebayes.stopping import SIGNAL_WINDOW

    window = SIGNAL_WINDOW
    for i, r in enumerate(rounds):
        signals = r.get("signals") or {}
        if name == "stable_predictions":
            kappas = [(q.get("signals") or {}).get(name, {}).get("value") for q in rounds[max(0, i - window + 1): i + 1]]
            if len(kappas) == window and None not in kappas and sum(kappas) / window >= threshold:
                return i
        elif name == "expected_accuracy":
            values = [(q.get("signals") or {}).get(name, {}).get("value") for q in rounds[max(0, i - window): i + 1]]
            if len(values) == window + 1 and None not in values:
                if max(abs(b - a) for a, b in zip(values, values[1:], strict=False)) < threshold:
                    return i
        elif name == "information":
            first = next((q["signals"][name]["value"] for q in rounds
                          if (q.get("signals") or {}).get(name, {}).get("value")), None)
            value = signals.get(name, {}).get("value")
            if i > 0 and first and value is not None and value / first < threshold:
                return i
        elif name == "estimated_accuracy":
            if signals.get(name, {}).get("low") is not None and signals[name]["low"] >= threshold:
                return i
    return None


def summarise() -> dict:
    from activebayes.stopping import SIGNAL_WINDOW

    out: dict = {"criteria": CRITERIA, "protocols": {}}
    for directory in sorted(p for p in CACHE.glob("*") if p.is_dir()):
        runs = []
        for seed_dir in sorted(directory.glob("seed_*")):
            path = seed_dir / "rounds.jsonl"
            rounds = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
            if not rounds or not rounds[-1].get("stop_reason"):
                continue
            runs.append((seed_dir.name, rounds))
        if not runs:
            continue
        protocol_out: dict = {"seeds": len(runs), "criteria": {}, "estimate": {}}
        for name, threshold in CRITERIA.items():
            rows = []
            for seed, rounds in runs:
                accuracy = [r["metrics"].get("test_accuracy") for r in rounds]
                best, budget = max(a for a in accuracy if a is not None), rounds[-1]["n_labelled"]
                i = _fires(rounds, name, threshold)
                if i is None:
                    rows.append({"seed": seed, "labels": None, "accuracy": None, "gap": None, "saved": 0})
                    continue
                rows.append({"seed": seed, "labels": rounds[i]["n_labelled"], "accuracy": accuracy[i],
                             "gap": round(100 * (best - accuracy[i]), 2), "saved": budget - rounds[i]["n_labelled"],
                             "best": best})
            fired = [r for r in rows if r["labels"] is not None]
            protocol_out["criteria"][name] = {
                "threshold": threshold,
                "fired": f"{len(fired)} of {len(rows)}",
                "median_labels": statistics.median(r["labels"] for r in fired) if fired else None,
                "median_gap_points": statistics.median(r["gap"] for r in fired) if fired else None,
                "max_gap_points": max(r["gap"] for r in fired) if fired else None,
                "too_early": sum(r["gap"] > 1.0 for r in fired),
                "median_saved": statistics.median(r["saved"] for r in fired) if fired else 0,
                "runs": rows,
            }
        # the audited estimate against the accuracy of the models whose predictions were audited
        errors, covered, n_checked = [], 0, 0
        for _seed, rounds in runs:
            for i, r in enumerate(rounds):
                estimate = (r.get("signals") or {}).get("estimated_accuracy") or {}
                if estimate.get("value") is None:
                    continue
                source = [q for q in rounds[max(0, i - SIGNAL_WINDOW): i] if (q.get("signals") or {}).get("audit")]
                n = sum(q["signals"]["audit"]["n"] for q in source)
                truth = sum(q["signals"]["audit"]["n"] * q["metrics"]["test_accuracy"] for q in source) / n
                errors.append(abs(estimate["value"] - truth))
                covered += estimate["low"] <= truth <= estimate["high"]
                n_checked += 1
        if n_checked:
            protocol_out["estimate"] = {"rounds": n_checked, "mean_abs_error": round(statistics.fmean(errors), 4),
                                        "coverage": round(covered / n_checked, 3), "nominal": 0.9}
        out["protocols"][directory.name] = protocol_out
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    return out


def _print(summary: dict) -> None:
    for protocol_name, data in summary["protocols"].items():
        print(f"\n{protocol_name} ({data['seeds']} seeds)")
        print("| criterion | threshold | fired | median labels | median / max points lost | stopped >1 point early | median labels saved |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for name, row in data["criteria"].items():
            print(f"| {name} | {row['threshold']} | {row['fired']} | {row['median_labels']} | "
                  f"{row['median_gap_points']} / {row['max_gap_points']} | {row['too_early']} | {row['median_saved']} |")
        if data["estimate"]:
            e = data["estimate"]
            print(f"estimate: mean |error| {e['mean_abs_error']}, coverage {e['coverage']} (nominal {e['nominal']}) "
                  f"over {e['rounds']} rounds")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--seeds", default="0-5")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--representation", default="none", choices=["none", "self-supervised"])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: chosen from the load)")
    parser.add_argument("--summarise", action="store_true", help="only summarise the cached runs")
    args = parser.parse_args(argv)
    if not args.summarise:
        run(args.dataset, _seeds(args.seeds), args.data_dir, args.representation, args.threads)
    _print(summarise())
    return 0


if __name__ == "__main__":
    sys.exit(main())
