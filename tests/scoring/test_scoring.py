"""score_pool: streamed pool scoring equals in-memory selection and does not depend on chunking.

References: ``select(predict_log_probs(model, all candidates), ...)`` (the in-memory path),
NumPy lexicographic sorts for the tie rule, a pure-Python splitmix64, and the sampling
distribution of Gumbel-top-k (chi-square against ``p ∝ w``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from activebayes._seeding import keyed_uniform, splitmix64
from activebayes.acquisition import available_strategies, batchbald, bald, get_strategy, select
from activebayes.acquisition import register_strategy, topk_strategy, unregister_strategy
from activebayes.acquisition.selection import Selection
from activebayes.models import MLP, Ensemble, predict_log_probs, resample_masks
from activebayes.acquisition.streaming import order_keys
from activebayes.errors import InvalidArgumentError, InvalidIndexError
from activebayes.scoring import (
    BaldPrefilter,
    LocalExecutor,
    RowsAccumulator,
    TopCandidates,
    lexicographic_top,
    score_pool,
)

N_ALL, FEATURES, C, K = 600, 6, 4, 8
MASK_SEED, SELECTION_SEED = 11, 5

# per-label probabilities are scored in memory (a multi-label posterior is refused here, a softmax by
# the multi-label scores themselves: tests/acquisition/test_multilabel_acquisition.py)
PER_ITEM = sorted(name for name in available_strategies()
                  if get_strategy(name).mode is not None and not name.startswith("multilabel_"))
TOPK = [name for name in PER_ITEM if get_strategy(name).mode == "topk"]
STOCHASTIC = [name for name in PER_ITEM if get_strategy(name).mode != "topk"]


@pytest.fixture(scope="module")
def net() -> MLP:
    torch.manual_seed(0)
    return MLP(in_features=FEATURES, num_classes=C, hidden=(16,), p=0.5)


@pytest.fixture(scope="module")
def pool() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randn(N_ALL, FEATURES, generator=g) * torch.rand(N_ALL, 1, generator=g) * 4


@pytest.fixture(scope="module")
def candidates() -> torch.Tensor:
    return torch.randperm(N_ALL, generator=torch.Generator().manual_seed(2))[:450]


class RecordingInputs:
    """Pool inputs that remember how many items every read asked for."""

    def __init__(self, inputs: torch.Tensor) -> None:
        self.inputs = inputs
        self.reads: list[int] = []

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: torch.Tensor) -> torch.Tensor:
        self.reads.append(len(index))
        return self.inputs[index]


class Dataset:
    def __init__(self, inputs) -> None:
        self.inputs = inputs


def full_log_probs(net, pool, indices) -> torch.Tensor:
    resample_masks(net, generator=MASK_SEED)
    return predict_log_probs(net, pool[indices], K)


def score(net, pool, candidates, strategy, batch_size, **kwargs) -> Selection:
    kwargs.setdefault("chunk_size", 64)
    return score_pool(net, pool, candidates, strategy, batch_size, num_samples=K, mask_generator=MASK_SEED,
                      selection_seed=SELECTION_SEED, **kwargs)


def assert_same(a: Selection, b: Selection) -> None:
    assert a.indices.tolist() == b.indices.tolist()
    torch.testing.assert_close(a.scores, b.scores, rtol=1e-5, atol=1e-6)  # float32 predictions
    assert a.strategy == b.strategy


def lexsort_top(scores: np.ndarray, indices: np.ndarray, k: int) -> np.ndarray:
    """Reference tie rule: score descending, then original index ascending."""
    return indices[np.lexsort((indices, -scores))][:k]


# ------------------------------------------------------------------ deterministic top-k


@pytest.mark.parametrize("strategy", TOPK)
def test_topk_equals_in_memory_select(net, pool, candidates, strategy):
    sorted_candidates = candidates.sort().values
    log_probs = full_log_probs(net, pool, sorted_candidates)
    scores_N = get_strategy(strategy).score_fn(log_probs).numpy()
    reference = select(log_probs, strategy, 9)
    got = score(net, pool, candidates, strategy, 9)
    # the picked scores are the 9 largest (whatever the tie rule) ...
    torch.testing.assert_close(got.scores, reference.scores, rtol=1e-6, atol=1e-9)
    # ... and ties go to the lower original index
    assert got.indices.tolist() == lexsort_top(scores_N, sorted_candidates.numpy(), 9).tolist()
    # select breaks ties the same way: exactly its picks, ties or not
    assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()


@pytest.mark.parametrize("strategy", PER_ITEM + ["batchbald", "random"])
def test_invariant_to_chunk_size_and_candidate_order(net, pool, candidates, strategy):
    first = score(net, pool, candidates, strategy, 6, chunk_size=len(candidates))
    shuffled = candidates[torch.randperm(len(candidates), generator=torch.Generator().manual_seed(9))]
    for chunk_size, cands in [(37, shuffled), (64, candidates.flip(0)), (50, candidates.sort().values)]:
        assert_same(score(net, pool, cands, strategy, 6, chunk_size=chunk_size), first)
    # tiny chunks (forwards of one or two items) on a smaller pool
    small = candidates[:40]
    assert_same(score(net, pool, small, strategy, 6, chunk_size=3), score(net, pool, small, strategy, 6, chunk_size=40))


def test_reads_at_most_chunk_size_items(net, pool, candidates):
    inputs = RecordingInputs(pool)
    score(net, Dataset(inputs), candidates, "bald", 5, chunk_size=50)
    assert max(inputs.reads) <= 50 and sum(inputs.reads) == len(candidates) + 0  # one read per item
    inputs.reads.clear()
    score(net, Dataset(inputs), candidates, "random", 5)
    assert inputs.reads == []  # random predicts nothing


def test_kept_rows_stay_bounded():
    """Top-k and pre-filter passes hold O(keep) rows however many chunks arrive."""
    for work in (TopCandidates(bald, "topk", keep=5, seed=0), BaldPrefilter(keep=5)):
        accumulator = RowsAccumulator(work)
        most = 0
        g = torch.Generator().manual_seed(0)
        for start in range(0, 2000, 40):
            log_probs = torch.log_softmax(torch.randn(40, 3, 4, generator=g), -1)
            accumulator.add(work.map(torch.arange(start, start + 40), None, log_probs))
            most = max(most, accumulator.pending)
        assert most <= 3 * 5
        rows = accumulator.result()
        assert len(rows["index"]) == 5


def test_memmap_dataset_gives_the_same_picks(net, pool, candidates, tmp_path):
    path = tmp_path / "pool.npy"
    np.save(path, pool.numpy())

    class MemmapInputs:
        def __init__(self, file) -> None:
            self.array = np.load(file, mmap_mode="r")

        def __len__(self) -> int:
            return len(self.array)

        def __getitem__(self, index: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(np.asarray(self.array[index.numpy()]))

    for strategy in ("bald", "power_entropy", "batchbald"):
        assert_same(score(net, Dataset(MemmapInputs(path)), candidates, strategy, 4),
                    score(net, pool, candidates, strategy, 4))


def test_ensemble(pool, candidates):
    torch.manual_seed(3)
    ensemble = Ensemble([MLP(in_features=FEATURES, num_classes=C, hidden=(8,), p=0.0) for _ in range(3)])
    sorted_candidates = candidates.sort().values
    reference = select(predict_log_probs(ensemble, pool[sorted_candidates]), "bald", 4)
    got = score_pool(ensemble, pool, candidates, "bald", 4, num_samples=None, mask_generator=None,
                     selection_seed=0, chunk_size=100)
    assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()


# ------------------------------------------------------------------------ cost budgets


@pytest.mark.parametrize("cost_aware", [False, True])
@pytest.mark.parametrize("strategy", ["bald", "entropy", "margin"])
def test_cost_budget_topk_equals_select(net, pool, candidates, strategy, cost_aware):
    if strategy == "margin" and cost_aware:
        pytest.skip("margin scores are negative: no score per unit cost")
    costs = torch.rand(len(candidates), generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 3 + 0.1
    order = torch.argsort(candidates)
    sorted_candidates = candidates[order]
    log_probs = full_log_probs(net, pool, sorted_candidates)
    reference = select(log_probs, strategy, 8, costs_N=costs[order], cost_budget=4.0, cost_aware=cost_aware)
    got = score(net, pool, candidates, strategy, 8, costs_N=costs, cost_budget=4.0,
                options={"cost_aware": cost_aware})
    assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()
    torch.testing.assert_close(got.scores, reference.scores, rtol=1e-6, atol=1e-9)
    by_index = dict(zip(candidates.tolist(), costs.tolist(), strict=True))
    assert sum(by_index[i] for i in got.indices.tolist()) <= 4.0 + 1e-9


@pytest.mark.parametrize("strategy", ["bald", "power_bald", "softmax_entropy", "random"])
def test_slack_budget_equals_no_budget(net, pool, candidates, strategy):
    """The budget walk (all scores kept) and the chunk-wise top-k path pick the same items."""
    costs = torch.ones(len(candidates), dtype=torch.float64)
    unconstrained = score(net, pool, candidates, strategy, 7)
    with_budget = score(net, pool, candidates, strategy, 7, costs_N=costs, cost_budget=float(len(candidates)))
    assert_same(with_budget, unconstrained)


@pytest.mark.parametrize("strategy", STOCHASTIC)
def test_stochastic_budget_is_respected_and_partition_free(net, pool, candidates, strategy):
    costs = torch.rand(len(candidates), generator=torch.Generator().manual_seed(6), dtype=torch.float64) + 0.5
    first = score(net, pool, candidates, strategy, 10, costs_N=costs, cost_budget=3.0, chunk_size=450)
    perm = torch.randperm(len(candidates), generator=torch.Generator().manual_seed(1))
    again = score(net, pool, candidates[perm], strategy, 10, costs_N=costs[perm], cost_budget=3.0, chunk_size=33)
    assert_same(again, first)
    by_index = dict(zip(candidates.tolist(), costs.tolist(), strict=True))
    assert sum(by_index[i] for i in first.indices.tolist()) <= 3.0 + 1e-9


# ------------------------------------------------------------------------ stochastic


def test_stochastic_differs_across_seeds_and_depends_on_scores(net, pool, candidates):
    picks = {tuple(score_pool(net, pool, candidates, "power_bald", 5, num_samples=K, mask_generator=MASK_SEED,
                              selection_seed=seed).tolist()) for seed in range(5)}
    assert len(picks) > 1
    # beta -> infinity approaches top-k
    cold = score(net, pool, candidates, "softmax_bald", 3, options={"beta": 1e6})
    assert cold.indices.tolist() == score(net, pool, candidates, "bald", 3).indices.tolist()


@pytest.mark.parametrize("mode", ["power", "softmax", "softrank"])
def test_keyed_gumbel_top_k_samples_proportionally(mode):
    """First pick ~ w / sum(w), second pick ~ w / (sum(w) - w_first): successive sampling."""
    scores_N = torch.tensor([0.05, 0.2, 0.4, 0.8, 1.6], dtype=torch.float64)
    indices_N = torch.tensor([3, 10, 11, 40, 41])
    beta = 1.0
    if mode == "power":
        weights = scores_N.numpy() ** beta
    elif mode == "softmax":
        weights = np.exp(beta * scores_N.numpy())
    else:
        ranks = np.argsort(np.argsort(-scores_N.numpy())) + 1
        weights = ranks.astype(float) ** -beta
    trials = 3000
    first = np.zeros(5)
    second_after_top = np.zeros(5)
    n_top_first = 0
    for seed in range(trials):
        primary, secondary = order_keys(scores_N, indices_N, mode, beta, seed)
        order = lexicographic_top(primary, secondary, indices_N, 2).tolist()
        first[order[0]] += 1
        if order[0] == 4:
            n_top_first += 1
            second_after_top[order[1]] += 1
    expected_first = trials * weights / weights.sum()
    assert stats.chisquare(first, expected_first).pvalue > 1e-3
    rest = weights.copy()
    rest[4] = 0
    expected_second = n_top_first * rest / rest.sum()
    assert stats.chisquare(second_after_top[:4], expected_second[:4]).pvalue > 1e-3


def test_power_zero_scores_come_last():
    scores_N = torch.tensor([0.0, 0.3, 0.0, 0.1], dtype=torch.float64)
    indices_N = torch.arange(4)
    for seed in range(20):
        primary, secondary = order_keys(scores_N, indices_N, "power", 1.0, seed)
        assert set(lexicographic_top(primary, secondary, indices_N, 2).tolist()) == {1, 3}


# ------------------------------------------------------------------------ BatchBALD


@pytest.mark.parametrize("bb_options", [{}, {"num_configurations": 200, "max_exact_configs": 16}])
def test_batchbald_prefilter_at_least_n_equals_full_batchbald(net, pool, candidates, bb_options):
    sorted_candidates = candidates.sort().values
    log_probs = full_log_probs(net, pool, sorted_candidates)
    reference = batchbald(log_probs, 5, generator=torch.Generator().manual_seed(SELECTION_SEED), **bb_options)
    got = score(net, pool, candidates, "batchbald", 5, options={"prefilter": len(candidates), **bb_options})
    assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()
    torch.testing.assert_close(got.scores, reference.scores, rtol=1e-6, atol=1e-9)


def test_batchbald_prefilter_is_batchbald_on_the_top_bald_items(net, pool, candidates):
    sorted_candidates = candidates.sort().values
    log_probs = full_log_probs(net, pool, sorted_candidates)
    bald_N = bald(log_probs).numpy()
    top = np.sort(np.argsort(-bald_N, kind="stable")[:40])  # positions of the 40 highest BALD, by index
    reference = batchbald(log_probs[top], 5, generator=torch.Generator().manual_seed(SELECTION_SEED))
    got = score(net, pool, candidates, "batchbald", 5, options={"prefilter": 40}, chunk_size=17)
    assert got.indices.tolist() == sorted_candidates[top][reference.indices].tolist()
    # the first pick is BALD's top item
    assert got.indices[0] == sorted_candidates[int(np.argmax(bald_N))]


def test_batchbald_prefilter_with_costs(net, pool, candidates):
    costs = torch.rand(len(candidates), generator=torch.Generator().manual_seed(8), dtype=torch.float64) + 0.2
    got = score(net, pool, candidates, "batchbald", 6, costs_N=costs, cost_budget=2.0,
                options={"prefilter": len(candidates), "cost_aware": True})
    order = torch.argsort(candidates)
    reference = batchbald(full_log_probs(net, pool, candidates[order]), 6, costs_N=costs[order], cost_budget=2.0,
                          cost_aware=True, generator=torch.Generator().manual_seed(SELECTION_SEED))
    assert got.indices.tolist() == candidates[order][reference.indices].tolist()


# ------------------------------------------------------------------------ cost_aware with free items


def free_item_costs(candidates: torch.Tensor) -> torch.Tensor:
    """Costs in [0.2, 1.2) in the order of ``candidates``, about a third of them 0 (free)."""
    g = torch.Generator().manual_seed(12)
    costs = torch.rand(len(candidates), generator=g, dtype=torch.float64) + 0.2
    costs[torch.rand(len(candidates), generator=g) < 1 / 3] = 0.0
    return costs


def cost_aware_reference(scores: np.ndarray, costs: np.ndarray, indices: np.ndarray,
                         noise: np.ndarray | None = None, mode: str = "topk", beta: float = 1.0) -> np.ndarray:
    """Positions in the cost-aware order: free items first, then by the score of a free item or
    the score per cost of a paid one (or, sampled, by ``log w + G`` then ``G``), then the lower index."""
    free = costs == 0
    value = np.where(free, scores, scores / np.where(free, 1.0, costs))
    if mode == "topk":
        return np.lexsort((indices, -value, ~free))
    if mode == "softrank":  # the rank in the top-k order; finite weights, so free items are not forced first
        ranks = np.empty(len(value))
        ranks[cost_aware_reference(scores, costs, indices)] = np.arange(1, len(value) + 1)
        return np.lexsort((indices, -noise, -(noise - beta * np.log(ranks))))
    with np.errstate(divide="ignore"):
        log_w = beta * np.log(value) if mode == "power" else beta * value
    return np.lexsort((indices, -noise, -(log_w + noise), ~free))  # free: an infinite weight


def budget_walk(order: np.ndarray, costs: np.ndarray, batch_size: int, budget: float) -> list[int]:
    chosen: list[int] = []
    for i in order.tolist():
        if len(chosen) < batch_size and costs[i] <= budget - costs[chosen].sum() + 1e-9:
            chosen.append(i)
    return chosen


@pytest.mark.parametrize("strategy", ["bald", "entropy", "random"])
def test_cost_aware_takes_free_items_by_score_whatever_the_chunks(net, pool, candidates, strategy):
    """Free items (cost 0) first by score, then the paid ones by score per cost: select and
    score_pool at two chunk sizes pick the reference's batch, in its order."""
    costs = free_item_costs(candidates)
    order = torch.argsort(candidates)
    sorted_candidates, sorted_costs = candidates[order], costs[order].numpy()
    log_probs = full_log_probs(net, pool, sorted_candidates)
    if strategy == "random":  # streamed: keyed by (seed, index)
        scores_N = keyed_uniform(SELECTION_SEED, sorted_candidates).numpy()
    else:
        scores_N = get_strategy(strategy).score_fn(log_probs).numpy()
    n_free = int((sorted_costs == 0).sum())
    reference_order = cost_aware_reference(scores_N, sorted_costs, sorted_candidates.numpy())
    for batch_size in (10, n_free + 4):  # among the free items; past them, under the budget
        expected = sorted_candidates[budget_walk(reference_order, sorted_costs, batch_size, 1.5)].tolist()
        for chunk_size, cands, cand_costs in [(37, candidates, costs), (450, candidates.flip(0), costs.flip(0))]:
            got = score(net, pool, cands, strategy, batch_size, costs_N=cand_costs, cost_budget=1.5,
                        chunk_size=chunk_size, options={"cost_aware": True})
            assert got.indices.tolist() == expected
        if strategy != "random":  # select draws random scores from its generator instead
            picked = select(log_probs, strategy, batch_size, costs_N=costs[order], cost_budget=1.5,
                            cost_aware=True)
            assert sorted_candidates[picked.indices].tolist() == expected


