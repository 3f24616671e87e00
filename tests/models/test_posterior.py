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


def test_fit_with_no_labels_trains_nothing_and_keeps_the_prior():
    """The protocol's first round: fit on zero rows leaves the network as built."""
    from activebayes.models.heads import build_posterior
    from activebayes.models.posterior import NO_LABELS

    empty = (torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))
    net = _mlp(0)
    before = [p.detach().clone() for p in net.parameters()]
    assert as_posterior(net).fit(empty, generator=torch.Generator().manual_seed(0)) == NO_LABELS
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))
    # last-layer Laplace: its prior N(theta, I / delta) around the built weights, ready to sample
    laplace = build_posterior("laplace", network=_mlp(1), num_classes=3, input_shape=(4,))
    summary = laplace.fit(empty, generator=torch.Generator().manual_seed(0))
    assert summary["skipped"] == NO_LABELS["skipped"] and summary["laplace_prior_only"] is True
    samples = laplace.log_probs(torch.randn(5, 4), num_samples=3, generator=torch.Generator().manual_seed(0))
    assert samples.shape == (5, 3, 3) and not torch.equal(samples[:, 0], samples[:, 1])


class _BuiltInFit:
    """A user's posterior that builds its network in fit: ``module`` raises AttributeError before."""

    def __init__(self) -> None:
        self._net = None

    @property
    def module(self) -> torch.nn.Module:
        if self._net is None:
            raise AttributeError("the network is built in fit")
        return self._net

    @property
    def num_functions(self) -> int | None:
        return None

    def fit(self, train, *, validation=None, generator=None, device=None):
        self._net = _mlp(0)
        return {}

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=512, device=None):
        return predict_log_probs(self.module, inputs, num_samples, generator=generator)

    def features(self, inputs, *, batch_size=512, device=None):
        raise NotImplementedError


def test_a_posterior_whose_module_is_built_in_fit_is_a_posterior():
    """Its members are looked up, not evaluated: the module property is not read before fit."""
    posterior = _BuiltInFit()
    assert as_posterior(posterior) is posterior


def test_a_posterior_lacking_members_is_refused_naming_them():
    class Partial:
        module = None

        def fit(self, train, **kwargs):
            return {}

    with pytest.raises(InvalidTypeError, match=r"got Partial, which lacks num_functions, log_probs, features$"):
        as_posterior(Partial())
    with pytest.raises(InvalidTypeError, match=r"\(module, num_functions, fit, log_probs, features\), got object$"):
        as_posterior(object())


def test_features_raising_not_implemented_is_features_unavailable():
    """What strategies reading features (BADGE, typicality) get: the library's error, not a bare NotImplementedError."""
    from activebayes.models.posterior import posterior_features

    with pytest.raises(FeaturesUnavailableError, match=r"^_BuiltInFit.features is not implemented"):
        posterior_features(_BuiltInFit(), torch.randn(2, 4), batch_size=8)
    posterior = as_posterior(_mlp(1))
    assert posterior_features(posterior, torch.randn(3, 4)).shape == (3, 8)
