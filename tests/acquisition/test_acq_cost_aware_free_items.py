"""cost_aware with free items (cost 0): free items first, ranked among themselves by score.

acquisition.md: ``cost_aware=True`` orders by score per unit cost, free items first. The
reference is the ranking written out in NumPy: sort by (free first, then the score of a
free item or the score per unit cost of a paid one, descending, then the lower index),
walk it under the budget. BatchBALD's reference is a brute-force greedy over exact joint
mutual information with the same key at every step; the stochastic strategies' first
picks are checked against ``p ∝ w`` among the free items (chi-square).

(A single ``score / cost`` gave every free item priority ``inf``: free items were taken in
index order, and sampled uniformly among themselves.)
"""

from __future__ import annotations

import itertools

import acq_reference as ref
import numpy as np
import pytest
import torch
from scipy import stats

from activebayes.acquisition import select

BUDGET_SLACK = 1e-9


def random_log_probs(N: int, K: int, C: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g, dtype=torch.float64) * 5
    logits = torch.randn(N, K, C, generator=g, dtype=torch.float64) * scale_N_1_1
    return torch.log_softmax(logits, dim=-1)


def mixed_costs(N: int, free: list[int], seed: int) -> torch.Tensor:
    """Costs in [0.5, 2.5), and exactly 0 at ``free``."""
    costs = torch.rand(N, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 + 0.5
    costs[free] = 0.0
    return costs


def reference_order(scores: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """Free items first by score, then the paid ones by score per cost; ties to the lower index."""
    free = costs == 0
    value = np.where(free, scores, scores / np.where(free, 1.0, costs))
    return np.lexsort((np.arange(len(scores)), -value, ~free))  # the last key sorts first


def walk(order: np.ndarray, costs: np.ndarray, batch_size: int, budget: float) -> list[int]:
    """Take items in ``order`` while the batch has room, skipping any that no longer fits."""
    chosen: list[int] = []
    remaining = budget
    for i in order.tolist():
        if len(chosen) == batch_size:
            break
        if costs[i] <= remaining + BUDGET_SLACK:
            chosen.append(i)
            remaining -= costs[i]
    return chosen


# ------------------------------------------------------------------------ top-k


@pytest.mark.parametrize("strategy, score", [("bald", ref.bald), ("entropy", ref.predictive_entropy),
                                             ("least_confidence", ref.least_confidence)])
def test_topk_takes_free_items_by_score_then_paid_by_score_per_cost(strategy, score):
    log_probs = random_log_probs(30, 6, 4, seed=1)
    free = [2, 5, 6, 11, 17, 18, 23, 29]
    costs = mixed_costs(30, free, seed=2)
    scores = score(log_probs.exp().numpy())
    for batch_size, budget in [(5, 3.0), (12, 4.0)]:  # inside the free items; past them, under the budget
        expected = walk(reference_order(scores, costs.numpy()), costs.numpy(), batch_size, budget)
        picked = select(log_probs, strategy, batch_size, costs_N=costs, cost_budget=budget, cost_aware=True)
        assert picked.indices.tolist() == expected
        np.testing.assert_allclose(picked.scores.numpy(), scores[expected], rtol=1e-10, atol=1e-12)


def test_equal_free_scores_go_to_the_lower_index():
    log_probs = random_log_probs(6, 4, 3, seed=3)
    log_probs[[4, 1, 3]] = log_probs[0].clone()  # four equal scores
    costs = torch.tensor([1.0, 0.0, 0.5, 0.0, 0.0, 0.0], dtype=torch.float64)
    scores = ref.bald(log_probs.exp().numpy())
    expected = walk(reference_order(scores, costs.numpy()), costs.numpy(), 4, 10.0)
    assert select(log_probs, "bald", 4, costs_N=costs, cost_budget=10.0, cost_aware=True).tolist() == expected


# ------------------------------------------------------------------------ stochastic


def first_pick_probabilities(scores: np.ndarray, costs: np.ndarray, mode: str, beta: float) -> np.ndarray:
    """``p ∝ w``: among the free items by their scores (power, softmax: a free item's weight is
    infinite); softrank over every item by the rank in the reference order (free items ranks 1..F)."""
    free = costs == 0
    if mode == "softrank":
        ranks = np.empty(len(scores))
        ranks[reference_order(scores, costs)] = np.arange(1, len(scores) + 1)
        weights = ranks**-beta
    else:
        weights = np.where(free, scores**beta if mode == "power" else np.exp(beta * scores), 0.0)
    return weights / weights.sum()


@pytest.mark.parametrize("mode", ["power", "softmax", "softrank"])
def test_stochastic_weighs_free_items_by_their_scores(mode):
    log_probs = random_log_probs(8, 8, 3, seed=4)
    free = [0, 1, 2, 5]
    costs = mixed_costs(8, free, seed=5)
    scores = ref.bald(log_probs.exp().numpy())
    scores_free = scores[free]
    assert scores_free.max() > 3 * scores_free.min()  # uniform over the free items is far from p ∝ w
    beta = 3.0 if mode != "softmax" else 10.0
    draws = 1500
    counts = np.zeros(8)
    for seed in range(draws):
        picked = select(log_probs, f"{mode}_bald", 4, generator=torch.Generator().manual_seed(seed),
                        costs_N=costs, cost_budget=100.0, cost_aware=True, beta=beta)
        if mode != "softrank":  # an infinite weight: the free items fill the batch first
            assert sorted(picked.tolist()) == free
        counts[int(picked.indices[0])] += 1
    expected = draws * first_pick_probabilities(scores, costs.numpy(), mode, beta)
    observed = counts[expected > 0]
    assert counts[expected == 0].sum() == 0
    assert stats.chisquare(observed, expected[expected > 0]).pvalue > 1e-3


# ------------------------------------------------------------------------ BatchBALD


def numpy_batch_mi(p_NKC: np.ndarray, batch: list[int]) -> float:
    """I[y_batch; w] by brute force over every label configuration of the batch."""
    if not batch:
        return 0.0
    p_BKC = p_NKC[batch]
    joint = 0.0
    for config in itertools.product(range(p_BKC.shape[2]), repeat=len(batch)):
        q = np.mean(np.prod([p_BKC[i, :, c] for i, c in enumerate(config)], axis=0))
        joint -= q * np.log(q) if q > 0 else 0.0
    return joint - ref.expected_entropy(p_BKC).sum()


def reference_batchbald(p_NKC: np.ndarray, costs: np.ndarray, batch_size: int, budget: float) -> list[int]:
    """Greedy: at each step the candidate first by (free, gain or gain per cost), lower index on ties."""
    picked: list[int] = []
    remaining = budget
    for _ in range(batch_size):
        candidates = [n for n in range(len(costs)) if n not in picked and costs[n] <= remaining + BUDGET_SLACK]
        if not candidates:
            break
        base = numpy_batch_mi(p_NKC, picked)
        gains = np.array([max(numpy_batch_mi(p_NKC, picked + [n]) - base, 0.0) for n in candidates])
        best = candidates[int(reference_order(gains, costs[candidates])[0])]
        picked.append(best)
        remaining -= costs[best]
    return picked


def test_batchbald_takes_the_free_item_of_largest_gain_first():
    log_probs = random_log_probs(12, 5, 3, seed=6)
    free = [1, 3, 4, 8, 10]
    costs = mixed_costs(12, free, seed=7)
    p = log_probs.exp().numpy()
    for batch_size, budget in [(3, 2.0), (6, 2.0)]:  # within the free items; past them, under the budget
        expected = reference_batchbald(p, costs.numpy(), batch_size, budget)
        picked = select(log_probs, "batchbald", batch_size, costs_N=costs, cost_budget=budget, cost_aware=True)
        assert picked.indices.tolist() == expected
        np.testing.assert_allclose(picked.scores.numpy(), [numpy_batch_mi(p, expected[: b + 1])
                                                           for b in range(len(expected))], atol=1e-10)
    assert expected[0] == free[int(np.argmax(ref.bald(p)[free]))]  # batch of 1: the free item of largest BALD


# ------------------------------------------------------------------------ the shared order


def test_lexicographic_order_first_k_is_the_numpy_lexsort_prefix():
    """Free/value keys and three-key Gumbel keys: the first ``k`` (pre-filtered) are the prefix of
    the full order, both NumPy's lexsort (keys descending, then index ascending), ties or not."""
    from activebayes.acquisition.selection import lexicographic_order

    rng = np.random.default_rng(0)
    for _ in range(40):
        N = int(rng.integers(1, 60))
        keys = [rng.integers(0, 2, N).astype(float), rng.integers(0, 4, N).astype(float),
                rng.integers(0, 3, N).astype(float)][: int(rng.integers(1, 4))]
        indices = rng.permutation(1000)[:N]
        expected = np.lexsort((indices, *[-key for key in reversed(keys)]))
        torch_keys = [torch.tensor(key) for key in keys]
        full = lexicographic_order(torch_keys, torch.tensor(indices))
        assert full.tolist() == expected.tolist()
        for k in {1, max(1, N // 3), N}:
            assert lexicographic_order(torch_keys, torch.tensor(indices), k).tolist() == expected[:k].tolist()
