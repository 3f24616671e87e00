"""The labelling app's web server (Starlette on uvicorn).

Pages: ``/`` (label one item at a time) and ``/dashboard``. JSON API (every request
needs the access token, see :class:`Guard`):

=======================  ====================================================================
``GET  /api/state``       classes, counts, rounds, training status, accuracy estimates,
                          learning curve, class balance, annotators, export links
``POST /api/next``        ``{annotator}`` -> the item leased to this annotator (``item: null``
                          with a message when none is left)
``POST /api/answer``      ``{annotator, item, label}`` (label: class name or id) -> the stored
                          answer and the next item (none leased with ``"next": false``)
``POST /api/skip``        ``{annotator, item}`` -> the next item (``"next": false`` as above)
``POST /api/undo``        ``{annotator}`` -> takes back this annotator's last answer or skip;
                          the item comes back to them
``GET  /api/items/{id}/image``   the item's image, by item id only
``GET  /api/export/{fmt}``       ``csv``, ``json`` or ``labelstudio``
=======================  ====================================================================

An answer is acknowledged only after the store committed it (``synchronous=FULL``).
Every API response carries ``Server-Timing: app;dur=<ms>``, the time spent in the app.
Errors are JSON ``{"error": message}`` with a 4xx status and change nothing: 400
malformed request, 401 missing or wrong token, 404 unknown item or route, 409 a
conflict (item already labelled, leased to someone else, nothing to undo), 411 /
413 body length missing or too large, 415 not JSON, 422 a label that is not a class.

The next item comes from the current proposal at once: its batch first, then the
rest of its ranking (``lookahead``), then every other item in a seeded random order,
so the page never waits for the model, which retrains in the background
(:mod:`activebayes.app.worker`).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from activebayes._seeding import derive_seed
from activebayes.app.worker import WorkerProcess, WorkerThread, read_status
from activebayes.data import DataError
from activebayes.data.image_folder import confined_file, preview_png
from activebayes.errors import InvalidArgumentError
from activebayes.labelling import LabellingProject
from activebayes.labelstore import (
    AlreadyLabelledError,
    LabelStoreError,
    LeaseConflictError,
    NothingToUndoError,
    UnknownItemError,
)
from activebayes.oracles.files import item_png

__all__ = ["DEFAULT_MAX_BODY", "Guard", "LabelApp", "create_app", "serve"]

DEFAULT_MAX_BODY = 16 * 1024
_STATIC = {"label.html": "text/html", "dashboard.html": "text/html", "app.css": "text/css",
           "common.js": "text/javascript", "label.js": "text/javascript", "dashboard.js": "text/javascript"}
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"),
]


class HTTPError(Exception):
    """A clean 4xx answer: ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


# --------------------------------------------------------------------------- guard (token, body size)


class _BodyTooLarge(Exception):
    pass


