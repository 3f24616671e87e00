r"""Score a pool of any size: stream it in chunks, keep only per-item scores.

:func:`score_pool` is what the loop calls to pick a batch from a big pool. Items are
read from the dataset chunk by chunk (``dataset.inputs[indices_n]``, so a memory-mapped
or lazily decoded dataset is never loaded whole), predicted with K function samples,
scored, and dropped; what stays in memory is one score per item (``O(N)`` floats) or,
for BatchBALD, a bounded candidate set. The picks do not depend on how the pool is cut
into chunks, in which order the chunks run, or on which machine
(:mod:`activebayes.distributed` runs the same chunks on a Ray cluster):

- **Predictions per item.** MC dropout masks are drawn from ``(mask_seed, layer, k)``
  (:mod:`activebayes.models.dropout`) and held for the whole pass, so item ``i``'s K
  samples ``log p(y_i | x_i, w_k)`` are the same whatever chunk it lands in.
- **Top-k, exactly.** Items are ranked by ``(score desc, original index asc)``; the top
  ``B`` of a union is the top ``B`` of the union of the parts' top ``B``, so each chunk
  keeps only its own top ``B`` and the merge is exact (ties go to the lower index).
- **Stochastic batches, exactly.** Power / softmax / softrank acquisition (Kirsch et al.
  2023) samples ``B`` items without replacement with probability ``∝ w_i`` by
  Gumbel-top-k (Kool et al. 2019): take the ``B`` largest ``log w_i + G_i`` with
  ``G_i = -log(-log u_i)``. Here ``u_i = keyed_uniform(selection_seed, i)`` is a hash of
  the seed and the item's original index (:func:`activebayes._seeding.keyed_uniform`),
  so the noise belongs to the item and the stochastic batch is again a top-k.
  Softrank's weights need every item's rank, so it keeps all scores.
- **BatchBALD on a pre-filter.** The greedy BatchBALD batch is computed on the ``M``
  items of highest BALD (option ``prefilter``), whose ``[M, K, C]`` predictions are kept
  while streaming. Why that loses little: the gain of adding item ``n`` to a batch ``A``
  is ``I[y_n; w | y_A] = H[y_n | y_A] - H[y_n | w] <= H[y_n] - H[y_n | w] = BALD(n)``
  (labels are independent given ``w``; conditioning does not raise entropy). So an item
  outside the pre-filter can gain at most the ``(M+1)``-th largest BALD score; whenever
  every greedy step's gain exceeds it, the pre-filtered batch *is* the full greedy batch
  (exactly while the joint entropy is exact). With ``M >= N`` it is plain
  :func:`~activebayes.acquisition.batchbald` on the whole pool.
- **BADGE on gradient factors.** BADGE's embedding of item ``n`` is ``(p̄_n - e_ŷ_n) ⊗ h_n``;
  the K samples enter only through ``a_n = p̄_n - e_ŷ_n``, one row per item, so each chunk
  returns ``a_n`` (``C`` numbers per item) and k-means++ seeding runs on the merged rows.
- Everything else registered (strategies without a per-item score) gathers the whole
  ``[N, K, C]`` in memory and calls :func:`~activebayes.acquisition.select`.

With a cost budget (``costs_N`` / ``cost_budget``) items are taken in the strategy's
order, skipping those that no longer fit, as in :mod:`activebayes.acquisition.selection`;
the walk needs the whole order, so every item's score is kept (still ``O(N)``).

Example:
    >>> import torch
    >>> from activebayes.models import MLP
    >>> net = MLP(in_features=4, num_classes=3)
    >>> pool = torch.randn(1000, 4)
    >>> picks = score_pool(net, pool, torch.arange(1000), "bald", 5, num_samples=8,
    ...                    mask_generator=0, selection_seed=1, chunk_size=128)
    >>> len(picks), picks.strategy
    (5, 'bald')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from activebayes._seeding import keyed_uniform
from activebayes._validation import check_choice, check_nonnegative_float, check_positive_int
from activebayes.acquisition import bald, batchbald, get_strategy, select
from activebayes.acquisition.badge import badge_from_factors, loss_gradient_factors
from activebayes.acquisition.strategies import INPUTS, Strategy
from activebayes.acquisition.selection import (
    BudgetPlan,
    Selection,
    check_budget,
    cost_priority,
    stochastic_log_weights,
    take_in_order,
)
from activebayes.data.dataset import as_index_tensor
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models import FunctionSampler, SAMPLING_MODES, mc_dropout_layers, predict_log_probs, resample_masks
from activebayes.models.posterior import SampledFunctions
from activebayes.models.predict import hold_functions

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_PREFILTER",
    "AllLogProbs",
    "AllScores",
    "BaldPrefilter",
    "GradientFactors",
    "ChunkWork",
    "LocalExecutor",
    "PoolExecutor",
    "PredictSpec",
    "RowsAccumulator",
    "TopCandidates",
    "concat_rows",
    "lexicographic_top",
    "run_chunk",
    "score_pool",
]

#: Items per chunk: a chunk's inputs and ``[n, K, C]`` predictions are held at once
#: (4096 x 100 x 10 float32 = 16 MB); the forward pass's activations are bounded separately
#: by ``predict_log_probs`` (its ``memory_budget_mb``).
DEFAULT_CHUNK_SIZE = 4096

#: BatchBALD pre-filter size M. Measured on real MNIST (benchmarks/batchbald_prefilter.py,
#: docs/big-pools.md): the batch of 10 from the top-M BALD items of a 4,500 pool equals the
#: full-pool BatchBALD batch in 6 of 6 runs for every M >= 500 (5 of 6 at M = 200); 1,000
#: doubles that margin and keeps the greedy steps at about a third of the full pool's time.
DEFAULT_PREFILTER = 1000

Rows = dict[str, Tensor]
Device = torch.device | str | None


# ----------------------------------------------------------------------------- chunks


@dataclass(frozen=True)
class PredictSpec:
    """How a chunk is predicted: ``predict_log_probs(model, x_n, num_samples, ...)``.

    ``device`` is a string (or ``None``: where the model is) so the spec travels to
    other processes.
    """

    num_samples: int | None
    batch_size: int = 512
    sampling: str = "batched"
    device: str | None = None


class ChunkWork(Protocol):
    """What a pass computes on every chunk of the pool, and how partial results merge.

    Results are *rows*: a dict of tensors sharing their first dimension (one row per
    kept item, always with an ``"index"`` column of original dataset indices).
    ``reduce`` keeps what the answer needs from any union of rows, and must satisfy
    ``reduce(a ∪ reduce(b)) == reduce(a ∪ b)``, so chunks can be merged in any order
    and grouping (on one machine or across a cluster). ``keep`` bounds the rows
    ``reduce`` returns (``None``: all rows are kept).
    """

    needs_predictions: bool
    keep: int | None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows: ...

    def reduce(self, rows: Rows) -> Rows: ...


def pool_inputs(dataset: object) -> Any:
    """The item reader of ``dataset``: ``.inputs`` (or ``dataset`` itself if a tensor).

    It must support ``len()`` and ``inputs[index_tensor] -> float tensor [n, ...]``
    (an :class:`~activebayes.data.ArrayDataset`'s tensor, a memory-mapped dataset's
    lazy reader, ...).
    """
    inputs = dataset if isinstance(dataset, Tensor) else getattr(dataset, "inputs", None)
    if inputs is None or not hasattr(inputs, "__len__") or not hasattr(inputs, "__getitem__"):
        raise InvalidTypeError(
            "dataset must be an input tensor [N, ...] or a dataset whose .inputs supports len() and "
            f"[index tensor] -> float tensor [n, ...], got {type(dataset).__name__}"
        )
    return inputs


def read_chunk(inputs: Any, indices_n: Tensor) -> Tensor:
    """``inputs[indices_n]`` checked: a float tensor with one row per index."""
    x_n = inputs[indices_n]
    if not isinstance(x_n, Tensor):
        x_n = torch.as_tensor(np.asarray(x_n))
    if x_n.ndim == 0 or x_n.shape[0] != len(indices_n) or not x_n.is_floating_point():
        raise InvalidArgumentError(
            f"dataset inputs[index tensor of {len(indices_n)}] must return a float tensor [{len(indices_n)}, ...], "
            f"got {x_n.dtype} {tuple(x_n.shape)}"
        )
    return x_n


def run_chunk(
    model: nn.Module, inputs: Any, indices_n: Tensor, costs_n: Tensor | None, work: ChunkWork, spec: PredictSpec
) -> Rows:
    """One chunk of a pass: read the items, predict them (if the work needs it), map.

    The model must already hold its masks (:func:`score_pool` fixes them once), so
    this is a pure function of the chunk's items: the same rows on any worker.
    """
    log_probs_n_K_C = None
    if work.needs_predictions:
        x_n = read_chunk(inputs, indices_n)
        log_probs_n_K_C = predict_log_probs(
            model, x_n, spec.num_samples, batch_size=spec.batch_size, generator=None,
            device=spec.device, sampling=spec.sampling,
        )
    return work.map(indices_n, costs_n, log_probs_n_K_C)


def concat_rows(parts: list[Rows]) -> Rows:
    """Concatenate rows column by column (``parts`` must share their columns)."""
    if len(parts) == 1:
        return parts[0]
    return {key: torch.cat([part[key] for part in parts]) for key in parts[0]}


class RowsAccumulator:
    """Merges the rows of finished chunks, reducing as it goes so memory stays bounded.

    With a bounded ``work.keep`` at most about ``3 x keep`` rows are held at any time
    (plus one chunk's rows); unbounded works keep every row (``O(N)``).
    """

    def __init__(self, work: ChunkWork) -> None:
        self.work = work
        self.parts: list[Rows] = []
        self.pending = 0
        self.items = 0

    def add(self, rows: Rows) -> None:
        self.parts.append(rows)
        self.pending += len(rows["index"])
        keep = self.work.keep
        if keep is not None and self.pending > 2 * keep:
            merged = self.work.reduce(concat_rows(self.parts))
            self.parts, self.pending = [merged], len(merged["index"])

    def result(self) -> Rows:
        if not self.parts:
            raise RuntimeError("no chunk was scored")
        return self.work.reduce(concat_rows(self.parts))


# ------------------------------------------------------------------------ orderings


def lexicographic_top(
    primary_N: Tensor, secondary_N: Tensor | None, indices_N: Tensor, k: int | None = None
) -> Tensor:
    """Positions ordered by ``primary`` desc, then ``secondary`` desc, then ``indices`` asc.

    Returns the first ``k`` positions (all when ``k`` is ``None``). The order is a
    total order on distinct indices, so it does not depend on the positions' order:
    the top ``k`` of a union equals the top ``k`` of the union of the parts' top ``k``.
    For ``k`` much smaller than N only the items at or above the k-th largest
    ``primary`` are sorted.

    >>> lexicographic_top(torch.tensor([1., 3., 3., 2.]), None, torch.tensor([7, 9, 4, 5]), 2)
    tensor([2, 1])
    """
    N = int(primary_N.shape[0])
    positions = torch.arange(N)
    if k is not None and k < N:
        threshold = torch.topk(primary_N, k).values[-1]
        positions = torch.nonzero(primary_N >= threshold).squeeze(1)
    order = positions[torch.argsort(indices_N[positions], stable=True)]
    if secondary_N is not None:
        order = order[torch.argsort(secondary_N[order], descending=True, stable=True)]
    order = order[torch.argsort(primary_N[order], descending=True, stable=True)]
    return order if k is None else order[:k]


def gumbel_noise(seed: int, indices_N: Tensor) -> Tensor:
    """Standard Gumbel noise ``-log(-log u_i)`` keyed by ``(seed, original index i)``."""
    return -torch.log(-torch.log(keyed_uniform(seed, indices_N)))


def _order_keys(
    priority_N: Tensor, indices_N: Tensor, mode: str, beta: float, seed: int
) -> tuple[Tensor, Tensor | None]:
    """``(primary, secondary)`` sort keys of a per-item score strategy.

    top-k: the priority itself. Stochastic: ``log w + G`` (Gumbel-top-k), then ``G``
    alone among items of weight 0 (so they come last, in random order).
    """
    if mode == "topk":
        return priority_N, None
    log_weights_N = stochastic_log_weights(priority_N, mode, beta)
    log_weights_N = torch.nan_to_num(log_weights_N, nan=0.0, posinf=math.inf, neginf=-math.inf)  # 0^0 = 1
    gumbel_N = gumbel_noise(seed, indices_N)
    return log_weights_N + gumbel_N, gumbel_N


def _finish_selection(
    order: Tensor, scores_N: Tensor, indices_N: Tensor, batch_size: int, plan: BudgetPlan | None, name: str
) -> Selection:
    picked = take_in_order(order, scores_N, batch_size, plan, name)
    return Selection(indices_N[picked.indices].clone(), picked.scores, name)


# ---------------------------------------------------------------------------- works


def _score(score_fn: Callable[..., Tensor], log_probs_n_K_C: Tensor, device: Device) -> Tensor:
    return score_fn(log_probs_n_K_C, device=device, chunk_size=None).detach().to("cpu", torch.float64)


@dataclass(frozen=True)
class AllScores:
    """Keep every item's score (``O(N)``): for cost budgets and softrank."""

    score_fn: Callable[..., Tensor]
    device: str | None = None
    needs_predictions: bool = True
    keep: int | None = None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        return {"index": indices_n, "score": _score(self.score_fn, log_probs_n_K_C, self.device)}

    def reduce(self, rows: Rows) -> Rows:
        return rows


@dataclass(frozen=True)
class TopCandidates:
    """Keep each chunk's top ``keep`` items by a per-item key (exact distributed top-k).

    ``mode`` ``"topk"`` ranks by the score; ``"power"`` / ``"softmax"`` by
    ``log w(score) + G(seed, index)`` (the weights of an item need only its own score).
    """

    score_fn: Callable[..., Tensor]
    mode: str
    keep: int
    seed: int
    beta: float = 1.0
    device: str | None = None
    needs_predictions: bool = True

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        scores_n = _score(self.score_fn, log_probs_n_K_C, self.device)
        primary_n, secondary_n = _order_keys(scores_n, indices_n, self.mode, self.beta, self.seed)
        rows = {"index": indices_n, "score": scores_n, "primary": primary_n}
        if secondary_n is not None:
            rows["secondary"] = secondary_n
        return self.reduce(rows)

    def reduce(self, rows: Rows) -> Rows:
        top = lexicographic_top(rows["primary"], rows.get("secondary"), rows["index"], self.keep)
        return {key: value[top] for key, value in rows.items()}


@dataclass(frozen=True)
class BaldPrefilter:
    """Keep the ``keep`` items of highest BALD (per unit cost if ``cost_aware``) with their predictions.

    Items that cost more than the whole ``cost_budget`` can never be picked: priority ``-inf``.
    """

    keep: int
    cost_budget: float | None = None
    cost_aware: bool = False
    device: str | None = None
    needs_predictions: bool = True

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        priority_n = _score(bald, log_probs_n_K_C, self.device)
        if costs_n is not None and self.cost_budget is not None:
            plan = BudgetPlan(costs_n.to(torch.float64), float(self.cost_budget))
            priority_n = cost_priority(priority_n, plan, self.cost_aware)
            priority_n = torch.where(plan.fits_N(0.0), priority_n, torch.full_like(priority_n, -math.inf))
        rows = {"index": indices_n, "priority": priority_n, "log_probs": log_probs_n_K_C.float()}
        return self.reduce(rows)

    def reduce(self, rows: Rows) -> Rows:
        top = lexicographic_top(rows["priority"], None, rows["index"], self.keep)
        return {key: value[top] for key, value in rows.items()}


@dataclass(frozen=True)
class GradientFactors:
    """Keep every item's BADGE gradient factor ``a = p̄ - e_ŷ`` (``[N, C]`` float64, not ``[N, K, C]``)."""

    device: str | None = None
    needs_predictions: bool = True
    keep: int | None = None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        return {"index": indices_n, "factors": loss_gradient_factors(log_probs_n_K_C, device=self.device)}

    def reduce(self, rows: Rows) -> Rows:
        return rows


@dataclass(frozen=True)
class AllLogProbs:
    """Keep every item's predictions ``[N, K, C]`` (in memory): strategies without a per-item score."""

    needs_predictions: bool = True
    keep: int | None = None

    def map(self, indices_n: Tensor, costs_n: Tensor | None, log_probs_n_K_C: Tensor | None) -> Rows:
        assert log_probs_n_K_C is not None
        return {"index": indices_n, "log_probs": log_probs_n_K_C}

    def reduce(self, rows: Rows) -> Rows:
        return rows


# ------------------------------------------------------------------------ executors


class PoolExecutor(Protocol):
    """Runs a :class:`ChunkWork` over every candidate and returns the reduced rows.

    ``indices_N`` are the candidates' original indices (sorted, distinct) and
    ``costs_N`` their costs (same order) or ``None``. The model already holds its
    masks. Implementations: :class:`LocalExecutor` (this process) and
    :class:`activebayes.distributed.RayExecutor` (a Ray cluster).
    """

    def run(
        self,
        model: nn.Module,
        inputs: Any,
        indices_N: Tensor,
        costs_N: Tensor | None,
        work: ChunkWork,
        *,
        spec: PredictSpec,
        chunk_size: int,
        progress: bool,
        description: str,
    ) -> Rows: ...


@dataclass(frozen=True)
class LocalExecutor:
    """Chunk after chunk in this process; memory: one chunk plus the kept rows."""

    def run(
        self,
        model: nn.Module,
        inputs: Any,
        indices_N: Tensor,
        costs_N: Tensor | None,
        work: ChunkWork,
        *,
        spec: PredictSpec,
        chunk_size: int,
        progress: bool,
        description: str,
    ) -> Rows:
        N = int(indices_N.shape[0])
        accumulator = RowsAccumulator(work)
        with tqdm(total=N, desc=description, unit="item", disable=not progress, leave=False) as bar:
            for start in range(0, N, chunk_size):
                end = min(N, start + chunk_size)
                costs_n = None if costs_N is None else costs_N[start:end]
                accumulator.add(run_chunk(model, inputs, indices_N[start:end], costs_n, work, spec))
                bar.update(end - start)
        return accumulator.result()


# ------------------------------------------------------------------------ score_pool

_PER_ITEM_OPTIONS = {"topk": {"cost_aware"}, "stochastic": {"cost_aware", "beta"}}
_BATCHBALD_OPTIONS = {"prefilter", "num_samples", "max_exact_configs", "cost_aware", "dtype", "chunk_size", "progress"}


def _check_candidates(
    candidates_N: object, costs_N: object, n_items: int
) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Candidates sorted by original index (distinct, in range), their costs in that order, and the
    sorting order (``None`` when ``candidates_N`` was sorted already: no copy of a big pool's indices)."""
    indices = as_index_tensor(candidates_N, "candidates_N")
    if indices.numel() == 0:
        raise InvalidArgumentError("candidates_N is empty: there is nothing to score")
    order: Tensor | None = None
    if indices.numel() > 1 and not bool((indices[1:] > indices[:-1]).all()):
        order = torch.argsort(indices, stable=True)
        indices = indices[order]
    if int(indices[0]) < 0 or int(indices[-1]) >= n_items:
        bad = int(indices[0]) if int(indices[0]) < 0 else int(indices[-1])
        raise IndexError(f"candidates_N must lie in 0 .. {n_items - 1} (the dataset's items), got {bad}")
    if indices.numel() > 1 and bool((indices[1:] == indices[:-1]).any()):
        duplicate = int(indices[1:][indices[1:] == indices[:-1]][0])
        raise InvalidArgumentError(f"candidates_N must be distinct, got index {duplicate} more than once")
    costs = None
    if costs_N is not None:
        costs = torch.as_tensor(costs_N)
        if costs.shape != (len(indices),):
            raise InvalidArgumentError(
                f"costs_N must have shape [N] = ({len(indices)},) (one cost per candidate, in the order of "
                f"candidates_N), got {tuple(costs.shape)}"
            )
        costs = costs.to(torch.float64)
        if order is not None:
            costs = costs[order]
    return indices, costs, order


def _check_seed(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidTypeError(f"{name} must be an int, got {type(value).__name__}")
    return int(value)


def _hold_masks(model: nn.Module, mask_generator: torch.Generator | int | None, num_samples: int | None = None) -> None:
    """Fix the model's K functions once for the whole pass (as ``predict_log_probs`` would):
    MC dropout masks, or K drawn functions of a :class:`~activebayes.models.SampledFunctions`."""
    if isinstance(model, SampledFunctions):
        hold_functions(model, num_samples, mask_generator)
        return
    if isinstance(model, FunctionSampler):
        return
    layers = mc_dropout_layers(model)
    if layers and (mask_generator is not None or any(layer.mask_seed is None for layer in layers)):
        resample_masks(model, generator=mask_generator)


#: Strategy inputs with one row per candidate (reordered with the candidates).
_PER_CANDIDATE_INPUTS = ("features_N_D",)


def _check_strategy_inputs(
    entry: Strategy, strategy_inputs: Mapping[str, Tensor] | None, N: int, order_N: Tensor | None
) -> dict[str, Tensor]:
    """The extra inputs for :func:`select`, checked against what ``entry`` reads, per-candidate ones sorted."""
    given = dict(strategy_inputs or {})
    reads = entry.input_arguments()
    for argument in given:
        if argument not in INPUTS.values():
            raise InvalidTypeError(
                f"strategy_inputs has an unknown input {argument!r}; expected any of {sorted(INPUTS.values())}"
            )
        if argument not in reads:
            raise InvalidTypeError(
                f"strategy {entry.name!r} does not read {argument}; its extra inputs: {', '.join(reads) or 'none'}"
            )
    for key in entry.inputs:
        if key != "log_probs" and INPUTS[key] not in given:
            raise InvalidTypeError(f"strategy {entry.name!r} needs {INPUTS[key]} in strategy_inputs, got none")
    for argument in _PER_CANDIDATE_INPUTS:
        if argument in given:
            value = given[argument]
            if not isinstance(value, Tensor) or value.ndim < 1 or value.shape[0] != N:
                got = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise InvalidArgumentError(
                    f"strategy_inputs[{argument!r}] must have one row per candidate ({N}, in the order "
                    f"of candidates_N), got {got}"
                )
            given[argument] = value if order_N is None else value[order_N]
    return given


def _check_options(options: Mapping[str, Any], allowed: set[str], name: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise InvalidTypeError(
            f"strategy {name!r} got unknown option(s) {unknown} when scoring a pool in chunks; "
            f"expected any of {sorted(allowed)}"
        )


def score_pool(
    model: nn.Module,
    dataset: object,
    candidates_N: object,
    strategy: str,
    batch_size: int,
    *,
    num_samples: int | None,
    mask_generator: torch.Generator | int | None,
    selection_seed: int,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    predict_batch_size: int = 512,
    sampling: str = "batched",
    device: Device = None,
    costs_N: Tensor | None = None,
    cost_budget: float | None = None,
    options: Mapping[str, Any] | None = None,
    strategy_inputs: Mapping[str, Tensor] | None = None,
    executor: PoolExecutor | None = None,
    progress: bool = False,
) -> Selection:
    r"""Pick ``batch_size`` of the ``candidates_N`` items with ``strategy``, streaming the pool.

    Reads, predicts and scores ``chunk_size`` items at a time and keeps per-item scores
    only (see the module docstring for why the picks do not depend on the chunking or
    on ``executor``). Per strategy:

    - per-item scores, top-k (``bald``, ``entropy``, ...): exact top-k, ties to the lower
      original index; equal to ``select(predict_log_probs(model, inputs[sorted
      candidates]), strategy, batch_size)``;
    - stochastic (``power_bald``, ``softmax_entropy``, ...): Gumbel-top-k with noise
      keyed by ``(selection_seed, original index)``; option ``beta``;
    - ``random``: top-k of ``keyed_uniform(selection_seed, index)``; nothing is predicted;
    - ``batchbald``: greedy BatchBALD on the ``prefilter`` (default
      :data:`DEFAULT_PREFILTER`) items of highest BALD, seeded with
      ``torch.Generator().manual_seed(selection_seed)``; plain BatchBALD when
      ``prefilter >= N``; other options go to :func:`~activebayes.acquisition.batchbald`;
    - ``badge``: each chunk keeps its items' gradient factors ``p̄ - e_ŷ`` (``[n, C]``, not
      ``[n, K, C]``), then k-means++ seeding over them and ``features_N_D``
      (:func:`~activebayes.acquisition.badge.badge_from_factors`), seeded with
      ``torch.Generator().manual_seed(selection_seed)``;
    - any other registered strategy (EPIG, typicality, your own without a
      per-item score): the whole ``[N, K, C]`` (if it reads predictions) is gathered in
      memory and passed to :func:`~activebayes.acquisition.select` with
      ``strategy_inputs``, seeded with ``torch.Generator().manual_seed(selection_seed)``.

    Args:
        model: an ``nn.Module`` with consistent MC dropout, or an ensemble.
        dataset: a dataset whose ``inputs`` support ``len()`` and ``inputs[index
            tensor] -> float tensor [n, ...]`` (in memory or memory-mapped), or an
            input tensor ``[N_all, ...]``.
        candidates_N: original indices (into ``dataset``) to choose from; distinct,
            any order (the result does not depend on it).
        strategy: a registered strategy name (:func:`~activebayes.acquisition.available_strategies`).
        batch_size: at most this many picks, ``1 <= batch_size <= N``.
        num_samples: K (``None`` for an ensemble: its size).
        mask_generator: fixes the K functions once for the whole pool:
            ``resample_masks(model, generator=mask_generator)`` (an int is the mask seed
            itself); ``None`` keeps the masks the model holds.
        selection_seed: seeds the keyed noise (stochastic, random) and BatchBALD's
            sampled configurations.
        chunk_size: items read, predicted and scored at a time.
        predict_batch_size: items per forward pass inside a chunk.
        sampling: ``"batched"`` or ``"sequential"`` (see ``predict_log_probs``).
        device: predict and score there (e.g. ``"cuda"``); results on the CPU.
        costs_N: per-candidate labelling cost (in the order of ``candidates_N``);
            option ``cost_aware=True`` ranks by score per unit cost.
        cost_budget: the total labelling cost allowed (with ``costs_N``).
        options: strategy options (``beta``, ``cost_aware``, ``prefilter``, BatchBALD's
            ``num_samples`` / ``max_exact_configs`` ...).
        strategy_inputs: the extra inputs a strategy reads, by their :func:`select`
            names: ``features_N_D`` (one row per candidate, in the order of
            ``candidates_N``), ``labelled_features_L_D``, ``target_log_probs_M_K_C``.
        executor: where the chunks run: :class:`LocalExecutor` (default) or
            :class:`activebayes.distributed.RayExecutor`.
        progress: a tqdm bar per pass over the pool.

    Returns:
        :class:`~activebayes.acquisition.Selection` whose ``indices`` are **original
        dataset indices** in pick order and ``scores`` the scores at pick time (for
        BatchBALD the joint mutual information of the batch so far).
    """
    if not isinstance(model, nn.Module):
        raise InvalidTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    entry = get_strategy(strategy)
    inputs = pool_inputs(dataset)
    indices_N, costs, order_N = _check_candidates(candidates_N, costs_N, len(inputs))
    N = int(indices_N.shape[0])
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the number of candidates N={N}, got {batch_size}")
    if num_samples is not None:
        num_samples = check_positive_int(num_samples, "num_samples")
    if mask_generator is not None and not isinstance(mask_generator, torch.Generator):
        _check_seed(mask_generator, "mask_generator")
    selection_seed = _check_seed(selection_seed, "selection_seed")
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    predict_batch_size = check_positive_int(predict_batch_size, "predict_batch_size")
    check_choice(sampling, "sampling", SAMPLING_MODES)
    plan = check_budget(costs, cost_budget, N)
    options = dict(options or {})
    extra_inputs = _check_strategy_inputs(entry, strategy_inputs, N, order_N)
    executor = LocalExecutor() if executor is None else executor
    name = entry.name
    device_name = None if device is None else str(torch.device(device))

    if name == "random":
        _check_options(options, {"cost_aware"}, name)
        scores_N = keyed_uniform(selection_seed, indices_N)
        priority_N = cost_priority(scores_N, plan, bool(options.get("cost_aware", False)))
        order = lexicographic_top(priority_N, None, indices_N, batch_size if plan is None else None)
        return _finish_selection(order, scores_N, indices_N, batch_size, plan, name)
    if not entry.needs_predictions:
        picked = select(N, name, batch_size, generator=torch.Generator().manual_seed(selection_seed),
                        costs_N=costs, cost_budget=cost_budget, device=device, **extra_inputs, **options)
        return Selection(indices_N[picked.indices].clone(), picked.scores, name)

    _hold_masks(model, mask_generator, num_samples)
    spec = PredictSpec(num_samples, predict_batch_size, sampling, device_name)

    def run(work: ChunkWork, what: str) -> Rows:
        return executor.run(model, inputs, indices_N, costs, work, spec=spec, chunk_size=chunk_size,
                            progress=progress, description=f"{what} ({N:,} items)")

    if entry.score_fn is not None and entry.mode is not None:
        mode = entry.mode
        _check_options(options, _PER_ITEM_OPTIONS["topk" if mode == "topk" else "stochastic"], name)
        cost_aware = bool(options.get("cost_aware", False))
        if cost_aware and plan is None:
            raise InvalidArgumentError("cost_aware=True needs costs_N and cost_budget")
        beta = check_nonnegative_float(options.get("beta", 1.0), "beta")
        if plan is None and mode != "softrank":
            rows = run(TopCandidates(entry.score_fn, mode, batch_size, selection_seed, beta, device_name), name)
            order = lexicographic_top(rows["primary"], rows.get("secondary"), rows["index"], batch_size)
            return _finish_selection(order, rows["score"], rows["index"], batch_size, None, name)
        rows = run(AllScores(entry.score_fn, device_name), name)
        scores_N = _aligned(rows, "score", indices_N)
        priority_N = cost_priority(scores_N, plan, cost_aware)
        primary_N, secondary_N = _order_keys(priority_N, indices_N, mode, beta, selection_seed)
        order = lexicographic_top(primary_N, secondary_N, indices_N, batch_size if plan is None else None)
        return _finish_selection(order, scores_N, indices_N, batch_size, plan, name)

    if name == "batchbald":
        _check_options(options, _BATCHBALD_OPTIONS, name)
        prefilter = check_positive_int(options.pop("prefilter", DEFAULT_PREFILTER), "prefilter")
        if prefilter < batch_size:
            raise InvalidArgumentError(f"prefilter must be >= batch_size={batch_size} (candidates for the batch), got {prefilter}")
        cost_aware = bool(options.get("cost_aware", False))
        if cost_aware and plan is None:
            raise InvalidArgumentError("cost_aware=True needs costs_N and cost_budget")
        keep = min(prefilter, N)
        work = BaldPrefilter(keep, None if plan is None else plan.cost_budget, cost_aware, device_name)
        rows = run(work, f"BALD pre-filter to {keep:,}")
        order = torch.argsort(rows["index"])
        kept_M = rows["index"][order]
        log_probs_M_K_C = rows["log_probs"][order]
        plan_M = None
        if plan is not None:
            plan_M = BudgetPlan(plan.costs_N[torch.searchsorted(indices_N, kept_M)], plan.cost_budget)
        options.setdefault("progress", progress)
        picked = batchbald(log_probs_M_K_C, min(batch_size, keep), generator=torch.Generator().manual_seed(selection_seed),
                           plan=plan_M, device=device, **options)
        return Selection(kept_M[picked.indices].clone(), picked.scores, name)

    if name == "badge":
        # BADGE needs C numbers per item (a = p̄ - e_ŷ), not the K samples: stream them
        _check_options(options, set(), name)
        rows = run(GradientFactors(device_name), "BADGE gradient factors")
        picked = badge_from_factors(_aligned(rows, "factors", indices_N), extra_inputs["features_N_D"], batch_size,
                                    generator=torch.Generator().manual_seed(selection_seed), plan=plan, device=device)
        return Selection(indices_N[picked.indices].clone(), picked.scores, name)

    rows = run(AllLogProbs(), f"predict for {name}")
    log_probs_N_K_C = _aligned(rows, "log_probs", indices_N)
    picked = select(log_probs_N_K_C, name, batch_size, generator=torch.Generator().manual_seed(selection_seed),
                    costs_N=costs, cost_budget=cost_budget, device=device, **extra_inputs, **options)
    return Selection(indices_N[picked.indices].clone(), picked.scores, name)


def _aligned(rows: Rows, column: str, indices_N: Tensor) -> Tensor:
    """``rows[column]`` in the order of ``indices_N`` (every candidate exactly once)."""
    order = torch.argsort(rows["index"])
    if not torch.equal(rows["index"][order], indices_N):
        raise RuntimeError(f"the executor returned {len(rows['index'])} rows for {len(indices_N)} candidates")
    return rows[column][order]
