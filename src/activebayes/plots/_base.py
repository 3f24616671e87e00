"""Shared plumbing: lazy matplotlib, a figure or the caller's axes, atomic saving."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
from activebayes._io import atomic_write_bytes
from activebayes.errors import InvalidArgumentError, InvalidTypeError


def new_axes(ax: Any, figsize: tuple[float, float]) -> tuple[Any, Any]:
    """``(figure, axes)``: the caller's axes, or a fresh pyplot-free Figure (Agg, never shown).

    ``matplotlib.figure.Figure`` is used directly, so nothing touches pyplot's
    global state or the display; the figure is garbage-collected like any object.
    """
    if ax is not None:
        try:
            fig = ax.get_figure(root=True)  # matplotlib >= 3.10: the top figure, not a SubFigure
        except TypeError:
            fig = ax.figure
        return fig, ax
    from matplotlib.figure import Figure  # lazy: matplotlib is optional and heavy

    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


#: Line styles that take over once a figure has more lines than the colour cycle has colours.
LINE_STYLES = ("-", "--", ":", "-.")


def colour_cycle() -> list[str]:
    """The colours of matplotlib's current ``axes.prop_cycle`` (tab10 by default)."""
    import matplotlib as mpl  # lazy: matplotlib is optional and heavy

    colours = [entry["color"] for entry in mpl.rcParams["axes.prop_cycle"] if "color" in entry]
    return colours or ["C0"]


def as_array(value: object, name: str, *, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """NumPy float/int array from a tensor, array or list, with a clear error on bad shapes."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()  # type: ignore[union-attr]
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise InvalidTypeError(f"{name} must be array-like, could not convert: {err}") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise InvalidTypeError(f"{name} must be numeric, got dtype {array.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if array.ndim not in allowed:
            raise InvalidArgumentError(f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {array.shape}")
    return array


def palette_png(data: bytes) -> bytes:
    """A PNG's bytes re-encoded with a 256-colour palette (optimised): a plot or a screenshot
    looks the same at a third to a quarter of the size, which matters for reports sent by
    mail and for figures kept in a repository."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        quantized = image.convert("RGBA").quantize(colors=256, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    quantized.save(out, format="PNG", optimize=True)
    return out.getvalue()


def save_figure(fig: Any, path: str | os.PathLike[str], *, dpi: int = 100, palette: bool = True) -> Path:
    """Write ``fig`` to ``path`` atomically: a temporary file in the same folder, fsynced, then ``os.replace``.

    A crash mid-write never leaves a truncated image at ``path``. The format comes
    from the suffix (PNG when there is none). Parent folders are created. A PNG is
    written with a 256-colour palette (:func:`palette_png`) unless ``palette=False``.

    Example:
        >>> import tempfile, pathlib
        >>> from activebayes.plots import roc_plot
        >>> out = save_figure(roc_plot([0, 0.5, 1], [0, 0.8, 1]), pathlib.Path(tempfile.mkdtemp()) / "roc.png")
        >>> out.stat().st_size > 0
        True
    """
    path = Path(path)
    fmt = path.suffix.lstrip(".").lower() or "png"
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, dpi=dpi)
    data = palette_png(buffer.getvalue()) if fmt == "png" and palette else buffer.getvalue()
    return atomic_write_bytes(path, data)  # temp file, fsync, rename: the project's one atomic writer
