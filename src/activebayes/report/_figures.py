"""Turning matplotlib figures into embedded PNGs, degrading gracefully.

matplotlib is an optional extra: without it every figure is replaced by a note
saying so, and a figure that cannot be drawn (:class:`FigureSkipped`, or any
error while drawing) is replaced by a note with the reason, instead of failing
the whole report.
"""

from __future__ import annotations

import importlib
import io
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from activebayes.report._html import Figure

DPI = 90


class FigureSkipped(Exception):
    """Raised by a figure builder when the figure cannot be drawn (the message says why)."""


def matplotlib_missing() -> str | None:
    """``None`` when matplotlib imports, else the reason it does not."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as error:
        return f"matplotlib is not installed ({error}); install the 'plots' extra: pip install 'activebayes[plots]'"
    return None


def to_png(figure: Any) -> bytes:
    """Render a matplotlib Figure to PNG bytes (a 256-colour palette: the report is mailed) and release it."""
    from activebayes.plots._base import palette_png

    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", facecolor="white")
    finally:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close(figure)
    return palette_png(buffer.getvalue())


def render(key: str, caption: str, build: Callable[[], Any], *, no_matplotlib: str | None) -> Figure:
    """Call ``build()`` (returns a matplotlib Figure) and embed it, or record why it was skipped."""
    if no_matplotlib is not None:
        return Figure(key, caption, skipped=no_matplotlib)
    try:
        figure = build()
        if figure is None or not hasattr(figure, "savefig"):
            raise FigureSkipped(f"the plot function returned {type(figure).__name__}, not a matplotlib Figure")
        png = to_png(figure)
    except FigureSkipped as reason:
        return Figure(key, caption, skipped=str(reason))
    except Exception as error:  # a broken figure must not cost the whole report
        warnings.warn(f"report figure {key!r} failed: {type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)
        return Figure(key, caption, skipped=f"drawing failed: {type(error).__name__}: {error}")
    return Figure(key, caption, png=png)


# --------------------------------------------------------------------------- our own figure


PHASES = ("fit", "evaluate", "acquire", "label", "signals")


def seconds_per_round(seconds_by_strategy: Mapping[str, np.ndarray]) -> Any:
    """Stacked bars of mean seconds per phase (fit / evaluate / acquire / label / signals) per round.

    Args:
        seconds_by_strategy: ``strategy -> [R, P]`` mean seconds over seeds, the first phases in
            ``PHASES`` order (any further columns, phases of other names, are drawn in grey).
    """
    from matplotlib.figure import Figure as MplFigure  # optional dependency
    from matplotlib.ticker import MaxNLocator

    names = list(seconds_by_strategy)
    columns = min(len(names), 3)
    rows = -(-len(names) // columns)
    fig = MplFigure(figsize=(4.6 * columns, 3.2 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns, squeeze=False)).ravel()
    colours = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")
    for ax, name in zip(axes, names, strict=False):
        seconds_R_P = np.asarray(seconds_by_strategy[name], dtype=np.float64)
        rounds_R = np.arange(seconds_R_P.shape[0])
        bottom_R = np.zeros(seconds_R_P.shape[0])
        for p, phase in enumerate(PHASES):
            ax.bar(rounds_R, seconds_R_P[:, p], bottom=bottom_R, color=colours[p], label=phase, width=0.8)
            bottom_R += seconds_R_P[:, p]
        if seconds_R_P.shape[1] > len(PHASES):
            ax.bar(rounds_R, seconds_R_P[:, len(PHASES):].sum(1), bottom=bottom_R, color="#999999",
                   label="other", width=0.8)
        ax.set_title(str(name))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylabel("seconds")
    for ax in axes[len(names):]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", ncols=len(labels), fontsize="small")
    return fig
