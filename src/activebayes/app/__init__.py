"""The live labelling app: ``activebayes label PROJECT``.

A local web server (Starlette on uvicorn, the ``app`` extra) where one or several
people label a project's items with the keyboard while the model retrains and
rescores the pool in the background. Every answer goes to the project's label store
(:mod:`activebayes.labelstore`); the training is the loop's own ``propose`` /
``commit`` (:meth:`activebayes.labelling.LabellingProject.advance`).

- :func:`serve`: run the app on a project (prints the address with its access token);
- :func:`create_app`: the ASGI app itself (for tests or another server);
- :mod:`activebayes.app.worker`: the background trainer (a process or a thread).

Importing this package needs Starlette and uvicorn: ``pip install "activebayes[app]"``.
The core of activebayes never imports it.
"""

from __future__ import annotations

from .server import DEFAULT_MAX_BODY, LabelApp, create_app, serve
from .worker import WorkerProcess, WorkerThread, read_status, run_worker

__all__ = [
    "DEFAULT_MAX_BODY",
    "LabelApp",
    "WorkerProcess",
    "WorkerThread",
    "create_app",
    "read_status",
    "run_worker",
    "serve",
]
