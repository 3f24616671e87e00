"""The files a labelling exchanges with people and other tools, each format in one place.

- **Query files** (:func:`write_query`): the items to label (dataset index or project
  item id, file path, optional thumbnail, acquisition score, an empty ``label``
  column) as CSV, or JSON when the path ends in ``.json``; the write is atomic.
- **Answers files** (:class:`AnswersFile`): a filled-in query file, or a Label Studio
  JSON export, read and parsed **once**; :func:`check_answers` validates its rows
  (unknown ids, labels outside the class set, duplicate rows, missing rows) and
  returns ``{id: class_id}``, every problem reported with its row number
  (:class:`AnswerFileError`). :func:`read_answers` is both in one call.
- **Exports** (:func:`export_text`): one row per item with its current label, CSV
  (cells made safe for spreadsheets, :func:`csv_cell`) or JSON.
- **Label Studio** (:func:`label_studio_tasks`, :func:`label_studio_config`,
  :func:`label_studio_answers` / :func:`read_label_studio`): its JSON task format out and in.

The round trip that uses these files (which rounds were queried, what an import
stores) is :mod:`activebayes.labelling.roundtrip`.

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
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import Tensor

from activebayes._io import atomic_write_bytes, atomic_write_text, utf16_hint
from activebayes.data.dataset import ArrayDataset, as_index_tensor
from activebayes.errors import ActiveBayesError, InvalidArgumentError, MissingFileError
from activebayes.labelling.store import MULTILABEL_SEPARATOR, Item, LabelStoreError, classes_mask

__all__ = [
    "EXPORT_COLUMNS",
    "PROJECT_QUERY_COLUMNS",
    "QUERY_COLUMNS",
    "AnswerFileError",
    "AnswerProblem",
    "AnswersFile",
    "LabelStudioAnswers",
    "check_answers",
    "csv_cell",
    "export_text",
    "item_png",
    "CONTENT_COLUMNS",
    "label_studio_answers",
    "label_studio_config",
    "label_studio_tasks",
    "numbers_are_names",
    "query_file_name",
    "read_answers",
    "read_label_studio",
    "write_query",
]

QUERY_COLUMNS = ("round", "rank", "index", "path", "thumbnail", "score", "label")
PROJECT_QUERY_COLUMNS = ("round", "rank", "item", "key", "path", "sha256", "thumbnail", "score", "label")
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


# --------------------------------------------------------------------------- query files


def is_picture_shape(shape: Sequence[int]) -> bool:
    """Whether items of this shape can be shown as pictures: ``[1 or 3, H, W]``."""
    return len(shape) == 3 and int(shape[0]) in (1, 3)


def _thumbnail_png(image_chw: Tensor, normalization: tuple[float, float] | None, min_side: int = 64) -> bytes:
    if not is_picture_shape(tuple(image_chw.shape)):
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
    texts: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
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
        keys: with ``item_ids``, each item's key as the person knows it (an image's path
            in its folder, a table row's id, ``NAME[i]`` of a built-in dataset): the
            ``key`` column.
        texts: what a person reads of each item (a table project's text or ``column: value``
            cells), one per index: a ``text`` column before ``label``.

    Rows: ``round, rank, index, path, thumbnail, score, label`` with ``label`` empty
    (``round, rank, item, key, path, sha256, thumbnail, score, label`` with ``item_ids``).
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
    if len(ids) != len(index_B) or any(v is not None and len(v) != len(index_B) for v in (sha256, keys)):
        raise InvalidArgumentError(f"item_ids, sha256 and keys must have one entry per index ({len(index_B)})")
    columns = list(QUERY_COLUMNS if item_ids is None else PROJECT_QUERY_COLUMNS)
    if texts is not None:
        if len(texts) != len(index_B):
            raise InvalidArgumentError(f"texts must have one entry per index ({len(index_B)}), got {len(texts)}")
        columns.insert(columns.index("label"), "text")
        columns = [c for c in columns if c not in ("path", "thumbnail")]  # a text or a row has neither
    thumbs: list[str] = [""] * len(index_B)
    if thumbnails_dir is not None:
        folder = Path(thumbnails_dir)
        for rank, i in enumerate(index_B.tolist()):
            target = folder / f"item-{ids[rank]}.png"
            atomic_write_bytes(target, item_png(dataset, i))
            thumbs[rank] = str(target)
    items = []
    for rank, i in enumerate(index_B.tolist()):
        item: dict[str, object] = {"round": round, "rank": rank, key: ids[rank]}
        if item_ids is not None:
            item["key"] = keys[rank] if keys is not None else ""
        if texts is None:
            item["path"] = dataset.paths[i] if dataset.paths is not None else ""
        if item_ids is not None:
            item["sha256"] = sha256[rank] if sha256 is not None else ""
        if texts is None:
            item["thumbnail"] = thumbs[rank]
        item["score"] = score_B[rank]
        if texts is not None:
            item["text"] = texts[rank]
        item["label"] = None
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
            row = {k: csv_cell(v) for k, v in item.items()}  # file names neutralised against formula injection
            row["label"] = ""
            row["score"] = "" if item["score"] is None else repr(item["score"])
            writer.writerow(row)
        text = buffer.getvalue()
    return atomic_write_text(path, text)


def item_png(dataset: ArrayDataset, index: int, *, min_side: int = 64) -> bytes:
    """Item ``index`` of an image dataset as PNG bytes, de-standardised with
    ``dataset.normalization`` and scaled up (nearest neighbour) to at least ``min_side`` pixels."""
    return _thumbnail_png(dataset.inputs[index], dataset.normalization, min_side)


def query_file_name(round: int, fmt: str = "csv") -> str:
    """The name of round ``round``'s query file: ``query-NNNN.csv`` (or ``.json``)."""
    return f"query-{round:04d}.{fmt}"


