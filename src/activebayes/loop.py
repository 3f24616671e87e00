"""The active learning loop: fit -> evaluate -> score the pool -> acquire -> label.

One round ``r`` of :class:`ActiveLearningLoop`:

1. build the model afresh (seeded by ``(seed, r)``; or keep the previous
   weights with ``warm_start=True``) and ``fit`` it on the labelled set, with
   early stopping on the validation set;
2. evaluate it on validation (and test) with ``K = eval_samples`` function samples;
3. stop if a stopping criterion fires (label budget, cost budget, target
   accuracy, plateau);
4. score the unlabelled pool (optionally a random subsample of it) with the
   acquisition strategy on ``K = num_samples`` function samples (``mean_samples`` for a
   strategy that reads only the predictive mean) and select
   ``batch_size`` items;
5. ask the oracle for their labels and add them to the labelled set.

Steps 1-4 are :meth:`ActiveLearningLoop.propose`, which returns a
:class:`~activebayes.records.Proposal`; step 5 is the oracle followed by
:meth:`ActiveLearningLoop.commit`. A simulation calls :meth:`~ActiveLearningLoop.step`
(both at once); a person labels between the two calls (the file round trip and
the labelling app).

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

import contextlib
import copy
import dataclasses
import math
import warnings
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from activebayes import _progress
from activebayes._seeding import derive_seed, make_generator, seeded_global_rng
from activebayes._validation import check_callable, check_choice, check_device, check_materialised
from activebayes.acquisition import AcquisitionContext, Strategy, get_strategy, select
from activebayes.acquisition.multilabel_strategies import MULTILABEL_COUNTERPARTS, MULTILABEL_STRATEGIES
from activebayes.acquisition.selection import Selection
from activebayes.data.table_task import table_splits
from activebayes.metrics.multilabel import evaluate_multilabel, label_decisions
from activebayes.metrics.predictive import predictive_probs
from activebayes.models.multilabel import MultiLabelPosterior
from activebayes.data import Pool, available_datasets, load_dataset
from activebayes.metrics import evaluate_classification
from activebayes.models import Posterior, available_models, as_posterior, build_model
from activebayes.models.networks import check_model_input
from activebayes.models.posterior import NetworkPosterior, fit_summary, posterior_features
from activebayes.models.training import PAPER_FIT_OPTIONS, check_fit_options
from activebayes.models.representation import (
    Representation,
    RepresentationConfig,
    train_or_load_representation,
)
from activebayes.models.representation import features as representation_features
from activebayes.oracles import Oracle, SimulatedOracle
from activebayes.scoring import PoolExecutor, score_pool
from activebayes.records import (
    COLD_START_LABELS_PER_CLASS,
    INITIAL_CHOICES,
    LoopConfig,
    LoopResult,
    Proposal,
    RoundRecord,
    headline_metric,
    schedule_name,
)
from activebayes.errors import InvalidArgumentError, InvalidTypeError, MissingFileError
from activebayes.stopping import (
    CostBudget,
    LabelBudget,
    Plateau,
    SignalCriterion,
    StopReason,
    StoppingCriterion,
    TargetAccuracy,
    first_stop,
    parse_stop_when,
    round_signals,
    stop_set_key,
)

# --------------------------------------------------------------------------- the loop


#: Images of a lazy (memory-mapped) pool used to learn the representation by default.
_LAZY_REPRESENTATION_ITEMS = 50_000
#: Strategies that read features of every candidate (typicality, BADGE) choose among a
#: seeded subset of at most this many unlabelled items, unless ``pool_subsample`` is set.
_FEATURE_STRATEGY_ITEMS = 50_000


def check_config_names(config: LoopConfig) -> None:
    """Unknown ``dataset``, ``model``, ``strategy`` or ``cold_start`` names raise
    :class:`~activebayes.errors.InvalidArgumentError` naming the argument, before any data
    is loaded or anything written (a misspelt name is then never stored in a run's config)."""
    if config.table is None:
        check_choice(config.dataset, "dataset (--dataset)", available_datasets())
    check_choice(config.model, "model (--model)", available_models())
    strategy, _ = config_strategies(config)
    _check_option_names_early(strategy, config.acquisition_options)


def _check_option_names_early(strategy: Strategy, options: Mapping[str, Any]) -> None:
    """``acquisition_options`` keys that neither ``strategy`` nor its multi-label counterpart takes,
    refused before any data is loaded (the dataset, so which of the two runs, is not known yet; the
    loop checks the one that runs when it is built): a comparison's strategies are all checked
    before its first run, not each when its turn comes."""
    entries = [strategy]
    if strategy.name in MULTILABEL_COUNTERPARTS:
        entries.append(get_strategy(MULTILABEL_COUNTERPARTS[strategy.name]))
    errors = []
    for entry in entries:
        try:
            entry.check_option_names(options, streamed=True)
            return
        except InvalidTypeError as error:
            errors.append(error)
    raise InvalidArgumentError(f"acquisition_options (--config [acquisition_options]): {errors[0]}") from None


def config_strategies(config: LoopConfig) -> tuple[Strategy, Strategy | None]:
    """The registry entries of ``config.strategy`` and ``config.cold_start`` (``None`` when off).

    Unknown names raise :class:`~activebayes.errors.InvalidArgumentError` naming the argument, and so
    does ``num_samples=1`` for a strategy that scores the samples' disagreement (BALD's are all 0).
    """
    try:
        strategy = get_strategy(config.strategy)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"strategy (--strategy): {error}") from None
    strategy.check_num_samples(config.num_samples, "num_samples (--num-samples)")
    if config.cold_start is None:
        return strategy, None
    try:
        return strategy, get_strategy(config.cold_start)
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"cold_start (--cold-start): {error}") from None


def check_loop_data(config: LoopConfig) -> None:
    """Raise what building a loop of ``config`` raises about its data (it loads, it has room for
    the initial, validation and first batch's items, its costs fit), without training anything:
    a self-supervised representation is left out, and the model settings that go with it. A
    multi-dataset comparison checks every dataset with it before the first one's runs."""
    if config.representation != "none":
        config = config.replace(representation="none", model="auto", model_options={})
    ActiveLearningLoop(config)


