"""EPIG against a worked example, an independent NumPy float64 loop, the joint-entropy identity, and its strategies."""

from __future__ import annotations

import doctest
import importlib
import math

import acq_reference as ref
import numpy as np
import pytest
import torch

from activebayes import acquisition
from activebayes.acquisition import epig, select

epig_module = importlib.import_module("activebayes.acquisition.epig")  # the module, not the function


def random_log_probs(N: int, K: int, C: int, *, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g, dtype=torch.float64) * 5
    shift_N_1_C = torch.randn(N, 1, C, generator=g, dtype=torch.float64) * 1.5
    logits = torch.randn(N, K, C, generator=g, dtype=torch.float64) * scale_N_1_1 + shift_N_1_C
    return torch.log_softmax(logits, dim=-1).to(dtype)


def test_worked_example_by_hand() -> None:
    r"""K = 2 function samples, C = 2 classes, one pool item x and one target x*.

    p_1(y|x) = (0.9, 0.1), p_2(y|x) = (0.2, 0.8); p_1(y*|x*) = (0.6, 0.4), p_2(y*|x*) = (0.3, 0.7).

    p(y, y*) = 1/2 [p_1(y) p_1(y*) + p_2(y) p_2(y*)]:
        (0, 0): (0.54 + 0.06) / 2 = 0.30    (0, 1): (0.36 + 0.14) / 2 = 0.25
        (1, 0): (0.06 + 0.24) / 2 = 0.15    (1, 1): (0.04 + 0.56) / 2 = 0.30
    p(y) = (0.55, 0.45), p(y*) = (0.45, 0.55), so p(y) p(y*) = 0.2475, 0.3025, 0.2025, 0.2475.

    EPIG = Σ p(y, y*) log[p(y, y*) / (p(y) p(y*))]
         = 0.30 log(0.30/0.2475) + 0.25 log(0.25/0.3025) + 0.15 log(0.15/0.2025) + 0.30 log(0.30/0.2475)
         ≈ 0.02275 nats.
    """
    pool = torch.tensor([[[0.9, 0.1], [0.2, 0.8]]], dtype=torch.float64).log()
    target = torch.tensor([[[0.6, 0.4], [0.3, 0.7]]], dtype=torch.float64).log()
    by_hand = (
        0.30 * math.log(0.30 / 0.2475) + 0.25 * math.log(0.25 / 0.3025)
        + 0.15 * math.log(0.15 / 0.2025) + 0.30 * math.log(0.30 / 0.2475)
    )
    assert by_hand == pytest.approx(0.02275, abs=1e-5)
    assert float(epig(pool, target)) == pytest.approx(by_hand, abs=1e-14)
    # the label of x decides the label of x* exactly: one bit of the two functions, log 2
    decided = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64).log()
    assert float(epig(decided, decided)) == pytest.approx(math.log(2), abs=1e-14)
    # EPIG is symmetric in (x, x*) for one target: I(y; y*) = I(y*; y)
    assert float(epig(target, pool)) == pytest.approx(by_hand, abs=1e-14)


