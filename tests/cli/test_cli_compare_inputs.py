"""`activebayes compare`: a flag replaces the --config file's value in either spelling; a new comparison
whose data does not load leaves nothing behind; the printed table marks runs not finished; seeds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from activebayes.cli import _parse_seeds
from tests.cli.cli_helpers import FAST_TOML
from tests.cli.cli_helpers import run_cli


def test_a_flag_replaces_the_files_strategies_seeds_and_datasets(tmp_path, capsys):
    config = tmp_path / "compare.toml"
    config.write_text('strategies = ["bald", "entropy"]\nseeds = [3, 4]\ndatasets = ["digits"]\n' + FAST_TOML)
    out = tmp_path / "cmp"
    code, _, err = run_cli(capsys, "compare", "--config", config, "--strategy", "random", "--seeds", "1",
                           "--dataset", "digits", "--budget", 30, "--out", out, "--quiet")
    assert code == 0, err
    stored = json.loads((out / "comparison.json").read_text())
    assert stored["strategies"] == ["random"] and stored["seeds"] == [1] and stored["base"]["dataset"] == "digits"
    # the singular spellings in a file are read too, and replaced by the flags the same way
    config.write_text('strategy = "bald"\nseed = 2\ndataset = "digits"\n' + FAST_TOML)
    code, _, err = run_cli(capsys, "compare", "--config", config, "--budget", 30, "--out", tmp_path / "single", "--quiet")
    stored = json.loads((tmp_path / "single" / "comparison.json").read_text())
    assert code == 0 and stored["strategies"] == ["bald"] and stored["seeds"] == [2], err


@pytest.mark.parametrize(("keys", "message"), [
    ('strategies = ["bald", "entropy"]\nstrategy = "random"\n',
     "give strategies or strategy, not both; got strategies = ['bald', 'entropy'] and strategy = 'random'"),
    ("seeds = [0, 1]\nseed = 2\n", "give seeds or seed, not both; got seeds = [0, 1] and seed = 2"),
    ('datasets = ["digits"]\ndataset = "iris"\n',
     "give datasets or dataset, not both; got datasets = ['digits'] and dataset = 'iris'"),
])
def test_a_compare_config_with_both_spellings_of_a_list_is_refused(tmp_path, capsys, keys, message):
    """`strategy = "random"` beside `strategies = [...]` was dropped without a word."""
    config = tmp_path / "both.toml"
    config.write_text(keys + FAST_TOML)
    out = tmp_path / "cmp"
    code, _, err = run_cli(capsys, "compare", "--config", config, "--budget", 30, "--out", out, "--quiet")
    assert code == 1 and err == f"error: --config {config}: {message}\n", err
    assert not out.exists()


@pytest.mark.parametrize(("flag", "value"), [("--strategies", ","), ("--strategies", ""), ("--strategy", " , "),
                                             ("--dataset", "")])
def test_an_empty_list_of_strategies_or_datasets_is_refused(tmp_path, capsys, flag, value):
    """`--strategies ""` ran the four default strategies (`--dataset ""` the digits) without a word, and
    `--strategies ,` was refused naming --strategy."""
    config = tmp_path / "fast.toml"
    config.write_text(FAST_TOML)
    out = tmp_path / "cmp"
    code, _, err = run_cli(capsys, "compare", "--config", config, flag, value, "--seeds", 0, "--budget", 30,
                           "--out", out, "--quiet")
    named = "--dataset" if flag == "--dataset" else "--strategies"
    assert code == 1 and err == f"error: {named} must name at least one, got {value!r}\n", err
    assert not out.exists()


def test_a_new_comparison_whose_data_does_not_load_leaves_nothing(tmp_path, capsys):
    out = tmp_path / "m11"
    code, _, err = run_cli(capsys, "compare", "--dataset", "mnist", "--data-dir", tmp_path / "nowhere", "--seeds", 0,
                           "--strategy", "random", "--budget", 30, "--out", out)
    assert code != 0 and err.startswith("error: mnist split 'train': data files not found"), err
    assert not out.exists()
    # the command again with another folder meets the data's error, not "holds a comparison with other settings"
    code, _, err = run_cli(capsys, "compare", "--dataset", "mnist", "--data-dir", tmp_path / "elsewhere", "--seeds", 0,
                           "--strategy", "random", "--budget", 30, "--out", out)
    assert code != 0 and "data files not found" in err and "other settings" not in err, err
    # an existing comparison's folder is left as it was
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "compare", "--dataset", "mnist", "--data-dir", tmp_path / "nowhere", "--seeds", 0,
                           "--strategy", "random", "--budget", 30, "--out", out)
    assert code != 0 and sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_the_printed_table_marks_strategies_with_runs_not_finished(tmp_path, capsys):
    config = tmp_path / "fast.toml"
    config.write_text(FAST_TOML)
    out = tmp_path / "cmp"
    code, stdout, err = run_cli(capsys, "compare", "--config", config, "--strategy", "bald,random", "--seeds", "0",
                                "--budget", 30, "--out", out, "--quiet")
    assert code == 0 and "*" not in stdout.split("strategy", 1)[1].split("results:")[0], err
    rounds = out / "bald" / "seed_0" / "rounds.jsonl"  # as if interrupted after its first round
    rounds.write_text(rounds.read_text().splitlines()[0] + "\n")
    code, stdout, err = run_cli(capsys, "report", out)
    assert code == 0, err
    lines = stdout.splitlines()
    bald = next(line for line in lines if line.startswith("bald"))
    random = next(line for line in lines if line.startswith("random"))
    assert bald.endswith("  *") and not random.endswith("*")
    assert f"* includes runs not finished: bald seed 0 (at 20 labels); `activebayes resume {out}` finishes them" in lines

    # a strategy's folder deleted: the printed table says so, as the HTML report does, and resume runs it again
    shutil.rmtree(out / "bald")
    code, stdout, err = run_cli(capsys, "report", out)
    assert code == 0 and not any(line.startswith("bald") for line in stdout.splitlines()), err
    assert (f"- missing runs, not started or deleted: bald seed 0 (bald/seed_0); `activebayes resume {out}` "
            "runs them") in stdout.splitlines()
    code, stdout, err = run_cli(capsys, "resume", out, "--quiet")
    assert code == 0 and any(line.startswith("bald") for line in stdout.splitlines()) and "missing" not in stdout, err


@pytest.mark.parametrize(("text", "message"), [
    ("2-0", "--seeds: the range '2-0' runs backwards; write 0-2"),
    ("0-x", "--seeds must be a comma-separated list of integers or a range like 0-4, got '0-x'"),
    ("-1", "--seeds must name one or more non-negative integers, got '-1'"),
])
def test_seeds_that_are_not_seeds(text, message):
    from activebayes.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as error:
        _parse_seeds(text)
    assert str(error.value) == message
    assert _parse_seeds("0-2, 5") == [0, 1, 2, 5] and _parse_seeds([1, 2]) == [1, 2] and _parse_seeds(3) == [3]


@pytest.mark.parametrize("value", [["a"], [1.5], [-1], [], True, -3, [0, True]])
def test_seeds_from_a_config_file_that_are_not_seeds(value):
    """A config file's `seeds = ["a"]` was a ValueError traceback, `[1.5]` ran seed 1, `seed = -3` ran."""
    from activebayes.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as error:
        _parse_seeds(value)
    assert str(error.value) == f"--seeds must name one or more non-negative integers, got {value!r}"


