"""Does the self-supervised representation help with few labels? (issue 13, item 2)

On the offline MNIST protocol (``../shared/data/mnist``: 5,000 training digits, of
which 500 are validation and 4,500 the pool; the official 10,000 test digits):

1. train the SimCLR encoder on the 5,000 training images without labels
   (:func:`activebayes.models.train_or_load_representation`; wall time and threads
   recorded; cached, so a second run only loads it);
2. label 20 balanced pool items, then random ones up to 50 and 100 (the random
   strategy's learning curve), for each seed;
3. at each label count: a linear probe (logistic regression on standardised
   features) and a 1-nearest-neighbour classifier (cosine) on the features, the
   consistent MC dropout head over the frozen encoder (``build_model("encoder_head")``
   trained by ``fit`` with the 500 validation digits for early stopping, test accuracy
   of the mean of K = 20 function samples), the same with the encoder fine-tuned, and
   the BatchBALD CNN from scratch (the MNIST protocol's network), trained the same way.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/representation.py --seeds 0,1,2
    python benchmarks/representation.py --seeds 0 --skip finetune,cnn   # quicker

Writes ``benchmarks/results/representation.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from activebayes._io import atomic_write_text
from activebayes._seeding import make_generator, seeded_global_rng
from activebayes.data import Pool, load_dataset
from activebayes.models import (
    RepresentationConfig,
    build_model,
    features,
    fit,
    predict_log_probs,
    train_or_load_representation,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "representation.json"
LABELS = (20, 50, 100)
MODELS = ("linear", "knn", "head", "finetune", "cnn")


def _accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int) -> float:
    log_probs_N_K_C = predict_log_probs(model, x, 20, generator=seed, batch_size=1000)
    mean_N_C = torch.logsumexp(log_probs_N_K_C, dim=1)
    return float((mean_N_C.argmax(dim=1) == y).double().mean())


def _fit_and_score(name: str, build, train, validation, test, seed: int, round_key: int) -> tuple[float, float]:
    with seeded_global_rng(seed, "model-init", round_key):
        model = build(make_generator(seed, "model", round_key))
    tic = time.perf_counter()
    with seeded_global_rng(seed, "fit", round_key):
        fit(model, train, validation=validation, generator=make_generator(seed, "fit", round_key))
    seconds = time.perf_counter() - tic
    return _accuracy(model, *test, seed), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "mnist"))
    parser.add_argument("--cache-dir", default=None, help="representation cache (default ~/.cache/activebayes/representations; 'none': no cache)")
    parser.add_argument("--skip", default="", help=f"comma-separated subset of {', '.join(MODELS)}")
    parser.add_argument("--epochs", type=int, default=None, help="override RepresentationConfig.epochs")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    skip = {s for s in args.skip.split(",") if s}
    train_ds = load_dataset("mnist", data_dir=args.data_dir)
    test_ds = load_dataset("mnist", data_dir=args.data_dir, split="test")
    test = (test_ds.inputs, test_ds.targets)
    config = RepresentationConfig() if args.epochs is None else RepresentationConfig(epochs=args.epochs)
    results: dict = {
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "config": config.to_dict(),
        "seeds": {},
    }
    for seed in seeds:
        tic = time.perf_counter()
        representation = train_or_load_representation(
            train_ds.inputs, config, seed=seed, cache_dir=None if args.cache_dir == "none" else args.cache_dir,
            cache=args.cache_dir != "none", progress=True,
        )
        wall = time.perf_counter() - tic
        print(f"seed {seed}: encoder {'trained' if representation.trained else 'loaded'} in {wall:.1f} s "
              f"(training: {representation.seconds:.1f} s wall, {representation.cpu_seconds:.1f} s CPU, {torch.get_num_threads()} threads)", flush=True)
        pool = Pool.create(train_ds, validation_size=500, initial_size=20, initial="balanced", seed=seed)
        validation = pool.validation_data()
        unlabelled = pool.unlabelled_indices
        extra = unlabelled[torch.randperm(len(unlabelled), generator=make_generator(seed, "extra"))]
        feats_train = features(representation, train_ds.inputs).numpy()
        feats_test = features(representation, test_ds.inputs).numpy()
        mean, std = feats_train.mean(0), feats_train.std(0) + 1e-6
        row: dict = {"encoder_seconds": representation.seconds, "encoder_cpu_seconds": representation.cpu_seconds, "encoder_trained_now": representation.trained}
        labelled = pool.labelled_indices
        for n_labels in LABELS:
            index = torch.cat([labelled, extra[: n_labels - len(labelled)]])
            y = train_ds.targets[index]
            scores: dict = {}
            if "linear" not in skip:
                z = (feats_train[index.numpy()] - mean) / std
                probe = LogisticRegression(C=1.0, max_iter=5000).fit(z, y.numpy())
                scores["linear"] = float(probe.score((feats_test - mean) / std, test_ds.targets.numpy()))
            if "knn" not in skip:
                unit = feats_train / np.linalg.norm(feats_train, axis=1, keepdims=True)
                unit_test = feats_test / np.linalg.norm(feats_test, axis=1, keepdims=True)
                knn = KNeighborsClassifier(n_neighbors=1).fit(unit[index.numpy()], y.numpy())
                scores["knn"] = float(knn.score(unit_test, test_ds.targets.numpy()))
            train = (train_ds.inputs[index], y)
            shape = train_ds.input_shape
            builders = {
                "head": lambda g: build_model("encoder_head", num_classes=10, input_shape=shape,
                                              encoder=representation, generator=g),
                "finetune": lambda g: build_model("encoder_head", num_classes=10, input_shape=shape,
                                                  encoder=representation, freeze_encoder=False, generator=g),
                "cnn": lambda g: build_model("batchbald_cnn", num_classes=10, input_shape=shape, generator=g),
            }
            for name, build in builders.items():
                if name in skip:
                    continue
                accuracy, seconds = _fit_and_score(name, build, train, validation, test, seed, n_labels)
                scores[name] = accuracy
                scores[f"{name}_fit_seconds"] = round(seconds, 1)
            row[str(n_labels)] = scores
            print(f"seed {seed}, {n_labels} labels: " + ", ".join(
                f"{k} {v:.3f}" if not k.endswith("seconds") else f"{k} {v}" for k, v in scores.items()), flush=True)
        # all 4,500 pool labels for the linear probe: how much the features hold
        if "linear" not in skip:
            pool_index = torch.cat([labelled, unlabelled]).numpy()
            z = (feats_train[pool_index] - mean) / std
            probe = LogisticRegression(C=1.0, max_iter=5000).fit(z, train_ds.targets[pool_index].numpy())
            row["linear_all_pool_labels"] = float(probe.score((feats_test - mean) / std, test_ds.targets.numpy()))
        results["seeds"][str(seed)] = row
    summary = {}
    for n_labels in LABELS:
        for name in MODELS:
            values = [r[str(n_labels)][name] for r in results["seeds"].values() if name in r[str(n_labels)]]
            if values:
                summary[f"{name}@{n_labels}"] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values)}
    results["summary"] = summary
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(args.out), json.dumps(results, indent=2) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
