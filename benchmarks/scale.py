"""Scoring pools of 10^5 .. 10^7 items: wall time, throughput and peak memory, side by side.

A synthetic pool of N 28x28 uint8 'images' (seeded, written in chunks in activebayes'
memory-mapped format under ``benchmarks/cache/scale/``) is scored with BALD at K = 100 MC
dropout samples by one small network, ``784 -> 128 -> ReLU -> dropout(0.5) -> 10``, and
the top 10 are picked. Executors, each in a fresh subprocess whose process tree is
watched for memory (and killed past ``--memory-limit-gb``):

- ``activebayes``: :func:`activebayes.scoring.score_pool` in one process, streaming the
  pool in chunks (the 784 -> 128 layer runs once per item, only the tail K times);
- ``ray-1``, ``ray-2``: the same on a local Ray cluster with 1 / 2 workers
  (:class:`activebayes.distributed.RayExecutor`); picks must equal ``activebayes``';
- ``baal``: baal 2.1.0, its documented streaming path
  ``BALD().get_ranks(ModelWrapper(MCDropoutModule(net)).predict_on_dataset_generator(...))``
  (the whole network runs K times; nothing but the scores is kept);
- ``batchbald_redux``: batchbald-redux 2.0.5 as in its examples: ``BayesianModule``
  ``model(x, K)`` batch by batch into ``log_probs_N_K_C`` (float32 here, to be kind to it)
  then ``get_bald_batch``; the ``[N, K, C]`` tensor is ``N x 4 KB``.

Every single-process executor runs with ``--threads`` torch threads (default 1), and each
Ray worker with one. Memory: ``peak_rss_bytes`` is the executor process's own peak
resident set (``ru_maxrss``) for single-process executors and, for Ray (a driver,
GCS, raylet and worker processes), the largest sampled sum of RSS over the process tree
(shared object-store pages counted once per process: an upper bound); ``peak_pss_bytes``
is the largest sampled sum of proportional set sizes over the tree.

Results: ``benchmarks/results/scale.json``, one row per (pool size, executor), merged
with the rows already there (a run with ``--sizes 1e7 --executors activebayes`` updates
only those rows).

Usage:
  python benchmarks/scale.py                                   # 10^5, 10^6, 10^7, every executor
  python benchmarks/scale.py --sizes 1e5 --executors activebayes ray-1 ray-2 --quiet
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import torch
from torch import nn
from tqdm.auto import tqdm

from activebayes._io import atomic_write_text
from activebayes.data import load_memmap, write_memmap
from activebayes.models import MLP

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / "cache" / "scale"
RESULTS = ROOT / "results" / "scale.json"
EXECUTORS = ("activebayes", "ray-1", "ray-2", "baal", "batchbald_redux")
DEFAULT_SIZES = (10**5, 10**6, 10**7)
K, C, HIDDEN, PICKS = 100, 10, 128, 10
SEED = 0
NORMALIZATION = (0.1307, 0.3081)
GENERATE_CHUNK = 100_000


# ----------------------------------------------------------------------------- the pool


def pool_folder(n_items: int) -> Path:
    return CACHE / f"pool-{n_items}"


def ensure_pool(n_items: int, *, progress: bool) -> Path:
    """The pool of ``n_items`` uniform uint8 28x28 items (seeded; written once, in chunks)."""
    folder = pool_folder(n_items)
    if (folder / "meta.json").exists():
        try:
            if len(load_memmap(folder)) == n_items:
                return folder
        except Exception as error:  # a broken cache is rebuilt
            print(f"rebuilding {folder}: {error}", file=sys.stderr)

    def chunks():
        rng = np.random.default_rng([SEED, n_items])
        for start in range(0, n_items, GENERATE_CHUNK):
            size = min(GENERATE_CHUNK, n_items - start)
            yield rng.integers(0, 256, size=(size, 28, 28), dtype=np.uint8)

    return write_memmap(folder, chunks(), n_items=n_items, name=f"synthetic-{n_items}", normalization=NORMALIZATION,
                        source=f"benchmarks/scale.py: uniform uint8, numpy default_rng([{SEED}, {n_items}])",
                        overwrite=True, progress=progress)


# ----------------------------------------------------------------------------- the model


def reference_model() -> MLP:
    """activebayes' MLP 784 -> 128 -> ReLU -> consistent MC dropout(0.5) -> 10, seeded."""
    torch.manual_seed(SEED)
    return MLP(in_features=28 * 28, num_classes=C, hidden=(HIDDEN,), p=0.5).eval()