def round_in_name(path: str | os.PathLike[str]) -> int | None:
    """The round in a query file's name (``query-NNNN``), ``None`` for any other name."""
    stem = Path(path).stem
    return int(stem[6:]) if stem.startswith("query-") and stem[6:].isdecimal() else None


# --------------------------------------------------------------------------- answers files


@dataclass(frozen=True)
class _Row:
    where: str  # "row 3 (line 4)" or "item 2"
    index: object
    label: object
    fields: Mapping[str, Any] = field(default_factory=dict)  # every column of the row (CSV names lowercased)


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
        # a spreadsheet saved with ';' or tabs between cells (some locales' "CSV") reads as one column
        other = next((sep for sep in (";", "\t") if len(header) == 1 and sep in header[0]), None)
        hint = (f" (its cells are separated by {other!r}: save it as comma-separated CSV, UTF-8)"
                if other is not None else "")
        raise AnswerFileError(path, [AnswerProblem(
            "line 1", f"header {header!r} lacks column(s) {missing}; expected at least '{key}' and 'label'{hint}")])
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
            rows.append(_Row(where, fields[i_index], fields[i_label], dict(zip(names, fields, strict=True))))
    except csv.Error as exc:
        raise AnswerFileError(path, [AnswerProblem(f"line {reader.line_num}", f"malformed CSV ({exc})")]) from None
    return rows


def _json_rows(path: Path, document: Any, key: str) -> list[_Row]:
    if isinstance(document, Mapping) and "items" in document:
        document = document["items"]
    elif isinstance(document, Mapping) and "labels" in document and isinstance(document["labels"], Mapping):
        document = document["labels"]
    rows: list[_Row] = []
    if isinstance(document, list):
        for number, item in enumerate(document):
            where = f"entry {number + 1} of the list"  # counted from 1, as rows are: not an item id
            if not isinstance(item, Mapping) or key not in item:
                rows.append(_Row(where, _Malformed(f"is not an object with '{key}' and 'label'"), None))
                continue
            rows.append(_Row(where, item[key], item.get("label"), dict(item)))
    elif isinstance(document, Mapping):
        for name, value in document.items():
            rows.append(_Row(f"key {name!r}", name, value))
    else:
        raise AnswerFileError(path, [AnswerProblem(
            "", f"expected a JSON list of {{{key}, label}} objects, {{'items': [...]}}, or a mapping {key} -> label")])
    return rows


