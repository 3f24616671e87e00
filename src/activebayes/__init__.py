"""activebayes: Bayesian deep active learning on PyTorch.

Label less, learn more. The building blocks:

- :mod:`activebayes.models`: posteriors that return K coherent function samples
  (consistent MC dropout, deep ensembles), reference networks and ``fit``.
- :mod:`activebayes.acquisition`: acquisition functions on ``log_probs_N_K_C``
  and batch selection (top-k, BatchBALD, stochastic batch acquisition).
- :mod:`activebayes.data`: datasets and the labelled / unlabelled pool.
- :mod:`activebayes.loop` / :mod:`activebayes.experiment`: fit -> acquire -> label.
- :mod:`activebayes.metrics`, :mod:`activebayes.plots`, :mod:`activebayes.report`.

Nothing heavy happens at import time; submodules load on first use, either imported
(``import activebayes.metrics``) or as attributes (``activebayes.metrics.f1_score``).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "predict_log_probs": "activebayes.models",
    "fit": "activebayes.models",
    "select": "activebayes.acquisition",
    "Selection": "activebayes.acquisition",
}

#: the public submodules, loaded on first attribute access
_SUBMODULES = (
    "acquisition", "adapters", "analysis", "app", "data", "distributed", "errors", "experiment", "labelling",
    "labelstore", "loop", "metrics", "models", "oracles", "plots", "records", "report", "rundir", "scoring",
    "stopping",
)

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"activebayes.{name}")
    raise AttributeError(f"module 'activebayes' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})
