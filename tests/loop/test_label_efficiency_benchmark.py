"""benchmarks/label_efficiency.py: parallel runs equal sequential ones; the summary
agrees with the run directories it reads; ablation caches find their base."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture()
def bench(monkeypatch, tmp_path):
    # importable by name, so that spawned worker processes can unpickle `_run_one`
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import label_efficiency as module

    from activebayes.loop import LoopConfig

    def small_protocol(dataset, data_dir):
        assert dataset == "digits"
        return LoopConfig(dataset="digits", model="mlp", initial="balanced", initial_size=20,
                          validation_size=100, batch_size=10, budget=40, num_samples=30,
                          eval_samples=10, checkpoints=False)

    monkeypatch.setattr(module, "protocol", small_protocol)
    monkeypatch.setattr(module, "RESULTS_JSON", tmp_path / "label_efficiency.json")
    monkeypatch.setattr(module, "FIGURES", tmp_path / "figures")
    docs = tmp_path / "benchmarks.md"
    docs.write_text(f"# head\n\n{module.BEGIN}\nold tables\n{module.END}\n\n# tail\n")
    monkeypatch.setattr(module, "DOCS", docs)
    return module


def _records(run_dir: Path) -> list[dict]:
    # through the run-directory reader: the benchmark leaves its runs compressed (rounds.jsonl.xz)
    from activebayes.rundir import RunDirectory

    return [r.to_dict() for r in RunDirectory(run_dir).read_rounds()]


def _first_reach(n_labelled, accuracy, target):
    # independent of activebayes.analysis: the first round at or above the target
    return next((n for n, a in zip(n_labelled, accuracy) if a >= target), None)


@pytest.mark.slow
def test_parallel_runs_equal_sequential_runs_and_summary_matches(bench, tmp_path, monkeypatch):
    argv = ["--dataset", "digits", "--strategies", "random,bald", "--seeds", "0", "--threads", "1", "--quiet"]
    for jobs, folder in ((2, "parallel"), (1, "sequential")):
        monkeypatch.setattr(bench, "RUNS", tmp_path / folder)
        bench.run(bench.build_parser().parse_args([*argv, "--jobs", str(jobs)]))

    for strategy in ("random", "bald"):
        parallel = _records(tmp_path / "parallel" / "digits" / strategy / "seed_0")
        sequential = _records(tmp_path / "sequential" / "digits" / strategy / "seed_0")
        assert [r["n_labelled"] for r in parallel] == [20, 30, 40]
        assert [r["acquired"] for r in parallel] == [r["acquired"] for r in sequential]
        assert [r["metrics"]["test_accuracy"] for r in parallel] == [r["metrics"]["test_accuracy"] for r in sequential]

    # finished runs are skipped: a second call starts nothing and changes nothing
    monkeypatch.setattr(bench, "RUNS", tmp_path / "parallel")
    stored = tmp_path / "parallel" / "digits" / "bald" / "seed_0" / "rounds.jsonl.xz"  # left in the committed form
    before = stored.read_bytes()
    _, _, todo = bench._grid(bench.build_parser().parse_args([*argv, "--jobs", "2"]))
    assert todo == []
    assert stored.read_bytes() == before

    results = bench.summarise()
    stored = json.loads(bench.RESULTS_JSON.read_text())
    assert stored["datasets"] == json.loads(json.dumps(results["datasets"]))
    for strategy in ("random", "bald"):
        records = _records(tmp_path / "parallel" / "digits" / strategy / "seed_0")
        n_R = [r["n_labelled"] for r in records]
        acc_R = [r["metrics"]["test_accuracy"] for r in records]
        entry = stored["datasets"]["digits"][strategy]
        assert entry["learning_curves"] == [{"seed": 0, "n_labelled": n_R, "test_accuracy": acc_R}]
        assert entry["labels_to_90"] == [_first_reach(n_R, acc_R, 0.9)]
        assert entry["labels_to_95"] == [_first_reach(n_R, acc_R, 0.95)]
        assert entry["device"] is None and entry["model"] == "mlp"
    docs = bench.DOCS.read_text()
    assert "old tables" not in docs and docs.startswith("# head") and docs.rstrip().endswith("# tail")
    assert "| bald | 1 |" in docs and "device: `cpu`" in docs
    assert (bench.FIGURES / "label_efficiency_digits.png").stat().st_size > 0


def test_a_second_invocation_on_the_same_comparison_leaves_the_others_runs_alone(bench, tmp_path, monkeypatch):
    """Two processes sharing a comparison (seeds split between them): one finishing does not
    touch the run the other is writing (it compacted every run of the comparison, and the
    other's lock made it fail)."""
    from activebayes.rundir import RunDirectory

    monkeypatch.setattr(bench, "RUNS", tmp_path / "runs")
    argv = ["--dataset", "digits", "--strategies", "random", "--threads", "1", "--quiet"]
    bench.run(bench.build_parser().parse_args([*argv, "--seeds", "1"]))
    other = RunDirectory(tmp_path / "runs" / "digits" / "random" / "seed_1")
    with other.lock():  # as if another process still wrote it
        bench.run(bench.build_parser().parse_args([*argv, "--seeds", "0"]))
    assert RunDirectory(tmp_path / "runs" / "digits" / "random" / "seed_0").is_finished()


@pytest.mark.slow
def test_parallel_runs_with_a_representation_train_each_encoder_once_first(bench, tmp_path, monkeypatch, capsys):
    # a tiny encoder (1 epoch) on digits; the cache of encoders is the test's own folder
    small = bench.protocol("digits", None)
    monkeypatch.setattr(bench, "protocol", lambda dataset, data_dir: small.replace(
        representation_options={"epochs": 1, "batch_size": 128, "width": 8, "feature_dim": 16}))
    monkeypatch.setenv("ACTIVEBAYES_CACHE_DIR", str(tmp_path / "cache"))
    argv = ["--dataset", "digits", "--representation", "self-supervised", "--strategies", "random,bald",
            "--seeds", "0,1", "--threads", "1", "--quiet"]
    for jobs, folder in ((2, "parallel"), (1, "sequential")):
        monkeypatch.setattr(bench, "RUNS", tmp_path / folder)
        bench.run(bench.build_parser().parse_args([*argv, "--jobs", str(jobs)]))
    out = capsys.readouterr().out
    # one encoder per seed, trained before the runs that share it, each trained exactly once
    assert sorted(line.split(": ")[0] for line in out.splitlines() if "encoder for seed" in line) == [
        "digits-ssl encoder for seed 0", "digits-ssl encoder for seed 1"]
    assert out.count(": trained in") == 2
    assert len(list((tmp_path / "cache" / "representations").glob("*.pt"))) == 2
    for strategy in ("random", "bald"):
        for seed in (0, 1):
            parallel = _records(tmp_path / "parallel" / "digits-ssl" / strategy / f"seed_{seed}")
            sequential = _records(tmp_path / "sequential" / "digits-ssl" / strategy / f"seed_{seed}")
            assert [r["acquired"] for r in parallel] == [r["acquired"] for r in sequential]


def test_variant_caches_find_the_protocol_they_vary(bench):
    names = ["digits", "digits-k20", "mnist", "mnist-gal_cnn", "mnist-gal_cnn-k20"]
    assert bench._variant_base("digits-k20", names) == "digits"
    assert bench._variant_base("mnist-gal_cnn", names) == "mnist"
    assert bench._variant_base("mnist-gal_cnn-k20", names) == "mnist-gal_cnn"
    assert bench._variant_base("mnist", names) is None
    assert bench._variant_base("digits", names) is None


def test_unknown_dataset_is_a_clear_error():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import label_efficiency as module
    finally:
        sys.path.remove(str(BENCHMARKS))
    with pytest.raises(SystemExit, match="unknown --dataset 'cifar'"):
        module.protocol("cifar", None)


def test_rounds_below_random_counts_gaps_beyond_the_seed_spread(bench):
    def curves(rows):  # rows: per seed, accuracies at 20, 30, 40 labels
        return {"learning_curves": [{"seed": s, "n_labelled": [20, 30, 40], "test_accuracy": acc}
                                    for s, acc in enumerate(rows)]}

    entries = {
        "random": curves([[0.50, 0.60, 0.70], [0.52, 0.62, 0.72], [0.48, 0.58, 0.68]]),  # sd 0.02
        # 30 labels: 0.10 below random's mean (beyond the spread); 40 labels: 0.01 below (within it)
        "bald": curves([[0.50, 0.50, 0.69], [0.52, 0.52, 0.71], [0.48, 0.48, 0.67]]),
        "noisy": curves([[0.30, 0.60, 0.70], [0.70, 0.62, 0.72], [0.50, 0.58, 0.68]]),  # sd 0.2 at 20
    }
    bench._rounds_below_random(entries)
    assert entries["random"]["rounds_below_random"] == []
    assert entries["bald"]["rounds_below_random"] == [30]
    assert entries["noisy"]["rounds_below_random"] == []
    assert bench._below(entries["bald"]) == "1 (at 30 labels)"


def test_rounds_below_random_compares_the_seeds_both_have(bench):
    def curve(seed, acc):
        return {"seed": seed, "n_labelled": [20, 30], "test_accuracy": acc}

    # random's seeds 2-5 start higher: against all six seeds (mean 0.57, sd 0.047), the
    # strategy's seeds 0-1 would look below random where they equal random's own seeds 0-1
    random = {"learning_curves": [curve(0, [0.50, 0.60]), curve(1, [0.52, 0.62]),
                                  *(curve(seed, [0.60, 0.70]) for seed in range(2, 6))]}
    strategy = {"learning_curves": [curve(0, [0.50, 0.61]), curve(1, [0.52, 0.63])]}
    entries = {"typicality": strategy}
    bench._rounds_below_random(entries, random)
    assert strategy["rounds_below_random"] == []
    strategy["learning_curves"] = [curve(0, [0.50, 0.40]), curve(1, [0.52, 0.42])]
    bench._rounds_below_random(entries, random)
    assert strategy["rounds_below_random"] == [30]
    assert bench._below(strategy) == "1 (at 30 labels)"


def test_variant_caches_are_named_by_what_they_change(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "RUNS", tmp_path / "runs")
    parse = bench.build_parser().parse_args
    name, comparison, todo = bench._grid(parse(["--dataset", "digits", "--strategies", "bald", "--seeds", "0",
                                                "--cold-start", "typicality", "--cold-start-labels", "30"]))
    assert name == "digits-cold-typicality30" and len(todo) == 1
    assert (comparison.base.cold_start, comparison.base.cold_start_labels) == ("typicality", 30)
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "bald", "--seeds", "0",
                                             "--representation", "self-supervised"]))
    assert name == "digits-ssl"
    assert comparison.base.representation == "self-supervised" and comparison.base.model == "encoder_head"
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "bald", "--seeds", "0",
                                             "--representation", "self-supervised", "--encoder-epochs", "150"]))
    assert name == "digits-ssl-e150" and comparison.base.representation_options == {"epochs": 150}
    assert bench._variant_base("digits-ssl-cold-typicality30", ["digits", "digits-ssl"]) == "digits-ssl"
    # another subsample of the pool to score, named before the cold start's suffix; 0 (the whole
    # pool) is this protocol's own setting, so no variant
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0",
                                             "--pool-subsample", "500", "--cold-start", "typicality",
                                             "--cold-start-labels", "30"]))
    assert name == "digits-ps500-cold-typicality30" and comparison.base.pool_subsample == 500
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0",
                                             "--pool-subsample", "0"]))
    assert name == "digits" and comparison.base.pool_subsample is None
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0",
                                             "--posterior", "laplace", "--cold-start", "typicality"]))
    assert name == "digits-laplace-cold-typicality100" and comparison.base.posterior == "laplace"
    # a longer (or shorter) budget, named before the cold start's suffix; the protocol's own, no variant
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0",
                                             "--budget", "400", "--cold-start", "typicality"]))
    assert name == "digits-budget400-cold-typicality100" and comparison.base.budget == 400
    name, _, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0", "--budget", "40"]))
    assert name == "digits"
    # another batch size, named before the cold start's suffix; the protocol's own (10), no variant
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0",
                                             "--batch-size", "5", "--cold-start", "typicality"]))
    assert name == "digits-b5-cold-typicality100" and comparison.base.batch_size == 5
    name, comparison, _ = bench._grid(parse(["--dataset", "digits", "--strategies", "badge", "--seeds", "0",
                                             "--batch-size", "10"]))
    assert name == "digits" and comparison.base.batch_size == 10


