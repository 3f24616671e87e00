"""Repeated MNIST: MNIST's training set three times, each copy with its own N(0, 0.1) noise (BatchBALD paper)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from activebayes.data import load_dataset
from activebayes.data.datasets import available_datasets, repeated_mnist

MNIST_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mnist"
pytestmark = pytest.mark.skipif(not MNIST_DIR.is_dir(), reason="offline MNIST not available")


@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist", data_dir=MNIST_DIR)


@pytest.fixture(scope="module")
def repeated():
    return load_dataset("repeated_mnist", data_dir=MNIST_DIR)


def test_three_copies_with_labels_repeated(mnist, repeated) -> None:
    N = len(mnist)
    assert "repeated_mnist" in available_datasets()
    assert repeated.name == "repeated_mnist" and len(repeated) == 3 * N
    assert repeated.input_shape == mnist.input_shape and repeated.classes == mnist.classes
    assert torch.equal(repeated.targets, mnist.targets.repeat(3))
    assert repeated.normalization == mnist.normalization


def test_copies_differ_only_by_independent_gaussian_noise_of_std_0_1(mnist, repeated) -> None:
    N = len(mnist)
    noise = np.stack([(repeated.inputs[r * N : (r + 1) * N] - mnist.inputs).numpy().ravel() for r in range(3)])
    n = noise.shape[1]  # 3.9 million pixels per copy
    for r in range(3):
        # mean 0 and std 0.1, each within 5 standard errors of its estimate
        assert abs(noise[r].mean()) < 5 * 0.1 / np.sqrt(n)
        assert abs(noise[r].std() - 0.1) < 5 * 0.1 / np.sqrt(2 * n) + 1e-6  # + float32 rounding of the sums
        # Gaussian: P(|z| < 1 std) and P(|z| < 2 std), and the kurtosis
        z = noise[r] / 0.1
        assert abs(np.mean(np.abs(z) < 1) - 0.682689) < 0.002
        assert abs(np.mean(np.abs(z) < 2) - 0.954500) < 0.001
        assert abs(np.mean(z**4) - 3.0) < 0.02
    # independent between copies and between neighbouring pixels
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert abs(np.corrcoef(noise[a], noise[b])[0, 1]) < 5 / np.sqrt(n)
    assert abs(np.corrcoef(noise[0][:-1], noise[0][1:])[0, 1]) < 5 / np.sqrt(n)


def test_the_same_dataset_every_time_and_options(mnist, repeated) -> None:
    again = repeated_mnist(data_dir=MNIST_DIR)
    assert torch.equal(again.inputs, repeated.inputs)
    other_seed = repeated_mnist(data_dir=MNIST_DIR, repeats=2, seed=1)
    assert len(other_seed) == 2 * len(mnist) and not torch.equal(other_seed.inputs, repeated.inputs[: 2 * len(mnist)])
    clean = repeated_mnist(data_dir=MNIST_DIR, repeats=2, noise_std=0.0)
    assert torch.equal(clean.inputs, mnist.inputs.repeat(2, 1, 1, 1))
    test = load_dataset("repeated_mnist", data_dir=MNIST_DIR, split="test")
    plain_test = load_dataset("mnist", data_dir=MNIST_DIR, split="test")
    assert torch.equal(test.inputs, plain_test.inputs) and torch.equal(test.targets, plain_test.targets)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        repeated_mnist(data_dir=MNIST_DIR, repeats=0)
    with pytest.raises(ValueError, match="noise_std must be a finite number >= 0"):
        repeated_mnist(data_dir=MNIST_DIR, noise_std=-0.1)
