"""The documentation site: it builds without a warning, and it covers the package.

The strict build (broken links, missing anchors, docstrings griffe cannot parse,
cross-references that resolve nowhere) needs the ``docs`` extra and is skipped
without it; CI (``.ci/run``) sets ``ACTIVEBAYES_REQUIRE_DOCS=1``, which fails it instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
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
    """Skips without the docs extra; fails instead under ``ACTIVEBAYES_REQUIRE_DOCS=1`` (CI's
    ``.ci/run``, where this build is the docs check)."""
    for name in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "griffe"):
        if importlib.util.find_spec(name.split(".")[0]) is None or importlib.util.find_spec(name) is None:
            message = f"the docs extra is not installed ({name} missing): pip install -e '.[docs]'"
            if os.environ.get("ACTIVEBAYES_REQUIRE_DOCS") == "1":
                pytest.fail(message)
            pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as CI builds it (``mkdocs build --strict``), once for the checks below."""
    _needs_docs_extra()
    out = tmp_path_factory.mktemp("site") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    log = result.stdout + result.stderr
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not warnings, "mkdocs build --strict failed:\n" + "\n".join(warnings or [log[-3000:]])
    return out


def test_strict_build_has_no_warnings(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "api" / "acquisition" / "index.html").is_file()
    # every display formula reached the maths renderer (a $$ block indented wrongly stays raw text)
    raw = []
    for page in site.rglob("*.html"):
        text = MATH_OR_CODE.sub("", page.read_text(encoding="utf-8"))
        if "$$" in text:
            raw.append(str(page.relative_to(site)))
    assert not raw, f"display maths left as raw text (indent $$ blocks inside list items by 4 spaces): {raw}"


# what a page loads: scripts, style sheets, fonts, icons (not the links a reader may follow)
LOADED = re.compile(r'<script[^>]*\bsrc="([^"]+)"|<link[^>]*\bhref="([^"]+)"[^>]*>')


def test_site_loads_nothing_from_the_network(site: Path) -> None:
    """Offline, the site reads as online: every script, style sheet and font is a file of the site."""
    remote, missing = set(), set()
    for page in site.rglob("*.html"):
        for match in LOADED.finditer(page.read_text(encoding="utf-8")):
            url = match.group(1) or match.group(2)
            tag = match.group(0)
            if match.group(2) is not None and not re.search(r'rel="(stylesheet|preconnect|preload|icon|modulepreload)"', tag):
                continue  # rel="canonical", "prev", "next": links, not loads
            if re.match(r"(https?:)?//", url):
                remote.add(url)
                continue
            path = url.split("?")[0].split("#")[0]
            # 404.html is served at any depth, so it names files from the site's root
            if not (site / path.lstrip("/") if path.startswith("/") else page.parent / path).resolve().is_file():
                missing.add(f"{page.relative_to(site)}: {url}")
    assert not remote, f"the site loads from the network: {sorted(remote)}"
    assert not missing, f"pages load files the site lacks: {sorted(missing)[:10]}"
    # the formulas are rendered by the bundled KaTeX, whose style sheet finds its fonts in the site
    page = (site / "concepts" / "uncertainty" / "index.html").read_text(encoding="utf-8")
    assert 'class="arithmatex"' in page and "assets/katex/katex.min.js" in page
    css = site / "assets" / "katex" / "katex.min.css"
    fonts = re.findall(r"url\(([^)]+)\)", css.read_text(encoding="utf-8"))
    assert fonts and all((css.parent / font).is_file() for font in fonts)