def _warn_unrecorded_metrics(criteria: Sequence[StoppingCriterion], metrics: Mapping[str, Any]) -> None:
    """A criterion's ``metric`` (``Plateau(3, metric="val_accuracy")``) that the first round's metrics
    lack can never fire: said once, listing the names a run records, not left to go on to the budget."""
    for criterion in criteria:
        metric = getattr(criterion, "metric", None)
        if isinstance(metric, str) and metric not in metrics:
            recorded = ", ".join(sorted(name for name, value in metrics.items() if isinstance(value, int | float)))
            warnings.warn(f"stopping criterion {type(criterion).__name__} reads metric {metric!r}, which this run "
                          f"does not record, so it can never fire; the run records: {recorded}", stacklevel=5)


def _describe(value: Any) -> str:
    """A short name for something a loop was given: a callable's qualified name, else its type (and size)."""
    if isinstance(value, tuple):
        return ", ".join(_describe(v) for v in value)
    if callable(value) and hasattr(value, "__qualname__"):
        return f"{getattr(value, '__module__', '?')}.{value.__qualname__}"
    size = f", {len(value)} items" if hasattr(value, "__len__") and not isinstance(value, str) else ""
    name = getattr(value, "name", None)
    return f"{type(value).__name__}{f' {name!r}' if isinstance(name, str) else ''}{size}"


#: the config's model settings a ``model_factory`` replaces (it returns the network or posterior)
_FACTORY_REPLACES = ("model", "model_options", "posterior", "ensemble_size")


def _warn_settings_the_factory_replaces(config: LoopConfig) -> None:
    """Warn when ``config`` sets a model setting a ``model_factory`` makes unused: set and
    silently ignored, ``posterior="laplace"`` would leave the run believed a Laplace one."""
    defaults = LoopConfig()
    unused = [f"{name}={getattr(config, name)!r}" for name in _FACTORY_REPLACES
              if getattr(config, name) != getattr(defaults, name)]
    if unused:
        warnings.warn(f"model_factory builds the model, so the config's {', '.join(unused)} "
                      f"{'is' if len(unused) == 1 else 'are'} not used: have the factory return that posterior "
                      "(e.g. build_posterior('laplace', network=MyNet(), num_classes=C), or "
                      "Ensemble.from_factory(MyNet, 5, generator=generator)), or leave the config's at the default",
                      UserWarning, stacklevel=3)


