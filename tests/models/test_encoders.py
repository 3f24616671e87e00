"""Frozen encoders, precomputed embeddings, the content-addressed embedding cache, heads sharing an encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from activebayes.data import load_dataset
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models import FrozenEncoder, build_head, compute_embeddings, embeddings_dataset, predict_log_probs
from activebayes.models.encoders import EmbeddingInputs, encoder_fingerprint


class Counting(nn.Module):
    def __init__(self, d_in=6, d_out=4):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.rows = 0

    def forward(self, x):
        self.rows += x.shape[0]
        return self.linear(x)


def test_frozen_encoder_encodes_each_item_once_and_matches_the_encoder():
    torch.manual_seed(0)
    encoder = Counting()
    frozen = FrozenEncoder(encoder)
    x = torch.randn(10, 6)
    out = frozen(x)
    torch.testing.assert_close(out, encoder.linear(x).detach())
    assert encoder.rows == 10
    torch.testing.assert_close(frozen(x[[3, 1, 3]]), out[[3, 1, 3]])
    assert encoder.rows == 10  # remembered
    assert not any(p.requires_grad for p in frozen.parameters())


def test_an_encoder_whose_output_shape_changes_is_refused():
    calls = {"n": 0}

    def unstable(x):
        calls["n"] += 1
        return torch.zeros(x.shape[0], 4 if calls["n"] == 1 else 5)

    frozen = FrozenEncoder(unstable, cache=False)
    frozen(torch.randn(3, 2))
    with pytest.raises(InvalidArgumentError, match=r"output shape changed between calls: \[4\] per item first, now \[5\]"):
        frozen(torch.randn(3, 2))
    with pytest.raises(InvalidArgumentError, match="must map"):
        FrozenEncoder(lambda x: torch.zeros(7))(torch.randn(3, 2))
    with pytest.raises(InvalidTypeError, match="encoder must be"):
        FrozenEncoder(42)


def test_embeddings_dataset_checks_the_pool_length_and_streams_a_memmap(tmp_path):
    digits = load_dataset("digits", split="train")
    array = np.random.default_rng(0).standard_normal((len(digits), 5)).astype(np.float64)
    np.save(tmp_path / "e.npy", array)
    mapped = np.load(tmp_path / "e.npy", mmap_mode="r")
    ds = embeddings_dataset(digits, mapped)
    assert ds.is_lazy and ds.input_shape == (5,) and torch.equal(ds.targets, digits.targets)
    np.testing.assert_allclose(ds.inputs[[4, 2]].numpy(), array[[4, 2]].astype(np.float32))
    with pytest.raises(InvalidArgumentError, match=rf"embeddings have 100 rows but the pool 'digits' has {len(digits)} items"):
        embeddings_dataset(digits, array[:100])
    with pytest.raises(InvalidArgumentError, match="2-d float array"):
        embeddings_dataset(digits, np.zeros(len(digits)))


def test_compute_embeddings_is_computed_once_and_keyed_by_content(tmp_path):
    torch.manual_seed(0)
    encoder = Counting()
    x = torch.randn(50, 6)
    first = compute_embeddings(encoder, x, batch_size=7, cache_dir=tmp_path)
    assert isinstance(first, EmbeddingInputs) and encoder.rows == 50
    np.testing.assert_allclose(first[:].numpy(), encoder.linear(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    again = compute_embeddings(encoder, x, batch_size=13, cache_dir=tmp_path)
    assert encoder.rows == 50 and torch.equal(again[:], first[:])  # read back, not recomputed
    x2 = x.clone()
    x2[0, 0] += 1.0
    compute_embeddings(encoder, x2, batch_size=7, cache_dir=tmp_path)
    assert encoder.rows == 100  # other inputs: other key
    before = encoder_fingerprint(encoder)
    with torch.no_grad():
        encoder.linear.weight[0, 0] += 1.0
    assert encoder_fingerprint(encoder) != before
    compute_embeddings(encoder, x, batch_size=7, cache_dir=tmp_path)
    assert encoder.rows == 150  # other weights: other key
    assert len(list(tmp_path.glob("*.npy"))) == 3 and not list(tmp_path.glob("*.tmp*"))
    in_memory = compute_embeddings(encoder, x, batch_size=9)
    assert isinstance(in_memory, torch.Tensor) and in_memory.shape == (50, 4)


def test_ensemble_heads_share_one_encoder_pass_and_are_consistent():
    torch.manual_seed(0)
    encoder = Counting(6, 8)
    model = build_head("ensemble", encoder=encoder, num_classes=3, feature_dim=8, hidden=16, ensemble_size=4,
                       generator=0)
    x = torch.randn(20, 6)
    log_probs = predict_log_probs(model, x, batch_size=6)
    assert log_probs.shape == (20, 4, 3) and encoder.rows == 20  # once per item for all 4 members
    perm = torch.randperm(20, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(predict_log_probs(model, x[perm], batch_size=20), log_probs[perm], rtol=0, atol=1e-6)
    assert (log_probs[:, 0] - log_probs[:, 1]).abs().max() > 1e-3  # differently initialised members


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
def test_a_head_takes_d_from_an_encoder_that_declares_it(name):
    """A Representation's ConvEncoder (feature_dim attribute) needs no feature_dim= nor input_shape=."""
    from activebayes.models import build_posterior
    from activebayes.models.representation import ConvEncoder

    encoder = ConvEncoder(image_size=8, width=4, feature_dim=6)
    for wrapped in (encoder, FrozenEncoder(encoder)):
        head = build_head(name, encoder=wrapped, num_classes=3, hidden=0 if name != "mc_dropout" else 8, generator=0)
        assert head(torch.randn(2, 1, 8, 8)).shape[-1] == 3
    posterior = build_posterior(name, encoder=encoder, num_classes=3, generator=0)
    assert posterior is not None
    with pytest.raises(InvalidArgumentError, match="feature_dim"):
        build_head(name, encoder=lambda x: x.flatten(1), num_classes=3, generator=0)
