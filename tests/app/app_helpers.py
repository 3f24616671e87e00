"""Helpers of the labelling app's tests: a fast project, snapshots, waiting, a live server."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import uvicorn

from activebayes.app import WorkerThread, create_app
from activebayes.labelling import LabellingProject, ProjectConfig

TOKEN = "test-token-0123456789"

#: The Debian chromium the browser tests drive through Playwright (``None``: not installed).
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
#: Headless, no sandbox (containers), nothing fetched from the network.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
FAST_FIT = {"max_epochs": 1, "min_samples_per_epoch": 128, "patience": 1}


def fast_config(**changes) -> ProjectConfig:
    values = dict(dataset="digits", batch_size=5, num_samples=8, eval_samples=4, lookahead=20, fit_options=FAST_FIT,
                  cold_start=None)
    values.update(changes)
    return ProjectConfig(**values)


def make_project(directory: Path, **changes) -> LabellingProject:
    project = LabellingProject.create(directory, fast_config(**changes))
    project.advance(min_pending=10**12)  # round 0's ranking, as `serve` does before it starts
    return project


def with_sessions(http, sessions: dict[str, str] | None = None):
    """Make ``http`` (an httpx client or Starlette's TestClient) act as the annotator its request body names.

    The app takes the annotator from an ``X-Session`` header (a session from
    ``POST /api/session``); this opens one session per name the first time a body names
    it and adds its header, so a test can keep writing ``json={"annotator": "ann", ...}``.
    A request that sets ``X-Session`` itself is left alone. ``sessions`` (name -> id) carries
    the sessions of an earlier client over, as a page keeps its session. Returns ``http``.
    """
    sessions = {} if sessions is None else sessions
    original = http.request

    def request(method, url, *args, **kwargs):
        body = kwargs.get("json")
        headers = dict(kwargs.get("headers") or {})
        if (isinstance(body, dict) and isinstance(body.get("annotator"), str) and str(url) != "/api/session"
                and not any(k.lower() == "x-session" for k in headers)):
            name = body["annotator"]
            if name not in sessions:
                opened = original("POST", "/api/session", json={"name": name})
                if opened.status_code == 200:
                    sessions[name] = opened.json()["session"]
            if name in sessions:
                kwargs["headers"] = {**headers, "X-Session": sessions[name]}
        return original(method, url, *args, **kwargs)

    http.request = request
    http.sessions = sessions
    return http


def wait_for(condition, timeout: float = 120.0, interval: float = 0.05):
    """Poll ``condition()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {condition}")


def snapshot(project: LabellingProject) -> tuple:
    """Everything a request could change in the store."""
    store = project.store
    return (store.events(), store.labels(present_only=False), store.leases(now=0.0), store.lease_log(),
            store.n_rounds())


class LiveServer:
    """The app on a real uvicorn server in a thread (port 0), with a training thread."""

    def __init__(self, project: LabellingProject, *, poll: float = 0.05) -> None:
        self.project = project
        self.worker = WorkerThread(project.directory, poll=poll).start()
        app = create_app(project, token=TOKEN, notify=self.worker.wake, worker_info=self.worker.info)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(256)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, timeout=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.worker.stop()
