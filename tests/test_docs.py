"""The documentation site: it builds without a warning, and it covers the package.

The strict build (broken links, missing anchors, docstrings griffe cannot parse,
cross-references that resolve nowhere) needs the ``docs`` extra and is skipped
without it; CI runs the same build in ``.ci/run`` as well.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "src" / "activebayes"
# not part of the API reference: the command line (documented by `--help` and the guides)
NOT_REFERENCE = {"cli", "__main__"}
MATH_OR_CODE = re.compile(r'<(span|div) class="arithmatex">.*?</\1>|<code>.*?</code>|<pre.*?</pre>', re.DOTALL)


def _needs_docs_extra() -> None:
    for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "griffe"):
        if importlib.util.find_spec(name.split(".")[0]) is None or importlib.util.find_spec(name) is None:
            pytest.skip(f"the docs extra is not installed ({name} missing): pip install -e '.[docs]'")


def test_strict_build_has_no_warnings(tmp_path: Path) -> None:
    _needs_docs_extra()
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    log = result.stdout + result.stderr
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not warnings, "mkdocs build --strict failed:\n" + "\n".join(warnings or [log[-3000:]])
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "api" / "acquisition" / "index.html").is_file()
    # every display formula reached MathJax (a $$ block indented wrongly stays raw text)
    raw = []
    for page in (tmp_path / "site").rglob("*.html"):
        text = MATH_OR_CODE.sub("", page.read_text(encoding="utf-8"))
        if "$$" in text:
            raw.append(str(page.relative_to(tmp_path / "site")))
    assert not raw, f"display maths left as raw text (indent $$ blocks inside list items by 4 spaces): {raw}"


def _public_modules() -> list[str]:
    """``activebayes.X`` for every public module and subpackage of the package."""
    names = []
    for path in sorted(PACKAGE.iterdir()):
        name = path.stem if path.suffix == ".py" else path.name
        is_module = path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").is_file())
        if is_module and not name.startswith("_") and name not in NOT_REFERENCE:
            names.append(f"activebayes.{name}")
    return names


def _reference_identifiers() -> set[str]:
    found = set()
    for page in (DOCS / "api").glob("*.md"):
        found.update(re.findall(r"^::: *(\S+)", page.read_text(encoding="utf-8"), flags=re.MULTILINE))
    return found


def test_every_public_module_has_an_api_page() -> None:
    modules = _public_modules()
    assert "activebayes.acquisition" in modules and "activebayes.loop" in modules  # the scan works
    missing = [m for m in modules if m not in _reference_identifiers()]
    assert not missing, (
        f"public modules missing from the API reference: {missing}. Add docs/api/<name>.md with "
        "'::: activebayes.<name>' and list it under 'API reference' in mkdocs.yml"
    )


def test_api_pages_are_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    unlisted = [p.name for p in (DOCS / "api").glob("*.md") if f"api/{p.name}" not in nav]
    assert not unlisted, f"API pages not in mkdocs.yml's nav: {unlisted}"


def test_label_efficiency_markers_are_intact() -> None:
    """benchmarks/label_efficiency.py --summarise rewrites the text between these markers."""
    text = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    begin, end = "<!-- label-efficiency:begin -->", "<!-- label-efficiency:end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.index(begin) < text.index(end)


def test_no_page_carries_a_placeholder() -> None:
    """A line that is one upper-case word (SCALE_TABLE, MEASUREMENTS) is a table never filled in."""
    placeholders = [f"{page.relative_to(ROOT)}:{n}: {line}"
                    for page in sorted(DOCS.rglob("*.md"))
                    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
                    if re.fullmatch(r"[A-Z][A-Z0-9_]{3,}", line.strip())]
    assert not placeholders, "\n".join(placeholders)


def test_readme_links_to_existing_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\((docs/[^)#\s]+)", readme)
    assert targets, "README links to no docs page"
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README links to missing docs files: {missing}"


def _extension():
    _needs_docs_extra()
    spec = importlib.util.spec_from_file_location("sphinx_roles", DOCS / "_ext" / "sphinx_roles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docstring_doctests_and_maths_become_markdown() -> None:
    ext = _extension()
    text = "Summary.\n\nExample:\n    >>> f(1)\n    2\n\n>>> g()\n[0]\n\nAfter.\n\n.. math:: a = b\n          + c\n\nEnd."
    out = ext._maths(ext._doctests(text))
    assert "Examples:\n    >>> f(1)" in out  # griffe's examples section: rendered as code
    assert "```pycon\n>>> g()\n[0]\n```" in out  # a bare doctest is fenced, so [0] is no link
    assert "$$\na = b\n+ c\n$$" in out
    assert ".. math::" not in out and "After." in out and "End." in out
