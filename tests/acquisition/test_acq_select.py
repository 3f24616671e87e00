"""select(), the registry, budgets, stochastic batches and BatchBALD against references and peers."""

from __future__ import annotations

import itertools
import math

import acq_reference as ref
import numpy as np
import pytest
import torch

from activebayes import acquisition
from activebayes.acquisition import Selection, select
from activebayes.acquisition.joint_entropy import (
    WeightedConfigurations,
    conditional_entropy_given_configurations,
    exact_log_joint,
    joint_entropy,
)
from activebayes.acquisition.multilabel import multilabel_batchbald, multilabel_log_probs
from activebayes.errors import InvalidArgumentError, InvalidTypeError


def random_log_probs(N: int, K: int, C: int, *, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g, dtype=torch.float64) * 5
    shift_N_1_C = torch.randn(N, 1, C, generator=g, dtype=torch.float64) * 1.5
    logits = torch.randn(N, K, C, generator=g, dtype=torch.float64) * scale_N_1_1 + shift_N_1_C
    return torch.log_softmax(logits, dim=-1).to(dtype)


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- joint entropy: brute-force NumPy reference ---


def numpy_joint_entropy(p_BKC: np.ndarray) -> float:
    B, K, C = p_BKC.shape
    total = 0.0
    for config in itertools.product(range(C), repeat=B):
        q = np.mean(np.prod([p_BKC[i, :, c] for i, c in enumerate(config)], axis=0))
        total -= q * np.log(q) if q > 0 else 0.0
    return total


def numpy_batch_mi(p_NKC: np.ndarray, indices: list[int]) -> float:
    conditional = ref.expected_entropy(p_NKC[indices]).sum()
    return numpy_joint_entropy(p_NKC[indices]) - conditional


def test_exact_joint_entropy_matches_brute_force() -> None:
    log_probs = random_log_probs(4, 5, 3, seed=1)
    expected = numpy_joint_entropy(log_probs.exp().numpy())
    assert joint_entropy(log_probs) == pytest.approx(expected, abs=1e-12)
    # one item: the predictive entropy
    assert joint_entropy(log_probs[:1]) == pytest.approx(float(acquisition.predictive_entropy(log_probs[:1])), abs=1e-12)


def test_conditional_given_configurations_is_chain_rule() -> None:
    log_probs = random_log_probs(6, 7, 3, seed=2)
    batch, candidates = log_probs[:3], log_probs[3:]
    configurations = WeightedConfigurations.from_log_joint(exact_log_joint(batch), None)
    ours = configurations.entropy + conditional_entropy_given_configurations(
        configurations, candidates, tile_elements=5
    )
    for n in range(3):
        expected = numpy_joint_entropy(torch.cat([batch, candidates[n : n + 1]]).exp().numpy())
        assert float(ours[n]) == pytest.approx(expected, abs=1e-12)


def test_sampled_joint_entropy_within_sampling_error() -> None:
    log_probs = random_log_probs(5, 6, 3, seed=3)
    exact = joint_entropy(log_probs)
    estimates = [joint_entropy(log_probs, num_configurations=3000, generator=gen(s)) for s in range(8)]
    # standard error of the mean over 8 x 3000 draws is far below 0.02 here
    assert np.mean(estimates) == pytest.approx(exact, abs=0.02)
    assert max(abs(e - exact) for e in estimates) < 0.08


# --- BatchBALD ---


def test_batchbald_exact_region_matches_brute_force() -> None:
    log_probs = random_log_probs(12, 6, 3, seed=4)
    selection = select(log_probs, "batchbald", 4, num_configurations=1000)
    probs = log_probs.exp().numpy()
    for b in range(1, 5):
        expected = numpy_batch_mi(probs, selection.indices[:b].tolist())
        assert float(selection.scores[b - 1]) == pytest.approx(expected, abs=1e-10)
    # greedy: each pick maximises the joint MI among the remaining items
    chosen = selection.indices[:2].tolist()
    best = max(
        (numpy_batch_mi(probs, chosen + [n]), n) for n in range(12) if n not in chosen
    )
    assert best[1] == int(selection.indices[2])


def test_batchbald_matches_batchbald_redux_exact_region() -> None:
    bbr = pytest.importorskip("batchbald_redux.batchbald")
    log_probs = random_log_probs(150, 10, 4, seed=5)
    ours = select(log_probs, "batchbald", 6, num_configurations=5000)
    theirs = bbr.get_batchbald_batch(log_probs, 6, 5000, dtype=torch.float64)
    assert ours.indices.tolist() == theirs.indices
    np.testing.assert_allclose(ours.scores.numpy(), np.array(theirs.scores), atol=1e-10)
    bald_theirs = bbr.get_bald_batch(log_probs, 7)
    bald_ours = select(log_probs, "bald", 7)
    assert bald_ours.indices.tolist() == bald_theirs.indices
    np.testing.assert_allclose(bald_ours.scores.numpy(), np.array(bald_theirs.scores), atol=1e-10)


