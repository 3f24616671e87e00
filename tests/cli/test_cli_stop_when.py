"""The command line's stopping settings (new-user report on stopping): a repeated list flag adds
(D3), TOML's forms of stop_when (D4, D5, N5), empty criteria (N2), audits with batches of one
(D2), and what `resume` suggests for a run stopped by a criterion (D8)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from activebayes.cli import _build_config, _read_toml, cli
from activebayes.records import LoopConfig
from tests.cli.cli_helpers import run_cli

FAST_TOML = """
initial_size = 20
validation_size = 50
num_samples = 4
eval_samples = 4
mean_samples = 4
cold_start = "none"
strategy = "bald"
[fit_options]
max_epochs = 2
patience = 1
"""


def _config_of(argv: list[str], monkeypatch) -> LoopConfig:
    """The config `activebayes run ARGV` would run (nothing is run)."""
    seen: dict = {}

    def capture(file_values, flags, **overrides):
        seen.update(flags)
        raise SystemExit(0)

    monkeypatch.setattr("activebayes.cli._build_config", capture)
    CliRunner().invoke(cli, ["run", *argv])
    monkeypatch.undo()
    return _build_config({}, seen)


# --------------------------------------------------------------------------- D3: a repeat adds


def test_a_repeated_stop_when_keeps_every_criterion(monkeypatch):
    config = _config_of(["--stop-when", "remaining_change", "--stop-when", "information=0.05"], monkeypatch)
    assert config.stop_when == ("remaining_change", "information=0.05")
    assert _config_of(["--stop-when", "remaining_change,information=0.05"], monkeypatch).stop_when == (
        "remaining_change", "information=0.05")
    assert _config_of([], monkeypatch).stop_when == ()


def test_a_criterion_repeated_across_flags_is_refused_as_within_one(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "-q", "--out", tmp_path / "r", "--stop-when", "remaining_change",
                           "--stop-when", "remaining_change=0.005")
    assert code == 1 and "--stop-when: remaining_change is given twice" in err
    assert not (tmp_path / "r").exists()


def test_a_repeated_list_flag_of_compare_adds(monkeypatch, tmp_path):
    seen: dict = {}

    def capture(base, strategies, seeds, out, **kwargs):
        seen.update(strategies=list(strategies), seeds=list(seeds))
        raise SystemExit(0)

    monkeypatch.setattr("activebayes.cli.run_comparison", capture)
    CliRunner().invoke(cli, ["compare", "-q", "--out", str(tmp_path / "c"), "--strategies", "random,bald",
                             "--strategies", "badge", "--seeds", "0", "--seeds", "2-3"])
    assert seen == {"strategies": ["random", "bald", "badge"], "seeds": [0, 2, 3]}


def test_a_repeated_classes_flag_of_a_project_adds(monkeypatch, tmp_path):
    seen: dict = {}

    def capture(directory, config, **kwargs):
        seen["classes"] = config.classes
        raise SystemExit(0)

    monkeypatch.setattr("activebayes.cli.LabellingProject.create", capture)
    (tmp_path / "images").mkdir()
    CliRunner().invoke(cli, ["query", str(tmp_path / "p"), "--images", str(tmp_path / "images"),
                             "--classes", "cat,dog", "--classes", "bird"])
    assert seen == {"classes": ("cat", "dog", "bird")}


# --------------------------------------------------------------------------- N2: empty criteria


@pytest.mark.parametrize("value", ["", ",,", "remaining_change,"])
def test_an_empty_criterion_is_a_one_line_error(capsys, tmp_path, value):
    code, _, err = run_cli(capsys, "run", "-q", "--out", tmp_path / "r", "--stop-when", value)
    assert code == 1 and err.count("\n") == 1
    assert err.startswith("error: --stop-when: an empty criterion in ")
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- D4, D5, N5: TOML


def test_a_toml_mapping_keeps_its_thresholds(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("stop_when = {remaining_change = 0.02}\n")
    assert _build_config(_read_toml(str(path)), {}).stop_when == ("remaining_change=0.02",)
    path.write_text('stop_when = ["remaining-change", "information=0.05"]\n')
    assert _build_config(_read_toml(str(path)), {}).stop_when == ("remaining_change", "information=0.05")


@pytest.mark.parametrize(("line", "message"), [
    ("stop_when = 5", "--stop-when takes criteria NAME or NAME=THRESHOLD"),
    ("stop_when = [5]", "--stop-when takes criteria NAME or NAME=THRESHOLD"),
    ('stop_when = {remaining_change = "0.02"}', "remaining_change's threshold must be a number, got str '0.02'"),
    ('audit_fraction = "0.2"', "--audit-fraction must be a number in [0, 1), got str '0.2'"),
])
def test_a_wrongly_typed_toml_value_is_a_one_line_error(capsys, tmp_path, line, message):
    path = tmp_path / "c.toml"
    path.write_text(line + "\n")
    code, _, err = run_cli(capsys, "run", "-q", "--budget", 30, "--out", tmp_path / "r", "--config", path)
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert message in err
    assert err.startswith(f"error: --config {path}: "), err  # the value came from the file, which it names
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- D2: audits need batches of 2


def test_an_audit_with_batches_of_one_is_refused_before_anything_is_written(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", "-q", "--budget", 26, "--batch-size", 1, "--audit-fraction", 0.2,
                           "--stop-when", "estimated_accuracy=0.5", "--out", tmp_path / "r")
    assert code == 1 and err.count("\n") == 1
    assert "--audit-fraction 0.2 needs --batch-size 2 or more" in err and "got --batch-size 1" in err
    assert not (tmp_path / "r").exists()


def test_a_labelling_project_with_an_audit_and_batches_of_one_is_refused_before_it_is_created(capsys, tmp_path):
    """ProjectConfig checks its audit_fraction with the loop's default batch size: the command
    checks it with the project's before creating anything."""
    code, _, err = run_cli(capsys, "query", tmp_path / "p", "--dataset", "digits", "--batch-size", 1,
                           "--audit-fraction", 0.2, "-q")
    assert code == 1 and "--audit-fraction 0.2 needs --batch-size 2 or more" in err
    assert not (tmp_path / "p").exists()


