"""How much of an acquisition batch is Monte Carlo noise? (issue 6, number of samples K)

A score computed from K function samples is itself random: two independent draws
of K dropout masks give two different BALD rankings of the same pool under the same
trained network. This script measures, on the real MNIST available offline:

- ``overlap(K)``: the mean fraction of the top ``b`` items shared by two independent
  K-sample draws (1 = the batch is determined by the model, about ``b / N`` = chance);
- ``vs reference``: the fraction shared with the top ``b`` of an independent
  large-K reference draw (``--reference-samples``, default 400);
- the Pearson correlation of the scores of two draws.

Protocol: the label-efficiency protocol's pool (500 validation, the rest the pool,
``--labels`` balanced labels), the Gal et al. CNN trained with ``fit``'s defaults,
then ``--draws`` independent draws for each K in ``--ks`` over the unlabelled pool.

Usage::

    python benchmarks/acquisition_noise.py --threads 1            # ~4 min on one core
    python benchmarks/acquisition_noise.py --labels 40 --ks 20,50,100 --strategy entropy
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def top(scores_N, b: int) -> set[int]:
    import torch

    return set(torch.topk(scores_N, b).indices.tolist())


def overlap(a_N, b_N, b: int) -> float:
    return len(top(a_N, b) & top(b_N, b)) / b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--labels", default="40,100", help="labelled set sizes (balanced), comma-separated")
    parser.add_argument("--ks", default="20,100", help="K values, comma-separated")
    parser.add_argument("--draws", type=int, default=4, help="independent draws per K (>= 2)")
    parser.add_argument("--reference-samples", type=int, default=400, help="K of the reference draw")
    parser.add_argument("--batch", type=int, default=10, help="b, the acquisition batch size")
    parser.add_argument("--strategy", default="bald", help="a score function of activebayes.acquisition")
    parser.add_argument("--model", default="gal_cnn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    import numpy as np
    import torch

    import activebayes.acquisition as acquisition
    from activebayes.data import Pool, load_dataset
    from activebayes.models import build_model, fit, predict_log_probs

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.draws < 2:
        raise SystemExit(f"error: --draws must be >= 2, got {args.draws}")
    score = getattr(acquisition, args.strategy, None)
    if score is None or args.strategy in ("select", "batchbald"):
        raise SystemExit(f"error: --strategy must name a score function, got {args.strategy!r}")
    ks = [int(k) for k in args.ks.split(",")]
    train = load_dataset("mnist", split="train", data_dir=args.data_dir)
    print(f"{args.strategy}, top {args.batch}, {args.draws} draws per K, model {args.model}, seed {args.seed}")
    print("| labels | K | overlap of two draws | overlap with reference | score correlation | pool | seconds per draw |")
    print("|---|---|---|---|---|---|---|")
    for n_labels in (int(n) for n in args.labels.split(",")):
        pool = Pool.create(train, validation_size=500, initial_size=n_labels, seed=args.seed)
        model = build_model(args.model, num_classes=train.num_classes, input_shape=tuple(train.input_shape),
                            generator=args.seed)
        fit(model, pool.labelled_data(), validation=pool.validation_data(), generator=args.seed)
        inputs = pool.unlabelled_inputs()
        scores: dict[int, list] = {}
        seconds: dict[int, float] = {}
        for k in ks:
            tic = time.perf_counter()
            scores[k] = [score(predict_log_probs(model, inputs, k, generator=10_000 * k + d))
                         for d in range(args.draws)]
            seconds[k] = (time.perf_counter() - tic) / args.draws
        # an independent draw (its own masks), so no K shares samples with it
        reference_N = score(predict_log_probs(model, inputs, args.reference_samples, generator=1))
        for k in ks:
            pairs = list(itertools.combinations(scores[k], 2))
            mutual = np.mean([overlap(a, b, args.batch) for a, b in pairs])
            correlation = np.mean([np.corrcoef(a.numpy(), b.numpy())[0, 1] for a, b in pairs])
            vs_reference = np.mean([overlap(s, reference_N, args.batch) for s in scores[k]])
            print(f"| {n_labels} | {k} | {mutual:.2f} | {vs_reference:.2f} | {correlation:.3f} | "
                  f"{inputs.shape[0]} | {seconds[k]:.1f} |", flush=True)
    print(f"reference: one independent draw at K = {args.reference_samples}; "
          f"chance overlap is about {args.batch}/pool")


if __name__ == "__main__":
    main()
