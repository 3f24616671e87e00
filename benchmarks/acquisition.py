"""Acquisition speed and memory, side by side with batchbald-redux 2.0.5 and baal 2.1.0.

Cases (fixed seed, float32 inputs: log_softmax of random logits whose scale varies per
item, plus a per-item class shift, so entropies and BALD spread out like a real model's):

  (a) BALD scores, N=60,000, K=100, C=10: activebayes ``bald`` vs batchbald-redux
      ``get_bald_batch`` vs baal ``BALD().get_uncertainties`` (baal gets the
      probabilities in its own [N, C, K] layout, converted outside the timing).
  (b) BatchBALD batch 10, N=10,000, K=20, C=10, 10,000 sampled configurations:
      activebayes vs batchbald-redux ``get_batchbald_batch``; the first four picks (the
      exact region: 10^4 configurations <= 10,000) must agree.
  (c) BatchBALD batch 10, N=60,000, K=100, C=10: activebayes only (batchbald-redux
      needs well over 10 minutes here, so it is skipped).

Measurement: every (case, implementation) runs in a fresh subprocess. The input is
generated and loaded first; then the call is timed (wall clock) and memory is the peak
resident set size (RSS, from psutil polled every 2 ms in a thread, and the kernel's
ru_maxrss high-water mark) minus the RSS just before the call: what the call needs on
top of its input. tracemalloc is blind to torch's allocations, which is why RSS is used.

    python benchmarks/acquisition.py            # the full table (~10 minutes on 2 cores)
    python benchmarks/acquisition.py --quick    # a smoke version in seconds, in-process
    python benchmarks/acquisition.py --threads 1   # pin torch to one thread for everyone

On a shared machine torch's default two OpenMP threads can be 10x slower than one (a
descheduled thread stalls every parallel op); ``--threads`` applies to every implementation.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

os.environ.setdefault("TQDM_DISABLE", "1")  # the peers draw progress bars

import torch  # noqa: E402


@dataclass(frozen=True)
class Case:
    key: str
    what: str
    N: int
    K: int
    C: int
    batch_size: int = 10
    num_samples: int = 10_000
    peers: tuple[str, ...] = ()


FULL = [
    Case("a", "BALD scores", 60_000, 100, 10, peers=("batchbald_redux", "baal")),
    Case("b", "BatchBALD b=10, M=10,000", 10_000, 20, 10, peers=("batchbald_redux",)),
    Case("c", "BatchBALD b=10, M=10,000", 60_000, 100, 10),
]
QUICK = [
    Case("a", "BALD scores", 3_000, 20, 10, peers=("batchbald_redux", "baal")),
    Case("b", "BatchBALD b=5, M=1,000", 400, 10, 10, batch_size=5, num_samples=1_000, peers=("batchbald_redux",)),
    Case("c", "BatchBALD b=5, M=1,000", 1_000, 20, 10, batch_size=5, num_samples=1_000),
]


def make_log_probs(N: int, K: int, C: int, seed: int = 0) -> torch.Tensor:
    """Realistic-looking predictions: per-item confidence and class preference vary."""
    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g) * 4
    shift_N_1_C = torch.randn(N, 1, C, generator=g) * 2
    logits_N_K_C = torch.randn(N, K, C, generator=g) * scale_N_1_1 + shift_N_1_C
    return torch.log_softmax(logits_N_K_C, dim=-1)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


class PeakRSS:
    """Peak RSS while the block runs, polled in a thread and checked against ru_maxrss."""

    def __enter__(self) -> PeakRSS:
        self.max_rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
        self.baseline = _rss()
        self.peak = self.baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss())
            time.sleep(0.002)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())
        max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if max_rss > self.max_rss_before:  # the high-water mark rose during the call
            self.peak = max(self.peak, max_rss)

    @property
    def extra_mib(self) -> float:
        return (self.peak - self.baseline) / 2**20


def run_one(case: Case, impl: str, *, threads: int = 0, warmup: bool = False) -> dict[str, Any]:
    """Time one implementation on one case (in this process)."""
    if threads:
        torch.set_num_threads(threads)
    log_probs = make_log_probs(case.N, case.K, case.C)
    if impl == "baal":
        peer_input = log_probs.exp().permute(0, 2, 1).contiguous().numpy()  # [N, C, K] probabilities
    bald_case = case.key == "a"
    if impl == "activebayes":
        from activebayes.acquisition import select

        if bald_case:
            def call():
                return select(log_probs, "bald", case.batch_size).indices.tolist()
        else:
            def call():
                g = torch.Generator().manual_seed(0)
                return select(log_probs, "batchbald", case.batch_size, num_configurations=case.num_samples,
                              generator=g).indices.tolist()
    elif impl == "batchbald_redux":
        from batchbald_redux.batchbald import get_bald_batch, get_batchbald_batch

        torch.manual_seed(0)
        if bald_case:
            def call():
                return list(get_bald_batch(log_probs, case.batch_size).indices)
        else:
            def call():
                return list(get_batchbald_batch(log_probs, case.batch_size, case.num_samples).indices)
    elif impl == "baal":
        import numpy as np
        from baal.active.heuristics import BALD

        def call():
            scores = BALD().get_uncertainties(peer_input)
            return np.argsort(-scores, kind="stable")[: case.batch_size].tolist()
    else:
        raise ValueError(f"unknown implementation {impl!r}")
    if warmup:
        call()
    with PeakRSS() as memory:
        start = time.perf_counter()
        indices = call()
        seconds = time.perf_counter() - start
    return {"case": case.key, "impl": impl, "seconds": seconds, "extra_mib": memory.extra_mib,
            "indices": [int(i) for i in indices]}


def run_isolated(case: Case, impl: str, timeout: float, threads: int) -> dict[str, Any]:
    """Run :func:`run_one` in a fresh interpreter (honest peak memory, no shared caches)."""
    command = [sys.executable, __file__, "--worker", json.dumps(asdict(case)), impl, "--threads", str(threads)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return {"case": case.key, "impl": impl, "seconds": float("nan"), "extra_mib": float("nan"),
                "indices": [], "note": f"timed out after {timeout:.0f} s"}
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"{impl} on case {case.key} failed:\n{error.stderr[-2000:]}") from None
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(case: Case, results: list[dict[str, Any]]) -> list[str]:
    ours = results[0]
    lines = [f"({case.key}) {case.what}, N={case.N:,}, K={case.K}, C={case.C}"]
    for result in results:
        ratio = result["seconds"] / ours["seconds"] if ours["seconds"] > 0 else float("nan")
        note = result.get("note", "")
        same = ""
        if result is not ours and result["indices"]:
            first = 4 if case.key != "a" else case.batch_size
            agree = result["indices"][:first] == ours["indices"][:first]
            same = f"first {first} picks {'agree' if agree else 'DIFFER'}"
        lines.append(
            f"  {result['impl']:<16} {result['seconds']:9.3f} s  {result['extra_mib']:9.1f} MiB"
            f"  {'' if result is ours else f'{ratio:7.1f}x slower than ours'}  {same} {note}".rstrip()
        )
    if case.key == "c":
        lines.append("  batchbald_redux  skipped: needs well over 10 minutes for this pool")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, in-process: a smoke test in seconds")
    parser.add_argument("--cases", default="abc", help="which cases to run (default: abc)")
    parser.add_argument("--no-peers", action="store_true", help="time activebayes only")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per measurement (full mode)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch intra-op threads for every implementation (0: torch's default)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        case = Case(**{**json.loads(args.worker[0]), "peers": ()})
        print(json.dumps(run_one(case, args.worker[1], threads=args.threads)))
        return 0

    cases = [c for c in (QUICK if args.quick else FULL) if c.key in args.cases]
    print(f"activebayes acquisition benchmark{' (--quick)' if args.quick else ''}: "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{args.threads or torch.get_num_threads()} threads")
    everything: list[dict[str, Any]] = []
    for case in cases:
        impls = ["activebayes", *(() if args.no_peers else case.peers)]
        results = []
        for impl in impls:
            try:
                __import__(impl)
            except ImportError:
                print(f"  ({impl} not installed: skipped)")
                continue
            if args.quick:
                result = run_one(case, impl, threads=args.threads, warmup=True)
            else:
                result = run_isolated(case, impl, args.timeout, args.threads)
            results.append(result)
        for line in report(case, results):
            print(line, flush=True)
        everything.extend(results)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(everything, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
