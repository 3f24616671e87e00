r"""Table and text pools: CSV, JSONL or Parquet rows as an :class:`ArrayDataset` of feature vectors.

:func:`load_table` reads a file (or takes a list of dicts from Python) and turns each
row into one item:

- a **text** item (``text_column``): the text is encoded once by an encoder
  (:mod:`activebayes.data.text`; TF-IDF + SVD offline by default, or a local model
  directory), cached by content;
- a **tabular** item (``feature_columns``): numeric columns are standardised,
  ``x' = (x - μ) / σ`` with ``μ``, ``σ`` the pool's column mean and (population)
  standard deviation (``σ = 1`` for a constant column), and categorical columns (any
  column with a value that is not a number, or one named in ``categorical_columns``)
  are one-hot encoded over their sorted values. The statistics are kept in
  :attr:`TablePool.preprocessing` (JSON) so a run can store them and
  :meth:`TablePreprocessor.from_dict` applies the same transform to new rows.

Both can be combined (text features first). Features are finally centred and scaled
so the MLP sees inputs of unit scale: the tabular ones per dimension, the text ones by
one common scale (:func:`~activebayes.data.text.embedding_scale`), which keeps the
embedding's relative variances (an SVD's noisy last components stay small).

**Missing values** (an empty CSV cell, a JSON ``null`` or missing key, a Parquet null)
raise a one-line error naming the row and the column by default (``missing="error"``).
With ``missing="impute"`` a numeric cell takes the column's mean over the rows that
have it (0 after standardisation) and a categorical cell the extra category
``"<missing>"``; the imputed columns are listed in the preprocessing record. A cell
is never silently NaN: ``nan`` / ``inf`` written in the file are errors too.

**Labels** (``label_column``): known labels make a simulation (the dataset's
``targets``); without the column the pool is unlabelled (a real project). A label
must be one of ``classes`` when those are given (else the sorted set of labels
found). ``multilabel=True`` reads each cell as a set of classes separated by
``label_separator`` (or a JSON list in JSONL / Parquet) into 0/1 indicators
``targets_N_C`` (:attr:`TablePool.targets_N_C`); an empty set is an error.

**Identity**: each item keeps a stable id, never its row position: the value of
``id_column`` (ids must be unique), or else ``"sha256:"`` + the first 16 hex digits
of the sha256 of the row's input content (the text, or the feature columns as
canonical JSON; the label is not part of it), with ``"~2"``, ``"~3"``, ... appended
to the second, third, ... copy of identical content. Such copies are told apart only by
their order, so identical rows with different labels give a warning: give them an id column.

Example:
    >>> pool = load_table([{"x": 1.0, "colour": "red", "y": "a"}, {"x": 3.0, "colour": "blue", "y": "b"}],
    ...                   feature_columns=["x", "colour"], label_column="y")
    >>> pool.dataset.inputs.shape, pool.dataset.classes, pool.dataset.targets.tolist()
    (torch.Size([2, 3]), ('a', 'b'), [0, 1])
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from activebayes._io import is_text_path, utf16_hint
from activebayes.errors import InvalidArgumentError, InvalidTypeError, MissingFileError

from ._core import DataError
from .dataset import ArrayDataset
from .lazy import LazyInputs
from .text import DEFAULT_MMAP_BYTES, TextEncoder, embedding_scale, encode_texts, get_encoder

__all__ = [
    "TablePool",
    "TablePreprocessor",
    "FeatureMemmapInputs",
    "load_table",
    "read_table_rows",
    "row_content_sha256",
    "check_table_file",
    "resolve_feature_columns",
    "MISSING_CATEGORY",
]

#: The category an imputed categorical cell gets (``missing="impute"``).
MISSING_CATEGORY = "<missing>"
_MISSING_POLICIES = ("error", "impute")
_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


# ----------------------------------------------------------------------------- reading


def check_table_file(path: str | os.PathLike[str]) -> Path:
    """``path`` expanded, or a :class:`MissingFileError` when it names no file (checked first,
    where a run or project folder named after the file could otherwise be blamed)."""
    expanded = Path(path).expanduser()
    if not expanded.is_file():
        raise MissingFileError(f"table (--table): no such file {path}")
    if not is_text_path(expanded.resolve()):  # stored in the run's config and report
        raise InvalidArgumentError(f"table (--table): {os.fsencode(expanded.resolve())!r}: its path is not UTF-8 text: "
                                   "rename it or move it to a folder whose path is (paths are stored as text)")
    return expanded


def read_table_rows(path: str | os.PathLike[str], *, format: str | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """``(columns, rows)`` of a CSV / TSV (UTF-8, header row), JSONL (one object per line) or Parquet file.

    CSV cells are strings (an empty cell is ``None``); JSONL and Parquet keep their
    types. Raises a one-line :class:`DataError` naming the line for a file that is
    not UTF-8, a malformed line or a row with more cells than the header.
    """
    path = check_table_file(path)
    kind = format or _FORMATS.get(path.suffix.lower())
    if kind not in ("csv", "tsv", "jsonl", "parquet"):
        raise InvalidArgumentError(f"table {path}: unknown format {path.suffix!r}; expected one of "
                                   f"{', '.join(sorted(_FORMATS))}: rename the file (from Python: format=)")
    if kind == "parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise InvalidArgumentError(f"table {path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises its own types for corrupt files
            raise DataError(f"table {path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        return list(table.column_names), table.to_pylist()
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataError(f"table {path}: line {line} is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte "
                        f"{column} of the line, file offset {exc.start}); save the file as UTF-8{utf16_hint(raw)}") from None
    if kind == "jsonl":
        rows: list[dict[str, Any]] = []
        columns: dict[str, None] = {}
        # lines end at \n only: str.splitlines also breaks at U+2028, U+0085, ..., which JSON
        # writers (ensure_ascii=False) leave unescaped inside strings
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"table {path}: line {number} is not valid JSON ({exc.msg}: column {exc.colno})"
                                ) from None
            if not isinstance(row, dict):
                raise DataError(f"table {path}: line {number} must be a JSON object, got {type(row).__name__}")
            rows.append(row)
            columns.update(dict.fromkeys(row))
        return list(columns), rows
    # a cell may be as long as the file (the csv module's default limit, 131,072 characters, is
    # not a property of CSV: a long document in a cell is data)
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    try:  # strict first, for the one error lenient parsing hides: a quote never closed
        return _read_csv(path, text, kind, strict=True)
    except csv.Error:  # other strict complaints ('"x"y') are read leniently, as spreadsheets do
        return _read_csv(path, text, kind, strict=False)


def _read_csv(path: Path, text: str, kind: str, *, strict: bool) -> tuple[list[str], list[dict[str, Any]]]:
    """:func:`read_table_rows` of a CSV / TSV text; ``strict``: raise :class:`csv.Error` on
    malformed quoting (an unterminated quote is a :class:`DataError` naming the line it opens on)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if kind == "tsv" else ",", strict=strict)
    start = 1  # the line the record being read starts on
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"table {path}: the file is empty (expected a header row)")
        header = [h.strip() for h in header]
        if len(set(header)) != len(header):
            dup = next(h for h in header if header.count(h) > 1)
            raise DataError(f"table {path}: column {dup!r} appears twice in the header")
        rows = []
        start = reader.line_num + 1
        for cells in reader:
            if cells and not (len(cells) == 1 and not cells[0].strip()):
                if len(cells) > len(header):
                    raise DataError(f"table {path}: line {start} has {len(cells)} cells, the header "
                                    f"{len(header)}")
                rows.append({h: (c if c.strip() else None) for h, c in zip(header, cells, strict=False)})
            start = reader.line_num + 1
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise DataError(f"table {path}: line {start}: a quoted cell opened on this line is never closed "
                            "(a \" without its closing \"), so every line after it would be read into that cell"
                            ) from None
        if strict:
            raise
        raise DataError(f"table {path}: line {start}: {exc}") from None
    return header, rows