#: The most digits a number in an answers file is read with (an item, class or round id: SQLite's
#: integers are 64-bit). A longer one is no id and is never handed to ``int()``, which refuses more
#: than 4300 digits with a ValueError.
_MAX_ID_DIGITS = 18
_INTEGER = re.compile(r"-?\d+")


def _integer(text: str) -> int | None:
    """``text`` (stripped) as an int when it is an integer of at most :data:`_MAX_ID_DIGITS` digits, else ``None``."""
    text = text.strip()
    if not _INTEGER.fullmatch(text) or len(text.lstrip("-")) > _MAX_ID_DIGITS:
        return None
    return int(text)


def _json_int(text: str) -> int | str:
    """``json.loads``'s ``parse_int``: a number too long to be an id stays its text (see :data:`_MAX_ID_DIGITS`)."""
    number = _integer(text)  # one rule for what is read as an id
    return text if number is None else number


def _shown(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters (and its length said) when longer."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(value))} characters)"


def _parse_index(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return _integer(value)
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
    number = _integer(text)
    return number if number is not None and 0 <= number < n_classes else None


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _is_label_studio(document: Any) -> bool:
    """Whether a JSON document is a Label Studio export: a non-empty list of tasks with ``data``."""
    return isinstance(document, list) and bool(document) and all(
        isinstance(t, Mapping) and isinstance(t.get("data"), Mapping) for t in document)


@dataclass(frozen=True)
class AnswersFile:
    """An answers file, read and parsed once.

    Either a filled-in query file (``rows``: CSV, or JSON ending in ``.json``; ``key``
    is the column that identifies an item, ``"index"`` or ``"item"``) or, read with
    ``label_studio=True``, a Label Studio JSON export (``tasks``, see
    :func:`label_studio_answers`). :func:`check_answers` validates the rows.
    """

    path: Path
    key: str
    rows: list[_Row]
    tasks: list[Mapping[str, Any]] | None = None

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, key: str = "index", label_studio: bool = False) -> AnswersFile:
        """Read and parse ``path`` (UTF-8, a BOM is fine); a JSON list of tasks with ``data`` is a
        Label Studio export when ``label_studio``. Raises :class:`AnswerFileError` for a file
        that cannot be read or parsed at all."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise AnswerFileError(path, [AnswerProblem("", "the file does not exist")]) from None
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise AnswerFileError(path, [AnswerProblem(
                "", f"not UTF-8 text ({exc.reason} at byte {exc.start}){utf16_hint(raw)}")]) from None
        if path.suffix.lower() != ".json":
            return cls(path, key, _csv_rows(path, text, key))
        try:
            document = json.loads(text, parse_int=_json_int)
        except json.JSONDecodeError as exc:
            raise AnswerFileError(path, [AnswerProblem(f"line {exc.lineno}", f"malformed JSON ({exc.msg})")]) from None
        if label_studio and _is_label_studio(document):
            return cls(path, key, [], list(document))
        return cls(path, key, _json_rows(path, document, key))

    @property
    def is_label_studio(self) -> bool:
        return self.tasks is not None

    def round(self) -> int | None:
        """The round the file answers: its ``round`` column (if one value), else ``query-NNNN`` in its name."""
        rounds = {str(row.fields.get("round", "")).strip() for row in self.rows if _parse_index(row.index) is not None}
        rounds.discard("")
        found = _integer(next(iter(rounds))) if len(rounds) == 1 else None
        if found is not None and found >= 0:
            return found
        return round_in_name(self.path)

    def column(self, id: int, name: str) -> Any:
        """Column ``name`` of the row for ``id`` (``None`` when there is no such row or column)."""
        for row in self.rows:
            if _parse_index(row.index) == id:
                return row.fields.get(name)
        return None


def check_answers(
    file: AnswersFile,
    *,
    expected_indices: object,
    classes: Sequence[str],
    allow_partial: bool = False,
    also_allowed: Iterable[int] = (),
    describe_unknown: Callable[[int], str] | None = None,
    problems: list[AnswerProblem] | None = None,
    multilabel: bool = False,
) -> dict[int, int]:
    """Validate the rows of a parsed query file; return ``{id: class id}``.

    Args: as :func:`read_answers`'s (the file's ``key`` names the id column); with
    ``multilabel`` a label cell is a set of classes separated by ``|`` (``cat|dog``), and
    the answer is the bitmask of their ids (:func:`~activebayes.labelling.store.classes_mask`).
    """
    path, key, rows = file.path, file.key, file.rows
    class_names = tuple(str(c) for c in classes)
    if not class_names:
        raise InvalidArgumentError("classes must name at least one class")
    expected = set(as_index_tensor(expected_indices, "expected_indices").tolist())
    allowed = expected | {int(i) for i in also_allowed}

    found: list[AnswerProblem] = []
    answers: dict[int, int] = {}
    seen: dict[int, str] = {}
    first_label: dict[int, object] = {}
    for row in rows:
        if isinstance(row.index, _Malformed):
            found.append(AnswerProblem(row.where, row.index.reason))
            continue
        index = _parse_index(row.index)
        if index is None:
            what = "is too long to be an id" if _INTEGER.fullmatch(str(row.index).strip()) else "is not an integer"
            found.append(AnswerProblem(row.where, f"{key} {_shown(row.index)} {what}"))
            continue
        if index in seen:
            same = str(row.label).strip() == str(first_label[index]).strip()
            what = "is a duplicate" if same else f"is given twice with different labels ({_shown(first_label[index])} " \
                                                   f"and {_shown(row.label)})"
            found.append(AnswerProblem(row.where, f"{key} {index} {what} (first seen in {seen[index]})"))
            continue
        seen[index] = row.where
        first_label[index] = row.label
        if index not in allowed:
            reason = describe_unknown(index) if describe_unknown is not None else "was not queried (unknown id)"
            found.append(AnswerProblem(row.where, f"{key} {index} {reason}"))
            continue
        if _is_blank(row.label):
            if not allow_partial and index in expected:
                found.append(AnswerProblem(row.where, f"{key} {index} has no label", "allow_partial"))
            continue
        if multilabel:
            parts = [p for p in str(row.label).split(MULTILABEL_SEPARATOR) if p.strip()]
            resolved = [_resolve_label(p, class_names) for p in parts]
            if not parts:
                found.append(AnswerProblem(row.where, f"{key} {index}: a multi-label answer needs at least one "
                                                      "class, got none"))
                continue
            bad = next((p for p, r in zip(parts, resolved, strict=True) if r is None), None)
            if bad is None:
                answers[index] = classes_mask(r for r in resolved if r is not None)
                continue
            row = _Row(row.where, row.index, bad)
        label = _resolve_label(row.label, class_names)
        if label is None:
            shown = ", ".join(class_names) if len(class_names) <= 20 else ", ".join(class_names[:20]) + ", ..."
            expected_text = (f"the class names are numbers, so a number is read as a class name, never as an "
                             f"id: expected one of [{shown}]" if numbers_are_names(class_names) else
                             f"expected one of [{shown}] or an id 0..{len(class_names) - 1}")
            found.append(AnswerProblem(row.where, f"label {_shown(row.label)} for {key} {index} is not a class; "
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
    return check_answers(AnswersFile.read(path, key=key), expected_indices=expected_indices, classes=classes,
                         allow_partial=allow_partial, also_allowed=also_allowed,
                         describe_unknown=describe_unknown, problems=problems)


# --------------------------------------------------------------------------- export formats

EXPORT_COLUMNS = ("item", "key", "path", "sha256", "label", "label_id", "annotator", "time", "source", "round",
                  "present")

_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """``value`` made safe for a spreadsheet (CSV injection): a text cell that starts with
    ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and is not a plain number, gets a
    leading ``'`` so Excel, LibreOffice and Google Sheets show it as text instead of running
    it as a formula. Other values are returned unchanged.

    >>> csv_cell("=SUM(A1:A9)"), csv_cell("-1"), csv_cell("cat"), csv_cell(3)
    ("'=SUM(A1:A9)", '-1', 'cat', 3)
    """
    if isinstance(value, str) and value.startswith(_FORMULA_PREFIXES) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


#: the columns a table project's export adds after :data:`EXPORT_COLUMNS`: the item's text and
#: its feature cells (a JSON object in CSV); a multi-label project's JSON adds ``labels`` (a list)
CONTENT_COLUMNS = ("text", "fields")


def export_text(rows: Sequence[Mapping[str, Any]], fmt: str) -> str:
    """``rows`` (from :meth:`LabelStore.export_rows`, with a table project's :data:`CONTENT_COLUMNS`)
    as CSV or JSON text (CSV cells through :func:`csv_cell`; a ``fields`` mapping as JSON text)."""
    if fmt == "json":
        return json.dumps(list(rows), indent=1, ensure_ascii=False) + "\n"
    if fmt != "csv":
        raise InvalidArgumentError(f"fmt must be 'csv' or 'json', got {fmt!r}")
    columns = list(EXPORT_COLUMNS) + [c for c in CONTENT_COLUMNS if rows and c in rows[0]]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:  # text cells neutralised against formula injection (csv_cell); JSON keeps them as they are
        writer.writerow({k: _csv_value(row.get(k)) for k in columns})
    return buffer.getvalue()


def _csv_value(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):  # as JSON writes it
        return "true" if value else "false"
    if isinstance(value, Mapping | list):
        value = json.dumps(value, ensure_ascii=False)
    return csv_cell(value)


# --------------------------------------------------------------------------- Label Studio

LABEL_STUDIO_FROM_NAME = "label"
LABEL_STUDIO_TO_NAME = "image"
LABEL_STUDIO_TEXT_NAME = "text"


def label_studio_config(classes: Sequence[str], *, kind: str = "image", multilabel: bool = False) -> str:
    """The Label Studio labelling config (XML) that matches :func:`label_studio_tasks`: an
    ``<Image>`` (``kind="image"``) or a ``<Text>`` (``"text"``, ``"row"``: the row's fields as
    lines of text) with ``<Choices>``, ``choice="multiple"`` for a multi-label project."""
    choices = "\n".join(f'    <Choice value="{_xml_escape(c)}"/>' for c in classes)
    target = LABEL_STUDIO_TO_NAME if kind == "image" else LABEL_STUDIO_TEXT_NAME
    shown = (f'<Image name="{target}" value="$image"/>' if kind == "image"
             else f'<Text name="{target}" value="$text"/>')
    choice = "multiple" if multilabel else "single"
    return (f'<View>\n  {shown}\n'
            f'  <Choices name="{LABEL_STUDIO_FROM_NAME}" toName="{target}" choice="{choice}" showInline="true">\n'
            f"{choices}\n  </Choices>\n</View>\n")


def _task_text(row: Mapping[str, Any]) -> str:
    """A table item as Label Studio's ``data.text``: its text, then ``column: value`` lines."""
    lines = [str(row["text"])] if row.get("text") is not None else []
    lines += [f"{column}: {value}" for column, value in (row.get("fields") or {}).items()]
    return "\n".join(lines)


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def label_studio_tasks(rows: Sequence[Mapping[str, Any]], *,
                       image_prefix: str = "/data/local-files/?d=",
                       predictions: Mapping[int, tuple[str, float]] | None = None,
                       model_version: str = "activebayes") -> list[dict[str, Any]]:
    """Label Studio's JSON task format, one task per row of :meth:`LabelStore.export_rows`.

    Each task is ``{"id", "data": {"image", "activebayes_item", "activebayes_key",
    "activebayes_sha256"}, "annotations": [...]}`` (see
    https://labelstud.io/guide/task_format): ``data.image`` is ``image_prefix + key``
    (by default a Label Studio local-storage URL relative to its document root; pass
    the image folder as ``LOCAL_FILES_DOCUMENT_ROOT``), a labelled item carries one
    annotation whose ``result`` is a ``choices`` result (``from_name="label"``,
    ``to_name="image"``, :func:`label_studio_config`). A table project's rows (with
    :data:`CONTENT_COLUMNS`) give ``data.text`` instead of ``data.image`` and
    ``to_name="text"``; a multi-label row (``labels``) one choice per class. ``predictions`` (item ->
    (class name, score)) adds Label Studio pre-annotations.
    """
    tasks = []
    for row in rows:
        is_table = any(c in row for c in CONTENT_COLUMNS)
        shown = ({"text": _task_text(row)} if is_table
                 else {"image": image_prefix + urllib.parse.quote(str(row["key"]))})
        to_name = LABEL_STUDIO_TEXT_NAME if is_table else LABEL_STUDIO_TO_NAME
        task: dict[str, Any] = {
            "id": row["item"],
            "data": {
                **shown,
                "activebayes_item": row["item"],
                "activebayes_key": row["key"],
                "activebayes_sha256": row["sha256"],
            },
            "annotations": [],
        }
        if row.get("label"):
            names = row["labels"] if "labels" in row else [row["label"]]
            task["annotations"].append({
                "result": [_choice_result(names, to_name)],
                "was_cancelled": False,
                "ground_truth": False,
                "created_at": row.get("time") or None,
                "completed_by": row.get("annotator") or None,
            })
        if predictions and row["item"] in predictions:
            name, score = predictions[row["item"]]
            task["predictions"] = [{"model_version": model_version, "score": score,
                                    "result": [_choice_result([name], to_name)]}]
        tasks.append(task)
    return tasks


def _choice_result(names: Sequence[str], to_name: str) -> dict[str, Any]:
    return {"from_name": LABEL_STUDIO_FROM_NAME, "to_name": to_name, "type": "choices",
            "value": {"choices": list(names)}}


@dataclass(frozen=True)
class LabelStudioAnswers:
    """What :func:`read_label_studio` found: ``labels`` (item -> class id), the tasks
    without an annotation, and every problem (task number and reason)."""

    labels: dict[int, int]
    unannotated: int
    problems: list[str]


def _image_reference(value: str) -> str:
    """The file path a Label Studio ``data.image`` points at (``?d=`` of local storage, else the URL path)."""
    parsed = urllib.parse.urlparse(value)
    query = urllib.parse.parse_qs(parsed.query)
    if "d" in query:
        return query["d"][0]
    return urllib.parse.unquote(parsed.path or value)


def read_label_studio(path: str | os.PathLike[str], *, items: Sequence[Item],
                      classes: Sequence[str], multilabel: bool = False) -> LabelStudioAnswers:
    """Read a Label Studio JSON export (a list of tasks, or one task) into labels of ``items``
    (see :func:`label_studio_answers`)."""
    file = Path(path)
    try:
        tasks = json.loads(file.read_text(encoding="utf-8-sig"), parse_int=_json_int)
    except FileNotFoundError:
        raise MissingFileError(f"{file}: no such file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LabelStoreError(f"{file}: not a Label Studio JSON export ({error})") from None
    if isinstance(tasks, dict):
        tasks = [tasks]
    if not isinstance(tasks, list):
        raise LabelStoreError(f"{file}: expected a JSON list of Label Studio tasks, got {type(tasks).__name__}")
    return label_studio_answers(tasks, items=items, classes=classes, multilabel=multilabel)


def label_studio_answers(tasks: Sequence[Any], *, items: Sequence[Item], classes: Sequence[str],
                         multilabel: bool = False) -> LabelStudioAnswers:
    """The labels of ``items`` that Label Studio ``tasks`` (a parsed export) give.

    A task is matched to an item by ``data.activebayes_item`` + ``activebayes_sha256``
    (tasks this module wrote), else by its image reference (``data.image``: the ``d``
    parameter of a local-storage URL, else the URL's path): the item whose key is the
    longest suffix of it, else the unique item with the same file name (Label Studio
    prefixes uploads with 8 hex digits and ``-``, which is ignored). The label is the
    single ``choices`` value of the task's latest annotation that was not cancelled; with
    ``multilabel`` the set of its ``choices`` values (one or more), as the bitmask of their
    class ids (:func:`~activebayes.labelling.store.classes_mask`).
    """
    by_id = {it.id: it for it in items}
    by_key = {it.key: it for it in items}
    by_name: dict[str, list[Item]] = {}
    for it in items:
        by_name.setdefault(Path(it.key).name, []).append(it)
    names = [str(c) for c in classes]
    labels: dict[int, int] = {}
    seen: dict[int, int] = {}
    problems: list[str] = []
    unannotated = 0
    for number, task in enumerate(tasks):
        where = f"task {number}" + (f" (id {_shown(task['id'])})" if isinstance(task, dict) and "id" in task else "")
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            problems.append(f"{where}: not a Label Studio task (an object with 'data')")
            continue
        data = task["data"]
        item = None
        own = data.get("activebayes_item")
        if isinstance(own, int) and own in by_id and by_id[own].sha256 == data.get("activebayes_sha256"):
            item = by_id[own]
        else:
            reference = next((v for k, v in data.items() if k == "image" and isinstance(v, str)), None)
            if reference is None:
                reference = next((v for v in data.values() if isinstance(v, str)), None)
            if reference is None:
                problems.append(f"{where}: data has no image reference")
                continue
            ref = _image_reference(reference).lstrip("/")
            suffixes = [it for key, it in by_key.items() if ref == key or ref.endswith("/" + key)]
            if suffixes:
                item = max(suffixes, key=lambda it: len(it.key))
            else:
                name = Path(ref).name
                candidates = by_name.get(name, [])
                if not candidates and len(name) > 9 and name[8] == "-" and all(c in "0123456789abcdef" for c in name[:8]):
                    candidates = by_name.get(name[9:], [])
                if len(candidates) == 1:
                    item = candidates[0]
                elif len(candidates) > 1:
                    problems.append(f"{where}: image {reference!r} matches {len(candidates)} items by file name; "
                                    "export from activebayes to keep item ids")
                    continue
            if item is None:
                problems.append(f"{where}: image {reference!r} is not an item of this project")
                continue
        annotations = [a for a in task.get("annotations") or task.get("completions") or []
                       if isinstance(a, dict) and not a.get("was_cancelled")]
        if not annotations:
            unannotated += 1
            continue
        choices = [c for r in annotations[-1].get("result", []) if isinstance(r, dict) and r.get("type") == "choices"
                   for c in (r.get("value") or {}).get("choices", [])]
        if len(choices) != 1 and not (multilabel and choices):
            wanted = "one choice or more" if multilabel else "one choice"
            problems.append(f"{where}: expected {wanted} in its latest annotation, got {choices}")
            continue
        unknown = [c for c in choices if c not in names]
        if unknown:
            problems.append(f"{where}: choice {unknown[0]!r} is not a class; expected one of [{', '.join(names)}]")
            continue
        label = classes_mask(names.index(c) for c in choices) if multilabel else names.index(choices[0])
        if item.id in seen and labels.get(item.id) != label:
            problems.append(f"{where}: item {item.key} is also in task {seen[item.id]} with another label")
            continue
        seen[item.id] = number
        labels[item.id] = label
    return LabelStudioAnswers(labels, unannotated, problems)