@pytest.mark.parametrize("strategy", ["power_bald", "softmax_entropy", "softrank_bald"])
def test_cost_aware_samples_free_items_by_score_whatever_the_chunks(net, pool, candidates, strategy):
    """Streamed Gumbel-top-k with free items: the keyed noise sorted by the reference keys (power,
    softmax: free items first by their scores' weights; softrank: ranks in the cost-aware order)."""
    mode, beta = strategy.split("_")[0], 2.0
    costs = free_item_costs(candidates)
    order = torch.argsort(candidates)
    sorted_candidates, sorted_costs = candidates[order], costs[order].numpy()
    scores_N = get_strategy(strategy).score_fn(full_log_probs(net, pool, sorted_candidates)).numpy()
    noise = -np.log(-np.log(keyed_uniform(SELECTION_SEED, sorted_candidates).numpy()))
    reference_order = cost_aware_reference(scores_N, sorted_costs, sorted_candidates.numpy(), noise, mode, beta)
    expected = sorted_candidates[budget_walk(reference_order, sorted_costs, 12, 1.5)].tolist()
    for chunk_size, cands, cand_costs in [(37, candidates, costs), (450, candidates.flip(0), costs.flip(0))]:
        got = score(net, pool, cands, strategy, 12, costs_N=cand_costs, cost_budget=1.5, chunk_size=chunk_size,
                    options={"cost_aware": True, "beta": beta})
        assert got.indices.tolist() == expected


