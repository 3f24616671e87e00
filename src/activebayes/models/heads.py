r"""Bayesian heads on frozen features, as posteriors: MC dropout, a deep ensemble, last-layer Laplace.

:func:`build_posterior` builds one by name (``"mc_dropout"``, ``"ensemble"``, ``"laplace"``)
on an encoder (ours, a user's ``nn.Module`` / callable, or the identity on precomputed
embeddings; see :mod:`activebayes.models.encoders`) or on a whole network, and returns a
:class:`~activebayes.models.Posterior` whose ``module`` is an ``nn.Module`` that
:func:`~activebayes.models.predict_log_probs`, :func:`~activebayes.scoring.score_pool` and
the loop run as they run any network:

- ``mc_dropout``: :class:`~activebayes.models.EncoderClassifier` (consistent MC dropout on
  the features and the hidden layer): any K, masks fixed per round from a seed.
- ``ensemble``: an :class:`~activebayes.models.Ensemble` of E heads sharing one
  :class:`~activebayes.models.encoders.FrozenEncoder` (the encoder runs once per item
  for all members): K = E.
- ``laplace``: :class:`~activebayes.models.laplace.LastLayerLaplace`: the MAP head, then
  a Gaussian over its output layer (GGN, prior precision by marginal likelihood); K weight
  samples drawn once per round from a seed.

The heads share one architecture: ``LayerNorm (no affine) -> Linear(D, hidden) -> ReLU ->
Linear(hidden, C)``; MC dropout adds its dropout layers, Laplace puts its posterior on the
last ``Linear``. Without an encoder (``network=``) the ensemble is E copies of the
network and Laplace splits off the network's last ``nn.Linear``.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from activebayes._seeding import draw_seed, global_rng_seeded
from activebayes._validation import check_choice, check_positive_int, unknown_name_message
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models.encoders import FrozenEncoder
from activebayes.models.ensemble import Ensemble
from activebayes.models.laplace import LastLayerLaplace
from activebayes.models.posterior import NetworkPosterior, num_classes_mismatch

__all__ = [
    "DEFAULT_ENSEMBLE_SIZE",
    "LAPLACE_OPTIONS",
    "POSTERIORS",
    "build_head",
    "build_posterior",
    "fit_posterior_module",
    "last_layer_laplace",
    "loop_model",
]

POSTERIORS = ("mc_dropout", "ensemble", "laplace")
DEFAULT_ENSEMBLE_SIZE = 5
#: the options of a Laplace head (:class:`LastLayerLaplace`'s)
LAPLACE_OPTIONS = ("structure", "prior_precision", "max_full_parameters")
#: the arguments of :class:`~activebayes.models.EncoderClassifier` that :func:`build_head` sets or takes itself
_SET_BY_BUILD_HEAD = ("encoder", "num_classes", "feature_dim", "input_shape", "hidden", "generator")


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _head_options(name: str) -> tuple[str, ...]:
    """The ``**options`` head ``name`` takes."""
    from activebayes.models.networks import EncoderClassifier

    if name == "laplace":
        return LAPLACE_OPTIONS
    if name == "mc_dropout":
        parameters = inspect.signature(EncoderClassifier).parameters.values()
        return tuple(p.name for p in parameters
                     if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in _SET_BY_BUILD_HEAD)
    return ()


def _check_options(options: dict[str, Any], accepted: Sequence[str], what: str) -> None:
    """Refuse a key of ``options`` not in ``accepted``, naming the close match (a misspelt ``structre``)."""
    for key in options:
        if key not in accepted:
            raise InvalidArgumentError(unknown_name_message(what, key, accepted))


def _feature_dim(encoder: nn.Module, input_shape: Sequence[int] | None, feature_dim: int | None) -> int:
    from activebayes.models.networks import _probe_feature_dim

    if feature_dim is not None:
        return check_positive_int(feature_dim, "feature_dim")
    # the wrapped encoder's own D (a Representation's ConvEncoder): FrozenEncoder declares none
    inner = encoder.encoder if isinstance(encoder, FrozenEncoder) else encoder
    if input_shape is None and getattr(inner, "feature_dim", None) is None:
        raise InvalidArgumentError("a head needs feature_dim=, an encoder with a feature_dim attribute, or input_shape=")
    shape = tuple(input_shape or ())
    try:
        return _probe_feature_dim(inner, shape)
    except RuntimeError as error:
        raise InvalidArgumentError(
            f"input_shape={shape} does not fit the encoder: a probe item of that shape fails ({_first_line(error)})"
        ) from error


class _CheckedFlatten(nn.Flatten):
    """``nn.Flatten`` that checks each item's feature count against the head's ``feature_dim``
    (a wrong ``feature_dim=`` is named, not a layer-norm shape error on the features)."""

    def __init__(self, feature_dim: int) -> None:
        super().__init__()
        self.feature_dim = feature_dim

    def forward(self, features: Tensor) -> Tensor:
        features_n_D = super().forward(features)
        if features_n_D.shape[1] != self.feature_dim:
            raise InvalidArgumentError(
                f"feature_dim must be the encoder's output size: feature_dim={self.feature_dim} was given, the "
                f"encoder gives {features_n_D.shape[1]} features per item; pass feature_dim={features_n_D.shape[1]}"
            )
        return features_n_D

    def extra_repr(self) -> str:
        return f"feature_dim={self.feature_dim}"


def _body(encoder: nn.Module, feature_dim: int, hidden: int) -> nn.Sequential:
    layers: list[nn.Module] = [encoder, _CheckedFlatten(feature_dim),
                               nn.LayerNorm(feature_dim, elementwise_affine=False)]
    if hidden:
        layers += [nn.Linear(feature_dim, hidden), nn.ReLU()]
    return nn.Sequential(*layers)


def build_head(
    name: str,
    *,
    encoder: Any,
    num_classes: int,
    input_shape: Sequence[int] | None = None,
    feature_dim: int | None = None,
    hidden: int = 128,
    ensemble_size: int = DEFAULT_ENSEMBLE_SIZE,
    generator: torch.Generator | int | None = None,
    **options: Any,
) -> nn.Module:
    """The ``nn.Module`` of head ``name`` on a frozen ``encoder`` (see the module docstring).

    Args:
        name: ``"mc_dropout"``, ``"ensemble"`` or ``"laplace"``.
        encoder: a Representation, an ``nn.Module``, a callable, or a :class:`FrozenEncoder`
            (shared as is: its feature cache serves every head built on it).
        num_classes: C.
        input_shape: one item's shape (to probe D when ``feature_dim`` is not given).
        feature_dim: D.
        hidden: the head's hidden width (0: a linear head on the normalised features).
        ensemble_size: E for ``"ensemble"``.
        generator: seeds the initialisation.
        **options: ``mc_dropout``: ``p_features``, ``p``; ``laplace``: ``structure``,
            ``prior_precision``, ``max_full_parameters``; another key is refused, naming the
            close match.

    The encoder is frozen **in place**, not copied: a user's ``nn.Module`` gets
    ``requires_grad_(False)`` and stays in eval mode (:class:`FrozenEncoder`), so heads and
    rounds share it without a copy of its weights. To keep training your own module
    afterwards, pass ``copy.deepcopy(encoder)``.
    """
    from activebayes.models.networks import EncoderClassifier

    check_choice(name, "posterior", POSTERIORS)
    check_positive_int(num_classes, "num_classes")
    check_positive_int(hidden, "hidden", allow_zero=True)
    if name == "ensemble" and options:
        raise InvalidArgumentError(f"the ensemble head takes no options {sorted(options)}")
    _check_options(options, _head_options(name), f"{name} head option")
    frozen = encoder if isinstance(encoder, FrozenEncoder) else FrozenEncoder(encoder)
    D = _feature_dim(frozen, input_shape, feature_dim)
    seed = draw_seed(generator)
    if name == "mc_dropout":
        if not hidden:
            raise InvalidArgumentError("the mc_dropout head needs hidden >= 1, got 0")
        options.pop("feature_cache", None)  # the FrozenEncoder caches
        with global_rng_seeded(seed):
            classifier = EncoderClassifier(frozen, num_classes=num_classes, feature_dim=D, hidden=hidden,
                                           feature_cache=False, **options)
        if isinstance(classifier.head[0], nn.Flatten):  # a wrong feature_dim named at the first features
            classifier.head[0] = _CheckedFlatten(D)
        return classifier
    if name == "ensemble":
        check_positive_int(ensemble_size, "ensemble_size")

        def member() -> nn.Module:
            body = _body(frozen, D, hidden)
            return nn.Sequential(*body, nn.Linear(hidden or D, num_classes))

        return Ensemble.from_factory(member, ensemble_size, generator=seed)
    with global_rng_seeded(seed):
        return LastLayerLaplace(_body(frozen, D, hidden), feature_dim=hidden or D, num_classes=num_classes,
                                **options)


def _set_submodule(root: nn.Module, qualified: str, module: nn.Module) -> None:
    parent_name, _, child = qualified.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, module)


def last_layer_laplace(
    network: nn.Module, *, input_shape: Sequence[int] | None = None, **options: Any
) -> LastLayerLaplace:
    """A :class:`LastLayerLaplace` on a copy of ``network``: its last ``nn.Linear`` (in
    registration order) becomes the posterior's layer (with that layer's weights, dtype and
    device), the rest its body.

    The last ``nn.Linear`` must be the network's final operation (``logits = W h + b``).
    That is checked on a probe forward of ``input_shape`` when it is given, else on the
    first inputs the module reads (the first batch of ``fit``, or the first prediction):
    a network that does more after it raises :class:`~activebayes.errors.InvalidArgumentError`.

    ``**options``: :class:`LastLayerLaplace`'s ``structure``, ``prior_precision``,
    ``max_full_parameters``.
    """
    from activebayes.models.embeddings import last_linear

    if not isinstance(network, nn.Module) or isinstance(network, Ensemble):
        raise InvalidTypeError(f"network must be one torch.nn.Module (not an Ensemble), got {type(network).__name__}")
    _check_options(options, LAPLACE_OPTIONS, "laplace option")
    body = copy.deepcopy(network)
    last = last_linear(body, name="network", advice=(
        "last-layer Laplace puts its posterior on the network's last nn.Linear (logits = W h + b): end the network "
        "in one, or build LastLayerLaplace(body, feature_dim=D, num_classes=C) on the network up to its features"))
    qualified = next(name for name, module in body.named_modules() if module is last)
    _set_submodule(body, qualified, nn.Identity())
    model = LastLayerLaplace(body, feature_dim=last.in_features, num_classes=last.out_features,
                             device=last.weight.device, dtype=last.weight.dtype, **options)
    model.last.load_state_dict(last.state_dict())
    model.split_at = qualified
    if input_shape is not None:
        _probe_split(model, tuple(input_shape))
    return model


def _probe_split(model: LastLayerLaplace, input_shape: tuple[int, ...]) -> None:
    """:meth:`LastLayerLaplace.check_split` on two random items of ``input_shape``."""
    weight = model.last.weight
    probe = torch.randn(2, *input_shape, generator=torch.Generator().manual_seed(0), dtype=weight.dtype)
    try:
        model.check_split(probe.to(weight.device))
    except RuntimeError as error:
        raise InvalidArgumentError(
            f"input_shape={input_shape} does not fit the network: a probe item of that shape fails "
            f"({_first_line(error)})"
        ) from error


def fit_posterior_module(module: nn.Module, train: tuple[Tensor, Tensor]) -> dict[str, Any]:
    """After the MAP fit: the posterior a module adds on top (last-layer Laplace), else nothing.
    With no labelled rows that posterior is its prior (:meth:`LastLayerLaplace.use_prior`).

    Returns the JSON-friendly summary to merge into the round's fit record.
    """
    if isinstance(module, LastLayerLaplace):
        return module.use_prior() if len(train[1]) == 0 else module.fit_posterior(*train)
    return {}


def build_posterior(
    name: str,
    *,
    num_classes: int,
    encoder: Any = None,
    network: nn.Module | None = None,
    input_shape: Sequence[int] | None = None,
    feature_dim: int | None = None,
    hidden: int = 128,
    ensemble_size: int = DEFAULT_ENSEMBLE_SIZE,
    generator: torch.Generator | int | None = None,
    fit_options: dict[str, Any] | None = None,
    **options: Any,
) -> NetworkPosterior:
    """A :class:`~activebayes.models.Posterior` by name: a head on ``encoder``, or ``network`` made Bayesian.

    Give exactly one of ``encoder`` (a Representation, an ``nn.Module``, a callable,
    a :class:`FrozenEncoder`, or ``nn.Identity()`` for precomputed embeddings) and
    ``network`` (a whole classifier: ``mc_dropout`` uses it as is and needs its consistent
    MC dropout layers, ``ensemble`` builds ``ensemble_size`` seeded copies re-initialised,
    ``laplace`` splits off its last ``nn.Linear``).

    ``fit`` trains the MAP network (:func:`~activebayes.models.fit` with ``fit_options``)
    and then, for Laplace, the posterior of the last layer.

    An ``encoder`` is frozen in place, not copied (see :func:`build_head`): pass
    ``copy.deepcopy(encoder)`` to keep training your module afterwards. A ``network`` is
    used as is by ``mc_dropout`` and copied by ``ensemble`` and ``laplace``.

    Example:
        >>> post = build_posterior("laplace", encoder=nn.Identity(), num_classes=3, feature_dim=4, generator=0)
        >>> x, y = torch.randn(30, 4), torch.randint(0, 3, (30,))
        >>> _ = post.fit((x, y), generator=0)
        >>> post.log_probs(x, num_samples=8, generator=torch.Generator().manual_seed(1)).shape
        torch.Size([30, 8, 3])
    """
    from activebayes.models.training import reset_parameters

    check_choice(name, "posterior", POSTERIORS)
    check_positive_int(num_classes, "num_classes")
    if (encoder is None) == (network is None):
        raise InvalidArgumentError("build_posterior needs exactly one of encoder= (a head on frozen features) and network=")
    fit_options = dict(fit_options or {})
    if encoder is not None:
        module = build_head(name, encoder=encoder, num_classes=num_classes, input_shape=input_shape,
                            feature_dim=feature_dim, hidden=hidden, ensemble_size=ensemble_size,
                            generator=generator, **options)
        return NetworkPosterior(module, **fit_options)
    assert network is not None
    if name == "mc_dropout":
        if options:
            raise InvalidArgumentError(f"mc_dropout on a network takes no options {sorted(options)}")
        posterior = NetworkPosterior(network, num_classes=num_classes, **fit_options)
    elif name == "ensemble":
        if options:
            raise InvalidArgumentError(f"the ensemble takes no options {sorted(options)}")
        seed = draw_seed(generator)
        members = Ensemble.from_factory(lambda: reset_parameters(copy.deepcopy(network)), ensemble_size,
                                        generator=seed)
        posterior = NetworkPosterior(members, num_classes=num_classes, **fit_options)
    else:
        laplace = last_layer_laplace(network, input_shape=input_shape, **options)
        if laplace.last.out_features != num_classes:  # its last nn.Linear is its output layer
            raise InvalidArgumentError(num_classes_mismatch(
                num_classes, laplace.last.out_features, f"the network (its last nn.Linear, {laplace.split_at})"))
        posterior = NetworkPosterior(laplace, num_classes=num_classes, **fit_options)
    return posterior  # an ensemble's or MC dropout network's width is checked at its first log_probs


def loop_model(config: Any, num_classes: int, input_shape: Sequence[int], generator: torch.Generator, *,
               frozen_encoder: FrozenEncoder | None = None, feature_dim: int | None = None) -> nn.Module:
    """A round's model for :class:`~activebayes.loop.ActiveLearningLoop`'s ``config`` (its
    ``posterior``, ``model``, ``model_options`` and ``ensemble_size``): a posterior head on
    ``frozen_encoder`` (the self-supervised representation's encoder, ``feature_dim`` features;
    the loop passes the same one every round, so the pool is encoded once per run), or,
    without one, the configured network made an ensemble / split for last-layer Laplace."""
    from activebayes.models.networks import build_model

    options = dict(config.model_options)
    input_shape = tuple(input_shape)
    size = config.ensemble_size or DEFAULT_ENSEMBLE_SIZE
    if frozen_encoder is not None:
        return build_head(config.posterior, encoder=frozen_encoder, num_classes=num_classes,
                          feature_dim=feature_dim, ensemble_size=size, generator=generator, **options)
    if config.posterior == "ensemble":
        return build_model(config.model, num_classes=num_classes, input_shape=input_shape, ensemble_size=size,
                           generator=generator, **options)
    laplace_options = {k: options.pop(k) for k in LAPLACE_OPTIONS if k in options}
    network = build_model(config.model, num_classes=num_classes, input_shape=input_shape, generator=generator,
                          **options)
    return last_layer_laplace(network, input_shape=input_shape, **laplace_options)
