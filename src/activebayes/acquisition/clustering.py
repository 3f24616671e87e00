r"""k-means++ seeding and k-means (Lloyd), seeded, in float64: what BADGE and typicality need.

*k-means++ seeding* (Arthur & Vassilvitskii 2007): after the first centre, each next
centre is drawn with probability proportional to ``D(x)^2``, the squared distance
from ``x`` to its nearest centre so far. Items already chosen have ``D = 0`` and are
never drawn again. The draws use one uniform ``u_b ~ U[0, 1)`` per centre, drawn in
turn from the CPU ``generator`` as ``torch.rand(1, dtype=float64)`` (so the first b
centres of a run for k > b are those of a run for b: a ranking's prefix is the batch),
and inverse CDF sampling: the centre is the first item whose running sum of weights exceeds
``u_b · Σ weights`` (so an independent implementation fed the same uniforms makes
the same picks). When every remaining weight is 0 (all items coincide with a centre)
the centre is drawn uniformly among the remaining eligible items with the same
uniform (``floor(u_b · count)``-th of them).

*k-means* (Lloyd 1982): from a k-means++ seeding (first centre uniform), alternate
"assign every point to its nearest centre" (ties: the lowest centre index) and "move
every centre to the mean of its points" until no assignment changes or ``max_iter``.
A centre that loses all its points stays where it is. Distances use
``|x|^2 - 2 x·c + |c|^2`` in float64, one ``[n, k]`` block of points at a time
(``n * k <= BLOCK_ELEMENTS``), so memory is ``O(N · D + k · D)`` plus one block.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from activebayes._seeding import as_generator
from activebayes._validation import check_positive_int, check_torch_device
from activebayes.acquisition._chunks import iter_chunks
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["KMeansResult", "d2_seeding", "kmeans", "kmeans_plus_plus", "BLOCK_ELEMENTS"]

#: Entries of one ``[n, k]`` float64 block of point-to-centre distances (16 MiB).
BLOCK_ELEMENTS = 1 << 21


@dataclass(frozen=True)
class KMeansResult:
    """A k-means clustering.

    Attributes:
        labels_N: int64 ``[N]``, the cluster of every point (``0 .. k-1``).
        centres_k_D: float64 ``[k, D]``, the centres.
        inertia: ``Σ_n |x_n - centre(x_n)|^2``.
        iterations: Lloyd iterations run.
    """

    labels_N: Tensor
    centres_k_D: Tensor
    inertia: float
    iterations: int


def d2_seeding(
    N: int,
    k: int,
    sq_distances_to: Callable[[int], Tensor],
    *,
    first: int | None,
    generator: torch.Generator | int | None,
    eligible: Callable[[list[int]], Tensor | None] | None = None,
) -> tuple[list[int], list[float]]:
    """``D^2`` seeding of ``k`` distinct items out of ``N``; returns ``(picks, D^2 at each pick)``.

    ``sq_distances_to(i)`` gives float64 ``[N]`` squared distances to item ``i``.
    ``first``: the first pick (BADGE: the largest embedding), or ``None`` to draw it
    uniformly. ``eligible(picks_so_far)`` may return a bool ``[N]`` mask of items that
    may still be picked (a labelling budget), or ``None`` for all; when no item is
    eligible the seeding stops early. The first pick has no earlier centre: its
    ``D^2`` is reported as ``nan`` (BADGE reports ``|g|^2`` there). ``generator``: a CPU
    ``torch.Generator``, an int seed (:func:`activebayes._seeding.as_generator`, as
    :func:`~activebayes.acquisition.select` reads it) or ``None`` (torch's global generator).
    """
    if generator is not None:
        generator = as_generator(generator, "generator")
    chosen_N = torch.zeros(N, dtype=torch.bool)
    picks: list[int] = []
    d2_at_pick: list[float] = []
    d2_N: Tensor | None = None
    for step in range(k):
        uniform = float(torch.rand(1, generator=generator, dtype=torch.float64))
        allowed_N = ~chosen_N
        mask = eligible(picks) if eligible is not None else None
        if mask is not None:
            allowed_N &= mask
        if not bool(allowed_N.any()):
            break
        if step == 0 and first is not None:
            index = first
            if not bool(allowed_N[index]):
                raise InvalidArgumentError(f"the first centre {index} is not eligible")
        elif d2_N is None:
            index = _uniform_pick(allowed_N, uniform)
        else:
            weights_N = torch.where(allowed_N, d2_N.clamp_min(0.0), torch.zeros_like(d2_N))
            cumulative_N = weights_N.cumsum(0)
            total = float(cumulative_N[-1])
            if total > 0:
                index = int(torch.searchsorted(cumulative_N, torch.tensor([uniform * total], dtype=torch.float64), right=True))
                index = min(index, N - 1)
                if not weights_N[index] > 0:  # rounding at the very end of the range
                    index = int(torch.nonzero(weights_N > 0)[-1])
            else:
                index = _uniform_pick(allowed_N, uniform)
        d2_at_pick.append(float("nan") if d2_N is None else float(d2_N[index].clamp_min(0.0)))
        picks.append(index)
        chosen_N[index] = True
        distances_N = sq_distances_to(index).to("cpu", torch.float64)
        distances_N[index] = 0.0
        d2_N = distances_N if d2_N is None else torch.minimum(d2_N, distances_N)
    return picks, d2_at_pick


def _uniform_pick(allowed_N: Tensor, uniform: float) -> int:
    candidates = torch.nonzero(allowed_N).flatten()
    return int(candidates[min(int(uniform * len(candidates)), len(candidates) - 1)])


def _points(points_N_D: object, name: str) -> Tensor:
    if not isinstance(points_N_D, Tensor):
        raise InvalidTypeError(f"{name} must be a torch.Tensor, got {type(points_N_D).__name__}")
    if points_N_D.ndim != 2 or points_N_D.shape[0] == 0 or points_N_D.shape[1] == 0:
        raise InvalidArgumentError(f"{name} must have shape [N, D] with N, D >= 1, got {tuple(points_N_D.shape)}")
    if not points_N_D.is_floating_point():
        raise InvalidTypeError(f"{name} must be a floating point tensor, got dtype {points_N_D.dtype}")
    if not bool(torch.isfinite(points_N_D).all()):
        raise InvalidArgumentError(f"{name} must be finite, got NaN or inf")
    return points_N_D.to(torch.float64)


def _sq_distances(points_N_D: Tensor, norms_N: Tensor, centres_k_D: Tensor) -> Tensor:
    """``[n, k]`` squared distances ``|x|^2 - 2 x·c + |c|^2`` (clamped at 0)."""
    centre_norms_k = (centres_k_D * centres_k_D).sum(-1)
    d2 = torch.addmm(norms_N[:, None] + centre_norms_k[None, :], points_N_D, centres_k_D.t(), alpha=-2.0)
    return d2.clamp_min_(0.0)


def kmeans_plus_plus(
    points_N_D: Tensor, k: int, *, generator: torch.Generator | int | None = None
) -> list[int]:
    """Indices of ``k`` distinct k-means++ centres among the rows of ``points_N_D`` (first uniform).

    Args:
        points_N_D: the points ``[N, D]``.
        k: centres, ``1 <= k <= N``.
        generator: seeds the draws: a CPU ``torch.Generator``, an int seed (as
            :func:`~activebayes.acquisition.select` reads one: ``torch.Generator().manual_seed(mix_seed(seed))``),
            or ``None`` for torch's global generator.

    >>> x = torch.tensor([[0.0], [0.1], [10.0], [10.1]])
    >>> sorted(i // 2 for i in kmeans_plus_plus(x, 2, generator=torch.Generator().manual_seed(0)))
    [0, 1]
    """
    points = _points(points_N_D, "points_N_D")
    if generator is not None:  # an int is a seed; a wrong type is named here, not deep in torch
        generator = as_generator(generator, "generator")
    N = points.shape[0]
    k = check_positive_int(k, "k")
    if k > N:
        raise InvalidArgumentError(f"k must be <= the number of points N={N}, got {k}")
    norms_N = (points * points).sum(-1)
    picks, _ = d2_seeding(
        N, k, lambda i: _sq_distances(points, norms_N, points[i : i + 1])[:, 0], first=None, generator=generator
    )
    return picks


def kmeans(
    points_N_D: Tensor,
    k: int,
    *,
    generator: torch.Generator | int | None = None,
    max_iter: int = 100,
    device: torch.device | str | None = None,
) -> KMeansResult:
    """k-means (Lloyd) from a k-means++ seeding; float64; seeded by ``generator``.

    Args:
        points_N_D: the points ``[N, D]``.
        k: clusters, ``1 <= k <= N``.
        generator: seeds the k-means++ seeding: a CPU ``torch.Generator``, an int seed
            (as :func:`~activebayes.acquisition.select` reads one:
            ``torch.Generator().manual_seed(mix_seed(seed))``), or ``None`` for torch's
            global generator.
        max_iter: at most this many assignment steps.
        device: compute there (the points are copied there in float64).

    >>> x = torch.tensor([[0.0, 0.0], [0.0, 1.0], [9.0, 9.0], [9.0, 10.0]])
    >>> result = kmeans(x, 2, generator=torch.Generator().manual_seed(0))
    >>> bool(result.labels_N[0] == result.labels_N[1] != result.labels_N[2] == result.labels_N[3])
    True
    """
    points = _points(points_N_D, "points_N_D")
    if generator is not None:  # an int is a seed; a wrong type is named here, not deep in torch
        generator = as_generator(generator, "generator")
    N, D = points.shape
    k = check_positive_int(k, "k")
    if k > N:
        raise InvalidArgumentError(f"k must be <= the number of points N={N}, got {k}")
    max_iter = check_positive_int(max_iter, "max_iter")
    device = check_torch_device(device)
    if device is not None:
        points = points.to(device)
    norms_N = (points * points).sum(-1)
    seeds = d2_seeding(
        N, k, lambda i: _sq_distances(points, norms_N, points[i : i + 1])[:, 0], first=None, generator=generator
    )[0]
    centres_k_D = points[torch.tensor(seeds, device=points.device)].clone()
    rows = max(1, BLOCK_ELEMENTS // k)
    labels_N = torch.full((N,), -1, dtype=torch.long, device=points.device)
    iterations = 0
    inertia = 0.0
    for iterations in range(1, max_iter + 1):
        new_labels_N = torch.empty_like(labels_N)
        inertia = 0.0
        for start, end in iter_chunks(N, rows):
            d2_n_k = _sq_distances(points[start:end], norms_N[start:end], centres_k_D)
            best = d2_n_k.min(dim=1)
            new_labels_N[start:end] = best.indices
            inertia += float(best.values.sum())
        changed = not torch.equal(new_labels_N, labels_N)
        labels_N = new_labels_N
        if not changed:
            break
        sums_k_D = torch.zeros_like(centres_k_D).index_add_(0, labels_N, points)
        counts_k = torch.bincount(labels_N, minlength=k).to(torch.float64)
        filled = counts_k > 0
        centres_k_D[filled] = sums_k_D[filled] / counts_k[filled, None]
    else:  # max_iter reached: the centres moved after the last assignment, so measure against them
        inertia = 0.0
        for start, end in iter_chunks(N, rows):
            inertia += float(((points[start:end] - centres_k_D[labels_N[start:end]]) ** 2).sum())
    return KMeansResult(labels_N.cpu(), centres_k_D.cpu(), inertia, iterations)
