"""Last-layer Laplace: the GGN, the marginal likelihood, the prior precision, samples and the probit.

References are independent NumPy float64 computations (explicit Jacobians, slogdet of
the full posterior precision, a grid search) or torch autograd Hessians.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models import (
    MLP,
    FeaturesUnavailableError,
    LastLayerLaplace,
    Posterior,
    as_posterior,
    build_posterior,
    last_layer_laplace,
    predict_log_probs,
    probit_predictive,
)
from activebayes.models.laplace import (
    NotFittedError,
    fit_prior_precision,
    function_covariance,
    ggn_full,
    ggn_kron_factors,
    log_marginal_likelihood,
)
from activebayes.scoring import score_pool


def _problem(n=24, d=3, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    w = torch.randn(c, d, generator=g, dtype=torch.float64)
    y = torch.multinomial(F.softmax(x @ w.T, dim=1), 1, generator=g).reshape(-1)
    return x, y


def _np_ggn(phi, probs):
    """sum_i J_i^T Lambda_i J_i with the explicit Jacobian J_i = I_C kron phi~_i^T."""
    n, d = phi.shape
    c = probs.shape[1]
    H = np.zeros((c * (d + 1), c * (d + 1)))
    for i in range(n):
        e = np.append(phi[i], 1.0)
        J = np.kron(np.eye(c), e[None, :])
        lam = np.diag(probs[i]) - np.outer(probs[i], probs[i])
        H += J.T @ lam @ J
    return H


def _np_log_ml(phi, y, theta, H, delta):
    """log p(D|theta) + log N(theta; 0, I/delta) + P/2 log 2 pi - 1/2 log det(H + delta I)."""
    e = np.hstack([phi, np.ones((phi.shape[0], 1))])
    logits = e @ theta.T
    logits = logits - logits.max(1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    loglik = log_probs[np.arange(len(y)), y].sum()
    P = theta.size
    log_prior = 0.5 * P * np.log(delta / (2 * np.pi)) - 0.5 * delta * (theta**2).sum()
    _, logdet = np.linalg.slogdet(H + delta * np.eye(P))
    return loglik + log_prior + 0.5 * P * np.log(2 * np.pi) - 0.5 * logdet


def _fitted(structure="full", prior_precision=None, n=24, d=3, c=3, seed=0, train=True):
    x, y = _problem(n, d, c, seed)
    torch.manual_seed(seed)
    model = LastLayerLaplace(nn.Identity(), feature_dim=d, num_classes=c, structure=structure,
                             prior_precision=prior_precision)
    if train:
        build_posterior("mc_dropout", encoder=nn.Identity(), num_classes=c, feature_dim=d)  # imports work
        from activebayes.models import fit

        fit(model, (x.float(), y), max_epochs=3, generator=0)
    summary = model.fit_posterior(x.float(), y)
    return model, x.float(), y, summary


@pytest.mark.parametrize("n", [24, 150])  # 150: accumulated over several chunks of items
def test_full_ggn_matches_explicit_jacobians_and_the_autograd_hessian(n):
    x, y = _problem(n)
    theta = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    e = torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], 1)
    probs = F.softmax(e @ theta.T, dim=1)
    H = ggn_full(x, probs)
    np.testing.assert_allclose(H.numpy(), _np_ggn(x.numpy(), probs.numpy()), rtol=1e-10, atol=1e-12)
    # for a softmax output layer the GGN is the exact Hessian of the summed cross-entropy
    hessian = torch.autograd.functional.hessian(
        lambda t: F.cross_entropy(e @ t.reshape(3, 4).T, y, reduction="sum"), theta.reshape(-1))
    np.testing.assert_allclose(H.numpy(), hessian.numpy(), rtol=1e-9, atol=1e-10)


def test_kron_factors_match_numpy_and_are_exact_when_every_item_has_the_same_probabilities():
    x, _ = _problem()
    probs = F.softmax(torch.randn(len(x), 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2)), 1)
    G, A = ggn_kron_factors(x, probs)
    lam = np.stack([np.diag(p) - np.outer(p, p) for p in probs.numpy()])
    e = np.hstack([x.numpy(), np.ones((len(x), 1))])
    np.testing.assert_allclose(G.numpy(), lam.sum(0), rtol=1e-12)
    np.testing.assert_allclose(A.numpy(), e.T @ e / len(x), rtol=1e-12)
    same = torch.full((len(x), 3), 1 / 3, dtype=torch.float64)
    G, A = ggn_kron_factors(x, same)
    np.testing.assert_allclose(np.kron(G.numpy(), A.numpy()), _np_ggn(x.numpy(), same.numpy()), atol=1e-10)
    # with different probabilities K-FAC is an approximation: not equal
    G, A = ggn_kron_factors(x, probs)
    assert np.abs(np.kron(G.numpy(), A.numpy()) - _np_ggn(x.numpy(), probs.numpy())).max() > 1e-3


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_log_marginal_likelihood_matches_a_float64_numpy_reference(structure):
    model, x, y, summary = _fitted(structure)
    theta = model.theta_map_C_E.numpy()
    e = np.hstack([x.double().numpy(), np.ones((len(x), 1))])
    probs = F.softmax(torch.from_numpy(e @ theta.T), 1).numpy()
    if structure == "full":
        H = _np_ggn(x.double().numpy(), probs)
    else:
        lam = np.stack([np.diag(p) - np.outer(p, p) for p in probs]).sum(0)
        H = np.kron(lam, e.T @ e / len(x))
    log_lik = float(F.log_softmax(torch.from_numpy(e @ theta.T), 1)[torch.arange(len(y)), y].sum())
    for delta in (0.01, 0.3, 1.0, 7.0):
        ours = float(log_marginal_likelihood(log_lik, float((theta**2).sum()), model.eigenvalues(), delta))
        assert ours == pytest.approx(_np_log_ml(x.double().numpy(), y.numpy(), theta, H, delta), rel=1e-9)
    fitted = summary["laplace_prior_precision"]
    assert summary["laplace_log_marginal_likelihood"] == pytest.approx(
        _np_log_ml(x.double().numpy(), y.numpy(), theta, H, fitted), rel=1e-9)


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_fitted_prior_precision_maximises_the_marginal_likelihood_on_a_grid(structure):
    model, x, y, summary = _fitted(structure)
    theta = model.theta_map_C_E.numpy()
    e = np.hstack([x.double().numpy(), np.ones((len(x), 1))])
    probs = F.softmax(torch.from_numpy(e @ theta.T), 1).numpy()
    H = (_np_ggn(x.double().numpy(), probs) if structure == "full"
         else np.kron(np.stack([np.diag(p) - np.outer(p, p) for p in probs]).sum(0), e.T @ e / len(x)))
    grid = np.exp(np.linspace(np.log(1e-4), np.log(1e4), 801))
    values = np.array([_np_log_ml(x.double().numpy(), y.numpy(), theta, H, d) for d in grid])
    fitted = summary["laplace_prior_precision"]
    best = grid[values.argmax()]
    assert 1e-4 < best < 1e4  # an interior maximum
    assert _np_log_ml(x.double().numpy(), y.numpy(), theta, H, fitted) >= values.max() - 1e-9
    assert abs(math.log(fitted) - math.log(best)) <= np.log(grid[1] / grid[0]) + 1e-9


def test_fit_prior_precision_solves_the_effective_parameter_equation():
    s = torch.tensor([0.0, 0.5, 3.0, 40.0], dtype=torch.float64)
    delta = fit_prior_precision(2.5, s)
    assert float((s / (s + delta)).sum()) == pytest.approx(delta * 2.5, rel=1e-9)
    assert fit_prior_precision(0.0, s) == pytest.approx(math.exp(18))  # no weights: the prior wins


def test_a_fixed_prior_precision_is_kept():
    _, _, _, summary = _fitted("full", prior_precision=2.0)
    assert summary["laplace_prior_precision"] == 2.0


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_weight_samples_have_the_posterior_covariance(structure):
    model, x, y, _ = _fitted(structure, d=2, c=2)
    delta = float(model.prior_precision)
    if structure == "full":
        precision = _np_ggn(x.double().numpy(), F.softmax(
            torch.from_numpy(np.hstack([x.double().numpy(), np.ones((len(x), 1))]) @ model.theta_map_C_E.numpy().T),
            1).numpy()) + delta * np.eye(6)
    else:
        precision = np.kron(model.g_vectors_C_C.numpy() @ np.diag(model.g_values_C.numpy()) @ model.g_vectors_C_C.numpy().T,
                            model.a_vectors_E_E.numpy() @ np.diag(model.a_values_E.numpy()) @ model.a_vectors_E_E.numpy().T)
        precision += delta * np.eye(6)
    samples = model.weight_samples(11, range(20000)).reshape(20000, -1).numpy()
    np.testing.assert_allclose(samples.mean(0), model.theta_map_C_E.numpy().reshape(-1),
                               atol=4 * np.sqrt(np.diag(np.linalg.inv(precision))).max() / np.sqrt(20000))
    covariance = np.cov(samples.T)
    reference = np.linalg.inv(precision)
    scale = np.sqrt(np.outer(np.diag(reference), np.diag(reference)))
    assert np.abs(covariance - reference).max() / scale.max() < 0.05


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_function_covariance_matches_numpy(structure):
    model, x, _, _ = _fitted(structure)
    C, E = model.theta_map_C_E.shape
    if structure == "full":
        V, s = model.eigenvectors_P_P.numpy(), model.eigenvalues_P.numpy()
    else:
        V = np.kron(model.g_vectors_C_C.numpy(), model.a_vectors_E_E.numpy())
        s = np.outer(model.g_values_C.numpy(), model.a_values_E.numpy()).reshape(-1)
    sigma = V @ np.diag(1 / (s + float(model.prior_precision))) @ V.T
    got = function_covariance(model, x[:5]).numpy()
    for i in range(5):
        J = np.kron(np.eye(C), np.append(x[i].double().numpy(), 1.0)[None, :])
        np.testing.assert_allclose(got[i], J @ sigma @ J.T, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("structure", ["full", "kron"])
def test_sample_k_is_one_function_whatever_the_chunking_order_or_process(structure):
    model, _, _, _ = _fitted(structure, n=30, d=5, c=4)
    pool = torch.randn(57, 5, generator=torch.Generator().manual_seed(5))
    K = 12
    reference = predict_log_probs(model, pool, K, generator=torch.Generator().manual_seed(3), batch_size=64)
    perm = torch.randperm(57, generator=torch.Generator().manual_seed(4))
    for batch_size in (1, 7, 57):
        # held functions (generator None), other chunks and orders
        got = predict_log_probs(model, pool[perm], K, batch_size=batch_size)
        torch.testing.assert_close(got, reference[perm], rtol=0, atol=1e-6)
        # a fresh draw from the same seed gives the same functions
        again = predict_log_probs(model, pool, K, generator=torch.Generator().manual_seed(3), batch_size=batch_size)
        torch.testing.assert_close(again, reference, rtol=0, atol=1e-6)
    worker = pickle.loads(pickle.dumps(model))  # what a Ray worker receives
    torch.testing.assert_close(predict_log_probs(worker, pool, K, batch_size=5), reference, rtol=0, atol=1e-6)
    # the first k functions of a larger draw are the same functions
    more = predict_log_probs(model, pool, 2 * K, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(more[:, :K], reference, rtol=0, atol=1e-6)
    other = predict_log_probs(model, pool, K, generator=torch.Generator().manual_seed(4))
    assert (other - reference).abs().max() > 1e-3
    assert (reference[:, 0] - reference[:, 1]).abs().max() > 1e-3  # the K functions differ


def test_score_pool_draws_the_functions_once_for_every_chunk():
    model, _, _, _ = _fitted("full", n=30, d=5, c=4)
    pool = torch.randn(80, 5, generator=torch.Generator().manual_seed(5))
    candidates = torch.arange(80)
    picks = [score_pool(model, pool, candidates, "bald", 10, num_samples=16, mask_generator=7, selection_seed=0,
                        chunk_size=chunk).indices.tolist() for chunk in (9, 80)]
    assert picks[0] == picks[1]
    from activebayes.acquisition import select

    log_probs = predict_log_probs(model, pool, 16, generator=7)
    assert picks[0] == select(log_probs, "bald", 10).indices.tolist()


def test_probit_predictive_agrees_with_the_sampled_predictive():
    model, x, _, _ = _fitted("full", n=12, d=3, c=3, train=False)  # few items: a wide posterior
    assert float(model.prior_precision) < 10
    probit = probit_predictive(model, x)
    sampled = predict_log_probs(model, x, 4000, generator=0).exp().mean(1)
    map_probs = F.softmax(model(x), -1).detach()
    assert (probit - sampled).abs().max() < 0.05
    # the posterior matters: both move away from the MAP by more than they differ from each other
    assert (sampled - map_probs).abs().max() > 2 * (probit - sampled).abs().max()
    torch.testing.assert_close(probit.sum(1), torch.ones(len(x)))
    # an (almost) point-mass posterior: probit and samples are the MAP softmax
    sharp, _, _, _ = _fitted("full", prior_precision=1e9, n=12, d=3, c=3, train=False)
    map_sharp = F.softmax(sharp(x), -1).detach()
    torch.testing.assert_close(probit_predictive(sharp, x), map_sharp, atol=1e-4, rtol=0)
    torch.testing.assert_close(predict_log_probs(sharp, x, 5, generator=0).exp(),
                               map_sharp.unsqueeze(1).expand(-1, 5, -1), atol=1e-4, rtol=0)


def test_bad_use_gives_one_line_errors():
    model = LastLayerLaplace(nn.Identity(), feature_dim=3, num_classes=2)
    with pytest.raises(NotFittedError, match="fit_posterior"):
        model.draw_functions(4, torch.Generator())
    with pytest.raises(NotFittedError, match="fit_posterior"):
        predict_log_probs(model, torch.randn(4, 3), 4, generator=0)
    model.fit_posterior(torch.randn(10, 3), torch.randint(0, 2, (10,)))
    with pytest.raises(InvalidArgumentError, match="num_samples is required"):
        predict_log_probs(model, torch.randn(4, 3), None, generator=0)
    predict_log_probs(model, torch.randn(4, 3), 4, generator=0)
    with pytest.raises(InvalidArgumentError, match="holds 4 drawn functions"):
        predict_log_probs(model, torch.randn(4, 3), 6)
    with pytest.raises(InvalidArgumentError, match="targets must have one label per input"):
        model.fit_posterior(torch.randn(10, 3), torch.randint(0, 2, (9,)))
    with pytest.raises(InvalidArgumentError, match="structure"):
        LastLayerLaplace(nn.Identity(), feature_dim=3, num_classes=2, structure="diag")
    with pytest.raises(InvalidArgumentError, match="prior_precision"):
        LastLayerLaplace(nn.Identity(), feature_dim=3, num_classes=2, prior_precision=0.0)
    with pytest.raises(InvalidArgumentError, match="feature_dim=3"):
        LastLayerLaplace(nn.Linear(3, 5), feature_dim=3, num_classes=2)(torch.randn(2, 3))


def test_state_dict_restores_the_posterior():
    model, x, _, _ = _fitted("kron")
    copy = LastLayerLaplace(nn.Identity(), feature_dim=3, num_classes=3, structure="kron")
    copy.load_state_dict(model.state_dict())
    torch.testing.assert_close(predict_log_probs(copy, x, 6, generator=2), predict_log_probs(model, x, 6, generator=2))


def test_auto_structure_switches_to_kron_for_large_layers():
    assert LastLayerLaplace(nn.Identity(), feature_dim=9, num_classes=3).structure == "full"
    assert LastLayerLaplace(nn.Identity(), feature_dim=300, num_classes=10).structure == "kron"
    assert LastLayerLaplace(nn.Identity(), feature_dim=9, num_classes=3, max_full_parameters=10).structure == "kron"


def test_last_layer_laplace_splits_a_network_at_its_last_linear():
    torch.manual_seed(0)
    net = MLP(in_features=6, num_classes=3, hidden=(8,))
    model = last_layer_laplace(net, input_shape=(6,))
    x = torch.randn(5, 6)
    net.eval(), model.eval()
    torch.testing.assert_close(model(x), net(x))
    assert model.feature_dim == 8 and model.num_classes == 3
    with pytest.raises(InvalidArgumentError, match="does more after its last nn.Linear"):
        last_layer_laplace(nn.Sequential(nn.Linear(6, 3), nn.Tanh()), input_shape=(6,))


@pytest.mark.parametrize("tail", [nn.LogSoftmax(-1), nn.ReLU(), nn.Tanh()])
def test_a_network_doing_more_after_its_last_linear_is_refused_without_input_shape(tail):
    """Without input_shape the split is checked on the first inputs: fit (its first batch) and a forward
    refuse a network whose last nn.Linear is followed by another op (ReLU: the hidden features are
    non-negative, so only comparing with the whole network catches it)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3), tail)
    x, y = torch.randn(20, 6), torch.randint(0, 3, (20,))
    post = build_posterior("laplace", network=net, num_classes=3)
    with pytest.raises(InvalidArgumentError, match=r"does more after its last nn.Linear \(2\)"):
        post.fit((x, y), generator=0)
    with pytest.raises(InvalidArgumentError, match="does more after its last nn.Linear"):
        post.module(x)


