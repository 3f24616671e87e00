"""predict_log_probs: consistency of the K functions, fast path == naive path, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset

from activebayes.models import (
    BatchedSamplingError,
    MLP,
    BatchBALDCNN,
    ConsistentMCDropout,
    Ensemble,
    GalCNN,
    fit,
    mc_dropout,
    mc_dropout_layers,
    predict_log_probs,
    resample_masks,
)
from activebayes.errors import InvalidArgumentError

ATOL = 1e-5  # different batch sizes may pick different float kernels


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return torch.randn(40, 1, 28, 28, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module", params=["gal", "batchbald", "mlp"])
def net(request) -> nn.Module:
    torch.manual_seed(0)
    return {
        "gal": lambda: GalCNN(),
        "batchbald": lambda: BatchBALDCNN(),
        "mlp": lambda: MLP(in_features=784, num_classes=10, hidden=(64, 32)),
    }[request.param]()


def test_same_item_same_log_probs_whatever_position_batch_size_chunking(net, images):
    K = 6
    reference = predict_log_probs(net, images, K, generator=1, batch_size=256)
    assert reference.shape == (40, K, 10) and reference.dtype == torch.float32
    perm = torch.randperm(40, generator=torch.Generator().manual_seed(2))
    shuffled = predict_log_probs(net, images[perm], K, batch_size=7)  # held masks, other chunks
    torch.testing.assert_close(shuffled, reference[perm], rtol=0, atol=ATOL)
    one_by_one = predict_log_probs(net, images, K, batch_size=1)
    torch.testing.assert_close(one_by_one, reference, rtol=0, atol=ATOL)
    # a tiny memory budget forces K to be split and items to go one at a time
    split = predict_log_probs(net, images, K, memory_budget_mb=0.05)
    torch.testing.assert_close(split, reference, rtol=0, atol=ATOL)
    # duplicated item inside one batch: identical rows
    dup = predict_log_probs(net, images[[3, 3, 3]], K)
    torch.testing.assert_close(dup, reference[[3, 3, 3]], rtol=0, atol=ATOL)
    # log-probabilities are normalised
    torch.testing.assert_close(reference.logsumexp(-1), torch.zeros(40, K), rtol=0, atol=1e-5)


def test_different_k_differ_and_resampling_changes_them(net, images):
    a = predict_log_probs(net, images, 4, generator=10)
    for k in range(1, 4):
        assert (a[:, 0] - a[:, k]).abs().max() > 1e-3
    b = predict_log_probs(net, images, 4, generator=11)
    assert (a - b).abs().amax(dim=(0, 2)).min() > 1e-3  # every sample changed
    c = predict_log_probs(net, images, 4, generator=10)
    assert torch.equal(a, c)  # same seed -> bitwise same
    # the first K samples do not depend on how many are drawn
    d = predict_log_probs(net, images, 7, generator=10)
    torch.testing.assert_close(d[:, :4], a, rtol=0, atol=ATOL)


def _naive_mlp(net: MLP, x: torch.Tensor, K: int) -> torch.Tensor:
    """Independent reference: K full forward passes written out, float64, masks k applied by hand."""
    lin1, lin2, lin3 = (m for m in net.net if isinstance(m, nn.Linear))
    d1, d2 = mc_dropout_layers(net)
    x = x.flatten(1).double()
    out = []
    for k in range(K):
        h = torch.relu(x @ lin1.weight.double().T + lin1.bias.double()) * d1.masks([k], (lin1.out_features,), dtype=torch.float64)[0]
        h = torch.relu(h @ lin2.weight.double().T + lin2.bias.double()) * d2.masks([k], (lin2.out_features,), dtype=torch.float64)[0]
        logits = h @ lin3.weight.double().T + lin3.bias.double()
        out.append(torch.log_softmax(logits, -1))
    return torch.stack(out, 1)


def test_fast_path_equals_naive_reference_mlp(images):
    torch.manual_seed(3)
    net = MLP(in_features=784, num_classes=10, hidden=(64, 32))
    fast = predict_log_probs(net, images, 8, generator=4)
    naive = _naive_mlp(net, images, 8)
    torch.testing.assert_close(fast.double(), naive, rtol=0, atol=1e-5)


def test_fast_path_equals_sequential_full_passes(net, images):
    fast = predict_log_probs(net, images, 5, generator=6)
    naive = predict_log_probs(net, images, 5, sampling="sequential", batch_size=13)
    torch.testing.assert_close(fast, naive, rtol=0, atol=ATOL)


def test_gal_cnn_naive_reference_by_hand(images):
    torch.manual_seed(4)
    net = GalCNN()
    fast = predict_log_probs(net, images[:10], 3, generator=8)
    drop1, drop2 = mc_dropout_layers(net)
    lin1, lin2 = net.classifier[2], net.classifier[5]
    feats = net.features(images[:10])
    for k in range(3):
        h = (feats * drop1.masks([k], feats.shape[1:])[0]).flatten(1)
        h = torch.relu(lin1(h)) * drop2.masks([k], (128,))[0]
        torch.testing.assert_close(fast[:, k], torch.log_softmax(lin2(h), -1).detach(), rtol=0, atol=ATOL)


def test_inputs_as_tuple_dataset_and_tensor_dataset_agree(images):
    torch.manual_seed(5)
    net = MLP(in_features=784, num_classes=10)
    targets = torch.zeros(40, dtype=torch.long)
    ref = predict_log_probs(net, images, 3, generator=0)

    class Plain(Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            return images[i]

    for data in [(images, targets), TensorDataset(images, targets), Plain()]:
        torch.testing.assert_close(predict_log_probs(net, data, 3, batch_size=9), ref, rtol=0, atol=ATOL)


def test_batch_norm_uses_running_statistics_and_flags_are_restored():
    torch.manual_seed(6)
    net = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), ConsistentMCDropout(0.5), nn.Linear(8, 3))
    net.train()
    for _ in range(3):
        net(torch.randn(32, 5))  # move the running statistics
    x = torch.randn(6, 5)
    log_probs = predict_log_probs(net, x, 2, generator=0)
    assert net.training and net[1].training  # restored
    net.eval()
    h = torch.relu(net[1](net[0](x)))
    drop = net[3]
    for k in range(2):
        expected = torch.log_softmax(net[4](h * drop.masks([k], (8,))[0]), -1).detach()
        torch.testing.assert_close(log_probs[:, k], expected, rtol=0, atol=ATOL)
    # single item: batch norm in train mode would fail / differ; eval semantics do not
    torch.testing.assert_close(predict_log_probs(net, x[:1], 2), log_probs[:1], rtol=0, atol=ATOL)


def test_deterministic_model_gives_identical_copies():
    torch.manual_seed(7)
    net = nn.Sequential(nn.Linear(4, 3))
    x = torch.randn(5, 4)
    one = predict_log_probs(net, x)
    assert one.shape == (5, 1, 3)
    torch.testing.assert_close(one[:, 0], torch.log_softmax(net(x), -1).detach())
    with pytest.warns(UserWarning, match="identical"):
        many = predict_log_probs(net, x, 3)
    assert torch.equal(many, one.expand(5, 3, 3))
    with pytest.warns(UserWarning, match="mc_dropout"):
        predict_log_probs(nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.5)), x, 2)


def test_ensemble_samples_are_its_members():
    ens = Ensemble.from_factory(lambda: MLP(in_features=6, num_classes=4), 5, generator=0)
    x = torch.randn(11, 6)
    log_probs = predict_log_probs(ens, x)
    assert log_probs.shape == (11, 5, 4)
    for k, member in enumerate(ens.members):
        member.eval()
        torch.testing.assert_close(log_probs[:, k], torch.log_softmax(member(x), -1).detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(predict_log_probs(ens, x, 5, batch_size=2), log_probs, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="ensemble size 5"):
        predict_log_probs(ens, x, 3)


class _Residual(nn.Module):
    """Mixes activations from before and after dropout: the batched path is invalid."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(4, 6)
        self.drop = ConsistentMCDropout(0.5)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        h = self.inp(x)
        return self.out(h + self.drop(h))


