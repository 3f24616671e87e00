"""Synthetic run / comparison directories in the real on-disk format (no model is trained).

Each round's metrics are computed with NumPy from a made-up prediction vector on a
500-item test set whose accuracy rises with the number of labels, so the
confusion matrix, per-class precision / recall and macro-F1 are mutually
consistent, like the records :mod:`activebayes.loop` writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from activebayes.loop import LoopConfig

NUM_CLASSES = 10
TEST_SIZE = 500
TRAIN_SIZE = 1297  # the embedded digits' training split: acquired indices point into it


def _metrics(rng: np.random.Generator, accuracy: float, num_bins: int = 10) -> dict:
    targets = np.repeat(np.arange(NUM_CLASSES), TEST_SIZE // NUM_CLASSES)
    wrong = rng.random(TEST_SIZE) > accuracy
    preds = np.where(wrong, (targets + rng.integers(1, NUM_CLASSES, TEST_SIZE)) % NUM_CLASSES, targets)
    cm = np.zeros((NUM_CLASSES, NUM_CLASSES), dtype=np.int64)
    np.add.at(cm, (targets, preds), 1)
    tp = np.diag(cm).astype(float)
    precision = np.divide(tp, cm.sum(0), out=np.zeros(NUM_CLASSES), where=cm.sum(0) > 0)
    recall = tp / cm.sum(1)
    f1 = np.divide(2 * tp, cm.sum(0) + cm.sum(1), out=np.zeros(NUM_CLASSES), where=(cm.sum(0) + cm.sum(1)) > 0)
    acc = float(tp.sum() / TEST_SIZE)
    confidence = np.clip(acc + rng.normal(0.03, 0.1, TEST_SIZE), 0.1, 1.0)
    edges = np.linspace(0, 1, num_bins + 1)
    which = np.clip(np.digitize(confidence, edges[1:-1]), 0, num_bins - 1)
    correct = preds == targets
    counts = np.bincount(which, minlength=num_bins)
    conf_b = [float(confidence[which == b].mean()) if counts[b] else None for b in range(num_bins)]
    acc_b = [float(correct[which == b].mean()) if counts[b] else None for b in range(num_bins)]
    return {
        "accuracy": acc,
        "f1_macro": float(f1.mean()),
        "precision_macro": float(precision.mean()),
        "recall_macro": float(recall.mean()),
        "precision_per_class": precision.tolist(),
        "recall_per_class": recall.tolist(),
        "f1_per_class": f1.tolist(),
        "support_per_class": cm.sum(1).tolist(),
        "nll": float(-np.log(np.clip(acc, 1e-3, 1)) * 1.3),
        "brier": float((1 - acc) * 1.1),
        "ece": float(abs(confidence.mean() - acc)),
        "confusion_matrix": cm.tolist(),
        "reliability": {"edges": edges.tolist(), "counts": counts.tolist(), "confidence": conf_b, "accuracy": acc_b},
        "num_items": TEST_SIZE,
        "num_classes": NUM_CLASSES,
    }


def write_run(
    directory: Path,
    config: LoopConfig,
    *,
    rounds: int = 6,
    skill: float = 1.0,
    reliability: bool = True,
) -> Path:
    """Write ``config.json``, ``rounds.jsonl`` and ``summary.json`` of a made-up run."""
    rng = np.random.default_rng(1000 * config.seed + len(config.strategy))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True))
    labelled = list(rng.choice(TRAIN_SIZE, size=config.initial_size, replace=False))
    labels_of = rng.integers(0, NUM_CLASSES, TRAIN_SIZE)
    records = []
    for r in range(rounds):
        n = len(labelled)
        accuracy = min(0.99, 0.55 + 0.45 * skill * (1 - np.exp(-(n - config.initial_size + 5) / 25)))
        metrics = {}
        for split, size_shift in (("validation", 0.02), ("test", 0.0)):
            for key, value in _metrics(rng, accuracy - size_shift).items():
                if key == "reliability" and not reliability:
                    continue
                metrics[f"{split}_{key}"] = value
        last = r == rounds - 1
        unlabelled = np.setdiff1d(np.arange(TRAIN_SIZE), labelled)
        acquired = [] if last else [int(i) for i in rng.choice(unlabelled, size=config.batch_size, replace=False)]
        counts = np.bincount(labels_of[labelled], minlength=NUM_CLASSES)
        records.append({
            "round": r,
            "n_labelled": n,
            "acquired": acquired,
            "scores": sorted(rng.random(len(acquired)).tolist(), reverse=True),
            "labels": [int(labels_of[i]) for i in acquired],
            "metrics": metrics,
            "class_counts": counts.tolist(),
            "cost_spent": 0.0,
            "fit": {"epochs": int(rng.integers(5, 30)), "best_epoch": 4},
            "seconds": {"fit": float(rng.uniform(0.5, 1.5)), "evaluate": 0.2, **({} if last else {"acquire": float(rng.uniform(0.1, 0.8)), "label": 0.001})},
            "stop_reason": f"label budget reached ({n} >= {n})" if last else None,
        })
        labelled += acquired
    (directory / "rounds.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in records))
    (directory / "summary.json").write_text(json.dumps({"rounds": rounds}))
    return directory


def write_comparison(
    directory: Path,
    *,
    strategies: tuple[str, ...] = ("bald", "random"),
    seeds: tuple[int, ...] = (0, 1),
    rounds: int = 6,
    reliability: bool = True,
) -> Path:
    """A comparison directory laid out like :func:`activebayes.experiment.run_comparison`'s."""
    base = LoopConfig(dataset="digits", initial_size=20, batch_size=10, budget=20 + 10 * (rounds - 1))
    directory.mkdir(parents=True, exist_ok=True)
    runs = []
    for strategy in strategies:
        for seed in seeds:
            run_dir = directory / strategy / f"seed_{seed}"
            skill = 1.0 if strategy != "random" else 0.8
            write_run(run_dir, base.replace(strategy=strategy, seed=seed), rounds=rounds, skill=skill,
                      reliability=reliability)
            runs.append(str(run_dir.relative_to(directory)))
    comparison = {"base": base.to_dict(), "strategies": list(strategies), "seeds": list(seeds), "runs": runs}
    (directory / "comparison.json").write_text(json.dumps(comparison, indent=2, sort_keys=True))
    return directory


def tiny_png() -> bytes:
    """A valid 1x1 white PNG, built by hand (signature, IHDR, IDAT, IEND)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff")) + chunk(b"IEND", b"")