def test_batchbald_sampled_region_agrees_with_batchbald_redux() -> None:
    """Beyond the exact region both estimate; the first picks (exact) agree, later scores are close."""
    bbr = pytest.importorskip("batchbald_redux.batchbald")
    log_probs = random_log_probs(120, 10, 5, seed=6, dtype=torch.float32)
    ours = select(log_probs, "batchbald", 5, num_configurations=200, generator=gen(0))
    torch.manual_seed(0)
    theirs = bbr.get_batchbald_batch(log_probs, 5, 200)
    assert ours.indices[:4].tolist() == theirs.indices[:4]  # 5^3 = 125 <= 200: exact for picks 1..4
    np.testing.assert_allclose(ours.scores.numpy()[:4], np.array(theirs.scores[:4]), atol=1e-4)
    assert abs(float(ours.scores[4]) - theirs.scores[4]) < 0.1


def test_batchbald_seed_004_example() -> None:
    log_probs = torch.from_numpy(ref.seed_004_probs()).log()
    selection = select(log_probs, "batchbald", 4, num_configurations=1000, generator=gen(0))
    assert sorted(selection.tolist()) == [0, 1, 2, 3]
    expected = [numpy_batch_mi(log_probs.exp().numpy(), selection.tolist()[:b]) for b in range(1, 5)]
    np.testing.assert_allclose(selection.scores.numpy(), expected, atol=1e-10)


def test_batchbald_float32_and_chunking_and_switch_point() -> None:
    log_probs = random_log_probs(80, 8, 3, seed=7)
    reference = select(log_probs, "batchbald", 5, num_configurations=10_000)
    chunked = select(log_probs, "batchbald", 5, num_configurations=10_000, chunk_size=7)
    single = select(log_probs.float(), "batchbald", 5, num_configurations=10_000)
    assert chunked.tolist() == reference.tolist() == single.tolist()
    np.testing.assert_allclose(single.scores.numpy(), reference.scores.numpy(), atol=1e-4)
    sampled = select(log_probs, "batchbald", 5, num_configurations=20_000, max_exact_configs=3, generator=gen(1))
    assert sampled.indices[:2].tolist() == reference.indices[:2].tolist()  # 3^1 configs still exact
    np.testing.assert_allclose(sampled.scores.numpy(), reference.scores.numpy(), atol=0.03)


def test_batchbald_duplicates_never_repeat() -> None:
    base = random_log_probs(5, 6, 3, seed=8)
    log_probs = torch.cat([base, base, base])  # every item three times
    selection = select(log_probs, "batchbald", 10, num_configurations=50, generator=gen(0))
    assert len(set(selection.tolist())) == 10
    # a copy of an input is a second, independent label: it still carries information
    exact = select(log_probs, "batchbald", 5, num_configurations=1000)  # 3^4 configurations: exact
    expected = [numpy_batch_mi(log_probs.exp().numpy(), exact.tolist()[:b]) for b in range(1, 6)]
    np.testing.assert_allclose(exact.scores.numpy(), expected, atol=1e-10)
    assert bool((exact.scores.diff() >= 0).all())
    # with one-hot samples a copy adds nothing, and BatchBALD prefers any item that does
    one_hot = torch.nn.functional.one_hot(base.argmax(-1), 3).double().log()
    pool = torch.cat([one_hot, one_hot])
    picks = select(pool, "batchbald", 3, num_configurations=1000)
    gains = picks.scores.diff()
    assert len({int(i) % 5 for i in picks.indices}) == 3 or bool((gains[-1:] == 0).all())


def test_batchbald_one_hot_and_k1() -> None:
    probs = torch.zeros(6, 4, 3, dtype=torch.float64)
    for n in range(6):
        probs[n, torch.arange(4), torch.tensor([n % 3, (n + 1) % 3, n % 3, 2])] = 1
    selection = select(probs.log(), "batchbald", 3)
    expected = [numpy_batch_mi(probs.numpy(), selection.tolist()[:b]) for b in range(1, 4)]
    np.testing.assert_allclose(selection.scores.numpy(), expected, atol=1e-12)


# --- registry and select ---


def test_registry_names_and_aliases() -> None:
    names = acquisition.available_strategies()
    for name in ("random", "entropy", "bald", "jackknife_bald", "variation_ratios", "mean_std", "margin",
                 "least_confidence", "batchbald", "power_bald", "softmax_bald", "softrank_bald", "power_entropy"):
        assert name in names
    assert acquisition.get_strategy("max_entropy").name == "entropy"
    assert acquisition.get_strategy("predictive_entropy").name == "entropy"
    assert acquisition.get_strategy("random").needs_predictions is False
    assert acquisition.get_strategy("bald").needs_predictions is True
    with pytest.raises(ValueError, match="unknown strategy 'nope'; expected one of: .*batchbald"):
        select(random_log_probs(4, 2, 2), "nope", 1)
    # a near miss names the closest strategy; case does not matter for the hint
    with pytest.raises(ValueError, match=r"unknown strategy 'BatchBALD' \(did you mean 'batchbald'"):
        select(random_log_probs(4, 2, 2), "BatchBALD", 1)
    with pytest.raises(ValueError, match=r"unknown strategy 'power_bal' \(did you mean 'power_bald'"):
        select(random_log_probs(4, 2, 2), "power_bal", 1)


