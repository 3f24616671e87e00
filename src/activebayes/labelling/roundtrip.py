"""The file round trip: write the next batch to a query file, import a person's answers.

This is the one file round trip of activebayes (``activebayes query`` / ``import``):

1. :func:`query` commits the labels imported so far to the loop, picks the next batch
   (:meth:`~activebayes.labelling.LabellingProject.advance`) and writes it to
   ``PROJECT/queries/query-NNNN.csv`` (:func:`~activebayes.labelling.interchange.write_query`),
   remembering which items each round's file asked for;
2. a person fills in the ``label`` column;
3. :func:`import_answers` parses the file once
   (:class:`~activebayes.labelling.interchange.AnswersFile`), checks every row against
   the queries and the stored labels, and stores the labels, all or nothing.

:class:`FileOracle` is the same round trip for an in-memory
:class:`~activebayes.data.ArrayDataset` without a project (dataset positions instead
of item ids, its state in ``oracle.json``); it shares the query files, the parsing and
the relabelling check.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from activebayes._io import atomic_write_text
from activebayes.data.dataset import ArrayDataset
from activebayes.errors import InvalidArgumentError, MissingFileError
from activebayes.labelling.interchange import (
    AnswerFileError,
    AnswerProblem,
    AnswersFile,
    check_answers,
    label_studio_answers,
    query_file_name,
    write_query,
)
from activebayes.labelling.settings import ProjectError

if TYPE_CHECKING:
    from activebayes.labelling.project import LabellingProject

__all__ = ["QUERY_DIR", "FileOracle", "ImportResult", "LabelsPendingError", "QueryResult", "import_answers",
           "query", "query_path", "relabel_conflicts"]

QUERY_DIR = "queries"
QUERIES_KEY = "queries"  # the store's meta entry: round -> the item ids its query file asked for


class LabelsPendingError(ProjectError, RuntimeError):
    """Labels were asked for that a person has not given yet: the current query file
    still has items without a label (a ``ValueError`` and, as the file oracle's was, a
    ``RuntimeError``)."""


@dataclass(frozen=True)
class QueryResult:
    """What :func:`query` wrote: the round's file, its items (dataset
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
    """What :func:`import_answers` stored.

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


# --------------------------------------------------------------------------- shared by both round trips


def relabel_conflicts(answers: Mapping[int, int], current: Mapping[int, int], classes: Sequence[str], *,
                      where: Callable[[int], str], given: str,
                      name: Callable[[int], str] | None = None) -> list[AnswerProblem]:
    """One problem (fixed by ``overwrite``) per answer that would replace a label already given:
    ``"<where(id)>: <given> 'old', the file says 'new'"`` (labels shown by ``name``, default
    their class name)."""
    name = name or classes.__getitem__
    return [AnswerProblem(where(i), f"{given} {name(current[i])!r}, the file says {name(y)!r}", "overwrite")
            for i, y in sorted(answers.items()) if i in current and current[i] != y]


def _split_new(answers: Mapping[int, int], current: Mapping[int, int]) -> tuple[dict[int, int], dict[int, int]]:
    """``(new, changed)``: the answers for ids without a label, and those that replace one."""
    new = {i: y for i, y in answers.items() if i not in current}
    changed = {i: y for i, y in answers.items() if i in current and current[i] != y}
    return new, changed


# --------------------------------------------------------------------------- a labelling project's round trip


def _readable(content: Mapping[str, Any] | None) -> str:
    """A table item as one cell of a query file: its text, then ``column: value`` lines."""
    content = content or {}
    lines = [content["text"]] if "text" in content else []
    return "\n".join(lines + [f"{column}: {value}" for column, value in content.get("fields", [])])


def query_path(project: LabellingProject, round: int) -> Path:
    """Where round ``round``'s query file of ``project`` is written."""
    return project.directory / QUERY_DIR / query_file_name(round)


def queries_of(project: LabellingProject) -> dict[int, list[int]]:
    """Round -> the item ids its query file asked for."""
    return {int(r): list(items) for r, items in (project.store.meta(QUERIES_KEY) or {}).items()}


def unanswered(project: LabellingProject) -> tuple[Path, int] | None:
    """The latest query file and how many of its items have no label yet (``None``: all answered,
    or no query yet): while any has none, :func:`query` refuses to pick the next batch."""
    queries = queries_of(project)
    if not queries:
        return None
    r = max(queries)
    missing = sum(1 for item in queries[r] if project.store.label_of(item) is None
                  and project.index_of(item) is not None)
    return (query_path(project, r), missing) if missing else None


