"""Independent NumPy float64 reference formulas (probability space, written from the maths)."""

from __future__ import annotations

import numpy as np


def xlogx(p: np.ndarray) -> np.ndarray:
    out = np.zeros_like(p)
    positive = p > 0
    out[positive] = p[positive] * np.log(p[positive])
    return out


def entropy(p: np.ndarray) -> np.ndarray:
    return -xlogx(p).sum(-1)


def predictive_entropy(p_NKC: np.ndarray) -> np.ndarray:
    return entropy(p_NKC.mean(1))


def expected_entropy(p_NKC: np.ndarray) -> np.ndarray:
    return entropy(p_NKC).mean(1)


def bald(p_NKC: np.ndarray) -> np.ndarray:
    return np.maximum(predictive_entropy(p_NKC) - expected_entropy(p_NKC), 0.0)


def jackknife_bald(p_NKC: np.ndarray) -> np.ndarray:
    N, K, C = p_NKC.shape
    if K == 1:
        return bald(p_NKC)
    plug_in = predictive_entropy(p_NKC)
    loo = np.stack(
        [entropy(np.delete(p_NKC, k, axis=1).mean(1)) for k in range(K)], axis=1
    ).mean(1)
    corrected = plug_in + (K - 1) * (plug_in - loo)
    return corrected - expected_entropy(p_NKC)


def variation_ratios(p_NKC: np.ndarray) -> np.ndarray:
    N, K, C = p_NKC.shape
    out = np.empty(N)
    for n in range(N):
        votes = np.zeros(C)
        for k in range(K):
            winners = np.flatnonzero(p_NKC[n, k] == p_NKC[n, k].max())
            votes[winners] += 1.0 / len(winners)
        out[n] = 1.0 - votes.max() / K
    return out


def mean_std(p_NKC: np.ndarray) -> np.ndarray:
    return p_NKC.std(axis=1).mean(-1)


def margin(p_NKC: np.ndarray) -> np.ndarray:
    mean = np.sort(p_NKC.mean(1), axis=-1)
    if mean.shape[1] == 1:
        return -np.ones(len(mean))
    return -(mean[:, -1] - mean[:, -2])


def least_confidence(p_NKC: np.ndarray) -> np.ndarray:
    return 1.0 - p_NKC.mean(1).max(-1)


SCORES = {
    "predictive_entropy": predictive_entropy,
    "expected_entropy": expected_entropy,
    "bald": bald,
    "jackknife_bald": jackknife_bald,
    "variation_ratios": variation_ratios,
    "mean_std": mean_std,
    "margin": margin,
    "least_confidence": least_confidence,
}