@pytest.mark.parametrize(
    "strategy, score",
    [
        ("entropy", ref.predictive_entropy),
        ("bald", ref.bald),
        ("jackknife_bald", ref.jackknife_bald),
        ("variation_ratios", ref.variation_ratios),
        ("mean_std", ref.mean_std),
        ("margin", ref.margin),
        ("least_confidence", ref.least_confidence),
    ],
)
def test_topk_strategies_take_the_highest_scores(strategy, score) -> None:
    log_probs = random_log_probs(64, 5, 4, seed=9)
    expected_scores = score(log_probs.exp().numpy())
    selection = select(log_probs, strategy, 6)
    assert isinstance(selection, Selection) and selection.strategy == strategy
    np.testing.assert_allclose(selection.scores.numpy(), expected_scores[selection.indices.numpy()], atol=1e-10)
    np.testing.assert_allclose(selection.scores.numpy(), np.sort(expected_scores)[::-1][:6], atol=1e-10)


def test_random_with_pool_size_or_predictions() -> None:
    by_size = select(50, "random", 7, generator=gen(3))
    by_predictions = select(random_log_probs(50, 2, 3), "random", 7, generator=gen(3))
    assert by_size.tolist() == by_predictions.tolist()
    assert len(set(by_size.tolist())) == 7 and max(by_size.tolist()) < 50
    assert select(50, "random", 7, generator=gen(4)).tolist() != by_size.tolist()
    with pytest.raises(TypeError, match="needs predictions"):
        select(50, "bald", 3)


@pytest.mark.parametrize("strategy", ["power_bald", "softmax_bald", "softrank_bald", "power_entropy", "softmax_entropy"])
def test_stochastic_strategies_seeded_and_without_replacement(strategy: str) -> None:
    log_probs = random_log_probs(40, 6, 3, seed=10)
    a = select(log_probs, strategy, 15, generator=gen(1))
    b = select(log_probs, strategy, 15, generator=gen(1))
    c = select(log_probs, strategy, 15, generator=gen(2))
    assert a.tolist() == b.tolist() and a.tolist() != c.tolist()
    assert len(set(a.tolist())) == 15
    base = acquisition.bald if strategy.endswith("bald") else acquisition.predictive_entropy
    np.testing.assert_allclose(a.scores.numpy(), base(log_probs)[a.indices].numpy(), atol=0)


def test_stochastic_sampling_distribution() -> None:
    """First pick frequencies follow p ∝ s^β / exp(βs) / rank^-β (Gumbel-top-k is exact sampling)."""
    scores = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    from activebayes.acquisition.selection import stochastic_order

    expected = {
        "power": scores**2 / (scores**2).sum(),
        "softmax": torch.softmax(2 * scores, 0),
        "softrank": torch.tensor([4.0, 3, 2, 1]) ** -2 / (torch.tensor([4.0, 3, 2, 1]) ** -2).sum(),
    }
    g = gen(0)
    for mode, probs in expected.items():
        firsts = torch.tensor([int(stochastic_order(scores, mode, 2.0, g)[0]) for _ in range(4000)])
        freq = torch.bincount(firsts, minlength=4).double() / 4000
        np.testing.assert_allclose(freq.numpy(), probs.numpy(), atol=0.03)
    # beta = 0: uniform; zero-weight items come last under power sampling
    order = stochastic_order(torch.tensor([0.0, 0.5, 0.0, 0.2]), "power", 1.0, g)
    assert sorted(order[:2].tolist()) == [1, 3]


def test_power_sampling_at_beta_zero_is_uniform_even_over_zero_scores() -> None:
    """β = 0 is uniform sampling (0^0 = 1): items of score exactly 0 are not put first.

    Three items are sure of one class in every sample (BALD exactly 0); at β = 0 each of the 10 items must
    be in a batch of 3 with probability 0.3 (as the streamed path already sampled them).
    """
    log_probs = random_log_probs(10, 6, 3, seed=4)
    log_probs[:3] = -math.inf
    log_probs[:3, :, 0] = 0.0  # sure of class 0 in every sample: BALD is exactly 0
    assert bool((acquisition.bald(log_probs)[:3] == 0).all())
    draws = 1500
    counts = np.zeros(10)
    for seed in range(draws):
        counts[select(log_probs, "power_bald", 3, generator=gen(seed), beta=0.0).tolist()] += 1
    np.testing.assert_allclose(counts / draws, 0.3, atol=0.05)
    # a free item under cost_aware has an infinite priority: at β = 0 it is not NaN-first either
    from activebayes.acquisition.selection import stochastic_log_weights

    for mode in ("power", "softmax", "softrank"):
        weights = stochastic_log_weights(torch.tensor([0.0, math.inf, 0.3]), mode, 0.0)
        assert weights.tolist() == [0.0, 0.0, 0.0]