def test_a_network_ending_in_its_last_linear_is_checked_once_and_keeps_its_modes():
    torch.manual_seed(0)
    net = MLP(in_features=6, num_classes=3, hidden=(8,))  # MC dropout layers: the check runs in eval mode
    x, y = torch.randn(20, 6), torch.randint(0, 3, (20,))
    post = build_posterior("laplace", network=net, num_classes=3, fit_options={"max_epochs": 2})
    post.module.train()
    flags = [m.training for m in post.module.modules()]
    net.eval()
    torch.testing.assert_close(post.module.eval()(x), net(x))
    post.module.train()
    assert [m.training for m in post.module.modules()] == flags
    post.fit((x, y), generator=0)
    assert post.log_probs(x, num_samples=4, generator=0).shape == (20, 4, 3)


def test_laplace_on_a_network_keeps_the_dtype_and_device_of_its_last_linear():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).double()
    x, y = torch.randn(20, 6, dtype=torch.float64), torch.randint(0, 3, (20,))
    post = build_posterior("laplace", network=net, num_classes=3, input_shape=(6,))  # the probe is float64 too
    assert post.module.last.weight.dtype == torch.float64
    torch.testing.assert_close(post.module.eval()(x), net(x))
    post.fit((x, y), generator=0)
    log_probs = post.log_probs(x, num_samples=4, generator=0)
    assert log_probs.shape == (20, 4, 3) and bool(torch.isfinite(log_probs).all())
    assert probit_predictive(post.module, x).shape == (20, 3)
    on_meta = last_layer_laplace(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)).to("meta"))
    assert on_meta.last.weight.device.type == "meta"
    assert {buffer.device.type for buffer in on_meta.buffers()} == {"meta"}


