"""The posterior predictive (``metrics.predictive``): against a NumPy float64 reference, and
its one home (no other module averages K samples' log-probabilities by hand)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from activebayes.metrics import predictive_log_probs, predictive_probs
from activebayes.metrics.predictive import log_mean_exp

SRC = Path(__file__).resolve().parents[2] / "src" / "activebayes"


def _reference(log_probs_N_K_C: np.ndarray) -> np.ndarray:
    """``log(mean_k exp(x))`` in float64 with the max taken out first."""
    top = log_probs_N_K_C.max(axis=1, keepdims=True)
    return (np.log(np.exp(log_probs_N_K_C - top).mean(axis=1, keepdims=True)) + top)[:, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_the_float64_reference(dtype):
    g = torch.Generator().manual_seed(0)
    log_probs_N_K_C = torch.randn(30, 7, 5, generator=g, dtype=torch.float64).mul(3).log_softmax(-1)
    got = predictive_log_probs(log_probs_N_K_C.to(dtype))
    assert got.shape == (30, 5) and got.dtype == dtype
    np.testing.assert_allclose(got.double().numpy(), _reference(log_probs_N_K_C.numpy()),
                               rtol=1e-6 if dtype == torch.float32 else 1e-12, atol=1e-6 if dtype == torch.float32 else 0)
    probs = predictive_probs(log_probs_N_K_C)
    np.testing.assert_allclose(probs.numpy(), np.exp(log_probs_N_K_C.numpy()).mean(axis=1), rtol=1e-12)
    np.testing.assert_allclose(probs.sum(-1).numpy(), 1.0, rtol=1e-12)


def test_dtype_computes_in_float64():
    log_probs_N_K_C = torch.tensor([[[0.9, 0.1], [0.5, 0.5]]]).log()
    got = predictive_probs(log_probs_N_K_C, dtype=torch.float64)
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), [[0.7, 0.3]], rtol=1e-7)


def test_tiny_probabilities_do_not_underflow():
    """Log-probabilities of -1000 (exp underflows to 0 even in float64) average to -1000 + log(mean)."""
    log_probs_N_K_C = torch.tensor([[[-1000.0, 0.0], [-1002.0, 0.0]]], dtype=torch.float64)
    got = predictive_log_probs(log_probs_N_K_C)
    assert torch.isfinite(got).all()
    assert float(got[0, 0]) == pytest.approx(-1000 + np.log((1 + np.exp(-2)) / 2), abs=1e-9)


def test_log_mean_exp_over_any_dimension():
    x = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    np.testing.assert_allclose(log_mean_exp(x, dim=2).numpy(), np.log(np.exp(x.numpy()).mean(axis=2)), rtol=1e-12)


def test_the_predictive_has_one_home():
    """``logsumexp(...) - log(K)`` written anywhere else is a second copy of the predictive."""
    pattern = re.compile(r"logsumexp\([^\n]*\)\s*-\s*math\.log\(")
    copies = [str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
              if path.name != "predictive.py" and pattern.search(path.read_text(encoding="utf-8"))]
    assert not copies, f"the predictive average written by hand in {copies}: use activebayes.metrics.predictive"


def _log_probs() -> torch.Tensor:
    return torch.randn(6, 4, 3, generator=torch.Generator().manual_seed(2)).log_softmax(-1)


@pytest.mark.parametrize(("make", "error", "message"), [
    # each of these returned a tensor: probabilities above 1, a [N] row of -log C, NaN, integer-truncated values
    (lambda lp: lp.exp(), ValueError, r"^log_probs_N_K_C must hold log-probabilities \(<= 0\), got a maximum of "),
    (lambda lp: lp[:, 0], ValueError, r"^log_probs_N_K_C must have 3 dimensions \[N, K, C\] .*got shape \(6, 3\)$"),
    (lambda lp: lp.masked_fill(lp < -2, float("nan")), ValueError, r"^log_probs_N_K_C contains \d+ NaN or \+inf"),
    (lambda lp: lp[:0], ValueError, r"^log_probs_N_K_C is empty"),
    (lambda lp: lp.long(), TypeError, r"^log_probs_N_K_C must be a floating point tensor, got dtype torch.int64$"),
    (lambda lp: lp.numpy(), TypeError, r"^log_probs_N_K_C must be a torch.Tensor, got ndarray"),
])
@pytest.mark.parametrize("function", [predictive_log_probs, predictive_probs])
def test_the_predictive_names_what_is_not_log_probabilities(function, make, error, message):
    with pytest.raises(error, match=message):
        function(make(_log_probs()))


def test_the_predictive_takes_per_label_log_probabilities_and_a_floating_dtype_only():
    per_label = torch.nn.functional.logsigmoid(torch.randn(5, 3, 4, generator=torch.Generator().manual_seed(0)))
    np.testing.assert_allclose(predictive_probs(per_label).numpy(), per_label.exp().mean(1).numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match=r"^dtype must be a floating point torch.dtype \(e.g. torch.float64\), got "
                                        r"torch.int64$"):
        predictive_log_probs(_log_probs(), dtype=torch.int64)
