"""Convert IDX files or an image folder to the memory-mapped format, once, streaming.

:func:`convert_to_memmap` reads its source chunk by chunk and writes
``inputs.npy`` row by row into a temporary folder that is renamed into place
only when everything (checksums included) is right, so the destination is either
absent or complete. Only one chunk of pixels is in memory at a time (plus the
labels and paths: one entry per item). The result loads with
:func:`~activebayes.data.load_memmap` and gives bitwise the same items as the
in-memory loader of the same source:

- ``convert_to_memmap(MNIST_DIR, OUT, dataset="mnist", split="test")`` ==
  ``load_dataset("mnist", data_dir=MNIST_DIR, split="test")``;
- ``convert_to_memmap(IMAGES, OUT, size=..., grayscale=...)`` == ``image_folder(IMAGES, size=..., grayscale=...)``.

Example:
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for c in ("cat", "dog"):
    ...     (root / "images" / c).mkdir(parents=True)
    ...     Image.fromarray(np.full((5, 5), 60 if c == "cat" else 200, np.uint8)).save(root / "images" / c / "0.png")
    >>> out = convert_to_memmap(root / "images", root / "pool", size=(4, 4), progress=False)
    >>> ds = load_memmap(out)
    >>> ds.classes, ds.targets.tolist(), ds.is_lazy
    (('cat', 'dog'), [0, 1], True)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .._validation import check_choice
from ._core import DataError
from .datasets import IDX_DATASETS, SPLITS, _find_idx_files
from .idx import IdxStream, check_idx_checksums, file_md5, read_idx
from .image_folder import _check_size, decode_image, list_images
from .memmap import MemmapWriter, check_destination, load_memmap
from activebayes import _progress
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["convert_to_memmap", "load_memmap"]


def convert_to_memmap(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    dataset: str | None = None,
    split: str | None = None,
    labels: str | os.PathLike[str] | None = None,
    size: tuple[int, int] | None = None,
    grayscale: bool = True,
    classes: Sequence[str] | None = None,
    standardize: bool = True,
    normalization: tuple[float, float] | None = None,
    name: str | None = None,
    overwrite: bool = False,
    chunk_size: int = 1024,
    progress: bool | None = None,
) -> Path:
    """Convert ``source`` to a memory-mapped dataset folder ``destination`` (atomic, streaming).

    What ``source`` is:

    - with ``dataset="mnist" | "fashion_mnist" | "kmnist"``: the folder holding that
      dataset's IDX files (as ``data_dir`` of :func:`~activebayes.data.load_dataset`);
      the ``split`` files are found and verified exactly as the loader does (md5 of
      the official ``.gz`` or sha256 of the uncompressed content); name, classes and
      normalisation are the dataset's. Nothing is downloaded.
    - an IDX file of uint8 images ``[N, H, W]`` (gzip or not): labels from ``labels=``
      or, when present, the file next to it named with ``labels``/``idx1`` for
      ``images``/``idx3`` (e.g. ``t10k-labels-idx1-ubyte.gz``); none otherwise.
    - a folder of images, flat or one subfolder per class, as
      :func:`~activebayes.data.image_folder` reads it (``size``, ``grayscale``,
      ``classes``); the item order, pixels and normalisation are the same, and
      ``paths.txt`` records each item's file.

    Args:
        source: the dataset folder, IDX images file or image folder (see above).
        destination: the folder to write; it must not exist unless ``overwrite=True``
            and it is a memmap dataset folder.
        dataset: an IDX dataset name (``source`` is then its data folder).
        split: the split of ``dataset`` to convert (``"train"``, the default, or ``"test"``); only
            with ``dataset``.
        labels: the labels IDX file for an images IDX file.
        size: image folders: ``(height, width)`` every image is resized to (default ``(28, 28)``); an
            error with ``dataset`` or an IDX file, whose images keep their own size.
        grayscale: image folders: one channel if true, else RGB.
        classes: image folders: as in ``image_folder``; a plain IDX file: the class names.
        standardize: store the pixels' own exact mean / std as the normalisation (a named
            dataset: its published constants); ``False``: pixels scaled to [0, 1] only.
        normalization: ``(mean, std)`` to store instead.
        name: dataset name; default the dataset's, the folder's or the file's.
        overwrite: replace an existing memmap dataset folder.
        chunk_size: items decoded and written per step (memory is ~ one chunk).
        progress: a tqdm progress bar; ``False`` for quiet; ``None`` (default): when stderr is a terminal.

    Returns the destination folder. Raises :class:`~activebayes.data.DataError`
    naming the file for missing, corrupt or unverifiable input; nothing is left
    at ``destination`` (or the old folder stays) when it raises.
    """
    progress = _progress.shown(progress)
    for value, what in ((source, "source"), (destination, "destination")):
        if not isinstance(value, str | os.PathLike):
            hint = ("; to write arrays or a loaded dataset, use activebayes.data.write_memmap(destination, pixels, "
                    "targets=...)") if what == "source" else ""
            raise InvalidTypeError(f"{what} must be a path (an IDX file, an image folder or a dataset's folder), "
                                   f"got {type(value).__name__}{hint}")
    source = Path(source).expanduser()
    destination = Path(destination).expanduser()
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidArgumentError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
    if size is not None:
        _check_size(size)
    check_destination(destination, overwrite=overwrite)
    if dataset is not None:
        check_choice(dataset, "dataset", IDX_DATASETS)
        _check_unused(f"dataset (--dataset) {dataset!r}, whose images, classes and labels are its own",
                      size=size is not None, rgb=not grayscale, classes=classes is not None, labels=labels is not None)
        split = check_choice("train" if split is None else split, "split (--split)", SPLITS)
        spec = IDX_DATASETS[dataset]  # standardised by its published mean and std unless told otherwise
        return _convert_idx_dataset(source, destination, dataset=dataset, split=split, name=name, overwrite=overwrite,
                                    normalization=normalization if normalization is not None else (
                                        (spec.mean, spec.std) if standardize else None),
                                    chunk_size=chunk_size, progress=progress)
    if not source.exists():
        raise DataError(f"{source}: not found (expected an image folder or an IDX images file)")
    norm: tuple[float, float] | None | str = normalization if normalization is not None else (
        "standardize" if standardize else None
    )
    if source.is_dir():
        idx_files = sorted(p.name for p in source.iterdir() if "-idx" in p.name and "ubyte" in p.name)
        if idx_files:  # not an image folder: a dataset's IDX files
            raise DataError(f"{source} holds IDX files ({', '.join(idx_files[:2])}{', ...' if len(idx_files) > 2 else ''}),"
                            f" not images: name the dataset (--dataset {' / '.join(IDX_DATASETS)}; from Python, dataset=) "
                            "and its split (--split train / test), or give one IDX images file as the source")
        _check_unused(f"image folder {source}", labels=labels is not None, split=split is not None)
        return _convert_image_folder(source, destination, size=size or (28, 28), grayscale=grayscale, classes=classes,
                                     normalization=norm, name=name, overwrite=overwrite, chunk_size=chunk_size,
                                     progress=progress)
    _check_unused(f"{source}, an IDX file whose images keep their own size and channels", size=size is not None,
                  rgb=not grayscale, split=split is not None)
    return _convert_idx_file(source, destination, labels=labels, classes=classes, normalization=norm, name=name,
                             overwrite=overwrite, chunk_size=chunk_size, progress=progress)


#: what each option that applies to some sources only does (:func:`_check_unused`)
_APPLIES_TO = {
    "size": ("size (--size)", "resizes the images of an image folder"),
    "rgb": ("--rgb (grayscale=False)", "keeps the colours of an image folder's images"),
    "classes": ("classes (--classes)", "names the classes of an image folder or of one IDX images file"),
    "labels": ("labels (--labels)", "names the labels file of one IDX images file"),
    "split": ("split (--split)", "chooses the split of a dataset (--dataset)"),
}


def _check_unused(source: str, **given: bool) -> None:
    """Refuse an option given (``given[name]`` true) that does nothing for ``source``: silently
    ignored, it would leave the user believing the pool is resized, in colour, ..."""
    for key, was_given in given.items():
        if was_given:
            option, does = _APPLIES_TO[key]
            raise InvalidArgumentError(f"{option} {does}; it does nothing for {source}: leave {option} out")


def _stream_images(stream: IdxStream, writer: MemmapWriter, *, chunk_size: int, progress: bool, desc: str) -> str:
    with tqdm(total=stream.shape[0], desc=desc, unit="item", disable=not progress, leave=False) as bar:
        for chunk in stream.chunks(chunk_size):
            writer.write(chunk)
            bar.update(len(chunk))
    return stream.finish()


def _check_idx_images(stream: IdxStream, n_labels: int | None, labels_path: Path | None) -> None:
    if stream.dtype != np.uint8 or len(stream.shape) not in (3, 4):
        raise DataError(
            f"{stream.path}: expected uint8 images [N, H, W] or [N, C, H, W], got {stream.dtype} of shape {stream.shape}"
        )
    if n_labels is not None and n_labels != stream.shape[0]:
        raise DataError(
            f"{stream.path.parent}: {stream.path.name} holds {stream.shape[0]} images but "
            f"{labels_path.name if labels_path else 'the labels file'} holds {n_labels} labels"
        )


def _convert_idx_dataset(
    source: Path,
    destination: Path,
    *,
    dataset: str,
    split: str,
    normalization: tuple[float, float] | None,
    name: str | None,
    overwrite: bool,
    chunk_size: int,
    progress: bool,
) -> Path:
    spec = IDX_DATASETS[dataset]
    files = _find_idx_files(spec, split, data_dir=source, download=False, mirrors=None, progress=False)
    labels = read_idx(files.labels, md5=files.labels_file.md5, content_sha256=files.labels_file.content_sha256,
                      expected_ndim=1)
    if labels.dtype != np.uint8 or (labels.size and int(labels.max()) >= len(spec.classes)):
        raise DataError(f"{files.labels}: expected uint8 labels in 0 .. {len(spec.classes) - 1}, "
                        f"got {labels.dtype} up to {labels.max() if labels.size else '-'}")
    actual_md5 = file_md5(files.images)
    with IdxStream(files.images) as stream:
        _check_idx_images(stream, len(labels), files.labels)
        with MemmapWriter(destination, n_items=stream.shape[0], item_shape=stream.shape[1:],
                          overwrite=overwrite) as writer:
            content_sha = _stream_images(stream, writer, chunk_size=chunk_size, progress=progress,
                                         desc=f"convert {dataset} {split}")
            check_idx_checksums(files.images, actual_md5=actual_md5, actual_content_sha256=content_sha,
                                md5=files.images_file.md5, content_sha256=files.images_file.content_sha256)
            return writer.finish(
                name=name or spec.name,
                classes=spec.classes,
                targets=labels,
                normalization=normalization,
                source=f"{spec.name} {split} split: {files.images.resolve()} + {files.labels.resolve()} (IDX, verified)",
            )


def _labels_next_to(images: Path) -> Path | None:
    stem = images.name.removesuffix(".gz")
    guess = stem.replace("images", "labels").replace("idx3", "idx1")
    if guess == stem:
        return None
    return next((images.parent / n for n in (guess, guess + ".gz") if (images.parent / n).is_file()), None)


def _convert_idx_file(
    source: Path,
    destination: Path,
    *,
    labels: str | os.PathLike[str] | None,
    classes: Sequence[str] | None,
    normalization: tuple[float, float] | None | str,
    name: str | None,
    overwrite: bool,
    chunk_size: int,
    progress: bool,
) -> Path:
    labels_path = Path(labels).expanduser() if labels is not None else _labels_next_to(source)
    targets = None
    if labels_path is not None:
        targets = read_idx(labels_path, expected_ndim=1)
        if targets.dtype.kind not in "iu":
            raise DataError(f"{labels_path}: expected integer labels, got {targets.dtype}")
        if targets.size and int(targets.min()) < 0:
            raise DataError(f"{labels_path}: labels must be >= 0, got {int(targets.min())}")
    if classes is None:
        n_classes = int(targets.max()) + 1 if targets is not None and targets.size else 0
        class_names = tuple(str(c) for c in range(n_classes))
    else:
        class_names = tuple(str(c) for c in classes)
    if targets is not None and targets.size and int(targets.max()) >= len(class_names):
        raise DataError(f"{labels_path}: label {int(targets.max())} outside the {len(class_names)} classes {list(class_names)}")
    default_name = source.name.removesuffix(".gz").removesuffix("-ubyte").removesuffix("-idx3")
    with IdxStream(source) as stream:
        _check_idx_images(stream, None if targets is None else len(targets), labels_path)
        with MemmapWriter(destination, n_items=stream.shape[0], item_shape=stream.shape[1:],
                          overwrite=overwrite) as writer:
            _stream_images(stream, writer, chunk_size=chunk_size, progress=progress, desc=f"convert {source.name}")
            where = f"{source.resolve()}" + (f" + {labels_path.resolve()}" if labels_path is not None else "")
            return writer.finish(name=name or default_name, classes=class_names, targets=targets,
                                 normalization=normalization, source=f"IDX: {where}")


def _convert_image_folder(
    source: Path,
    destination: Path,
    *,
    size: tuple[int, int],
    grayscale: bool,
    classes: Sequence[str] | None,
    normalization: tuple[float, float] | None | str,
    name: str | None,
    overwrite: bool,
    chunk_size: int,
    progress: bool,
) -> Path:
    height, width = _check_size(size)
    listing = list_images(source, classes=classes)
    paths = [str(f.resolve()) for f in listing.files]
    channels = 1 if grayscale else 3
    with MemmapWriter(destination, n_items=len(paths), item_shape=(channels, height, width),
                      overwrite=overwrite) as writer:
        with tqdm(total=len(paths), desc=f"convert {source.name}", unit="image", disable=not progress,
                  leave=False) as bar:
            for start in range(0, len(paths), chunk_size):
                batch = paths[start : start + chunk_size]
                writer.write(np.stack([decode_image(p, (height, width), grayscale) for p in batch]))
                bar.update(len(batch))
        return writer.finish(
            name=name or source.name,
            classes=listing.classes,
            targets=None if listing.targets is None else np.asarray(listing.targets, dtype=np.int64),
            paths=paths,
            normalization=normalization,
            source=f"image folder: {source.resolve()} ({'grayscale' if grayscale else 'RGB'}, {height}x{width})",
        )
