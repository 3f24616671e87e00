"""BADGE: gradient embeddings against NumPy and autograd, k-means++ against NumPy (same uniforms) and scikit-learn."""

from __future__ import annotations

import acq_reference as ref
import numpy as np
import pytest
import torch
from torch import nn

from activebayes.acquisition import (
    badge,
    badge_from_factors,
    gradient_embeddings,
    kmeans_plus_plus,
    loss_gradient_factors,
    select,
)
from activebayes.acquisition.selection import BudgetPlan


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def sequential_uniforms(k: int, seed: int) -> list[float]:
    """One U[0, 1) per centre, drawn in turn from a CPU generator (what the seeding consumes)."""
    g = gen(seed)
    return [float(torch.rand(1, generator=g, dtype=torch.float64)) for _ in range(k)]


def random_log_probs(N: int, K: int, C: int, *, seed: int = 0) -> torch.Tensor:
    g = gen(seed)
    logits = torch.randn(N, K, C, generator=g, dtype=torch.float64) * torch.rand(N, 1, 1, generator=g, dtype=torch.float64) * 4
    return torch.log_softmax(logits + torch.randn(N, 1, C, generator=g, dtype=torch.float64), dim=-1)


def test_gradient_embeddings_match_numpy() -> None:
    log_probs, features = random_log_probs(25, 6, 4, seed=1), torch.randn(25, 7, generator=gen(2), dtype=torch.float64)
    ours = gradient_embeddings(log_probs, features)
    assert ours.shape == (25, 4, 7) and ours.dtype == torch.float64
    expected = ref.gradient_embeddings(log_probs.exp().numpy(), features.numpy())
    np.testing.assert_allclose(ours.reshape(25, -1).numpy(), expected, rtol=0, atol=1e-14)


def test_gradient_embedding_is_the_cross_entropy_gradient_of_the_last_layer() -> None:
    """K = 1: ∂ CE(W h + b, ŷ) / ∂W computed by autograd equals (p - e_ŷ) ⊗ h, in W's [C, D] layout."""
    torch.manual_seed(0)
    layer = nn.Linear(5, 3).double()
    features = torch.randn(8, 5, generator=gen(3), dtype=torch.float64)
    logits = layer(features)
    log_probs = torch.log_softmax(logits, -1).detach()[:, None, :]
    ours = gradient_embeddings(log_probs, features)
    for n in range(8):
        layer.zero_grad()
        predicted = logits[n].argmax()
        nn.functional.cross_entropy(layer(features[n : n + 1]), predicted[None]).backward()
        np.testing.assert_allclose(ours[n].numpy(), layer.weight.grad.numpy(), rtol=0, atol=1e-14)


@pytest.mark.parametrize("seed", range(6))
def test_badge_matches_numpy_kmeans_plus_plus_with_the_same_uniforms(seed: int) -> None:
    N, K, C, D, B = 40, 5, 4, 6, 8
    log_probs = random_log_probs(N, K, C, seed=seed)
    features = torch.randn(N, D, generator=gen(100 + seed), dtype=torch.float64)
    ours = badge(log_probs, features, B, generator=gen(seed))
    embeddings = ref.gradient_embeddings(log_probs.exp().numpy(), features.numpy())
    uniforms = sequential_uniforms(B, seed)  # u_0 unused: the first pick is the largest |g|
    first = int(np.argmax((embeddings**2).sum(1)))
    expected = ref.d2_seeding(embeddings, B, uniforms, first)
    assert ours.tolist() == expected
    # scores: D^2 to the nearest earlier pick (the first: |g|^2)
    d2 = [float((embeddings[first] ** 2).sum())] + [
        float(min(((embeddings[i] - embeddings[j]) ** 2).sum() for j in expected[:b])) for b, i in enumerate(expected) if b
    ]
    np.testing.assert_allclose(ours.scores.numpy(), d2, rtol=1e-9, atol=1e-12)
    assert ours.strategy == "badge"
    again = select(log_probs, "badge", B, features_N_D=features, generator=gen(seed))
    assert again.tolist() == ours.tolist() and again.strategy == "badge"


