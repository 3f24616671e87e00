r"""Typicality: TypiClust (Hacohen, Dekel, Weinshall 2022, *Active Learning on a Budget*).

With very few labels the most useful items are *typical* ones (dense regions of
the data), spread over the data (one per cluster), not the uncertain ones: a
network trained on a handful of labels cannot judge its own uncertainty (the
cold-start problem). TypiClust works on a representation ``h(x)`` of the items
(ideally learnt without labels, e.g. self-supervised):

1. cluster the labelled and unlabelled items together with k-means,
   ``k = min(L + B, max_clusters)`` (L labelled, B = batch size; or ``num_clusters``);
2. take clusters in order: fewest labelled items first, then the largest
   (ties: the lower cluster id); clusters of ``<= min_cluster_size`` items are left
   out unless nothing else is left (the paper's code: 5);
3. from each, pick its most *typical* unlabelled item

.. math:: \mathrm{Typicality}(x) = \Bigl(\frac1k \sum_{x_i \in \mathrm{kNN}(x)} \lVert h(x) - h(x_i) \rVert_2\Bigr)^{-1},

   the inverse mean Euclidean distance to its k nearest neighbours among the
   cluster's remaining unlabelled items, ``k = min(num_neighbors, n_c // 2)`` for a
   cluster of ``n_c`` such items (the paper: 20, fewer in small clusters); if B is
   larger than the number of clusters, the order repeats.

Differences from the paper's code, on purpose: distances are Euclidean as in the
paper's formula (the code's faiss index returns squared ones); there is no ``+1e-5``
in the denominator (an item whose neighbours coincide with it gets the largest
float64, not ``1e5``); a cluster with one unlabelled item left gives that item with
typicality 0. k-means is :func:`~activebayes.acquisition.clustering.kmeans` (seeded,
plain k-means++ then Lloyd) rather than scikit-learn's.

Cost: k-means ``O(iterations · (N + L) · k · D)``; typicality of a cluster of ``n_c``
items ``O(n_c^2 D)``, computed in ``[r, n_c]`` blocks (``r · n_c <=``
:data:`~activebayes.acquisition.clustering.BLOCK_ELEMENTS`), so memory stays
``O((N + L) D)`` plus one block. Only the ``k`` smallest squared distances of a row are
rooted, and a cluster's neighbour lists are kept for its later visits (a ranking longer
than the number of clusters visits each cluster again; :data:`SPARE_NEIGHBORS`):
``benchmarks/typicality_speed.py`` times this against the plain float64 computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._seeding import as_generator
from activebayes._validation import Device, check_positive_int, check_torch_device
from activebayes.acquisition._chunks import iter_chunks
from activebayes.acquisition._features import check_features
from activebayes.acquisition.clustering import BLOCK_ELEMENTS, kmeans
from activebayes.acquisition.selection import BudgetPlan, Selection, check_budget
from activebayes.errors import InvalidArgumentError

__all__ = [
    "typicality",
    "typical_picks",
    "mean_neighbor_distances",
    "cluster_order",
    "NUM_NEIGHBORS",
    "MIN_CLUSTER_SIZE",
    "MAX_CLUSTERS",
]


#: Nearest neighbours for typicality (the paper: 20).
NUM_NEIGHBORS = 20
#: Clusters of at most this many items are left out while larger ones remain (the paper's code: 5).
MIN_CLUSTER_SIZE = 5
#: At most this many k-means clusters (the paper's code: 500).
MAX_CLUSTERS = 500


def mean_neighbor_distances(points_n_D: Tensor, num_neighbors: int) -> Tensor:
    """Mean Euclidean distance of every row to its ``num_neighbors`` nearest other rows, float64 ``[n]``.

    The nearest are found with ``|x|^2 - 2 x·y + |y|^2`` in float64, in ``[r, n]`` blocks,
    and their distances computed again from the differences (so equal rows are exactly 0
    apart); a row is never its own neighbour (duplicates of it are). Needs ``1 <= num_neighbors < n``.
    """
    d2_n_k, _ = _nearest(points_n_D.to(torch.float64), num_neighbors, num_neighbors)
    return d2_n_k.clamp_min_(0.0).sqrt_().mean(dim=1)


def _nearest(points_n_D: Tensor, num_neighbors: int, keep: int) -> tuple[Tensor, Tensor]:
    """``(d2_n_m, rows_n_m)``: each row's ``keep`` smallest squared distances to the other rows,
    ascending, and which rows they are (``num_neighbors <= keep < n``)."""
    points = points_n_D
    n = points.shape[0]
    assert 1 <= num_neighbors <= keep < n
    norms_n = (points * points).sum(-1)
    d2_n_m = torch.empty(n, keep, dtype=points.dtype, device=points.device)
    rows_n_m = torch.empty(n, keep, dtype=torch.long, device=points.device)
    block = max(1, BLOCK_ELEMENTS // n)
    for start, end in iter_chunks(n, block):
        d2_r_n = torch.addmm(norms_n[start:end, None] + norms_n[None, :], points[start:end], points.t(), alpha=-2.0)
        d2_r_n[torch.arange(end - start, device=points.device), torch.arange(start, end, device=points.device)] = torch.inf
        # the k smallest squared distances are the k smallest distances (the clamp at 0 and the
        # square root keep the order), so only they are clamped and rooted, by the caller
        rows_r_m = torch.topk(d2_r_n, keep, dim=1, largest=False).indices
        # the expansion cancels: for points far from the origin it leaves a rounding error of
        # about eps |x|^2, so equal items would seem apart by rounding noise (and which of them
        # is the most typical would depend on the BLAS). The kept neighbours' squared distances
        # are computed again from the differences: equal items are exactly 0 apart.
        d2_r_m = _exact_d2(points, torch.arange(start, end, device=points.device), rows_r_m)
        d2_r_m, order_r_m = torch.sort(d2_r_m, dim=1, stable=True)
        d2_n_m[start:end], rows_n_m[start:end] = d2_r_m, torch.gather(rows_r_m, 1, order_r_m)
    return d2_n_m, rows_n_m


def _exact_d2(points_n_D: Tensor, rows_r: Tensor, neighbors_r_m: Tensor) -> Tensor:
    """``|x_i - x_j|^2`` for each row ``i`` of ``rows_r`` and each ``j`` of its ``neighbors_r_m``
    row, from the differences, in blocks of at most ``BLOCK_ELEMENTS`` elements."""
    r, m = neighbors_r_m.shape
    out_r_m = torch.empty(r, m, dtype=points_n_D.dtype, device=points_n_D.device)
    step = max(1, BLOCK_ELEMENTS // max(1, m * points_n_D.shape[1]))
    for start, end in iter_chunks(r, step):
        diff_b_m_D = points_n_D[rows_r[start:end], None, :] - points_n_D[neighbors_r_m[start:end]]
        out_r_m[start:end] = (diff_b_m_D * diff_b_m_D).sum(-1)
    return out_r_m


#: Neighbours kept per item beyond the ``k`` the typicality needs, so that a cluster visited
#: again (a batch longer than the number of clusters) is not computed again: the items picked
#: since drop out of the kept lists, and the cluster is computed afresh only when an allowed
#: item has fewer than ``k`` left (:class:`_NeighborCache`).
SPARE_NEIGHBORS = 16


def cluster_order(labels_T: Tensor, is_labelled_T: Tensor, num_clusters: int, min_cluster_size: int) -> tuple[list[int], list[int]]:
    """``(preferred, small)``: cluster ids in TypiClust's order.

    Order: fewest labelled members first, then the largest, then the lowest id.
    ``preferred`` holds the clusters with more than ``min_cluster_size`` members,
    ``small`` the others (used only once no preferred cluster has items left).
    """
    sizes = torch.bincount(labels_T, minlength=num_clusters).tolist()
    labelled = torch.bincount(labels_T[is_labelled_T], minlength=num_clusters).tolist()
    order = sorted(range(num_clusters), key=lambda c: (labelled[c], -sizes[c], c))
    order = [c for c in order if sizes[c] > 0]
    return [c for c in order if sizes[c] > min_cluster_size], [c for c in order if sizes[c] <= min_cluster_size]


@dataclass(frozen=True)
class _Pick:
    index: int
    typicality: float


class _NeighborCache:
    """Each cluster's nearest-neighbour lists, computed once and reused on later visits.

    Between two visits of a cluster its members only lose the items picked meanwhile, so an
    item's ``k`` nearest remaining members are the first ``k`` of its kept list (the
    ``k + SPARE_NEIGHBORS`` nearest at the time, ascending) that are still members: the same
    distances as computing the cluster again, without the ``O(n_c^2 D)`` work."""

    def __init__(self, points_T_D: Tensor) -> None:
        self.points_T_D = points_T_D
        self.lists: dict[int, tuple[Tensor, Tensor, Tensor, int]] = {}  # cluster -> (members, d2, rows, k)

    def means(self, cluster: int, members: Tensor, allowed: Tensor, k: int) -> Tensor:
        """Mean distance of each of ``members`` to its ``k`` nearest other members, float64; ``inf``
        where not ``allowed``."""
        n = int(members.shape[0])
        kept = self.lists.get(cluster)
        means = self._from_lists(kept, members, allowed, k, self.points_T_D.shape[0]) if kept is not None else None
        if means is None:
            keep = min(k + SPARE_NEIGHBORS, n - 1)
            d2, rows = _nearest(self.points_T_D[members].to(torch.float64), k, keep)
            self.lists[cluster] = (members, d2, rows, k)
            means = d2[:, :k].clamp_min(0.0).sqrt_().mean(dim=1)
        return torch.where(allowed, means, torch.full_like(means, torch.inf))

    @staticmethod
    def _from_lists(kept: tuple[Tensor, Tensor, Tensor, int], members: Tensor, allowed: Tensor, k: int,
                    T: int) -> Tensor | None:
        then, d2_n_m, rows_n_m, k_then = kept
        if k != k_then:
            return None
        still_T = torch.zeros(T, dtype=torch.bool, device=then.device)
        still_T[members] = True
        still_n = still_T[then]  # which of the members then are members now (both ascending)
        if int(still_n.sum()) != int(members.shape[0]):
            return None  # not a subset of the members then
        valid_n_m = still_n[rows_n_m]
        d2_n_m, valid_n_m = d2_n_m[still_n], valid_n_m[still_n]
        if bool((valid_n_m.sum(dim=1)[allowed] < k).any()):
            return None  # an allowed item ran out of kept neighbours: computed afresh
        # the first k valid of each ascending list (stable: keeps the ascending order)
        order_n_m = torch.argsort((~valid_n_m).to(torch.int8), dim=1, stable=True)[:, :k]
        first_n_k = torch.gather(d2_n_m, 1, order_n_m)
        first_n_k = torch.where(torch.gather(valid_n_m, 1, order_n_m), first_n_k, torch.zeros_like(first_n_k))
        return first_n_k.clamp_min(0.0).sqrt_().mean(dim=1)


def _most_typical(cache: _NeighborCache, cluster: int, members: Tensor, allowed: Tensor,
                  num_neighbors: int) -> _Pick | None:
    """The most typical of ``members`` (row indices of cluster ``cluster``) among those
    ``allowed``; ``None`` if none is allowed."""
    if not bool(allowed.any()):
        return None
    n = int(members.shape[0])
    k = min(num_neighbors, n // 2)
    if k < 1:
        return _Pick(int(members[allowed][0]), 0.0)
    means = cache.means(cluster, members, allowed, k)
    best = int(torch.argmin(means))  # the first of equals
    mean = float(means[best])
    return _Pick(int(members[best]), 1.0 / mean if mean > 0 else float(torch.finfo(torch.float64).max))


def typical_picks(
    points_T_D: Tensor,
    labels_T: Tensor,
    is_labelled_T: Tensor,
    batch_size: int,
    *,
    num_neighbors: int = NUM_NEIGHBORS,
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    costs_T: Tensor | None = None,
    cost_budget: float | None = None,
) -> tuple[list[int], list[float]]:
    """TypiClust's picks given a clustering: ``(rows of points_T_D, typicality of each)``.

    ``points_T_D`` are all items (labelled and not), ``labels_T`` their clusters,
    ``is_labelled_T`` marks the labelled ones (never picked, not neighbours). Clusters
    are visited in :func:`cluster_order`, cycling; each visit picks the most typical
    remaining unlabelled member (that fits the budget, with ``costs_T`` / ``cost_budget``).
    Stops after ``batch_size`` picks or when nothing is left that fits.
    """
    T = int(points_T_D.shape[0])
    num_clusters = int(labels_T.max()) + 1
    preferred, small = cluster_order(labels_T, is_labelled_T, num_clusters, min_cluster_size)
    available_T = ~is_labelled_T  # a new tensor: the caller's mask is not changed
    cache = _NeighborCache(points_T_D)
    picks: list[int] = []
    scores: list[float] = []
    spent = 0.0
    for order in (preferred, small):
        position = 0
        while len(picks) < batch_size:
            fits_T = available_T
            if costs_T is not None and cost_budget is not None:
                fits_T = available_T & (costs_T <= (cost_budget - spent) * (1 + 1e-12) + 1e-12)
            rotated = order[position:] + order[:position]
            cluster = next((c for c in rotated if bool((fits_T & (labels_T == c)).any())), None)
            if cluster is None:
                break
            position = order.index(cluster) + 1
            members = torch.nonzero(available_T & (labels_T == cluster)).flatten()
            pick = _most_typical(cache, cluster, members, fits_T[members], num_neighbors)
            assert pick is not None
            picks.append(pick.index)
            scores.append(pick.typicality)
            available_T[pick.index] = False
            if costs_T is not None:
                spent += float(costs_T[pick.index])
    assert len(set(picks)) == len(picks) and all(0 <= i < T for i in picks)
    return picks, scores


def typicality(
    features_N_D: Tensor,
    labelled_features_L_D: Tensor,
    batch_size: int,
    *,
    generator: torch.Generator | int | None = None,
    num_neighbors: int = NUM_NEIGHBORS,
    min_cluster_size: int = MIN_CLUSTER_SIZE,
    max_clusters: int = MAX_CLUSTERS,
    num_clusters: int | None = None,
    max_iter: int = 100,
    costs_N: Tensor | None = None,
    cost_budget: float | None = None,
    plan: BudgetPlan | None = None,
    device: Device = None,
) -> Selection:
    r"""TypiClust batch: the most typical item of each of the largest uncovered clusters.

    Args:
        features_N_D: representation of the N pool (unlabelled) items ``[N, D]``.
        labelled_features_L_D: representation of the L labelled items ``[L, D]``
            (``L = 0`` allowed: the first round).
        batch_size: picks, ``1 <= batch_size <= N``.
        generator: seeds k-means' k-means++ seeding: a CPU ``torch.Generator``, an int
            seed (``torch.Generator().manual_seed(mix_seed(seed))``, as
            :func:`~activebayes.acquisition.select` does, so ``typicality(..., generator=7)``
            is ``select(..., "typicality", generator=7)``), or ``None`` for torch's global
            generator.
        num_neighbors: k of the typicality (capped at half the cluster's unlabelled items).
        min_cluster_size: clusters of at most this many items are used only when no
            larger one has items left.
        max_clusters: cap on ``k = L + batch_size`` clusters.
        num_clusters: k itself (at most ``N + L``), instead of ``min(L + batch_size,
            max_clusters)``. The clustering depends on k, so a longer ranking is an
            extension of a shorter one only when both use the same k: a caller that asks
            for more picks than its batch (a look-ahead) passes ``L + its batch size``.
        max_iter: k-means iterations at most.
        costs_N: optional per-item labelling costs ``[N]`` (with ``cost_budget``).
        cost_budget: total labelling cost (with ``costs_N``).
        plan: an already validated cost budget (instead of ``costs_N`` / ``cost_budget``).
        device: run k-means and distances there; results on the CPU.

    Returns:
        :class:`Selection` of pool indices; ``scores`` are the typicalities at pick time.

    >>> g = torch.Generator().manual_seed(0)
    >>> blobs = torch.cat([torch.randn(30, 2, generator=g) * 0.1 + c for c in (0.0, 5.0, 10.0)])
    >>> picks = typicality(blobs, blobs[:0], 3, generator=g)
    >>> sorted(int(i) // 30 for i in picks.indices)  # one per blob
    [0, 1, 2]
    """
    if generator is not None:  # an int is a seed; a wrong type is named here, not deep in torch
        generator = as_generator(generator, "generator")
    pool = check_features(features_N_D, "features_N_D", None)
    N, D = pool.shape
    if N == 0:
        raise InvalidArgumentError("features_N_D is empty: the pool has no items")
    labelled = check_features(labelled_features_L_D, "labelled_features_L_D", None, dims=D)
    L = int(labelled.shape[0])
    batch_size = check_positive_int(batch_size, "batch_size")
    if batch_size > N:
        raise InvalidArgumentError(f"batch_size must be <= the pool size N={N}, got {batch_size}")
    num_neighbors = check_positive_int(num_neighbors, "num_neighbors")
    min_cluster_size = check_positive_int(min_cluster_size, "min_cluster_size", allow_zero=True)
    max_clusters = check_positive_int(max_clusters, "max_clusters")
    if num_clusters is not None:
        num_clusters = check_positive_int(num_clusters, "num_clusters")
        if num_clusters > N + L:
            raise InvalidArgumentError(f"num_clusters must be <= N + L = {N + L} items, got {num_clusters}")
    if plan is None:
        plan = check_budget(costs_N, cost_budget, N)
    elif costs_N is not None or cost_budget is not None:
        raise InvalidArgumentError("pass either plan or costs_N / cost_budget, not both")
    device = check_torch_device(device)

    points_T_D = torch.cat([pool.to(torch.float64), labelled.to(pool.device, torch.float64)])
    if device is not None:
        points_T_D = points_T_D.to(device)
    k = min(L + batch_size, max_clusters, N + L) if num_clusters is None else num_clusters
    clustering = kmeans(points_T_D, k, generator=generator, max_iter=max_iter)
    is_labelled_T = torch.zeros(N + L, dtype=torch.bool)
    is_labelled_T[N:] = True
    costs_T = None
    if plan is not None:
        costs_T = torch.cat([plan.costs_N, torch.zeros(L, dtype=torch.float64)])
    picks, scores = typical_picks(
        points_T_D, clustering.labels_N.to(points_T_D.device), is_labelled_T.to(points_T_D.device), batch_size,
        num_neighbors=num_neighbors, min_cluster_size=min_cluster_size,
        costs_T=None if costs_T is None else costs_T.to(points_T_D.device),
        cost_budget=None if plan is None else plan.cost_budget,
    )
    return Selection(torch.tensor(picks, dtype=torch.long), torch.tensor(scores, dtype=torch.float64), "typicality")
