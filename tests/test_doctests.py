"""Every docstring example in the package runs (one test per module), from the project root."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import activebayes

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(activebayes.__path__, prefix="activebayes.")
    if not info.name.endswith("__main__")
)
#: imports of optional extras a module may need at import time (the app's web server)
OPTIONAL_IMPORTS = {"starlette", "uvicorn"}


def test_every_module_is_found():
    assert {"activebayes.loop", "activebayes.acquisition.strategies", "activebayes.scoring"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # examples name ../shared/data/mnist relative to the project root
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] not in OPTIONAL_IMPORTS:
            raise
        pytest.skip(f"{name} needs {error.name}, an optional extra that is not installed")
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module, name):  # globals: a copy of the module's
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed (see above)"
