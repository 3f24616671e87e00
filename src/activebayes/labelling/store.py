"""The durable label store of a labelling project: one SQLite file, append-only answer events.

Everything a person (or several) tells a labelling project is an **event**, appended
and never changed: an *answer* (item, class, annotator, time), a *skip*, or an *undo*
that takes back one earlier answer or skip. An item's current label is derived from
the events: the label of its latest answer that no undo took back (``None`` if
there is none). The derived table :func:`LabelStore.labels` reads is updated in the
same transaction as each event, and :meth:`LabelStore.check_labels` recomputes it
from the events alone.

**Items** are identified by their path relative to the project's image folder (for a
built-in dataset: ``"NAME[i]"``) plus the SHA-256 of their content, never by their
position in a listing. :meth:`LabelStore.sync_items` compares a fresh scan with the
stored items and reports (:class:`ItemChanges`) images added, removed, changed (same
path, new content: a new item; the old content keeps its label) and moved (same
content under a new path: the item and its label move with it). A label always
stays with the content it was given to.

**Leases**: :meth:`LabelStore.lease_next` hands an item to one annotator until an
expiry time, atomically (``BEGIN IMMEDIATE``), so two annotators never hold the
same item at once; every grant is logged (``lease_log``).

**Rounds**: which labels were committed to the active learning loop in which round
(:meth:`LabelStore.save_round`), and each round's proposal, so a project replays
exactly (see :mod:`activebayes.labelling.project`).

Durability: WAL journal with ``synchronous=FULL``: every write method returns only
after its transaction is committed and the WAL is fsynced, so an acknowledged answer
survives a killed process *and* a power cut. :meth:`LabelStore.set_synchronous`
``("normal")`` skips the fsync at each commit: still durable when the process dies
(SIGKILL included: the WAL is in the operating system's hands), not across a power cut. Several processes may open the store at once (the app's server and its
training worker, a ``query`` on the command line); writers wait for each other
(``busy_timeout``).

**Multi-label** stores (``LabelStore.create(..., multilabel=True)``): an answer is a
set of classes, stored in the same integer ``label`` column as the bitmask of its class
ids (bit ``c`` set = class ``c``; :func:`classes_mask` / :func:`mask_classes`), so undo,
leases and the derived labels work unchanged; an empty set is refused. Schema version 2
records whether a store is multi-label (meta ``"multilabel"``); a version 1 store (every
store before it, all single-label) is migrated when opened.

Export: :meth:`LabelStore.export_rows` gives one row per item with its current label;
the file formats (CSV, JSON, Label Studio) are :mod:`activebayes.labelling.interchange`'s.

Example:
    >>> import tempfile, pathlib
    >>> store = LabelStore.create(pathlib.Path(tempfile.mkdtemp()) / "labels.sqlite", classes=["cat", "dog"])
    >>> _ = store.sync_items([ItemFile("a.png", "aa" * 32), ItemFile("b.png", "bb" * 32)])
    >>> item = store.lease_next("ann", store.item_ids())
    >>> store.answer(item, 1, "ann").label
    1
    >>> store.labels()
    {1: 1}
    >>> _ = store.undo("ann"); store.labels()
    {}
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from activebayes.errors import ActiveBayesError, MissingFileError

__all__ = [
    "EVENT_KINDS",
    "SCHEMA_VERSION",
    "AlreadyLabelledError",
    "Event",
    "Item",
    "ItemChanges",
    "ItemFile",
    "LabelStore",
    "LabelStoreError",
    "Lease",
    "LeaseConflictError",
    "NothingToUndoError",
    "UnknownItemError",
    "classes_mask",
    "mask_classes",
]

#: 2: meta "multilabel" (a multi-label store's labels are bitmasks); version 1 stores are migrated on open
SCHEMA_VERSION = 2
#: joins the class names of a multi-label answer in text (exports), as load_table's label_separator
MULTILABEL_SEPARATOR = "|"
EVENT_KINDS = ("answer", "skip", "undo")
_BUSY_TIMEOUT_MS = 30_000
_MAX_MASK_CLASSES = 62  # a bitmask of the classes fits a signed 64-bit SQLite integer
_LEASE_CHUNK = 64  # candidates checked per query by lease_next


# --------------------------------------------------------------------------- errors


class LabelStoreError(ActiveBayesError, ValueError):
    """A request the store refuses (nothing was written)."""


class UnknownItemError(LabelStoreError):
    """No such item, or the item is no longer in the project's folder."""


class AlreadyLabelledError(LabelStoreError):
    """The item already has a label (answering it again needs ``overwrite=True``)."""


class LeaseConflictError(LabelStoreError):
    """The item is leased to another annotator."""


class NothingToUndoError(LabelStoreError):
    """The annotator has no answer or skip left to take back."""


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ItemFile:
    """One item found by a scan: ``key`` (relative path or ``NAME[i]``) and the SHA-256 of its content."""

    key: str
    sha256: str
    size: int | None = None
    mtime_ns: int | None = None


@dataclass(frozen=True)
class Item:
    id: int
    key: str
    sha256: str
    present: bool


@dataclass(frozen=True)
class Event:
    """One stored event. ``target`` is the event an undo takes back; ``round`` / ``predicted``
    (answers from the app) the proposal round the item was served from and that round's
    model's predicted class; ``seconds`` the time from the lease to the answer."""

    id: int
    item: int | None
    kind: str
    label: int | None
    annotator: str
    time: float
    source: str
    target: int | None = None
    round: int | None = None
    predicted: int | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Lease:
    item: int
    annotator: str
    granted: float
    expires: float


