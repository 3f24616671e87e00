r"""Last-layer Laplace: a Gaussian posterior over the output layer of a trained network.

A network ``logits = W phi(x) + b`` is trained to its MAP weights as usual (:func:`fit`);
the features ``phi`` (a frozen encoder and any hidden layers) stay fixed, and the output
layer's ``P = C (D + 1)`` weights ``theta = vec([W, b])`` get the Laplace posterior

.. math::

    q(\theta) = \mathcal N(\theta_*, \Pi^{-1}), \qquad
    \Pi = H + \delta I, \qquad
    H = \sum_i J_i^\top \Lambda_i J_i = \sum_i \Lambda_i \otimes \tilde\phi_i \tilde\phi_i^\top ,

with ``phi~ = [phi; 1]``, ``J_i = I_C \otimes phi~_i^T`` the Jacobian of the logits in
``theta`` and ``Lambda_i = diag(p_i) - p_i p_i^T`` the Hessian of the cross-entropy in
the logits (the generalised Gauss-Newton, GGN; exact for the last layer of a softmax
classifier up to the positive semi-definite part). ``theta`` is ordered class by class
(``theta[c (D+1) + d] = [W, b][c, d]``), so the Kronecker products are ``(C x C) x
((D+1) x (D+1))``.

Two structures of ``H``:

- ``"full"``: the exact ``P x P`` GGN, eigendecomposed once, ``H = V diag(s) V^T``
  (for small ``P``; default up to :data:`MAX_FULL_PARAMETERS`).
- ``"kron"``: the Kronecker-factored (K-FAC) GGN ``H ~ G \otimes A`` with
  ``G = sum_i Lambda_i`` and ``A = (1/N) sum_i phi~_i phi~_i^T`` (the expectation of a
  Kronecker product replaced by the Kronecker product of expectations); the eigenvalues
  of ``G \otimes A`` are the products of those of ``G`` and ``A``.

Either way ``Pi``'s eigenvalues are ``s_j + delta``, so the posterior's log
determinant, samples and covariance cost nothing more for any prior precision
``delta``. The prior precision is fitted by maximising the Laplace approximation of the
log marginal likelihood (MacKay 1992; Immer et al. 2021):

.. math::

    \log p(\mathcal D \mid \delta) \approx \sum_i \log p(y_i \mid x_i, \theta_*)
      - \tfrac{\delta}{2}\lVert\theta_*\rVert^2 + \tfrac{P}{2}\log\delta
      - \tfrac12 \sum_j \log(s_j + \delta),

whose derivative in ``log delta`` is ``(1/2) (sum_j s_j / (s_j + delta) - delta
||theta_*||^2)``: decreasing in ``delta``, so the maximum is the unique root, found by
bisection on ``log delta`` (:func:`fit_prior_precision`).

Function samples are weight samples ``theta_k = theta_* + R z_k`` (``R R^T = Pi^{-1}``, covariance ``Pi^{-1}``) drawn **once
per round** (:meth:`LastLayerLaplace.draw_functions`) with ``z_k`` from a seed derived
from one base seed and ``k``: sample ``k`` is one function for every item, whatever the
chunking, the order of the items or the Ray worker, and the first ``k`` samples of a
larger draw are the same functions. The probit approximation of the predictive mean
(:func:`probit_predictive`) needs no samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from activebayes._seeding import derive_seed, draw_seed, seedable_init
from activebayes._validation import check_choice, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "LAPLACE_STRUCTURES",
    "MAX_FULL_PARAMETERS",
    "LastLayerLaplace",
    "NotFittedError",
    "function_covariance",
    "ggn_full",
    "ggn_kron_factors",
    "fit_prior_precision",
    "log_marginal_likelihood",
    "probit_predictive",
]



class NotFittedError(InvalidArgumentError):
    """The posterior is used before it is fitted (or before its functions are drawn)."""


LAPLACE_STRUCTURES = ("auto", "full", "kron")
#: ``structure="auto"`` uses the full GGN up to this many last-layer parameters ``C (D + 1)``
#: (an eigendecomposition of a ``P x P`` float64 matrix: 1290 parameters, 13 MB, ~0.3 s), K-FAC beyond.
MAX_FULL_PARAMETERS = 2048
_LOG_DELTA_RANGE = (-18.0, 18.0)  # natural log of the prior precision searched
_SPLIT_CHECK_ROWS = 8  # rows of the first inputs on which a split network is checked


def _with_bias(features_n_D: Tensor) -> Tensor:
    return torch.cat([features_n_D, features_n_D.new_ones(features_n_D.shape[0], 1)], dim=1)


def _softmax_hessians(probs_n_C: Tensor) -> Tensor:
    """``Lambda_i = diag(p_i) - p_i p_i^T``: ``[n, C, C]``."""
    return torch.diag_embed(probs_n_C) - probs_n_C.unsqueeze(2) * probs_n_C.unsqueeze(1)


def ggn_full(features_n_D: Tensor, probs_n_C: Tensor) -> Tensor:
    r"""The exact last-layer GGN ``sum_i Lambda_i \otimes phi~_i phi~_i^T``: float64 ``[P, P]``, ``P = C (D+1)``."""
    phi_n_E = _with_bias(features_n_D.double())
    lam_n_C_C = _softmax_hessians(probs_n_C.double())
    C, E = lam_n_C_C.shape[1], phi_n_E.shape[1]
    H = phi_n_E.new_zeros(C, E, C, E)
    for start in range(0, phi_n_E.shape[0], 64):  # bounded memory: [64, C, C, E] at a time
        lam, phi = lam_n_C_C[start : start + 64], phi_n_E[start : start + 64]
        H += torch.einsum("nab,nd,ne->adbe", lam, phi, phi)
    return H.reshape(C * E, C * E)


def ggn_kron_factors(features_n_D: Tensor, probs_n_C: Tensor) -> tuple[Tensor, Tensor]:
    r"""K-FAC factors ``(G [C, C], A [D+1, D+1])`` with ``H ~ G \otimes A`` (float64)."""
    phi_n_E = _with_bias(features_n_D.double())
    G = _softmax_hessians(probs_n_C.double()).sum(0)
    A = phi_n_E.T @ phi_n_E / phi_n_E.shape[0]
    return G, A


def log_marginal_likelihood(
    log_likelihood: float, theta_norm_sq: float, eigenvalues_P: Tensor, prior_precision: float | Tensor
) -> Tensor:
    r"""``log p(D | delta) ~ loglik - delta/2 ||theta_*||^2 + P/2 log delta - 1/2 sum_j log(s_j + delta)``.

    ``eigenvalues_P``: the GGN's eigenvalues ``s_j`` (negative round-off clipped to 0);
    ``prior_precision``: a scalar or a tensor of them (the result has its shape).
    """
    s = eigenvalues_P.double().clamp_min(0.0)
    delta = torch.as_tensor(prior_precision, dtype=torch.float64)
    P = s.numel()
    log_det = torch.log(s.reshape(-1, *([1] * delta.ndim)) + delta).sum(0)
    return log_likelihood - 0.5 * delta * theta_norm_sq + 0.5 * P * torch.log(delta) - 0.5 * log_det


def fit_prior_precision(theta_norm_sq: float, eigenvalues_P: Tensor, *, iterations: int = 200) -> float:
    r"""The ``delta`` maximising :func:`log_marginal_likelihood` (independent of the log likelihood).

    The root of ``sum_j s_j / (s_j + delta) = delta ||theta_*||^2`` (effective number of
    parameters = ``delta ||theta_*||^2``), by bisection on ``log delta`` in
    ``[e^-18, e^18]`` (clipped to that range when the root lies outside).
    """
    s = eigenvalues_P.double().clamp_min(0.0)
    norm_sq = float(theta_norm_sq)

    def slope(log_delta: float) -> float:  # 2 d/d(log delta) of the log marginal likelihood
        delta = math.exp(log_delta)
        return float((s / (s + delta)).sum()) - delta * norm_sq

    low, high = _LOG_DELTA_RANGE
    if slope(high) >= 0:
        return math.exp(high)
    if slope(low) <= 0:
        return math.exp(low)
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        if slope(mid) > 0:
            low = mid
        else:
            high = mid
        if high - low < 1e-12:
            break
    return math.exp(0.5 * (low + high))


class LastLayerLaplace(nn.Module):
    r"""A network ``logits = last(body(x))`` with a Laplace posterior over ``last`` (an ``nn.Linear``).

    ``forward(x)`` gives the MAP logits, so :func:`~activebayes.models.fit` trains it as
    any network; :meth:`fit_posterior` then computes the GGN of the last layer on the
    training set and fits the prior precision by marginal likelihood;
    :meth:`draw_functions` fixes K weight samples, after which the module is a
    :class:`~activebayes.models.FunctionSampler` (``forward_samples(x, ids) -> [n, k, C]``)
    and a :class:`~activebayes.models.SampledFunctions`:
    ``predict_log_probs(model, x, K, generator=g)`` draws K functions from ``g`` and
    ``score_pool(model, ..., num_samples=K, mask_generator=g)`` holds them for the whole pool.

    Everything the posterior needs is a buffer (``state_dict`` / checkpoints restore it;
    pickling for Ray carries the drawn samples too).

    Args:
        body: ``nn.Module`` mapping inputs to features ``[n, D]`` (e.g. a frozen encoder
            and a hidden layer); trained with the last layer by ``fit``, fixed by the posterior.
        feature_dim: D.
        num_classes: C.
        structure: ``"full"``, ``"kron"`` or ``"auto"`` (full up to ``max_full_parameters``).
        prior_precision: a fixed ``delta > 0``, or ``None`` to fit it by marginal likelihood.
        max_full_parameters: the ``"auto"`` threshold on ``P = C (D + 1)``.
        device: where the output layer and the posterior's buffers live (default: the CPU).
        dtype: the output layer's dtype (default: torch's default); the posterior's buffers are float64.
        generator: seeds the output layer's initial weights (a ``torch.Generator`` or an int
            seed; ``None``: torch's global RNG); ``body`` is used as given.

    Split from a whole network (:func:`~activebayes.models.last_layer_laplace`),
    :attr:`split_at` names the ``nn.Identity`` in ``body`` that stands for ``last``; the
    first forward then checks that ``last(body(x))`` is the network's output
    (:meth:`check_split`).
    """

    #: the qualified name of the ``nn.Identity`` in ``body`` that replaced ``last`` when the module
    #: was split from a whole network, else ``None`` (a body built as such)
    split_at: str | None = None
    _split_checked: bool = False

    @seedable_init
    def __init__(
        self,
        body: nn.Module,
        *,
        feature_dim: int,
        num_classes: int,
        structure: str = "auto",
        prior_precision: float | None = None,
        max_full_parameters: int = MAX_FULL_PARAMETERS,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(body, nn.Module):
            raise InvalidTypeError(f"body must be a torch.nn.Module, got {type(body).__name__}")
        check_positive_int(feature_dim, "feature_dim")
        check_positive_int(num_classes, "num_classes")
        check_choice(structure, "structure", LAPLACE_STRUCTURES)
        check_positive_int(max_full_parameters, "max_full_parameters")
        if prior_precision is not None:
            if isinstance(prior_precision, bool) or not isinstance(prior_precision, (int, float)) or not prior_precision > 0:
                raise InvalidArgumentError(f"prior_precision must be a number > 0 or None (fit it), got {prior_precision!r}")
        self.body = body
        self.last = nn.Linear(feature_dim, num_classes, device=device, dtype=dtype)
        E = feature_dim + 1
        P = num_classes * E
        if structure == "auto":
            structure = "full" if P <= max_full_parameters else "kron"
        self.structure = structure
        self.fixed_prior_precision = None if prior_precision is None else float(prior_precision)
        f64 = {"dtype": torch.float64, "device": device}
        self.register_buffer("theta_map_C_E", torch.zeros(num_classes, E, **f64))
        self.register_buffer("prior_precision", torch.tensor(1.0, **f64))
        self.register_buffer("fitted", torch.tensor(False, device=device))
        if structure == "full":
            self.register_buffer("eigenvectors_P_P", torch.eye(P, **f64))
            self.register_buffer("eigenvalues_P", torch.zeros(P, **f64))
        else:
            self.register_buffer("g_vectors_C_C", torch.eye(num_classes, **f64))
            self.register_buffer("g_values_C", torch.zeros(num_classes, **f64))
            self.register_buffer("a_vectors_E_E", torch.eye(E, **f64))
            self.register_buffer("a_values_E", torch.zeros(E, **f64))
        # K weight samples [K, C, D+1] (float32) and the base seed they come from
        self.register_buffer("samples_K_C_E", torch.zeros(0, num_classes, E, device=device), persistent=False)
        self.register_buffer("function_seed", torch.tensor(-1, dtype=torch.int64, device=device), persistent=False)

    # ------------------------------------------------------------------ the MAP network
    @property
    def num_classes(self) -> int:
        return self.last.out_features

    @property
    def feature_dim(self) -> int:
        return self.last.in_features

    def features(self, inputs: Tensor) -> Tensor:
        """``phi(x)``: ``[n, D]``."""
        self.check_split(inputs)
        features = self.body(inputs)
        if not isinstance(features, Tensor) or features.ndim != 2 or features.shape[1] != self.feature_dim:
            got = tuple(features.shape) if isinstance(features, Tensor) else type(features).__name__
            raise InvalidArgumentError(
                f"body must map inputs to features [n, feature_dim={self.feature_dim}], got {got}"
            )
        return features

    def check_split(self, inputs: Tensor) -> None:
        """Once, for a module split from a network (:attr:`split_at`): that the network's output on
        ``inputs`` is ``last(body(inputs))``, i.e. nothing follows its last ``nn.Linear``.

        Runs both in eval mode without gradients on the first few rows, the modules'
        train/eval flags restored; raises :class:`~activebayes.errors.InvalidArgumentError`
        for a network that does more after that layer (a softmax, an activation, a scaling)."""
        if self.split_at is None or self._split_checked:
            return
        network_n_C, split_n_C = self._network_and_split_logits(inputs[:_SPLIT_CHECK_ROWS])
        same = isinstance(network_n_C, Tensor) and network_n_C.shape == split_n_C.shape and torch.allclose(
            network_n_C, split_n_C, rtol=1e-4, atol=1e-5, equal_nan=True)
        if not same:
            raise InvalidArgumentError(
                f"the network ({type(self.body).__name__}) does more after its last nn.Linear ({self.split_at}): "
                "last-layer Laplace needs logits = last_linear(features); build LastLayerLaplace(body, ...) yourself"
            )
        self._split_checked = True

    @torch.no_grad()
    def _network_and_split_logits(self, inputs: Tensor) -> tuple[Tensor, Tensor]:
        """The whole network's output (``last`` run where the split put its ``nn.Identity``) and
        ``last(body(inputs))``, in eval mode."""
        identity = self.body.get_submodule(self.split_at)
        flags = {module: module.training for module in self.modules()}
        self.eval()
        try:
            handle = identity.register_forward_hook(lambda _module, _args, output: self.last(output))
            try:
                network_n_C = self.body(inputs)
            finally:
                handle.remove()
            return network_n_C, self.last(self.body(inputs))
        finally:
            for module, flag in flags.items():
                module.training = flag

    def split_frozen(self) -> tuple[Callable[[Tensor], Tensor], nn.Module] | None:
        """``(encode, rest)`` when the body starts with a frozen encoder (``fit`` then trains the
        MAP head on features; :func:`~activebayes.models.encoders.split_frozen`), else ``None``."""
        from activebayes.models.encoders import split_frozen

        split = split_frozen(self.body)
        return None if split is None else (split[0], nn.Sequential(split[1], self.last))

    def forward(self, inputs: Tensor) -> Tensor:
        """The MAP logits ``[n, C]``."""
        return self.last(self.features(inputs))

    # ------------------------------------------------------------------ the posterior
    def eigenvalues(self) -> Tensor:
        """The GGN's eigenvalues ``s_j`` (float64 ``[P]``; products of the factors' for K-FAC)."""
        if self.structure == "full":
            return self.eigenvalues_P.clamp_min(0.0)
        return torch.outer(self.g_values_C.clamp_min(0.0), self.a_values_E.clamp_min(0.0)).reshape(-1)

    def _check_fitted(self) -> None:
        if not bool(self.fitted):
            raise NotFittedError(
                "the Laplace posterior is not fitted: call fit_posterior(inputs, targets) after training "
                "the MAP network (build_posterior('laplace', ...).fit does both)"
            )

    @torch.no_grad()
    def use_prior(self) -> dict[str, Any]:
        r"""The posterior given no labels: the prior :math:`\mathcal N(\theta, \delta^{-1} I)` around
        the current last-layer weights (``delta``: the fixed prior precision, else 1; the marginal
        likelihood cannot choose it without data). A labelling project's first round uses it."""
        theta_C_E = torch.cat([self.last.weight, self.last.bias.unsqueeze(1)], dim=1).detach().double().cpu()
        if self.structure == "full":
            self.eigenvalues_P.zero_()
            self.eigenvectors_P_P.copy_(torch.eye(self.eigenvectors_P_P.shape[0], dtype=torch.float64))
        else:
            for values, vectors in ((self.g_values_C, self.g_vectors_C_C), (self.a_values_E, self.a_vectors_E_E)):
                values.zero_()
                vectors.copy_(torch.eye(vectors.shape[0], dtype=torch.float64))
        delta = 1.0 if self.fixed_prior_precision is None else self.fixed_prior_precision
        self._set_mean_and_precision(theta_C_E, delta)
        return {"laplace_structure": self.structure, "laplace_prior_precision": delta, "laplace_prior_only": True}

    def _set_mean_and_precision(self, theta_C_E: Tensor, delta: float) -> None:
        """The posterior's mean and prior precision (the GGN factors are set by the caller);
        the drawn function samples belong to the previous posterior and are dropped."""
        self.theta_map_C_E.copy_(theta_C_E)
        self.prior_precision.fill_(delta)
        self.fitted.fill_(True)
        self.samples_K_C_E = self.samples_K_C_E.new_zeros(0, *theta_C_E.shape)
        self.function_seed.fill_(-1)

    @torch.no_grad()
    def fit_posterior(self, inputs: Any, targets: Tensor, *, batch_size: int = 512) -> dict[str, Any]:
        """The GGN of the last layer at the current (MAP) weights on ``(inputs, targets)``, and the
        prior precision (fitted by marginal likelihood unless fixed). Returns a JSON-friendly summary."""
        from activebayes.models.predict import _Inputs

        check_positive_int(batch_size, "batch_size")
        targets = torch.as_tensor(targets).long().reshape(-1).cpu()
        data = _Inputs(inputs)
        if len(data) != targets.shape[0]:
            raise InvalidArgumentError(
                f"targets must have one label per input ({len(data)}), got {targets.shape[0]}"
            )
        was_training = self.training
        self.eval()
        device = self.last.weight.device
        try:
            chunks = [self.features(x.to(device)).double().cpu() for _, _, x in data.chunks(batch_size)]
        finally:
            self.train(was_training)
        phi_N_D = torch.cat(chunks)
        theta_C_E = torch.cat([self.last.weight, self.last.bias.unsqueeze(1)], dim=1).detach().double().cpu()
        logits_N_C = _with_bias(phi_N_D) @ theta_C_E.T
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= self.num_classes):
            raise InvalidArgumentError(f"targets must be class ids in 0 .. {self.num_classes - 1}")
        log_probs_N_C = torch.log_softmax(logits_N_C, dim=1)
        log_likelihood = float(log_probs_N_C.gather(1, targets.unsqueeze(1)).sum())
        probs_N_C = log_probs_N_C.exp()
        if self.structure == "full":
            values, vectors = torch.linalg.eigh(ggn_full(phi_N_D, probs_N_C))
            self.eigenvalues_P.copy_(values.clamp_min(0.0))
            self.eigenvectors_P_P.copy_(vectors)
        else:
            G, A = ggn_kron_factors(phi_N_D, probs_N_C)
            g_values, g_vectors = torch.linalg.eigh(G)
            a_values, a_vectors = torch.linalg.eigh(A)
            self.g_values_C.copy_(g_values.clamp_min(0.0))
            self.g_vectors_C_C.copy_(g_vectors)
            self.a_values_E.copy_(a_values.clamp_min(0.0))
            self.a_vectors_E_E.copy_(a_vectors)
        norm_sq = float((theta_C_E**2).sum())
        s = self.eigenvalues()
        delta = self.fixed_prior_precision
        if delta is None:
            delta = fit_prior_precision(norm_sq, s)
        self._set_mean_and_precision(theta_C_E, delta)
        return {
            "laplace_structure": self.structure,
            "laplace_prior_precision": float(delta),
            "laplace_log_marginal_likelihood": float(log_marginal_likelihood(log_likelihood, norm_sq, s, delta)),
            "laplace_parameters": int(s.numel()),
        }

    def _scale_times(self, z_k_P: Tensor) -> Tensor:
        """``R z`` for rows ``z`` (float64 ``[k, P]`` -> ``[k, C, D+1]``), ``R R^T = Pi^{-1}``.

        ``R = V diag((s + delta)^{-1/2})`` (no trailing ``V^T``: any square root of ``Pi^{-1}``
        gives samples of covariance ``Pi^{-1}``; see the posteriors concept page).
        """
        delta = float(self.prior_precision)
        C, E = self.theta_map_C_E.shape
        if self.structure == "full":
            scaled = z_k_P / torch.sqrt(self.eigenvalues_P.clamp_min(0.0) + delta)
            return (scaled @ self.eigenvectors_P_P.T).reshape(-1, C, E)
        root = torch.sqrt(torch.outer(self.g_values_C.clamp_min(0.0), self.a_values_E.clamp_min(0.0)) + delta)
        z_k_C_E = z_k_P.reshape(-1, C, E) / root
        return self.g_vectors_C_C @ z_k_C_E @ self.a_vectors_E_E.T

    def weight_samples(self, seed: int, sample_ids: Sequence[int]) -> Tensor:
        """``theta_k = theta_* + R z_k`` (``R R^T = Pi^{-1}``) with ``z_k`` from ``derive_seed(seed, k)``: float64 ``[k, C, D+1]``."""
        self._check_fitted()
        C, E = self.theta_map_C_E.shape
        device = self.theta_map_C_E.device
        z = torch.stack([
            torch.randn(C * E, generator=torch.Generator().manual_seed(derive_seed(seed, "laplace", int(k))),
                        dtype=torch.float64)
            for k in sample_ids
        ]).to(device)
        return self.theta_map_C_E + self._scale_times(z)

    def draw_functions(self, num_samples: int, generator: torch.Generator | int | None) -> None:
        """Fix K function samples: a base seed from ``generator``, sample ``k`` from ``(seed, k)``."""
        check_positive_int(num_samples, "num_samples")
        self._check_fitted()
        seed = draw_seed(generator, "generator")
        self.function_seed.fill_(seed)
        self.samples_K_C_E = self.weight_samples(seed, range(num_samples)).float()

    @property
    def num_function_samples(self) -> int:
        """K drawn by :meth:`draw_functions` (0 before the first draw)."""
        return int(self.samples_K_C_E.shape[0])

    def forward_samples(self, inputs: Tensor, sample_ids: Sequence[int]) -> Tensor:
        """Logits ``[n, k, C]`` of the drawn weight samples ``sample_ids`` (the features run once)."""
        if self.num_function_samples == 0:
            raise NotFittedError("no function samples drawn: call draw_functions(num_samples, generator) first")
        ids = list(sample_ids)
        if ids and (min(ids) < 0 or max(ids) >= self.num_function_samples):
            raise InvalidArgumentError(
                f"sample_ids must be in 0 .. {self.num_function_samples - 1} (K drawn), got {ids}"
            )
        phi_n_E = _with_bias(self.features(inputs))
        weights_k_C_E = self.samples_K_C_E[ids].to(phi_n_E.dtype)
        # one sample at a time: each logit is the same dot product whatever n and the other ids
        return torch.stack([phi_n_E @ weights_k_C_E[j].T for j in range(len(ids))], dim=1)

    # ------------------------------------------------------------------ covariance of the logits
    def function_covariance(self, features_n_D: Tensor) -> Tensor:
        r"""``Sigma_f(x) = J Pi^{-1} J^T``: the covariance of the logits, float64 ``[n, C, C]``."""
        self._check_fitted()
        phi_n_E = _with_bias(features_n_D.double().to(self.theta_map_C_E.device))
        delta = float(self.prior_precision)
        C, E = self.theta_map_C_E.shape
        if self.structure == "full":
            V_C_E_P = self.eigenvectors_P_P.reshape(C, E, -1)
            JV_n_C_P = torch.einsum("ne,cep->ncp", phi_n_E, V_C_E_P)
            inverse_P = 1.0 / (self.eigenvalues_P.clamp_min(0.0) + delta)
            return torch.einsum("ncp,p,nbp->ncb", JV_n_C_P, inverse_P, JV_n_C_P)
        a_n_E = phi_n_E @ self.a_vectors_E_E
        inverse_C_E = 1.0 / (torch.outer(self.g_values_C.clamp_min(0.0), self.a_values_E.clamp_min(0.0)) + delta)
        w_n_C = (a_n_E**2) @ inverse_C_E.T
        U = self.g_vectors_C_C
        return torch.einsum("cg,ng,bg->ncb", U, w_n_C, U)

    def predictive_probs(self, inputs: Any, *, batch_size: int = 512) -> Tensor:
        """The closed-form predictive mean ``[N, C]`` (:func:`probit_predictive`): what the loop
        evaluates with, since a few sampled functions of a wide posterior average poorly."""
        return probit_predictive(self, inputs, batch_size=batch_size)

    def extra_repr(self) -> str:
        return f"structure={self.structure!r}, parameters={self.theta_map_C_E.numel()}"


