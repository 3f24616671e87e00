r"""BADGE: batch active learning by diverse gradient embeddings (Ash, Zhang, Krishnamurthy, Langford, Agarwal 2020).

Each pool item is represented by the gradient of the cross-entropy loss with respect
to the last layer's weights ``W`` (``[C, D]``, logits ``z = W h + b``), taken at the
label the model itself predicts, ``ŷ = argmax_c p(c)``:

.. math:: g_x = \frac{\partial\, \ell_{CE}(z(x), \hat y)}{\partial W}
          = \bigl(p(x) - e_{\hat y(x)}\bigr) \otimes h(x) \in \mathbb{R}^{C \times D},

with ``h(x)`` the penultimate features (the last layer's input) and ``p(x)`` the
predicted class probabilities. Its norm is large when the model is unsure (``p`` far
from one-hot) *and* the item would move the last layer a lot (a lower bound on the
gradient norm for any true label); k-means++ seeding over the ``g_x`` then picks a
batch that is both uncertain and diverse. The bias gradient ``p - e_ŷ`` is left out,
as in the paper's code.

Here ``p(x)`` is the mean of the K function samples' probabilities
(``p̄ = 1/K Σ_k p_k``; with K = 1, a deterministic network, this is the paper's
setting) and ``h(x)`` comes from the caller, e.g.
:func:`activebayes.models.embeddings.penultimate_features` (deterministic, dropout off).
Seeding as in the paper's code: the first centre is the item with the largest
``|g_x|``; each next one is drawn with probability ``∝ D(x)^2`` (see
:func:`~activebayes.acquisition.clustering.d2_seeding`).

``g_x`` is never materialised (``N × C × D`` can be large): since ``g = a ⊗ h`` with
``a = p̄ - e_ŷ``, ``|g_x - g_y|^2 = |a_x|^2 |h_x|^2 + |a_y|^2 |h_y|^2 - 2 (a_x·a_y)(h_x·h_y)``,
so one centre costs ``O(N (C + D))`` and memory is ``O(N (C + D))`` (float64).
The K samples are needed only to form ``a``: :func:`loss_gradient_factors` reduces
``[N, K, C]`` to ``a_N_C`` row by row, and :func:`badge_from_factors` seeds from
``a_N_C`` and ``h_N_D`` alone, so a streamed pool (:func:`activebayes.scoring.score_pool`,
on one machine or on Ray) keeps ``C`` numbers per item instead of ``K × C``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from activebayes._seeding import as_generator
from activebayes._validation import (
    Device,
    check_log_probs,
    check_ndim,
    check_positive_int,
    check_tensor,
    check_torch_device,
    log_probs_tolerance,
)
from activebayes.acquisition._chunks import check_chunk_sums, iter_chunks, resolve_device, rows_per_chunk
from activebayes.acquisition._features import check_features
from activebayes.acquisition.clustering import d2_seeding
from activebayes.acquisition.selection import BudgetPlan, Selection, check_budget
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["badge", "badge_from_factors", "gradient_embeddings", "loss_gradient_factors"]



def _loss_gradient_factors(
    log_probs_N_K_C: Tensor, device: torch.device, chunk_size: int | None
) -> Tensor:
    """``a_N_C = p̄ - onehot(argmax p̄)`` in float64 (values checked chunk by chunk)."""
    N, K, C = log_probs_N_K_C.shape
    atol = log_probs_tolerance(log_probs_N_K_C.dtype, C)
    factors_N_C = torch.empty(N, C, dtype=torch.float64, device=device)
    for start, end in iter_chunks(N, rows_per_chunk(K * C, chunk_size)):
        log_probs_n_K_C = log_probs_N_K_C[start:end].to(device, non_blocking=True)
        probs_n_K_C = log_probs_n_K_C.to(torch.float64).exp()
        check_chunk_sums(log_probs_n_K_C, probs_n_K_C.sum(-1), "log_probs_N_K_C", atol, start)
        mean_n_C = probs_n_K_C.mean(dim=1)
        mean_n_C[torch.arange(end - start, device=device), mean_n_C.argmax(dim=1)] -= 1.0
        factors_N_C[start:end] = mean_n_C
    return factors_N_C


def loss_gradient_factors(log_probs_N_K_C: Tensor, *, device: Device = None, chunk_size: int | None = None) -> Tensor:
    r"""``a_N_C = p̄ - e_ŷ``, float64: the gradient embedding is ``g_n = a_n ⊗ h_n``.

    Row ``n`` depends on item ``n``'s predictions only, so the factors of a pool are the
    concatenation of its chunks' factors.

    >>> loss_gradient_factors(torch.log(torch.tensor([[[0.75, 0.25]], [[0.2, 0.8]]])))
    tensor([[-0.2500,  0.2500],
            [ 0.2000, -0.2000]], dtype=torch.float64)
    """
    check_log_probs(log_probs_N_K_C, values=False)
    return _loss_gradient_factors(log_probs_N_K_C, resolve_device(log_probs_N_K_C, device), chunk_size).cpu()


def gradient_embeddings(log_probs_N_K_C: Tensor, features_N_D: Tensor) -> Tensor:
    r"""BADGE's gradient embeddings ``g_n = (p̄_n - e_{ŷ_n}) ⊗ h_n``, float64 ``[N, C, D]``.

    ``g_n[c, d] = ∂ CE(W h_n + b, ŷ_n) / ∂ W[c, d]`` for a last layer ``W`` of shape
    ``[C, D]`` (``nn.Linear(D, C).weight``'s layout). Materialises ``N × C × D`` numbers;
    :func:`badge` does not need this.

    >>> lp = torch.log(torch.tensor([[[0.75, 0.25]]]))
    >>> gradient_embeddings(lp, torch.tensor([[2.0, 4.0]]))
    tensor([[[-0.5000, -1.0000],
             [ 0.5000,  1.0000]]], dtype=torch.float64)
    """
    check_log_probs(log_probs_N_K_C)
    features = check_features(features_N_D, "features_N_D", int(log_probs_N_K_C.shape[0]))
    factors_N_C = _loss_gradient_factors(log_probs_N_K_C, log_probs_N_K_C.device, None)
    return factors_N_C[:, :, None] * features.to(factors_N_C.device, torch.float64)[:, None, :]


def badge(
    log_probs_N_K_C: Tensor,
    features_N_D: Tensor,
    batch_size: int,
    *,
    generator: torch.Generator | int | None = None,
    costs_N: Tensor | None = None,
    cost_budget: float | None = None,
    plan: BudgetPlan | None = None,
    device: Device = None,
    chunk_size: int | None = None,
) -> Selection:
    r"""BADGE batch: k-means++ seeding over the gradient embeddings (Ash et al. 2020).

    Args:
        log_probs_N_K_C: pool predictions ``[N, K, C]``; ``p̄`` is their mean over K.
        features_N_D: penultimate features ``h`` of the pool items ``[N, D]`` (the
            input of the last ``nn.Linear``).
        batch_size: picks, ``1 <= batch_size <= N``.
        generator: seeds the ``D^2`` draws (one uniform per pick): a CPU
            ``torch.Generator``, an int seed (``torch.Generator().manual_seed(mix_seed(seed))``,
            as :func:`~activebayes.acquisition.select` does, so ``badge(..., generator=7)`` is
            ``select(..., "badge", generator=7)``), or ``None`` for torch's global generator.
        costs_N: optional per-item labelling costs ``[N]`` (with ``cost_budget``): items that
            no longer fit are not drawn; the batch may be smaller.
        cost_budget: total labelling cost (with ``costs_N``).
        plan: an already validated cost budget (instead of ``costs_N`` / ``cost_budget``).
        device: compute the distances there; results on the CPU.
        chunk_size: pool items per chunk when reading ``log_probs_N_K_C``.

    Returns:
        :class:`Selection`; ``scores[b]`` is pick b's squared embedding distance to the
        nearest earlier pick (for the first pick: its squared norm ``|g|^2``).

    >>> g = torch.Generator().manual_seed(0)
    >>> lp = torch.log_softmax(torch.randn(20, 4, 3, generator=g), -1)
    >>> badge(lp, torch.randn(20, 5, generator=g), 3, generator=g).indices.shape
    torch.Size([3])
    """
    check_log_probs(log_probs_N_K_C, values=False)
    if generator is not None:  # an int is a seed; a wrong type is named here, not deep in torch
        generator = as_generator(generator, "generator")
    N = int(log_probs_N_K_C.shape[0])
    features = check_features(features_N_D, "features_N_D", N)
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    if plan is None:
        plan = check_budget(costs_N, cost_budget, N)
    elif costs_N is not None or cost_budget is not None:
        raise InvalidArgumentError("pass either plan or costs_N / cost_budget, not both")
    compute_device = resolve_device(log_probs_N_K_C, device)
    factors_N_C = _loss_gradient_factors(log_probs_N_K_C, compute_device, chunk_size)
    return _seed_from_factors(factors_N_C, features.to(compute_device, torch.float64), batch_size, generator, plan)


def badge_from_factors(
    factors_N_C: Tensor,
    features_N_D: Tensor,
    batch_size: int,
    *,
    generator: torch.Generator | int | None = None,
    plan: BudgetPlan | None = None,
    device: Device = None,
) -> Selection:
    r"""The BADGE batch from the gradient factors ``a_N_C`` (:func:`loss_gradient_factors`) and features ``h_N_D``.

    ``badge(log_probs_N_K_C, features_N_D, ...)`` equals
    ``badge_from_factors(loss_gradient_factors(log_probs_N_K_C), features_N_D, ...)``
    for the same generator; this form needs ``C`` numbers per item instead of ``K × C``.

    Args:
        factors_N_C: the gradient factors ``p̄ - e_ŷ`` ``[N, C]``.
        features_N_D: penultimate features ``h`` ``[N, D]``.
        batch_size: picks, ``1 <= batch_size <= N``.
        generator: seeds the ``D^2`` draws, as in :func:`badge`: a CPU ``torch.Generator``,
            an int seed, or ``None`` for torch's global generator.
        plan: an optional cost budget (one cost per item).
        device: compute the distances there; results on the CPU.
    """
    if generator is not None:
        generator = as_generator(generator, "generator")
    check_tensor(factors_N_C, "factors_N_C")
    check_ndim(factors_N_C, 2, "factors_N_C", "[N, C] (pool items, classes)")
    if not factors_N_C.is_floating_point():
        raise InvalidTypeError(f"factors_N_C must be a floating point tensor, got dtype {factors_N_C.dtype}")
    if factors_N_C.numel() == 0:
        raise InvalidArgumentError(f"factors_N_C has a zero-sized dimension: shape {tuple(factors_N_C.shape)}")
    if not bool(torch.isfinite(factors_N_C).all()):
        raise InvalidArgumentError("factors_N_C must be finite (p̄ - e_ŷ lies in [-1, 1]), got NaN or inf")
    N = int(factors_N_C.shape[0])
    features = check_features(features_N_D, "features_N_D", N)
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    if plan is not None and tuple(plan.costs_N.shape) != (N,):
        raise InvalidArgumentError(f"plan must hold one cost per item ({N}), got {tuple(plan.costs_N.shape)}")
    compute_device = torch.device("cpu") if device is None else check_torch_device(device)
    return _seed_from_factors(factors_N_C.to(compute_device, torch.float64),
                              features.to(compute_device, torch.float64), batch_size, generator, plan)


def _seed_from_factors(
    factors_N_C: Tensor, features_N_D64: Tensor, batch_size: int, generator: torch.Generator | None,
    plan: BudgetPlan | None,
) -> Selection:
    """k-means++ seeding over ``g_n = a_n ⊗ h_n`` without materialising ``g`` (float64 inputs on one device)."""
    N = int(factors_N_C.shape[0])
    factor_norms_N = (factors_N_C * factors_N_C).sum(-1)
    feature_norms_N = (features_N_D64 * features_N_D64).sum(-1)
    norms_N = factor_norms_N * feature_norms_N  # |g|^2

    def sq_distances_to(index: int) -> Tensor:
        cross_N = (factors_N_C @ factors_N_C[index]) * (features_N_D64 @ features_N_D64[index])
        return (norms_N + norms_N[index] - 2.0 * cross_N).clamp_min_(0.0)

    costs = None if plan is None else plan.costs_N

    def eligible(picks: list[int]) -> Tensor | None:
        if plan is None:
            return None
        assert costs is not None
        return plan.fits_N(float(costs[picks].sum()) if picks else 0.0)

    norms_cpu_N = norms_N.cpu()
    start_mask = eligible([])
    if start_mask is not None and not bool(start_mask.any()):
        return Selection(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.float64), "badge")
    first_candidates = norms_cpu_N if start_mask is None else torch.where(start_mask, norms_cpu_N, -1.0)
    first = int(torch.argmax(first_candidates))
    picks, d2 = d2_seeding(N, batch_size, sq_distances_to, first=first, generator=generator, eligible=eligible)
    d2[0] = float(norms_cpu_N[first])
    return Selection(torch.tensor(picks, dtype=torch.long), torch.tensor(d2, dtype=torch.float64), "badge")
