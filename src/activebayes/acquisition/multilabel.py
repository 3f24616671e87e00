r"""Multi-label acquisition: per-label Bernoulli posteriors, entropy, BALD and BatchBALD.

In a multi-label task an item carries a label *vector* ``y = (y_1, .., y_C)`` in
``{0, 1}^C`` (a document has several topics). The model gives, for each of K
coherent function samples ``w_k`` (consistent MC dropout masks, ensemble members),
C independent sigmoids: ``p_k(c) = P(y_c = 1 | x, w_k)``. Every function here takes
``log_probs_N_K_C[n, k, c] = log p_k(c)`` for item n (``F.logsigmoid`` of the logits:
see :func:`multilabel_log_probs`); ``log(1 - p)`` is recomputed stably from it. This
is *not* a softmax: rows do not sum to 1.

Given ``w_k`` the labels of an item are independent Bernoullis, so an item's label
vector has the product distribution

.. math:: P_k(y) = \prod_{c=1}^{C} p_k(c)^{y_c} (1 - p_k(c))^{1 - y_c},

and the predictive is the mixture ``q(y) = 1/K Σ_k P_k(y)``, which does **not**
factorise over labels: the labels are correlated through ``w``.

Scores (``[N, K, C] -> [N]``, larger = more worth labelling, float64):

- :func:`multilabel_entropy`: the per-label predictive entropies
  ``h(p̄(c))`` with ``p̄(c) = 1/K Σ_k p_k(c)`` and ``h(p) = -p log p - (1-p) log(1-p)``,
  reduced over labels (sum by default). The sum is an upper bound of the entropy of
  the label vector, ``H[y] <= Σ_c H[y_c]``.
- :func:`multilabel_bald`: BALD per label, ``I[y_c; w] = h(p̄(c)) - 1/K Σ_k h(p_k(c))``,
  summed over labels. Since ``H[y | w] = Σ_c H[y_c | w]`` exactly (independence given
  w) while ``H[y] <= Σ_c H[y_c]``, the sum is an upper bound of the item's joint BALD
  ``I[y; w]`` (equal when the labels are independent under the predictive).
- :func:`multilabel_batchbald`: greedy BatchBALD on label vectors (below).

**BADGE on label vectors.** With logits ``z = W h + b`` and the binary cross-entropy
summed over labels, the loss gradient with respect to the last layer at the labels the
model itself predicts, ``ŷ_c = [p̄(c) ≥ 1/2]`` (:func:`~activebayes.metrics.multilabel.label_decisions`), is again an outer product,

.. math:: g_x = \frac{\partial \sum_c \ell_{BCE}(z_c(x), \hat y_c)}{\partial W}
          = \bigl(\bar p(x) - \hat y(x)\bigr) \otimes h(x),

so :func:`multilabel_gradient_factors` gives ``a = p̄ - ŷ`` and the k-means++ seeding of
:func:`~activebayes.acquisition.badge.badge_from_factors` picks the batch unchanged
(strategy ``multilabel_badge``).

**BatchBALD on label vectors.** A batch ``A`` is scored by

.. math:: a(A) = \mathbb{I}[y_A; w] = \mathbb{H}[y_A] - \sum_{i \in A} \sum_c \mathbb{E}_k\, h(p_k(i, c)),

where ``y_A`` is the ``|A| · C`` bits of all labels of the batch. Given ``w_k`` all
these bits are independent, so ``P_k(y_A) = Π_{i, c}`` Bernoulli terms and
``q(y_A) = 1/K Σ_k P_k(y_A)``. The joint entropy ``H[y_A] = -Σ q log q`` runs over
``2^{C |A|}`` configurations:

* *exact* while ``2^{C |A|}`` (batch so far plus the candidate) is at most
  ``max_exact_configs``: all configurations are enumerated, ``q`` is one product
  ``[M, K] @ [K, 2^C]`` per candidate (``M = 2^{C(|A|-1)}`` configurations of the
  batch so far), in float64;
* *sampled* beyond: S = ``num_configurations`` joint draws ``(k_s, y^s)`` with
  ``k_s = s mod K`` (stratified over the function samples) and every bit
  ``y^s_{i,c} = [u_{s,i,c} < p_{k_s}(i, c)]``, so ``y^s ~ q``. Then ``Ĥ = -1/S Σ_s log q(y^s)`` with
  ``log q(y^s) = logsumexp_k log P_k(y^s) - log K`` is an unbiased Monte Carlo
  estimate of ``H[y_A]`` (the BatchBALD paper's estimator, Kirsch et al. 2019, Sec.
  3.3, on bits). The uniforms of the candidate's bits are shared by all candidates
  of a step (common random numbers), so candidates are compared on the same draws;
  the chosen candidate's bits extend the stored draws. The uniforms come from
  ``generator`` (a ``torch.Generator``, an int seed, or ``None`` for torch's global
  generator, as everywhere in the library).

The options have :func:`~activebayes.acquisition.batchbald`'s names
(``num_configurations``, ``max_exact_configs``, ``generator``); the old names
``num_samples``, ``max_configurations`` and ``seed`` still work with a
``DeprecationWarning`` until the next release. One difference in meaning: here the
exact bound counts the configurations of the batch *and the candidate*
(``2^{C(|A|+1)}``), and its default (4,096) does not follow ``num_configurations``.

The first pick maximises the joint BALD ``I[y_n; w]`` (exact when ``2^C`` fits).
``a`` is submodular (as in the single-label case), so the greedy batch is within
``1 - 1/e`` of the best. A second copy of an item already in the batch is a fresh
label draw (given ``w_k`` its bits are new Bernoulli draws), so it still adds
information, but less than the first copy did; top-k summed BALD cannot see this and
ranks every copy of its top item alike. BatchBALD therefore *can* pick copies, whenever
a copy still adds more to ``I[y_A; w]`` than any other item (an uncertain item among
confident ones): it does not deduplicate a pool, so remove duplicates beforehand if
they are unwanted (see the concept page, docs/concepts/multilabel.md).

:func:`multilabel_joint_entropy` is ``H[y_A]`` alone for a given set of items.
"""

