"""How much BatchBALD loses when it runs on a BALD pre-filter of M candidates (real MNIST).

Big pools are scored with BatchBALD on the M items of highest BALD only
(``score_pool(..., "batchbald", options={"prefilter": M})``; see activebayes.scoring). This
measures the agreement of that batch with BatchBALD on the whole pool:

- data: the 5,000 real MNIST training digits in ``../shared/data/mnist``: a stratified
  validation set and a balanced labelled set of L digits (L = 20: the protocol's cold
  start; L = 100: a few rounds in), the remaining 4,500 are the pool;
- model: the product's MNIST network (``batchbald_cnn``) trained on the L labels with early
  stopping on the validation set, K = 100 consistent MC dropout samples of the pool;
- full: greedy BatchBALD, batch of 10, on all 4,500 (10,000 sampled configurations once
  the exact joint is too big, as in the paper);
- pre-filtered: the same on the top-M BALD items, M in 10 .. 2,000, same seed.

Reported per (L, seed, M): overlap of the two batches (|A ∩ B| / 10), whether they are the
same batch in the same order, and whether the submodularity certificate holds (every
greedy step's gain is at least the (M+1)-th BALD score, the most an excluded item could
gain, so the pre-filtered batch provably is the full one while the joint is exact).
One check runs :func:`activebayes.scoring.score_pool` end to end and asserts it matches.

Usage:
  python benchmarks/batchbald_prefilter.py            # L in {20, 100}, seeds 0-2 (~10 min on 2 cores)
  python benchmarks/batchbald_prefilter.py --quick    # one seed, L = 20
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from activebayes._io import atomic_write_text
from activebayes.acquisition import bald, batchbald
from activebayes.data import Pool, load_dataset
from activebayes.models import build_model, fit, predict_log_probs
from activebayes.scoring import score_pool

ROOT = Path(__file__).resolve().parent
MNIST = ROOT.parents[1] / "shared" / "data" / "mnist"
RESULTS = ROOT / "results" / "batchbald_prefilter.json"
POOL_SIZE, BATCH, K = 4500, 10, 100
PREFILTERS = (10, 20, 50, 100, 200, 500, 1000, 2000)


def trained_state(labelled: int, seed: int, mnist_dir: Path):
    dataset = load_dataset("mnist", data_dir=mnist_dir, split="train")
    pool = Pool.create(dataset, validation_size=len(dataset) - POOL_SIZE - labelled, initial_size=labelled,
                       initial="balanced", seed=seed)
    assert pool.n_unlabelled == POOL_SIZE
    model = build_model("batchbald_cnn", num_classes=10, input_shape=dataset.input_shape, generator=seed)
    fit(model, pool.labelled_data(), validation=pool.validation_data(), generator=seed)
    return dataset, pool, model


def agreement(log_probs_N_K_C: torch.Tensor, seed: int) -> tuple[list[dict], list[int], float]:
    start = time.perf_counter()
    full = batchbald(log_probs_N_K_C, BATCH, generator=torch.Generator().manual_seed(seed))
    full_seconds = time.perf_counter() - start
    bald_N = bald(log_probs_N_K_C)
    ranked = torch.argsort(-bald_N, stable=True)
    rows = []
    for M in PREFILTERS:
        kept = ranked[:M].sort().values
        start = time.perf_counter()
        picked = batchbald(log_probs_N_K_C[kept], BATCH, generator=torch.Generator().manual_seed(seed))
        seconds = time.perf_counter() - start
        indices = kept[picked.indices].tolist()
        gains = torch.diff(picked.scores, prepend=torch.zeros(1, dtype=torch.float64))
        threshold = float(bald_N[ranked[M]]) if M < len(ranked) else 0.0
        rows.append({
            "M": M,
            "overlap": len(set(indices) & set(full.indices.tolist())) / BATCH,
            "identical": indices == full.indices.tolist(),
            "certified": bool((gains >= threshold).all()),
            "seconds": round(seconds, 3),
            "indices": indices,
        })
    return rows, full.indices.tolist(), full_seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnist-dir", type=Path, default=MNIST)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--labelled", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--quick", action="store_true", help="one seed, L = 20")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.labelled = args.seeds[:1], args.labelled[:1]
    runs = []
    for labelled in args.labelled:
        for seed in args.seeds:
            dataset, pool, model = trained_state(labelled, seed, args.mnist_dir)
            candidates = pool.unlabelled_indices
            log_probs = predict_log_probs(model, dataset.inputs[candidates], K, generator=seed)
            rows, full, full_seconds = agreement(log_probs, seed)
            if labelled == args.labelled[0] and seed == args.seeds[0]:  # the product's path, end to end
                check = score_pool(model, dataset, candidates, "batchbald", BATCH, num_samples=K, mask_generator=seed,
                                   selection_seed=seed, options={"prefilter": 200})
                expected = [int(candidates[i]) for i in next(r for r in rows if r["M"] == 200)["indices"]]
                assert check.indices.tolist() == expected, (check.indices.tolist(), expected)
            runs.append({"labelled": labelled, "seed": seed, "full_seconds": round(full_seconds, 2),
                         "full_indices": full, "prefilters": rows})
            print(f"L={labelled} seed={seed}: full BatchBALD {full_seconds:.1f} s; overlap by M: "
                  + ", ".join(f"{r['M']}: {r['overlap']:.1f}{'=' if r['identical'] else ''}"
                              f"{'*' if r['certified'] else ''}" for r in rows), flush=True)
    summary = []
    for M in PREFILTERS:
        rows = [r for run in runs for r in run["prefilters"] if r["M"] == M]
        summary.append({
            "M": M,
            "mean_overlap": round(float(np.mean([r["overlap"] for r in rows])), 3),
            "min_overlap": min(r["overlap"] for r in rows),
            "identical": sum(r["identical"] for r in rows),
            "certified": sum(r["certified"] for r in rows),
            "runs": len(rows),
            "mean_seconds": round(float(np.mean([r["seconds"] for r in rows])), 3),
        })
    print(f"{'M':>6} {'mean overlap':>13} {'min':>5} {'identical':>10} {'certified':>10} {'seconds':>8}")
    for row in summary:
        print(f"{row['M']:>6} {row['mean_overlap']:>13.2f} {row['min_overlap']:>5.1f} "
              f"{row['identical']:>5}/{row['runs']:<4} {row['certified']:>5}/{row['runs']:<4} {row['mean_seconds']:>8.2f}")
    full_mean = float(np.mean([run["full_seconds"] for run in runs]))
    print(f"full BatchBALD on {POOL_SIZE:,}: {full_mean:.1f} s on average")
    payload = {"benchmark": "batchbald_prefilter", "pool_size": POOL_SIZE, "batch_size": BATCH, "k": K,
               "model": "batchbald_cnn", "summary": summary, "full_mean_seconds": round(full_mean, 2), "runs": runs,
               "command": "python benchmarks/batchbald_prefilter.py" + (" --quick" if args.quick else "")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out, json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