def query(project: LabellingProject) -> QueryResult:
    """Commit the labels imported so far, pick the next batch, write its query file.

    Refuses while the latest query file has items without a label
    (:class:`LabelsPendingError`).
    """
    queries = queries_of(project)
    loop = project.build_loop()
    r = loop.round
    if r in queries:
        missing = [item for item in queries[r] if project.store.label_of(item) is None
                   and project.index_of(item) is not None]
        if missing:
            raise LabelsPendingError(
                f"{len(missing)} item(s) of {query_path(project, r)} have no label yet: fill in its label column "
                f"and run `activebayes import {query_path(project, r)} --project {project.directory}`")
    n_pending = len(project.pending_labels())
    loop, proposal = project.advance(loop, lookahead=0)
    if proposal.stop_reason is not None:
        raise ProjectError(f"nothing left to query: {proposal.stop_reason}")
    labelled = project.store.labels()
    batch = [(i, s) for i, s in zip(proposal.indices, proposal.scores, strict=True)
             if project.item_ids[i] not in labelled]
    indices = [i for i, _ in batch]
    items = [project.item_ids[i] for i in indices]
    stored = {item.id: item for item in project.store.items()}
    dataset = project.dataset
    path = write_query(
        query_path(project, proposal.round), indices=indices, scores=[s for _, s in batch], dataset=dataset,
        round=proposal.round, item_ids=items, sha256=[stored[i].sha256 for i in items],
        keys=[stored[i].key for i in items],
        texts=[_readable(project.item_content(i)) for i in items] if project.item_kind != "image" else None,
        thumbnails_dir=project.directory / QUERY_DIR / "thumbnails" if len(dataset.input_shape) == 3 else None)
    queries[proposal.round] = items
    project.store.set_meta(QUERIES_KEY, {str(k): v for k, v in sorted(queries.items())})
    return QueryResult(path, proposal.round, indices, items, [s for _, s in batch], proposal.strategy,
                       proposal.n_labelled, n_pending)


def import_answers(project: LabellingProject, path: str | os.PathLike[str], *, allow_partial: bool = False,
                   overwrite: bool = False, annotator: str = "file") -> ImportResult:
    """Validate a filled-in file and store its labels in ``project`` (all or nothing).

    ``path``: a query file (CSV / JSON with ``item`` and ``label`` columns; its round
    from the ``round`` column or the ``query-NNNN`` name), or a Label Studio JSON
    export (a list of tasks with ``data`` and ``annotations``). The file is read once.
    Raises :class:`~activebayes.labelling.interchange.AnswerFileError` listing every
    problem, each with the option that accepts it where one does (``allow_partial``,
    ``overwrite``).
    """
    file = Path(path)
    if not file.is_file():
        raise MissingFileError(f"answers file {path} does not exist")
    answers_file = AnswersFile.read(file, key="item", label_studio=True)
    if answers_file.is_label_studio:
        return _import_label_studio(project, answers_file, overwrite=overwrite, annotator=annotator)
    if answers_file.rows and {"present", "label_id", "annotator"} <= set(answers_file.rows[0].fields):
        raise ProjectError(f"{file} is an export of a project (every item with its label, `activebayes export`), "
                           "not a filled-in query: import answers a query (`activebayes query "
                           f"{project.directory}` writes one) or a Label Studio export; labels already stored are "
                           "changed in the app")
    queries = queries_of(project)
    if not queries:
        raise ProjectError(f"{project.directory} has no query yet; run `activebayes query {project.directory}` first")
    round_ = answers_file.round()
    if round_ is not None and round_ not in queries:
        raise ProjectError(f"{file} answers round {round_}, but this project has queries for rounds "
                           f"{sorted(queries)}")
    round_ = max(queries) if round_ is None else round_
    expected = queries[round_]
    earlier_of = {item: r for r, items in queries.items() if r != round_ for item in items}
    items = {item.id: item for item in project.store.items(present_only=False)}

    def unknown(item: int) -> str:
        if item not in items:
            return "is not an item of this project"
        return "was never queried (only queried items can be imported)"

    problems: list[AnswerProblem] = []
    # a queried item gone from the folder (or changed) since cannot be labelled: its row may be dropped
    gone = [item for item in expected if item not in items or not items[item].present]
    answers = check_answers(answers_file, expected_indices=[i for i in expected if i not in gone],
                            classes=project.classes, allow_partial=allow_partial,
                            also_allowed=[*earlier_of, *gone], describe_unknown=unknown,
                            problems=problems, multilabel=project.store.multilabel)
    current = project.store.labels(present_only=False)
    # an item gone since with the label the file gives stored already (the same file imported again):
    # nothing to store, nothing wrong
    stored_already = {item for item, label in answers.items()
                      if not items[item].present and current.get(item) == label}
    for item, label in sorted(answers.items()):
        where = f"item {item} ({items[item].key})"
        if item in stored_already:
            continue
        if not items[item].present:
            newer = [it for it in items.values() if it.present and it.key == items[item].key]
            reason = (f"changed on disk after it was queried (its new content is item {newer[0].id}); "
                      "label it in a later query" if newer else
                      f"is no longer in the {'table' if project.config.table else 'image folder'}; drop its row")
            problems.append(AnswerProblem(where, reason))
            continue
        sha = answers_file.column(item, "sha256")
        if sha and sha != items[item].sha256:
            problems.append(AnswerProblem(where, "the file's sha256 does not match the stored item"))
            continue
        if not overwrite:
            problems += relabel_conflicts({item: label}, current, project.classes, given="is already labelled",
                                          where=lambda _item, where=where: where, name=project.store.label_name)
    if problems:
        raise AnswerFileError(file, problems)
    new, changed = _split_new(answers, current)
    project.store.answer_many({i: y for i, y in answers.items() if i not in stored_already}, annotator, source="file")
    earlier: dict[int, int] = {}
    for item in answers:
        if item in earlier_of:
            earlier[earlier_of[item]] = earlier.get(earlier_of[item], 0) + 1
    return ImportResult(file, round_, new, changed, len(answers) - len(new) - len(changed), earlier, 0,
                        len(project.store.labels()))