from __future__ import annotations

import itertools
import math
import warnings

import torch
from torch import Tensor
from torch.nn import functional as F
from tqdm.auto import tqdm

from activebayes._seeding import as_generator
from activebayes._validation import (
    check_positive_int,
    check_samples_disagree,
    check_tensor,
    renamed_keyword,
    samples_argument,
)
from activebayes.acquisition._chunks import resolve_device
from activebayes.acquisition.selection import Selection
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics.multilabel import label_decisions
from activebayes.metrics.predictive import log_mean_exp

__all__ = [
    "multilabel_log_probs",
    "per_label_entropy",
    "per_label_bald",
    "multilabel_entropy",
    "multilabel_bald",
    "multilabel_joint_entropy",
    "multilabel_batchbald",
    "multilabel_gradient_factors",
    "DEFAULT_MAX_EXACT_CONFIGS",
    "DEFAULT_NUM_CONFIGURATIONS",
    "DEFAULT_MAX_CONFIGURATIONS",
    "DEFAULT_NUM_SAMPLES",
]

#: Exact enumeration while the label configurations of batch + candidate are at most this many.
DEFAULT_MAX_EXACT_CONFIGS = 2**12
#: Joint draws (sampled configurations) of the sampled estimate.
DEFAULT_NUM_CONFIGURATIONS = 2000
#: Deprecated names of :data:`DEFAULT_MAX_EXACT_CONFIGS` and :data:`DEFAULT_NUM_CONFIGURATIONS`.
DEFAULT_MAX_CONFIGURATIONS = DEFAULT_MAX_EXACT_CONFIGS
DEFAULT_NUM_SAMPLES = DEFAULT_NUM_CONFIGURATIONS