# ----------------------------------------------------------------------------- tabular features


def _where(source: str, row: int, column: str) -> str:
    return f"{source}: row {row}, column {column!r}"


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _as_number(value: object) -> float | None:
    """The finite number a cell holds, or ``None`` when it is not a number."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | np.integer | np.floating):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _short(value: object, limit: int = 60) -> str:
    text = json.dumps(value, default=str) if isinstance(value, list | tuple | dict) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _label_set(value: object, separator: str, where: str, *, known: Sequence[str] = ()) -> list[str]:
    """The class names of one multi-label cell: a list of names (JSONL / Parquet), or one string
    of names separated by ``separator`` (CSV). Blank names are skipped (``a||b`` is ``a, b``).

    Anything else is an error naming the cell: a list holding a number, bool, ``null``, list or
    object (a 0/1 indicator vector like ``[1, 0, 1]`` is not read as one: it would silently make
    classes ``'0'`` and ``'1'``), an object, a bare number, or a string that looks like a list
    (``"[1,0,1]"``, ``"['a', 'b']"``; unless it is one of the ``known`` classes)."""
    expected = (f"expected a list of class names (JSONL / Parquet, e.g. [\"a\", \"b\"]) or class names "
                f"separated by {separator!r} (e.g. a{separator}b)")
    if value is None:
        return []
    if isinstance(value, list | tuple):
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            what = "null" if bad[0] is None else f"{type(bad[0]).__name__} {_short(bad[0])}"
            indicators = all(isinstance(v, int | float) and v in (0, 1) for v in value)
            note = "; a 0/1 indicator vector is not read: list the names of the classes the row carries" \
                if indicators else ""
            raise DataError(f"{where}: {expected}, got {what} in the list {_short(value)}{note}")
        return [v.strip() for v in value if v.strip()]
    if not isinstance(value, str):
        raise DataError(f"{where}: {expected}, got {type(value).__name__} {_short(value)}")
    text = value.strip()
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]" and text not in known:
        raise DataError(f"{where}: {expected}, got the text {_short(text)}, which looks like a list: a cell is "
                        f"not parsed as JSON; write {separator!r}-separated names, or pass classes= (--classes a,b,...) "
                        "when a class name is written in brackets")
    return [v.strip() for v in text.split(separator) if v.strip()]


def _warn_if_sets(source: str, column: str, labels: Sequence[str], separator: str) -> None:
    """Warn when single-label class names read like sets of classes (``politics|science``): the
    file was probably meant for ``multilabel=True``. Only when the names show it: a combined name
    whose every part is also a class on its own, or a part found at two different places
    (``politics|science``, ``science|sport``); a hierarchy such as ``Electronics|Phones`` does
    not trigger it."""
    names = set(labels)
    split = {name: [p.strip() for p in name.split(separator)] for name in names if separator in name}
    if not split:
        return
    singles = names - set(split)
    positions: dict[str, set[int]] = {}
    for parts in split.values():
        for i, part in enumerate(parts):
            positions.setdefault(part, set()).add(i)
    if not (any(all(p in singles for p in parts) for parts in split.values())
            or any(len(at) > 1 for at in positions.values())):
        return
    example = sorted(split)[0]
    n_rows = sum(separator in label for label in labels)
    import warnings

    warnings.warn(f"{source}: column {column!r}: {n_rows} of {len(labels)} labels look like sets of classes "
                  f"separated by {separator!r} (e.g. {example!r}), but the table is read as single-label, so "
                  f"each combination is a class of its own ({len(names)} classes); for several classes per row "
                  "pass multilabel=True (--multilabel)", UserWarning, stacklevel=3)


class DuplicateRowsWarning(UserWarning):
    """Rows of identical content carry different labels, told apart only by their order."""


class UninformativeColumnWarning(UserWarning):
    """A categorical feature column has a different value in nearly every row (a text or an id)."""


#: A categorical column with more than this fraction of distinct values, over at least
#: :data:`_MIN_ROWS_FOR_DISTINCT_CHECK` rows, is warned about (a text or an id, not a category).
_MOSTLY_DISTINCT = 0.9
_MIN_ROWS_FOR_DISTINCT_CHECK = 20


def _warn_if_mostly_distinct(source: str, prep: TablePreprocessor, n_rows: int) -> None:
    """Warn, once per column, when a one-hot column has a different value in nearly every row:
    its categories are each seen about once, so the model learns nothing from them."""
    import warnings

    if n_rows < _MIN_ROWS_FOR_DISTINCT_CHECK:
        return
    for column, categories in prep.categorical.items():
        distinct = len(categories) - (column in prep.impute)  # the values found, not the imputed category
        if distinct <= _MOSTLY_DISTINCT * n_rows:
            continue
        warnings.warn(f"{source}: column {column!r} has a different value in {distinct} of {n_rows} rows: as a "
                      f"category it tells the model nothing; a text column? text_column={column!r} "
                      f"(--text-column {column}); an id? id_column={column!r} (--id-column {column})",
                      UninformativeColumnWarning, stacklevel=3)


def _warn_if_copies_disagree(source: str, column: str, ids: Sequence[str], answers: Sequence[Sequence[str]]) -> None:
    """Warn when rows of identical content (told apart only by their order: ``X``, ``X~2``) carry
    different labels: reordering the file would then swap their labels."""
    rows_of: dict[str, list[int]] = {}
    for n, item in enumerate(ids, start=1):
        rows_of.setdefault(item.split("~", 1)[0], []).append(n)
    clashes = [rows for rows in rows_of.values()
               if len(rows) > 1 and len({tuple(sorted(answers[n - 1])) for n in rows}) > 1]
    if not clashes:
        return
    rows = clashes[0]
    shown = ", ".join(f"row {n}: {'|'.join(answers[n - 1])!r}" for n in rows[:3])
    import warnings

    warnings.warn(f"{source}: column {column!r}: {len(clashes)} group(s) of rows have identical content but "
                  f"different labels ({shown}); without an id column such copies are told apart only by their "
                  "order, so reordering the file would swap their labels: give each row an id (id_column, "
                  "--id-column)", DuplicateRowsWarning, stacklevel=3)


#: a feature column whose cells are numbers but for at most this share is refused, naming the
#: first cell that is not one, instead of being one-hot encoded (a typo, an "NA")
NUMERIC_STRAYS = 0.1


@dataclass
class TablePreprocessor:
    """The fitted transform of feature columns: standardised numbers, one-hot categories.

    Attributes:
        numeric: ``{column: (mean, std)}``.
        categorical: ``{column: [category, ...]}`` (sorted; one output column each).
        impute: the columns whose missing cells were imputed (``missing="impute"``).
        columns: the feature columns in output order.
    """

    numeric: dict[str, tuple[float, float]]
    categorical: dict[str, list[str]]
    impute: list[str]
    columns: list[str]
    missing: str = "error"

    @classmethod
    def fit(cls, rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *, categorical_columns: Sequence[str] = (),
            missing: str = "error", source: str = "table", row_numbers: Sequence[int] | None = None) -> TablePreprocessor:
        if missing not in _MISSING_POLICIES:
            raise InvalidArgumentError(f"missing must be one of {', '.join(_MISSING_POLICIES)}, got {missing!r}")
        numbers = row_numbers or range(1, len(rows) + 1)
        numeric: dict[str, tuple[float, float]] = {}
        categorical: dict[str, list[str]] = {}
        impute: list[str] = []
        for column in columns:
            values = [row.get(column) for row in rows]
            present = [(n, v) for n, v in zip(numbers, values, strict=True) if not _is_missing(v)]
            if len(present) < len(values):
                if missing == "error":
                    n = next(n for n, v in zip(numbers, values, strict=True) if _is_missing(v))
                    raise DataError(f"{_where(source, n, column)}: missing value; fill it in or pass "
                                    "missing='impute' (--missing impute: the column's mean for numbers, a "
                                    "'<missing>' category otherwise)")
                impute.append(column)
            if not present:
                raise DataError(f"{source}: column {column!r} has no value in any row")
            parsed = [_as_number(v) for _, v in present]
            strays = [(n, v) for (n, v), p in zip(present, parsed, strict=True) if p is None]
            if column not in categorical_columns and strays and len(strays) <= NUMERIC_STRAYS * len(present):
                # a number column with a typo or a missing-value marker ("NA", "-"): one-hot encoding it
                # would silently turn every number into a category of its own
                n, value = strays[0]
                raise DataError(f"{_where(source, n, column)}: expected a number ({len(present) - len(strays)} "
                                f"of the column's {len(present)} values are), got {_short(value)}"
                                f"{f' (and {len(strays) - 1} more)' if len(strays) > 1 else ''}; correct it, "
                                "leave it empty for a missing value, or list the column in categorical_columns "
                                "(table_options) to one-hot encode its values")
            if column not in categorical_columns and not strays:
                for (n, _), p in zip(present, parsed, strict=True):
                    if not math.isfinite(p):
                        raise DataError(f"{_where(source, n, column)}: {p} is not a finite number")
                array = np.array(parsed, dtype=np.float64)
                std = float(array.std())
                numeric[column] = (float(array.mean()), std if std > 0 else 1.0)
            else:
                categories = sorted({str(v).strip() for _, v in present})
                if column in impute:
                    categories.append(MISSING_CATEGORY)
                categorical[column] = categories
        return cls(numeric, categorical, impute, list(columns), missing)

    @property
    def dim(self) -> int:
        """Output width: one per numeric column plus one per category."""
        return len(self.numeric) + sum(len(c) for c in self.categorical.values())

    def transform(self, rows: Sequence[Mapping[str, Any]], *, source: str = "table",
                  row_numbers: Sequence[int] | None = None) -> np.ndarray:
        """Float32 ``[N, dim]``; a missing cell of a column not fitted with imputation, a
        non-number in a numeric column or an unseen category raises :class:`DataError`."""
        numbers = row_numbers or range(1, len(rows) + 1)
        out = np.zeros((len(rows), self.dim), dtype=np.float32)
        col = 0
        for column in self.columns:
            if column in self.numeric:
                mean, std = self.numeric[column]
                for i, (n, row) in enumerate(zip(numbers, rows, strict=True)):
                    value = row.get(column)
                    if _is_missing(value):
                        if column not in self.impute:
                            raise DataError(f"{_where(source, n, column)}: missing value")
                        continue  # the mean: 0 after standardisation
                    number = _as_number(value)
                    if number is None or not math.isfinite(number):
                        raise DataError(f"{_where(source, n, column)}: expected a finite number, got {value!r}")
                    out[i, col] = (number - mean) / std
                col += 1
            else:
                categories = self.categorical[column]
                index = {c: j for j, c in enumerate(categories)}
                for i, (n, row) in enumerate(zip(numbers, rows, strict=True)):
                    value = row.get(column)
                    if _is_missing(value):
                        if column not in self.impute:
                            raise DataError(f"{_where(source, n, column)}: missing value")
                        key = MISSING_CATEGORY
                    else:
                        key = str(value).strip()
                    if key not in index:
                        raise DataError(f"{_where(source, n, column)}: category {key!r} was not seen when the "
                                        f"transform was fitted (known: {', '.join(categories[:10])})")
                    out[i, col + index[key]] = 1.0
                col += len(categories)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "numeric": {k: list(v) for k, v in self.numeric.items()},
                "categorical": self.categorical, "impute": self.impute, "missing": self.missing}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TablePreprocessor:
        return cls({k: (float(v[0]), float(v[1])) for k, v in data["numeric"].items()},
                   {k: list(v) for k, v in data["categorical"].items()}, list(data["impute"]),
                   list(data["columns"]), str(data.get("missing", "error")))


# ----------------------------------------------------------------------------- memory-mapped features


class FeatureMemmapInputs(LazyInputs):
    """Rows of a float32 ``.npy`` feature file ``[N, D]``, memory-mapped, standardised per read:
    ``(x - mean_D) / std_D``."""

    def __init__(self, path: str | os.PathLike[str], mean_D: np.ndarray, std_D: np.ndarray) -> None:
        self.path = Path(path)
        array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        if array.dtype != np.float32 or array.ndim != 2:
            raise DataError(f"{self.path}: expected float32 features [N, D], got {array.dtype} {array.shape}")
        super().__init__(tuple(array.shape))
        self.mean_D = np.asarray(mean_D, dtype=np.float32)
        self.std_D = np.asarray(std_D, dtype=np.float32)
        self._array: np.ndarray | None = array

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            self._array = np.load(self.path, mmap_mode="r", allow_pickle=False)
        return self._array

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_array": None}

    def _read(self, rows: np.ndarray) -> Tensor:
        return torch.from_numpy((np.asarray(self.array[rows]) - self.mean_D) / self.std_D)

    def _read_range(self, start: int, stop: int) -> Tensor:
        return torch.from_numpy((np.array(self.array[start:stop]) - self.mean_D) / self.std_D)


def _column_stats(features: np.ndarray, chunk: int = 65536) -> tuple[np.ndarray, np.ndarray]:
    """Per-column mean and population std in float64, streamed (works on a memmap)."""
    total = np.zeros(features.shape[1])
    square = np.zeros(features.shape[1])
    for start in range(0, features.shape[0], chunk):
        block = np.asarray(features[start : start + chunk], dtype=np.float64)
        total += block.sum(0)
        square += (block**2).sum(0)
    n = max(features.shape[0], 1)
    mean = total / n
    std = np.sqrt(np.maximum(square / n - mean**2, 0.0))
    return mean, np.where(std > 1e-12, std, 1.0)


# ----------------------------------------------------------------------------- the pool


@dataclass(frozen=True)
class TablePool:
    """A table or text pool ready for the loop.

    Attributes:
        dataset: the :class:`ArrayDataset`: float32 feature vectors ``[N, D]`` (in memory,
            or :class:`FeatureMemmapInputs` for big text pools), the known labels as
            ``targets`` (``[N]``, or 0/1 indicators ``[N, C]`` for ``multilabel=True``) or
            ``None``, and the rows' :attr:`item_ids`.
        item_ids: the stable id of every row (see the module docstring), ``len == N``.
        kind: ``"text"``, ``"table"`` or ``"text+table"``.
        texts: the texts (text pools), else ``None``.
        targets_N_C: for ``multilabel=True`` with labels: int64 0/1 indicators ``[N, C]``.
        multilabel: whether the labels are sets of classes.
        preprocessing: JSON-able record of the transform (encoder fingerprint, feature
            statistics, final standardisation): store it with the run.
        feature_columns: the feature columns read, in order (``"*"`` resolved to the names).
        text_column: the column the texts were read from (text pools), else ``None``.
        text_encoder: the text encoder (text pools), for :meth:`transform`.
    """

    dataset: ArrayDataset
    item_ids: tuple[str, ...]
    kind: str
    texts: tuple[str, ...] | None
    targets_N_C: Tensor | None
    multilabel: bool
    preprocessing: dict[str, Any]
    feature_columns: tuple[str, ...] = ()
    text_column: str | None = None
    text_encoder: Any = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.dataset)

    def transform(self, rows: Sequence[Mapping[str, Any]], *, source: str = "rows") -> Tensor:
        """The model's inputs ``[n, D]`` (float32) for new rows with the pool's columns: the
        pool's whole transform, as its own rows went through it.

        The text column is encoded by the pool's encoder fitted on the pool's texts
        (:func:`~activebayes.data.text.encode_texts` with ``fit_texts``), the feature columns
        by the pool's :class:`TablePreprocessor` (``preprocessing["table"]``), and the joined
        vector standardised with the pool's statistics (``preprocessing["standardize"]``).
        A missing or empty text, a missing cell (unless imputed), a non-number in a numeric
        column or an unseen category raises :class:`DataError` naming the row and column.

        Example:
            >>> pool = load_table([{"x": 1.0, "c": "a"}, {"x": 3.0, "c": "b"}], feature_columns=["x", "c"])
            >>> torch.equal(pool.transform([{"x": 1.0, "c": "a"}]), pool.dataset.inputs[:1])
            True
        """
        if isinstance(rows, Mapping) or not isinstance(rows, Sequence) or not rows:
            raise InvalidArgumentError(f"rows must be a non-empty sequence of rows (mappings of column to value), "
                                       f"got {type(rows).__name__}")
        numbers = range(1, len(rows) + 1)
        blocks = []
        if self.text_column is not None:
            texts = []
            for n, row in zip(numbers, rows, strict=True):
                value = row.get(self.text_column)
                where = _where(source, n, self.text_column)
                if value is not None and not isinstance(value, str):
                    raise DataError(f"{where}: expected a text, got {type(value).__name__}")
                if _is_missing(value):
                    raise DataError(f"{where}: empty text")
                texts.append(value)
            if self.texts is None or self.text_encoder is None:
                raise InvalidArgumentError("this pool keeps no text encoder to encode new texts with")
            blocks.append(encode_texts(texts, self.text_encoder, fit_texts=self.texts))
        if self.feature_columns:
            prep = TablePreprocessor.from_dict(self.preprocessing["table"])
            blocks.append(prep.transform(rows, source=source))
        x_n_D = np.concatenate(blocks, axis=1) if len(blocks) > 1 else blocks[0]
        mean_D = np.asarray(self.preprocessing["standardize"]["mean"], dtype=np.float64)
        std_D = np.asarray(self.preprocessing["standardize"]["std"], dtype=np.float64)
        return torch.from_numpy(((x_n_D - mean_D) / std_D).astype(np.float32))

    def index_of(self, item_id: str) -> int:
        """The row of item ``item_id`` in :attr:`dataset`."""
        try:
            return self._index[item_id]
        except KeyError:
            raise InvalidArgumentError(f"no item with id {item_id!r} in this pool") from None

    @property
    def _index(self) -> dict[str, int]:
        cache = self.__dict__.get("_index_cache")
        if cache is None:
            cache = {item: i for i, item in enumerate(self.item_ids)}
            object.__setattr__(self, "_index_cache", cache)
        return cache


#: ``feature_columns="*"``: every column but the text, label and id columns
ALL_OTHER_COLUMNS = "*"


def _columns_arg(value: str | Sequence[str] | None, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [c.strip() for c in value.split(",") if c.strip()]
    if not all(isinstance(c, str) for c in value):
        raise InvalidTypeError(f"{name} must be column names (str), got {value!r}")
    return list(value)


def resolve_feature_columns(feature_columns: str | Sequence[str] | None, columns: Sequence[str], *,
                            exclude: Sequence[str | None] = ()) -> list[str]:
    """``feature_columns`` as a list of names, ``"*"`` (:data:`ALL_OTHER_COLUMNS`, unless the
    table has a column of that name) meaning every column of ``columns`` but those in
    ``exclude`` (the text, label and id columns). Names are not checked against the table here."""
    features = _columns_arg(feature_columns, "feature_columns")
    if features == [ALL_OTHER_COLUMNS] and ALL_OTHER_COLUMNS not in columns:
        return [c for c in columns if c not in exclude]
    return features


def row_content_sha256(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """Hex SHA-256 of a row's input content: the cells of ``columns`` as canonical JSON
    (``[[column, text or null], ...]``), the content a row's default id is made from."""
    content = json.dumps([[c, None if _is_missing(row.get(c)) else str(row.get(c))] for c in columns],
                         ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def load_table(
    table: str | os.PathLike[str] | Sequence[Mapping[str, Any]],
    *,
    text_column: str | None = None,
    feature_columns: str | Sequence[str] | None = None,
    label_column: str | None = None,
    id_column: str | None = None,
    categorical_columns: str | Sequence[str] | None = None,
    classes: Sequence[str] | None = None,
    multilabel: bool = False,
    label_separator: str = "|",
    encoder: str | os.PathLike[str] | TextEncoder | None = None,
    missing: str = "error",
    cache_dir: str | os.PathLike[str] | None = None,
    mmap_bytes: int = DEFAULT_MMAP_BYTES,
    name: str | None = None,
    format: str | None = None,
) -> TablePool:
    """Read a table (a file, or a list of dicts) into a :class:`TablePool` (see the module docstring).

    Args:
        table: a ``.csv`` / ``.tsv`` / ``.jsonl`` / ``.parquet`` file, or rows as dicts.
        text_column: the column holding each item's text.
        feature_columns: columns of tabular features (a list, or ``"a,b,c"``); ``"*"``: every
            column but ``text_column``, ``label_column`` and ``id_column``.
        label_column: the known label of each row (simulation); ``None``: unlabelled.
        id_column: a column of unique row ids; default: a hash of the row's content.
        categorical_columns: feature columns to one-hot even when they hold numbers.
        classes: the class names, in order; default: the sorted labels found.
        multilabel: each label cell is a set of classes.
        label_separator: separates the classes of a multi-label cell (strings).
        encoder: text encoder: ``"tfidf"`` (default), ``"hashing"``, a local model
            directory, or a :class:`~activebayes.data.text.TextEncoder`.
        missing: ``"error"`` (default) or ``"impute"`` (see the module docstring).
        cache_dir: cache text features here (by content); ``None``: no cache.
        mmap_bytes: cached text features larger than this stay memory-mapped.
        name: the dataset's name (default: the file's stem, or ``"table"``).
        format: the file format when its suffix does not say it.

    Every bad input raises a one-line error naming the row and the column: a named
    column the table lacks, an empty text, a missing value, a label not among the
    classes, an empty multi-label answer, an id used twice.
    """
    if isinstance(table, str | os.PathLike):
        source = str(table)
        columns, rows = read_table_rows(table, format=format)
        default_name = Path(table).stem
    elif isinstance(table, Sequence) and all(isinstance(r, Mapping) for r in table):
        source, rows, default_name = "table", [dict(r) for r in table], "table"
        columns = list(dict.fromkeys(k for r in rows for k in r))
    else:
        raise InvalidTypeError(f"table must be a file path or a list of dicts, got {type(table).__name__}")
    if not rows:
        raise DataError(f"{source}: the table has no rows")
    wanted = _columns_arg(feature_columns, "feature_columns")
    features = resolve_feature_columns(wanted, columns, exclude=(text_column, label_column, id_column))
    if wanted == [ALL_OTHER_COLUMNS] and not features:
        raise InvalidArgumentError(f"{source}: feature_columns '*' found no column besides the text, label "
                                   f"and id columns (columns: {', '.join(map(str, columns))})")
    categorical = _columns_arg(categorical_columns, "categorical_columns")
    if text_column is None and not features:
        raise InvalidArgumentError("give text_column (--text-column) and/or feature_columns (--feature-columns)")
    if encoder is not None and text_column is None:  # it would be silently unused
        raise InvalidArgumentError(f"{source}: encoder (--encoder) encodes the text column, but no text_column "
                                   "(--text-column) was given: feature columns are used as they are")
    named = {"text_column": [text_column] if text_column else [], "feature_columns": features,
             "label_column": [label_column] if label_column else [], "id_column": [id_column] if id_column else [],
             "categorical_columns": categorical}
    for argument, names in named.items():
        for column in names:
            if column not in columns:
                flag = "--" + argument.replace("_", "-")
                raise InvalidArgumentError(f"{source}: {argument} ({flag}) {column!r} is not a column of the table "
                                           f"(columns: {', '.join(map(str, columns))})")
    if label_column is not None and label_column in features + ([text_column] if text_column else []):
        raise InvalidArgumentError(f"{source}: label_column (--label-column) {label_column!r} must not also be an "
                                   "input column")
    for argument, column in (("text_column (--text-column)", text_column), ("id_column (--id-column)", id_column)):
        if column is not None and column in features:  # read twice, or an id read as a feature
            raise InvalidArgumentError(f"{source}: feature_columns (--feature-columns) must not name the "
                                       f"{argument.split(' ')[0]} {column!r}, given as {argument}")
    for column in categorical:
        if column not in features:
            raise InvalidArgumentError(f"categorical_columns: {column!r} is not one of the feature_columns")
    row_numbers = list(range(1, len(rows) + 1))

    # identity
    input_columns = ([text_column] if text_column else []) + features
    hashes = [row_content_sha256(row, input_columns) for row in rows]
    if id_column is not None:
        seen: dict[str, int] = {}
        ids = []
        for n, row in zip(row_numbers, rows, strict=True):
            value = row.get(id_column)
            if _is_missing(value):
                raise DataError(f"{_where(source, n, id_column)}: missing id")
            item = str(value).strip()
            if item in seen:
                raise DataError(f"{_where(source, n, id_column)}: id {item!r} is used twice (rows {seen[item]} "
                                f"and {n}); ids must be unique")
            seen[item] = n
            ids.append(item)
    else:
        counts: dict[str, int] = {}
        ids = []
        for content in hashes:
            base = "sha256:" + content[:16]
            counts[base] = counts.get(base, 0) + 1
            ids.append(base if counts[base] == 1 else f"{base}~{counts[base]}")

    # labels
    targets = targets_N_C = None
    class_names: tuple[str, ...] = tuple(str(c) for c in classes) if classes is not None else ()
    if label_column is not None:
        answers: list[list[str]] = []
        for n, row in zip(row_numbers, rows, strict=True):
            value = row.get(label_column)
            where = _where(source, n, label_column)
            if multilabel:
                labels = _label_set(value, label_separator, where, known=class_names if classes is not None else ())
                if not labels:
                    raise DataError(f"{where}: a multi-label answer needs at least one class, got none")
            else:
                if _is_missing(value):
                    raise DataError(f"{where}: missing label (a simulation needs every "
                                    "label; leave label_column out for an unlabelled pool)")
                if isinstance(value, list | tuple | dict):
                    raise DataError(f"{where}: expected one class name, got {type(value).__name__} "
                                    f"{_short(value)}; a row with several classes needs multilabel=True "
                                    "(--multilabel)")
                # a JSONL 1.0 is the class "1", as 1 is (json reads whole floats as floats)
                whole = isinstance(value, float) and value.is_integer()
                labels = [str(int(value)) if whole else str(value).strip()]
            answers.append(labels)
        if id_column is None:
            _warn_if_copies_disagree(source, label_column, ids, answers)
        if multilabel and len(rows) > 1 and all(len(labels) == 1 for labels in answers):
            import warnings

            warnings.warn(f"{source}: column {label_column!r}: multilabel=True (--multilabel), but every row has "
                          f"exactly one class (no {label_separator!r} in any cell): is it a multi-label column? "
                          "A single-label task is modelled better without --multilabel", UserWarning, stacklevel=2)
        if classes is None:
            class_names = tuple(sorted({label for labels in answers for label in labels}))
            if not multilabel:
                _warn_if_sets(source, label_column, [labels[0] for labels in answers], label_separator)
            if len(class_names) < 2:  # a classifier of one class learns nothing, and scores a perfect 1.0
                raise DataError(f"{source}: column {label_column!r}: every row has the class {class_names[0]!r}; "
                                "a classifier needs two or more classes (is it the label column?)")
        index = {c: j for j, c in enumerate(class_names)}
        for n, labels in zip(row_numbers, answers, strict=True):
            for label in labels:
                if label not in index:
                    hint = ""
                    parts = [p.strip() for p in label.split(label_separator)]
                    if not multilabel and len(parts) > 1 and all(p in index for p in parts):
                        hint = (f"; {label_separator!r} separates several classes only with multilabel=True "
                                "(--multilabel)")
                    raise DataError(f"{_where(source, n, label_column)}: label {label!r} is not among the classes "
                                    f"({', '.join(class_names)}){hint}")
        if multilabel:
            targets_N_C = torch.zeros(len(rows), len(class_names), dtype=torch.long)
            for i, labels in enumerate(answers):
                targets_N_C[i, [index[label] for label in labels]] = 1
        else:
            targets = torch.tensor([index[labels[0]] for labels in answers], dtype=torch.long)
    # inputs
    blocks: list[np.ndarray] = []
    record: dict[str, Any] = {"source": source, "n_items": len(rows)}
    texts: tuple[str, ...] | None = None
    memmapped: np.ndarray | None = None
    text_dims = 0  # the leading columns that are text embeddings
    if text_column is not None:
        text_list = []
        for n, row in zip(row_numbers, rows, strict=True):
            value = row.get(text_column)
            if value is not None and not isinstance(value, str):
                raise DataError(f"{_where(source, n, text_column)}: expected a text, got {type(value).__name__}")
            if _is_missing(value):
                raise DataError(f"{_where(source, n, text_column)}: empty text")
            text_list.append(value)
        texts = tuple(text_list)
        if len(texts) > 1 and all(_as_number(t) is not None for t in texts):
            import warnings

            warnings.warn(f"{source}: text_column (--text-column) {text_column!r} holds only numbers, which are "
                          "encoded as words; a number column is a feature column (--feature-columns)",
                          UserWarning, stacklevel=2)
        enc = get_encoder(encoder)
        encoded = encode_texts(texts, enc, cache_dir=cache_dir, mmap_bytes=mmap_bytes)
        record["encoder"] = json.loads(enc.fingerprint())
        text_dims = int(encoded.shape[1])
        if isinstance(encoded, np.memmap) and not features:
            memmapped = encoded
        else:
            blocks.append(np.asarray(encoded, dtype=np.float32))
    if features:
        prep = TablePreprocessor.fit(rows, features, categorical_columns=categorical, missing=missing,
                                     source=source, row_numbers=row_numbers)
        blocks.append(prep.transform(rows, source=source, row_numbers=row_numbers))
        _warn_if_mostly_distinct(source, prep, len(rows))
        record["table"] = prep.to_dict()
    if memmapped is not None:
        mean_D, std_D = _column_stats(memmapped)
        std_D = embedding_scale(std_D)
        inputs: Tensor | LazyInputs = FeatureMemmapInputs(memmapped.filename, mean_D, std_D)
    else:
        x = np.concatenate(blocks, axis=1) if len(blocks) > 1 else blocks[0]
        mean_D, std_D = _column_stats(x)
        std_D[:text_dims] = embedding_scale(std_D[:text_dims])  # the text block keeps its spectrum
        inputs = torch.from_numpy(((x - mean_D) / std_D).astype(np.float32))
    record["standardize"] = {"mean": mean_D.tolist(), "std": std_D.tolist()}

    record["classes"] = list(class_names)
    kind = "text+table" if text_column and features else ("text" if text_column else "table")
    dataset = ArrayDataset(inputs=inputs, targets=targets_N_C if multilabel else targets, classes=class_names,
                           name=name or default_name, item_ids=tuple(ids), item_sha256=tuple(hashes))
    return TablePool(dataset=dataset, item_ids=tuple(ids), kind=kind, texts=texts, targets_N_C=targets_N_C,
                     multilabel=bool(multilabel), preprocessing=record, feature_columns=tuple(features),
                     text_column=text_column, text_encoder=enc if text_column is not None else None)