def test_models_the_batched_path_cannot_handle_get_a_clear_error_and_sequential_works():
    torch.manual_seed(8)
    net = _Residual()
    x = torch.randn(5, 4)
    with pytest.raises(BatchedSamplingError, match="sampling='sequential'"):
        predict_log_probs(net, x, 3, generator=0)
    seq = predict_log_probs(net, x, 3, generator=0, sampling="sequential")
    net.eval()
    h = net.inp(x)
    for k in range(3):
        expected = torch.log_softmax(net.out(h + h * net.drop.masks([k], (6,))[0]), -1).detach()
        torch.testing.assert_close(seq[:, k], expected, rtol=0, atol=ATOL)


@pytest.mark.parametrize("bad", [0, -3])
def test_num_samples_must_be_positive(bad):
    with pytest.raises(ValueError, match="num_samples"):
        predict_log_probs(MLP(in_features=3, num_classes=2), torch.randn(4, 3), bad)


def test_bad_inputs_raise_clear_errors():
    net = MLP(in_features=3, num_classes=2)
    x = torch.randn(4, 3)
    with pytest.raises(TypeError, match="num_samples"):
        predict_log_probs(net, x, 2.0)
    with pytest.raises(ValueError, match="num_samples is required"):
        predict_log_probs(net, x)
    with pytest.raises(TypeError, match="data must be"):
        predict_log_probs(net, np.zeros((4, 3)), 2)
    with pytest.raises(TypeError, match="data must be"):
        predict_log_probs(net, [[1.0, 2.0, 3.0]], 2)
    with pytest.raises(ValueError, match="empty"):
        predict_log_probs(net, torch.empty(0, 3), 2)
    with pytest.raises(ValueError, match="sampling"):
        predict_log_probs(net, x, 2, sampling="fast")
    with pytest.raises(ValueError, match="batch_size"):
        predict_log_probs(net, x, 2, batch_size=0)
    with pytest.raises(TypeError, match="model"):
        predict_log_probs(lambda t: t, x, 2)
    with pytest.raises(TypeError, match="generator"):
        predict_log_probs(net, x, 2, generator="seed")


