"""Real labelling with a person in the loop: a labelling project on the label store and the loop.

A labelling project is a directory::

    PROJECT/
      labels.sqlite       the label store (activebayes.labelstore): the project's settings,
                          its items (path + content hash), every answer, the rounds
      queries/query-0000.csv, ...      the batches written by ``activebayes query``
      queries/thumbnails/              PNG thumbnails of the queried items
      exports/                         files written by ``export`` / the app

Every way of labelling goes through the same two calls of the loop,
:meth:`~activebayes.loop.ActiveLearningLoop.propose` and
:meth:`~activebayes.loop.ActiveLearningLoop.commit`, here :meth:`LabellingProject.advance`:
the labels given since the last round (in the order they were given) are committed
to the current round's proposal, and the next round is proposed; the round's record
and the next proposal are stored in one transaction. The file round trip
(:meth:`LabellingProject.query` / :meth:`LabellingProject.import_answers`) and the
labelling app (:mod:`activebayes.app`) both call it, so for the same labels and seed
they pick the same items as a simulated loop (:meth:`~activebayes.loop.ActiveLearningLoop.step`).

Items are identified by path and content hash, never by position (see
:mod:`activebayes.labelstore`): when the project is opened the image folder is
rescanned, and images added, removed, changed or moved are reported in
:attr:`LabellingProject.changes`; labels stay with their images. The loop itself
works on dataset positions, so every open builds the map between positions and item
ids afresh, and rebuilds the loop from the stored rounds (:meth:`LabellingProject.build_loop`:
the same rounds, each committed item with its current label, items that are gone
left out), which replays the project exactly when nothing changed.

Creating a project is all-or-nothing: it is built in a temporary folder next to
``PROJECT`` (settings checked, images listed, hashed and decoded) and renamed into
place only when all of that worked. The image folder is stored as an absolute path.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import secrets
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from activebayes._io import atomic_write_text
from activebayes._validation import check_choice, check_positive_int
from activebayes.acquisition import available_strategies
from activebayes.data import ArrayDataset, DataError, available_datasets, image_folder, load_dataset
from activebayes.data.image_folder import check_image, confined_file, list_images
from activebayes.errors import ActiveBayesError, MissingFileError
from activebayes.labelstore import (
    ItemChanges,
    ItemFile,
    LabelStore,
    export_text,
    file_sha256,
    label_studio_tasks,
    read_label_studio,
)
from activebayes.loop import ActiveLearningLoop
from activebayes.models import available_models
from activebayes.oracles.files import AnswerFileError, AnswerProblem, read_answers, write_query
from activebayes.records import DEFAULT_STRATEGY, LoopConfig, Proposal, RoundRecord

__all__ = [
    "STORE_FILE",
    "ImportResult",
    "LabellingProject",
    "LabelsPendingError",
    "ProjectConfig",
    "ProjectError",
    "QueryResult",
    "is_project",
    "scan_dataset",
    "scan_folder",
]

STORE_FILE = "labels.sqlite"
QUERY_DIR = "queries"
EXPORT_DIR = "exports"


class ProjectError(ActiveBayesError, ValueError):
    """A labelling project cannot be created or opened as asked."""


class LabelsPendingError(ProjectError):
    """The current query still has items without a label."""


def is_project(directory: str | os.PathLike[str]) -> bool:
    return (Path(directory) / STORE_FILE).is_file()


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class ProjectConfig:
    """What a labelling project labels and how it picks the items.

    Exactly one of ``images`` (a folder; stored absolute, ``classes`` required) and
    ``dataset`` (a built-in dataset name, its labels ignored). The loop settings
    (``strategy``, ``cold_start``, ``model``, ``batch_size``, ``num_samples``, ``eval_samples``,
    ``seed``, ``fit_options``) mean what they mean in :class:`~activebayes.records.LoopConfig`
    (the cold start runs until its default label count, 6 per class);
    the project starts with no labels (the first round picks at random) and holds
    nothing out (``validation_size=0``). ``lookahead``: how far the app's ranking
    reaches beyond each batch (the items served while the next model trains);
    ``lease_seconds``: how long an item stays reserved for the annotator it was
    given to.
    """

    dataset: str | None = None
    images: str | None = None
    classes: tuple[str, ...] | None = None
    data_dir: str | None = None
    strategy: str = DEFAULT_STRATEGY
    cold_start: str | None = "typicality"
    model: str = "auto"
    batch_size: int = 10
    num_samples: int = 100
    eval_samples: int = 20
    seed: int = 0
    fit_options: Mapping[str, Any] = field(default_factory=dict)
    lookahead: int = 100
    lease_seconds: float = 300.0
    #: the loop's ``audit_fraction`` and ``stop_when`` (:mod:`activebayes.stopping`)
    audit_fraction: float = 0.0
    stop_when: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.dataset is None) == (self.images is None):
            raise ProjectError("a labelling project needs exactly one of --dataset NAME or --images FOLDER")
        if self.images is not None:
            if not self.classes:
                raise ProjectError("--classes is required with --images: the class names a labeller may use")
            object.__setattr__(self, "images", str(Path(self.images).expanduser().absolute()))
        if self.dataset is not None:
            check_choice(self.dataset, "dataset", available_datasets())
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", str(Path(self.data_dir).expanduser().absolute()))
        check_choice(self.strategy, "strategy", available_strategies())
        if self.cold_start == "none":
            object.__setattr__(self, "cold_start", None)
        if self.cold_start is not None:
            check_choice(self.cold_start, "cold_start", available_strategies())
        check_choice(self.model, "model", list(dict.fromkeys(["auto", *available_models()])))
        for name in ("batch_size", "num_samples", "eval_samples"):
            check_positive_int(getattr(self, name), name)
        check_positive_int(self.seed, "seed", allow_zero=True)
        check_positive_int(self.lookahead, "lookahead", allow_zero=True)
        if not isinstance(self.lease_seconds, int | float) or not self.lease_seconds > 0:
            raise ProjectError(f"lease_seconds must be > 0, got {self.lease_seconds!r}")
        if self.classes is not None:
            classes = tuple(str(c).strip() for c in self.classes)
            if len(classes) < 2 or len(set(classes)) != len(classes) or not all(classes):
                raise ProjectError(f"classes must be two or more distinct names, got {list(classes)}")
            object.__setattr__(self, "classes", classes)
        if not isinstance(self.fit_options, Mapping):
            raise ProjectError(f"fit_options must be a mapping, got {type(self.fit_options).__name__}")
        object.__setattr__(self, "fit_options", dict(self.fit_options))
        object.__setattr__(self, "stop_when", tuple(self.stop_when))
        LoopConfig(audit_fraction=self.audit_fraction, stop_when=self.stop_when)  # the loop's own checks

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["classes"] = list(self.classes) if self.classes is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProjectConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ProjectError(f"unknown project setting(s) {', '.join(unknown)}")
        values = dict(data)
        values.setdefault("cold_start", None)  # projects made before the cold start existed had none
        if values.get("classes") is not None:
            values["classes"] = tuple(values["classes"])
        return cls(**values)

    def loop_config(self, n_items: int, *, name: str, evaluate_test: bool) -> LoopConfig:
        """The loop's config for a pool of ``n_items`` items (budget: label them all)."""
        return LoopConfig(
            dataset=name,
            strategy=self.strategy,
            cold_start=self.cold_start,
            model=self.model,
            seed=self.seed,
            initial="empty",
            initial_size=0,
            validation_size=0,
            batch_size=min(self.batch_size, n_items),
            budget=n_items,
            num_samples=self.num_samples,
            eval_samples=self.eval_samples,
            evaluate_test=evaluate_test,
            fit_options=self.fit_options,
            checkpoints=False,
            audit_fraction=self.audit_fraction,
            stop_when=self.stop_when,
        )


