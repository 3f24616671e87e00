"""Whether long work draws progress bars: one switch for the whole process.

A function given ``progress=True`` or ``False`` does as told. Steps that run deep inside
another call (a text encoder fitted while a table loads, the self-supervised encoder trained
while a loop is built, a download) are given ``progress=None`` and ask :func:`shown`: the
process default that the command line sets from ``--quiet`` (:func:`default`), and without
one, whether stderr is a terminal (bars written into a log file are noise).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

_DEFAULT: list[bool | None] = [None]


def shown(progress: bool | None = None) -> bool:
    """``progress`` when given; else the process default (:func:`default`); else whether stderr is a terminal."""
    if progress is not None:
        return bool(progress)
    if _DEFAULT[0] is not None:
        return _DEFAULT[0]
    return _stderr_is_terminal()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


@contextlib.contextmanager
def default(progress: bool | None) -> Iterator[bool]:
    """Make ``progress`` the process default inside the block (``None``: decide by the terminal);
    yields whether bars are shown."""
    previous = _DEFAULT[0]
    _DEFAULT[0] = progress
    try:
        yield shown()
    finally:
        _DEFAULT[0] = previous


def for_command(quiet: bool) -> bool:
    """The command line's choice: no bars with ``--quiet``, nor when stderr is not a terminal."""
    return not quiet and _stderr_is_terminal()
