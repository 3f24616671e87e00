"""The numbers and formulas of docs/concepts/uncertainty.md, batchbald.md and multilabel.md
against references the library did not compute.

The per-item scores, EPIG, BADGE, typicality, BatchBALD and the multi-label scores are
compared with NumPy float64 formulas and the peers in the other modules of this folder;
this one adds the docs' worked-example numbers (checked against those NumPy formulas and
the seed's own code), the MLSS tutorial's jackknife as the seed writes it, the joint law
of a stochastic batch (not only its first pick) and the multi-label reductions the other
tests leave out.
"""

from __future__ import annotations

import itertools

import acq_reference as ref
import multilabel_reference as ml_ref
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from activebayes import acquisition
from activebayes.acquisition import multilabel as ml
from activebayes.acquisition import select
from activebayes.acquisition.selection import stochastic_order


def _seed_000_mutual_information(proba_K_N_C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The MLSS 2019 tutorial's starred task, as seed 000 writes it (samples first, probability space):
    plug-in BALD and the jackknife-corrected BALD, with ``μ_{-i} = μ + (μ - x_i) / (n - 1)``. The
    seed's entropy is ``-kl_div(0, p)`` summed over classes, elementwise ``p log p`` with 0 at p = 0."""

    def entropy(proba):
        return -F.kl_div(torch.tensor(0.0).to(proba), proba, reduction="none").sum(dim=-1)

    proba_avg = proba_K_N_C.mean(dim=0)
    entropy_expected = entropy(proba_avg)
    expected_entropy = entropy(proba_K_N_C).mean(dim=0)
    plain = entropy_expected - expected_entropy
    proba_loo = proba_avg + (proba_avg - proba_K_N_C) / (len(proba_K_N_C) - 1)
    expected_entropy_loo = entropy(proba_loo).mean(dim=0)
    corrected = entropy_expected + (len(proba_K_N_C) - 1) * (entropy_expected - expected_entropy_loo)
    return plain, corrected - expected_entropy


def test_the_worked_example_numbers_of_the_docs():
    """uncertainty.md: H[y|w] = 1.2069, H[p̄] = 1.2376, BALD = 0.0307, jackknife-corrected 0.0323 for
    every item; batchbald.md: BatchBALD's batch so far 0.0307, 0.0596, 0.0869, 0.1128 < 4 x 0.0307.
    Each number is the NumPy float64 reference's, and the library's equals it."""
    probs = ref.seed_004_probs()
    log_probs = torch.from_numpy(probs).log()
    for name, doc in [("expected_entropy", 1.2069), ("predictive_entropy", 1.2376), ("bald", 0.0307),
                      ("jackknife_bald", 0.0323)]:
        expected = ref.SCORES[name](probs)
        np.testing.assert_allclose(expected, doc, atol=5e-5)  # the docs' number, rounded
        np.testing.assert_allclose(getattr(acquisition, name)(log_probs).numpy(), expected, rtol=0, atol=1e-12)
    selection = select(log_probs, "batchbald", 4, num_configurations=1000, generator=torch.Generator().manual_seed(0))
    # brute-force joint mutual information of the batch so far, over all 4^b label configurations
    brute = []
    for b in range(1, 5):
        batch = probs[selection.indices[:b].numpy()]
        joint = 0.0
        for config in itertools.product(range(4), repeat=b):
            q = np.prod([batch[i, :, c] for i, c in enumerate(config)], axis=0).mean()
            joint -= q * np.log(q)
        brute.append(joint - ref.expected_entropy(batch).sum())
    np.testing.assert_allclose(brute, [0.0307, 0.0596, 0.0869, 0.1128], atol=5e-5)
    np.testing.assert_allclose(selection.scores.numpy(), brute, rtol=0, atol=1e-10)
    assert brute[-1] < 4 * brute[0]


def test_jackknife_bald_is_the_tutorials_leave_one_out_code():
    """Seed 000's own jackknife (leave-one-out means by subtraction, in probability space) gives the
    same scores as the library's log-space prefix / suffix sums; its plain BALD is ``bald``."""
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(30, 9, 6, generator=g, dtype=torch.float64) * torch.rand(30, 1, 1, generator=g) * 4
    log_probs = torch.log_softmax(logits, -1)
    plain, corrected = _seed_000_mutual_information(log_probs.exp().permute(1, 0, 2))
    np.testing.assert_allclose(acquisition.bald(log_probs).numpy(), plain.clamp_min(0).numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(acquisition.jackknife_bald(log_probs).numpy(), corrected.numpy(), rtol=0, atol=1e-10)
    # the seed's example is the worked example of the docs, too
    seed_log_probs = torch.from_numpy(ref.seed_004_probs()).log()
    _, corrected = _seed_000_mutual_information(seed_log_probs.exp().permute(1, 0, 2))
    np.testing.assert_allclose(acquisition.jackknife_bald(seed_log_probs).numpy(), corrected.numpy(), atol=1e-12)


def test_entropy_of_exact_zeros_is_the_tutorials_kl_div_entropy():
    """Seed 000: 0 log 0 = 0; its ``-kl_div(0, p)`` entropy needs no tiny constant and agrees with the
    library's on probabilities that are exactly 0 (a NaN-free, unbiased predictive entropy)."""
    probs = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.5, 0.5, 0.0], [0.25, 0.75, 0.0]]],
                         dtype=torch.float64)
    plain, _ = _seed_000_mutual_information(probs.permute(1, 0, 2))
    entropy = -F.kl_div(torch.tensor(0.0, dtype=torch.float64), probs.mean(1), reduction="none").sum(-1)
    np.testing.assert_allclose(acquisition.predictive_entropy(probs.log()).numpy(), entropy.numpy(), rtol=0, atol=1e-15)
    np.testing.assert_allclose(acquisition.bald(probs.log()).numpy(), plain.numpy(), rtol=0, atol=1e-15)