def reference_linears() -> tuple[nn.Linear, nn.Linear]:
    linears = [m for m in reference_model().modules() if isinstance(m, nn.Linear)]
    return linears[0], linears[1]


# ----------------------------------------------------------------------------- executors (in the child)


def run_activebayes(folder: Path, args: argparse.Namespace, workers: int | None) -> dict:
    from activebayes.scoring import score_pool

    dataset = load_memmap(folder)
    model = reference_model()
    candidates = torch.arange(len(dataset))
    executor = None
    startup = 0.0
    if workers is not None:
        from activebayes.distributed import RayExecutor

        start = time.perf_counter()
        executor = RayExecutor(num_workers=workers, cpus_per_worker=1,
                               object_store_memory=args.object_store_mb * 2**20)
        executor.start()
        startup = time.perf_counter() - start
    try:
        baseline = _rss_now()
        start = time.perf_counter()
        picks = score_pool(model, dataset, candidates, "bald", PICKS, num_samples=K, mask_generator=SEED,
                           selection_seed=SEED, chunk_size=args.chunk_size, executor=executor,
                           progress=not args.quiet)
        seconds = time.perf_counter() - start
        row: dict = {}
        if executor is not None:  # a loop's next round: the same pass again, on the replicas already started
            start = time.perf_counter()
            again = score_pool(model, dataset, candidates, "bald", PICKS, num_samples=K, mask_generator=SEED,
                               selection_seed=SEED, chunk_size=args.chunk_size, executor=executor,
                               progress=not args.quiet)
            row["second_pass_seconds"] = time.perf_counter() - start
            row["second_pass_same_picks"] = again.indices.tolist() == picks.indices.tolist()
    finally:
        if executor is not None:
            executor.close()
    return {"seconds": seconds, "startup_seconds": startup, "baseline_rss_bytes": baseline,
            "top_indices": picks.indices.tolist(), "top_scores": [round(s, 6) for s in picks.scores.tolist()], **row}


class _ItemDataset(torch.utils.data.Dataset):
    """One item at a time from activebayes' memmap reader (what baal's DataLoader asks for)."""

    def __init__(self, inputs) -> None:
        self.inputs = inputs

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int):
        return self.inputs[index], 0


def run_baal(folder: Path, args: argparse.Namespace) -> dict:
    from baal.active.heuristics import BALD
    from baal.bayesian.dropout import MCDropoutModule
    from baal.modelwrapper import ModelWrapper, TrainingArgs

    first, second = reference_linears()
    net = nn.Sequential(nn.Flatten(), first, nn.ReLU(), nn.Dropout(0.5), second)
    wrapper = ModelWrapper(MCDropoutModule(net), TrainingArgs(batch_size=args.peer_batch_size, use_cuda=False,
                                                             workers=0, replicate_in_memory=True))
    dataset = _ItemDataset(load_memmap(folder).inputs)
    baseline = _rss_now()
    start = time.perf_counter()
    predictions = wrapper.predict_on_dataset_generator(dataset, iterations=K, verbose=not args.quiet)
    ranks, scores = BALD().get_ranks(predictions)
    seconds = time.perf_counter() - start
    top = [int(i) for i in ranks[:PICKS]]
    return {"seconds": seconds, "startup_seconds": 0.0, "baseline_rss_bytes": baseline, "top_indices": top,
            "top_scores": [round(float(scores[i]), 6) for i in top]}


def run_batchbald_redux(folder: Path, args: argparse.Namespace) -> dict:
    from batchbald_redux.batchbald import get_bald_batch
    from batchbald_redux.consistent_mc_dropout import BayesianModule, ConsistentMCDropout

    first, second = reference_linears()

    class Net(BayesianModule):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.dropout, self.fc2 = first, ConsistentMCDropout(0.5), second

        def mc_forward_impl(self, mc_input_BK: torch.Tensor) -> torch.Tensor:
            hidden = self.dropout(torch.relu(self.fc1(mc_input_BK.flatten(1))))
            return torch.log_softmax(self.fc2(hidden), dim=1)

    torch.manual_seed(SEED)
    net = Net().eval()
    inputs = load_memmap(folder).inputs
    N = len(inputs)
    baseline = _rss_now()
    start = time.perf_counter()
    log_probs_N_K_C = torch.empty((N, K, C), dtype=torch.float32)
    with torch.no_grad():
        for lower in tqdm(range(0, N, args.peer_batch_size), desc="batchbald_redux", disable=args.quiet):
            upper = min(N, lower + args.peer_batch_size)
            log_probs_N_K_C[lower:upper].copy_(net(inputs[lower:upper], K))
    batch = get_bald_batch(log_probs_N_K_C, PICKS)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "startup_seconds": 0.0, "baseline_rss_bytes": baseline,
            "top_indices": [int(i) for i in batch.indices], "top_scores": [round(s, 6) for s in batch.scores]}


