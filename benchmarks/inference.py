"""MC inference speed and memory: activebayes.predict_log_probs vs K full forward passes.

Part 1 (speed, one process, same machine, same model, same inputs):
  - ours:        predict_log_probs(GalCNN, x, K): the convolutions run once per image,
                 only the dropout tail runs K times, batched;
  - K passes:    sampling="sequential": K full forward passes of the whole network with the
                 same consistent masks (what baal's MC wrapper costs) -> must equal ours;
  - baal:        baal 2.x ModelWrapper(MCDropoutModule(net)).predict_on_batch(x, iterations=K)
                 on the same architecture with nn.Dropout (its own random masks; timing only).
Part 1b (the BatchBALD CNN, K = 100 by default): the factorised conv2 of its MC pass
  (channel_masked_conv2d) vs the same layers one after another, batchbald_redux's dropout
  order, and batchbald_redux's own BayesianModule on the same weights (timing only).
Part 2 (memory): predict_log_probs in a fresh subprocess per (N, K); peak RSS from
  getrusage, next to the input and the [N, K, C] output it must hold. The activations of
  N x K forward rows (77 GB for N=50,000, K=100 with the Gal CNN) are never held.

Usage:
  python benchmarks/inference.py            # full: N=5,000, K=20; memory up to N=50,000, K=100
  python benchmarks/inference.py --quick    # smoke test, a few seconds
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from activebayes.models import GalCNN, build_model, predict_log_probs

DEFAULT_MNIST = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"


def load_images(n: int, mnist_dir: Path | None, seed: int) -> tuple[torch.Tensor, str]:
    """``n`` MNIST test images scaled to [0, 1] (tiled if n > 10,000), or random ones."""
    path = None if mnist_dir is None else mnist_dir / "t10k-images-idx3-ubyte.gz"
    if path is not None and path.exists():
        with gzip.open(path, "rb") as handle:
            raw = np.frombuffer(handle.read(), dtype=np.uint8, offset=16).reshape(-1, 1, 28, 28)
        reps = -(-n // raw.shape[0])
        images = torch.from_numpy(np.tile(raw, (reps, 1, 1, 1))[:n].astype(np.float32) / 255.0)
        return images, f"real MNIST test images ({path.parent})"
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 28, 28, generator=generator), "random 28x28 images"


def timed(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def baal_predict(net: nn.Module, x: torch.Tensor, K: int, batch_size: int) -> torch.Tensor | None:
    """baal's MC dropout prediction on the same architecture (plain nn.Dropout layers)."""
    try:
        from baal.bayesian.dropout import MCDropoutModule
        from baal.modelwrapper import ModelWrapper, TrainingArgs
    except Exception as error:  # baal is optional here
        print(f"(baal not importable: {error}; skipping it)")
        return None
    plain = nn.Sequential(
        net.features,
        nn.Dropout(0.25),
        *[m for m in net.classifier if not hasattr(m, "mask_seed")][:3],
        nn.Dropout(0.5),
        net.classifier[-1],
    )
    wrapper = ModelWrapper(MCDropoutModule(plain), TrainingArgs(use_cuda=False, replicate_in_memory=True))
    wrapper.model.eval()
    outputs = [wrapper.predict_on_batch(x[i : i + batch_size], iterations=K) for i in range(0, len(x), batch_size)]
    return torch.cat(outputs)  # [N, C, K] logits


