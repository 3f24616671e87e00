"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.cli_helpers import FAST_TOML


@pytest.fixture
def fast_config(tmp_path: Path) -> Path:
    """A config file of :data:`FAST_TOML` (a module with settings of its own overrides it)."""
    path = tmp_path / "fast.toml"
    path.write_text(FAST_TOML)
    return path


@pytest.fixture(autouse=True)
def _report_figures_as_tiny_pngs(fast_figures):
    """The command-line tests read a report's text and tables, never its pictures (tests/report and
    tests/plots draw those): figures are still built, but saved as a 1x1 PNG. Saving them was
    about 80% of a `compare` test's time (48 figures for 4 runs and their comparison)."""
