"""What a newcomer following the command-line guides meets (README, getting started, the
guides to labelling, comparing, resuming and the report): each mistake a one-line error
that names what to change, and nothing changed by a command that is refused."""

from __future__ import annotations

import json
from pathlib import Path

from activebayes import acquisition
from tests.cli.cli_helpers import run_cli


def test_resume_of_a_comparison_with_a_strategy_registered_in_python_changes_nothing(tmp_path, fast_config,
                                                                                      capsys):
    # the compare guide's "a new strategy in a few lines", then `activebayes resume DIR --budget N`
    acquisition.register_strategy("guide_margin", acquisition.topk_strategy(acquisition.margin))
    out = tmp_path / "compare"
    try:
        code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "random,guide_margin",
                               "--seeds", 0, "--budget", 30, "--out", out, "-q")
        assert code == 0, err
    finally:
        acquisition.unregister_strategy("guide_margin")
    rounds = (out / "random" / "seed_0" / "rounds.jsonl").read_text()
    code, stdout, err = run_cli(capsys, "resume", out, "--budget", 40, "-q")
    assert code == 1 and stdout == ""
    assert err.startswith(f"error: {out / 'comparison.json'}: unknown strategy 'guide_margin'")
    assert "--strategy" not in err and "registered from Python" in err
    assert json.loads((out / "comparison.json").read_text())["base"]["budget"] == 30  # nothing raised
    assert (out / "random" / "seed_0" / "rounds.jsonl").read_text() == rounds
    code, stdout, err = run_cli(capsys, "resume", out / "guide_margin" / "seed_0", "--budget", 40)
    assert code == 1 and stdout == ""  # no "resume: ..." line for a run that is refused
    assert err.startswith(f"error: {out / 'guide_margin' / 'seed_0' / 'config.json'}: unknown strategy")


def test_resume_of_a_run_stored_with_a_device_this_machine_lacks_says_where_it_came_from(tmp_path, fast_config,
                                                                                          capsys):
    # a run started on a GPU machine, copied to one without it: no --device was given here
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    config["device"] = "cuda:99"  # a runtime setting: editing it is allowed
    (out / "config.json").write_text(json.dumps(config))
    code, _, err = run_cli(capsys, "resume", out, "--budget", 40, "-q")
    assert code == 1
    assert err == (f"error: {out / 'config.json'}: the run was started with --device cuda:99, which this machine "
                   f"lacks (it has {err.split('(it has ')[1].split(')')[0]}); continue it here with --device cpu\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", 40, "--device", "cpu", "-q")
    assert code == 0, err


def _images(folder: Path, count: int = 12) -> Path:
    """``count`` small PNG images in ``folder`` (the guide's photos/)."""
    import numpy as np
    from PIL import Image

    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (16, 16), dtype=np.uint8)).save(folder / f"img{i:03d}.png")
    return folder


def test_a_new_projects_misplaced_flags_are_named_as_given(tmp_path, capsys):
    photos = _images(tmp_path / "photos")
    project = tmp_path / "cats-dogs"
    base = ("query", project, "--images", photos, "--classes", "cat,dog", "-q")
    # a table option on an image folder: the flag given, not all three table options
    code, _, err = run_cli(capsys, *base, "--multilabel")
    assert code == 1 and err == "error: --multilabel: only with a table (--table FILE)\n"
    # --data-dir belongs to --dataset: with --images it was stored, unused, as a fixed setting
    code, _, err = run_cli(capsys, *base, "--data-dir", tmp_path)
    assert code == 1 and err.startswith("error: --data-dir: only with --dataset NAME")
    # the cold start takes `none`, and the error says so, as `run`'s does
    code, _, err = run_cli(capsys, *base, "--cold-start", "nope")
    assert code == 1 and err.startswith("error: --cold-start: unknown strategy 'nope'")
    assert err.endswith(", or none (`activebayes list strategies`)\n")
    assert not project.exists()


def test_a_seed_named_twice_is_refused_naming_seeds(tmp_path, capsys):
    # `--seeds 0-2,1`: a range and a list that overlap; it said "strategies and seeds must not repeat"
    code, _, err = run_cli(capsys, "compare", "--seeds", "0-2,1", "--out", tmp_path / "c", "-q")
    assert code == 1 and err == "error: --seeds must not repeat a seed, got '0-2,1' (named twice: 1)\n"
    (tmp_path / "c.toml").write_text("seeds = [0, 0]\n")
    code, _, err = run_cli(capsys, "compare", "--config", tmp_path / "c.toml", "--out", tmp_path / "c", "-q")
    assert code == 1 and err == "error: --seeds must not repeat a seed, got [0, 0] (named twice: 0)\n"
    assert not (tmp_path / "c").exists()