_REDUCTIONS = ("sum", "mean", "max")


# ----------------------------------------------------------------------------- inputs


def multilabel_log_probs(logits_N_K_C: Tensor) -> Tensor:
    """``log p_k(c) = logsigmoid(logits)``: what every function here takes (any shape)."""
    tensor = check_tensor(logits_N_K_C, "logits_N_K_C")
    if not tensor.is_floating_point():
        raise InvalidTypeError(f"logits_N_K_C must be a floating point tensor, got dtype {tensor.dtype}")
    return F.logsigmoid(tensor)


def _check(log_probs: object, name: str = "log_probs_N_K_C") -> Tensor:
    """Validate per-label log-probabilities ``[N, K, C]`` and return them as float64 (<= 0)."""
    tensor = check_tensor(log_probs, name)
    if tensor.ndim != 3:
        raise InvalidArgumentError(
            f"{name} must have shape [N, K, C] (items, function samples, labels), got {tuple(tensor.shape)}"
        )
    if not tensor.is_floating_point():
        raise InvalidTypeError(f"{name} must be a floating point tensor, got dtype {tensor.dtype}")
    if tensor.numel() == 0:
        raise InvalidArgumentError(f"{name} has a zero-sized dimension: shape {tuple(tensor.shape)}")
    tensor = tensor.detach().to(torch.float64)
    if bool(torch.isnan(tensor).any()) or bool((tensor == math.inf).any()):
        raise InvalidArgumentError(f"{name} holds NaN or +inf")
    high = float(tensor.max())
    if high > 1e-4:
        raise InvalidArgumentError(
            f"{name} must hold log P(y_c = 1) <= 0 (logsigmoid of the logits), got a maximum of {high:.4g}; "
            "pass multilabel_log_probs(logits)"
        )
    rows = tensor.shape[0] * tensor.shape[1]
    if tensor.shape[2] >= 3 and rows >= _SOFTMAX_ROWS and bool(
            (tensor.logsumexp(-1).abs() < _SOFTMAX_TOLERANCE).all()):
        raise InvalidArgumentError(
            f"{name} sums to 1 over its {tensor.shape[2]} labels in every one of its {rows} rows: a softmax "
            "(predict_log_probs, one class per item), not per-label log P(y_c = 1); take the logsigmoid of the "
            "logits (multilabel_log_probs) or MultiLabelPosterior(network).log_probs(inputs, num_samples=K)")
    return tensor.clamp_max(0.0)


#: a multi-label input of 3 or more labels whose every one of at least this many rows sums to 1
#: (within the tolerance, a softmax's rounding in float32) is a softmax handed over by mistake:
#: per-label probabilities of real items do not all sum to exactly 1 (with 2 labels they can: a
#: zero-initialised last layer gives 1/2 and 1/2 everywhere)
_SOFTMAX_ROWS = 8
_SOFTMAX_TOLERANCE = 1e-5


def _log1mexp(log_p: Tensor) -> Tensor:
    """``log(1 - exp(x))`` for ``x <= 0``, accurate everywhere (Mächler 2012)."""
    return torch.where(log_p > -math.log(2.0), torch.log(-torch.expm1(log_p)), torch.log1p(-torch.exp(log_p)))


def _xlogx_from_log(log_p: Tensor) -> Tensor:
    """``p log p`` with ``0 log 0 = 0``."""
    return torch.where(torch.isneginf(log_p), torch.zeros_like(log_p), log_p.exp() * log_p)


def _binary_entropy(log_pos: Tensor, log_neg: Tensor) -> Tensor:
    return 0.0 - (_xlogx_from_log(log_pos) + _xlogx_from_log(log_neg))


def _split(log_probs_N_K_C: object) -> tuple[Tensor, Tensor]:
    log_pos = _check(log_probs_N_K_C)
    return log_pos, _log1mexp(log_pos)