def test_cost_aware_batchbald_prefilter_keeps_free_items_by_bald(net, pool, candidates):
    """The pre-filter keeps the top M by (free, BALD or BALD per cost); BatchBALD then takes the free
    item of largest BALD first; neither depends on the chunks."""
    costs = free_item_costs(candidates)
    order = torch.argsort(candidates)
    sorted_candidates, sorted_costs = candidates[order], costs[order]
    log_probs = full_log_probs(net, pool, sorted_candidates)
    bald_N = bald(log_probs).numpy()
    top = np.sort(cost_aware_reference(bald_N, sorted_costs.numpy(), sorted_candidates.numpy())[:30])
    reference = batchbald(log_probs[top], 5, costs_N=sorted_costs[top], cost_budget=1.5, cost_aware=True,
                          generator=torch.Generator().manual_seed(SELECTION_SEED))
    free = np.flatnonzero(sorted_costs.numpy() == 0)
    assert int(sorted_candidates[top][reference.indices[0]]) == int(sorted_candidates[free[np.argmax(bald_N[free])]])
    for chunk_size in (37, 450):
        got = score(net, pool, candidates, "batchbald", 5, costs_N=costs, cost_budget=1.5, chunk_size=chunk_size,
                    options={"prefilter": 30, "cost_aware": True})
        assert got.indices.tolist() == sorted_candidates[top][reference.indices].tolist()
    # no pre-filter: what select picks on the whole pool
    picked = select(log_probs, "batchbald", 5, costs_N=sorted_costs, cost_budget=1.5, cost_aware=True,
                    generator=torch.Generator().manual_seed(SELECTION_SEED))
    got = score(net, pool, candidates, "batchbald", 5, costs_N=costs, cost_budget=1.5, chunk_size=37,
                options={"prefilter": len(candidates), "cost_aware": True})
    assert got.indices.tolist() == sorted_candidates[picked.indices].tolist()


