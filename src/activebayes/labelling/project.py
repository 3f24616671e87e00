"""A labelling project: the label store and the active learning loop, over one folder of items.

A labelling project is a directory::

    PROJECT/
      labels.sqlite       the label store (activebayes.labelling.store): the project's settings,
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
(:meth:`LabellingProject.query` / :meth:`LabellingProject.import_answers`,
:mod:`activebayes.labelling.roundtrip`) and the
labelling app (:mod:`activebayes.app`) both call it, so for the same labels and seed
they pick the same items as a simulated loop (:meth:`~activebayes.loop.ActiveLearningLoop.step`).

Items are identified by path and content hash, never by position (see
:mod:`activebayes.labelling.items`): when the project is opened the image folder is
rescanned, and images added, removed, changed or moved are reported in
:attr:`LabellingProject.changes`; labels stay with their images. The loop itself
works on dataset positions, so every open builds the map between positions and item
ids afresh (:class:`~activebayes.labelling.items.ItemIndex`), and rebuilds the loop from the stored rounds (:meth:`LabellingProject.build_loop`:
the same rounds, each committed item with its current label, items that are gone
left out), which replays the project exactly when nothing changed.

Creating a project is all-or-nothing: it is built in a temporary folder next to
``PROJECT`` (settings checked, images listed, hashed and decoded) and renamed into
place only when all of that worked. The image folder is stored as an absolute path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import secrets
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from activebayes._io import atomic_write_text, ensure_folder, renamed_error
from activebayes._validation import check_choice
from activebayes.data import ArrayDataset, DataError, MissingSplitError, dataset_contents, image_folder, load_dataset
from activebayes.data.table import ALL_OTHER_COLUMNS, read_table_rows, resolve_feature_columns
from activebayes.errors import MissingFileError
from activebayes.labelling import roundtrip
from activebayes.labelling.interchange import export_text, label_studio_tasks
from activebayes.labelling.items import ItemIndex, TableItems, dataset_keys, scan_dataset, scan_folder, scan_table
from activebayes.labelling.roundtrip import ImportResult, QueryResult
from activebayes.labelling.settings import ProjectConfig, ProjectError, _setting_value, setting_differences
from activebayes.labelling.store import ItemChanges, ItemFile, LabelStore, mask_classes
from activebayes.loop import ActiveLearningLoop
from activebayes.models.networks import check_model_input
from activebayes.records import Proposal, RoundRecord

__all__ = ["EXPORT_DIR", "STORE_FILE", "LabellingProject", "check_new_project_folder", "is_project"]

STORE_FILE = "labels.sqlite"
EXPORT_DIR = "exports"


def is_project(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds a labelling project (its label store)."""
    return (Path(directory) / STORE_FILE).is_file()


# --------------------------------------------------------------------------- the project


def check_new_project_folder(directory: str | os.PathLike[str]) -> None:
    """Refuse to create a project in ``directory`` unless it is absent or an empty folder."""
    target = Path(directory).expanduser().absolute()
    if is_project(target):
        raise ProjectError(f"{target} already holds a labelling project")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ProjectError(f"{target} exists and is not an empty folder; choose a new project directory")


