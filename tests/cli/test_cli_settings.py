"""The command line takes its settings (flags, types, choices, defaults, floors) from LoopConfig."""

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from activebayes.cli import _build_config, cli
from activebayes.records import LoopConfig, cli_settings


def test_no_flag_given_is_the_configs_own_default():
    flags = {f.name: None for f, _ in cli_settings(LoopConfig)}
    assert _build_config({}, flags) == LoopConfig()


def test_help_shows_each_settings_default_from_the_config():
    text = CliRunner().invoke(cli, ["run", "--help"], terminal_width=400).output
    for f, flag in cli_settings(LoopConfig):
        assert flag.split("/")[0] in text
        if f.default not in (None, (), False, True) and not f.metadata["default_text"]:
            assert f"[{f.default}]" in text, f.name
        for choice in f.metadata["choices"] or ():
            assert choice in text


@pytest.mark.parametrize(
    ("argv", "field", "value"),
    [
        (["--budget", "60"], "budget", 60),
        (["--costs", "c.npy", "--cost-budget", "5"], "costs_file", "c.npy"),
        (["--no-test"], "evaluate_test", False),
        (["--posterior", "laplace"], "posterior", "laplace"),
        (["--audit-fraction", "0.2"], "audit_fraction", 0.2),
        (["--stop-when", "information=0.05"], "stop_when", ("information=0.05",)),
    ],
)
def test_each_flag_sets_its_field(argv, field, value, monkeypatch):
    seen = {}

    def capture(file_values, flags, **overrides):
        seen.update(flags)
        raise SystemExit(0)

    monkeypatch.setattr("activebayes.cli._build_config", capture)
    CliRunner().invoke(cli, ["run", *argv])
    config = _build_config({}, seen)
    if field == "costs_file":  # stored absolute: the run resumes from any working directory
        value = str(Path(value).absolute())
    assert getattr(config, field) == value


@pytest.mark.parametrize(("argv", "message"), [
    (["--budget", "0"], "--budget must be >= 1, got 0"),
    (["--budget", "-5"], "--budget must be >= 1, got -5"),
    (["--ensemble-size", "1"], "--ensemble-size must be >= 2, got 1"),
    (["--validation-size", "-1"], "--validation-size must be >= 0, got -1"),
])
def test_floors_come_from_the_config_worded_one_way(argv, message):
    result = CliRunner().invoke(cli, ["run", *argv])
    assert result.exit_code != 0 and message in result.output


def test_every_setting_is_a_field_with_help():
    for f, _ in cli_settings(LoopConfig):
        assert f.metadata["help"].strip() and f.name in {g.name for g in dataclasses.fields(LoopConfig)}


@pytest.mark.parametrize("command", ["label", "query"])
def test_a_project_commands_help_shows_the_projects_defaults(command):
    """The ``[default]`` of each project flag is read from ProjectConfig (whose shared settings
    have the loop's defaults), not written again in the help: a changed default shows."""
    from activebayes import cli
    from activebayes.labelling import ProjectConfig

    options = {p.name: p for p in getattr(cli, command).params}
    checked = 0
    for f in dataclasses.fields(ProjectConfig):
        if f.name not in options or not isinstance(f.default, str | int | float) or isinstance(f.default, bool):
            continue
        shown = f"{f.default:g}" if isinstance(f.default, float) else str(f.default)
        assert options[f.name].help.endswith(f"[{shown}]"), (f.name, options[f.name].help)
        assert options[f.name].help.count("[") == 1, (f.name, options[f.name].help)
        checked += 1
    assert checked >= 8  # strategy, cold_start, model, posterior, batch_size, num_samples, seed, audit_fraction, ...
