"""penultimate_features: the last linear layer's input, deterministic; BADGE's embedding is the loss gradient."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from activebayes.acquisition import gradient_embeddings
from activebayes.models import MLP, BatchBALDCNN, Ensemble, GalCNN, mc_dropout
from activebayes.models.embeddings import last_linear, penultimate_features


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_mlp_features_are_the_hidden_layer_in_eval_mode() -> None:
    torch.manual_seed(0)
    net = MLP(in_features=6, num_classes=3, hidden=(16, 8), p=0.5)
    x = torch.randn(50, 6, generator=gen(1))
    net.eval()
    with torch.no_grad():
        expected = net.net[:-1](x)  # everything before the last dense layer; dropout off
    net.train()
    features = penultimate_features(net, x, batch_size=7)
    assert features.shape == (50, 8) and features.dtype == torch.float32
    torch.testing.assert_close(features, expected, rtol=1e-6, atol=1e-6)  # chunks of 7: other matmul blocking
    assert net.training and all(m.training for m in net.modules())  # flags restored
    torch.testing.assert_close(penultimate_features(net, x, batch_size=7), features, rtol=0, atol=0)  # deterministic
    torch.testing.assert_close(penultimate_features(net, (x, torch.zeros(50)), batch_size=7), features, rtol=0, atol=0)
    torch.testing.assert_close(penultimate_features(net, TensorDataset(x), batch_size=7), features, rtol=0, atol=0)


@pytest.mark.parametrize("network", [BatchBALDCNN, GalCNN])
def test_cnn_features_are_the_input_of_the_output_layer(network) -> None:
    torch.manual_seed(1)
    net = network(num_classes=10, image_size=28).eval()
    x = torch.randn(9, 1, 28, 28, generator=gen(2))
    layers = list(net.net) if hasattr(net, "net") else [*net.features, *net.classifier]
    with torch.no_grad():
        h = x
        for layer in layers[:-1]:
            h = layer(h)
    features = penultimate_features(net, x, batch_size=4)
    assert features.shape == (9, 128) and layers[-1] is last_linear(net)
    torch.testing.assert_close(features, h, rtol=1e-6, atol=1e-6)


def test_badge_embedding_is_the_gradient_of_the_models_last_layer() -> None:
    """gradient_embeddings(log_probs, penultimate_features) = ∂ CE(model(x), ŷ) / ∂ W_last, item by item."""
    torch.manual_seed(2)
    net = MLP(in_features=5, num_classes=4, hidden=(12,)).double()
    x = torch.randn(10, 5, generator=gen(3), dtype=torch.float64)
    features = penultimate_features(net, x).double()
    net.eval()
    log_probs = torch.log_softmax(net(x), -1).detach()[:, None, :]  # K = 1, the deterministic network
    embeddings = gradient_embeddings(log_probs, features)
    weight = last_linear(net).weight
    for n in range(10):
        net.zero_grad()
        logits = net(x[n : n + 1])
        nn.functional.cross_entropy(logits, logits.argmax(-1)).backward()
        np.testing.assert_allclose(embeddings[n].numpy(), weight.grad.numpy(), rtol=0, atol=1e-6)  # float32 features


def test_a_users_model_and_an_explicit_layer() -> None:
    torch.manual_seed(3)
    body = nn.Sequential(nn.Linear(4, 10), nn.ReLU(), nn.Dropout(0.5))
    model = mc_dropout(nn.Sequential(body, nn.Linear(10, 3)))
    x = torch.randn(20, 4, generator=gen(4))
    model.eval()
    with torch.no_grad():
        expected = model[0](x)
    torch.testing.assert_close(penultimate_features(model, x), expected)
    first = model[0][0]
    torch.testing.assert_close(penultimate_features(model, x, layer=first), x)


def test_errors() -> None:
    with pytest.raises(TypeError, match="model is an Ensemble"):
        penultimate_features(Ensemble.from_factory(lambda: nn.Linear(4, 3), 2, generator=0), torch.randn(3, 4))
    with pytest.raises(ValueError, match="has no nn.Linear layer"):
        penultimate_features(nn.Sequential(nn.Flatten()), torch.randn(3, 4))
    with pytest.raises(ValueError, match="layer must be a module of model"):
        penultimate_features(nn.Linear(4, 3), torch.randn(3, 4), layer=nn.Linear(4, 3))
    shared = nn.Linear(4, 4)
    with pytest.raises(ValueError, match="ran 2 times in one forward pass"):
        penultimate_features(nn.Sequential(shared, shared), torch.randn(3, 4))
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        penultimate_features(nn.Linear(4, 3), torch.randn(3, 4), batch_size=0)


def test_docstring_example() -> None:
    result = doctest.testmod(importlib.import_module("activebayes.models.embeddings"), raise_on_error=False)
    assert result.failed == 0 and result.attempted >= 1
