"""What the report reads: a directory's runs (through :mod:`activebayes.rundir`) and their dataset.

Nothing here aggregates or renders: :class:`ReportData` holds the runs grouped
by strategy, the headline split, the stored configuration text, and loads the
dataset lazily for class names and the acquired items' pictures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from activebayes.data import ArrayDataset, load_dataset
from activebayes.records import LoopConfig, RoundRecord, headline_name
from activebayes.rundir import (
    Comparison,
    RunDirectory,
    RunDirectoryError,
    headline_metric,
    is_comparison,
    load_runs,
    read_config_text,
)


class DatasetUnavailable(Exception):
    """The run's dataset cannot be loaded or has no pictures (the message says why)."""


@dataclass(frozen=True)
class SeedRun:
    """One (strategy, seed) run as stored: its config and finished rounds."""

    strategy: str
    seed: int
    config: LoopConfig
    rounds: tuple[RoundRecord, ...]

    @property
    def finished(self) -> bool:
        """Whether the run has stopped: its last round's record holds the stop reason."""
        return bool(self.rounds) and self.rounds[-1].stop_reason is not None

    @property
    def label(self) -> str:
        """``"bald seed 0"``."""
        return f"{self.strategy} seed {self.seed}"


class ReportData:
    """The runs of a run or comparison directory, grouped by strategy (seeds in order).

    Attributes:
        path: the directory.
        is_comparison: a comparison (``comparison.json``) rather than one run.
        runs: ``strategy -> [SeedRun]`` (strategies in stored order, seeds sorted).
        split: ``"test"``, or ``"validation"`` for runs without a test set (the
            headline metric, :func:`activebayes.rundir.headline_metric`).
        config_text: the stored configuration, pretty-printed JSON.
        listed_strategies: the strategies ``comparison.json`` lists (the run's own for one run).
        missing: ``(strategy, seed)`` runs ``comparison.json`` lists that are not there (yet).
        given_dataset: how the runs' own dataset, given from Python instead of named by the
            config (``ActiveLearningLoop(dataset=...)``), was described when it ran; ``None``
            when the config names it.

    ``dataset``: the training split the runs' indices point into, for runs given their own
    data (class names and the acquired items' pictures); ``None`` loads the one the config names.
    """

    def __init__(self, path: Path, dataset: ArrayDataset | None = None) -> None:
        self.path = path
        self.is_comparison = is_comparison(path)
        self.runs: dict[str, list[SeedRun]] = {}
        for (strategy, seed), (config, rounds) in load_runs(path, same_config=True).items():
            self.runs.setdefault(str(strategy), []).append(SeedRun(str(strategy), int(seed), config, tuple(rounds)))
        for runs in self.runs.values():
            runs.sort(key=lambda run: run.seed)
        comparison = Comparison.read(path) if self.is_comparison else None
        self.listed_strategies = list(comparison.strategies) if comparison else list(self.runs)
        self.missing: list[tuple[str, int]] = comparison.missing_runs() if comparison else []
        self.config_text = read_config_text(path)
        all_metrics = [r.metrics or {} for runs in self.runs.values() for run in runs for r in run.rounds]
        self.split, self.headline = headline_metric(all_metrics).split("_", 1)  # "test", "accuracy" / "micro_f1"
        if not any(all_metrics) and not any(run.config.evaluate_test is False for run in self.runs_list()):
            self.split = "test"  # no round finished yet: the split the runs will evaluate on, not a guess of none
        #: how the headline reads in the report ("accuracy", or "micro-F1" for a multi-label run)
        self.metric_name = headline_name(f"{self.split}_{self.headline}")
        run_dirs = [run_dir for run_dir, _ in comparison.configs()] if comparison else [path]
        self._run_dirs = [Path(d) for d in run_dirs]
        self.given_dataset = next((given["dataset"] for given in map(_given, run_dirs) if "dataset" in given), None)
        self._dataset: ArrayDataset | None = dataset
        self._dataset_error: str | None = None

    # ----------------------------------------------------------------- runs

    def runs_list(self) -> list[SeedRun]:
        """Every run, strategy by strategy."""
        return [run for runs in self.runs.values() for run in runs]

    def key(self, name: str) -> str:
        """The stored metric name of ``name`` on the headline split (``"ece"`` -> ``"test_ece"``);
        ``"accuracy"`` is the headline (``"test_micro_f1"`` for a multi-label run)."""
        return f"{self.split}_{self.headline if name == 'accuracy' else name}"

    @property
    def first_config(self) -> LoopConfig | None:
        return next((run.config for runs in self.runs.values() for run in runs), None)

    def unfinished(self) -> list[SeedRun]:
        """The runs that have not stopped yet (no rounds, or no stop reason in the last one)."""
        return [run for run in self.runs_list() if not run.finished]

    def finished_runs(self, strategy: str) -> list[SeedRun]:
        """The strategy's runs with at least one finished round."""
        return [run for run in self.runs[strategy] if run.rounds]

    def rounds_per_seed(self, strategy: str) -> list[tuple[RoundRecord, ...]]:
        """One tuple of round records per seed with finished rounds (the analysis functions' input)."""
        return [run.rounds for run in self.finished_runs(strategy)]

    @property
    def max_seeds(self) -> int:
        """The most seeds with finished rounds any strategy has."""
        return max((len(self.finished_runs(s)) for s in self.runs), default=0)

    # ----------------------------------------------------------------- dataset

    def dataset(self) -> ArrayDataset:
        """The training split the acquired indices point into (loaded once).

        Raises:
            DatasetUnavailable: it cannot be loaded (missing files, unknown name, ...).
        """
        config = self.first_config
        if self._dataset is None and self._dataset_error is None:
            if config is None:
                self._dataset_error = "there are no runs"
            elif config.table is not None:
                self._dataset_error = "the items are rows of a table, which the report does not show as pictures"
            elif self.given_dataset is not None:
                # config.dataset is only its default then: loading it would show another dataset's items
                self._dataset_error = (
                    f"the runs were given their own dataset from Python ({self.given_dataset}), which the "
                    "report cannot load by name; write_report(DIR, dataset=...) shows it")
            else:
                try:
                    self._dataset = load_dataset(config.dataset, data_dir=config.data_dir, split="train")
                except (ValueError, OSError) as error:  # DataError (missing / corrupt files), unknown name
                    self._dataset_error = (
                        f"the dataset {config.dataset!r} could not be loaded ({type(error).__name__}: {error})"
                    )
        if self._dataset is None:
            raise DatasetUnavailable(self._dataset_error)
        return self._dataset

    def data_label(self) -> str:
        """What the runs' items are, for the overview: ``"dataset digits"``, ``"table tickets.csv"``, or
        the dataset given from Python (its name when passed to the report, else how the run described it)."""
        config = self.first_config
        if config is None:
            return "no runs"
        if config.table is not None:
            return f"table {Path(config.table).name}"
        if self.given_dataset is not None:
            if self._dataset is not None and getattr(self._dataset, "name", None):
                return f"dataset {self._dataset.name} (given from Python)"
            return f"a dataset given from Python ({self.given_dataset})"
        return f"dataset {config.dataset}"

    def class_names(self, num_classes: int) -> list[str] | None:
        """The dataset's C class names when it loads and has ``num_classes`` classes (a table run:
        the names its ``items.json`` keeps), else ``None``."""
        if self.first_config is not None and self.first_config.table is not None:
            classes = self._table_classes()
        else:
            try:
                classes = list(self.dataset().classes)
            except DatasetUnavailable:
                return None
        return list(classes) if classes is not None and len(classes) == num_classes else None

    def _table_classes(self) -> list[str] | None:
        """The class names a table run stored with its items (runs of earlier versions did not)."""
        for run_dir in self._run_dirs:
            try:
                items = RunDirectory(run_dir).read_items()
            except RunDirectoryError:
                continue
            if items is not None and isinstance(items.get("classes"), list):
                return [str(c) for c in items["classes"]]
        return None

    def class_names_note(self, num_classes: int) -> str:
        """Where the class names shown come from (a sentence)."""
        if self.class_names(num_classes) is not None:
            return "Classes are named as in the dataset."
        reason = self._dataset_error or f"the dataset does not have {num_classes} classes"
        if self.first_config is not None and self.first_config.table is not None:
            reason = "the run was made before activebayes kept a table run's class names"
        return f"Classes are shown by their ids 0–{num_classes - 1}: {reason}."

    def thumbnails(self, indices: Sequence[int]) -> np.ndarray:
        """``[B, H, W]`` (or ``[B, H, W, 3]``) pixel values in [0, 1] of the given training items.

        Raises:
            DatasetUnavailable: the dataset cannot be loaded, the indices fall outside
                it, or its items are not images.
        """
        dataset = self.dataset()
        index_B = torch.as_tensor(list(indices), dtype=torch.long)
        n_items = dataset.inputs.shape[0]
        if index_B.numel() and (int(index_B.min()) < 0 or int(index_B.max()) >= n_items):
            raise DatasetUnavailable(f"acquired indices fall outside the dataset ({n_items} items)")
        images = dataset.inputs[index_B].double()
        if images.ndim == 2:  # flat features: no picture to show
            raise DatasetUnavailable(f"the dataset items are not images (shape {tuple(dataset.inputs.shape[1:])})")
        if dataset.normalization is not None:
            mean, std = dataset.normalization
            images = images * std + mean
        else:  # per-image min-max
            flat = images.flatten(1)
            low, high = flat.min(1).values, flat.max(1).values
            shape = (-1,) + (1,) * (images.ndim - 1)
            images = (images - low.view(shape)) / (high - low).clamp(min=1e-12).view(shape)
        images = images.clamp(0, 1)
        if images.ndim == 4:  # [B, channels, H, W]
            images = images[:, 0] if images.shape[1] == 1 else images.permute(0, 2, 3, 1)
        return images.numpy()


def _given(run_dir: Path) -> dict[str, str]:
    """What the run in ``run_dir`` was given beyond its config (``{}`` for a run not started yet)."""
    directory = RunDirectory(run_dir)
    return directory.read_given() if directory.exists() else {}