@pytest.mark.parametrize("value", ["bald,", "bald,,random", ",bald", ["bald", " "]])
def test_a_list_of_names_with_an_empty_name_is_refused(value):
    """`--strategies bald,` dropped the empty name without a word (`--classes a,,b` is refused)."""
    from activebayes.cli import _parse_names
    from activebayes.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as error:
        _parse_names(value, "--strategies")
    assert str(error.value) == f"--strategies has an empty name (two commas, or one at an end), got {value!r}"
    with pytest.raises(InvalidArgumentError, match=r"^--dataset must be names \(text\), got \[1\]$"):
        _parse_names([1], "--dataset")
    assert _parse_names(" bald , random", "--strategies") == ["bald", "random"]


def test_an_absurd_seed_range_is_refused_before_its_list_is_made(tmp_path, capsys):
    """`--seeds 0-1000000000` exhausted the memory building the list; now one line naming the count."""
    from activebayes.errors import InvalidArgumentError

    out = tmp_path / "cmp"
    code, _, err = run_cli(capsys, "compare", "--seeds", "0-1000000000", "--strategy", "random", "--out", out)
    assert code == 1 and err == ("error: --seeds names 1,000,000,001 seeds, more than 10,000 (each seed is a run of "
                                 "every strategy); give fewer, e.g. 0-4, got '0-1000000000'\n"), err
    assert not out.exists()
    with pytest.raises(InvalidArgumentError, match=r"^--seeds names 10,001 seeds, more than 10,000"):
        _parse_seeds("0-9999, 20000")
    with pytest.raises(InvalidArgumentError, match=r"^--seeds names 1(,000){9},001 seeds"):
        _parse_seeds(f"0-{10**30}")  # beyond sys.maxsize: no OverflowError either
    assert len(_parse_seeds("0-9999")) == 10_000

def test_a_data_dir_for_an_embedded_dataset_is_refused_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "m22"
    code, _, err = run_cli(capsys, "run", "--data-dir", tmp_path, "--out", out)
    assert code != 0 and err == (f"error: dataset 'digits' is built in and reads no folder, but --data-dir {tmp_path} "
                                 "was given; name the dataset the folder holds (e.g. mnist, fashion_mnist, memmap, "
                                 "wordnet_nouns), or drop the folder\n")
    assert not out.exists()
    from activebayes.data import load_dataset
    from activebayes.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="dataset 'iris' is built in and reads no folder"):
        load_dataset("iris", data_dir=Path("x"))


def test_a_later_dataset_that_does_not_fit_is_refused_before_the_first_ones_runs(tmp_path, capsys):
    """`compare --dataset digits,wine` ran every digits run, then failed on wine's size."""
    out = tmp_path / "cmp"
    code, _, err = run_cli(capsys, "compare", "--dataset", "digits,wine", "--strategies", "random", "--seeds", "0",
                           "--budget", 150, "--out", out, "-q")
    assert code == 1 and err.startswith("error: dataset 'wine' has 125 items, fewer than --initial-size 20 + "), err
    assert not out.exists()
