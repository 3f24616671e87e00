"""The live labelling app: ``activebayes label PROJECT``.

A local web server (Starlette on uvicorn, the ``app`` extra) where one or several
people label a project's items with the keyboard while the model retrains and
rescores the pool in the background. Every answer goes to the project's label store
(:mod:`activebayes.labelling.store`); the training is the loop's own ``propose`` /
``commit`` (:meth:`activebayes.labelling.LabellingProject.advance`).

- :func:`serve` (:mod:`~activebayes.app.serve`): run the app on a project (prints the
  address with its access token; stops cleanly on Ctrl-C and SIGTERM);
- :func:`create_app` (:mod:`~activebayes.app.server`): the ASGI app itself, its pages and API;
- :mod:`activebayes.app.guard`: the access token and the request limits;
- :mod:`activebayes.app.sessions`: annotator sessions (who may undo what);
- :mod:`activebayes.app.worker`: the background trainer (a supervised process, or a thread).

Importing this package needs Starlette and uvicorn: ``pip install "activebayes[app]"``.
The core of activebayes never imports it.
"""

from __future__ import annotations

from .guard import DEFAULT_MAX_BODY, MIN_TOKEN_LENGTH, Guard
from .serve import TOKEN_ENV, serve
from .server import LabelApp, create_app
from .sessions import Sessions
from .worker import WorkerProcess, WorkerThread, read_status, run_worker

__all__ = [
    "DEFAULT_MAX_BODY",
    "MIN_TOKEN_LENGTH",
    "TOKEN_ENV",
    "Guard",
    "LabelApp",
    "Sessions",
    "WorkerProcess",
    "WorkerThread",
    "create_app",
    "read_status",
    "run_worker",
    "serve",
]
