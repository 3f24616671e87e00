"""The labelling app's web server (Starlette on uvicorn): the pages and the JSON API.

Pages: ``/`` (label one item at a time) and ``/dashboard``, served without the token
(they hold no data); every ``/api/`` request needs the access token in a header
(:mod:`activebayes.app.guard`), and the labelling requests an annotator session in an
``X-Session`` header (:mod:`activebayes.app.sessions`):

=======================  ====================================================================
``GET  /api/state``       classes, counts, rounds, training status (and the trainer's restarts),
                          accuracy estimates (a multi-label project: micro-F1, ``accuracy.metric``),
                          learning curve, class balance, annotators,
                          leases in force, export links
``POST /api/session``     ``{session?, name?}`` -> ``{session, annotator}``: resume or start a
                          session, optionally under another annotator name
``POST /api/next``        ``{}`` -> the item leased to this session's annotator (``item: null``
                          with a message when none is left)
``POST /api/answer``      ``{item, label}`` (label: class name or id; a multi-label project:
                          ``{item, labels: [...]}``, one class or more) -> the stored answer
                          and the next item (none leased with ``"next": false``)
``POST /api/skip``        ``{item}`` -> the next item (``"next": false`` as above)
``POST /api/undo``        ``{}`` -> takes back this annotator's last answer or skip; the item
                          comes back to them
``GET  /api/items/{id}/image``   the item's image, by item id only (projects of pictures)
``GET  /api/items/{id}/content`` a text or a row (a table, a built-in dataset of them): ``{"kind": "text", "text"}`` or
                                 ``{"kind": "row", "fields": [[column, value], ...]}``
``GET  /api/export/{fmt}``       ``csv``, ``json`` or ``labelstudio``
=======================  ====================================================================

A body may name its ``annotator``: it must be the session's (403 otherwise).
An answer is acknowledged only after the store committed it (``synchronous=FULL``).
Every API response carries ``Server-Timing: app;dur=<ms>``, the time spent in the app.
Errors are JSON ``{"error": message}`` with a 4xx status and change nothing: 400
malformed request (JSON nested too deep and integers too long included), 401 missing
or wrong token or session, 403 another session's annotator, 404 unknown item or route,
409 a conflict (item already labelled, leased to someone else, nothing to undo, a
name taken), 411 / 413 body length missing or too large, 415 not JSON, 422 a label
that is not a class (or a multi-label answer with no class, naming the item), 429 too
many new sessions. A bug answers a JSON 500 and is logged on the server's standard error.

The next item comes from the current proposal at once: its batch first, then the
rest of its ranking (``lookahead``), then every other item in a seeded random order,
so the page never waits for the model, which retrains in the background
(:mod:`activebayes.app.worker`).
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from activebayes._seeding import derive_seed
from activebayes.app.guard import DEFAULT_MAX_BODY, BodyTooLarge, Guard, HTTPError, error_response
from activebayes.app.sessions import Sessions
from activebayes.app.stopping_panel import stopping_state
from activebayes.app.worker import read_status
from activebayes.data import DataError
from activebayes.data.image_folder import confined_file, preview_png
from activebayes.labelling.interchange import item_png
from activebayes.labelling.items import file_sha256
from activebayes.labelling.project import LabellingProject
from activebayes.labelling.store import (
    AlreadyLabelledError,
    LabelStoreError,
    LeaseConflictError,
    NothingToUndoError,
    UnknownItemError,
    classes_mask,
    mask_classes,
)
from activebayes.metrics.multilabel import label_decisions

__all__ = ["DEFAULT_MAX_BODY", "LabelApp", "create_app"]

MAX_ITEM_ID = 2**63 - 1  # SQLite's largest integer: a larger id is no item (and would overflow the driver)
_STATIC = {"label.html": "text/html", "dashboard.html": "text/html", "app.css": "text/css",
           "common.js": "text/javascript", "label.js": "text/javascript", "dashboard.js": "text/javascript"}
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
                 image_cache: int = 512, worker_info: Callable[[], dict[str, Any]] | None = None,
                 sessions_per_minute: int = 30) -> None:
        self.project = project
        self.store = project.store
        self.classes = project.classes
        self.notify = notify or (lambda: None)
        self.worker_info = worker_info or (lambda: {})
        self.sessions = Sessions(project.store, per_minute=sessions_per_minute)
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
        self.multilabel = project.store.multilabel
        if project.config.images is None:
            _ = project.dataset  # decode (or read the table) once, before the first request
            _ = project.item_kind  # and a built-in dataset's texts or rows

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
        audited = score is not None and score != score  # NaN: drawn uniformly to audit (audit_fraction)
        score = None if audited else score
        key = self._keys.get(item) or self.store.item(item).key
        self._keys[item] = key
        content = self.project.item_content(item) if self.project.item_kind != "image" else None
        payload: dict[str, Any] = {
            "id": item,
            "key": key,
            "kind": content["kind"] if content is not None else "image",
            "image": f"/api/items/{item}/image" if content is None else None,
            "content": content,
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
        elif audited:
            why = (f"drawn uniformly at random to check the model (round {served.round}, {served.n_labelled} "
                   "labels): its answer estimates the accuracy")
        elif served.n_labelled == 0:  # a cold start that needs no labels (e.g. typicality), as the records say
            why = (f"{served.strategy} score {score:.4g}, #{rank + 1} of round {served.round}'s ranking "
                   f"(no labels yet: picked from the {'images' if content is None else 'items'} alone)")
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

    def _prediction_in(self, served: _Served, item: int) -> tuple[int, int | None]:
        """``(round, predicted label)``: the most probable class, or for a multi-label project the
        bitmask of the classes with probability >= 1/2 (the rule of the loop's evaluation,
        :func:`~activebayes.metrics.multilabel.evaluate_multilabel`), scored class by class against
        the answer (the held-out micro-F1, :meth:`~activebayes.labelling.store.LabelStore.prequential_scores`)."""
        _rank, _score, probs, _ = served.info.get(item, (None, None, None, False))
        if not probs:
            return served.round, None
        if self.multilabel:
            return served.round, classes_mask(c for c, on in enumerate(label_decisions(probs).tolist()) if on)
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
        # names quoted: with classes named '2', '1' a name and an id look alike (a number is an id)
        raise HTTPError(422, f"label {value!r} is not a class of this project; expected a class name "
                             f"({', '.join(map(repr, self.classes))}) or an id 0..{len(self.classes) - 1} "
                             "(a number is an id, a string a name)")

    def label_set(self, item: int, values: object) -> int:
        """A multi-label answer (a list of class names or ids) as its bitmask; an empty set is a 422
        naming the item."""
        if not isinstance(values, list):
            raise HTTPError(422, f"item {item}: labels must be a list of class names or ids, got {values!r:.80}")
        if not values:
            raise HTTPError(422, f"item {item}: a multi-label answer needs at least one class, got none")
        return classes_mask(self.label_id(value) for value in values)

    def answer(self, annotator: str, item: int, label: object, *, then_next: bool = True) -> dict[str, Any]:
        """Store the answer and lease the next item in one transaction (no next with ``then_next=False``).
        A multi-label project's ``label`` is the list of classes (:meth:`label_set`)."""
        label_id = self.label_set(item, label) if self.multilabel else self.label_id(label)
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
        saved = {"saved": {"event": event.id, "item": item, "label": self.store.label_name(label_id),
                           **({"labels": [self.classes[c] for c in mask_classes(label_id)]} if self.multilabel else {}),
                           "seconds": event.seconds},
                 "you": self.you(annotator)}
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
                  "label": self.store.label_name(target.label) if target.label is not None else None}
        return {"undone": undone, "you": self.you(annotator), **self.next_item(annotator)}

    def you(self, annotator: str) -> dict[str, Any]:
        """The annotator's own count as stored (the page shows it, never a count of its own)."""
        return {"annotator": annotator, "labelled": self.store.labelled_by(annotator)}

    # ----------------------------------------------------------------- images and texts

    def content(self, item: int) -> dict[str, Any]:
        """A text or a row as the page shows it (:func:`~activebayes.labelling.items.row_content`)."""
        record = self.store.item(item)
        if self.project.item_kind == "image":
            raise HTTPError(404, f"item {item} is an image: GET /api/items/{item}/image")
        content = self.project.item_content(record.id)
        if content is None:
            raise HTTPError(404, f"item {item} is not in {self.project.config.source} now")
        return {"id": record.id, "key": record.key, **content}

    def image(self, item: int) -> tuple[bytes, str, str]:
        """``(bytes, content type, etag)`` of an item's picture."""
        record = self.store.item(item)
        config = self.project.config
        if self.project.item_kind != "image":
            raise HTTPError(404, f"item {item} is a {self.project.item_kind}, not an image: "
                                 f"GET /api/items/{item}/content")
        if config.images is not None:
            path = _item_file(config.images, record.key)  # checked at every request, cached or not

            def make() -> bytes:  # the item is this content: a file changed since the scan is another item
                if file_sha256(path) != record.sha256:
                    raise HTTPError(409, f"the image {record.key} changed on disk since the project read it: its "
                                         f"new content is a new item, offered after the next rescan; item {item} "
                                         "was the old content")
                return _item_png(path)

            return self._png(item, make), "image/png", record.sha256
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

    def leases(self, *, limit: int = 50) -> dict[str, Any]:
        """The leases in force: how many, and the first ``limit`` (annotator, item, seconds left)."""
        now = time.time()
        held = self.store.leases(now=now)
        rows = [{"annotator": lease.annotator, "item": lease.item, "key": self._keys.get(lease.item),
                 "seconds_left": round(lease.expires - now, 1)} for lease in held[:limit]]
        return {"count": len(held), "annotators": len({lease.annotator for lease in held}),
                "lease_seconds": self.lease_seconds, "held": rows}

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
        # the headline: accuracy, or for a multi-label project micro-F1 (the test split's and the
        # answers' alike; the keys keep their names, "metric" says which it is)
        by_round, (n_recent, score_recent) = store.prequential_scores(last=50)
        test_key = "test_micro_f1" if self.multilabel else "test_accuracy"
        curve = []
        for round_, record, _committed in store.rounds():
            metrics = record.get("metrics") or {}
            n, score = by_round.get(round_, (0, None))
            curve.append({"round": round_, "n_labelled": record.get("n_labelled"),
                          "test_accuracy": metrics.get(test_key),
                          "prequential_accuracy": score, "prequential_n": n,
                          "seconds": record.get("seconds")})
        n, score = by_round.get(served.round, (0, None))
        if served.round >= len(curve):
            curve.append({"round": served.round, "n_labelled": served.n_labelled,
                          "test_accuracy": served.metrics.get(test_key),
                          "prequential_accuracy": score, "prequential_n": n,
                          "seconds": None, "current": True})
        latest_test = next((p["test_accuracy"] for p in reversed(curve) if p.get("test_accuracy") is not None), None)
        stopping = _stopping_panel(store, getattr(self.project.config, "stop_when", ()), multilabel=self.multilabel)
        return {
            "project": str(self.project.directory),
            "source": self.project.config.source,
            "kind": self.project.item_kind,
            "multilabel": self.multilabel,
            "classes": list(self.classes),
            "counts": counts,
            "rounds": store.n_rounds(),
            "batch_size": batch_size,
            "pending": pending,
            "round": served.round,
            "strategy": served.strategy or self.project.config.strategy,  # what picked the round served now
            "configured_strategy": self.project.config.strategy,
            "status": {k: v for k, v in status.items() if k != "traceback"},
            "accuracy": {
                "metric": "micro-F1" if self.multilabel else "accuracy",
                "prequential": score_recent,
                "prequential_n": n_recent,
                "test": latest_test,
            },
            "curve": curve,
            "stopping": stopping,
            "balance": store.class_counts(),
            "annotators": store.annotator_counts(),
            "skipped": store.meta("skipped") or [],  # files the last scan could not read (not items)
            "leases": self.leases(),
            "worker": self.worker_info(),
            "exports": {fmt: f"/api/export/{fmt}" for fmt in ("csv", "json", "labelstudio")},
            "now": time.time(),
        }


