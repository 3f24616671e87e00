"""Per-item acquisition scores: pure functions on ``log_probs_N_K_C``.

Every score takes log-probabilities ``log_probs_N_K_C`` (N pool items, K function
samples, C classes; ``exp`` sums to 1 over C) and returns float64 ``scores_N``
where **larger means more worth labelling**. Notation: ``p_k(c) = exp(log_probs[n, k, c])``
and the predictive (mean) distribution ``p̄(c) = 1/K Σ_k p_k(c)``
(``= exp(logsumexp_k log p_k(c) - log K)``; taken on the probabilities that the value
check computes anyway, which cannot overflow). ``0 log 0 = 0`` throughout.

All functions stream over the pool in chunks (memory independent of N), check the
input's values on the way (NaN / inf / rows not summing to 1 raise ``ValueError``),
reduce in float64, and take keyword-only ``device`` (compute there, e.g. a GPU; the
result comes back on the input's device) and ``chunk_size`` (rows per chunk).

References: Gal, Islam & Ghahramani (2017), *Deep Bayesian Active Learning with
Image Data* (max entropy, BALD, variation ratios, mean STD); Houlsby et al. (2011),
*Bayesian Active Learning for Classification and Preference Learning* (BALD);
Settles (2009), *Active Learning Literature Survey* (least confidence, margin).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from activebayes._seeding import as_generator
from activebayes._validation import Device, check_finite, check_ndim, check_positive_int, check_tensor, check_torch_device
from activebayes.acquisition._chunks import clamp_log, iter_chunks, map_log_probs, resolve_device, rows_per_chunk
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "predictive_entropy",
    "expected_entropy",
    "bald",
    "jackknife_bald",
    "variation_ratios",
    "mean_std",
    "margin",
    "least_confidence",
    "predictive_variance",
    "random_scores",
]



# --- chunk kernels: (raw log_probs_n_K_C, probs_n_K_C = exp of it) -> float64 scores_n ---
#
# The mean over K is taken in probability space on the ``exp`` that the value check
# needs anyway: ``p̄ = mean_k exp(log p_k)`` equals ``exp(logsumexp_k log p_k - log K)``
# (no overflow is possible since p <= 1; a mean that underflows to 0 is < 1e-38 and
# its entropy term < 1e-36 nats). This saves logsumexp's extra passes over the chunk.


def _mean_probs_n_C(probs_n_K_C: Tensor) -> Tensor:
    return probs_n_K_C.mean(dim=1)


def _entropy_from_probs(probs_n_C: Tensor) -> Tensor:
    """``-Σ_c p log p`` over the last dim (``0 log 0 = 0``), float64 accumulation."""
    return torch.special.entr(probs_n_C).sum(-1, dtype=torch.float64)


def _entropy_from_log(log_probs_n_C: Tensor) -> Tensor:
    """``-Σ_c p log p`` from finite (clamped) log-probabilities, float64 accumulation."""
    # ``0.0 - x`` rather than ``-x`` so that a zero entropy is +0.0, not -0.0.
    return 0.0 - (log_probs_n_C.exp() * log_probs_n_C).sum(-1, dtype=torch.float64)


def _predictive_entropy_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    return _entropy_from_probs(_mean_probs_n_C(probs_n_K_C))


def _expected_entropy_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    K = log_probs_n_K_C.shape[1]
    nats_n = (probs_n_K_C * log_probs_n_K_C).sum((1, 2), dtype=torch.float64)
    if bool(torch.isnan(nats_n).any()):  # 0 * (-inf) somewhere: redo with 0 log 0 = 0
        nats_n = (probs_n_K_C * clamp_log(log_probs_n_K_C)).sum((1, 2), dtype=torch.float64)
    return 0.0 - nats_n / K


def _bald_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    if log_probs_n_K_C.shape[1] == 1:  # one function sample: no disagreement, exactly 0 (not rounding noise)
        return torch.zeros(log_probs_n_K_C.shape[0], dtype=torch.float64, device=log_probs_n_K_C.device)
    mutual_information_n = _predictive_entropy_chunk(log_probs_n_K_C, probs_n_K_C)
    mutual_information_n -= _expected_entropy_chunk(log_probs_n_K_C, probs_n_K_C)
    return mutual_information_n.clamp_min_(0.0)


def _jackknife_bald_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    n, K, C = log_probs_n_K_C.shape
    if K == 1:
        return _bald_chunk(log_probs_n_K_C, probs_n_K_C)
    entropy_n = _predictive_entropy_chunk(log_probs_n_K_C, probs_n_K_C)
    # Leave-one-out log sums without cancellation: log Σ_{j≠k} p_j = logaddexp(prefix_{k-1}, suffix_{k+1}).
    finite_n_K_C = clamp_log(log_probs_n_K_C)
    neg_inf = finite_n_K_C.new_full((n, 1, C), -math.inf)
    prefix_n_K_C = torch.logcumsumexp(finite_n_K_C, dim=1)
    suffix_n_K_C = torch.logcumsumexp(finite_n_K_C.flip(1), dim=1).flip(1)
    before_n_K_C = torch.cat([neg_inf, prefix_n_K_C[:, :-1]], dim=1)
    after_n_K_C = torch.cat([suffix_n_K_C[:, 1:], neg_inf], dim=1)
    loo_log_mean_n_K_C = torch.logaddexp(before_n_K_C, after_n_K_C) - math.log(K - 1)
    loo_entropy_n = _entropy_from_log(loo_log_mean_n_K_C).mean(-1)
    corrected_entropy_n = entropy_n + (K - 1) * (entropy_n - loo_entropy_n)
    return corrected_entropy_n - _expected_entropy_chunk(log_probs_n_K_C, probs_n_K_C)


def _variation_ratios_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    K = log_probs_n_K_C.shape[1]
    is_mode_n_K_C = (log_probs_n_K_C == log_probs_n_K_C.amax(-1, keepdim=True)).to(torch.float64)
    votes_n_C = (is_mode_n_K_C / is_mode_n_K_C.sum(-1, keepdim=True)).sum(1)
    return 1.0 - votes_n_C.amax(-1) / K


def _mean_std_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    return probs_n_K_C.std(dim=1, correction=0).mean(-1, dtype=torch.float64)


def _margin_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    mean_probs_n_C = _mean_probs_n_C(probs_n_K_C).to(torch.float64)
    if mean_probs_n_C.shape[1] == 1:
        return mean_probs_n_C.new_full((mean_probs_n_C.shape[0],), -1.0)
    top_n_2 = mean_probs_n_C.topk(2, dim=-1).values
    return top_n_2[:, 1] - top_n_2[:, 0]


def _least_confidence_chunk(log_probs_n_K_C: Tensor, probs_n_K_C: Tensor) -> Tensor:
    return 1.0 - _mean_probs_n_C(probs_n_K_C).to(torch.float64).amax(-1)


# --- public scores ---


def predictive_entropy(
    log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None
) -> Tensor:
    r"""Predictive ("max") entropy ``H[E_w p(y|x,w)]``: total uncertainty.

    .. math:: \mathbb{H}[\bar p] = -\sum_c \bar p_c \log \bar p_c,\quad
              \bar p_c = \tfrac1K \textstyle\sum_k p_{kc}

    Shapes: ``[N, K, C] -> [N]`` (float64), in ``[0, log C]``. Gal et al. (2017), "Max Entropy".

    >>> lp = torch.log(torch.tensor([[[0.5, 0.5]], [[1.0, 0.0]]]))
    >>> predictive_entropy(lp)
    tensor([0.6931, 0.0000], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _predictive_entropy_chunk, device=device, chunk_size=chunk_size)