def test_a_wrong_input_shape_for_the_probe_names_input_shape():
    net = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    with pytest.raises(InvalidArgumentError, match=r"input_shape=\(7,\) does not fit the network"):
        build_posterior("laplace", network=net, num_classes=3, input_shape=(7,))
    with pytest.raises(InvalidArgumentError, match=r"input_shape=\(7,\) does not fit the encoder"):
        build_posterior("laplace", encoder=nn.Linear(6, 4), num_classes=3, input_shape=(7,))


def test_a_misspelt_head_option_names_the_close_match():
    with pytest.raises(InvalidArgumentError, match=r"unknown laplace head option 'structre' \(did you mean 'structure'"):
        build_posterior("laplace", encoder=nn.Identity(), num_classes=3, feature_dim=4, structre="kron")
    with pytest.raises(InvalidArgumentError, match="did you mean 'p_features'"):
        build_posterior("mc_dropout", encoder=nn.Identity(), num_classes=3, feature_dim=4, p_feature=0.1)
    with pytest.raises(InvalidArgumentError, match=r"unknown laplace option 'structre' \(did you mean 'structure'"):
        build_posterior("laplace", network=nn.Sequential(nn.Linear(4, 3)), num_classes=3, structre="kron")
    with pytest.raises(InvalidArgumentError, match="unknown laplace option 'priorprecision'"):
        last_layer_laplace(nn.Sequential(nn.Linear(4, 3)), priorprecision=1.0)
    head = build_posterior("laplace", encoder=nn.Identity(), num_classes=3, feature_dim=4, structure="kron").module
    assert head.structure == "kron"


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
@pytest.mark.parametrize(("num_classes", "error"), [(0, InvalidArgumentError), (-1, InvalidArgumentError),
                                                    (2.5, InvalidTypeError), ("3", InvalidTypeError)])