# ------------------------------------------------------------------------ fallback and random


def test_strategy_without_score_fn_uses_select(net, pool, candidates):
    def lowest_confidence_joint(log_probs, batch_size, *, name, generator, plan, device, **options):
        picked = torch.argsort(log_probs.exp().mean(1).amax(-1))[:batch_size]
        return Selection(picked, torch.zeros(batch_size, dtype=torch.float64), name)

    register_strategy("test_in_memory_joint", lowest_confidence_joint)
    try:
        sorted_candidates = candidates.sort().values
        log_probs = full_log_probs(net, pool, sorted_candidates)
        reference = select(log_probs, "test_in_memory_joint", 5)
        got = score(net, pool, candidates, "test_in_memory_joint", 5)
        assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()
    finally:
        unregister_strategy("test_in_memory_joint")
    register_strategy("test_score_only", topk_strategy(bald))  # no score_fn: in-memory path
    try:
        got = score(net, pool, candidates, "test_score_only", 5)
        assert got.indices.tolist() == score(net, pool, candidates, "bald", 5).indices.tolist()
    finally:
        unregister_strategy("test_score_only")


def test_epig_and_badge_in_memory_equal_select(net, pool, candidates):
    """Joint strategies get the whole [N, K, C] (and per-candidate features, reordered with the candidates)."""
    order = torch.argsort(candidates)
    sorted_candidates = candidates[order]
    log_probs = full_log_probs(net, pool, sorted_candidates)
    generator = torch.Generator().manual_seed(SELECTION_SEED)
    reference = select(log_probs, "epig", 5, generator=generator, num_targets=60)
    got = score(net, pool, candidates, "epig", 5, options={"num_targets": 60})
    assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()
    features = torch.randn(len(candidates), 5, generator=torch.Generator().manual_seed(3))  # candidates' order
    reference = select(log_probs, "badge", 5, generator=torch.Generator().manual_seed(SELECTION_SEED),
                       features_N_D=features[order])
    got = score(net, pool, candidates, "badge", 5, strategy_inputs={"features_N_D": features})
    assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()


