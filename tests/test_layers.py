"""The module graph follows the layers in STYLE.md: no import cycles, no forbidden edges."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "activebayes"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """``module -> activebayes modules it imports at module level`` (function bodies excluded)."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        targets: set[str] = set()
        for node in ast.parse(path.read_text()).body:  # top level only
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("activebayes")}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                if name.startswith("activebayes"):
                    targets.add(name)
        graph[module] = targets
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_cycles_between_subpackages():
    graph = _imports()
    edges: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = _top(module), _top(target)
            if a and b and a != b:
                edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in edges.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    cycles = sorted(a for a in edges if reaches(a, a, {a}))
    assert not cycles, f"import cycles through: {cycles} (edges: { {k: sorted(v) for k, v in edges.items()} })"


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("acquisition", {"models", "loop", "experiment", "data", "oracles", "report", "cli"}),
        ("models", {"acquisition", "loop", "experiment", "report", "cli"}),
        ("metrics", {"loop", "experiment", "report", "cli", "acquisition"}),
        ("data", {"oracles", "loop", "experiment", "report", "cli"}),
        ("report", {"experiment", "cli", "loop"}),
        ("rundir", {"experiment", "loop", "report", "cli"}),
        ("records", {"experiment", "loop", "report", "cli", "rundir"}),
        # the oracle protocol sits below the loop; labelling (and its file round trip) above it
        ("oracles", {"labelling", "labelstore", "loop", "experiment", "report", "cli", "app"}),
        ("labelling", {"app", "cli", "experiment", "report", "labelstore"}),
    ],
)
def test_forbidden_edges(layer, forbidden):
    graph = _imports()
    bad = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _top(module) == layer
        for target in targets
        if _top(target) in forbidden
    )
    assert not bad, f"{layer} must not import {sorted(forbidden)}: {bad}"
