"""Frozen encoders, precomputed embeddings, the content-addressed embedding cache, heads sharing an encoder."""

from __future__ import annotations

import dataclasses

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


def test_embeddings_keep_the_items_identity(tmp_path):
    """Image files and table row ids stay with their items: a label follows the item, not the row."""
    from activebayes.data import load_table

    (tmp_path / "t.csv").write_text("id,text,label\n" + "".join(f"r{i},text number {i},{'ab'[i % 2]}\n"
                                                             for i in range(12)))
    table = load_table(tmp_path / "t.csv", text_column="text", label_column="label", id_column="id").dataset
    embedded = embeddings_dataset(table, np.zeros((len(table), 3), np.float32))
    assert embedded.item_ids == table.item_ids == tuple(f"r{i}" for i in range(12))
    paths = tuple(f"/photos/{i}.png" for i in range(len(table)))
    with_paths = embeddings_dataset(dataclasses.replace(table, paths=paths), torch.zeros(len(table), 3))
    assert with_paths.paths == paths


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


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
def test_a_feature_dim_other_than_the_encoders_output_is_named(name):
    from activebayes.models import build_posterior

    torch.manual_seed(0)
    x, y = torch.randn(20, 6), torch.randint(0, 3, (20,))
    post = build_posterior(name, encoder=nn.Linear(6, 4), num_classes=3, feature_dim=8, ensemble_size=2,
                           generator=0, fit_options={"max_epochs": 1})
    with pytest.raises(InvalidArgumentError, match="feature_dim=8 was given, the encoder gives 4 features per item"):
        post.fit((x, y), generator=0)
    with pytest.raises(InvalidArgumentError, match="feature_dim=8 was given"):
        post.module(x)


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
def test_inputs_the_frozen_encoder_cannot_read_are_named(name):
    from activebayes.models import build_posterior

    torch.manual_seed(0)
    post = build_posterior(name, encoder=nn.Linear(6, 4), num_classes=3, feature_dim=4, ensemble_size=2,
                           generator=0, fit_options={"max_epochs": 1})
    y = torch.randint(0, 3, (20,))
    with pytest.raises(InvalidArgumentError, match=r"cannot read inputs of shape \[20, 5\] .*20x5 and 6x4"):
        post.fit((torch.randn(20, 5), y), generator=0)
    with pytest.raises(InvalidArgumentError, match="cannot read inputs of dtype float64"):
        post.fit((torch.randn(20, 6, dtype=torch.float64), y), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"cannot read inputs of shape \[3, 5\]"):
        post.module(torch.randn(3, 5))


def test_a_wrong_input_shape_for_the_encoder_probe_names_input_shape():
    with pytest.raises(InvalidArgumentError, match=r"input_shape=\(7,\) does not fit the encoder.*1x7 and 6x4"):
        build_head("ensemble", encoder=nn.Linear(6, 4), num_classes=3, input_shape=(7,))


def test_an_encoder_returning_a_tuple_is_named():
    def pair(x):
        return x, x

    with pytest.raises(InvalidTypeError, match="encoder .*pair must return features \\[n, D\\] as one tensor.*got tuple"):
        build_head("laplace", encoder=pair, num_classes=3, input_shape=(6,))
    head = build_head("laplace", encoder=pair, num_classes=3, feature_dim=6)
    with pytest.raises(InvalidTypeError, match="got tuple"):
        head(torch.randn(4, 6))
    as_array = FrozenEncoder(lambda x: x.numpy() * 2, cache=False)  # arrays are still features
    torch.testing.assert_close(as_array(torch.ones(2, 3)), torch.full((2, 3), 2.0))


def test_compute_embeddings_leaves_the_encoder_trainable_and_in_its_mode(tmp_path):
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Linear(6, 4), nn.Dropout(0.1), nn.Linear(4, 4))
    encoder[2].bias.requires_grad_(False)  # the user's own flags come back as they were
    encoder.train()
    encoder[1].eval()
    flags = [m.training for m in encoder.modules()]
    grads = [p.requires_grad for p in encoder.parameters()]
    x = torch.randn(10, 6)
    for cache_dir in (None, tmp_path, tmp_path):  # computed, then written, then read back
        compute_embeddings(encoder, x, cache_dir=cache_dir, device="cpu")
        assert [m.training for m in encoder.modules()] == flags
        assert [p.requires_grad for p in encoder.parameters()] == grads
    encoder(x).sum().backward()
    assert encoder[0].weight.grad is not None


def test_a_head_freezes_its_encoder_in_place():
    """Documented: heads share the user's module frozen, not a copy."""
    encoder = nn.Linear(6, 4)
    encoder.train()
    head = build_head("ensemble", encoder=encoder, num_classes=3, feature_dim=4, ensemble_size=2, generator=0)
    assert head.members[0][0].encoder is encoder
    assert not encoder.training and not any(p.requires_grad for p in encoder.parameters())


def test_one_encoding_of_a_pool_for_the_cache_and_the_representation(tmp_path):
    """encode_pool is the one pass over a pool: compute_embeddings (in memory and to a file) and
    the self-supervised representation's features (representation.features) are it, bit for bit,
    and each equals the encoder's own eval-mode output chunk by chunk."""
    from activebayes.models import encode_pool
    from activebayes.models.representation import ConvEncoder, features

    torch.manual_seed(0)
    encoder = ConvEncoder(image_size=8, width=4, feature_dim=6)
    encoder.train()
    images = torch.randn(23, 1, 8, 8)
    encoder.eval()
    with torch.no_grad():  # the reference: the module itself, in eval mode, in chunks of 5
        expected = torch.cat([encoder(images[i:i + 5]) for i in range(0, 23, 5)]).flatten(1).float()
    encoder.train()
    pooled = encode_pool(encoder, images, batch_size=5)
    assert pooled.dtype == torch.float32 and torch.equal(pooled, expected)
    assert encoder.training and all(p.requires_grad for p in encoder.parameters())  # left as it was
    assert torch.equal(features(encoder, images, batch_size=5), expected)
    assert torch.equal(compute_embeddings(encoder, images, batch_size=5), expected)
    assert torch.equal(compute_embeddings(encoder, images, batch_size=5, cache_dir=tmp_path)[:], expected)
    # a Dataset of (x, y) pairs and a callable encoder go the same way
    dataset = torch.utils.data.TensorDataset(images, torch.zeros(23))
    assert torch.equal(encode_pool(encoder, dataset, batch_size=5), expected)
    assert torch.equal(encode_pool(lambda x: x.flatten(1) * 2, images, batch_size=4), images.flatten(1) * 2)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        encode_pool(encoder, images, batch_size=0)
