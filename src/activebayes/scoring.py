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
- Everything else registered (strategies without a per-item score or a plan of their
  own) gathers the whole ``[N, K, C]`` in memory and calls the strategy's function.

Which of these a strategy uses is the strategy's own knowledge: its registry entry builds
a plan (:meth:`~activebayes.acquisition.Strategy.plan_pool`, see
:mod:`activebayes.acquisition.streaming`), and :func:`score_pool` is only
check -> plan -> executor -> finish.

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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from activebayes._validation import Device, check_choice, check_positive_int, check_torch_device
from activebayes.acquisition import get_strategy
from activebayes.acquisition.selection import Selection
from activebayes.acquisition.strategies import DEFAULT_PREFILTER, check_call
from activebayes.acquisition.streaming import (
    AllLogProbs,
    AllScores,
    BaldPrefilter,
    ChunkWork,
    GradientFactors,
    PoolRequest,
    Rows,
    TopCandidates,
    lexicographic_top,
)
from activebayes.data.dataset import as_index_tensor
from activebayes.errors import InvalidArgumentError, InvalidIndexError, InvalidTypeError
from activebayes.models import FunctionSampler, SAMPLING_MODES, mc_dropout_layers, predict_log_probs, resample_masks
from activebayes.models.posterior import Posterior, SampledFunctions, is_posterior, not_a_model_error
from activebayes.models.predict import NaNOutputsError, hold_functions

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
        try:
            log_probs_n_K_C = predict_log_probs(
                model, x_n, spec.num_samples, batch_size=spec.batch_size, generator=None,
                device=spec.device, sampling=spec.sampling,
            )
        except NaNOutputsError as error:  # name the pool's items, not positions in the chunk
            raise error.for_items(indices_n) from None
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
        with tqdm(total=N, desc=description, unit="item", disable=not progress, leave=False, delay=1.0) as bar:
            for start in range(0, N, chunk_size):
                end = min(N, start + chunk_size)
                costs_n = None if costs_N is None else costs_N[start:end]
                accumulator.add(run_chunk(model, inputs, indices_N[start:end], costs_n, work, spec))
                bar.update(end - start)
        return accumulator.result()


# ------------------------------------------------------------------------ score_pool


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
        raise InvalidIndexError(f"candidates_N must lie in 0 .. {n_items - 1} (the dataset's items), got {bad}")
    if indices.numel() > 1 and bool((indices[1:] == indices[:-1]).any()):
        duplicate = int(indices[1:][indices[1:] == indices[:-1]][0])
        raise InvalidArgumentError(f"candidates_N must be distinct, got index {duplicate} more than once")
    costs = None
    if costs_N is not None:
        try:
            costs = torch.as_tensor(costs_N)
        except (TypeError, ValueError, RuntimeError):
            raise InvalidTypeError(f"costs_N must be a tensor of numbers [N] (one cost per candidate), got "
                                   f"{type(costs_N).__name__}") from None
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