def test_resample_then_predict_without_generator_uses_held_masks():
    net = MLP(in_features=3, num_classes=2)
    x = torch.randn(6, 3)
    resample_masks(net, generator=42)
    a = predict_log_probs(net, x, 3)
    b = predict_log_probs(net, x, 3, generator=42)
    assert torch.equal(a, b)


def test_nan_outputs_name_the_items_and_their_inputs():
    net = mc_dropout(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3)))
    x = torch.randn(20, 6, generator=torch.Generator().manual_seed(0))
    x[13, 2] = float("nan")
    with pytest.raises(ValueError, match=r"outputs are not finite \(NaN\) for items \[13\]: their inputs hold NaN"):
        predict_log_probs(net, x, 4, batch_size=8, generator=0)
    with torch.no_grad():
        net[0].weight[0, 0] = float("nan")  # a model that went NaN itself
    with pytest.raises(ValueError, match=r"outputs are not finite \(NaN\) for items \[0, 1, 2, 3, 4\] and 15 more: the model's weights"):
        predict_log_probs(net, torch.randn(20, 6), 4, generator=0)


class _Overflowing(nn.Module):
    """Linear logits, but ``value`` for class 0 (``every_class``: all classes) of the items whose
    last input is 1000, and NaN for class 0 of those whose last input is 2000 (``_marked``): the
    same items in any chunking."""

    def __init__(self, value, every_class=False):
        super().__init__()
        self.linear, self.value, self.every_class = nn.Linear(6, 3), value, every_class

    def forward(self, x):
        logits_n_C = self.linear(x)
        marked_n = x[:, -1] == 1000
        if self.every_class:
            return logits_n_C.masked_fill(marked_n[:, None], self.value)
        logits_n_C[:, 0] = logits_n_C[:, 0].masked_fill(marked_n, self.value).masked_fill(x[:, -1] == 2000, math.nan)
        return logits_n_C


def _marked(rows, nan_rows=()):
    x_N_D = torch.randn(20, 6, generator=torch.Generator().manual_seed(0))
    x_N_D[list(rows), -1] = 1000.0
    x_N_D[list(nan_rows), -1] = 2000.0
    return x_N_D


