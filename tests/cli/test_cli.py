from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.cli.cli_helpers import FAST_TOML, run_cli

def test_run_writes_results_and_says_where(tmp_path, fast_config, capsys):
    out = tmp_path / "run"
    code, stdout, _ = run_cli(capsys, "run", "--config", fast_config, "--budget", 40, "--out", out, "--quiet")
    assert code == 0
    assert f"results: {out}" in stdout
    rows = (out / "rounds.jsonl").read_text().splitlines()
    assert [json.loads(r)["n_labelled"] for r in rows] == [20, 30, 40]
    config = json.loads((out / "config.json").read_text())
    assert config["budget"] == 40 and config["strategy"] == "badge" and config["num_samples"] == 4
    last = json.loads(rows[-1])["metrics"]
    assert f"40 labels, test accuracy {last['test_accuracy']:.4f}" in stdout
    # without a test set the headline is the validation split's, and the line says so
    code, stdout, _ = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--no-test", "--out",
                              tmp_path / "no-test", "--quiet")
    last = json.loads((tmp_path / "no-test" / "rounds.jsonl").read_text().splitlines()[-1])["metrics"]
    assert code == 0 and f"30 labels, validation accuracy {last['validation_accuracy']:.4f}" in stdout


def test_run_with_a_cold_start_strategy(tmp_path, fast_config, capsys):
    out = tmp_path / "cold"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 40, "--cold-start", "typicality",
                           "--cold-start-labels", 30, "--out", out, "--quiet")
    assert code == 0, err
    rows = [json.loads(r) for r in (out / "rounds.jsonl").read_text().splitlines()]
    assert [(r["n_labelled"], r["strategy"]) for r in rows] == [(20, "typicality"), (30, "badge"), (40, None)]
    # the config file says cold_start = "none": a label count alone has no strategy to run
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--cold-start-labels", 30, "--out",
                           tmp_path / "bad", "--quiet")
    assert code != 0 and "--cold-start-labels needs a cold_start strategy" in err and "Traceback" not in err


def test_run_defaults_to_typicality_for_six_labels_per_class_then_badge(tmp_path, capsys):
    config = tmp_path / "default.toml"
    config.write_text(FAST_TOML.replace('cold_start = "none"\n', ""))
    out = tmp_path / "default"
    code, _, err = run_cli(capsys, "run", "--config", config, "--budget", 80, "--out", out, "--quiet")
    assert code == 0, err
    rows = [json.loads(r) for r in (out / "rounds.jsonl").read_text().splitlines()]
    # digits has 10 classes: typicality while fewer than 60 items are labelled
    assert [(r["n_labelled"], r["strategy"]) for r in rows] == [
        (20, "typicality"), (30, "typicality"), (40, "typicality"), (50, "typicality"),
        (60, "badge"), (70, "badge"), (80, None)]
    code, _, err = run_cli(capsys, "run", "--config", config, "--budget", 40, "--cold-start", "none",
                           "--out", tmp_path / "none", "--quiet")
    assert code == 0, err
    rows = [json.loads(r) for r in (tmp_path / "none" / "rounds.jsonl").read_text().splitlines()]
    assert [r["strategy"] for r in rows] == ["badge", "badge", None]


def test_compare_and_resume(tmp_path, fast_config, capsys):
    out = tmp_path / "cmp"
    code, stdout, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "random,margin",
                                "--seeds", "0-1", "--budget", 30, "--out", out, "--quiet")
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["margin", "random"]
    assert json.loads((out / "comparison.json").read_text())["seeds"] == [0, 1]
    code, stdout, err = run_cli(capsys, "resume", out, "--quiet")
    assert code == 0, err
    # more labels for a finished comparison: resume --budget
    code, stdout, err = run_cli(capsys, "resume", out, "--budget", 40, "--quiet")
    assert code == 0, err
    assert json.loads((out / "comparison.json").read_text())["base"]["budget"] == 40
    for run in out.glob("*/seed_*"):
        assert [json.loads(r)["n_labelled"] for r in (run / "rounds.jsonl").read_text().splitlines()] == [20, 30, 40]
    code, _, err = run_cli(capsys, "resume", out, "--budget", 30, "--quiet")
    assert code != 0 and "budget must be larger than the run's budget (40)" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "resume", out, "--budget", 0, "--quiet")
    assert code != 0 and err.startswith("error: --budget must be >= 1")