def test_badge_draws_in_proportion_to_d2_like_scikit_learn() -> None:
    """The second pick is drawn with probability D^2 / Σ D^2, as scikit-learn's k-means++ (one local trial) draws."""
    kmeans_plusplus = pytest.importorskip("sklearn.cluster").kmeans_plusplus
    log_probs, features = random_log_probs(4, 3, 3, seed=7), torch.randn(4, 2, generator=gen(8), dtype=torch.float64)
    embeddings = ref.gradient_embeddings(log_probs.exp().numpy(), features.numpy())
    first = int(np.argmax((embeddings**2).sum(1)))
    d2 = ((embeddings - embeddings[first]) ** 2).sum(1)
    exact = d2 / d2.sum()
    runs = 2000
    ours = np.bincount([int(badge(log_probs, features, 2, generator=gen(s)).indices[1]) for s in range(runs)],
                       minlength=4) / runs
    np.testing.assert_allclose(ours, exact, atol=0.035)  # 3.5 standard errors at most
    theirs = []
    for s in range(runs):
        _, picks = kmeans_plusplus(embeddings, 2, random_state=s, n_local_trials=1)
        if picks[0] == first:  # scikit-learn's first centre is uniform: condition on ours
            theirs.append(picks[1])
    assert len(theirs) > 350
    theirs = np.bincount(theirs, minlength=4) / len(theirs)
    np.testing.assert_allclose(theirs, exact, atol=0.08)


def test_badge_properties() -> None:
    log_probs = random_log_probs(30, 4, 3, seed=9)
    features = torch.randn(30, 5, generator=gen(10), dtype=torch.float64)
    picks = badge(log_probs, features, 30, generator=gen(0))
    assert sorted(picks.tolist()) == list(range(30))  # a whole-pool batch is a permutation
    embeddings = gradient_embeddings(log_probs, features).reshape(30, -1)
    assert picks.tolist()[0] == int(embeddings.norm(dim=1).argmax())
    # confident items (one-hot predictions) all have the embedding 0: once one is drawn, the
    # others are at D^2 = 0 and are not drawn while any other item is left
    confident = torch.nn.functional.one_hot(torch.arange(10) % 3, 3).double()[:, None, :].expand(10, 4, 3).log()
    pool = torch.cat([log_probs[:5], confident])
    for seed in range(5):
        chosen = badge(pool, torch.cat([features[:5], features[:10]]), 6, generator=gen(seed)).tolist()
        assert sum(i >= 5 for i in chosen) <= 1 and set(range(5)) <= set(chosen)
    # every remaining D^2 is 0 (all embeddings identical): the rest is drawn uniformly, still distinct
    same = badge(log_probs[:1].expand(12, 4, 3), features[:1].expand(12, 5), 12, generator=gen(2))
    assert sorted(same.tolist()) == list(range(12))
    # duplicate embeddings: a copy of a pick has D^2 = 0 and is not drawn while others remain
    doubled = badge(torch.cat([log_probs[:4], log_probs[:4]]), torch.cat([features[:4], features[:4]]), 4,
                    generator=gen(3))
    assert sorted(i % 4 for i in doubled.tolist()) == [0, 1, 2, 3]


def test_badge_respects_a_budget_and_is_invariant_to_chunking() -> None:
    log_probs = random_log_probs(30, 4, 3, seed=11)
    features = torch.randn(30, 5, generator=gen(12), dtype=torch.float64)
    costs = torch.linspace(1, 3, 30, dtype=torch.float64)
    picked = select(log_probs, "badge", 10, features_N_D=features, costs_N=costs, cost_budget=6.0, generator=gen(0))
    assert float(costs[picked.indices].sum()) <= 6.0 and 1 <= len(picked) < 10
    whole = badge(log_probs, features, 6, generator=gen(4))
    assert badge(log_probs, features, 6, generator=gen(4), chunk_size=7).tolist() == whole.tolist()
    assert badge(log_probs.float(), features.float(), 6, generator=gen(4)).tolist() == whole.tolist()


def test_kmeans_plus_plus_matches_numpy_with_the_same_uniforms() -> None:
    points = torch.randn(50, 3, generator=gen(13), dtype=torch.float64)
    for seed in range(5):
        uniforms = sequential_uniforms(7, seed)
        assert kmeans_plus_plus(points, 7, generator=gen(seed)) == ref.d2_seeding(points.numpy(), 7, uniforms, None)


