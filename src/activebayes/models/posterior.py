r"""The posterior protocol: what the loop and pool scoring need from a model kind.

A *posterior* is anything that can be fitted on a labelled set and then gives K
coherent function samples for any inputs:

.. math::

    \log p(y = c \mid x_i, w_k), \qquad i = 1..N,\ k = 1..K,

returned as ``log_probs_N_K_C``, where sample ``k`` is **one function** for every
item, whatever the chunking, the order of the items or the process (a Ray worker)
that computes it. MC dropout networks hold K dropout masks fixed; an ensemble has K
members; a last-layer Laplace posterior draws K weight samples once per round.

The protocol has five parts:

- :attr:`Posterior.module`: the ``nn.Module`` that
  :func:`~activebayes.models.predict_log_probs` and
  :func:`~activebayes.scoring.score_pool` run chunk by chunk (picklable, for Ray). It
  has consistent MC dropout layers, or is a
  :class:`~activebayes.models.FunctionSampler` (fixed K), or a
  :class:`SampledFunctions` (K weight samples drawn on request from a generator).
- :attr:`Posterior.num_functions`: a fixed K (an ensemble's size) or ``None`` when any
  K can be drawn.
- :meth:`Posterior.fit`: train on ``(inputs, targets)`` with an optional validation
  set, seeded; returns a JSON-friendly summary for the round's record. With no labelled
  rows (a labelling project's first round) it trains nothing and leaves the posterior
  at its prior (an untrained network; last-layer Laplace's :math:`\mathcal N(\theta,
  \delta^{-1} I)`), returning ``{"skipped": "no labelled data"}``
  (:data:`NO_LABELS`).
- :meth:`Posterior.log_probs`: ``[N, K, C]`` for any inputs.
- :meth:`Posterior.features`: ``[N, D]`` embeddings for strategies that read them
  (BADGE, typicality). A posterior without a feature space raises
  :class:`FeaturesUnavailableError` (``from activebayes.models import
  FeaturesUnavailableError``) saying why; :func:`posterior_features` reads a
  ``NotImplementedError`` the same way.

:func:`as_posterior` looks the five members up on the object without evaluating them, so a
``module`` property that raises before :meth:`~Posterior.fit` (a network built in ``fit``)
is fine.

:class:`NetworkPosterior` implements it for an ``nn.Module`` trained by
:func:`~activebayes.models.fit` (consistent MC dropout networks and
:class:`~activebayes.models.Ensemble`); :func:`as_posterior` turns a module into one.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from activebayes._validation import Device, check_choice, check_materialised, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "FeaturesUnavailableError",
    "NO_LABELS",
    "NetworkPosterior",
    "Posterior",
    "SampledFunctions",
    "as_posterior",
    "fit_summary",
    "posterior_features",
]



#: What :meth:`Posterior.fit` returns for a training set without rows: nothing was trained,
#: the posterior is its prior.
NO_LABELS: dict[str, Any] = {"skipped": "no labelled data"}


def no_labels(train: tuple[Any, Any]) -> bool:
    """Whether ``train = (inputs, targets)`` has no rows (then :meth:`Posterior.fit` keeps the prior)."""
    return len(train[1]) == 0


class FeaturesUnavailableError(InvalidArgumentError):
    """The posterior has no feature space a strategy could read (e.g. no ``nn.Linear`` head)."""


@runtime_checkable
class SampledFunctions(Protocol):
    """A module whose K function samples are drawn on request (e.g. last-layer Laplace weights).

    ``draw_functions(num_samples, generator)`` fixes K functions (the same generator
    state gives the same K functions); afterwards the module behaves as a
    :class:`~activebayes.models.FunctionSampler` with ``num_function_samples == K``:
    ``forward_samples(inputs_n, sample_ids) -> logits [n, k, C]``, so sample ``k`` is one
    function for every item in every chunk.
    """

    def draw_functions(self, num_samples: int, generator: torch.Generator) -> None: ...

    @property
    def num_function_samples(self) -> int: ...

    def forward_samples(self, inputs: Tensor, sample_ids: Any) -> Tensor: ...


@runtime_checkable
class Posterior(Protocol):
    """What the loop needs from a model kind (see the module docstring).

    ``features`` of a posterior without a feature space raises :class:`FeaturesUnavailableError`
    with the reason (a ``NotImplementedError`` is read as that too): strategies reading
    features (BADGE, typicality) then name the strategy and suggest one that needs only
    predictions.
    """

    @property
    def module(self) -> nn.Module: ...

    @property
    def num_functions(self) -> int | None: ...

    def fit(
        self,
        train: tuple[Tensor, Tensor],
        *,
        validation: tuple[Tensor, Tensor] | None = None,
        generator: torch.Generator | None = None,
        device: Device = None,
    ) -> dict[str, Any]: ...

    def log_probs(
        self,
        inputs: Any,
        *,
        num_samples: int | None,
        generator: torch.Generator | None = None,
        batch_size: int = 512,
        device: Device = None,
    ) -> Tensor: ...

    def features(self, inputs: Any, *, batch_size: int = 512, device: Device = None) -> Tensor: ...


def fit_summary(fit_result: Any) -> dict[str, Any]:
    """The JSON-friendly scalar fields of a fit result (a dataclass, an object or a mapping)."""
    if isinstance(fit_result, Mapping):
        items = fit_result.items()
    elif dataclasses.is_dataclass(fit_result) and not isinstance(fit_result, type):
        items = dataclasses.asdict(fit_result).items()
    else:
        items = vars(fit_result).items() if hasattr(fit_result, "__dict__") else []
    out: dict[str, Any] = {}
    for key, value in items:
        if isinstance(value, bool | int | str) or value is None:
            out[key] = value
        elif isinstance(value, float):
            out[key] = value if math.isfinite(value) else None
    return out


class NetworkPosterior:
    """A network trained by :func:`~activebayes.models.fit`: consistent MC dropout, an ensemble, or a
    :class:`~activebayes.models.laplace.LastLayerLaplace` (whose posterior is fitted after the MAP fit).

    Args:
        module: the network (``nn.Module`` returning logits ``[n, C]``), with consistent
            MC dropout layers (:func:`~activebayes.models.mc_dropout`) or an
            :class:`~activebayes.models.Ensemble`.
        sampling: how :meth:`log_probs` draws the K functions
            (:func:`~activebayes.models.predict_log_probs`' ``sampling``): ``"batched"`` (the
            layers before the first dropout run once per item) or ``"sequential"`` (K full
            passes, for a network that mixes activations from before and after its first dropout).
        num_classes: the C its logits must have, checked at :meth:`log_probs` (``None``: any).
        fit_options: keyword arguments of :func:`~activebayes.models.fit` (``lr``,
            ``max_epochs``, ...; not those :meth:`fit` passes itself: ``validation``,
            ``generator``, ``device``, ``multilabel``).
    """

    def __init__(self, module: nn.Module, *, sampling: str = "batched", num_classes: int | None = None,
                 **fit_options: Any) -> None:
        from activebayes.models.predict import SAMPLING_MODES
        from activebayes.models.training import check_fit_options

        if not isinstance(module, nn.Module):
            raise InvalidTypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        check_materialised(module, "module")
        check_choice(sampling, "sampling", SAMPLING_MODES)
        check_fit_options(fit_options, set_by="the posterior's fit")  # a misspelt key fails here, not in training
        self._module = module
        self.sampling = sampling
        self.fit_options = dict(fit_options)
        self._num_classes = None if num_classes is None else check_positive_int(num_classes, "num_classes")

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def num_functions(self) -> int | None:
        from activebayes.models.predict import FunctionSampler

        module = self._module
        if isinstance(module, FunctionSampler) and not isinstance(module, SampledFunctions):
            return int(module.num_function_samples)
        return None

    def fit(self, train, *, validation=None, generator=None, device=None) -> dict[str, Any]:
        from activebayes.models.heads import fit_posterior_module
        from activebayes.models.training import fit

        if no_labels(train):  # the prior: an untrained network, or Laplace's prior on its last layer
            return {**NO_LABELS, **fit_posterior_module(self._module, train)}
        summary = fit_summary(fit(self._module, train, validation=validation, generator=generator, device=device,
                                  **self.fit_options))
        # a posterior on top of the MAP network (last-layer Laplace): fitted on the training set
        summary.update(fit_posterior_module(self._module, train))
        return summary

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=512, device=None) -> Tensor:
        from activebayes.models.predict import predict_log_probs

        k = None if self.num_functions is not None else num_samples
        log_probs_N_K_C = predict_log_probs(self._module, inputs, k, batch_size=batch_size, generator=generator,
                                            device=device, sampling=self.sampling)
        if self._num_classes is not None and log_probs_N_K_C.shape[-1] != self._num_classes:
            raise InvalidArgumentError(num_classes_mismatch(self._num_classes, log_probs_N_K_C.shape[-1]))
        return log_probs_N_K_C

    def features(self, inputs, *, batch_size=512, device=None) -> Tensor:
        from activebayes.models.embeddings import last_linear, penultimate_features
        from activebayes.models.ensemble import Ensemble

        # an ensemble's members embed in different spaces: the first member's features
        module = self._module.members[0] if isinstance(self._module, Ensemble) else self._module
        try:
            last_linear(module, advice="a network's features are the input of its last nn.Linear")
            return penultimate_features(module, inputs, batch_size=batch_size, device=device)
        except (InvalidArgumentError, InvalidTypeError) as error:
            raise FeaturesUnavailableError(str(error)) from None

    def __repr__(self) -> str:
        return f"NetworkPosterior({type(self._module).__name__})"


def num_classes_mismatch(num_classes: int, outputs: int, layer: str = "the network") -> str:
    """The one message for a network whose logits do not have the ``num_classes`` a caller gave."""
    return (f"num_classes={num_classes} was given, but {layer} returns logits for {outputs} classes: pass "
            f"num_classes={outputs}, or give the network's last layer {num_classes} outputs")


#: The members of the :class:`Posterior` protocol.
POSTERIOR_MEMBERS = ("module", "num_functions", "fit", "log_probs", "features")


def _has_member(obj: object, name: str) -> bool:
    """Whether ``obj`` has ``name``, looked up without evaluating it (a property raising
    ``AttributeError`` before ``fit`` still counts); ``__getattr__`` proxies are asked too."""
    try:
        inspect.getattr_static(obj, name)
        return True
    except AttributeError:
        return hasattr(obj, name)


def missing_posterior_members(obj: object) -> list[str]:
    """The :class:`Posterior` members ``obj`` lacks (none: it is a posterior)."""
    return [name for name in POSTERIOR_MEMBERS if not _has_member(obj, name)]


def is_posterior(obj: object) -> bool:
    """Whether ``obj`` has the five :class:`Posterior` members (none of them is evaluated)."""
    return not missing_posterior_members(obj)


def not_a_model_error(model: object) -> InvalidTypeError:
    """``model must be a torch.nn.Module or an activebayes Posterior ...``, naming what it lacks."""
    missing = missing_posterior_members(model)
    lacks = f", which lacks {', '.join(missing)}" if len(missing) < len(POSTERIOR_MEMBERS) else ""
    return InvalidTypeError(
        f"model must be a torch.nn.Module or an activebayes Posterior ({', '.join(POSTERIOR_MEMBERS)}), "
        f"got {type(model).__name__}{lacks}"
    )


def posterior_features(posterior: Posterior, inputs: Any, **options: Any) -> Tensor:
    """``posterior.features(inputs, **options)``, a ``NotImplementedError`` raised as
    :class:`FeaturesUnavailableError` (the error strategies reading features explain)."""
    try:
        return posterior.features(inputs, **options)
    except NotImplementedError as error:
        detail = f": {error}" if str(error) else ""
        raise FeaturesUnavailableError(
            f"{type(posterior).__name__}.features is not implemented (it raised NotImplementedError{detail})"
        ) from None


def as_posterior(model: Posterior | nn.Module, **options: Any) -> Posterior:
    """``model`` itself if it is a :class:`Posterior`, else a :class:`NetworkPosterior` around it
    (``options``: its ``sampling`` and ``fit`` options)."""
    if isinstance(model, nn.Module):
        return NetworkPosterior(model, **options)
    if is_posterior(model):
        return model  # type: ignore[return-value]
    raise not_a_model_error(model)
