"""Datasets and the active learning pool.

- :class:`ArrayDataset`: inputs / targets / class names; inputs held as a float32
  tensor, or as :class:`LazyInputs` read from disk on demand (pools larger than memory);
  :func:`from_arrays` (NumPy / tensors), :func:`image_folder` (a folder of images,
  in memory or ``lazy=True``), :func:`load_dataset` (``"digits"`` embedded,
  ``"mnist"``, ``"fashion_mnist"``, ``"kmnist"`` from checksum-verified IDX files,
  downloaded on request; ``"memmap"`` folders).
- The memory-mapped format: :func:`convert_to_memmap` (IDX files or an image folder,
  once), :func:`write_memmap` (arrays), :func:`load_memmap`.
- Text and table pools: :func:`load_table` (CSV / JSONL / Parquet rows, texts encoded by
  :func:`encode_texts`, features standardised, stable item ids), ``"wordnet_nouns"``,
  ``"breast_cancer"``, ``"wine"``, ``"iris"`` in :func:`load_dataset`.
- :class:`Pool`: labelled / unlabelled / validation index sets over one dataset,
  in original dataset indices, without copying data.

See ``docs/data.md``.
"""

from __future__ import annotations

from ._core import MissingSplitError, normalize_pixels
from .convert import convert_to_memmap
from .dataset import ArrayDataset, DataError, from_arrays
from .datasets import (IDX_DATASETS, available_datasets, dataset_contents, default_data_dir, digits_split_indices,
                       has_contents, load_dataset, register_dataset)
from .idx import download_file, file_md5, parse_idx, read_idx
from .image_folder import ImageFileInputs, image_folder
from .lazy import LazyInputs, MemmapInputs
from .memmap import MEMMAP_FORMAT, load_memmap, write_memmap
from .pool import Pool
from .table import TablePool, load_table
from .text import TfidfEncoder, encode_texts

__all__ = [
    "ArrayDataset",
    "DataError",
    "IDX_DATASETS",
    "ImageFileInputs",
    "LazyInputs",
    "MEMMAP_FORMAT",
    "MemmapInputs",
    "MissingSplitError",
    "Pool",
    "TablePool",
    "TfidfEncoder",
    "available_datasets",
    "convert_to_memmap",
    "dataset_contents",
    "default_data_dir",
    "digits_split_indices",
    "encode_texts",
    "download_file",
    "file_md5",
    "from_arrays",
    "has_contents",
    "image_folder",
    "load_dataset",
    "register_dataset",
    "load_memmap",
    "load_table",
    "normalize_pixels",
    "parse_idx",
    "read_idx",
    "write_memmap",
]
