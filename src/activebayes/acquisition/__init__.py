"""Acquisition functions on ``log_probs_N_K_C`` and batch selection.

Scores (pure functions ``[N, K, C] -> [N]``, larger = more worth labelling):
:func:`predictive_entropy`, :func:`expected_entropy`, :func:`bald`,
:func:`jackknife_bald`, :func:`variation_ratios`, :func:`mean_std`, :func:`margin`,
:func:`least_confidence`; :func:`predictive_variance` (regression, ``[N, K]``) and
:func:`random_scores`.

Beyond the per-item scores: :func:`epig` (expected predictive information gain,
``[N, K, C]`` and target predictions ``[M, K, C]`` -> ``[N]``).

Batches: :func:`select` (by strategy name, see :func:`available_strategies`) returns a
:class:`Selection`; :func:`batchbald` is BatchBALD; :func:`badge` BADGE (needs pool
features); :func:`typicality` TypiClust (needs features of the pool and the labelled
items); :func:`joint_entropy` the joint entropy of a few labels; :func:`kmeans` the
seeded k-means they use. Extend with :func:`register_strategy` and :func:`topk_strategy`;
a strategy that chooses jointly streams over big pools with a plan
(:class:`PoolPlan`, built from a :class:`PoolRequest`: see :mod:`.streaming`).
"""

from __future__ import annotations

from activebayes.acquisition.badge import badge, badge_from_factors, gradient_embeddings, loss_gradient_factors
from activebayes.acquisition.clustering import KMeansResult, kmeans, kmeans_plus_plus
from activebayes.acquisition.epig import epig
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
from activebayes.acquisition.streaming import PoolPlan, PoolRequest
from activebayes.acquisition.strategies import (
    INPUTS,
    AcquisitionContext,
    Strategy,
    available_strategies,
    epig_strategy,
    get_strategy,
    register_strategy,
    unregister_strategy,
    score_function,
    select,
    stochastic_strategy,
    topk_strategy,
)
from activebayes.acquisition.typicality import typicality

__all__ = [
    "INPUTS",
    "AcquisitionContext",
    "PoolPlan",
    "PoolRequest",
    "KMeansResult",
    "Selection",
    "Strategy",
    "available_strategies",
    "badge",
    "badge_from_factors",
    "bald",
    "batchbald",
    "epig",
    "epig_strategy",
    "expected_entropy",
    "get_strategy",
    "gradient_embeddings",
    "jackknife_bald",
    "joint_entropy",
    "kmeans",
    "kmeans_plus_plus",
    "least_confidence",
    "loss_gradient_factors",
    "margin",
    "mean_std",
    "predictive_entropy",
    "predictive_variance",
    "random_scores",
    "register_strategy",
    "unregister_strategy",
    "score_function",
    "select",
    "stochastic_strategy",
    "topk_strategy",
    "typicality",
    "variation_ratios",
]

# the multi-label strategies register themselves through the public register_strategy
from activebayes.acquisition import multilabel_strategies as _multilabel_strategies  # noqa: E402,F401