def _setting_value(name: str, value: Any) -> Any:
    """A setting in the form it is compared in (see :func:`setting_differences`)."""
    if value is None:
        return None
    if name == "classes":
        names = value.split(",") if isinstance(value, str) else value
        return tuple(str(c).strip() for c in names if str(c).strip())
    if name in ("images", "data_dir"):
        return os.path.realpath(Path(str(value)).expanduser())
    if name == "cold_start" and value == "none":
        return None
    return value


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "none" if name == "cold_start" else "(not set)"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def setting_differences(config: ProjectConfig, given: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(flag, stored, given)`` for each setting in ``given`` (command-line names: ``classes``
    as ``"a,b"`` or a sequence, ``max_epochs`` for ``fit_options["max_epochs"]``) that differs
    from the project's ``config``. Paths are compared resolved, class lists name by name."""
    stored_values = config.to_dict()
    stored_values["max_epochs"] = config.fit_options.get("max_epochs")
    differences = []
    for name, value in given.items():
        if value is None:
            continue
        if name not in stored_values:
            raise ProjectError(f"unknown project setting {name!r}")
        stored = _setting_value(name, stored_values[name])
        wanted = _setting_value(name, value)
        if stored != wanted:
            differences.append(("--" + name.replace("_", "-"), _shown(name, stored), _shown(name, wanted)))
    return differences


# --------------------------------------------------------------------------- scanning


def scan_folder(folder: str | os.PathLike[str], *, classes: Sequence[str] | None,
                cache: Mapping[str, tuple[int | None, int | None, str]] | None = None,
                skipped: list[tuple[str, str]] | None = None) -> list[ItemFile]:
    """The readable images of ``folder`` as :class:`~activebayes.labelstore.ItemFile` (key = path
    relative to the folder), in :func:`~activebayes.data.image_folder` order.

    Every file must be a regular file inside the folder (a link out of it is refused) and,
    unless its size and modification time equal ``cache[key]`` (then it keeps its cached
    hash and is not read again), decode within the bounds of
    :func:`~activebayes.data.image_folder.open_image`. Files that fail are left out and
    appended to ``skipped`` as ``(key, reason)``.
    """
    root = Path(folder)
    listing = list_images(root, classes=classes)
    files = []
    for path in listing.files:
        key = path.relative_to(root).as_posix()
        try:
            real = confined_file(root, key)
            stat = real.stat()
            cached = (cache or {}).get(key)
            if cached is not None and cached[0] == stat.st_size and cached[1] == stat.st_mtime_ns:
                sha = cached[2]
            else:
                check_image(real)
                sha = file_sha256(real)
        except (DataError, OSError) as error:
            if skipped is not None:
                skipped.append((key, str(error)))
            continue
        files.append(ItemFile(key, sha, stat.st_size, stat.st_mtime_ns))
    return files


def scan_dataset(dataset: ArrayDataset) -> list[ItemFile]:
    """The items of a built-in dataset: key ``NAME[i]``, hash of the item's float32 input bytes."""
    inputs = dataset.inputs[:]
    array = np.ascontiguousarray(inputs.numpy(), dtype=np.float32)
    return [ItemFile(f"{dataset.name}[{i}]", hashlib.sha256(array[i].tobytes()).hexdigest())
            for i in range(len(array))]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class QueryResult:
    """What :meth:`LabellingProject.query` wrote: the round's file, its items (dataset
    positions and item ids, pick order), their scores, and the strategy used."""

    path: Path
    round: int
    indices: list[int]
    items: list[int]
    scores: list[float]
    strategy: str
    n_labelled: int
    committed: int


@dataclass(frozen=True)
class ImportResult:
    """What :meth:`LabellingProject.import_answers` stored.

    ``new``: labels for items that had none; ``changed``: labels replaced (``overwrite``);
    ``unchanged``: rows equal to the stored label; ``earlier``: rows about items of
    earlier rounds' queries (``{round: count}``), which are accepted like the others."""

    path: Path
    round: int | None
    new: dict[int, int]
    changed: dict[int, int]
    unchanged: int
    earlier: dict[int, int]
    unannotated: int
    n_labelled: int

    @property
    def stored(self) -> int:
        return len(self.new) + len(self.changed)


# --------------------------------------------------------------------------- the project


class LabellingProject:
    """A labelling project directory (see the module docstring).

    Use :meth:`create`, :meth:`open`, or :meth:`open_or_create`. ``changes`` holds what
    the rescan at opening found. The dataset (decoded images) is loaded on first use.
    """

    def __init__(self, directory: Path, store: LabelStore, config: ProjectConfig, changes: ItemChanges,
                 dataset: ArrayDataset | None = None) -> None:
        self.directory = directory
        self.store = store
        self.config = config
        self.changes = changes
        self._dataset = dataset
        self._test: ArrayDataset | None = None
        self._test_loaded = False
        self._ids_N: list[int] | None = None

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(cls, directory: str | os.PathLike[str], config: ProjectConfig, *,
               progress: bool = False) -> LabellingProject:
        """Create a project at ``directory`` (absent or an empty folder), all or nothing."""
        target = Path(directory).expanduser().absolute()
        if is_project(target):
            raise ProjectError(f"{target} already holds a labelling project")
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise ProjectError(f"{target} exists and is not an empty folder; choose a new project directory")
        missing_parents = [p for p in reversed(target.parents) if not p.exists()]
        staging = target.parent / f".{target.name}.creating-{secrets.token_hex(4)}"
        try:
            staging.mkdir(parents=True)
            skipped: list[tuple[str, str]] = []
            dataset, files = cls._load_source(config, progress=progress, skipped=skipped)
            n = len(dataset)
            if n < 2:
                unread = f" ({len(skipped)} file(s) could not be read: {skipped[0][1]})" if skipped else ""
                raise ProjectError(f"{config.images or config.dataset} holds {n} readable item(s){unread}; "
                                   "a project needs at least 2")
            store = LabelStore.create(staging / STORE_FILE, classes=cls._classes(config, dataset),
                                      meta={"project": config.to_dict(), "dataset_name": dataset.name})
            try:
                store.sync_items(files)
            finally:
                store.close()
            if target.exists():
                target.rmdir()  # an empty folder: replaced by the finished project
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            for parent in reversed(missing_parents):
                with contextlib.suppress(OSError):
                    parent.rmdir()
            raise
        store = LabelStore.open(target / STORE_FILE)
        _note_skipped(store, skipped)
        project = cls(target, store, config, ItemChanges(skipped=skipped), dataset)
        project._check_dataset(dataset)
        return project

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, rescan: bool = True,
             settings: Mapping[str, Any] | None = None) -> LabellingProject:
        """Open an existing project; with ``rescan`` compare its image folder with the store.

        ``settings`` (command-line names, see :func:`setting_differences`): the settings a
        command gave; the same as the project's is fine (running the same command again
        continues), any other value raises :class:`ProjectError` naming the setting and
        both values.
        """
        path = Path(directory).expanduser().absolute()
        if not is_project(path):
            raise MissingFileError(
                f"{path} is not a labelling project ({STORE_FILE} is missing); start one with "
                "`activebayes query DIR --images FOLDER --classes a,b` (or `--dataset NAME`) or `activebayes label ...`")
        store = LabelStore.open(path / STORE_FILE)
        try:
            config = ProjectConfig.from_dict(store.meta("project"))
            differ = setting_differences(config, settings or {})
            if differ:
                shown = "; ".join(f"{flag} {old} (this command: {flag} {new})" for flag, old, new in differ)
                flags = " ".join(flag for flag, _, _ in differ)
                raise ProjectError(f"{path} was created with {shown}; a project's settings are fixed: drop "
                                   f"{flags} to continue it, or start a new project directory")
            changes = ItemChanges()
            dataset = None
            if rescan:
                if config.images is not None:
                    skipped: list[tuple[str, str]] = []
                    changes = store.sync_items(scan_folder(config.images, classes=config.classes,
                                                           cache=store.scan_cache(), skipped=skipped))
                    changes.skipped = skipped
                    _note_skipped(store, skipped)
                else:  # a built-in dataset's files could be replaced too: its items are checked by content
                    dataset, _ = cls._load_source(config, progress=False, scan=False)
                    changes = store.sync_items(scan_dataset(dataset))
        except BaseException:
            store.close()
            raise
        return cls(path, store, config, changes, dataset)

    @classmethod
    def open_or_create(cls, directory: str | os.PathLike[str], config: ProjectConfig | None = None, *,
                       progress: bool = False) -> LabellingProject:
        """Open ``directory`` if it is a project (``config``, if given, must match its settings),
        else create it with ``config``."""
        if is_project(directory):
            project = cls.open(directory)
            if config is not None and config != project.config:
                old, new = project.config.to_dict(), config.to_dict()
                differ = [f"{k}: {old.get(k)!r} stored, {v!r} given" for k, v in new.items() if old.get(k) != v]
                project.close()
                raise ProjectError(f"{directory} is an existing project with other settings "
                                   f"({'; '.join(differ)}); its settings are fixed")
            return project
        if config is None:
            raise ProjectError(f"{directory} is not a labelling project yet: give --images FOLDER --classes a,b "
                               "or --dataset NAME to create it")
        return cls.create(directory, config, progress=progress)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> LabellingProject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _classes(config: ProjectConfig, dataset: ArrayDataset) -> tuple[str, ...]:
        return config.classes if config.classes is not None else tuple(dataset.classes)

    @staticmethod
    def _load_source(config: ProjectConfig, *, progress: bool, scan: bool = True,
                     skipped: list[tuple[str, str]] | None = None, keys: Sequence[str] = ()
                     ) -> tuple[ArrayDataset, list[ItemFile]]:
        """The dataset (and with ``scan`` the scanned items). An image folder's dataset holds the
        readable files only: those the scan found (``scan``), else the items ``keys``."""
        if config.images is not None:
            root = Path(config.images)
            files = scan_folder(root, classes=config.classes, skipped=skipped) if scan else []
            readable = {root.joinpath(*Path(key).parts) for key in ([f.key for f in files] if scan else keys)}
            dataset = image_folder(root, classes=config.classes, progress=progress, only=readable)
            return dataset, files
        dataset = load_dataset(config.dataset, data_dir=config.data_dir, split="train")
        return dataset, scan_dataset(dataset) if scan else []

    # ----------------------------------------------------------------- items <-> dataset positions

    @property
    def classes(self) -> tuple[str, ...]:
        return self.store.classes

    @property
    def dataset(self) -> ArrayDataset:
        """The project's items as an :class:`~activebayes.data.ArrayDataset` (positions = the folder listing)."""
        if self._dataset is None:
            self._dataset, _ = self._load_source(self.config, progress=False, scan=False,
                                                 keys=[item.key for item in self.store.items()])
            self._check_dataset(self._dataset)
        elif self._ids_N is None:
            self._check_dataset(self._dataset)
        return self._dataset

    @property
    def test_dataset(self) -> ArrayDataset | None:
        """A built-in dataset's test split (for the learning curve); ``None`` for image folders."""
        if not self._test_loaded:
            self._test_loaded = True
            if self.config.dataset is not None:
                try:
                    self._test = load_dataset(self.config.dataset, data_dir=self.config.data_dir, split="test")
                except (ValueError, FileNotFoundError):
                    self._test = None
        return self._test

    def _keys(self, dataset: ArrayDataset) -> list[str]:
        if self.config.images is not None:
            root = Path(self.config.images)
            files = list_images(root, classes=self.config.classes).files
            present = {item.key for item in self.store.items()}
            return [key for key in (p.relative_to(root).as_posix() for p in files) if key in present]
        return [f"{dataset.name}[{i}]" for i in range(len(dataset))]

    def _check_dataset(self, dataset: ArrayDataset) -> None:
        keys = self._keys(dataset)
        by_key = {item.key: item.id for item in self.store.items()}
        if len(keys) != len(dataset) or any(k not in by_key for k in keys):
            raise ProjectError(f"the items of {self.config.images or self.config.dataset} changed while the "
                               "project was open; open it again")
        if tuple(dataset.classes) != self.classes:
            raise ProjectError(f"the dataset's classes {list(dataset.classes)} differ from the project's "
                               f"{list(self.classes)}")
        self._ids_N = [by_key[k] for k in keys]
        self._index_of = {item: i for i, item in enumerate(self._ids_N)}

    @property
    def item_ids(self) -> list[int]:
        """Item id of each dataset position."""
        _ = self.dataset
        assert self._ids_N is not None
        return self._ids_N

    def index_of(self, item: int) -> int | None:
        """The dataset position of item ``item`` (``None`` if it is not in the folder now)."""
        _ = self.dataset
        return self._index_of.get(item)

    # ----------------------------------------------------------------- the loop

    def build_loop(self) -> ActiveLearningLoop:
        """A loop over the project's items, restored to the stored rounds (current labels)."""
        dataset = self.dataset
        test = self.test_dataset
        config = self.config.loop_config(len(dataset), name=dataset.name, evaluate_test=test is not None)
        loop = ActiveLearningLoop(config, dataset=dataset, test=test)
        loop.restore(self._records())
        return loop

    def _records(self) -> list[RoundRecord]:
        """The stored rounds in dataset positions; each committed item keeps its *current*
        label, items no longer labelled or no longer present are left out."""
        labels = self.store.labels()
        records = []
        for _round, stored, committed in self.store.rounds():
            scores = dict(zip(stored["acquired"], stored["scores"], strict=False))
            keep = [(item, labels[item]) for item, _ in committed
                    if item in labels and self.index_of(item) is not None]
            record = dict(stored)
            record["acquired"] = [self.index_of(item) for item, _ in keep]
            record["labels"] = [label for _, label in keep]
            record["scores"] = [scores.get(item, math.nan) for item, _ in keep]
            records.append(RoundRecord.from_dict(record))
        return records

    def _loop_basis(self) -> dict[int, int]:
        """``position -> label`` a freshly built loop would hold (committed items, current labels)."""
        labels = self.store.labels()
        basis = {}
        for item in self.store.committed():
            index = self.index_of(item)
            if item in labels and index is not None:
                basis[index] = labels[item]
        return basis

    def loop_is_current(self, loop: ActiveLearningLoop) -> bool:
        """Whether ``loop`` still holds the store's committed labels (an undo or an overwrite of a
        committed label, or a changed folder, makes it stale: build it again)."""
        indices = loop.pool.labelled_indices
        held = dict(zip(indices.tolist(), loop.pool.labels_of(indices).tolist(), strict=True)) if len(indices) else {}
        return held == self._loop_basis() and loop.round == self.store.n_rounds()

    def _to_store(self, data: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
        out = dict(data)
        for name in fields:
            out[name] = [self.item_ids[i] for i in data[name]]
        return out

    def stored_proposal(self, round: int) -> Proposal | None:
        """Round ``round``'s stored proposal in dataset positions (items gone dropped), if any."""
        stored = self.store.proposal(round)
        if stored is None:
            return None
        data = dict(stored)
        keep = [k for k, item in enumerate(data["ranking"]) if self.index_of(item) is not None]
        probs = data.get("probs") or []
        data["ranking"] = [self.index_of(data["ranking"][k]) for k in keep]
        data["ranking_scores"] = [data["ranking_scores"][k] for k in keep]
        data["probs"] = [probs[k] for k in keep] if probs else []
        batch = [(self.index_of(i), s) for i, s in zip(data["indices"], data["scores"], strict=True)
                 if self.index_of(i) is not None]
        data["indices"] = [i for i, _ in batch]
        data["scores"] = [s for _, s in batch]
        return Proposal.from_dict(data)

    def pending_labels(self) -> list[tuple[int, int, int]]:
        """``(item, position, label)`` of the labels not yet committed, in the order given."""
        return [(item, self.index_of(item), label) for item, label in self.store.uncommitted().items()
                if self.index_of(item) is not None]

    def advance(self, loop: ActiveLearningLoop | None = None, *, lookahead: int | None = None,
                min_pending: int = 1, on_phase: Callable[[str], None] | None = None
                ) -> tuple[ActiveLearningLoop, Proposal]:
        """Commit the labels given since the last round and propose the next round; store both.

        With fewer than ``min_pending`` new labels nothing is committed and the current
        round's proposal is returned (proposed and stored first if there is none).
        Returns ``(loop, proposal)``; the loop is rebuilt when ``loop`` is stale
        (:meth:`loop_is_current`). ``lookahead`` defaults to the project's.
        ``on_phase("scoring")`` is called when a proposal moves from fitting to
        scoring the pool (the app's status line).
        """
        lookahead = self.config.lookahead if lookahead is None else lookahead
        if loop is None or not self.loop_is_current(loop):
            loop = self.build_loop()
        def to_status(phase: str) -> None:
            if on_phase is not None and phase == "acquire":
                on_phase("scoring")
        r = loop.round
        proposal = loop.pending if loop.pending is not None and loop.pending.round == r else self.stored_proposal(r)
        if proposal is None or proposal.stopped:
            # a stop is not a round of a labelling project (new items may come): never ``finish``ed
            proposal = loop.propose(lookahead=lookahead, on_phase=to_status)
            if proposal.stopped:
                return loop, proposal
            self.store.save_proposal(r, self._to_store(proposal.to_dict(), ("indices", "ranking")))
        pending = self.pending_labels()
        if len(pending) < min_pending or not pending:
            return loop, proposal
        record = loop.commit([i for _, i, _ in pending], [y for _, _, y in pending], proposal=proposal)
        following = loop.propose(lookahead=lookahead, on_phase=to_status)
        stored_next = None if following.stopped else self._to_store(following.to_dict(), ("indices", "ranking"))
        self.store.save_round(r, self._to_store(record.to_dict(), ("acquired",)),
                              [(item, label) for item, _, label in pending], stored_next)
        return loop, following

    # ----------------------------------------------------------------- the file round trip

    def query_path(self, round: int) -> Path:
        return self.directory / QUERY_DIR / f"query-{round:04d}.csv"

    def _queries(self) -> dict[int, list[int]]:
        return {int(r): list(items) for r, items in (self.store.meta("queries") or {}).items()}

    def query(self, *, progress: bool = False) -> QueryResult:
        """Commit the labels imported so far, pick the next batch, write its query file.

        Refuses while the latest query file has items without a label
        (:class:`LabelsPendingError`).
        """
        queries = self._queries()
        loop = self.build_loop()
        r = loop.round
        if r in queries:
            missing = [item for item in queries[r] if self.store.label_of(item) is None
                       and self.index_of(item) is not None]
            if missing:
                raise LabelsPendingError(
                    f"{len(missing)} item(s) of {self.query_path(r)} have no label yet: fill in its label column "
                    f"and run `activebayes import {self.query_path(r)} --project {self.directory}`")
        n_pending = len(self.pending_labels())
        loop, proposal = self.advance(loop, lookahead=0)
        if proposal.stop_reason is not None:
            raise ProjectError(f"nothing left to query: {proposal.stop_reason}")
        labelled = self.store.labels()
        batch = [(i, s) for i, s in zip(proposal.indices, proposal.scores, strict=True)
                 if self.item_ids[i] not in labelled]
        indices = [i for i, _ in batch]
        items = [self.item_ids[i] for i in indices]
        sha = {item.id: item.sha256 for item in self.store.items()}
        dataset = self.dataset
        path = write_query(
            self.query_path(proposal.round), indices=indices, scores=[s for _, s in batch], dataset=dataset,
            round=proposal.round, item_ids=items, sha256=[sha[i] for i in items],
            thumbnails_dir=self.directory / QUERY_DIR / "thumbnails" if len(dataset.input_shape) == 3 else None)
        queries[proposal.round] = items
        self.store.set_meta("queries", {str(k): v for k, v in sorted(queries.items())})
        return QueryResult(path, proposal.round, indices, items, [s for _, s in batch], proposal.strategy,
                           proposal.n_labelled, n_pending)

    def import_answers(self, path: str | os.PathLike[str], *, allow_partial: bool = False,
                       overwrite: bool = False, annotator: str = "file") -> ImportResult:
        """Validate a filled-in file and store its labels (all or nothing).

        ``path``: a query file (CSV / JSON with ``item`` and ``label`` columns; its round
        from the ``round`` column or the ``query-NNNN`` name), or a Label Studio JSON
        export (a list of tasks with ``data`` and ``annotations``). Raises
        :class:`~activebayes.oracles.AnswerFileError` listing every problem, each with
        the option that accepts it where one does (``allow_partial``, ``overwrite``).
        """
        file = Path(path)
        if not file.is_file():
            raise MissingFileError(f"answers file {path} does not exist")
        if _is_label_studio(file):
            return self._import_label_studio(file, overwrite=overwrite, annotator=annotator)
        queries = self._queries()
        if not queries:
            raise ProjectError(f"{self.directory} has no query yet; run `activebayes query {self.directory}` first")
        round_ = _round_of(file)
        if round_ is not None and round_ not in queries:
            raise ProjectError(f"{file} answers round {round_}, but this project has queries for rounds "
                               f"{sorted(queries)}")
        round_ = max(queries) if round_ is None else round_
        expected = queries[round_]
        earlier_of = {item: r for r, items in queries.items() if r != round_ for item in items}
        items = {item.id: item for item in self.store.items(present_only=False)}

        def unknown(item: int) -> str:
            if item not in items:
                return "is not an item of this project"
            return "was never queried (only queried items can be imported)"

        problems: list[AnswerProblem] = []
        answers = read_answers(file, expected_indices=expected, classes=self.classes, allow_partial=allow_partial,
                               key="item", also_allowed=earlier_of, describe_unknown=unknown, problems=problems)
        current = self.store.labels(present_only=False)
        rows = _file_rows(file)
        for item, label in sorted(answers.items()):
            where = f"item {item} ({items[item].key})"
            if not items[item].present:
                newer = [it for it in items.values() if it.present and it.key == items[item].key]
                reason = (f"changed on disk after it was queried (its new content is item {newer[0].id}); "
                          "label it in a later query" if newer else "is no longer in the image folder; drop its row")
                problems.append(AnswerProblem(where, reason))
                continue
            sha = rows.get(item, {}).get("sha256")
            if sha and sha != items[item].sha256:
                problems.append(AnswerProblem(where, "the file's sha256 does not match the stored item"))
                continue
            if item in current and current[item] != label and not overwrite:
                problems.append(AnswerProblem(
                    where, f"is already labelled {self.classes[current[item]]!r}, the file says "
                           f"{self.classes[label]!r}", "overwrite"))
        if problems:
            raise AnswerFileError(file, problems)
        new = {i: y for i, y in answers.items() if i not in current}
        changed = {i: y for i, y in answers.items() if i in current and current[i] != y}
        self.store.answer_many(answers, annotator, source="file")
        earlier: dict[int, int] = {}
        for item in answers:
            if item in earlier_of:
                earlier[earlier_of[item]] = earlier.get(earlier_of[item], 0) + 1
        return ImportResult(file, round_, new, changed, len(answers) - len(new) - len(changed), earlier, 0,
                            len(self.store.labels()))

    def _import_label_studio(self, file: Path, *, overwrite: bool, annotator: str) -> ImportResult:
        found = read_label_studio(file, items=self.store.items(), classes=self.classes)
        problems = [AnswerProblem("", p) for p in found.problems]
        current = self.store.labels()
        for item, label in sorted(found.labels.items()):
            if item in current and current[item] != label and not overwrite:
                key = self.store.item(item).key
                problems.append(AnswerProblem(f"item {item} ({key})", f"is already labelled "
                                              f"{self.classes[current[item]]!r}, the file says {self.classes[label]!r}",
                                              "overwrite"))
        if problems:
            raise AnswerFileError(file, problems)
        new = {i: y for i, y in found.labels.items() if i not in current}
        changed = {i: y for i, y in found.labels.items() if i in current and current[i] != y}
        self.store.answer_many(found.labels, annotator, source="labelstudio")
        return ImportResult(file, None, new, changed, len(found.labels) - len(new) - len(changed), {},
                            found.unannotated, len(self.store.labels()))

    # ----------------------------------------------------------------- export

    def export(self, path: str | os.PathLike[str] | None = None, *, fmt: str = "csv") -> Path:
        """Write every item with its current label: ``fmt`` ``"csv"``, ``"json"`` or
        ``"labelstudio"`` (Label Studio's JSON tasks). Default path ``PROJECT/exports/labels.<ext>``."""
        check_choice(fmt, "fmt", ("csv", "json", "labelstudio"))
        ext = {"csv": "csv", "json": "json", "labelstudio": "json"}[fmt]
        target = Path(path) if path is not None else self.directory / EXPORT_DIR / (
            f"labels.{ext}" if fmt != "labelstudio" else "labelstudio-tasks.json")
        return atomic_write_text(target, self.export_text(fmt))

    def export_text(self, fmt: str) -> str:
        rows = self.store.export_rows(root=self.config.images)
        if fmt == "labelstudio":
            return json.dumps(label_studio_tasks(rows), indent=1) + "\n"
        return export_text(rows, fmt)

    # ----------------------------------------------------------------- summary

    def summary(self) -> dict[str, Any]:
        counts = self.store.counts()
        return {**counts, "rounds": self.store.n_rounds(), "classes": list(self.classes)}


SKIPPED_KEY = "skipped"


def _note_skipped(store: LabelStore, skipped: Sequence[tuple[str, str]]) -> None:
    """Keep the last scan's skipped files (``[key, reason]``) in the store's meta ``"skipped"``,
    for the app's pages (the app itself does not rescan)."""
    value = [[key, reason] for key, reason in skipped]
    if (store.meta(SKIPPED_KEY) or []) != value:
        store.set_meta(SKIPPED_KEY, value)


def _round_of(file: Path) -> int | None:
    """The round a file answers: its ``round`` column (if one value), else ``query-NNNN`` in its name."""
    rows = _file_rows(file)
    rounds = {str(r.get("round", "")).strip() for r in rows.values() if str(r.get("round", "")).strip()}
    if len(rounds) == 1 and next(iter(rounds)).isdigit():
        return int(next(iter(rounds)))
    stem = file.stem
    if stem.startswith("query-") and stem[6:].isdigit():
        return int(stem[6:])
    return None


def _file_rows(file: Path) -> dict[int, dict[str, Any]]:
    """``item -> row`` of a CSV / JSON answers file, best effort (for its round and hashes)."""
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return {}
    rows: list[Mapping[str, Any]] = []
    if file.suffix.lower() == ".json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError:
            return {}
        if isinstance(document, Mapping):
            document = document.get("items", [])
        rows = [r for r in document if isinstance(r, Mapping)] if isinstance(document, list) else []
    else:
        try:
            rows = [{(k or "").strip().lower(): v for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
        except csv.Error:
            return {}
    out = {}
    for row in rows:
        value = str(row.get("item", "")).strip()
        if value.isdigit():
            out[int(value)] = dict(row)
    return out


def _is_label_studio(file: Path) -> bool:
    if file.suffix.lower() != ".json":
        return False
    try:
        document = json.loads(file.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(document, list) and bool(document) and all(
        isinstance(t, Mapping) and isinstance(t.get("data"), Mapping) for t in document)
