"""Curves over rounds: learning curves across seeds, class balance, per-class metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from activebayes._validation import check_choice
from activebayes.metrics._core import prf_from_confusion
from activebayes.plots._base import LINE_STYLES, as_array, colour_cycle, new_axes
from activebayes.errors import InvalidArgumentError

__all__ = ["CurveBand", "aggregate_curves", "class_balance", "learning_curves", "metric_label", "per_class_over_rounds"]


@dataclass(frozen=True, eq=False)  # holds tensors / arrays: no elementwise ==
class CurveBand:
    """Seeds' curves on a common grid: ``x`` ``[G]`` and per-point statistics ``[G]``."""

    x: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    min: np.ndarray
    max: np.ndarray
    num_seeds: int


def aggregate_curves(runs: Sequence[tuple[object, object]], *, name: str = "runs") -> CurveBand:
    """Put several seeds' ``(n_labels, accuracy)`` curves on one grid and summarise them.

    Seeds may have different x grids (e.g. a cost budget makes rounds uneven).
    The common grid is the sorted union of every seed's x values inside the
    range all seeds cover, ``[max_s min x_s, min_s max x_s]``; each seed is
    linearly interpolated onto it (no extrapolation). Mean, sample standard deviation
    (ddof = 1, as :func:`activebayes.analysis.mean_learning_curve`; 0 for one seed), min and
    max are then taken across seeds per grid point. Where every seed has the same label
    counts the band is exactly :func:`~activebayes.analysis.mean_learning_curve`'s; the
    analysis keeps only the counts every seed has, where the plot interpolates between them.

    Example:
        >>> band = aggregate_curves([([10, 20, 30], [0.5, 0.7, 0.8]), ([10, 30], [0.6, 0.8])])
        >>> band.x.tolist(), band.mean.round(3).tolist()
        ([10.0, 20.0, 30.0], [0.55, 0.7, 0.8])
    """
    if len(runs) == 0:
        raise InvalidArgumentError(f"{name} must hold at least one (n_labels, accuracy) curve")
    curves = []
    for i, run in enumerate(runs):
        if len(run) != 2:
            raise InvalidArgumentError(f"{name}[{i}] must be a pair (n_labels_array, accuracy_array)")
        x = as_array(run[0], f"{name}[{i}] n_labels", ndim=1).astype(float)
        y = as_array(run[1], f"{name}[{i}] accuracy", ndim=1).astype(float)
        if x.shape != y.shape or x.size == 0:
            raise InvalidArgumentError(f"{name}[{i}]: n_labels and accuracy must be non-empty and equally long, got {x.shape} and {y.shape}")
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            raise InvalidArgumentError(f"{name}[{i}] contains NaN or inf")
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
        if np.any(np.diff(x) == 0):
            raise InvalidArgumentError(f"{name}[{i}] repeats an n_labels value; each round needs a distinct x")
        curves.append((x, y))
    lo = max(x[0] for x, _ in curves)
    hi = min(x[-1] for x, _ in curves)
    if lo > hi:
        raise InvalidArgumentError(f"{name}: the seeds' x ranges do not overlap (common range would be [{lo}, {hi}])")
    grid = np.unique(np.concatenate([x for x, _ in curves]))
    grid = grid[(grid >= lo) & (grid <= hi)]
    ys = np.stack([np.interp(grid, x, y) for x, y in curves])
    std = ys.std(0, ddof=1) if len(curves) > 1 else np.zeros(len(grid))
    return CurveBand(x=grid, mean=ys.mean(0), std=std, min=ys.min(0), max=ys.max(0), num_seeds=len(curves))


