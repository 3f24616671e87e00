"""One registry type for everything looked up by name: strategies, models, datasets.

A :class:`Registry` maps names (and aliases) to entries. It registers (a taken name
raises unless ``replace=True``), removes, lists, and answers an unknown name with one
:class:`~activebayes.errors.InvalidArgumentError` that names what was looked up,
suggests the closest registered name and lists them all:

>>> shapes = Registry("shape")
>>> shapes.register("circle", 1, aliases=("round",))
1
>>> shapes.get("round"), shapes.names(), shapes.names(aliases=True)
(1, ['circle'], ['circle', 'round'])
>>> shapes.get("circel")
Traceback (most recent call last):
...
activebayes.errors.InvalidArgumentError: unknown shape 'circel' (did you mean 'circle'?); expected one of: circle, round
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from activebayes._validation import unknown_name_message
from activebayes.errors import InvalidArgumentError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Names (and aliases) -> entries; ``what`` names the kind in errors (``"strategy"``, ``"model"``)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._names: dict[str, str] = {}  # name or alias -> canonical name

    def register(self, name: str, entry: T, *, aliases: Iterable[str] = (), replace: bool = False) -> T:
        """Add ``entry`` under ``name`` and ``aliases``; a taken name raises unless ``replace``.

        Replacing a name first removes the entry it named (with all its aliases).
        """
        aliases = tuple(aliases)
        keys = (name, *aliases)
        for key in keys:
            if not isinstance(key, str) or not key:
                raise InvalidArgumentError(f"{self._name_phrase()}s must be non-empty strings, got {key!r}")
        if len(set(keys)) != len(keys):
            raise InvalidArgumentError(f"{self._name_phrase()} and aliases must be distinct, got {keys}")
        taken = [key for key in keys if key in self._names]
        if taken and not replace:
            raise InvalidArgumentError(
                f"{self._name_phrase()} {taken[0]!r} is already registered (pass replace=True to override)"
            )
        for key in taken:
            if key in self._names:
                self.unregister(key)
        self._entries[name] = entry
        self._aliases[name] = aliases
        for key in keys:
            self._names[key] = name
        return entry

    def _name_phrase(self) -> str:
        """``"<what> name"`` for messages, without doubling a ``what`` that already ends in ``name``."""
        return self.what if self.what.endswith(" name") else f"{self.what} name"

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (or the one an alias names) and all its aliases."""
        canonical = self.canonical(name)
        del self._entries[canonical]
        for key in (canonical, *self._aliases.pop(canonical)):
            self._names.pop(key, None)

    def canonical(self, name: str) -> str:
        """The canonical name of ``name`` (itself or the name an alias stands for)."""
        if not isinstance(name, str) or name not in self._names:
            raise InvalidArgumentError(unknown_name_message(self.what, name, self._names))
        return self._names[name]

    def get(self, name: str) -> T:
        """The entry registered under ``name`` or an alias; unknown names raise (with a suggestion)."""
        return self._entries[self.canonical(name)]

    def aliases(self, name: str) -> tuple[str, ...]:
        return self._aliases[self.canonical(name)]

    def names(self, *, aliases: bool = False) -> list[str]:
        """Sorted canonical names (with ``aliases=True`` also every alias)."""
        return sorted(self._names if aliases else self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)
