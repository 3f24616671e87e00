"""A labelling project's items: what a scan finds, and which dataset position each item is.

An item is identified by its **key** (the path relative to the image folder, or
``"NAME[i]"`` for a built-in dataset) plus the SHA-256 of its **content**, never by its
position in a listing (see :mod:`activebayes.labelling.store`).

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

import numpy as np

from activebayes.data import ArrayDataset, DataError
from activebayes.data.image_folder import check_image, confined_file, list_images
from activebayes.labelling.store import Item, ItemFile

__all__ = ["ItemIndex", "dataset_item_key", "dataset_keys", "file_sha256", "scan_dataset", "scan_folder"]


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
