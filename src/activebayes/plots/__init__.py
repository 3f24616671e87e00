"""Plots for active learning runs (matplotlib, PNG, headless).

Every plotting function takes ``ax=None`` (draw into the caller's axes, or a new
pyplot-free figure) and returns the ``matplotlib.figure.Figure``; nothing is
shown. matplotlib is imported lazily, inside the functions. Save with
:func:`save_figure` (atomic).

- :func:`learning_curves`: labels vs accuracy, mean and spread over seeds per strategy
- :func:`class_balance`: labelled-set class counts over rounds
- :func:`per_class_over_rounds`: one-vs-rest precision / recall / F1 per class over rounds
  (:func:`metric_label`: how a metric's name reads)
- :func:`image_grid`: a round's acquired images titled with class counts
- :func:`confusion_matrix_plot`, :func:`reliability_diagram`, :func:`roc_plot`, :func:`pr_plot`
"""

from __future__ import annotations

from activebayes.plots._base import save_figure
from activebayes.plots.curves import (
    CurveBand,
    aggregate_curves,
    class_balance,
    learning_curves,
    metric_label,
    per_class_over_rounds,
)
from activebayes.plots.diagnostics import confusion_matrix_plot, pr_plot, reliability_diagram, roc_plot
from activebayes.plots.images import class_count_title, image_grid

__all__ = [
    "CurveBand",
    "aggregate_curves",
    "class_balance",
    "class_count_title",
    "confusion_matrix_plot",
    "image_grid",
    "learning_curves",
    "metric_label",
    "per_class_over_rounds",
    "pr_plot",
    "reliability_diagram",
    "roc_plot",
    "save_figure",
]
