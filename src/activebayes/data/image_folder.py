"""A folder of image files as an :class:`ArrayDataset` (real, unlabelled data).

Two layouts:

- flat: ``folder/*.png`` (any depth-1 images) -> unlabelled items (``targets=None``);
  pass ``classes=`` for the labels a person will give them;
- one subfolder per class: ``folder/<class>/*.png`` -> labelled items, classes
  are the subfolder names in sorted order.

Images are converted to grayscale (or RGB), resized to ``size = (height, width)``,
scaled to ``[0, 1]`` and standardised by the folder's own pixel mean and std.
Pillow is imported only when this function runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from .dataset import ArrayDataset, DataError

__all__ = ["image_folder", "IMAGE_EXTENSIONS"]

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".pgm", ".ppm"})


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)


def image_folder(
    path: str | os.PathLike[str],
    *,
    size: tuple[int, int] = (28, 28),
    grayscale: bool = True,
    classes: Sequence[str] | None = None,
    standardize: bool = True,
    name: str | None = None,
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
        name: dataset name; default the folder name.

    Returns an :class:`ArrayDataset` with ``inputs [N, 1 or 3, H, W]`` and
    ``paths`` (absolute file paths, in item order). Raises :class:`DataError` for
    a missing / empty folder or an unreadable image (naming the file).
    """
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise DataError(f"image folder {folder} does not exist or is not a folder")
    height, width = size
    if min(height, width) < 1:
        raise ValueError(f"size must be (height, width) with positive ints, got {size!r}")
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - pillow is a test dependency
        raise ImportError("image_folder needs Pillow: pip install pillow") from exc

    files = _images_in(folder)
    targets: list[int] | None = None
    if files:
        class_names = tuple(str(c) for c in classes) if classes is not None else ()
    else:
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
                raise ValueError(f"classes {list(class_names)} do not match the subfolders of {folder}: {found}")
        else:
            class_names = tuple(found)
        by_name = {p.name: p for p in subfolders}
        targets = []
        for class_id, class_name in enumerate(class_names):
            members = _images_in(by_name[class_name])
            files.extend(members)
            targets.extend([class_id] * len(members))

    mode = "L" if grayscale else "RGB"
    arrays = np.empty((len(files), height, width, 1 if grayscale else 3), dtype=np.float32)
    for i, file in enumerate(files):
        try:
            with Image.open(file) as image:
                image = image.convert(mode).resize((width, height), Image.Resampling.BILINEAR)
                pixels = np.asarray(image, dtype=np.float32) / 255.0
        except (OSError, ValueError, SyntaxError) as exc:
            raise DataError(f"{file}: cannot read image ({exc})") from None
        arrays[i] = pixels.reshape(height, width, -1)
    inputs = torch.from_numpy(arrays).permute(0, 3, 1, 2).contiguous()
    normalization: tuple[float, float] | None = None
    if standardize:
        mean = float(inputs.mean())
        std = float(inputs.std(unbiased=False))
        std = std if std > 0 else 1.0
        inputs = (inputs - mean) / std
        normalization = (mean, std)
    return ArrayDataset(
        inputs=inputs,
        targets=None if targets is None else torch.tensor(targets, dtype=torch.long),
        classes=class_names,
        name=name or folder.name,
        paths=tuple(str(f.resolve()) for f in files),
        normalization=normalization,
    )
