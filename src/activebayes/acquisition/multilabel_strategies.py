"""The multi-label strategies, registered by name through the public :func:`register_strategy`.

- ``multilabel_entropy``: top-k of the per-label predictive entropy summed over labels
  (:func:`~activebayes.acquisition.multilabel.multilabel_entropy`);
- ``multilabel_bald``: top-k of BALD summed over labels
  (:func:`~activebayes.acquisition.multilabel.multilabel_bald`);
- ``multilabel_power_bald``: the batch drawn without replacement with probability
  ``∝ BALD_Σ^β`` (stochastic batch acquisition, as ``power_bald``; option ``beta``,
  default 1), which spreads a batch that top-k would fill with near-duplicates;
- ``multilabel_badge``: BADGE's k-means++ seeding over the BCE gradient embeddings
  ``(p̄ - ŷ) ⊗ h`` (:func:`~activebayes.acquisition.multilabel.multilabel_gradient_factors`);
  reads the model's features like ``badge``;
- ``multilabel_batchbald``: greedy BatchBALD on label vectors, exact joint entropy while
  ``2^(C·|A|)`` configurations fit ``max_configurations``, sampled beyond
  (:func:`~activebayes.acquisition.multilabel.multilabel_batchbald`); its draws are seeded
  from ``select``'s generator.

All of them read ``log_probs_N_K_C`` in the multi-label convention: ``log P(y_c = 1 | x, w_k)``,
the log-sigmoid of the positive label (:class:`~activebayes.models.multilabel.MultiLabelPosterior`),
not a log-softmax. :data:`MULTILABEL_STRATEGIES` lists them; the loop accepts these, and
the strategies that read no predictions (``random``, ``typicality``), for a multi-label
dataset, and refuses them for a single-label one.

Importing :mod:`activebayes.acquisition` registers them.
"""

from __future__ import annotations

import torch

from activebayes.acquisition.multilabel import (
    DEFAULT_MAX_CONFIGURATIONS,
    DEFAULT_NUM_SAMPLES,
    multilabel_bald,
    multilabel_batchbald,
    multilabel_entropy,
    multilabel_gradient_factors,
)
from activebayes.acquisition.badge import badge_from_factors
from activebayes.acquisition.selection import BudgetPlan, Selection
from activebayes.acquisition.strategies import (
    available_strategies,
    register_strategy,
    stochastic_strategy,
    topk_strategy,
)
from activebayes.errors import InvalidArgumentError

__all__ = ["MULTILABEL_COUNTERPARTS", "MULTILABEL_STRATEGIES"]

#: The strategies that read multi-label predictions (log-sigmoid ``log_probs_N_K_C``).
MULTILABEL_STRATEGIES = ("multilabel_entropy", "multilabel_bald", "multilabel_power_bald", "multilabel_batchbald",
                         "multilabel_badge")

#: On a multi-label dataset the loop runs these for the single-label names (the default
#: ``badge`` included); the records and the run header name what ran.
MULTILABEL_COUNTERPARTS = {"badge": "multilabel_badge", "bald": "multilabel_bald", "power_bald": "multilabel_power_bald",
                           "entropy": "multilabel_entropy", "batchbald": "multilabel_batchbald"}


def _badge_strategy(
    predictions: torch.Tensor,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: object,
    features_N_D: torch.Tensor,
) -> Selection:
    """BADGE on label vectors: k-means++ seeding over ``(p̄ - ŷ) ⊗ h``."""
    factors_N_C = multilabel_gradient_factors(predictions)
    picked = badge_from_factors(factors_N_C, features_N_D, batch_size, generator=generator, plan=plan,
                                device=device)
    return Selection(picked.indices, picked.scores, name)


def _batchbald_strategy(
    predictions: torch.Tensor,
    batch_size: int,
    *,
    name: str,
    generator: torch.Generator | None,
    plan: BudgetPlan | None,
    device: object,
    max_configurations: int = DEFAULT_MAX_CONFIGURATIONS,
    num_samples: int = DEFAULT_NUM_SAMPLES,
    chunk_elements: int = 2**22,
) -> Selection:
    """Greedy multi-label BatchBALD; the sampled joint entropy is seeded from ``generator``."""
    if plan is not None:
        raise InvalidArgumentError("multilabel_batchbald does not support a cost budget (costs_N / cost_budget); "
                                   "use multilabel_bald with cost_aware=True instead")
    seed = 0 if generator is None else int(torch.randint(0, 2**62, (1,), generator=generator))
    picked = multilabel_batchbald(predictions, batch_size, max_configurations=max_configurations,
                                  num_samples=num_samples, seed=seed, chunk_elements=chunk_elements, device=device)
    return Selection(picked.indices, picked.scores, name)


def _register() -> None:
    known = set(available_strategies())
    if "multilabel_entropy" not in known:
        register_strategy("multilabel_entropy", topk_strategy(multilabel_entropy), mean_only=True)
    if "multilabel_bald" not in known:
        register_strategy("multilabel_bald", topk_strategy(multilabel_bald))
    if "multilabel_power_bald" not in known:
        register_strategy("multilabel_power_bald", stochastic_strategy(multilabel_bald, "power"))
    if "multilabel_batchbald" not in known:
        register_strategy("multilabel_batchbald", _batchbald_strategy)
    if "multilabel_badge" not in known:
        register_strategy("multilabel_badge", _badge_strategy, inputs=("log_probs", "features"), mean_only=True)


_register()