def test_one_function_sample_scores_exactly_zero() -> None:
    """K = 1: no disagreement between samples, so every item's BALD is exactly 0 (a measure, not a batch:
    the batch functions refuse K = 1, see below)."""
    log_probs = random_log_probs(12, 1, 4, seed=9)
    assert acquisition.bald(log_probs).tolist() == [0.0] * 12


def test_budget_constraints() -> None:
    log_probs = random_log_probs(30, 5, 3, seed=11)
    scores = acquisition.bald(log_probs)
    costs = torch.linspace(1.0, 3.0, 30, dtype=torch.float64)
    for strategy in ("bald", "batchbald", "power_bald", "random"):
        selection = select(log_probs, strategy, 10, costs_N=costs, cost_budget=7.5, generator=gen(0))
        assert float(costs[selection.indices].sum()) <= 7.5
        assert 1 <= len(selection) <= 10 and len(set(selection.tolist())) == len(selection)
    # greedy by score, skipping what no longer fits
    selection = select(log_probs, "bald", 10, costs_N=costs, cost_budget=7.5)
    order = torch.argsort(scores, descending=True).tolist()
    remaining, expected = 7.5, []
    for index in order:
        if costs[index] <= remaining and len(expected) < 10:
            expected.append(index)
            remaining -= float(costs[index])
    assert selection.tolist() == expected
    # cost-aware: score per unit cost
    aware = select(log_probs, "bald", 3, costs_N=costs, cost_budget=100.0, cost_aware=True)
    assert aware.tolist() == torch.argsort(scores / costs, descending=True)[:3].tolist()
    # BatchBALD's first pick respects the budget too
    cheap = select(log_probs, "batchbald", 2, costs_N=costs, cost_budget=1.05)
    assert len(cheap) == 1 and float(costs[cheap.indices].sum()) <= 1.05


BAD_SELECT = [
    (dict(batch_size=0), ValueError, "batch_size must be >= 1"),
    (dict(batch_size=31), ValueError, "batch_size must be <= the pool size N=30"),
    (dict(batch_size=2.5), TypeError, "batch_size must be an int"),
    (dict(costs_N=-torch.ones(30), cost_budget=3.0), ValueError, "costs_N must be >= 0"),
    (dict(costs_N=torch.ones(29), cost_budget=3.0), ValueError, "costs_N must have shape"),
    (dict(costs_N=torch.ones(30) * 2, cost_budget=1.0), ValueError, "cost_budget 1 is too small"),
    (dict(costs_N=torch.ones(30), cost_budget=-1.0), ValueError, "cost_budget must be a finite number >= 0"),
    (dict(costs_N=torch.ones(30)), ValueError, "budget is missing"),
    (dict(cost_budget=3.0), ValueError, "costs_N is missing"),
    (dict(cost_aware=True), ValueError, "cost_aware=True needs costs_N"),
    (dict(no_such_option=1), TypeError, "unknown option"),
]


@pytest.mark.parametrize("kwargs, error, message", BAD_SELECT)
@pytest.mark.parametrize("strategy", ["bald", "batchbald"])
def test_select_errors(strategy: str, kwargs: dict, error: type, message: str) -> None:
    kwargs = dict(kwargs)
    batch_size = kwargs.pop("batch_size", 3)
    with pytest.raises(error, match=message):
        select(random_log_probs(30, 4, 3, seed=12), strategy, batch_size, **kwargs)


def test_numpy_integers_count_as_ints() -> None:
    """``np.arange`` and NumPy arithmetic yield ``np.int64``: as batch size and as seed it is the
    Python int it holds (it was refused with "batch_size must be an int")."""
    import numpy as np

    log_probs = random_log_probs(30, 4, 3, seed=13)
    for strategy in ("bald", "batchbald", "power_bald", "random"):
        ours = select(log_probs, strategy, np.int64(4), generator=np.int64(7))
        reference = select(log_probs, strategy, 4, generator=7)
        assert ours.tolist() == reference.tolist() and len(ours) == 4
    with pytest.raises(TypeError, match="batch_size must be an int, got float64"):
        select(log_probs, "bald", np.float64(4.0))
    with pytest.raises(TypeError, match="batch_size must be an int, got bool"):
        select(log_probs, "bald", True)


def test_select_value_errors() -> None:
    good = random_log_probs(10, 4, 3)
    with pytest.raises(ValueError, match="must have 3 dimensions"):
        select(good[0], "bald", 1)
    with pytest.raises(ValueError, match="empty"):
        select(good[:0], "batchbald", 1)
    bad = good.clone()
    bad[3, 1, 1] = float("nan")
    for strategy in ("bald", "batchbald", "softmax_bald"):
        with pytest.raises(ValueError, match="NaN"):
            select(bad, strategy, 2)
    with pytest.raises(ValueError, match="beta must be a finite number >= 0"):
        select(good, "power_bald", 2, beta=-1.0)
    acquisition.register_strategy("power_margin_test", acquisition.stochastic_strategy(acquisition.margin, "power"))
    try:
        with pytest.raises(ValueError, match="power sampling needs non-negative scores"):
            select(good, "power_margin_test", 2)
    finally:
        acquisition.unregister_strategy("power_margin_test")
    assert "power_margin_test" not in acquisition.available_strategies()
    with pytest.raises(ValueError, match="already registered"):
        acquisition.register_strategy("bald", acquisition.topk_strategy(acquisition.bald))
    with pytest.raises(ValueError, match="num_configurations must be >= 1"):
        select(good, "batchbald", 2, num_configurations=0)