def _import_label_studio(project: LabellingProject, answers_file: AnswersFile, *, overwrite: bool,
                         annotator: str) -> ImportResult:
    assert answers_file.tasks is not None
    found = label_studio_answers(answers_file.tasks, items=project.store.items(), classes=project.classes,
                                 multilabel=project.store.multilabel)
    problems = [AnswerProblem("", p) for p in found.problems]
    current = project.store.labels()
    if not overwrite:
        problems += relabel_conflicts(found.labels, current, project.classes, given="is already labelled",
                                      where=lambda item: f"item {item} ({project.store.item(item).key})",
                                      name=project.store.label_name)
    if problems:
        raise AnswerFileError(answers_file.path, problems)
    new, changed = _split_new(found.labels, current)
    project.store.answer_many(found.labels, annotator, source="labelstudio")
    return ImportResult(answers_file.path, None, new, changed, len(found.labels) - len(new) - len(changed), {},
                        found.unannotated, len(project.store.labels()))


# --------------------------------------------------------------------------- the file oracle


class FileOracle:
    """An oracle backed by files in ``directory``: queries go out, a person's answers come in.

    The project's file round trip for an in-memory dataset: the same query files, the
    same answers parsing and relabelling check, rows identified by dataset position
    (``index``) and the state kept in ``oracle.json`` instead of a label store.

    Layout of ``directory``:

    - ``query-<round:04d>.csv`` (or ``.json``): written by :meth:`query`;
    - ``oracle.json``: every query (round -> indices) and every imported label,
      rewritten atomically on each change, so labels already imported survive a crash.

    Usage::

        oracle = FileOracle("labelling", dataset)
        oracle.query(indices, scores, round=3)      # -> labelling/query-0003.csv
        # ... a person fills in the label column ...
        oracle.import_answers("labelling/query-0003.csv")
        labels_B = oracle.label(indices)            # the imported labels

    ``label`` (and calling the oracle) raises :class:`LabelsPendingError` while
    any requested item is still unanswered.
    """

    STATE_FILE = "oracle.json"
    _VERSION = 1

    def __init__(self, directory: str | os.PathLike[str], dataset: ArrayDataset, *, fmt: str = "csv") -> None:
        if fmt not in ("csv", "json"):
            raise InvalidArgumentError(f"unknown fmt {fmt!r}; expected one of: csv, json")
        if not dataset.classes:
            raise InvalidArgumentError(f"dataset {dataset.name!r} has no class names; pass classes= when building it")
        self.directory = Path(directory)
        self.dataset = dataset
        self.fmt = fmt
        self._queries: dict[int, list[int]] = {}
        self._labels: dict[int, int] = {}
        state_path = self.directory / self.STATE_FILE
        if state_path.exists():
            self._load(state_path)

    # -- persistence
    def _load(self, state_path: Path) -> None:
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidArgumentError(f"{state_path}: unreadable oracle state ({exc})") from None
        if state.get("version") != self._VERSION:
            raise InvalidArgumentError(f"{state_path}: unsupported version {state.get('version')!r}")
        if tuple(state.get("classes", ())) != self.dataset.classes:
            raise InvalidArgumentError(
                f"{state_path}: saved for classes {state.get('classes')}, but the dataset has {list(self.dataset.classes)}"
            )
        if state.get("n_items") != len(self.dataset):
            raise InvalidArgumentError(f"{state_path}: saved for {state.get('n_items')} items, the dataset has {len(self.dataset)}")
        self._queries = {int(r): [int(i) for i in idx] for r, idx in state["queries"].items()}
        self._labels = {int(i): int(y) for i, y in state["labels"].items()}

    def _save(self) -> None:
        state = {
            "version": self._VERSION,
            "dataset": self.dataset.name,
            "n_items": len(self.dataset),
            "classes": list(self.dataset.classes),
            "queries": {str(r): idx for r, idx in sorted(self._queries.items())},
            "labels": {str(i): y for i, y in sorted(self._labels.items())},
        }
        atomic_write_text(self.directory / self.STATE_FILE, json.dumps(state, indent=1) + "\n")

    # -- queries
    def query_path(self, round: int) -> Path:
        """Where the query file for ``round`` lives."""
        return self.directory / query_file_name(round, self.fmt)

    def query(self, indices: object, scores: object | None = None, *, round: int, thumbnails: bool = False) -> Path:
        """Write the query file for ``round`` and remember which items it asks for."""
        index_B = self.dataset.check_indices(indices, "indices")
        path = write_query(
            self.query_path(round),
            indices=index_B,
            scores=scores,
            dataset=self.dataset,
            round=round,
            thumbnails_dir=self.directory / "thumbnails" if thumbnails else None,
        )
        self._queries[round] = index_B.tolist()
        self._save()
        return path

    @property
    def queries(self) -> dict[int, list[int]]:
        """Round -> queried original indices."""
        return {r: list(idx) for r, idx in self._queries.items()}

    def pending(self) -> Tensor:
        """Queried indices without an imported label (ascending)."""
        queried = {i for idx in self._queries.values() for i in idx}
        return torch.tensor(sorted(queried - set(self._labels)), dtype=torch.long)

    # -- answers
    def import_answers(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        round: int | None = None,
        allow_partial: bool = False,
        overwrite: bool = False,
    ) -> dict[int, int]:
        """Validate a filled-in file for ``round`` (default: the latest query) and store its labels.

        ``path`` defaults to that round's query file. Labels already imported are
        kept; importing the same answers again is a no-op; a different label for an
        already imported item is an error unless ``overwrite=True``. The state file
        is rewritten atomically only after the whole file validated. Returns the
        answers read from the file.
        """
        if not self._queries:
            raise InvalidArgumentError(f"no queries recorded in {self.directory}; call query() first")
        if round is None:
            round = max(self._queries)
        if round not in self._queries:
            raise InvalidArgumentError(f"no query for round {round}; known rounds: {sorted(self._queries)}")
        path = Path(path) if path is not None else self.query_path(round)
        answers = check_answers(AnswersFile.read(path, key="index"), expected_indices=self._queries[round],
                                classes=self.dataset.classes, allow_partial=allow_partial)
        conflicts = relabel_conflicts(answers, self._labels, self.dataset.classes, given="already imported as",
                                      where=lambda i: f"index {i}")
        if conflicts and not overwrite:
            raise AnswerFileError(path, conflicts)
        changed = any(self._labels.get(i) != y for i, y in answers.items())
        if changed:
            self._labels.update(answers)
            self._save()
        return answers

    @property
    def labels(self) -> dict[int, int]:
        """Every imported label: original index -> class id."""
        return dict(self._labels)

    def label(self, pool_indices: object) -> Tensor:
        """The imported labels of ``pool_indices`` ``[B]``; raises :class:`LabelsPendingError` if any is missing."""
        index_B = self.dataset.check_indices(pool_indices, "pool_indices")
        missing = [i for i in index_B.tolist() if i not in self._labels]
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
            raise LabelsPendingError(
                f"{len(missing)} item(s) have no label yet ({shown}); write a query with FileOracle.query(), "
                f"fill in its label column and import it (directory {self.directory})"
            )
        return torch.tensor([self._labels[i] for i in index_B.tolist()], dtype=torch.long)

    __call__ = label

    def __repr__(self) -> str:
        return f"FileOracle(directory={str(self.directory)!r}, labels={len(self._labels)}, pending={len(self.pending())})"
