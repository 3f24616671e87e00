"""Annotator sessions: the server, not a free-text field, decides who an annotator is.

A browser (or a script) asks for a session once (``POST /api/session``) and sends its
id in an ``X-Session`` header with every labelling request; the page keeps it in
``localStorage``, so the same person stays the same annotator across reloads and tabs.
A session carries one annotator name: ``anon-XXXXXX`` until its owner picks another,
and a name belongs to one session at a time, so only that session can lease items,
answer, skip and undo under it (another session gets 403). Each annotator holds at
most one leased item (:meth:`~activebayes.labelling.store.LabelStore.lease_next`), and new
sessions are limited to ``per_minute`` a minute (429 beyond), so one client cannot
lease the whole pool under invented names.

Sessions live in the label store (meta key ``"sessions"``) under the SHA-256 of their
id, so they survive a restart of the app; the ids themselves are never stored.
"""

from __future__ import annotations

import collections
import hashlib
import secrets
import threading
import time
from typing import Any

from activebayes.app.guard import HTTPError
from activebayes.labelling.store import LabelStore

__all__ = ["SESSIONS_KEY", "Sessions", "check_name"]

SESSIONS_KEY = "sessions"


def check_name(value: object) -> str:
    """An annotator name: 1 to 64 printable characters (stripped), else 400 naming what came."""
    if not isinstance(value, str) or not value.strip() or len(value) > 64 or not value.isprintable():
        raise HTTPError(400, f"annotator name must be 1 to 64 printable characters, got {value!r:.80}")
    return value.strip()


def _digest(session: str) -> str:
    return hashlib.sha256(session.encode()).hexdigest()


class Sessions:
    """The sessions of one project (see the module docstring)."""

    def __init__(self, store: LabelStore, *, per_minute: int = 30) -> None:
        self.store = store
        self.per_minute = per_minute
        self._lock = threading.Lock()
        self._created: collections.deque[float] = collections.deque()
        self._by_digest: dict[str, dict[str, Any]] = dict(store.meta(SESSIONS_KEY) or {})

    def _save(self) -> None:
        self.store.set_meta(SESSIONS_KEY, self._by_digest)

    def _owner(self, name: str) -> str | None:
        return next((d for d, s in self._by_digest.items() if s["annotator"] == name), None)

    def open(self, session: object = None, name: object = None) -> dict[str, str]:
        """Resume ``session`` (an id given earlier) or start a new one; rename it to ``name`` if given.

        Returns ``{"session": id, "annotator": name}``. 409 when ``name`` belongs to another
        session, 429 when too many sessions were started in the last minute.
        """
        if session is not None and (not isinstance(session, str) or not 16 <= len(session) <= 128):
            raise HTTPError(400, f"session must be the id /api/session gave (16 to 128 characters), got {session!r:.80}")
        wanted = check_name(name) if name is not None else None
        with self._lock:
            digest = _digest(session) if session is not None else None
            record = self._by_digest.get(digest) if digest is not None else None
            if record is None:
                now = time.monotonic()
                while self._created and self._created[0] < now - 60:
                    self._created.popleft()
                if len(self._created) >= self.per_minute:
                    raise HTTPError(429, f"more than {self.per_minute} new annotator sessions in a minute; "
                                         "reuse your session (the page keeps it) or wait a minute")
                self._created.append(now)
                session = secrets.token_urlsafe(18)
                digest = _digest(session)
                record = {"annotator": f"anon-{digest[:6]}", "created": time.time()}
            if wanted is not None and wanted != record["annotator"]:
                owner = self._owner(wanted)
                if owner is not None and owner != digest:
                    raise HTTPError(409, f"the annotator name {wanted!r} belongs to another session; pick another")
                record = {**record, "annotator": wanted}
            if self._by_digest.get(digest) != record:
                self._by_digest[digest] = record
                self._save()
            return {"session": str(session), "annotator": record["annotator"]}

    def annotator(self, session: str | None, claimed: object = None) -> str:
        """The annotator of the request's ``X-Session``; ``claimed`` (a body's ``annotator``) must match it."""
        if not session:
            raise HTTPError(401, "this request needs an annotator session: POST /api/session (optionally with "
                                 "{\"name\": ...}) and send the id it returns in an X-Session header")
        with self._lock:
            record = self._by_digest.get(_digest(session))
        if record is None:
            raise HTTPError(401, "unknown annotator session: POST /api/session for a new one")
        if claimed is not None and claimed != record["annotator"]:
            raise HTTPError(403, f"this session labels as {record['annotator']!r}, not {claimed!r:.80}; "
                                 "rename it with POST /api/session {\"session\": ..., \"name\": ...}")
        return str(record["annotator"])