def expected_entropy(
    log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None
) -> Tensor:
    r"""Expected (conditional) entropy ``E_w H[p(y|x,w)] = H[y|x,w]``: aleatoric part.

    .. math:: \frac1K \sum_k \Bigl(-\sum_c p_{kc} \log p_{kc}\Bigr)

    Shapes: ``[N, K, C] -> [N]`` (float64).

    >>> lp = torch.log(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))
    >>> expected_entropy(lp)
    tensor([0.], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _expected_entropy_chunk, device=device, chunk_size=chunk_size)


def bald(log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None) -> Tensor:
    r"""BALD: mutual information ``I[y; w | x] = H[E_w p] - E_w H[p]`` (Houlsby et al. 2011).

    .. math:: \mathbb{I}[y;w] = \mathbb{H}[\bar p] - \frac1K\sum_k \mathbb{H}[p_k]

    Shapes: ``[N, K, C] -> [N]`` (float64). Mathematically in ``[0, H[p̄]]``; rounding
    below 0 is clamped to 0, so ``0 <= bald <= predictive_entropy`` always holds.

    >>> lp = torch.log(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))  # two confident, disagreeing samples
    >>> bald(lp)
    tensor([0.6931], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _bald_chunk, device=device, chunk_size=chunk_size)


def jackknife_bald(
    log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None
) -> Tensor:
    r"""BALD with a jackknife bias-corrected predictive entropy (MLSS 2019 tutorial, task*).

    The plug-in entropy ``Ĥ = H[p̄]`` of K samples is biased low. With the
    leave-one-out means ``p̄^{-k} = 1/(K-1) Σ_{j≠k} p_j`` (computed stably in log
    space from prefix / suffix ``logcumsumexp``, no subtraction) and ``Ĥ_{-k} = H[p̄^{-k}]``:

    .. math:: \hat H_J = \hat H + (K-1)\Bigl(\hat H - \frac1K \sum_k \hat H_{-k}\Bigr),\qquad
              \text{score} = \hat H_J - \frac1K\sum_k \mathbb{H}[p_k]

    (the expected entropy is already unbiased). Can be slightly negative; not clamped.
    With ``K = 1`` there is no leave-one-out estimate and plain :func:`bald` (0) is returned.
    Shapes: ``[N, K, C] -> [N]`` (float64). Miller (1974), Nowozin (2015).

    >>> lp = torch.log(torch.tensor([[[0.9, 0.1], [0.1, 0.9]]]))
    >>> bool(jackknife_bald(lp) > bald(lp))
    True
    """
    return map_log_probs(log_probs_N_K_C, _jackknife_bald_chunk, device=device, chunk_size=chunk_size)


