r"""EPIG: expected predictive information gain (Bickford Smith, Kirsch, Farquhar, Gal, Foster, Rainforth 2023).

BALD scores a pool item by how much its label ``y`` would tell about the parameters
``θ``; much of that information can concern predictions nobody will ever ask for.
EPIG scores it by how much ``y`` tells about the label ``y*`` of a *target input*
``x* ~ p*(x*)`` (the inputs the model will be used on), averaged over targets:

.. math:: \mathrm{EPIG}(x) = \mathbb{E}_{p_*(x_*)}\bigl[\mathbb{I}(y; y_* \mid x, x_*)\bigr].

With K function samples ``θ_k`` (equally weighted; MC dropout masks held fixed, or
ensemble members) the labels are independent given ``θ``, so

.. math:: p(y, y_*) = \frac1K \sum_k p_k(y)\, p_k(y_*),\qquad
          \mathbb{I}(y; y_*) = \sum_{y, y_*} p(y, y_*) \log\frac{p(y, y_*)}{p(y)\, p(y_*)},

with the marginals ``p(y) = 1/K Σ_k p_k(y)`` (the predictive). The expectation over
``p*`` is the mean over M sampled target inputs. This is the classification estimator
of the paper (its Eq. 9); for the K-sample posterior it is the exact mutual
information, so ``0 <= EPIG(x) <= BALD(x) = I(y; θ | x)`` (data processing: ``y*`` is
a function of ``θ`` and independent noise) and ``EPIG(x) <= I(y*; θ | x*)`` averaged.

Target inputs: the paper samples them from the pool when the test distribution is
unknown (``n_target_samples = 100`` in its code); :func:`epig` takes their predictions
``target_log_probs_M_K_C`` — they **must come from the same K function samples** as
``log_probs_N_K_C`` (the same masks / members), e.g. rows of the pool's predictions.

Computation, float64 throughout: with ``π_k(c) = exp(log p_k(c))`` (each row
renormalised to sum to 1 in float64) every joint
``p(c, c')`` of a pool chunk and a tile of targets is one matrix product
``[n·C, K] @ [K, m·C]``, and

.. math:: \mathbb{I}(y; y_*) = \mathbb{H}[y] + \mathbb{H}[y_*] + \sum_{c, c'} p(c, c') \log p(c, c'),

(``H[y]`` of the predictive, computed once per item and per target), so a tile costs
one ``log``, one product and one sum. Working with probabilities rather than
log-probabilities loses nothing here: every term is bounded (``|p log p| <= 1/e``),
probabilities come from ``exp`` of the log inputs and cannot overflow (``p <= 1``),
and a joint probability below float64's smallest normal number (~2.2e-308, where
``log`` space would still resolve it) contributes less than 1e-305 nats; it is
counted as ``p = 2.2e-308`` (the same device as :mod:`.joint_entropy` uses for
``0 log 0 = 0``). The three terms are at most ``2 log C`` nats, so the rounding error
of a score is ~1e-14 nats in float64. Rounding can make a value slightly negative;
scores are clamped at 0, as BALD's are.

Memory: the pool is walked in chunks of n items and the targets in tiles of m, with
``n * m * C**2 <= TILE_ELEMENTS`` (2**20 float64 entries, 8 MiB; a few such
temporaries are alive at once) whatever N and M; plus the targets' ``[K, M*C]``
table held once. Work: ``O(N · M · C² · K)`` flops.
"""

from __future__ import annotations

import torch
from torch import Tensor

from activebayes._validation import (
    Device,
    check_log_probs,
    check_positive_int,
    check_samples_disagree,
    log_probs_tolerance,
    samples_argument,
)
from activebayes.acquisition._chunks import check_chunk_sums, iter_chunks, resolve_device
from activebayes.errors import InvalidArgumentError

__all__ = ["epig", "TILE_ELEMENTS", "DEFAULT_NUM_TARGETS"]


#: Entries of one ``[n, C, m, C]`` float64 tile (8 MiB).
TILE_ELEMENTS = 1 << 20

#: Target inputs sampled from the pool when none are given (the paper's code: 100).
DEFAULT_NUM_TARGETS = 100