def _mean_log(log_N_K_C: Tensor) -> Tensor:
    """``log(1/K Σ_k exp(x))`` over dim 1."""
    return log_mean_exp(log_N_K_C, dim=1)


def _reduce(values_N_C: Tensor, reduce: str) -> Tensor:
    if reduce not in _REDUCTIONS:
        raise InvalidArgumentError(f"reduce must be one of {', '.join(_REDUCTIONS)}, got {reduce!r}")
    if reduce == "sum":
        return values_N_C.sum(-1)
    if reduce == "mean":
        return values_N_C.mean(-1)
    return values_N_C.max(-1).values


# ----------------------------------------------------------------------------- per-item scores


def per_label_entropy(log_probs_N_K_C: Tensor) -> Tensor:
    """Predictive entropy of every label, ``h(p̄(c))``: float64 ``[N, C]`` (nats).

    ``p̄(c) = 1/K Σ_k p_k(c)`` and ``1 - p̄(c) = 1/K Σ_k (1 - p_k(c))`` are both taken
    from the log-probabilities (no cancellation in ``1 - p̄`` for ``p̄`` near 1).
    """
    log_pos, log_neg = _split(log_probs_N_K_C)
    return _binary_entropy(_mean_log(log_pos), _mean_log(log_neg)).clamp_min(0.0)


def per_label_bald(log_probs_N_K_C: Tensor) -> Tensor:
    """BALD of every label, ``I[y_c; w] = h(p̄(c)) - 1/K Σ_k h(p_k(c))``: float64 ``[N, C]`` (>= 0)."""
    log_pos, log_neg = _split(log_probs_N_K_C)
    predictive = _binary_entropy(_mean_log(log_pos), _mean_log(log_neg))
    expected = _binary_entropy(log_pos, log_neg).mean(1)
    return (predictive - expected).clamp_min(0.0)


def multilabel_entropy(log_probs_N_K_C: Tensor, *, reduce: str = "sum") -> Tensor:
    """Per-label predictive entropy reduced over the labels (``"sum"``, ``"mean"`` or ``"max"``): ``[N]``.

    >>> lp = multilabel_log_probs(torch.tensor([[[0.0, 9.0]], [[9.0, 9.0]]]))
    >>> multilabel_entropy(lp).argmax().item()  # an undecided label beats two sure ones
    0
    """
    return _reduce(per_label_entropy(log_probs_N_K_C), reduce)


def multilabel_bald(log_probs_N_K_C: Tensor, *, reduce: str = "sum") -> Tensor:
    """BALD summed (or ``"mean"`` / ``"max"``) over labels: ``[N]``, an upper bound of the joint ``I[y; w]``."""
    return _reduce(per_label_bald(log_probs_N_K_C), reduce)


def multilabel_gradient_factors(log_probs_N_K_C: Tensor) -> Tensor:
    r"""``a_N_C = p̄ - ŷ`` with ``ŷ_c = [p̄(c) ≥ 1/2]`` (:func:`~activebayes.metrics.multilabel.label_decisions`), float64: the BCE gradient embedding of the
    last layer is ``g_n = a_n ⊗ h_n`` (the module docstring), BADGE's factors for label vectors.

    >>> multilabel_gradient_factors(torch.log(torch.tensor([[[0.9, 0.2]], [[0.4, 0.6]]])))
    tensor([[-0.1000,  0.2000],
            [ 0.4000, -0.4000]], dtype=torch.float64)
    """
    log_pos = _check(log_probs_N_K_C)
    mean_N_C = _mean_log(log_pos).exp()
    return mean_N_C - label_decisions(mean_N_C).to(torch.float64)


def _conditional_entropy_N(log_pos: Tensor, log_neg: Tensor) -> Tensor:
    """``H[y_n | w] = Σ_c 1/K Σ_k h(p_k(n, c))``: ``[N]``."""
    return _binary_entropy(log_pos, log_neg).mean(1).sum(-1)