# --------------------------------------------------------------------------- D8: what resume suggests


@pytest.fixture
def fast_config(tmp_path: Path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text(FAST_TOML)
    return path


@pytest.mark.parametrize(("flags", "says"), [
    (["--stop-when", "expected_accuracy=0.99"],
     "stopped by its --stop-when criterion expected_accuracy, it cannot go on to a larger budget; to label further, "
     "start a new run with another --out, without expected_accuracy in --stop-when"),
    (["--target-accuracy", 0.05],
     "stopped by its target accuracy, it cannot go on to a larger budget; to label further, start a new run with "
     "another --out, without --target-accuracy"),
])
def test_resume_of_a_run_a_criterion_stopped_suggests_what_can_go_on(capsys, tmp_path, fast_config, flags, says):
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "-q", "--config", fast_config, "--budget", 80, "--out", out, *flags)
    assert code == 0, err
    code, stdout, err = run_cli(capsys, "resume", out, "-q")
    assert code == 0, err
    assert f"nothing to train: {out} finished earlier (" in stdout
    assert "--budget N" not in stdout and says in stdout
    code, _, err = run_cli(capsys, "resume", out, "--budget", 200, "-q")  # what it no longer suggests: refused
    assert code == 1 and "stopped for another reason than its label budget" in err


def test_resume_of_a_run_its_label_budget_stopped_still_suggests_a_larger_budget(capsys, tmp_path, fast_config):
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "-q", "--config", fast_config, "--budget", 30, "--out", out)
    assert code == 0, err
    code, stdout, err = run_cli(capsys, "resume", out, "-q")
    assert code == 0 and f"`activebayes resume {out} --budget N` continues it to a larger budget" in stdout