def function_covariance(model: LastLayerLaplace, inputs: Tensor) -> Tensor:
    """The covariance of the logits ``[n, C, C]`` (float64) of a fitted :class:`LastLayerLaplace`."""
    if not isinstance(model, LastLayerLaplace):
        raise InvalidTypeError(f"model must be a LastLayerLaplace, got {type(model).__name__}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return model.function_covariance(model.features(inputs))
    finally:
        model.train(was_training)


def probit_predictive(model: LastLayerLaplace, inputs: Any, *, batch_size: int = 512) -> Tensor:
    r"""The probit approximation of the predictive mean: float32 ``[N, C]`` probabilities.

    ``p(y | x) ~ softmax(mu / sqrt(1 + (pi/8) diag Sigma_f))`` with ``mu`` the MAP logits and
    ``Sigma_f = J Pi^{-1} J^T`` (MacKay 1992; the multi-class extension of Gibbs 1997), no samples.
    """
    from activebayes.models.predict import _Inputs

    if not isinstance(model, LastLayerLaplace):
        raise InvalidTypeError(f"model must be a LastLayerLaplace, got {type(model).__name__}")
    check_positive_int(batch_size, "batch_size")
    model._check_fitted()
    data = _Inputs(inputs)
    device = model.last.weight.device
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.no_grad():
            for _, _, x in data.chunks(batch_size):
                phi_n_D = model.features(x.to(device))
                mean_n_C = _with_bias(phi_n_D.double()) @ model.theta_map_C_E.T
                variance_n_C = torch.diagonal(model.function_covariance(phi_n_D), dim1=1, dim2=2)
                scaled = mean_n_C / torch.sqrt(1.0 + math.pi / 8.0 * variance_n_C)
                out.append(F.softmax(scaled, dim=-1).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out)
