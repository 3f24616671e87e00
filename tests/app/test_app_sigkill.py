"""`activebayes label` killed with SIGKILL mid-labelling keeps every acknowledged answer and resumes."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from activebayes.data import load_dataset
from activebayes.labelstore import LabelStore
from tests.app.app_helpers import make_project, wait_for, with_sessions
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find child processes")


def start(project_dir, *extra: str) -> tuple[subprocess.Popen, str, str, queue.Queue[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-m", "activebayes", "--threads", "1", "label", str(project_dir),
                                "--port", "0", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True)
    reader.start()
    process.reader = reader
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            assert process.poll() is None, process.stderr.read()
            continue
        if "?token=" in line:
            url = line.strip()
            return process, url.split("/?token=")[0], url.split("?token=")[1], lines
    process.kill()
    raise AssertionError("the server printed no address")


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_sigkill_keeps_every_acknowledged_answer_and_resumes_the_ranking(tmp_path):
    project = make_project(tmp_path / "proj", batch_size=10, lookahead=40)
    directory = project.directory
    project.close()
    targets = load_dataset("digits").targets
    tic = time.monotonic()
    # the weaker durability setting: an answer committed without fsync must survive a killed server too
    process, url, token, _ = start(directory, "--sync", "normal")
    acked: list[tuple[int, int]] = []
    sessions: dict[str, str] = {}  # the annotator's session, kept across the restart as a page keeps it

    def label_forever() -> None:
        with with_sessions(httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30),
                           sessions) as http:
            try:
                item = http.post("/api/next", json={"annotator": "ann"}).json()["item"]
                while True:
                    label = int(targets[item["id"] - 1])  # a dataset project numbers its items from 1
                    response = http.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": label})
                    assert response.status_code == 200, response.text
                    acked.append((item["id"], label))
                    item = response.json()["item"]
            except httpx.HTTPError:
                return  # the server is gone

    labeller = threading.Thread(target=label_forever)
    labeller.start()
    wait_for(lambda: len(acked) >= 25, timeout=120, interval=0.01)
    print(f"first start + 25 answers: {time.monotonic() - tic:.1f} s")
    children = children_of(process.pid)
    assert children  # the trainer (and multiprocessing's helper)
    process.send_signal(signal.SIGKILL)  # in the middle of labelling
    process.wait(30)
    labeller.join(60)
    wait_for(lambda: not any(pid_alive(pid) for pid in children), timeout=60)  # no orphan left behind

    with LabelStore.open(directory / "labels.sqlite") as store:
        active = {e.item: e.label for e in store.active_answers()}
        assert all(active.get(item) == label for item, label in acked)  # every acknowledged answer
        assert len(active) in (len(acked), len(acked) + 1)  # at most the one in flight besides
        held = [lease.item for lease in store.leases() if lease.annotator == "ann"]
        round_, proposal = store.latest_proposal()
        order = proposal["indices"] + [i for i in proposal["ranking"] if i not in proposal["indices"]]
        expected = held[0] if held else next(i for i in order if i not in active)

    tic = time.monotonic()
    process, url, token, lines = start(directory, "--worker", "thread")
    print(f"restart: {time.monotonic() - tic:.1f} s")
    try:
        with with_sessions(httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30),
                           sessions) as http:
            item = http.post("/api/next", json={"annotator": "ann"}).json()["item"]
            assert item["id"] == expected  # the same item the page showed before the crash
            assert item["round"] >= round_
            for _ in range(3):
                response = http.post("/api/answer", json={"annotator": "ann", "item": item["id"],
                                                          "label": int(targets[item["id"] - 1])})
                assert response.status_code == 200
                item = response.json()["item"]
            state = http.get("/api/state").json()
            assert state["counts"]["labelled"] == len(active) + 3
    finally:
        tic = time.monotonic()
        process.send_signal(signal.SIGINT)
        process.wait(60)
        err = process.stderr.read()
        process.reader.join(10)
        print(f"stop: {time.monotonic() - tic:.1f} s")
    out = "".join(lines.get() for _ in range(lines.qsize()))
    assert process.returncode == 0 and "Traceback" not in err, err
    assert "stopped;" in out
