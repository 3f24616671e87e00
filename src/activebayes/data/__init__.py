"""Datasets and the active learning pool.

- :class:`ArrayDataset`: inputs / targets / class names held as tensors;
  :func:`from_arrays` (NumPy / tensors), :func:`image_folder` (a folder of images),
  :func:`load_dataset` (``"digits"`` embedded, ``"mnist"``, ``"fashion_mnist"``,
  ``"kmnist"`` from md5-checked IDX files, downloaded on request).
- :class:`Pool`: labelled / unlabelled / validation index sets over one dataset,
  in original dataset indices, without copying data.

See ``docs/data.md``.
"""

from __future__ import annotations

from .dataset import ArrayDataset, DataError, from_arrays
from .datasets import IDX_DATASETS, available_datasets, default_data_dir, digits_split_indices, load_dataset
from .idx import download_file, file_md5, parse_idx, read_idx
from .image_folder import image_folder
from .pool import Pool

__all__ = [
    "ArrayDataset",
    "DataError",
    "IDX_DATASETS",
    "Pool",
    "available_datasets",
    "default_data_dir",
    "digits_split_indices",
    "download_file",
    "file_md5",
    "from_arrays",
    "image_folder",
    "load_dataset",
    "parse_idx",
    "read_idx",
]

