"""A labelling project's settings: what it labels and how it picks the items, fixed at creation.

:class:`ProjectConfig` holds them and checks each one; :func:`setting_differences`
compares them with the settings a later command gives (a project's settings never
change: running the same command again continues it, any other value is refused).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from activebayes._validation import check_choice, check_positive_int
from activebayes.acquisition import available_strategies
from activebayes.data import available_datasets
from activebayes.errors import ActiveBayesError
from activebayes.models import available_models
from activebayes.acquisition.multilabel_strategies import MULTILABEL_COUNTERPARTS, MULTILABEL_STRATEGIES
from activebayes.records import DEFAULT_STRATEGY, POSTERIOR_CHOICES, ROUND_SEEDS_CHOICES, LoopConfig

__all__ = ["MAX_MULTILABEL_CLASSES", "ProjectConfig", "ProjectError",
           "setting_differences"]

#: a multi-label answer is stored as a bitmask of its classes in one SQLite integer
MAX_MULTILABEL_CLASSES = 62


class ProjectError(ActiveBayesError, ValueError):
    """A labelling project cannot be created or opened as asked."""


@dataclass(frozen=True)
class ProjectConfig:
    """What a labelling project labels and how it picks the items.

    Exactly one of ``images`` (a folder; stored absolute, ``classes`` required),
    ``dataset`` (a built-in dataset name, its labels ignored) and ``table`` (a CSV / TSV /
    JSONL / Parquet file; stored absolute, ``classes`` required): its items are the rows,
    shown by their ``text_column`` and / or ``feature_columns``, identified by ``id_column``
    (else a hash of the row's content, :func:`activebayes.data.load_table`); a label column
    in the file is ignored (the project's labels are the ones given to it).
    ``table_options`` are :class:`~activebayes.records.LoopConfig`'s (``encoder``,
    ``missing``, ``categorical_columns``, ``label_separator``, ``cache_dir``, ``format``),
    and ``multilabel=True`` makes each answer a set of classes (at most
    :data:`MAX_MULTILABEL_CLASSES`; the default ``badge`` runs as ``multilabel_badge``, as ``bald`` as ``multilabel_bald``).
    A built-in dataset whose items carry sets of classes (``ArrayDataset.multilabel``, e.g.
    ``mnist_pairs``) makes a multi-label project with no flag: :meth:`for_dataset` sets
    ``table_options={"multilabel": True}`` when the project is created (the one table option
    a ``dataset`` project takes; given for a single-label dataset it is refused there). The loop settings
    (``strategy``, ``cold_start``, ``model``, ``batch_size``, ``num_samples``, ``eval_samples``,
    ``seed``, ``fit_options``, ``posterior``, ``round_seeds``) mean what they mean in :class:`~activebayes.records.LoopConfig`
    (the cold start runs until its default label count, 6 per class);
    the project starts with no labels (the first round picks at random) and holds
    nothing out (``validation_size=0``). ``lookahead``: how far the app's ranking
    reaches beyond each batch (the items served while the next model trains);
    ``lease_seconds``: how long an item stays reserved for the annotator it was
    given to.
    """

    dataset: str | None = None
    images: str | None = None
    classes: tuple[str, ...] | None = None
    data_dir: str | None = None
    strategy: str = DEFAULT_STRATEGY
    cold_start: str | None = "typicality"
    model: str = "auto"
    #: the Bayesian head (:attr:`~activebayes.records.LoopConfig.posterior`)
    posterior: str = "mc_dropout"
    batch_size: int = 10
    num_samples: int = 100
    eval_samples: int = 20
    seed: int = 0
    fit_options: Mapping[str, Any] = field(default_factory=dict)
    lookahead: int = 100
    lease_seconds: float = 300.0
    #: the loop's ``audit_fraction`` and ``stop_when`` (:mod:`activebayes.stopping`)
    audit_fraction: float = 0.0
    stop_when: tuple[str, ...] = ()
    #: each round's model from a fresh random stream, or the same one (steadier stopping signals)
    round_seeds: str = "per_round"
    #: a table of texts / rows (see the class docstring), with LoopConfig's names
    table: str | None = None
    text_column: str | None = None
    feature_columns: tuple[str, ...] = ()
    id_column: str | None = None
    table_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        sources = [flag for flag, value in (("--dataset", self.dataset), ("--images", self.images),
                                            ("--table", self.table)) if value is not None]
        if len(sources) != 1:
            raise ProjectError("a labelling project needs exactly one of --dataset NAME, --images FOLDER or "
                               f"--table FILE, got {' and '.join(sources) if sources else 'none'}")
        for name in ("images", "table"):
            if getattr(self, name) is not None:
                if not self.classes:
                    raise ProjectError(f"--classes is required with --{name}: the class names a labeller may use")
                object.__setattr__(self, name, str(Path(getattr(self, name)).expanduser().absolute()))
        self._check_table()
        if self.dataset is not None:
            check_choice(self.dataset, "dataset", available_datasets())
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", str(Path(self.data_dir).expanduser().absolute()))
        check_choice(self.strategy, "strategy", available_strategies())
        if self.cold_start == "none":
            object.__setattr__(self, "cold_start", None)
        if self.cold_start is not None:
            check_choice(self.cold_start, "cold_start", available_strategies())
        check_choice(self.model, "model", list(dict.fromkeys(["auto", *available_models()])))
        check_choice(self.posterior, "posterior", POSTERIOR_CHOICES)
        check_choice(self.round_seeds, "round_seeds", ROUND_SEEDS_CHOICES)
        for name in ("batch_size", "num_samples", "eval_samples"):
            check_positive_int(getattr(self, name), name)
        check_positive_int(self.seed, "seed", allow_zero=True)
        check_positive_int(self.lookahead, "lookahead", allow_zero=True)
        if not isinstance(self.lease_seconds, int | float) or not self.lease_seconds > 0:
            raise ProjectError(f"lease_seconds must be > 0, got {self.lease_seconds!r}")
        if self.classes is not None:
            classes = tuple(str(c).strip() for c in self.classes)
            if len(classes) < 2 or len(set(classes)) != len(classes) or not all(classes):
                raise ProjectError(f"classes must be two or more distinct names, got {list(classes)}")
            object.__setattr__(self, "classes", classes)
        if not isinstance(self.fit_options, Mapping):
            raise ProjectError(f"fit_options must be a mapping, got {type(self.fit_options).__name__}")
        object.__setattr__(self, "fit_options", dict(self.fit_options))
        # the loop's own checks (audit needs batches of 2 or more) and its one stored form of stop_when
        checked = LoopConfig(audit_fraction=self.audit_fraction, stop_when=self.stop_when,
                             batch_size=self.batch_size, budget=max(self.batch_size, 150))
        object.__setattr__(self, "stop_when", checked.stop_when)
        # checked before anything is created, as the loop would refuse it later; a built-in dataset's
        # kind is known once it is loaded (:meth:`for_dataset`, at creation)
        if self.dataset is None:
            self._check_strategies()

    def _check_strategies(self) -> None:
        """The strategy and cold start fit the project's kind (single- or multi-label)."""
        if not self.multilabel:
            for flag, name in (("--strategy", self.strategy), ("--cold-start", self.cold_start)):
                if name in MULTILABEL_STRATEGIES:
                    raise ProjectError(f"{flag} {name!r} is for multi-label projects (--table FILE --multilabel, "
                                       "or a multi-label --dataset such as mnist_pairs); this one takes one answer "
                                       "per item: use badge, bald, batchbald, ...")
            return
        takes = (*MULTILABEL_STRATEGIES, *MULTILABEL_COUNTERPARTS, "random", "typicality")
        for flag, name in (("--strategy", self.strategy), ("--cold-start", self.cold_start)):
            if name is not None and name not in takes:  # badge, bald, ... run their label-vector versions
                raise ProjectError(f"{flag} {name!r} reads single-label predictions; a multi-label project "
                                   f"takes one of {', '.join(takes)}")

    def for_dataset(self, dataset: Any) -> ProjectConfig:
        """This config for the items it was loaded with (``dataset``, an :class:`~activebayes.data.ArrayDataset`):
        a built-in dataset whose targets are sets of classes (``dataset.multilabel``) makes a
        multi-label project (``table_options={"multilabel": True}``, stored with the settings);
        ``multilabel`` asked of a single-label one, too many classes for a multi-label one, or a
        strategy of the other kind is a :class:`ProjectError`. Tables and image folders are
        returned as they are."""
        if self.dataset is None:
            return self
        multilabel = bool(getattr(dataset, "multilabel", False))
        if self.multilabel and not multilabel:
            raise ProjectError(f"--multilabel: dataset {self.dataset!r} is single-label (one class per item); "
                               "drop --multilabel, or label a table with --table FILE --multilabel")
        config = self
        if multilabel:
            classes = tuple(dataset.classes)
            if len(classes) > MAX_MULTILABEL_CLASSES:
                raise ProjectError(f"dataset {self.dataset!r} is multi-label with {len(classes)} classes; a labelling "
                                   f"project takes at most {MAX_MULTILABEL_CLASSES}")
            if not self.multilabel:
                config = dataclasses.replace(self, table_options={**self.table_options, "multilabel": True})
        config._check_strategies()
        return config

    def _check_table(self) -> None:
        """The table fields, checked as :class:`~activebayes.records.LoopConfig` checks them."""
        if isinstance(self.feature_columns, str):
            object.__setattr__(self, "feature_columns", tuple(c.strip() for c in self.feature_columns.split(",")
                                                              if c.strip()))
        object.__setattr__(self, "feature_columns", tuple(self.feature_columns))
        if not isinstance(self.table_options, Mapping):
            raise ProjectError(f"table_options must be a mapping, got {type(self.table_options).__name__}")
        options = dict(self.table_options)
        if options.get("multilabel") is False:
            del options["multilabel"]  # stored only when on
        object.__setattr__(self, "table_options", options)
        for name in ("label_column", "classes", "test_size"):
            if name in options:
                raise ProjectError(f"table_options {name!r}: not for a labelling project (its classes are "
                                   "--classes, its labels the answers it is given)")
        if self.table is None:
            # a built-in dataset's one table option: multilabel (its items carry sets of classes)
            dataset_multilabel = self.dataset is not None and options == {"multilabel": True}
            flags = (("text_column", "--text-column"), ("feature_columns", "--feature-columns"),
                     ("id_column", "--id-column"), ("table_options", "--encoder / --multilabel / --missing"))
            given = [flag for name, flag in flags if getattr(self, name)
                     and not (name == "table_options" and dataset_multilabel)]
            if given:
                raise ProjectError(f"{', '.join(given)}: only with a table (--table FILE)")
            return
        # LoopConfig's own checks (input columns, known options)
        self.loop_config(2, name="table", evaluate_test=False)
        if self.multilabel:
            assert self.classes is not None
            if len(self.classes) > MAX_MULTILABEL_CLASSES:
                raise ProjectError(f"--multilabel: at most {MAX_MULTILABEL_CLASSES} classes, got {len(self.classes)}")

    @property
    def multilabel(self) -> bool:
        """Whether each answer is a set of classes (``table_options["multilabel"]``: a ``--multilabel``
        table, or a multi-label built-in dataset once the project is created, :meth:`for_dataset`)."""
        return bool(self.table_options.get("multilabel", False))

    @property
    def source(self) -> str:
        """What the project labels: the image folder, the table file or the dataset name."""
        return str(self.images or self.table or self.dataset)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["classes"] = list(self.classes) if self.classes is not None else None
        data["feature_columns"] = list(self.feature_columns)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProjectConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ProjectError(f"unknown project setting(s) {', '.join(unknown)}")
        values = dict(data)
        values.setdefault("cold_start", None)  # projects made before the cold start existed had none
        if values.get("classes") is not None:
            values["classes"] = tuple(values["classes"])
        values["feature_columns"] = tuple(values.get("feature_columns") or ())
        return cls(**values)

    def loop_config(self, n_items: int, *, name: str, evaluate_test: bool) -> LoopConfig:
        """The loop's config for a pool of ``n_items`` items (budget: label them all). A table
        project's loop reads the table through LoopConfig's table fields (no label column: the
        project's ``classes`` are the table's)."""
        table: dict[str, Any] = {}
        if self.table is not None:
            table = {"table": self.table, "text_column": self.text_column, "feature_columns": self.feature_columns,
                     "id_column": self.id_column,
                     "table_options": {**self.table_options, "classes": list(self.classes or ())}}
        return LoopConfig(
            dataset="table" if self.table is not None else name,
            **table,
            strategy=self.strategy,
            cold_start=self.cold_start,
            model=self.model,
            posterior=self.posterior,
            seed=self.seed,
            initial="empty",
            initial_size=0,
            validation_size=0,
            batch_size=min(self.batch_size, n_items),
            budget=n_items,
            num_samples=self.num_samples,
            eval_samples=self.eval_samples,
            evaluate_test=evaluate_test,
            fit_options=self.fit_options,
            checkpoints=False,
            audit_fraction=self.audit_fraction,
            stop_when=self.stop_when,
            round_seeds=self.round_seeds,
        )


def _setting_value(name: str, value: Any) -> Any:
    """A setting in the form it is compared in (see :func:`setting_differences`)."""
    if value is None:
        return None
    if name in ("classes", "feature_columns"):
        names = value.split(",") if isinstance(value, str) else value
        return tuple(str(c).strip() for c in names if str(c).strip())
    if name in ("images", "data_dir", "table"):
        return os.path.realpath(Path(str(value)).expanduser())
    if name == "cold_start" and value == "none":
        return None
    return value


def _shown(name: str, value: Any) -> str:
    if value is None:
        return "none" if name == "cold_start" else "(not set)"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def setting_differences(config: ProjectConfig, given: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(flag, stored, given)`` for each setting in ``given`` (command-line names: ``classes``
    as ``"a,b"`` or a sequence, ``max_epochs`` for ``fit_options["max_epochs"]``) that differs
    from the project's ``config``. Paths are compared resolved, class lists name by name."""
    stored_values = config.to_dict()
    stored_values["max_epochs"] = config.fit_options.get("max_epochs")
    stored_values["encoder"] = config.table_options.get("encoder")
    stored_values["multilabel"] = config.multilabel or None
    differences = []
    for name, value in given.items():
        if value is None or (name == "multilabel" and value is False):
            continue
        if name not in stored_values:
            raise ProjectError(f"unknown project setting {name!r}")
        stored = _setting_value(name, stored_values[name])
        wanted = _setting_value(name, value)
        if stored != wanted:
            differences.append(("--" + name.replace("_", "-"), _shown(name, stored), _shown(name, wanted)))
    return differences
