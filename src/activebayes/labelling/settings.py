"""A labelling project's settings: what it labels and how it picks the items, fixed at creation.

:class:`ProjectConfig` holds them and checks each one: the settings it shares with the loop
(strategy, model, batch size, ...) have :class:`~activebayes.records.LoopConfig`'s defaults
and checks, its own (the source, classes, lookahead, ...) their own; :func:`setting_differences`
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

from activebayes._validation import check_positive_int
from activebayes.acquisition import get_strategy
from activebayes.acquisition.multilabel_strategies import MULTILABEL_COUNTERPARTS, MULTILABEL_STRATEGIES
from activebayes.errors import ActiveBayesError
from activebayes.loop import check_config_names
from activebayes.records import LoopConfig

__all__ = ["DIFFERENT_DEFAULTS", "LOOP_SETTINGS", "MAX_MULTILABEL_CLASSES", "ProjectConfig", "ProjectError",
           "TABLE_SETTINGS", "setting_differences"]

#: a multi-label answer is stored as a bitmask of its classes in one SQLite integer
MAX_MULTILABEL_CLASSES = 62

#: the settings a project passes to its loop as they are (with :data:`TABLE_SETTINGS`, a table project's)
LOOP_SETTINGS = ("strategy", "cold_start", "model", "posterior", "batch_size", "num_samples", "eval_samples",
                 "seed", "fit_options", "audit_fraction", "stop_when", "round_seeds")
TABLE_SETTINGS = ("table", "text_column", "feature_columns", "id_column", "table_options")

#: the settings named as LoopConfig's whose project default deliberately differs, and why
DIFFERENT_DEFAULTS: dict[str, Any] = {
    # a project labels the one source it is given (--dataset, --images or --table): LoopConfig's
    # "digits" would make every image folder and table project a digits project too
    "dataset": None,
}


def _loop_default(name: str) -> Any:
    """A project setting whose default is LoopConfig's field ``name``'s (its one home)."""
    loop_field = next(f for f in dataclasses.fields(LoopConfig) if f.name == name)
    if loop_field.default_factory is not dataclasses.MISSING:
        return field(default_factory=loop_field.default_factory)
    return field(default=loop_field.default)


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
    (:data:`LOOP_SETTINGS`: ``strategy``, ``cold_start``, ``model``, ``batch_size``, ``num_samples``,
    ``eval_samples``, ``seed``, ``fit_options``, ``posterior``, ``audit_fraction``, ``stop_when``,
    ``round_seeds``, and a table's fields) mean what they mean in :class:`~activebayes.records.LoopConfig`,
    with its defaults (but :data:`DIFFERENT_DEFAULTS`) and its checks
    (the cold start runs until its default label count, 6 per class);
    the project starts with no labels (the first round picks at random) and holds
    nothing out (``validation_size=0``). ``lookahead``: how far the app's ranking
    reaches beyond each batch (the items served while the next model trains);
    ``lease_seconds``: how long an item stays reserved for the annotator it was
    given to.
    """

    dataset: str | None = DIFFERENT_DEFAULTS["dataset"]
    images: str | None = None
    classes: tuple[str, ...] | None = None
    data_dir: str | None = _loop_default("data_dir")
    strategy: str = _loop_default("strategy")
    cold_start: str | None = _loop_default("cold_start")
    model: str = _loop_default("model")
    #: the Bayesian head (:attr:`~activebayes.records.LoopConfig.posterior`)
    posterior: str = _loop_default("posterior")
    batch_size: int = _loop_default("batch_size")
    num_samples: int = _loop_default("num_samples")
    eval_samples: int = _loop_default("eval_samples")
    seed: int = _loop_default("seed")
    fit_options: Mapping[str, Any] = _loop_default("fit_options")
    lookahead: int = 100
    lease_seconds: float = 300.0
    #: the loop's ``audit_fraction`` and ``stop_when`` (:mod:`activebayes.stopping`)
    audit_fraction: float = _loop_default("audit_fraction")
    stop_when: tuple[str, ...] = _loop_default("stop_when")
    #: each round's model from a fresh random stream, or the same one (steadier stopping signals)
    round_seeds: str = _loop_default("round_seeds")
    #: a table of texts / rows (see the class docstring), with LoopConfig's names
    table: str | None = _loop_default("table")
    text_column: str | None = _loop_default("text_column")
    feature_columns: tuple[str, ...] = _loop_default("feature_columns")
    id_column: str | None = _loop_default("id_column")
    table_options: Mapping[str, Any] = _loop_default("table_options")

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
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", str(Path(self.data_dir).expanduser().absolute()))
        check_positive_int(self.lookahead, "lookahead", allow_zero=True)
        if not isinstance(self.lease_seconds, int | float) or not self.lease_seconds > 0:
            raise ProjectError(f"lease_seconds must be > 0, got {self.lease_seconds!r}")
        if self.classes is not None:
            classes = tuple(str(c).strip() for c in self.classes)
            if len(classes) < 2 or len(set(classes)) != len(classes) or not all(classes):
                raise ProjectError(f"classes (--classes) must be two or more distinct names, got {list(classes)}")
            object.__setattr__(self, "classes", classes)
        if self.table is not None and self.multilabel and len(self.classes or ()) > MAX_MULTILABEL_CLASSES:
            raise ProjectError(f"--multilabel: at most {MAX_MULTILABEL_CLASSES} classes, got {len(self.classes or ())}")
        self._check_loop_settings()
        # checked before anything is created, as the loop would refuse it later; a built-in dataset's
        # kind is known once it is loaded (:meth:`for_dataset`, at creation)
        if self.dataset is None:
            self._check_strategies()

    def _check_strategies(self) -> None:
        """The strategy and cold start fit the project's kind (single- or multi-label)."""
        given = (("--strategy", self.strategy), ("--cold-start", self.cold_start))
        canonical = {name: get_strategy(name).name for _, name in given if name is not None}  # aliases too
        if not self.multilabel:
            for flag, name in given:
                if canonical.get(name) in MULTILABEL_STRATEGIES:
                    raise ProjectError(f"{flag} {name!r} is for multi-label projects (--table FILE --multilabel, "
                                       "or a multi-label --dataset such as mnist_pairs); this one takes one answer "
                                       "per item: use badge, bald, batchbald, ...")
            return
        takes = (*MULTILABEL_STRATEGIES, *MULTILABEL_COUNTERPARTS, "random", "typicality")
        for flag, name in given:
            if name is not None and canonical[name] not in takes:  # badge, bald, ... run their label-vector versions
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
        """The table fields a project refuses (a label column, classes and a test set from the file; table
        fields without a table); the rest are LoopConfig's checks (:meth:`_check_loop_settings`)."""
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
                     ("id_column", "--id-column"))
            given = [flag for name, flag in flags if getattr(self, name)]
            if not dataset_multilabel:  # the table options given, by their flags (--multilabel), not all three
                given += [f"--{key}" if key in ("encoder", "multilabel", "missing") else f"table_options {key!r}"
                          for key in options]
            if given:
                raise ProjectError(f"{', '.join(given)}: only with a table (--table FILE)")

    def _loop_settings(self) -> dict[str, Any]:
        """The settings the loop takes from the project, with LoopConfig's names: a table
        project's table fields too (no label column: the project's ``classes`` are the table's)."""
        settings = {name: getattr(self, name) for name in LOOP_SETTINGS}
        if self.table is not None:
            settings.update({name: getattr(self, name) for name in TABLE_SETTINGS})
            settings["table_options"] = {**self.table_options, "classes": list(self.classes or ())}
        return settings

    def _check_loop_settings(self) -> None:
        """The loop settings, checked by the loop's own checks (a :class:`LoopConfig` of them and
        :func:`~activebayes.loop.check_config_names`) and kept in the form the loop stores them in."""
        settings = self._loop_settings()
        source = {"dataset": "table"} if self.table is not None else {"dataset": self.dataset} if self.dataset else {}
        batch = self.batch_size if type(self.batch_size) is int and self.batch_size >= 1 else 1  # else refused
        checked = LoopConfig(**source, **settings, initial="empty", validation_size=0, budget=batch)
        check_config_names(checked)
        for name in settings.keys() - {"table_options"}:  # "none" -> None, stop_when's one form, ...
            object.__setattr__(self, name, getattr(checked, name))

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
        """The loop's config for a pool of ``n_items`` items (budget: label them all): the project's
        :data:`LOOP_SETTINGS` (a table's :data:`TABLE_SETTINGS` too), no labels to start with and none
        held out."""
        settings = {**self._loop_settings(), "batch_size": min(self.batch_size, n_items)}
        return LoopConfig(dataset="table" if self.table is not None else name, **settings, initial="empty",
                          initial_size=0, validation_size=0, budget=n_items, evaluate_test=evaluate_test,
                          checkpoints=False)


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