class RecordingExecutor(LocalExecutor):
    """The in-process executor, remembering every work it ran and the columns of its rows."""

    def __init__(self) -> None:
        self.runs: list[tuple[object, dict[str, tuple[int, ...]]]] = []

    def run(self, model, inputs, indices_N, costs_N, work, **kwargs):
        rows = super().run(model, inputs, indices_N, costs_N, work, **kwargs)
        self.runs.append((work, {key: tuple(value.shape) for key, value in rows.items()}))
        return rows


@pytest.mark.parametrize("chunk_size", [37, 64, 1000])
def test_badge_streams_gradient_factors_not_predictions(net, pool, candidates, chunk_size):
    """BADGE keeps [N, C] factors p̄ - e_ŷ per pass (not [N, K, C]) and picks what select does, with or without a budget."""
    order = torch.argsort(candidates)
    sorted_candidates = candidates[order]
    log_probs = full_log_probs(net, pool, sorted_candidates)
    features = torch.randn(len(candidates), 5, generator=torch.Generator().manual_seed(6))  # candidates' order
    costs = torch.rand(len(candidates), generator=torch.Generator().manual_seed(7), dtype=torch.float64) + 0.5
    for budget in ({}, {"costs_N": costs, "cost_budget": 4.0}):
        reference_budget = {} if not budget else {"costs_N": costs[order], "cost_budget": 4.0}
        reference = select(log_probs, "badge", 8, generator=torch.Generator().manual_seed(SELECTION_SEED),
                           features_N_D=features[order], **reference_budget)
        executor = RecordingExecutor()
        got = score(net, pool, candidates, "badge", 8, chunk_size=chunk_size, executor=executor,
                    strategy_inputs={"features_N_D": features}, **budget)
        assert got.indices.tolist() == sorted_candidates[reference.indices].tolist()
        torch.testing.assert_close(got.scores, reference.scores, rtol=1e-12, atol=0)
        ((_, columns),) = executor.runs
        assert columns == {"index": (len(candidates),), "factors": (len(candidates), C)}