def speed(args: argparse.Namespace) -> dict:
    torch.manual_seed(args.seed)
    net = GalCNN()
    x, source = load_images(args.num_items, args.mnist_dir, args.seed)
    N, K = x.shape[0], args.num_samples
    print(f"\n## Speed: GalCNN, N={N:,} {source}, K={K}, torch threads={torch.get_num_threads()}")
    ours_s, ours = timed(lambda: predict_log_probs(net, x, K, generator=0, batch_size=args.batch_size), args.repeats)
    naive_s, naive = timed(
        lambda: predict_log_probs(net, x, K, generator=0, batch_size=args.batch_size, sampling="sequential"),
        args.repeats,
    )
    max_diff = float((ours - naive).abs().max())
    rows = [("activebayes predict_log_probs (batched tail)", ours_s), ("K full forward passes, same masks", naive_s)]
    if not args.no_baal:
        baal_s, baal_out = timed(lambda: baal_predict(net, x, K, max(1, args.batch_size // 4)), 1)
        if baal_out is not None:
            rows.append(("baal ModelWrapper.predict_on_batch (MCDropoutModule)", baal_s))
    print("\n| method | time (s) | items x samples / s | ours faster by |")
    print("| --- | ---: | ---: | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {N * K / seconds:,.0f} | {seconds / ours_s:.1f}x |")
    print(f"\nmax |ours - K full passes| = {max_diff:.2e} (same masks; must be ~0)")
    if max_diff > 1e-4:
        raise SystemExit("results differ between the batched tail and K full passes")
    return {"N": N, "K": K, "source": source, "times_s": dict(rows), "max_abs_diff": max_diff}


def batchbald_redux_predict(net: nn.Module, x: torch.Tensor, K: int, batch_size: int) -> torch.Tensor | None:
    """batchbald_redux's consistent MC dropout (BayesianModule) on the same CNN and weights:
    its example network, which repeats every input K times before conv1 (timing only: its
    own masks)."""
    try:
        from batchbald_redux import consistent_mc_dropout as redux
    except Exception as error:  # a benchmark dependency, optional here
        print(f"(batchbald_redux not importable: {error}; skipping it)")
        return None
    m = net.net

    class ReduxCNN(redux.BayesianModule):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.conv1_drop = m[0], redux.ConsistentMCDropout2d(m[3].p)
            self.conv2, self.conv2_drop = m[4], redux.ConsistentMCDropout2d(m[7].p)
            self.fc1, self.fc1_drop, self.fc2 = m[9], redux.ConsistentMCDropout(m[10].p), m[12]

        def mc_forward_impl(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(nn.functional.max_pool2d(self.conv1_drop(self.conv1(x)), 2))
            x = torch.relu(nn.functional.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = torch.relu(self.fc1_drop(self.fc1(x.flatten(1))))
            return nn.functional.log_softmax(self.fc2(x), dim=1)

    model = ReduxCNN().eval()
    with torch.no_grad():
        return torch.cat([model(x[i : i + batch_size], K) for i in range(0, len(x), batch_size)])


def reorder(args: argparse.Namespace) -> dict:
    """BatchBALD CNN, three ways to compute the same K function samples (same weights, masks):

    - ours: channel dropout after pool + relu, so conv1, its pool and relu run once per
      item, and conv2 under the K channel masks from per-channel contributions
      (``channel_masked_conv2d``: one grouped convolution per item, then a [K, C] product);
    - the same layers run one after another: conv2 runs K times per item;
    - batchbald_redux's order (channel dropout straight after each conv): both convs
      after the first run K times per item.
    """
    from activebayes.models import BatchBALDCNN

    torch.manual_seed(args.seed)
    net = BatchBALDCNN()
    m = net.net
    layers = nn.Sequential(*m)
    original = nn.Sequential(m[0], m[3], m[1], m[2], m[4], m[7], m[5], m[6], *m[8:])
    x, source = load_images(args.num_items, args.mnist_dir, args.seed)
    N, K = x.shape[0], args.reorder_samples
    print(f"\n## Speed: BatchBALD CNN, N={N:,} {source}, K={K}, torch threads={torch.get_num_threads()}")
    ours_s, ours = timed(lambda: predict_log_probs(net, x, K, generator=0, batch_size=args.batch_size), args.repeats)
    # generator=None: the other two use the masks the shared layers now hold
    layers_s, by_layer = timed(lambda: predict_log_probs(layers, x, K, batch_size=args.batch_size), args.repeats)
    original_s, reference = timed(lambda: predict_log_probs(original, x, K, batch_size=args.batch_size), args.repeats)
    rows = [("activebayes: dropout after pool + relu, conv2 factorised over masks", ours_s),
            ("the same layers one after another (conv2 K times)", layers_s),
            ("batchbald_redux order: conv, dropout2d, pool, relu", original_s)]
    if not args.no_redux:
        # its example network's batch of 64 items (x K rows)
        redux_s, redux_out = timed(lambda: batchbald_redux_predict(net, x, K, 64), 1)
        if redux_out is not None:
            rows.append(("batchbald_redux BayesianModule (its example CNN, batches of 64)", redux_s))
    factorised_diff = float((ours - reference).abs().max())
    order_diff = float((by_layer - reference).abs().max())
    print("\n| how | time (s) | items x samples / s | ours faster by |")
    print("| --- | ---: | ---: | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {N * K / seconds:,.0f} | {seconds / ours_s:.2f}x |")
    print(f"\nmax |layers one after another - original order| = {order_diff:.2e} (same function; must be 0)")
    print(f"max |ours - original order| = {factorised_diff:.2e} (sums in another order; must be < 1e-5)")
    if order_diff > 0:
        raise SystemExit("the reordered BatchBALD CNN differs from the original order")
    if factorised_diff >= 1e-5:
        raise SystemExit("the factorised conv2 differs from the original order beyond float rounding")
    return {"N": N, "K": K, "times_s": dict(rows),
            "max_abs_diff": factorised_diff, "order_max_abs_diff": order_diff}


def _rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak) of this process from /proc, else getrusage's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak_rss() -> None:
    """Linux: writing 5 to clear_refs resets VmHWM, so the peak covers predict only."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def memory_child(args: argparse.Namespace) -> None:
    """Runs in a fresh process: one predict_log_probs call, prints peak RSS as JSON."""
    torch.manual_seed(0)
    net = build_model(args.model, num_classes=10, input_shape=(1, 28, 28), generator=0)
    x = torch.rand(args.num_items, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    before_mb = _rss_mb("VmRSS")
    _reset_peak_rss()
    start = time.perf_counter()
    out = predict_log_probs(net, x, args.num_samples, generator=0, batch_size=args.batch_size)
    seconds = time.perf_counter() - start
    peak_mb = _rss_mb("VmHWM")
    print(json.dumps({
        "N": args.num_items, "K": args.num_samples, "seconds": seconds,
        "rss_before_mb": before_mb, "peak_rss_mb": peak_mb,
        "input_mb": x.numel() * 4 / 2**20, "output_mb": out.numel() * 4 / 2**20,
    }))


def memory(args: argparse.Namespace) -> list[dict]:
    configs = [(200, 4), (1_000, 8)] if args.quick else [(5_000, 20), (50_000, 20), (50_000, 100)]
    print(f"\n## Peak memory: {args.model}, predict_log_probs in a fresh subprocess per run "
          f"(batch_size={args.batch_size}, default memory budget: 128 MB on the CPU)")
    print("\n| N | K | N x K rows | tail activations if held (GB) | time (s) | peak RSS (MB) "
          "| RSS before predict (MB) | output [N,K,C] (MB) | peak - before - output (MB) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    results = []
    for N, K in configs:
        command = [sys.executable, __file__, "--memory-child", "--model", args.model,
                   "--num-items", str(N), "--num-samples", str(K), "--batch-size", str(args.batch_size)]
        run = subprocess.run(command, capture_output=True, text=True, check=True)
        row = json.loads(run.stdout.strip().splitlines()[-1])
        held_gb = N * K * 32 * 11 * 11 * 4 / 2**30 if args.model == "gal_cnn" else float("nan")
        extra = row["peak_rss_mb"] - row["rss_before_mb"] - row["output_mb"]
        print(f"| {N:,} | {K} | {N * K:,} | {held_gb:.1f} | {row['seconds']:.1f} | {row['peak_rss_mb']:.0f} "
              f"| {row['rss_before_mb']:.0f} | {row['output_mb']:.0f} | {extra:.0f} |")
        results.append(row)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke mode: small N and K, seconds")
    parser.add_argument("--num-items", type=int, default=None, help="N for the speed part (default 5000)")
    parser.add_argument("--num-samples", type=int, default=None, help="K for the speed part (default 20)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=None, help="best of this many timings (default 2)")
    parser.add_argument("--mnist-dir", type=Path, default=DEFAULT_MNIST)
    parser.add_argument("--model", default="gal_cnn", help="model for the memory part")
    parser.add_argument("--no-baal", action="store_true", help="do not time baal")
    parser.add_argument("--no-redux", action="store_true", help="do not time batchbald_redux")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory part")
    parser.add_argument("--reorder-samples", type=int, default=None,
                        help="K for the BatchBALD CNN part (default 100, the acquisition K; quick: 16)")
    parser.add_argument("--no-reorder", action="store_true",
                        help="skip the BatchBALD CNN dropout-order part")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(args)
        return
    args.num_items = args.num_items or (100 if args.quick else 5_000)
    args.num_samples = args.num_samples or (4 if args.quick else 20)
    args.repeats = args.repeats or (1 if args.quick else 2)
    args.reorder_samples = args.reorder_samples or (16 if args.quick else 100)
    results = {"speed": speed(args)}
    if not args.no_reorder:
        results["reorder"] = reorder(args)
    if not args.no_memory:
        results["memory"] = memory(args)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