def test_register_custom_score() -> None:
    def neg_entropy(log_probs_N_K_C, **kwargs):
        return -acquisition.predictive_entropy(log_probs_N_K_C, **kwargs)

    acquisition.register_strategy("min_entropy_test", acquisition.topk_strategy(neg_entropy), aliases=("lowest_entropy_test",))
    try:
        log_probs = random_log_probs(20, 3, 3)
        picked = select(log_probs, "lowest_entropy_test", 2)
    finally:
        acquisition.unregister_strategy("min_entropy_test")
    assert not {"min_entropy_test", "lowest_entropy_test"} & set(acquisition.available_strategies(aliases=True))
    assert picked.tolist() == torch.topk(-acquisition.predictive_entropy(log_probs), 2).indices.tolist()


def test_a_plain_score_function_is_a_strategy_and_streams() -> None:
    """The README's two lines: a function of log_probs_N_K_C alone, no keywords."""

    def top_two_gap(log_probs_N_K_C):
        mean_probs_N_C = log_probs_N_K_C.double().exp().mean(dim=1)
        top_N_2 = mean_probs_N_C.topk(2, dim=-1).values
        return -(top_N_2[:, 0] - top_N_2[:, 1])

    log_probs = random_log_probs(30, 6, 4, seed=21)
    mean_probs = log_probs.double().exp().mean(dim=1).numpy()
    top2 = np.sort(mean_probs, axis=1)[:, -2:]
    expected = np.argsort(-(top2[:, 0] - top2[:, 1]), kind="stable")[:5]  # float64 reference: smallest gap first
    entry = acquisition.register_strategy("plain_gap_test", acquisition.topk_strategy(top_two_gap))
    acquisition.register_strategy("plain_gap_softmax_test", acquisition.stochastic_strategy(top_two_gap, "softmax"))
    try:
        assert entry.score_fn is not None and entry.mode == "topk"  # so score_pool / Ray can stream it
        picked = select(log_probs, "plain_gap_test", 5, device="cpu", chunk_size=7)
        assert sorted(picked.tolist()) == sorted(expected.tolist())
        sampled = select(log_probs, "plain_gap_softmax_test", 5, generator=gen(3), beta=0.0)
        assert len(set(sampled.tolist())) == 5
        assert acquisition.get_strategy("plain_gap_softmax_test").mode == "softmax"
    finally:
        acquisition.unregister_strategy("plain_gap_test")
        acquisition.unregister_strategy("plain_gap_softmax_test")


@pytest.mark.parametrize("score, message", [
    (lambda log_probs_N_K_C: log_probs_N_K_C[:, 0, 0][:-1], r"must return a tensor of shape \(30,\).*got shape \(29,\)"),
    (lambda log_probs_N_K_C: log_probs_N_K_C[:, 0, 0] * float("nan"), "NaN or infinite"),
    (lambda log_probs_N_K_C: 3.0, "must return a tensor.*got float"),
])
def test_a_score_function_that_returns_the_wrong_thing_is_named(score, message) -> None:
    acquisition.register_strategy("bad_score_test", acquisition.topk_strategy(score))
    try:
        with pytest.raises(ValueError, match=message):
            select(random_log_probs(30, 3, 3), "bad_score_test", 2)
    finally:
        acquisition.unregister_strategy("bad_score_test")
    with pytest.raises(ValueError, match="mode must be one of power, softmax, softrank"):
        acquisition.stochastic_strategy(score, "topk")


def test_device_argument_runs_and_returns_cpu_results() -> None:
    log_probs = random_log_probs(40, 5, 4, seed=13)
    for strategy in ("bald", "batchbald", "softmax_entropy"):
        here = select(log_probs, strategy, 4, generator=gen(0))
        there = select(log_probs, strategy, 4, generator=gen(0), device="cpu")
        assert here.tolist() == there.tolist() and there.indices.device.type == "cpu"
    assert acquisition.bald(log_probs, device="cpu").device == log_probs.device


# --- options and inputs are checked against the strategy's entry (by type, never by message text) ---