def test_typicality_needs_no_predictions(pool, candidates):
    class Exploding(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("typicality must not predict")

    order = torch.argsort(candidates)
    features = torch.randn(len(candidates), 3, generator=torch.Generator().manual_seed(4))
    labelled = torch.randn(6, 3, generator=torch.Generator().manual_seed(5))
    reference = select(len(candidates), "typicality", 4, generator=torch.Generator().manual_seed(SELECTION_SEED),
                       features_N_D=features[order], labelled_features_L_D=labelled)
    got = score_pool(Exploding(), pool, candidates, "typicality", 4, num_samples=K, mask_generator=None,
                     selection_seed=SELECTION_SEED,
                     strategy_inputs={"features_N_D": features, "labelled_features_L_D": labelled})
    assert got.indices.tolist() == candidates[order][reference.indices].tolist()


def test_random_is_uniform_and_needs_no_model(candidates, pool):
    class Exploding(torch.nn.Module):
        def forward(self, x):
            raise AssertionError("random must not predict")

    counts = np.zeros(N_ALL)
    for seed in range(400):
        picks = score_pool(Exploding(), pool, candidates, "random", 20, num_samples=K, mask_generator=None,
                           selection_seed=seed)
        counts[picks.indices.numpy()] += 1
    assert counts[np.setdiff1d(np.arange(N_ALL), candidates.numpy())].sum() == 0
    observed = counts[candidates.numpy()]
    assert stats.chisquare(observed).pvalue > 1e-3


# ------------------------------------------------------------------------ seeding


def splitmix64_reference(x: int) -> int:
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def test_splitmix64_matches_python_reference():
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randint(-(2**63), 2**63 - 1, (200,), generator=g), torch.tensor([0, -1, 2**63 - 1])])
    got = splitmix64(x).tolist()
    for value, hashed in zip(x.tolist(), got, strict=True):
        assert hashed & ((1 << 64) - 1) == splitmix64_reference(value & ((1 << 64) - 1))


