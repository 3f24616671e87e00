"""Consistent MC dropout layers, the converter and mask resampling."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from activebayes.models import (
    ConsistentMCDropout,
    ConsistentMCDropout2d,
    MCDropoutConv2d,
    MCDropoutLinear,
    mc_dropout,
    mc_dropout_layers,
    mc_sampling,
    predict_log_probs,
    resample_masks,
)


def test_train_mode_is_ordinary_dropout_fresh_mask_per_item():
    layer = ConsistentMCDropout(0.5).train()
    x = torch.ones(64, 100)
    torch.manual_seed(0)
    y = layer(x)
    # values are 0 or 1 / (1 - p); identical inputs get different masks; ~half dropped
    assert set(y.unique().tolist()) <= {0.0, 2.0}
    assert not torch.equal(y[0], y[1])
    assert abs(float((y == 0).float().mean()) - 0.5) < 0.05


def test_train_mode_channelwise_zeroes_whole_channels():
    layer = ConsistentMCDropout2d(0.5).train()
    torch.manual_seed(0)
    y = layer(torch.ones(16, 32, 5, 5))
    per_channel = y.flatten(2)
    assert torch.equal(per_channel.amin(-1), per_channel.amax(-1))  # constant over each map
    assert 0 < float((per_channel[..., 0] == 0).float().mean()) < 1


def test_eval_outside_sampling_is_identity():
    for layer in (ConsistentMCDropout(0.7), ConsistentMCDropout2d(0.7)):
        x = torch.randn(4, 3, 5, 5)
        assert torch.equal(layer.eval()(x), x)


def test_sampling_masks_fixed_per_k_and_item_major_layout():
    layer = ConsistentMCDropout(0.5).eval()
    resample_masks(layer, generator=11)
    x = torch.randn(1, 50).expand(6, 50)  # six identical items
    with mc_sampling(layer, range(4)):
        y = layer(x).view(6, 4, 50)
    assert torch.equal(y, y[:1].expand_as(y))  # same k -> same mask for every item
    masks = layer.masks(range(4), (50,))
    torch.testing.assert_close(y[0], x[0] * masks, rtol=0, atol=0)
    assert not torch.equal(masks[0], masks[1])


def test_masks_do_not_depend_on_number_of_samples_or_order_of_ids():
    layer = ConsistentMCDropout2d(0.3)
    resample_masks(layer, generator=5)
    m10 = layer.masks(range(10), (8, 4, 4))
    m3 = layer.masks([7, 2, 9], (8, 4, 4))
    assert m10.shape == (10, 8, 1, 1)
    assert torch.equal(m3, m10[[7, 2, 9]])


def test_resample_masks_changes_masks_and_same_seed_restores_them():
    net = nn.Sequential(nn.Linear(5, 40), ConsistentMCDropout(0.5), nn.Linear(40, 40), ConsistentMCDropout(0.5))
    seed = resample_masks(net, generator=torch.Generator().manual_seed(0))
    layers = mc_dropout_layers(net)
    assert [layer.layer_index for layer in layers] == [0, 1]
    first = layers[0].masks(range(3), (40,)).clone()
    assert not torch.equal(first, layers[1].masks(range(3), (40,)))  # layers differ
    resample_masks(net, generator=123)
    assert not torch.equal(first, layers[0].masks(range(3), (40,)))
    resample_masks(net, generator=seed)
    assert torch.equal(first, layers[0].masks(range(3), (40,)))


def test_mask_scaling_and_keep_rate():
    layer = ConsistentMCDropout(0.25)
    resample_masks(layer, generator=0)
    masks = layer.masks(range(200), (100,), dtype=torch.float64)
    assert set(masks.unique().tolist()) <= {0.0, 1 / 0.75}
    assert abs(float((masks > 0).double().mean()) - 0.75) < 0.01
    assert abs(float(masks.mean()) - 1.0) < 0.02  # E[z / (1 - p)] = 1


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_extreme_p(p):
    layer = ConsistentMCDropout(p).eval()
    x = torch.randn(3, 7)
    with mc_sampling(layer, range(2)):
        y = layer(x).view(3, 2, 7)
    expected = x.unsqueeze(1).expand(3, 2, 7) * (1.0 if p == 0 else 0.0)
    assert torch.equal(y, expected)


def test_bad_p_raises():
    with pytest.raises(ValueError, match="p must be"):
        ConsistentMCDropout(1.5)
    with pytest.raises(TypeError, match="p must be"):
        ConsistentMCDropout2d("0.5")


def test_convenience_layers_apply_dropout_to_the_input():
    lin = MCDropoutLinear(6, 3, p=0.5).eval()
    conv = MCDropoutConv2d(2, 4, 3, p=0.5).eval()
    resample_masks(lin, generator=1)
    resample_masks(conv, generator=1)
    x = torch.randn(5, 6)
    with mc_sampling(lin, [0]):
        y = lin(x)
    mask = lin.dropout.masks([0], (6,))[0]
    torch.testing.assert_close(y, nn.functional.linear(x * mask, lin.linear.weight, lin.linear.bias))
    img = torch.randn(2, 2, 6, 6)
    with mc_sampling(conv, [0]):
        out = conv(img)
    mask = conv.dropout.masks([0], (2, 6, 6))[0]
    assert mask.shape == (2, 1, 1)
    torch.testing.assert_close(out, conv.conv(img * mask))


class _UserNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.drop2d = nn.Dropout2d(0.3)
        self.block = nn.Sequential(nn.Flatten(), nn.Linear(4 * 6 * 6, 16), nn.ReLU(), nn.Dropout(0.4))
        self.drop1d = nn.Dropout1d(0.2)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = self.block(self.drop2d(torch.relu(self.conv(x))))
        h = self.drop1d(h.unsqueeze(-1)).squeeze(-1)
        return self.head(h)


def test_converter_swaps_every_dropout_and_keeps_the_original():
    net = _UserNet()
    converted = mc_dropout(net)
    assert isinstance(net.drop2d, nn.Dropout2d)  # not in place by default
    assert isinstance(converted.drop2d, ConsistentMCDropout2d) and converted.drop2d.p == 0.3
    assert isinstance(converted.block[3], ConsistentMCDropout) and converted.block[3].p == 0.4
    assert isinstance(converted.drop1d, ConsistentMCDropout2d)
    assert not any(isinstance(m, (nn.Dropout, nn.Dropout1d, nn.Dropout2d)) for m in converted.modules())
    same = mc_dropout(net, inplace=True)
    assert same is net and isinstance(net.drop2d, ConsistentMCDropout2d)


def test_converter_preserves_deterministic_output_when_dropout_is_off():
    torch.manual_seed(0)
    net = _UserNet().eval()
    x = torch.randn(7, 1, 8, 8)
    reference = net(x)
    converted = mc_dropout(net).eval()
    assert torch.equal(converted(x), reference)  # eval: dropout off
    # p = 0: training mode and MC sampling also reproduce the deterministic network
    net_p0 = _UserNet()
    net_p0.load_state_dict(net.state_dict())
    for m in net_p0.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0
    conv_p0 = mc_dropout(net_p0)
    assert torch.equal(conv_p0.train()(x), reference)
    log_probs = predict_log_probs(conv_p0, x, 4, generator=0)
    expected = torch.log_softmax(reference, -1).detach().unsqueeze(1).expand(7, 4, 3)
    torch.testing.assert_close(log_probs, expected)


def test_converted_user_model_samples_consistently():
    torch.manual_seed(1)
    net = mc_dropout(_UserNet())
    x = torch.randn(9, 1, 8, 8)
    a = predict_log_probs(net, x, 5, generator=3)
    b = predict_log_probs(net, x.flip(0), 5, generator=3, batch_size=2).flip(0)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    assert not torch.allclose(a[:, 0], a[:, 1])


def test_nested_sampling_contexts_rejected():
    layer = ConsistentMCDropout(0.5)
    with mc_sampling(layer, [0]):
        with pytest.raises(RuntimeError, match="nested"):
            with mc_sampling(layer, [1]):
                pass
    with pytest.raises(ValueError, match="exactly one"):
        with mc_sampling(layer, [0, 1], expand=False):
            pass


class _KeepsForward(nn.Dropout):
    """A subclass that only adds a name: nn.Dropout's forward."""