def score_pool(
    model: nn.Module | Posterior,
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
    sampling: str | None = None,
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
        model: an ``nn.Module`` with consistent MC dropout, or an ensemble; or a
            :class:`~activebayes.models.Posterior` (a network posterior, an adapter's:
            scikit-learn, Lightning, Hugging Face), whose :attr:`~activebayes.models.Posterior.module`
            is what runs: ``score_pool(posterior, ...)`` is ``score_pool(posterior.module,
            ...)`` with the posterior's ``sampling`` (if it has one, as the loop passes it).
            ``num_samples`` is passed as given: ``None`` for a posterior with a fixed
            ``num_functions`` (an ensemble, a scikit-learn posterior), as the loop does.
        dataset: a dataset whose ``inputs`` support ``len()`` and ``inputs[index
            tensor] -> float tensor [n, ...]`` (in memory or memory-mapped), or an
            input tensor ``[N_all, ...]``.
        candidates_N: original indices (into ``dataset``) to choose from; distinct,
            any order (the result does not depend on it).
        strategy: a registered strategy name (:func:`~activebayes.acquisition.available_strategies`).
        batch_size: at most this many picks, ``1 <= batch_size <= N``.
        num_samples: K function samples per prediction (``None`` for an ensemble: its size).
        mask_generator: fixes the K functions once for the whole pool:
            ``resample_masks(model, generator=mask_generator)`` (an int is the mask seed
            itself); ``None`` keeps the masks the model holds.
        selection_seed: an int seeding every random choice of the selection. It is **not**
            the stream of :func:`~activebayes.acquisition.select`'s ``generator=selection_seed``
            (that is ``torch.Generator().manual_seed(mix_seed(selection_seed))``, drawn in
            pool order), so the two pick different batches for a strategy that draws:

            - ``random`` and the stochastic strategies (``power_bald``, ``softmax_entropy``,
              ...) use noise keyed by ``(selection_seed, original index)``
              (:func:`activebayes._seeding.keyed_uniform`; Gumbel noise ``-log(-log u)``), the
              same whatever the chunking; no generator passed to ``select`` reproduces it.
              The ``random`` batch is the top ``batch_size`` of
              ``keyed_uniform(selection_seed, candidates)`` (ties to the lower index).
            - Every other strategy that draws (BatchBALD, BADGE, EPIG, typicality, one of
              your own without a plan) draws from
              ``torch.Generator().manual_seed(selection_seed)``: ``select(predictions of the
              sorted candidates, strategy, batch_size,
              generator=torch.Generator().manual_seed(selection_seed), ...)`` picks the same
              items (as positions in the sorted candidates; for BatchBALD when
              ``prefilter >= N``), while ``select(..., generator=selection_seed)`` does not.

            The loop's recorded runs are replayed from these streams, so they stay as they are.
        chunk_size: items read, predicted and scored at a time.
        predict_batch_size: items per forward pass inside a chunk.
        sampling: ``"batched"`` or ``"sequential"`` (see ``predict_log_probs``); ``None``
            (the default): the posterior's own ``sampling`` when ``model`` is a posterior that
            has one (``as_posterior(net, sampling="sequential")``), else ``"batched"``.
        device: predict and score there (e.g. ``"cuda"``); results on the CPU.
        costs_N: per-candidate labelling cost (in the order of ``candidates_N``);
            option ``cost_aware=True`` ranks by score per unit cost.
        cost_budget: the total labelling cost allowed (with ``costs_N``).
        options: strategy options (``beta``, ``cost_aware``, ``prefilter``, BatchBALD's
            ``num_configurations`` / ``max_exact_configs`` ...), checked as by
            :func:`~activebayes.acquisition.select` (one check: :func:`~activebayes.acquisition.strategies.check_call`).
        strategy_inputs: the extra inputs a strategy reads, by their :func:`select`
            names: ``features_N_D`` (one row per candidate, in the order of
            ``candidates_N``), ``labelled_features_L_D``, ``target_log_probs_M_K_C``.
        executor: where the chunks run: :class:`LocalExecutor` (default) or
            :class:`activebayes.distributed.RayExecutor`.
        progress: a tqdm bar per pass over the pool (shown once the pass has run for a second).

    Returns:
        :class:`~activebayes.acquisition.Selection` whose ``indices`` are **original
        dataset indices** in pick order and ``scores`` the scores at pick time (for
        BatchBALD the joint mutual information of the batch so far).
    """
    model, sampling = _pool_module(model, sampling)
    entry = get_strategy(strategy)
    inputs = pool_inputs(dataset)
    indices_N, costs, order_N = _check_candidates(candidates_N, costs_N, len(inputs))
    spec = _check_predict_spec(num_samples, mask_generator, predict_batch_size, sampling, device)
    call = check_call(entry, int(indices_N.shape[0]), batch_size, costs_N=costs, cost_budget=cost_budget,
                      inputs=strategy_inputs, options=options, streamed=True, order_N=order_N)
    if spec.num_samples is not None:  # None: an ensemble's members, its size
        entry.check_num_samples(spec.num_samples, "num_samples")
    request = PoolRequest(entry.name, indices_N, call.batch_size, call.budget, call.options, call.inputs,
                          _check_seed(selection_seed, "selection_seed"), device, progress)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    plan = entry.plan_pool(request)
    rows = None
    if plan.work is not None:
        if plan.work.needs_predictions:
            _hold_masks(model, mask_generator, spec.num_samples)
        executor = LocalExecutor() if executor is None else executor
        rows = executor.run(model, inputs, indices_N, costs, plan.work, spec=spec, chunk_size=chunk_size,
                            progress=progress, description=f"{plan.description} ({request.N:,} items)")
    return plan.finish(rows)


def _pool_module(model: object, sampling: str | None) -> tuple[nn.Module, str]:
    """The module :func:`score_pool` runs (``model`` or a posterior's ``.module``) and its sampling mode."""
    if isinstance(model, nn.Module):
        return model, "batched" if sampling is None else sampling
    if is_posterior(model):
        from activebayes.models.multilabel import MultiLabelPosterior

        if isinstance(model, MultiLabelPosterior):  # its module's softmax is not its per-label probabilities
            raise InvalidTypeError(
                "model is a MultiLabelPosterior: score_pool streams a softmax over classes (one class per item), "
                "not per-label probabilities; score a multi-label pool in memory: select(model.log_probs(inputs, "
                "num_samples=K), strategy, batch_size)")
        module = model.module
        if not isinstance(module, nn.Module):
            raise InvalidTypeError(
                f"model is a posterior ({type(model).__name__}) whose .module is a {type(module).__name__}, not a "
                "torch.nn.Module: score_pool runs the module chunk by chunk; give the posterior an nn.Module (a "
                "FunctionSampler for K functions of its own), or pass one as model"
            )
        return module, getattr(model, "sampling", "batched") if sampling is None else sampling
    raise not_a_model_error(model)


def _check_predict_spec(
    num_samples: int | None, mask_generator: object, predict_batch_size: int, sampling: str, device: Device
) -> PredictSpec:
    """How chunks are predicted, checked (``mask_generator`` only for its type)."""
    if num_samples is not None:
        num_samples = check_positive_int(num_samples, "num_samples")
    if mask_generator is not None and not isinstance(mask_generator, torch.Generator):
        _check_seed(mask_generator, "mask_generator")
    predict_batch_size = check_positive_int(predict_batch_size, "predict_batch_size")
    check_choice(sampling, "sampling", SAMPLING_MODES)
    if device is not None:  # the name only: on a Ray cluster the workers' devices count, not this machine's
        try:
            device = str(torch.device(device))
        except (RuntimeError, TypeError):
            check_torch_device(device)  # raises, naming the devices this machine has
    return PredictSpec(num_samples, predict_batch_size, sampling, device)