def _probs_and_entropy(log_probs_x_K_C: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(sums_x_K, probs_x_K_C, entropy_x)`` in float64.

    ``sums`` are the rows' ``Σ_c exp(log p)`` (for the value check); ``probs`` the rows
    renormalised to sum to 1 in float64 (float32 inputs are off by ~1e-7, which would
    otherwise leak into the entropy identity below); ``entropy`` is ``H[p̄]``.
    """
    probs_x_K_C = log_probs_x_K_C.to(torch.float64).exp()
    sums_x_K = probs_x_K_C.sum(-1)
    probs_x_K_C /= sums_x_K[..., None]
    return sums_x_K, probs_x_K_C, torch.special.entr(probs_x_K_C.mean(dim=1)).sum(-1)


def epig(
    log_probs_N_K_C: Tensor,
    target_log_probs_M_K_C: Tensor,
    *,
    device: Device = None,
    chunk_size: int | None = None,
) -> Tensor:
    r"""EPIG of every pool item: ``mean_m I(y; y*_m | x, x*_m)`` (nats), float64 ``[N]``.

    .. math:: \mathrm{EPIG}(x_n) = \frac1M \sum_{m} \sum_{c, c'} p(c, c')
              \log\frac{p(c, c')}{p(c)\,p(c')},\quad
              p(c, c') = \frac1K \sum_k p_k(y_n{=}c)\, p_k(y_{*m}{=}c')

    Args:
        log_probs_N_K_C: pool predictions ``[N, K, C]`` (log-probabilities).
        target_log_probs_M_K_C: predictions ``[M, K, C]`` for M target inputs under the
            **same** K function samples (e.g. ``log_probs_N_K_C[target_rows]``).
        device: compute there; the result comes back on the pool's device.
        chunk_size: pool items per chunk (default: as many as fit the tile bound).

    K = 1 function sample is refused (``InvalidArgumentError``), as ``select`` refuses it:
    one sample has no disagreement, so every score would be 0 up to rounding noise.

    Bickford Smith et al. (2023), *Prediction-oriented Bayesian active learning*, AISTATS.

    >>> lp = torch.log(torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.5, 0.5], [0.5, 0.5]]]))
    >>> epig(lp, lp[:1])  # item 0 decides the target's label; item 1 says nothing
    tensor([0.6931, 0.0000], dtype=torch.float64)
    """
    check_log_probs(log_probs_N_K_C, values=False)
    check_samples_disagree(int(log_probs_N_K_C.shape[1]), samples_argument(log_probs_N_K_C), "epig")
    targets = check_log_probs(
        target_log_probs_M_K_C, "target_log_probs_M_K_C",
        shape_doc="[M, K, C] (target inputs, function samples, classes)",
    )
    N, K, C = log_probs_N_K_C.shape
    M = int(targets.shape[0])
    if tuple(targets.shape[1:]) != (K, C):
        raise InvalidArgumentError(
            f"target_log_probs_M_K_C must have the pool's K={K} function samples and C={C} classes "
            f"(shape [M, {K}, {C}]), got {tuple(targets.shape)}"
        )
    compute_device = resolve_device(log_probs_N_K_C, device)
    atol = log_probs_tolerance(log_probs_N_K_C.dtype, C)

    _, target_probs_M_K_C, target_entropy_M = _probs_and_entropy(targets.to(compute_device))
    target_probs_K_MC = target_probs_M_K_C.div_(K).permute(1, 0, 2).reshape(K, M * C)
    mean_target_entropy = float(target_entropy_M.mean())

    per_pair = C * C
    m_tile = max(1, min(M, TILE_ELEMENTS // per_pair))
    rows = (
        check_positive_int(chunk_size, "chunk_size")
        if chunk_size is not None
        else max(1, TILE_ELEMENTS // (m_tile * per_pair))
    )
    tiny = torch.tensor(torch.finfo(torch.float64).tiny, dtype=torch.float64, device=compute_device)
    scores_N = torch.empty(N, dtype=torch.float64, device=compute_device)
    for start, end in iter_chunks(N, rows):
        log_probs_n_K_C = log_probs_N_K_C[start:end].to(compute_device, non_blocking=True)
        sums_n_K, probs_n_K_C, entropy_n = _probs_and_entropy(log_probs_n_K_C)
        check_chunk_sums(log_probs_n_K_C, sums_n_K, "log_probs_N_K_C", atol, start)
        n = end - start
        probs_nC_K = probs_n_K_C.permute(0, 2, 1).reshape(n * C, K)
        nats_n = torch.zeros(n, dtype=torch.float64, device=compute_device)
        for m_start, m_end in iter_chunks(M, m_tile):
            # p(c, c') for every item c and target c' of the tile (+ tiny: 0 log 0 = 0)
            joint_nC_mC = torch.addmm(tiny, probs_nC_K, target_probs_K_MC[:, m_start * C : m_end * C])
            nats_n += (torch.log(joint_nC_mC).mul_(joint_nC_mC)).view(n, -1).sum(-1)
        # Σ_m I(y; y*_m) / M = H[y] + mean_m H[y*_m] + Σ_m Σ p log p / M
        scores_N[start:end] = entropy_n + mean_target_entropy + nats_n / M
    return scores_N.clamp_min_(0.0).to(log_probs_N_K_C.device)