def test_unknown_option_is_rejected_before_the_strategy_runs() -> None:
    calls = []

    def recording(predictions, batch_size, *, name, generator, plan, device, alpha: float = 1.0, chunk_size=None):
        calls.append(alpha)
        return acquisition.topk_strategy(acquisition.bald)(predictions, batch_size, name=name, generator=generator,
                                                           plan=plan, device=device)

    entry = acquisition.register_strategy("recording_test", recording)
    try:
        assert entry.options == ("alpha", "chunk_size")
        log_probs = random_log_probs(12, 3, 3)
        with pytest.raises(TypeError, match=r"strategy 'recording_test' got an unknown option 'beta'; "
                                            r"its options are: alpha, chunk_size") as caught:
            select(log_probs, "recording_test", 2, beta=2.0)
        assert isinstance(caught.value, InvalidTypeError) and calls == []
        select(log_probs, "recording_test", 2, alpha=3.0)
        assert calls == [3.0]
    finally:
        acquisition.unregister_strategy("recording_test")
    with pytest.raises(InvalidTypeError, match="strategy 'random' got an unknown option 'beta', 'num_samples'; "
                                               "its options are: cost_aware"):
        select(10, "random", 2, beta=1.0, num_samples=3)
    with pytest.raises(InvalidTypeError, match="strategy 'batchbald' got an unknown option 'beta'; its options are: "
                                               "chunk_size, cost_aware, dtype, max_exact_configs, num_configurations, progress"):
        select(random_log_probs(12, 3, 3), "batchbald", 2, beta=1.0)


def test_a_type_error_inside_a_strategy_is_not_rewritten() -> None:
    """select() no longer catches TypeError and reads its message: a bug inside a strategy surfaces as it is."""

    def broken(predictions, batch_size, *, name, generator, plan, device):
        raise TypeError("f() got an unexpected keyword argument 'x'")  # looks like an option error; is a bug

    def anything(predictions, batch_size, **options):
        return Selection(torch.arange(batch_size), torch.zeros(batch_size, dtype=torch.float64), options["name"])

    acquisition.register_strategy("broken_test", broken)
    acquisition.register_strategy("anything_test", anything)
    try:
        with pytest.raises(TypeError) as caught:
            select(random_log_probs(5, 2, 2), "broken_test", 1)
        assert str(caught.value) == "f() got an unexpected keyword argument 'x'"
        assert not isinstance(caught.value, InvalidTypeError)
        assert acquisition.get_strategy("anything_test").options is None  # **options: any option, unchecked
        assert select(random_log_probs(5, 2, 2), "anything_test", 2, whatever=1).tolist() == [0, 1]
    finally:
        acquisition.unregister_strategy("broken_test")
        acquisition.unregister_strategy("anything_test")


def test_registration_checks_inputs_and_signature() -> None:
    top = acquisition.topk_strategy(acquisition.bald)
    with pytest.raises(ValueError, match="inputs must be names from log_probs, target_log_probs, features, "
                                         "labelled_features, got 'pixels'"):
        acquisition.register_strategy("bad_test", top, inputs=("log_probs", "pixels"))
    with pytest.raises(ValueError, match=r"needs_predictions=False contradicts inputs=\('log_probs',\)"):
        acquisition.register_strategy("bad_test", top, needs_predictions=False, inputs=("log_probs",))
    with pytest.raises(TypeError, match="fn must accept the keyword arguments name, generator, plan, device, "
                                        "features_N_D; it lacks features_N_D"):
        acquisition.register_strategy("bad_test", top, inputs=("log_probs", "features"))
    with pytest.raises(TypeError, match="fn must take two positional arguments"):
        acquisition.register_strategy("bad_test", lambda predictions, *, name, generator, plan, device: None)
    with pytest.raises(ValueError, match="'log_probs' cannot be optional"):
        acquisition.register_strategy("bad_test", top, inputs=(), optional_inputs=("log_probs",))
    assert "bad_test" not in acquisition.available_strategies()


SELECT_INPUT_ERRORS = [
    ("badge", {}, InvalidTypeError, r"strategy 'badge' needs features_N_D \[N, D\]"),
    ("typicality", {"features_N_D": torch.randn(30, 4)}, InvalidTypeError,
     r"strategy 'typicality' needs labelled_features_L_D \[L, D\]"),
    ("bald", {"features_N_D": torch.randn(30, 4)}, InvalidTypeError,
     "strategy 'bald' does not read features_N_D; it reads: log_probs_N_K_C"),
    ("random", {"target_log_probs_M_K_C": random_log_probs(3, 4, 3)}, InvalidTypeError,
     "strategy 'random' does not read target_log_probs_M_K_C; it reads: only the pool size"),
    ("badge", {"features_N_D": torch.randn(29, 4)}, ValueError, r"features_N_D must have one row per pool item \(30\)"),
    ("badge", {"features_N_D": torch.randn(30)}, ValueError, "features_N_D must have 2 dimensions"),
    ("badge", {"features_N_D": torch.full((30, 4), float("nan"))}, ValueError, "features_N_D must be finite"),
    ("badge", {"features_N_D": torch.ones(30, 4, dtype=torch.long)}, TypeError, "features_N_D must be a floating point"),
    ("typicality", {"features_N_D": torch.randn(30, 4), "labelled_features_L_D": torch.randn(2, 5)}, ValueError,
     "labelled_features_L_D must have D=4 feature columns"),
    ("epig", {"target_log_probs_M_K_C": random_log_probs(3, 5, 3)}, ValueError,
     r"target_log_probs_M_K_C must have the pool's K=4 function samples and C=3 classes"),
    ("epig", {"target_log_probs_M_K_C": random_log_probs(3, 4, 3).exp()}, ValueError,
     "target_log_probs_M_K_C must hold log-probabilities"),
]


