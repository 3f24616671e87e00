"""Oracles: who provides the labels.

- :class:`Oracle`: the protocol, ``label(indices_B) -> labels_B`` (oracles are also callables).
- :class:`SimulatedOracle`: the dataset's own targets.
- :func:`write_query` / :func:`read_answers` / :class:`FileOracle`: a CSV / JSON
  round trip for a person labelling real data.

See ``docs/data.md``.
"""

from __future__ import annotations

from .base import Oracle, SimulatedOracle
from .files import AnswerFileError, FileOracle, LabelsPendingError, read_answers, write_query

__all__ = [
    "AnswerFileError",
    "FileOracle",
    "LabelsPendingError",
    "Oracle",
    "SimulatedOracle",
    "read_answers",
    "write_query",
]