def test_keyed_uniform_is_uniform_and_keyed():
    u = keyed_uniform(3, torch.arange(20000))
    assert bool(((u > 0) & (u < 1)).all())
    assert stats.kstest(u.numpy(), "uniform").pvalue > 1e-3
    keys = torch.tensor([5, 17, 2])
    assert torch.equal(keyed_uniform(3, keys), keyed_uniform(3, torch.arange(20))[keys])
    assert not torch.equal(keyed_uniform(4, keys), keyed_uniform(3, keys))
    assert abs(float(np.corrcoef(u[:-1].numpy(), u[1:].numpy())[0, 1])) < 0.03


# ------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"candidates": [1, 2, 2]}, ValueError, "distinct"),
        ({"candidates": [1, N_ALL]}, InvalidIndexError, "candidates_N"),
        ({"candidates": []}, ValueError, "empty"),
        ({"batch_size": 3, "candidates": [0, 1]}, ValueError, "batch_size"),
        ({"options": {"bogus": 1}}, TypeError, "bogus"),
        ({"strategy": "batchbald", "options": {"prefilter": 2}}, ValueError, "prefilter"),
        ({"options": {"cost_aware": True}}, ValueError, "cost_budget"),
        ({"costs_N": torch.ones(3), "cost_budget": 1.0}, ValueError, "costs_N"),
        # torch.as_tensor's own 'too many dimensions 'str''
        ({"costs_N": ["cheap"] * 50, "cost_budget": 1.0}, TypeError,
         r"^costs_N must be a tensor of numbers \[N\] \(one cost per candidate\), got list$"),
        ({"chunk_size": 0}, ValueError, "chunk_size"),
        ({"selection_seed": 1.5}, TypeError, "selection_seed"),
        ({"strategy": "nope"}, ValueError, "unknown strategy"),
        ({"strategy": "badge"}, TypeError, "features_N_D"),
        ({"strategy_inputs": {"features_N_D": torch.zeros(50, 2)}}, TypeError, "does not read"),
        ({"strategy": "badge", "strategy_inputs": {"features_N_D": torch.zeros(7, 2)}}, ValueError, "one row per"),
        ({"strategy_inputs": {"embeddings": torch.zeros(50, 2)}}, TypeError, "unknown input"),
        ({"device": "gpu"}, ValueError, r"device must be a device this machine has \(cpu.*got 'gpu'"),
    ],
)
def test_errors_name_the_argument(net, pool, kwargs, error, match):
    args = {"candidates": list(range(50)), "strategy": "bald", "batch_size": 3}
    args.update(kwargs)
    candidates_, strategy, batch_size = args.pop("candidates"), args.pop("strategy"), args.pop("batch_size")
    args.setdefault("selection_seed", 0)
    with pytest.raises(error, match=match):
        score_pool(net, pool, candidates_, strategy, batch_size, num_samples=K, mask_generator=0, **args)


