"""Property tests (hypothesis) over every score and every registered strategy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from activebayes import acquisition
from activebayes.acquisition import select
from activebayes.acquisition.joint_entropy import exact_log_joint, joint_entropy, sample_configurations
from activebayes.acquisition.multilabel import multilabel_log_probs

SCORES = [
    "predictive_entropy",
    "expected_entropy",
    "bald",
    "jackknife_bald",
    "variation_ratios",
    "mean_std",
    "margin",
    "least_confidence",
]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def log_probs_tensors(draw, max_n: int = 8, max_k: int = 5, max_c: int = 4, min_k: int = 1) -> torch.Tensor:
    N = draw(st.integers(1, max_n))
    K = draw(st.integers(min_k, max_k))
    C = draw(st.integers(1, max_c))
    logits = draw(arrays(np.float64, (N, K, C), elements=st.floats(-30, 30, allow_nan=False)))
    return torch.log_softmax(torch.from_numpy(logits), dim=-1)


@FAST
@given(log_probs=log_probs_tensors(), data=st.data())
def test_permuting_the_pool_permutes_every_score(log_probs: torch.Tensor, data) -> None:
    permutation = torch.tensor(data.draw(st.permutations(range(log_probs.shape[0]))), dtype=torch.long)
    for name in SCORES:
        fn = getattr(acquisition, name)
        np.testing.assert_allclose(fn(log_probs[permutation]).numpy(), fn(log_probs)[permutation].numpy(), atol=1e-12)


def registry_inputs(entry: acquisition.Strategy, log_probs: torch.Tensor, seed: int, labelled: int) -> dict:
    """The extra inputs a registered strategy reads (:data:`acquisition.INPUTS`), made up from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    N = log_probs.shape[0]
    made = {
        "target_log_probs": log_probs[torch.randperm(N, generator=g)[: max(1, N // 2)]],
        "features": torch.randn(N, 3, generator=g, dtype=torch.float64),
        "labelled_features": torch.randn(labelled, 3, generator=g, dtype=torch.float64),
    }
    # required inputs always; optional ones (EPIG's targets) on odd seeds, so both paths run
    keys = [*entry.inputs, *(entry.optional_inputs if seed % 2 else ())]
    return {acquisition.INPUTS[key]: made[key] for key in keys if key != "log_probs"}


@FAST
@given(log_probs=log_probs_tensors(min_k=2), data=st.data())  # epig refuses K = 1, as select does
def test_permuting_the_pool_permutes_epig_and_permuting_targets_changes_nothing(log_probs, data) -> None:
    N = log_probs.shape[0]
    targets = log_probs[torch.tensor(data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=4)))]
    permutation = torch.tensor(data.draw(st.permutations(range(N))), dtype=torch.long)
    scores = acquisition.epig(log_probs, targets)
    np.testing.assert_allclose(acquisition.epig(log_probs[permutation], targets).numpy(),
                               scores[permutation].numpy(), atol=1e-12)
    target_permutation = torch.tensor(data.draw(st.permutations(range(targets.shape[0]))), dtype=torch.long)
    np.testing.assert_allclose(acquisition.epig(log_probs, targets[target_permutation]).numpy(), scores.numpy(),
                               atol=1e-12)


@FAST
@given(log_probs=log_probs_tensors(min_k=2), data=st.data())  # epig refuses K = 1, as select does
def test_epig_bounds(log_probs: torch.Tensor, data) -> None:
    """0 <= EPIG(x) <= BALD(x) (data processing: y - θ - y*), and <= the targets' mean BALD."""
    N = log_probs.shape[0]
    rows = torch.tensor(data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=5)))
    targets = log_probs[rows]
    scores = acquisition.epig(log_probs, targets)
    assert bool((scores >= 0).all())
    assert bool((scores <= acquisition.bald(log_probs) + 1e-12).all())
    assert bool((scores <= acquisition.bald(targets).mean() + 1e-12).all())
    # all K samples agree on the pool item -> nothing to learn about y*
    agreeing = log_probs[:, :1].expand_as(log_probs).contiguous()
    np.testing.assert_allclose(acquisition.epig(agreeing, targets).numpy(), 0.0, atol=1e-12)


@FAST
@given(log_probs=log_probs_tensors())
def test_bald_bounds(log_probs: torch.Tensor) -> None:
    C = log_probs.shape[2]
    bald = acquisition.bald(log_probs)
    entropy = acquisition.predictive_entropy(log_probs)
    assert bool((bald >= 0).all())
    assert bool((bald <= entropy + 1e-12).all())
    assert bool((entropy <= math.log(C) + 1e-12).all())
    assert bool((acquisition.expected_entropy(log_probs) <= entropy + 1e-12).all())
    for name in ("variation_ratios", "least_confidence"):
        values = getattr(acquisition, name)(log_probs)
        assert bool(((values >= -1e-12) & (values <= 1 - 1 / C + 1e-12)).all())


