"""Processes sharing a comparison: a run another process holds is skipped, not fatal; read-only runs still resume."""

from __future__ import annotations

import errno
import builtins

import pytest

from activebayes import rundir
from activebayes.experiment import resume_experiment, run_comparison, run_experiment
from activebayes.loop import LoopConfig
from activebayes.rundir import Comparison, InUseError, RunDirectory, RunDirectoryError
from tests.conftest import FAST_LOOP


def test_a_run_held_by_another_process_is_skipped_and_the_rest_finish(tmp_path):
    base = LoopConfig(**{**FAST_LOOP, "budget": 30})
    # as another `compare` on the same folder leaves it: comparison.json, then its run's folder
    Comparison(tmp_path / "cmp", base, ("bald", "random"), (0,)).write()
    busy = RunDirectory(tmp_path / "cmp" / "random" / "seed_0")
    busy.path.mkdir(parents=True)
    with busy.lock():  # as another `compare` on the same folder would
        with pytest.raises(InUseError, match=r"1 of 2 runs are finished; 1 are being run by another process "
                                             r"\(random seed 0\)") as error:
            run_comparison(base, ["bald", "random"], [0], tmp_path / "cmp", progress=False)
    assert isinstance(error.value, RunDirectoryError)
    assert RunDirectory(tmp_path / "cmp" / "bald" / "seed_0").is_finished()
    assert not busy.is_finished() and not (tmp_path / "cmp" / "report.html").exists()
    results = run_comparison(base, ["bald", "random"], [0], tmp_path / "cmp", progress=False, report=False)
    assert sorted(results) == [("bald", 0), ("random", 0)]


def test_a_finished_run_on_a_read_only_file_system_resumes_without_its_lock_file(tmp_path, monkeypatch):
    config = LoopConfig(**{**FAST_LOOP, "budget": 30})
    first = run_experiment(config, tmp_path / "run", progress=False, report=False)
    real_open = builtins.open

    def read_only(file, mode="r", *args, **kwargs):
        if str(file).endswith(rundir.LOCK_FILE):
            raise OSError(errno.EROFS, "Read-only file system", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(rundir, "open", read_only, raising=False)
    again = resume_experiment(tmp_path / "run", progress=False, report=False)
    assert [r.acquired for r in again.rounds] == [r.acquired for r in first.rounds]

    def denied(file, mode="r", *args, **kwargs):
        if str(file).endswith(rundir.LOCK_FILE):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(rundir, "open", denied, raising=False)
    with pytest.raises(PermissionError):  # only a read-only file system is safe to go on without a lock
        resume_experiment(tmp_path / "run", progress=False, report=False)