# ----------------------------------------------------------------------------- joint entropy


def _bit_table(C: int, device: torch.device | None = None) -> Tensor:
    """All ``2^C`` label vectors as float64 ``[2^C, C]`` (row ``j`` = the binary digits of ``j``)."""
    return torch.tensor(list(itertools.product((0.0, 1.0), repeat=C)), dtype=torch.float64,
                        device=device).reshape(-1, C)


def _log_configurations(log_pos_K_C: Tensor, log_neg_K_C: Tensor, bits_Y_C: Tensor) -> Tensor:
    """``log P_k(y)`` for every row ``y`` of ``bits_Y_C``: ``[Y, K]``."""
    # 0 * (-inf) must be 0: a bit that is 0 never reads log p (and vice versa)
    zero = log_pos_K_C.new_zeros(())
    pos = torch.where(bits_Y_C[:, None, :] > 0, log_pos_K_C[None], zero)
    neg = torch.where(bits_Y_C[:, None, :] > 0, zero, log_neg_K_C[None])
    return (pos + neg).sum(-1)


def _entropy_of_log_q(log_q: Tensor, dims: tuple[int, ...]) -> Tensor:
    return 0.0 - _xlogx_from_log(log_q).sum(dims)


def _check_budget_args(
    num_configurations: int | None, max_exact_configs: int | None, generator: torch.Generator | int | None,
    num_samples: int | None, max_configurations: int | None, seed: int | None,
) -> tuple[int, int, torch.Generator | None]:
    """``(num_configurations, max_exact_configs, generator)`` from the new names or their deprecated
    spellings (``num_samples``, ``max_configurations``, ``seed``: a ``DeprecationWarning``; both: an error)."""
    num_configurations = check_positive_int(
        renamed_keyword(num_configurations, num_samples, "num_configurations", "num_samples",
                        DEFAULT_NUM_CONFIGURATIONS, stacklevel=4), "num_configurations")
    max_exact_configs = check_positive_int(
        renamed_keyword(max_exact_configs, max_configurations, "max_exact_configs", "max_configurations",
                        DEFAULT_MAX_EXACT_CONFIGS, stacklevel=4), "max_exact_configs", allow_zero=True)
    if seed is not None:
        # not a plain rename (an int generator is mixed first, as everywhere): ``seed=s`` keeps its
        # draws, ``torch.Generator().manual_seed(s)``
        if generator is not None:
            raise InvalidArgumentError("seed is the deprecated name of generator: pass only generator, got both")
        warnings.warn("seed is deprecated here and will be removed in the next release; use generator "
                      "(seed=s draws what generator=torch.Generator().manual_seed(s) draws)",
                      DeprecationWarning, stacklevel=3)
        return num_configurations, max_exact_configs, torch.Generator().manual_seed(int(seed))
    if generator is not None:  # None: torch's global generator, drawn from only if sampling
        generator = as_generator(generator, "generator")
    return num_configurations, max_exact_configs, generator


def _exact_bits(max_exact_configs: int) -> float:
    """Exact while the label bits of the configurations are at most this (0 configurations: never)."""
    return math.log2(max_exact_configs) if max_exact_configs > 0 else -math.inf


