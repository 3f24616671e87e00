"""Eager validation of user input, shared by every public function.

Every error names the argument, what was expected and what came.
Internal invariants use ``assert``; user mistakes raise ``ValueError`` /
``TypeError`` from here.
"""

from __future__ import annotations

import difflib
import inspect
import math
import numbers
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from activebayes.errors import InvalidArgumentError, InvalidTypeError



#: Where tensors go: a ``torch.device``, its name (``"cuda:0"``), or ``None`` (where they are).
Device = torch.device | str | None

def check_tensor(value: object, name: str) -> Tensor:
    if not isinstance(value, Tensor):
        hint = f"; convert it with torch.from_numpy({name})" if type(value).__module__ == "numpy" else ""
        raise InvalidTypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}{hint}")
    return value


def check_ndim(tensor: Tensor, ndim: int, name: str, shape_doc: str) -> None:
    if tensor.ndim != ndim:
        raise InvalidArgumentError(
            f"{name} must have {ndim} dimensions {shape_doc}, got shape {tuple(tensor.shape)}"
        )


def check_finite(tensor: Tensor, name: str, *, allow_neg_inf: bool = False) -> None:
    bad = torch.isnan(tensor)
    if allow_neg_inf:
        bad = bad | (tensor == math.inf)
    else:
        bad = bad | torch.isinf(tensor)
    if bool(bad.any()):
        n_bad = int(bad.sum())
        what = "NaN or +inf" if allow_neg_inf else "NaN or inf"
        raise InvalidArgumentError(f"{name} contains {n_bad} {what} value(s)")


def check_log_probs(
    log_probs: object,
    name: str = "log_probs_N_K_C",
    *,
    ndim: int = 3,
    shape_doc: str = "[N, K, C] (pool items, function samples, classes)",
    atol: float | None = None,
    values: bool = True,
    normalised: bool = True,
) -> Tensor:
    """Validate log-probabilities over the last dimension.

    Checks type, number of dimensions, a non-empty pool, no NaN / +inf, and that
    ``exp`` of each row sums to 1 within ``atol`` (default: :func:`log_probs_tolerance`,
    which follows the dtype and the number of classes). With ``values=False`` only the structure (type,
    dimensions, dtype, non-empty) is checked: callers that stream over chunks check
    the values chunk by chunk (see :func:`log_probs_tolerance`). With ``normalised=False``
    the rows need not sum to 1 (multi-label ``log P(y_c = 1)`` per label); NaN, +inf and
    values above 0 are still refused.
    """
    tensor = check_tensor(log_probs, name)
    check_ndim(tensor, ndim, name, shape_doc)
    if not tensor.is_floating_point():
        raise InvalidTypeError(f"{name} must be a floating point tensor, got dtype {tensor.dtype}")
    if tensor.shape[0] == 0:
        raise InvalidArgumentError(f"{name} is empty: the pool has no items (shape {tuple(tensor.shape)})")
    if tensor.numel() == 0:
        raise InvalidArgumentError(f"{name} has a zero-sized dimension: shape {tuple(tensor.shape)}")
    if not values:
        return tensor
    check_finite(tensor, name, allow_neg_inf=True)
    if bool((tensor > 1e-4).any()):
        raise InvalidArgumentError(
            f"{name} must hold log-probabilities (<= 0), got a maximum of {float(tensor.max()):.4g}; "
            "did you pass probabilities or logits? Use torch.log_softmax(logits, dim=-1)"
        )
    if not normalised:
        return tensor
    if atol is None:
        atol = log_probs_tolerance(tensor.dtype, tensor.shape[-1])
    # half precision summed in float32 (its own rounding would swamp the check)
    wide = tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()
    sums = torch.logsumexp(wide, dim=-1).exp().flatten()
    deviation = (sums - 1).abs()
    worst = int(deviation.argmax())
    if float(deviation[worst]) > atol:
        raise InvalidArgumentError(
            f"{name} must be normalised over its last dimension (exp sums to 1), but a row sums to "
            f"{float(sums[worst]):.10g}, off by {float(deviation[worst]):.3g} (tolerance {atol:.3g} for "
            f"{str(tensor.dtype).removeprefix('torch.')} and {tensor.shape[-1]} classes)"
        )
    return tensor


