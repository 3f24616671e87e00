"""Independent NumPy float64 references for multi-label acquisition (brute force, probability space)."""

from __future__ import annotations

import itertools

import numpy as np


def h(p: np.ndarray) -> np.ndarray:
    """Binary entropy in nats, 0 log 0 = 0."""
    p = np.asarray(p, dtype=np.float64)
    out = np.zeros_like(p)
    for v in (p, 1.0 - p):
        pos = v > 0
        out[pos] -= v[pos] * np.log(v[pos])
    return out


def per_label_entropy(p_NKC: np.ndarray) -> np.ndarray:
    return h(p_NKC.mean(1))


def per_label_bald(p_NKC: np.ndarray) -> np.ndarray:
    return h(p_NKC.mean(1)) - h(p_NKC).mean(1)


def joint_entropy(p_BKC: np.ndarray) -> float:
    """H of the label vectors of B items: sum over all 2^(B*C) bit configurations."""
    B, K, C = p_BKC.shape
    flat_KD = p_BKC.transpose(1, 0, 2).reshape(K, B * C)
    total = 0.0
    for bits in itertools.product((0, 1), repeat=B * C):
        y = np.array(bits, dtype=np.float64)
        per_k = np.prod(np.where(y == 1, flat_KD, 1.0 - flat_KD), axis=1)
        q = per_k.mean()
        if q > 0:
            total -= q * np.log(q)
    return total


def mutual_information(p_BKC: np.ndarray) -> float:
    """I[y_1..y_B; w] = H[y_1..y_B] - sum_i H[y_i | w]."""
    return joint_entropy(p_BKC) - float(h(p_BKC).mean(1).sum())


def greedy_batchbald(p_NKC: np.ndarray, batch_size: int) -> tuple[list[int], list[float]]:
    picked: list[int] = []
    scores: list[float] = []
    for _ in range(batch_size):
        best, best_score = -1, -np.inf
        for n in range(p_NKC.shape[0]):
            if n in picked:
                continue
            score = mutual_information(p_NKC[picked + [n]])
            if score > best_score:
                best, best_score = n, score
        picked.append(best)
        scores.append(best_score)
    return picked, scores
