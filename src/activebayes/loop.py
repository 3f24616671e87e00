"""The active learning loop: fit -> evaluate -> score the pool -> acquire -> label.

One round ``r`` of :class:`ActiveLearningLoop`:

1. build the model afresh (seeded by ``(seed, r)``; or keep the previous
   weights with ``warm_start=True``) and ``fit`` it on the labelled set, with
   early stopping on the validation set;
2. evaluate it on validation (and test) with ``K = eval_samples`` function samples;
3. stop if a stopping criterion fires (label budget, cost budget, target
   accuracy, plateau);
4. score the unlabelled pool (optionally a random subsample of it) with the
   acquisition strategy on ``K = num_samples`` function samples and select
   ``batch_size`` items;
5. ask the oracle for their labels and add them to the labelled set.

Every random step draws from a generator derived from ``(seed, round, purpose)``
(:mod:`activebayes._seeding`), so a round is a pure function of the config and
the labelled set at its start: a run resumed from its records ends exactly as an
uninterrupted one.

Example::

    >>> from activebayes.loop import LoopConfig, ActiveLearningLoop
    >>> loop = ActiveLearningLoop(LoopConfig(strategy="bald", budget=40))
    >>> result = loop.run(progress=False)            # doctest: +SKIP
    >>> result.rounds[-1].metrics["test_accuracy"]    # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from activebayes._seeding import make_generator, seeded_global_rng
from activebayes._validation import check_choice, check_positive_int

# --------------------------------------------------------------------------- config

INITIAL_CHOICES = ("balanced", "random", "empty")


@dataclass(frozen=True)
class LoopConfig:
    """Everything that defines one active learning run (JSON-serialisable).

    Label counts include the initial labelled set: ``budget=200`` stops once
    200 items are labelled. ``model="auto"`` picks an MLP for vectors and small
    images (the 8x8 digits) and the BatchBALD CNN for larger images
    (:func:`activebayes.models.default_model_name`).

    Two sample counts: ``num_samples`` (K for scoring the pool) and
    ``eval_samples`` (K for the validation / test predictive, the mean of the K
    probabilities). Acquisition needs many: BALD is a small difference of two
    entropies, and on real MNIST with the Gal CNN two independent K = 20 draws
    agree on only 15-25% of the top 10 BALD picks (55-60% at K = 100; see
    docs/benchmarks.md). The predictive mean needs few. The defaults, 100 and 20,
    follow the BatchBALD reference setup.
    """

    dataset: str = "digits"
    data_dir: str | None = None
    download: bool = False
    strategy: str = "bald"
    model: str = "auto"
    ensemble_size: int | None = None
    seed: int = 0
    initial: str = "balanced"
    initial_size: int = 20
    validation_size: int = 100
    batch_size: int = 10
    budget: int = 150
    cost_budget: float | None = None
    costs_file: str | None = None
    num_samples: int = 100
    eval_samples: int = 20
    pool_subsample: int | None = None
    target_accuracy: float | None = None
    plateau_patience: int | None = None
    plateau_min_delta: float = 0.0
    warm_start: bool = False
    evaluate_test: bool = True
    fit_options: Mapping[str, Any] = field(default_factory=dict)
    model_options: Mapping[str, Any] = field(default_factory=dict)
    acquisition_options: Mapping[str, Any] = field(default_factory=dict)
    predict_batch_size: int = 512
    checkpoints: bool = True
    device: str | None = None

    def __post_init__(self) -> None:
        check_choice(self.initial, "initial", INITIAL_CHOICES)
        for name in ("batch_size", "budget", "num_samples", "eval_samples", "predict_batch_size"):
            check_positive_int(getattr(self, name), name)
        for name in ("initial_size", "validation_size"):
            check_positive_int(getattr(self, name), name, allow_zero=True)
        check_positive_int(self.seed, "seed", allow_zero=True)
        if self.initial == "empty" and self.initial_size:
            object.__setattr__(self, "initial_size", 0)
        if self.initial != "empty" and self.initial_size == 0:
            raise ValueError("initial_size must be >= 1 unless initial='empty', got 0")
        if self.budget <= self.initial_size:
            raise ValueError(
                f"budget must be larger than initial_size (the labels already given), "
                f"got budget={self.budget} and initial_size={self.initial_size}"
            )
        if self.budget < self.batch_size:
            raise ValueError(
                f"budget must be at least batch_size, got budget={self.budget} "
                f"and batch_size={self.batch_size}"
            )
        for name in ("ensemble_size", "pool_subsample", "plateau_patience"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(value, name)
        if self.ensemble_size is not None and self.ensemble_size < 2:
            raise ValueError(f"ensemble_size must be >= 2, got {self.ensemble_size}")
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise ValueError(f"target_accuracy must be in (0, 1], got {self.target_accuracy}")
        if self.cost_budget is not None and not self.cost_budget > 0:
            raise ValueError(f"cost_budget must be > 0, got {self.cost_budget}")
        if self.costs_file is not None and self.cost_budget is None:
            raise ValueError("costs_file needs cost_budget (the total labelling cost allowed)")
        # freeze the nested option mappings into plain dicts (JSON round trip)
        for name in ("fit_options", "model_options", "acquisition_options"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise TypeError(f"{name} must be a mapping, got {type(value).__name__}")
            object.__setattr__(self, name, dict(value))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown config key(s) {', '.join(map(repr, unknown))}; "
                f"expected some of: {', '.join(sorted(known))}"
            )
        return cls(**dict(data))

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> LoopConfig:
        """A config read back from a run directory, written by any earlier version.

        Configs written before ``eval_samples`` existed evaluated with
        ``num_samples`` function samples; they keep doing so on resume.
        """
        data = dict(data)
        if "eval_samples" not in data and "num_samples" in data:
            data["eval_samples"] = data["num_samples"]
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> LoopConfig:
        return dataclasses.replace(self, **changes)


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RoundRecord:
    """What one round did, as stored in ``rounds.jsonl``.

    ``n_labelled`` is the size of the labelled set the model of this round was
    trained on (and evaluated with); ``acquired`` are the original dataset
    indices chosen this round, in pick order, with their ``scores``.
    """

    round: int
    n_labelled: int
    acquired: list[int]
    scores: list[float]
    labels: list[int]
    metrics: dict[str, Any]
    class_counts: list[int]
    cost_spent: float
    fit: dict[str, Any]
    seconds: dict[str, float]
    stop_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundRecord:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class LoopResult:
    config: LoopConfig
    rounds: list[RoundRecord]
    stop_reason: str
    labelled_indices: list[int]

    @property
    def learning_curve(self) -> tuple[list[int], list[float]]:
        """``(n_labelled, test_accuracy)`` per round (validation accuracy without a test set)."""
        key = "test_accuracy" if self.rounds and "test_accuracy" in self.rounds[0].metrics else "validation_accuracy"
        return [r.n_labelled for r in self.rounds], [r.metrics[key] for r in self.rounds]


# --------------------------------------------------------------------------- stopping


class StoppingCriterion(Protocol):
    """Decides after a round's evaluation whether to stop; returns a reason or None."""

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> str | None: ...


