"""Acquisition functions on ``log_probs_N_K_C`` and batch selection.

Scores (pure functions ``[N, K, C] -> [N]``, larger = more worth labelling):
:func:`predictive_entropy`, :func:`expected_entropy`, :func:`bald`,
:func:`jackknife_bald`, :func:`variation_ratios`, :func:`mean_std`, :func:`margin`,
:func:`least_confidence`; :func:`predictive_variance` (regression, ``[N, K]``) and
:func:`random_scores`.

Batches: :func:`select` (by strategy name, see :func:`available_strategies`) returns a
:class:`Selection`; :func:`batchbald` is BatchBALD; :func:`joint_entropy` the joint
entropy of a few labels. Extend with :func:`register_strategy` and :func:`topk_strategy`.
"""

from __future__ import annotations

from activebayes.acquisition.greedy_batchbald import batchbald
from activebayes.acquisition.joint_entropy import joint_entropy
from activebayes.acquisition.scores import (
    bald,
    expected_entropy,
    jackknife_bald,
    least_confidence,
    margin,
    mean_std,
    predictive_entropy,
    predictive_variance,
    random_scores,
    variation_ratios,
)
from activebayes.acquisition.selection import Selection
from activebayes.acquisition.strategies import (
    Strategy,
    available_strategies,
    get_strategy,
    register_strategy,
    unregister_strategy,
    select,
    stochastic_strategy,
    topk_strategy,
)

__all__ = [
    "Selection",
    "Strategy",
    "available_strategies",
    "bald",
    "batchbald",
    "expected_entropy",
    "get_strategy",
    "jackknife_bald",
    "joint_entropy",
    "least_confidence",
    "margin",
    "mean_std",
    "predictive_entropy",
    "predictive_variance",
    "random_scores",
    "register_strategy",
    "unregister_strategy",
    "select",
    "stochastic_strategy",
    "topk_strategy",
    "variation_ratios",
]
