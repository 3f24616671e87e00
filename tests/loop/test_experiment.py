from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from activebayes.errors import InvalidArgumentError
from activebayes.experiment import resume_comparison, resume_experiment, run_comparison, run_experiment
from activebayes.rundir import Comparison, RunDirectory, RunDirectoryError, load_runs
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.models import ConsistentMCDropout
from tests.conftest import FAST_LOOP, ROOT


def _without_timings(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in (path / "rounds.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("seconds")
    return rows


def test_run_directory_contents(tmp_path):
    config = LoopConfig(strategy="bald", **FAST_LOOP)
    result = run_experiment(config, tmp_path / "run", progress=False, report=False)
    run = tmp_path / "run"
    assert LoopConfig.from_stored(json.loads((run / "config.json").read_text())) == config
    rows = [json.loads(line) for line in (run / "rounds.jsonl").read_text().splitlines()]
    assert len(rows) == len(result.rounds) == 4
    for row in rows:
        assert {"round", "n_labelled", "acquired", "scores", "metrics", "class_counts"} <= set(row)
        assert "test_accuracy" in row["metrics"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n_labelled"] == 50 and summary["stop_reason"].startswith("label budget")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["round_0002.pt", "round_0003.pt"]
    assert not list(run.glob("*.tmp*")) and not list(run.glob(".*"))
    # a finished run resumes to the same result without new work
    again = resume_experiment(run, progress=False, report=False)
    assert [r.acquired for r in again.rounds] == [r.acquired for r in result.rounds]
    # the same directory with another config is refused
    with pytest.raises(RunDirectoryError, match="different config"):
        run_experiment(config.replace(seed=3), run, progress=False, report=False)
    # a misspelt name is reported as such, before the stored config is compared, and writes nothing
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run.rglob("*"))
    with pytest.raises(InvalidArgumentError, match=r"cold_start \(--cold-start\).*typicalty"):
        run_experiment(config.replace(cold_start="typicalty"), run, progress=False, report=False)
    with pytest.raises(InvalidArgumentError, match="balld"):
        run_experiment(config.replace(strategy="balld"), run, progress=False, report=False)
    with pytest.raises(InvalidArgumentError, match=r"model \(--model\) 'mllp' \(did you mean 'mlp'"):
        run_experiment(config.replace(model="mllp"), run, progress=False, report=False)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run.rglob("*")) == before
    # nor is a new directory made for a misspelt name, so the corrected config can use it
    for bad in (config.replace(model="mllp"), config.replace(dataset="digitz")):
        with pytest.raises(InvalidArgumentError, match="did you mean"):
            run_experiment(bad, tmp_path / "fresh", progress=False, report=False)
        assert not (tmp_path / "fresh").exists()
    with pytest.raises(InvalidArgumentError, match=r"model \(--model\)"):
        ActiveLearningLoop(config.replace(model="mllp"))  # before any data is loaded


def test_resume_from_partial_records_equals_uninterrupted(tmp_path):
    config = LoopConfig(strategy="entropy", **FAST_LOOP)
    full = tmp_path / "full"
    run_experiment(config, full, progress=False, report=False)
    # simulate a crash after round 1: keep two records, drop the summary
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text((full / "config.json").read_text())
    lines = (full / "rounds.jsonl").read_text().splitlines(keepends=True)
    (partial / "rounds.jsonl").write_text("".join(lines[:2]))
    (partial / ".rounds.jsonl.tmp-dead").write_text("half-written garbage")  # a temp file left by a kill
    resume_experiment(partial, progress=False, report=False)
    assert _without_timings(partial) == _without_timings(full)


@pytest.mark.parametrize("warm_start", [False, True])
def test_raising_the_budget_of_a_finished_run_equals_a_run_to_that_budget(tmp_path, warm_start):
    config = LoopConfig(strategy="bald", warm_start=warm_start, **{**FAST_LOOP, "budget": 40})
    short, long = tmp_path / "short", tmp_path / "long"
    run_experiment(config, short, progress=False, report=False)
    # a run to a larger budget in the same folder says how to continue it
    with pytest.raises(RunDirectoryError, match=r"\(budget: 40 there, 60 now\); `activebayes resume .*short --budget 60`"):
        run_experiment(config.replace(budget=60), short, progress=False, report=False)
    resume_experiment(short, progress=False, report=False, budget=60)
    run_experiment(config.replace(budget=60), long, progress=False, report=False)
    assert _without_timings(short) == _without_timings(long)
    assert json.loads((short / "config.json").read_text()) == json.loads((long / "config.json").read_text())
    assert json.loads((short / "summary.json").read_text())["n_labelled"] == 60
    # repeating the call (e.g. after a crash) changes nothing; a smaller budget is refused
    resume_experiment(short, progress=False, report=False, budget=60)
    assert _without_timings(short) == _without_timings(long)
    with pytest.raises(InvalidArgumentError, match=r"budget must be larger than the run's budget \(60\).*got 50"):
        resume_experiment(short, progress=False, report=False, budget=50)


def test_raising_the_budget_judges_the_remaining_change_again_at_the_new_budget(tmp_path):
    # the signal's horizon is min(budget - n, n): the rounds a budget raise kept used to keep values
    # projected over the old budget's horizon, so the report could name another stopping point than a
    # run started with the larger budget (240 labels against 260)
    config = LoopConfig(strategy="random", **{**FAST_LOOP, "initial_size": 4, "batch_size": 2, "budget": 38,
                                              "validation_size": 20, "stop_set_size": 100,
                                              "fit_options": {"max_epochs": 1, "min_samples_per_epoch": 128}})
    short, long = tmp_path / "short", tmp_path / "long"
    run_experiment(config, short, progress=False, report=False)
    judged = [row["signals"]["remaining_change"] for row in _without_timings(short)]
    assert [entry["horizon"] for entry in judged if entry["value"] is not None] == [4, 2]  # 34 and 36 labels
    resume_experiment(short, progress=False, report=False, budget=48)
    run_experiment(config.replace(budget=48), long, progress=False, report=False)
    assert _without_timings(short) == _without_timings(long)
    again = [row["signals"]["remaining_change"] for row in _without_timings(short)]
    assert [entry["horizon"] for entry in again if entry["value"] is not None] == [14, 12, 10, 8, 6, 4, 2]


def test_a_cut_last_round_record_says_to_delete_it_and_resume(tmp_path):
    config = LoopConfig(strategy="random", **{**FAST_LOOP, "budget": 40})
    straight = run_experiment(config, tmp_path / "full", progress=False, report=False)
    lines = (tmp_path / "full" / "rounds.jsonl").read_text().splitlines(keepends=True)
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "config.json").write_text((tmp_path / "full" / "config.json").read_text())
    (cut / "rounds.jsonl").write_text("".join(lines[:2]) + lines[2][:40])  # a crash mid-write of line 3
    with pytest.raises(RunDirectoryError, match=r"rounds.jsonl:3 is not a valid round record: .*; it is the last "
                                                r"line: delete that line and resume the run"):
        resume_experiment(cut, progress=False, report=False)
    middle = "".join(lines[:1]) + lines[1][:40] + "\n" + "".join(lines[2:])
    (cut / "rounds.jsonl").write_text(middle)  # a corrupt line in the middle is another matter
    with pytest.raises(RunDirectoryError, match=r"rounds.jsonl:2 is not a valid round record") as error:
        resume_experiment(cut, progress=False, report=False)
    assert "last line" not in str(error.value)
    (cut / "rounds.jsonl").write_text("".join(lines[:2]))  # the advice, followed
    resumed = resume_experiment(cut, progress=False, report=False)
    assert [r.acquired for r in resumed.rounds] == [r.acquired for r in straight.rounds]


