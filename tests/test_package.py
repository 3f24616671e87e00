"""The top-level package: light to import, its public submodules reachable as attributes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import activebayes

SRC = Path(activebayes.__file__).parent
# the command line (and ``python -m activebayes``) are entry points, not library modules
NOT_LIBRARY = {"cli", "__main__"}


def _public_submodules() -> set[str]:
    return {p.stem if p.is_file() else p.name for p in SRC.iterdir()
            if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").is_file())} - NOT_LIBRARY


def test_every_public_submodule_is_listed_for_lazy_loading():
    assert set(activebayes._SUBMODULES) == _public_submodules()


def test_submodules_load_on_first_attribute_access_not_at_import():
    code = ("import sys, activebayes; assert 'activebayes.metrics' not in sys.modules; "
            "f = activebayes.metrics.f1_score; assert 'activebayes.metrics' in sys.modules; "
            "assert 'metrics' in dir(activebayes) and 'select' in dir(activebayes); print(f.__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "f1_score"


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'acquisitions'"):
        activebayes.acquisitions  # noqa: B018


def test_import_star_stays_light():
    namespace: dict[str, object] = {}
    exec("from activebayes import *", namespace)  # noqa: S102
    assert {"__version__", "select", "fit"} <= set(namespace)
    assert not {"metrics", "acquisition", "loop"} & set(namespace)
