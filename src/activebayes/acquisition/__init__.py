"""Acquisition functions on ``log_probs_N_K_C`` and batch selection."""

from __future__ import annotations

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

__all__ = [
    "bald",
    "expected_entropy",
    "jackknife_bald",
    "least_confidence",
    "margin",
    "mean_std",
    "predictive_entropy",
    "predictive_variance",
    "random_scores",
    "variation_ratios",
]
