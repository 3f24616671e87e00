"""A convolution under k channel masks at once (channel_masked_conv2d) and where it is used:
MCDropoutConv2d and the BatchBALD CNN's MC pass, the fast 2x2 max-pool, and the chunk plan
that must count the factorised rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models import (
    BatchBALDCNN,
    ConsistentMCDropout2d,
    MCDropoutConv2d,
    channel_masked_conv2d,
    mc_sampling,
    predict_log_probs,
    resample_masks,
)
from activebayes.models.dropout import FACTORISE_MIN_SAMPLES
from activebayes.models.networks import MaxPool2d
from activebayes.models.predict import CPU_MEMORY_BUDGET_MB, _plan_chunks


def _numpy_conv2d(x_C_H_W, w_O_C_h_w, b_O, stride, padding, dilation) -> np.ndarray:
    """Cross-correlation written out in float64 NumPy loops (zero padding)."""
    x = np.pad(x_C_H_W, ((0, 0), (padding, padding), (padding, padding)))
    O, C, kh, kw = w_O_C_h_w.shape
    H = (x.shape[1] - dilation * (kh - 1) - 1) // stride + 1
    W = (x.shape[2] - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((O, H, W))
    for i in range(H):
        for j in range(W):
            rows = i * stride + dilation * np.arange(kh)
            cols = j * stride + dilation * np.arange(kw)
            patch_C_h_w = x[:, rows][:, :, cols]
            out[:, i, j] = np.tensordot(w_O_C_h_w, patch_C_h_w, axes=([1, 2, 3], [0, 1, 2]))
    return out + (0.0 if b_O is None else b_O[:, None, None])


@pytest.mark.parametrize(
    "stride, padding, dilation, bias", [(1, 0, 1, True), (2, 1, 1, True), (1, 2, 2, False), (1, 1, 1, True)]
)
def test_channel_masked_conv2d_matches_a_float64_numpy_convolution_per_item_and_mask(stride, padding, dilation, bias):
    g = torch.Generator().manual_seed(0)
    n, C, O, k = 3, 4, 5, 6
    x = torch.randn(n, C, 9, 8, generator=g)
    w = torch.randn(O, C, 3, 3, generator=g)
    b = torch.randn(O, generator=g) if bias else None
    masks_k_C = (torch.rand(k, C, generator=g) > 0.4).float() / 0.6
    out = channel_masked_conv2d(x, masks_k_C, w, b, stride=stride, padding=padding, dilation=dilation)
    assert out.shape[0] == n * k
    x64, w64, m64 = x.double().numpy(), w.double().numpy(), masks_k_C.double().numpy()
    b64 = None if b is None else b.double().numpy()
    for i in range(n):
        for j in range(k):
            reference = _numpy_conv2d(x64[i] * m64[j][:, None, None], w64, b64, stride, padding, dilation)
            assert out[i * k + j].shape == reference.shape  # row i * k + j: item i, mask j
            np.testing.assert_allclose(out[i * k + j].double().numpy(), reference, rtol=0, atol=1e-4)


def test_channel_masked_conv2d_accepts_layer_shaped_masks_and_rejects_bad_shapes():
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    masks = torch.tensor([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]])
    flat = channel_masked_conv2d(x, masks, w)
    assert torch.equal(channel_masked_conv2d(x, masks.reshape(2, 3, 1, 1), w), flat)
    with pytest.raises(InvalidArgumentError, match=r"input_n_C_H_W must be \[n, C, H, W\]"):
        channel_masked_conv2d(x[0], masks, w)
    with pytest.raises(InvalidArgumentError, match=r"weight must be \[O, 3, kh, kw\]"):
        channel_masked_conv2d(x, masks, torch.randn(4, 2, 3, 3))
    with pytest.raises(InvalidArgumentError, match=r"masks_k_C must be \[k, 3\]"):
        channel_masked_conv2d(x, torch.ones(2, 4), w)


def test_mc_dropout_conv2d_factorises_from_enough_samples_and_matches_k_convolutions():
    torch.manual_seed(0)
    layer = MCDropoutConv2d(3, 8, 3, padding=1, p=0.5).eval()
    resample_masks(layer, generator=4)
    x = torch.randn(5, 3, 7, 7)
    for k in (FACTORISE_MIN_SAMPLES - 1, FACTORISE_MIN_SAMPLES, 2 * FACTORISE_MIN_SAMPLES):
        with torch.no_grad(), mc_sampling(layer, range(k)) as context:
            rows = layer(x)
        assert context.expanded and rows.shape == (5 * k, 8, 7, 7)
        masks_k_C = layer.dropout.masks(range(k), (3, 7, 7)).reshape(k, 3)
        with torch.no_grad():
            expected = layer.conv((x.unsqueeze(1) * masks_k_C.reshape(1, k, 3, 1, 1)).reshape(5 * k, 3, 7, 7))
        if k < FACTORISE_MIN_SAMPLES:  # the k convolutions themselves: the same numbers
            assert torch.equal(rows, expected)
        else:
            assert 0 < (rows - expected).abs().max() < 1e-5


def test_mc_dropout_conv2d_keeps_training_and_elementwise_dropout_unfactorised():
    torch.manual_seed(0)
    elementwise = MCDropoutConv2d(3, 4, 3, p=0.5, channelwise=False).eval()
    resample_masks(elementwise, generator=1)
    x = torch.randn(2, 3, 6, 6)
    k = 2 * FACTORISE_MIN_SAMPLES
    with torch.no_grad(), mc_sampling(elementwise, range(k)):
        rows = elementwise(x)
    masks = elementwise.dropout.masks(range(k), (3, 6, 6))
    expected = elementwise.conv((x.unsqueeze(1) * masks.unsqueeze(0)).reshape(2 * k, 3, 6, 6))
    assert torch.equal(rows, expected)
    channelwise = MCDropoutConv2d(3, 4, 3, p=0.5).train()
    torch.manual_seed(3)
    trained = channelwise(x)
    torch.manual_seed(3)
    assert torch.equal(trained, channelwise.conv(channelwise.dropout(x)))


def test_expansion_masks_only_for_the_first_expansion_with_enough_samples():
    layer = ConsistentMCDropout2d(0.5).eval()
    x = torch.randn(4, 3, 2, 2)
    assert layer.expansion_masks(x) is None  # outside a sampling context
    with mc_sampling(layer, range(5)) as context:
        context.start_forward(4)
        assert layer.expansion_masks(x, min_samples=6) is None and not context.expanded
        masks = layer.expansion_masks(x, min_samples=5)
        assert masks.shape == (5, 3, 1, 1) and context.expanded
        assert torch.equal(masks, layer.masks(range(5), (3, 2, 2)))
        assert layer.expansion_masks(x) is None  # already expanded
    with mc_sampling(layer, [0], expand=False) as context:
        context.start_forward(4)
        assert layer.expansion_masks(x) is None


@pytest.mark.parametrize("image_size", [28, 8])
def test_batchbald_cnn_mc_pass_matches_its_layers_one_after_another(image_size):
    torch.manual_seed(0)
    net = BatchBALDCNN(image_size=image_size)
    layers = nn.Sequential(*net.net)  # the same modules without the factorised forward
    x = torch.randn(9, 1, image_size, image_size)
    K = FACTORISE_MIN_SAMPLES + 4
    ours = predict_log_probs(net, x, K, generator=2)
    reference = predict_log_probs(layers, x, K)
    sequential = predict_log_probs(net, x, K, sampling="sequential")  # one sample at a time: unfactorised
    # the same masks and weights; the kernels chosen for a batch of 9 and of 9 * K may round
    # differently on some CPUs (4.8e-7 on an AVX-512 Xeon, bit-equal elsewhere)
    torch.testing.assert_close(sequential, reference, rtol=0.0, atol=2e-6)
    assert 0 < (ours - reference).abs().max() < 1e-5
    few = predict_log_probs(net, x, FACTORISE_MIN_SAMPLES - 1)  # below the threshold: the plain path
    assert torch.equal(few, reference[:, : FACTORISE_MIN_SAMPLES - 1])


class _FunctionalTail(nn.Module):
    """Expands at its dropout, then makes a wide tensor outside any module (like the factorised
    conv2) that only a module's *input* shows."""

    def __init__(self) -> None:
        super().__init__()
        self.drop = ConsistentMCDropout2d(0.5)
        self.head = nn.Linear(3 * 50, 2)

    def forward(self, x):
        return self.head(self.drop(x).repeat(1, 50))


