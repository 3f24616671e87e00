"""Issue 29: what the command line says about the environment, stops, finished runs,
the acquisition schedule and its own errors (one line, flags, the real directory)."""

from __future__ import annotations

import builtins
import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import activebayes.cli as cli_module
from activebayes.cli import main
from tests.conftest import ROOT
from tests.cli.cli_helpers import run_cli

FAST_TOML = """
initial_size = 20
validation_size = 50
num_samples = 4
eval_samples = 4
cold_start_labels = 30
[fit_options]
max_epochs = 2
patience = 1
"""


@pytest.fixture
def fast_config(tmp_path: Path) -> Path:
    path = tmp_path / "fast.toml"
    path.write_text(FAST_TOML)
    return path


# --------------------------------------------------------------------------- item 3: the environment


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch) -> Path:
    """A folder on which every write fails as on a read-only file system (the tests run as root,
    so permissions cannot make one)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "inside").mkdir()

    def refuse(path: object) -> None:
        if str(os.fsdecode(path)).startswith(str(folder)):
            raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))

    real_mkdir, real_open, real_os_open = os.mkdir, builtins.open, os.open

    def mkdir(path, *args, **kwargs):
        refuse(path)
        return real_mkdir(path, *args, **kwargs)

    def open_(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(os, "open", os_open)
    return folder


@pytest.mark.parametrize("command", ["run", "compare", "label", "query"])
def test_a_read_only_folder_is_one_line_naming_the_path(command, read_only, fast_config, capsys):
    if command == "label":  # without the app extra, label says so before anything else
        pytest.importorskip("starlette")
    target = read_only / "inside" / "out"
    if command in ("run", "compare"):
        args = [command, "--config", fast_config, "--budget", 30, "--out", target, "-q"]
    else:
        args = [command, target, "--dataset", "digits", "-q"]
    code, _, err = run_cli(capsys, *args)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert str(read_only) in err and "read-only file system" in err


def test_report_output_on_a_read_only_folder(tmp_path, read_only, fast_config, capsys):
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    code, _, err = run_cli(capsys, "report", out, "--output", read_only / "inside" / "report.html")
    assert code == 1 and err.count("\n") == 1, err
    assert str(read_only / "inside") in err and "read-only file system" in err


def test_a_full_disk_is_one_line_naming_the_path(tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "r" / "config.json"))

    monkeypatch.setattr(cli_module, "run_experiment", full)
    code, _, err = run_cli(capsys, "run", "--out", tmp_path / "r", "-q")
    assert code == 1
    assert err == f"error: {tmp_path / 'r' / 'config.json'}: no space left on device; free some disk space\n"


def test_a_full_disk_during_a_run_names_the_file_and_says_resume(tmp_path, fast_config, monkeypatch, capsys):
    from activebayes._io import atomic_write_with
    from activebayes.rundir import RunDirectory

    def full(handle):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write() says it: no file name

    monkeypatch.setattr(RunDirectory, "write_rounds", lambda self, records: atomic_write_with(self.rounds_path, full))
    out = tmp_path / "r"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 1
    assert err == (f"error: {out / 'rounds.jsonl'}: no space left on device; free some disk space; "
                   f"once there is space, resume with `activebayes resume {out}`\n")
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []


def test_report_in_a_read_only_run_names_report_html_and_suggests_output(tmp_path, fast_config, monkeypatch, capsys):
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    real_os_open = os.open

    def os_open(path, flags, *args, **kwargs):  # the run's folder is on a read-only file system
        if flags & os.O_CREAT and os.fsdecode(path).startswith(str(out)):
            raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    code, _, err = run_cli(capsys, "report", out)
    assert code == 1
    assert err == (f"error: {out / 'report.html'}: read-only file system; "
                   "write the report elsewhere with --output FILE\n")
    code, _, err = run_cli(capsys, "report", out, "--output", tmp_path / "elsewhere.html")
    assert code == 0, err


def test_a_read_only_label_store_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    import sqlite3

    from activebayes.labelling import LabellingProject

    def read_only(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(LabellingProject, "create", read_only)
    code, _, err = run_cli(capsys, "query", tmp_path / "project", "--dataset", "digits", "-q")
    assert code == 1
    assert err == (f"error: {tmp_path / 'project' / 'labels.sqlite'}: attempt to write a readonly database; "
                   "check that the folder is writable and the disk not full\n")


def test_an_oserror_that_is_no_environment_problem_keeps_its_traceback(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(cli_module, "run_experiment", broken)
    with pytest.raises(OSError):
        main(["run", "--out", str(tmp_path / "r"), "-q"])


# --------------------------------------------------------------------------- item 7: one story per round


def test_the_header_and_directory_name_the_whole_schedule(tmp_path, fast_config, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 40)
    assert code == 0, err
    path = Path("runs") / "digits-typicality-then-badge-seed0"
    assert out.startswith(f"run: typicality-then-badge on digits, seed 0, 20 -> 40 labels, 10 per round -> {path}\n")
    assert "badge seed" not in err.replace("typicality-then-badge seed", "")  # the progress bar too
    rows = [json.loads(r) for r in (path / "rounds.jsonl").read_text().splitlines()]
    # the records (the source of truth) say which strategy picked each batch
    assert [(r["n_labelled"], r["strategy"]) for r in rows] == [(20, "typicality"), (30, "badge"), (40, None)]
    no_cold_start = tmp_path / "none.toml"
    no_cold_start.write_text(FAST_TOML.replace("cold_start_labels = 30\n", ""))
    code, out, err = run_cli(capsys, "run", "--config", no_cold_start, "--budget", 40, "--cold-start", "none", "-q")
    assert code == 0, err
    assert (Path("runs") / "digits-badge-seed0" / "rounds.jsonl").is_file()


# --------------------------------------------------------------------------- item 8: stopping and resuming


def test_ctrl_c_names_the_real_directory(tmp_path, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "run_experiment", interrupted)
    out = tmp_path / "my run"
    with pytest.raises(SystemExit) as stop:
        main(["run", "--out", str(out), "-q"])
    assert stop.value.code == 130
    err = capsys.readouterr().err
    assert err == f"interrupted; resume with `activebayes resume {out}`\n"


def test_ctrl_c_in_a_labelling_command_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    """An interrupted `query` printed only 'interrupted'."""
    from activebayes.labelling import project as project_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(project_module.LabellingProject, "create", interrupted)
    with pytest.raises(SystemExit) as stop:
        main(["query", str(tmp_path / "p"), "--dataset", "digits", "-q"])
    assert stop.value.code == 130
    assert capsys.readouterr().err == ("interrupted; the project keeps every label stored: run the same command "
                                       "again to go on\n")


def test_sigterm_stops_with_a_message(tmp_path):
    out = tmp_path / "terminated"
    script = (
        "import sys, time\n"
        "import activebayes.cli as cli\n"
        "def slow(*args, **kwargs):\n"
        "    print('started', flush=True)\n"
        "    time.sleep(600)\n"
        "cli.run_experiment = slow\n"
        f"sys.exit(cli.main(['run', '--out', {str(out)!r}, '-q']))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
    try:
        assert process.stdout.readline().strip() == "started"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143
    assert err == f"terminated (SIGTERM); resume with `activebayes resume {out}`\n"


def test_resume_says_finished_and_a_finished_run_says_nothing_was_trained(tmp_path, fast_config, capsys):
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    # again: nothing is trained, and it says so instead of showing a full progress bar
    code, stdout, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out)
    assert code == 0, err
    assert f"nothing to train: {out} finished earlier" in stdout
    assert "100%" not in err
    # resume of an interrupted run ends with the finished: line
    rounds = (out / "rounds.jsonl").read_text().splitlines()
    (out / "rounds.jsonl").write_text(rounds[0] + "\n")
    (out / "summary.json").unlink()
    code, stdout, err = run_cli(capsys, "resume", out, "-q")
    assert code == 0, err
    assert "finished: label budget reached" in stdout and f"results: {out}" in stdout
    code, stdout, err = run_cli(capsys, "resume", out)
    assert code == 0 and "nothing to train" in stdout and "100%" not in err
    # taken further, resume says what it continues, as run does
    code, stdout, err = run_cli(capsys, "resume", out, "--budget", 40)
    assert code == 0, err
    header = stdout.splitlines()[0]
    assert header.startswith("resume: ") and header.endswith(f", at 30 of 40 labels -> {out}")


# --------------------------------------------------------------------------- item 9: errors worded one way


def test_out_of_range_numbers_are_worded_one_way(tmp_path, capsys):
    messages = {}
    for value in (-5, 0):
        code, _, err = run_cli(capsys, "run", "--budget", value, "--out", tmp_path / "r", "-q")
        assert code == 1
        messages[value] = err
    assert messages == {-5: "error: --budget must be >= 1, got -5\n", 0: "error: --budget must be >= 1, got 0\n"}
    code, _, err = run_cli(capsys, "run", "--num-samples", 0, "--out", tmp_path / "r", "-q")
    assert err == "error: --num-samples must be >= 1, got 0\n"


def test_an_unknown_strategy_lists_what_activebayes_list_shows(tmp_path, capsys):
    code, listed, _ = run_cli(capsys, "list", "strategies")
    shown = listed.strip().split(": ", 1)[1]
    code, _, err = run_cli(capsys, "run", "--strategy", "nope", "--out", tmp_path / "r", "-q")
    assert code == 1
    assert err.startswith("error: --strategy: unknown strategy 'nope'; ")
    assert f"expected one of: {shown} (`activebayes list strategies`)" in err
    assert "typiclust" not in err and "predictive_entropy" not in err  # aliases are not listed
    assert "strategy (--strategy)" not in err


def test_the_missing_data_error_names_flags(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--dataset", "mnist", "--data-dir", tmp_path / "none", "--out",
                           tmp_path / "r", "-q")
    assert code == 1 and err.count("\n") == 1
    assert "--download" in err and "--data-dir" in err
    assert "download=True" not in err and "data_dir=" not in err


def test_a_different_config_does_not_suggest_resume(tmp_path, fast_config, capsys):
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--seed", 3, "--out", out, "-q")
    assert code == 1
    assert "different config (seed: 0 there, 3 now)" in err
    assert "resume" not in err and "another folder (--out)" in err
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 40, "--out", out, "-q")
    assert code == 1 and f"`activebayes resume {out} --budget 40`" in err
    # the Python call quoted beside it stays Python (it read "resume_experiment(path, --budget 40)")
    assert "(from Python: resume_experiment(path, budget=40))" in err


# --------------------------------------------------------------------------- item 11: the README


def test_the_readme_installs_the_cpu_build_as_pytorch_documents_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = next(line for line in readme.splitlines() if line.startswith("pip install torch"))
    assert "--index-url https://download.pytorch.org/whl/cpu" in first and "activebayes run" in first
    assert "Chromium" in readme and "skip" in readme


def test_a_run_into_a_folder_of_other_files_is_refused(tmp_path, fast_config, capsys):
    """``--out`` naming a folder that holds other files (not a run): the run's files would be
    mixed into it. An empty folder, or one holding only a run's lock file, is used."""
    out = tmp_path / "notes"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 1 and err == (f"error: {out} exists and is not a run directory (it holds notes.txt, and no "
                                 "config.json): give a new or empty folder (--out)\n"), err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", empty, "-q")
    assert code == 0 and (empty / "config.json").is_file(), err


