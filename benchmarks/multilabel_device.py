"""Multi-label BatchBALD on the CPU and on an accelerator: the same picks, and the time.

One acquisition round of the digit pairs on the CNN with MNIST's K (``label_efficiency.py
--dataset mnist_pairs --model batchbald_cnn --num-samples 100``): a pool subsample of
N = 2,000 items, K = 100 function samples, C = 10 labels, a batch of 10. The first pick is
exact (2^10 label vectors), the next nine sampled (2,000 joint draws). The input is
``multilabel_log_probs`` of seeded random logits whose scale and per-label shift vary by
item. :func:`~activebayes.acquisition.multilabel.multilabel_batchbald` runs with
``device="cpu"`` and with ``--device`` (after one warm-up call there), same seed; the script
prints each time, the ratio, and whether the picks agree and by how much the scores differ,
and appends the result to ``benchmarks/results/multilabel_device.json``.

    python benchmarks/multilabel_device.py --device cuda
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "multilabel_device.json"


def pool_log_probs(N: int, K: int, C: int, seed: int = 0) -> torch.Tensor:
    from activebayes.acquisition.multilabel import multilabel_log_probs

    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g) * 4
    shift_N_1_C = torch.randn(N, 1, C, generator=g) * 2
    return multilabel_log_probs(torch.randn(N, K, C, generator=g) * scale_N_1_1 + shift_N_1_C)


def timed(log_probs_N_K_C: torch.Tensor, batch_size: int, device: str):
    from activebayes.acquisition.multilabel import multilabel_batchbald

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    tic = time.perf_counter()
    selection = multilabel_batchbald(log_probs_N_K_C, batch_size, generator=torch.Generator().manual_seed(1), device=device)
    return time.perf_counter() - tic, selection


def main(argv: list[str] | None = None) -> None:
    from activebayes.acquisition.multilabel import multilabel_batchbald

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="the accelerator to compare with the CPU (default cuda)")
    parser.add_argument("--pool", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=10)
    args = parser.parse_args(argv)
    log_probs_N_K_C = pool_log_probs(args.pool, args.samples, 10)
    multilabel_batchbald(log_probs_N_K_C[:50], 2, device=args.device)  # warm-up: kernels, allocator
    there_s, there = timed(log_probs_N_K_C, args.batch_size, args.device)
    cpu_s, here = timed(log_probs_N_K_C, args.batch_size, "cpu")
    same = there.indices.tolist() == here.indices.tolist()
    diff = float((there.scores - here.scores).abs().max())
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    print(f"N={args.pool} K={args.samples} C=10 batch {args.batch_size}: cpu {cpu_s:.2f} s "
          f"({torch.get_num_threads()} threads), {name} {there_s:.2f} s: x{cpu_s / there_s:.1f}; "
          f"same picks: {same}, largest score difference {diff:.1e}")
    entry = {"date": time.strftime("%Y-%m-%d"), "device": name, "cpu": platform.processor() or platform.machine(),
             "cpu_threads": torch.get_num_threads(), "N": args.pool, "K": args.samples, "C": 10,
             "batch_size": args.batch_size, "cpu_s": round(cpu_s, 3), "device_s": round(there_s, 3),
             "ratio": round(cpu_s / there_s, 2), "same_picks": same, "max_score_difference": diff}
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    RESULTS.write_text(json.dumps([*previous, entry], indent=1) + "\n")


if __name__ == "__main__":
    main()