def test_every_head_checks_num_classes(name, num_classes, error):
    with pytest.raises(error, match="num_classes must be"):
        build_posterior(name, encoder=nn.Identity(), num_classes=num_classes, feature_dim=4)


@pytest.mark.parametrize("name", ["mc_dropout", "ensemble", "laplace"])
def test_build_posterior_gives_posteriors_that_fit_and_predict(name):
    x, y = _problem(40, 4, 3, seed=3)
    x = x.float()
    post = build_posterior(name, encoder=nn.Identity(), num_classes=3, feature_dim=4, hidden=16, ensemble_size=3,
                           generator=0, fit_options={"max_epochs": 2})
    assert isinstance(post, Posterior)
    summary = post.fit((x, y), generator=0)
    assert ("laplace_prior_precision" in summary) == (name == "laplace")
    K = 3 if name == "ensemble" else 5
    log_probs = post.log_probs(x, num_samples=None if name == "ensemble" else K, generator=torch.Generator().manual_seed(1))
    assert log_probs.shape == (40, K, 3)
    torch.testing.assert_close(log_probs.logsumexp(-1), torch.zeros(40, K), atol=1e-5, rtol=0)
    assert post.features(x).shape == (40, 16)
    with pytest.raises(InvalidArgumentError, match="posterior"):
        build_posterior("swag", encoder=nn.Identity(), num_classes=3, feature_dim=4)
    with pytest.raises(InvalidArgumentError, match="exactly one of encoder"):
        build_posterior(name, num_classes=3)


