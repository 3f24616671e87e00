"""A labelling project's items: what a scan finds, and which dataset position each item is.

An item is identified by its **key** (the path relative to the image folder, ``"NAME[i]"``
for a built-in dataset, or a table row's id) plus the SHA-256 of its **content**, never by
its position in a listing (see :mod:`activebayes.labelling.store`).

- :func:`scan_table`: a table's rows as items (key = the row id: the ``id_column`` value,
  else the hash of the row's content, as :func:`~activebayes.data.load_table` makes it;
  content hash = SHA-256 of the row's input cells), with the dataset the loop works on and
  what the page shows of each row (:func:`row_content`).

- :func:`scan_folder` / :func:`scan_dataset`: the items found now, as
  :class:`~activebayes.labelling.store.ItemFile` (key + content hash), for
  :meth:`~activebayes.labelling.store.LabelStore.sync_items` to compare with the stored ones.
- :func:`dataset_keys` and :class:`ItemIndex`: the map between the dataset the loop
  works on (positions ``0 .. N-1``) and the store's item ids, built afresh each time a
  project's dataset is loaded.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import torch

from activebayes.data import ArrayDataset, DataError
from activebayes.data.image_folder import check_image, confined_file, list_images
from activebayes.data.table import read_table_rows, row_content_sha256
from activebayes.data.table_task import table_pool
from activebayes.labelling.store import Item, ItemFile

__all__ = ["ItemIndex", "TableItems", "dataset_item_key", "dataset_keys", "file_sha256", "row_content",
           "scan_dataset", "scan_folder", "scan_table"]


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_item_key(name: str, index: int) -> str:
    """The key of a built-in dataset's item ``index``: ``"NAME[i]"``."""
    return f"{name}[{index}]"


# --------------------------------------------------------------------------- scanning


def scan_folder(folder: str | os.PathLike[str], *, classes: Sequence[str] | None,
                cache: Mapping[str, tuple[int | None, int | None, str]] | None = None,
                skipped: list[tuple[str, str]] | None = None) -> list[ItemFile]:
    """The readable images of ``folder`` as :class:`~activebayes.labelling.store.ItemFile` (key = path
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
    return [ItemFile(dataset_item_key(dataset.name, i), hashlib.sha256(array[i].tobytes()).hexdigest())
            for i in range(len(array))]


@dataclass(frozen=True)
class TableItems:
    """A table's rows as a project's items: ``dataset`` (position ``i`` = row ``i``, the
    loop's features), ``files`` (key = row id, SHA-256 of the row's input cells) and
    ``contents`` (what the page shows of each row, :func:`row_content`)."""

    dataset: ArrayDataset
    files: list[ItemFile]
    contents: list[dict[str, Any]]

    @property
    def keys(self) -> list[str]:
        return [f.key for f in self.files]


def row_content(row: Mapping[str, Any], *, text_column: str | None, feature_columns: Sequence[str]) -> dict[str, Any]:
    """What the page shows of a row: ``{"kind": "text", "text": ...}`` for a text, ``{"kind":
    "row", "fields": [[column, value], ...]}`` for feature columns (both keys with both);
    values as text (``""`` for an empty cell)."""
    content: dict[str, Any] = {"kind": "text" if text_column is not None else "row"}
    if text_column is not None:
        content["text"] = str(row.get(text_column) or "")
    if feature_columns:
        content["fields"] = [[c, "" if row.get(c) is None else str(row.get(c))] for c in feature_columns]
    return content


def scan_table(config: Any, *, cache_dir: str | os.PathLike[str] | None = None) -> TableItems:
    """The rows of a table project (``config``: its :class:`~activebayes.labelling.ProjectConfig`),
    read through the loop's own table path (:func:`~activebayes.data.table_task.table_pool` of
    ``config.loop_config``): every bad input (a column the table lacks, an empty text, a file
    that is not UTF-8, an id used twice) is its one-line error naming the row and the column.
    A multi-label project's dataset carries placeholder all-zero indicators ``[N, C]`` (never
    read: the project starts with no labels, no validation and no test set) so the loop
    treats it as multi-label. Text features are cached by content in ``cache_dir`` (the
    project's ``cache/`` folder) unless the table options name their own."""
    loop_config = config.loop_config(2, name="table", evaluate_test=False)
    if cache_dir is not None and config.text_column is not None and "cache_dir" not in loop_config.table_options:
        loop_config = loop_config.replace(table_options={**loop_config.table_options, "cache_dir": str(cache_dir)})
    pool = table_pool(loop_config)
    _columns, rows = read_table_rows(config.table, format=config.table_options.get("format"))
    if len(rows) != len(pool.item_ids):
        raise DataError(f"table {config.table} changed while it was read; try again")
    # the columns the pool read (``"*"`` resolved): a row's content hash and what the page shows
    inputs = ([config.text_column] if config.text_column is not None else []) + list(pool.feature_columns)
    files = [ItemFile(key, row_content_sha256(row, inputs)) for key, row in zip(pool.item_ids, rows, strict=True)]
    contents = [row_content(row, text_column=config.text_column, feature_columns=pool.feature_columns)
                for row in rows]
    dataset = pool.dataset
    if config.multilabel:
        targets_N_C = torch.zeros(len(dataset), dataset.num_classes, dtype=torch.long)
        dataset = ArrayDataset(inputs=dataset.inputs, targets=targets_N_C, classes=dataset.classes, name=dataset.name)
    return TableItems(dataset, files, contents)


# --------------------------------------------------------------------------- positions <-> item ids


def dataset_keys(dataset: ArrayDataset, *, images: str | None, classes: Sequence[str] | None,
                 present: Collection[str]) -> list[str]:
    """The item key of each position of ``dataset``.

    For an image folder (``images``) the dataset holds the folder's listing restricted
    to the ``present`` keys (the readable items), in listing order; for a built-in
    dataset position ``i`` is ``NAME[i]``.
    """
    if images is not None:
        root = Path(images)
        files = list_images(root, classes=classes).files
        return [key for key in (p.relative_to(root).as_posix() for p in files) if key in present]
    return [dataset_item_key(dataset.name, i) for i in range(len(dataset))]


@dataclass(frozen=True)
class ItemIndex:
    """The map between dataset positions and item ids: ``ids[position]`` and its inverse."""

    ids: list[int]
    positions: dict[int, int]

    @classmethod
    def match(cls, keys: Sequence[str], items: Sequence[Item]) -> ItemIndex | None:
        """The index for positions holding ``keys``, or ``None`` when a key is not one of ``items``."""
        by_key = {item.key: item.id for item in items}
        if any(key not in by_key for key in keys):
            return None
        ids = [by_key[key] for key in keys]
        return cls(ids, {item: position for position, item in enumerate(ids)})

    def index_of(self, item: int) -> int | None:
        """The position of item ``item`` (``None`` if the dataset does not hold it)."""
        return self.positions.get(item)
