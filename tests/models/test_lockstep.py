"""An ensemble of small deterministic heads trains in lockstep with the result of training
each member alone: the same early stopping and, up to rounding, the same weights.

In float64, so that rounding stays far below what a real mistake (a member trained on
another member's minibatches, another member's optimizer state) would change."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import activebayes.models.training as training
from activebayes.models import Ensemble, fit
from activebayes.models._lockstep import stackable


TOLERANCE = 1e-6


def _head(hidden: int = 32) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.LayerNorm(16, elementwise_affine=False), nn.Linear(16, hidden), nn.ReLU(),
                         nn.Linear(hidden, 4)).double()


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g, dtype=torch.float64)
    y = (x[:, :4].argmax(1) + (torch.rand(n, generator=g) < 0.2).long()) % 4  # learnable, with noise
    return x, y


def _fit_both(monkeypatch, factory=_head, size: int = 4, **options):
    """``(lockstep, member by member)`` results and weights of ``size`` members from ``factory``."""
    train, val = _data(70, 0), _data(120, 1)
    validation = val if options.pop("validate", True) else None
    results, weights = [], []
    for lockstep in (True, False):
        ensemble = Ensemble.from_factory(factory, size, generator=3)
        assert stackable(list(ensemble.members))
        with monkeypatch.context() as patch:
            if not lockstep:
                patch.setattr(training, "stackable", lambda members: False)
            results.append(fit(ensemble, train, validation=validation, generator=5, **options))
        weights.append([p.detach().clone() for p in ensemble.parameters()])
    return results, weights


@pytest.mark.parametrize("options", [
    {},  # epochs sized by the data, early stopping on validation
    {"validate": False},  # stop once the training loss stops falling
    {"min_samples_per_epoch": 300, "max_epochs": 4, "validate": False},  # the paper's fixed epochs
    {"optimizer": "sgd", "lr": 0.05, "patience": 2, "min_steps": 0},
])
def test_lockstep_equals_member_by_member(monkeypatch, options):
    (lock, alone), (w_lock, w_alone) = _fit_both(monkeypatch, **options)
    for a, b in zip(w_lock, w_alone, strict=True):
        # batched products round differently, and Adam's g / sqrt(v) amplifies that over
        # hundreds of steps; a member trained on another's minibatches differs by > 0.01
        torch.testing.assert_close(a, b, rtol=0, atol=TOLERANCE)
    assert not torch.equal(w_lock[0], _fresh_first_weight())  # trained at all
    for m_lock, m_alone in zip(lock.members, alone.members, strict=True):
        assert (m_lock.epochs_run, m_lock.best_epoch) == (m_alone.epochs_run, m_alone.best_epoch)
        for r_lock, r_alone in zip(m_lock.history, m_alone.history, strict=True):
            assert r_lock.epoch == r_alone.epoch and r_lock.validation_accuracy == r_alone.validation_accuracy
            assert r_lock.train_loss == pytest.approx(r_alone.train_loss, rel=1e-9)
            if r_alone.validation_loss is not None:
                # fit scores validation in float32 whatever the weights (sums round at 1e-7)
                assert r_lock.validation_loss == pytest.approx(r_alone.validation_loss, rel=1e-6)
    if lock.best_validation_loss is not None:
        assert lock.best_validation_loss == pytest.approx(alone.best_validation_loss, rel=1e-6)


def _fresh_first_weight() -> torch.Tensor:
    return Ensemble.from_factory(_head, 4, generator=3).members[0][2].weight.detach()


def test_members_stop_at_their_own_epoch(monkeypatch):
    (lock, alone), _ = _fit_both(monkeypatch, patience=1, min_steps=0)
    epochs = [m.epochs_run for m in lock.members]
    assert epochs == [m.epochs_run for m in alone.members]
    assert len(set(epochs)) > 1  # the stack shrank as members stopped
    assert [m.best_epoch for m in lock.members] == [m.best_epoch for m in alone.members]


def test_what_is_not_stacked():
    assert not stackable([_head()])  # one member
    assert not stackable([_head(), _head(8)])  # different shapes
    norm = nn.Sequential(nn.Linear(16, 8), nn.BatchNorm1d(8), nn.Linear(8, 4))
    assert not stackable([norm, norm])  # batch statistics: member by member
    assert not stackable([nn.Sequential(nn.Dropout(0.5), nn.Linear(16, 4)), nn.Sequential(nn.Dropout(0.2), nn.Linear(16, 4))])
    affine = nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 4))
    assert not stackable([affine, affine])


def test_the_tolerance_tells_another_minibatch_order_apart():
    """What the comparison above would see if lockstep mixed up the members' streams."""
    train = _data(70, 0)
    a, b = (Ensemble.from_factory(_head, 1, generator=3) for _ in range(2))
    fit(a, train, generator=5)
    fit(b, train, generator=6)  # the same initial weights, another minibatch order
    gap = max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert gap > 1e-2


def test_mlps_with_dropout_train_in_lockstep_with_their_own_masks(monkeypatch):
    """The digits protocol's ensemble: MLPs whose MC dropout drops in training. Each member's
    masks come from a generator seeded as fit seeds the global RNG for that member alone."""
    from activebayes.models import MLP

    def mlp() -> nn.Module:
        return MLP(in_features=16, num_classes=4, hidden=(32,), p=0.5).double()

    results, weights = _fit_both(monkeypatch, mlp, 3)
    for a, b in zip(*weights, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=TOLERANCE)
    assert [m.epochs_run for m in results[0].members] == [m.epochs_run for m in results[1].members]