class ActiveLearningLoop:
    """The fit / evaluate / acquire / label loop over a :class:`~activebayes.data.Pool`.

    One acquisition path, in two calls: :meth:`propose` (fit, evaluate, check the
    stopping criteria, score the pool, select a batch) and :meth:`commit` (the
    answers: labels for some unlabelled items). Every oracle uses these two: the
    simulated loop (:meth:`step` = ``propose`` + ``oracle`` + ``commit``), the
    file round trip (``activebayes query`` / ``import``) and the labelling app.

    Parameters are keyword-only overrides of what ``config`` would load: pass a
    ``dataset`` / ``test`` (``ArrayDataset``) to use your own data, an ``oracle``
    (any callable ``indices_B -> labels_B``, e.g. a ``SimulatedOracle``; needed
    only by :meth:`step`), a ``model_factory`` (``generator -> nn.Module`` or
    ``generator -> Posterior``, :mod:`activebayes.models.posterior`, such as an adapter
    of :mod:`activebayes.adapters`) for your own network or posterior, ``costs_N`` (per-item labelling cost, indexed by
    original dataset index; ``config.costs_file`` loads them from a file instead),
    and an ``executor`` for scoring the pool (default: this process; e.g.
    :class:`activebayes.distributed.RayExecutor` for a Ray cluster).
    """

    def __init__(
        self,
        config: LoopConfig | None = None,
        *,
        dataset: Any = None,
        test: Any = None,
        oracle: Oracle | None = None,
        model_factory: Callable[[torch.Generator], torch.nn.Module | Posterior] | None = None,
        costs_N: Tensor | None = None,
        stopping: Sequence[StoppingCriterion] = (),
        executor: PoolExecutor | None = None,
    ) -> None:
        self.config = config = config or LoopConfig()
        #: what this loop was given that its config cannot name (a run resumed without them would differ)
        self.given: dict[str, str] = {name: _describe(value) for name, value in (
            ("dataset", dataset), ("test", test), ("oracle", oracle), ("model_factory", model_factory),
            ("costs_N", costs_N), ("stopping", tuple(stopping) or None)) if value is not None}
        self._strategy, self._cold_start = config_strategies(config)  # fails early on unknown names
        if isinstance(model_factory, torch.nn.Module):  # callable, but one network for every round
            raise InvalidTypeError(f"model_factory must be a function (a torch.Generator -> a new nn.Module or "
                                   f"Posterior), got the network {type(model_factory).__name__} itself: the loop "
                                   f"builds a fresh one each round, so pass lambda generator: "
                                   f"{type(model_factory).__name__}(...)")
        if model_factory is not None:
            check_callable(model_factory, "model_factory", arguments=1,
                           expected="a torch.Generator -> a new nn.Module or Posterior")
            _warn_settings_the_factory_replaces(config)
        if model_factory is None:
            check_choice(config.model, "model (--model)", available_models())
            # the loop's posterior takes them as fit()'s options: a misspelt key fails here, not in round 0's
            # training (a user's factory may return its own Posterior, which ignores them; its network's are
            # checked when the round builds it)
            check_fit_options(config.fit_options, "fit_options (--config [fit_options])", set_by="the loop")
        check_device(config.device)  # before any data is loaded or anything written
        if dataset is None and config.table is not None:
            dataset, table_test = table_splits(config)  # one-line errors naming the row and column
            if dataset.targets is None and (config.validation_size or config.initial != "empty"):
                raise InvalidArgumentError(
                    f"table {config.table}: a run needs known labels (a simulation): give label_column "
                    "(--label-column COL)")
            test = table_test if test is None else test
        if dataset is None:
            dataset = load_dataset(config.dataset, data_dir=config.data_dir, download=config.download, split="train",
                                   options=config.dataset_options, progress=_progress.shown())
            if test is None and config.evaluate_test:
                test = load_dataset(config.dataset, data_dir=config.data_dir, download=config.download, split="test",
                                    options=config.dataset_options, progress=_progress.shown())
        self.dataset = dataset
        self.test = test if config.evaluate_test else None
        #: whether the targets are multi-label 0/1 indicators ``[N, C]`` (per-label Bernoulli posterior)
        self.multilabel = bool(getattr(dataset, "multilabel", False))
        self._check_task()
        self._check_acquisition_options()
        self._oracle = oracle
        if model_factory is None and config.representation == "none":
            check_model_input(config.model, dataset.input_shape)  # a CNN given table rows: before anything is written
        self.model_factory = model_factory or self._default_model_factory
        needed = config.initial_size + config.validation_size + config.batch_size
        if needed > len(dataset):
            room = len(dataset) - config.initial_size - config.batch_size
            fits = f" (validation_size={room} fits with the others as they are)" if room >= 0 else ""
            raise InvalidArgumentError(
                f"dataset {getattr(dataset, 'name', '')!r} has {len(dataset)} items, fewer than initial_size "
                f"(--initial-size) {config.initial_size} + validation_size (--validation-size) "
                f"{config.validation_size} + batch_size (--batch-size) {config.batch_size} = {needed}: "
                f"lower them{fits}"
            )
        costs_name = "costs_N"
        if costs_N is None and config.costs_file is not None:
            costs_N, costs_name = _read_costs(config.costs_file), f"costs_file (--costs) {config.costs_file}"
        self.costs_N = self._check_costs(costs_N, len(dataset), costs_name)
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
                raise InvalidArgumentError("cost_budget (--cost-budget) needs per-item labelling costs: give "
                                           "costs_file (--costs), a file of one cost per item (from Python, or costs_N)")
            self.stopping.append(CostBudget(config.cost_budget, float(self.costs_N.min())))
        if config.target_accuracy is not None:
            self._check_target_measurable()
            self.stopping.append(TargetAccuracy(config.target_accuracy))
        if config.plateau_patience is not None:
            self.stopping.append(Plateau(config.plateau_patience, config.plateau_min_delta))
        #: signal -> threshold of the criteria that need no test set (``stop_when``)
        self.stop_thresholds = parse_stop_when(config.stop_when)
        self.stopping += [SignalCriterion(name) for name in self.stop_thresholds]
        #: a fixed, seeded set of initially unlabelled items the stopping signals are measured on
        self.stop_set_N = self._draw_stop_set()
        #: labels up to which ``cold_start`` acquires (0: no cold start)
        self.cold_start_labels = 0
        if self._cold_start is not None:
            self.cold_start_labels = (config.cold_start_labels if config.cold_start_labels is not None
                                      else COLD_START_LABELS_PER_CLASS * int(dataset.num_classes))
        self.history: list[RoundRecord] = []
        self.cost_spent = 0.0
        #: the round's posterior (built and fitted by :meth:`propose`)
        self.posterior: Posterior | None = None
        self.stop_reason: str | None = None
        self.pending: Proposal | None = None
        self._executor = executor
        self.representation: Representation | None = None
        self._frozen_encoder: torch.nn.Module | None = None
        self._representation_features: Tensor | None = None
        if config.representation == "self-supervised":
            self.representation = self._learn_representation()
        elif model_factory is None and config.model_options:
            self._check_model_options()

    def _check_acquisition_options(self) -> None:
        """An ``acquisition_options`` key the strategy does not take fails now, listing those it takes,
        not when the strategy first acquires (after the cold start's rounds, with the run directory
        written). Checked against the strategy that takes them: a multi-label dataset's counterpart
        (:meth:`_check_task`) has options of its own."""
        entry = self._strategy
        streamed = not (self.multilabel and entry.needs_predictions)  # as _acquire scores: score_pool, else select
        try:
            entry.check_option_names(self.config.acquisition_options, streamed=streamed)
        except InvalidTypeError as error:
            raise InvalidArgumentError(f"acquisition_options (--config [acquisition_options]): {error}") from None

    def _check_target_measurable(self) -> None:
        """A target accuracy is checked on the headline metric (test, else validation): a run with
        neither set would never reach it and go on to its budget without a word, so it is refused."""
        config = self.config
        if self.test is not None or config.validation_size:
            return
        no_test = ("evaluate_test=False (--no-test)" if not config.evaluate_test else
                   "a table without test_size (--test-size)" if config.table is not None else "no test set given")
        raise InvalidArgumentError(
            f"target_accuracy (--target-accuracy) {config.target_accuracy:g} is checked on the test set, else on "
            f"the validation set, and this run has neither: {no_test} and validation_size (--validation-size) 0; "
            "keep some validation items, or drop the target")

    def _check_task(self) -> None:
        """On multi-label targets ``badge``, ``bald``, ``entropy`` and ``batchbald`` become their
        label-vector versions (:data:`~activebayes.acquisition.multilabel_strategies.MULTILABEL_COUNTERPARTS`);
        other strategies and options that assume softmax predictions are refused, and the
        multi-label strategies for single-label targets."""
        if self.multilabel:  # badge, bald, entropy, batchbald mean their label-vector versions
            self._strategy, self._cold_start = (
                None if entry is None else get_strategy(MULTILABEL_COUNTERPARTS.get(entry.name, entry.name))
                for entry in (self._strategy, self._cold_start))
        for flag, entry in (("strategy (--strategy)", self._strategy), ("cold_start (--cold-start)", self._cold_start)):
            if entry is None:
                continue
            if self.multilabel and entry.needs_predictions and entry.name not in MULTILABEL_STRATEGIES:
                raise InvalidArgumentError(
                    f"{flag}: {entry.name!r} reads single-label (softmax) predictions, but dataset "
                    f"{getattr(self.dataset, 'name', '')!r} is multi-label; use one of "
                    f"{', '.join(MULTILABEL_STRATEGIES)}, random or typicality")
            if not self.multilabel and entry.name in MULTILABEL_STRATEGIES:
                raise InvalidArgumentError(
                    f"{flag}: {entry.name!r} is for multi-label targets ([N, C] indicators), but dataset "
                    f"{getattr(self.dataset, 'name', '')!r} is single-label")

    @property
    def oracle(self) -> Oracle:
        """The oracle :meth:`step` asks (default: the dataset's own targets)."""
        if self._oracle is None:
            self._oracle = SimulatedOracle(self.dataset)
        return self._oracle

    # ----------------------------------------------------------------- helpers

    @staticmethod
    def _check_costs(costs_N: Tensor | None, n: int, name: str = "costs_N") -> Tensor | None:
        """The per-item costs as float64 ``[n]``; ``name`` is what an error calls them (the argument, or the file)."""
        if costs_N is None:
            return None
        costs_N = torch.as_tensor(costs_N, dtype=torch.float64)
        if costs_N.shape != (n,):
            if name == "costs_N":
                raise InvalidArgumentError(f"costs_N must have shape [{n}] (one cost per dataset item), got {tuple(costs_N.shape)}")
            raise InvalidArgumentError(f"{name} must hold {n} numbers, one cost per dataset item in dataset order, "
                                       f"got {costs_N.numel()}")
        if not bool(torch.isfinite(costs_N).all()) or bool((costs_N <= 0).any()):
            bad = int((~torch.isfinite(costs_N) | (costs_N <= 0)).nonzero()[0, 0])
            raise InvalidArgumentError(f"{name} must be finite and > 0 for every item, got {costs_N[bad].item()} "
                                       f"for item {bad}")
        return costs_N

    def _learn_representation(self) -> Representation:
        """The encoder trained on the training split's images without labels (cached on disk).

        Every training image may be used (pool and validation; never the test set). A
        lazy pool contributes a seeded subset of at most ``max_items`` (default 50,000).
        """
        config = self.config
        options = dict(config.representation_options)
        inputs = self.dataset.inputs
        item_shape = tuple(inputs.shape[1:])
        if len(item_shape) not in (2, 3) or item_shape[-1] != item_shape[-2]:
            raise InvalidArgumentError(
                f"representation (--representation) {config.representation!r} learns from square images, but dataset "
                f"(--dataset) {config.dataset!r} holds items of shape {item_shape}: they already are features; run it without "
                "a representation")
        if self.dataset.is_lazy:
            limit = options.get("max_items") or _LAZY_REPRESENTATION_ITEMS
            order = torch.randperm(len(self.dataset), generator=make_generator(config.seed, "representation"))
            inputs = inputs[order[:limit].sort().values]
        return train_or_load_representation(
            inputs, RepresentationConfig.from_dict(options), seed=config.seed, device=config.device,
            progress=_progress.shown(),
        )

    @property
    def frozen_encoder(self) -> torch.nn.Module:
        """The representation's encoder, frozen, shared by every round's head: its feature cache
        encodes each pool item once per run (made on first use; the representation's own encoder
        is never changed)."""
        if self.representation is None:
            raise InvalidArgumentError("frozen_encoder needs a representation (config.representation='self-supervised')")
        if self._frozen_encoder is None:
            from activebayes.models.encoders import FrozenEncoder

            self._frozen_encoder = FrozenEncoder(copy.deepcopy(self.representation.encoder))
        return self._frozen_encoder

    def _check_model_options(self) -> None:
        """Build the model once now (the global RNG untouched), so that a wrong ``model_options``
        is an error naming it before anything is written, not a TypeError in the first round."""
        config = self.config
        try:
            with torch.random.fork_rng(devices=[]):
                self._default_model_factory(torch.Generator().manual_seed(0))
        except (TypeError, ValueError) as error:  # InvalidArgumentError is a ValueError
            raise InvalidArgumentError(f"model_options {dict(config.model_options)!r} do not fit model "
                                       f"{config.model!r}: {error}") from None

    def _default_model_factory(self, generator: torch.Generator) -> torch.nn.Module:
        config = self.config
        options = dict(config.model_options)
        fine_tune = options.get("freeze_encoder") is False
        if config.posterior != "mc_dropout" or (
            self.representation is not None and config.ensemble_size is None and not fine_tune
        ):
            # a head on the representation's frozen encoder, or an ensemble / Laplace posterior
            # (activebayes.models.heads): one FrozenEncoder serves every round, so the pool is
            # encoded once per run, not once per round
            from activebayes.models.heads import loop_model

            frozen, feature_dim = None, None
            if self.representation is not None:
                frozen, feature_dim = self.frozen_encoder, self.representation.feature_dim
            return loop_model(config, int(self.dataset.num_classes), tuple(self.dataset.input_shape), generator,
                              frozen_encoder=frozen, feature_dim=feature_dim)
        if config.ensemble_size is not None:
            options["ensemble_size"] = config.ensemble_size
        if self.representation is not None:
            return build_model("encoder_head", num_classes=self.dataset.num_classes,
                               input_shape=tuple(self.dataset.input_shape), generator=generator,
                               encoder=self.representation, **options)
        return build_model(
            config.model,
            num_classes=self.dataset.num_classes,
            input_shape=tuple(self.dataset.input_shape),
            generator=generator,
            **options,
        )

    def _build_posterior(self, r: int) -> Posterior:
        """Round ``r``'s freshly initialised posterior; the global RNG is seeded too, so
        factories that use PyTorch's default initialisers are reproducible."""
        stream = self._stream(r)
        with seeded_global_rng(self.config.seed, "model-init", stream):
            built = self.model_factory(make_generator(self.config.seed, "model", stream))
        if isinstance(built, torch.nn.Module):
            check_materialised(built, "the network model_factory returned")
        fit_options = {**(PAPER_FIT_OPTIONS if self.config.training == "paper" else {}), **dict(self.config.fit_options)}
        if type(built) is NetworkPosterior and not built.fit_options:
            # as_posterior(net, sampling="sequential"): the factory chose how to sample, the config how to train
            built = NetworkPosterior(built.module, sampling=built.sampling, **fit_options)
        if self.multilabel and isinstance(built, torch.nn.Module):
            return MultiLabelPosterior(built, **fit_options)  # C sigmoids, BCE
        return as_posterior(built, **fit_options)

    @property
    def model(self) -> torch.nn.Module | None:
        """The round's network (``posterior.module``); ``None`` before the first round."""
        return None if self.posterior is None else self.posterior.module

    def _stream(self, r: int) -> int:
        """The round index that seeds round ``r``'s model, fit and stop-set functions: ``r``, or 0
        for every round with ``round_seeds="shared"`` (common random numbers: successive models
        then differ by the labels they were fitted on, not by their random draws)."""
        return 0 if self.config.round_seeds == "shared" else r

    def _predict(self, inputs: Any, *, key: str, num_samples: int) -> Tensor:
        """``log_probs_N_K_C`` of the round's posterior, K functions seeded by ``(seed, round, key)``
        (the stop set's by ``_stream(round)``: successive rounds compared on the same draws when shared)."""
        fixed = self.posterior.num_functions is not None  # an ensemble, a forest: its own K
        r = self._stream(len(self.history)) if key == "stop-set" else len(self.history)
        return self.posterior.log_probs(
            inputs,
            num_samples=None if fixed else num_samples,
            generator=make_generator(self.config.seed, r, key),
            batch_size=self.config.predict_batch_size,
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
            self.posterior = self._build_posterior(len(records) - 1)
            self.posterior.module.load_state_dict(model_state)

    @property
    def finished(self) -> bool:
        return self.stop_reason is not None

    @property
    def round(self) -> int:
        """The index of the round the next :meth:`propose` runs."""
        return len(self.history)

    # ----------------------------------------------------------------- one round

    def propose(self, *, lookahead: int = 0, on_phase: Callable[[str], None] | None = None) -> Proposal:
        """Fit, evaluate, check the stopping criteria, score the pool and select a batch.

        Returns the round's :class:`Proposal`; the round ends with :meth:`commit`.
        When a stopping criterion fires the proposal has no items and its
        ``stop_reason`` / ``stop_kind`` set, and nothing else changes: :meth:`finish`
        records the stop (a simulation does; a labelling project, where new items may
        come, does not). ``lookahead`` extends ``ranking`` beyond the batch (for a
        labelling app that must never wait for the next round). ``on_phase(name)``
        is called as each phase starts: ``"fit"``, ``"evaluate"``, ``"acquire"``
        (the keys of the proposal's ``seconds``), e.g. for a status line.
        """
        if self.finished:
            raise RuntimeError(f"the loop has already stopped: {self.stop_reason}")
        if lookahead < 0:
            raise InvalidArgumentError(f"lookahead must be >= 0, got {lookahead}")
        r, n_labelled = self.round, int(self.pool.n_labelled)
        timer = _PhaseTimer(on_phase)
        validation = self.pool.validation_data() if self.config.validation_size else None
        with timer("fit"):
            fit_info = self._fit(r, n_labelled, validation)
        with timer("evaluate"):
            metrics = self._evaluate(validation)
        with timer("signals"):
            signals = self._signals(n_labelled)
        class_counts = [int(c) for c in self.pool.class_counts()]
        round_so_far = dict(round=r, n_labelled=n_labelled, metrics=metrics, class_counts=class_counts,
                            cost_spent=self.cost_spent, fit=fit_info, signals=signals)
        reason = self.stop_check(RoundRecord(acquired=[], scores=[], labels=[], seconds=timer.seconds,
                                             **round_so_far))
        if reason is not None:
            self.pending = None
            return Proposal(indices=[], scores=[], ranking=[], ranking_scores=[], probs=[], seconds=timer.seconds,
                            strategy=self.config.strategy, stop_reason=reason.detail, stop_kind=reason.kind,
                            **round_so_far)
        with timer("acquire"):
            batch_size, ranking_N, scores_N, strategy = self._acquire(n_labelled, r, lookahead)
            ranking_N, scores_N, audit_N = self._with_audit(ranking_N, scores_N, batch_size, n_labelled, r)
        ranking, scores = [int(i) for i in ranking_N], [float(s) for s in scores_N]
        self.pending = Proposal(indices=ranking[:batch_size], scores=scores[:batch_size], ranking=ranking,
                                ranking_scores=scores, probs=self._ranking_probs(ranking_N, n_labelled),
                                seconds=timer.seconds, strategy=strategy, audit=[int(i) for i in audit_N],
                                **round_so_far)
        return self.pending

    def stop_check(self, provisional: RoundRecord) -> StopReason | None:
        """The first stopping criterion that fires after ``provisional`` (the current round,
        evaluated, nothing acquired yet), or an empty pool; ``None`` to go on. No side effects
        (but a warning, once, for a criterion reading a metric this run does not record)."""
        if not self.history:
            _warn_unrecorded_metrics(self.stopping, provisional.metrics)
        return first_stop(self.stopping, [*self.history, provisional], n_labelled=provisional.n_labelled,
                          cost_spent=self.cost_spent, n_unlabelled=int(self.pool.n_unlabelled))

    def finish(self, proposal: Proposal) -> RoundRecord:
        """Record a stopping proposal as the run's last round; the loop is then finished."""
        if proposal.stop_reason is None or proposal.round != self.round:
            raise InvalidArgumentError(f"finish() needs this round's ({self.round}) stopping proposal, got round "
                                       f"{proposal.round} with stop_reason={proposal.stop_reason!r}")
        record = RoundRecord(proposal.round, proposal.n_labelled, [], [], [], proposal.metrics,
                             proposal.class_counts, proposal.cost_spent, proposal.fit, dict(proposal.seconds),
                             stop_reason=proposal.stop_reason, stop_kind=proposal.stop_kind,
                             signals=proposal.signals)
        self.history.append(record)
        self.stop_reason = proposal.stop_reason
        self.pending = None
        return record

    def _fit(self, r: int, n_labelled: int, validation: tuple[Tensor, Tensor] | None) -> dict[str, Any]:
        """Build round ``r``'s posterior (or keep the last with ``warm_start``) and fit it."""
        config = self.config
        if self.posterior is None or not config.warm_start:
            self.posterior = self._build_posterior(r)
        # with no labels yet the protocol's fit leaves the posterior at its prior
        stream = self._stream(r)
        with seeded_global_rng(config.seed, "fit", stream):
            return fit_summary(self.posterior.fit(self.pool.labelled_data(), validation=validation,
                                                  generator=make_generator(config.seed, "fit", stream),
                                                  device=config.device))

    def _draw_stop_set(self) -> Tensor:
        """A seeded subset of the unlabelled pool of at most ``stop_set_size`` items (sorted).

        The default size shrinks to a smaller pool; a size given explicitly that the pool
        cannot fill is an error naming the flag (raised before anything is written)."""
        candidates_N = self.pool.unlabelled_indices
        asked = self.config.stop_set_size
        if asked > len(candidates_N) and asked != _field_default(LoopConfig, "stop_set_size"):
            raise InvalidArgumentError(
                f"stop_set_size (--stop-set-size): the stop set is drawn from the {len(candidates_N)} items "
                f"unlabelled at the start, so it can hold at most {len(candidates_N)}, got {asked}")
        size = min(asked, len(candidates_N))
        order = torch.randperm(len(candidates_N), generator=make_generator(self.config.seed, "stop-set"))
        return candidates_N[order[:size]].sort().values

    def _signals(self, n_labelled: int) -> dict[str, Any] | None:
        """The round's stopping signals (:func:`activebayes.stopping.round_signals`) on the stop set."""
        if not len(self.stop_set_N):
            return None
        log_probs_S_K_C = self._predict(self.dataset.rows(self.stop_set_N), key="stop-set",
                                        num_samples=self.config.eval_samples)
        identities = getattr(self.dataset, "item_ids", None) or getattr(self.dataset, "paths", None)
        stop_set = stop_set_key([identities[i] if identities is not None else str(i)
                                 for i in self.stop_set_N.tolist()])
        return round_signals(self.history, log_probs_S_K_C=log_probs_S_K_C, n_labelled=n_labelled,
                             n_unlabelled=int(self.pool.n_unlabelled), num_classes=int(self.dataset.num_classes),
                             thresholds=self.stop_thresholds, budget=self.config.budget,
                             multilabel=self.multilabel, stop_set=stop_set)

    def _with_audit(self, ranking_N: Tensor, scores_N: Tensor, batch_size: int, n_labelled: int,
                    r: int) -> tuple[Tensor, Tensor, Tensor]:
        """Swap the batch's last ``round(audit_fraction * batch_size)`` (at least 1) picks for
        items drawn uniformly from the rest of the unlabelled pool (seeded by ``(seed, "audit",
        r)``): their answers, against the model's predictions, estimate its accuracy without
        selection bias. Their scores are NaN; nothing is audited before the first model, nor
        in a batch of one item (the strategy's pick is kept)."""
        fraction = self.config.audit_fraction
        empty = torch.empty(0, dtype=torch.long)
        if not fraction or n_labelled == 0 or batch_size < 2:
            return ranking_N, scores_N, empty
        m = max(1, round(fraction * batch_size))
        keep_N = ranking_N[: batch_size - m]
        others_N = self.pool.unlabelled_indices
        others_N = others_N[~torch.isin(others_N, keep_N)]
        draw = torch.randperm(len(others_N), generator=make_generator(self.config.seed, "audit", r))[:m]
        audit_N = others_N[draw]
        rest = ~torch.isin(ranking_N[batch_size - m:], audit_N)
        ranking = torch.cat([keep_N, audit_N, ranking_N[batch_size - m:][rest]])
        scores = torch.cat([scores_N[: batch_size - m].double(), torch.full((len(audit_N),), math.nan, dtype=torch.float64),
                            scores_N[batch_size - m:][rest].double()])
        return ranking, scores, audit_N

    def _ranking_probs(self, ranking_N: Tensor, n_labelled: int) -> list[list[float]]:
        """The predictive class probabilities of the ranked items (shown by the labelling app)."""
        if n_labelled == 0 or not len(ranking_N):
            return []
        log_probs = self._predict(self.dataset.inputs[ranking_N], key="ranking", num_samples=self.config.eval_samples)
        return [[float(p) for p in row] for row in predictive_probs(log_probs)]

    def commit(self, indices: object, labels: object, *, proposal: Proposal | None = None,
               earlier: Sequence[Proposal] = ()) -> RoundRecord:
        """End the proposed round with the answers: ``labels[i]`` for ``indices[i]``.

        ``indices`` are original dataset indices of unlabelled items (the proposed
        batch, part of it, or any others a person chose to label), ``labels``
        class ids. The round's record keeps the proposal's metrics and each
        item's score in the proposal's ranking (NaN for items outside it).
        ``proposal`` commits a proposal made by another process (the file round
        trip stores it between ``query`` and ``import``); by default the one
        :meth:`propose` returned. ``earlier``: proposals of earlier rounds whose audit
        items may be answered only now (the labelling app serves a round's last items while
        the next model trains, so they are committed with the next round): an answer to an
        item one of them drew to audit counts as audited, against the predictions of the
        model that drew it (never trained on it). Each item is committed, so credited, once.
        """
        proposal = proposal if proposal is not None else self.pending
        if proposal is None:
            raise RuntimeError("commit() needs a proposal: call propose() first")
        if proposal.stop_reason is not None:
            raise RuntimeError(f"the proposal of round {proposal.round} stopped the run: {proposal.stop_reason}")
        if proposal.round != self.round:
            raise InvalidArgumentError(f"proposal is for round {proposal.round}, but the loop is at round {self.round}")
        if any(p.round >= proposal.round for p in earlier):
            raise InvalidArgumentError(f"earlier proposals must be of rounds before {proposal.round}, got rounds "
                                       f"{sorted(p.round for p in earlier)}")
        index_B = self.dataset.check_indices(indices, "indices")
        labels_B = torch.as_tensor(labels, dtype=torch.long)
        labels_B = labels_B.reshape(-1, self.dataset.num_classes) if self.multilabel else labels_B.reshape(-1)
        if labels_B.shape[:1] != index_B.shape:
            raise InvalidArgumentError(f"labels must have one label per index ({len(index_B)}), got {len(labels_B)}")
        tic = time.perf_counter()
        self.pool.label(index_B, labels_B)  # validates: unlabelled, distinct, labels in range
        if self.costs_N is not None and len(index_B):
            self.cost_spent += float(self.costs_N[index_B].sum())
        score_of = dict(zip(proposal.ranking, proposal.ranking_scores, strict=True))
        signals = dict(proposal.signals) if proposal.signals is not None else None
        audit = _audit_answers(proposal, index_B, labels_B, earlier=earlier)
        if (proposal.audit and proposal.probs) or audit["n"]:
            signals = signals or {}
            signals["audit"] = audit
        seconds = dict(proposal.seconds)
        seconds["label"] = time.perf_counter() - tic
        record = RoundRecord(
            round=proposal.round,
            n_labelled=proposal.n_labelled,
            acquired=[int(i) for i in index_B],
            scores=[float(score_of.get(int(i), math.nan)) for i in index_B],
            labels=labels_B.tolist() if self.multilabel else [int(y) for y in labels_B],
            metrics=proposal.metrics,
            class_counts=proposal.class_counts,
            cost_spent=self.cost_spent,
            fit=proposal.fit,
            seconds=_rounded(seconds),
            strategy=proposal.strategy,
            signals=signals,
        )
        self.history.append(record)
        self.pending = None
        return record

    def step(self) -> RoundRecord:
        """One whole round with the loop's oracle: ``propose``, ask, ``commit``."""
        proposal = self.propose()
        if proposal.stopped:
            return self.finish(proposal)
        tic = time.perf_counter()
        labels = torch.as_tensor(self.oracle(torch.tensor(proposal.indices, dtype=torch.long)), dtype=torch.long)
        asked = time.perf_counter() - tic
        record = self.commit(proposal.indices, labels)
        record.seconds["label"] = round(record.seconds["label"] + asked, 4)
        return record

    def _predictive(self, inputs: Any, *, key: str) -> Tensor:
        """What the round is evaluated with: the posterior's closed-form predictive mean as
        ``[N, 1, C]`` where its module has one (``predictive_probs``, e.g. last-layer Laplace's
        probit), else ``K = eval_samples`` function samples ``[N, K, C]`` (the metrics average
        them in probability space)."""
        closed_form = getattr(self.posterior.module, "predictive_probs", None)
        if callable(closed_form):
            probs_N_C = closed_form(inputs, batch_size=self.config.predict_batch_size)
            log_probs = probs_N_C.clamp_min(1e-12).log().unsqueeze(1)
        else:
            log_probs = self._predict(inputs, key=key, num_samples=self.config.eval_samples)
        self._check_output_width(log_probs.shape[-1])
        return log_probs

    def _check_output_width(self, width: int) -> None:
        """A model with more outputs than the dataset has classes trains (its extra outputs learn to
        be unlikely) but is no classifier of these classes: named in the round's first evaluation.
        (Too few outputs fail in training, :func:`~activebayes.models.fit`.)"""
        classes = int(self.dataset.num_classes)
        if width != classes:
            model = ("model_factory's model" if "model_factory" in self.given
                     else f"model (--model) {self.config.model!r}")
            raise InvalidArgumentError(f"{model} returns logits for C = {width} classes, but dataset "
                                       f"{getattr(self.dataset, 'name', '')!r} has {classes}: its last layer needs "
                                       f"{classes} outputs, one per class")

    def _evaluate(self, validation: tuple[Tensor, Tensor] | None) -> dict[str, Any]:
        metrics: dict[str, Any] = {}
        num_classes = self.dataset.num_classes
        if self.multilabel:
            return self._evaluate_multilabel(validation)
        if validation is not None:
            log_probs = self._predictive(validation[0], key="validation")
            for name, value in evaluate_classification(log_probs, validation[1], num_classes=num_classes).items():
                metrics[f"validation_{name}"] = value
        if self.test is not None and self.test.targets is not None:
            log_probs = self._predictive(self.test.inputs, key="test")
            for name, value in evaluate_classification(log_probs, self.test.targets, num_classes=num_classes).items():
                metrics[f"test_{name}"] = value
        return metrics

    def _evaluate_multilabel(self, validation: tuple[Tensor, Tensor] | None) -> dict[str, Any]:
        """Micro / macro / samples F1, Hamming loss, subset accuracy (headline: micro-F1)."""
        metrics: dict[str, Any] = {}
        eval_samples = self.config.eval_samples
        if validation is not None:
            log_probs = self._predict(validation[0], key="validation", num_samples=eval_samples)
            metrics.update({f"validation_{k}": v for k, v in evaluate_multilabel(log_probs, validation[1]).items()})
        if self.test is not None and self.test.targets is not None:
            log_probs = self._predict(self.test.inputs, key="test", num_samples=eval_samples)
            metrics.update({f"test_{k}": v for k, v in evaluate_multilabel(log_probs, self.test.targets).items()})
        return metrics

    def _select_multilabel(self, candidates_N: Tensor, strategy: str, ranked: int, r: int,
                           options: Mapping[str, Any], costs_N: Tensor | None, cost_budget: float | None,
                           inputs: Mapping[str, Tensor], num_samples: int) -> Selection:
        """A multi-label strategy on the candidates' ``log P(y_c = 1)`` ``[N, K, C]`` (held in memory:
        :func:`~activebayes.scoring.score_pool` streams softmax predictions only)."""
        config = self.config
        log_probs_N_K_C = self.posterior.log_probs(
            self.dataset.rows(candidates_N), num_samples=num_samples,
            generator=make_generator(config.seed, r, "pool"), batch_size=config.predict_batch_size,
            device=config.device)
        picked = select(log_probs_N_K_C, strategy, ranked,
                        generator=torch.Generator().manual_seed(derive_seed(config.seed, "acquire", r)),
                        costs_N=costs_N, cost_budget=cost_budget, device=config.device, **inputs, **options)
        return Selection(candidates_N[picked.indices], picked.scores, strategy)

    def _acquire(self, n_labelled: int, r: int, lookahead: int) -> tuple[int, Tensor, Tensor, str]:
        """``(batch_size, ranking_N, scores, strategy)``: the batch is the ranking's prefix.

        The pool is scored by :func:`activebayes.scoring.score_pool`, streamed in chunks
        (a memory-mapped pool is never loaded whole) on this process or on Ray.
        """
        config = self.config
        candidates_N = self.pool.unlabelled_indices
        if config.pool_subsample is not None:
            candidates_N = self.pool.subsample_unlabelled(config.pool_subsample,
                                                          generator=make_generator(config.seed, "subsample", r))
        entry = self._strategy
        if n_labelled < self.cold_start_labels:
            entry = self._cold_start
        if config.pool_subsample is None and len(candidates_N) > _FEATURE_STRATEGY_ITEMS and entry.reads_features:
            # features of every item and k-means over them do not scale to millions: a seeded subset
            keep = torch.randperm(len(candidates_N), generator=make_generator(config.seed, "feature-subsample", r))
            candidates_N = candidates_N[keep[:_FEATURE_STRATEGY_ITEMS]].sort().values
        batch_size = min(config.batch_size, config.budget - n_labelled, len(candidates_N))
        ranked = min(batch_size + lookahead, len(candidates_N))
        context = AcquisitionContext(pool_size=len(candidates_N), num_classes=self.dataset.num_classes,
                                     n_labelled=n_labelled, batch_size=batch_size, num_samples=config.num_samples)
        acting = entry.for_context(context)  # e.g. random picks before the first label
        strategy = acting.name
        num_samples = config.mean_samples if acting.mean_only else config.num_samples
        options = acting.context_defaults(context)
        if strategy == self._strategy.name:
            options.update(config.acquisition_options)
        costs_N = cost_budget = None
        if self.costs_N is not None and config.cost_budget is not None:
            costs_N, cost_budget = self.costs_N[candidates_N], config.cost_budget - self.cost_spent
        try:
            inputs = self._strategy_inputs(acting, candidates_N, n_labelled)
        except InvalidArgumentError as error:
            if entry is self._cold_start:
                raise InvalidArgumentError(
                    f"the cold start ({strategy!r}, cold_start / --cold-start) reads the model's features and "
                    f"could not get them: {error}; switch it off with cold_start=None (--cold-start none) or use "
                    "cold_start='random'"
                ) from None
            advice = "" if "pick a strategy" in str(error) else (
                "; or pick a strategy that needs only predictions, e.g. strategy='power_bald'")
            raise InvalidArgumentError(
                f"the strategy ({strategy!r}, strategy / --strategy) reads the model's features and could not "
                f"get them: {error}{advice}"
            ) from None
        posterior = self.posterior
        if self.multilabel and get_strategy(strategy).needs_predictions:
            selection = self._select_multilabel(candidates_N, strategy, ranked, r, options, costs_N, cost_budget,
                                                inputs, num_samples)
            return min(batch_size, len(selection.indices)), selection.indices, selection.scores, strategy
        selection = score_pool(
            posterior.module,
            self.dataset,
            candidates_N,
            strategy,
            ranked,
            num_samples=None if posterior.num_functions is not None else num_samples,
            mask_generator=make_generator(config.seed, r, "pool"),
            selection_seed=derive_seed(config.seed, "acquire", r),
            predict_batch_size=config.predict_batch_size,
            device=config.device,
            sampling=getattr(posterior, "sampling", "batched"),  # as_posterior(net, sampling="sequential")
            costs_N=costs_N,
            cost_budget=cost_budget,
            options=options,
            strategy_inputs=inputs,
            executor=self._executor,
            progress=_progress.shown(),
        )
        return min(batch_size, len(selection.indices)), selection.indices, selection.scores, strategy

    def _strategy_inputs(self, entry: Strategy, candidates_N: Tensor, n_labelled: int) -> dict[str, Tensor]:
        """The representation-based inputs a strategy reads (BADGE, typicality)."""
        wanted = set(entry.inputs) | set(entry.optional_inputs)
        if not entry.reads_features:
            return {}
        features = self._features(n_labelled)
        inputs = {}
        if "features" in wanted:
            inputs["features_N_D"] = features(candidates_N)
        if "labelled_features" in wanted:
            inputs["labelled_features_L_D"] = features(self.pool.labelled_indices)
        return inputs

    def _features(self, n_labelled: int) -> Callable[[Tensor], Tensor]:
        """Features of items by original index: the self-supervised representation's, else
        the round posterior's (:meth:`Posterior.features`), or the flattened inputs before
        the first model."""
        if self.representation is not None:
            if self._representation_features is None:
                self._representation_features = representation_features(
                    self.representation, self.dataset.inputs[torch.arange(len(self.dataset))],
                    batch_size=self.config.predict_batch_size, device=self.config.device)
            return lambda index_N: self._representation_features[index_N]
        if n_labelled == 0:
            width = math.prod(self.dataset.input_shape)
            return lambda index_N: self.dataset.rows(index_N)[:].reshape(len(index_N), width).float()
        return lambda index_N: posterior_features(  # a NotImplementedError: the strategies' hint
            self.posterior, self.dataset.rows(index_N), batch_size=self.config.predict_batch_size, device=self.config.device
        )

    # ----------------------------------------------------------------- all rounds

    def rounds(self) -> Iterator[RoundRecord]:
        """Yield each round's record until a stopping criterion fires."""
        while not self.finished:
            yield self.step()

    def run(self, *, progress: bool | None = None, on_round: Callable[[RoundRecord], None] | None = None) -> LoopResult:
        """Run rounds until a stopping rule fires; ``progress``: a bar of rounds (``None``: when stderr is a terminal)."""
        config = self.config
        total = math.ceil((config.budget - config.initial_size) / config.batch_size) + 1
        with tqdm(total=total, initial=len(self.history), disable=not _progress.shown(progress),
                  desc=f"{schedule_name(config)} seed {config.seed}", unit="round", leave=False) as bar:
            for record in self.rounds():
                if on_round is not None:
                    on_round(record)
                acc = record.accuracy  # the headline metric: micro-F1 on a multi-label task
                shown = "f1" if record.metrics and headline_metric(record.metrics).endswith("_f1") else "acc"
                bar.set_postfix({"labels": record.n_labelled, shown: f"{acc:.3f}" if acc is not None else "-"})
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
    file = Path(path)
    if not file.is_file():
        raise MissingFileError(f"costs_file (--costs): no such file {path}")
    try:
        values = np.load(file) if file.suffix == ".npy" else np.loadtxt(file, dtype=np.float64, ndmin=1,
                                                                          encoding="utf-8-sig")  # a BOM is fine
    except (ValueError, OSError) as error:
        raise InvalidArgumentError(f"costs_file (--costs): {path} is not a .npy array or a text file of numbers "
                                   f"({error})") from None
    if not isinstance(values, np.ndarray) or values.dtype.kind not in "iuf":  # strings, objects, an .npz archive
        got = f"an array of dtype {values.dtype}" if isinstance(values, np.ndarray) else "several arrays (.npz)"
        raise InvalidArgumentError(f"costs_file (--costs): {path} holds {got}; expected one array of numbers "
                                   "(a float or integer dtype)")
    return torch.as_tensor(np.asarray(values, dtype=np.float64).reshape(-1))


def _audit_answers(proposal: Proposal, index_B: Tensor, labels_B: Tensor,
                   earlier: Sequence[Proposal] = ()) -> dict[str, int]:
    """How many of the answered audit items the model that drew them predicted right: the argmax
    of its ``probs``, or for a multi-label answer (a 0/1 vector) every label's decision ``p >= 1/2``.

    An item is drawn by ``proposal`` or by one of the ``earlier`` proposals (answered after its
    round committed); drawn twice (still unanswered when a later round drew it again), it is
    counted once, against the latest model that drew it."""
    drawn: dict[int, list[float]] = {}  # item -> the predictions of the model that drew it
    for source in [*sorted(earlier, key=lambda p: p.round), proposal]:  # a later draw replaces an earlier one
        if source.audit and source.probs:
            position = {item: k for k, item in enumerate(source.ranking)}
            drawn.update({item: source.probs[position[item]] for item in source.audit if item in position})
    n = correct = 0
    for item, label in zip(index_B.tolist(), labels_B.tolist(), strict=True):
        probs = drawn.get(item)
        if probs is not None:
            n += 1
            if isinstance(label, list):
                correct += int(label_decisions(probs).tolist() == [bool(y) for y in label])
            else:
                correct += int(max(range(len(probs)), key=probs.__getitem__) == label)
    return {"n": n, "correct": correct}


def _rounded(seconds: Mapping[str, float]) -> dict[str, float]:
    return {key: round(value, 4) for key, value in seconds.items()}


class _PhaseTimer:
    """Times the phases of a round (``with timer("fit"): ...``) and announces each start."""

    def __init__(self, on_phase: Callable[[str], None] | None) -> None:
        self.on_phase = on_phase
        self._seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.on_phase is not None:
            self.on_phase(name)
        tic = time.perf_counter()
        yield
        self._seconds[name] = time.perf_counter() - tic

    @property
    def seconds(self) -> dict[str, float]:
        return _rounded(self._seconds)


# LoopConfig, Proposal, RoundRecord, LoopResult (activebayes.records) and the stopping criteria
# (activebayes.stopping) are importable from here too, as before; their reference is in their own modules.
__all__ = [
    "INITIAL_CHOICES",
    "ActiveLearningLoop",
    "check_config_names",
    "check_loop_data",
]


def _field_default(cls: type, name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name``."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)