def test_infinite_outputs_are_named_as_infinite_not_nan():
    """A +inf logit was reported as "the model's outputs are NaN" (its log-softmax is NaN)."""
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"outputs are not finite \(\+inf\) for items \[11, 13\]: "
                                             r"the model's weights or computation give \+inf"):
            predict_log_probs(_Overflowing(math.inf), _marked([11, 13]), 1, batch_size=8)
        with pytest.raises(ValueError, match=r"outputs are not finite \(-inf for every class\) for items \[7\]"):
            predict_log_probs(_Overflowing(-math.inf, every_class=True), _marked([7]), 1, batch_size=8)
        with pytest.raises(ValueError, match=r"outputs are not finite \(NaN and \+inf\) for items \[2, 5\]"):
            predict_log_probs(_Overflowing(math.inf), _marked([5], nan_rows=[2]), 1)
        # one class at -inf is a class of probability 0: no error, log p = -inf there
        log_probs_N_K_C = predict_log_probs(_Overflowing(-math.inf), _marked([4]), 1)
    assert torch.isneginf(log_probs_N_K_C[4, :, 0]).all() and torch.isfinite(log_probs_N_K_C[4, :, 1:]).all()


def test_dict_items_and_lists_of_item_tensors_are_named():
    class Tokens(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"input_ids": torch.zeros(3, dtype=torch.long), "attention_mask": torch.ones(3)}

    net = mc_dropout(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3)))
    with pytest.raises(TypeError, match=r"got a dict \(keys \['attention_mask', 'input_ids'\]\).*huggingface"):
        predict_log_probs(net, Tokens(), 4, generator=0)
    with pytest.raises(ValueError, match=r"data is a list of 5 tensors; .*torch\.stack"):
        predict_log_probs(net, [torch.randn(6) for _ in range(5)], 4, generator=0)


def test_the_warning_for_unsampled_dropout_gives_advice_that_works():
    class OwnDropout(nn.Dropout):
        def forward(self, x):  # its own forward: mc_dropout leaves it, so "convert" would do nothing
            return super().forward(x)

    x = torch.randn(4, 6)
    for layer, advice in ((OwnDropout(0.5), r"2 \(OwnDropout\) cannot be held fixed.*replace it by nn.Dropout"),
                          (nn.Dropout(0.5), r"convert them with mc_dropout\(model\)")):
        with pytest.warns(UserWarning, match=advice):
            predict_log_probs(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), layer, nn.Linear(8, 3)), x, 3)


@pytest.mark.parametrize("make", [
    lambda: (MLP(in_features=4, num_classes=3), {"num_samples": 3, "sampling": "sequential"}),
    lambda: (Ensemble([MLP(in_features=4, num_classes=3) for _ in range(2)]), {"num_samples": None}),
    lambda: (MLP(in_features=4, num_classes=3), {"num_samples": 3}),  # batched: named before, but not [N]
])
@pytest.mark.parametrize(("inputs", "message"), [
    (torch.randn(6, 5), r"^the model cannot read inputs of shape \[1, 5\] \(one item: \(5,\)\): mat1 and mat2 shapes"),
    (torch.randn(6, 4).long(), r"^the model cannot read inputs of dtype int64: "),
    (torch.randn(6), r"^the model cannot read inputs of shape \[1\] \(one item: \(\)\): Dimension out of range"),
])
def test_inputs_the_model_cannot_read_are_named_whatever_the_sampling(make, inputs, message):
    # sequential sampling and ensembles raised torch's own RuntimeError; inputs [N] (nn.Flatten of one dimension)
    # an IndexError on every path
    model, options = make()
    with pytest.raises(InvalidArgumentError, match=message):
        predict_log_probs(model, inputs, **options)


def test_fit_names_inputs_with_a_dimension_missing():
    with pytest.raises(InvalidArgumentError, match=r"^the model cannot read inputs of shape \[10\] \(one item: \(\)\)"):
        fit(MLP(in_features=4, num_classes=3), (torch.randn(10), torch.zeros(10, dtype=torch.long)), max_epochs=1)
