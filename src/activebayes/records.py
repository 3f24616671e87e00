"""What a run is and what it did: the config, the round records, the headline metric.

These small dataclasses are shared by the loop (which produces them), the run
directory (:mod:`activebayes.rundir`, which stores them) and everything that
reads runs back (the report, the benchmarks). They import nothing heavier than
the validation helpers, so reading a run never needs the loop.

Two kinds of config fields:

* **identity**: everything that changes a run's results (dataset, strategy,
  model, seed, sizes, K, ...). A run directory is tied to these.
* **runtime** (:data:`RUNTIME_FIELDS`): how the run executes, not what it
  computes: ``device``, ``threads``, ``predict_batch_size``, ``download``, ``checkpoints``.
  They may differ between the start of a run and its resumption, so a run
  started on a CPU continues on a GPU (``activebayes resume DIR --device cuda``).

The **headline metric** of a round is its test accuracy, or its validation
accuracy when the run has no test set (:func:`headline_metric`): the learning
curve, the target-accuracy stop, the report and the progress bar all use it.
A multi-label run's headline is its micro-averaged F1 (test, else validation).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import numbers
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from activebayes._validation import check_choice, check_nonnegative_float, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "COLD_START_LABELS_PER_CLASS",
    "DEFAULT_STRATEGY",
    "HEADLINE_METRICS",
    "INITIAL_CHOICES",
    "LABEL_BUDGET_REACHED",
    "REPRESENTATION_CHOICES",
    "TRAINING_CHOICES",
    "FINGERPRINT_KEY",
    "RUNTIME_FIELDS",
    "schedule_name",
    "LoopConfig",
    "LoopResult",
    "Proposal",
    "RoundRecord",
    "headline_accuracy",
    "headline_metric",
]

INITIAL_CHOICES = ("balanced", "random", "empty")

#: How long each round trains: epochs sized by the labelled set, or the BatchBALD paper's setting.
TRAINING_CHOICES = ("data", "paper")
#: Where the model starts: from scratch, or from an encoder learnt on the pool without labels.
REPRESENTATION_CHOICES = ("none", "self-supervised")
#: Bayesian heads / posteriors (:func:`activebayes.models.build_posterior`).
POSTERIOR_CHOICES = ("mc_dropout", "ensemble", "laplace")
#: ``round_seeds``: a fresh random stream for each round's model, or the same one every round
ROUND_SEEDS_CHOICES = ("per_round", "shared")

#: The default cold start acquires until this many labels per class (60 for 10 classes:
#: where typicality's and BALD's learning curves cross on MNIST, see the benchmarks).
COLD_START_LABELS_PER_CLASS = 6

#: The loop's strategy after the cold start: BADGE's batches never fell below random on the
#: benchmark's five protocols and reached 95% test accuracy as soon as any other default
#: measured (docs/benchmarks.md, "the default, measured").
DEFAULT_STRATEGY = "badge"

#: How a round's ``stop_reason`` starts when the label budget stopped the run.
LABEL_BUDGET_REACHED = "label budget reached"

#: Config fields that do not change a run's results (not part of its identity).
RUNTIME_FIELDS = ("device", "threads", "predict_batch_size", "download", "checkpoints")
#: the key in a run directory's ``config.json`` holding the SHA-256 of its settings
#: (:func:`activebayes.rundir.settings_fingerprint`); not a setting itself
FINGERPRINT_KEY = "settings_sha256"

#: The metric a round is judged by, in order of preference. A multi-label run has no accuracy:
#: its headline is the micro-averaged F1 (:func:`activebayes.metrics.multilabel.evaluate_multilabel`).
HEADLINE_METRICS = ("test_accuracy", "test_micro_f1", "validation_micro_f1", "validation_accuracy")


def headline_metric(metrics: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> str:
    """The name of the headline metric: ``"test_accuracy"`` if present, else ``"validation_accuracy"``
    (multi-label runs: ``"test_micro_f1"``, else ``"validation_micro_f1"``).

    Given several rounds' metrics, the test accuracy wins if any round has it.

    >>> headline_metric({"validation_accuracy": 0.8})
    'validation_accuracy'
    >>> headline_metric([{"validation_accuracy": 0.8, "test_accuracy": 0.7}])
    'test_accuracy'
    """
    all_metrics = [metrics] if isinstance(metrics, Mapping) else list(metrics)
    for name in HEADLINE_METRICS[:-1]:
        if any(m.get(name) is not None for m in all_metrics):
            return name
    return HEADLINE_METRICS[-1]


def headline_name(metric: str) -> str:
    """How a headline metric reads to a person: ``"accuracy"``, or ``"micro-F1"`` for a multi-label run.

    >>> headline_name("test_micro_f1"), headline_name("validation_accuracy")
    ('micro-F1', 'accuracy')
    """
    name = metric.split("_", 1)[1]
    return "accuracy" if name == "accuracy" else name.replace("_f1", "-F1")


def headline_accuracy(metrics: Mapping[str, Any]) -> float | None:
    """The headline metric's value in one round's ``metrics`` (``None`` if it has neither)."""
    value = metrics.get(headline_metric(metrics))
    return None if value is None else float(value)


# --------------------------------------------------------------------------- config


def setting(default: Any, help: str, *, flag: str | None = None, choices: Sequence[str] | None = None,
            least: int | None = None, kind: str | None = None, default_text: str | None = None) -> Any:
    """A config field that is also a command-line option: its help, flag (``--name`` by
    default), choices and smallest value live here, once. The CLI builds its options from
    them (:func:`cli_settings`) and the config's ``__post_init__`` checks ``choices`` and ``least``.
    ``kind``: ``"dir"`` / ``"file"`` (a path) or ``"text"`` (a comma-separated list)."""
    metadata = {"help": help, "flag": flag, "choices": tuple(choices) if choices else None, "least": least,
                "kind": kind, "default_text": default_text}
    return field(default=default, metadata=metadata)


def cli_settings(config_type: type) -> list[tuple[dataclasses.Field, str]]:
    """``(field, flag)`` of the fields of ``config_type`` that are command-line options (:func:`setting`)."""
    return [(f, f.metadata["flag"] or "--" + f.name.replace("_", "-"))
            for f in dataclasses.fields(config_type) if "help" in f.metadata]



_SCALAR_KINDS: dict[Any, tuple[str, Any]] = {
    bool: ("true or false", lambda v: isinstance(v, bool | np.bool_)),
    int: ("an int", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool | np.bool_)),
    float: ("a number", lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool | np.bool_)),
    str: ("a string", lambda v: isinstance(v, str | os.PathLike)),
    type(None): ("None", lambda v: v is None),
}


#: the settings that name a file or folder
_PATH_FIELDS = ("data_dir", "costs_file", "table")
#: the settings whose own check says more (the range with the type)
_OWN_TYPE_CHECKS = ("audit_fraction",)


@functools.cache
def _scalar_fields(cls: type) -> tuple[tuple[str, str, tuple[Any, ...]], ...]:
    """``(name, shown, kinds)`` of each field of ``cls`` whose type is made only of ``bool``,
    ``int``, ``float`` and ``None``, or that names a file (``shown``: the name with its flag, where
    it has one)."""
    hints = typing.get_type_hints(cls)
    flags = {"threads": "--threads", **{f.name: flag for f, flag in cli_settings(cls)}}  # --threads: every command's
    out = []
    for f in dataclasses.fields(cls):
        kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
        # names (strategy, model, ...) have their own checks that list the choices; files are checked here
        if all(k in _SCALAR_KINDS for k in kinds) and (str not in kinds or f.name in _PATH_FIELDS) and \
                f.name not in _OWN_TYPE_CHECKS:
            out.append((f.name, f"{f.name} ({flags[f.name]})" if f.name in flags else f.name, kinds))
    return tuple(out)


def _check_scalar_types(config: Any) -> None:
    """Raise :class:`InvalidTypeError` naming the setting whose value is of the wrong type (a
    TOML file's ``evaluate_test = "no"`` was stored as a true value, ``cost_budget = "x"`` failed
    in a comparison deep inside)."""
    for name, shown, kinds in _scalar_fields(type(config)):
        value = getattr(config, name)
        if not any(_SCALAR_KINDS[k][1](value) for k in kinds):
            expected = " or ".join(_SCALAR_KINDS[k][0] for k in kinds)
            raise InvalidTypeError(f"{shown} must be {expected}, got {type(value).__name__} {value!r}")


@dataclass(frozen=True)
class LoopConfig:
    """Everything that defines one active learning run (JSON-serialisable).

    Label counts include the initial labelled set: ``budget=200`` stops once
    200 items are labelled. ``model="auto"`` picks an MLP for vectors and small
    images (the 8x8 digits) and the BatchBALD CNN for larger images
    (:func:`activebayes.models.default_model_name`).

    Three sample counts: ``num_samples`` (K for scoring the pool with a strategy
    that estimates a mutual information, e.g. BALD, BatchBALD, EPIG),
    ``mean_samples`` (K for a strategy that reads only the predictive mean, e.g.
    BADGE, entropy, margin: ``Strategy.mean_only``) and ``eval_samples`` (K for the
    validation / test predictive, the mean of the K probabilities). A mutual
    information needs many: BALD is a small difference of two entropies, and two
    independent K = 20 draws agree on few of the top BALD picks (see the
    acquisition docs). The predictive mean needs few. The defaults, 100 and 20,
    follow the BatchBALD reference setup; the benchmark protocols set
    ``mean_samples = num_samples`` (their published runs scored every strategy so).

    ``cost_budget`` (with ``costs_file``) stops the run once the labelling cost
    is spent; ``budget`` always counts labels.

    ``cold_start`` (a strategy name, or ``None`` for none) acquires while fewer than
    ``cold_start_labels`` items are labelled, ``strategy`` from then on: with a handful
    of labels a model is a poor judge of its own uncertainty (the cold-start problem),
    and a strategy that needs no uncertainty, such as ``"typicality"`` (or
    ``"random"``), picks better there. The default is ``"typicality"`` until
    ``cold_start_labels=None``: :data:`COLD_START_LABELS_PER_CLASS` labels per class
    (60 for 10 classes; no cold start if the initial labels are already that many).
    Each round's record names the strategy it used.

    ``training`` sizes the training of each round: ``"data"`` (the default) trains in
    epochs sized by the labelled set, with early stopping (on the validation set, or on
    the training loss without one), so that 10 labels train in seconds; ``"paper"`` is
    the BatchBALD paper's protocol, epochs of at least 5,056 draws whatever the labelled
    set's size (:data:`activebayes.models.training.PAPER_FIT_OPTIONS`), which the
    benchmarks use where they compare with the published numbers. ``fit_options`` override either.

    ``representation="self-supervised"`` trains an encoder on the training
    split's images without labels before the first round (SimCLR; cached on
    disk, :func:`activebayes.models.train_or_load_representation` with
    ``representation_options`` as its :class:`~activebayes.models.RepresentationConfig`),
    and each round's model is that encoder with a consistent MC dropout head
    (``model="auto"`` or ``"encoder_head"``); typicality clusters its features.

    ``posterior`` chooses the Bayesian head: ``"mc_dropout"`` (consistent MC dropout, the
    default), ``"ensemble"`` (``ensemble_size`` members, default 5; on the representation
    they share its frozen encoder) or ``"laplace"`` (a last-layer Laplace posterior: the MAP
    network, then a Gaussian over its output layer with the prior precision fitted by
    marginal likelihood; :mod:`activebayes.models.laplace`).

    ``table`` (a CSV / TSV / JSONL / Parquet file) makes the pool a table instead of a
    named ``dataset`` (``dataset`` becomes ``"table"``): ``text_column`` and / or
    ``feature_columns`` are the inputs, ``label_column`` the known labels (a simulation;
    required by a run), ``id_column`` the items' stable ids
    (:func:`activebayes.data.load_table`). ``table_options`` are further arguments of
    ``load_table`` (``encoder``, ``missing``, ``categorical_columns``, ``classes``,
    ``multilabel``, ``label_separator``, ``cache_dir``, ``format``) and ``test_size``:
    rows held out as a test set, the first ``test_size`` items in the order of the
    sha256 of their ids (so the split follows the items, not the row order or the seed);
    without it the headline is the validation metric.

    ``stop_when`` (the criteria that need no test set, :mod:`activebayes.stopping`) takes a
    comma-separated string, a sequence of ``NAME`` / ``NAME=THRESHOLD`` strings or a mapping
    ``{name: threshold}``, and is stored as :func:`~activebayes.stopping.normalise_stop_when`
    writes it: canonical names, a threshold only where it is not the default, so that
    ``"remaining-change"`` and ``("remaining_change=0.005",)`` are the same run.
    ``audit_fraction`` needs ``batch_size`` 2 or more.

    ``dataset_options`` are further arguments of a named dataset's loader
    (:func:`activebayes.data.load_dataset`): ``{"encoder": FILE_OR_FOLDER}`` encodes
    ``"wordnet_nouns"``'s glosses with pretrained word vectors or a local model instead of
    TF-IDF (``--encoder`` without ``--table``).
    """

    dataset: str = setting("digits", "Dataset name (see `activebayes list datasets`).")
    data_dir: str | None = setting(None, "Folder with the dataset's files (MNIST IDX files, ...).", kind="dir")
    dataset_options: Mapping[str, Any] = field(default_factory=dict)
    download: bool = setting(False, "Download missing dataset files from their official sources (md5-checked).",
                             flag="--download/--no-download")
    strategy: str = DEFAULT_STRATEGY
    model: str = setting("auto", "Model name, or 'auto'.")
    ensemble_size: int | None = setting(None, "Use a deep ensemble of this many members instead of MC dropout.",
                                        least=2)
    seed: int = 0
    initial: str = setting("balanced", "Initial labelled set.", choices=INITIAL_CHOICES)
    initial_size: int = setting(20, "Size of the initial labelled set.", least=0)
    validation_size: int = setting(100, "Validation items held out of the pool.", least=0)
    batch_size: int = setting(10, "Labels acquired per round.", least=1)
    budget: int = setting(150, "Total labels (initial ones included).", least=1)
    cost_budget: float | None = setting(None, "Stop when this total labelling cost is spent (needs --costs).")
    costs_file: str | None = setting(None, "Per-item labelling costs: .npy or one number per line, in dataset order.",
                                     flag="--costs", kind="file")
    num_samples: int = setting(100, "K, function samples for scoring the pool.", least=1)
    eval_samples: int = setting(20, "K for the validation / test predictive.", least=1)
    mean_samples: int = setting(20, "K for strategies that read only the predictive mean (BADGE, entropy, margin).",
                                least=1)
    pool_subsample: int | None = setting(None, "Score a random subset of this many pool items per round.", least=1)
    target_accuracy: float | None = setting(None, "Stop once the test accuracy (without a test set: the "
                                                          "validation accuracy) reaches this.")
    stop_when: tuple[str, ...] = setting(
        (), "Stop without a test set when one of these fires, comma-separated, each NAME or NAME=THRESHOLD: "
        "remaining_change[=0.005] (recommended), stable_predictions[=0.99], expected_accuracy[=0.005], "
        "information[=0.1], estimated_accuracy=LOW (needs --audit-fraction); see docs/concepts/stopping.md.",
        kind="text")
    stop_set_size: int = setting(1000, "Unlabelled items the stopping signals are measured on (0: none).", least=0)
    audit_fraction: float = setting(0.0, "Share of each batch drawn uniformly at random, whose answers estimate "
                                         "accuracy without a test set.")
    plateau_patience: int | None = setting(None, "Stop after this many rounds without validation improvement.",
                                           least=1)
    plateau_min_delta: float = 0.0
    warm_start: bool = setting(False, "Keep weights between rounds instead of re-initialising.",
                               flag="--warm-start/--no-warm-start")
    round_seeds: str = setting("per_round", "Each round's model from a fresh random stream (per_round), or from the "
                               "same one every round (shared: successive models differ by their labels, not their "
                               "initialisation; steadier stopping signals).", choices=ROUND_SEEDS_CHOICES)
    evaluate_test: bool = setting(True, "Evaluate on the dataset's test split each round.", flag="--test/--no-test")
    fit_options: Mapping[str, Any] = field(default_factory=dict)
    model_options: Mapping[str, Any] = field(default_factory=dict)
    acquisition_options: Mapping[str, Any] = field(default_factory=dict)
    cold_start: str | None = setting("typicality", "Strategy for the first rounds, until --cold-start-labels labels; "
                                                   "'none' for none.")
    cold_start_labels: int | None = setting(None, "Labels up to which --cold-start acquires (then --strategy).",
                                            least=1, default_text=f"{COLD_START_LABELS_PER_CLASS} per class")
    training: str = setting("data", "Training per round: epochs sized by the labelled set with early stopping, or "
                                    "the BatchBALD paper's (at least 5,056 draws per epoch, slow for few labels).",
                            choices=TRAINING_CHOICES)
    representation: str = setting("none", "Start each round from an encoder learnt on the pool without labels "
                                          "(SimCLR, cached).", choices=REPRESENTATION_CHOICES)
    representation_options: Mapping[str, Any] = field(default_factory=dict)
    posterior: str = setting("mc_dropout", "Bayesian head: consistent MC dropout, a deep ensemble (--ensemble-size, "
                                           "5), or last-layer Laplace.", choices=POSTERIOR_CHOICES)
    table: str | None = setting(None, "A CSV / TSV / JSONL / Parquet file as the pool, instead of --dataset.",
                                kind="file")
    text_column: str | None = setting(None, "Column of the table holding each item's text.")
    feature_columns: tuple[str, ...] = setting((), "Comma-separated columns of tabular features (numbers "
                                                   "standardised, others one-hot); '*': every column but the "
                                                   "text, label and id columns (stored as their names when a "
                                                   "run starts).", kind="text")
    label_column: str | None = setting(None, "Column of known labels (a simulation; 'a|b' sets with --multilabel).")
    id_column: str | None = setting(None, "Column of unique item ids.", default_text="a hash of the row's content")
    table_options: Mapping[str, Any] = field(default_factory=dict)
    predict_batch_size: int = 512
    checkpoints: bool = True
    device: str | None = setting(None, "torch device, e.g. cuda (default: cpu).")
    #: CPU threads torch computes with during the run (``None``: as the caller has it). The last
    #: bits of a convolution depend on it, so the command line stores an explicit ``--threads N``
    #: (or ``OMP_NUM_THREADS``) here and a resumed run computes on as many.
    threads: int | None = None

    def _check_representation_data(self) -> None:
        """A self-supervised representation learns from images: a table's rows (numbers or
        encoded texts) already are features, refused here, before anything is written."""
        if self.representation != "none" and self.table is not None:
            raise InvalidArgumentError(
                f"representation (--representation) {self.representation!r} needs an image dataset, got table "
                f"{self.table}: a table or text pool already is features; use the default model or model 'mlp' "
                f"(--model mlp) without a representation")

    def __post_init__(self) -> None:
        _check_scalar_types(self)
        if self.cold_start_labels == 0 and self.cold_start in (None, "none"):  # how configs before 0.x wrote "no cold start"
            object.__setattr__(self, "cold_start_labels", None)
        for f, flag in cli_settings(type(self)):  # the choices and least values of the settings (:func:`setting`)
            choices, least, value = f.metadata["choices"], f.metadata["least"], getattr(self, f.name)
            name = f"{f.name} ({flag})"
            if choices is not None:
                check_choice(value, name, choices)
            if least is not None and value is not None:
                if not isinstance(value, bool) and isinstance(value, int) and value < least:
                    raise InvalidArgumentError(f"{name} must be >= {least}, got {value}")  # one floor, worded once
                check_positive_int(value, name, allow_zero=least == 0)
        if self.ensemble_size is not None and self.posterior == "laplace":
            raise InvalidArgumentError("ensemble_size (--ensemble-size) makes an ensemble: not with posterior "
                                       "'laplace' (--posterior laplace); use --posterior ensemble")
        if self.representation != "none" and self.model not in ("auto", "encoder_head"):
            raise InvalidArgumentError(
                f"representation={self.representation!r} builds its own model (the encoder with an MC "
                f"dropout head): model must be 'auto' or 'encoder_head', got {self.model!r}"
            )
        self._check_representation_data()
        check_positive_int(self.predict_batch_size, "predict_batch_size")
        if self.threads is not None:
            check_positive_int(self.threads, "threads (--threads)")
        from activebayes.stopping import ESTIMATED_ACCURACY, MIN_STOP_SET, normalise_stop_when  # stopping reads records: imported late

        # one stored form (canonical names, a threshold only where it is not the default), so that
        # equivalent spellings are the same run, also when read back from an earlier config.json
        object.__setattr__(self, "stop_when", normalise_stop_when(self.stop_when))
        if isinstance(self.audit_fraction, bool) or not isinstance(self.audit_fraction, int | float):
            raise InvalidTypeError(f"audit_fraction (--audit-fraction) must be a number in [0, 1), got "
                                   f"{type(self.audit_fraction).__name__} {self.audit_fraction!r}")
        if not 0.0 <= self.audit_fraction < 1.0:
            raise InvalidArgumentError(f"audit_fraction (--audit-fraction) must be in [0, 1), got {self.audit_fraction!r}")
        if self.audit_fraction and self.batch_size < 2:
            raise InvalidArgumentError(
                f"audit_fraction (--audit-fraction) {self.audit_fraction:g} needs batch_size (--batch-size) 2 or more: "
                f"the audit swaps some of each batch's picks for uniformly drawn items, and a batch of one has none to "
                f"spare; got batch_size={self.batch_size}")
        if self.stop_when and not self.stop_set_size:
            raise InvalidArgumentError(
                f"stop_when (--stop-when) needs a stop set: stop_set_size (--stop-set-size) must be at least "
                f"{MIN_STOP_SET}, got 0 (0 measures no stopping signal, estimated_accuracy included: every signal "
                "is measured in the stop set's pass)")
        if self.stop_when and self.stop_set_size < MIN_STOP_SET:
            raise InvalidArgumentError(
                f"stop_set_size (--stop-set-size) must be at least {MIN_STOP_SET} when stop_when (--stop-when) is set, "
                f"got {self.stop_set_size}: the signals on S items move in steps of 1/S "
                f"({100 / self.stop_set_size:.3g}% here), too coarse to tell a settled model from a changing one")
        if any(spec.partition("=")[0] == ESTIMATED_ACCURACY for spec in self.stop_when) and not self.audit_fraction:
            raise InvalidArgumentError(
                "stop_when (--stop-when) estimated_accuracy needs audited answers: set audit_fraction "
                "(--audit-fraction), e.g. 0.2")
        check_positive_int(self.seed, "seed", allow_zero=True)
        if self.cold_start is not None and not isinstance(self.cold_start, str):
            raise InvalidTypeError(f"cold_start must be a strategy name or None, got {type(self.cold_start).__name__}")
        if self.cold_start == "none":  # the CLI's and TOML's spelling of None
            object.__setattr__(self, "cold_start", None)
        if self.cold_start_labels == 0 and self.cold_start is None:  # how configs before 0.x wrote "no cold start"
            object.__setattr__(self, "cold_start_labels", None)
        if self.cold_start is None and self.cold_start_labels is not None:
            raise InvalidArgumentError(
                "cold_start_labels (--cold-start-labels) needs a cold_start strategy (--cold-start, e.g. "
                f"typicality), got cold_start=None and cold_start_labels={self.cold_start_labels}"
            )
        if self.cold_start is not None and self.cold_start_labels is not None and self.cold_start_labels <= self.initial_size:
            raise InvalidArgumentError(
                f"cold_start_labels (--cold-start-labels) must be larger than initial_size ({self.initial_size}), "
                f"or the cold-start strategy never acquires; got {self.cold_start_labels}"
            )
        if self.initial == "empty" and self.initial_size:
            object.__setattr__(self, "initial_size", 0)
        if self.initial != "empty" and self.initial_size == 0:
            raise InvalidArgumentError("initial_size must be >= 1 unless initial='empty', got 0")
        if self.budget <= self.initial_size:
            raise InvalidArgumentError(
                f"budget must be larger than initial_size (the labels already given), "
                f"got budget={self.budget} and initial_size={self.initial_size}"
            )
        if self.budget < self.batch_size:
            raise InvalidArgumentError(
                f"budget must be at least batch_size, got budget={self.budget} and batch_size={self.batch_size}"
            )
        if self.pool_subsample is not None and self.pool_subsample < self.batch_size:
            raise InvalidArgumentError(
                f"pool_subsample (--pool-subsample) must be at least batch_size (--batch-size): each round picks its "
                f"batch from the subsample; got pool_subsample={self.pool_subsample} and batch_size={self.batch_size}")
        check_nonnegative_float(self.plateau_min_delta, "plateau_min_delta")  # NaN never fires: refused here, named
        if self.target_accuracy is not None and not 0.0 < self.target_accuracy <= 1.0:
            raise InvalidArgumentError(f"target_accuracy must be in (0, 1], got {self.target_accuracy}")
        if self.cost_budget is not None and not self.cost_budget > 0:
            raise InvalidArgumentError(f"cost_budget (--cost-budget) must be > 0, got {self.cost_budget}")
        if self.costs_file is not None and self.cost_budget is None:
            raise InvalidArgumentError("costs_file (--costs) needs cost_budget (--cost-budget): the total labelling "
                                       "cost allowed")
        self._check_table()
        # freeze the nested option mappings into plain dicts (JSON round trip)
        for name in ("fit_options", "model_options", "acquisition_options", "representation_options", "table_options",
                     "dataset_options"):
            value = getattr(self, name)
            if not isinstance(value, Mapping):
                raise InvalidTypeError(f"{name} must be a mapping, got {type(value).__name__}")
            object.__setattr__(self, name, dict(value))

    def _check_table(self) -> None:
        """The table fields: a table pool needs inputs; table fields need a table."""
        if isinstance(self.feature_columns, str):
            object.__setattr__(self, "feature_columns", tuple(c.strip() for c in self.feature_columns.split(",")
                                                              if c.strip()))
        object.__setattr__(self, "feature_columns", tuple(self.feature_columns))
        if self.table is None:
            flags = {"text_column": "--text-column", "feature_columns": "--feature-columns",
                     "label_column": "--label-column", "id_column": "--id-column", "table_options": "--encoder, ..."}
            given = [f"{name} ({flag})" for name, flag in flags.items() if getattr(self, name)]
            if given:
                raise InvalidArgumentError(f"{', '.join(given)}: only with a table (table / --table FILE)")
            return
        if not isinstance(self.table, str) or not self.table:
            raise InvalidTypeError(f"table must be a file path (str), got {self.table!r}")
        # stored as an absolute path, so that the run resumes from any working directory
        object.__setattr__(self, "table", str(Path(self.table).expanduser().absolute()))
        if self.dataset not in ("digits", "table"):  # "digits" is the default: not chosen
            raise InvalidArgumentError(f"give a dataset (--dataset) or a table (--table), not both: got dataset="
                                       f"{self.dataset!r} and table={self.table!r}")
        object.__setattr__(self, "dataset", "table")
        if self.text_column is None and not self.feature_columns:
            raise InvalidArgumentError("a table needs its input columns: text_column (--text-column COL) and / or "
                                       "feature_columns (--feature-columns A,B,...)")
        if not isinstance(self.table_options, Mapping):
            raise InvalidTypeError(f"table_options must be a mapping, got {type(self.table_options).__name__}")
        known = {"encoder", "missing", "categorical_columns", "classes", "multilabel", "label_separator",
                 "cache_dir", "format", "test_size"}
        unknown = sorted(set(self.table_options) - known)
        if unknown:
            raise InvalidArgumentError(f"unknown table_options {', '.join(map(repr, unknown))}; expected some of: "
                                       f"{', '.join(sorted(known))}")
        if "test_size" in self.table_options:
            check_positive_int(self.table_options["test_size"], "table_options['test_size'] (--test-size)",
                               allow_zero=True)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def pinned(self) -> LoopConfig:
        """This config with the defaults it leaves to other parts written out, as a run
        directory stores it: the representation's recipe (epochs, widths, learning rate, ...),
        so that a later change of :class:`~activebayes.models.RepresentationConfig`'s defaults
        cannot change what resuming the run computes."""
        if self.representation == "none":
            return self
        from activebayes.models.representation import RepresentationConfig

        options = RepresentationConfig.from_dict(self.representation_options).to_dict()
        return dataclasses.replace(self, representation_options=options)

    def identity(self) -> dict[str, Any]:
        """The fields that change results (everything but :data:`RUNTIME_FIELDS`), with the
        defaults :meth:`pinned` writes out: an unset option equals the default it takes."""
        return {k: v for k, v in self.pinned().to_dict().items() if k not in RUNTIME_FIELDS}

    def same_run(self, other: LoopConfig) -> bool:
        """Whether ``other`` computes the same run (equal identities)."""
        return self.identity() == other.identity()

    def differences(self, other: LoopConfig) -> list[str]:
        """Names of the identity fields in which ``other`` differs."""
        mine, theirs = self.identity(), other.identity()
        return sorted(k for k in mine if mine[k] != theirs.get(k))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            hints = []
            for key in unknown:  # a misspelt setting: the one close to it
                close = difflib.get_close_matches(str(key).lower(), sorted(known), n=1, cutoff=0.6)
                hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise InvalidArgumentError(
                f"unknown config key(s) {', '.join(hints)}; expected some of: {', '.join(sorted(known))}"
            )
        return cls(**dict(data))

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> LoopConfig:
        """A config read back from a run directory, written by any earlier version.

        Configs written before ``eval_samples`` existed evaluated with
        ``num_samples`` function samples; they keep doing so on resume. Configs
        written before ``cold_start`` existed had none; they resume without one.
        Configs written before ``training`` existed trained as the BatchBALD paper
        (``training="paper"``); they keep doing so. Configs written before
        ``mean_samples`` existed scored every strategy with ``num_samples``; they keep doing so.
        """
        data = {k: v for k, v in data.items() if k != FINGERPRINT_KEY}  # checked by RunDirectory.read_config
        if "eval_samples" not in data and "num_samples" in data:
            data["eval_samples"] = data["num_samples"]
        if "mean_samples" not in data and "num_samples" in data:
            data["mean_samples"] = data["num_samples"]
        if "cold_start" not in data:  # written before the cold start existed: none, as then
            data["cold_start"] = None
        if "training" not in data:  # written when every run trained as the BatchBALD paper did
            data["training"] = "paper"
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> LoopConfig:
        return dataclasses.replace(self, **changes)


def schedule_name(config: LoopConfig) -> str:
    """The run's acquisition schedule in one word, for headers and directory names:
    ``"typicality-then-badge"`` with a cold start, else the strategy (``"bald"``).

    Each round's record names the strategy that picked its batch (``strategy``): the
    source of truth for which strategy picked what.

    >>> schedule_name(LoopConfig(strategy="badge", cold_start="typicality"))
    'typicality-then-badge'
    >>> schedule_name(LoopConfig(strategy="bald", cold_start=None))
    'bald'
    """
    if config.cold_start is None or config.cold_start == config.strategy:
        return config.strategy
    return f"{config.cold_start}-then-{config.strategy}"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Proposal:
    """What :meth:`ActiveLearningLoop.propose` found: round ``round``'s batch to label.

    ``indices`` are original dataset indices in pick order (empty when the run
    stops: ``stop_reason`` says why), with their acquisition ``scores`` at pick
    time. ``ranking`` extends the batch with up to ``lookahead`` further items in
    the strategy's order (the batch is its prefix), with ``ranking_scores`` and
    the model's predictive class probabilities ``probs`` (``[len(ranking)][C]``,
    the mean over function samples; empty before the first model). ``strategy``
    is the strategy actually used (``"random"`` while nothing is labelled).
    """

    round: int
    n_labelled: int
    indices: list[int]
    scores: list[float]
    ranking: list[int]
    ranking_scores: list[float]
    probs: list[list[float]]
    metrics: dict[str, Any]
    class_counts: list[int]
    cost_spent: float
    fit: dict[str, Any]
    seconds: dict[str, float]
    strategy: str
    stop_reason: str | None = None
    #: the kind of stop (:mod:`activebayes.stopping`), with ``stop_reason``
    stop_kind: str | None = None
    #: the stopping signals measured this round (:func:`activebayes.stopping.round_signals`)
    signals: dict[str, Any] | None = None
    #: the uniformly drawn items of the batch (``audit_fraction``), whose answers estimate accuracy
    audit: list[int] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        """Whether a stopping criterion fired (the proposal then has no items)."""
        return self.stop_reason is not None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


@dataclass(frozen=True)
class RoundRecord:
    """What one round did, as stored in ``rounds.jsonl``.

    ``n_labelled`` is the size of the labelled set the model of this round was
    trained on (and evaluated with); ``acquired`` are the original dataset
    indices labelled this round (in pick order for an oracle that answers the
    whole batch), with their ``scores`` and ``labels``; ``strategy`` is the
    strategy that ranked them (``None`` in records written before it was kept).
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
    strategy: str | None = None
    #: the kind of stop (:mod:`activebayes.stopping`); ``None`` in records written before it
    #: was kept (:func:`activebayes.stopping.stop_kind_of` reads those)
    stop_kind: str | None = None
    #: the stopping signals measured this round, and ``audit`` (``n``, ``correct``): the answers
    #: to the round's uniformly drawn items against the round model's predictions
    signals: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RoundRecord:
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})

    @property
    def accuracy(self) -> float | None:
        """The round's headline accuracy (:func:`headline_accuracy`)."""
        return headline_accuracy(self.metrics)


@dataclass(frozen=True)
class LoopResult:
    config: LoopConfig
    rounds: list[RoundRecord]
    stop_reason: str
    labelled_indices: list[int]

    @property
    def metric(self) -> str:
        """The headline metric of this run (:func:`headline_metric`)."""
        return headline_metric([r.metrics for r in self.rounds])

    @property
    def learning_curve(self) -> tuple[list[int], list[float]]:
        """``(n_labelled, accuracy)`` per round, in the headline metric."""
        metric = self.metric
        rounds = [r for r in self.rounds if r.metrics.get(metric) is not None]
        return [r.n_labelled for r in rounds], [float(r.metrics[metric]) for r in rounds]
