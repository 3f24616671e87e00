"""A run computes on the thread count it was started with, also when it is resumed.

The last bits of a convolution depend on torch's thread count, so exact resumption needs
the same count. ``LoopConfig.threads`` (a runtime setting) holds it: the command line
stores an explicit ``--threads N`` or ``OMP_NUM_THREADS`` there, and ``run_experiment`` /
``resume_experiment`` compute on it (restoring the caller's count after).
"""

from __future__ import annotations

import json

import pytest
import torch

from activebayes._threads import automatic_threads
from activebayes.cli import main
from activebayes.experiment import resume_experiment, run_experiment
from activebayes.loop import ActiveLearningLoop
from activebayes.models import MLP
from activebayes.records import RUNTIME_FIELDS, LoopConfig
from activebayes.rundir import RunDirectory
from tests.cli.cli_helpers import FAST_TOML
from tests.conftest import FAST_LOOP


class _Recording(MLP):
    """The digits MLP, noting torch's thread count at every forward pass (training included)."""

    seen: list[int] = []

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        _Recording.seen.append(torch.get_num_threads())
        return super().forward(inputs)


def _factory(config: LoopConfig) -> ActiveLearningLoop:
    return ActiveLearningLoop(config, model_factory=lambda generator: _Recording(in_features=64, num_classes=10))


def test_a_resumed_run_computes_on_the_stored_thread_count(tmp_path):
    config = LoopConfig(**{**FAST_LOOP, "budget": 30, "fit_options": {"max_epochs": 1, "min_samples_per_epoch": 64}},
                        threads=2)
    before = torch.get_num_threads()
    _Recording.seen.clear()
    run_experiment(config, tmp_path / "run", progress=False, report=False, loop_factory=_factory)
    assert set(_Recording.seen) == {2} and torch.get_num_threads() == before
    assert RunDirectory(tmp_path / "run").read_config().threads == 2
    # as the command line runs it: the automatic rule would give this small MLP one thread per fit
    _Recording.seen.clear()
    with automatic_threads(environ={}):
        resume_experiment(tmp_path / "run", progress=False, report=False, loop_factory=_factory, budget=40)
    assert _Recording.seen and set(_Recording.seen) == {2}
    # ... which it does for a run that stored none (the check above can tell them apart)
    _Recording.seen.clear()
    with automatic_threads(environ={}):
        run_experiment(config.replace(threads=None), tmp_path / "auto", progress=False, report=False,
                       loop_factory=_factory)
    assert set(_Recording.seen) == {1}
    # a runtime setting: another count resumes the same run, and only for that resumption
    _Recording.seen.clear()
    resume_experiment(tmp_path / "run", progress=False, report=False, loop_factory=_factory, budget=50,
                      runtime={"threads": 1})
    assert set(_Recording.seen) == {1} and RunDirectory(tmp_path / "run").read_config().threads == 2
    assert "threads" in RUNTIME_FIELDS


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2"])
def test_threads_must_be_a_positive_int(threads):
    with pytest.raises((ValueError, TypeError), match=r"^threads \(--threads\) must be"):
        LoopConfig(threads=threads)


def test_the_command_line_stores_an_explicit_count_and_resume_may_replace_it(tmp_path, monkeypatch, capsys):
    config_file = tmp_path / "fast.toml"
    config_file.write_text(FAST_TOML)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setattr("activebayes.experiment.write_report", lambda *args, **kwargs: None)  # not tested here
    common = ["--config", str(config_file), "--budget", "30", "--quiet"]
    assert main(["--threads", "2", "run", *common, "--out", str(tmp_path / "flag")]) == 0
    assert main(["run", *common, "--out", str(tmp_path / "auto")]) == 0
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert main(["compare", *common, "--strategy", "random", "--seeds", "0", "--out", str(tmp_path / "env")]) == 0
    monkeypatch.delenv("OMP_NUM_THREADS")
    stored = {name: json.loads(path.read_text())["threads"] for name, path in (
        ("flag", tmp_path / "flag" / "config.json"), ("auto", tmp_path / "auto" / "config.json"),
        ("env", tmp_path / "env" / "random" / "seed_0" / "config.json"))}
    assert stored == {"flag": 2, "auto": None, "env": 1}
    assert json.loads((tmp_path / "env" / "comparison.json").read_text())["base"]["threads"] == 1

    runtimes = []
    monkeypatch.setattr("activebayes.cli.resume_experiment",
                        lambda path, **kwargs: runtimes.append(kwargs["runtime"]) or resume_experiment(path, **kwargs))
    assert main(["resume", str(tmp_path / "flag"), "--budget", "40", "--quiet"]) == 0
    assert main(["--threads", "1", "resume", str(tmp_path / "flag"), "--budget", "50", "--quiet"]) == 0
    assert [runtime["threads"] for runtime in runtimes] == [None, 1]  # None: the stored count (2)
    capsys.readouterr()