def test_a_longer_ranking_starts_with_the_batch() -> None:
    log_probs = random_log_probs(200, 6, 10, seed=14)
    features = torch.randn(200, 16, generator=gen(15), dtype=torch.float64)
    for seed in range(3):
        ranking = badge(log_probs, features, 40, generator=gen(seed)).tolist()
        assert ranking[:10] == badge(log_probs, features, 10, generator=gen(seed)).tolist()


def test_loss_gradient_factors_match_numpy() -> None:
    """a = p̄ - e_ŷ against NumPy float64; the gradient embedding is a ⊗ h."""
    log_probs = random_log_probs(30, 5, 4, seed=16)
    ours = loss_gradient_factors(log_probs)
    p_mean = log_probs.exp().numpy().mean(1)
    expected = p_mean - np.eye(4)[p_mean.argmax(1)]
    assert ours.dtype == torch.float64 and ours.shape == (30, 4)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=1e-15)
    features = torch.randn(30, 3, generator=gen(17), dtype=torch.float64)
    np.testing.assert_allclose(gradient_embeddings(log_probs, features).numpy(),
                               np.einsum("nc,nd->ncd", expected, features.numpy()), rtol=0, atol=1e-14)
    # row by row: the factors of a pool are its chunks' factors
    assert torch.equal(torch.cat([loss_gradient_factors(log_probs[:11]), loss_gradient_factors(log_probs[11:])]), ours)


@pytest.mark.parametrize("seed", range(4))
def test_badge_from_factors_equals_badge(seed: int) -> None:
    log_probs = random_log_probs(60, 7, 5, seed=20 + seed).float()
    features = torch.randn(60, 4, generator=gen(30 + seed))
    whole = badge(log_probs, features, 9, generator=gen(seed))
    split = badge_from_factors(loss_gradient_factors(log_probs), features, 9, generator=gen(seed))
    assert split.indices.tolist() == whole.indices.tolist()
    assert torch.equal(split.scores, whole.scores)
    costs = torch.linspace(1, 2, 60, dtype=torch.float64)
    budgeted = badge(log_probs, features, 9, generator=gen(seed), costs_N=costs, cost_budget=5.0)
    plan = BudgetPlan(costs, 5.0)
    assert badge_from_factors(loss_gradient_factors(log_probs), features, 9, generator=gen(seed),
                              plan=plan).indices.tolist() == budgeted.indices.tolist()


@pytest.mark.parametrize(
    ("factors", "features", "kwargs", "match"),
    [
        (torch.zeros(5, 3, 2), torch.zeros(5, 2), {}, r"^factors_N_C must have 2 dimensions \[N, C\]"),
        (torch.zeros(0, 3), torch.zeros(0, 2), {}, r"^factors_N_C has a zero-sized dimension: shape \(0, 3\)$"),
        (torch.zeros(5, 0), torch.zeros(5, 2), {}, r"^factors_N_C has a zero-sized dimension: shape \(5, 0\)$"),
        (torch.full((5, 3), float("nan")), torch.zeros(5, 2), {}, "factors_N_C must be finite"),
        (torch.zeros(5, 3), torch.zeros(4, 2), {}, "features_N_D"),
        (torch.zeros(5, 3), torch.zeros(5, 2), {"batch_size": 6}, "batch_size must be <="),
        (torch.zeros(5, 3), torch.zeros(5, 2), {"plan": BudgetPlan(torch.ones(4, dtype=torch.float64), 2.0)},
         "one cost per item"),
    ],
)
def test_badge_from_factors_names_bad_arguments(factors, features, kwargs, match) -> None:
    batch_size = kwargs.pop("batch_size", 2)
    with pytest.raises(ValueError, match=match):
        badge_from_factors(factors, features, batch_size, **kwargs)


def test_badge_from_factors_names_a_wrong_type_as_the_other_functions_do() -> None:
    # was ValueError 'factors_N_C must be a float tensor [N, C], got ...' for a NumPy array and an int tensor
    with pytest.raises(TypeError, match=r"^factors_N_C must be a torch.Tensor, got ndarray; convert it with "):
        badge_from_factors(np.zeros((5, 3)), torch.zeros(5, 2), 2)
    with pytest.raises(TypeError, match=r"^factors_N_C must be a floating point tensor, got dtype torch.int64$"):
        badge_from_factors(torch.zeros(5, 3, dtype=torch.long), torch.zeros(5, 2), 2)
