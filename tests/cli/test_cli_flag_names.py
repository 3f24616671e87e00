"""Errors of `convert`, `report`, `resume` and `--config` name the flag or the file the value came from."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cli.cli_helpers import FAST_TOML
from tests.cli.cli_helpers import run_cli


@pytest.fixture
def photos(tmp_path):
    from PIL import Image

    folder = tmp_path / "photos"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray((rng.random((8, 8)) * 255).astype(np.uint8)).save(folder / f"{i}.png")
    return folder


def test_convert_names_size_and_overwrite(tmp_path, photos, capsys):
    code, _, err = run_cli(capsys, "convert", photos, tmp_path / "pool", "--size", 0, 0)
    assert code != 0 and err == "error: --size must be (height, width) with positive ints, got (0, 0)\n"
    assert not (tmp_path / "pool").exists()
    assert run_cli(capsys, "convert", photos, tmp_path / "pool")[0] == 0
    code, _, err = run_cli(capsys, "convert", photos, tmp_path / "pool")
    assert code != 0 and err == f"error: {tmp_path / 'pool'} already exists; pass --overwrite to replace it\n"


def test_report_targets_resume_budget_and_a_config_files_value(tmp_path, capsys):
    config = tmp_path / "fast.toml"
    config.write_text(FAST_TOML)
    out = tmp_path / "run"
    assert run_cli(capsys, "run", "--config", config, "--budget", 30, "--out", out, "--quiet")[0] == 0
    code, _, err = run_cli(capsys, "report", out, "--targets", 1.5)
    assert code != 0 and err == "error: --targets must be an accuracy in (0, 1], got 1.5\n"
    for empty in ("0.9,,0.95", "0.9,"):  # an empty value was dropped without a word
        code, _, err = run_cli(capsys, "report", out, "--targets", empty)
        assert code != 0 and err == f"error: --targets must be comma-separated accuracies like 0.9,0.95, got {empty!r}\n"
    # a smaller budget: the error alone, no "resume: ... at 30 of 20 labels" line before it
    code, stdout, err = run_cli(capsys, "resume", out, "--budget", 25)
    assert code != 0 and stdout == "" and err.startswith("error: --budget must be larger than the run's budget (30)")
    # a bad value from the file names the file; the same value from a flag names the flag
    bad = tmp_path / "bad.toml"
    bad.write_text('budget = "abc"\n')
    code, _, err = run_cli(capsys, "run", "--config", bad, "--out", tmp_path / "x")
    assert code != 0 and err.startswith(f"error: --config {bad}: ") and "must be an int, got str 'abc'" in err, err
    code, _, err = run_cli(capsys, "run", "--config", bad, "--budget", 40, "--initial-size", 60, "--out", tmp_path / "y")
    assert code != 0 and err.startswith("error: --budget must be larger than initial_size") and "--config" not in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_an_unknown_name_in_a_config_file_names_the_file_and_its_key(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text('cold_start = "typicallity"\n')
    code, _, err = run_cli(capsys, "run", "--config", bad, "--strategy", "bald", "--out", tmp_path / "x")
    assert code != 0 and err.startswith(f"error: --config {bad}: cold_start: unknown strategy 'typicallity' "
                                        "(did you mean 'typicality'?); expected one of: "), err
    code, _, err = run_cli(capsys, "run", "--config", bad, "--cold-start", "typicalty", "--out", tmp_path / "x")
    assert code != 0 and err.startswith("error: --cold-start: unknown strategy 'typicalty'"), err  # the flag's
    bad.write_text('strategy = "batchbal"\n')
    code, _, err = run_cli(capsys, "run", "--config", bad, "--out", tmp_path / "x")
    assert code != 0 and err.startswith(f"error: --config {bad}: strategy: unknown strategy 'batchbal'"), err
    assert not (tmp_path / "x").exists()
