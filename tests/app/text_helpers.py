"""Real texts for the labelling app's tests: WordNet noun glosses of three categories, as a CSV."""

from __future__ import annotations

import csv
import functools
from collections.abc import Sequence
from pathlib import Path

import pytest

from activebayes.data import DataError
from activebayes.labelling import LabellingProject, ProjectConfig

#: WordNet lexicographer file -> class name; the classes' keys in the app are 1, 2, 3
CATEGORIES = {"noun.animal": "animal", "noun.food": "food", "noun.plant": "plant"}
CLASSES = ("animal", "food", "plant")
FAST_FIT = {"max_epochs": 1, "min_samples_per_epoch": 128, "patience": 1}


@functools.lru_cache(maxsize=4)
def _glosses(per_class: int) -> tuple[dict[str, str], ...]:
    from activebayes.data.wordnet import read_wordnet_nouns

    try:
        nouns = read_wordnet_nouns()
    except (DataError, OSError):
        pytest.skip("WordNet (Debian package wordnet-base) is not installed")
    taken = dict.fromkeys(CATEGORIES.values(), 0)
    rows = []
    for offset, lexfile, lemmas, gloss in zip(nouns.offsets.tolist(), nouns.lexfiles.tolist(), nouns.lemmas,
                                               nouns.glosses, strict=True):
        name = CATEGORIES.get(nouns.lexnames[lexfile])
        if name is None or taken[name] >= per_class or len(gloss) < 20:
            continue
        taken[name] += 1
        rows.append({"id": f"n{offset:08d}", "text": f"{lemmas[0]}: {gloss}", "y": name})
    return tuple(rows)


def gloss_rows(per_class: int = 20) -> list[dict[str, str]]:
    """``per_class`` WordNet noun glosses of each of :data:`CLASSES` (file order): ``{id, text, y}``
    with ``id`` the synset (``n`` + offset) and ``y`` its true class."""
    return [dict(row) for row in _glosses(per_class)]


def write_csv(path: Path, rows: Sequence[dict[str, str]], columns: Sequence[str] = ("id", "text", "y")) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
    return path


def text_config(table: Path, **changes) -> ProjectConfig:
    values = dict(table=str(table), text_column="text", id_column="id", classes=CLASSES, batch_size=5,
                  num_samples=8, eval_samples=4, lookahead=20, fit_options=FAST_FIT, cold_start=None)
    values.update(changes)
    return ProjectConfig(**values)


def make_text_project(directory: Path, table: Path, **changes) -> LabellingProject:
    project = LabellingProject.create(directory, text_config(table, **changes))
    project.advance(min_pending=10**12)  # round 0's ranking, as `serve` does before it starts
    return project
