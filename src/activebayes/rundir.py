"""The run-directory format: the one module that knows file names and layouts.

A run directory holds one active learning run::

    RUN/
      config.json          the LoopConfig (written once, atomically), with the SHA-256 of its settings
      items.json           a table run's item ids: the id of each pool position and test item, with its
                           known label and a hash of its input cells (both checked on a resume)
      given.json           what a run from Python was given beyond its config (its own model, data, ...)
      rounds.jsonl         one JSON object per finished round (rewritten atomically)
      proposal.json        a proposed batch waiting for its labels (file round trip)
      checkpoints/         model weights after each round (latest few kept)
      summary.json         written when the run has finished
      report.html          the run's report (see activebayes.report)
      run.lock             locked (flock) while a process writes the run: a second one is refused

A comparison directory holds one run directory per (strategy, seed), laid out as
``COMPARISON/<strategy>/seed_<seed>/`` plus ``comparison.json`` naming them.

``rounds.jsonl`` and ``summary.json`` may instead be compressed, as
``rounds.jsonl.xz`` and ``summary.json.xz`` (xz, the benchmark results committed to
the repository are kept so; about a fifth smaller than gzip on these records) or, as
earlier versions wrote them, ``.gz``: they are read the same way, and a run resumed
from them goes on writing them in the form they have.

Every file is written to a temporary file and renamed into place
(:mod:`activebayes._io`), and a round's record is written only once the round
is complete, so a directory is never half-written. A run directory is tied to
its config's *identity* (:meth:`LoopConfig.identity`): runtime settings such as
the device may change when the run is resumed.

The experiment runner (:mod:`activebayes.experiment`) writes these directories;
the report and the benchmarks read them through :func:`load_runs`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gzip
import hashlib
import lzma
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from activebayes._io import atomic_write_bytes, atomic_write_text, ensure_folder
from activebayes.errors import ActiveBayesError, InvalidArgumentError
from activebayes._validation import check_positive_int, first_few
from activebayes.stopping import (
    LABEL_BUDGET,
    REMAINING_CHANGE,
    SIGNALS,
    explicit_stop_when,
    parse_stop_when,
    rejudge_remaining_change,
    stop_kind_of,
)
from activebayes.records import (
    HEADLINE_METRICS,
    FINGERPRINT_KEY,
    RUNTIME_FIELDS,
    LoopConfig,
    LoopResult,
    RoundRecord,
    headline_accuracy,
    headline_metric,
)

__all__ = [
    "CHECKPOINT_DIR",
    "COMPARISON_FILE",
    "CONFIG_FILE",
    "HEADLINE_METRICS",
    "REPORT_FILE",
    "ROUNDS_FILE",
    "SUMMARY_FILE",
    "Comparison",
    "InUseError",
    "RunDirectory",
    "RunDirectoryError",
    "headline_accuracy",
    "headline_metric",
    "is_comparison",
    "is_run",
    "load_runs",
    "check_round_record",
    "config_differences",
    "read_config_text",
    "settings_fingerprint",
]

CONFIG_FILE = "config.json"
ROUNDS_FILE = "rounds.jsonl"
ITEMS_FILE = "items.json"
GIVEN_FILE = "given.json"
SUMMARY_FILE = "summary.json"
#: held (``flock``) by the process writing the run: :meth:`RunDirectory.lock`
LOCK_FILE = "run.lock"
COMPARISON_FILE = "comparison.json"
#: held (``flock``) by a process running, resuming or changing a comparison: :meth:`Comparison.lock`
COMPARISON_LOCK_FILE = "comparison.lock"
REPORT_FILE = "report.html"
CHECKPOINT_DIR = "checkpoints"
KEEP_CHECKPOINTS = 2
COMPRESSED = ".xz"  # suffix of a compressed rounds or summary file (xz)
_COMPRESSED_FORMS = (".xz", ".gz")  # read both; .gz as earlier versions wrote it


def with_budget_signals(records: Sequence[RoundRecord], config: LoopConfig) -> list[RoundRecord]:
    """``records`` with their remaining-change signals judged at ``config``'s label budget, whose
    horizon bounds them (:func:`activebayes.stopping.rejudge_remaining_change`): the rounds of a run
    continued to a larger budget are then those of a run started with it, signals included."""
    threshold = parse_stop_when(config.stop_when).get(REMAINING_CHANGE, SIGNALS[REMAINING_CHANGE][0])
    out = []
    for record in records:
        entry = (record.signals or {}).get(REMAINING_CHANGE)
        if entry is not None:
            judged = rejudge_remaining_change(entry, record.n_labelled, config.budget, threshold)
            record = dataclasses.replace(record, signals={**record.signals, REMAINING_CHANGE: judged})
        out.append(record)
    return out


class RunDirectoryError(ActiveBayesError, ValueError):
    """A run directory is missing, corrupt, or belongs to a different config."""


class InUseError(RunDirectoryError):
    """A run or comparison is held by another process (its lock file is locked)."""


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _stored(path: Path) -> Path:
    """``path``, or its compressed form (``path`` + ``.xz`` or ``.gz``) when only that one exists."""
    if path.is_file():
        return path
    for suffix in _COMPRESSED_FORMS:
        compressed = path.with_name(path.name + suffix)
        if compressed.is_file():
            return compressed
    return path


def _read_text(path: Path) -> str:
    """The text of ``path``, decompressed if its name ends in ``.xz`` or ``.gz``."""
    if path.name.endswith(".xz"):
        try:
            return lzma.decompress(path.read_bytes()).decode("utf-8")
        except (lzma.LZMAError, EOFError, UnicodeDecodeError) as error:
            raise RunDirectoryError(f"{path} is not a valid xz file: {error}") from None
    if path.name.endswith(".gz"):
        try:
            return gzip.decompress(path.read_bytes()).decode("utf-8")
        except (OSError, EOFError, UnicodeDecodeError) as error:  # gzip.BadGzipFile is an OSError
            raise RunDirectoryError(f"{path} is not a valid gzip file: {error}") from None
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise RunDirectoryError(f"{path}:{line} is not UTF-8 text ({error.reason} at byte {error.start})") from None


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` atomically, compressed if ``path`` ends in ``.xz`` or ``.gz`` (the same text,
    the same bytes for the same text)."""
    data = text.encode("utf-8")
    if path.name.endswith(".xz"):
        atomic_write_bytes(path, lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    elif path.name.endswith(".gz"):
        atomic_write_bytes(path, gzip.compress(data, compresslevel=9, mtime=0))
    else:
        atomic_write_text(path, text)


def settings_fingerprint(stored: Mapping[str, Any]) -> str:
    """The SHA-256 of a stored config's settings as written: every key but the runtime ones
    (:data:`~activebayes.records.RUNTIME_FIELDS`, which may change on resume) and the fingerprint
    itself, as sorted, compact JSON. Taken over the stored keys, not the config they migrate to,
    so a later version that adds a setting still recognises the file as unedited."""
    settings = {k: v for k, v in stored.items() if k not in RUNTIME_FIELDS and k != FINGERPRINT_KEY}
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def config_differences(stored: LoopConfig, expected: LoopConfig, *, where: str = "there",
                       wanted: str = "now") -> str:
    """How ``stored`` (a run directory's config) and ``expected`` differ in what they compute,
    ``"seed: 1 there, 0 now; ..."`` (``""``: they compute the same run)."""
    mine, theirs = stored.identity(), expected.identity()
    return "; ".join(f"{name}: {mine[name]!r} {where}, {theirs.get(name)!r} {wanted}"
                     for name in stored.differences(expected))


@contextlib.contextmanager
def _flock(folder: Path, name: str, *, shared: bool = False) -> Iterator[None]:
    """Hold an advisory ``flock`` on ``folder/name`` (exclusive, or ``shared``), or refuse at once
    with "FOLDER is in use by another process" (a no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks
        yield
        return
    try:
        handle = open(folder / name, "a+b")  # noqa: SIM115 (closed below)
    except OSError as error:
        if error.errno != errno.EROFS:
            raise
        yield  # a read-only file system: no process can write here, so there is nothing to guard
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InUseError(f"{folder} is in use by another process (it holds {name}); "
                             "wait for it to finish, or stop it") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _folder_mutex(folder: Path) -> Iterator[None]:
    """Wait for exclusive use of ``folder`` (a blocking ``flock`` on the folder itself) for a short
    read-modify-write of a file in it; a no-op where folders cannot be locked."""
    try:
        import fcntl
        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


# --------------------------------------------------------------------------- one run


def check_free_folder(folder: Path, *, kind: str) -> None:
    """Raise :class:`RunDirectoryError` when ``folder`` holds files but not its own ``kind``'s
    (``"run"``: a ``config.json``; ``"comparison"``: a ``comparison.json``), naming what it is
    instead: another's files would mix with the new one's, and each would replace the
    other's report. Its lock file alone is one of its own starting in another process."""
    marker, lock_file = {"run": (CONFIG_FILE, LOCK_FILE), "comparison": (COMPARISON_FILE, COMPARISON_LOCK_FILE)}[kind]
    if not folder.is_dir() or (folder / marker).is_file():
        return
    names = sorted(p.name for p in folder.iterdir() if p.name != lock_file)
    if not names:
        return
    what = ("a comparison directory" if COMPARISON_FILE in names else
            "a run directory" if CONFIG_FILE in names else f"not a {kind} directory")
    raise RunDirectoryError(f"{folder} exists and is {what} (it holds {first_few(names)}, and no {marker}): "
                            "give a new or empty folder (--out)")


@dataclass(frozen=True)
class RunDirectory:
    """Reads and writes one run's files (see the module docstring)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def rounds_path(self) -> Path:
        """``rounds.jsonl``, or ``rounds.jsonl.xz`` (``.gz``) when the records are kept compressed."""
        return _stored(self.path / ROUNDS_FILE)

    @property
    def summary_path(self) -> Path:
        """``summary.json``, or ``summary.json.xz`` (``.gz``) when it is kept compressed."""
        return _stored(self.path / SUMMARY_FILE)

    def exists(self) -> bool:
        return self.config_path.is_file()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the run for writing: while one process runs, resumes or compacts it, another
        that tries is refused with :class:`RunDirectoryError` instead of interleaving its
        records (an advisory ``flock`` on ``run.lock``, released when the process ends, however
        it ends; a no-op where ``fcntl`` is missing)."""
        with _flock(self.path, LOCK_FILE):
            yield

    def is_finished(self) -> bool:
        """Whether the run ended: its summary is written and readable. A summary that is not
        valid JSON (cut short by a full disk or an editor) counts as unwritten, so resuming the
        run writes it again from the rounds it summarises."""
        try:
            return self.read_summary() is not None
        except RunDirectoryError:
            return False

    # ----------------------------------------------------------------- config

    def read_config(self) -> LoopConfig:
        """The stored config.

        Raises:
            RunDirectoryError: ``config.json`` is missing or not a valid config, or its settings
                were edited after they were written (they no longer match their fingerprint):
                the rounds were computed with other settings, and going on would mix two experiments.
        """
        if not self.config_path.is_file():
            raise RunDirectoryError(f"{self.path} is not a run directory: {CONFIG_FILE} is missing")
        try:
            data = json.loads(_read_text(self.config_path))
            if not isinstance(data, dict):
                raise TypeError(f"expected a JSON object, got {_json_kind(data)}")
            fingerprint = data.pop(FINGERPRINT_KEY, None)  # configs written before it existed have none
            config = LoopConfig.from_stored(data)
        except (json.JSONDecodeError, TypeError, ValueError) as error:
            raise RunDirectoryError(f"{self.config_path} is not a valid config: {error}") from None
        if fingerprint is not None and fingerprint != settings_fingerprint(data):
            raise RunDirectoryError(
                f"{self.config_path} was edited after the run started: its settings no longer match the "
                f"fingerprint written with them ({FINGERPRINT_KEY}), so its rounds were computed with other "
                "settings. Put the file back as it was; to change a setting, start a new run in another "
                "folder (--out); to go on to a larger budget, `activebayes resume DIR --budget N`. Runtime "
                f"settings ({', '.join(RUNTIME_FIELDS)}) may be edited.")
        return config

    def write_config(self, config: LoopConfig) -> None:
        """Store ``config`` with its defaults written out (:meth:`LoopConfig.pinned`, and each
        stopping criterion's threshold, :func:`~activebayes.stopping.explicit_stop_when`) and the
        fingerprint of its settings (:func:`settings_fingerprint`)."""
        ensure_folder(self.path)
        data = config.pinned().to_dict()
        data["stop_when"] = list(explicit_stop_when(config.stop_when))
        atomic_write_text(self.config_path, _json_text({**data, FINGERPRINT_KEY: settings_fingerprint(data)}))

    def check_config(self, config: LoopConfig) -> None:
        """Raise unless the stored config computes the same run as ``config``."""
        stored = self.read_config()
        if not stored.same_run(config):
            differences = stored.differences(config)
            values = config_differences(stored, config)
            if differences == ["budget"] and config.budget > stored.budget:
                why_not = self.larger_budget_refusal(stored)
                if why_not is None:
                    advice = (f"`activebayes resume {self.path} --budget {config.budget}` (from Python: "
                              f"resume_experiment(path, budget={config.budget})) continues it to the larger budget; "
                              "or choose another folder (--out)")
                else:
                    advice = f"it cannot go on to a larger budget ({why_not}): choose another folder (--out)"
            else:  # `resume` would continue the stored config, not this one
                advice = "choose another folder (--out) for this config, or delete the directory to start again"
            raise RunDirectoryError(
                f"{self.path} already holds a run with a different config ({values}); {advice}"
            )

    # ----------------------------------------------------------------- items

    @property
    def items_path(self) -> Path:
        return self.path / ITEMS_FILE

    def write_items(self, pool_ids: Sequence[str], test_ids: Sequence[str] | None, *,
                    labels: Mapping[str, Any] | None = None, classes: Sequence[str] | None = None,
                    content: Mapping[str, str] | None = None) -> None:
        """Store the id of each pool position (``rounds.jsonl``'s ``acquired`` index it) and of
        each test item, so that the records name their items and a resume can check them;
        ``labels``: item id -> known label (a class id, or a multi-label 0/1 list), checked too;
        ``classes``: the class names the label ids stand for (the report names classes with them);
        ``content``: item id -> the SHA-256 of its input cells, checked too (a row edited under its id)."""
        data: dict[str, Any] = {"pool": list(pool_ids), "test": None if test_ids is None else list(test_ids)}
        if labels is not None:
            data["labels"] = dict(labels)
        if content is not None:
            data["content"] = dict(content)
        if classes is not None:
            data["classes"] = [str(c) for c in classes]
        atomic_write_text(self.items_path, json.dumps(data) + "\n")

    def read_items(self) -> dict[str, list[str] | None] | None:
        """The stored ids (``{"pool": [...], "test": [...] or None}``), or ``None`` without ``items.json``."""
        if not self.items_path.is_file():
            return None
        try:
            data = json.loads(self.items_path.read_text())
            if not isinstance(data, dict) or not isinstance(data.get("pool"), list):
                raise ValueError("expected an object with a 'pool' list")
        except (json.JSONDecodeError, ValueError) as error:
            raise RunDirectoryError(f"{self.items_path} is not a valid items file: {error}") from None
        return data

    def check_items(self, source: str, pool_ids: Sequence[str], test_ids: Sequence[str] | None, *,
                    labels: Mapping[str, Any] | None = None, content: Mapping[str, str] | None = None) -> None:
        """Raise :class:`RunDirectoryError` unless the run's stored items are ``pool_ids`` /
        ``test_ids`` (and, where both are known, their ``labels`` and ``content`` hashes the stored
        ones): a run's pool is fixed when it starts, and its records name pool positions."""
        stored = self.read_items()
        for key, now, change, fixed in (
                ("content", content, "the text or feature cells of {} row(s) were edited under the same id", "pool is"),
                ("labels", labels, "the label of {} row(s) changed", "labels are")):
            before = None if stored is None else stored.get(key)
            if now is None or not isinstance(before, dict):
                continue
            changed = [item for item, value in before.items() if item in now and now[item] != value]
            if changed:
                raise RunDirectoryError(
                    f"{source} changed since the run in {self.path} started ({change.format(len(changed))}: "
                    f"{first_few(changed)}); a run's {fixed} fixed when it starts: restore the file, or start a new "
                    "run with another --out")
        if stored is None:
            if self.rounds_path.is_file():
                raise RunDirectoryError(
                    f"{self.path} was started by an earlier activebayes that recorded the rows of {source} by "
                    f"their position in the file, without {ITEMS_FILE}; it cannot be resumed safely: start a new run")
            return
        before = [*stored["pool"], *(stored.get("test") or [])]
        now = [*pool_ids, *(test_ids or [])]
        if before == now:
            return
        before_set, now_set = set(before), set(now)
        added = [i for i in now if i not in before_set]
        gone = [i for i in before if i not in now_set]

        change = "; ".join(part for part in (
            f"{len(added)} new row(s): {first_few(added)}" if added else "",
            f"{len(gone)} row(s) gone: {first_few(gone)}" if gone else "") if part) or "the same rows, split differently"
        raise RunDirectoryError(
            f"{source} changed since the run in {self.path} started ({change}); a run's pool is fixed when it "
            "starts (reordered rows are fine): restore the file, or start a new run with another --out")

    # ----------------------------------------------------------------- what Python gave

    def write_given(self, given: Mapping[str, str]) -> None:
        """Store what the loop was given beyond its config (``{"model_factory": "mynet.MyNet", ...}``)."""
        atomic_write_text(self.path / GIVEN_FILE, _json_text(dict(given)))

    def read_given(self) -> dict[str, str]:
        """What the run was given beyond its config (``{}`` when nothing, or for earlier runs)."""
        path = self.path / GIVEN_FILE
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
            if not isinstance(data, dict):
                raise ValueError("expected an object")
        except (json.JSONDecodeError, ValueError) as error:
            raise RunDirectoryError(f"{path} is not valid: {error}") from None
        return {str(k): str(v) for k, v in data.items()}

    def raise_budget(self, budget: int) -> None:
        """Let the run go on to a larger label ``budget`` (``activebayes resume DIR --budget N``).

        The rounds kept are exactly the first rounds of a run started with ``budget``:
        the round that stopped the run at the old budget is dropped (the next resume
        fits and evaluates it again, then acquires), and the run must not have cut a
        batch short to meet the old budget (:meth:`check_budget_raise`). Each step leaves a
        directory that resumes consistently, so an interrupted call can simply be repeated.
        """
        raised = self.check_budget_raise(budget)
        if raised is None:
            return
        records, _ = self._rounds_to_go_on(self.read_config())
        if raised.warm_start and records:  # the resume goes on from it: missing, it would fail after the change
            self.warm_start_state(records[-1].round)
        self.summary_path.unlink(missing_ok=True)
        self.write_rounds(with_budget_signals(records, raised))
        self.write_config(raised)

    def check_budget_raise(self, budget: int) -> LoopConfig | None:
        """The config of this run raised to ``budget`` (``None``: it has that budget already), or
        the error :meth:`raise_budget` would give, with nothing written: a smaller budget, or a
        run that cannot go on (:meth:`larger_budget_refusal`)."""
        config = self.read_config()
        budget = check_positive_int(budget, "budget")
        if budget == config.budget:
            return None
        if budget < config.budget:
            raise InvalidArgumentError(
                f"budget must be larger than the run's budget ({config.budget}) to continue it, got {budget}"
            )
        raised = config.replace(budget=budget)  # validates against the other settings
        why_not = self.larger_budget_refusal(config)
        if why_not is not None:
            raise RunDirectoryError(f"{self.path} cannot continue to budget {budget}: {why_not}; start a new run")
        return raised

    def larger_budget_refusal(self, config: LoopConfig | None = None) -> str | None:
        """Why this run cannot go on to a larger label budget, in words; ``None`` when it can.

        Only a run that its label budget stopped (or that has not stopped) can: one stopped by a
        ``stop_when`` criterion, a target accuracy, a plateau, its cost budget or an empty pool
        cannot, nor one whose last batch was cut short to meet its budget."""
        return self._rounds_to_go_on(config if config is not None else self.read_config())[1]

    def _rounds_to_go_on(self, config: LoopConfig) -> tuple[list[RoundRecord], str | None]:
        """The rounds a run to a larger budget keeps (the last one, which stopped the run at
        its budget, dropped), or why the run cannot go on (its batch cut short, another stop)."""
        records = self.read_rounds()
        last = records[-1] if records else None
        if last is not None and last.stop_reason is not None:
            if stop_kind_of(last) != LABEL_BUDGET:
                return records, f"it stopped for another reason than its label budget ({last.stop_reason})"
            records = records[:-1]
        cut = [r for r in records if r.acquired and r.n_labelled + config.batch_size > config.budget]
        if cut:
            return records, (f"round {cut[-1].round} acquired {len(cut[-1].acquired)} instead of batch_size "
                             f"({config.batch_size}) to meet its budget ({config.budget}), where a run to a larger "
                             "budget acquires a full batch")
        return records, None

    # ----------------------------------------------------------------- rounds

    def read_rounds(self) -> list[RoundRecord]:
        """The finished rounds' records, each line checked (:func:`check_round_record`).

        Raises:
            RunDirectoryError: naming ``FILE:LINE`` when a line is not a valid round record.
        """
        if not self.rounds_path.is_file():
            return []
        records: list[RoundRecord] = []
        lines = _read_text(self.rounds_path).splitlines()
        last = max((i for i, line in enumerate(lines, start=1) if line.strip()), default=0)
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                check_round_record(data, records[-1] if records else None, expected_round=len(records))
                records.append(RoundRecord.from_dict(data))
            except (json.JSONDecodeError, TypeError, ValueError, AttributeError) as error:
                hint = ""
                if number == last and not self.rounds_path.name.endswith(_COMPRESSED_FORMS):
                    hint = ("; it is the last line: delete that line and resume the run, which computes "
                            "that round again")
                raise RunDirectoryError(f"{self.rounds_path}:{number} is not a valid round record: "
                                        f"{error}{hint}") from None
        return records

    def write_rounds(self, records: Sequence[RoundRecord]) -> None:
        text = "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in records)
        _write_text(self.rounds_path, text)  # in the form it is kept in (compressed or not)

    def compress(self) -> bool:
        """Keep ``rounds.jsonl`` and ``summary.json`` xz-compressed from now on (the same text).

        Plain files and the ``.gz`` form of earlier versions are rewritten as ``.xz``.
        Returns whether a file was rewritten. Reading, resuming and reporting work on
        every form; the committed benchmark results are kept compressed.
        """
        changed = False
        for name in (ROUNDS_FILE, SUMMARY_FILE):
            stored = _stored(self.path / name)
            if stored.is_file() and not stored.name.endswith(COMPRESSED):
                _write_text(self.path / (name + COMPRESSED), _read_text(stored))
                stored.unlink()  # after the .xz copy is in place: a crash leaves two forms of the same text
                changed = True
        return changed

    # ----------------------------------------------------------------- checkpoints

    def checkpoint_path(self, round_index: int) -> Path:
        return self.path / CHECKPOINT_DIR / f"round_{round_index:04d}.pt"

    def write_checkpoint(self, round_index: int, model: torch.nn.Module) -> None:
        path = self.checkpoint_path(round_index)
        ensure_folder(path.parent)
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        atomic_write_bytes(path, buffer.getvalue())
        for old in sorted(path.parent.glob("round_*.pt"))[:-KEEP_CHECKPOINTS]:
            old.unlink(missing_ok=True)

    def read_checkpoint(self, round_index: int) -> dict[str, Any] | None:
        """Round ``round_index``'s model state, ``None`` without a checkpoint; an unreadable one is a
        :class:`RunDirectoryError` naming the file."""
        path = self.checkpoint_path(round_index)
        if not path.is_file():
            return None
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises its own types (and pickle's) for a damaged file
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise RunDirectoryError(f"{path}: not a readable checkpoint ({first}); the file is damaged: put back "
                                    "a copy, or start a new run") from None

    def warm_start_state(self, round_index: int) -> dict[str, Any]:
        """The checkpoint a warm-start run goes on from, or :class:`RunDirectoryError` (missing, or
        unreadable) before anything is changed."""
        state = self.read_checkpoint(round_index)
        if state is None:
            raise RunDirectoryError(f"{self.path}: warm-start run has no checkpoint for round {round_index} "
                                    f"({self.checkpoint_path(round_index).name}), which it goes on from; put it "
                                    "back, or start a new run")
        return state

    # ----------------------------------------------------------------- summary

    def write_summary(self, result: LoopResult) -> None:
        labels, accuracy = result.learning_curve
        summary = {
            "stop_reason": result.stop_reason,
            "rounds": len(result.rounds),
            "n_labelled": labels[-1] if labels else 0,
            "metric": result.metric,
            "final_metrics": result.rounds[-1].metrics if result.rounds else {},
            "learning_curve": {"n_labelled": labels, "accuracy": accuracy},
            "labelled_indices": result.labelled_indices,
            "seconds": sum(sum(r.seconds.values()) for r in result.rounds),
        }
        # in the form of the records beside it; never two forms, which could disagree
        rounds = self.rounds_path
        suffix = next((s for s in _COMPRESSED_FORMS if rounds.name.endswith(s)), "")
        target = self.path / (SUMMARY_FILE + suffix)
        _write_text(target, _json_text(summary))
        for other in (SUMMARY_FILE, *(SUMMARY_FILE + s for s in _COMPRESSED_FORMS)):
            if other != target.name:
                (self.path / other).unlink(missing_ok=True)

    def read_summary(self) -> dict[str, Any] | None:
        """What :meth:`write_summary` wrote (compressed or not), or ``None`` before the run ends."""
        if not self.summary_path.is_file():
            return None
        try:
            return json.loads(_read_text(self.summary_path))
        except json.JSONDecodeError as error:
            raise RunDirectoryError(f"{self.summary_path} is not valid JSON: {error}") from None



# --------------------------------------------------------------------------- round records

_NUMBER = (int, float)
#: optional fields of a stored round record (absent or null in records of earlier versions) -> JSON type
_OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {
    "acquired": (list,), "scores": (list,), "labels": (list,), "metrics": (dict,), "class_counts": (list,),
    "cost_spent": _NUMBER, "fit": (dict,), "seconds": (dict,), "stop_reason": (str,), "strategy": (str,),
    "stop_kind": (str,), "signals": (dict,),
}
_JSON_NAMES = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "an object",
               bool: "a boolean", type(None): "null"}


def _json_kind(value: Any) -> str:
    return _JSON_NAMES.get(type(value), type(value).__name__)


def _expected(types: tuple[type, ...]) -> str:
    return "a number" if types == _NUMBER else _JSON_NAMES[types[0]]


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def _check_type(name: str, value: Any, types: tuple[type, ...]) -> None:
    if not _is(value, types):
        raise ValueError(f"{name} must be {_expected(types)}, got {value!r} ({_json_kind(value)})")


def _check_numbers(name: str, values: dict[str, Any] | list[Any]) -> None:
    items = values.items() if isinstance(values, dict) else enumerate(values)
    for key, value in items:
        _check_type(f"{name}[{key!r}]", value, _NUMBER)


def check_round_record(data: Any, previous: RoundRecord | None = None, *, expected_round: int = 0) -> None:
    """Raise ``ValueError`` (the message says which field, what was expected and what came) unless
    ``data``, one line of ``rounds.jsonl``, is a round record the report and a resume can read.

    ``round`` must be ``expected_round`` and ``n_labelled`` a count no smaller than the
    ``previous`` round's; the other fields have their JSON types when present (records of
    earlier versions lack some), the headline metrics are numbers in ``[0, 1]``, and
    ``class_counts`` has as many classes as the previous round's.
    """
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {_json_kind(data)}")
    for name in ("round", "n_labelled"):
        if name not in data:
            raise ValueError(f"{name} is missing")
        _check_type(name, data[name], (int,))
    if data["round"] != expected_round:
        raise ValueError(f"round {data['round']} found where round {expected_round} was expected")
    if data["n_labelled"] < (previous.n_labelled if previous is not None else 0):
        raise ValueError(f"n_labelled must be a count >= the previous round's "
                         f"({previous.n_labelled if previous else 0}), got {data['n_labelled']}")
    for name, types in _OPTIONAL_FIELDS.items():
        if data.get(name) is not None:
            _check_type(name, data[name], types)
    for name in ("scores", "class_counts", "seconds"):
        _check_numbers(name, data.get(name) or [])
    _check_items(data.get("acquired"), data.get("labels"))
    _check_headline(data.get("metrics") or {})
    counts, before = data.get("class_counts"), previous.class_counts if previous is not None else None
    if counts is not None and before is not None and len(counts) != len(before):
        raise ValueError(f"class_counts must have {len(before)} classes as in the previous round, got {counts!r}")


def _check_items(acquired: list[Any] | None, labels: list[Any] | None) -> None:
    """``acquired``: distinct item indices (integers >= 0); ``labels``: one per acquired item,
    a class id (integer >= 0) or a multi-label 0/1 vector."""
    seen: set[int] = set()
    for i, index in enumerate(acquired or []):
        if not _is(index, (int,)) or index < 0:
            raise ValueError(f"acquired[{i}] must be an item index (an integer >= 0), got {index!r}")
        if index in seen:
            raise ValueError(f"acquired[{i}] repeats item {index}, acquired earlier in the same round")
        seen.add(index)
    if labels is None:
        return
    if acquired is not None and len(labels) != len(acquired):
        raise ValueError(f"labels must have one entry per acquired item ({len(acquired)}), got {len(labels)}")
    for i, label in enumerate(labels):
        if isinstance(label, list):
            if not label or not all(_is(bit, (int,)) and bit in (0, 1) for bit in label):
                raise ValueError(f"labels[{i}] must be a class id or a multi-label 0/1 vector, got {label!r}")
        elif not _is(label, (int,)) or label < 0:
            raise ValueError(f"labels[{i}] must be a class id (an integer >= 0), got {label!r}")


def _check_headline(metrics: dict[str, Any]) -> None:
    for name in HEADLINE_METRICS:
        value = metrics.get(name)
        if value is None:
            continue
        _check_type(f"metrics[{name!r}]", value, _NUMBER)
        if not 0.0 <= value <= 1.0:  # also false for nan
            raise ValueError(f"metrics[{name!r}] must be a number in [0, 1], got {value!r}")


# --------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Comparison:
    """Several strategies x seeds of one base config, each in its own run directory."""

    path: Path
    base: LoopConfig
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]

    def run_dir(self, strategy: str, seed: int) -> Path:
        return Path(self.path) / strategy / f"seed_{seed}"

    def configs(self) -> Iterable[tuple[Path, LoopConfig]]:
        for strategy in self.strategies:
            for seed in self.seeds:
                yield self.run_dir(strategy, seed), self.base.replace(strategy=strategy, seed=seed)

    def missing_runs(self) -> list[tuple[str, int]]:
        """The ``(strategy, seed)`` runs listed here whose directory holds no run (yet)."""
        return [(strategy, seed) for strategy in self.strategies for seed in self.seeds
                if not RunDirectory(self.run_dir(strategy, seed)).exists()]

    @contextlib.contextmanager
    def lock(self, *, shared: bool = False) -> Iterator[None]:
        """Hold the comparison: ``shared`` while its runs are run or resumed (several processes
        may), exclusive while its settings change (``resume COMPARISON --budget N``); a process
        that cannot get it is refused with "PATH is in use by another process"
        (:class:`RunDirectoryError`). An advisory ``flock`` on ``comparison.lock``."""
        path = Path(self.path)
        ensure_folder(path)
        with _flock(path, COMPARISON_LOCK_FILE, shared=shared):
            yield

    def withdraw_if_empty(self, *, remove_folder: bool) -> bool:
        """Remove ``comparison.json`` and ``comparison.lock`` when no run of the comparison was
        started (no run folder in it) and no other process holds it; the folder too, when
        ``remove_folder`` and it is then empty. For a new comparison whose first run failed
        before writing anything (data that does not load): the same command, corrected, then
        starts afresh instead of meeting a comparison with the wrong settings. Whether it was removed."""
        path = Path(self.path)
        if not path.is_dir():
            return False
        try:
            with self.lock():  # exclusive: no other process has joined it
                if any(child.is_dir() for child in path.iterdir()):
                    return False
                (path / COMPARISON_FILE).unlink(missing_ok=True)
                (path / COMPARISON_LOCK_FILE).unlink(missing_ok=True)
        except InUseError:
            return False
        if remove_folder:
            with contextlib.suppress(OSError):
                path.rmdir()
        return True

    @contextlib.contextmanager
    def updating(self) -> Iterator[None]:
        """Wait for the other writers of ``comparison.json`` (a short lock on the folder): hold it
        around reading, merging and writing the file so that no writer's strategies are lost."""
        path = Path(self.path)
        ensure_folder(path)
        with _folder_mutex(path):
            yield

    def write(self) -> None:
        path = Path(self.path)
        ensure_folder(path)
        data = {
            "base": self.base.to_dict(),
            "strategies": list(self.strategies),
            "seeds": list(self.seeds),
            "runs": [str(p.relative_to(path)) for p, _ in self.configs()],
        }
        atomic_write_text(path / COMPARISON_FILE, _json_text(data))

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Comparison:
        path = Path(path)
        file = path / COMPARISON_FILE
        if not file.is_file():
            raise RunDirectoryError(f"{path} is not a comparison directory: {COMPARISON_FILE} is missing")
        try:
            data = json.loads(file.read_text())
            return cls(path, LoopConfig.from_stored(data["base"]), tuple(data["strategies"]), tuple(data["seeds"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
            raise RunDirectoryError(f"{file} is not a valid comparison file: {error}") from None


def is_comparison(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / COMPARISON_FILE).is_file()


def is_run(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / CONFIG_FILE).is_file()


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The stored configuration of a run or comparison directory, pretty-printed JSON."""
    path = Path(path)
    file = path / (COMPARISON_FILE if is_comparison(path) else CONFIG_FILE)
    try:
        return json.dumps(json.loads(file.read_text()), indent=2, sort_keys=True)
    except (OSError, json.JSONDecodeError) as error:
        raise RunDirectoryError(f"{file} cannot be read: {error}") from None


def load_runs(
    path: str | os.PathLike[str], *, same_config: bool = True
) -> dict[tuple[str, int], tuple[LoopConfig, list[RoundRecord]]]:
    """Every run under ``path`` (a run or a comparison directory): ``(strategy, seed) -> (config, rounds)``.

    A comparison's runs not started yet are left out (:meth:`Comparison.missing_runs` names them).

    Args:
        path: a run directory or a comparison directory.
        same_config: also refuse a comparison's run whose config computes something else than
            ``comparison.json``'s base (another cold start, budget, ...: the check ``resume``
            makes, :func:`config_differences`); ``False`` reads such runs as they are.

    Raises:
        RunDirectoryError: a comparison's folder ``<strategy>/seed_<seed>`` holds the run of
            another strategy or seed (or, with ``same_config``, of another config), or a file
            is not valid (``FILE:LINE`` of a bad round record).
    """
    path = Path(path)
    expected_runs: list[tuple[Path, LoopConfig | None]]
    if is_comparison(path):
        expected_runs = list(Comparison.read(path).configs())
    elif is_run(path):
        expected_runs = [(path, None)]
    else:
        raise RunDirectoryError(
            f"{path} is neither a run directory ({CONFIG_FILE}) nor a comparison ({COMPARISON_FILE})"
        )
    runs: dict[tuple[str, int], tuple[LoopConfig, list[RoundRecord]]] = {}
    for run_dir, expected in expected_runs:
        directory = RunDirectory(run_dir)
        if not directory.exists():
            continue
        config = directory.read_config()
        if expected is not None:
            _check_listed_run(directory, config, expected, same_config=same_config)
        runs[(config.strategy, config.seed)] = (config, directory.read_rounds())
    return runs


def _check_listed_run(directory: RunDirectory, config: LoopConfig, expected: LoopConfig, *,
                      same_config: bool) -> None:
    """Raise unless the run in ``directory`` is the one ``comparison.json`` lists there: its strategy
    and seed, and with ``same_config`` its whole config (the check ``resume`` makes:
    :func:`config_differences`)."""
    if not same_config:  # only where it lies
        expected = config.replace(strategy=expected.strategy, seed=expected.seed)
    differences = config_differences(config, expected, where=f"in its {CONFIG_FILE}",
                                     wanted=f"in {COMPARISON_FILE}")
    if differences:
        raise RunDirectoryError(
            f"{directory.path} does not hold the run {COMPARISON_FILE} lists there ({differences}); "
            "move it out of the comparison, or delete it and resume the comparison"
        )
