"""Input conversion and validation shared by every metric (the edges).

Everything a metric receives goes through here once: NumPy arrays, lists and
tensors become tensors; predictions of any of the three accepted forms become
labels, probabilities or log-probabilities:

- labels ``[N]`` (integer class ids),
- probabilities ``[N, C]`` (rows on the simplex),
- the Bayesian prediction ``log_probs_N_K_C`` ``[N, K, C]``, averaged in
  probability space: ``log p(y | x) = logsumexp_k log p_k(y | x) - log K``.

All maths downstream runs in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from activebayes._validation import check_finite, check_log_probs, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics.predictive import predictive_log_probs

_PRED_FORMS = "labels [N], probabilities [N, C] or log-probabilities log_probs_N_K_C [N, K, C]"


def as_tensor(value: object, name: str) -> Tensor:
    """Return ``value`` as a CPU tensor; accepts tensors, NumPy arrays, lists, tuples."""
    if isinstance(value, Tensor):
        return value.detach()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise InvalidTypeError(f"{name} must be a numeric array, got a NumPy array of dtype object")
        return torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, (list, tuple)):
        try:
            return torch.as_tensor(np.asarray(value))
        except (TypeError, ValueError, RuntimeError) as err:
            raise InvalidTypeError(f"{name} must be a numeric array-like, could not convert: {err}") from None
    raise InvalidTypeError(
        f"{name} must be a torch.Tensor, NumPy array or list, got {type(value).__name__}"
    )


def _integer_valued(tensor: Tensor, name: str) -> Tensor:
    if tensor.dtype == torch.bool:
        return tensor.long()
    if tensor.is_floating_point():
        check_finite(tensor, name)
        if not bool((tensor == tensor.round()).all()):
            raise InvalidArgumentError(
                f"{name} must hold integer class labels, got non-integer values such as "
                f"{float(tensor[tensor != tensor.round()][0]):.4g}; for scores or probabilities of "
                "the positive class, threshold them first or use binary_confusion_matrix(..., threshold=)"
            )
        return tensor.long()
    if tensor.is_complex():
        raise InvalidTypeError(f"{name} must be real, got dtype {tensor.dtype}")
    return tensor.long()


def check_labels(value: object, name: str = "targets", *, ndim: int = 1) -> Tensor:
    """Integer labels (int64), ``ndim`` dimensions, non-negative, non-empty."""
    tensor = as_tensor(value, name)
    if tensor.ndim != ndim:
        shape_doc = "[N]" if ndim == 1 else f"with {ndim} dimensions"
        raise InvalidArgumentError(f"{name} must be {shape_doc}, got shape {tuple(tensor.shape)}")
    if tensor.numel() == 0:
        raise InvalidArgumentError(f"{name} is empty (shape {tuple(tensor.shape)}); need at least one item")
    tensor = _integer_valued(tensor, name)
    if bool((tensor < 0).any()):
        raise InvalidArgumentError(f"{name} must be non-negative class ids, got minimum {int(tensor.min())}")
    return tensor


def check_probs(value: object, name: str = "probs_N_C", *, atol: float | None = None) -> Tensor:
    """Probabilities ``[N, C]`` in [0, 1] whose rows sum to 1; returned as float64."""
    tensor = as_tensor(value, name)
    if tensor.ndim != 2:
        raise InvalidArgumentError(f"{name} must be [N, C] probabilities, got shape {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise InvalidTypeError(f"{name} must be floating point probabilities, got dtype {tensor.dtype}")
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise InvalidArgumentError(f"{name} has a zero-sized dimension: shape {tuple(tensor.shape)}")
    check_finite(tensor, name)
    if atol is None:
        # rounding each probability moves a row's sum by about eps / 2: four times that, at least 1e-3
        # below float64 (bfloat16, eps = 2^-7: 0.031; float16: 0.0039)
        atol = 1e-6 if tensor.dtype == torch.float64 else max(1e-3, 4 * torch.finfo(tensor.dtype).eps)
    lo, hi = float(tensor.min()), float(tensor.max())
    if lo < -atol or hi > 1 + atol:
        if hi <= atol and abs(float(tensor.double().exp().sum(-1).max()) - 1) <= atol:
            hint = ("these look like log-probabilities: pass their .exp(), or log-probabilities [N, K, C] "
                    f"(for one sample, {name}.unsqueeze(1))")
        else:
            hint = "did you pass logits? Use torch.softmax(logits, dim=-1)"
        raise InvalidArgumentError(
            f"{name} must hold probabilities in [0, 1], got values in [{lo:.4g}, {hi:.4g}]; {hint}"
        )
    sums = tensor.double().sum(-1)
    worst = int((sums - 1).abs().argmax())
    if abs(float(sums[worst]) - 1) > atol:
        raise InvalidArgumentError(
            f"{name} rows must sum to 1 (normalised probabilities), but row {worst} sums to "
            f"{float(sums[worst]):.6g} (tolerance {atol:g})"
        )
    return tensor.double().clamp(0.0, 1.0)


def to_log_probs(predictions: object, name: str = "predictions") -> Tensor:
    """Predictive log-probabilities ``[N, C]`` (float64) from ``[N, C]`` probs or ``[N, K, C]`` log-probs.

    A 1-D float input is read as the probability of class 1 (binary) and becomes
    ``[1 - p, p]``.
    """
    tensor = as_tensor(predictions, name)
    if tensor.ndim == 3:
        return predictive_log_probs(check_log_probs(tensor, name), dtype=torch.float64)
    if tensor.ndim == 2:
        return check_probs(tensor, name).log()
    if tensor.ndim == 1 and tensor.is_floating_point():
        probs = binary_scores_to_probs(tensor, name)
        return probs.log()
    raise InvalidArgumentError(
        f"{name} must be probabilities [N, C], log_probs_N_K_C [N, K, C] or binary "
        f"probabilities of class 1 [N], got shape {tuple(tensor.shape)} dtype {tensor.dtype}"
    )


def to_probs(predictions: object, name: str = "predictions") -> Tensor:
    """Predictive probabilities ``[N, C]`` (float64); see :func:`to_log_probs`."""
    tensor = as_tensor(predictions, name)
    if tensor.ndim == 2:
        return check_probs(tensor, name)
    return to_log_probs(tensor, name).exp()


def binary_scores_to_probs(scores_N: Tensor, name: str) -> Tensor:
    check_finite(scores_N, name)
    if scores_N.numel() == 0:
        raise InvalidArgumentError(f"{name} is empty; need at least one item")
    lo, hi = float(scores_N.min()), float(scores_N.max())
    if lo < 0 or hi > 1:
        raise InvalidArgumentError(
            f"{name} as a 1-D float tensor must hold probabilities of class 1 in [0, 1], "
            f"got values in [{lo:.4g}, {hi:.4g}]; apply torch.sigmoid to logits first"
        )
    p = scores_N.double()
    return torch.stack([1 - p, p], dim=-1)


def to_labels(predictions: object, name: str = "predictions") -> tuple[Tensor, int | None]:
    """Predicted labels ``[N]`` and the number of classes the input implies (None for labels).

    Probabilities and log-probabilities are reduced by argmax of the (mean)
    predictive distribution; ties go to the lowest class id.
    """
    tensor = as_tensor(predictions, name)
    if tensor.ndim == 1:
        return check_labels(tensor, name), None
    if tensor.ndim == 2:
        probs = check_probs(tensor, name)
        return probs.argmax(-1), probs.shape[-1]
    if tensor.ndim == 3:
        log_probs = predictive_log_probs(check_log_probs(tensor, name), dtype=torch.float64)
        return log_probs.argmax(-1), log_probs.shape[-1]
    raise InvalidArgumentError(f"{name} must be {_PRED_FORMS}, got shape {tuple(tensor.shape)}")


def check_same_length(a: Tensor, b: Tensor, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise InvalidArgumentError(
            f"{name_a} and {name_b} must have the same number of items, "
            f"got {a.shape[0]} and {b.shape[0]}"
        )


def check_below(labels_N: Tensor | None, name: str, C: int, *, given: bool) -> None:
    """Refuse a class id >= ``C`` in ``labels_N`` (``given``: C is the caller's ``num_classes``,
    else the number of classes of the probabilities), naming the argument that holds it."""
    if labels_N is not None and int(labels_N.max()) >= C:
        bound = f"num_classes={C}" if given else f"C={C} (the predictions' classes)"
        raise InvalidArgumentError(f"{name} must be class ids < {bound}, got {int(labels_N.max())}")


def check_pos_label(pos_label: object, num_classes: int | None = None) -> int:
    """The positive class: an int id >= 0 (NumPy ints too), ``< num_classes`` when that is known."""
    pos_label = check_positive_int(pos_label, "pos_label", allow_zero=True)
    if num_classes is not None and pos_label >= num_classes:
        raise InvalidArgumentError(f"pos_label must be a class id < {num_classes}, got {pos_label}")
    return pos_label


def check_zero_division(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"zero_division must be 0, 1 or nan, got {value!r}")
    value = float(value)
    if not (value in (0.0, 1.0) or math.isnan(value)):
        raise InvalidArgumentError(f"zero_division must be 0, 1 or nan, got {value!r}")
    return value


def resolve_labels(
    labels: Sequence[int] | object | None,
    num_classes: int | None,
    targets_N: Tensor,
    preds_N: Tensor | None,
    implied_classes: int | None,
) -> tuple[Tensor, int]:
    """Which class ids count, and the size of the confusion matrix.

    - ``labels`` given: exactly those ids, in that order (scikit-learn's ``labels=``);
    - else ``num_classes`` (or the C of probability input): ``0 .. C-1``, absent classes included;
    - else the sorted union of ids present in targets and predictions (scikit-learn's default).
    """
    if num_classes is not None:
        num_classes = check_positive_int(num_classes, "num_classes")
        if implied_classes is not None and implied_classes != num_classes:
            raise InvalidArgumentError(
                f"num_classes={num_classes} but the predictions have {implied_classes} classes"
            )
    C = num_classes if num_classes is not None else implied_classes
    observed_max = int(targets_N.max())
    if preds_N is not None:
        observed_max = max(observed_max, int(preds_N.max()))
    if C is not None:
        check_below(targets_N, "targets", C, given=num_classes is not None)
        check_below(preds_N, "predictions", C, given=num_classes is not None)
    if labels is not None:
        label_ids = check_labels(labels, "labels")
        if label_ids.unique().numel() != label_ids.numel():
            raise InvalidArgumentError(f"labels must not repeat ids, got {label_ids.tolist()}")
        size = max(observed_max, int(label_ids.max())) + 1 if C is None else C
        if int(label_ids.max()) >= size:
            raise InvalidArgumentError(f"labels must be < num_classes={size}, got {label_ids.tolist()}")
        return label_ids, size
    if C is not None:
        return torch.arange(C), C
    present = targets_N if preds_N is None else torch.cat([targets_N, preds_N])
    return present.unique(sorted=True), observed_max + 1