@dataclass
class ItemChanges:
    """What a rescan found, by item key. ``labelled_removed`` / ``labelled_changed`` count the
    removed / replaced items that had a label (the label stays in the store with its content).
    ``skipped``: ``(key, reason)`` of the files the scan left out (unreadable, too large, a link
    out of the folder); they are not items until they can be read."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    labelled_removed: int = 0
    labelled_changed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: what an item is called in :meth:`summary` ("image", or "row" for a table)
    noun: str = "image"
    #: ``(old, new)`` when the project's image folder or table was given at a new place
    source_moved: tuple[str, str] | None = None

    @property
    def any(self) -> bool:
        return bool(self.added or self.removed or self.changed or self.moved or self.returned or self.skipped
                    or self.source_moved)

    def summary(self, limit: int = 5) -> list[str]:
        """Human-readable lines, one per kind of change (empty when nothing changed)."""

        def names(keys: Sequence[str]) -> str:
            shown = ", ".join(keys[:limit])
            return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")

        lines = []
        if self.source_moved:
            what = "table" if self.noun == "row" else "image folder"
            lines.append(f"the {what} moved: {self.source_moved[0]} -> {self.source_moved[1]} (now stored)")
        if self.added:
            lines.append(f"{len(self.added)} new {self.noun}(s): {names(self.added)}")
        if self.removed:
            kept = f"; the labels of {self.labelled_removed} stay in the store" if self.labelled_removed else ""
            lines.append(f"{len(self.removed)} {self.noun}(s) gone: {names(self.removed)}{kept}")
        if self.changed:
            kept = (f"; {self.labelled_changed} had a label, which stays with the old content"
                    if self.labelled_changed else "")
            lines.append(f"{len(self.changed)} {self.noun}(s) changed (new content, to be labelled again): "
                         f"{names(self.changed)}{kept}")
        if self.moved:
            lines.append(f"{len(self.moved)} {self.noun}(s) moved (labels kept): "
                         f"{names([f'{a} -> {b}' for a, b in self.moved])}")
        if self.returned:
            lines.append(f"{len(self.returned)} {self.noun}(s) back (labels restored): {names(self.returned)}")
        if self.skipped:
            lines.append(f"{len(self.skipped)} file(s) skipped, not labelled until they can be read: "
                         + "; ".join(reason for _key, reason in self.skipped[:limit])
                         + (f"; ... ({len(self.skipped) - limit} more)" if len(self.skipped) > limit else ""))
        return lines


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    present INTEGER NOT NULL DEFAULT 1,
    size INTEGER,
    mtime_ns INTEGER,
    added REAL NOT NULL,
    UNIQUE (key, sha256)
);
CREATE INDEX IF NOT EXISTS items_present ON items (present, key);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item INTEGER REFERENCES items (id),
    kind TEXT NOT NULL CHECK (kind IN ('answer', 'skip', 'undo')),
    label INTEGER,
    annotator TEXT NOT NULL,
    time REAL NOT NULL,
    source TEXT NOT NULL,
    target INTEGER REFERENCES events (id),
    round INTEGER,
    predicted INTEGER,
    seconds REAL
);
CREATE INDEX IF NOT EXISTS events_item ON events (item, id);
CREATE INDEX IF NOT EXISTS events_annotator ON events (annotator, id);
CREATE UNIQUE INDEX IF NOT EXISTS events_undone ON events (target) WHERE target IS NOT NULL;
CREATE TABLE IF NOT EXISTS labels (
    item INTEGER PRIMARY KEY REFERENCES items (id),
    label INTEGER NOT NULL,
    event INTEGER NOT NULL REFERENCES events (id)
);
CREATE TABLE IF NOT EXISTS leases (
    item INTEGER PRIMARY KEY REFERENCES items (id),
    annotator TEXT NOT NULL,
    granted REAL NOT NULL,
    expires REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS leases_annotator ON leases (annotator);
CREATE TABLE IF NOT EXISTS lease_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    item INTEGER NOT NULL,
    annotator TEXT NOT NULL,
    granted REAL NOT NULL,
    expires REAL NOT NULL,
    ended REAL
);
CREATE INDEX IF NOT EXISTS lease_log_open ON lease_log (item) WHERE ended IS NULL;
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY,
    record TEXT NOT NULL,
    committed REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS round_items (
    round INTEGER NOT NULL REFERENCES rounds (round),
    position INTEGER NOT NULL,
    item INTEGER NOT NULL REFERENCES items (id),
    label INTEGER NOT NULL,
    PRIMARY KEY (round, item)
);
CREATE UNIQUE INDEX IF NOT EXISTS round_items_item ON round_items (item);
CREATE TABLE IF NOT EXISTS proposals (
    round INTEGER PRIMARY KEY,
    proposal TEXT NOT NULL,
    created REAL NOT NULL
);
"""


def _check_annotator(annotator: object) -> str:
    if not isinstance(annotator, str) or not annotator.strip() or len(annotator) > 64:
        raise LabelStoreError(f"annotator must be a non-empty name of at most 64 characters, got {annotator!r}")
    if any(not (c.isprintable()) for c in annotator):
        raise LabelStoreError(f"annotator must be printable text, got {annotator!r}")
    return annotator.strip()