def test_a_corrupt_summary_is_written_again_by_resume(tmp_path):
    config = LoopConfig(strategy="bald", **FAST_LOOP)
    run_experiment(config, tmp_path / "run", progress=False, report=False)
    summary = tmp_path / "run" / "summary.json"
    written = json.loads(summary.read_text())
    summary.write_text(summary.read_text()[:100])  # cut short
    assert not RunDirectory(tmp_path / "run").is_finished()
    resume_experiment(tmp_path / "run", progress=False, report=False)
    again = json.loads(summary.read_text())
    for key in ("seconds", "total_seconds"):
        written.pop(key, None), again.pop(key, None)
    assert again == written


def test_a_batch_cut_short_by_the_budget_cannot_be_continued(tmp_path):
    run = tmp_path / "run"
    run_experiment(LoopConfig(strategy="entropy", **{**FAST_LOOP, "budget": 35}), run, progress=False, report=False)
    before = sorted((p.name, p.read_bytes()) for p in run.rglob("*") if p.is_file())
    with pytest.raises(RunDirectoryError, match=r"round 1 acquired 5 instead of batch_size \(10\)"):
        resume_experiment(run, progress=False, report=False, budget=60)
    assert sorted((p.name, p.read_bytes()) for p in run.rglob("*") if p.is_file()) == before  # untouched


