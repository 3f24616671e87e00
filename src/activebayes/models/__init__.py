"""Posteriors: models that return K coherent function samples.

- Consistent MC dropout layers (:class:`ConsistentMCDropout`,
  :class:`ConsistentMCDropout2d`, :class:`MCDropoutLinear`, :class:`MCDropoutConv2d`),
  the converter :func:`mc_dropout` for a user's own model, :func:`resample_masks`.
- :func:`predict_log_probs`: ``[N, K, C]`` log-probabilities, the stochastic tail
  batched over K, memory-bounded chunks.
- :class:`Ensemble`: K members = K function samples, same interface.
- Reference networks :class:`GalCNN`, :class:`BatchBALDCNN`, :class:`MLP` and the
  registry :func:`build_model` / :func:`available_models`.
- Training: :func:`fit` -> :class:`FitResult`, :func:`reset_parameters`.
"""

from __future__ import annotations

from activebayes.models.dropout import (
    BatchedSamplingError,
    ConsistentMCDropout,
    ConsistentMCDropout2d,
    MCDropoutConv2d,
    MCDropoutLinear,
    mc_dropout,
    mc_dropout_layers,
    mc_sampling,
    resample_masks,
)
from activebayes.models.ensemble import Ensemble
from activebayes.models.networks import (
    MLP,
    BatchBALDCNN,
    GalCNN,
    available_models,
    build_model,
    default_model_name,
    register_model,
)
from activebayes.models.predict import SAMPLING_MODES, FunctionSampler, predict_log_probs
from activebayes.models.training import OPTIMIZERS, EpochRecord, FitResult, fit, reset_parameters

__all__ = [
    "BatchedSamplingError",
    "MLP",
    "OPTIMIZERS",
    "SAMPLING_MODES",
    "BatchBALDCNN",
    "ConsistentMCDropout",
    "ConsistentMCDropout2d",
    "Ensemble",
    "EpochRecord",
    "FitResult",
    "FunctionSampler",
    "GalCNN",
    "MCDropoutConv2d",
    "MCDropoutLinear",
    "available_models",
    "build_model",
    "default_model_name",
    "fit",
    "mc_dropout",
    "mc_dropout_layers",
    "mc_sampling",
    "predict_log_probs",
    "register_model",
    "reset_parameters",
    "resample_masks",
]
