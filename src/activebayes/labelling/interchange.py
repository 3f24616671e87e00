"""A file round trip for real labelling: write the queried items, read back a person's answers.

1. :func:`write_query` writes the items to label (original index, file path,
   optional thumbnail, acquisition score, an empty ``label`` column) as CSV, or
   JSON when the path ends in ``.json``; the write is atomic.
2. A person fills in the ``label`` column (class names or integer class ids).
3. :func:`read_answers` validates the file (unknown ids, labels outside the class
   set, duplicate rows, missing rows, malformed files) and returns
   ``{index: class_id}``; every problem is reported with its row number.

:class:`FileOracle` ties these to a directory with a persistent ``oracle.json``
holding every query and every imported label (written atomically; imports only
ever add labels, importing the same file twice changes nothing).

CSV layout written by :func:`write_query`::

    round,rank,index,path,thumbnail,score,label
    3,0,1207,/data/imgs/a.png,,0.8123,
    3,1,88,/data/imgs/b.png,,0.7710,

Example:
    >>> import tempfile, pathlib, torch
    >>> from activebayes.data import load_dataset
    >>> ds = load_dataset("digits")
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> path = write_query(folder / "q.csv", indices=[4, 9], scores=[0.5, 0.25], dataset=ds, round=0)
    >>> text = path.read_text().replace("0.5,\\n", "0.5,seven\\n").replace("0.25,\\n", "0.25,2\\n")
    >>> _ = (folder / "q.csv").write_text(text)
    >>> read_answers(folder / "q.csv", expected_indices=[4, 9], classes=[str(c) for c in range(10)] + ["seven"])
    {4: 10, 9: 2}
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from PIL import Image
from torch import Tensor

from .._io import atomic_write_bytes, atomic_write_text
from ..data.dataset import ArrayDataset, as_index_tensor
from activebayes.errors import ActiveBayesError, InvalidArgumentError
from activebayes.labelstore import csv_cell as _csv_cell

__all__ = [
    "AnswerFileError",
    "FileOracle",
    "LabelsPendingError",
    "PROJECT_QUERY_COLUMNS",
    "QUERY_COLUMNS",
    "AnswerProblem",
    "item_png",
    "read_answers",
    "write_query",
]

QUERY_COLUMNS = ("round", "rank", "index", "path", "thumbnail", "score", "label")
PROJECT_QUERY_COLUMNS = ("round", "rank", "item", "path", "sha256", "thumbnail", "score", "label")
_MAX_REPORTED = 20


@dataclass(frozen=True)
class AnswerProblem:
    """One problem in an answers file: where, what, and the option that accepts it, if one does
    (``"allow_partial"`` for empty labels and missing rows, ``"overwrite"`` for a changed label)."""

    where: str
    message: str
    fix: str | None = None

    def text(self, flags: Mapping[str, str] | None = None) -> str:
        """The problem as one line; ``flags`` names the options (e.g. ``{"overwrite": "--overwrite"}``)."""
        line = f"{self.where}: {self.message}" if self.where else self.message
        if self.fix is not None:
            flag = (flags or {}).get(self.fix, f"{self.fix}=True")
            line += f" (pass {flag} to accept)"
        return line

    def __str__(self) -> str:
        return self.text()


class AnswerFileError(ActiveBayesError, ValueError):
    """An answers file is malformed or holds invalid rows; ``problems`` lists each one
    (:class:`AnswerProblem`, with the option that accepts it where one does)."""

    def __init__(self, path: str | os.PathLike[str], problems: Sequence[AnswerProblem | str]) -> None:
        self.path = str(path)
        self.problems = [p if isinstance(p, AnswerProblem) else AnswerProblem("", str(p)) for p in problems]
        super().__init__(self.describe())

    def describe(self, flags: Mapping[str, str] | None = None, limit: int | None = _MAX_REPORTED) -> str:
        """Every problem on its own line (at most ``limit``), options named by ``flags``."""
        shown = self.problems if limit is None else self.problems[:limit]
        more = len(self.problems) - len(shown)
        lines = "\n  ".join(p.text(flags) for p in shown) + (f"\n  ... and {more} more" if more > 0 else "")
        return f"{len(self.problems)} problem(s) in answers file {self.path}:\n  {lines}"


class LabelsPendingError(ActiveBayesError, RuntimeError):
    """The file oracle was asked for labels that a person has not provided yet."""


# --------------------------------------------------------------------------- writing


def _thumbnail_png(image_chw: Tensor, normalization: tuple[float, float] | None, min_side: int = 64) -> bytes:
    if image_chw.ndim != 3 or image_chw.shape[0] not in (1, 3):
        raise InvalidArgumentError(f"thumbnails need image inputs [1 or 3, H, W], got item shape {tuple(image_chw.shape)}")
    image = image_chw.detach().to(torch.float64)
    if normalization is not None:
        mean, std = normalization
        image = image * std + mean
    else:
        low, high = float(image.min()), float(image.max())
        image = (image - low) / (high - low) if high > low else torch.zeros_like(image)
    pixels = (image.clamp(0, 1) * 255).round().to(torch.uint8)
    array = pixels[0].numpy() if pixels.shape[0] == 1 else pixels.permute(1, 2, 0).numpy()
    picture = Image.fromarray(array)
    scale = max(1, math.ceil(min_side / min(picture.size)))
    if scale > 1:
        picture = picture.resize((picture.width * scale, picture.height * scale), Image.Resampling.NEAREST)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return buffer.getvalue()


def write_query(
    path: str | os.PathLike[str],
    *,
    indices: object,
    scores: object | None,
    dataset: ArrayDataset,
    round: int,
    thumbnails_dir: str | os.PathLike[str] | None = None,
    item_ids: Sequence[int] | None = None,
    sha256: Sequence[str] | None = None,
) -> Path:
    """Write the items to label, atomically, as CSV (or JSON for a ``.json`` path).

    Args:
        path: the query file.
        indices: ``[B]`` original dataset indices, in pick order (no duplicates).
        scores: ``[B]`` acquisition scores (or ``None``).
        dataset: the dataset the indices refer to (for ``paths`` and thumbnails).
        round: the active learning round (>= 0).
        thumbnails_dir: if given, one PNG per item (``item-<id>.png``, inputs
            de-standardised with ``dataset.normalization``) is written there and
            its path goes into the ``thumbnail`` column.
        item_ids: stable item ids (a labelling project's, :mod:`activebayes.labelstore`)
            to identify the rows by instead of the dataset positions: the file then has
            an ``item`` column in place of ``index``, and ``sha256`` (the content hash
            of each item, same length) if given.
        sha256: see ``item_ids``.

    Rows: ``round, rank, index, path, thumbnail, score, label`` with ``label`` empty
    (``round, rank, item, path, sha256, thumbnail, score, label`` with ``item_ids``).
    The JSON form is ``{"round", "dataset", "classes", "items": [{...,"label": null}]}``.
    Returns ``path``.
    """
    if isinstance(round, bool) or not isinstance(round, int) or round < 0:
        raise InvalidArgumentError(f"round must be an int >= 0, got {round!r}")
    index_B = dataset.check_indices(indices, "indices")
    if torch.unique(index_B).numel() != index_B.numel():
        raise InvalidArgumentError("indices must not contain duplicates")
    score_B: list[float | None]
    if scores is None:
        score_B = [None] * len(index_B)
    else:
        score_t = torch.as_tensor(scores, dtype=torch.float64).flatten()
        if score_t.shape != index_B.shape:
            raise InvalidArgumentError(f"scores must have shape {tuple(index_B.shape)} like indices, got {tuple(score_t.shape)}")
        score_B = [float(s) for s in score_t]
    key = "index" if item_ids is None else "item"
    ids = index_B.tolist() if item_ids is None else [int(i) for i in item_ids]
    if len(ids) != len(index_B) or (sha256 is not None and len(sha256) != len(index_B)):
        raise InvalidArgumentError(f"item_ids and sha256 must have one entry per index ({len(index_B)})")
    columns = QUERY_COLUMNS if item_ids is None else PROJECT_QUERY_COLUMNS
    thumbs: list[str] = [""] * len(index_B)
    if thumbnails_dir is not None:
        folder = Path(thumbnails_dir)
        for rank, i in enumerate(index_B.tolist()):
            target = folder / f"item-{ids[rank]}.png"
            atomic_write_bytes(target, item_png(dataset, i))
            thumbs[rank] = str(target)
    items = []
    for rank, i in enumerate(index_B.tolist()):
        item: dict[str, object] = {"round": round, "rank": rank, key: ids[rank],
                                   "path": dataset.paths[i] if dataset.paths is not None else ""}
        if item_ids is not None:
            item["sha256"] = sha256[rank] if sha256 is not None else ""
        item.update({"thumbnail": thumbs[rank], "score": score_B[rank], "label": None})
        items.append(item)
    path = Path(path)
    if path.suffix.lower() == ".json":
        document = {"round": round, "dataset": dataset.name, "classes": list(dataset.classes), "items": items}
        text = json.dumps(document, indent=2) + "\n"
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        for item in items:
            row = {k: _csv_cell(v) for k, v in item.items()}  # file names neutralised against formula injection
            row["label"] = ""
            row["score"] = "" if item["score"] is None else repr(item["score"])
            writer.writerow(row)
        text = buffer.getvalue()
    return atomic_write_text(path, text)


def item_png(dataset: ArrayDataset, index: int, *, min_side: int = 64) -> bytes:
    """Item ``index`` of an image dataset as PNG bytes, de-standardised with
    ``dataset.normalization`` and scaled up (nearest neighbour) to at least ``min_side`` pixels."""
    return _thumbnail_png(dataset.inputs[index], dataset.normalization, min_side)


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class _Row:
    where: str  # "row 3 (line 4)" or "item 2"
    index: object
    label: object


@dataclass(frozen=True)
class _Malformed:
    reason: str


def _csv_rows(path: Path, text: str, key: str) -> list[_Row]:
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise AnswerFileError(path, [AnswerProblem("", f"the file is empty; expected a header with '{key}' and 'label' columns")])
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except csv.Error as exc:
        raise AnswerFileError(path, [AnswerProblem("line 1", f"malformed CSV ({exc})")]) from None
    names = [h.strip().lower() for h in header]
    missing = [c for c in (key, "label") if c not in names]
    if missing:
        raise AnswerFileError(path, [AnswerProblem(
            "line 1", f"header {header!r} lacks column(s) {missing}; expected at least '{key}' and 'label'")])
    i_index, i_label = names.index(key), names.index("label")
    rows: list[_Row] = []
    number = 0
    try:
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            number += 1
            where = f"row {number} (line {reader.line_num})"
            if len(fields) != len(header):
                rows.append(_Row(where, _Malformed(f"has {len(fields)} field(s), the header has {len(header)}"), None))
                continue
            rows.append(_Row(where, fields[i_index], fields[i_label]))
    except csv.Error as exc:
        raise AnswerFileError(path, [AnswerProblem(f"line {reader.line_num}", f"malformed CSV ({exc})")]) from None
    return rows


def _json_rows(path: Path, text: str, key: str) -> list[_Row]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AnswerFileError(path, [AnswerProblem(f"line {exc.lineno}", f"malformed JSON ({exc.msg})")]) from None
    if isinstance(document, Mapping) and "items" in document:
        document = document["items"]
    elif isinstance(document, Mapping) and "labels" in document and isinstance(document["labels"], Mapping):
        document = document["labels"]
    rows: list[_Row] = []
    if isinstance(document, list):
        for number, item in enumerate(document):
            where = f"item {number}"
            if not isinstance(item, Mapping) or key not in item:
                rows.append(_Row(where, _Malformed(f"is not an object with '{key}' and 'label'"), None))
                continue
            rows.append(_Row(where, item[key], item.get("label")))
    elif isinstance(document, Mapping):
        for name, value in document.items():
            rows.append(_Row(f"key {name!r}", name, value))
    else:
        raise AnswerFileError(path, [AnswerProblem(
            "", f"expected a JSON list of {{{key}, label}} objects, {{'items': [...]}}, or a mapping {key} -> label")])
    return rows


def _parse_index(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
    return None


def numbers_are_names(classes: Sequence[str]) -> bool:
    """Whether a number in an answer is read as a class *name* only, never as a class id.

    That is so when some class name is itself a number and the names are not simply the ids
    (``0, 1, ..., n-1`` in order, where both readings agree): with classes ``3,2,1`` the
    answer ``1`` is the class named "1", and ``0`` is no class at all, not the first class.
    """
    numeric = any(str(name).strip().lstrip("-").isdigit() for name in classes)
    return numeric and tuple(str(c) for c in classes) != tuple(str(i) for i in range(len(classes)))


def _resolve_label(value: object, classes: tuple[str, ...]) -> int | None:
    """Class id for a class name or an integer id; ``None`` if it is neither.

    With numeric class names (:func:`numbers_are_names`) a number is read as a name only."""
    n_classes = len(classes)
    if isinstance(value, bool):
        return None
    if numbers_are_names(classes):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        text = str(value).strip()
        return classes.index(text) if text in classes else None
    if isinstance(value, int):
        return value if 0 <= value < n_classes else None
    if isinstance(value, float) and value.is_integer():
        return int(value) if 0 <= value < n_classes else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text in classes:
        return classes.index(text)
    folded = [i for i, name in enumerate(classes) if name.casefold() == text.casefold()]
    if len(folded) == 1:
        return folded[0]
    if text.lstrip("-").isdigit():
        number = int(text)
        return number if 0 <= number < n_classes else None
    return None


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def read_answers(
    path: str | os.PathLike[str],
    *,
    expected_indices: object,
    classes: Sequence[str],
    allow_partial: bool = False,
    key: str = "index",
    also_allowed: Iterable[int] = (),
    describe_unknown: Callable[[int], str] | None = None,
    problems: list[AnswerProblem] | None = None,
) -> dict[int, int]:
    """Read and validate a filled-in query file; return ``{id: class id}``.

    Args:
        path: CSV (columns ``key`` and ``label``, others ignored; UTF-8, a BOM is
            fine) or JSON (``.json``: the query's ``{"items": [...]}``, a list of
            ``{key, "label"}`` objects, or a mapping ``{"id": label}``).
        expected_indices: the ids that were queried (every one needs a labelled row
            unless ``allow_partial``).
        classes: the class names. A label is matched against the names first
            (exactly, then case-insensitively if unique), then read as an integer
            class id ``0 .. C-1``.
        allow_partial: accept rows with an empty label (and absent rows); only
            the labelled ones are returned. Otherwise they are errors.
        key: the column that identifies an item: ``"index"`` (dataset position) or
            ``"item"`` (a labelling project's stable item id).
        also_allowed: further ids a row may name (e.g. items queried in earlier
            rounds); their rows are optional.
        describe_unknown: explains an id that is neither expected nor allowed
            (default: "was not queried").
        problems: if given, the rows' problems are appended to it and the valid
            answers returned instead of raising (a caller that checks more, such as
            conflicts with stored labels, reports everything at once). A file that
            cannot be read at all still raises.

    Raises :class:`AnswerFileError` (a ``ValueError``) listing every problem with
    its row: unreadable / malformed file, a non-integer or unknown id, a label
    outside the class set, a duplicated id, missing rows or empty labels (these two
    name ``allow_partial`` as the fix).
    """
    path = Path(path)
    class_names = tuple(str(c) for c in classes)
    if not class_names:
        raise InvalidArgumentError("classes must name at least one class")
    expected = set(as_index_tensor(expected_indices, "expected_indices").tolist())
    allowed = expected | {int(i) for i in also_allowed}
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise AnswerFileError(path, [AnswerProblem("", "the file does not exist")]) from None
    except UnicodeDecodeError as exc:
        raise AnswerFileError(path, [AnswerProblem("", f"not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    rows = _json_rows(path, text, key) if path.suffix.lower() == ".json" else _csv_rows(path, text, key)

    found: list[AnswerProblem] = []
    answers: dict[int, int] = {}
    seen: dict[int, str] = {}
    for row in rows:
        if isinstance(row.index, _Malformed):
            found.append(AnswerProblem(row.where, row.index.reason))
            continue
        index = _parse_index(row.index)
        if index is None:
            found.append(AnswerProblem(row.where, f"{key} {row.index!r} is not an integer"))
            continue
        if index in seen:
            found.append(AnswerProblem(row.where, f"{key} {index} is a duplicate (first seen in {seen[index]})"))
            continue
        seen[index] = row.where
        if index not in allowed:
            reason = describe_unknown(index) if describe_unknown is not None else "was not queried (unknown id)"
            found.append(AnswerProblem(row.where, f"{key} {index} {reason}"))
            continue
        if _is_blank(row.label):
            if not allow_partial and index in expected:
                found.append(AnswerProblem(row.where, f"{key} {index} has no label", "allow_partial"))
            continue
        label = _resolve_label(row.label, class_names)
        if label is None:
            shown = ", ".join(class_names) if len(class_names) <= 20 else ", ".join(class_names[:20]) + ", ..."
            expected_text = (f"the class names are numbers, so a number is read as a class name, never as an "
                             f"id: expected one of [{shown}]" if numbers_are_names(class_names) else
                             f"expected one of [{shown}] or an id 0..{len(class_names) - 1}")
            found.append(AnswerProblem(row.where, f"label {row.label!r} for {key} {index} is not a class; "
                                                  + expected_text))
            continue
        answers[index] = label
    absent = sorted(expected - set(seen))
    if absent and not allow_partial:
        shown = ", ".join(map(str, absent[:10])) + (", ..." if len(absent) > 10 else "")
        noun = "index(es)" if key == "index" else "item(s)"
        found.append(AnswerProblem("", f"{len(absent)} queried {noun} have no row: {shown}", "allow_partial"))
    if problems is not None:
        problems.extend(found)
    elif found:
        raise AnswerFileError(path, found)
    return answers


# --------------------------------------------------------------------------- the file oracle


class FileOracle:
    """An oracle backed by files in ``directory``: queries go out, a person's answers come in.

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
        return self.directory / f"query-{round:04d}.{self.fmt}"

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
        answers = read_answers(
            path, expected_indices=self._queries[round], classes=self.dataset.classes, allow_partial=allow_partial
        )
        conflicts = [
            AnswerProblem(f"index {i}", f"already imported as {self.dataset.classes[self._labels[i]]!r}, "
                          f"the file says {self.dataset.classes[y]!r}", "overwrite")
            for i, y in sorted(answers.items())
            if i in self._labels and self._labels[i] != y
        ]
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
