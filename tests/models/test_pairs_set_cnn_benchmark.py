"""benchmarks/pairs_set_cnn.py: the digit-pair network that reads both halves with one CNN."""

from __future__ import annotations

import torch

from activebayes.models.predict import predict_log_probs
from tests.conftest import ROOT


def _benchmark(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import pairs_set_cnn

    return pairs_set_cnn


def test_the_set_cnn_gives_a_pair_the_same_logits_in_either_order(monkeypatch):
    benchmark = _benchmark(monkeypatch)
    model = benchmark.set_cnn(torch.Generator().manual_seed(0)).eval()
    x_B_1_H_2W = torch.randn(5, 1, 28, 56, generator=torch.Generator().manual_seed(1))
    swapped_B_1_H_2W = torch.cat(x_B_1_H_2W.chunk(2, dim=-1)[::-1], dim=-1)
    with torch.no_grad():
        logits_B_C = model(x_B_1_H_2W)
        assert logits_B_C.shape == (5, 10)
        assert torch.allclose(logits_B_C, model(swapped_B_1_H_2W), atol=1e-6)
        # the halves are not simply averaged or added: a half alone differs from the pair
        left_only = torch.cat([x_B_1_H_2W[..., :28], torch.zeros_like(x_B_1_H_2W[..., 28:])], dim=-1)
        assert not torch.allclose(logits_B_C, model(left_only), atol=1e-3)


def test_the_set_cnn_samples_the_same_functions_batched_and_sequentially(monkeypatch):
    # the halves share the batch dimension only before the first MC dropout layer,
    # so the fast batched path is valid: it must equal K full forward passes
    benchmark = _benchmark(monkeypatch)
    model = benchmark.set_cnn(torch.Generator().manual_seed(0))
    x_N_1_H_2W = torch.randn(7, 1, 28, 56, generator=torch.Generator().manual_seed(2))
    batched = predict_log_probs(model, x_N_1_H_2W, 6, generator=3)
    sequential = predict_log_probs(model, x_N_1_H_2W, 6, generator=3, sampling="sequential")
    assert batched.shape == (7, 6, 10)
    assert torch.allclose(batched, sequential, atol=1e-5)
    assert (batched[:, 0] - batched[:, 1]).abs().max() > 1e-3  # the K samples differ


def test_the_set_cnn_is_seeded_by_the_loops_generator(monkeypatch):
    benchmark = _benchmark(monkeypatch)
    first = benchmark.set_cnn(torch.Generator().manual_seed(0))
    again = benchmark.set_cnn(torch.Generator().manual_seed(0))
    other = benchmark.set_cnn(torch.Generator().manual_seed(1))
    assert torch.equal(first.trunk[0].weight, again.trunk[0].weight)
    assert not torch.equal(first.trunk[0].weight, other.trunk[0].weight)