@pytest.mark.parametrize("chunk_size", [7, 1000])
def test_nan_outputs_are_named_by_pool_index(net, pool, chunk_size):
    """The error named the item's position in its chunk (``[500]`` for dataset item 1500)."""
    inputs = pool.clone()
    inputs[[13, 41]] = float("nan")
    candidates_N = torch.tensor([3, 41, 5, 13, 30, 2])
    with pytest.raises(ValueError, match=r"outputs are not finite \(NaN\) for items \[13, 41\]: their inputs hold NaN"):
        score_pool(net, inputs, candidates_N, "bald", 2, num_samples=K, mask_generator=0, selection_seed=0,
                   chunk_size=chunk_size)


@pytest.mark.parametrize("chunk_size", [7, 1000])
def test_infinite_outputs_are_named_as_infinite_by_pool_index(net, pool, chunk_size):
    """A +inf logit (an overflowing model) was reported as "the model's outputs are NaN"."""

    class Overflowing(torch.nn.Module):  # the MC dropout MLP, with a +inf logit for the marked items
        def __init__(self):
            super().__init__()
            self.net = net

        def forward(self, x):
            logits_nk_C = self.net(x)  # [n * k, C] item-major: the batched MC forward expands the items
            marked_nk = (x[:, 0] == 1000).repeat_interleave(len(logits_nk_C) // len(x))
            return logits_nk_C.masked_fill(marked_nk[:, None] & (torch.arange(C) == 1), math.inf)

    inputs = pool.clone()
    inputs[[13, 41], 0] = 1000.0
    candidates_N = torch.tensor([3, 41, 5, 13, 30, 2])
    with pytest.raises(ValueError, match=r"outputs are not finite \(\+inf\) for items \[13, 41\]: "
                                         r"the model's weights or computation give \+inf"):
        score_pool(Overflowing(), inputs, candidates_N, "bald", 2, num_samples=K, mask_generator=0,
                   selection_seed=0, chunk_size=chunk_size)


def test_dataset_without_inputs_is_rejected(net):
    with pytest.raises(TypeError, match="dataset"):
        score_pool(net, object(), [0], "bald", 1, num_samples=K, mask_generator=0, selection_seed=0)
    with pytest.raises(ValueError, match="float tensor"):
        score_pool(net, Dataset(torch.zeros(5, FEATURES, dtype=torch.long)), [0, 1], "bald", 1, num_samples=K,
                   mask_generator=0, selection_seed=0)


def test_local_executor_is_the_default(net, pool, candidates):
    assert_same(score(net, pool, candidates, "entropy", 4, executor=LocalExecutor()),
                score(net, pool, candidates, "entropy", 4))
    assert math.isfinite(float(score(net, pool, candidates, "entropy", 4).scores.sum()))


def test_one_function_sample_is_refused_before_the_pool_is_read(net, pool, candidates):
    # streamed, the predictions come later: the check is on num_samples, before any chunk is predicted
    inputs = RecordingInputs(pool)
    with pytest.raises(ValueError, match=r"^num_samples must be >= 2 for strategy 'bald', which scores how the "
                                         r"function samples disagree, got 1"):
        score_pool(net, inputs, candidates, "bald", 5, num_samples=1, mask_generator=MASK_SEED, selection_seed=0)
    assert inputs.reads == []
    assert len(score_pool(net, pool, candidates, "entropy", 5, num_samples=1, mask_generator=MASK_SEED,
                          selection_seed=0)) == 5


def test_a_multilabel_posterior_is_scored_in_memory_not_streamed(net, pool, candidates):
    """score_pool ran a MultiLabelPosterior's module as a softmax: per-label scores of the wrong probabilities."""
    from activebayes.errors import InvalidTypeError
    from activebayes.models import MultiLabelPosterior

    with pytest.raises(InvalidTypeError, match=r"^model is a MultiLabelPosterior: score_pool streams a softmax over "
                                               r"classes .*select\(model.log_probs\(inputs, num_samples=K\), strategy"):
        score(MultiLabelPosterior(net), pool, candidates, "multilabel_bald", 4)
    with pytest.raises(InvalidArgumentError, match=r"^log_probs_N_K_C sums to 1 over its 4 labels in every one"):
        score(net, pool, candidates, "multilabel_bald", 4)  # a plain network's softmax, refused by the scores