def test_chunk_plan_counts_tensors_made_outside_modules():
    x_1 = torch.randn(1, 3)
    K, budget = 10, 2**20
    n_chunk, k_chunk = _plan_chunks(_FunctionalTail().eval(), x_1, K, batch_size=10_000, budget_bytes=budget,
                                    expand=True)
    wide_per_sample = 3 * 50 * 4  # the head's input; every module output is smaller
    assert k_chunk == K
    assert n_chunk == int(budget / 4 // (3 * 4 + K * wide_per_sample))


def test_chunk_plan_of_the_batchbald_cnn_bounds_its_factorised_rows():
    net = BatchBALDCNN().eval()
    K, budget = 100, 64 * 2**20
    n_chunk, k_chunk = _plan_chunks(net, torch.randn(1, 1, 28, 28), K, batch_size=10_000, budget_bytes=budget,
                                    expand=True)
    conv2_rows_per_item = K * 64 * 8 * 8 * 4  # channel_masked_conv2d's output for one item
    per_channel_per_item = 32 * 64 * 8 * 8 * 4  # its per-channel contributions
    assert k_chunk == K and n_chunk >= 1
    assert n_chunk * (conv2_rows_per_item + per_channel_per_item) <= budget / 2


def test_default_memory_budget_is_the_cpu_one_and_bad_budgets_are_named():
    torch.manual_seed(0)
    net = BatchBALDCNN()
    x = torch.randn(6, 1, 28, 28)
    default = predict_log_probs(net, x, 16, generator=0)
    assert torch.equal(default, predict_log_probs(net, x, 16, memory_budget_mb=CPU_MEMORY_BUDGET_MB))
    with pytest.raises(InvalidArgumentError, match="memory_budget_mb must be > 0, got 0"):
        predict_log_probs(net, x, 4, memory_budget_mb=0)
    with pytest.raises(InvalidTypeError, match="memory_budget_mb must be a number or None, got str"):
        predict_log_probs(net, x, 4, memory_budget_mb="128")


@pytest.mark.parametrize("shape", [(3, 4, 8, 8), (2, 5, 7, 9), (5, 6, 6)])
def test_fast_max_pool_equals_torch_pooling_and_trains_with_torch_pooling(shape):
    x = torch.randn(*shape)
    with torch.no_grad():
        assert torch.equal(MaxPool2d(2)(x), nn.MaxPool2d(2)(x))  # odd sizes: the last row / column dropped
        assert torch.equal(MaxPool2d(3, stride=1)(x), nn.MaxPool2d(3, stride=1)(x))  # other windows: torch's
    ties = torch.zeros(1, 1, 2, 2, requires_grad=True)  # torch's pooling sends the gradient to one tie
    MaxPool2d(2)(ties).sum().backward()
    assert ties.grad.sum() == 1 and ties.grad.max() == 1


def test_fast_max_pool_too_small_input_fails_like_torch():
    with torch.no_grad(), pytest.raises(RuntimeError):
        MaxPool2d(2)(torch.randn(1, 1, 1, 3))