def test_a_bad_flag_value_is_a_one_line_error_before_anything_is_written(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "RUNS", tmp_path / "runs")
    for argv, message in [(["--pool-subsample", "-5"], "--pool-subsample must be >= 0 (0: the whole pool), got -5"),
                          (["--num-samples", "0"], "num_samples (--num-samples) must be >= 1, got 0"),
                          (["--budget", "10"], "--budget must exceed the protocol's 20 initial labels, got 10"),
                          (["--batch-size", "0"], "--batch-size must be >= 1, got 0")]:
        monkeypatch.setattr(sys, "argv", ["label_efficiency.py", "--strategies", "random", "--seeds", "0", *argv])
        with pytest.raises(SystemExit, match="^error: " + re.escape(message)):
            bench.main()
    assert not (tmp_path / "runs").exists()


def test_seeds_take_lists_and_ranges_and_a_bad_one_is_argparses_one_line_error(bench, tmp_path, monkeypatch, capsys):
    assert bench.seeds_arg("0,1,2") == [0, 1, 2] and bench.seeds_arg("0-2,7") == [0, 1, 2, 7]
    monkeypatch.setattr(bench, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(sys, "argv", ["label_efficiency.py", "--strategies", "random", "--seeds", "0-x"])
    with pytest.raises(SystemExit):
        bench.main()
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "error: argument --seeds: expected seeds like 0,1,2 or 0-5, got '0-x'")
    assert not (tmp_path / "runs").exists()