def _aulc_and_final(run: Path) -> tuple[float, float]:
    """The normalised trapezoid area of a run's test-accuracy curve, and its last value, from rounds.jsonl."""
    import numpy as np

    rounds = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    n = np.array([r["n_labelled"] for r in rounds], dtype=np.float64)
    acc = np.array([r["metrics"]["test_accuracy"] for r in rounds], dtype=np.float64)
    area = float(np.sum(np.diff(n) * (acc[1:] + acc[:-1]) / 2))  # the trapezoid rule (numpy < 2 has no trapezoid)
    return area / float(n[-1] - n[0]), float(acc[-1])


def test_compare_prints_each_strategys_area_and_final_accuracy(tmp_path, fast_config, capsys):
    import statistics

    out = tmp_path / "cmp"
    code, stdout, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "margin,random",
                                "--seeds", "0-2", "--budget", 40, "--out", out, "--quiet")
    assert code == 0, err
    lines = stdout.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("strategy")))
    assert lines[head].split() == ["strategy", "seeds", "AULC", "(mean", "±", "sd)", "final", "test", "accuracy"]
    rows = [line.split() for line in lines[head + 1: head + 3]]
    assert [row[0] for row in rows] == ["margin", "random"]  # in the order given
    for name, seeds, mean, _, sd, final in rows:
        areas, finals = zip(*(_aulc_and_final(out / name / f"seed_{s}") for s in range(3)), strict=True)
        assert seeds == "3"
        assert float(mean) == pytest.approx(statistics.fmean(areas), abs=5e-5)
        assert float(sd) == pytest.approx(statistics.stdev(areas), abs=5e-5)
        assert float(final) == pytest.approx(statistics.fmean(finals), abs=5e-5)
    code, stdout, err = run_cli(capsys, "resume", out, "--budget", 50, "--quiet")  # resume prints it again
    assert code == 0 and "AULC (mean ± sd)" in stdout, err
    code, again, err = run_cli(capsys, "report", out)  # and so does report
    assert code == 0 and again.splitlines()[:3] == stdout.splitlines()[:3], err


def test_compare_within_the_cold_start_warns_and_one_seed_shows_no_spread(tmp_path, fast_config, capsys):
    out = tmp_path / "cmp"
    code, stdout, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "margin,random", "--seeds", "0",
                                "--budget", 30, "--cold-start", "typicality", "--out", out, "--quiet")
    assert code == 0, err
    assert "warning: every batch was picked by the cold start (typicality) up to the last of 30 labels" in err
    rows = [line for line in stdout.splitlines() if line.startswith(("margin", "random"))]
    assert len(rows) == 2 and not any("±" in row for row in rows)  # one seed: no spread to show
    code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "margin,random", "--seeds", "0",
                           "--budget", 30, "--out", tmp_path / "cmp2", "--quiet")  # cold_start = "none"
    assert code == 0 and "warning" not in err, err


def test_list(capsys):
    code, stdout, _ = run_cli(capsys, "list")
    assert code == 0
    lines = dict(line.split(": ", 1) for line in stdout.strip().splitlines())
    assert "bald" in lines["strategies"] and "batchbald" in lines["strategies"]
    assert "gal_cnn" in lines["models"] and "digits" in lines["datasets"]
    assert lines["posteriors"] == "mc_dropout, ensemble, laplace"
    assert {"max_entropy", "typiclust"} <= set(lines["strategy aliases"].split(", "))
    code, stdout, _ = run_cli(capsys, "list", "posteriors")
    assert code == 0 and stdout == "posteriors: mc_dropout, ensemble, laplace\n"


