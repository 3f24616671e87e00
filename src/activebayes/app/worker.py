"""The background trainer of the labelling app: commit a batch of new labels, retrain, rescore.

:func:`run_worker` loops until stopped: whenever ``batch_size`` labels have come in
since the last round (or the last unlabelled item got its label) it calls
:meth:`~activebayes.labelling.LabellingProject.advance` (``loop.commit`` +
``loop.propose``), which stores the round and the next proposal in one transaction.
The web server never waits for it: it keeps serving the current ranking (the batch
plus ``lookahead`` further items) and switches to the new one once it is stored.

The worker tells the page what it is doing through the store (meta key ``"status"``,
:func:`read_status`): ``state`` is ``"starting"``, ``"training"`` (building and
fitting the model, evaluating it), ``"scoring"`` (scoring the pool and selecting),
``"ready"`` or ``"error"``, with the round, the number of labels, when the state
began and the last round's timings.

It runs in a separate process by default (:class:`WorkerProcess`; training then never
holds the web server's interpreter lock), or in a thread (:class:`WorkerThread`,
for tests and small projects). A worker process dies with its parent (Linux
``PR_SET_PDEATHSIG``, else it notices the parent is gone within ``poll`` seconds).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from activebayes.labelling import LabellingProject
from activebayes.labelstore import LabelStore

__all__ = ["STATUS_KEY", "WorkerProcess", "WorkerThread", "read_status", "run_worker"]

STATUS_KEY = "status"


class _Event(Protocol):
    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def clear(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


def read_status(store: LabelStore) -> dict[str, Any]:
    """The worker's last reported status (``{"state": "starting"}`` before it reported)."""
    return store.meta(STATUS_KEY) or {"state": "starting"}


class _Reporter:
    def __init__(self, store: LabelStore) -> None:
        self.store = store
        self.last: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []

    def __call__(self, state: str, **fields: Any) -> None:
        status = {"state": state, "since": time.time(), "last": self.last, "pid": os.getpid(), **fields}
        self.store.set_meta(STATUS_KEY, status)


def run_worker(directory: str | os.PathLike[str], stop: _Event, wake: _Event, *, poll: float = 0.5,
               parent_pid: int | None = None, on_error: Callable[[BaseException], None] | None = None) -> None:
    """Train in the background until ``stop`` is set (see the module docstring).

    ``wake`` is set by the server after each answer so the worker looks at once
    (otherwise it looks every ``poll`` seconds). With ``parent_pid`` the worker
    exits when that process is gone.
    """
    project = LabellingProject.open(directory, rescan=False)
    report = _Reporter(project.store)
    loop = None
    try:
        batch_size = project.config.batch_size
        failures = 0
        first = True
        while not stop.is_set():
            if parent_pid is not None and os.getppid() != parent_pid:
                return
            try:
                pending = project.store.uncommitted()
                counts = project.store.counts()
                unlabelled = counts["items"] - counts["labelled"]
                due = len(pending) >= batch_size or (pending and unlabelled == 0)
                if first or due or loop is None:
                    target = project.store.n_rounds() + (1 if due else 0)
                    fields = {"round": target, "labels": counts["labelled"], "pending": len(pending)}
                    report("training", **fields)
                    tic = time.perf_counter()
                    loop, proposal = project.advance(loop, min_pending=1 if due else 10**12,
                                                     on_phase=lambda phase: report(phase, **fields))
                    if due:
                        report.last = {**proposal.seconds, "total": round(time.perf_counter() - tic, 3),
                                       "round": proposal.round, "labels": proposal.n_labelled}
                    report("ready", round=proposal.round, labels=proposal.n_labelled,
                           finished=proposal.stop_reason)
                    first = False
                failures = 0
            except Exception as error:  # keep serving the last ranking; try again later
                failures += 1
                report("error", error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc(limit=5))
                if on_error is not None:
                    on_error(error)
                loop = None
                stop.wait(min(30.0, poll * 2**failures))
                continue
            wake.wait(poll)
            wake.clear()
    finally:
        project.close()


# --------------------------------------------------------------------------- thread / process


class WorkerThread:
    """:func:`run_worker` in a daemon thread of this process."""

    def __init__(self, directory: str | os.PathLike[str], *, poll: float = 0.5) -> None:
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(
            target=run_worker, args=(str(directory), self.stop_event, self.wake_event),
            kwargs={"poll": poll, "on_error": self.errors.append}, name="activebayes-worker", daemon=True)

    def start(self) -> WorkerThread:
        self._thread.start()
        return self

    def wake(self) -> None:
        self.wake_event.set()

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the thread to stop and wait up to ``timeout`` seconds (it is a daemon thread: a
        round still training when the process exits is redone at the next start)."""
        self.stop_event.set()
        self.wake_event.set()
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: run_worker polls the parent instead


def _process_main(directory: str, stop: Any, wake: Any, poll: float, parent_pid: int, threads: int | None) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the server, which stops us
    if threads is not None:
        torch.set_num_threads(threads)
    run_worker(directory, stop, wake, poll=poll, parent_pid=parent_pid)


class WorkerProcess:
    """:func:`run_worker` in a separate (spawned) process."""

    def __init__(self, directory: str | os.PathLike[str], *, poll: float = 0.5, threads: int | None = None,
                 ) -> None:
        context = multiprocessing.get_context("spawn")
        self.stop_event = context.Event()
        self.wake_event = context.Event()
        self._process = context.Process(
            target=_process_main,
            args=(str(Path(directory).absolute()), self.stop_event, self.wake_event, poll, os.getpid(), threads),
            name="activebayes-worker", daemon=True)

    def start(self) -> WorkerProcess:
        self._process.start()
        return self

    def wake(self) -> None:
        self.wake_event.set()

    def stop(self, timeout: float = 2.0) -> None:
        """Ask the worker to stop; kill it after ``timeout`` seconds (a round cut short is
        redone at the next start: its labels are in the store, its results were not stored)."""
        self.stop_event.set()
        self.wake_event.set()
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)

    def is_alive(self) -> bool:
        return self._process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid
