"""The formulas of docs/concepts/posteriors.md against NumPy float64 references.

tests/models/test_laplace.py already checks the GGN (explicit Jacobians and autograd),
the K-FAC factors, the log marginal likelihood, the fitted prior precision, the logits'
covariance and, statistically, the weight samples' covariance. This module adds the exact
checks those leave out: the probit predictive's closed form, the square root the samples
are drawn with (R Rᵀ = Π⁻¹, full and Kronecker), the evidence's derivative in log δ, and
the heads' shared architecture written out in NumPy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from activebayes.models import LastLayerLaplace, build_posterior, probit_predictive
from activebayes.models.laplace import log_marginal_likelihood


def _laplace(structure: str, *, n: int = 30, d: int = 3, c: int = 3, seed: int = 0, prior_precision=None):
    """A last-layer Laplace on identity features, its posterior fitted at its (untrained) weights."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    y = torch.randint(0, c, (n,), generator=g)
    torch.manual_seed(seed)
    model = LastLayerLaplace(nn.Identity(), feature_dim=d, num_classes=c, structure=structure,
                             prior_precision=prior_precision)
    with torch.no_grad():
        model.last.weight.mul_(3.0)  # confident enough that the classes' Λ_i differ
    model.fit_posterior(x, y)
    return model, x, y


def _np_precision(model: LastLayerLaplace, x: torch.Tensor) -> np.ndarray:
    """Π = H + δI: H = Σ_i Λ_i ⊗ φ̃_i φ̃_iᵀ (full) or (Σ_i Λ_i) ⊗ (1/N Σ_i φ̃_i φ̃_iᵀ) (kron), Λ = diag(p) - p pᵀ."""
    e = np.hstack([x.double().numpy(), np.ones((len(x), 1))])
    theta = model.theta_map_C_E.numpy()
    logits = e @ theta.T
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    lam = np.stack([np.diag(q) - np.outer(q, q) for q in p])
    if model.structure == "full":
        H = sum(np.kron(lam[i], np.outer(e[i], e[i])) for i in range(len(e)))
    else:
        H = np.kron(lam.sum(0), e.T @ e / len(e))
    return H + float(model.prior_precision) * np.eye(H.shape[0])


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_probit_predictive_is_its_closed_form(structure):
    """p(y|x) ≈ softmax(μ_c / sqrt(1 + π/8 Σ_f,cc)), μ = J θ*, Σ_f = J Π⁻¹ Jᵀ, J = I_C ⊗ φ̃ᵀ."""
    model, x, _ = _laplace(structure)
    covariance = np.linalg.inv(_np_precision(model, x))
    C = model.theta_map_C_E.shape[0]
    expected = []
    for row in x[:8].double().numpy():
        J = np.kron(np.eye(C), np.append(row, 1.0)[None, :])
        mu = J @ model.theta_map_C_E.numpy().reshape(-1)
        scaled = mu / np.sqrt(1.0 + math.pi / 8.0 * np.diag(J @ covariance @ J.T))
        expected.append(np.exp(scaled - scaled.max()) / np.exp(scaled - scaled.max()).sum())
    np.testing.assert_allclose(probit_predictive(model, x[:8]).numpy(), np.array(expected), rtol=0, atol=1e-6)


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_weight_samples_use_a_square_root_of_the_posterior_covariance(structure):
    """θ_k = θ* + R z_k with R Rᵀ = Π⁻¹ exactly (not only up to Monte Carlo error): R's columns
    are what the sampler makes of the unit vectors z = e_j."""
    model, x, _ = _laplace(structure, d=2, c=3)
    C, E = model.theta_map_C_E.shape
    R = model._scale_times(torch.eye(C * E, dtype=torch.float64)).reshape(C * E, C * E).T.numpy()
    np.testing.assert_allclose(R @ R.T, np.linalg.inv(_np_precision(model, x)), rtol=1e-9, atol=1e-12)
    # and the samples are θ* plus a standard normal pushed through that R: their offsets solve R z = θ_k - θ*
    offsets = (model.weight_samples(5, range(400)) - model.theta_map_C_E).reshape(400, -1).numpy()
    z = np.linalg.solve(R, offsets.T).T
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1.0) < 0.05


def test_the_evidence_derivative_in_log_delta_is_half_the_effective_parameters_minus_delta_norm():
    """d log p(D|δ) / d log δ = ½ (Σ_j s_j / (s_j + δ) - δ ||θ*||²): central differences of
    log_marginal_likelihood at several δ, and the root of it is where the evidence peaks."""
    s = torch.tensor([0.0, 0.3, 2.0, 15.0, 120.0], dtype=torch.float64)
    norm_sq = 1.7
    for delta in (0.05, 0.4, 3.0, 20.0):
        h = 1e-5
        up = float(log_marginal_likelihood(-10.0, norm_sq, s, delta * math.exp(h)))
        down = float(log_marginal_likelihood(-10.0, norm_sq, s, delta * math.exp(-h)))
        formula = 0.5 * (float((s / (s + delta)).sum()) - delta * norm_sq)
        assert (up - down) / (2 * h) == pytest.approx(formula, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
def test_heads_are_layer_norm_linear_relu_linear(name):
    """posteriors.md: every head is LayerNorm (no affine) -> Linear(D, 128) -> ReLU -> Linear(128, C),
    written out in NumPy with the head's own weights (eval mode: dropout off; an ensemble's members)."""
    D, C = 6, 4
    posterior = build_posterior(name, encoder=nn.Identity(), num_classes=C, feature_dim=D)
    module = posterior.module.eval()
    members = list(module.members) if hasattr(module, "members") else [module]
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(3))
    xn = x.double().numpy()
    normed = (xn - xn.mean(1, keepdims=True)) / np.sqrt(xn.var(1, keepdims=True) + 1e-5)
    for member in members:
        linears = [m for m in member.modules() if isinstance(m, nn.Linear)]
        assert [(m.in_features, m.out_features) for m in linears] == [(D, 128), (128, C)]
        assert not any(isinstance(m, nn.LayerNorm) and m.elementwise_affine for m in member.modules())
        w1, b1, w2, b2 = (t.detach().double().numpy() for t in (linears[0].weight, linears[0].bias,
                                                                 linears[1].weight, linears[1].bias))
        expected = np.maximum(normed @ w1.T + b1, 0.0) @ w2.T + b2
        with torch.no_grad():
            got = member(x).double().numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