def test_a_larger_budget_on_a_cut_run_does_not_advise_a_resume_that_fails(tmp_path):
    run = tmp_path / "run"
    config = LoopConfig(strategy="random", **{**FAST_LOOP, "budget": 35})
    run_experiment(config, run, progress=False, report=False)
    with pytest.raises(RunDirectoryError) as raised:
        run_experiment(config.replace(budget=60), run, progress=False, report=False)
    message = str(raised.value)
    assert "resume" not in message and "cannot go on to a larger budget (round 1 acquired 5 instead of" in message
    assert message.endswith("choose another folder (--out)")
    # a run that ended on a full batch is told how to go on
    full = tmp_path / "full"
    run_experiment(config.replace(budget=40), full, progress=False, report=False)
    with pytest.raises(RunDirectoryError, match=rf"`activebayes resume {full} --budget 60` \(from Python: "
                                                rf"resume_experiment\(path, budget=60\)\) continues it"):
        run_experiment(config.replace(budget=60), full, progress=False, report=False)


class _SmallNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = torch.nn.Linear(64, 32), torch.nn.Linear(32, 10)
        self.dropout = ConsistentMCDropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(torch.relu(self.hidden(x.flatten(1)))))


def _small_net(generator: torch.Generator) -> torch.nn.Module:
    return _SmallNet()


