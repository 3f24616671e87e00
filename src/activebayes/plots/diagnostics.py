"""Diagnostic plots: confusion matrix, reliability diagram, ROC and PR curves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from activebayes._validation import check_choice
from activebayes.metrics.calibration import ReliabilityBins, reliability_bins
from activebayes.plots._base import as_array, new_axes
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["confusion_matrix_plot", "pr_plot", "reliability_diagram", "roc_plot"]


def confusion_matrix_plot(
    cm: object,
    *,
    class_names: Sequence[str] | None = None,
    normalize: str | None = None,
    cmap: str = "Blues",
    ax: Any = None,
) -> Any:
    """Heat map of a ``[C, C]`` confusion matrix (rows: true class, columns: predicted).

    Args:
        normalize: ``None`` (counts), ``"true"`` (each row sums to 1: recall on the
            diagonal), ``"pred"`` (columns sum to 1: precision on the diagonal) or ``"all"``.

    Cells are annotated with their values when C <= 20.

    Example:
        >>> fig = confusion_matrix_plot([[7, 2], [1, 10]], class_names=["neg", "pos"])
        >>> sorted(t.get_text() for t in fig.axes[0].texts)
        ['1', '10', '2', '7']
    """
    matrix = as_array(cm, "cm", ndim=2).astype(np.float64)
    C = matrix.shape[0]
    if matrix.shape != (C, C):
        raise InvalidArgumentError(f"cm must be square [C, C], got shape {matrix.shape}")
    if (matrix < 0).any():
        raise InvalidArgumentError("cm must hold non-negative counts")
    counts = np.issubdtype(as_array(cm, "cm").dtype, np.integer) or np.all(matrix == np.round(matrix))
    if normalize is not None:
        check_choice(normalize, "normalize", ("true", "pred", "all"))
        axis = {"true": 1, "pred": 0, "all": None}[normalize]
        den = matrix.sum(axis=axis, keepdims=axis is not None)
        with np.errstate(invalid="ignore", divide="ignore"):
            matrix = np.nan_to_num(matrix / den)
        counts = False
    names = list(class_names) if class_names is not None else [str(c) for c in range(C)]
    if len(names) != C:
        raise InvalidArgumentError(f"class_names must have {C} entries, got {len(names)}")
    fig, ax = new_axes(ax, (max(4.0, 0.45 * C + 2), max(3.5, 0.45 * C + 1.5)))
    image = ax.imshow(matrix, cmap=cmap, interpolation="nearest", vmin=0)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    if C <= 20:
        threshold = matrix.max() / 2 if matrix.max() > 0 else 1
        for i in range(C):
            for j in range(C):
                text = f"{int(matrix[i, j])}" if counts else f"{matrix[i, j]:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize="small",
                        color="white" if matrix[i, j] > threshold else "black")
    ax.set_xticks(range(C), names, rotation=45 if C > 10 else 0)
    ax.set_yticks(range(C), names)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.set_title("Confusion matrix" + (f" (normalised over {normalize})" if normalize else ""))
    return fig


def reliability_diagram(
    bins: Any = None,
    *,
    predictions: object | None = None,
    targets: object | None = None,
    num_bins: int = 15,
    ax: Any = None,
) -> Any:
    """Accuracy against confidence per bin, with the gap to the diagonal shaded (Guo et al. 2017).

    Pass either ``bins`` (a :class:`~activebayes.metrics.ReliabilityBins`) or
    ``predictions`` (probabilities ``[N, C]`` / ``log_probs_N_K_C``) and
    ``targets`` (binned with :func:`~activebayes.metrics.reliability_bins`).

    Example:
        >>> fig = reliability_diagram(predictions=[[0.9, 0.1], [0.3, 0.7]], targets=[0, 0], num_bins=5)
        >>> fig.axes[0].get_title()
        'Reliability diagram (ECE 0.400)'
    """

    if bins is None:
        if predictions is None or targets is None:
            raise InvalidArgumentError("reliability_diagram needs bins=ReliabilityBins or both predictions= and targets=")
        bins = reliability_bins(targets, predictions, num_bins=num_bins)
    elif not isinstance(bins, ReliabilityBins):
        raise InvalidTypeError(f"bins must be a ReliabilityBins (from metrics.reliability_bins), got {type(bins).__name__}")
    elif predictions is not None or targets is not None:
        raise InvalidArgumentError("pass either bins or predictions + targets, not both")
    edges = bins.edges.numpy()
    width = np.diff(edges)
    centers = edges[:-1] + width / 2
    nonempty = bins.counts.numpy() > 0
    acc = np.nan_to_num(bins.accuracy.numpy())
    conf = np.nan_to_num(bins.confidence.numpy())
    fig, ax = new_axes(ax, (4.8, 4.8))
    ax.bar(centers[nonempty], acc[nonempty], width=width[nonempty], color="tab:blue",
           edgecolor="black", lw=0.5, label="accuracy")
    gap_bottom = np.minimum(acc, conf)[nonempty]
    ax.bar(centers[nonempty], np.abs(conf - acc)[nonempty], bottom=gap_bottom, width=width[nonempty],
           color="tab:red", alpha=0.3, hatch="//", edgecolor="tab:red", lw=0.5, label="gap to confidence")
    ax.plot([0, 1], [0, 1], ls="--", color="gray", lw=1, label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (top-label probability)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"Reliability diagram (ECE {bins.ece:.3f})")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def _curve_xy(x: object, y: object, names: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    xa = as_array(x, names[0], ndim=1).astype(float)
    ya = as_array(y, names[1], ndim=1).astype(float)
    if xa.shape != ya.shape or xa.size == 0:
        raise InvalidArgumentError(f"{names[0]} and {names[1]} must be non-empty and equally long, got {xa.shape} and {ya.shape}")
    return xa, ya


def roc_plot(
    fpr: object, tpr: object, *, auc: float | None = None, label: str | None = None, ax: Any = None
) -> Any:
    """ROC curve (TPR against FPR) with the chance diagonal; ``auc`` goes into the legend.

    Call again with the same ``ax`` to overlay models.

    Example:
        >>> fig = roc_plot([0, 0, 0.5, 1], [0, 0.5, 1, 1], auc=0.875)
        >>> fig.axes[0].get_legend().get_texts()[0].get_text()
        'AUC = 0.875'
    """
    x, y = _curve_xy(fpr, tpr, ("fpr", "tpr"))
    fig, ax = new_axes(ax, (4.8, 4.8))
    text = label or ""
    if auc is not None:
        text = f"{text} (AUC = {auc:.3f})" if text else f"AUC = {auc:.3f}"
    ax.plot(x, y, lw=2, label=text or None)
    if not any(line.get_gid() == "chance" for line in ax.get_lines()):
        ax.plot([0, 1], [0, 1], ls="--", color="gray", lw=1, gid="chance")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate (recall)")
    ax.set_title("ROC curve")
    if text:
        ax.legend(loc="lower right")
    return fig


def pr_plot(
    recall: object,
    precision: object,
    *,
    ap: float | None = None,
    prevalence: float | None = None,
    label: str | None = None,
    ax: Any = None,
) -> Any:
    """Precision-recall curve as a step function; ``prevalence`` draws the no-skill line.

    Example:
        >>> fig = pr_plot([1, 1, 0.5, 0], [0.5, 0.67, 1, 1], ap=0.83, prevalence=0.5)
        >>> fig.axes[0].get_title()
        'Precision-recall curve'
    """
    x, y = _curve_xy(recall, precision, ("recall", "precision"))
    fig, ax = new_axes(ax, (4.8, 4.8))
    text = label or ""
    if ap is not None:
        text = f"{text} (AP = {ap:.3f})" if text else f"AP = {ap:.3f}"
    ax.plot(x, y, lw=2, drawstyle="steps-post", label=text or None)
    if prevalence is not None:
        ax.axhline(prevalence, ls="--", color="gray", lw=1, label=f"no skill ({prevalence:.2f})")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_title("Precision-recall curve")
    if text or prevalence is not None:
        ax.legend(loc="lower left")
    return fig
