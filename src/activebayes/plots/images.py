"""A grid of images titled with class counts (seed 000's ``display``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from activebayes.plots._base import as_array, new_axes

__all__ = ["class_count_title", "image_grid"]


def class_count_title(labels: object, *, num_classes: int | None = None, title: str | None = None) -> str:
    """``"{title} (freq) [ n_0 n_1 ... ]"`` with absent classes shown as ``*`` (seed 000).

    Each count is right-aligned in two characters so titles of successive rounds line up.

    Example:
        >>> class_count_title([0, 2, 2, 3], num_classes=5, title="# 14")
        '# 14 (freq) [  1  *  2  1  * ]'
    """
    labels_B = as_array(labels, "labels", ndim=1)
    if labels_B.size and (labels_B.min() < 0 or not np.all(labels_B == np.round(labels_B))):
        raise ValueError("labels must be non-negative integer class ids")
    labels_B = labels_B.astype(np.int64)
    C = num_classes if num_classes is not None else (int(labels_B.max()) + 1 if labels_B.size else 0)
    if labels_B.size and int(labels_B.max()) >= C:
        raise ValueError(f"labels must be < num_classes={C}, got {int(labels_B.max())}")
    counts = np.bincount(labels_B, minlength=C)
    body = " ".join(f"{n:2d}" if n > 0 else " *" for n in counts)
    prefix = f"{title} " if title else ""
    return f"{prefix}(freq) [ {body} ]"


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
    raise ValueError(
        "images must be [B, H, W], [B, ch, H, W] or [B, H, W, ch] with ch in {1, 3, 4}, "
        f"got shape {images.shape}"
    )


def image_grid(
    images: object,
    *,
    labels: object | None = None,
    title: str | None = None,
    num_classes: int | None = None,
    ncols: int | None = None,
    cmap: str = "bone",
    ax: Any = None,
) -> Any:
    """Tile a batch of images into one picture, titled with the batch's class counts.

    Args:
        images: ``[B, H, W]``, ``[B, ch, H, W]`` or ``[B, H, W, ch]`` (tensor or array);
            values are min-max scaled to [0, 1] over the whole batch.
        labels: class ids ``[B]``; adds ``"(freq) [ ... ]"`` to the title
            (see :func:`class_count_title`).
        num_classes: length of the counts (default: largest label + 1).
        ncols: images per row (default ``ceil(sqrt(B))``).

    Example:
        >>> fig = image_grid(np.zeros((4, 8, 8)), labels=[0, 1, 1, 3], title="round 2")
        >>> fig.axes[0].get_title()
        'round 2 (freq) [  1  2  *  1 ]'
    """
    array = as_array(images, "images").astype(np.float64)
    if array.shape[0] == 0:
        raise ValueError("images is empty; nothing to show")
    if not np.isfinite(array).all():
        raise ValueError("images contains NaN or inf")
    tiles = _to_hwc(array)
    B, H, W, ch = tiles.shape
    if labels is not None:
        labels_arr = as_array(labels, "labels", ndim=1)
        if labels_arr.shape[0] != B:
            raise ValueError(f"labels must have one entry per image ({B}), got {labels_arr.shape[0]}")
        full_title = class_count_title(labels_arr, num_classes=num_classes, title=title)
    else:
        full_title = title or ""
    lo, hi = tiles.min(), tiles.max()
    tiles = (tiles - lo) / (hi - lo) if hi > lo else np.zeros_like(tiles)
    ncols = ncols or math.ceil(math.sqrt(B))
    if not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive int, got {ncols!r}")
    nrows = math.ceil(B / ncols)
    pad = 1
    mosaic = np.ones((nrows * (H + pad) + pad, ncols * (W + pad) + pad, ch))
    for i in range(B):
        r, c = divmod(i, ncols)
        top, left = pad + r * (H + pad), pad + c * (W + pad)
        mosaic[top : top + H, left : left + W] = tiles[i]
    fig, ax = new_axes(ax, (max(3.0, 0.6 * ncols + 1), max(3.0, 0.6 * nrows + 1)))
    if ch == 1:
        ax.imshow(mosaic[..., 0], cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
    else:
        ax.imshow(mosaic, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(full_title, fontfamily="monospace")
    return fig