def test_report_of_a_comparison_over_several_datasets_writes_one_per_dataset(tmp_path, fast_config, capsys):
    # the compare guide's `--dataset digits,mnist` gives a folder per dataset; resume took the whole
    # folder, report said it was "neither a run directory nor a comparison"
    out = tmp_path / "multi"
    code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--dataset", "digits,wine", "--strategy",
                           "random", "--seeds", 0, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    for part in ("digits", "wine"):
        (out / part / "report.html").unlink()
    code, stdout, err = run_cli(capsys, "report", out, "-q")
    assert code == 0, err
    assert f"report: {out / 'digits' / 'report.html'}" in stdout and f"report: {out / 'wine' / 'report.html'}" in stdout
    assert (out / "digits" / "report.html").is_file() and (out / "wine" / "report.html").is_file()
    code, _, err = run_cli(capsys, "report", out, "--output", tmp_path / "r.html", "-q")
    assert code == 1 and err.startswith(f"error: --output: {out} holds one comparison per dataset (digits, wine)")


def test_a_config_files_bad_value_is_named_as_the_files(tmp_path, capsys):
    # the compare guide's "Settings in a file": the error names the file and its key, not a flag not given
    cases = {
        'max_epochs = "3"\n': "error: --config {file}: max_epochs must be an int, got str '3'\n",  # was a TypeError
        "max_epochs = 0\n": "error: --config {file}: max_epochs must be >= 1, got 0\n",
        'device = "cuda:99"\n': "error: --config {file}: device must be a device this machine has",
        'initial = "balance"\n': "error: --config {file}: unknown --initial 'balance' (did you mean 'balanced'?)",
    }
    file = tmp_path / "settings.toml"
    for text, expected in cases.items():
        file.write_text(text)
        code, _, err = run_cli(capsys, "run", "--config", file, "--out", tmp_path / "r", "-q")
        assert code == 1 and err.startswith(expected.format(file=file)), (text, err)
    assert not (tmp_path / "r").exists()
    # a flag given wins over the file, and its own mistake names the flag
    code, _, err = run_cli(capsys, "run", "--config", file, "--initial", "random", "--max-epochs", 0, "--out",
                           tmp_path / "r", "-q")
    assert code == 1 and err == "error: --max-epochs must be >= 1, got 0\n"


def test_resume_to_the_budget_a_finished_run_has_says_nothing_was_trained(tmp_path, fast_config, capsys):
    # `resume DIR --budget 30` repeated after the raise finished: no "resume: ... at 30 of 30 labels" line
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--config", fast_config, "--budget", 30, "--out", out, "-q")
    assert code == 0, err
    rounds = (out / "rounds.jsonl").read_text()
    code, stdout, err = run_cli(capsys, "resume", out, "--budget", 30)
    assert code == 0, err
    assert stdout.startswith(f"nothing to train: {out} finished earlier") and "resume:" not in stdout
    assert (out / "rounds.jsonl").read_text() == rounds


def test_a_compare_joining_a_comparison_says_which_runs_the_grid_adds(tmp_path, fast_config, capsys):
    # the compare guide's later `compare` into the same --out: its plan said "random x seeds [1]" and it
    # ran bald on seed 1 too (a comparison is strategies x seeds)
    out = tmp_path / "compare"
    code, _, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "random,bald", "--seeds", 0,
                           "--budget", 30, "--out", out)
    assert code == 0, err
    code, stdout, err = run_cli(capsys, "compare", "--config", fast_config, "--strategy", "random", "--seeds", 1,
                                "--budget", 30, "--out", out)
    assert code == 0, err
    assert stdout.splitlines()[:2] == [
        f"compare: random x seeds [1] on digits -> {out}",
        "joins the comparison there: random, bald x seeds [0, 1] (every strategy on every seed; runs already "
        "finished are not run again)"]
    assert (out / "bald" / "seed_1" / "summary.json").is_file()


def test_importing_a_file_again_after_one_of_its_images_was_removed_changes_nothing(tmp_path, capsys):
    # the guide: "Importing the same file twice changes nothing"; with one of its images deleted since,
    # the second import was refused ("is no longer in the image folder; drop its row")
    import csv

    photos = _images(tmp_path / "photos")
    project = tmp_path / "cats-dogs"
    code, _, err = run_cli(capsys, "query", project, "--images", photos, "--classes", "cat,dog", "--batch-size", 4,
                           "-q")
    assert code == 0, err
    query = project / "queries" / "query-0000.csv"
    rows = list(csv.DictReader(query.open()))
    for i, row in enumerate(rows):
        row["label"] = ("cat", "dog")[i % 2]
    with query.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, stdout, err = run_cli(capsys, "import", query, "--project", project)
    assert code == 0 and "imported 4 new label(s)" in stdout, err
    (photos / rows[0]["key"]).unlink()
    code, stdout, err = run_cli(capsys, "import", query, "--project", project)
    assert code == 0, err
    assert "nothing new: the 4 label(s) in the file were stored already" in stdout
    # a different label for the removed image is still refused: it cannot be labelled any more
    rows[0]["label"] = "dog" if rows[0]["label"] == "cat" else "cat"
    with query.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    code, _, err = run_cli(capsys, "import", query, "--project", project)
    assert code == 1 and "is no longer in the image folder; drop its row" in err