def learning_curves(
    curves: Mapping[str, Sequence[tuple[object, object]]],
    *,
    spread: str = "std",
    xlabel: str = "labelled items",
    ylabel: str = "test accuracy",
    title: str | None = "Learning curves",
    ax: Any = None,
) -> Any:
    """Labels vs accuracy, one line per strategy: the mean over seeds and a band for the spread.

    Args:
        curves: strategy name -> list over seeds of ``(n_labels_array, accuracy_array)``.
            Seeds are put on a common grid by :func:`aggregate_curves`.
        spread: band drawn around the mean: ``"std"`` (mean +- one standard
            deviation), ``"minmax"`` (min to max over seeds) or ``"none"``.
        ax: draw into these axes (a new figure otherwise).

    Returns:
        The matplotlib Figure.

    Example:
        >>> fig = learning_curves({"bald": [([20, 30], [0.6, 0.7]), ([20, 30], [0.62, 0.74])]})
        >>> len(fig.axes[0].get_lines())
        1
    """
    check_choice(spread, "spread", ("std", "minmax", "none"))
    if not isinstance(curves, Mapping) or len(curves) == 0:
        raise InvalidArgumentError("curves must be a non-empty mapping strategy name -> list of (n_labels, accuracy) per seed")
    fig, ax = new_axes(ax, (7, 4.5))
    colours = colour_cycle()
    for i, (strategy, runs) in enumerate(curves.items()):
        band = aggregate_curves(runs, name=f"curves[{strategy!r}]")
        label = f"{strategy} (n={band.num_seeds})"
        # past the colour cycle the colours repeat: a new line style keeps every strategy distinct
        style = LINE_STYLES[(i // len(colours)) % len(LINE_STYLES)]
        (line,) = ax.plot(band.x, band.mean, lw=2, ls=style, color=colours[i % len(colours)],
                          marker="o" if band.x.size < 30 else None, ms=3, label=label)
        if spread != "none" and band.num_seeds > 1:
            lower, upper = (band.mean - band.std, band.mean + band.std) if spread == "std" else (band.min, band.max)
            ax.fill_between(band.x, lower, upper, color=line.get_color(), alpha=0.2, lw=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title + ("" if spread == "none" else f" (band: {'mean ± std' if spread == 'std' else 'min-max'})"))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return fig


def _rounds_x(n_labelled: object | None, R: int) -> tuple[np.ndarray, str]:
    if n_labelled is None:
        return np.arange(R), "round"
    x = as_array(n_labelled, "n_labelled", ndim=1)
    if x.shape[0] != R:
        raise InvalidArgumentError(f"n_labelled must have one entry per round ({R}), got {x.shape[0]}")
    return x, "labelled items"


def _class_lines(ax: Any, x: np.ndarray, values_R_C: np.ndarray, class_names: Sequence[str] | None) -> None:
    C = values_R_C.shape[1]
    names = list(class_names) if class_names is not None else [str(c) for c in range(C)]
    if len(names) != C:
        raise InvalidArgumentError(f"class_names must have {C} entries, got {len(names)}")
    lines = ax.plot(x, values_R_C, lw=2)
    colors = _class_colors(C)
    for line, color in zip(lines, colors, strict=True):
        line.set_color(color)
    ax.legend(lines, names, ncol=2, fontsize="small", title="class")
    ax.grid(alpha=0.3)


def _class_colors(C: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if C <= 10 else "tab20"]
    return [cmap(c % cmap.N) for c in range(C)]


def class_balance(
    counts_R_C: object,
    *,
    n_labelled: object | None = None,
    class_names: Sequence[str] | None = None,
    ax: Any = None,
) -> Any:
    """Labelled-set class counts over rounds, one line per class (seed 000's balance plot).

    Args:
        counts_R_C: ``[R, C]`` number of labelled items of each class after each round.
        n_labelled: optional x values ``[R]`` (labelled-set size); rounds otherwise.

    Example:
        >>> fig = class_balance([[1, 1, 0], [3, 2, 1]])
        >>> len(fig.axes[0].get_lines())
        3
    """
    counts = as_array(counts_R_C, "counts_R_C", ndim=2)
    if (counts < 0).any():
        raise InvalidArgumentError("counts_R_C must be non-negative counts")
    fig, ax = new_axes(ax, (7, 4.5))
    x, xlabel = _rounds_x(n_labelled, counts.shape[0])
    _class_lines(ax, x, counts, class_names)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("labelled items of the class")
    ax.set_title("Labelled-set class balance")
    return fig


def per_class_over_rounds(
    values_R_C: object,
    *,
    metric: str = "precision",
    n_labelled: object | None = None,
    class_names: Sequence[str] | None = None,
    title: str | None = None,
    ax: Any = None,
) -> Any:
    """One-vs-rest precision / recall / F1 of each class over rounds (seed 000's plots).

    Args:
        values_R_C: ``[R, C]`` per-class values, or ``[R, C, C]`` confusion matrices
            (rows truth) from which ``metric`` is computed (0/0 -> 0).
        metric: "precision", "recall" or "f1" (names the plot; selects the value
            computed from confusion matrices).
        title: the axes' title (default: the metric, "one-vs-rest"; a multi-label run's
            classes are each their own yes / no decision instead).

    Example:
        >>> fig = per_class_over_rounds([[[5, 1], [2, 4]], [[6, 0], [1, 5]]], metric="recall")
        >>> fig.axes[0].get_title()
        'Recall (one-vs-rest)'
    """
    check_choice(metric, "metric", ("precision", "recall", "f1"))
    values = as_array(values_R_C, "values_R_C", ndim=(2, 3))
    if values.ndim == 3:

        R, C, C2 = values.shape
        if C != C2:
            raise InvalidArgumentError(f"confusion matrices must be square [R, C, C], got {values.shape}")
        values = np.stack([
            getattr(
                prf_from_confusion(torch.as_tensor(cm), torch.arange(C), average="none", zero_division=0.0),
                metric,
            ).numpy()
            for cm in values
        ])
    fig, ax = new_axes(ax, (7, 4.5))
    x, xlabel = _rounds_x(n_labelled, values.shape[0])
    _class_lines(ax, x, values, class_names)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(metric_label(metric))
    ax.set_title(title if title is not None else f"{metric_label(metric, capitalize=True)} (one-vs-rest)")
    return fig


def metric_label(metric: str, *, capitalize: bool = False) -> str:
    """How a per-class metric's name reads in a figure or table: ``"f1"`` -> ``"F1"``, else the
    name itself (``capitalize``: ``"Precision"``).

    Example:
        >>> metric_label("f1"), metric_label("recall"), metric_label("recall", capitalize=True)
        ('F1', 'recall', 'Recall')
    """
    if metric == "f1":
        return "F1"
    return metric.capitalize() if capitalize else metric