@pytest.mark.parametrize("strategy, inputs, error, message", SELECT_INPUT_ERRORS)
def test_select_checks_inputs(strategy, inputs, error, message) -> None:
    with pytest.raises(error, match=message):
        select(random_log_probs(30, 4, 3, seed=12), strategy, 3, **inputs)


def test_strategies_without_predictions_take_the_pool_size() -> None:
    features = torch.randn(40, 3, generator=gen(0))
    by_size = select(40, "typicality", 4, features_N_D=features, labelled_features_L_D=features[:0], generator=gen(1))
    by_predictions = select(random_log_probs(40, 2, 3), "typicality", 4, features_N_D=features,
                            labelled_features_L_D=features[:0], generator=gen(1))
    assert by_size.tolist() == by_predictions.tolist() and by_size.strategy == "typicality"
    with pytest.raises(ValueError, match=r"features_N_D must have one row per pool item \(41\)"):
        select(41, "typicality", 4, features_N_D=features, labelled_features_L_D=features[:0])
    with pytest.raises(TypeError, match="strategy 'badge' needs predictions"):
        select(40, "badge", 4, features_N_D=features)


@pytest.mark.parametrize("strategy", ["batchbald", "power_bald", "random", "epig", "multilabel_bald"])
def test_select_takes_an_int_seed_and_names_a_wrong_generator(strategy: str) -> None:
    """Every strategy checks ``generator`` up front, even where its first picks draw nothing (exact BatchBALD)."""
    log_probs = random_log_probs(30, 5, 4, seed=13)
    if strategy.startswith("multilabel"):  # per-label log-sigmoids
        log_probs = multilabel_log_probs(torch.randn(30, 5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3)))
    first = select(log_probs, strategy, 3, generator=7)
    again = select(log_probs, strategy, 3, generator=7)
    assert torch.equal(first.indices, again.indices)
    with pytest.raises(InvalidTypeError, match="generator must be a torch.Generator, an int seed or None, got str"):
        select(log_probs, strategy, 3, generator="abc")


def test_batchbald_names_a_dtype_that_is_not_floating_point() -> None:
    with pytest.raises(InvalidTypeError, match="dtype must be a floating point torch.dtype .* got torch.int64"):
        acquisition.batchbald(random_log_probs(10, 4, 3), 2, dtype=torch.int64)


@pytest.mark.skipif(torch.cuda.device_count() > 7, reason="the machine has a cuda:7")
def test_a_device_the_machine_lacks_is_named() -> None:
    for scorer in (lambda lp: acquisition.bald(lp, device="cuda:7"), lambda lp: select(lp, "batchbald", 2, device="cuda:7"),
                   lambda lp: acquisition.bald(lp, device="bogus")):
        with pytest.raises(ValueError, match=r"device must be a device this machine has \(.*\), got '(cuda:7|bogus)'"):
            scorer(random_log_probs(10, 4, 3))


@pytest.mark.skipif(torch.cuda.device_count() > 7, reason="the machine has a cuda:7")
@pytest.mark.parametrize("device", ["cuda:7", "bogus"])
def test_every_function_with_a_device_names_one_the_machine_lacks(device: str) -> None:
    # these moved their tensors with torch's own .to(device): an AssertionError or torch's list of device types
    features = torch.randn(10, 3, generator=torch.Generator().manual_seed(0))
    multilabel = multilabel_log_probs(torch.randn(10, 4, 3, generator=torch.Generator().manual_seed(1)))
    calls = [
        lambda: acquisition.random_scores(5, device=device),
        lambda: acquisition.kmeans(features, 2, device=device),
        lambda: acquisition.typicality(features, features[:0], 2, device=device),
        lambda: acquisition.badge_from_factors(acquisition.loss_gradient_factors(random_log_probs(10, 4, 3)), features,
                                               2, device=device),
        lambda: select(10, "typicality", 2, features_N_D=features, labelled_features_L_D=features[:0],
                       device=device),
        lambda: select(multilabel, "multilabel_bald", 2, device=device),
        lambda: select(10, "random", 2, device=device),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=rf"^device must be a device this machine has \(.*\), got '{device}'$"):
            call()


@pytest.mark.parametrize("strategy", ["bald", "batchbald", "power_bald", "epig", "variation_ratios", "mean_std",
                                      "jackknife_bald", "multilabel_bald", "multilabel_batchbald"])