CASES = {
    "random": (random_log_probs(30, 7, 4, seed=1), random_log_probs(9, 7, 4, seed=2)),
    "targets_from_pool": (random_log_probs(25, 5, 3, seed=3), random_log_probs(25, 5, 3, seed=3)[[0, 4, 7]]),
    "one_hot_samples": (
        torch.nn.functional.one_hot(torch.randint(0, 3, (12, 6), generator=torch.Generator().manual_seed(4)), 3)
        .double().log(),
        torch.nn.functional.one_hot(torch.randint(0, 3, (5, 6), generator=torch.Generator().manual_seed(5)), 3)
        .double().log(),
    ),
    "C=1": (torch.zeros(4, 3, 1, dtype=torch.float64), torch.zeros(2, 3, 1, dtype=torch.float64)),
    "very_confident": (
        torch.log_softmax(torch.randn(8, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(8)) * 300, -1),
        torch.log_softmax(torch.randn(3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(9)) * 300, -1),
    ),
    "ten_classes": (random_log_probs(15, 20, 10, seed=10), random_log_probs(11, 20, 10, seed=11)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_epig_matches_numpy_float64(case: str) -> None:
    pool, targets = CASES[case]
    ours = epig(pool, targets)
    assert ours.dtype == torch.float64 and ours.shape == (pool.shape[0],)
    np.testing.assert_allclose(ours.numpy(), ref.epig(pool.exp().numpy(), targets.exp().numpy()), rtol=0, atol=1e-12)


def test_epig_is_entropy_identity_with_exact_joint_entropy() -> None:
    """I(y; y*) = H[y] + H[y*] - H[y, y*], with the library's exact (separately tested) joint entropy."""
    pool, targets = random_log_probs(6, 8, 3, seed=12), random_log_probs(4, 8, 3, seed=13)
    for n in range(6):
        pairs = [
            float(acquisition.predictive_entropy(pool[n : n + 1]) + acquisition.predictive_entropy(targets[m : m + 1]))
            - acquisition.joint_entropy(torch.stack([pool[n], targets[m]]))
            for m in range(4)
        ]
        assert float(epig(pool[n : n + 1], targets)) == pytest.approx(np.mean(pairs), abs=1e-12)


def test_chunking_float32_and_device_do_not_change_scores(monkeypatch) -> None:
    pool, targets = random_log_probs(70, 6, 5, seed=14), random_log_probs(23, 6, 5, seed=15)
    reference = epig(pool, targets)
    np.testing.assert_allclose(epig(pool, targets, chunk_size=9).numpy(), reference.numpy(), atol=1e-13)
    monkeypatch.setattr(epig_module, "TILE_ELEMENTS", 5 * 25)  # tiles of 5 targets, 1 pool row
    np.testing.assert_allclose(epig(pool, targets).numpy(), reference.numpy(), atol=1e-13)
    monkeypatch.undo()
    single = epig(pool.float(), targets.float())
    assert single.dtype == torch.float64
    np.testing.assert_allclose(single.numpy(), reference.numpy(), atol=1e-6)
    assert epig(pool, targets, device="cpu").device == pool.device


def test_epig_prefers_items_informative_about_the_targets() -> None:
    """BALD likes any disagreement; EPIG only disagreement that carries over to the targets.

    Four functions. The target's label reads the bit "k in {0, 1} or {2, 3}" (with 5%
    noise). Item A's label reads the same bit: its label tells about the target's,
    I(y; y*) = log 2 - H_b(2 · 0.05 · 0.95) (two noisy copies of one fair bit). Item B's
    label reads the bit "k in {0, 2} or {1, 3}", independent of the first: EPIG 0.
    Both have the same BALD (the same four distributions in another order).
    """
    sure = torch.tensor([[0.95, 0.05], [0.95, 0.05], [0.05, 0.95], [0.05, 0.95]], dtype=torch.float64)
    target = sure.log()[None]
    item_a = sure.log()
    item_b = sure[[0, 2, 1, 3]].log()
    pool = torch.stack([item_a, item_b])
    scores = epig(pool, target)
    flip = 2 * 0.05 * 0.95
    expected_a = math.log(2) + flip * math.log(flip) + (1 - flip) * math.log(1 - flip)
    assert float(scores[0]) == pytest.approx(expected_a, abs=1e-12)
    assert float(scores[1]) == pytest.approx(0.0, abs=1e-12)
    balds = acquisition.bald(pool)
    assert float(balds[0]) == pytest.approx(float(balds[1]), abs=1e-12) and float(balds[0]) > expected_a
    assert select(pool, "epig", 1, target_log_probs_M_K_C=target).tolist() == [0]


def test_epig_input_errors() -> None:
    pool = random_log_probs(10, 4, 3)
    with pytest.raises(ValueError, match=r"target_log_probs_M_K_C must have the pool's K=4 function samples and C=3"):
        epig(pool, random_log_probs(2, 5, 3))
    with pytest.raises(ValueError, match="target_log_probs_M_K_C must have 3 dimensions"):
        epig(pool, pool[0])
    with pytest.raises(ValueError, match="target_log_probs_M_K_C is empty"):
        epig(pool, pool[:0])
    bad = pool.clone()
    bad[3, 1, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        epig(bad, pool[:2])
    with pytest.raises(ValueError, match="target_log_probs_M_K_C must hold log-probabilities"):
        epig(pool, pool[:2].exp())
    # targets drawn from the pool (the strategy, a pool smaller than num_targets): a bad row is the pool's
    with pytest.raises(ValueError, match=r"^log_probs_N_K_C contains 1 NaN"):
        select(bad, "epig", 2)


# --- the strategies ---


def test_epig_strategy_is_topk_of_the_score_and_samples_targets_from_the_pool() -> None:
    pool = random_log_probs(60, 6, 4, seed=16)
    targets = pool[[1, 5, 9, 33]]
    picked = select(pool, "epig", 5, target_log_probs_M_K_C=targets)
    expected = ref.epig(pool.exp().numpy(), targets.exp().numpy())
    np.testing.assert_allclose(picked.scores.numpy(), np.sort(expected)[::-1][:5], atol=1e-12)
    assert picked.strategy == "epig"
    # without targets: num_targets pool rows drawn with the generator (sorted, without replacement)
    rows = torch.randperm(60, generator=torch.Generator().manual_seed(3))[:20].sort().values
    sampled = select(pool, "epig", 5, num_targets=20, generator=torch.Generator().manual_seed(3))
    expected = ref.epig(pool.exp().numpy(), pool[rows].exp().numpy())
    np.testing.assert_allclose(sampled.scores.numpy(), np.sort(expected)[::-1][:5], atol=1e-12)
    assert sampled.indices.tolist() == np.argsort(-expected, kind="stable")[:5].tolist()
    # the default is 100 targets: here the whole pool of 60
    everything = select(pool, "epig", 3, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(everything.scores.numpy(),
                               np.sort(ref.epig(pool.exp().numpy(), pool.exp().numpy()))[::-1][:3], atol=1e-12)
    with pytest.raises(ValueError, match="num_targets .* cannot be combined with target_log_probs_M_K_C"):
        select(pool, "epig", 5, target_log_probs_M_K_C=targets, num_targets=10)
    with pytest.raises(ValueError, match="num_targets must be >= 1"):
        select(pool, "epig", 5, num_targets=0)


def test_power_epig_is_seeded_and_samples_by_epig() -> None:
    pool = random_log_probs(40, 6, 3, seed=17)
    targets = pool[:10]
    a = select(pool, "power_epig", 12, target_log_probs_M_K_C=targets, generator=torch.Generator().manual_seed(1))
    b = select(pool, "power_epig", 12, target_log_probs_M_K_C=targets, generator=torch.Generator().manual_seed(1))
    c = select(pool, "power_epig", 12, target_log_probs_M_K_C=targets, generator=torch.Generator().manual_seed(2))
    assert a.tolist() == b.tolist() != c.tolist() and len(set(a.tolist())) == 12
    np.testing.assert_allclose(a.scores.numpy(), epig(pool, targets)[a.indices].numpy(), atol=0)
    # beta -> large: the top-k batch
    cold = select(pool, "power_epig", 5, target_log_probs_M_K_C=targets, beta=1e6, generator=torch.Generator().manual_seed(0))
    assert sorted(cold.tolist()) == sorted(select(pool, "epig", 5, target_log_probs_M_K_C=targets).tolist())


def test_entries_declare_their_inputs() -> None:
    epig_entry = acquisition.get_strategy("epig")
    assert epig_entry.inputs == ("log_probs",) and epig_entry.optional_inputs == ("target_log_probs",)
    assert epig_entry.needs_predictions and epig_entry.mode is None and epig_entry.score_fn is None
    assert set(epig_entry.options) == {"num_targets", "cost_aware", "chunk_size"}
    assert set(acquisition.get_strategy("power_epig").options) == {"num_targets", "beta", "cost_aware", "chunk_size"}
    badge_entry = acquisition.get_strategy("badge")
    assert badge_entry.inputs == ("log_probs", "features") and badge_entry.needs_predictions
    typical = acquisition.get_strategy("typiclust")
    assert typical.name == "typicality" and typical.inputs == ("features", "labelled_features")
    assert not typical.needs_predictions
    assert acquisition.get_strategy("random").inputs == () and acquisition.get_strategy("bald").inputs == ("log_probs",)


@pytest.mark.parametrize("module", ["epig", "badge", "clustering", "typicality", "strategies"])
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"activebayes.acquisition.{module}"), raise_on_error=False)
    assert result.failed == 0 and result.attempted >= 1
