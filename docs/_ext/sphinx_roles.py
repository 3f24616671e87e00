"""A griffe extension for the API reference: Sphinx-style docstrings rendered as Markdown.

The docstrings of activebayes are Google style with a few reStructuredText habits
that Markdown would show verbatim or garble. Before mkdocstrings renders them, this
extension rewrites, in every docstring of the package:

- **cross-references**: ``:func:`select```, ``:class:`~activebayes.metrics.ReliabilityBins```
  and the other Sphinx roles become mkdocs-autorefs links, the name resolved in the
  docstring's own scope (its module's imports, the class's members) as Sphinx would.
  ``~`` keeps only the last component as the link text. A name that the API reference
  does not render (a private helper, a module without a page) stays inline code, so a
  link never dangles;
- **doctests**: an ``Example:`` section becomes ``Examples:`` (griffe's section that
  renders ``>>>`` lines as code; ``Example:`` is an admonition in which ``>>>`` reads as
  nested block quotes), and a doctest outside such a section is fenced as ``pycon``;
- **reST blocks**: ``.. math::`` becomes a MathJax block, and the literal-block marker
  ``text::`` becomes ``text:`` (the indented block after it is code in Markdown too).

What the reference renders is read from the ``::: identifier`` blocks of the pages in
``docs/`` (and their ``members`` option), so adding a page is all it takes.

Used by ``mkdocs.yml`` (``plugins.mkdocstrings.handlers.python.options.extensions``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import griffe
import yaml

PACKAGE = "activebayes"
DOCS = Path(__file__).resolve().parent.parent

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj):`(~?)([^`<>]+)`")
LITERAL_MARKER = re.compile(r"(?<=\S)::(?=\n\s*\n)")
SECTION = re.compile(r"^[A-Z][A-Za-z ]*:\s*$")
DIRECTIVE = re.compile(r"^::: *(\S+) *$")


class SphinxRoles(griffe.Extension):
    """Rewrite the docstrings of the package for Markdown (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        rendered = _rendered_paths(pkg, _directives(DOCS))
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _rewrite(obj.docstring.value, obj, rendered)


# --------------------------------------------------------------------------- what is rendered


def _directives(docs: Path) -> dict[str, Any]:
    """``identifier -> members option`` for every ``::: identifier`` block under ``docs``.

    The option is ``None`` when not given (mkdocstrings then renders the public members),
    ``False`` / ``[]`` for none, or the list of member names.
    """
    found: dict[str, Any] = {}
    for page in sorted(docs.rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            match = DIRECTIVE.match(line)
            if not match:
                continue
            block = []
            for following in lines[i + 1 :]:
                if following.strip() and not following.startswith("    "):
                    break
                block.append(following[4:])
            options = (yaml.safe_load("\n".join(block)) or {}).get("options") or {}
            found[match.group(1)] = options.get("members")
    return found


def _rendered_paths(pkg: griffe.Module, directives: dict[str, Any]) -> dict[str, str]:
    """Canonical path of an object -> the path (anchor) the reference renders it under."""
    rendered: dict[str, str] = {}
    aliases: list[tuple[str, str]] = []
    for identifier, members in directives.items():
        try:
            obj = pkg.modules_collection.get_member(identifier)
        except Exception:  # a page naming an object that is gone: mkdocstrings reports it
            continue
        rendered.setdefault(obj.path, identifier)
        if not obj.is_module:
            continue
        exports = {str(name) for name in obj.exports} if obj.exports is not None else None
        for name, member in obj.members.items():
            if members is None:
                shown = not name.startswith("_") and (name in exports if exports is not None else not member.is_alias)
            else:
                shown = bool(members) and name in members
            if not shown or member.is_module:
                continue
            if member.is_alias:
                aliases.append((member.target_path, f"{identifier}.{name}"))
            else:
                rendered.setdefault(member.path, f"{identifier}.{name}")
    for target, path in aliases:  # an object under its defining name wins over a re-export
        rendered.setdefault(target, path)
    return rendered


# --------------------------------------------------------------------------- rewriting


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_walk(member))  # type: ignore[arg-type]
    return found


def _rewrite(text: str, obj: griffe.Object, rendered: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        short, name = match.group(1) == "~", match.group(2).strip()
        label = name.rsplit(".", 1)[-1] if short else name
        target = _resolve(name, obj, rendered)
        return f"[`{label}`][{target}]" if target else f"`{label}`"

    return _maths(_doctests(LITERAL_MARKER.sub(":", ROLE.sub(replace, text))))


def _resolve(name: str, obj: griffe.Object, rendered: dict[str, str]) -> str | None:
    """The rendered path of ``name`` as seen from ``obj``; None when it is not rendered."""
    head, _, rest = name.partition(".")
    if head == PACKAGE:
        path = name
    else:
        try:
            path = obj.resolve(head)
        except Exception:  # griffe's NameResolutionError: a relative or unknown name
            return None
        if rest:
            path = f"{path}.{rest}"
    collection = obj.modules_collection
    try:
        target = collection.get_member(path)
    except Exception:  # not (or no longer) an object of the package
        return None
    key = target.target_path if target.is_alias else target.path
    if key in rendered:
        return rendered[key]
    # a member of a rendered class (a method, an attribute)
    parent = target.parent
    if parent is not None and parent.is_class and parent.path in rendered and not target.name.startswith("_"):
        return f"{rendered[parent.path]}.{target.name}"
    return None


def _doctests(text: str) -> str:
    """Make every doctest render as code (see the module docstring)."""
    lines = text.split("\n")
    out: list[str] = []
    in_examples = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if SECTION.match(line):
            in_examples = line.strip() in ("Example:", "Examples:")
            out.append("Examples:" if in_examples else line)
            i += 1
            continue
        if line and not line[0].isspace():  # unindented text ends a section
            in_examples = False
            if line.startswith(">>>"):
                end = i
                while end < len(lines) and lines[end].strip():
                    end += 1
                out += ["```pycon", *lines[i:end], "```"]
                i = end
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _maths(text: str) -> str:
    """reST's ``.. math:: formula`` (continued on more indented lines) -> a ``$$`` block."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(".. math::"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        body = [stripped[len(".. math::") :].strip()]
        i += 1
        while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) > len(indent):
            body.append(lines[i].strip())
            i += 1
        out += ["", f"{indent}$$", *(f"{indent}{b}" for b in body if b), f"{indent}$$", ""]
    return "\n".join(out)
