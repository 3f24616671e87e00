"""The labelling app under faults: the training worker killed while idle and while training, SIGTERM.

The real `activebayes label` in its own process, its trainer a separate process, four
annotators labelling throughout. Every request must answer within a second (before, a
dead idle worker made each answer wait forever on `multiprocessing.Event.set`), the
supervisor must bring a new worker within 10 seconds (before, a worker killed while
training was never replaced and the status said "training" for good), and no
acknowledged answer may be lost. SIGTERM then stops the server as Ctrl-C does.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from activebayes.data import load_dataset
from activebayes.labelstore import LabelStore
from tests.app.app_helpers import make_project, wait_for, with_sessions
from tests.app.test_app_sigkill import pid_alive, start

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find processes")

ANNOTATORS = 4
SLOW_S = 1.0
BACK_S = 10.0


class Annotators:
    """Four annotators labelling with the true labels until stopped; every request timed."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.targets = load_dataset("digits").targets
        self.acked: list[tuple[int, int]] = []
        self.slow: list[str] = []
        self.failures: list[str] = []
        self.requests = 0
        self.stop = threading.Event()
        self.go = threading.Event()  # the annotators take their first item, then wait for this
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.annotate, args=(f"annotator-{k}",)) for k in range(ANNOTATORS)]

    def timed(self, http: httpx.Client, method: str, path: str, **kwargs) -> httpx.Response | None:
        tic = time.monotonic()
        try:
            response = http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            self.failures.append(f"{method} {path}: {type(error).__name__} after {time.monotonic() - tic:.1f} s")
            return None
        took = time.monotonic() - tic
        with self.lock:
            self.requests += 1
            if took > SLOW_S:
                self.slow.append(f"{method} {path}: {took:.2f} s")
        if response.status_code != 200:
            self.failures.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
            return None
        return response

    def annotate(self, name: str) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with with_sessions(httpx.Client(base_url=self.url, headers=headers, timeout=5 * SLOW_S + 5)) as http:
            response = self.timed(http, "POST", "/api/next", json={"annotator": name})
            item = response.json()["item"] if response is not None else None
            self.go.wait(120)
            while item is not None and not self.stop.is_set():
                label = int(self.targets[item["id"] - 1])  # a dataset project numbers its items from 1
                response = self.timed(http, "POST", "/api/answer", json={"annotator": name, "item": item["id"],
                                                                         "label": label})
                if response is None:
                    return
                with self.lock:
                    self.acked.append((item["id"], label))
                item = response.json()["item"]
                if self.timed(http, "GET", "/api/state") is None:
                    return
                time.sleep(0.05)

    def __enter__(self) -> Annotators:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def _state(url: str, token: str) -> dict:
    return httpx.get(f"{url}/api/state", headers={"X-Token": token}, timeout=10).json()


def _worker_pid(state: dict) -> int | None:
    """The trainer's pid: the supervisor's record, else the pid the trainer last reported."""
    return (state.get("worker") or {}).get("pid") or state["status"].get("pid")


def test_a_killed_worker_never_hangs_a_request_and_comes_back(tmp_path):
    project = make_project(tmp_path / "proj", batch_size=10, lookahead=60)
    directory = project.directory
    project.close()
    process, url, token, lines = start(directory)  # the default: the trainer in a supervised process
    try:
        first = wait_for(lambda: (s := _state(url, token))["status"]["state"] == "ready" and _worker_pid(s) and s,
                         timeout=180)
        with Annotators(url, token) as annotators:
            # 1. killed while idle (the OOM killer, a segfault, kill -9), the four annotators about to answer
            victim = _worker_pid(first)
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            time.sleep(0.3)
            annotators.go.set()
            back = wait_for(lambda: (s := _state(url, token)) and _worker_pid(s) not in (None, victim)
                            and pid_alive(_worker_pid(s)) and s, timeout=30, interval=0.1)
            assert time.monotonic() - killed < BACK_S, f"the worker came back after {time.monotonic() - killed:.1f} s"
            assert back["worker"]["restarts"] == 1 and "SIGKILL" in back["worker"]["last_death"]["exit"]
            assert back["worker"]["last_death"]["during"] == "while idle"
            # 2. killed in the middle of a round
            busy = wait_for(lambda: (s := _state(url, token))["status"]["state"] in ("training", "scoring")
                            and s["status"].get("pid") == _worker_pid(s) and s, timeout=120, interval=0.02)
            victim = _worker_pid(busy)
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            after = wait_for(lambda: (s := _state(url, token)) and _worker_pid(s) not in (None, victim)
                             and pid_alive(_worker_pid(s)) and s, timeout=30, interval=0.1)
            assert time.monotonic() - killed < BACK_S
            assert after["worker"]["restarts"] == 2 and after["worker"]["last_death"]["during"].startswith("while ")
            assert after["worker"]["last_death"]["during"] != "while idle"
            # the round cut short is trained again by the new worker: the status does not stay "training"
            rounds = busy["rounds"]
            wait_for(lambda: (s := _state(url, token))["rounds"] > rounds and s["status"]["state"] != "restarting",
                     timeout=180)
            wait_for(lambda: len(annotators.acked) >= 60 or annotators.failures, timeout=60)
        assert not annotators.failures, annotators.failures[:5]
        assert not annotators.slow, f"{len(annotators.slow)} of {annotators.requests} requests over {SLOW_S} s: " \
                                    f"{annotators.slow[:5]}"
        assert first["worker"]["kind"] == "process"
    finally:
        process.send_signal(signal.SIGTERM)  # as `docker stop`, systemd or `timeout` stop it
        process.wait(60)
        err = process.stderr.read()
        process.reader.join(10)
    out = "".join(lines.get() for _ in range(lines.qsize()))
    # a clean stop on SIGTERM as on Ctrl-C: the cleanup ran, no leaked semaphore, the claim released
    assert process.returncode == 0 and "Traceback" not in err and "leaked" not in err, (process.returncode, err)
    assert "stopped;" in out
    with LabelStore.open(directory / "labels.sqlite") as store:
        active = {e.item: e.label for e in store.active_answers()}
        assert all(active.get(item) == label for item, label in annotators.acked)  # 0 acknowledged answers lost
        assert store.meta("server") is None
        store.check_labels()