def test_threads_option_sets_torch_threads(capsys):
    import torch

    before = torch.get_num_threads()
    try:
        code, _, _ = run_cli(capsys, "--threads", "1", "list")
        assert code == 0 and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_an_absurd_thread_count_is_one_line_naming_where_it_came_from(tmp_path, capsys, monkeypatch):
    """`--threads 1000000` crashed inside torch (a segmentation fault); now refused before the command runs."""
    import torch

    before = torch.get_num_threads()
    code, _, err = run_cli(capsys, "--threads", "1000000", "list")  # `list` first: the crash needs a parallel op
    assert code == 1 and torch.get_num_threads() == before, err
    from activebayes._threads import max_threads

    assert err.startswith(f"error: --threads must be at most {max_threads()} (4 per CPU of the ") and \
        err.endswith("; got 1000000\n") and err.count("\n") == 1, err
    code, _, err = run_cli(capsys, "--threads", "1000000", "run", "--out", tmp_path / "r")
    assert code == 1 and not (tmp_path / "r").exists(), err
    monkeypatch.setenv("OMP_NUM_THREADS", "1000000")
    code, _, err = run_cli(capsys, "list")
    assert code == 1 and err.startswith(f"error: OMP_NUM_THREADS must be at most {max_threads()} "), err
    assert max_threads() >= 1024  # a count a run stored on a large machine resumes on a small one


def test_an_absurd_thread_count_in_a_config_file_names_the_file(tmp_path, capsys):
    """A --config file's threads = 1000000 was refused as if --threads had been given."""
    config = tmp_path / "c.toml"
    config.write_text("threads = 1000000\n")
    code, _, err = run_cli(capsys, "run", "--config", config, "--out", tmp_path / "r")
    assert code == 1 and err.startswith(f"error: --config {config}: threads must be at most ") and \
        err.endswith("; got 1000000\n"), err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--dataset", "mnist", "--data-dir", "/nonexistent/folder"], "/nonexistent/folder"),
        (["run", "--strategy", "telepathy"], "telepathy"),
        (["run", "--strategy", "batchbal"], "--strategy: unknown strategy 'batchbal' (did you mean 'batchbald'?)"),
        (["run", "--dataset", "mnsit"], "did you mean 'mnist'?"),
        (["run", "--budget", "25", "--batch-size", "30"], "budget"),
        (["run", "--batch-size", "-3"], "batch-size"),
        (["run", "--num-samples", "-1"], "num-samples"),
        (["run", "--seed", "-1"], "seed"),
        (["run", "--dataset", "imagenet"], "imagenet"),
        (["run", "--config", "/nonexistent.toml"], "nonexistent.toml"),
        (["run", "--bogus-flag"], "bogus-flag"),
        (["compare", "--seeds", "a,b"], "--seeds"),
        (["compare", "--dataset", "digits,imagenet"], "imagenet"),
        (["compare", "--dataset", "digits,digits"], "repeat"),
        (["compare", "--strategy", "bald,nope", "--budget", "30"], "nope"),
        (["resume", "/nonexistent/run"], "/nonexistent/run"),
        (["report", "/nonexistent/run"], "/nonexistent/run"),
        (["query", "PROJECT_DIR"], "--dataset"),
        (["import", "/nonexistent.csv", "--project", "PROJECT_DIR"], "project"),
        (["--threads", "0", "list"], "--threads"),
        (["run", "--strategy", "bald,random"], "`activebayes compare --strategies bald,random` runs several"),
        (["run", "--ensemble-size", "0"], "--ensemble-size must be >= 2, got 0"),
        (["run", "--posterior", "laplace", "--ensemble-size", "3"], "not with posterior 'laplace'"),
        (["run", "--costs", "costs.npy"], "error: --costs needs --cost-budget: the total labelling cost allowed"),
        (["run", "--costs", "nothere.npy", "--cost-budget", "5"], "error: --costs: no such file "),
        (["run", "--cost-budget", "5"], "error: --cost-budget needs per-item labelling costs: give --costs, a file of "
                                        "one cost per item (from Python, or costs_N)"),
        (["query", "PROJECT_DIR", "--images", "/nonexistent", "--classes", "a,,b"],
         "--classes: an empty class name in 'a,,b'"),
        (["run", "--dataset", "digits", "--test-size", "10"], "--test-size: only with a table (--table FILE)"),
        (["run", "--multilabel"], "--multilabel: only with a table (--table FILE)"),
        (["run", "--dataset", "digits", "--table", "t.csv", "--text-column", "t"],
         "give --dataset or --table, not both: got --dataset digits and --table t.csv"),
    ],
)
def test_user_mistakes_give_one_line_and_no_traceback(tmp_path, capsys, args, needle):
    args = [a.replace("PROJECT_DIR", str(tmp_path / "project")) for a in args]
    code, stdout, err = run_cli(capsys, *args, "--out", tmp_path / "out") if args[0] in ("run", "compare") else run_cli(capsys, *args)
    assert code != 0
    assert "Traceback" not in err + stdout
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and needle in lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--strategy", "badgee"], "--strategy"),
        (["run", "--cold-start", "typ"], "--cold-start"),
        (["run", "--dataset", "mnistt"], "--dataset"),
        (["run", "--model", "cnnn"], "--model"),
        (["compare", "--strategy", "bald,badgee"], "--strategy"),
    ],
)
def test_unknown_names_fail_before_the_plan_is_printed_or_a_directory_made(tmp_path, capsys, args, needle):
    code, stdout, err = run_cli(capsys, *args, "--out", tmp_path / "out")
    assert code != 0 and needle in err
    assert stdout == ""  # no "run: ... -> DIR" banner promising a run that never starts
    assert not (tmp_path / "out").exists()