def variation_ratios(
    log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None
) -> Tensor:
    r"""Variation ratios, Gal et al. (2017) / Freeman (1965): ``1 - f_mode / K``.

    Each of the K samples votes for its arg-max class; ``f_mode`` is the number of
    votes of the most voted class. A sample whose arg-max is tied among ``t`` classes
    gives each of them ``1/t`` vote (the expectation under random tie breaking, so a
    uniform prediction scores ``1 - 1/C`` rather than 0). In ``[0, 1 - 1/C]``.

    The other common reading, ``1 - max_c p̄_c`` on the mean probabilities, is
    :func:`least_confidence`. Shapes: ``[N, K, C] -> [N]`` (float64).

    >>> lp = torch.log(torch.tensor([[[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]]))
    >>> variation_ratios(lp)  # votes 2 : 1
    tensor([0.3333], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _variation_ratios_chunk, device=device, chunk_size=chunk_size)


def mean_std(log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None) -> Tensor:
    r"""Mean standard deviation (Kampffmeyer et al. 2016; Gal et al. 2017).

    .. math:: \frac1C \sum_c \sqrt{\tfrac1K\textstyle\sum_k p_{kc}^2 - \bar p_c^2}

    (population standard deviation over the K samples). Shapes: ``[N, K, C] -> [N]``.

    >>> lp = torch.log(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))
    >>> mean_std(lp)
    tensor([0.5000], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _mean_std_chunk, device=device, chunk_size=chunk_size)