@FAST
@given(log_probs=log_probs_tensors(max_n=10, max_c=5, min_k=2))  # select refuses K = 1 for both
def test_batchbald_batch_of_one_is_balds_top_pick(log_probs: torch.Tensor) -> None:
    ours = select(log_probs, "batchbald", 1)
    assert ours.tolist() == select(log_probs, "bald", 1).tolist()
    np.testing.assert_allclose(ours.scores.numpy(), acquisition.bald(log_probs).max().numpy(), atol=0)


@settings(max_examples=10, deadline=None)
@given(log_probs=log_probs_tensors(max_n=4, max_k=4, max_c=3), seed=st.integers(0, 2**31 - 1))
def test_exact_and_sampled_joint_entropy_agree(log_probs: torch.Tensor, seed: int) -> None:
    exact = joint_entropy(log_probs)
    M = 4000
    estimate = joint_entropy(log_probs, num_configurations=M, generator=torch.Generator().manual_seed(seed))
    # the true standard error of the Monte Carlo mean of -log q(m), from the exact q
    log_q = torch.logsumexp(exact_log_joint(log_probs), dim=1) - math.log(log_probs.shape[1])
    variance = float((log_q.exp() * log_q**2).sum()) - exact**2
    K = log_probs.shape[1]
    draws = K * math.ceil(M / K)
    standard_error = math.sqrt(max(variance, 0.0) / draws)
    # configurations expected fewer than 10 times in the draws make the mean heavy-tailed (a
    # q = 1e-5 outcome is missing from 4,000 draws 96% of the time): the normal bound cannot
    # cover their share of the entropy, so it is allowed on top
    rare = log_q.exp() * draws < 10
    rare_share = float((log_q.exp() * -log_q)[rare].sum())
    assert abs(estimate - exact) <= 6 * standard_error + rare_share + 1e-9
    # and the sampler's draws follow q: their mean log-probability matches
    _, _, log_joint_M_K = sample_configurations(log_probs, M, generator=torch.Generator().manual_seed(seed))
    assert log_joint_M_K.shape == (K * math.ceil(M / K), K)
    assert exact == joint_entropy(log_probs)  # deterministic
    assert exact_log_joint(log_probs).shape[0] <= log_probs.shape[2] ** log_probs.shape[0]


@settings(max_examples=15, deadline=None)
@given(log_probs=log_probs_tensors(max_n=9), seed=st.integers(0, 2**31 - 1), data=st.data())
def test_every_strategy_picks_distinct_indices_and_is_reproducible(log_probs, seed, data) -> None:
    N = log_probs.shape[0]
    batch_size = data.draw(st.integers(1, N))
    labelled = data.draw(st.integers(0, 3))
    for name in acquisition.available_strategies():
        entry = acquisition.get_strategy(name)
        options = {"num_configurations": 200} if name == "batchbald" else {}
        options |= registry_inputs(entry, log_probs, seed, labelled)
        # a multi-label strategy reads per-label probabilities (a softmax over 3+ labels is refused)
        given = multilabel_log_probs(log_probs) if name.startswith("multilabel_") else log_probs
        if entry.disagreement and log_probs.shape[1] == 1:  # one sample: no disagreement to score
            with pytest.raises(ValueError, match=r"K, the function samples of log_probs_N_K_C .* must be >= 2"):
                select(given, name, batch_size, generator=torch.Generator().manual_seed(seed), **options)
            continue
        first = select(given, name, batch_size, generator=torch.Generator().manual_seed(seed), **options)
        again = select(given, name, batch_size, generator=torch.Generator().manual_seed(seed), **options)
        assert first.strategy == name
        assert len(first) == batch_size
        assert len(set(first.tolist())) == batch_size
        assert all(0 <= i < N for i in first.tolist())
        assert first.tolist() == again.tolist()
        assert torch.equal(first.scores, again.scores)
        assert first.indices.dtype == torch.long and first.scores.dtype == torch.float64


@settings(max_examples=15, deadline=None)
@given(
    log_probs=log_probs_tensors(max_n=9),
    costs=arrays(np.float64, 9, elements=st.floats(0, 5)),
    budget=st.floats(5, 12),
)
def test_budget_is_never_exceeded(log_probs, costs, budget) -> None:
    N = log_probs.shape[0]
    costs_N = torch.from_numpy(costs[:N].copy())
    if float(costs_N.min()) > budget:
        return
    for name in ("bald", "batchbald", "softrank_entropy", "random", "margin", "epig", "power_epig", "badge",
                 "typicality"):
        inputs = registry_inputs(acquisition.get_strategy(name), log_probs, 0, 2)
        if acquisition.get_strategy(name).disagreement and log_probs.shape[1] == 1:
            continue  # refused (test_every_strategy_picks_distinct_indices_and_is_reproducible)
        picked = select(log_probs, name, N, costs_N=costs_N, cost_budget=budget, generator=torch.Generator().manual_seed(0),
                        **inputs)
        assert float(costs_N[picked.indices].sum()) <= budget * (1 + 1e-9)
        assert len(picked) >= 1 and len(set(picked.tolist())) == len(picked)