def test_a_stop_set_larger_than_the_pool_fails_before_anything_is_written(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--dataset", "digits", "--stop-set-size", "5000", "--out", tmp_path / "out")
    lines = err.strip().splitlines()
    assert code != 0 and len(lines) == 1 and lines[0].startswith("error: --stop-set-size") and "got 5000" in lines[0]
    assert not (tmp_path / "out").exists()


def test_unreadable_and_invalid_configs(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("budget = = 3\n")
    code, _, err = run_cli(capsys, "run", "--config", bad)
    assert code != 0 and err.startswith("error: --config") and len(err.strip().splitlines()) == 1
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("bugdet = 3\n")
    code, _, err = run_cli(capsys, "run", "--config", unknown)
    assert code != 0 and "bugdet" in err and len(err.strip().splitlines()) == 1
    # a compare set-up given to run: refused, rather than running the default strategy
    for text, key in (('strategies = ["bald", "random"]\n', "strategies"), ("seeds = [0, 1]\n", "seeds")):
        setup = tmp_path / "compare.toml"
        setup.write_text(text)
        code, stdout, err = run_cli(capsys, "run", "--config", setup, "--out", tmp_path / "never")
        assert code == 1 and f"{key} is a setting of `activebayes compare --config`" in err and stdout == ""
        assert not (tmp_path / "never").exists()


def test_entry_point_subprocess_has_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-m", "activebayes", "run", "--strategy", "nope", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0
    assert done.stderr.strip().startswith("error: ") and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())  # nothing written for a rejected command


def _fill(query: Path, answers: Path, labels: dict[int, str]) -> None:
    with query.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["label"] = labels.get(int(row["index"]), "")
    with answers.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_cost_budget_from_a_costs_file(tmp_path, fast_config, capsys):
    import numpy as np

    costs = np.linspace(1.0, 2.0, 1297)
    np.save(tmp_path / "costs.npy", costs)
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--strategy", "entropy", "--budget", 500,
                           "--costs", tmp_path / "costs.npy", "--cost-budget", 30, "--out", out, "--quiet")
    assert code == 0, err
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    spent = sum(costs[r["acquired"]].sum() for r in rows)
    assert spent <= 30 + 1e-9 and rows[-1]["cost_spent"] == pytest.approx(spent)
    assert "cost budget" in rows[-1]["stop_reason"]
    # a costs file of the wrong length or without numbers: one-line errors
    (tmp_path / "short.txt").write_text("1\n2\n")
    code, _, err = run_cli(capsys, "run", "--costs", tmp_path / "short.txt", "--cost-budget", 5, "--out", tmp_path / "x")
    assert err.startswith(f"error: --costs {tmp_path / 'short.txt'} must hold 1297 numbers, one cost per dataset item")
    assert code != 0 and "got 2" in err and "costs_N" not in err and len(err.strip().splitlines()) == 1
    np.save(tmp_path / "zero.npy", np.where(np.arange(1297) == 7, 0.0, 1.0))
    code, _, err = run_cli(capsys, "run", "--costs", tmp_path / "zero.npy", "--cost-budget", 5, "--out", tmp_path / "z")
    assert code != 0 and err.startswith(f"error: --costs {tmp_path / 'zero.npy'} must be finite and > 0 for every item, "
                                        "got 0.0 for item 7")
    assert not (tmp_path / "z").exists() and not (tmp_path / "x").exists()
    (tmp_path / "words.txt").write_text("cheap\n")
    code, _, err = run_cli(capsys, "run", "--costs", tmp_path / "words.txt", "--cost-budget", 5, "--out", tmp_path / "y")
    assert code != 0 and err.startswith(f"error: --costs: {tmp_path / 'words.txt'} is not a .npy array or a text file")


