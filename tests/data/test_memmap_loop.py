"""The active learning loop over a memory-mapped dataset gives the same run as over the same data in memory,
and streaming through a memory-mapped pool leaves nothing of it resident."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from activebayes.data import ArrayDataset, load_dataset, load_memmap, normalize_pixels, write_memmap
from activebayes.loop import ActiveLearningLoop
from activebayes.models import MLP, predict_log_probs
from activebayes.records import LoopConfig

FAST_FIT = {"max_epochs": 3, "min_samples_per_epoch": 256, "patience": 2}


def _synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Three classes of 8x8 uint8 images: a class template plus noise."""
    rng = np.random.default_rng(seed)
    templates = np.stack([np.roll(np.eye(8) * 200, shift, axis=1) for shift in (0, 3, 6)])
    targets = rng.integers(0, 3, size=n)
    pixels = np.clip(templates[targets] + rng.normal(0, 40, size=(n, 8, 8)), 0, 255).astype(np.uint8)
    return pixels, targets


@pytest.fixture(scope="module")
def memmap_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pools")
    train_pixels, train_targets = _synthetic(400, 0)
    test_pixels, test_targets = _synthetic(150, 1)
    write_memmap(root / "train", train_pixels, targets=train_targets, name="synthetic", progress=False)
    train = load_memmap(root / "train")
    # the test split shares the train split's constants (as the named datasets do)
    write_memmap(root / "test", test_pixels, targets=test_targets, name="synthetic",
                 normalization=train.normalization, progress=False)
    return root, (train_pixels, train_targets), (test_pixels, test_targets)


def _in_memory(pixels, targets, normalization):
    inputs = normalize_pixels(torch.from_numpy(pixels), normalization).unsqueeze(1)
    return ArrayDataset(inputs=inputs, targets=torch.from_numpy(targets.astype(np.int64)),
                        classes=("0", "1", "2"), name="synthetic", normalization=normalization)


@pytest.mark.parametrize("strategy", ["bald", "batchbald"])
def test_loop_over_memmap_equals_loop_in_memory(memmap_root, strategy):
    root, (train_pixels, train_targets), (test_pixels, test_targets) = memmap_root
    config = LoopConfig(dataset="memmap", data_dir=str(root), strategy=strategy, initial_size=6, validation_size=30,
                        batch_size=5, budget=21, num_samples=4, eval_samples=4, fit_options=FAST_FIT,
                        predict_batch_size=64, checkpoints=False)
    lazy_loop = ActiveLearningLoop(config)
    assert lazy_loop.dataset.is_lazy and lazy_loop.test.is_lazy
    normalization = lazy_loop.dataset.normalization
    memory_loop = ActiveLearningLoop(
        config,
        dataset=_in_memory(train_pixels, train_targets, normalization),
        test=_in_memory(test_pixels, test_targets, normalization),
    )
    lazy, memory = lazy_loop.run(progress=False), memory_loop.run(progress=False)
    assert len(lazy.rounds) == len(memory.rounds) == 4
    for a, b in zip(lazy.rounds, memory.rounds, strict=True):
        assert a.acquired == b.acquired and a.labels == b.labels and a.class_counts == b.class_counts
        assert a.scores == b.scores  # bitwise: the same inputs, the same predictions
        assert {k: v for k, v in a.metrics.items()} == {k: v for k, v in b.metrics.items()}
    assert lazy_loop.pool.state_dict() == memory_loop.pool.state_dict()


def _resident_kib(path: Path) -> int:
    total, current = 0, None
    with open("/proc/self/smaps") as handle:
        for line in handle:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                current = line.split()[-1]
            elif line.startswith("Rss:") and current == str(path):
                total += int(line.split()[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_streaming_releases_the_mapped_pages(tmp_path):
    pixels = np.random.default_rng(0).integers(0, 256, size=(20_000, 28, 28), dtype=np.uint8)  # 15 MiB
    folder = write_memmap(tmp_path / "pool", pixels, normalization=(0.5, 0.5), progress=False)
    ds = load_memmap(folder)
    inputs_file = (folder / "inputs.npy").resolve()
    net = MLP(in_features=784, num_classes=4, hidden=(8,))
    log_probs = predict_log_probs(net, ds.inputs, 2, batch_size=1000, generator=0)
    assert log_probs.shape == (20_000, 2, 4)
    ds.inputs[torch.randint(0, 20_000, (500,))]
    for chunk in ds.inputs.iter_chunks(3000):
        assert chunk.shape[1:] == (1, 28, 28)
    # every page read was handed back: the map holds (almost) nothing of the 15 MiB
    assert _resident_kib(inputs_file) <= 64
    assert load_dataset("memmap", data_dir=folder).inputs[0].shape == (1, 28, 28)