def test_formulas_render_offline_in_a_browser(site: Path) -> None:
    """Opened from disk with every network request refused, each formula of a page is typeset by
    the bundled KaTeX (no error boxes) in its own fonts."""
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    refused: list[str] = []

    def only_files(route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox",
                                                                              "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page()
            page.route("**/*", only_files)
            page.goto((site / "concepts" / "uncertainty" / "index.html").as_uri())
            formulas = page.locator(".arithmatex").count()
            page.wait_for_function("document.querySelectorAll('.arithmatex .katex').length > 0", timeout=60_000)
            typeset = page.evaluate("[...document.querySelectorAll('.arithmatex')].filter(e => e.querySelector('.katex')).length")
            errors = page.locator(".katex-error").count()
            fonts = page.evaluate("document.fonts.ready.then(() => [...document.fonts]"
                                  ".filter(f => f.status === 'loaded').map(f => f.family.replace(/\"/g, '')))")
        finally:
            browser.close()
    assert formulas > 20 and typeset == formulas and errors == 0
    assert "KaTeX_Main" in fonts and "KaTeX_Math" in fonts, f"KaTeX's fonts did not load from the site: {fonts}"
    assert not refused, f"the page asked the network for {refused}"


def test_bundled_maths_renderer_is_listed_and_licensed() -> None:
    """mkdocs.yml names only files of docs/ for the maths renderer, and its licence travels with it."""
    config = _mkdocs_config()
    assets = [*config.get("extra_javascript", []), *config.get("extra_css", [])]
    assert any("katex" in str(a) for a in assets)
    remote = [a for a in assets if re.match(r"(https?:)?//", str(a))]
    assert not remote, f"mkdocs.yml loads from the network: {remote}"
    absent = [a for a in assets if not (DOCS / str(a)).is_file()]
    assert not absent, f"mkdocs.yml names files docs/ lacks: {absent}"
    assert "MIT" in (DOCS / "assets" / "katex" / "LICENSE").read_text(encoding="utf-8")


def _mkdocs_config() -> dict:
    """mkdocs.yml as data; ``!!python/...`` tags (none today) read as plain strings."""
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    """Every docs page as HTML, rendered by Python-Markdown with the site's extensions (no mkdocs build)."""
    markdown = pytest.importorskip("markdown")
    pytest.importorskip("pymdownx")
    extensions, configs = [], {}
    for entry in _mkdocs_config()["markdown_extensions"]:
        name, config = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        extensions.append(name)
        configs[name] = config or {}
    return {str(page.relative_to(DOCS)): markdown.markdown(page.read_text(encoding="utf-8"), extensions=extensions,
                                                            extension_configs=configs)
            for page in sorted(DOCS.rglob("*.md")) if "_ext" not in page.parts}


def test_tables_show_no_backslash_before_a_pipe(rendered: dict[str, str]) -> None:
    """A pipe inside a code span is text, not a column break: written as \\| it shows the backslash."""
    cells = [f"{name}: {cell}" for name, page in rendered.items()
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", page, flags=re.DOTALL) if "\\|" in cell]
    assert any("<table>" in page for page in rendered.values())  # the scan sees tables
    assert not cells, "table cells show a literal backslash:\n" + "\n".join(cells)


def test_no_list_item_runs_into_the_one_before(rendered: dict[str, str]) -> None:
    """After an item of several paragraphs, the next item needs a blank line before it, or
    Markdown reads it as more text of the previous paragraph ("3. ask ..." inside step 2)."""
    swallowed = [f"{name}: {line.strip()[:80]}" for name, page in rendered.items()
                 for paragraph in re.findall(r"<p>(.*?)</p>", page, flags=re.DOTALL)
                 for line in paragraph.splitlines()[1:] if re.match(r"\s*(\d+\.|[-*+])\s+\S", line)]
    assert any("<ol>" in page for page in rendered.values())  # the scan sees lists
    assert not swallowed, "list items rendered as text of the item before:\n" + "\n".join(swallowed)


def test_no_page_carries_an_html_comment_note() -> None:
    """A reader never sees an HTML comment, but whoever reads the source does: notes to authors go
    in issues. Markers that a script rewrites between (``<!-- label-efficiency:begin -->``) are
    the one exception."""
    notes = [f"{page.relative_to(ROOT)}: {comment[:60]}"
             for page in sorted(DOCS.rglob("*.md"))
             for comment in re.findall(r"<!--.*?-->", page.read_text(encoding="utf-8"), flags=re.DOTALL)
             if not re.fullmatch(r"<!-- [\w-]+:(begin|end) -->", comment)]
    assert not notes, "\n".join(notes)


def test_no_page_carries_a_control_character() -> None:
    """A formula written through a non-raw Python string loses its backslashes to escapes
    (``\\text`` becomes a tab, ``\\big`` a backspace, ``\\frac`` a form feed); KaTeX then shows
    garbage. No Markdown page or README has a reason to hold a control character."""
    bad = [f"{page.relative_to(ROOT)}:{n}: {line.strip()[:60]!r}"
           for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
           for n, line in enumerate(page.read_text(encoding="utf-8").split("\n"), 1)  # (splitlines eats \f)
           if re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\t]", line)]
    assert not bad, "\n".join(bad)


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