def test_a_costs_file_with_a_byte_order_mark_is_read(tmp_path, capsys):
    """A costs text file saved with a UTF-8 BOM (as Excel and Notepad write CSV) was refused:
    "is not a .npy array or a text file of numbers (could not convert string '\\ufeff1.0' ...)"."""
    costs = tmp_path / "costs.csv"
    costs.write_text("1.0\n2.0\n", encoding="utf-8-sig")
    code, _, err = run_cli(capsys, "run", "--costs", costs, "--cost-budget", 5, "--out", tmp_path / "x")
    # read: only its length is wrong for the 1297 digits
    assert code != 0 and err.startswith(f"error: --costs {costs} must hold 1297 numbers, one cost per dataset item"), err
    assert "got 2" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "x").exists()


def test_a_costs_npy_of_strings_names_its_dtype(tmp_path, capsys):
    """A .npy of strings ended `run --costs` with a traceback (ValueError: could not convert string
    to float), or was read as numbers when every string happened to be one."""
    import numpy as np

    for name, values, dtype in [("words.npy", np.array(["cheap", "dear"]), "<U5"),
                                ("numbers_as_text.npy", np.array(["1.5"] * 1297), "<U3")]:
        np.save(tmp_path / name, values)
        code, _, err = run_cli(capsys, "run", "--costs", tmp_path / name, "--cost-budget", 5, "--out", tmp_path / "x")
        assert code == 1 and err == (f"error: --costs: {tmp_path / name} holds an array of dtype {dtype}; expected one "
                                     "array of numbers (a float or integer dtype)\n"), err
    with open(tmp_path / "two.npy", "wb") as handle:  # an .npz archive under a .npy name
        np.savez(handle, a=np.ones(3), b=np.ones(3))
    code, _, err = run_cli(capsys, "run", "--costs", tmp_path / "two.npy", "--cost-budget", 5, "--out", tmp_path / "x")
    assert code == 1 and err == (f"error: --costs: {tmp_path / 'two.npy'} holds several arrays (.npz); expected one "
                                 "array of numbers (a float or integer dtype)\n"), err
    assert not (tmp_path / "x").exists()