def margin(log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None) -> Tensor:
    r"""Negative margin of the mean probabilities: ``-(p̄_{(1)} - p̄_{(2)})`` (larger = more uncertain).

    ``p̄_{(1)} >= p̄_{(2)}`` are the two largest mean class probabilities; the score is
    in ``[-1, 0]`` (0: a tie at the top). With ``C = 1`` the score is ``-1``.
    Shapes: ``[N, K, C] -> [N]`` (float64). Scheffer et al. (2001).

    >>> lp = torch.log(torch.tensor([[[0.7, 0.2, 0.1]]]))
    >>> margin(lp)
    tensor([-0.5000], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _margin_chunk, device=device, chunk_size=chunk_size)


def least_confidence(
    log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None
) -> Tensor:
    r"""Least confidence ``1 - max_c p̄_c`` of the mean prediction, in ``[0, 1 - 1/C]``.

    This is also the "mean-probability" version of variation ratios.
    Shapes: ``[N, K, C] -> [N]`` (float64). Settles (2009).

    >>> lp = torch.log(torch.tensor([[[0.7, 0.3]], [[0.5, 0.5]]]))
    >>> least_confidence(lp)
    tensor([0.3000, 0.5000], dtype=torch.float64)
    """
    return map_log_probs(log_probs_N_K_C, _least_confidence_chunk, device=device, chunk_size=chunk_size)


def predictive_variance(
    samples_N_K: Tensor,
    *,
    correction: int = 0,
    device: Device = None,
    chunk_size: int | None = None,
) -> Tensor:
    r"""Regression: variance of the K sampled predictions per item (Gal et al. 2017).

    .. math:: \frac{1}{K - \text{correction}} \sum_k (f_k - \bar f)^2

    ``samples_N_K`` are K function samples per item (``[N, K]``) or vector outputs
    ``[N, K, D]`` (then the variances are summed over D: the trace of the covariance).
    ``correction=0`` is the population variance (the MC estimate), 1 the unbiased one.
    Add the observation noise ``1/tau`` yourself if you need the full predictive variance.

    >>> predictive_variance(torch.tensor([[1.0, 3.0], [2.0, 2.0]]))
    tensor([1., 0.], dtype=torch.float64)
    """
    name = "samples_N_K"
    check_tensor(samples_N_K, name)
    if samples_N_K.ndim not in (2, 3):
        check_ndim(samples_N_K, 2, name, "[N, K] (pool items, function samples) or [N, K, D]")
    if not samples_N_K.is_floating_point():
        raise InvalidTypeError(f"{name} must be a floating point tensor, got dtype {samples_N_K.dtype}")
    correction = check_positive_int(correction, "correction", allow_zero=True)
    N, K = samples_N_K.shape[:2]
    if N == 0:
        raise InvalidArgumentError(f"{name} is empty: the pool has no items (shape {tuple(samples_N_K.shape)})")
    if samples_N_K.numel() == 0 and K > 0:
        raise InvalidArgumentError(f"{name} has a zero-sized dimension: shape {tuple(samples_N_K.shape)}")
    if K - correction < 1:
        raise InvalidArgumentError(f"{name} needs K > correction={correction} samples per item, got K={K}")
    compute_device = resolve_device(samples_N_K, device)
    row = samples_N_K[0].numel()
    variance_N = torch.empty(N, dtype=torch.float64, device=compute_device)
    for start, end in iter_chunks(N, rows_per_chunk(row, chunk_size)):
        chunk = samples_N_K[start:end].to(compute_device, torch.float64)
        check_finite(chunk, name)
        variance = chunk.var(dim=1, correction=correction)
        variance_N[start:end] = variance.sum(-1) if variance.ndim == 2 else variance
    return variance_N.to(samples_N_K.device)


def random_scores(
    N: int, *, generator: torch.Generator | int | None = None, device: Device = None
) -> Tensor:
    """Uniform random scores in ``[0, 1)`` (float64, shape ``[N]``): top-k of them is a random batch.

    Drawn on the CPU, then moved to ``device``, so the same seed gives the same scores
    on every device.

    Args:
        N: the number of scores (pool items), ``N >= 1``.
        generator: a CPU ``torch.Generator``, an int seed
            (``torch.Generator().manual_seed(mix_seed(seed))``, as
            :func:`~activebayes.acquisition.select` reads one), or ``None`` for torch's
            global generator.
        device: where the scores are returned.

    >>> g = torch.Generator().manual_seed(0)
    >>> random_scores(3, generator=g).shape
    torch.Size([3])
    """
    N = check_positive_int(N, "N")
    device = check_torch_device(device)
    if generator is not None:  # an int is a seed; a wrong type is named here, not deep in torch
        generator = as_generator(generator, "generator")
    scores_N = torch.rand(N, generator=generator, dtype=torch.float64)
    return scores_N if device is None else scores_N.to(device)
