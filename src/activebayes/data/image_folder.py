"""A folder of image files as an :class:`ArrayDataset` (real, unlabelled data).

Two layouts:

- flat: ``folder/*.png`` (any depth-1 images) -> unlabelled items (``targets=None``);
  pass ``classes=`` for the labels a person will give them;
- one subfolder per class: ``folder/<class>/*.png`` -> labelled items, classes
  are the subfolder names in sorted order.

Images are converted to grayscale (or RGB), resized to ``size = (height, width)``
(bilinear) and kept as 8-bit pixels; inputs are ``(pixels / 255 - mean) / std``
(:func:`~activebayes.data.normalize_pixels`) with the folder's own pixel mean and
population std, computed exactly from integer pixel sums (so they do not depend on
the order or the chunking of the pass), or with given constants.

Small folders are decoded at once into memory (``lazy=False``, the default). With
``lazy=True`` nothing is decoded up front (except one pass for the mean and std,
skipped when ``normalization=`` is given): the inputs are an
:class:`ImageFileInputs` that reads and decodes each item when it is indexed and
pickles as its list of paths (usable in DataLoader workers). For a pool that is
read many times (every round), convert the folder once with
:func:`~activebayes.data.convert_to_memmap` instead: decoding a JPEG costs far
more than reading 784 bytes.

Every image is read with bounds (:func:`open_image`): at most
:data:`MAX_IMAGE_BYTES` bytes on disk and :data:`MAX_IMAGE_PIXELS` pixels once
decoded, checked from the header before any pixel is decoded, so a
decompression bomb (a small file that claims 20000 x 20000 pixels) is refused
with a :class:`DataError` naming the file instead of filling the memory.
:func:`confined_file` resolves a path inside a folder and refuses links out of
it and special files (FIFOs, devices): what a labelling project serves stays
inside its image folder; :func:`preview_png` re-encodes an image for a browser.
"""

from __future__ import annotations

import io
import math
import os
import stat
import warnings
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from tqdm.auto import tqdm

from ._core import DataError, normalize_pixels
from .dataset import ArrayDataset
from .lazy import LazyInputs
from activebayes._io import is_text_path
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "IMAGE_EXTENSIONS",
    "MAX_IMAGE_BYTES",
    "MAX_IMAGE_PIXELS",
    "ImageFileInputs",
    "ImageListing",
    "PixelStats",
    "check_image",
    "confined_file",
    "decode_image",
    "folder_pixel_stats",
    "image_folder",
    "list_images",
    "open_image",
    "preview_png",
]

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".pgm", ".ppm"})


MAX_IMAGE_BYTES = 256 * 1024 * 1024
"""The largest image file read (bytes on disk)."""

MAX_IMAGE_PIXELS = 64_000_000
"""The most pixels an image may decode to (64 Mpx: an 8000 x 8000 photograph)."""


def confined_file(root: str | os.PathLike[str], relative: str) -> Path:
    """``root / relative`` resolved, when it is a regular file inside ``root``.

    Raises :class:`DataError` for a path that leaves ``root`` (``..``, an absolute
    path, or a symbolic link whose target lies outside), a missing file, or
    anything that is not a regular file (a FIFO, a device, a folder).
    """
    base = Path(root).resolve()
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise DataError(f"{relative!r} is not a path inside {base}")
    try:
        real = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):
        raise DataError(f"{base / relative} is gone: no such file") from None
    if not real.is_relative_to(base):
        raise DataError(f"{base / relative} links to {real}, outside the image folder {base}; refused")
    try:
        mode = real.stat().st_mode
    except OSError as error:
        raise DataError(f"{base / relative}: cannot read ({error.strerror})") from None
    if not stat.S_ISREG(mode):
        raise DataError(f"{base / relative} is not a regular file; refused")
    return real


def open_image(file: str | os.PathLike[str], *, max_pixels: int = MAX_IMAGE_PIXELS,
               max_bytes: int = MAX_IMAGE_BYTES) -> Image.Image:
    """One image file decoded into memory, within bounds, as a PIL image (first frame).

    The file must be a regular file of at most ``max_bytes`` bytes; its header must
    claim at most ``max_pixels`` pixels (checked before decoding). Raises
    :class:`DataError` naming the file and the limit otherwise, or when it cannot
    be decoded.
    """
    path = Path(file)
    try:
        info = path.stat()
    except OSError as error:
        raise DataError(f"{path}: cannot read image ({error.strerror or error})") from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{path}: not a regular file; refused")
    if info.st_size > max_bytes:
        raise DataError(f"{path}: image file of {info.st_size:,} bytes is over the limit of {max_bytes:,} bytes")
    try:
        with Image.open(path) as image:
            width, height = image.size
            if width * height > max_pixels:
                raise DataError(f"{path}: image of {width} x {height} pixels is over the limit of "
                                f"{max_pixels:,} pixels (a decompression bomb?); refused")
            image.load()
            return image.copy()
    except DataError:
        raise
    except Image.DecompressionBombError as error:
        raise DataError(f"{path}: image is over the limit of {max_pixels:,} pixels ({error}); refused") from None
    except (OSError, ValueError, SyntaxError, EOFError, MemoryError) as error:
        raise DataError(f"{path}: cannot read image ({error})") from None


