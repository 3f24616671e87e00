"""A run's settings are fingerprinted in its config.json: a hand edit that would mix two experiments is refused."""

from __future__ import annotations

import hashlib
import json

import pytest

from activebayes.cli import main
from activebayes.experiment import resume_experiment, run_experiment
from activebayes.loop import LoopConfig
from activebayes.records import FINGERPRINT_KEY, RUNTIME_FIELDS
from activebayes.rundir import RunDirectory, RunDirectoryError, settings_fingerprint
from tests.conftest import FAST_LOOP


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """A run stopped after 2 of its 4 rounds (budget 30 of a config that goes to 50)."""
    path = tmp_path_factory.mktemp("fingerprint") / "run"
    run_experiment(LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 30}), path, progress=False, report=False)
    return path


def _copy(started, tmp_path):
    import shutil

    shutil.copytree(started, tmp_path / "run")
    return tmp_path / "run"


def _edit(path, **changes):
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, **changes}, indent=2))


def test_the_fingerprint_is_the_sha256_of_the_settings_without_the_runtime_ones(started):
    stored = json.loads((started / "config.json").read_text())
    settings = {k: v for k, v in stored.items() if k not in (*RUNTIME_FIELDS, FINGERPRINT_KEY)}
    expected = hashlib.sha256(json.dumps(settings, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert stored[FINGERPRINT_KEY] == expected == settings_fingerprint(stored)
    assert {"strategy", "seed", "budget"} <= set(settings) and not set(RUNTIME_FIELDS) & set(settings)


def test_an_edited_strategy_is_refused_on_resume_with_nothing_changed(started, tmp_path, capsys):
    path = _copy(started, tmp_path)
    _edit(path, strategy="random")
    before = (path / "rounds.jsonl").read_bytes()
    with pytest.raises(RunDirectoryError, match=r"config.json was edited after the run started"):
        resume_experiment(path, progress=False, report=False)
    assert main(["resume", str(path), "-q"]) == 1
    err = capsys.readouterr().err
    assert "config.json was edited after the run started" in err and "--budget N" in err
    assert "Traceback" not in err and err.count("\n") == 1
    assert (path / "rounds.jsonl").read_bytes() == before


@pytest.mark.parametrize("changes", [{"seed": 5}, {"budget": 80}, {"fit_options": {"max_epochs": 3}}])
def test_any_edited_setting_is_refused(started, tmp_path, changes):
    path = _copy(started, tmp_path)
    _edit(path, **changes)
    with pytest.raises(RunDirectoryError, match="was edited"):
        RunDirectory(path).read_config()


def test_a_runtime_setting_may_be_edited(started, tmp_path):
    path = _copy(started, tmp_path)
    _edit(path, predict_batch_size=64, checkpoints=False)
    assert RunDirectory(path).read_config().predict_batch_size == 64


def test_a_config_written_before_fingerprints_still_resumes(started, tmp_path):
    path = _copy(started, tmp_path)
    config = json.loads((path / "config.json").read_text())
    del config[FINGERPRINT_KEY]
    (path / "config.json").write_text(json.dumps(config))
    assert RunDirectory(path).read_config() == LoopConfig.from_stored(config)


def test_a_budget_raise_writes_a_new_fingerprint_and_the_run_goes_on(started, tmp_path):
    path = _copy(started, tmp_path)
    result = resume_experiment(path, progress=False, report=False, budget=40)
    assert result.rounds[-1].n_labelled == 40
    stored = json.loads((path / "config.json").read_text())
    assert stored["budget"] == 40 and stored[FINGERPRINT_KEY] == settings_fingerprint(stored)
