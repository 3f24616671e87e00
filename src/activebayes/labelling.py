"""Real labelling with a person in the loop: ``query`` a batch, ``import`` the answers.

A labelling project is a directory::

    PROJECT/
      project.json        what to label (dataset or image folder, class names) and how
                          (strategy, model, batch size, K, seed); written once
      labels/oracle.json  every query and every imported label (FileOracle state)
      labels/query-0000.csv, query-0001.csv, ...   the batches sent to the person
      labels/thumbnails/  PNG thumbnails of the queried items

Each :meth:`LabellingProject.query` fits the model on every label imported so
far (a cold start with fewer than ``min_labels`` labels picks at random), scores
the still-unlabelled items with the acquisition strategy and writes the next
query file; :meth:`LabellingProject.import_answers` validates a filled-in file
and stores its labels (atomically; importing twice changes nothing). Labels
already imported are never lost.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from activebayes._io import atomic_write_text
from activebayes._seeding import make_generator, seeded_global_rng

PROJECT_FILE = "project.json"


@dataclass(frozen=True)
class ProjectConfig:
    """What a labelling project labels and how it picks the items."""

    dataset: str | None = None
    images: str | None = None
    classes: tuple[str, ...] | None = None
    data_dir: str | None = None
    strategy: str = "bald"
    model: str = "auto"
    batch_size: int = 10
    num_samples: int = 100
    seed: int = 0
    min_labels: int = 10
    fit_options: Mapping[str, Any] = field(default_factory=lambda: {"max_epochs": 10})

    def __post_init__(self) -> None:
        from activebayes._validation import check_positive_int

        if (self.dataset is None) == (self.images is None):
            raise ValueError("a labelling project needs exactly one of dataset= or images= (a folder of images)")
        if self.images is not None and not self.classes:
            raise ValueError("--classes is required for a folder of images: the class names a labeller may use")
        for name in ("batch_size", "num_samples", "min_labels"):
            check_positive_int(getattr(self, name), name)
        check_positive_int(self.seed, "seed", allow_zero=True)
        if self.classes is not None:
            classes = tuple(str(c) for c in self.classes)
            if len(set(classes)) != len(classes) or len(classes) < 2:
                raise ValueError(f"classes must be two or more distinct names, got {list(classes)}")
            object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "fit_options", dict(self.fit_options))

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["classes"] = list(self.classes) if self.classes is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProjectConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown project setting(s) {', '.join(unknown)}")
        values = dict(data)
        if values.get("classes") is not None:
            values["classes"] = tuple(values["classes"])
        return cls(**values)


@dataclass(frozen=True)
class QueryResult:
    path: Path
    round: int
    indices: list[int]
    scores: list[float]
    strategy: str
    n_labelled: int


class LabellingProject:
    """A directory-backed labelling project (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str], config: ProjectConfig | None = None) -> None:
        from activebayes.oracles import FileOracle

        self.directory = Path(directory)
        file = self.directory / PROJECT_FILE
        if file.is_file():
            try:
                stored = ProjectConfig.from_dict(json.loads(file.read_text()))
            except (json.JSONDecodeError, TypeError) as error:
                raise ValueError(f"{file} is not a valid project file: {error}") from None
            if config is not None and config != stored:
                raise ValueError(f"{self.directory} already holds a labelling project with different settings")
            config = stored
        elif config is None:
            raise FileNotFoundError(f"{self.directory} is not a labelling project ({PROJECT_FILE} is missing); "
                                    "start one with `activebayes query DIR --dataset NAME` or `--images FOLDER --classes ...`")
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write_text(file, json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")
        self.config = config
        self.dataset = self._load_dataset()
        self.oracle = FileOracle(self.directory / "labels", self.dataset)

    def _load_dataset(self) -> Any:
        from activebayes.data import image_folder, load_dataset

        config = self.config
        if config.images is not None:
            return image_folder(config.images, classes=config.classes)
        return load_dataset(config.dataset, data_dir=config.data_dir, split="train")

    # ----------------------------------------------------------------- state

    @property
    def labels(self) -> dict[int, int]:
        return self.oracle.labels

    @property
    def next_round(self) -> int:
        return max(self.oracle.queries, default=-1) + 1

    def pending_query(self) -> Path | None:
        """The query file still waiting for answers, if any."""
        if len(self.oracle.pending()) == 0:
            return None
        return self.oracle.query_path(max(self.oracle.queries))

    # ----------------------------------------------------------------- query / import

    def query(self, *, progress: bool = False) -> QueryResult:
        """Fit on the labels so far, pick the next batch, write its query file."""
        from activebayes.acquisition import get_strategy, select
        from activebayes.data import Pool
        from activebayes.models import Ensemble, build_model, fit, predict_log_probs

        pending = self.pending_query()
        if pending is not None:
            raise ValueError(
                f"{len(self.oracle.pending())} item(s) of {pending} have no label yet: "
                f"fill in its label column and run `activebayes import {pending} --project {self.directory}`"
            )
        config = self.config
        r = self.next_round
        pool = Pool.create(self.dataset, validation_size=0, initial="empty", initial_size=0, seed=config.seed)
        labels = self.labels
        if labels:
            pool.label(torch.tensor(list(labels)), torch.tensor(list(labels.values())))
        candidates_N = pool.unlabelled_indices
        if len(candidates_N) == 0:
            raise ValueError("every item is labelled already: nothing left to query")
        batch_size = min(config.batch_size, len(candidates_N))
        generator = make_generator(config.seed, "query", r)
        strategy = config.strategy
        if len(labels) < config.min_labels or not get_strategy(strategy).needs_predictions:
            strategy = "random" if get_strategy(strategy).needs_predictions else strategy
            selection = select(len(candidates_N), strategy, batch_size, generator=generator)
        else:
            with seeded_global_rng(config.seed, "model", r):
                model = build_model(config.model, num_classes=self.dataset.num_classes,
                                    input_shape=tuple(self.dataset.input_shape),
                                    generator=make_generator(config.seed, "model", r))
                fit(model, pool.labelled_data(), generator=make_generator(config.seed, "fit", r),
                    progress=progress, **dict(config.fit_options))
            k = None if isinstance(model, Ensemble) else config.num_samples
            log_probs = predict_log_probs(model, self.dataset.inputs[candidates_N], k,
                                          generator=make_generator(config.seed, "pool", r), progress=progress)
            selection = select(log_probs, strategy, batch_size, generator=generator)
        indices = candidates_N[selection.indices]
        path = self.oracle.query(indices, selection.scores, round=r, thumbnails=self.dataset.input_shape[-1] > 1)
        return QueryResult(path, r, [int(i) for i in indices], [float(s) for s in selection.scores], strategy, len(labels))

    def import_answers(self, path: str | os.PathLike[str], *, allow_partial: bool = False, overwrite: bool = False) -> dict[int, int]:
        """Validate a filled-in query file and store its labels; returns them."""
        file = Path(path)
        if not file.is_file():
            raise FileNotFoundError(f"answers file {path} does not exist")
        round_ = self._round_of(file)
        return self.oracle.import_answers(file, round=round_, allow_partial=allow_partial, overwrite=overwrite)

    def _round_of(self, file: Path) -> int | None:
        """The round a file answers: from its name ``query-NNNN`` if it has one, else the latest."""
        stem = file.stem
        if stem.startswith("query-") and stem[6:].isdigit():
            return int(stem[6:])
        return None


__all__ = ["LabellingProject", "ProjectConfig", "QueryResult"]
