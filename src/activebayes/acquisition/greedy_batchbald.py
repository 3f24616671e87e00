r"""BatchBALD: greedy batch acquisition by joint mutual information (Kirsch et al. 2019).

The batch ``A`` maximises

.. math:: a(A) = \mathbb{I}[y_A; w] = \mathbb{H}[y_A] - \sum_{i\in A} \mathbb{H}[y_i \mid w]

(the labels are independent given ``w``, so the conditional entropy is a sum). ``a``
is submodular, so the greedy batch is within ``1 - 1/e`` of the best. Step ``b`` scores
every remaining candidate ``n`` by ``a(A_{b-1} ∪ {n})`` and takes the best.
The first pick is BALD's top item (computed by :func:`~activebayes.acquisition.bald`).

``H[y_A, y_n]`` is exact while the ``C^{|A|}`` configurations of the batch so far fit
``max_exact_configs``, and estimated from ``num_configurations`` sampled configurations
beyond (seeded by ``generator``); see :mod:`activebayes.acquisition.joint_entropy` for
the algebra. Each step is one ``[M, K] @ [K, n*C]`` product per pool chunk, so memory
is bounded by the chunk and the cost is ``O(M · N · C · K)`` flops per step, with
no per-candidate Python loop.

Precision: the configuration table and the batch entropy are float64; the per-candidate
work runs in ``dtype`` (default: the input's dtype; float32 inputs give float32
products and logs with relative error ~1e-6, plenty for ranking; pass
``dtype=torch.float64`` for reference-grade scores).
"""

from __future__ import annotations

import torch
from torch import Tensor
from tqdm.auto import tqdm

from activebayes._seeding import as_generator
from activebayes._validation import (
    Device,
    check_bool,
    check_log_probs,
    check_positive_int,
    check_samples_disagree,
    renamed_keyword,
    samples_argument,
)
from activebayes.acquisition._chunks import iter_chunks, resolve_device
from activebayes.acquisition.joint_entropy import (
    WeightedConfigurations,
    conditional_entropy_given_configurations,
    deduplicate,
    exact_log_joint,
    extend_configurations,
    sample_configurations,
)
from activebayes.acquisition.scores import bald, expected_entropy
from activebayes.acquisition.selection import BudgetPlan, Selection, check_budget, cost_priority, top_order
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["batchbald", "BatchConfigurations", "DEFAULT_NUM_CONFIGURATIONS"]


#: Sampled configurations once the exact table is too big (the paper's code: 10,000).
DEFAULT_NUM_CONFIGURATIONS = 10_000


class BatchConfigurations:
    """Configurations of the labels picked so far: exact while small, sampled beyond.

    ``add`` appends one picked item; ``weighted()`` gives what scoring candidates needs.
    Exact while ``C ** size <= max_exact_configs``; at the first step beyond, fresh
    configurations of the whole batch are drawn, and later steps extend each draw by
    one label (each draw keeps its function sample, so it stays an exact draw from the
    joint). Everything lives on the CPU in float64 (it is small: ``M x K``).
    """

    def __init__(
        self, K: int, C: int, *, num_configurations: int, max_exact_configs: int, generator: torch.Generator | None
    ) -> None:
        self.K, self.C = K, C
        self.num_configurations = num_configurations
        self.max_exact_configs = max_exact_configs
        self.generator = generator
        self.log_probs: list[Tensor] = []
        self.log_joint_M_K = torch.zeros(1, K, dtype=torch.float64)
        self.exact = True
        self.classes_M_B: Tensor | None = None
        self.samples_M: Tensor | None = None

    def add(self, log_probs_K_C: Tensor) -> None:
        log_probs_K_C = log_probs_K_C.detach().to("cpu", torch.float64)
        self.log_probs.append(log_probs_K_C)
        size = len(self.log_probs)
        if self.exact and self.C**size <= self.max_exact_configs:
            self.log_joint_M_K = exact_log_joint(log_probs_K_C[None], self.log_joint_M_K)
        elif self.exact:
            self.exact = False
            self.classes_M_B, self.samples_M, self.log_joint_M_K = sample_configurations(
                torch.stack(self.log_probs), self.num_configurations, generator=self.generator
            )
        else:
            assert self.classes_M_B is not None and self.samples_M is not None
            classes_M, self.log_joint_M_K = extend_configurations(
                log_probs_K_C, self.samples_M, self.log_joint_M_K, generator=self.generator
            )
            self.classes_M_B = torch.cat([self.classes_M_B, classes_M[:, None]], dim=1)

    def weighted(self) -> WeightedConfigurations:
        if self.exact:
            return WeightedConfigurations.from_log_joint(self.log_joint_M_K, None)
        assert self.classes_M_B is not None
        return WeightedConfigurations.from_log_joint(*deduplicate(self.classes_M_B, self.log_joint_M_K))