def test_a_variant_without_random_is_drawn_beside_its_base_random(bench):
    def entry(*seeds):
        return {"learning_curves": [{"seed": s, "n_labelled": [20, 30], "test_accuracy": [0.5 + s / 100, 0.6]}
                                    for s in seeds]}

    datasets = {"mnist": {"random": entry(0, 1, 2, 3), "bald": entry(0, 1, 2, 3)},
                "mnist-cold-typicality60": {"power_bald": entry(0, 1)},
                "mnist-k20": {"random": entry(0, 1), "bald": entry(0, 1)}}
    curves = bench._plotted_curves("mnist-cold-typicality60", datasets)
    assert sorted(curves) == ["power_bald", "random (mnist)"]
    # like with like: only the seeds the variant has
    assert [acc[0] for _, acc in curves["random (mnist)"]] == [0.50, 0.51]
    # a variant with its own random, and a protocol, are drawn as they are
    assert sorted(bench._plotted_curves("mnist-k20", datasets)) == ["bald", "random"]
    assert sorted(bench._plotted_curves("mnist", datasets)) == ["bald", "random"]


def test_a_longer_budget_is_not_tabled_as_an_ablation_of_its_protocol(bench):
    """An ablation table compares AULCs over the same labels; a --budget variant's AULC spans
    others, so it gets its own section only."""
    def entry(budget):
        return {"model": "mlp", "seeds": [0], "learning_curves": [{"seed": 0, "n_labelled": [20, budget],
                                                     "test_accuracy": [0.5, 0.9]}]}

    datasets = {"digits": {"random": entry(200)}, "digits-k20": {"random": entry(200)},
                "digits-budget400": {"random": entry(400)}}
    headers = [line for line in bench._variant_tables(datasets) if line.startswith("### ")]
    assert headers == ["### digits vs digits-k20 (same settings)\n"]