class Guard:
    """ASGI middleware: every request needs the access token; bodies are limited to ``max_body`` bytes.

    The token is accepted from an ``Authorization: Bearer TOKEN`` or ``X-Token``
    header, a cookie, or once as ``?token=TOKEN`` on a page: the page then sets the
    cookie (HttpOnly, SameSite=Strict, named after the port) and redirects to the
    same address without the token. Compared in constant time.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], *, token: str, max_body: int = DEFAULT_MAX_BODY) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body

    def _cookie_name(self, scope: Mapping[str, Any]) -> str:
        server = scope.get("server") or ("", 0)
        return f"activebayes_token_{server[1]}"

    def _valid(self, candidate: str | None) -> bool:
        return candidate is not None and secrets.compare_digest(candidate.encode(), self.token.encode())

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        cookie_name = self._cookie_name(scope)
        cookies = {}
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            cookies[name] = value
        bearer = headers.get("authorization", "")
        offered = [bearer[7:] if bearer.lower().startswith("bearer ") else None, headers.get("x-token"),
                   cookies.get(cookie_name)]
        from_query = (query.get("token") or [None])[0]
        if self._valid(from_query) and scope["method"] == "GET" and not scope["path"].startswith("/api/"):
            rest = {k: v for k, v in query.items() if k != "token"}
            location = scope["path"] + ("?" + urllib.parse.urlencode(rest, doseq=True) if rest else "")
            response = RedirectResponse(location, status_code=303)
            response.set_cookie(cookie_name, self.token, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send)
            return
        if not any(self._valid(t) for t in offered) and not self._valid(from_query):
            await _error_response(401, "missing or wrong access token: open the address `activebayes label` "
                                       "printed (it ends in ?token=...)")(scope, receive, send)
            return
        if scope["method"] in ("POST", "PUT", "PATCH"):
            length = headers.get("content-length")
            if length is None and "chunked" not in headers.get("transfer-encoding", ""):
                await _error_response(411, "a request body needs a Content-Length header")(scope, receive, send)
                return
            if length is not None and (not length.isdigit() or int(length) > self.max_body):
                await _error_response(413, f"request body larger than {self.max_body} bytes")(scope, receive, send)
                return
        seen = 0
        started = False

        async def limited_receive() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise _BodyTooLarge()
            return message

        async def send_with_headers(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), *_SECURITY_HEADERS]}
            await send(message)

        try:
            await self.app(scope, limited_receive, send_with_headers)
        except _BodyTooLarge:
            if not started:
                await _error_response(413, f"request body larger than {self.max_body} bytes")(scope, receive, send)


# --------------------------------------------------------------------------- the ranking served


@dataclass(frozen=True)
class _Served:
    """The order items are offered in, from one stored proposal."""

    version: tuple[int, float] | None
    round: int
    order: list[int]
    info: dict[int, tuple[int, float, list[float] | None, bool]]  # item -> (rank, score, probs, in batch)
    strategy: str
    n_labelled: int
    ranked: int
    metrics: dict[str, Any]


class LabelApp:
    """The app's state and request handlers over one open :class:`~activebayes.labelling.LabellingProject`.

    ``notify`` is called after every answer (wakes the training worker).
    """

    def __init__(self, project: LabellingProject, *, notify: Callable[[], None] | None = None,
                 image_cache: int = 512) -> None:
        self.project = project
        self.store = project.store
        self.classes = project.classes
        self.notify = notify or (lambda: None)
        self.lease_seconds = float(project.config.lease_seconds)
        self._lock = threading.Lock()
        self._served: _Served | None = None
        self._served_from: dict[int, tuple[int, int | None]] = {}
        # items answered through this server since the order was built: skipped when looking for
        # the next item (the store still checks every candidate; this only saves it the work)
        self._answered_here: set[int] = set()
        self._pngs: OrderedDict[int, bytes] = OrderedDict()
        self._png_cache = image_cache
        self._keys = {item.id: item.key for item in self.store.items(present_only=False)}
        self._static = {name: resources.files("activebayes.app").joinpath("static", name).read_bytes()
                        for name in _STATIC}
        if project.config.dataset is not None:
            _ = project.dataset  # decode once, before the first request

    # ----------------------------------------------------------------- ranking

    def served(self) -> _Served:
        """The current order, rebuilt when the worker stored a new proposal."""
        version = self.store.proposal_version()
        with self._lock:
            if self._served is not None and self._served.version == version:
                return self._served
            self._answered_here = set()
        latest = self.store.latest_proposal()
        labelled = set(self.store.labels())
        present = [item for item in self.store.item_ids() if item not in labelled]
        if latest is None:
            order = list(present)
            random.Random(derive_seed(self.project.config.seed, "fallback", -1)).shuffle(order)
            served = _Served(version, 0, order, {}, "random", 0, 0, {})
        else:
            round_, proposal = latest
            batch = list(proposal["indices"])
            ranking = list(proposal["ranking"])
            scores = dict(zip(ranking, proposal["ranking_scores"], strict=False))
            probs = proposal.get("probs") or []
            info = {}
            for rank, item in enumerate(ranking):
                info[item] = (rank, float(scores[item]), probs[rank] if rank < len(probs) else None, item in batch)
            in_batch = set(batch)
            head = [i for i in batch + [i for i in ranking if i not in in_batch] if i not in labelled]
            rest = [i for i in present if i not in info]
            random.Random(derive_seed(self.project.config.seed, "fallback", round_)).shuffle(rest)
            served = _Served(version, round_, head + rest, info, proposal.get("strategy", ""),
                             int(proposal.get("n_labelled", 0)), len(ranking), dict(proposal.get("metrics") or {}))
        with self._lock:
            self._served = served
        return served

    def describe(self, item: int, served: _Served) -> dict[str, Any]:
        rank, score, probs, in_batch = served.info.get(item, (None, None, None, False))
        key = self._keys.get(item) or self.store.item(item).key
        self._keys[item] = key
        payload: dict[str, Any] = {
            "id": item,
            "key": key,
            "image": f"/api/items/{item}/image",
            "round": served.round,
            "rank": rank,
            "in_batch": in_batch,
            "score": score,
            "strategy": served.strategy,
            "probs": [{"class": c, "p": p} for c, p in zip(self.classes, probs, strict=True)] if probs else None,
        }
        if rank is None:
            why = (f"the ranking of round {served.round} is used up while the model retrains: "
                   "an item picked at random")
        elif served.strategy == "random":
            why = f"no model yet (round {served.round}, {served.n_labelled} labels): picked at random"
        elif served.n_labelled == 0:  # a cold start that needs no labels (e.g. typicality), as the records say
            why = (f"{served.strategy} score {score:.4g}, #{rank + 1} of round {served.round}'s ranking "
                   "(no labels yet: picked from the images alone)")
        else:
            why = (f"{served.strategy} score {score:.4g}, #{rank + 1} of round {served.round}'s ranking "
                   f"(model trained on {served.n_labelled} labels)")
        payload["why"] = why
        return payload

    def _candidates(self, served: _Served) -> Any:
        done = self._answered_here
        return (item for item in served.order if item not in done)

    def next_item(self, annotator: str) -> dict[str, Any]:
        served = self.served()
        return self._offer(annotator, served, self.store.lease_next(annotator, self._candidates(served),
                                                                    seconds=self.lease_seconds))

    def _offer(self, annotator: str, served: _Served, item: int | None) -> dict[str, Any]:
        """The response for a freshly leased ``item`` (or the message when there is none)."""
        if item is None:
            counts = self.store.counts()
            left = counts["items"] - counts["labelled"]
            message = ("every item is labelled" if left == 0 else
                       f"nothing left for you: the {left} unlabelled item(s) are skipped by you or "
                       "being labelled by someone else")
            return {"item": None, "message": message}
        with self._lock:
            self._served_from[item] = self._prediction_in(served, item)
        return {"item": self.describe(item, served)}

    @staticmethod
    def _prediction_in(served: _Served, item: int) -> tuple[int, int | None]:
        _rank, _score, probs, _ = served.info.get(item, (None, None, None, False))
        if not probs:
            return served.round, None
        return served.round, max(range(len(probs)), key=probs.__getitem__)

    def prediction(self, item: int) -> tuple[int | None, int | None]:
        """``(round, predicted class)`` of the model whose ranking ``item`` was served from (the
        current one for an item answered without being served here), made before its label."""
        with self._lock:
            known = self._served_from.pop(item, None)
        return known if known is not None else self._prediction_in(self.served(), item)

    # ----------------------------------------------------------------- answers

    def label_id(self, value: object) -> int:
        if isinstance(value, bool):
            raise HTTPError(422, f"label must be a class name or id, got {value!r}")
        if isinstance(value, int):
            if 0 <= value < len(self.classes):
                return value
        elif isinstance(value, str) and value in self.classes:
            return self.classes.index(value)
        raise HTTPError(422, f"label {value!r} is not a class of this project; expected one of "
                             f"[{', '.join(self.classes)}] or an id 0..{len(self.classes) - 1}")

    def answer(self, annotator: str, item: int, label: object, *, then_next: bool = True) -> dict[str, Any]:
        """Store the answer and lease the next item in one transaction (no next with ``then_next=False``)."""
        label_id = self.label_id(label)
        round_, predicted = self.prediction(item)
        served = self.served()
        if then_next:
            event, following = self.store.answer_and_next(item, label_id, annotator, self._candidates(served),
                                                          seconds=self.lease_seconds, round=round_,
                                                          predicted=predicted)
        else:
            event = self.store.answer(item, label_id, annotator, round=round_, predicted=predicted)
        with self._lock:
            self._answered_here.add(item)
        self.notify()
        saved = {"saved": {"event": event.id, "item": item, "label": self.classes[label_id], "seconds": event.seconds}}
        return {**saved, **(self._offer(annotator, served, following) if then_next
                            else {"item": None, "message": "answer saved"})}

    def skip(self, annotator: str, item: int, *, then_next: bool = True) -> dict[str, Any]:
        served = self.served()
        if then_next:
            event, following = self.store.skip_and_next(item, annotator, self._candidates(served),
                                                        seconds=self.lease_seconds)
        else:
            event = self.store.skip(item, annotator)
        skipped = {"skipped": {"event": event.id, "item": item}}
        return {**skipped, **(self._offer(annotator, served, following) if then_next
                              else {"item": None, "message": "skipped"})}

    def undo(self, annotator: str) -> dict[str, Any]:
        undo, target = self.store.undo(annotator, lease_seconds=self.lease_seconds)
        with self._lock:
            self._answered_here.discard(target.item)
        self.notify()
        undone = {"event": undo.id, "kind": target.kind, "item": target.item,
                  "label": self.classes[target.label] if target.label is not None else None}
        return {"undone": undone, **self.next_item(annotator)}

    # ----------------------------------------------------------------- images

    def image(self, item: int) -> tuple[bytes, str, str]:
        """``(bytes, content type, etag)`` of an item's picture."""
        record = self.store.item(item)
        config = self.project.config
        if config.images is not None:
            path = _item_file(config.images, record.key)  # checked at every request, cached or not
            return self._png(item, lambda: _item_png(path)), "image/png", record.sha256
        index = self.project.index_of(item)
        if index is None:
            raise HTTPError(404, f"item {item} is not in the dataset")
        return self._png(item, lambda: item_png(self.project.dataset, index, min_side=112)), "image/png", record.sha256

    def _png(self, item: int, make: Callable[[], bytes]) -> bytes:
        with self._lock:
            cached = self._pngs.get(item)
            if cached is not None:
                self._pngs.move_to_end(item)
                return cached
        data = make()
        with self._lock:
            self._pngs[item] = data
            while len(self._pngs) > self._png_cache:
                self._pngs.popitem(last=False)
        return data

    # ----------------------------------------------------------------- state for the pages

    def state(self) -> dict[str, Any]:
        """Everything the pages show (SQL aggregates: cheap whatever the number of answers)."""
        store = self.store
        counts = store.counts()
        served = self.served()
        status = read_status(store)
        pending = store.n_uncommitted()
        batch_size = self.project.config.batch_size
        if status.get("state") == "ready" and pending >= batch_size:
            status = {**status, "state": "queued"}
        by_round, (n_recent, correct_recent) = store.prequential(last=50)
        curve = []
        for round_, record, _committed in store.rounds():
            metrics = record.get("metrics") or {}
            n, correct = by_round.get(round_, (0, 0))
            curve.append({"round": round_, "n_labelled": record.get("n_labelled"),
                          "test_accuracy": metrics.get("test_accuracy"),
                          "prequential_accuracy": correct / n if n else None, "prequential_n": n,
                          "seconds": record.get("seconds")})
        n, correct = by_round.get(served.round, (0, 0))
        if served.round >= len(curve):
            curve.append({"round": served.round, "n_labelled": served.n_labelled,
                          "test_accuracy": served.metrics.get("test_accuracy"),
                          "prequential_accuracy": correct / n if n else None, "prequential_n": n,
                          "seconds": None, "current": True})
        latest_test = next((p["test_accuracy"] for p in reversed(curve) if p.get("test_accuracy") is not None), None)
        return {
            "project": str(self.project.directory),
            "source": self.project.config.images or self.project.config.dataset,
            "classes": list(self.classes),
            "counts": counts,
            "rounds": store.n_rounds(),
            "batch_size": batch_size,
            "pending": pending,
            "round": served.round,
            "strategy": self.project.config.strategy,
            "status": {k: v for k, v in status.items() if k != "traceback"},
            "accuracy": {
                "prequential": correct_recent / n_recent if n_recent else None,
                "prequential_n": n_recent,
                "test": latest_test,
            },
            "curve": curve,
            "balance": store.class_counts(),
            "annotators": store.annotator_counts(),
            "skipped": store.meta("skipped") or [],  # files the last scan could not read (not items)
            "exports": {fmt: f"/api/export/{fmt}" for fmt in ("csv", "json", "labelstudio")},
            "now": time.time(),
        }


