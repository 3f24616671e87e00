"""One multi-label decision rule: a label is predicted when its mean probability is at least one half.

The evaluation, the loop's audit, the stopping signals, BADGE's label-vector embedding and training's
validation F1 must all agree, including at a probability of exactly 1/2 (where ``>`` and ``>=`` differ).
"""

from __future__ import annotations

import math

import torch

from activebayes.acquisition.multilabel import multilabel_gradient_factors
from activebayes.loop import _audit_answers
from activebayes.metrics.multilabel import DECISION_THRESHOLD, evaluate_multilabel, label_decisions
from activebayes.models.training import _micro_f1
from activebayes.records import Proposal
from activebayes.stopping import expected_accuracy, predicted_decisions

# two items, three labels; two K samples whose mean is exactly 1/2 for label 0 of item 0
PROBS_N_K_C = torch.tensor([[[0.25, 0.9, 0.1], [0.75, 0.7, 0.3]],
                            [[0.5, 0.5, 0.2], [0.5, 0.5, 0.4]]], dtype=torch.float64)
MEAN_N_C = PROBS_N_K_C.mean(1)


def test_the_mean_probabilities_hit_one_half_exactly():
    assert MEAN_N_C[0, 0].item() == 0.5 and MEAN_N_C[1, 0].item() == 0.5 and MEAN_N_C[1, 1].item() == 0.5


def test_label_decisions_is_at_least_the_threshold():
    assert DECISION_THRESHOLD == 0.5
    assert label_decisions(MEAN_N_C).tolist() == [[True, True, False], [True, True, False]]


def test_the_evaluation_predicts_a_label_at_exactly_one_half():
    targets_N_C = torch.tensor([[1, 1, 0], [1, 1, 0]])
    metrics = evaluate_multilabel(PROBS_N_K_C.log(), targets_N_C)
    assert metrics["subset_accuracy"] == 1.0 and metrics["micro_f1"] == 1.0


def test_the_stopping_signals_use_the_same_decisions():
    decisions = predicted_decisions(PROBS_N_K_C.log(), multilabel=True)
    assert decisions.tolist() == label_decisions(MEAN_N_C).reshape(-1).long().tolist()
    decided = label_decisions(MEAN_N_C).double()
    expected = 2 * float((decided * MEAN_N_C).sum()) / float(decided.sum() + MEAN_N_C.sum())
    assert math.isclose(expected_accuracy(PROBS_N_K_C.log(), multilabel=True), expected, rel_tol=1e-12)


def test_an_expected_micro_f1_with_nothing_expected_is_zero_like_the_metric():
    assert expected_accuracy(torch.full((2, 3, 4), -math.inf), multilabel=True) == 0.0


def test_badge_label_vector_factors_use_the_same_decisions():
    factors_N_C = multilabel_gradient_factors(PROBS_N_K_C.log())
    assert torch.allclose(factors_N_C, MEAN_N_C - label_decisions(MEAN_N_C).double(), atol=1e-12)
    assert factors_N_C[1, :2].tolist() == [-0.5, -0.5]  # a mean of exactly 1/2 is decided positive: 1/2 - 1


def test_training_validation_f1_uses_the_same_decisions():
    assert _micro_f1(MEAN_N_C, torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])) == 1.0


def test_the_loops_audit_counts_an_answer_at_exactly_one_half_as_predicted():
    probs = MEAN_N_C.tolist()
    proposal = Proposal(round=1, ranking=[3, 4], ranking_scores=[0.0, 0.0], indices=[3, 4], scores=[0.0, 0.0],
                        probs=probs, audit=[3, 4], n_labelled=10, metrics={}, class_counts=[5, 5, 5],
                        cost_spent=0.0, fit={}, seconds={}, strategy="bald")
    answers = torch.tensor([[1, 1, 0], [1, 1, 0]])
    counted = _audit_answers(proposal, torch.tensor([3, 4]), answers)
    assert counted == {"n": 2, "correct": 2}


# a predictive of exactly 1/2 computed in log space, as the loop computes it, comes back a rounding error low
ROUNDED_HALF = float(torch.logsumexp(torch.log(torch.tensor([0.3, 0.7] * 5, dtype=torch.float32)), 0).exp() / 10)


def test_a_half_rounded_low_by_the_log_space_mean_is_still_decided_present():
    """The log-space mean of 5 saturated members of 10 (or samples 0.3 and 0.7) was decided absent."""
    assert ROUNDED_HALF != 0.5 and abs(ROUNDED_HALF - 0.5) < 1e-6  # the case: a rounding error, not a real 0.4999
    assert label_decisions([ROUNDED_HALF, 0.5 - 1e-3]).tolist() == [True, False]
    halves = torch.full((1, 10, 1), -math.inf, dtype=torch.float32)
    halves[0, :5, 0] = 0.0
    assert evaluate_multilabel(halves, [[1]])["micro_f1"] == 1.0


def test_the_audit_decides_a_rounded_half_as_the_evaluation_does():
    probs = [[ROUNDED_HALF, 0.9, 0.1]]
    proposal = Proposal(round=1, ranking=[3], ranking_scores=[0.0], indices=[3], scores=[0.0], probs=probs,
                        audit=[3], n_labelled=10, metrics={}, class_counts=[5, 5, 5], cost_spent=0.0, fit={},
                        seconds={}, strategy="bald")
    assert _audit_answers(proposal, torch.tensor([3]), torch.tensor([[1, 1, 0]])) == {"n": 1, "correct": 1}
