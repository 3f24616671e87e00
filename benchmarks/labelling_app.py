"""Time to the next item in the labelling app, with 8 annotators while the model retrains.

The real thing end to end: a labelling project is created, ``activebayes label`` runs
in its own process (the web server, plus its training worker process), and
``--annotators`` simulated annotators (threads with their own HTTP connection) label
with the true labels, each pausing ``--think-ms`` between answers, until each gave
``--answers-each`` answers. Each annotator keeps its connection open (``keep-alive``, as a
browser does) or opens a new one per request (``new``); ``--connection both`` (the
default) runs the two one after the other and prints them side by side. Every
``--batch-size`` answers the worker retrains the model (default settings of a project:
BALD, the default model and training) and rescores the pool in the background.

Measured per answer, on the client: the wall time of ``POST /api/answer``, which stores
the answer (committed and fsynced) and returns the next item: the *time to the next
item*; ``server_*_ms`` is the part spent in the app itself (its ``Server-Timing`` header:
reading the body, the store's transaction with its fsync, the next item), the rest is
HTTP and scheduling. The image of the next item is fetched too and timed separately. A monitor reads
the worker's status every 100 ms; an answer counts as *during training* when the worker was
training or scoring both when it was sent and when it came back (the status is read
from the project's store, read-only, so watching adds no load to the server).

    python benchmarks/labelling_app.py --dataset digits            # 8 x 500, keep-alive and new
    python benchmarks/labelling_app.py --dataset mnist --data-dir ../shared/data/mnist

Results go to ``benchmarks/results/labelling_app.json`` (one entry per dataset and
``--sync`` and ``--connection`` setting, replaced when that is run again): ``p50_ms``, ``p99_ms``, ``answers``, ``annotators``,
``dataset``, and the same percentiles for the answers during training, the image
fetches, the rounds trained and their durations, and the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import queue
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "labelling_app.json"
BUSY = ("training", "scoring")
STORE_FILE = "labels.sqlite"


def start_server(project: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, str, str]:
    command = [sys.executable, "-m", "activebayes", "label", str(project), "--port", "0",
               "--dataset", args.dataset, "--batch-size", str(args.batch_size)]
    if args.data_dir:
        command += ["--data-dir", args.data_dir]
    command += ["--sync", args.sync]
    if args.max_epochs is not None:
        command += ["--max-epochs", str(args.max_epochs)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited: {process.stderr.read()}") from None
            continue
        print("  server:", line.rstrip())
        if "?token=" in line:
            url = line.strip()
            return process, url.split("/?token=")[0], url.split("?token=")[1]
    process.kill()
    raise RuntimeError("the server printed no address within 10 minutes")


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values), q)) if values else None


def run(args: argparse.Namespace, connection: str) -> dict[str, Any]:
    from activebayes.data import load_dataset

    targets = load_dataset(args.dataset, data_dir=args.data_dir, split="train").targets
    with tempfile.TemporaryDirectory(prefix="ab-labelling-bench-") as tmp:
        project = Path(tmp) / "project"
        process, url, token = start_server(project, args)
        headers = {"Authorization": f"Bearer {token}"}
        samples: list[dict[str, Any]] = []
        images: list[float] = []
        states: list[tuple[float, str]] = []
        stop = threading.Event()
        lock = threading.Lock()
        errors: list[str] = []

        def monitor() -> None:
            # the worker's status straight from the store (read-only), so watching adds no load to the server
            while not project.joinpath(STORE_FILE).is_file():
                time.sleep(0.05)
            store = sqlite3.connect(f"file:{project / STORE_FILE}?mode=ro", uri=True, timeout=30)
            while not stop.is_set():
                with contextlib.suppress(sqlite3.Error):
                    row = store.execute("SELECT value FROM meta WHERE key = 'status'").fetchone()
                    states.append((time.perf_counter(), json.loads(row[0])["state"] if row else "starting"))
                stop.wait(0.1)
            store.close()

        def state_at(moment: float) -> str:
            before = [s for t, s in states if t <= moment]
            return before[-1] if before else "starting"

        def annotate(name: str) -> None:
            # keep-alive: one connection for every request (a browser); new: a fresh connection each time
            limits = httpx.Limits(max_keepalive_connections=0 if connection == "new" else 1)
            with httpx.Client(base_url=url, headers=headers, timeout=60, limits=limits) as http:
                session = http.post("/api/session", json={"name": name}).json()["session"]
                http.headers["X-Session"] = session
                given = 0
                item = http.post("/api/next", json={}).json()["item"]
                while item is not None and given < args.answers_each:
                    label = int(targets[int(item["key"].rsplit("[", 1)[1].rstrip("]"))])
                    sent = time.perf_counter()
                    response = http.post("/api/answer", json={"item": item["id"], "label": label})
                    came = time.perf_counter()
                    if response.status_code != 200:
                        errors.append(f"{name}: {response.status_code} {response.text}")
                        return
                    item = response.json()["item"]
                    app_ms = float(response.headers.get("server-timing", "app;dur=nan").split("dur=")[1])
                    given += 1
                    with lock:
                        samples.append({"ms": 1000 * (came - sent), "app_ms": app_ms, "sent": sent, "came": came})
                    if item is not None:
                        tic = time.perf_counter()
                        http.get(item["image"]).raise_for_status()
                        images.append(1000 * (time.perf_counter() - tic))
                    time.sleep(args.think_ms / 1000)

        watcher = threading.Thread(target=monitor, daemon=True)
        watcher.start()
        started = time.perf_counter()
        annotators = [threading.Thread(target=annotate, args=(f"annotator-{k}",)) for k in range(args.annotators)]
        for thread in annotators:
            thread.start()
        for thread in annotators:
            thread.join()
        stop.set()
        elapsed = time.perf_counter() - started
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            final = http.get("/api/state").json()
        process.send_signal(signal.SIGINT)
        process.wait(120)
        if errors:
            raise RuntimeError("; ".join(errors[:3]))

    all_ms = [s["ms"] for s in samples]
    training_ms = [s["ms"] for s in samples if state_at(s["sent"]) in BUSY and state_at(s["came"]) in BUSY]
    rounds = [p for p in final["curve"] if p.get("seconds")]
    train_seconds = [round(sum(p["seconds"].get(k, 0.0) for k in ("fit", "evaluate", "acquire")), 2) for p in rounds]
    return {
        "dataset": args.dataset,
        "connection": connection,
        "annotators": args.annotators,
        "answers_each": args.answers_each,
        "answers": len(samples),
        "p50_ms": round(percentile(all_ms, 50), 2),
        "p99_ms": round(percentile(all_ms, 99), 2),
        "max_ms": round(max(all_ms), 2),
        "answers_during_training": len(training_ms),
        "p50_ms_during_training": round(percentile(training_ms, 50), 2) if training_ms else None,
        "p99_ms_during_training": round(percentile(training_ms, 99), 2) if training_ms else None,
        "server_p50_ms": round(percentile([s["app_ms"] for s in samples], 50), 2),
        "server_p99_ms": round(percentile([s["app_ms"] for s in samples], 99), 2),
        "image_p50_ms": round(percentile(images, 50), 2),
        "image_p99_ms": round(percentile(images, 99), 2),
        "sync": args.sync,
        "think_ms": args.think_ms,
        "batch_size": args.batch_size,
        "max_epochs": args.max_epochs,
        "seconds": round(elapsed, 1),
        "rounds_trained": len(rounds),
        "final_status": {k: final["status"].get(k) for k in ("state", "round", "labels", "last")},
        "round_seconds": train_seconds,
        "items": final["counts"]["items"],
        "strategy": final["strategy"],
        "machine": {"cpus": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2),
                    "python": platform.python_version(), "platform": platform.platform()},
        "command": "python benchmarks/labelling_app.py " + " ".join(sys.argv[1:]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="digits", help="digits or mnist [digits]")
    parser.add_argument("--data-dir", default=None, help="folder with the dataset's files (MNIST)")
    parser.add_argument("--annotators", type=int, default=8, help="simulated annotators [8]")
    parser.add_argument("--answers-each", type=int, default=500, help="answers per annotator [500]")
    parser.add_argument("--connection", choices=["keep-alive", "new", "both"], default="both",
                        help="keep each annotator's connection open (as browsers do), a new one per request, "
                             "or both in turn [both]")
    parser.add_argument("--batch-size", type=int, default=20, help="labels per round [20]")
    parser.add_argument("--think-ms", type=float, default=250.0, help="pause between an annotator's answers [250]")
    parser.add_argument("--sync", choices=["full", "normal"], default="full",
                        help="answer durability of the server (activebayes label --sync) [full]")
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="training epochs per round (default: the project's, i.e. the loop's fit defaults)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.data_dir:
        args.data_dir = str(Path(args.data_dir).resolve())
    connections = ["keep-alive", "new"] if args.connection == "both" else [args.connection]
    results = []
    for connection in connections:
        print(f"{connection} connections: {args.annotators} annotators x {args.answers_each} answers")
        results.append(run(args, connection))
        print(json.dumps(results[-1], indent=1))
    print(f"\n{'connection':<12} {'p50 ms':>8} {'p99 ms':>8} {'p99 training':>13} {'server p99':>11} {'answers':>8}"
          f" {'rounds':>7} {'load':>6}")
    for r in results:
        print(f"{r['connection']:<12} {r['p50_ms']:>8} {r['p99_ms']:>8} {str(r['p99_ms_during_training']):>13} "
              f"{r['server_p99_ms']:>11} {r['answers']:>8} {r['rounds_trained']:>7} "
              f"{r['machine']['load_average_1min']:>6}")
    runs = []
    if args.out.is_file():
        keys = {(r["dataset"], r["sync"], r["connection"]) for r in results}
        runs = [r for r in json.loads(args.out.read_text()).get("runs", [])
                if (r.get("dataset"), r.get("sync"), r.get("connection", "keep-alive")) not in keys]
    runs.extend(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    runs.sort(key=lambda r: (r["dataset"], r.get("sync", ""), r.get("connection", "keep-alive")))
    args.out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
