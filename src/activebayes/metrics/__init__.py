"""Classification metrics: functional (scikit-learn's names) and streaming (update / compute / reset).

Predictions may be labels ``[N]``, probabilities ``[N, C]`` or the Bayesian
``log_probs_N_K_C`` ``[N, K, C]`` (averaged in probability space); NumPy
arrays, lists and tensors are all accepted. See docs/metrics.md for which
formula each average uses.

Example:
    >>> from activebayes.metrics import f1_score, precision_score, recall_score
    >>> y_true = [0, 1, 0, 1, 0, 1, 1, 0]
    >>> y_pred = [0, 1, 0, 0, 1, 1, 0, 0]
    >>> round(precision_score(y_true, y_pred, average="macro"), 4), recall_score(y_true, y_pred, average="macro")
    (0.6333, 0.625)
    >>> round(f1_score(y_true, y_pred, average="macro"), 7)  # mean of per-class F1, not 2PR/(P+R) = 0.6291
    0.6190476
"""

from __future__ import annotations

from activebayes.metrics._core import PrecisionRecallF1
from activebayes.metrics.binary import (
    BinaryConfusion,
    PrecisionRecallCurve,
    RocCurve,
    ThresholdSweep,
    average_precision_score,
    binary_confusion_matrix,
    positive_class_weight,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
    threshold_sweep,
)
from activebayes.metrics.calibration import (
    ReliabilityBins,
    brier_score,
    expected_calibration_error,
    log_loss,
    reliability_bins,
)
from activebayes.metrics.classification import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)
from activebayes.metrics.evaluate import evaluate_classification
from activebayes.metrics.multilabel import (evaluate_multilabel, hamming_loss, label_decisions,
                                            multilabel_precision_recall_f1)
from activebayes.metrics.predictive import predictive_log_probs, predictive_probs

# The streaming classes subclass torchmetrics.Metric; torchmetrics imports matplotlib.pyplot
# when it loads, so they are loaded on first access instead of at import time.
_STREAMING = {"Accuracy", "Calibration", "ConfusionMatrix", "F1Score", "MetricCollection", "Precision", "Recall"}


def __getattr__(name: str):
    if name in _STREAMING:
        from activebayes.metrics import streaming

        return getattr(streaming, name)
    raise AttributeError(f"module 'activebayes.metrics' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

__all__ = [
    "Accuracy",
    "BinaryConfusion",
    "Calibration",
    "ConfusionMatrix",
    "F1Score",
    "MetricCollection",
    "Precision",
    "PrecisionRecallCurve",
    "PrecisionRecallF1",
    "Recall",
    "ReliabilityBins",
    "RocCurve",
    "ThresholdSweep",
    "accuracy_score",
    "average_precision_score",
    "binary_confusion_matrix",
    "brier_score",
    "confusion_matrix",
    "evaluate_classification",
    "evaluate_multilabel",
    "expected_calibration_error",
    "f1_score",
    "hamming_loss",
    "label_decisions",
    "log_loss",
    "multilabel_precision_recall_f1",
    "positive_class_weight",
    "precision_recall_curve",
    "precision_recall_fscore_support",
    "precision_score",
    "predictive_log_probs",
    "predictive_probs",
    "recall_score",
    "reliability_bins",
    "roc_auc_score",
    "roc_curve",
    "threshold_sweep",
]
