"""Multi-label acquisition against independent NumPy float64 brute-force references."""

from __future__ import annotations

import doctest
import math

import multilabel_reference as ref
import numpy as np
import pytest
import torch

from activebayes.acquisition import multilabel as ml
from activebayes.errors import InvalidArgumentError, InvalidTypeError


def random_logits(N: int, K: int, C: int, *, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g, dtype=torch.float64) * 4
    shift_N_1_C = torch.randn(N, 1, C, generator=g, dtype=torch.float64) * 2
    return torch.randn(N, K, C, generator=g, dtype=torch.float64) * scale_N_1_1 + shift_N_1_C


def probs(logits: torch.Tensor) -> np.ndarray:
    return torch.sigmoid(logits).numpy().astype(np.float64)


def test_doctests():
    assert doctest.testmod(ml, raise_on_error=True).attempted >= 2


@pytest.mark.parametrize("seed", [0, 1])
def test_per_label_scores_match_reference(seed):
    logits = random_logits(40, 7, 5, seed=seed)
    lp = ml.multilabel_log_probs(logits)
    p = probs(logits)
    np.testing.assert_allclose(ml.per_label_entropy(lp).numpy(), ref.per_label_entropy(p), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ml.per_label_bald(lp).numpy(), np.maximum(ref.per_label_bald(p), 0),
                               rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ml.multilabel_entropy(lp).numpy(), ref.per_label_entropy(p).sum(1), rtol=1e-10)
    np.testing.assert_allclose(ml.multilabel_entropy(lp, reduce="max").numpy(), ref.per_label_entropy(p).max(1),
                               rtol=1e-10)
    np.testing.assert_allclose(ml.multilabel_bald(lp).numpy(), ref.per_label_bald(p).sum(1), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ml.multilabel_bald(lp, reduce="mean").numpy(), ref.per_label_bald(p).mean(1),
                               rtol=1e-8, atol=1e-12)


def test_float32_input_and_saturated_probabilities():
    logits = torch.tensor([[[60.0, -60.0, 0.0], [60.0, -60.0, 0.0]]])  # p = 1, 0, 1/2 (float32 saturates)
    lp = ml.multilabel_log_probs(logits)
    ent = ml.per_label_entropy(lp)
    assert torch.isfinite(ent).all()
    np.testing.assert_allclose(ent[0].numpy(), [0.0, 0.0, math.log(2)], atol=1e-12)
    assert float(ml.multilabel_bald(lp)[0]) == pytest.approx(0.0, abs=1e-12)


def test_summed_bald_bounds_joint_bald():
    logits = random_logits(12, 6, 3, seed=3)
    lp = ml.multilabel_log_probs(logits)
    p = probs(logits)
    joint = np.array([ref.mutual_information(p[[n]]) for n in range(len(p))])
    assert (ml.multilabel_bald(lp).numpy() >= joint - 1e-10).all()
    assert (ml.multilabel_bald(lp).numpy() - joint).max() > 1e-3  # the bound is not tight here


@pytest.mark.parametrize("B,C", [(1, 3), (2, 2), (3, 2), (2, 4)])
def test_exact_joint_entropy_matches_brute_force(B, C):
    logits = random_logits(B, 6, C, seed=B * 10 + C)
    got = ml.multilabel_joint_entropy(ml.multilabel_log_probs(logits), max_configurations=2 ** (B * C))
    assert got == pytest.approx(ref.joint_entropy(probs(logits)), rel=1e-10, abs=1e-12)


