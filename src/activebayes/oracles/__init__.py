"""Oracles: who provides the labels.

- :class:`Oracle`: the protocol, ``label(indices_B) -> labels_B`` (oracles are also callables).
- :class:`SimulatedOracle`: the dataset's own targets.

A person labelling real data goes through :mod:`activebayes.labelling` (a labelling
project, its file round trip and its app). The file round trip's names that lived here
(``FileOracle``, ``write_query``, ``read_answers``, ``AnswerFileError``,
``LabelsPendingError``) are now :mod:`activebayes.labelling`'s; importing them from
``activebayes.oracles`` still works for one release, with a ``DeprecationWarning``.

See ``docs/data.md``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from .base import Oracle, SimulatedOracle

__all__ = ["Oracle", "SimulatedOracle"]

_MOVED = {name: "activebayes.labelling" for name in
          ("AnswerFileError", "FileOracle", "LabelsPendingError", "read_answers", "write_query")}


def __getattr__(name: str) -> Any:
    """The moved names, from their new module (the labelling layer sits above the oracles,
    so they are imported on first use only), with a ``DeprecationWarning``."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"activebayes.oracles.{name} moved to {_MOVED[name]}.{name}; import it from there "
                  "(the old name goes in the next release)", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(_MOVED[name]), name)