def check_image(file: str | os.PathLike[str]) -> None:
    """Raise :class:`DataError` unless ``file`` decodes within the bounds of :func:`open_image`."""
    open_image(file).close()


def preview_png(file: str | os.PathLike[str], *, max_side: int = 1024) -> bytes:
    """``file`` decoded within bounds and re-encoded as PNG (RGB or grayscale), its longer
    side at most ``max_side`` pixels: what a browser is sent instead of the raw file."""
    image = open_image(file)
    try:
        picture = image.convert("L" if image.mode in ("1", "L", "I;16", "I", "F") else "RGB")
        if max(picture.size) > max_side:
            picture.thumbnail((max_side, max_side), Image.Resampling.BILINEAR)
        buffer = io.BytesIO()
        picture.save(buffer, format="PNG")
        return buffer.getvalue()
    finally:
        image.close()


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)


@dataclass(frozen=True)
class ImageListing:
    """The items of an image folder in dataset order: files, class ids (or ``None``) and class names."""

    files: tuple[Path, ...]
    targets: tuple[int, ...] | None
    classes: tuple[str, ...]


def list_images(path: str | os.PathLike[str], *, classes: Sequence[str] | None = None) -> ImageListing:
    """List an image folder (flat or one subfolder per class) in the order :func:`image_folder` uses.

    Raises :class:`DataError` for a missing or empty folder and ``ValueError`` when
    ``classes`` does not match the class subfolders.
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DataError(f"image folder {folder} does not exist or is not a folder")
    files = _images_in(folder)
    if files:
        counts = {p.name: len(_images_in(p)) for p in sorted(folder.iterdir())
                  if p.is_dir() and not p.name.startswith(".")}
        nested = {name: count for name, count in counts.items() if count}
        if nested:  # read flat: the subfolders' images would be left out without a word
            warnings.warn(f"image folder {folder} holds {len(files)} image(s) directly, so it is read as one flat "
                          f"folder and the {sum(nested.values())} image(s) in its subfolder(s) {', '.join(nested)} "
                          "are left out; to read the subfolders as classes, move the loose images into them (or out)",
                          UserWarning, stacklevel=2)
        class_names = tuple(str(c) for c in classes) if classes is not None else ()
        return ImageListing(_text_named(folder, files), None, class_names)
    subfolders = sorted(p for p in folder.iterdir() if p.is_dir() and _images_in(p))
    if not subfolders:
        raise DataError(
            f"image folder {folder} holds no images ({', '.join(sorted(IMAGE_EXTENSIONS))}) "
            "directly or in class subfolders"
        )
    found = [p.name for p in subfolders]
    if classes is not None:
        class_names = tuple(str(c) for c in classes)
        if set(class_names) != set(found):
            raise InvalidArgumentError(f"classes {list(class_names)} do not match the subfolders of {folder}: {found}")
    else:
        class_names = tuple(found)
        empty = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
                       and p.name not in found)
        if empty:  # a class whose images are missing would otherwise vanish without a word
            warnings.warn(f"image folder {folder}: subfolder(s) {', '.join(empty)} hold no image, so they are not "
                          f"classes; the classes are {', '.join(found)}", UserWarning, stacklevel=2)
    by_name = {p.name: p for p in subfolders}
    targets: list[int] = []
    for class_id, class_name in enumerate(class_names):
        members = _images_in(by_name[class_name])
        files.extend(members)
        targets.extend([class_id] * len(members))
    return ImageListing(_text_named(folder, files), tuple(targets), class_names)


def _text_named(folder: Path, files: Sequence[Path]) -> tuple[Path, ...]:
    """``files``, each named by UTF-8 text inside ``folder``: the names are stored as text (a labelling
    project's items, a memmap folder's paths.txt, JSON), and the bytes of a name that is not UTF-8
    could not be kept; such a name is a :class:`DataError` naming it by its bytes, and so is the
    folder's own path (stored too: a project's config, the items' identities)."""
    if not is_text_path(folder):
        raise DataError(f"image folder {os.fsencode(folder)!r}: its path is not UTF-8 text: rename it or move the "
                        "images to a folder whose path is (paths are stored as text)")
    for file in files:
        relative = str(file.relative_to(folder))
        try:
            relative.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError(f"image folder {folder} holds a file whose name is not UTF-8 text, "
                            f"{os.fsencode(relative)!r}: rename it (names are stored as text)") from None
    return tuple(files)


