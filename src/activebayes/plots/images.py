"""A grid of images titled with the batch's class counts (seed 000's ``display``, made readable)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

from activebayes.plots._base import as_array, new_axes
from activebayes.errors import InvalidArgumentError

__all__ = ["class_count_title", "image_grid"]

# absent classes are listed by name up to this many; beyond it only their number is given
_MAX_ABSENT_LISTED = 12


def class_count_title(
    labels: object,
    *,
    num_classes: int | None = None,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
    width: int | None = None,
) -> str:
    """A title that says what a batch of labelled items holds, class by class.

    Lines: ``title`` (if given); ``"B items — class counts: name×count, ..."``
    for the classes present, in class order; ``"none of class ..."`` naming the
    classes absent (only their number when there are more than 12).
    ``width`` wraps the lines to that many characters.

    Args:
        labels: class ids ``[B]``.
        num_classes: C (default: largest label + 1); absent classes count from it.
        class_names: C names (default ``"0"``, ``"1"``, ...).
        title: first line.
        width: wrap lines longer than this (default: no wrapping).

    Example:
        >>> print(class_count_title([0, 2, 2, 3], num_classes=5, title="round 3"))
        round 3
        4 items — class counts: 0×1, 2×2, 3×1
        none of class 1, 4
        >>> print(class_count_title([1, 1], class_names=["cat", "dog"]))
        2 items — class counts: dog×2
        none of class cat
    """
    labels_B = as_array(labels, "labels", ndim=1)
    if labels_B.size and (labels_B.min() < 0 or not np.all(labels_B == np.round(labels_B))):
        raise InvalidArgumentError(f"labels must be non-negative integer class ids, got {labels_B.tolist()}")
    labels_B = labels_B.astype(np.int64)
    if class_names is not None and num_classes is not None and len(class_names) != num_classes:
        raise InvalidArgumentError(f"class_names must have num_classes={num_classes} entries, got {len(class_names)}")
    if class_names is not None:
        C = len(class_names)
    elif num_classes is not None:
        C = num_classes
    else:
        C = int(labels_B.max()) + 1 if labels_B.size else 0
    if labels_B.size and int(labels_B.max()) >= C:
        raise InvalidArgumentError(f"labels must be < num_classes={C}, got {int(labels_B.max())}")
    if width is not None and (not isinstance(width, int) or width < 10):
        raise InvalidArgumentError(f"width must be an int >= 10 (characters per line), got {width!r}")
    names = [str(name) for name in class_names] if class_names is not None else [str(c) for c in range(C)]
    counts_C = np.bincount(labels_B, minlength=C)
    B = int(labels_B.size)
    present = ", ".join(f"{names[c]}×{n}" for c, n in enumerate(counts_C) if n > 0)
    lines = [title] if title else []
    lines.append(f"{B} item{'' if B == 1 else 's'} — class counts: {present}" if B else "no items")
    absent = [names[c] for c, n in enumerate(counts_C) if n == 0]
    if absent and B:
        if len(absent) <= _MAX_ABSENT_LISTED:
            lines.append(f"none of class {', '.join(absent)}")
        else:
            lines.append(f"{len(absent)} of {C} classes absent")
    if width is not None:
        lines = [textwrap.fill(line, width, break_on_hyphens=False) for line in lines]
    return "\n".join(lines)


def _to_hwc(images: np.ndarray) -> np.ndarray:
    """``[B, H, W, ch]`` with ch in {1, 3, 4} from ``[B, H, W]``, ``[B, ch, H, W]`` or ``[B, H, W, ch]``."""
    if images.ndim == 3:
        return images[..., None]
    if images.ndim == 4:
        if images.shape[1] in (1, 3, 4) and images.shape[-1] not in (1, 3, 4):
            return images.transpose(0, 2, 3, 1)
        if images.shape[-1] in (1, 3, 4):
            return images
        if images.shape[1] in (1, 3, 4):
            return images.transpose(0, 2, 3, 1)
    raise InvalidArgumentError(
        "images must be [B, H, W], [B, ch, H, W] or [B, H, W, ch] with ch in {1, 3, 4}, "
        f"got shape {images.shape}"
    )


def image_grid(
    images: object,
    *,
    labels: object | None = None,
    title: str | None = None,
    num_classes: int | None = None,
    class_names: Sequence[str] | None = None,
    ncols: int | None = None,
    cmap: str = "bone",
    ax: Any = None,
) -> Any:
    """Tile a batch of images into one picture, titled with the batch's class counts.

    Args:
        images: ``[B, H, W]``, ``[B, ch, H, W]`` or ``[B, H, W, ch]`` (tensor or array);
            values are min-max scaled to [0, 1] over the whole batch.
        labels: class ids ``[B]``; adds the class counts under the title
            (see :func:`class_count_title`; lines wrapped to the figure's width).
        num_classes: C, for the absent classes (default: largest label + 1).
        class_names: C class names for the counts (default ``"0"``, ``"1"``, ...).
        ncols: images per row (default ``ceil(sqrt(B))``).

    Example:
        >>> fig = image_grid(np.zeros((4, 8, 8)), labels=[0, 1, 1, 3], title="round 2")
        >>> print(fig.axes[0].get_title())
        round 2
        4 items — class counts: 0×1, 1×2, 3×1
        none of class 2
    """
    array = as_array(images, "images").astype(np.float64)
    if array.shape[0] == 0:
        raise InvalidArgumentError("images is empty; nothing to show")
    if not np.isfinite(array).all():
        raise InvalidArgumentError("images contains NaN or inf")
    tiles = _to_hwc(array)
    B, H, W, ch = tiles.shape
    ncols = ncols or math.ceil(math.sqrt(B))
    if not isinstance(ncols, int) or ncols < 1:
        raise InvalidArgumentError(f"ncols must be a positive int, got {ncols!r}")
    nrows = math.ceil(B / ncols)
    figsize = (max(3.5, 0.6 * ncols + 1), max(3.0, 0.6 * nrows + 1))
    if labels is not None:
        labels_arr = as_array(labels, "labels", ndim=1)
        if labels_arr.shape[0] != B:
            raise InvalidArgumentError(f"labels must have one entry per image ({B}), got {labels_arr.shape[0]}")
        # ~14 characters of the 10 pt title font per inch of figure width (the saved PNG grows to fit)
        full_title = class_count_title(labels_arr, num_classes=num_classes, class_names=class_names,
                                       title=title, width=max(50, int(14 * figsize[0])))
    else:
        full_title = title or ""
    lo, hi = tiles.min(), tiles.max()
    tiles = (tiles - lo) / (hi - lo) if hi > lo else np.zeros_like(tiles)
    pad = 1
    mosaic = np.ones((nrows * (H + pad) + pad, ncols * (W + pad) + pad, ch))
    for i in range(B):
        r, c = divmod(i, ncols)
        top, left = pad + r * (H + pad), pad + c * (W + pad)
        mosaic[top : top + H, left : left + W] = tiles[i]
    fig, ax = new_axes(ax, figsize)
    if ch == 1:
        ax.imshow(mosaic[..., 0], cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    else:
        ax.imshow(mosaic, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(full_title, fontsize="medium")
    return fig
