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


# --- EPIG, BADGE, k-means++ and TypiClust: loops over the definitions, float64 ---


def epig(p_NKC: np.ndarray, p_MKC: np.ndarray) -> np.ndarray:
    """mean_m Σ_{c,c'} p(c,c') log p(c,c') / (p(c) p(c')), p(c,c') = mean_k p_k(c) p_k(c')."""
    N, K, C = p_NKC.shape
    out = np.zeros(N)
    for n in range(N):
        for m in range(len(p_MKC)):
            joint = np.einsum("kc,kd->cd", p_NKC[n], p_MKC[m]) / K
            marginal, target_marginal = p_NKC[n].mean(0), p_MKC[m].mean(0)
            for c in range(C):
                for d in range(C):
                    if joint[c, d] > 0:
                        out[n] += joint[c, d] * np.log(joint[c, d] / (marginal[c] * target_marginal[d]))
        out[n] /= len(p_MKC)
    return np.maximum(out, 0.0)


def gradient_embeddings(p_NKC: np.ndarray, h_ND: np.ndarray) -> np.ndarray:
    """(p̄ - onehot(argmax p̄)) ⊗ h, flattened [N, C*D] (row c of W first)."""
    mean = p_NKC.mean(1)
    onehot = np.eye(mean.shape[1])[mean.argmax(1)]
    return np.einsum("nc,nd->ncd", mean - onehot, h_ND).reshape(len(h_ND), -1)


def d2_seeding(points: np.ndarray, k: int, uniforms: np.ndarray, first: int | None) -> list[int]:
    """k-means++ with given uniforms: inverse CDF of D^2 (first centre given, or floor(u_0 N))."""
    N = len(points)
    picks = [first if first is not None else int(uniforms[0] * N)]
    for b in range(1, k):
        d2 = np.min([((points - points[i]) ** 2).sum(1) for i in picks], axis=0)
        d2[picks] = 0.0
        total = d2.sum()
        if total > 0:
            picks.append(int(np.searchsorted(np.cumsum(d2), uniforms[b] * total, side="right")))
        else:
            rest = [i for i in range(N) if i not in picks]
            picks.append(rest[int(uniforms[b] * len(rest))])
    return picks


def typiclust_picks(
    points: np.ndarray, labels: np.ndarray, labelled: np.ndarray, batch_size: int, *,
    num_neighbors: int = 20, min_cluster_size: int = 5,
) -> tuple[list[int], list[float]]:
    """TypiClust's selection loop given a clustering (Hacohen et al. 2022; Euclidean kNN)."""
    clusters = sorted(set(labels.tolist()))
    sizes = {c: int((labels == c).sum()) for c in clusters}
    counts = {c: int((labels[labelled] == c).sum()) for c in clusters}
    order = sorted(clusters, key=lambda c: (counts[c], -sizes[c], c))
    phases = [[c for c in order if sizes[c] > min_cluster_size], [c for c in order if sizes[c] <= min_cluster_size]]
    available = ~labelled.copy()
    picks, scores = [], []
    for phase in phases:
        position = 0
        while len(picks) < batch_size:
            live = [c for c in phase[position:] + phase[:position] if (available & (labels == c)).any()]
            if not live:
                break
            cluster = live[0]
            position = phase.index(cluster) + 1
            members = np.flatnonzero(available & (labels == cluster))
            k = min(num_neighbors, len(members) // 2)
            if k < 1:
                best, score = members[0], 0.0
            else:
                x = points[members]
                distances = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
                np.fill_diagonal(distances, np.inf)
                mean = np.sort(distances, axis=1)[:, :k].mean(1)
                best, score = members[int(np.argmin(mean))], 1.0 / mean.min()
            picks.append(int(best))
            scores.append(float(score))
            available[best] = False
    return picks, scores


def seed_004_probs() -> np.ndarray:
    """Seed 004's example: four items, K = 20 mixtures of two class distributions, classes rotated
    (probabilities ``[4, 20, 4]``; entropy 1.2376 and conditional entropy 1.2069 each)."""
    pairs = [
        ([0.7, 0.1, 0.1, 0.1], [0.3, 0.3, 0.2, 0.2]),
        ([0.1, 0.7, 0.1, 0.1], [0.2, 0.3, 0.3, 0.2]),
        ([0.1, 0.1, 0.7, 0.1], [0.2, 0.2, 0.3, 0.3]),
        ([0.1, 0.1, 0.1, 0.7], [0.3, 0.2, 0.2, 0.3]),
    ]
    weights = np.linspace(0, 1, 20)[:, None]
    return np.stack([(1.0 - weights) * np.asarray(a) + weights * np.asarray(b) for a, b in pairs])