def decode_image(file: str | os.PathLike[str], size: tuple[int, int], grayscale: bool) -> np.ndarray:
    """One image file as uint8 pixels ``[C, H, W]`` (C = 1 grayscale, 3 RGB), resized bilinearly.

    Raises :class:`DataError` naming the file when it cannot be read or decoded.
    """
    height, width = size
    image = open_image(file)
    try:
        image = image.convert("L" if grayscale else "RGB").resize((width, height), Image.Resampling.BILINEAR)
        pixels = np.asarray(image, dtype=np.uint8)
    except (OSError, ValueError, MemoryError) as exc:
        raise DataError(f"{file}: cannot read image ({exc})") from None
    finally:
        image.close()
    return pixels.reshape(height, width, -1).transpose(2, 0, 1)


class PixelStats:
    """Exact mean and population std of 8-bit pixels scaled to ``[0, 1]``, accumulated chunk by chunk.

    Keeps the histogram of the pixel values ``p`` in ``0 .. 255``, hence the exact
    integer sums ``S1 = sum p`` and ``S2 = sum p^2`` over all n pixels; then
    ``mean = S1 / (255 n)`` and ``var = (n S2 - S1^2) / (255^2 n^2)``, each rounded
    once, so the constants do not depend on how the pixels were split into chunks.

    Example:
        >>> stats = PixelStats()
        >>> stats.update(np.array([0, 255], dtype=np.uint8))
        >>> stats.normalization()
        (0.5, 0.5)
    """

    _BLOCK = 1 << 20  # pixels counted per step: bounded temporary memory (8 MB) for any chunk

    def __init__(self) -> None:
        self.histogram = np.zeros(256, dtype=np.int64)

    def update(self, pixels: np.ndarray) -> None:
        if pixels.dtype != np.uint8:
            raise InvalidTypeError(f"pixels must be uint8, got {pixels.dtype}")
        flat = np.ascontiguousarray(pixels).reshape(-1)
        for start in range(0, flat.size, self._BLOCK):
            self.histogram += np.bincount(flat[start : start + self._BLOCK], minlength=256)

    @property
    def count(self) -> int:
        return int(self.histogram.sum())

    def normalization(self) -> tuple[float, float]:
        """``(mean, std)`` of ``pixels / 255``; std 1.0 when every pixel is equal."""
        counts = [int(c) for c in self.histogram]
        n = sum(counts)
        if n == 0:
            raise InvalidArgumentError("no pixels were seen")
        total = sum(v * c for v, c in enumerate(counts))
        total_squares = sum(v * v * c for v, c in enumerate(counts))
        mean = total / (255 * n)
        std = math.sqrt((n * total_squares - total**2) / (255**2 * n * n))
        return mean, (std if std > 0 else 1.0)


class ImageFileInputs(LazyInputs):
    """Image files decoded on demand: row i is ``decode_image(paths[i])`` normalised.

    Pickles as its paths and options (no pixels), so a DataLoader worker can read it.
    Raises :class:`DataError` naming the file when an image cannot be read.
    """

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]],
        *,
        size: tuple[int, int] = (28, 28),
        grayscale: bool = True,
        normalization: tuple[float, float] | None,
    ) -> None:
        height, width = _check_size(size)
        self.paths = tuple(str(p) for p in paths)
        self.size = (height, width)
        self.grayscale = bool(grayscale)
        self.normalization = None if normalization is None else (float(normalization[0]), float(normalization[1]))
        super().__init__((len(self.paths), 1 if grayscale else 3, height, width))

    def read_pixels(self, rows: Iterable[int]) -> np.ndarray:
        """uint8 pixels ``[n, C, H, W]`` of rows ``rows``."""
        return np.stack([decode_image(self.paths[int(i)], self.size, self.grayscale) for i in rows])

    def _read(self, rows: np.ndarray) -> Tensor:
        return normalize_pixels(torch.from_numpy(self.read_pixels(rows)), self.normalization)