def test_a_run_and_a_comparison_never_share_a_folder(tmp_path, fast_config, capsys):
    """``run --out`` an existing comparison and ``compare --out`` an existing run both went on,
    the last writer's report.html replacing the other's."""
    run, comparison = tmp_path / "run", tmp_path / "cmp"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", run, "-q")
    assert code == 0, err
    code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--strategies", "random", "--seeds", "0",
                           "--budget", 30, "--out", comparison, "-q")
    assert code == 0, err
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")}
    code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--strategies", "random", "--seeds", "0",
                           "--budget", 30, "--out", run, "-q")
    assert code == 1 and err.startswith(f"error: {run} exists and is a run directory (it holds ") and \
        err.endswith("and no comparison.json): give a new or empty folder (--out)\n"), err
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", comparison, "-q")
    assert code == 1 and err.startswith(f"error: {comparison} exists and is a comparison directory (it holds "
                                        "comparison.json"), err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.name.endswith(".lock")} == before


def test_a_damaged_label_store_is_one_line_naming_it(tmp_path, capsys):
    """A truncated, garbage or empty labels.sqlite gave sqlite3's traceback from query, import
    and export."""
    project = tmp_path / "project"
    code, _, err = run_cli(capsys, "query", project, "--dataset", "digits", "--batch-size", 4, "-q")
    assert code == 0, err
    store = project / "labels.sqlite"
    whole = store.read_bytes()
    for damaged, said in ((whole[: len(whole) // 3], "database disk image is malformed"),
                          (b"not a database at all" * 300, "file is not a database"), (b"", "no such table: meta")):
        for name in ("labels.sqlite-wal", "labels.sqlite-shm"):
            (project / name).unlink(missing_ok=True)
        store.write_bytes(damaged)
        for command in (["query", project, "-q"], ["export", project], ["import", tmp_path / "a.csv", "--project",
                                                                        project]):
            (tmp_path / "a.csv").write_text("item,label\n")
            code, _, err = run_cli(capsys, *command)
            assert code == 1 and err == (f"error: {store}: {said}: the project's label store is damaged (or not "
                                         "one); put back a copy of it, or create a new project\n"), (command, err)


@pytest.mark.parametrize("line, said", [
    ('evaluate_test = "no"', "must be true or false, got str 'no'"),
    ("warm_start = 1", "must be true or false, got int 1"),
    ('checkpoints = "x"', "must be true or false, got str 'x'"),
    ('plateau_min_delta = "x"', "must be a number, got str 'x'"),
    ('cost_budget = "x"', "must be a number or None, got str 'x'"),
    ("data_dir = 5", "must be a string or None, got int 5"),
])
def test_a_config_file_value_of_the_wrong_type_is_named(tmp_path, fast_config, capsys, line, said):
    """A TOML value of the wrong type was stored as it came (``evaluate_test = "no"`` is a true
    value: the test set was evaluated), or failed deep inside with a traceback."""
    config = tmp_path / "typed.toml"
    config.write_text(line + "\n" + fast_config.read_text())  # before its [fit_options] table
    code, _, err = run_cli(capsys, "run", "--config", config, "--out", tmp_path / "run", "-q")
    name = line.split(" = ")[0]
    assert code == 1 and err.startswith(f"error: --config {config}: ") and err.endswith(f" {said}\n"), err
    assert name in err or f"--{name.replace('_', '-')}" in err
    assert not (tmp_path / "run").exists()
