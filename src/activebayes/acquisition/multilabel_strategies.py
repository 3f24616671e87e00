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
  ``2^(C·|A|)`` configurations fit ``max_exact_configs``, sampled from ``num_configurations``
  joint draws beyond (:func:`~activebayes.acquisition.multilabel.multilabel_batchbald`); its
  draws are seeded from ``select``'s generator (``None``: torch's global generator, as
  ``batchbald``). It takes ``batchbald``'s options, so the loop, which runs it for
  ``batchbald`` on a multi-label dataset, accepts the same ``acquisition_options``:
  ``num_configurations``, ``max_exact_configs``, ``chunk_size``, ``progress``, ``prefilter``
  (BatchBALD on the items of highest summed BALD), ``cost_aware`` (a cost budget is refused,
  though); ``num_samples`` and ``max_configurations`` are their deprecated names
  (a ``DeprecationWarning``), ``chunk_elements`` its own. ``dtype`` is not an option:
  the joint entropies are always float64.

All of them read ``log_probs_N_K_C`` in the multi-label convention: ``log P(y_c = 1 | x, w_k)``,
the log-sigmoid of the positive label (:class:`~activebayes.models.multilabel.MultiLabelPosterior`),
not a log-softmax. :data:`MULTILABEL_STRATEGIES` lists them; the loop accepts these, and
the strategies that read no predictions (``random``, ``typicality``), for a multi-label
dataset, and refuses them for a single-label one.

Importing :mod:`activebayes.acquisition` registers them.
"""

from __future__ import annotations

from typing import Any

import torch

from activebayes.acquisition.multilabel import (
    DEFAULT_MAX_EXACT_CONFIGS,
    DEFAULT_NUM_CONFIGURATIONS,
    multilabel_bald,
    multilabel_batchbald,
    multilabel_entropy,
    multilabel_gradient_factors,
)
from activebayes.acquisition.badge import badge_from_factors
from activebayes.acquisition.selection import BudgetPlan, Selection
from activebayes.acquisition.strategies import _check_batchbald_options as check_batchbald_options
from activebayes.acquisition.strategies import (
    CheckedCall,
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
    num_configurations: int = DEFAULT_NUM_CONFIGURATIONS,
    max_exact_configs: int = DEFAULT_MAX_EXACT_CONFIGS,
    cost_aware: bool = False,
    chunk_size: int | None = None,
    progress: bool = False,
    prefilter: int | None = None,
    chunk_elements: int = 2**22,
) -> Selection:
    """Greedy multi-label BatchBALD with ``batchbald``'s options (see the module docstring).

    The sampled joint entropy draws from a generator seeded by one draw from ``generator``
    (as it always has, so seeded runs pick what they picked); ``None`` draws from torch's
    global generator, as ``batchbald`` does.
    """
    if plan is not None:
        raise InvalidArgumentError("multilabel_batchbald does not support a cost budget (costs_N / cost_budget); "
                                   "use multilabel_bald with cost_aware=True instead")
    draws = None if generator is None else torch.Generator().manual_seed(
        int(torch.randint(0, 2**62, (1,), generator=generator)))
    kept_M = None
    if prefilter is not None and prefilter < predictions.shape[0]:
        # the gain of an item, I[y_n; w | y_A] <= I[y_n; w] <= its summed BALD: keep the highest
        # (ties: the lower index), in index order
        order = torch.sort(multilabel_bald(predictions), descending=True, stable=True).indices
        kept_M = order[:prefilter].sort().values.cpu()
        predictions = predictions[kept_M]
    picked = multilabel_batchbald(predictions, batch_size, num_configurations=num_configurations,
                                  max_exact_configs=max_exact_configs, generator=draws,
                                  chunk_elements=chunk_elements, chunk_size=chunk_size, device=device,
                                  progress=progress)
    indices = picked.indices if kept_M is None else kept_M[picked.indices]
    return Selection(indices, picked.scores, name)


def _check_batchbald_options(options: dict[str, Any], call: CheckedCall) -> dict[str, Any]:
    """``batchbald``'s check (``prefilter`` keeps at least a batch); ``prefilter=None`` is no pre-filter."""
    if options.get("prefilter", 0) is None:
        del options["prefilter"]  # the strategy's default
    return check_batchbald_options(options, call)


def _register() -> None:
    known = set(available_strategies())
    if "multilabel_entropy" not in known:
        register_strategy("multilabel_entropy", topk_strategy(multilabel_entropy), mean_only=True)
    if "multilabel_bald" not in known:
        register_strategy("multilabel_bald", topk_strategy(multilabel_bald), disagreement=True)
    if "multilabel_power_bald" not in known:
        register_strategy("multilabel_power_bald", stochastic_strategy(multilabel_bald, "power"), disagreement=True)
    if "multilabel_batchbald" not in known:
        register_strategy("multilabel_batchbald", _batchbald_strategy, option_check=_check_batchbald_options,
                          renamed_options={"num_samples": "num_configurations",
                                           "max_configurations": "max_exact_configs"}, disagreement=True)
    if "multilabel_badge" not in known:
        register_strategy("multilabel_badge", _badge_strategy, inputs=("log_probs", "features"), mean_only=True)


_register()