def test_query_a_folder_of_images(tmp_path, capsys):
    """A real labelling job: unlabelled PNGs, class names given, thumbnails and paths in the query."""
    from PIL import Image
    import numpy as np

    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(30):
        Image.fromarray(rng.integers(0, 255, (12, 12), dtype=np.uint8)).save(folder / f"img_{i:02d}.png")
    project = tmp_path / "project"
    code, stdout, err = run_cli(capsys, "query", project, "--images", folder, "--classes", "cat,dog", "--batch-size", 4, "--quiet")
    assert code == 0, err
    with (project / "queries" / "query-0000.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    for row in rows:
        assert Path(row["path"]).parent == folder.resolve() and Path(row["path"]).is_file()
        assert Path(row["thumbnail"]).is_file()
    for row in rows:
        row["label"] = "dog"
    answers = tmp_path / "answers.csv"
    with answers.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, stdout, err = run_cli(capsys, "import", answers, "--project", project)
    assert code == 0, err
    assert "imported 4 new label(s)" in stdout
    # without --classes a folder of images is refused with a one-line message
    code, _, err = run_cli(capsys, "query", tmp_path / "other", "--images", folder)
    assert code != 0 and "--classes" in err and len(err.strip().splitlines()) == 1


def test_download_flag_reaches_the_loader(tmp_path, capsys, monkeypatch):
    import activebayes.data
    import activebayes.loop

    seen = []

    def fake_load(name, *, data_dir=None, download=False, split="train", **kwargs):
        seen.append((name, data_dir, download, split))
        raise activebayes.data.DataError(f"stop here ({name}, download={download})")

    monkeypatch.setattr(activebayes.loop, "load_dataset", fake_load)
    code, _, err = run_cli(capsys, "run", "--dataset", "kmnist", "--data-dir", tmp_path, "--download", "--out", tmp_path / "o")
    assert code != 0 and "stop here (kmnist, --download)" in err  # the flag, not download=True
    assert seen == [("kmnist", str(tmp_path), True, "train")]


def test_report_on_a_labelling_project_points_to_its_dashboard(tmp_path, capsys):
    from activebayes.labelling import LabellingProject, ProjectConfig

    LabellingProject.create(tmp_path / "project", ProjectConfig(dataset="digits")).close()
    code, stdout, err = run_cli(capsys, "report", tmp_path / "project")
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 1 and len(lines) == 1 and "Traceback" not in err + stdout, err
    assert "is a labelling project, not a run" in lines[0] and f"activebayes label {tmp_path / 'project'}" in lines[0]


def test_a_resume_refused_because_the_run_is_in_use_says_only_that(tmp_path, capsys):
    # it printed "resume: random on digits, seed 0, at 0 of 50 labels" before the refusal
    from activebayes.records import LoopConfig
    from activebayes.rundir import RunDirectory
    from tests.conftest import FAST_LOOP

    run = RunDirectory(tmp_path / "run")
    run.write_config(LoopConfig(**{**FAST_LOOP, "strategy": "random"}))
    with run.lock():  # another process running it
        code, out, err = run_cli(capsys, "resume", tmp_path / "run")
    assert code == 1 and out == "", out
    assert err.startswith("error: ") and "is in use by another process" in err and err.count("\n") == 1, err


def test_export_refuses_a_foreign_ending_and_an_existing_out_unless_overwrite(tmp_path, capsys):
    """`export --out labels.xml` wrote CSV into it, and an existing --out was replaced without a word."""
    from activebayes.labelling import LabellingProject, ProjectConfig

    LabellingProject.create(tmp_path / "project", ProjectConfig(dataset="digits")).close()
    for args, said in [
        (["--out", tmp_path / "labels.xml"], f"error: --out {tmp_path / 'labels.xml'} ends .xml, but export writes "
                                             "CSV or JSON: give --out a name ending .csv or .json"),
        (["--format", "csv", "--out", tmp_path / "labels.txt"],
         f"error: --format csv writes CSV, but --out {tmp_path / 'labels.txt'} ends .txt: give --out a name ending .csv"),
        (["--format", "labelstudio", "--out", tmp_path / "tasks.xml"],
         f"error: --format labelstudio writes JSON, but --out {tmp_path / 'tasks.xml'} ends .xml: give --out a name "
         "ending .json"),
    ]:
        code, stdout, err = run_cli(capsys, "export", tmp_path / "project", *args)
        assert code == 1 and err == said + "\n" and stdout == "", err
    assert not any(tmp_path.glob("labels.*")) and not (tmp_path / "tasks.xml").exists()
    kept = tmp_path / "labels.csv"
    kept.write_text("mine\n")
    code, _, err = run_cli(capsys, "export", tmp_path / "project", "--out", kept)
    assert code == 1 and err == f"error: --out {kept} exists already: pass --overwrite to replace it, or choose " \
                                "another name\n"
    assert kept.read_text() == "mine\n"
    code, stdout, err = run_cli(capsys, "export", tmp_path / "project", "--out", kept, "--overwrite")
    assert code == 0 and stdout.startswith("exported 0 label(s) of ") and kept.read_text().startswith("item,"), err
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["labels.csv"]  # no temporary file left
    # the project's own default export is rewritten each time, as the dashboard's links do
    for _ in range(2):
        assert run_cli(capsys, "export", tmp_path / "project")[0] == 0
    # --out - is stdout (it wrote a file named '-'): the export there, the summary line on stderr
    code, stdout, err = run_cli(capsys, "export", tmp_path / "project", "--out", "-", "--format", "json")
    assert code == 0 and err.startswith("exported 0 label(s) of ") and err.endswith(" item(s): stdout\n"), err
    assert run_cli(capsys, "export", tmp_path / "project", "--out", tmp_path / "labels.json")[0] == 0
    assert len(json.loads(stdout)) == 1297 and stdout == (tmp_path / "labels.json").read_text()
    code, stdout, _ = run_cli(capsys, "export", tmp_path / "project", "--out", "-")
    assert code == 0 and stdout == kept.read_text() and not (Path.cwd() / "-").exists()


def test_an_image_whose_name_is_not_utf8_is_named_by_its_bytes(tmp_path, capsys):
    """A file name that is not UTF-8 (b'\\xff.png') in an image folder ended `query --images` with a
    traceback from SQLite ("surrogates not allowed") and `convert` with one from writing paths.txt."""
    from PIL import Image
    import numpy as np

    folder = tmp_path / "images"
    for name in ("cat", "dog"):
        (folder / name).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((6, 6), 40 * i, dtype=np.uint8)).save(folder / name / f"{i}.png")
    try:
        Image.fromarray(np.zeros((6, 6), dtype=np.uint8)).save(os.fsdecode(os.fsencode(folder / "dog") + b"/\xff.png"))
    except (OSError, UnicodeError):
        pytest.skip("this file system does not take a file name that is not UTF-8")
    said = f"holds a file whose name is not UTF-8 text, {b'dog/' + bytes([0xFF]) + b'.png'!r}: rename it"
    for args, start in [
        (["query", tmp_path / "project", "--images", folder, "--classes", "cat,dog", "-q"], f"error: --images: {folder} "),
        (["convert", folder, tmp_path / "pool", "-q"], f"error: image folder {folder} "),
    ]:
        code, stdout, err = run_cli(capsys, *args)
        assert code == 1 and err.startswith(start) and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "project").exists() and not (tmp_path / "pool").exists()