def test_build_posterior_on_a_whole_network():
    torch.manual_seed(0)
    net = MLP(in_features=4, num_classes=3, hidden=(8,))
    assert build_posterior("mc_dropout", network=net, num_classes=3).module is net
    ensemble = build_posterior("ensemble", network=net, num_classes=3, ensemble_size=3, generator=0).module
    weights = [m.net[1].weight for m in ensemble.members]
    assert len(weights) == 3 and not torch.equal(weights[0], weights[1])  # re-initialised, seeded
    again = build_posterior("ensemble", network=net, num_classes=3, ensemble_size=3, generator=0).module
    assert torch.equal(again.members[2].net[1].weight, weights[2])
    laplace = build_posterior("laplace", network=net, num_classes=3, input_shape=(4,)).module
    assert isinstance(laplace, LastLayerLaplace) and laplace.feature_dim == 8


def test_a_network_with_another_number_of_outputs_than_num_classes_is_refused():
    """num_classes=5 on a 3-output network was accepted and gave log_probs [N, K, 3]."""
    net = MLP(in_features=4, num_classes=3, hidden=(8,))
    with pytest.raises(InvalidArgumentError, match=r"^num_classes=5 was given, but the network \(its last nn.Linear, "
                                                   r"net.4\) returns logits for 3 classes: pass num_classes=3, or "
                                                   r"give the network's last layer 5 outputs$"):
        build_posterior("laplace", network=net, num_classes=5)
    x = torch.randn(6, 4)
    for name in ("ensemble", "mc_dropout"):
        post = build_posterior(name, network=net, num_classes=5, ensemble_size=2, generator=0)
        with pytest.raises(InvalidArgumentError, match=r"^num_classes=5 was given, but the network returns logits "
                                                       r"for 3 classes: pass num_classes=3"):
            post.log_probs(x, num_samples=2, generator=0)
        assert build_posterior(name, network=net, num_classes=3, ensemble_size=2).log_probs(
            x, num_samples=2, generator=0).shape == (6, 2, 3)


