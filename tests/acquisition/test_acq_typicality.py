"""Typicality (TypiClust) and k-means against NumPy float64 references and scikit-learn."""

from __future__ import annotations

import acq_reference as ref
import numpy as np
import pytest
import torch

from activebayes.acquisition import kmeans, select, typicality
from activebayes.acquisition.typicality import cluster_order, mean_neighbor_distances, typical_picks


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def blobs(sizes: list[int], *, seed: int = 0, spread: float = 0.3, D: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Well separated Gaussian blobs: centres 10 apart along the diagonal; ``(points, blob of each)``."""
    g = gen(seed)
    points = [torch.randn(n, D, generator=g, dtype=torch.float64) * spread + 10.0 * b for b, n in enumerate(sizes)]
    return torch.cat(points), torch.cat([torch.full((n,), b) for b, n in enumerate(sizes)])


def test_mean_neighbor_distances_match_numpy() -> None:
    points = torch.randn(37, 4, generator=gen(1), dtype=torch.float64)
    points[5] = points[6]  # a duplicate is a neighbour at distance 0, the point itself is not
    for k in (1, 3, 20, 36):
        x = points.numpy()
        distances = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
        np.fill_diagonal(distances, np.inf)
        expected = np.sort(distances, axis=1)[:, :k].mean(1)
        np.testing.assert_allclose(mean_neighbor_distances(points, k).numpy(), expected, rtol=1e-10, atol=1e-12)


def test_kmeans_is_a_lloyd_fixed_point_and_agrees_with_scikit_learn() -> None:
    KMeans = pytest.importorskip("sklearn.cluster").KMeans
    adjusted_rand_score = pytest.importorskip("sklearn.metrics").adjusted_rand_score
    points, blob = blobs([40, 25, 60, 30], seed=2)
    ours = kmeans(points, 4, generator=gen(0))
    assert adjusted_rand_score(blob.numpy(), ours.labels_N.numpy()) == 1.0
    theirs = KMeans(4, n_init=1, random_state=0).fit(points.numpy())
    assert adjusted_rand_score(theirs.labels_, ours.labels_N.numpy()) == 1.0
    assert ours.inertia == pytest.approx(theirs.inertia_, rel=1e-9)
    # on structureless data: a fixed point of Lloyd's algorithm (NumPy), and a reasonable optimum
    points = torch.randn(300, 3, generator=gen(3), dtype=torch.float64)
    ours = kmeans(points, 6, generator=gen(1))
    x, labels, centres = points.numpy(), ours.labels_N.numpy(), ours.centres_k_D.numpy()
    distances = ((x[:, None] - centres[None]) ** 2).sum(-1)
    assert (labels == distances.argmin(1)).all()
    for c in range(6):
        np.testing.assert_allclose(centres[c], x[labels == c].mean(0), atol=1e-12)
    assert ours.inertia == pytest.approx(distances.min(1).sum(), rel=1e-12)
    best_of_ten = KMeans(6, n_init=10, random_state=0).fit(x).inertia_
    assert ours.inertia <= 1.1 * best_of_ten
    assert kmeans(points, 6, generator=gen(1)).labels_N.tolist() == labels.tolist()  # seeded
    # stopped by max_iter before converging: the inertia is that of the returned labels and centres
    early = kmeans(points, 6, generator=gen(1), max_iter=1)
    x_labels, x_centres = early.labels_N.numpy(), early.centres_k_D.numpy()
    assert early.iterations == 1 and not (((x[:, None] - x_centres[None]) ** 2).sum(-1).argmin(1) == x_labels).all()
    assert early.inertia == pytest.approx(((x - x_centres[x_labels]) ** 2).sum(), rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_typical_picks_match_numpy_given_the_clustering(seed: int) -> None:
    g = gen(seed)
    N, L, B = 90, 6, 9
    points = torch.randn(N + L, 3, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 12, (N + L,), generator=g)
    labels[torch.randperm(N, generator=g)[:3]] = 12  # a small cluster (3 pool items <= 5)
    is_labelled = torch.zeros(N + L, dtype=torch.bool)
    is_labelled[N:] = True
    ours = typical_picks(points, labels, is_labelled, B, num_neighbors=4)
    expected = ref.typiclust_picks(points.numpy(), labels.numpy(), is_labelled.numpy(), B, num_neighbors=4)
    assert ours[0] == expected[0]
    np.testing.assert_allclose(ours[1], expected[1], rtol=1e-10)
    # a batch larger than the clusters wraps around, and the small clusters come last
    everything = typical_picks(points, labels, is_labelled, N, num_neighbors=4)
    expected = ref.typiclust_picks(points.numpy(), labels.numpy(), is_labelled.numpy(), N, num_neighbors=4)
    assert everything[0] == expected[0] and sorted(everything[0]) == list(range(N))
    sizes = torch.bincount(labels)
    small = set(torch.nonzero(sizes[labels[:N]] <= 5).flatten().tolist())
    assert 12 in labels.tolist() and len(small) >= 3
    assert set(everything[0][-len(small):]) == small


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # the reference's 1 / 0 for equal items
@pytest.mark.parametrize("spare", [16, 2])
@pytest.mark.parametrize("case", ["plain", "duplicates", "all_equal", "labelled"])
def test_clusters_visited_again_pick_as_computed_afresh(monkeypatch, case: str, spare: int) -> None:
    """A batch longer than the number of clusters visits each cluster again; its kept
    neighbour lists (less the items picked since) give the picks and typicality of the
    NumPy reference, which computes every visit afresh: with the default spare neighbours
    and with 2 (items run out of kept neighbours, and the cluster is computed again)."""
    import importlib

    # the module (the package exports a function of the same name)
    monkeypatch.setattr(importlib.import_module("activebayes.acquisition.typicality"), "SPARE_NEIGHBORS", spare)
    g = gen(7)
    T, D = 300, 24
    points = torch.randn(T, D, generator=g, dtype=torch.float64) + 1e3  # far from the origin
    labels = torch.randint(0, 3, (T,), generator=g)
    labels[:30] = 3  # a small cluster
    is_labelled = torch.zeros(T, dtype=torch.bool)
    if case == "duplicates":
        points[40:70] = points[40]  # a dense spot of equal items: the most typical (distance 0)
        points[100:103] = points[101]
    elif case == "all_equal":
        points[labels == 1] = points[labels == 1][0]  # every mean distance 0 in one cluster
    elif case == "labelled":
        is_labelled[torch.randperm(T, generator=g)[:60]] = True
    batch = 150  # 4 clusters: each is visited about 37 times
    ours = typical_picks(points, labels, is_labelled, batch, num_neighbors=7)
    expected = ref.typiclust_picks(points.numpy(), labels.numpy(), is_labelled.numpy(), batch, num_neighbors=7)
    assert ours[0] == expected[0]
    # equal items: the reference's distance is 0 (typicality inf); the kept neighbours' distances
    # are computed from the differences, so they are exactly 0 here too (the largest float64
    # stands for 1 / 0), whatever rounding the expansion |x|^2 - 2x.y + |y|^2 left
    tied = np.isinf(expected[1])
    assert (case in ("duplicates", "all_equal")) == bool(tied.any())
    assert all(score == np.finfo(np.float64).max for score in np.asarray(ours[1])[tied])
    np.testing.assert_allclose(np.asarray(ours[1])[~tied], np.asarray(expected[1])[~tied], rtol=1e-9)


def test_cluster_order_prefers_uncovered_then_large_clusters() -> None:
    labels = torch.tensor([0] * 10 + [1] * 20 + [2] * 15 + [3] * 3 + [4] * 8)
    labelled = torch.zeros(len(labels), dtype=torch.bool)
    labelled[[0, 10, 11]] = True  # cluster 0 has one labelled item, cluster 1 two
    preferred, small = cluster_order(labels, labelled, 6, 5)  # cluster 5 is empty
    assert preferred == [2, 4, 0, 1] and small == [3]


def test_typicality_picks_the_densest_item_of_each_uncovered_blob() -> None:
    points, blob = blobs([50, 30, 40], seed=4)
    labelled = points[blob == 1][:2] + 0.01  # blob 1 is already covered
    picked = typicality(points, labelled, 2, generator=gen(0))
    assert sorted(int(blob[i]) for i in picked.indices) == [0, 2]
    # the same as the NumPy reference on the k-means clustering of pool + labelled items
    clustering = kmeans(torch.cat([points, labelled]), 2 + 2, generator=gen(0))
    is_labelled = np.r_[np.zeros(120, bool), np.ones(2, bool)]
    expected = ref.typiclust_picks(torch.cat([points, labelled]).numpy(), clustering.labels_N.numpy(), is_labelled, 2)
    assert picked.tolist() == expected[0]
    np.testing.assert_allclose(picked.scores.numpy(), expected[1], rtol=1e-10)
    assert select(120, "typicality", 2, features_N_D=points, labelled_features_L_D=labelled,
                  generator=gen(0)).tolist() == picked.tolist()


def test_typicality_first_round_covers_every_blob_and_is_seeded() -> None:
    points, blob = blobs([30, 45, 20, 60, 25], seed=5, D=4)
    first = typicality(points, points[:0], 5, generator=gen(3))
    assert sorted(int(blob[i]) for i in first.indices) == [0, 1, 2, 3, 4]
    assert first.tolist() == typicality(points, points[:0], 5, generator=gen(3)).tolist()
    assert bool((first.scores > 0).all()) and first.strategy == "typicality"
    # largest uncovered blob first
    assert int(blob[first.indices[0]]) == 3


def test_typicality_edge_cases_and_budget() -> None:
    points = torch.randn(7, 2, generator=gen(6), dtype=torch.float64)
    every = typicality(points, points[:0], 7, generator=gen(0))  # 7 clusters of one item each
    assert sorted(every.tolist()) == list(range(7)) and every.scores.tolist() == [0.0] * 7
    same = typicality(torch.ones(9, 3), torch.ones(2, 3), 4, generator=gen(0))  # identical points
    assert len(set(same.tolist())) == 4 and bool((same.scores == torch.finfo(torch.float64).max).all())
    costs = torch.linspace(1, 2, 7, dtype=torch.float64)
    picked = select(7, "typicality", 7, features_N_D=points, labelled_features_L_D=points[:0], costs_N=costs,
                    cost_budget=3.5, generator=gen(0))
    spent = float(costs[picked.indices].sum())
    assert spent <= 3.5 and len(picked) >= 2
    left = [i for i in range(7) if i not in picked.tolist()]
    assert float(costs[left].min()) > 3.5 - spent  # stopped only when nothing else fits
    with pytest.raises(ValueError, match="batch_size must be <= the pool size N=7"):
        typicality(points, points[:0], 8)
    with pytest.raises(ValueError, match="num_neighbors must be >= 1"):
        typicality(points, points[:0], 2, num_neighbors=0)


def test_with_a_fixed_number_of_clusters_a_longer_ranking_starts_with_the_batch() -> None:
    points, _ = blobs([40, 30, 50, 20], seed=7, D=3)
    labelled = points[:3] + 0.01
    batch = typicality(points, labelled, 4, generator=gen(2))
    ranking = typicality(points, labelled, 12, num_clusters=3 + 4, generator=gen(2))
    assert ranking.tolist()[:4] == batch.tolist()
    with pytest.raises(ValueError, match="num_clusters must be <= N \\+ L = 143 items"):
        typicality(points, labelled, 4, num_clusters=144)