def test_one_function_sample_is_refused_where_the_strategy_scores_disagreement(strategy) -> None:
    # K = 1: the mutual information is 0 for every item, so top-k would return the pool's first items
    log_probs = random_log_probs(12, 1, 3)
    assert torch.equal(acquisition.bald(log_probs), torch.zeros(12, dtype=torch.float64))
    if strategy.startswith("multilabel"):
        log_probs = torch.nn.functional.logsigmoid(torch.randn(12, 1, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^K, the function samples of log_probs_N_K_C \[12, 1, 3\], must be >= 2 "
                                         rf"for strategy '{strategy}', which scores how the function samples disagree"):
        select(log_probs, strategy, 3, generator=0)


DIRECT_FUNCTIONS = {
    "batchbald": lambda lp: acquisition.batchbald(lp, 3, generator=0).scores,
    "epig": lambda lp: acquisition.epig(lp, lp[:4]),
    "multilabel_batchbald": lambda lp: multilabel_batchbald(lp, 3, generator=0).scores,
}


@pytest.mark.parametrize("strategy", list(DIRECT_FUNCTIONS))
def test_one_function_sample_is_refused_by_the_functions_as_by_select(strategy) -> None:
    """``batchbald`` / ``epig`` / ``multilabel_batchbald`` called directly with K = 1 returned zeros (or 2e-16
    rounding noise) and the pool's first items; now the error ``select`` gives, word for word."""
    log_probs = random_log_probs(12, 1, 3)
    if strategy.startswith("multilabel"):
        log_probs = torch.nn.functional.logsigmoid(torch.randn(12, 1, 3, generator=gen(2), dtype=torch.float64))
    with pytest.raises(InvalidArgumentError) as by_select:
        select(log_probs, strategy, 3, generator=0)
    with pytest.raises(InvalidArgumentError) as by_function:
        DIRECT_FUNCTIONS[strategy](log_probs)
    assert str(by_function.value) == str(by_select.value)
    assert "one sample has no disagreement" in str(by_function.value)
    two_samples = torch.cat([log_probs, log_probs.flip(0)], dim=1)
    assert bool((DIRECT_FUNCTIONS[strategy](two_samples) > 0).any())


def test_one_function_sample_is_enough_for_a_strategy_of_the_predictive() -> None:
    from activebayes.acquisition.strategies import get_strategy, register_strategy

    log_probs = random_log_probs(12, 1, 3)
    for strategy in ("entropy", "margin", "least_confidence", "power_entropy"):
        assert not get_strategy(strategy).disagreement
        assert len(select(log_probs, strategy, 3, generator=0).indices) == 3
    with pytest.raises(ValueError, match="mean_only and disagreement exclude each other"):
        register_strategy("both_ways", lambda lp, b, **kw: None, mean_only=True, disagreement=True)


def test_a_pool_size_as_a_zero_dimensional_tensor_says_to_pass_an_int() -> None:
    with pytest.raises(TypeError, match=r"the pool size as an int .* got a 0-d tensor \(300\): pass int\(\.\.\.\)"):
        select(torch.tensor(300), "random", 5, generator=0)
    assert len(select(int(torch.tensor(300)), "random", 5, generator=0).indices) == 5


@pytest.mark.parametrize("strategy", ["random", "typicality"])
def test_a_pool_size_from_numpy_is_a_pool_size(strategy: str) -> None:
    # np.int64(300) (a count NumPy returns) was told 'log_probs_N_K_C must be a torch.Tensor, got int64'
    features = torch.randn(300, 4, generator=torch.Generator().manual_seed(0))
    inputs = {"features_N_D": features, "labelled_features_L_D": features[:0]} if strategy == "typicality" else {}
    picks = select(np.int64(300), strategy, 5, generator=0, **inputs)
    assert torch.equal(picks.indices, select(300, strategy, 5, generator=0, **inputs).indices)


def test_joint_entropy_names_its_input_by_the_batch() -> None:
    # the shape it asked for was the pool's: '[N, K, C] (pool items, function samples, classes)'
    with pytest.raises(ValueError, match=r"^log_probs_B_K_C must have 3 dimensions \[B, K, C\] \(batch items, "):
        acquisition.joint_entropy(torch.zeros(3, 2))


@pytest.mark.parametrize("strategy", ["bald", "power_bald", "random", "batchbald", "epig"])
def test_a_switch_option_must_be_a_bool(strategy: str) -> None:
    # cost_aware="false" was truthy: the batch was ranked by score per unit cost without a word
    log_probs, costs = random_log_probs(12, 4, 3), torch.linspace(1, 2, 12)
    with pytest.raises(TypeError, match=r"^cost_aware must be a bool \(True or False\), got str 'false'$"):
        select(log_probs, strategy, 3, generator=0, costs_N=costs, cost_budget=5.0, cost_aware="false")
    assert select(log_probs, strategy, 3, generator=0, costs_N=costs, cost_budget=5.0, cost_aware=np.bool_(True))


def test_batchbald_names_switches_that_are_not_bools() -> None:
    with pytest.raises(TypeError, match=r"^progress must be a bool \(True or False\), got str 'no'$"):
        acquisition.batchbald(random_log_probs(12, 4, 3), 2, progress="no")  # showed a progress bar
    with pytest.raises(TypeError, match=r"^cost_aware must be a bool \(True or False\), got int 1$"):
        acquisition.batchbald(random_log_probs(12, 4, 3), 2, costs_N=torch.ones(12), cost_budget=3.0, cost_aware=1)