def _stopping_panel(store: Any, stop_when: Any, *, multilabel: bool = False) -> dict[str, Any]:
    """The dashboard's stopping panel: the newest proposal's signals (its model is the latest)."""
    history = [record.get("signals") for _round, record, _committed in store.rounds()]
    latest = store.latest_proposal()
    proposal = latest[1] if latest is not None else {}
    return stopping_state(proposal.get("signals"), history, round=proposal.get("round"),
                          n_labelled=proposal.get("n_labelled"), stop_when=tuple(stop_when or ()),
                          multilabel=multilabel)


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
    except RecursionError:
        raise HTTPError(400, "the request body is JSON nested too deeply; send a flat JSON object") from None
    except ValueError as error:  # an integer of more than 4,300 digits (Python's int parsing limit)
        raise HTTPError(400, f"the request body holds a number JSON cannot take here: {str(error)[:120]}") from None
    if not isinstance(data, dict):
        raise HTTPError(400, f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def _item(data: Mapping[str, Any]) -> int:
    value = data.get("item")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ITEM_ID:
        raise HTTPError(400, f"item must be an integer item id (as given by /api/next), got {value!r:.80}")
    return value


def _then_next(data: Mapping[str, Any]) -> bool:
    value = data.get("next", True)
    if not isinstance(value, bool):
        raise HTTPError(400, f"next must be true or false, got {value!r}")
    return value


def create_app(project: LabellingProject, *, token: str, notify: Callable[[], None] | None = None,
               max_body: int = DEFAULT_MAX_BODY, worker_info: Callable[[], dict[str, Any]] | None = None,
               sessions_per_minute: int = 30) -> Guard:
    """The ASGI app for ``project``, guarded by ``token`` (see the module docstring).

    ``notify`` is called after each answer (it wakes the trainer and must not block);
    ``worker_info`` describes the trainer for the dashboard (``WorkerProcess.info``).
    """
    app_state = LabelApp(project, notify=notify, worker_info=worker_info, sessions_per_minute=sessions_per_minute)

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
            except BodyTooLarge:
                return error_response(413, f"request body larger than {max_body} bytes")
            except HTTPError as error:
                return error_response(error.status, error.message)
            except UnknownItemError as error:
                return error_response(404, str(error))
            except (AlreadyLabelledError, LeaseConflictError, NothingToUndoError) as error:
                return error_response(409, str(error))
            except LabelStoreError as error:
                return error_response(400, str(error))
            except Exception:  # a bug: logged for the server's owner, a JSON 500 for the client
                print(f"activebayes label: internal error on {request.method} {request.url.path}:\n"
                      f"{traceback.format_exc(limit=8)}", file=sys.stderr)
                return error_response(500, "internal error in the labelling app (the server logged it)")
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
        result = app_state.state()
        session = request.headers.get("x-session")
        if session:
            with contextlib.suppress(HTTPError):
                who = app_state.sessions.annotator(session)
                result["you"] = app_state.you(who)
        return result

    def annotator(request: Request, data: Mapping[str, Any]) -> str:
        """The request's annotator: its session's (``X-Session``); a body ``annotator`` must agree."""
        return app_state.sessions.annotator(request.headers.get("x-session"), data.get("annotator"))

    def session(request: Request) -> dict[str, Any]:
        data = post_json(request)
        return app_state.sessions.open(data.get("session"), data.get("name"))

    def next_(request: Request) -> dict[str, Any]:
        data = post_json(request)
        return app_state.next_item(annotator(request, data))

    def answer(request: Request) -> dict[str, Any]:
        data = post_json(request)
        field = "labels" if app_state.multilabel else "label"
        if field not in data:
            raise HTTPError(400, "the answer needs labels (a list of class names or ids)" if app_state.multilabel
                            else "the answer needs a label (a class name or id)")
        item = _item(data)
        return app_state.answer(annotator(request, data), item, data[field], then_next=_then_next(data))

    def skip(request: Request) -> dict[str, Any]:
        data = post_json(request)
        item = _item(data)
        return app_state.skip(annotator(request, data), item, then_next=_then_next(data))

    def undo(request: Request) -> dict[str, Any]:
        data = post_json(request)
        return app_state.undo(annotator(request, data))

    def image(request: Request) -> Response:
        item = int(request.path_params["item"])
        if item > MAX_ITEM_ID:
            raise HTTPError(404, f"no item {item}")
        data, media_type, etag = app_state.image(item)
        if request.headers.get("if-none-match") == f'"{etag}"':
            return Response(status_code=304)
        return Response(data, media_type=media_type,
                        headers={"cache-control": "private, max-age=86400", "etag": f'"{etag}"'})

    def content(request: Request) -> dict[str, Any]:
        item = int(request.path_params["item"])
        if item > MAX_ITEM_ID:
            raise HTTPError(404, f"no item {item}")
        return app_state.content(item)

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
        return error_response(404, f"no such page or API route: {request.url.path}")

    def not_allowed(request: Request, exc: Exception) -> Response:
        return error_response(405, f"{request.method} is not allowed on {request.url.path}")

    routes = [
        Route("/", handle(page("label.html"))),
        Route("/dashboard", handle(page("dashboard.html"))),
        Route("/static/{name}", handle(static)),
        Route("/api/state", handle(state)),
        Route("/api/session", handle(session), methods=["POST"]),
        Route("/api/next", handle(next_), methods=["POST"]),
        Route("/api/answer", handle(answer), methods=["POST"]),
        Route("/api/skip", handle(skip), methods=["POST"]),
        Route("/api/undo", handle(undo), methods=["POST"]),
        Route("/api/items/{item:int}/image", handle(image)),
        Route("/api/items/{item:int}/content", handle(content)),
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