@dataclass(frozen=True)
class LabelBudget:
    budget: int

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> str | None:
        return f"label budget reached ({n_labelled} >= {self.budget})" if n_labelled >= self.budget else None


@dataclass(frozen=True)
class CostBudget:
    budget: float
    min_cost: float

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> str | None:
        if cost_spent + self.min_cost > self.budget + 1e-9:
            return f"cost budget reached ({cost_spent:g} spent of {self.budget:g})"
        return None


@dataclass(frozen=True)
class TargetAccuracy:
    target: float
    metric: str = "test_accuracy"

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> str | None:
        value = history[-1].metrics.get(self.metric) if history else None
        if value is not None and value >= self.target:
            return f"target {self.metric} {self.target:g} reached ({value:.4f})"
        return None


@dataclass(frozen=True)
class Plateau:
    """Stop when ``metric`` has not improved by ``min_delta`` for ``patience`` rounds."""

    patience: int
    min_delta: float = 0.0
    metric: str = "validation_accuracy"

    def __call__(self, history: Sequence[RoundRecord], *, n_labelled: int, cost_spent: float) -> str | None:
        values = [r.metrics.get(self.metric) for r in history]
        if len(values) <= self.patience or any(v is None for v in values):
            return None
        best_before = max(values[: -self.patience])
        if max(values[-self.patience :]) < best_before + self.min_delta:
            return f"plateau: {self.metric} did not improve for {self.patience} rounds"
        return None


# --------------------------------------------------------------------------- the loop

Oracle = Callable[[Tensor], Tensor]


