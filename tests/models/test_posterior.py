"""The posterior protocol: NetworkPosterior over MC dropout nets and ensembles."""

import pytest
import torch

from activebayes.errors import InvalidTypeError
from activebayes.models import (
    MLP,
    Ensemble,
    FeaturesUnavailableError,
    NetworkPosterior,
    Posterior,
    as_posterior,
    mc_dropout,
    predict_log_probs,
)


def _mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return MLP(in_features=4, num_classes=3, hidden=(8,), p=0.5)


def test_network_posterior_is_a_posterior_and_matches_predict_log_probs():
    net = _mlp(0)
    posterior = as_posterior(net)
    assert isinstance(posterior, Posterior) and posterior.module is net
    assert posterior.num_functions is None
    x = torch.randn(7, 4)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    summary = posterior.fit((x, y), generator=torch.Generator().manual_seed(0))
    assert isinstance(summary, dict) and all(isinstance(k, str) for k in summary)
    got = posterior.log_probs(x, num_samples=5, generator=torch.Generator().manual_seed(3))
    want = predict_log_probs(net, x, 5, generator=torch.Generator().manual_seed(3))
    assert got.shape == (7, 5, 3)
    torch.testing.assert_close(got, want)
    assert posterior.features(x).shape == (7, 8)


def test_ensemble_posterior_has_fixed_function_count_and_first_member_features():
    members = [_mlp(s) for s in range(3)]
    posterior = NetworkPosterior(Ensemble(members))
    assert posterior.num_functions == 3
    x = torch.randn(5, 4)
    assert posterior.log_probs(x, num_samples=100).shape == (5, 3, 3)  # K is the ensemble's size
    with torch.no_grad():
        want = torch.relu(members[0].net[1](members[0].net[0](x)))  # flatten, dense, relu
    torch.testing.assert_close(posterior.features(x), want)


def test_features_unavailable_and_bad_model():
    class NoLinear(torch.nn.Module):
        def forward(self, x):
            return x[:, :3]

    with pytest.raises(FeaturesUnavailableError):
        as_posterior(NoLinear()).features(torch.randn(2, 4))
    with pytest.raises(InvalidTypeError, match="model must be"):
        as_posterior(object())
    posterior = as_posterior(_mlp(1))
    assert as_posterior(posterior) is posterior