def test_an_image_folder_whose_path_is_not_utf8_is_named_by_its_bytes(tmp_path, capsys):
    """`query --images <folder named b'caf\\xe9'>` made the project, then ended in a traceback
    ("surrogates not allowed") when its stop set's identities were hashed; a --table there too."""
    from PIL import Image
    import numpy as np

    try:
        folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/caf\xe9"))
        folder.mkdir()
        for i in range(4):
            Image.fromarray(np.full((6, 6), 40 * i, dtype=np.uint8)).save(folder / f"{i}.png")
    except (OSError, UnicodeError):
        pytest.skip("this file system does not take a file name that is not UTF-8")
    table = folder / "texts.csv"  # a table there: `run` made the run, then its report was a traceback
    table.write_text("text,label\n" + "".join(f"text {i},{'ab'[i % 2]}\n" for i in range(12)), encoding="utf-8")
    for args, named in [(["query", tmp_path / "project", "--images", folder, "--classes", "a,b", "-q"], folder),
                        (["convert", folder, tmp_path / "pool", "-q"], folder),
                        (["query", tmp_path / "project", "--table", table, "--text-column", "text", "--classes", "a,b",
                          "-q"], table),
                        (["run", "--table", table, "--text-column", "text", "--label-column", "label", "--out",
                          tmp_path / "run", "-q"], table)]:
        code, _, err = run_cli(capsys, *args)
        assert code == 1 and f"{os.fsencode(named)!r}: its path is not UTF-8 text: rename it" in err, err
        assert err.count("\n") == 1, err
    assert not any((tmp_path / name).exists() for name in ("project", "pool", "run"))