def multilabel_joint_entropy(
    log_probs_B_K_C: Tensor,
    *,
    num_configurations: int | None = None,
    max_exact_configs: int | None = None,
    generator: torch.Generator | int | None = None,
    num_samples: int | None = None,
    max_configurations: int | None = None,
    seed: int | None = None,
) -> float:
    """``H[y_1..y_B]`` (nats) of the label vectors of B items: exact while ``2^(B·C)`` fits
    ``max_exact_configs`` (default 4,096), else the unbiased estimate from ``num_configurations``
    joint draws (default 2,000) drawn from ``generator`` (a ``torch.Generator``, an int seed, or
    ``None`` for torch's global generator); see the module docstring.

    ``num_samples``, ``max_configurations`` and ``seed`` are the deprecated names of
    ``num_configurations``, ``max_exact_configs`` and ``generator`` (a ``DeprecationWarning``;
    removed in the next release; ``seed=s`` draws from ``torch.Generator().manual_seed(s)``).
    """
    log_pos, log_neg = _split(log_probs_B_K_C)
    num_configurations, max_exact_configs, generator = _check_budget_args(
        num_configurations, max_exact_configs, generator, num_samples, max_configurations, seed)
    B, K, C = log_pos.shape
    if B * C <= _exact_bits(max_exact_configs):
        log_joint_M_K = log_pos.new_zeros(1, K)
        bits = _bit_table(C, log_pos.device)
        for i in range(B):
            log_y_Y_K = _log_configurations(log_pos[i], log_neg[i], bits)
            log_joint_M_K = (log_joint_M_K[:, None, :] + log_y_Y_K[None]).reshape(-1, K)
        log_q_M = log_mean_exp(log_joint_M_K, dim=1)
        return float(_entropy_of_log_q(log_q_M, (0,)))
    draws = _Draws(K, num_configurations, generator, log_pos.device)
    for i in range(B):
        draws.extend(log_pos[i], log_neg[i], draws.uniforms(C))
    return float(-log_mean_exp(draws.log_joint_S_K, dim=1).mean())


