"""TypiClust's picks on a large pool: the library's typicality against the plain float64 computation.

The default strategy's cold start is typicality (TypiClust): k-means on the pool, then the
most typical unlabelled item of each cluster, whose cost is every pairwise distance inside
a cluster (``O(n_c^2 D)``). The labelling app ranks more items than a batch (a lookahead of
100 beyond a batch of 10) from as many clusters as labels plus one batch, so at round 0 it
visits each of 10 clusters 11 times, and on a large pool a cluster holds thousands of items
(WordNet's 72,115 glosses: the app's first ranking waited minutes on it). This script
clusters the pool once with the library's k-means (``--clusters``, default 10) and times
``--batch-size`` picks (default 110) on that same clustering:

* ``plain``: each visit computes its cluster afresh, every distance in float64, clamped and
  rooted before the k nearest are taken (the library's computation before the change, kept
  here as the reference), and
* ``library``: :func:`activebayes.acquisition.typicality.typical_picks` (neighbour lists kept
  between visits, only the k nearest rooted),

interleaved ``--repeats`` times in one process, and checks that both pick the same items
with the same typicality. It prints the median seconds, the ratio, the largest cluster and
the machine's load; the results are written to ``benchmarks/results/typicality_speed.json``.

    python benchmarks/typicality_speed.py                      # 20,000 WordNet noun glosses (wordnet-base)
    python benchmarks/typicality_speed.py --dataset mnist --data-dir ../shared/data/mnist
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "typicality_speed.json"


def plain_picks(points_T_D, labels_T, is_labelled_T, batch_size, num_neighbors=20, min_cluster_size=5):
    """TypiClust's picks computed plainly in float64 (the reference): the library's cluster
    order, each cluster's mean distance to its k nearest computed in full."""
    from activebayes.acquisition.clustering import BLOCK_ELEMENTS
    from activebayes.acquisition.typicality import cluster_order

    def means(points, k):
        points = points.to(torch.float64)
        n = points.shape[0]
        norms = (points * points).sum(-1)
        out = torch.empty(n, dtype=torch.float64)
        rows = max(1, BLOCK_ELEMENTS // n)
        for start in range(0, n, rows):
            end = min(n, start + rows)
            d = torch.addmm(norms[start:end, None] + norms[None, :], points[start:end], points.t(), alpha=-2.0)
            d = d.clamp_min_(0.0).sqrt_()
            d[torch.arange(end - start), torch.arange(start, end)] = torch.inf
            out[start:end] = torch.topk(d, k, dim=1, largest=False).values.mean(dim=1)
        return out

    num_clusters = int(labels_T.max()) + 1
    preferred, small = cluster_order(labels_T, is_labelled_T, num_clusters, min_cluster_size)
    available = ~is_labelled_T
    picks, scores = [], []
    for order in (preferred, small):
        position = 0
        while len(picks) < batch_size:
            rotated = order[position:] + order[:position]
            cluster = next((c for c in rotated if bool((available & (labels_T == c)).any())), None)
            if cluster is None:
                break
            position = order.index(cluster) + 1
            members = torch.nonzero(available & (labels_T == cluster)).flatten()
            k = min(num_neighbors, members.shape[0] // 2)
            if k < 1:
                best, value = int(members[0]), 0.0
            else:
                m = means(points_T_D[members], k)
                i = int(torch.argmin(m))
                best, value = int(members[i]), (1.0 / float(m[i]) if float(m[i]) > 0
                                                 else float(torch.finfo(torch.float64).max))
            picks.append(best)
            scores.append(value)
            available[best] = False
    return picks, scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="wordnet_nouns")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--clusters", type=int, default=10, help="k-means clusters (the app's round 0: 10)")
    parser.add_argument("--batch-size", type=int, default=110, help="picks (the app's round 0: 10 + a lookahead of 100)")
    parser.add_argument("--pool", type=int, default=20_000,
                        help="the first N training items (0: all; WordNet's 72,115 take the plain computation "
                             "about 15 min a repeat on 2 cores)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    from activebayes.acquisition.clustering import kmeans
    from activebayes.acquisition.typicality import typical_picks
    from activebayes.data import load_dataset

    torch.set_num_threads(args.threads)
    dataset = load_dataset(args.dataset, data_dir=args.data_dir)
    points = dataset.inputs[:].reshape(len(dataset), -1).to(torch.float64)
    if args.pool:
        points = points[: args.pool]
    labels = kmeans(points, args.clusters, generator=torch.Generator().manual_seed(0)).labels_N
    unlabelled = torch.zeros(len(points), dtype=torch.bool)
    sizes = torch.bincount(labels).tolist()
    print(f"{args.dataset}: {tuple(points.shape)}, {args.clusters} clusters, largest {max(sizes):,} items", flush=True)
    times: dict[str, list[float]] = {"plain": [], "library": []}
    results = {}
    for _ in range(args.repeats):
        for name, fn in (("plain", plain_picks), ("library", typical_picks)):
            tic = time.perf_counter()
            results[name] = fn(points, labels, unlabelled, args.batch_size)
            times[name].append(time.perf_counter() - tic)
            print(f"  {name:8s} {times[name][-1]:7.1f} s", flush=True)
    same_picks = results["plain"][0] == results["library"][0]
    same_scores = all(abs(a - b) <= 1e-9 * max(1.0, abs(a)) for a, b in zip(results["plain"][1], results["library"][1],
                                                                              strict=True))
    plain, library = statistics.median(times["plain"]), statistics.median(times["library"])
    print(f"median: plain {plain:.1f} s, library {library:.1f} s, speed-up x{plain / library:.2f}; "
          f"same picks: {same_picks}, same typicality: {same_scores}; load {os.getloadavg()[0]:.1f}")
    entry = {"dataset": args.dataset, "pool": args.pool, "shape": list(points.shape), "clusters": args.clusters,
             "largest_cluster": max(sizes), "picks": args.batch_size, "threads": args.threads,
             "repeats": args.repeats, "plain_s": round(plain, 2), "library_s": round(library, 2),
             "speed_up": round(plain / library, 2), "same_picks": same_picks, "same_typicality": same_scores,
             "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "torch": torch.__version__,
             "date": time.strftime("%Y-%m-%d")}
    previous = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    RESULTS.write_text(json.dumps([*previous, entry], indent=1) + "\n")
    return 0 if same_picks and same_scores else 1


if __name__ == "__main__":
    sys.exit(main())