def test_a_run_with_its_own_model_is_not_resumed_without_it(tmp_path, capsys):
    """config.json cannot name a model_factory: the CLI's resume would go on with the default
    model, mixing two networks in one learning curve, so it refuses and says how to resume."""
    run = tmp_path / "run"
    config = LoopConfig(strategy="random", **{**FAST_LOOP, "budget": 30})

    def factory(c: LoopConfig) -> ActiveLearningLoop:
        return ActiveLearningLoop(c, model_factory=_small_net)

    run_experiment(config, run, progress=False, report=False, loop_factory=factory)
    given = json.loads((run / "given.json").read_text())
    assert given == {"model_factory": f"{__name__}._small_net"}
    before = sorted((p.name, p.read_bytes()) for p in run.rglob("*") if p.is_file())
    with pytest.raises(RunDirectoryError, match=r"run from Python with its own model_factory \(.*_small_net\)"):
        resume_experiment(run, progress=False, report=False, budget=40)
    from activebayes.cli import main

    assert main(["resume", str(run), "--budget", "40", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "resume_experiment(DIR, loop_factory=...)" in err
    assert sorted((p.name, p.read_bytes()) for p in run.rglob("*") if p.is_file()) == before
    # with the same factory it goes on, and equals a run started with the larger budget
    resumed = resume_experiment(run, progress=False, report=False, budget=40, loop_factory=factory)
    straight = run_experiment(config.replace(budget=40), tmp_path / "straight", progress=False, report=False,
                              loop_factory=factory)
    assert [r.acquired for r in resumed.rounds] == [r.acquired for r in straight.rounds]
    # a run of the config alone records nothing of the kind
    run_experiment(config, tmp_path / "plain", progress=False, report=False)
    assert not (tmp_path / "plain" / "given.json").exists()


def test_a_run_given_its_own_data_is_resumed_only_with_the_same(tmp_path):
    """resume_experiment did not compare given.json with what the loop_factory gives: without dataset=
    the loop fell back to the digits (and failed on a pool position, after raising the budget in
    config.json); another dataset went on silently, two datasets in one learning curve."""
    from activebayes.data import load_dataset

    digits = load_dataset("digits", split="train")
    mine = dataclasses.replace(digits.subset(torch.arange(600)), name="mine")
    other = dataclasses.replace(digits.subset(torch.arange(600, 1200)), name="other")
    run = tmp_path / "run"
    config = LoopConfig(strategy="random", **{**FAST_LOOP, "budget": 30})
    run_experiment(config, run, progress=False, report=False,
                   loop_factory=lambda c: ActiveLearningLoop(c, dataset=mine, model_factory=_small_net))
    before = sorted((p.name, p.read_bytes()) for p in run.rglob("*") if p.is_file())
    with pytest.raises(RunDirectoryError, match=r"was run with its own dataset \(ArrayDataset 'mine', 600 items\); "
                                               r"the loop resuming it was not given it: pass the same"):
        resume_experiment(run, progress=False, report=False, budget=40,
                          loop_factory=lambda c: ActiveLearningLoop(c, model_factory=_small_net))
    with pytest.raises(RunDirectoryError, match=r"was run on other data than the loop resuming it is given \(dataset "
                                               r"was ArrayDataset 'mine', 600 items, now ArrayDataset 'other', 600 "
                                               r"items\): resume it with the same, or start a new run$"):
        resume_experiment(run, progress=False, report=False, budget=40,
                          loop_factory=lambda c: ActiveLearningLoop(c, dataset=other, model_factory=_small_net))
    assert sorted((p.name, p.read_bytes()) for p in run.rglob("*") if p.is_file()) == before  # budget unchanged
    with pytest.warns(UserWarning, match=r"is resumed with another model_factory was .*_small_net, now .*<lambda>"):
        resume_experiment(run, progress=False, report=False, budget=40,
                          loop_factory=lambda c: ActiveLearningLoop(c, dataset=mine, model_factory=lambda g: _SmallNet()))
    assert json.loads((run / "config.json").read_text())["budget"] == 40


def test_a_comparison_with_other_settings_names_them(tmp_path):
    base = LoopConfig(**{**FAST_LOOP, "budget": 30})
    run_comparison(base, ["random"], [0], tmp_path / "c", progress=False, report=False)
    with pytest.raises(RunDirectoryError, match=r"other settings \(batch_size: 10 there, 5 now\); choose another folder "
                                                r"\(--out\)"):
        run_comparison(base.replace(batch_size=5), ["random"], [0], tmp_path / "c", progress=False, report=False)
    with pytest.raises(RunDirectoryError, match=rf"\(budget: 30 there, 50 now\); `activebayes resume {tmp_path / 'c'} "
                                                r"--budget 50` \(from Python: resume_comparison\(path, budget=50\)\) "
                                                r"continues it"):
        run_comparison(base.replace(budget=50), ["random"], [0], tmp_path / "c", progress=False, report=False)


def test_raising_the_budget_of_a_comparison(tmp_path):
    base = LoopConfig(**{**FAST_LOOP, "budget": 30})
    run_comparison(base, ["random", "entropy"], [0], tmp_path / "short", progress=False, report=False)
    resume_comparison(tmp_path / "short", progress=False, report=False, budget=50)
    run_comparison(base.replace(budget=50), ["random", "entropy"], [0], tmp_path / "long", progress=False, report=False)
    assert Comparison.read(tmp_path / "short").base == Comparison.read(tmp_path / "long").base
    for strategy in ("random", "entropy"):
        assert _without_timings(tmp_path / "short" / strategy / "seed_0") == _without_timings(
            tmp_path / "long" / strategy / "seed_0")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def test_raising_a_comparisons_budget_is_refused_while_one_of_its_runs_is_in_use(tmp_path):
    base = LoopConfig(**{**FAST_LOOP, "budget": 30})
    run_comparison(base, ["random", "entropy"], [0], tmp_path / "c", progress=False, report=False)
    before = _files(tmp_path / "c")
    with RunDirectory(tmp_path / "c" / "entropy" / "seed_0").lock():  # another process runs it
        with pytest.raises(RunDirectoryError, match=r"entropy/seed_0 is in use by another process"):
            resume_comparison(tmp_path / "c", progress=False, report=False, budget=50)
    assert _files(tmp_path / "c") == before  # no run raised, not even the free one
    with Comparison.read(tmp_path / "c").lock(shared=True):  # another process runs the comparison
        with pytest.raises(RunDirectoryError, match=r"c is in use by another process \(it holds comparison.lock\)"):
            resume_comparison(tmp_path / "c", progress=False, report=False, budget=50)
    assert _files(tmp_path / "c") == before
    resume_comparison(tmp_path / "c", progress=False, report=False, budget=50)  # released: raised
    assert Comparison.read(tmp_path / "c").base.budget == 50
    for strategy in ("random", "entropy"):
        assert RunDirectory(tmp_path / "c" / strategy / "seed_0").read_summary()["n_labelled"] == 50


def test_a_comparison_adds_strategies_whatever_its_first_one(tmp_path):
    base = LoopConfig(**{**FAST_LOOP, "budget": 30})
    run_comparison(base, ["random"], [0], tmp_path / "c", progress=False, report=False)
    results = run_comparison(base.replace(strategy="entropy"), ["entropy"], [0], tmp_path / "c",
                             progress=False, report=False)
    assert set(results) == {("random", 0), ("entropy", 0)}
    assert Comparison.read(tmp_path / "c").strategies == ("random", "entropy")


def test_warm_start_resume_uses_the_checkpoint(tmp_path):
    config = LoopConfig(strategy="bald", warm_start=True, **FAST_LOOP)
    full = tmp_path / "full"
    run_experiment(config, full, progress=False, report=False)
    partial = tmp_path / "partial"
    (partial / "checkpoints").mkdir(parents=True)
    (partial / "config.json").write_text((full / "config.json").read_text())
    lines = (full / "rounds.jsonl").read_text().splitlines(keepends=True)
    (partial / "rounds.jsonl").write_text("".join(lines[:3]))
    # the checkpoint of round 2 is the one the full run kept
    (partial / "checkpoints" / "round_0002.pt").write_bytes((full / "checkpoints" / "round_0002.pt").read_bytes())
    resume_experiment(partial, progress=False, report=False)
    assert _without_timings(partial) == _without_timings(full)


def test_a_warm_start_checkpoint_missing_or_damaged_refuses_a_larger_budget_before_any_change(tmp_path):
    """``resume --budget`` raised config.json and dropped the last round, then failed on the
    missing checkpoint (a damaged one: a torch traceback): the run was changed by a failed command."""
    config = LoopConfig(strategy="bald", warm_start=True, **{**FAST_LOOP, "budget": 40})
    run = tmp_path / "run"
    run_experiment(config, run, progress=False, report=False)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != "run.lock"}
    kept = RunDirectory(run).read_rounds()[-2].round  # the round a larger budget goes on from
    checkpoint = run / "checkpoints" / f"round_{kept:04d}.pt"
    good = checkpoint.read_bytes()
    checkpoint.unlink()
    with pytest.raises(RunDirectoryError, match=rf"warm-start run has no checkpoint for round {kept} "
                                                rf"\(round_{kept:04d}\.pt\), which it goes on from"):
        resume_experiment(run, progress=False, report=False, budget=60)
    checkpoint.write_bytes(good[: len(good) // 2])
    with pytest.raises(RunDirectoryError, match=rf"round_{kept:04d}\.pt: not a readable checkpoint \(.*\); the "
                                                "file is damaged"):
        resume_experiment(run, progress=False, report=False, budget=60)
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != "run.lock"} == before
    checkpoint.write_bytes(good)
    assert resume_experiment(run, progress=False, report=False, budget=60).rounds[-1].n_labelled == 60


def test_sigkill_mid_run_then_resume_is_identical(tmp_path):
    """A real subprocess killed with SIGKILL mid-run resumes to the uninterrupted result."""
    config = {**FAST_LOOP, "budget": 70, "strategy": "bald", "cold_start": "none"}  # TOML has no null
    toml = "\n".join(
        [f"{k} = {json.dumps(v)}" for k, v in config.items() if k != "fit_options"]
        + ["[fit_options]"] + [f"{k} = {v}" for k, v in FAST_LOOP["fit_options"].items()]
    )
    config_file = tmp_path / "config.toml"
    config_file.write_text(toml + "\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, "-m", "activebayes", "run", "--config", str(config_file), "--quiet"]

    reference = tmp_path / "reference"
    subprocess.run([*command, "--out", str(reference)], check=True, env=env, capture_output=True, timeout=300)

    killed = tmp_path / "killed"
    process = subprocess.Popen([*command, "--out", str(killed)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    rounds = killed / "rounds.jsonl"
    while time.monotonic() < deadline:
        if rounds.is_file() and len(rounds.read_text().splitlines()) >= 2:
            break
        if process.poll() is not None:
            pytest.fail("the run finished before it could be killed")
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    done_before = len(rounds.read_text().splitlines())
    assert not (killed / "summary.json").exists() and done_before < 6

    subprocess.run([sys.executable, "-m", "activebayes", "resume", str(killed), "--quiet"],
                   check=True, env=env, capture_output=True, timeout=300)
    assert _without_timings(killed) == _without_timings(reference)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary == {**json.loads((reference / "summary.json").read_text()), "seconds": summary["seconds"]}


def test_comparison_runs_every_pair_and_resumes(tmp_path):
    base = LoopConfig(**{**FAST_LOOP, "budget": 30})
    out = tmp_path / "cmp"
    results = run_comparison(base, ["random", "bald"], [0, 1], out, progress=False, report=False)
    assert set(results) == {("random", 0), ("random", 1), ("bald", 0), ("bald", 1)}
    comparison = Comparison.read(out)
    assert comparison.strategies == ("random", "bald") and comparison.seeds == (0, 1)
    runs = load_runs(out)
    assert set(runs) == set(results)
    for (strategy, seed), (config, rounds) in runs.items():
        assert config.strategy == strategy and config.seed == seed
        assert (out / strategy / f"seed_{seed}" / "summary.json").is_file()
        assert [r.acquired for r in rounds] == [r.acquired for r in results[(strategy, seed)].rounds]
    with pytest.raises(ValueError, match="unknown .*strategy"):
        run_comparison(base, ["bald", "nope"], [0], tmp_path / "bad", progress=False, report=False)
    assert not (tmp_path / "bad").exists()


def test_corrupt_run_directory_errors(tmp_path):
    with pytest.raises(RunDirectoryError, match="not a run directory"):
        resume_experiment(tmp_path, progress=False)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(RunDirectoryError, match="not a valid config"):
        RunDirectory(tmp_path).read_config()


def test_a_run_directory_pins_the_representation_recipe_it_was_made_with(tmp_path):
    """The stored config writes out the encoder's recipe: a later change of
    RepresentationConfig's defaults is refused on resume instead of silently changing the run."""
    import dataclasses

    from activebayes.models.representation import RepresentationConfig

    config = LoopConfig(dataset="digits", representation="self-supervised", representation_options={"epochs": 3})
    directory = RunDirectory(tmp_path / "run")
    directory.write_config(config)
    stored = json.loads((tmp_path / "run" / "config.json").read_text())["representation_options"]
    assert stored == RepresentationConfig(epochs=3).to_dict()  # every field, not just the one given
    directory.check_config(config)  # the same run, written out or not
    directory.check_config(dataclasses.replace(config, representation_options=stored))
    # a directory made when the default was another: the unset option no longer means the same
    old = RunDirectory(tmp_path / "old")
    old.write_config(dataclasses.replace(config, representation_options={"epochs": 50}))
    with pytest.raises(RunDirectoryError, match="representation_options.*'epochs': 50.*'epochs': 150"):
        old.check_config(dataclasses.replace(config, representation_options={}))
    # no representation: nothing to write out
    plain = LoopConfig(dataset="digits")
    assert plain.pinned() is plain and plain.pinned().representation_options == {}