class LabelStore:
    """One project's SQLite label store (see the module docstring).

    Open with :meth:`create` (a new file) or :meth:`open` (an existing one). One
    connection per instance, shared by threads under a lock; use one instance per
    process. ``now`` arguments (seconds since the epoch) exist for tests. ``read_only``:
    open it for reading only (:meth:`_connect_read_only`); every write then raises.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise MissingFileError(f"no label store at {self.path}")
        self._lock = threading.RLock()
        self.read_only = read_only
        if read_only:
            self._db = self._connect_read_only()
        else:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                       timeout=_BUSY_TIMEOUT_MS / 1000)
        try:
            self._prepare(read_only)
        except BaseException:  # a damaged or foreign file: the connection must not stay open (it holds a lock)
            self._db.close()
            raise

    def _prepare(self, read_only: bool) -> None:
        """Set the connection up and read the store's schema version, classes and kind."""
        if not read_only:
            self._db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise LabelStoreError(f"{self.path}: SQLite could not switch to WAL mode (got {mode!r})")
            self._db.execute("PRAGMA synchronous = FULL")
        self._db.execute("PRAGMA foreign_keys = ON")
        version = self.meta("schema_version")
        if version == 1 and read_only:
            version = SCHEMA_VERSION  # read as it is: version 2 only adds meta "multilabel" (false)
        elif version == 1:
            self._migrate_from_1()
            version = self.meta("schema_version")
        if version != SCHEMA_VERSION:
            raise LabelStoreError(f"{self.path}: label store schema version {version!r}, this activebayes "
                                  f"reads version {SCHEMA_VERSION}")
        self.classes: tuple[str, ...] = tuple(self.meta("classes"))
        #: whether each label is a set of classes (a bitmask, see the module docstring)
        self.multilabel: bool = bool(self.meta("multilabel", False))

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that never writes the store (``mode=ro``). It reads the write-ahead log
        too, so it sees every answer a running server has saved; in a writable folder SQLite
        may leave the log's empty ``-wal`` and ``-shm`` files behind (the next writer removes
        them). Where SQLite cannot open it so (a read-only folder without the ``-shm`` file,
        which it cannot create) the file is read ``immutable`` when no answer waits in a
        ``-wal`` (none there, or empty: nothing to miss, and no writer but root can start in
        that folder), else refused."""
        def connect(query: str) -> sqlite3.Connection:
            return sqlite3.connect(f"{self.path.absolute().as_uri()}?{query}", uri=True, isolation_level=None,
                                   check_same_thread=False, timeout=_BUSY_TIMEOUT_MS / 1000)

        db = connect("mode=ro")
        try:
            db.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.DatabaseError as error:
            db.close()  # closed whatever failed: an open connection keeps a lock on the file
            if not isinstance(error, sqlite3.OperationalError):  # a damaged file, not a folder SQLite cannot use
                raise
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise LabelStoreError(f"{self.path}: its write-ahead log {wal.name} holds answers not yet in the store, "
                                  f"which SQLite cannot read here (a read-only folder); read a writable copy "
                                  f"of the folder (with {wal.name})")
        return connect("mode=ro&immutable=1")

    def _migrate_from_1(self) -> None:
        """Version 1 -> 2: every version 1 store is single-label (the same tables; meta only)."""
        with self._write() as db:
            if json.loads(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) == 1:
                db.executemany("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                               "value = excluded.value", [("multilabel", "false"), ("schema_version", "2")])

    # ----------------------------------------------------------------- lifecycle

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, classes: Sequence[str],
               meta: Mapping[str, Any] | None = None, multilabel: bool = False) -> LabelStore:
        """A new store at ``path`` (which must not exist) for ``classes`` (two or more distinct names);
        ``multilabel``: each answer is a set of classes (at most 62)."""
        path = Path(path)
        if path.exists():
            raise FileExistsError(f"{path} exists already")
        names = [str(c) for c in classes]
        if len(names) < 2 or len(set(names)) != len(names) or any(not n.strip() for n in names):
            raise LabelStoreError(f"classes must be two or more distinct, non-empty names, got {names}")
        if multilabel and len(names) > _MAX_MASK_CLASSES:
            raise LabelStoreError(f"a multi-label store takes at most {_MAX_MASK_CLASSES} classes, got {len(names)}")
        store = cls.__new__(cls)
        store.path = path
        store._lock = threading.RLock()
        store._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        store._db.execute("PRAGMA journal_mode = WAL")
        store._db.execute("PRAGMA synchronous = FULL")
        store._db.executescript(_SCHEMA)
        with store._write():
            values = {"schema_version": SCHEMA_VERSION, "classes": names, "multilabel": bool(multilabel),
                      "created": time.time(), **dict(meta or {})}
            store._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                                  [(k, json.dumps(v)) for k, v in values.items()])
        store._db.close()
        return cls(path)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, read_only: bool = False) -> LabelStore:
        return cls(path, read_only=read_only)

    def set_synchronous(self, mode: str) -> None:
        """This connection's durability: ``"full"`` (default: every commit fsyncs the WAL, so an
        acknowledged write survives a power cut) or ``"normal"`` (WAL not fsynced at each commit:
        an acknowledged write survives the process being killed, SIGKILL included, but the last
        ones may be lost in a power cut or an OS crash; the file is never corrupted). ``normal``
        saves one fsync per answer, which on a slow or shared disk is most of its latency."""
        if mode not in ("full", "normal"):
            raise LabelStoreError(f"synchronous must be 'full' or 'normal', got {mode!r}")
        with self._lock:
            self._db.execute(f"PRAGMA synchronous = {mode.upper()}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: the write lock up front, so a
        read-then-write decision cannot race another process); committed on exit."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # ----------------------------------------------------------------- meta

    def meta(self, key: str, default: Any = None) -> Any:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return json.loads(rows[0][0]) if rows else default

    def set_meta(self, key: str, value: Any) -> None:
        with self._write() as db:
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       (key, json.dumps(value)))

    def claim_server(self, record: Mapping[str, Any], *, alive: Callable[[Mapping[str, Any]], bool],
                     key: str = "server") -> dict[str, Any] | None:
        """Claim the project for one server, atomically: read the current claim and write
        ``record`` in one write transaction, so of two servers starting at once one wins.

        Returns ``None`` when claimed, or the other claim when ``alive(claim)`` says its
        holder still runs (then nothing is written). ``record`` needs a ``"pid"``.
        """
        with self._write() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            current = json.loads(row[0]) if row else None
            if current and current.get("pid") != record["pid"] and alive(current):
                return dict(current)
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                       (key, json.dumps(dict(record))))
        return None

    def release_server(self, pid: int, *, key: str = "server") -> None:
        """Drop the server claim if process ``pid`` holds it (a later server's claim is left alone)."""
        with self._write() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row and json.loads(row[0]) and json.loads(row[0]).get("pid") == pid:
                db.execute("DELETE FROM meta WHERE key = ?", (key,))

    # ----------------------------------------------------------------- items

    def sync_items(self, files: Sequence[ItemFile], *, now: float | None = None) -> ItemChanges:
        """Make the stored items match a fresh scan ``files``, matching by content first.

        Each scanned file is matched, in this order, to: the present item with the same
        path and content (unchanged); a stored item with the same path and content that
        was gone (back); the one item with the same content that lost its path (moved:
        renamed, or two names swapped) or, failing that, the one absent item with that
        content (back, under its new name); else a new item. A content match needs one
        candidate on each side (duplicate files are not guessed). Present items left
        unmatched are gone (their path vanished) or changed (their path now holds
        other content); their labels stay in the store with their content.
        """
        now = time.time() if now is None else now
        keys = [f.key for f in files]
        if len(set(keys)) != len(keys):
            raise LabelStoreError("a scan must not list the same key twice")
        changes = ItemChanges()
        with self._write() as db:
            stored = db.execute("SELECT id, key, sha256, present FROM items").fetchall()
            by_pair = {(key, sha): (id_, bool(present)) for id_, key, sha, present in stored}
            present_by_key = {key: (id_, sha) for id_, key, sha, present in stored if present}
            labelled = {row[0] for row in db.execute("SELECT item FROM labels")}
            scanned = {f.key: f for f in files}
            unmatched = [f for f in files if present_by_key.get(f.key, (None, None))[1] != f.sha256]
            # present items whose path vanished or now holds other content: free to be matched by content
            released = {id_: (key, sha) for key, (id_, sha) in present_by_key.items()
                        if key not in scanned or scanned[key].sha256 != sha}
            absent_by_sha: dict[str, list[tuple[int, str]]] = {}
            for id_, key, sha, present in stored:
                if not present:
                    absent_by_sha.setdefault(sha, []).append((id_, key))
            for f in files:
                old = present_by_key.get(f.key)
                if old is not None and old[1] == f.sha256:  # unchanged
                    db.execute("UPDATE items SET size = ?, mtime_ns = ? WHERE id = ?", (f.size, f.mtime_ns, old[0]))
            pending: list[ItemFile] = []
            revived: set[int] = set()
            for f in unmatched:  # 1. this exact content is back at this path
                pair = by_pair.get((f.key, f.sha256))
                if pair is not None and not pair[1]:
                    revived.add(pair[0])
                    db.execute("UPDATE items SET present = 1, size = ?, mtime_ns = ? WHERE id = ?",
                               (f.size, f.mtime_ns, pair[0]))
                    if f.key in present_by_key:
                        changes.changed.append(f.key)
                    else:
                        changes.returned.append(f.key)
                else:
                    pending.append(f)
            released_by_sha: dict[str, list[int]] = {}
            for id_, (_key, sha) in released.items():
                released_by_sha.setdefault(sha, []).append(id_)
            pending_sha_count: dict[str, int] = {}
            for f in pending:
                pending_sha_count[f.sha256] = pending_sha_count.get(f.sha256, 0) + 1
            matched: set[int] = set()
            for f in pending:  # 2. the same content under another path; 3. a new item
                unique_file = pending_sha_count[f.sha256] == 1
                candidates = released_by_sha.get(f.sha256, [])
                absent = [(i, k) for i, k in absent_by_sha.get(f.sha256, []) if i not in revived]
                if unique_file and len(candidates) == 1:
                    id_ = candidates[0]
                    db.execute("UPDATE items SET key = ?, size = ?, mtime_ns = ? WHERE id = ?",
                               (f.key, f.size, f.mtime_ns, id_))
                    changes.moved.append((released[id_][0], f.key))
                    matched.add(id_)
                elif unique_file and not candidates and len(absent) == 1:
                    id_ = absent[0][0]
                    db.execute("UPDATE items SET key = ?, present = 1, size = ?, mtime_ns = ? WHERE id = ?",
                               (f.key, f.size, f.mtime_ns, id_))
                    changes.returned.append(f.key)
                else:
                    db.execute("INSERT INTO items (key, sha256, present, size, mtime_ns, added) VALUES (?, ?, 1, ?, ?, ?)",
                               (f.key, f.sha256, f.size, f.mtime_ns, now))
                    (changes.changed if f.key in present_by_key else changes.added).append(f.key)
            for id_, (key, _sha) in released.items():
                if id_ in matched:
                    continue
                db.execute("UPDATE items SET present = 0 WHERE id = ?", (id_,))
                if key in changes.changed:  # the path holds other content now: counted with the new item
                    if id_ in labelled:
                        changes.labelled_changed += 1
                    continue
                changes.removed.append(key)
                if id_ in labelled:
                    changes.labelled_removed += 1
            db.execute("DELETE FROM leases WHERE item IN (SELECT id FROM items WHERE present = 0)")
            db.execute("UPDATE lease_log SET ended = ? WHERE ended IS NULL AND item IN "
                       "(SELECT id FROM items WHERE present = 0)", (now,))
        return changes

    def item_ids(self) -> list[int]:
        """The present items' ids, in key order."""
        return [r[0] for r in self._read("SELECT id FROM items WHERE present = 1 ORDER BY key")]

    def items(self, *, present_only: bool = True) -> list[Item]:
        sql = "SELECT id, key, sha256, present FROM items" + (" WHERE present = 1" if present_only else "") + " ORDER BY id"
        return [Item(i, k, s, bool(p)) for i, k, s, p in self._read(sql)]

    def item(self, item_id: object) -> Item:
        """The item with id ``item_id``; :class:`UnknownItemError` if there is none."""
        if isinstance(item_id, bool) or not isinstance(item_id, int):
            raise UnknownItemError(f"item must be an integer item id, got {item_id!r}")
        rows = self._read("SELECT id, key, sha256, present FROM items WHERE id = ?", (item_id,))
        if not rows:
            raise UnknownItemError(f"no item {item_id} in this project")
        i, k, s, p = rows[0]
        return Item(i, k, s, bool(p))

    def scan_cache(self) -> dict[str, tuple[int | None, int | None, str]]:
        """``key -> (size, mtime_ns, sha256)`` of the present items (to skip hashing unchanged files)."""
        return {k: (size, mtime, sha) for k, size, mtime, sha in
                self._read("SELECT key, size, mtime_ns, sha256 FROM items WHERE present = 1")}

    def _present_item(self, db: sqlite3.Connection, item: object) -> int:
        if isinstance(item, bool) or not isinstance(item, int):
            raise UnknownItemError(f"item must be an integer item id, got {item!r}")
        row = db.execute("SELECT present FROM items WHERE id = ?", (item,)).fetchone()
        if row is None:
            raise UnknownItemError(f"no item {item} in this project")
        if not row[0]:
            raise UnknownItemError(f"item {item} is no longer in the project's folder")
        return item

    def label_name(self, label: int) -> str:
        """A stored label as text: the class name, or a multi-label set's names joined by ``|``."""
        if self.multilabel:
            return MULTILABEL_SEPARATOR.join(self.classes[c] for c in mask_classes(label))
        return self.classes[label]

    def _check_label(self, label: object) -> int:
        if self.multilabel:
            top = (1 << len(self.classes)) - 1
            if isinstance(label, bool) or not isinstance(label, int) or not 1 <= label <= top:
                raise LabelStoreError(f"label must be a non-empty set of classes, as a bitmask 1 .. {top} "
                                      f"({', '.join(self.classes)}), got {label!r}")
            return label
        if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label < len(self.classes):
            raise LabelStoreError(f"label must be a class id 0 .. {len(self.classes) - 1} "
                                  f"({', '.join(self.classes)}), got {label!r}")
        return label

    # ----------------------------------------------------------------- events

    def _insert_event(self, db: sqlite3.Connection, *, item: int | None, kind: str, label: int | None,
                      annotator: str, now: float, source: str, target: int | None = None,
                      round: int | None = None, predicted: int | None = None,
                      seconds: float | None = None) -> Event:
        cursor = db.execute(
            "INSERT INTO events (item, kind, label, annotator, time, source, target, round, predicted, seconds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (item, kind, label, annotator, now, source, target, round, predicted, seconds))
        return Event(int(cursor.lastrowid), item, kind, label, annotator, now, source, target, round, predicted, seconds)

    def _end_lease(self, db: sqlite3.Connection, item: int, now: float) -> float | None:
        """Drop the lease of ``item``; returns when it was granted (``None`` if it had none)."""
        row = db.execute("SELECT granted FROM leases WHERE item = ?", (item,)).fetchone()
        db.execute("DELETE FROM leases WHERE item = ?", (item,))
        db.execute("UPDATE lease_log SET ended = ? WHERE item = ? AND ended IS NULL", (now, item))
        return None if row is None else float(row[0])

    def _refresh_label(self, db: sqlite3.Connection, item: int) -> int | None:
        """Recompute the derived label of ``item`` from its events."""
        row = db.execute(
            "SELECT e.id, e.label FROM events e WHERE e.item = ? AND e.kind = 'answer' "
            "AND NOT EXISTS (SELECT 1 FROM events u WHERE u.target = e.id) ORDER BY e.id DESC LIMIT 1",
            (item,)).fetchone()
        if row is None:
            db.execute("DELETE FROM labels WHERE item = ?", (item,))
            return None
        db.execute("INSERT INTO labels (item, label, event) VALUES (?, ?, ?) "
                   "ON CONFLICT (item) DO UPDATE SET label = excluded.label, event = excluded.event",
                   (item, row[1], row[0]))
        return int(row[1])

    def answer(self, item: int, label: int, annotator: str, *, source: str = "app", overwrite: bool = False,
               round: int | None = None, predicted: int | None = None, now: float | None = None) -> Event:
        """Record ``label`` for ``item`` by ``annotator``; returns the stored event once committed.

        Raises :class:`UnknownItemError`, :class:`LabelStoreError` (label not a class id),
        :class:`AlreadyLabelledError` (unless ``overwrite``), :class:`LeaseConflictError`
        (the item is leased to someone else); nothing is written then. Ends the item's lease.
        """
        annotator = _check_annotator(annotator)
        label = self._check_label(label)
        now = time.time() if now is None else now
        with self._write() as db:
            return self._answer(db, item, label, annotator, source=source, overwrite=overwrite, round=round,
                                predicted=predicted, now=now)

    def answer_and_next(self, item: int, label: int, annotator: str, candidates: Iterable[int], *,
                        seconds: float = 300.0, round: int | None = None, predicted: int | None = None,
                        now: float | None = None) -> tuple[Event, int | None]:
        """:meth:`answer`, then :meth:`lease_next`, in one transaction (one commit, one fsync)."""
        annotator = _check_annotator(annotator)
        label = self._check_label(label)
        now = time.time() if now is None else now
        with self._write() as db:
            event = self._answer(db, item, label, annotator, source="app", overwrite=False, round=round,
                                 predicted=predicted, now=now)
            return event, self._lease_next(db, annotator, candidates, seconds, now)

    def _answer(self, db: sqlite3.Connection, item: int, label: int, annotator: str, *, source: str,
                overwrite: bool, round: int | None, predicted: int | None, now: float) -> Event:
        self._present_item(db, item)
        current = db.execute("SELECT label FROM labels WHERE item = ?", (item,)).fetchone()
        if current is not None and not overwrite:
            raise AlreadyLabelledError(f"item {item} is already labelled {self.label_name(current[0])!r}")
        lease = db.execute("SELECT annotator, expires FROM leases WHERE item = ?", (item,)).fetchone()
        if lease is not None and lease[0] != annotator and lease[1] > now:
            raise LeaseConflictError(f"item {item} is leased to another annotator until "
                                     f"{_iso(lease[1])}; ask for the next item instead")
        granted = self._end_lease(db, item, now)
        seconds = None if granted is None or lease is None or lease[0] != annotator else round_(now - granted)
        event = self._insert_event(db, item=item, kind="answer", label=label, annotator=annotator, now=now,
                                   source=source, round=round, predicted=predicted, seconds=seconds)
        self._refresh_label(db, item)
        return event

    def answer_many(self, answers: Mapping[int, int], annotator: str, *, source: str,
                    now: float | None = None) -> list[Event]:
        """Record several answers in one transaction (an import); items whose current label
        equals the answer are left alone. Returns the events written (the new labels)."""
        annotator = _check_annotator(annotator)
        now = time.time() if now is None else now
        events = []
        with self._write() as db:
            for item, label in answers.items():
                self._present_item(db, item)
                self._check_label(label)
                current = db.execute("SELECT label FROM labels WHERE item = ?", (item,)).fetchone()
                if current is not None and current[0] == label:
                    continue
                self._end_lease(db, item, now)
                events.append(self._insert_event(db, item=item, kind="answer", label=label, annotator=annotator,
                                                 now=now, source=source))
                self._refresh_label(db, item)
        return events

    def skip(self, item: int, annotator: str, *, now: float | None = None) -> Event:
        """``annotator`` passes on ``item``: it is not offered to them again (others still get it)."""
        annotator = _check_annotator(annotator)
        now = time.time() if now is None else now
        with self._write() as db:
            return self._skip(db, item, annotator, now)

    def skip_and_next(self, item: int, annotator: str, candidates: Iterable[int], *, seconds: float = 300.0,
                      now: float | None = None) -> tuple[Event, int | None]:
        """:meth:`skip`, then :meth:`lease_next`, in one transaction."""
        annotator = _check_annotator(annotator)
        now = time.time() if now is None else now
        with self._write() as db:
            event = self._skip(db, item, annotator, now)
            return event, self._lease_next(db, annotator, candidates, seconds, now)

    def _skip(self, db: sqlite3.Connection, item: int, annotator: str, now: float) -> Event:
        self._present_item(db, item)
        lease = db.execute("SELECT annotator, expires FROM leases WHERE item = ?", (item,)).fetchone()
        if lease is not None and lease[0] != annotator and lease[1] > now:
            raise LeaseConflictError(f"item {item} is leased to another annotator")
        if lease is not None and lease[0] == annotator:
            self._end_lease(db, item, now)
        return self._insert_event(db, item=item, kind="skip", label=None, annotator=annotator, now=now, source="app")

    def undo(self, annotator: str, *, lease_seconds: float = 300.0, now: float | None = None) -> tuple[Event, Event]:
        """Take back ``annotator``'s latest answer or skip that is still in force.

        Returns ``(undo event, the event taken back)``. The item's label falls back to its
        previous answer (usually none) and the item is leased back to ``annotator`` so they
        can answer it again. :class:`NothingToUndoError` when there is nothing to take back.
        """
        annotator = _check_annotator(annotator)
        now = time.time() if now is None else now
        with self._write() as db:
            row = db.execute(
                "SELECT e.id FROM events e WHERE e.annotator = ? AND e.kind IN ('answer', 'skip') "
                "AND NOT EXISTS (SELECT 1 FROM events u WHERE u.target = e.id) ORDER BY e.id DESC LIMIT 1",
                (annotator,)).fetchone()
            if row is None:
                raise NothingToUndoError(f"annotator {annotator!r} has no answer or skip to take back")
            target = self._event(db, int(row[0]))
            undo = self._insert_event(db, item=target.item, kind="undo", label=None, annotator=annotator, now=now,
                                      source="app", target=target.id)
            assert target.item is not None
            if target.kind == "answer":
                self._refresh_label(db, target.item)
            present = db.execute("SELECT present FROM items WHERE id = ?", (target.item,)).fetchone()[0]
            unlabelled = db.execute("SELECT 1 FROM labels WHERE item = ?", (target.item,)).fetchone() is None
            if present and unlabelled:
                self._grant(db, target.item, annotator, now, lease_seconds)
        return undo, target

    @staticmethod
    def _event(db: sqlite3.Connection, event_id: int) -> Event:
        row = db.execute("SELECT id, item, kind, label, annotator, time, source, target, round, predicted, seconds "
                         "FROM events WHERE id = ?", (event_id,)).fetchone()
        return Event(*row)

    def events(self, *, annotator: str | None = None, kind: str | None = None) -> list[Event]:
        sql = "SELECT id, item, kind, label, annotator, time, source, target, round, predicted, seconds FROM events"
        where, params = [], []
        if annotator is not None:
            where.append("annotator = ?")
            params.append(annotator)
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if where:
            sql += " WHERE " + " AND ".join(where)
        return [Event(*row) for row in self._read(sql + " ORDER BY id", params)]

    def active_answers(self) -> list[Event]:
        """Answer events no undo took back, in order (several may concern one item after an overwrite)."""
        rows = self._read(
            "SELECT id, item, kind, label, annotator, time, source, target, round, predicted, seconds FROM events e "
            "WHERE kind = 'answer' AND NOT EXISTS (SELECT 1 FROM events u WHERE u.target = e.id) ORDER BY id")
        return [Event(*row) for row in rows]

    def labels(self, *, present_only: bool = True) -> dict[int, int]:
        """The current label of every labelled item: ``item id -> class id``."""
        sql = ("SELECT l.item, l.label FROM labels l JOIN items i ON i.id = l.item"
               + (" WHERE i.present = 1" if present_only else "") + " ORDER BY l.event")
        return {int(i): int(y) for i, y in self._read(sql)}

    def label_of(self, item: int) -> int | None:
        rows = self._read("SELECT label FROM labels WHERE item = ?", (item,))
        return int(rows[0][0]) if rows else None

    def check_labels(self) -> None:
        """Recompute every item's label from the events alone and compare with the derived table;
        raises ``AssertionError`` on a mismatch (an internal invariant)."""
        derived: dict[int, int] = {}
        undone = {r[0] for r in self._read("SELECT target FROM events WHERE target IS NOT NULL")}
        for event_id, item, label in self._read("SELECT id, item, label FROM events WHERE kind = 'answer' ORDER BY id"):
            if event_id not in undone:
                derived[item] = label
        assert derived == self.labels(present_only=False), "derived labels out of sync with the events"

    def counts(self) -> dict[str, int]:
        """Numbers for a dashboard: items, labelled, answers, skips, undos, annotators."""
        (items,), = self._read("SELECT count(*) FROM items WHERE present = 1")
        (labelled,), = self._read("SELECT count(*) FROM labels l JOIN items i ON i.id = l.item WHERE i.present = 1")
        kinds = dict(self._read("SELECT kind, count(*) FROM events GROUP BY kind"))
        (annotators,), = self._read("SELECT count(DISTINCT annotator) FROM events")
        return {"items": items, "labelled": labelled, "answers": kinds.get("answer", 0),
                "skips": kinds.get("skip", 0), "undos": kinds.get("undo", 0), "annotators": annotators}

    _ACTIVE_ANSWER = "kind = 'answer' AND NOT EXISTS (SELECT 1 FROM events u WHERE u.target = e.id)"

    def class_counts(self) -> list[int]:
        """How many present items carry each class now."""
        counts = [0] * len(self.classes)
        if self.multilabel:
            for label, n in self._read("SELECT l.label, count(*) FROM labels l JOIN items i ON i.id = l.item "
                                       "WHERE i.present = 1 GROUP BY l.label"):
                for c in mask_classes(label):
                    counts[c] += n
            return counts
        for label, n in self._read("SELECT l.label, count(*) FROM labels l JOIN items i ON i.id = l.item "
                                   "WHERE i.present = 1 GROUP BY l.label"):
            counts[label] = n
        return counts

    def n_uncommitted(self) -> int:
        (n,), = self._read("SELECT count(*) FROM labels l JOIN items i ON i.id = l.item WHERE i.present = 1 "
                           "AND NOT EXISTS (SELECT 1 FROM round_items r WHERE r.item = l.item)")
        return int(n)

    def prequential(self, *, last: int = 50) -> tuple[dict[int, tuple[int, int]], tuple[int, int]]:
        """Exact matches of the served models' predictions: ``({round: (answers, correct)}, (answers,
        correct) over the latest ``last``)``, from answers in force that carry a prediction. For a
        multi-label store ``correct`` counts whole label sets predicted exactly (subset accuracy);
        the figure the app shows is :meth:`prequential_scores`."""
        where = f"FROM events e WHERE {self._ACTIVE_ANSWER} AND predicted IS NOT NULL"
        per_round = {int(r): (int(n), int(c)) for r, n, c in
                     self._read(f"SELECT round, count(*), sum(predicted = label) {where} GROUP BY round")}
        recent = [int(c) for (c,) in self._read(f"SELECT predicted = label {where} ORDER BY id DESC LIMIT ?", (last,))]
        return per_round, (len(recent), sum(recent))

    def prequential_scores(self, *, last: int = 50
                           ) -> tuple[dict[int, tuple[int, float]], tuple[int, float | None]]:
        """Held-out score of the served models, from answers in force that carry a prediction:
        ``({round: (answers, score)}, (answers, score) over the latest ``last``)`` (score ``None``
        when there are none). The score is the accuracy (:meth:`prequential`), or for a
        multi-label store the **micro-F1** over the answers' label decisions: with the predicted
        and answered sets as bitmasks, ``TP`` / ``FP`` / ``FN`` count the classes in both, in the
        prediction only and in the answer only, summed over the answers, and
        ``micro-F1 = 2 TP / (2 TP + FP + FN)`` (as :func:`~activebayes.metrics.multilabel.evaluate_multilabel`'s
        headline; an answer holds at least one class, so the denominator is never 0)."""
        if not self.multilabel:
            per_round, (n, correct) = self.prequential(last=last)
            return ({r: (k, c / k) for r, (k, c) in per_round.items()}, (n, correct / n if n else None))
        where = f"FROM events e WHERE {self._ACTIVE_ANSWER} AND predicted IS NOT NULL"
        bits = len(self.classes)
        tp, fp, fn = (_popcount_sql(expr, bits) for expr in ("predicted & label", "predicted & ~label",
                                                            "label & ~predicted"))
        counts = f"count(*), sum({tp}), sum({fp}), sum({fn})"

        def f1(tp_: int, fp_: int, fn_: int) -> float:
            return 2 * tp_ / (2 * tp_ + fp_ + fn_) if 2 * tp_ + fp_ + fn_ else 0.0

        per_round = {int(r): (int(n), f1(int(a), int(b), int(c))) for r, n, a, b, c in
                     self._read(f"SELECT round, {counts} {where} GROUP BY round")}
        (n, a, b, c), = self._read(f"SELECT {counts} FROM (SELECT predicted, label {where} "
                                   "ORDER BY id DESC LIMIT ?)", (last,))
        return per_round, (int(n), f1(int(a), int(b), int(c)) if n else None)

    def labelled_by(self, annotator: str) -> int:
        """How many items carry a label given by ``annotator`` (answers taken back not counted)."""
        return int(self._read("SELECT count(*) FROM labels l JOIN events e ON e.id = l.event WHERE e.annotator = ?",
                              (annotator,))[0][0])

    def annotator_counts(self) -> list[dict[str, Any]]:
        """Per annotator: answers, skips, undos and the mean seconds from lease to answer."""
        table: dict[str, dict[str, Any]] = {}
        for who, kind, n, seconds in self._read(
                "SELECT annotator, kind, count(*), avg(seconds) FROM events GROUP BY annotator, kind ORDER BY annotator"):
            entry = table.setdefault(who, {"name": who, "answers": 0, "skips": 0, "undos": 0, "mean_seconds": None})
            entry[{"answer": "answers", "skip": "skips", "undo": "undos"}[kind]] = int(n)
            if kind == "answer" and seconds is not None:
                entry["mean_seconds"] = round(float(seconds), 3)
        return list(table.values())

    # ----------------------------------------------------------------- leases

    def _grant(self, db: sqlite3.Connection, item: int, annotator: str, now: float, seconds: float) -> None:
        # one lease per annotator: give back whatever else they hold
        for (other,) in db.execute("SELECT item FROM leases WHERE annotator = ? AND item != ?", (annotator, item)).fetchall():
            self._end_lease(db, other, now)
        db.execute("UPDATE lease_log SET ended = ? WHERE item = ? AND ended IS NULL AND annotator != ?",
                   (now, item, annotator))
        existing = db.execute("SELECT annotator FROM leases WHERE item = ?", (item,)).fetchone()
        db.execute("INSERT INTO leases (item, annotator, granted, expires) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (item) DO UPDATE SET annotator = excluded.annotator, granted = excluded.granted, "
                   "expires = excluded.expires", (item, annotator, now, now + seconds))
        if existing is not None and existing[0] == annotator:
            db.execute("UPDATE lease_log SET expires = ? WHERE item = ? AND ended IS NULL", (now + seconds, item))
        else:
            db.execute("INSERT INTO lease_log (item, annotator, granted, expires) VALUES (?, ?, ?, ?)",
                       (item, annotator, now, now + seconds))

    def lease_next(self, annotator: str, candidates: Iterable[int], *, seconds: float = 300.0,
                   now: float | None = None) -> int | None:
        """Lease the first eligible item of ``candidates`` (in order) to ``annotator``.

        An item the annotator already holds (unexpired, still unlabelled) comes first and
        its lease is renewed. Eligible: present, unlabelled, not leased to anyone else
        (or that lease expired), not skipped by this annotator. Returns the item id, or
        ``None`` when no candidate is eligible. Atomic across threads and processes.
        """
        annotator = _check_annotator(annotator)
        now = time.time() if now is None else now
        with self._write() as db:
            return self._lease_next(db, annotator, candidates, seconds, now)

    def _lease_next(self, db: sqlite3.Connection, annotator: str, candidates: Iterable[int], seconds: float,
                    now: float) -> int | None:
        held = db.execute(
            "SELECT l.item FROM leases l JOIN items i ON i.id = l.item WHERE l.annotator = ? AND l.expires > ? "
            "AND i.present = 1 AND NOT EXISTS (SELECT 1 FROM labels x WHERE x.item = l.item) "
            "ORDER BY l.granted DESC LIMIT 1", (annotator, now)).fetchone()
        if held is not None:
            self._grant(db, int(held[0]), annotator, now, seconds)
            return int(held[0])
        candidates = iter(candidates)
        while chunk := [int(i) for i in itertools.islice(candidates, _LEASE_CHUNK)]:
            marks = ",".join("?" * len(chunk))
            blocked = {r[0] for r in db.execute(f"SELECT item FROM labels WHERE item IN ({marks})", chunk)}
            blocked.update(r[0] for r in db.execute(
                f"SELECT item FROM leases WHERE item IN ({marks}) AND expires > ? AND annotator != ?",
                (*chunk, now, annotator)))
            blocked.update(r[0] for r in db.execute(
                f"SELECT id FROM items WHERE id IN ({marks}) AND present = 0", chunk))
            blocked.update(r[0] for r in db.execute(
                f"SELECT e.item FROM events e WHERE e.item IN ({marks}) AND e.annotator = ? AND e.kind = 'skip' "
                "AND NOT EXISTS (SELECT 1 FROM events u WHERE u.target = e.id)", (*chunk, annotator)))
            for item in chunk:
                if item not in blocked:
                    self._grant(db, item, annotator, now, seconds)
                    return item
        for (other,) in db.execute("SELECT item FROM leases WHERE annotator = ?", (annotator,)).fetchall():
            self._end_lease(db, other, now)
        return None

    def release(self, annotator: str, *, now: float | None = None) -> None:
        """Give back every lease ``annotator`` holds."""
        annotator = _check_annotator(annotator)
        now = time.time() if now is None else now
        with self._write() as db:
            for (item,) in db.execute("SELECT item FROM leases WHERE annotator = ?", (annotator,)).fetchall():
                self._end_lease(db, item, now)

    def leases(self, *, now: float | None = None) -> list[Lease]:
        """The leases in force (unexpired)."""
        now = time.time() if now is None else now
        return [Lease(*r) for r in self._read("SELECT item, annotator, granted, expires FROM leases WHERE expires > ? "
                                             "ORDER BY item", (now,))]

    def lease_log(self) -> list[tuple[int, str, float, float, float | None]]:
        """Every lease ever granted: ``(item, annotator, granted, expires, ended)``."""
        return [tuple(r) for r in self._read("SELECT item, annotator, granted, expires, ended FROM lease_log ORDER BY id")]

    # ----------------------------------------------------------------- rounds and proposals

    def committed(self) -> dict[int, tuple[int, int]]:
        """``item -> (round, label at commit)`` for every label committed to the loop."""
        return {int(i): (int(r), int(y)) for r, i, y in self._read("SELECT round, item, label FROM round_items")}

    def uncommitted(self) -> dict[int, int]:
        """Current labels of present items not yet committed to any round, in the order they were given."""
        rows = self._read(
            "SELECT l.item, l.label FROM labels l JOIN items i ON i.id = l.item WHERE i.present = 1 "
            "AND NOT EXISTS (SELECT 1 FROM round_items r WHERE r.item = l.item) ORDER BY l.event")
        return {int(i): int(y) for i, y in rows}

    def rounds(self) -> list[tuple[int, dict[str, Any], list[tuple[int, int]]]]:
        """Every committed round: ``(round, record dict, [(item, label at commit), ...] in commit order)``."""
        items: dict[int, list[tuple[int, int]]] = {}
        for r, i, y in self._read("SELECT round, item, label FROM round_items ORDER BY round, position"):
            items.setdefault(int(r), []).append((int(i), int(y)))
        return [(int(r), json.loads(rec), items.get(int(r), []))
                for r, rec in self._read("SELECT round, record FROM rounds ORDER BY round")]

    def n_rounds(self) -> int:
        (n,), = self._read("SELECT count(*) FROM rounds")
        return int(n)

    def save_round(self, round: int, record: Mapping[str, Any], committed: Sequence[tuple[int, int]],
                   proposal: Mapping[str, Any] | None = None, *, now: float | None = None) -> None:
        """Store round ``round`` (``committed``: ``(item, label)`` pairs in commit order) and,
        in the same transaction, the next round's proposal."""
        now = time.time() if now is None else now
        with self._write() as db:
            (n,), = db.execute("SELECT count(*) FROM rounds").fetchall()
            if round != n:
                raise LabelStoreError(f"round {round} cannot be committed: the store has {n} round(s)")
            db.execute("INSERT INTO rounds (round, record, committed) VALUES (?, ?, ?)",
                       (round, json.dumps(dict(record)), now))
            db.executemany("INSERT INTO round_items (round, position, item, label) VALUES (?, ?, ?, ?)",
                           [(round, k, item, label) for k, (item, label) in enumerate(committed)])
            if proposal is not None:
                self._put_proposal(db, round + 1, proposal, now)

    def _put_proposal(self, db: sqlite3.Connection, round: int, proposal: Mapping[str, Any], now: float) -> None:
        db.execute("INSERT INTO proposals (round, proposal, created) VALUES (?, ?, ?) ON CONFLICT (round) "
                   "DO UPDATE SET proposal = excluded.proposal, created = excluded.created",
                   (round, json.dumps(dict(proposal)), now))

    def save_proposal(self, round: int, proposal: Mapping[str, Any], *, now: float | None = None) -> None:
        with self._write() as db:
            self._put_proposal(db, round, proposal, time.time() if now is None else now)

    def proposal(self, round: int) -> dict[str, Any] | None:
        rows = self._read("SELECT proposal FROM proposals WHERE round = ?", (round,))
        return json.loads(rows[0][0]) if rows else None

    def latest_proposal(self) -> tuple[int, dict[str, Any]] | None:
        """``(round, proposal)`` of the newest stored proposal (``None`` before the first)."""
        rows = self._read("SELECT round, proposal FROM proposals ORDER BY round DESC LIMIT 1")
        return (int(rows[0][0]), json.loads(rows[0][1])) if rows else None

    def proposal_version(self) -> tuple[int, float] | None:
        """A cheap fingerprint of the newest proposal: ``(round, created)``."""
        rows = self._read("SELECT round, created FROM proposals ORDER BY round DESC LIMIT 1")
        return (int(rows[0][0]), float(rows[0][1])) if rows else None

    # ----------------------------------------------------------------- export

    def export_rows(self, *, root: str | os.PathLike[str] | None = None,
                    gone_labelled: bool = False) -> list[dict[str, Any]]:
        """One row per present item: ``item, key, path, sha256, label, label_id, annotator, time,
        source, round, present``; with ``gone_labelled`` also one per labelled item the last scan no
        longer found (its file or row deleted, or its content changed), with ``present`` false.

        ``label`` is the class name ('' when unlabelled; multi-label: the names joined by ``|``,
        ``label_id`` the bitmask and ``labels`` the list of names); ``path`` the absolute file
        (``root / key``) when ``root`` is given; ``round`` the round the label was
        committed to the loop in (``None`` if not yet).
        """
        rows = self._read(
            "SELECT i.id, i.key, i.sha256, l.label, e.annotator, e.time, e.source, r.round, i.present FROM items i "
            "LEFT JOIN labels l ON l.item = i.id LEFT JOIN events e ON e.id = l.event "
            "LEFT JOIN round_items r ON r.item = i.id WHERE i.present = 1 OR (? AND l.label IS NOT NULL) "
            "ORDER BY i.id", (int(gone_labelled),))
        out = []
        for item, key, sha, label, annotator, when, source, round_, present in rows:
            out.append({
                "item": item,
                "key": key,
                "path": str(Path(root) / key) if root is not None else "",
                "sha256": sha,
                "label": self.label_name(label) if label is not None else "",
                "label_id": label,
                **({"labels": [self.classes[c] for c in mask_classes(label)] if label is not None else []}
                   if self.multilabel else {}),
                "annotator": annotator or "",
                "time": _iso(when) if when is not None else "",
                "source": source or "",
                "round": round_,
                "present": bool(present),
            })
        return out


# --------------------------------------------------------------------------- helpers


def classes_mask(class_ids: Iterable[int]) -> int:
    """The bitmask of a set of class ids (bit ``c`` = class ``c``): ``classes_mask([0, 2]) == 5``."""
    mask = 0
    for c in class_ids:
        mask |= 1 << int(c)
    return mask


def _popcount_sql(expr: str, bits: int) -> str:
    """SQL for the number of bits set among the lowest ``bits`` of the integer ``expr``."""
    return "(" + " + ".join(f"((({expr}) >> {c}) & 1)" for c in range(bits)) + ")"


def mask_classes(mask: int) -> list[int]:
    """The class ids of a bitmask, ascending: ``mask_classes(5) == [0, 2]``."""
    return [c for c in range(int(mask).bit_length()) if mask >> c & 1]



def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec="milliseconds")


def round_(value: float) -> float:
    """Seconds as stored: rounded to 0.1 ms."""
    return round(value, 4)