def samples_argument(log_probs_N_K_C: Tensor, name: str = "log_probs_N_K_C") -> str:
    """How :func:`check_samples_disagree` names a K read from predictions
    (``"K, the function samples of log_probs_N_K_C [12, 1, 3],"``)."""
    return f"K, the function samples of {name} {list(log_probs_N_K_C.shape)},"


def check_samples_disagree(K: int, argument: str, strategy: str) -> None:
    """Refuse K = 1 function sample (given as ``argument``) for ``strategy``, which scores how
    the function samples disagree (BALD, BatchBALD, EPIG, ...).

    One sample has no disagreement: every score would be 0 or rounding noise, and a batch
    chosen by them the pool's first items (or noise's).  :func:`~activebayes.acquisition.select`
    refuses through it, and so do the batch and EPIG functions called directly.
    """
    if K == 1:
        raise InvalidArgumentError(
            f"{argument} must be >= 2 for strategy {strategy!r}, which scores how the function samples "
            "disagree, got 1 (one sample has no disagreement: every score would be 0); predict with more "
            "samples (MC dropout or an ensemble), or use a strategy that reads the predictive alone (entropy, "
            "margin, badge)")


def log_probs_tolerance(dtype: torch.dtype, num_classes: int) -> float:
    """Default tolerance on ``|sum(exp(row)) - 1|`` for log-probabilities of ``dtype`` over ``num_classes``.

    Rounding each log-probability to the dtype's precision (machine epsilon
    :math:`\\varepsilon`) moves the row's sum by at most about
    :math:`\\tfrac{\\varepsilon}{2}\\,(1 + H) \\le \\tfrac{\\varepsilon}{2}\\,(1 + \\ln C)`
    (:math:`H` the row's entropy); the tolerance is 8 times that, and at least 1e-3 below
    float64. float64 values are often float32 results cast up, so they get float32's
    :math:`\\varepsilon` (at least 1e-6): about 2e-6 for 10 classes, 4e-6 for 4,000. bfloat16
    (:math:`\\varepsilon = 2^{-7}`) gets 0.18 for 100 classes, float16 0.02. Mistakes the check
    is for (probabilities or logits passed as log-probabilities, a missing normalisation)
    are off by far more.
    """
    eps = torch.finfo(torch.float32 if dtype == torch.float64 else dtype).eps
    floor = 1e-6 if dtype == torch.float64 else 1e-3
    return max(floor, 4 * eps * (1 + math.log(max(int(num_classes), 1))))


def first_few(names: Sequence[str], limit: int = 3) -> str:
    """The first ``limit`` of ``names``, comma-separated, with ``...`` after them when there are more."""
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def check_materialised(module: torch.nn.Module, name: str) -> None:
    """Raise :class:`InvalidArgumentError` when ``module`` has parameters or buffers on the
    ``meta`` device: they have shapes but no values, so nothing can be trained or predicted."""
    meta = [n for n, t in (*module.named_parameters(), *module.named_buffers()) if t.is_meta]
    if meta:
        raise InvalidArgumentError(
            f"{name}: {len(meta)} parameter(s) or buffer(s) are on the 'meta' device, which holds shapes but no "
            f"values ({first_few(meta)}): materialise them first, e.g. module.to_empty(device='cpu') and then initialise "
            "them or load a state dict")


def check_callable(function: object, name: str, *, arguments: int, expected: str) -> None:
    """Raise :class:`InvalidTypeError` when ``function`` is not callable, or its signature cannot
    take ``arguments`` positional arguments (``expected`` says what it is called with, e.g.
    ``"generator -> nn.Module"``); a callable without a signature (a C function) is trusted."""
    if not callable(function):
        raise InvalidTypeError(f"{name} must be a function ({expected}), got {type(function).__name__}")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * arguments))
    except TypeError:
        shown = f"{getattr(function, '__qualname__', type(function).__name__)}{signature}"
        if arguments == 0:
            raise InvalidTypeError(f"{name} is called with no arguments ({expected}), but {shown} needs some") from None
        raise InvalidTypeError(f"{name} is called with {arguments} argument{'s' if arguments != 1 else ''} "
                               f"({expected}), but {shown} cannot take {'them' if arguments != 1 else 'it'}") from None