@pytest.mark.parametrize(("structure", "prior_precision"), [("full", None), ("kron", 4.0)])
def test_with_no_labels_the_posterior_is_the_prior_around_the_current_weights(structure, prior_precision):
    """A labelling project's first round has no labels: the samples are N(theta, 1/delta I), delta
    the fixed prior precision or 1, whatever an earlier fit left behind."""
    model, _, _, _ = _fitted(structure, prior_precision=prior_precision, d=2, c=2)
    summary = model.use_prior()
    delta = 1.0 if prior_precision is None else prior_precision
    assert summary["laplace_prior_precision"] == delta and float(model.prior_precision) == delta
    theta = torch.cat([model.last.weight, model.last.bias.unsqueeze(1)], 1).detach().double().numpy().reshape(-1)
    samples = model.weight_samples(3, range(20000)).reshape(20000, -1).numpy()
    np.testing.assert_allclose(samples.mean(0), theta, atol=4 / np.sqrt(delta * 20000))
    np.testing.assert_allclose(np.cov(samples.T), np.eye(6) / delta, atol=0.05 / delta)


def test_a_network_without_a_linear_layer_gets_advice_that_works():
    """The hint was 'pass layer= the module whose input is the representation', which laplace then refused."""

    class NoLinear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(1, 3, 4)

        def forward(self, x):
            return self.conv(x[:, None]).mean(-1)

    with pytest.raises(InvalidArgumentError, match=r"^network \(NoLinear\) has no nn.Linear layer; last-layer Laplace "
                                                   r"puts its posterior on the network's last nn.Linear .* build "
                                                   r"LastLayerLaplace\(body, feature_dim=D, num_classes=C\)") as error:
        build_posterior("laplace", network=NoLinear(), num_classes=3)
    assert "layer=" not in str(error.value)
    # the advice: a Laplace layer on the network up to its features
    laplace = LastLayerLaplace(nn.Sequential(nn.Unflatten(1, (1, 4)), nn.Conv1d(1, 5, 4), nn.Flatten()),
                               feature_dim=5, num_classes=3)
    assert laplace(torch.randn(2, 4)).shape == (2, 3)
    with pytest.raises(FeaturesUnavailableError, match=r"^model \(NoLinear\) has no nn.Linear layer; a network's "
                                                       r"features are the input of its last nn.Linear$"):
        as_posterior(NoLinear()).features(torch.randn(2, 4))