def _check_size(size: tuple[int, int]) -> tuple[int, int]:
    if (
        not isinstance(size, tuple | list)
        or len(size) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in size)
        or min(size) < 1
    ):
        raise InvalidArgumentError(f"size must be (height, width) with positive ints, got {size!r}")
    return int(size[0]), int(size[1])


def folder_pixel_stats(
    files: Sequence[str | os.PathLike[str]],
    *,
    size: tuple[int, int],
    grayscale: bool,
    progress: bool = False,
) -> tuple[float, float]:
    """The exact ``(mean, std)`` of every image's resized pixels (one decoding pass, with a progress bar)."""
    stats = PixelStats()
    for file in tqdm(files, desc="pixel statistics", unit="image", disable=not progress, leave=False):
        stats.update(decode_image(file, size, grayscale))
    return stats.normalization()


def image_folder(
    path: str | os.PathLike[str],
    *,
    size: tuple[int, int] = (28, 28),
    grayscale: bool = True,
    classes: Sequence[str] | None = None,
    standardize: bool = True,
    normalization: tuple[float, float] | None = None,
    name: str | None = None,
    lazy: bool = False,
    progress: bool = False,
    only: Collection[Path] | None = None,
) -> ArrayDataset:
    """Load every image in ``path`` (flat) or in its class subfolders.

    Args:
        path: the folder.
        size: ``(height, width)`` every image is resized to (bilinear).
        grayscale: one channel (``"L"``) if true, else three (``"RGB"``).
        classes: for the flat layout, the class names a labeller will use
            (``targets`` stays ``None``); for the subfolder layout, if given, the
            subfolder names must equal this set (and their order defines the ids).
        standardize: subtract the folder's pixel mean and divide by its std
            (kept in ``dataset.normalization``); otherwise inputs stay in ``[0, 1]``.
        normalization: ``(mean, std)`` to use instead of the folder's own
            (e.g. the constants of the pool a model was trained on).
        name: dataset name; default the folder name.
        lazy: ``False``: decode everything now, inputs in memory. ``True``: inputs
            are an :class:`ImageFileInputs` decoding each item when read (for
            folders larger than memory); items are bitwise the same either way.
        progress: progress bars over the decoding (or statistics) pass.
        only: keep only the listed files that are in this collection (paths as
            :func:`list_images` gives them), in listing order; e.g. the items of a
            labelling project that were checked readable.

    Returns an :class:`ArrayDataset` with ``inputs [N, 1 or 3, H, W]`` and
    ``paths`` (absolute file paths, in item order). Raises :class:`DataError` for
    a missing / empty folder or an unreadable image (naming the file).

    Example:
        >>> import tempfile, pathlib
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> for i in range(3):
        ...     Image.fromarray(np.full((4, 4), 100 * i, dtype=np.uint8)).save(folder / f"{i}.png")
        >>> ds = image_folder(folder, size=(2, 2), standardize=False)
        >>> ds.inputs[:, 0, 0, 0].mul(255).round().tolist()
        [0.0, 100.0, 200.0]
        >>> torch.equal(image_folder(folder, size=(2, 2), lazy=True).inputs[:], image_folder(folder, size=(2, 2)).inputs)
        True
    """
    height, width = _check_size(size)
    folder = Path(path).expanduser()
    listing = list_images(folder, classes=classes)
    kept = range(len(listing.files)) if only is None else [
        i for i, f in enumerate(listing.files) if f in only]
    paths = tuple(str(listing.files[i].resolve()) for i in kept)
    targets = None if listing.targets is None else torch.tensor([listing.targets[i] for i in kept], dtype=torch.long)
    if lazy:
        if normalization is None and standardize:
            normalization = folder_pixel_stats(paths, size=(height, width), grayscale=grayscale, progress=progress)
        inputs: Tensor | LazyInputs = ImageFileInputs(
            paths, size=(height, width), grayscale=grayscale, normalization=normalization
        )
    else:
        channels = 1 if grayscale else 3
        pixels = np.empty((len(paths), channels, height, width), dtype=np.uint8)
        stats = PixelStats()
        for i, file in enumerate(tqdm(paths, desc="decode", unit="image", disable=not progress, leave=False)):
            pixels[i] = decode_image(file, (height, width), grayscale)
            stats.update(pixels[i])
        if normalization is None and standardize:
            normalization = stats.normalization()
        inputs = normalize_pixels(torch.from_numpy(pixels), normalization)
    return ArrayDataset(
        inputs=inputs,
        targets=targets,
        classes=listing.classes,
        name=name or folder.name,
        paths=paths,
        normalization=normalization,
    )