def batchbald(
    log_probs_N_K_C: Tensor,
    batch_size: int,
    *,
    num_configurations: int | None = None,
    max_exact_configs: int | None = None,
    generator: torch.Generator | None = None,
    costs_N: Tensor | None = None,
    cost_budget: float | None = None,
    cost_aware: bool = False,
    device: Device = None,
    dtype: torch.dtype | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
    plan: BudgetPlan | None = None,
    num_samples: int | None = None,
) -> Selection:
    """Greedy BatchBALD batch of ``batch_size`` items from ``log_probs_N_K_C`` ``[N, K, C]``.

    Args:
        num_configurations: sampled joint label configurations M once the exact table is too
            big (rounded up to a multiple of K; default 10,000 as in the paper's code).
        max_exact_configs: exact while ``C^(picked so far)`` is at most this
            (default: ``num_configurations``, so the exact table is never larger than the sampled one).
        generator: seeds the sampled configurations (CPU generator).
        costs_N: optional per-item labelling costs ``[N]``; candidates that no longer
            fit the budget are skipped.
        cost_budget: total labelling cost allowed (with ``costs_N``).
        cost_aware: ``True`` maximises the gain per unit cost (free items first, by their gain).
        device: run the per-candidate products there (e.g. ``"cuda"``).
        dtype: working precision of the per-candidate products (default: input's).
        chunk_size: candidates per chunk (default: ``1024 // C``; the configurations are tiled
            too, so work buffers stay ~8 MiB whatever M and N).
        progress: show a tqdm bar over the picks.
        num_samples: deprecated name of ``num_configurations`` (a ``DeprecationWarning``;
            removed in the next release).

    Returns:
        :class:`Selection`; ``scores[b]`` is the joint mutual information of the first
        ``b + 1`` picks.

    K = 1 function sample is refused (``InvalidArgumentError``), as ``select`` refuses it:
    one sample has no disagreement, so every score would be 0 and the batch the pool's
    first items.

    >>> lp = torch.log_softmax(3 * torch.randn(50, 8, 4, generator=torch.Generator().manual_seed(0)), -1)
    >>> picks = batchbald(lp, 3)
    >>> picks.indices[0] == bald(lp).argmax(), bool((picks.scores.diff() >= 0).all())
    (tensor(True), True)
    """
    check_log_probs(log_probs_N_K_C, values=False)
    N, K, C = log_probs_N_K_C.shape
    check_samples_disagree(K, samples_argument(log_probs_N_K_C), "batchbald")
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    num_configurations = check_positive_int(
        renamed_keyword(num_configurations, num_samples, "num_configurations", "num_samples", DEFAULT_NUM_CONFIGURATIONS),
        "num_configurations",
    )
    max_exact = num_configurations if max_exact_configs is None else check_positive_int(
        max_exact_configs, "max_exact_configs", allow_zero=True
    )
    if plan is None:
        plan = check_budget(costs_N, cost_budget, N)
    elif costs_N is not None or cost_budget is not None:
        raise InvalidArgumentError("pass either plan or costs_N / cost_budget, not both")
    if check_bool(cost_aware, "cost_aware") and plan is None:
        raise InvalidArgumentError("cost_aware=True needs costs_N and cost_budget")
    progress = check_bool(progress, "progress")
    compute_device = resolve_device(log_probs_N_K_C, device)
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise InvalidTypeError(f"dtype must be a floating point torch.dtype (e.g. torch.float64), got {dtype!r}")
    work_dtype = dtype or log_probs_N_K_C.dtype
    if generator is not None:
        generator = as_generator(generator, "generator")

    # Validates the values (chunk by chunk) on the way.
    bald_N = bald(log_probs_N_K_C, device=device, chunk_size=chunk_size).cpu()
    conditional_N = expected_entropy(log_probs_N_K_C, device=device, chunk_size=chunk_size).cpu()

    state = BatchConfigurations(K, C, num_configurations=num_configurations, max_exact_configs=max_exact, generator=generator)
    available_N = torch.ones(N, dtype=torch.bool)
    picked: list[int] = []
    picked_scores: list[float] = []
    spent = 0.0
    batch_conditional = 0.0
    batch_information = 0.0
    scores_N = bald_N
    bar = tqdm(total=batch_size, desc="BatchBALD", disable=not progress, leave=False)
    rows = chunk_size or max(1, 1024 // C)
    for step in range(batch_size):
        if step > 0:
            weighted = state.weighted()
            configurations = WeightedConfigurations(
                weighted.posterior_M_K.to(compute_device, work_dtype),
                weighted.weights_M.to(compute_device, work_dtype),
                weighted.entropy,
                weighted.exact,
            )
            joint_N = torch.empty(N, dtype=torch.float64)
            for start, end in iter_chunks(N, rows):
                chunk_n_K_C = log_probs_N_K_C[start:end].to(compute_device, non_blocking=True)
                joint_N[start:end] = conditional_entropy_given_configurations(
                    configurations, chunk_n_K_C, dtype=work_dtype
                ).cpu()
            joint_N += configurations.entropy
            scores_N = joint_N - batch_conditional - conditional_N
        candidates_N = available_N.clone()
        if plan is not None:
            candidates_N &= plan.fits_N(spent)
        if not bool(candidates_N.any()):
            break
        # under cost_aware the gain per unit cost, free items first by gain (cost_priority)
        gain_N = (scores_N - batch_information).clamp_min(0.0) if cost_aware else scores_N
        priority = cost_priority(gain_N, plan, cost_aware).masked(candidates_N)
        index = int(top_order(priority, 1, None)[0])  # the first of equal maxima, on every device
        picked.append(index)
        picked_scores.append(float(scores_N[index]))
        available_N[index] = False
        batch_conditional += float(conditional_N[index])
        batch_information = float(scores_N[index])
        if plan is not None:
            spent += float(plan.costs_N[index])
        if step + 1 < batch_size:
            state.add(log_probs_N_K_C[index])
        bar.update(1)
    bar.close()
    return Selection(
        torch.tensor(picked, dtype=torch.long), torch.tensor(picked_scores, dtype=torch.float64), "batchbald"
    )