def _item_file(root: str, key: str) -> Path:
    """The file of the item at ``key``: a regular file inside ``root`` (no link out), else a 404."""
    try:
        return confined_file(root, key)
    except DataError as error:
        raise HTTPError(404, f"cannot serve the image {key}: {error}") from None


def _item_png(path: Path) -> bytes:
    """The item's image decoded within bounds and re-encoded as PNG
    (:func:`~activebayes.data.image_folder.preview_png`); never the raw file."""
    try:
        return preview_png(path)
    except DataError as error:
        raise HTTPError(404, f"cannot serve the image {path.name}: {error}") from None


# --------------------------------------------------------------------------- routes


def _json_body(request_body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(request_body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise HTTPError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise HTTPError(400, f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def _annotator(data: Mapping[str, Any]) -> str:
    value = data.get("annotator")
    if not isinstance(value, str) or not value.strip() or len(value) > 64 or not value.isprintable():
        raise HTTPError(400, f"annotator must be a name of 1 to 64 printable characters, got {value!r}")
    return value.strip()


def _item(data: Mapping[str, Any]) -> int:
    value = data.get("item")
    if isinstance(value, bool) or not isinstance(value, int):
        raise HTTPError(400, f"item must be an integer item id (as given by /api/next), got {value!r}")
    return value


def _then_next(data: Mapping[str, Any]) -> bool:
    value = data.get("next", True)
    if not isinstance(value, bool):
        raise HTTPError(400, f"next must be true or false, got {value!r}")
    return value


def create_app(project: LabellingProject, *, token: str, notify: Callable[[], None] | None = None,
               max_body: int = DEFAULT_MAX_BODY) -> Guard:
    """The ASGI app for ``project``, guarded by ``token`` (see the module docstring)."""
    app_state = LabelApp(project, notify=notify)

    def handle(method: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        """Read the body, run the handler in Starlette's thread pool (the store blocks on
        fsync), and map store errors to 4xx."""

        async def endpoint(request: Request) -> Response:
            response = await respond(request)
            response.headers["server-timing"] = f"app;dur={1000 * (time.perf_counter() - request.state.tic):.2f}"
            return response

        async def respond(request: Request) -> Response:
            request.state.tic = time.perf_counter()
            try:
                if request.method == "POST":
                    request.state.body = await request.body()
                result = await run_in_threadpool(method, request)
            except _BodyTooLarge:
                return _error_response(413, f"request body larger than {max_body} bytes")
            except HTTPError as error:
                return _error_response(error.status, error.message)
            except UnknownItemError as error:
                return _error_response(404, str(error))
            except (AlreadyLabelledError, LeaseConflictError, NothingToUndoError) as error:
                return _error_response(409, str(error))
            except LabelStoreError as error:
                return _error_response(400, str(error))
            return result if isinstance(result, Response) else JSONResponse(result)

        return endpoint

    def post_json(request: Request) -> dict[str, Any]:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise HTTPError(415, f"send the request body as application/json, got {content_type or 'none'!r}")
        body = _read_body(request)
        return _json_body(body)

    def page(name: str) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            return Response(app_state._static[name], media_type=_STATIC[name] + "; charset=utf-8",
                            headers={"cache-control": "no-store"})

        return endpoint

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC or name.endswith(".html"):
            raise HTTPError(404, f"no static file {name!r}")
        return Response(app_state._static[name], media_type=_STATIC[name] + "; charset=utf-8",
                        headers={"cache-control": "no-cache"})

    def state(request: Request) -> dict[str, Any]:
        return app_state.state()

    def next_(request: Request) -> dict[str, Any]:
        return app_state.next_item(_annotator(post_json(request)))

    def answer(request: Request) -> dict[str, Any]:
        data = post_json(request)
        if "label" not in data:
            raise HTTPError(400, "the answer needs a label (a class name or id)")
        return app_state.answer(_annotator(data), _item(data), data["label"], then_next=_then_next(data))

    def skip(request: Request) -> dict[str, Any]:
        data = post_json(request)
        return app_state.skip(_annotator(data), _item(data), then_next=_then_next(data))

    def undo(request: Request) -> dict[str, Any]:
        return app_state.undo(_annotator(post_json(request)))

    def image(request: Request) -> Response:
        data, media_type, etag = app_state.image(int(request.path_params["item"]))
        if request.headers.get("if-none-match") == f'"{etag}"':
            return Response(status_code=304)
        return Response(data, media_type=media_type,
                        headers={"cache-control": "private, max-age=86400", "etag": f'"{etag}"'})

    def export(request: Request) -> Response:
        fmt = request.path_params["fmt"]
        if fmt not in ("csv", "json", "labelstudio"):
            raise HTTPError(404, f"unknown export format {fmt!r}; expected csv, json or labelstudio")
        text = project.export_text(fmt)
        name = {"csv": "labels.csv", "json": "labels.json", "labelstudio": "labelstudio-tasks.json"}[fmt]
        media = "text/csv" if fmt == "csv" else "application/json"
        return Response(text, media_type=media + "; charset=utf-8",
                        headers={"content-disposition": f'attachment; filename="{name}"'})

    def not_found(request: Request, exc: Exception) -> Response:
        return _error_response(404, f"no such page or API route: {request.url.path}")

    def not_allowed(request: Request, exc: Exception) -> Response:
        return _error_response(405, f"{request.method} is not allowed on {request.url.path}")

    routes = [
        Route("/", handle(page("label.html"))),
        Route("/dashboard", handle(page("dashboard.html"))),
        Route("/static/{name}", handle(static)),
        Route("/api/state", handle(state)),
        Route("/api/next", handle(next_), methods=["POST"]),
        Route("/api/answer", handle(answer), methods=["POST"]),
        Route("/api/skip", handle(skip), methods=["POST"]),
        Route("/api/undo", handle(undo), methods=["POST"]),
        Route("/api/items/{item:int}/image", handle(image)),
        Route("/api/export/{fmt}", handle(export)),
    ]
    starlette = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    starlette.state.label_app = app_state
    return Guard(starlette, token=token, max_body=max_body)


def _read_body(request: Request) -> bytes:
    """The body of a request handled in a worker thread (Starlette reads it on the event loop)."""
    body = getattr(request.state, "body", None)
    if body is None:
        raise HTTPError(400, "the request body could not be read")
    return body


# --------------------------------------------------------------------------- serving


def serve(project: LabellingProject | str | Path, *, host: str = "127.0.0.1", port: int = 8765,
          token: str | None = None, worker: str = "process", echo: Callable[[str], None] = print,
          ready: Callable[[str], None] | None = None, max_body: int = DEFAULT_MAX_BODY,
          synchronous: str = "full") -> None:
    """Run the labelling app on ``project`` (an open project, or the directory of one) until interrupted.

    Prints the address with a fresh random ``token`` (``secrets.token_urlsafe``) unless one
    is given; ``ready(url)`` is called once the socket listens. ``worker``: ``"process"``
    or ``"thread"`` (:mod:`activebayes.app.worker`). ``synchronous``: the durability of
    the answers, ``"full"`` or ``"normal"`` (:meth:`~activebayes.labelstore.LabelStore.set_synchronous`).
    """
    token = token or secrets.token_urlsafe(24)
    owned = not isinstance(project, LabellingProject)
    if owned:
        project = LabellingProject.open(project, rescan=False)
    assert isinstance(project, LabellingProject)
    try:
        _claim(project, host, port)
        project.store.set_synchronous(synchronous)
        if project.store.proposal(project.store.n_rounds()) is None:
            echo("preparing the first ranking ...")
            project.advance(min_pending=10**12)
        sock = _bind(host, port)
        background = (WorkerProcess(project.directory) if worker == "process" else WorkerThread(project.directory))
        background.start()
        try:
            app = create_app(project, token=token, notify=background.wake, max_body=max_body)
            actual_port = sock.getsockname()[1]
            shown_host = host if host not in ("0.0.0.0", "::") else socket.gethostname()
            url = f"http://{_url_host(shown_host)}:{actual_port}/?token={token}"
            if host not in ("127.0.0.1", "localhost", "::1"):
                echo(f"warning: listening on {host}: anyone who can reach this machine and has the token can "
                     "label (and read the images); use the default --host 127.0.0.1 unless you mean it")
            echo("labelling app running; open this address in a browser (Ctrl-C stops it):")
            echo(f"    {url}")
            echo(f"dashboard: http://{_url_host(shown_host)}:{actual_port}/dashboard")
            if ready is not None:
                ready(url)
            config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                    timeout_graceful_shutdown=3)
            try:
                uvicorn.Server(config).run(sockets=[sock])
            except KeyboardInterrupt:  # uvicorn shut down cleanly, then re-raised the Ctrl-C
                pass
            counts = project.store.counts()
            echo(f"stopped; {counts['labelled']} of {counts['items']} items labelled, every answer saved in "
                 f"{project.store.path}")
        finally:
            background.stop(timeout=2.0)
            sock.close()
            project.store.set_meta(SERVER_KEY, None)
    finally:
        if owned:
            project.close()


SERVER_KEY = "server"


def _claim(project: LabellingProject, host: str, port: int) -> None:
    """One server per project: refuse to start while another live process serves it."""
    current = project.store.meta(SERVER_KEY)
    if current and current.get("pid") != os.getpid() and _alive(int(current["pid"])):
        raise InvalidArgumentError(f"{project.directory} is already being served by process {current['pid']} "
                                   f"(on {current.get('host')}); open that one, or stop it first")
    project.store.set_meta(SERVER_KEY, {"pid": os.getpid(), "host": host, "port": port, "since": time.time()})


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


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        hint = "; pass --port 0 for any free port" if port else ""
        raise InvalidArgumentError(f"--port: cannot listen on {host}:{port} ({error.strerror}){hint}") from None
    sock.listen(128)
    return sock

