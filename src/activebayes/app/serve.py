"""Running the labelling app: the listening socket, the token, the one-server claim, a clean stop.

:func:`serve` is what ``activebayes label`` runs. It claims the project for this
process (atomically, :meth:`~activebayes.labelling.store.LabelStore.claim_server`), starts
the supervised training worker (:mod:`activebayes.app.worker`), listens with
``TCP_NODELAY`` (so a kept-open browser connection does not wait ~40 ms on Nagle's
algorithm at each request) and stops the same clean way on Ctrl-C (SIGINT) and on
SIGTERM (``docker stop``, systemd, ``timeout``): the worker stopped, the claim
released, a ``stopped;`` line printed, exit status 0.
"""

from __future__ import annotations

import errno
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from activebayes.app.guard import DEFAULT_MAX_BODY, MIN_TOKEN_LENGTH
from activebayes.app.server import create_app
from activebayes.app.worker import WorkerProcess, WorkerThread
from activebayes.errors import InvalidArgumentError
from activebayes.labelling.project import LabellingProject

__all__ = ["SERVER_KEY", "TOKEN_ENV", "check_host", "check_token", "serve"]

SERVER_KEY = "server"
TOKEN_ENV = "ACTIVEBAYES_TOKEN"


class _Terminated(Exception):
    """SIGTERM arrived: stop as on Ctrl-C."""


def check_token(token: str) -> str:
    """An access token given by the user: at least :data:`MIN_TOKEN_LENGTH` printable ASCII characters."""
    if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH or not token.isascii() or not token.isprintable() \
            or any(c.isspace() for c in token):
        shown = f"{len(token)} character(s)" if isinstance(token, str) else repr(token)
        raise InvalidArgumentError(f"--token: expected at least {MIN_TOKEN_LENGTH} printable ASCII characters "
                                   f"without spaces, got {shown}; leave it out for a random one")
    return token


def check_host(host: str) -> str:
    """A listening address: not empty (an empty host would listen on every interface)."""
    if not isinstance(host, str) or not host.strip():
        raise InvalidArgumentError(f"--host: expected an address such as 127.0.0.1 (this machine only) or "
                                   f"0.0.0.0 (every interface), got {host!r}")
    return host.strip()


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def serve(project: LabellingProject | str | Path, *, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None, worker: str = "process", echo: Callable[[str], None] = print,
          ready: Callable[[str], None] | None = None, max_body: int = DEFAULT_MAX_BODY,
          synchronous: str = "full", warn: Callable[[str], None] = _to_stderr) -> None:
    """Run the labelling app on ``project`` (an open project, or the directory of one) until interrupted.

    Prints (``echo``) the address with a fresh random ``token`` (``secrets.token_urlsafe``) unless one
    is given (at least 16 characters); ``ready(url)`` is called once the socket listens.
    ``warn`` gets the warnings and notices (``warning: listening on ...``, ``preparing the first
    ranking ...``), stderr by default; ``echo`` the address, the dashboard and the ``stopped;`` line.
    ``worker``: ``"process"`` (supervised, restarted when it dies) or ``"thread"``
    (:mod:`activebayes.app.worker`). ``synchronous``: the durability of the answers,
    ``"full"`` or ``"normal"`` (:meth:`~activebayes.labelling.store.LabelStore.set_synchronous`).
    The models train and score on the project's
    :attr:`~activebayes.labelling.project.LabellingProject.device` (the CPU unless set), in
    the first ranking and in the trainer alike. Stops cleanly on SIGINT and, when run in the main thread, on SIGTERM.
    """
    host = check_host(host)
    token = check_token(token) if token is not None else secrets.token_urlsafe(24)
    owned = not isinstance(project, LabellingProject)
    if owned:
        project = LabellingProject.open(project, rescan=False)
    assert isinstance(project, LabellingProject)
    try:
        _claim(project, host, port)
        try:
            _serve_claimed(project, host=host, port=port, token=token, worker=worker, echo=echo, warn=warn,
                           ready=ready, max_body=max_body, synchronous=synchronous)
        finally:
            project.store.release_server(os.getpid(), key=SERVER_KEY)
    finally:
        if owned:
            project.close()


