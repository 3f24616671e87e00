r"""The posterior predictive: the average of a posterior's K function samples.

A posterior gives, for each item, K coherent samples of the class probabilities,
``log_probs_N_K_C``. Its prediction is their Bayesian model average,

.. math:: \bar p(c \mid x) = \frac1K \sum_{k=1}^K p(c \mid x, w_k),

computed in log space so that no probability underflows:

.. math:: \log \bar p(c \mid x) = \operatorname{logsumexp}_k \log p(c \mid x, w_k) - \log K.

Every part of activebayes that needs the predictive (metrics, stopping signals, the
loop's ranking shown in the labelling app, training's validation, ensembles of
scikit-learn models, multi-label scores) takes it from here. Multi-label posteriors
give each label's :math:`\log p(y_c = 1 \mid x, w_k)` in the same layout, and their
predictive is the same average, label by label.

Example:
    >>> import torch
    >>> log_probs_N_K_C = torch.tensor([[[0.9, 0.1], [0.5, 0.5]]]).log()
    >>> predictive_probs(log_probs_N_K_C)
    tensor([[0.7000, 0.3000]])
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from activebayes._validation import check_log_probs
from activebayes.errors import InvalidTypeError

__all__ = ["log_mean_exp", "predictive_log_probs", "predictive_probs"]


def log_mean_exp(values: Tensor, dim: int) -> Tensor:
    r""":math:`\log \frac1K \sum_k e^{v_k}` over ``dim`` (of size K), without overflow or underflow."""
    return torch.logsumexp(values, dim=dim) - math.log(values.shape[dim])


def predictive_log_probs(log_probs_N_K_C: Tensor, *, dtype: torch.dtype | None = None) -> Tensor:
    r"""The predictive's log-probabilities :math:`\log \bar p(c \mid x)`, ``[N, C]``.

    Args:
        log_probs_N_K_C: K function samples' log-probabilities of each item ``[N, K, C]``
            (single-label: normalised over C; multi-label: each label's ``log P(y_c = 1)``).
            Checked once: a floating point ``[N, K, C]`` tensor of values <= 0, no NaN or +inf.
        dtype: compute (and return) in this floating point dtype, e.g. ``torch.float64``;
            default: the input's.
    """
    check_log_probs(log_probs_N_K_C, normalised=False)
    if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
        raise InvalidTypeError(f"dtype must be a floating point torch.dtype (e.g. torch.float64), got {dtype!r}")
    if dtype is not None:
        log_probs_N_K_C = log_probs_N_K_C.to(dtype)
    return log_mean_exp(log_probs_N_K_C, dim=1)


def predictive_probs(log_probs_N_K_C: Tensor, *, dtype: torch.dtype | None = None) -> Tensor:
    r"""The predictive's probabilities :math:`\bar p(c \mid x)`, ``[N, C]`` (the exp of
    :func:`predictive_log_probs`)."""
    return predictive_log_probs(log_probs_N_K_C, dtype=dtype).exp()
