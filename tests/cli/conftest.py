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