def test_sampled_joint_entropy_is_close_and_seeded():
    logits = random_logits(3, 5, 3, seed=7)
    lp = ml.multilabel_log_probs(logits)
    exact = ref.joint_entropy(probs(logits))
    estimates = [ml.multilabel_joint_entropy(lp, max_configurations=1, num_samples=20_000, seed=s) for s in range(3)]
    for estimate in estimates:
        assert estimate == pytest.approx(exact, abs=0.05)
    assert estimates[0] != estimates[1]
    assert ml.multilabel_joint_entropy(lp, max_configurations=1, num_samples=500, seed=4) == \
        ml.multilabel_joint_entropy(lp, max_configurations=1, num_samples=500, seed=4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_batchbald_matches_brute_force_greedy(seed):
    logits = random_logits(9, 5, 2, seed=seed)
    got = ml.multilabel_batchbald(ml.multilabel_log_probs(logits), 3, max_configurations=2**6)
    want_idx, want_scores = ref.greedy_batchbald(probs(logits), 3)
    assert got.indices.tolist() == want_idx
    np.testing.assert_allclose(got.scores.numpy(), want_scores, rtol=1e-9, atol=1e-12)
    assert got.strategy == "multilabel_batchbald"


def test_sampled_batchbald_scores_are_unbiased_estimates():
    logits = random_logits(8, 4, 2, seed=11)
    lp = ml.multilabel_log_probs(logits)
    got = ml.multilabel_batchbald(lp, 3, max_configurations=4, num_samples=40_000, seed=0)
    # the scores are estimates of the joint mutual information of the batch actually picked
    p = probs(logits)
    for b in range(3):
        want = ref.mutual_information(p[got.indices[: b + 1].tolist()])
        assert float(got.scores[b]) == pytest.approx(want, abs=0.03)


def test_batchbald_avoids_duplicates_where_summed_bald_does_not():
    logits = random_logits(6, 8, 3, seed=5)
    top = int(ml.multilabel_bald(ml.multilabel_log_probs(logits)).argmax())
    pool = torch.cat([logits, logits[top : top + 1].expand(3, -1, -1)])  # three exact copies of the top item
    lp = ml.multilabel_log_probs(pool)
    copies = {top, 6, 7, 8}
    by_bald = set(torch.topk(ml.multilabel_bald(lp), 3).indices.tolist())
    assert by_bald <= copies
    got = ml.multilabel_batchbald(lp, 3, max_configurations=2**9)
    picked = got.indices.tolist()
    assert picked == ref.greedy_batchbald(probs(pool), 3)[0]
    assert len(copies & set(picked)) < 3
    # a copy's labels are a fresh draw, so it still adds information, but less than the first time
    p = probs(pool)
    first = ref.mutual_information(p[[top]])
    assert ref.mutual_information(p[[top, 6]]) - first < first - 1e-3


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_batchbald_on_a_device_picks_what_the_cpu_picks(device):
    # exact for the first pick, sampled after: both paths run on the device
    logits = random_logits(40, 7, 5, seed=3)
    lp = ml.multilabel_log_probs(logits)
    here = ml.multilabel_batchbald(lp, 4, max_configurations=2**6, num_samples=700, seed=2)
    there = ml.multilabel_batchbald(lp.to(device), 4, max_configurations=2**6, num_samples=700, seed=2,
                                    device=device)
    assert there.indices.device.type == "cpu" and there.scores.device.type == "cpu"
    assert there.indices.tolist() == here.indices.tolist()
    np.testing.assert_allclose(there.scores.numpy(), here.scores.numpy(), rtol=1e-10)
    # a CPU input computed on the device comes back the same
    moved = ml.multilabel_batchbald(lp, 4, max_configurations=2**6, num_samples=700, seed=2, device=device)
    assert moved.indices.tolist() == here.indices.tolist()


def test_the_batchbald_strategy_computes_on_the_loops_device(monkeypatch):
    from activebayes.acquisition import multilabel_strategies, select

    seen = []
    real = multilabel_strategies.multilabel_batchbald

    def spy(*args, **kwargs):
        seen.append(kwargs.get("device"))
        return real(*args, **kwargs)

    monkeypatch.setattr(multilabel_strategies, "multilabel_batchbald", spy)
    lp = ml.multilabel_log_probs(random_logits(12, 4, 2, seed=1))
    picked = select(lp, "multilabel_batchbald", 3, generator=torch.Generator().manual_seed(0), device="cpu")
    assert seen == ["cpu"] and len(picked.indices) == 3


def test_larger_labels_fall_back_to_sampling():
    logits = random_logits(50, 6, 12, seed=2)
    picks = ml.multilabel_batchbald(ml.multilabel_log_probs(logits), 4, num_samples=300, seed=1)
    assert len(set(picks.indices.tolist())) == 4
    assert (picks.scores.diff() > -0.2).all()


def test_bad_inputs():
    with pytest.raises(InvalidArgumentError, match=r"\[N, K, C\]"):
        ml.multilabel_entropy(torch.zeros(3, 4))
    with pytest.raises(InvalidArgumentError, match="logsigmoid"):
        ml.multilabel_bald(torch.full((2, 3, 4), 0.5))
    with pytest.raises(InvalidArgumentError, match="NaN"):
        ml.multilabel_bald(torch.full((2, 3, 4), float("nan")))
    with pytest.raises(InvalidTypeError, match="floating"):
        ml.multilabel_bald(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(InvalidArgumentError, match="reduce"):
        ml.multilabel_bald(torch.full((2, 3, 4), -1.0), reduce="median")
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        ml.multilabel_batchbald(torch.full((2, 3, 4), -1.0), 3)



def test_a_softmax_handed_over_as_per_label_probabilities_is_refused():
    """predict_log_probs on a multi-label network is a softmax over the labels; multilabel_bald
    scored it without a word. Per-label probabilities that happen to sum to 1 in a few rows pass."""
    logits_N_K_C = torch.randn(10, 4, 3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(InvalidArgumentError, match=r"^log_probs_N_K_C sums to 1 over its 3 labels in every one of its "
                                                   r"40 rows: a softmax \(predict_log_probs, one class per item\), "
                                                   r"not per-label log P\(y_c = 1\); take the logsigmoid"):
        ml.multilabel_bald(logits_N_K_C.log_softmax(-1))
    log_p = ml.multilabel_log_probs(logits_N_K_C)
    log_p[:2] = logits_N_K_C[:2].log_softmax(-1)  # two items whose labels sum to 1: possible, and kept
    assert ml.multilabel_bald(log_p).shape == (10,)
    assert ml.multilabel_bald(torch.full((1, 2, 3), 1 / 3).log()).shape == (1,)  # too few rows to tell
    assert ml.multilabel_bald(torch.full((10, 4, 2), 0.5).log()).shape == (10,)  # 2 labels at 1/2: a zero-init head
    from activebayes.models import MultiLabelPosterior  # the way to per-label samples, exported

    assert MultiLabelPosterior.__module__ == "activebayes.models.multilabel"


def _bce_last_layer_gradients(p_mean: np.ndarray, h: np.ndarray) -> np.ndarray:
    """float64 reference: d/dW of sum_c BCE(W h + b, y_hat) at the logits of p_mean, y_hat = p_mean > 1/2,
    by finite differences of the loss in W (the analytic form is not assumed)."""
    N, C = p_mean.shape
    D = h.shape[1]
    logits = np.log(p_mean) - np.log1p(-p_mean)
    y_hat = (p_mean > 0.5).astype(float)
    out = np.zeros((N, C, D))
    eps = 1e-6
    for n in range(N):
        def loss(W_delta):
            z = logits[n] + W_delta @ h[n]
            return float(np.sum(np.logaddexp(0, z) - y_hat[n] * z))
        for c in range(C):
            for d in range(D):
                bump = np.zeros((C, D))
                bump[c, d] = eps
                out[n, c, d] = (loss(bump) - loss(-bump)) / (2 * eps)
    return out


def test_multilabel_badge_factors_are_the_bce_gradient_of_the_last_layer():
    g = torch.Generator().manual_seed(3)
    log_probs = ml.multilabel_log_probs(torch.randn(6, 5, 3, generator=g, dtype=torch.float64) * 2)
    h = torch.randn(6, 4, generator=g, dtype=torch.float64)
    factors = ml.multilabel_gradient_factors(log_probs)
    p_mean = log_probs.exp().mean(1).numpy()
    reference = _bce_last_layer_gradients(p_mean, h.numpy())
    np.testing.assert_allclose((factors[:, :, None] * h[:, None, :]).numpy(), reference, atol=1e-6)


def test_multilabel_badge_is_badge_seeding_on_the_bce_embeddings():
    """The strategy is BADGE's seeding (tested against its references in test_badge.py) on the
    factors p_mean - y_hat computed here in NumPy: the largest |g| first, no item twice."""
    from activebayes.acquisition import select
    from activebayes.acquisition.badge import badge_from_factors

    g = torch.Generator().manual_seed(0)
    log_probs = ml.multilabel_log_probs(torch.randn(40, 8, 4, generator=g) * 2)
    h = torch.randn(40, 5, generator=g)
    picked = select(log_probs, "multilabel_badge", 6, features_N_D=h, generator=torch.Generator().manual_seed(7))
    assert len(set(picked.indices.tolist())) == 6 and picked.strategy == "multilabel_badge"
    p_mean = np.exp(log_probs.double().numpy()).mean(1)
    factors = p_mean - (p_mean > 0.5)
    norms = (factors**2).sum(1) * (h.double().numpy() ** 2).sum(1)
    assert int(picked.indices[0]) == int(norms.argmax())
    reference = badge_from_factors(torch.from_numpy(factors), h, 6, generator=torch.Generator().manual_seed(7))
    assert picked.indices.tolist() == reference.indices.tolist()
    with pytest.raises(InvalidTypeError, match="needs features_N_D"):
        select(log_probs, "multilabel_badge", 6)


def test_multilabel_power_bald_samples_in_proportion_to_summed_bald():
    """First picks follow p ∝ BALD_Σ (NumPy float64), batches are seeded and without replacement,
    and the reported scores are the plain summed BALD."""
    from activebayes.acquisition import select

    logits = random_logits(5, 8, 3, seed=4)
    log_probs = ml.multilabel_log_probs(logits)
    bald_N = ref.per_label_bald(probs(logits)).sum(1)
    draws = 3000
    firsts = [int(select(log_probs, "multilabel_power_bald", 1, generator=torch.Generator().manual_seed(s)).indices[0])
              for s in range(draws)]
    np.testing.assert_allclose(np.bincount(firsts, minlength=5) / draws, bald_N / bald_N.sum(), atol=0.03)

    log_probs = ml.multilabel_log_probs(random_logits(60, 8, 4, seed=5))
    a, b, c = (select(log_probs, "multilabel_power_bald", 12, generator=torch.Generator().manual_seed(s))
               for s in (1, 1, 2))
    assert a.indices.tolist() == b.indices.tolist() != c.indices.tolist()
    assert len(set(a.indices.tolist())) == 12 and a.strategy == "multilabel_power_bald"
    np.testing.assert_allclose(a.scores.numpy(), ml.multilabel_bald(log_probs)[a.indices].numpy(), atol=0)
    # beta -> large approaches top-k of summed BALD
    cold = select(log_probs, "multilabel_power_bald", 5, beta=200.0, generator=torch.Generator().manual_seed(0))
    assert set(cold.indices.tolist()) == set(torch.topk(ml.multilabel_bald(log_probs), 5).indices.tolist())


def test_the_module_docstring_says_copies_are_fresh_draws_that_batchbald_can_pick():
    """A copy of an item is a fresh label draw: BatchBALD picks copies when they still add the most
    (as the brute force does), and the module docstring says so (it once said the opposite)."""
    g = torch.Generator().manual_seed(7)
    x = 3 * torch.randn(1, 10, 2, generator=g, dtype=torch.float64)
    y = 0.6 * torch.randn(1, 10, 2, generator=g, dtype=torch.float64)
    pool = torch.cat([x, x, x, y])  # items 0, 1, 2 are copies; item 3 is a confident other item
    got = ml.multilabel_batchbald(ml.multilabel_log_probs(pool), 3)
    want_indices, want_scores = ref.greedy_batchbald(probs(pool), 3)
    assert sorted(got.indices.tolist()) == sorted(want_indices) == [0, 1, 2]
    np.testing.assert_allclose(got.scores.numpy(), want_scores, rtol=1e-9)
    doc = " ".join(ml.__doc__.split())
    assert "does not pick duplicates" not in doc
    assert "fresh label draw" in doc and "does not deduplicate a pool" in doc
