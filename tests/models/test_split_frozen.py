"""Heads on a frozen encoder train on features: the same weights as training through the
encoder, with the encoder run once per item instead of once per minibatch."""

import pytest
import torch
from torch import nn

from activebayes.models import training
from activebayes.models.encoders import FrozenEncoder, split_frozen
from activebayes.models.heads import build_head


class CountingEncoder(nn.Module):
    """A fixed random projection that counts the rows it encodes."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(12, 6)
        self.rows = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.rows += x.shape[0]
        return torch.tanh(self.linear(x))


def _data(n: int = 40, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def _head(name: str, encoder: nn.Module) -> nn.Module:
    # no feature cache: every call reaches the encoder, so the counts below see each pass
    return build_head(name, encoder=FrozenEncoder(encoder, cache=False), num_classes=3, feature_dim=6, hidden=8,
                      ensemble_size=3, generator=1)


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
def test_fit_on_features_gives_the_weights_of_fitting_through_the_encoder(monkeypatch, name):
    train, val = _data(40, 0), _data(30, 1)
    torch.manual_seed(0)
    encoder = CountingEncoder()
    split_model, plain_model = _head(name, encoder), _head(name, encoder)
    assert split_frozen(split_model) is not None

    encoder.rows = 0
    training.fit(split_model, train, validation=val, max_epochs=6, min_epochs=6, batch_size=8, generator=3)
    rows_split = encoder.rows
    monkeypatch.setattr(training, "split_frozen", lambda model: None)
    encoder.rows = 0
    training.fit(plain_model, train, validation=val, max_epochs=6, min_epochs=6, batch_size=8, generator=3)
    rows_plain = encoder.rows

    for (key, a), (_, b) in zip(split_model.state_dict().items(), plain_model.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, msg=f"{name}: {key} differs", rtol=1e-5, atol=1e-6)
    assert rows_split == 40 + 30  # each labelled and validation item encoded once
    assert rows_plain > 10 * rows_split


def test_an_ensemble_encodes_each_item_once_for_all_members():
    encoder = CountingEncoder()
    ensemble = _head("ensemble", encoder)
    x = torch.randn(7, 12)
    encoder.rows = 0
    joint = ensemble(x)
    assert encoder.rows == 7
    one_by_one = torch.stack([member(x) for member in ensemble.members], dim=1)
    torch.testing.assert_close(joint, one_by_one)


def test_members_with_their_own_encoders_are_not_split():
    members = [nn.Sequential(FrozenEncoder(CountingEncoder()), nn.Linear(6, 3)) for _ in range(2)]
    from activebayes.models import Ensemble

    assert split_frozen(Ensemble(members)) is None
    assert split_frozen(nn.Sequential(nn.Linear(12, 3))) is None
    assert split_frozen(members[0]) is not None