class _KeepsForward2d(nn.Dropout2d):
    pass


class _OwnForward(nn.Dropout):
    def forward(self, input):
        return super().forward(input) * 1.0


def test_converter_converts_subclasses_that_keep_forward_with_their_p():
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), _KeepsForward(0.3), nn.Linear(8, 4),
                        nn.Unflatten(1, (4, 1)), _KeepsForward2d(0.2), nn.Flatten(), nn.Linear(4, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left unconverted, so no warning
        converted = mc_dropout(net)
    assert type(converted[2]) is ConsistentMCDropout and converted[2].p == 0.3
    assert type(converted[5]) is ConsistentMCDropout2d and converted[5].p == 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # MC dropout layers: no "samples are identical" warning
        log_probs_N_K_C = predict_log_probs(converted, torch.randn(5, 6), 4, generator=0)
    assert not torch.allclose(log_probs_N_K_C[:, 0], log_probs_N_K_C[:, 1])


@pytest.mark.parametrize("layer", [_OwnForward(0.5), nn.AlphaDropout(0.5), nn.FeatureAlphaDropout(0.5)],
                         ids=lambda layer: type(layer).__name__)
def test_converter_warns_about_dropout_it_cannot_convert(layer):
    from activebayes.models.dropout import unconverted_dropout

    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), layer, nn.Linear(8, 3))
    with pytest.warns(UserWarning, match=rf"cannot convert 1 dropout layer\(s\): 2 \({type(layer).__name__}\);"
                                         r".*replace them by nn.Dropout") as record:
        converted = mc_dropout(net)
    assert "mc_dropout(model)" not in str(record[0].message)  # no advice that does nothing
    assert type(converted[2]) is type(layer)  # its own computation is kept, not silently replaced
    assert unconverted_dropout(converted) == [f"2 ({type(layer).__name__})"]
    assert unconverted_dropout(nn.Sequential(nn.Linear(2, 2), type(layer)(0.0))) == []  # p = 0: nothing to sample


def test_converter_warns_about_a_model_with_no_dropout_at_all():
    """mc_dropout on a network without dropout said nothing; its K samples were one function and
    BALD scored 0 everywhere, told only at predict time (if at all)."""
    with pytest.warns(UserWarning, match=r"^mc_dropout found no dropout layer in Sequential: its K samples are all "
                                         r"the same function, so BALD"):
        mc_dropout(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mc_dropout(nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.0), nn.Linear(8, 3)))  # a layer, if p = 0 for now
