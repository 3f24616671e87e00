r"""Joint entropies of several labels ``y_1..y_B`` under K function samples.

Given ``w`` (one of K equally weighted function samples) the labels are independent,
so a configuration ``m = (c_1, .., c_B)`` has the per-sample probability
``P_k(m) = Π_i p_k(i, c_i)`` and the marginal ``q(m) = 1/K Σ_k P_k(m)``:

.. math:: \mathbb{H}[y_1..y_B] = -\sum_m q(m) \log q(m).

*Exact*: enumerate all ``C^B`` configurations (a ``[C^B, K]`` table of ``log P_k(m)``).
*Sampled*: draw M configurations from ``q`` itself (pick ``k``, stratified, then each
``c_i ~ p_k(i, ·)``) and average ``-log q(m)``: an unbiased Monte Carlo estimate
(Kirsch, van Amersfoort & Gal 2019, BatchBALD, Sec. 3.3). Identical draws are merged
(counted), which leaves the estimate unchanged and shrinks the work.

Adding one more label ``y_n`` (the greedy step of BatchBALD) uses the chain rule

.. math:: \mathbb{H}[y_1..y_B, y_n] = \mathbb{H}[y_1..y_B]
          + \sum_m v_m\, \mathbb{H}\bigl[r_m\bigr],\qquad
          r_m(c) = \sum_k \pi_m(k)\, p_k(n, c),\quad \pi_m(k) = \frac{P_k(m)}{\sum_j P_j(m)},

with weights ``v_m = q(m)`` (exact) or the sample frequency (sampled). ``π_m`` is the
posterior over function samples after seeing configuration m (a softmax of
``log P_k(m)``: no underflow however long the batch). For a pool chunk all ``r_m`` are
one matrix product ``[M, K] @ [K, n*C]``. Algebraically this equals BatchBALD's
importance-weighted estimator ``1/M Σ_m Σ_c -p(m,c) log p(m,c) / q(m)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._seeding import as_generator
from activebayes._validation import check_log_probs, check_positive_int, renamed_keyword
from activebayes.metrics.predictive import log_mean_exp

__all__ = [
    "WeightedConfigurations",
    "exact_log_joint",
    "sample_configurations",
    "joint_entropy",
    "conditional_entropy_given_configurations",
]


@dataclass(frozen=True)
class WeightedConfigurations:
    """Configurations of a set of labels, ready to score candidates.

    Attributes:
        posterior_M_K: ``π_m(k)``, rows sum to 1.
        weights_M: ``v_m`` (sum to 1): exact probabilities or sample frequencies.
        entropy: the joint entropy (exact or estimated) of the labels, in nats.
        exact: whether the configurations were enumerated exhaustively.
    """

    posterior_M_K: Tensor
    weights_M: Tensor
    entropy: float
    exact: bool

    @staticmethod
    def from_log_joint(log_joint_M_K: Tensor, counts_M: Tensor | None) -> WeightedConfigurations:
        """From ``log P_k(m)`` (float64); ``counts_M`` are sample counts, ``None`` for exact."""
        log_marginal_M = log_mean_exp(log_joint_M_K, dim=1)
        if counts_M is None:
            weights_M = log_marginal_M.exp()
            entropy = float(torch.special.entr(weights_M).sum())
        else:
            weights_M = counts_M.to(torch.float64) / counts_M.sum()
            entropy = float(-(weights_M * log_marginal_M).sum())
        posterior_M_K = torch.softmax(log_joint_M_K, dim=1)
        return WeightedConfigurations(posterior_M_K, weights_M, entropy, counts_M is None)


def exact_log_joint(log_probs_B_K_C: Tensor, log_joint_M_K: Tensor | None = None) -> Tensor:
    """``log P_k(m)`` for every configuration of the B labels (appended to ``log_joint_M_K``).

    Returns ``[M', K]`` float64 with configurations in row-major order over the labels,
    ``M' <= M * C^B``: configurations of probability 0 under every sample are dropped
    (they contribute nothing), so one-hot predictions stay small.
    """
    B, K, C = log_probs_B_K_C.shape
    if log_joint_M_K is None:
        log_joint_M_K = torch.zeros(1, K, dtype=torch.float64, device=log_probs_B_K_C.device)
    for i in range(B):
        log_probs_C_K = log_probs_B_K_C[i].to(torch.float64).t()
        log_joint_M_K = (log_joint_M_K[:, None, :] + log_probs_C_K[None, :, :]).reshape(-1, K)
        log_joint_M_K = log_joint_M_K[(log_joint_M_K > -math.inf).any(dim=1)]
    return log_joint_M_K


def _sample_classes(probs_K_C: Tensor, samples_M: Tensor, generator: torch.Generator | None) -> Tensor:
    """One class per draw m from ``p_{k_m}(·)``, by inverse CDF with CPU uniforms."""
    C = probs_K_C.shape[1]
    uniform_M_1 = torch.rand(samples_M.shape[0], 1, generator=generator, dtype=torch.float64)
    cdf_M_C = probs_K_C.to(torch.float64)[samples_M].cumsum(dim=1)
    cdf_M_C = cdf_M_C / cdf_M_C[:, -1:]
    return (cdf_M_C <= uniform_M_1.to(cdf_M_C.device)).sum(dim=1).clamp_(max=C - 1)


def sample_configurations(
    log_probs_B_K_C: Tensor, num_configurations: int, *, generator: torch.Generator | int | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Draw configurations of B labels from ``q(m) = 1/K Σ_k P_k(m)``.

    The function sample ``k`` is stratified (each ``k`` equally often, so
    ``M = K * ceil(num_configurations / K)`` draws), then ``c_i ~ p_k(i, ·)`` independently.
    ``generator``: a CPU ``torch.Generator``, an int seed (as :func:`joint_entropy`) or
    ``None`` (torch's global generator).

    Returns ``(classes_M_B, samples_M, log_joint_M_K)``: the drawn classes, the
    function sample of each draw and ``log P_k(m)`` (float64) for every k.
    """
    if generator is not None:
        generator = as_generator(generator, "generator")
    B, K, C = log_probs_B_K_C.shape
    M = K * math.ceil(num_configurations / K)
    device = log_probs_B_K_C.device
    samples_M = torch.arange(M, device=device) % K
    classes_M_B = torch.empty(M, B, dtype=torch.long, device=device)
    log_joint_M_K = torch.zeros(M, K, dtype=torch.float64, device=device)
    for i in range(B):
        classes_M_B[:, i], log_joint_M_K = extend_configurations(
            log_probs_B_K_C[i], samples_M, log_joint_M_K, generator=generator
        )
    return classes_M_B, samples_M, log_joint_M_K


def extend_configurations(
    log_probs_K_C: Tensor,
    samples_M: Tensor,
    log_joint_M_K: Tensor,
    *,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, Tensor]:
    """Add one label to sampled configurations: ``c ~ p_{k_m}(·)`` and ``log P_k += log p_k(c)``.

    Keeps the draws exact samples of the joint (the function sample ``k_m`` of each
    draw is kept). Returns ``(classes_M, log_joint_M_K)``.
    """
    log_probs_K_C = log_probs_K_C.to(torch.float64)
    classes_M = _sample_classes(log_probs_K_C.exp(), samples_M, generator)
    return classes_M, log_joint_M_K + log_probs_K_C.t()[classes_M]


def deduplicate(classes_M_B: Tensor, log_joint_M_K: Tensor) -> tuple[Tensor, Tensor]:
    """Merge identical draws: ``(log_joint_U_K, counts_U)`` for the U distinct configurations."""
    unique_U_B, inverse_M, counts_U = torch.unique(classes_M_B, dim=0, return_inverse=True, return_counts=True)
    M = classes_M_B.shape[0]
    first_U = torch.full((unique_U_B.shape[0],), M, dtype=torch.long, device=classes_M_B.device)
    first_U.scatter_reduce_(0, inverse_M, torch.arange(M, device=classes_M_B.device), reduce="amin")
    return log_joint_M_K[first_U], counts_U


def joint_entropy(
    log_probs_B_K_C: Tensor,
    *,
    num_configurations: int | None = None,
    generator: torch.Generator | int | None = None,
    num_samples: int | None = None,
) -> float:
    r"""Joint entropy ``H[y_1..y_B]`` (nats) of B labels under the K-sample mixture.

    Exact over all ``C^B`` configurations when ``num_configurations`` is ``None``; else the
    Monte Carlo estimate from ``num_configurations`` configurations drawn from the mixture
    (standard error about ``std(-log q) / sqrt(M)``). ``num_samples`` is its deprecated
    name (a ``DeprecationWarning``; removed in the next release).

    Args:
        log_probs_B_K_C: the B labels' predictions ``[B, K, C]``.
        num_configurations: ``None`` for the exact entropy, else M sampled configurations.
        generator: seeds the sampled configurations (unused when exact): a CPU
            ``torch.Generator``, an int seed (``torch.Generator().manual_seed(mix_seed(seed))``,
            the convention of :func:`~activebayes.acquisition.select`), or ``None`` for
            torch's global generator.
        num_samples: deprecated name of ``num_configurations``.

    Returns:
        The joint entropy in nats.

    >>> lp = torch.log(torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]], dtype=torch.float64))
    >>> round(joint_entropy(lp), 6) == round(2 * math.log(2), 6)
    True
    """
    check_log_probs(log_probs_B_K_C, "log_probs_B_K_C", shape_doc="[B, K, C] (batch items, function samples, classes)")
    if generator is not None:  # an int is a seed; a wrong type is named here, not deep in torch
        generator = as_generator(generator, "generator")
    num_configurations = renamed_keyword(num_configurations, num_samples, "num_configurations", "num_samples", None)
    if num_configurations is None:
        return WeightedConfigurations.from_log_joint(exact_log_joint(log_probs_B_K_C), None).entropy
    M = check_positive_int(num_configurations, "num_configurations")
    classes_M_B, _, log_joint_M_K = sample_configurations(log_probs_B_K_C, M, generator=generator)
    return WeightedConfigurations.from_log_joint(*deduplicate(classes_M_B, log_joint_M_K)).entropy


def conditional_entropy_given_configurations(
    configurations: WeightedConfigurations,
    log_probs_n_K_C: Tensor,
    *,
    dtype: torch.dtype | None = None,
    tile_elements: int = 1 << 20,
) -> Tensor:
    r"""``Σ_m v_m H[r_m]`` for each candidate: ``H[y_1..y_B, y_n] - H[y_1..y_B]``, shape ``[n]``.

    Per tile of configurations: one matrix product ``tiny + π [m, K] @ p [K, n*C]``
    (the ``tiny`` makes ``0 log 0 = 0`` without another pass), ``r log r`` in place,
    and a matrix-vector product with the weights. Tiles hold ``tile_elements`` entries
    (4 MiB in float32), whatever M and n. ``dtype`` is the working precision
    (default: that of ``log_probs_n_K_C``); each tile's sums are added up in float64.
    """
    n, K, C = log_probs_n_K_C.shape
    dtype = dtype or log_probs_n_K_C.dtype
    device = log_probs_n_K_C.device
    posterior_M_K = configurations.posterior_M_K.to(device, dtype)
    weights_M = configurations.weights_M.to(device, dtype)
    M = posterior_M_K.shape[0]
    probs_K_nC = log_probs_n_K_C.to(dtype).exp().permute(1, 0, 2).reshape(K, n * C)
    tile = max(1, min(M, tile_elements // (n * C)))
    mixed_m_nC = torch.empty(tile, n * C, dtype=dtype, device=device)
    nats_m_nC = torch.empty_like(mixed_m_nC)
    tiny = torch.tensor(torch.finfo(dtype).tiny, dtype=dtype, device=device)
    total_nC = torch.zeros(n * C, dtype=torch.float64, device=device)
    for start in range(0, M, tile):
        end = min(M, start + tile)
        mixed = mixed_m_nC[: end - start]
        nats = nats_m_nC[: end - start]
        torch.addmm(tiny, posterior_M_K[start:end], probs_K_nC, out=mixed)
        torch.log(mixed, out=nats)
        nats.mul_(mixed)
        total_nC += weights_M[start:end] @ nats
    return -total_nC.view(n, C).sum(dim=1)
