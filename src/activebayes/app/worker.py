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

Training runs at a lower CPU priority (``WORKER_NICENESS`` added to the worker's
nice value, and so to the threads torch starts from it): on a machine with fewer free
cores than the trainer's threads, a request to the server then gets a core as soon as
it arrives instead of waiting behind the training threads.
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
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Protocol

import torch

from activebayes._memory import keep_freed_memory
from activebayes.labelling.project import LabellingProject
from activebayes.labelling.store import LabelStore

__all__ = ["STATUS_KEY", "WorkerProcess", "WorkerThread", "read_status", "run_worker"]

STATUS_KEY = "status"

#: After this many failures in a row with the same message the trainer stops retrying on a
#: timer and waits for the next answer (or a restart): the status says so.
SAME_FAILURES_BEFORE_PAUSE = 3


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


class _Stopping(Exception):
    """Raised between a round's phases once the worker is asked to stop."""


#: Added to the training worker's nice value (Linux nice values are per thread: the
#: worker's thread, and the torch threads started from it, yield to the web server's).
WORKER_NICENESS = 10


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority by ``WORKER_NICENESS`` (where the OS allows it)."""
    try:
        current = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, min(19, current + WORKER_NICENESS))
    except (AttributeError, OSError):  # not POSIX, or not permitted: train at the same priority
        pass


def run_worker(directory: str | os.PathLike[str], stop: _Event, wake: _Event, *, poll: float = 0.5,
               parent_pid: int | None = None, on_error: Callable[[BaseException], None] | None = None,
               device: str | None = None) -> None:
    """Train in the background until ``stop`` is set (see the module docstring).

    ``wake`` is set by the server after each answer so the worker looks at once
    (otherwise it looks every ``poll`` seconds). With ``parent_pid`` the worker
    exits when that process is gone. ``device``: where the models train and score
    (:attr:`~activebayes.labelling.project.LabellingProject.device`).
    """
    keep_freed_memory()  # a process of its own: the heap reused pass after pass (activebayes._memory)
    _lower_priority()
    project = LabellingProject.open(directory, rescan=False)
    project.device = device
    report = _Reporter(project.store)
    loop = None
    try:
        batch_size = project.config.batch_size
        failures, last_message = 0, ""
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
                    def phase(name: str, fields: dict[str, Any] = fields) -> None:
                        if stop.is_set():  # asked to stop: the round is redone at the next start
                            raise _Stopping
                        report(name, **fields)
                    loop, proposal = project.advance(loop, min_pending=1 if due else 10**12, on_phase=phase)
                    if due:
                        report.last = {**proposal.seconds, "total": round(time.perf_counter() - tic, 3),
                                       "round": proposal.round, "labels": proposal.n_labelled}
                    report("ready", round=proposal.round, labels=proposal.n_labelled,
                           finished=proposal.stop_reason)
                    first = False
                failures, last_message = 0, ""
            except _Stopping:
                return
            except Exception as error:  # keep serving the last ranking; try again later
                message = f"{type(error).__name__}: {error}"
                failures = failures + 1 if message == last_message else 1
                last_message = message
                paused = failures >= SAME_FAILURES_BEFORE_PAUSE
                if paused:  # retrying on a timer only repeats it: wait for something to change
                    message += (f" (failed {failures} times in a row the same way; trying again when the next "
                                "answer comes in or the app restarts)")
                report("error", error=message, traceback=traceback.format_exc(limit=5),
                       retry="on the next answer" if paused else "soon")
                if on_error is not None:
                    on_error(error)
                loop = None
                if not paused:
                    stop.wait(min(30.0, poll * 2**failures))
                    continue
                while not stop.is_set() and not wake.wait(poll):
                    if parent_pid is not None and os.getppid() != parent_pid:
                        return
                wake.clear()
                continue
            wake.wait(poll)
            wake.clear()
    finally:
        project.close()


# --------------------------------------------------------------------------- thread / process


class WorkerThread:
    """:func:`run_worker` in a daemon thread of this process."""

    def __init__(self, directory: str | os.PathLike[str], *, poll: float = 0.5, device: str | None = None) -> None:
        self.stop_event = threading.Event()
        self.wake_event = threading.Event()
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(
            target=run_worker, args=(str(directory), self.stop_event, self.wake_event),
            kwargs={"poll": poll, "on_error": self.errors.append, "device": device}, name="activebayes-worker",
            daemon=True)
        self.device = device

    def start(self) -> WorkerThread:
        self._thread.start()
        return self

    def wake(self) -> None:
        self.wake_event.set()

    def stop(self, timeout: float | None = 60.0) -> None:
        """Ask the thread to stop and wait up to ``timeout`` seconds (``None``: until it ends).
        It stops between rounds; a round still training when the process exits is redone at the
        next start, but an interpreter that exits while the thread is inside PyTorch may abort,
        so :func:`~activebayes.app.serve.serve` waits for it."""
        self.stop_event.set()
        self.wake_event.set()
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def info(self) -> dict[str, Any]:
        """What the dashboard shows about the trainer (a thread is never restarted)."""
        return {"kind": "thread", "alive": self.is_alive(), "pid": None, "restarts": 0, "last_death": None,
                "gave_up": False, "device": self.device or "cpu"}


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: run_worker polls the parent instead


WAKE = b"w"
STOP = b"s"


def _listen(inbox: Connection, stop: threading.Event, wake: threading.Event) -> None:
    """In the worker process: turn the server's messages into local events (never blocks the server).

    The pipe's end of file (the server is gone, or closed its end) counts as a stop.
    """
    while True:
        try:
            message = inbox.recv_bytes()
        except (EOFError, OSError):
            message = STOP
        if message == STOP:
            stop.set()
            wake.set()
            return
        wake.set()


def _process_main(directory: str, inbox: Connection, poll: float, parent_pid: int, threads: int | None,
                  device: str | None) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the server, which stops us
    # tqdm's default lock is a multiprocessing semaphore: a worker killed with SIGKILL could never
    # release it, and the server would print a "leaked semaphore" warning when it stops
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    stop, wake = threading.Event(), threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: (stop.set(), wake.set()))
    threading.Thread(target=_listen, args=(inbox, stop, wake), name="activebayes-inbox", daemon=True).start()
    if threads is not None:
        torch.set_num_threads(threads)
    run_worker(directory, stop, wake, poll=poll, parent_pid=parent_pid, device=device)


def describe_exit(code: int | None) -> str:
    """``"exit code 1"`` or ``"killed by SIGKILL"`` for a process's exit code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class WorkerProcess:
    """:func:`run_worker` in a separate (spawned) process, watched by a supervisor thread.

    The server talks to the worker through a one-way pipe whose writing end is
    non-blocking, so :meth:`wake` returns at once whatever the worker's state, dead
    or alive (a ``multiprocessing.Event`` would wait forever for a dead sleeper).

    The supervisor notices the worker's death within ``check`` seconds (idle or in
    the middle of a round: a round cut short is redone, its labels are in the store),
    writes what happened into the worker's status (state ``"restarting"``) and starts
    a new worker after a back-off of ``backoff`` seconds, doubled at each death in a
    row. A death in a row is one before the new worker finished a round; after
    ``max_deaths`` of them the status becomes ``"error"`` with the reason and no new
    worker is started: labelling goes on with the last ranking (restart the app to try
    again). :meth:`info` is what the dashboard shows.
    """

    def __init__(self, directory: str | os.PathLike[str], *, poll: float = 0.5, threads: int | None = None,
                 backoff: float = 0.5, max_deaths: int = 5, check: float = 0.2, device: str | None = None) -> None:
        self.directory = str(Path(directory).absolute())
        self.poll = poll
        self.threads = threads
        self.device = device
        self.backoff = backoff
        self.max_deaths = max_deaths
        self.check = check
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._process: Any = None
        self._outbox: Connection | None = None
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self.restarts = 0
        self.deaths_in_a_row = 0
        self.last_death: dict[str, Any] | None = None
        self.gave_up = False

    def _spawn(self) -> None:
        inbox, outbox = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_process_main, args=(self.directory, inbox, self.poll, os.getpid(), self.threads, self.device),
            name="activebayes-worker", daemon=True)
        process.start()
        inbox.close()  # the child holds its own copy: when it dies, writes fail at once (EPIPE)
        os.set_blocking(outbox.fileno(), False)
        with self._lock:
            old = self._outbox
            self._process, self._outbox = process, outbox
        if old is not None:
            old.close()

    def start(self) -> WorkerProcess:
        self._spawn()
        self._supervisor = threading.Thread(target=self._supervise, name="activebayes-supervisor", daemon=True)
        self._supervisor.start()
        return self

    def _send(self, message: bytes) -> None:
        with self._lock:
            outbox = self._outbox
            if outbox is None:
                return
            try:
                outbox.send_bytes(message)
            except (BlockingIOError, BrokenPipeError, OSError):
                pass  # the worker is busy (the pipe is full: it will look anyway) or dead (the supervisor acts)

    def wake(self) -> None:
        """Tell the worker new labels came in; returns at once, also when the worker is dead."""
        self._send(WAKE)

    # ----------------------------------------------------------------- supervision

    def _store(self) -> LabelStore:
        return LabelStore.open(Path(self.directory) / "labels.sqlite")

    def _supervise(self) -> None:
        from multiprocessing.connection import wait

        store = self._store()
        try:
            while not self._stopping.is_set():
                process = self._process
                wait([process.sentinel], timeout=self.check)
                if process.is_alive() or self._stopping.is_set():
                    continue
                process.join()
                self._on_death(store, process)
                if self.gave_up:
                    return
                delay = self.backoff * 2 ** max(0, self.deaths_in_a_row - 1)
                if self._stopping.wait(delay):
                    return
                self._spawn()
                self.restarts += 1
        finally:
            store.close()

    def _on_death(self, store: LabelStore, process: Any) -> None:
        status = read_status(store)
        ours = status.get("pid") == process.pid
        finished_a_round = ours and status.get("state") == "ready"
        self.deaths_in_a_row = 1 if finished_a_round else self.deaths_in_a_row + 1
        doing = status.get("state") if ours else "starting"
        during = {"ready": "while idle", "training": f"while training round {status.get('round')}",
                  "scoring": f"while scoring for round {status.get('round')}"}.get(str(doing), f"while {doing}")
        how = describe_exit(process.exitcode)
        self.last_death = {"pid": process.pid, "exit": how, "during": during, "time": time.time(),
                           "in_a_row": self.deaths_in_a_row}
        if self.deaths_in_a_row >= self.max_deaths:
            self.gave_up = True
            store.set_meta(STATUS_KEY, {
                "state": "error", "since": time.time(), "last": status.get("last", {}), "pid": None,
                "round": status.get("round"),
                "error": (f"the trainer process died {self.deaths_in_a_row} times in a row without finishing a "
                          f"round (last: {how} {during}); labelling goes on with the last ranking; restart "
                          "`activebayes label` to try again")})
            return
        delay = self.backoff * 2 ** max(0, self.deaths_in_a_row - 1)
        store.set_meta(STATUS_KEY, {
            "state": "restarting", "since": time.time(), "last": status.get("last", {}), "pid": None,
            "round": status.get("round"), "labels": status.get("labels"),
            "error": f"the trainer process stopped unexpectedly ({how} {during}); restarting it in {delay:g} s"})

    def info(self) -> dict[str, Any]:
        """The supervisor's record for the dashboard: restarts, the last death, whether it gave up."""
        return {"kind": "process", "alive": self.is_alive(), "pid": self.pid, "restarts": self.restarts,
                "last_death": self.last_death, "gave_up": self.gave_up, "device": self.device or "cpu"}

    def stop(self, timeout: float = 2.0) -> None:
        """Stop supervising and ask the worker to stop; kill it after ``timeout`` seconds (a round
        cut short is redone at the next start: its labels are in the store, its results were not stored)."""
        self._stopping.set()
        if self._supervisor is not None and self._supervisor is not threading.current_thread():
            self._supervisor.join(timeout + 5)
        process = self._process
        self._send(STOP)
        if process is not None:
            process.join(timeout)
            if process.is_alive():
                process.kill()
                process.join(5)
            process.close()
            self._process = None
        with self._lock:
            if self._outbox is not None:
                self._outbox.close()
                self._outbox = None

    def is_alive(self) -> bool:
        process = self._process
        return process is not None and process.is_alive()

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None
