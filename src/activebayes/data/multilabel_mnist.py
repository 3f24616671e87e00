"""A real multi-label task: two MNIST digits side by side, labelled with the set of digits shown.

Item ``i`` of split ``s`` puts MNIST digit ``a_i`` (left) next to digit ``b_i`` (right)
of the same split: a ``[1, 28, 56]`` image (both halves standardised like ``"mnist"``),
with the 0/1 indicator ``targets_N_C[i, c] = [label(a_i) = c or label(b_i) = c]`` over
the 10 digit classes; one or two classes are on (one when both digits are the same
number). ``(a_i, b_i)`` are the first ``n_items`` entries of two seeded permutations
of the split (cycled when ``n_items`` exceeds the split), so every digit appears
about equally often on each side and the task is the same on every machine.

The digits come from the MNIST IDX files (:func:`~activebayes.data.load_dataset` ``"mnist"``):
offline, the 5,000-digit training subset and the official 10,000 test digits in
``../shared/data/mnist``. Item ids name their two source digits (``"mnist-train[12]+mnist-train[4077]"``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from activebayes._validation import check_choice, check_positive_int

from .dataset import ArrayDataset

__all__ = ["MultiLabelDataset", "mnist_pairs", "MNIST_PAIRS_SEED"]

MNIST_PAIRS_SEED = 2626


@dataclass(frozen=True)
class MultiLabelDataset:
    """Inputs with multi-label targets.

    Attributes:
        dataset: the inputs and class names (``targets`` is ``None``: single-label targets do not apply).
        targets_N_C: int64 0/1 indicators ``[N, C]``, at least one 1 per row.
        item_ids: a stable id per item.
    """

    dataset: ArrayDataset
    targets_N_C: Tensor
    item_ids: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.dataset)


def mnist_pairs(
    split: str = "train",
    *,
    data_dir: str | os.PathLike[str] | None = None,
    n_items: int | None = None,
    seed: int = MNIST_PAIRS_SEED,
) -> MultiLabelDataset:
    """Two MNIST digits side by side with the set of their labels (see the module docstring).

    ``n_items`` defaults to the number of digits in the split.

    Example:
        >>> pairs = mnist_pairs("test", data_dir="../shared/data/mnist", n_items=4)  # doctest: +SKIP
        >>> pairs.dataset.input_shape, pairs.targets_N_C.sum(1).tolist()  # doctest: +SKIP
        ((1, 28, 56), [2, 2, 2, 2])
    """
    from .datasets import load_dataset

    check_choice(split, "split", ("train", "test"))
    mnist = load_dataset("mnist", data_dir=data_dir, split=split)
    assert isinstance(mnist.inputs, Tensor) and mnist.targets is not None
    n_digits = len(mnist)
    n_items = n_digits if n_items is None else check_positive_int(n_items, "n_items")
    rng = np.random.default_rng([seed, 0 if split == "train" else 1])
    repeats = -(-n_items // n_digits)
    left = np.concatenate([rng.permutation(n_digits) for _ in range(repeats)])[:n_items]
    right = np.concatenate([rng.permutation(n_digits) for _ in range(repeats)])[:n_items]
    left_t, right_t = torch.from_numpy(left), torch.from_numpy(right)
    inputs = torch.cat([mnist.inputs[left_t], mnist.inputs[right_t]], dim=-1).contiguous()
    targets_N_C = torch.zeros(n_items, len(mnist.classes), dtype=torch.long)
    rows = torch.arange(n_items)
    targets_N_C[rows, mnist.targets[left_t]] = 1
    targets_N_C[rows, mnist.targets[right_t]] = 1
    ids = tuple(f"mnist-{split}[{a}]+mnist-{split}[{b}]" for a, b in zip(left.tolist(), right.tolist(), strict=True))
    dataset = ArrayDataset(inputs=inputs, targets=None, classes=mnist.classes, name="mnist_pairs",
                           normalization=mnist.normalization)
    return MultiLabelDataset(dataset=dataset, targets_N_C=targets_N_C, item_ids=ids)
