"""Adapters: Bayesian active learning with the user's own training code.

Each adapter is an :class:`activebayes.models.Posterior` (``module``, ``num_functions``,
``fit``, ``log_probs``, ``features``), so the loop, :func:`~activebayes.scoring.score_pool`
and every acquisition function run on it unchanged, and each emits the same
``log_probs_N_K_C`` whose sample ``k`` is one function for every item:

- :class:`LightningPosterior` (``activebayes.adapters.lightning``): a LightningModule
  and a factory of the user's ``lightning.Trainer``; fitting is ``trainer.fit`` and
  K-sample prediction ``trainer.predict`` with the :class:`MCDropoutPredictions` callback.
- :class:`HuggingFacePosterior` (``activebayes.adapters.huggingface``): a transformers
  sequence classifier, trained by its ``Trainer`` (``training_args=``) or by
  :func:`activebayes.models.fit`; consistent MC dropout over the whole pool, K honoured,
  the eval batch size honoured.
- :class:`SklearnPosterior` and :class:`PosteriorClassifier`
  (``activebayes.adapters.sklearn``): a scikit-learn classifier as K functions (a
  forest's trees, or bootstrap members), and an activebayes posterior as a
  scikit-learn estimator.

The third-party libraries are optional (``pip install "activebayes[adapters]"``) and
imported only when an adapter is used: ``import activebayes`` never needs them.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LightningPosterior": "lightning",
    "MCDropoutPredictions": "lightning",
    "PredictStepModule": "lightning",
    "HuggingFacePosterior": "huggingface",
    "HuggingFaceClassifier": "huggingface",
    "SklearnPosterior": "sklearn",
    "SklearnFunctions": "sklearn",
    "PosteriorClassifier": "sklearn",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'activebayes.adapters' has no attribute {name!r}")
    return getattr(importlib.import_module(f"activebayes.adapters.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