def test_a_stochastic_batch_is_successive_sampling_without_replacement():
    """Gumbel-top-k (Kool et al. 2019) is exact successive sampling: the first two picks (i, j) have
    probability w_i / W · w_j / (W - w_i) (here power sampling, w = s^β; the first pick alone, for
    every mode, is checked in test_acq_select.py)."""
    scores = np.array([0.05, 0.2, 0.3, 0.45])
    beta = 1.5
    w = scores**beta
    W = w.sum()
    expected = np.array([[0.0 if i == j else w[i] / W * w[j] / (W - w[i]) for j in range(4)] for i in range(4)])
    g = torch.Generator().manual_seed(11)
    draws = 1000
    counts = np.zeros((4, 4))
    scores_t = torch.tensor(scores, dtype=torch.float64)
    for _ in range(draws):
        order = stochastic_order(scores_t, "power", beta, g)
        counts[int(order[0]), int(order[1])] += 1
    np.testing.assert_allclose(counts / draws, expected, atol=0.035)


def test_multilabel_reductions_are_the_mean_and_max_over_labels():
    """multilabel.md: ``reduce="mean"`` or ``"max"`` instead of the sum, for both scores."""
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(25, 6, 4, generator=g, dtype=torch.float64) * 2
    log_probs = ml.multilabel_log_probs(logits)
    p = torch.sigmoid(logits).numpy()
    entropy_N_C, bald_N_C = ml_ref.per_label_entropy(p), ml_ref.per_label_bald(p)
    for reduce, fn in (("sum", np.sum), ("mean", np.mean), ("max", np.max)):
        np.testing.assert_allclose(ml.multilabel_entropy(log_probs, reduce=reduce).numpy(), fn(entropy_N_C, 1),
                                   rtol=1e-10)
        np.testing.assert_allclose(ml.multilabel_bald(log_probs, reduce=reduce).numpy(), fn(bald_N_C, 1),
                                   rtol=1e-8, atol=1e-12)


def test_multilabel_first_batchbald_pick_is_the_joint_bald_top_item():
    """multilabel.md: the first pick maximises the item's joint BALD I[y_n; w] over its 2^C label
    vectors (brute force), not the summed per-label BALD."""
    g = torch.Generator().manual_seed(4)
    logits = torch.randn(10, 6, 3, generator=g, dtype=torch.float64) * 2.5
    p = torch.sigmoid(logits).numpy()
    joint = np.array([ml_ref.mutual_information(p[[n]]) for n in range(10)])
    assert int(ml.multilabel_bald(ml.multilabel_log_probs(logits)).argmax()) != int(joint.argmax())  # they differ here
    picks = ml.multilabel_batchbald(ml.multilabel_log_probs(logits), 1)
    assert int(picks.indices[0]) == int(joint.argmax())
    assert float(picks.scores[0]) == pytest.approx(joint.max(), abs=1e-10)


def test_cost_aware_takes_the_most_informative_free_items_first():
    """acquisition.md: cost_aware orders by score per unit cost, free items first. Among free items
    (score / 0 = inf for every one) the larger score should still come first, as it does at any
    equal positive cost."""
    g = torch.Generator().manual_seed(0)
    log_probs = torch.log_softmax(torch.randn(10, 6, 3, generator=g, dtype=torch.float64) * 3, -1)
    scores = acquisition.bald(log_probs)
    costs = torch.tensor([0.0] * 5 + [1.0] * 5, dtype=torch.float64)
    best_free = torch.argsort(scores[:5], descending=True)[:2].tolist()
    picked = select(log_probs, "bald", 2, costs_N=costs, cost_budget=10.0, cost_aware=True)
    assert picked.indices.tolist() == best_free
