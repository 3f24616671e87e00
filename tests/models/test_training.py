"""fit, FitResult, reset_parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import TensorDataset

from activebayes.errors import InvalidArgumentError
from activebayes.models import (
    MLP,
    Ensemble,
    FitResult,
    build_model,
    fit,
    predict_log_probs,
    reset_parameters,
)


@pytest.fixture(scope="module")
def digits():
    data = load_digits()
    x = torch.tensor(data.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    y = torch.tensor(data.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    train, val, test = perm[:500], perm[500:800], perm[800:]
    return (x[train], y[train]), (x[val], y[val]), (x[test], y[test])


def test_fit_reaches_90_percent_on_digits_from_500_labels(digits):
    train, val, (x_test, y_test) = digits
    net = build_model("mlp", num_classes=10, input_shape=(1, 8, 8), generator=1)
    result = fit(net, train, validation=val, generator=2)
    assert isinstance(result, FitResult)
    assert 1 <= result.best_epoch <= result.epochs_run <= 30
    assert len(result.history) == result.epochs_run
    log_probs = predict_log_probs(net, x_test, 10, generator=3)
    predicted = log_probs.exp().mean(1).argmax(-1).numpy()
    accuracy = float(np.mean(predicted == y_test.numpy()))
    assert accuracy > 0.90, accuracy
    # the restored weights are the best epoch's: re-evaluating gives the recorded numbers
    net.eval()
    with torch.no_grad():
        logits = net(val[0])
    val_acc = float((logits.argmax(-1) == val[1]).float().mean())
    val_loss = float(nn.functional.cross_entropy(logits, val[1]))
    assert val_acc == pytest.approx(result.best_validation_accuracy)
    assert val_loss == pytest.approx(result.best_validation_loss, rel=1e-5)
    assert result.best_validation_accuracy == max(r.validation_accuracy for r in result.history)


def test_early_stopping_respects_patience(digits):
    train, val, _ = digits
    net = MLP(in_features=64, num_classes=10)
    result = fit(net, train, validation=val, patience=1, max_epochs=10, min_samples_per_epoch=500, generator=0)
    if result.epochs_run < 10:
        assert result.epochs_run == result.best_epoch + 1


def test_same_seed_same_weights_bitwise(digits):
    train, val, _ = digits
    small = (train[0][:40], train[1][:40])
    nets = []
    for _ in range(2):
        net = build_model("gal_cnn", num_classes=10, input_shape=(1, 8, 8), generator=5)
        fit(net, small, validation=val, max_epochs=2, min_samples_per_epoch=256, generator=6)
        nets.append(net)
    for a, b in zip(nets[0].state_dict().values(), nets[1].state_dict().values()):
        assert torch.equal(a, b)
    other = build_model("gal_cnn", num_classes=10, input_shape=(1, 8, 8), generator=5)
    fit(other, small, validation=val, max_epochs=2, min_samples_per_epoch=256, generator=7)
    assert not torch.equal(other.classifier[2].weight, nets[0].classifier[2].weight)
    x = val[0][:20]
    assert torch.equal(predict_log_probs(nets[0], x, 4, generator=1), predict_log_probs(nets[1], x, 4, generator=1))


def test_fit_does_not_touch_the_global_rng():
    net, data = MLP(in_features=3, num_classes=2), (torch.randn(10, 3), torch.randint(0, 2, (10,)))
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    fit(net, data, max_epochs=1, generator=0)
    assert torch.equal(torch.rand(3), expected)


def test_tiny_training_sets_get_min_samples_per_epoch():
    calls = []
    net = MLP(in_features=4, num_classes=3)
    net.register_forward_hook(lambda m, a, o: calls.append(a[0].shape[0]) if m.training else None)
    x, y = torch.randn(20, 4), torch.arange(20) % 3
    result = fit(net, (x, y), max_epochs=2, batch_size=16, min_samples_per_epoch=100, generator=0)
    assert result.epochs_run == 2 and result.best_epoch == 2 and result.best_validation_loss is None
    assert sum(calls) == 200 and max(calls) == 16  # 100 samples per epoch in batches of 16


def test_ensemble_fit_trains_each_member_and_dataset_inputs(digits):
    train, val, _ = digits
    ens = Ensemble.from_factory(lambda: MLP(in_features=64, num_classes=10), 3, generator=0)
    before = [m.net[1].weight.clone() for m in ens.members]
    result = fit(ens, TensorDataset(*train), validation=TensorDataset(*val), max_epochs=3, generator=1, optimizer="sgd", lr=0.05)
    assert len(result.members) == 3 and result.best_validation_accuracy > 0.8
    for member, w in zip(ens.members, before):
        assert not torch.equal(member.net[1].weight, w)
    assert not torch.equal(ens.members[0].net[1].weight, ens.members[1].net[1].weight)


def test_reset_parameters_is_seeded():
    net = build_model("batchbald_cnn", num_classes=10, input_shape=(1, 8, 8), generator=0)
    original = [p.clone() for p in net.parameters()]
    reset_parameters(net, generator=3)
    first = [p.clone() for p in net.parameters()]
    assert not any(torch.equal(a, b) for a, b in zip(original, first))
    reset_parameters(net, generator=3)
    assert all(torch.equal(a, b) for a, b in zip(first, net.parameters()))


def test_fit_bad_inputs():
    net = MLP(in_features=3, num_classes=2)
    x, y = torch.randn(5, 3), torch.randint(0, 2, (5,))
    with pytest.raises(TypeError, match="train must be"):
        fit(net, x)
    with pytest.raises(ValueError, match=r"targets must have shape \[N\] = \[5\]"):
        fit(net, (x, y[:4]))
    with pytest.raises(TypeError, match="integer class indices"):
        fit(net, (x, y.float()))
    with pytest.raises(ValueError, match="unknown optimizer"):
        fit(net, (x, y), optimizer="lbfgs")
    with pytest.raises(ValueError, match="max_epochs"):
        fit(net, (x, y), max_epochs=0)
    with pytest.raises(ValueError, match="lr"):
        fit(net, (x, y), lr=-1.0)
    with pytest.raises(ValueError, match="validation is empty"):
        fit(net, (x, y), validation=(torch.empty(0, 3), torch.empty(0, dtype=torch.long)))


# --------------------------------------------------------------------------- training sized by the data (issue 29)


def _count_training_items(net):
    calls = []
    net.register_forward_hook(lambda m, a, o: calls.append(a[0].shape[0]) if m.training else None)
    return calls


def test_by_default_ten_labels_train_in_small_batches_and_stop_once_fitted():
    from activebayes.models.training import MIN_STEPS_PER_EPOCH, PAPER_FIT_OPTIONS

    x, y = torch.randn(10, 4) + 3 * (torch.arange(10) % 2)[:, None], torch.arange(10) % 2
    net = MLP(in_features=4, num_classes=2)
    calls = _count_training_items(net)
    result = fit(net, (x, y), generator=0)
    assert max(calls) == 10  # minibatches of the 10 items, not 64 draws with repeats
    assert all(sum(calls[e * MIN_STEPS_PER_EPOCH:(e + 1) * MIN_STEPS_PER_EPOCH]) == 200 for e in range(result.epochs_run))
    assert result.epochs_run < 30  # early stopping on the training loss (no validation set)
    assert result.history[-1].train_loss < result.history[0].train_loss
    # the BatchBALD paper's setting, still available: every epoch 5,056 draws in batches of 64
    paper = MLP(in_features=4, num_classes=2)
    calls = _count_training_items(paper)
    result = fit(paper, (x, y), **{**PAPER_FIT_OPTIONS, "max_epochs": 2}, generator=0)
    assert result.epochs_run == 2 and sum(calls) == 2 * 5056 and max(calls) == 64


def test_validation_early_stopping_needs_min_steps_by_default(digits):
    train, val, _ = digits
    small = (train[0][:20], train[1][:20])
    result = fit(MLP(in_features=64, num_classes=10), small, validation=val, patience=1, min_steps=120, generator=0)
    # epochs of 20 steps: early stopping may act only from the 6th epoch (120 steps) on
    assert result.epochs_run >= 6
    result = fit(MLP(in_features=64, num_classes=10), small, validation=val, patience=1, min_steps=0, generator=0)
    assert result.epochs_run == result.best_epoch + 1 or result.epochs_run == 30


def test_old_run_directories_keep_the_paper_training_and_new_ones_size_it_by_the_data():
    from activebayes.records import LoopConfig

    assert LoopConfig().training == "data"
    stored = {k: v for k, v in LoopConfig().to_dict().items() if k != "training"}
    assert LoopConfig.from_stored(stored).training == "paper"  # resumed exactly as it started
    assert LoopConfig.from_stored(LoopConfig(training="data").to_dict()).training == "data"
    with pytest.raises(ValueError, match="training"):
        LoopConfig(training="fast")


@pytest.mark.parametrize("members", [0, 3])
def test_batch_norm_never_gets_a_last_batch_of_one(members):
    """65 items in batches of 64 would leave one item in the epoch's last batch: batch norm cannot
    train on it ("Expected more than 1 value per channel"), so the epoch takes a whole last batch."""
    def network():
        return nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3))

    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(65, 8, generator=g), torch.arange(65) % 3
    model = Ensemble.from_factory(network, members, generator=0) if members else network()
    result = fit(model, (x, y), max_epochs=2, min_steps_per_epoch=1, generator=0)
    results = result.members or (result,)
    assert len(results) == max(members, 1) and all(np.isfinite(r.history[-1].train_loss) for r in results)



@pytest.mark.parametrize(("n", "batch_size"), [(1, 64), (10, 1)])
def test_batch_norm_with_batches_of_one_is_named(n, batch_size):
    """One training item (or batch_size=1) with batch norm was torch's raw "Expected more than 1
    value per channel when training"."""
    model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3))
    x, y = torch.randn(n, 8, generator=torch.Generator().manual_seed(0)), torch.arange(n) % 3
    with pytest.raises(InvalidArgumentError, match=r"^the model has batch norm \(BatchNorm1d\), which cannot train on "
                                                   r"batches of one item, and these are"):
        fit(model, (x, y), max_epochs=1, batch_size=batch_size, generator=0)
