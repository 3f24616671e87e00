"""The main job on a busy machine: idle and beside 1, 2, 3 CPU-bound competitors.

Measures ``activebayes run --quiet --out TMP`` (the README's main job: BALD, MLP on
the embedded 8x8 digits, 20 -> 150 labels) in a fresh subprocess, wall-clock, with
``--threads-mode``:

- ``auto``: no flag, the default: the thread count chosen by ``activebayes._threads``
  (the environment's ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` are removed for the job);
- ``torch-default``: ``--threads T`` with T = torch's own default (one thread per
  physical core), i.e. what the command line did before the automatic choice;
- ``1``: ``--threads 1``.

Each measurement starts its competitors first (pure-Python busy loops by default, or
single-threaded NumPy matrix products with ``--competitor numpy``), waits until they
spin, runs the job, and kills them.  Measurements are interleaved (every repeat runs
every level and mode) so drift in the machine's load spreads over all of them.
Printed per (competitors, mode): min / median / max / mean seconds and the ratio of
the mean to the same mode's idle mean; written to ``benchmarks/results/busy_machine.json``.
Goal (issue 14): default flags (``auto``) beside three competitors <= 3x idle (means).

Usage:
  python benchmarks/busy_machine.py                          # full: main job, 3 repeats
  python benchmarks/busy_machine.py --budget 60 --repeats 2  # a smaller job (60 labels)
  python benchmarks/busy_machine.py --competitors 0,3 --threads-mode auto,torch-default
  python benchmarks/busy_machine.py --work-scan              # where threads start to pay (quiet machine)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from activebayes._io import atomic_write_text
from activebayes._threads import THREAD_ENV_VARS, auto_threads, usable_cores, work_flops
from activebayes.models import MLP, build_model

RESULTS = Path(__file__).resolve().parent / "results" / "busy_machine.json"
MODES = ("auto", "torch-default", "1")
GOAL_RATIO = 3.0

_SPIN = {
    "python": "import sys\nprint('ready', flush=True)\nwhile True:\n    pass\n",
    "numpy": (
        "import numpy as np\na = np.random.default_rng(0).random((200, 200))\n"
        "print('ready', flush=True)\nwhile True:\n    a = a @ a\n    a /= a.max()\n"
    ),
}


@dataclass(frozen=True)
class Measurement:
    competitors: int
    mode: str
    repeat: int
    seconds: float
    timed_out: bool
    load_before: tuple[float, float, float]


def _job_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_ENV_VARS}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _torch_default_threads() -> int:
    """Torch's default intra-op thread count in a fresh process without thread env vars."""
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=_job_env(), capture_output=True, text=True, check=True,
    )
    return int(out.stdout.strip())


