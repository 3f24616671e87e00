"""When the loop stops: criteria checked after each round's evaluation.

A criterion is a callable ``criterion(history, *, n_labelled, cost_spent)`` that returns
``None`` (go on) or a :class:`StopReason`: a machine-readable ``kind`` and a sentence
``detail`` for people. Records store both (``RoundRecord.stop_kind`` and
``RoundRecord.stop_reason``) and readers test the kind, never the wording.

``history`` ends with the current round's provisional record (its metrics are the
current model's), so a criterion sees every evaluation so far.

Example::

    >>> from activebayes.stopping import LabelBudget
    >>> LabelBudget(100)([], n_labelled=100, cost_spent=0.0)
    StopReason(kind='label_budget', detail='label budget reached (100 >= 100)')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from activebayes.records import LABEL_BUDGET_REACHED, headline_metric

if TYPE_CHECKING:
    from activebayes.records import RoundRecord

__all__ = [
    "COST_BUDGET",
    "CUSTOM",
    "EMPTY_POOL",
    "LABEL_BUDGET",
    "PLATEAU",
    "TARGET",
    "CostBudget",
    "LabelBudget",
    "Plateau",
    "StopReason",
    "StoppingCriterion",
    "TargetAccuracy",
    "first_stop",
    "stop_kind_of",
]

#: Kinds of stop (``StopReason.kind``).
LABEL_BUDGET = "label_budget"
COST_BUDGET = "cost_budget"
TARGET = "target"
PLATEAU = "plateau"
EMPTY_POOL = "empty_pool"
#: a user's criterion that returned a plain string
CUSTOM = "custom"


@dataclass(frozen=True)
class StopReason:
    """Why the loop stops: ``kind`` (one of the module's constants, or a user criterion's
    own) and ``detail``, a sentence for people."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return self.detail


class StoppingCriterion(Protocol):
    """Decides after a round's evaluation whether to stop; returns a reason or ``None``."""

    def __call__(
        self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float
    ) -> StopReason | str | None: ...


@dataclass(frozen=True)
class LabelBudget:
    """Stop once ``budget`` items are labelled."""

    budget: int

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        if n_labelled >= self.budget:
            return StopReason(LABEL_BUDGET, f"{LABEL_BUDGET_REACHED} ({n_labelled} >= {self.budget})")
        return None


@dataclass(frozen=True)
class CostBudget:
    """Stop once not even the cheapest item (``min_cost``) fits in what is left of ``budget``."""

    budget: float
    min_cost: float

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        if cost_spent + self.min_cost > self.budget + 1e-9:
            return StopReason(COST_BUDGET, f"cost budget reached ({cost_spent:g} spent of {self.budget:g})")
        return None


@dataclass(frozen=True)
class TargetAccuracy:
    """Stop once ``metric`` reaches ``target`` (default: the headline metric, test accuracy
    when there is a test set, else validation accuracy)."""

    target: float
    metric: str | None = None

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        if not history:
            return None
        metrics = history[-1].metrics
        metric = self.metric or headline_metric(metrics)
        value = metrics.get(metric)
        if value is not None and value >= self.target:
            return StopReason(TARGET, f"target {metric} {self.target:g} reached ({value:.4f})")
        return None


@dataclass(frozen=True)
class Plateau:
    """Stop when ``metric`` has not improved by ``min_delta`` for ``patience`` rounds."""

    patience: int
    min_delta: float = 0.0
    metric: str = "validation_accuracy"

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> StopReason | None:
        values = [r.metrics.get(self.metric) for r in history]
        if len(values) <= self.patience or any(v is None for v in values):
            return None
        best_before = max(values[: -self.patience])
        if max(values[-self.patience :]) < best_before + self.min_delta:
            return StopReason(PLATEAU, f"plateau: {self.metric} did not improve for {self.patience} rounds")
        return None


def first_stop(
    criteria: Iterable[StoppingCriterion],
    history: Sequence[RoundRecord],
    *,
    n_labelled: int,
    cost_spent: float,
    n_unlabelled: int,
) -> StopReason | None:
    """The first criterion that fires, else an empty pool, else ``None``. No side effects."""
    for criterion in criteria:
        reason = criterion(history, n_labelled=n_labelled, cost_spent=cost_spent)
        if isinstance(reason, str):
            reason = StopReason(CUSTOM, reason)
        if reason is not None:
            return reason
    if n_unlabelled == 0:
        return StopReason(EMPTY_POOL, "the unlabelled pool is empty")
    return None


#: how the stop sentences of records written before ``stop_kind`` was stored begin
_LEGACY_PREFIXES = (
    (LABEL_BUDGET_REACHED, LABEL_BUDGET),
    ("cost budget reached", COST_BUDGET),
    ("target ", TARGET),
    ("plateau:", PLATEAU),
    ("the unlabelled pool is empty", EMPTY_POOL),
)


def stop_kind_of(record: RoundRecord) -> str | None:
    """The kind of stop of ``record`` (``None`` if it did not stop the run).

    Records written before the kind was stored only have the sentence: its known
    beginnings are read here, and nowhere else.
    """
    if record.stop_reason is None:
        return None
    if record.stop_kind is not None:
        return record.stop_kind
    for prefix, kind in _LEGACY_PREFIXES:
        if record.stop_reason.startswith(prefix):
            return kind
    return CUSTOM
