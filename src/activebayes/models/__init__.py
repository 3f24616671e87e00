"""Posteriors: models that return K coherent function samples.

- Consistent MC dropout layers (:class:`ConsistentMCDropout`,
  :class:`ConsistentMCDropout2d`, :class:`MCDropoutLinear`, :class:`MCDropoutConv2d`),
  the converter :func:`mc_dropout` for a user's own model, :func:`resample_masks`,
  and :func:`channel_masked_conv2d` (a convolution under k channel masks at once).
- :func:`predict_log_probs`: ``[N, K, C]`` log-probabilities, the stochastic tail
  batched over K, memory-bounded chunks.
- :class:`Ensemble`: K members = K function samples, same interface.
- Reference networks :class:`GalCNN`, :class:`BatchBALDCNN`, :class:`MLP` and the
  registry :func:`build_model` / :func:`available_models`.
- The posterior protocol (:class:`Posterior`, :class:`NetworkPosterior`,
  :func:`as_posterior`): what the loop needs from any model kind.
- Training: :func:`fit` -> :class:`FitResult`, :func:`reset_parameters`.
- A representation learnt from the unlabelled pool (SimCLR):
  :func:`train_or_load_representation` -> :class:`Representation`, :func:`features`,
  and :class:`EncoderClassifier` (``build_model("encoder_head", ..., encoder=...)``).
"""

from __future__ import annotations

from activebayes.models.dropout import (
    BatchedSamplingError,
    ConsistentMCDropout,
    ConsistentMCDropout2d,
    MCDropoutConv2d,
    MCDropoutLinear,
    channel_masked_conv2d,
    mc_dropout,
    mc_dropout_layers,
    mc_sampling,
    resample_masks,
)
from activebayes.models.ensemble import Ensemble
from activebayes.models.networks import (
    MLP,
    BatchBALDCNN,
    EncoderClassifier,
    GalCNN,
    available_models,
    build_model,
    default_model_name,
    register_model,
)
from activebayes.models.posterior import (
    FeaturesUnavailableError,
    NetworkPosterior,
    Posterior,
    SampledFunctions,
    as_posterior,
)
from activebayes.models.predict import SAMPLING_MODES, FunctionSampler, predict_log_probs
from activebayes.models.representation import (
    Augmentation,
    ConvEncoder,
    Representation,
    RepresentationConfig,
    features,
    train_encoder,
    train_or_load_representation,
)
from activebayes.models.training import OPTIMIZERS, EpochRecord, FitResult, fit, reset_parameters
from activebayes.models.encoders import FrozenEncoder, compute_embeddings, embeddings_dataset, encode_pool
from activebayes.models.laplace import LastLayerLaplace, probit_predictive
from activebayes.models.heads import POSTERIORS, build_head, build_posterior, last_layer_laplace
from activebayes.models.multilabel import MultiLabelPosterior

__all__ = [
    "BatchedSamplingError",
    "MLP",
    "MultiLabelPosterior",
    "OPTIMIZERS",
    "SAMPLING_MODES",
    "Augmentation",
    "BatchBALDCNN",
    "ConsistentMCDropout",
    "ConsistentMCDropout2d",
    "ConvEncoder",
    "EncoderClassifier",
    "Ensemble",
    "EpochRecord",
    "FeaturesUnavailableError",
    "FitResult",
    "FrozenEncoder",
    "LastLayerLaplace",
    "POSTERIORS",
    "FunctionSampler",
    "GalCNN",
    "MCDropoutConv2d",
    "MCDropoutLinear",
    "NetworkPosterior",
    "Posterior",
    "Representation",
    "SampledFunctions",
    "RepresentationConfig",
    "as_posterior",
    "available_models",
    "build_head",
    "build_model",
    "build_posterior",
    "compute_embeddings",
    "encode_pool",
    "embeddings_dataset",
    "last_layer_laplace",
    "probit_predictive",
    "channel_masked_conv2d",
    "default_model_name",
    "features",
    "fit",
    "mc_dropout",
    "mc_dropout_layers",
    "mc_sampling",
    "predict_log_probs",
    "register_model",
    "reset_parameters",
    "resample_masks",
    "train_encoder",
    "train_or_load_representation",
]
