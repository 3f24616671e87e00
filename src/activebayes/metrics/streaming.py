"""Streaming metrics: ``update`` batch by batch, ``compute`` at the end, ``reset`` between epochs.

Each class is a thin ``torchmetrics.Metric`` (so ``forward``, device moves,
``state_dict`` and distributed sync come for free) whose state is a few sums
(a confusion matrix, calibration bin sums) and whose maths is the same private
helpers the functional API uses; accumulating batch by batch therefore gives
exactly the one-shot result.

Argument order follows torchmetrics: ``update(predictions, targets)``
(the functional API follows scikit-learn: ``f(targets, predictions)``).
Predictions: labels ``[n]``, probabilities ``[n, C]`` or ``log_probs_n_K_C``.

Example (seed 003, done right: reset once per epoch, after compute):
    >>> metrics = MetricCollection([Accuracy(), F1Score(num_classes=3)])
    >>> for epoch in range(2):
    ...     for preds, target in [([0, 1], [0, 1]), ([2, 2], [2, 1])]:
    ...         metrics.update(preds, target)
    ...     scores = metrics.compute()
    ...     metrics.reset()
    >>> scores["accuracy"]
    0.75
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from activebayes._validation import check_choice, check_positive_int
from activebayes.metrics._core import (
    AVERAGES,
    calibration_sums,
    confusion_counts,
    ece_from_sums,
    prf_from_confusion,
)
from activebayes.metrics._inputs import (
    check_below,
    check_labels,
    check_pos_label,
    check_same_length,
    check_zero_division,
    to_labels,
    to_log_probs,
)
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics.calibration import ReliabilityBins

__all__ = [
    "Accuracy",
    "Calibration",
    "ConfusionMatrix",
    "F1Score",
    "MetricCollection",
    "Precision",
    "Recall",
]


def _labels_batch(predictions: object, targets: object, num_classes: int | None) -> tuple[Tensor, Tensor]:
    targets_n = check_labels(targets, "targets")
    preds_n, implied = to_labels(predictions, "predictions")
    check_same_length(targets_n, preds_n, "targets", "predictions")
    if num_classes is not None:
        if implied is not None and implied != num_classes:
            raise InvalidArgumentError(f"predictions have {implied} classes but the metric has num_classes={num_classes}")
        check_below(targets_n, "targets", num_classes, given=True)
        check_below(preds_n, "predictions", num_classes, given=True)
    return preds_n, targets_n


class _AbMetric(Metric):
    """Common settings: sums only, so the per-batch ``forward`` never needs the full state."""

    full_state_update = False
    is_differentiable = False
    default_name = "metric"


class Accuracy(_AbMetric):
    """Running accuracy ``correct / total``. State: two counters. ``num_classes`` (optional, as
    torchmetrics' ``Accuracy(num_classes=C)`` takes it): class ids at or above it are refused."""

    higher_is_better = True
    default_name = "accuracy"

    def __init__(self, num_classes: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_classes = None if num_classes is None else check_positive_int(num_classes, "num_classes")
        self.add_state("correct", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, predictions: object, targets: object) -> None:
        preds_n, targets_n = _labels_batch(predictions, targets, self.num_classes)
        self.correct += (preds_n == targets_n).sum().to(self.correct.device)
        self.total += targets_n.numel()

    def compute(self) -> float:
        return float(self.correct) / float(self.total) if int(self.total) else float("nan")


class ConfusionMatrix(_AbMetric):
    """Running ``[C, C]`` confusion matrix (rows: truth, columns: prediction)."""

    default_name = "confusion_matrix"

    def __init__(self, num_classes: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if num_classes is None:  # Precision / Recall / F1Score too: not a TypeError naming a private class
            raise InvalidTypeError(f"{type(self).__name__} needs num_classes, the number of classes C, e.g. "
                                   f"{type(self).__name__}(10)")
        self.num_classes = check_positive_int(num_classes, "num_classes")
        self.add_state(
            "confmat", default=torch.zeros(num_classes, num_classes, dtype=torch.long), dist_reduce_fx="sum"
        )

    def update(self, predictions: object, targets: object) -> None:
        preds_n, targets_n = _labels_batch(predictions, targets, self.num_classes)
        self.confmat += confusion_counts(preds_n, targets_n, self.num_classes).to(self.confmat.device)

    def compute(self) -> Tensor:
        return self.confmat.clone()


class _PRF(ConfusionMatrix):
    higher_is_better = True
    _field = "f1"

    def __init__(
        self,
        num_classes: int | None = None,
        *,
        average: str | None = "macro",
        zero_division: float = 0.0,
        pos_label: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(num_classes, **kwargs)
        self.average = "none" if average is None else check_choice(average, "average", AVERAGES[:-1])
        if self.average == "binary" and num_classes != 2:
            raise InvalidArgumentError(f"average='binary' needs num_classes=2, got {num_classes}")
        pos_label = check_pos_label(pos_label, num_classes)
        self.zero_division = check_zero_division(zero_division)
        self.pos_label = pos_label

    def compute(self) -> float | Tensor:  # type: ignore[override]
        out = prf_from_confusion(
            self.confmat.cpu(), torch.arange(self.num_classes), average=self.average,
            zero_division=self.zero_division, pos_label=self.pos_label,
        )
        return getattr(out, self._field)


class Precision(_PRF):
    """Running precision (see :func:`activebayes.metrics.precision_score`); all ``num_classes`` count."""

    _field = "precision"
    default_name = "precision"


class Recall(_PRF):
    """Running recall (see :func:`activebayes.metrics.recall_score`); all ``num_classes`` count."""

    _field = "recall"
    default_name = "recall"


class F1Score(_PRF):
    """Running F1 (see :func:`activebayes.metrics.f1_score`); macro = mean of per-class F1."""

    _field = "f1"
    default_name = "f1"


class Calibration(_AbMetric):
    """Running NLL, Brier score (multiclass: sum over classes) and ECE.

    Needs probabilities ``[n, C]`` or ``log_probs_n_K_C``. State: ``3 * num_bins + 3`` sums.
    ``compute()`` returns ``{"nll": ..., "brier": ..., "ece": ...}``; :meth:`reliability`
    the :class:`~activebayes.metrics.ReliabilityBins`. ``num_classes`` (optional): C, checked
    against the predictions.
    """

    higher_is_better = False
    default_name = "calibration"

    def __init__(self, num_classes: int | None = None, *, num_bins: int = 15, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_classes = None if num_classes is None else check_positive_int(num_classes, "num_classes")
        self.num_bins = check_positive_int(num_bins, "num_bins")
        f64 = torch.float64
        for name in ("count_B", "conf_sum_B", "correct_sum_B"):
            self.add_state(name, default=torch.zeros(num_bins, dtype=f64), dist_reduce_fx="sum")
        for name in ("nll_sum", "brier_sum", "n"):
            self.add_state(name, default=torch.tensor(0.0, dtype=f64), dist_reduce_fx="sum")

    def update(self, predictions: object, targets: object) -> None:
        targets_n = check_labels(targets, "targets")
        pred_t = predictions if isinstance(predictions, Tensor) else torch.as_tensor(predictions)
        if pred_t.ndim == 1:
            raise InvalidArgumentError(
                "Calibration needs probabilities [n, C] or log_probs_n_K_C [n, K, C], got 1-D predictions"
            )
        log_probs_n_C = to_log_probs(pred_t, "predictions")
        check_same_length(targets_n, log_probs_n_C, "targets", "predictions")
        if self.num_classes is not None and log_probs_n_C.shape[-1] != self.num_classes:
            raise InvalidArgumentError(f"predictions have {log_probs_n_C.shape[-1]} classes but the metric has "
                                       f"num_classes={self.num_classes}")
        if int(targets_n.max()) >= log_probs_n_C.shape[-1]:
            raise InvalidArgumentError(f"targets must be < C={log_probs_n_C.shape[-1]}, got {int(targets_n.max())}")
        sums = calibration_sums(log_probs_n_C, targets_n, self.num_bins)
        for name, value in sums.items():
            setattr(self, name, getattr(self, name) + value.to(getattr(self, name).device))

    def compute(self) -> dict[str, float]:
        n = float(self.n)
        if n == 0:
            nan = float("nan")
            return {"nll": nan, "brier": nan, "ece": nan}
        return {
            "nll": float(self.nll_sum) / n,
            "brier": float(self.brier_sum) / n,
            "ece": ece_from_sums(self.count_B.cpu(), self.conf_sum_B.cpu(), self.correct_sum_B.cpu()),
        }

    def reliability(self):
        return ReliabilityBins.from_sums(self.count_B.cpu(), self.conf_sum_B.cpu(), self.correct_sum_B.cpu())


class MetricCollection:
    """Several metrics updated together; ``compute()`` returns one flat dict.

    Args:
        metrics: a mapping name -> metric, or a sequence (names from each class's
            ``default_name``, e.g. "accuracy", "f1", "calibration").
        prefix: prepended to every key (e.g. ``"val_"``).

    Dict outputs (Calibration) are flattened as ``"{name}_{key}"``, except that a
    metric named "calibration" contributes its keys bare ("nll", "brier", "ece").
    """

    def __init__(self, metrics: Mapping[str, Metric] | Sequence[Metric], *, prefix: str = "") -> None:
        if isinstance(metrics, Mapping):
            items = list(metrics.items())
        else:
            items = [(getattr(m, "default_name", type(m).__name__.lower()), m) for m in metrics]
        names = [n for n, _ in items]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"metric names must be unique, got {names}; pass a dict to name them")
        for name, metric in items:
            if not isinstance(metric, Metric):
                raise InvalidTypeError(f"metric {name!r} must be a torchmetrics.Metric, got {type(metric).__name__}")
        if not isinstance(prefix, str):
            raise InvalidTypeError(f"prefix must be a str, got {prefix!r}")
        self._metrics: dict[str, Metric] = dict(items)
        self.prefix = prefix

    def __getitem__(self, name: str) -> Metric:
        return self._metrics[name]

    def __len__(self) -> int:
        return len(self._metrics)

    def keys(self):
        return self._metrics.keys()

    def update(self, predictions: object, targets: object) -> None:
        for metric in self._metrics.values():
            metric.update(predictions, targets)

    def __call__(self, predictions: object, targets: object) -> dict[str, Any]:
        """Each metric's ``forward``: this batch's values (one flat dict), also accumulated."""
        return self._flat({name: metric(predictions, targets) for name, metric in self._metrics.items()})

    forward = __call__

    def compute(self) -> dict[str, Any]:
        return self._flat({name: metric.compute() for name, metric in self._metrics.items()})

    def to(self, device: torch.device | str) -> MetricCollection:
        """Move every metric's state to ``device``; returns the collection."""
        for metric in self._metrics.values():
            metric.to(device)
        return self

    def _flat(self, values: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in values.items():
            if isinstance(value, dict):
                for key, v in value.items():
                    out[f"{self.prefix}{key}" if name == "calibration" else f"{self.prefix}{name}_{key}"] = v
            else:
                out[f"{self.prefix}{name}"] = value
        return out

    def reset(self) -> None:
        for metric in self._metrics.values():
            metric.reset()