class _Draws:
    """S joint draws of the batch's bits: ``k_s = s mod K`` and ``log P_k(y^s)`` for every k."""

    def __init__(self, K: int, num_configurations: int, generator: torch.Generator | None,
                 device: torch.device) -> None:
        self.S = -(-num_configurations // K) * K  # a multiple of K: every k_s equally often
        self.K = K
        self.k_S = torch.arange(self.S, device=device) % K
        self.log_joint_S_K = torch.zeros(self.S, K, dtype=torch.float64, device=device)
        self.generator = generator
        self.device = device

    def uniforms(self, C: int) -> Tensor:
        # drawn on the CPU from the CPU generator (or the global one), so every device sees the same draws
        return torch.rand(self.S, C, generator=self.generator, dtype=torch.float64).to(self.device)

    def bits(self, log_pos_K_C: Tensor, u_S_C: Tensor) -> Tensor:
        """``y^s_c = [u_{s,c} < p_{k_s}(c)]``: ``[S, C]`` bool."""
        return u_S_C.log() < log_pos_K_C[self.k_S]

    def log_likelihood(self, log_pos_n_K_C: Tensor, log_neg_n_K_C: Tensor, bits_n_S_C: Tensor) -> Tensor:
        """``log P_k(y^s)`` of each candidate's own bits: ``[n, S, K]``."""
        pos = torch.where(torch.isneginf(log_pos_n_K_C), -1e300, log_pos_n_K_C)
        neg = torch.where(torch.isneginf(log_neg_n_K_C), -1e300, log_neg_n_K_C)
        b = bits_n_S_C.to(torch.float64)
        return torch.einsum("nsc,nkc->nsk", b, pos) + torch.einsum("nsc,nkc->nsk", 1.0 - b, neg)

    def extend(self, log_pos_K_C: Tensor, log_neg_K_C: Tensor, u_S_C: Tensor) -> None:
        bits_S_C = self.bits(log_pos_K_C, u_S_C)
        self.log_joint_S_K = self.log_joint_S_K + self.log_likelihood(
            log_pos_K_C[None], log_neg_K_C[None], bits_S_C[None])[0]


# ----------------------------------------------------------------------------- BatchBALD


def multilabel_batchbald(
    log_probs_N_K_C: Tensor,
    batch_size: int,
    *,
    num_configurations: int | None = None,
    max_exact_configs: int | None = None,
    generator: torch.Generator | int | None = None,
    chunk_elements: int = 2**22,
    chunk_size: int | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    num_samples: int | None = None,
    max_configurations: int | None = None,
    seed: int | None = None,
) -> Selection:
    """Greedy BatchBALD on label vectors: ``batch_size`` items of ``log_probs_N_K_C`` (see the module docstring).

    Args:
        log_probs_N_K_C: ``log P(y_c = 1)`` per item, function sample and label.
        batch_size: items to pick (at most N).
        num_configurations: joint draws S of the sampled estimate, the sampled label
            configurations (rounded up to a multiple of K; default 2,000).
        max_exact_configs: exact while batch + candidate have at most this many label
            configurations ``2^(C·(b+1))`` (default 4,096); beyond, sampled (0: always).
        generator: seeds the draws: a ``torch.Generator`` (CPU), an int seed, or ``None``
            for torch's global generator (as :func:`~activebayes.acquisition.batchbald`).
        chunk_elements: candidates are scored in chunks of about this many float64
            work elements (memory bound).
        chunk_size: candidates per chunk instead (overrides ``chunk_elements``).
        device: where the joint entropies are computed (e.g. ``"cuda"``); by default the
            device of ``log_probs_N_K_C``. The draws come from a CPU generator, so a seed
            picks the same batch on every device (up to float64 rounding in near ties).
        progress: show a tqdm bar over the picks.
        num_samples: deprecated name of ``num_configurations``;
        max_configurations: deprecated name of ``max_exact_configs``;
        seed: deprecated: ``seed=s`` is ``generator=torch.Generator().manual_seed(s)``
            (each a ``DeprecationWarning``; removed in the next release; passing a
            deprecated name with its new name raises).

    Returns:
        a :class:`~activebayes.acquisition.selection.Selection` named ``"multilabel_batchbald"``;
        ``scores[b]`` is ``I[y_{A_b}; w]`` of the first ``b + 1`` picks.

    K = 1 function sample is refused (``InvalidArgumentError``), as ``select`` refuses it:
    one sample has no disagreement, so every score would be 0 and the batch the pool's
    first items.

    >>> lp = multilabel_log_probs(2 * torch.randn(30, 8, 3, generator=torch.Generator().manual_seed(0)))
    >>> picks = multilabel_batchbald(lp, 3)
    >>> len(picks), bool((picks.scores.diff() >= -1e-12).all())
    (3, True)
    """
    log_pos, log_neg = _split(log_probs_N_K_C)
    check_samples_disagree(int(log_pos.shape[1]), samples_argument(log_pos), "multilabel_batchbald")
    compute_device = resolve_device(log_pos, device)
    log_pos, log_neg = log_pos.to(compute_device), log_neg.to(compute_device)
    N, K, C = log_pos.shape
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    num_configurations, max_exact_configs, generator = _check_budget_args(
        num_configurations, max_exact_configs, generator, num_samples, max_configurations, seed)
    chunk_elements = check_positive_int(chunk_elements, "chunk_elements")
    rows = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
    conditional_N = _conditional_entropy_N(log_pos, log_neg)
    exact_bits = _exact_bits(max_exact_configs)
    bits_Y_C = _bit_table(C, compute_device) if C <= exact_bits else None
    available_N = torch.ones(N, dtype=torch.bool, device=compute_device)
    picked: list[int] = []
    scores: list[float] = []
    batch_conditional = 0.0
    # the exact configurations of the batch so far
    log_joint_M_K = torch.zeros(1, K, dtype=torch.float64, device=compute_device)
    draws: _Draws | None = None
    bar = tqdm(total=batch_size, desc="multi-label BatchBALD", disable=not progress, leave=False)
    for step in range(batch_size):
        exact = draws is None and bits_Y_C is not None and C * (step + 1) <= exact_bits
        if exact:
            assert bits_Y_C is not None
            joint_N = _exact_joint_N(log_pos, log_neg, log_joint_M_K, bits_Y_C, chunk_elements, rows)
            u_S_C = None
        else:
            if draws is None:  # switch to sampling: draw the batch so far afresh
                draws = _Draws(K, num_configurations, generator, compute_device)
                for index in picked:
                    draws.extend(log_pos[index], log_neg[index], draws.uniforms(C))
            u_S_C = draws.uniforms(C)
            joint_N = _sampled_joint_N(log_pos, log_neg, draws, u_S_C, chunk_elements, rows)
        scores_N = joint_N - batch_conditional - conditional_N
        scores_N[~available_N] = -math.inf
        index = int(torch.argmax(scores_N))
        picked.append(index)
        scores.append(float(scores_N[index]))
        available_N[index] = False
        batch_conditional += float(conditional_N[index])
        if step + 1 < batch_size:
            if draws is not None:
                assert u_S_C is not None
                draws.extend(log_pos[index], log_neg[index], u_S_C)
            elif bits_Y_C is not None and C * (step + 2) <= exact_bits:
                log_y_Y_K = _log_configurations(log_pos[index], log_neg[index], bits_Y_C)
                log_joint_M_K = (log_joint_M_K[:, None, :] + log_y_Y_K[None]).reshape(-1, K)
        bar.update(1)
    bar.close()
    return Selection(torch.tensor(picked, dtype=torch.long), torch.tensor(scores, dtype=torch.float64),
                     "multilabel_batchbald")


def _exact_joint_N(log_pos: Tensor, log_neg: Tensor, log_joint_M_K: Tensor, bits_Y_C: Tensor,
                   chunk_elements: int, rows: int | None = None) -> Tensor:
    """``H[y_A, y_n]`` for every candidate n, enumerating all configurations: ``[N]``."""
    N, K, C = log_pos.shape
    M, Y = log_joint_M_K.shape[0], bits_Y_C.shape[0]
    joint_N = log_pos.new_empty(N)
    # log q(m, y) = logsumexp_k (log P_k(m) + log P_k(y)) - log K, as a stable product of exps
    shift_M = log_joint_M_K.max(dim=1, keepdim=True).values.clamp_min(-1e300)
    weights_M_K = (log_joint_M_K - shift_M).exp() / K
    rows = rows or max(1, chunk_elements // max(1, M * Y + Y * K))
    for start in range(0, N, rows):
        end = min(N, start + rows)
        log_y_n_Y_K = torch.stack([_log_configurations(log_pos[i], log_neg[i], bits_Y_C) for i in range(start, end)])
        shift_n_Y = log_y_n_Y_K.max(dim=2, keepdim=True).values.clamp_min(-1e300)
        q_n_M_Y = torch.einsum("mk,nyk->nmy", weights_M_K, (log_y_n_Y_K - shift_n_Y).exp())
        log_q = q_n_M_Y.log() + shift_M[None] + shift_n_Y.transpose(1, 2)
        joint_N[start:end] = _entropy_of_log_q(log_q, (1, 2))
    return joint_N


def _sampled_joint_N(log_pos: Tensor, log_neg: Tensor, draws: _Draws, u_S_C: Tensor, chunk_elements: int,
                     rows: int | None = None) -> Tensor:
    """Unbiased estimate of ``H[y_A, y_n]`` for every candidate n on shared draws: ``[N]``."""
    N, K, C = log_pos.shape
    S = draws.S
    joint_N = log_pos.new_empty(N)
    rows = rows or max(1, chunk_elements // (S * (K + C)))
    for start in range(0, N, rows):
        end = min(N, start + rows)
        lp, ln = log_pos[start:end], log_neg[start:end]
        bits_n_S_C = u_S_C.log()[None] < lp[:, draws.k_S]
        log_y_n_S_K = draws.log_likelihood(lp, ln, bits_n_S_C)
        log_q_n_S = log_mean_exp(draws.log_joint_S_K[None] + log_y_n_S_K, dim=2)
        joint_N[start:end] = -log_q_n_S.mean(1)
    return joint_N