def _rss_now() -> int:
    return psutil.Process().memory_info().rss


def worker_main(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    folder = pool_folder(args.n)
    executor = args.worker
    if executor == "activebayes":
        row = run_activebayes(folder, args, None)
    elif executor.startswith("ray-"):
        row = run_activebayes(folder, args, int(executor.split("-")[1]))
    elif executor == "baal":
        row = run_baal(folder, args)
    elif executor == "batchbald_redux":
        row = run_batchbald_redux(folder, args)
    else:
        raise SystemExit(f"unknown executor {executor!r}")
    row["self_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("RESULT " + json.dumps(row), flush=True)


# ----------------------------------------------------------------------------- the parent


def _tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _sum_memory(processes: list[psutil.Process], pss: bool) -> int:
    total = 0
    for process in processes:
        try:
            total += process.memory_full_info().pss if pss else process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def run_child(executor: str, n_items: int, args: argparse.Namespace) -> dict:
    """Run one executor in a subprocess, watching its process tree's memory and time."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", executor, "--n", str(n_items),
               "--threads", str(args.threads), "--chunk-size", str(args.chunk_size),
               "--peer-batch-size", str(args.peer_batch_size), "--object-store-mb", str(args.object_store_mb)]
    if args.quiet:
        command.append("--quiet")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    log_path = CACHE / "logs" / f"{n_items}-{executor}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    out_path = log_path.with_suffix(".out")
    # stdout to a file (never a pipe nobody reads: baal's bars write there); quiet: stderr too
    with open(log_path, "w") as log, open(out_path, "w") as out:
        process = psutil.Popen(command, stdout=out, stderr=log if args.quiet else None, text=True, env=env)
        return _watch(process, executor, n_items, args, log_path)


def _watch(process: psutil.Popen, executor: str, n_items: int, args: argparse.Namespace, log_path: Path) -> dict:
    limit = int(args.memory_limit_gb * 2**30)
    started = time.perf_counter()
    peak_rss = peak_pss = 0
    killed = None
    tick = 0
    peaks: dict[tuple[int, str], int] = {}  # each process's own peak RSS (VmHWM), by (pid, name)
    while process.poll() is None:
        tree = _tree(process)
        _record_peaks(tree, peaks)
        rss = _sum_memory(tree, pss=False)
        peak_rss = max(peak_rss, rss)
        if tick % 8 == 0:
            peak_pss = max(peak_pss, _sum_memory(tree, pss=True))
        tick += 1
        elapsed = time.perf_counter() - started
        if rss > limit or elapsed > args.time_limit:
            killed = (f"exceeded the {args.memory_limit_gb:g} GB memory limit (process tree at {rss / 2**30:.2f} GB "
                      f"after {elapsed:.0f} s)") if rss > limit else f"exceeded the {args.time_limit:.0f} s time limit"
            for child in reversed(tree):
                try:
                    child.kill()
                except psutil.NoSuchProcess:
                    pass
            break
        time.sleep(0.25)
    process.wait()
    stdout = log_path.with_suffix(".out").read_text()
    wall = time.perf_counter() - started
    workers = int(executor.split("-")[1]) if executor.startswith("ray-") else 1
    row = {"n_items": n_items, "executor": executor, "workers": workers, "threads_per_worker": args.threads}
    if killed is not None:
        return {**row, "status": "error", "reason": killed, "peak_rss_bytes": peak_rss, "wall_seconds": round(wall, 1)}
    result_lines = [line for line in (stdout or "").splitlines() if line.startswith("RESULT ")]
    if process.returncode != 0 or not result_lines:
        tail = log_path.read_text().strip().splitlines()[-3:] if log_path.exists() else []
        return {**row, "status": "error", "reason": f"exit code {process.returncode}: {' | '.join(tail)}",
                "peak_rss_bytes": peak_rss}
    result = json.loads(result_lines[-1][len("RESULT "):])
    seconds = result["seconds"]
    single_process = not executor.startswith("ray-")
    return {
        **row,
        "status": "ok",
        "seconds": round(seconds, 2),
        "items_per_second": round(n_items / seconds, 1),
        "peak_rss_bytes": result["self_peak_rss_bytes"] if single_process else peak_rss,
        "peak_rss_tree_sampled_bytes": peak_rss,
        "peak_pss_bytes": peak_pss,
        "baseline_rss_bytes": result["baseline_rss_bytes"],
        "startup_seconds": round(result["startup_seconds"], 2),
        "top_indices": result["top_indices"],
        "top_scores": result["top_scores"],
        "largest_processes": _largest(peaks),
        **({"second_pass_seconds": round(result["second_pass_seconds"], 2),
            "second_pass_same_picks": result["second_pass_same_picks"]} if "second_pass_seconds" in result else {}),
    }


def _record_peaks(tree: list[psutil.Process], peaks: dict[tuple[int, str], int]) -> None:
    for process in tree:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
            name = process.name()
        except (OSError, psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                key = (process.pid, name.split(".")[0][:60])
                peaks[key] = max(peaks.get(key, 0), int(line.split()[1]) * 1024)


def _largest(peaks: dict[tuple[int, str], int], count: int = 6) -> list[dict]:
    """The processes with the largest own peak RSS (for Ray: where its memory goes)."""
    ranked = sorted(peaks.items(), key=lambda item: -item[1])[:count]
    return [{"process": name, "peak_rss_bytes": peak} for (_, name), peak in ranked]


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
    for name in ("ray", "baal", "batchbald_redux"):
        try:
            from importlib.metadata import version

            versions[name] = version(name.replace("_", "-"))
        except Exception:
            versions[name] = None
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total,
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()], "versions": versions}


def _skip_reason(executor: str, n_items: int, rows: list[dict]) -> str | None:
    """Why a peer is not run at this size (computed from its measured rate / its memory formula)."""
    if executor == "batchbald_redux" and n_items * K * C * 4 > psutil.virtual_memory().total:
        need = n_items * K * C * 4 / 2**30
        return (f"not run: its log_probs_N_K_C [N, K, C] alone is {need:.0f} GiB (float32), more than this "
                f"machine's {psutil.virtual_memory().total / 2**30:.0f} GiB")
    if executor == "baal":
        measured = [r for r in rows if r["executor"] == "baal" and r.get("status") == "ok"]
        if measured and n_items >= 10**7:
            rate = max(measured, key=lambda r: r["n_items"])["items_per_second"]
            return (f"not run: at its measured {rate:,.0f} items/s (largest pool run) 10^7 items would take "
                    f"~{n_items / rate / 3600:.1f} h")
    return None


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    keyed = {(r["n_items"], r["executor"]): r for r in old}
    keyed.update({(r["n_items"], r["executor"]): r for r in new})
    order = {name: i for i, name in enumerate(EXECUTORS)}
    return sorted(keyed.values(), key=lambda r: (r["n_items"], order.get(r["executor"], 99)))


def summarise(rows: list[dict]) -> list[str]:
    lines = [f"{'N':>10} {'executor':>16} {'seconds':>9} {'items/s':>10} {'peak RSS':>10}  note"]
    for row in rows:
        if row.get("status") == "ok":
            lines.append(f"{row['n_items']:>10,} {row['executor']:>16} {row['seconds']:>9.1f} "
                         f"{row['items_per_second']:>10,.0f} {row['peak_rss_bytes'] / 2**30:>8.2f} G  "
                         f"{row.get('note', '')}")
        else:
            lines.append(f"{row['n_items']:>10,} {row['executor']:>16} {'-':>9} {'-':>10} {'-':>10}  "
                         f"{row.get('status')}: {row.get('reason')}")
    return lines


def annotate(rows: list[dict]) -> None:
    """Same picks as in-process for Ray; Ray scaling 2 workers vs 1."""
    by = {(r["n_items"], r["executor"]): r for r in rows if r.get("status") == "ok"}
    for (n_items, executor), row in by.items():
        reference = by.get((n_items, "activebayes"))
        if executor.startswith("ray-") and reference is not None:
            row["same_picks_as_in_process"] = row["top_indices"] == reference["top_indices"]
        one, two = by.get((n_items, "ray-1")), by.get((n_items, "ray-2"))
        if executor == "ray-2" and one is not None and two is not None:
            row.pop("scaling_vs_ray_1", None)
            if one.get("run", {}).get("date") != two.get("run", {}).get("date"):
                # measured by different invocations, possibly under different loads: not comparable
                loads = [r.get("run", {}).get("load_average_at_start", ["?"])[0] for r in (one, two)]
                row["note"] = f"not compared with ray-1: measured in another run (load {loads[1]} vs {loads[0]})"
                continue
            ratio = two["items_per_second"] / one["items_per_second"]
            row["scaling_vs_ray_1"] = round(ratio, 3)
            row["note"] = f"{ratio:.2f}x ray-1 ({ratio / 2:.0%} of linear)"


def markdown(rows: list[dict]) -> str:
    """The docs table (``--markdown``): one row per (pool size, executor), as measured."""
    lines = ["| items | executor | seconds | items / s | peak RSS | time vs in-process | next pass, seconds | load at start | note |",
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    by = {(r["n_items"], r["executor"]): r for r in rows if r.get("status") == "ok"}
    for row in rows:
        n = f"{row['n_items']:,}"
        if row.get("status") != "ok":
            lines.append(f"| {n} | {row['executor']} | - | - | - | - | - | - | {row.get('status')}: {row.get('reason')} |")
            continue
        reference = by.get((row["n_items"], "activebayes"))
        ratio = f"{row['seconds'] / reference['seconds']:.1f}x" if reference else "-"
        if reference and row is not reference and row.get("run", {}).get("date") != reference.get("run", {}).get("date"):
            ratio += " (another run)"  # not side by side: machine load and versions may differ
        load = row.get("run", {}).get("load_average_at_start", [None])[0]
        same = row.get("same_picks_as_in_process")
        note = "; ".join(x for x in (row.get("note", ""), "same picks" if same else ("DIFFERENT picks" if same is False else "")) if x)
        again = f"{row['second_pass_seconds']:,.1f}" if "second_pass_seconds" in row else "-"
        if row["executor"].startswith("ray-") and "second_pass_seconds" not in row:  # measured before passes were timed twice
            note = "; ".join(x for x in ("the earlier RayExecutor (a Ray Data pipeline: new replicas every pass)", note) if x)
        if row.get("second_pass_same_picks") is False:
            note = "; ".join(x for x in (note, "next pass: DIFFERENT picks") if x)
        lines.append(f"| {n} | {row['executor']} | {row['seconds']:,.1f} | {row['items_per_second']:,.0f} | "
                     f"{row['peak_rss_bytes'] / 2**30:.2f} GiB | {ratio} | {again} | {load if load is not None else '-'} | {note} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=lambda s: int(float(s)), default=list(DEFAULT_SIZES),
                        help="pool sizes (e.g. 1e5 1e6 1e7)")
    parser.add_argument("--executors", nargs="+", choices=EXECUTORS, default=list(EXECUTORS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process / Ray worker")
    parser.add_argument("--chunk-size", type=int, default=4096, help="items per chunk (activebayes)")
    parser.add_argument("--peer-batch-size", type=int, default=256, help="items per batch (baal, batchbald_redux)")
    parser.add_argument("--object-store-mb", type=int, default=500, help="Ray object store of the local cluster")
    parser.add_argument("--memory-limit-gb", type=float, default=8.0, help="kill an executor's process tree past this")
    parser.add_argument("--time-limit", type=float, default=3600.0, help="seconds per executor run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--markdown", action="store_true", help="only print the docs table from --out")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker_main(args)
        return
    old = json.loads(args.out.read_text())["rows"] if args.out.exists() else []
    if args.markdown:
        annotate(old)
        print(markdown(old))
        return
    rows: list[dict] = []
    info = {**machine(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    for n_items in sorted(args.sizes):
        ensure_pool(n_items, progress=not args.quiet)
        for executor in args.executors:
            reason = _skip_reason(executor, n_items, merge(old, rows))
            if reason is not None:
                row = {"n_items": n_items, "executor": executor, "status": "skipped", "reason": reason}
            else:
                if not args.quiet:
                    print(f"--- {executor} on {n_items:,} items", file=sys.stderr)
                row = run_child(executor, n_items, args)
                row["run"] = info
            rows.append(row)
            merged = merge(old, rows)
            annotate(merged)
            payload = {"benchmark": "scale", "k": K, "model": "MLP 784-128-dropout(0.5)-10", "strategy": "bald",
                       "picks": PICKS, "rows": merged}
            args.out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.out, json.dumps(payload, indent=1) + "\n")
            if not args.quiet:
                print("\n".join(summarise([r for r in merged if r["n_items"] == n_items])), file=sys.stderr)
    print("\n".join(summarise(merge(old, rows))))


if __name__ == "__main__":
    main()