class ActiveLearningLoop:
    """The fit / evaluate / acquire / label loop over a :class:`~activebayes.data.Pool`.

    Parameters are keyword-only overrides of what ``config`` would load: pass a
    ``dataset`` / ``test`` (``ArrayDataset``) to use your own data, an ``oracle``
    (any callable ``indices_B -> labels_B``, e.g. a ``SimulatedOracle``), a
    ``model_factory`` (``generator -> nn.Module``) for your own network, and
    ``costs_N`` (per-item labelling cost, indexed by original dataset index;
    ``config.costs_file`` loads them from a file instead).
    """

    def __init__(
        self,
        config: LoopConfig | None = None,
        *,
        dataset: Any = None,
        test: Any = None,
        oracle: Oracle | None = None,
        model_factory: Callable[[torch.Generator], torch.nn.Module] | None = None,
        costs_N: Tensor | None = None,
        stopping: Sequence[StoppingCriterion] = (),
    ) -> None:
        from activebayes.acquisition import get_strategy
        from activebayes.data import Pool, SimulatedOracle, load_dataset

        self.config = config = config or LoopConfig()
        self._strategy = get_strategy(config.strategy)  # fails early on unknown names
        if dataset is None:
            dataset = load_dataset(config.dataset, data_dir=config.data_dir, download=config.download, split="train")
            if test is None and config.evaluate_test:
                test = load_dataset(config.dataset, data_dir=config.data_dir, download=config.download, split="test")
        self.dataset = dataset
        self.test = test if config.evaluate_test else None
        self.oracle: Oracle = oracle if oracle is not None else SimulatedOracle(dataset)
        self.model_factory = model_factory or self._default_model_factory
        needed = config.initial_size + config.validation_size + config.batch_size
        if needed > len(dataset):
            raise ValueError(
                f"dataset {getattr(dataset, 'name', '')!r} has {len(dataset)} items, fewer than "
                f"initial_size + validation_size + batch_size = {needed}"
            )
        if costs_N is None and config.costs_file is not None:
            costs_N = _read_costs(config.costs_file)
        self.costs_N = self._check_costs(costs_N, len(dataset))
        self.pool = Pool.create(
            dataset,
            validation_size=config.validation_size,
            initial_size=config.initial_size,
            initial=config.initial,
            generator=make_generator(config.seed, "pool"),
        )
        self.stopping: list[StoppingCriterion] = [LabelBudget(config.budget), *stopping]
        if config.cost_budget is not None:
            if self.costs_N is None:
                raise ValueError("cost_budget needs per-item costs: pass costs_N")
            self.stopping.append(CostBudget(config.cost_budget, float(self.costs_N.min())))
        if config.target_accuracy is not None:
            metric = "test_accuracy" if self.test is not None else "validation_accuracy"
            self.stopping.append(TargetAccuracy(config.target_accuracy, metric))
        if config.plateau_patience is not None:
            self.stopping.append(Plateau(config.plateau_patience, config.plateau_min_delta))
        self.history: list[RoundRecord] = []
        self.cost_spent = 0.0
        self.model: torch.nn.Module | None = None
        self.stop_reason: str | None = None

    # ----------------------------------------------------------------- helpers

    @staticmethod
    def _check_costs(costs_N: Tensor | None, n: int) -> Tensor | None:
        if costs_N is None:
            return None
        costs_N = torch.as_tensor(costs_N, dtype=torch.float64)
        if costs_N.shape != (n,):
            raise ValueError(f"costs_N must have shape [{n}] (one cost per dataset item), got {tuple(costs_N.shape)}")
        if not bool(torch.isfinite(costs_N).all()) or bool((costs_N <= 0).any()):
            raise ValueError("costs_N must be finite and > 0 for every item")
        return costs_N

    def _default_model_factory(self, generator: torch.Generator) -> torch.nn.Module:
        from activebayes.models import build_model

        config = self.config
        options = dict(config.model_options)
        if config.ensemble_size is not None:
            options["ensemble_size"] = config.ensemble_size
        return build_model(
            config.model,
            num_classes=self.dataset.num_classes,
            input_shape=tuple(self.dataset.input_shape),
            generator=generator,
            **options,
        )

    def _build_model(self, r: int) -> torch.nn.Module:
        """Round ``r``'s freshly initialised model; the global RNG is seeded too, so
        factories that use PyTorch's default initialisers are reproducible."""
        with seeded_global_rng(self.config.seed, "model-init", r):
            return self.model_factory(make_generator(self.config.seed, "model", r))

    def _predict(self, model: torch.nn.Module, inputs: Tensor, *, key: str, num_samples: int) -> Tensor:
        from activebayes.models import Ensemble, predict_log_probs

        k = None if isinstance(model, Ensemble) else num_samples
        return predict_log_probs(
            model,
            inputs,
            k,
            batch_size=self.config.predict_batch_size,
            generator=make_generator(self.config.seed, len(self.history), key),
            device=self.config.device,
        )

    # ----------------------------------------------------------------- state

    def restore(self, records: Sequence[RoundRecord], model_state: Mapping[str, Any] | None = None) -> None:
        """Replay completed rounds (from ``rounds.jsonl``) onto a fresh loop."""
        if self.history:
            raise RuntimeError("restore() must be called on a fresh loop")
        for record in records:
            if record.acquired:
                self.pool.label(torch.tensor(record.acquired, dtype=torch.long),
                                torch.tensor(record.labels, dtype=torch.long))
            self.history.append(record)
            self.cost_spent = record.cost_spent
            if record.stop_reason:
                self.stop_reason = record.stop_reason
        if model_state is not None:
            self.model = self._build_model(len(records) - 1)
            self.model.load_state_dict(model_state)

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None

    # ----------------------------------------------------------------- one round

    def step(self) -> RoundRecord:
        """Run one round and return its record (see the module docstring)."""
        from activebayes.metrics import evaluate_classification
        from activebayes.models import fit

        if self.finished:
            raise RuntimeError(f"the loop has already stopped: {self.stop_reason}")
        config = self.config
        r = len(self.history)
        seconds: dict[str, float] = {}
        pool = self.pool
        n_labelled = len(pool.labelled_indices)

        # 1. fit
        tic = time.perf_counter()
        if self.model is None or not config.warm_start:
            self.model = self._build_model(r)
        model = self.model
        validation = pool.validation_data() if config.validation_size else None
        if n_labelled > 0:
            with seeded_global_rng(config.seed, "fit", r):
                fit_result = fit(
                    model,
                    pool.labelled_data(),
                    validation=validation,
                    generator=make_generator(config.seed, "fit", r),
                    device=config.device,
                    **dict(config.fit_options),
                )
            fit_info = _fit_summary(fit_result)
        else:
            fit_info = {"skipped": "no labelled data"}
        seconds["fit"] = time.perf_counter() - tic

        # 2. evaluate
        tic = time.perf_counter()
        metrics: dict[str, Any] = {}
        num_classes = self.dataset.num_classes
        if validation is not None:
            log_probs = self._predict(model, validation[0], key="validation", num_samples=config.eval_samples)
            for name, value in evaluate_classification(log_probs, validation[1], num_classes=num_classes).items():
                metrics[f"validation_{name}"] = value
        if self.test is not None and self.test.targets is not None:
            log_probs = self._predict(model, self.test.inputs, key="test", num_samples=config.eval_samples)
            for name, value in evaluate_classification(log_probs, self.test.targets, num_classes=num_classes).items():
                metrics[f"test_{name}"] = value
        seconds["evaluate"] = time.perf_counter() - tic

        # 3. stop?
        class_counts = [int(c) for c in pool.class_counts()]
        provisional = RoundRecord(r, n_labelled, [], [], [], metrics, class_counts, self.cost_spent, fit_info, _rounded(seconds))
        reason = self._stop_reason([*self.history, provisional], n_labelled)
        if reason is None and len(pool.unlabelled_indices) == 0:
            reason = "the unlabelled pool is empty"
        if reason is not None:
            record = dataclasses.replace(provisional, stop_reason=reason)
            self.history.append(record)
            self.stop_reason = reason
            return record

        # 4. acquire
        tic = time.perf_counter()
        acquired, scores = self._acquire(model, n_labelled, r, fit_info)
        seconds["acquire"] = time.perf_counter() - tic

        # 5. label
        tic = time.perf_counter()
        labels = torch.as_tensor(self.oracle(acquired), dtype=torch.long)
        pool.label(acquired, labels)
        if self.costs_N is not None:
            self.cost_spent += float(self.costs_N[acquired].sum())
        seconds["label"] = time.perf_counter() - tic

        record = RoundRecord(
            round=r,
            n_labelled=n_labelled,
            acquired=[int(i) for i in acquired],
            scores=[float(s) for s in scores],
            labels=[int(y) for y in labels],
            metrics=metrics,
            class_counts=class_counts,
            cost_spent=self.cost_spent,
            fit=fit_info,
            seconds=_rounded(seconds),
        )
        self.history.append(record)
        return record

    def _stop_reason(self, history: Sequence[RoundRecord], n_labelled: int) -> str | None:
        for criterion in self.stopping:
            reason = criterion(history, n_labelled=n_labelled, cost_spent=self.cost_spent)
            if reason is not None:
                return reason
        return None

    def _acquire(self, model: torch.nn.Module, n_labelled: int, r: int, fit_info: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        from activebayes.acquisition import select

        config = self.config
        candidates_N = self.pool.unlabelled_indices
        if config.pool_subsample is not None and len(candidates_N) > config.pool_subsample:
            keep = torch.randperm(len(candidates_N), generator=make_generator(config.seed, "subsample", r))
            candidates_N = candidates_N[keep[: config.pool_subsample]].sort().values
        batch_size = min(config.batch_size, config.budget - n_labelled, len(candidates_N))
        options = dict(config.acquisition_options)
        cost_options: dict[str, Any] = {}
        if self.costs_N is not None and config.cost_budget is not None:
            cost_options = {"costs_N": self.costs_N[candidates_N], "budget": config.cost_budget - self.cost_spent}
        generator = make_generator(config.seed, "acquire", r)
        if n_labelled == 0 or not self._strategy.needs_predictions:
            # nothing to be uncertain with yet (or a strategy that ignores the model)
            strategy = "random" if self._strategy.needs_predictions else config.strategy
            selection = select(len(candidates_N), strategy, batch_size, generator=generator, **cost_options)
        else:
            log_probs = self._predict(model, self.dataset.inputs[candidates_N], key="pool", num_samples=config.num_samples)
            selection = select(log_probs, config.strategy, batch_size, generator=generator,
                               device=config.device, **cost_options, **options)
        return candidates_N[selection.indices], selection.scores

    # ----------------------------------------------------------------- all rounds

    def rounds(self) -> Iterator[RoundRecord]:
        """Yield each round's record until a stopping criterion fires."""
        while not self.finished:
            yield self.step()

    def run(self, *, progress: bool = True, on_round: Callable[[RoundRecord], None] | None = None) -> LoopResult:
        from tqdm.auto import tqdm

        config = self.config
        total = math.ceil((config.budget - config.initial_size) / config.batch_size) + 1
        with tqdm(total=total, initial=len(self.history), disable=not progress,
                  desc=f"{config.strategy} seed {config.seed}", unit="round", leave=False) as bar:
            for record in self.rounds():
                if on_round is not None:
                    on_round(record)
                acc = record.metrics.get("test_accuracy", record.metrics.get("validation_accuracy"))
                bar.set_postfix(labels=record.n_labelled, acc=f"{acc:.3f}" if acc is not None else "-")
                bar.update(1)
        return self.result()

    def result(self) -> LoopResult:
        return LoopResult(
            config=self.config,
            rounds=list(self.history),
            stop_reason=self.stop_reason or "not finished",
            labelled_indices=[int(i) for i in self.pool.labelled_indices],
        )


def _read_costs(path: str) -> Tensor:
    """Per-item labelling costs from a ``.npy`` file or a text file with one number per line."""
    import numpy as np

    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"costs_file: no such file {path}")
    try:
        values = np.load(file) if file.suffix == ".npy" else np.loadtxt(file, dtype=np.float64, ndmin=1)
    except (ValueError, OSError) as error:
        raise ValueError(f"costs_file: {path} is not a .npy array or a text file of numbers ({error})") from None
    return torch.as_tensor(np.asarray(values, dtype=np.float64).reshape(-1))


def _rounded(seconds: Mapping[str, float]) -> dict[str, float]:
    return {key: round(value, 4) for key, value in seconds.items()}


def _fit_summary(fit_result: Any) -> dict[str, Any]:
    """The JSON-friendly scalar fields of a ``FitResult``."""
    if dataclasses.is_dataclass(fit_result):
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


__all__ = [
    "ActiveLearningLoop",
    "CostBudget",
    "LabelBudget",
    "LoopConfig",
    "LoopResult",
    "Plateau",
    "RoundRecord",
    "StoppingCriterion",
    "TargetAccuracy",
]