def _start_competitors(count: int, kind: str) -> list[subprocess.Popen]:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    procs = [
        subprocess.Popen([sys.executable, "-c", _SPIN[kind]], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(count)
    ]
    for proc in procs:
        if proc.stdout is None or proc.stdout.readline().strip() != "ready":
            _stop(procs)
            raise RuntimeError("a competitor failed to start")
    return procs


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait()


def _job_command(mode: str, torch_default: int, budget: int | None, out: Path) -> list[str]:
    threads = {"auto": [], "torch-default": ["--threads", str(torch_default)], "1": ["--threads", "1"]}[mode]
    extra = ["--budget", str(budget)] if budget is not None else []
    return [sys.executable, "-m", "activebayes", *threads, "run", "--quiet", "--out", str(out), *extra]


def _measure(command: list[str], timeout: float) -> tuple[float, bool]:
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=_job_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, True
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds, False


def _summary(measurements: list[Measurement], levels: list[int], modes: list[str]) -> list[dict]:
    rows = []
    idle_mean = {}
    for mode in modes:
        times = [m.seconds for m in measurements if m.mode == mode and m.competitors == 0]
        idle_mean[mode] = statistics.fmean(times) if times else None
    for level in levels:
        for mode in modes:
            runs = [m for m in measurements if m.mode == mode and m.competitors == level]
            if not runs:
                continue
            times = [m.seconds for m in runs]
            mean = statistics.fmean(times)
            base = idle_mean[mode]
            old = [m.seconds for m in measurements if m.mode == "torch-default" and m.competitors == level]
            rows.append(dict(
                competitors=level, mode=mode, runs=len(times), timed_out=sum(m.timed_out for m in runs),
                min_s=min(times), median_s=statistics.median(times), max_s=max(times), mean_s=mean,
                ratio_mean_to_idle=None if base is None else mean / base,
                ratio_max_to_idle=None if base is None else max(times) / base,
                speedup_vs_torch_default=statistics.fmean(old) / mean if old else None,
            ))
    return rows


def _print_table(rows: list[dict], torch_default: int) -> None:
    print(f"{'competitors':>11} {'mode':>17} {'runs':>4} {'min s':>8} {'median s':>9} {'max s':>8} "
          f"{'mean s':>8} {'mean/idle':>9} {'max/idle':>9} {'vs torch-default':>16}")
    for row in rows:
        mode = row["mode"] + (f" ({torch_default})" if row["mode"] == "torch-default" else "")
        ratio = "" if row["ratio_mean_to_idle"] is None else f"{row['ratio_mean_to_idle']:.2f}x"
        worst = "" if row["ratio_max_to_idle"] is None else f"{row['ratio_max_to_idle']:.2f}x"
        faster = "" if row["speedup_vs_torch_default"] is None else f"{row['speedup_vs_torch_default']:.2f}x faster"
        late = f"  ({row['timed_out']} timed out: lower bounds)" if row["timed_out"] else ""
        print(f"{row['competitors']:>11} {mode:>17} {row['runs']:>4} {row['min_s']:>8.1f} {row['median_s']:>9.1f} "
              f"{row['max_s']:>8.1f} {row['mean_s']:>8.1f} {ratio:>9} {worst:>9} {faster:>16}{late}")


def _work_scan() -> int:
    """Seconds per training step (minibatch 64) with 1..N threads, against the rule's work estimate."""
    models = [
        ("MLP 64-128 (main job)", MLP(in_features=64, num_classes=10), (1, 8, 8)),
        ("MLP 784-128", MLP(in_features=784, num_classes=10), (1, 28, 28)),
        ("MLP 784-512", MLP(in_features=784, num_classes=10, hidden=(512,)), (1, 28, 28)),
        ("MLP 784-1200-1200", MLP(in_features=784, num_classes=10, hidden=(1200, 1200)), (1, 28, 28)),
        ("gal_cnn 8x8", build_model("gal_cnn", num_classes=10, input_shape=(1, 8, 8), generator=0), (1, 8, 8)),
        ("gal_cnn 28x28", build_model("gal_cnn", num_classes=10, input_shape=(1, 28, 28), generator=0), (1, 28, 28)),
    ]
    counts = list(range(1, torch.get_num_threads() + 1))
    print(f"{'model':>22} {'work MFLOP':>10} {'auto':>4} " + " ".join(f"{f'{n} thr ms':>9}" for n in counts))
    previous = torch.get_num_threads()
    try:
        for name, net, shape in models:
            x, y = torch.randn(64, *shape), torch.randint(0, 10, (64,))
            opt = torch.optim.Adam(net.parameters())
            times = []
            for threads in counts:
                torch.set_num_threads(threads)
                best = float("inf")
                for _ in range(3):
                    start = time.perf_counter()
                    for _ in range(20):
                        loss = torch.nn.functional.cross_entropy(net(x), y)
                        opt.zero_grad()
                        loss.backward()
                        opt.step()
                    best = min(best, (time.perf_counter() - start) / 20)
                times.append(best)
            work = work_flops(net, shape, 64)
            print(f"{name:>22} {work / 1e6:>10.1f} {auto_threads(work, limit=previous):>4} "
                  + " ".join(f"{t * 1e3:>9.2f}" for t in times))
    finally:
        torch.set_num_threads(previous)
    return 0


def _int_list(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= 0, got {text!r}")
    return values


def _mode_list(text: str) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [v for v in values if v not in MODES]
    if not values or unknown:
        raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(MODES)}, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--competitors", type=_int_list, default=[0, 1, 2, 3],
                        help="competing CPU-bound processes per level (default 0,1,2,3)")
    parser.add_argument("--threads-mode", type=_mode_list, default=list(MODES),
                        help=f"comma-separated subset of {','.join(MODES)} (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per (level, mode) (default 3)")
    parser.add_argument("--budget", type=int, default=None,
                        help="labels of the job (default: the main job's 150); e.g. 60 for a shorter job")
    parser.add_argument("--competitor", choices=sorted(_SPIN), default="python",
                        help="busy loop of each competitor (default python)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds before a run is cut off (default 900)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"results JSON (default {RESULTS})")
    parser.add_argument("--note", default="", help="free text stored with the results (e.g. what else ran)")
    parser.add_argument("--work-scan", action="store_true",
                        help="instead: time one training step of models of growing size with 1..N threads "
                             "(to place activebayes._threads.SMALL_WORK_FLOPS; run on a quiet machine)")
    parser.add_argument("--quiet", action="store_true", help="print only the final table")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    if args.work_scan:
        return _work_scan()
    torch_default = _torch_default_threads()
    say(f"{usable_cores()} usable cores, torch's default {torch_default} threads, load {os.getloadavg()}")
    measurements: list[Measurement] = []
    scratch = Path(tempfile.mkdtemp(prefix="busy_machine_"))
    started = time.time()
    try:
        for repeat in range(args.repeats):
            for level in args.competitors:
                for mode in args.threads_mode:
                    out = scratch / f"run-{repeat}-{level}-{mode}"
                    procs = _start_competitors(level, args.competitor)
                    try:
                        load = os.getloadavg()
                        seconds, timed_out = _measure(_job_command(mode, torch_default, args.budget, out), args.timeout)
                    finally:
                        _stop(procs)
                    shutil.rmtree(out, ignore_errors=True)
                    measurements.append(Measurement(level, mode, repeat, seconds, timed_out, load))
                    say(f"repeat {repeat + 1}/{args.repeats}  competitors {level}  {mode:>13}: {seconds:7.1f} s"
                        + ("  (timed out)" if timed_out else "") + f"   load before {load[0]:.2f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    rows = _summary(measurements, args.competitors, args.threads_mode)
    _print_table(rows, torch_default)
    worst = max(args.competitors)
    goal = next((r for r in rows if r["mode"] == "auto" and r["competitors"] == worst), None)
    verdict = None
    if goal is not None and goal["ratio_mean_to_idle"] is not None and worst == 3:
        verdict = goal["ratio_mean_to_idle"] <= GOAL_RATIO
        print(f"goal: default flags beside 3 competitors <= {GOAL_RATIO:.0f}x idle (means): "
              f"{goal['ratio_mean_to_idle']:.2f}x -> {'met' if verdict else 'NOT met'}")
    result = dict(
        job=" ".join(_job_command("auto", torch_default, args.budget, Path("OUT"))[2:]),
        budget=args.budget, repeats=args.repeats, competitor=args.competitor, timeout_s=args.timeout,
        machine=dict(usable_cores=usable_cores(), torch_default_threads=torch_default, torch=torch.__version__,
                     python=platform.python_version(), platform=platform.platform()),
        started=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)), wall_s=time.time() - started,
        note=args.note, goal_ratio=GOAL_RATIO, goal_met=verdict, summary=rows, measurements=[asdict(m) for m in measurements],
    )
    atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    say(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