class LabellingProject:
    """A labelling project directory (see the module docstring).

    Use :meth:`create`, :meth:`open`, or :meth:`open_or_create`. ``changes`` holds what
    the rescan at opening found. The dataset (decoded images) is loaded on first use.
    """

    def __init__(self, directory: Path, store: LabelStore, config: ProjectConfig, changes: ItemChanges,
                 dataset: ArrayDataset | None = None, table: TableItems | None = None) -> None:
        self.directory = directory
        self.store = store
        self.config = config
        self.changes = changes
        self._dataset = dataset
        self._table = table
        self._contents: list[dict[str, Any]] | None = None  # a built-in dataset's, loaded on first use
        self._contents_loaded = False
        self._test: ArrayDataset | None = None
        self._test_loaded = False
        self._index: ItemIndex | None = None
        #: where its models train and score (e.g. ``"cuda"``; ``None``: the CPU): a property of the
        #: machine serving the project, not one of its settings, so it is never stored
        self.device: str | None = None

    # ----------------------------------------------------------------- opening

    @classmethod
    def create(cls, directory: str | os.PathLike[str], config: ProjectConfig, *,
               progress: bool = False) -> LabellingProject:
        """Create a project at ``directory`` (absent or an empty folder), all or nothing.

        ``feature_columns=("*",)`` is pinned here to the table's columns but the text and id
        columns, so a column added to the file later does not change every row's identity."""
        target = Path(directory).expanduser().absolute()
        if config.table is not None and tuple(config.feature_columns) == (ALL_OTHER_COLUMNS,):
            columns, _ = read_table_rows(config.table, format=config.table_options.get("format"))
            resolved = tuple(resolve_feature_columns(config.feature_columns, columns,
                                                     exclude=(config.text_column, config.id_column)))
            if not resolved:  # as the loop refuses it: '*' meant columns the file does not have
                raise ProjectError(f"{config.table}: --feature-columns '*' found no column besides the text and id "
                                   f"columns (columns: {', '.join(columns)})")
            config = dataclasses.replace(config, feature_columns=resolved)
        check_new_project_folder(target)
        missing_parents = [p for p in reversed(target.parents) if not p.exists()]
        staging = target.parent / f".{target.name}.creating-{secrets.token_hex(4)}"
        try:
            try:  # a read-only or full disk, a file on the way: name the folder the user gave, not ours
                ensure_folder(target.parent)
                staging.mkdir()
            except OSError as error:
                raise renamed_error(error, staging, target) from None
            skipped: list[tuple[str, str]] = []
            dataset, files, table = cls._load_source(config, staging, progress=progress, skipped=skipped)
            # a built-in dataset of label sets (mnist_pairs) makes a multi-label project, stored so
            config = config.for_dataset(dataset)
            check_model_input(config.model, dataset.input_shape)  # a CNN given table rows: nothing is created
            n = len(dataset)
            if n < 2:
                unread = f" ({len(skipped)} file(s) could not be read: {skipped[0][1]})" if skipped else ""
                raise ProjectError(f"{config.source} holds {n} readable item(s){unread}; "
                                   "a project needs at least 2")
            if config.classes is not None and tuple(config.classes) != tuple(dataset.classes):
                # what opening it would refuse ever after: refused before anything is created
                raise ProjectError(f"--classes {','.join(config.classes)} differ from the classes of "
                                   f"{config.source}, {list(dataset.classes)}: leave --classes out (the dataset "
                                   "names its own), or give exactly those, in that order")
            store = LabelStore.create(staging / STORE_FILE, classes=cls._classes(config, dataset),
                                      meta={"project": config.to_dict(), "dataset_name": dataset.name},
                                      multilabel=config.multilabel)
            try:
                store.sync_items(files)
            finally:
                store.close()
            if target.exists():
                target.rmdir()  # an empty folder: replaced by the finished project
            os.rename(staging, target)
        except BaseException as error:
            shutil.rmtree(staging, ignore_errors=True)
            for parent in reversed(missing_parents):
                with contextlib.suppress(OSError):
                    parent.rmdir()
            if isinstance(error, OSError) and error.filename is not None:  # a file inside the staging
                raise renamed_error(error, staging, target) from None  # folder: named inside target
            raise
        store = LabelStore.open(target / STORE_FILE)
        _note_skipped(store, skipped)
        project = cls(target, store, config, ItemChanges(skipped=skipped), dataset, table)
        project._check_dataset(dataset)
        return project

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, rescan: bool = True,
             settings: Mapping[str, Any] | None = None, read_only: bool = False) -> LabellingProject:
        """Open an existing project; with ``rescan`` compare its image folder with the store.

        ``settings`` (command-line names, see :func:`setting_differences`): the settings a
        command gave; the same as the project's is fine (running the same command again
        continues), any other value raises :class:`ProjectError` naming the setting and
        both values. ``read_only``: open the store for reading only
        (:class:`~activebayes.labelling.store.LabelStore`), as ``export`` does, so a
        project in a read-only folder can be read; no rescan then (it writes).
        """
        path = Path(directory).expanduser().absolute()
        if not is_project(path):
            raise MissingFileError(
                f"{path} is not a labelling project ({STORE_FILE} is missing); start one with "
                "`activebayes label DIR --images FOLDER --classes a,b` (or `--table FILE --text-column COL`, or "
                "`--dataset NAME`; `activebayes query` for the file round trip)")
        store = LabelStore.open(path / STORE_FILE, read_only=read_only)
        rescan = rescan and not read_only
        try:
            config = ProjectConfig.from_dict(store.meta("project"))
            moved_source = _moved_source(config, settings or {})
            if moved_source is not None and not read_only:
                # the folder or table was moved: the new place is stored, its items matched by content below
                config = dataclasses.replace(config, **{moved_source[0]: moved_source[2]})
                store.set_meta("project", config.to_dict())
            differ = setting_differences(config, settings or {})
            if differ:
                shown = "; ".join(f"{flag} {old} (this command: {flag} {new})" for flag, old, new in differ)
                flags = " ".join(flag for flag, _, _ in differ)
                raise ProjectError(f"{path} was created with {shown}; a project's settings are fixed: drop "
                                   f"{flags} to continue it, or start a new project directory")
            changes = ItemChanges()
            dataset = table = None
            if rescan:
                if config.images is not None:
                    skipped: list[tuple[str, str]] = []
                    changes = store.sync_items(scan_folder(config.images, classes=config.classes,
                                                           cache=store.scan_cache(), skipped=skipped))
                    changes.skipped = skipped
                    _note_skipped(store, skipped)
                elif config.table is not None:  # rows added, removed, edited or reordered: matched by id and content
                    dataset, files, table = cls._load_source(config, path, progress=False)
                    changes = store.sync_items(files)
                    changes.noun = "row"
                else:  # a built-in dataset's files could be replaced too: its items are checked by content
                    dataset, _, _ = cls._load_source(config, path, progress=False, scan=False)
                    changes = store.sync_items(scan_dataset(dataset))
            if moved_source is not None and not read_only:
                changes.source_moved = moved_source[1:]
        except BaseException:
            store.close()
            raise
        return cls(path, store, config, changes, dataset, table)

    @classmethod
    def open_or_create(cls, directory: str | os.PathLike[str], config: ProjectConfig | None = None, *,
                       progress: bool = False) -> LabellingProject:
        """Open ``directory`` if it is a project (``config``, if given, must match its settings),
        else create it with ``config``."""
        if is_project(directory):
            project = cls.open(directory)
            if config is not None and config.dataset is not None and project.store.multilabel and not config.multilabel:
                # a multi-label dataset's project stores multilabel, set when it was created (ProjectConfig.for_dataset)
                config = dataclasses.replace(config, table_options={**config.table_options, "multilabel": True})
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
    def _load_source(config: ProjectConfig, directory: Path, *, progress: bool, scan: bool = True,
                     skipped: list[tuple[str, str]] | None = None, keys: Sequence[str] = ()
                     ) -> tuple[ArrayDataset, list[ItemFile], TableItems | None]:
        """The dataset (and with ``scan`` the scanned items), and a table's rows (text features
        cached in ``directory / "cache"``). An image folder's dataset holds the readable files
        only: those the scan found (``scan``), else the items ``keys``."""
        if config.table is not None:
            table = scan_table(config, cache_dir=Path(directory) / "cache")
            return table.dataset, table.files, table
        if config.images is not None:
            root = Path(config.images)
            files = scan_folder(root, classes=config.classes, skipped=skipped) if scan else []
            readable = {root.joinpath(*Path(key).parts) for key in ([f.key for f in files] if scan else keys)}
            dataset = image_folder(root, classes=config.classes, progress=progress, only=readable)
            return dataset, files, None
        dataset = load_dataset(config.dataset, data_dir=config.data_dir, split="train")
        return dataset, scan_dataset(dataset) if scan else [], None

    # ----------------------------------------------------------------- items <-> dataset positions

    @property
    def classes(self) -> tuple[str, ...]:
        return self.store.classes

    @property
    def dataset(self) -> ArrayDataset:
        """The project's items as an :class:`~activebayes.data.ArrayDataset` (positions = the folder listing)."""
        if self._dataset is None:
            keys = [item.key for item in self.store.items()]
            self._dataset, _, self._table = self._load_source(self.config, self.directory, progress=False,
                                                              scan=False, keys=keys)
            self._check_dataset(self._dataset)
        elif self._index is None:
            self._check_dataset(self._dataset)
        return self._dataset

    @property
    def test_dataset(self) -> ArrayDataset | None:
        """A built-in dataset's test split (for the learning curve); ``None`` for image folders
        and for a dataset that has no test split (:class:`~activebayes.data.MissingSplitError`).
        Any other failure to load it (a checksum mismatch, a corrupt file) raises."""
        if not self._test_loaded:
            if self.config.dataset is not None:
                try:
                    self._test = load_dataset(self.config.dataset, data_dir=self.config.data_dir, split="test")
                except MissingSplitError:
                    self._test = None
            self._test_loaded = True
        return self._test

    def _check_dataset(self, dataset: ArrayDataset) -> None:
        items = self.store.items()
        if self._table is not None:
            keys = self._table.keys
        else:
            keys = dataset_keys(dataset, images=self.config.images, classes=self.config.classes,
                                present={item.key for item in items})
        index = ItemIndex.match(keys, items) if len(keys) == len(dataset) else None
        if index is None:
            raise ProjectError(f"the items of {self.config.source} changed while the "
                               "project was open; open it again")
        if tuple(dataset.classes) != self.classes:
            raise ProjectError(f"the dataset's classes {list(dataset.classes)} differ from the project's "
                               f"{list(self.classes)}")
        if dataset.multilabel != self.store.multilabel:  # the loop would refuse every answer's shape
            kinds = ("single-label (one class per item)", "multi-label (sets of classes)")
            raise ProjectError(f"{self.config.source} is {kinds[dataset.multilabel]}, but this project was created "
                               f"{kinds[self.store.multilabel].split(' (')[0]}; its answers cannot train a model of "
                               "these items: start a new project directory")
        self._index = index

    @property
    def item_ids(self) -> list[int]:
        """Item id of each dataset position."""
        _ = self.dataset
        assert self._index is not None
        return self._index.ids

    def index_of(self, item: int) -> int | None:
        """The dataset position of item ``item`` (``None`` if it is not in the folder now)."""
        _ = self.dataset
        assert self._index is not None
        return self._index.index_of(item)

    @property
    def item_kind(self) -> str:
        """What an item is: ``"image"`` (image folders, built-in datasets of pictures), ``"text"``
        or ``"row"`` (a table's rows, a built-in dataset of texts or rows: :func:`~activebayes.data.dataset_contents`)."""
        if self.config.table is not None:
            return "text" if self.config.text_column is not None else "row"
        contents = self._builtin_contents()
        return contents[0]["kind"] if contents else "image"

    def item_content(self, item: int) -> dict[str, Any] | None:
        """An item of texts or rows as the page shows it (:func:`~activebayes.labelling.items.row_content`);
        ``None`` for a picture or an item not in the project's source now."""
        index = self.index_of(item)  # loads the source (a table's rows too) on first use
        if index is None:
            return None
        contents = self._table.contents if self._table is not None else self._builtin_contents()
        return None if contents is None else contents[index]

    def _builtin_contents(self) -> list[dict[str, Any]] | None:
        if self.config.dataset is None:
            return None
        if not self._contents_loaded:
            self._contents = dataset_contents(self.config.dataset, data_dir=self.config.data_dir)
            self._contents_loaded = True
        return self._contents

    # ----------------------------------------------------------------- the loop

    def build_loop(self) -> ActiveLearningLoop:
        """A loop over the project's items, restored to the stored rounds (current labels)."""
        dataset = self.dataset
        test = self.test_dataset
        config = self.config.loop_config(len(dataset), name=dataset.name, evaluate_test=test is not None)
        if self.device is not None:
            config = config.replace(device=self.device)
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
            record["labels"] = [self.loop_label(label) for _, label in keep]
            record["scores"] = [scores.get(item, math.nan) for item, _ in keep]
            records.append(RoundRecord.from_dict(record))
        return records

    def _loop_basis(self) -> dict[int, int | list[int]]:
        """``position -> label`` a freshly built loop would hold (committed items, current labels)."""
        labels = self.store.labels()
        basis = {}
        for item in self.store.committed():
            index = self.index_of(item)
            if item in labels and index is not None:
                basis[index] = self.loop_label(labels[item])
        return basis

    def loop_label(self, label: int) -> int | list[int]:
        """A stored label as the loop takes it: the class id, or for a multi-label project the
        0/1 indicators ``[C]`` of the stored bitmask (:func:`~activebayes.labelling.store.mask_classes`)."""
        if not self.store.multilabel:
            return label
        indicators_C = [0] * len(self.classes)
        for c in mask_classes(label):
            indicators_C[c] = 1
        return indicators_C

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
        # ``audit`` is stored in dataset positions: keep those still ranked with the NaN score of a draw
        drawn = {i for i, s in zip(data["ranking"], data["ranking_scores"], strict=True) if s != s}
        data["audit"] = [i for i in data.get("audit") or [] if i in drawn]
        return Proposal.from_dict(data)

    def earlier_audits(self, round: int, positions: Sequence[int]) -> list[Proposal]:
        """The stored proposals of rounds before ``round`` that drew one of ``positions`` to audit.

        The app serves a round's last items, where the audited ones are, while the next model
        trains, so they are often answered after their round committed: their answers still
        count as audited, against the model that drew them (``earlier`` of
        :meth:`~activebayes.loop.ActiveLearningLoop.commit`)."""
        wanted = set(positions)
        found = []
        for q in range(round):
            stored = self.store.proposal(q)
            if stored is not None and wanted.intersection(stored.get("audit") or ()):
                proposal = self.stored_proposal(q)
                if proposal is not None and wanted.intersection(proposal.audit):
                    found.append(proposal)
        return found

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
        positions = [i for _, i, _ in pending]
        record = loop.commit(positions, [self.loop_label(y) for _, _, y in pending], proposal=proposal,
                             earlier=self.earlier_audits(r, positions))
        following = loop.propose(lookahead=lookahead, on_phase=to_status)
        stored_next = None if following.stopped else self._to_store(following.to_dict(), ("indices", "ranking"))
        self.store.save_round(r, self._to_store(record.to_dict(), ("acquired",)),
                              [(item, label) for item, _, label in pending], stored_next)
        return loop, following

    # ----------------------------------------------------------------- the file round trip

    def query_path(self, round: int) -> Path:
        """Where round ``round``'s query file is written (``PROJECT/queries/query-NNNN.csv``)."""
        return roundtrip.query_path(self, round)

    def query(self, *, progress: bool = False) -> QueryResult:
        """Commit the labels imported so far, pick the next batch, write its query file
        (:func:`activebayes.labelling.roundtrip.query`; ``progress`` is not used).

        Refuses while the latest query file has items without a label
        (:class:`~activebayes.labelling.roundtrip.LabelsPendingError`).
        """
        return roundtrip.query(self)

    def unanswered(self) -> tuple[Path, int] | None:
        """The latest query file and how many of its items have no label yet; ``None`` when all are
        answered (:func:`activebayes.labelling.roundtrip.unanswered`)."""
        return roundtrip.unanswered(self)

    def import_answers(self, path: str | os.PathLike[str], *, allow_partial: bool = False,
                       overwrite: bool = False, annotator: str = "file") -> ImportResult:
        """Validate a filled-in query file or a Label Studio export and store its labels, all or
        nothing (:func:`activebayes.labelling.roundtrip.import_answers`)."""
        return roundtrip.import_answers(self, path, allow_partial=allow_partial, overwrite=overwrite,
                                        annotator=annotator)

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
        """The export ``fmt`` as text (see :meth:`export`); a table project's rows carry the item's
        ``text`` and / or ``fields`` (column -> value), a multi-label one's its ``labels``.

        Every stored label is exported: a labelled item the last scan no longer found (its file or
        row deleted or changed since) is a row with ``present`` false (CSV / JSON; Label Studio's
        tasks leave it out, being items to show), and a warning counts them."""
        rows = self.store.export_rows(root=self.config.images, gone_labelled=True)
        gone = sum(not row["present"] for row in rows)
        if fmt == "labelstudio":
            rows = [row for row in rows if row["present"]]
        if gone:
            where = "rows of the table" if self.config.table is not None else "items of the project"
            kept = ("left out of the Label Studio tasks (export CSV or JSON to keep them)" if fmt == "labelstudio"
                    else "exported with present = false")
            warnings.warn(f"{gone} labelled item(s) are no longer {where} since the last scan (deleted, or their "
                          f"content changed): their labels are {kept}", UserWarning, stacklevel=3)
        if self.item_kind != "image":
            if self.config.table is not None:
                content_of = self._table_contents(rows)
            else:
                content_of = lambda row: self.item_content(row["item"]) if row["present"] else None  # noqa: E731
            rows = [{**row, **self._content_columns(content_of(row))} for row in rows]
        if fmt == "labelstudio":
            return json.dumps(label_studio_tasks(rows), indent=1, ensure_ascii=False) + "\n"
        return export_text(rows, fmt)

    def _table_contents(self, rows: Sequence[Mapping[str, Any]]) -> Callable[[Mapping[str, Any]], dict[str, Any] | None]:
        """Each exported row's cells as the table holds them now, matched by the item's key (row id
        or content hash) and its content hash, not by the project's last scan: a row edited since
        (same id, other content) or gone is not this item's any more, its text / fields are empty
        (a warning counts them); the table moved or unreadable empties every row's (a warning says why)."""
        if self._table is not None:
            table: TableItems | None = self._table
        else:
            try:
                _, _, table = self._load_source(self.config, self.directory, progress=False, scan=False)
            except (MissingFileError, DataError, OSError) as error:
                warnings.warn(f"the export's text / fields columns are empty: {error}", UserWarning, stacklevel=4)
                table = None
        by_item = ({(f.key, f.sha256): content for f, content in zip(table.files, table.contents, strict=True)}
                   if table is not None else {})
        missing = sum(1 for row in rows if (row["key"], row["sha256"]) not in by_item)
        if table is not None and missing:
            warnings.warn(f"{missing} item(s) of the project are not rows of {self.config.table} as it is now "
                          "(deleted, or their text / feature cells edited): their text / fields columns in the "
                          "export are empty (their labels are exported)", UserWarning, stacklevel=4)
        return lambda row: by_item.get((row["key"], row["sha256"]))

    def _content_columns(self, content: dict[str, Any] | None) -> dict[str, Any]:
        content = content or {}
        columns: dict[str, Any] = {}
        if self.config.text_column is not None or "text" in content:
            columns["text"] = content.get("text")
        if self.config.feature_columns or "fields" in content:
            columns["fields"] = dict(content["fields"]) if "fields" in content else None
        return columns

    # ----------------------------------------------------------------- summary

    def summary(self) -> dict[str, Any]:
        counts = self.store.counts()
        return {**counts, "rounds": self.store.n_rounds(), "classes": list(self.classes)}


SKIPPED_KEY = "skipped"


def _moved_source(config: ProjectConfig, given: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """``(setting, old, new)`` when a command names another image folder / table than the project's
    and the stored one no longer exists while the new one does: the project's source was moved (its
    items are matched to the new place by path and content, as in any rescan). ``None`` otherwise
    (a differing path that is not a move stays an error, :func:`setting_differences`)."""
    for name in ("images", "table"):
        stored, wanted = getattr(config, name), given.get(name)
        if stored is None or wanted is None:
            continue
        new = _setting_value(name, wanted)  # resolved, as setting_differences compares paths
        if new != _setting_value(name, stored) and not Path(stored).exists() and Path(new).exists():
            return name, str(stored), new
    return None


def _note_skipped(store: LabelStore, skipped: Sequence[tuple[str, str]]) -> None:
    """Keep the last scan's skipped files (``[key, reason]``) in the store's meta ``"skipped"``,
    for the app's pages (the app itself does not rescan)."""
    value = [[key, reason] for key, reason in skipped]
    if (store.meta(SKIPPED_KEY) or []) != value:
        store.set_meta(SKIPPED_KEY, value)
