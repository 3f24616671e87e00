"""`fit` and `predict_log_probs` take activebayes' own ArrayDataset (held or memory-mapped) as they take
the pair of tensors it holds: the same weights, bit for bit, and the same predictions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from activebayes.data import load_dataset, load_memmap, write_memmap
from activebayes.data.dataset import ArrayDataset
from activebayes.errors import InvalidArgumentError
from activebayes.models import build_model, fit, predict_log_probs


def _net():
    return build_model("mlp", num_classes=10, input_shape=(1, 8, 8), generator=0)


def test_an_array_dataset_trains_and_predicts_as_its_tensors(tmp_path):
    digits = load_dataset("digits").subset(torch.arange(80))
    train, val = digits.subset(torch.arange(60)), digits.subset(torch.arange(60, 80))
    a, b = _net(), _net()
    fit(a, train, validation=val, max_epochs=2, generator=1)
    fit(b, (train.inputs, train.targets), validation=(val.inputs, val.targets), max_epochs=2, generator=1)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    want = predict_log_probs(a, digits.inputs, num_samples=3, generator=2)
    assert torch.equal(predict_log_probs(a, digits, num_samples=3, generator=2), want)
    # a memory-mapped copy of the same items: read on demand for predicting, read whole for training
    pixels = ((digits.inputs[:, 0] - digits.inputs.min()) / (digits.inputs.max() - digits.inputs.min()) * 255)
    lazy = load_memmap(write_memmap(tmp_path / "pool", pixels.round().to(torch.uint8).numpy(),
                                    targets=digits.targets.numpy(), progress=False))
    assert lazy.is_lazy
    held = lazy.inputs[torch.arange(len(lazy))]
    assert torch.equal(predict_log_probs(a, lazy, num_samples=3, generator=2),
                       predict_log_probs(a, held, num_samples=3, generator=2))
    c, d = build_model("mlp", num_classes=10, input_shape=(1, 8, 8), generator=0), _net()
    fit(c, lazy, max_epochs=1, generator=1)
    fit(d, (held, lazy.targets), max_epochs=1, generator=1)
    assert all(torch.equal(p, q) for p, q in zip(c.state_dict().values(), d.state_dict().values(), strict=True))


def test_a_dataset_without_labels_cannot_train():
    unlabelled = ArrayDataset(inputs=torch.zeros(5, 1, 8, 8), targets=None, classes=tuple("0123456789"), name="pool")
    with pytest.raises(InvalidArgumentError, match=r"^train is a dataset without targets \(pool\): training needs"):
        fit(_net(), unlabelled, max_epochs=1)
    assert predict_log_probs(_net(), unlabelled, num_samples=2).shape == (5, 2, 10)
