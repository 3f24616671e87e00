"""The errors a user's input can cause.

Every error activebayes raises for a user mistake (a bad argument, a missing or
corrupt file, an unknown name, a run directory that does not fit) is an
:class:`ActiveBayesError`. Each also derives from the built-in type that
describes it (``ValueError``, ``TypeError``, ``FileNotFoundError``), so code
that catches those keeps working. The command line shows these errors as one
line; any other exception is a bug and keeps its traceback.

>>> try:
...     raise InvalidArgumentError("batch_size must be >= 1, got 0")
... except ValueError as error:
...     print(type(error).__name__, isinstance(error, ActiveBayesError))
InvalidArgumentError True
"""

from __future__ import annotations

__all__ = [
    "ActiveBayesError",
    "InvalidArgumentError",
    "InvalidIndexError",
    "InvalidTypeError",
    "MissingFileError",
]


class ActiveBayesError(Exception):
    """Base class of the errors caused by user input (see the module docstring)."""


class InvalidArgumentError(ActiveBayesError, ValueError):
    """An argument has the right type but a wrong value (shape, range, unknown name, ...)."""


class InvalidIndexError(InvalidArgumentError, IndexError):
    """An index outside the items it indexes (also an ``IndexError``, as in indexing a sequence)."""


class InvalidTypeError(ActiveBayesError, TypeError):
    """An argument has the wrong type."""


class MissingFileError(ActiveBayesError, FileNotFoundError):
    """A file or folder the user named does not exist."""