def check_nonnegative_float(value: object, name: str, *, allow_zero: bool = True) -> float:
    """A finite real number >= 0 (> 0 with ``allow_zero=False``); returns it as float.

    NumPy scalars (``np.float32(0.5)``) count as real numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        expected = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise InvalidArgumentError(f"{name} must be {expected}, got {value!r}")
    return value


def check_bool(value: object, name: str) -> bool:
    """``True`` or ``False`` (NumPy's too); a string such as ``"false"`` or a number is refused, not read as truthy."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidTypeError(f"{name} must be a bool (True or False), got {type(value).__name__} {value!r}")
    return bool(value)


def check_positive_int(value: object, name: str, *, allow_zero: bool = False) -> int:
    """An int >= 1 (>= 0 with ``allow_zero=True``); returns it as a Python int.

    NumPy integers (``np.int64(5)``, what ``np.arange`` yields) count as ints; bools,
    floats and tensors do not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = int(value)
    if value < 0 or (value == 0 and not allow_zero):
        expected = ">= 0" if allow_zero else ">= 1"
        raise InvalidArgumentError(f"{name} must be {expected}, got {value}")
    return value


def unknown_name_message(what: str, value: object, choices: Iterable[str]) -> str:
    """``unknown <what> 'x' (did you mean 'y'?); expected one of: ...`` (the hint only when one is close).

    The one wording of an unknown name, in the library and the CLI alike."""
    choices = sorted(choices)
    close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.6) if isinstance(value, str) else []
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {what} {value!r}{hint}; expected one of: {', '.join(choices)}"


def check_choice(value: object, name: str, choices: Iterable[str]) -> str:
    choices = sorted(choices)
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgumentError(unknown_name_message(name, value, choices))
    return value


def available_devices() -> list[str]:
    """The torch devices this machine can run on, e.g. ``["cpu", "cuda", "cuda:0"]``."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += ["cuda", *(f"cuda:{i}" for i in range(torch.cuda.device_count()))]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def check_device(device: object, name: str = "device") -> str | None:
    """``None`` (the default device) or a device string this machine has, else a clear error."""
    if device is None:
        return None
    available = available_devices()
    if not isinstance(device, str | torch.device):
        raise InvalidTypeError(f"{name} must be a device name such as 'cpu' or 'cuda', got {type(device).__name__}")
    text = str(device)
    if text not in available:
        raise InvalidArgumentError(
            f"{name} must be a device this machine has ({', '.join(available)}), got {text!r}"
        )
    return text


def check_torch_device(device: object, name: str = "device") -> torch.device | None:
    """``device`` as a ``torch.device`` (``None`` stays ``None``), refusing a name torch does not
    know and an accelerator this machine lacks with :func:`check_device`'s message."""
    if device is None:
        return None
    try:
        resolved = torch.device(device)  # type: ignore[arg-type]
    except (RuntimeError, TypeError):
        resolved = None
    if resolved is None or (resolved.type in ("cuda", "mps") and str(resolved) not in available_devices()):
        check_device(device, name)  # raises, naming the devices there are
    return resolved


def renamed_keyword(new: object, old: object, new_name: str, old_name: str, default: object, *,
                    stacklevel: int = 3) -> object:
    """The value of keyword ``new_name`` when its deprecated spelling ``old_name`` may be used instead.

    ``old`` given (not ``None``) warns with a :class:`DeprecationWarning` naming the new
    keyword; both given raises. Neither: ``default``.
    """
    if old is None:
        return default if new is None else new
    if new is not None:
        raise InvalidArgumentError(f"{old_name} is the deprecated name of {new_name}: pass only {new_name}, got both")
    warnings.warn(f"{old_name} is deprecated here and will be removed in the next release; use {new_name}",
                  DeprecationWarning, stacklevel=stacklevel)
    return old