def _serve_claimed(project: LabellingProject, *, host: str, port: int, token: str, worker: str,
                   echo: Callable[[str], None], warn: Callable[[str], None], ready: Callable[[str], None] | None,
                   max_body: int, synchronous: str) -> None:
    project.store.set_synchronous(synchronous)
    sock = _bind(host, port)  # first: a taken port is an error before any work (bound, not yet listening)
    try:
        if project.store.proposal(project.store.n_rounds()) is None:
            warn("preparing the first ranking ...")
            project.advance(min_pending=10**12)
    except BaseException:
        sock.close()
        raise
    background: WorkerProcess | WorkerThread = (
        WorkerProcess(project.directory, device=project.device) if worker == "process"
        else WorkerThread(project.directory, device=project.device))
    background.start()
    try:
        app = create_app(project, token=token, notify=background.wake, max_body=max_body,
                         worker_info=background.info)
        actual_port = sock.getsockname()[1]
        shown_host = host if host not in ("0.0.0.0", "::") else socket.gethostname()
        url = f"http://{_url_host(shown_host)}:{actual_port}/?token={token}"
        if host not in ("127.0.0.1", "localhost", "::1"):
            warn(f"warning: listening on {host}: anyone who can reach this machine and has the token can "
                 "label (and read the images); use the default --host 127.0.0.1 unless you mean it")
        echo("labelling app running; open this address in a browser (Ctrl-C stops it):")
        echo(f"    {url}")
        echo(f"dashboard: http://{_url_host(shown_host)}:{actual_port}/dashboard")
        if ready is not None:
            ready(url)
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                timeout_graceful_shutdown=3)
        with _sigterm_as_interrupt():
            try:
                uvicorn.Server(config).run(sockets=[sock])
            except (KeyboardInterrupt, _Terminated):  # uvicorn shut down cleanly, then re-raised the signal
                pass
        counts = project.store.counts()
        echo(f"stopped; {counts['labelled']} of {counts['items']} items labelled, every answer saved in "
             f"{project.store.path}")
    finally:
        if isinstance(background, WorkerThread):
            # a thread cannot be killed, and one still inside PyTorch when the interpreter exits
            # aborts the process: wait for the round it is training to end
            background.stop(timeout=2.0)
            if background.is_alive():
                warn("waiting for the round in training to end (the thread worker cannot be interrupted) ...")
                background.stop(timeout=None)
        else:
            background.stop(timeout=2.0)
        sock.close()


class _sigterm_as_interrupt:  # noqa: N801 (a context manager used like a function)
    """While inside: SIGTERM raises :class:`_Terminated` (uvicorn catches it first, shuts down, then
    re-raises the signal, which lands here), so ``serve`` cleans up as on Ctrl-C. Main thread only."""

    def __enter__(self) -> None:
        self.previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise _Terminated()

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _claim(project: LabellingProject, host: str, port: int) -> None:
    """One server per project: refuse to start while another live process serves it (atomic)."""
    other = project.store.claim_server({"pid": os.getpid(), "host": host, "port": port, "since": time.time()},
                                       alive=lambda claim: _alive(int(claim["pid"])), key=SERVER_KEY)
    if other is not None:
        raise InvalidArgumentError(f"{project.directory} is already being served by process {other['pid']} "
                                   f"(on {other.get('host')}); open that one, or stop it first")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def check_port(host: str, port: int) -> None:
    """Refuse a host or port that cannot be listened on now (a host name that does not resolve or
    an address not of this machine; a port taken, or not allowed) with :func:`_bind`'s error, before
    a command does any work (``activebayes label`` creates a new project after it); port 0 picks
    any free port, so only the host is checked then."""
    _bind(host, port).close()


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket. Created with ``IPPROTO_TCP`` (not 0): asyncio sets ``TCP_NODELAY``
    on accepted connections only then, and a kept-open connection would otherwise wait for
    Nagle's algorithm and the client's delayed ACK (~40 ms) at every request."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:  # the host, not the port
            why = "no such host name or address" if isinstance(error, socket.gaierror) else error.strerror
            raise InvalidArgumentError(f"--host: cannot listen on {host!r} ({why}); expected an address of this "
                                       "machine such as 127.0.0.1 (this machine only) or 0.0.0.0 (every "
                                       "interface), or a host name that resolves to one") from None
        hint = "; pass --port 0 for any free port" if port else ""
        raise InvalidArgumentError(f"--port: cannot listen on {host}:{port} ({error.strerror}){hint}") from None
    except UnicodeError:
        sock.close()
        raise InvalidArgumentError(f"--host: {host!r} is not an address or host name") from None
    sock.listen(128)
    return sock
