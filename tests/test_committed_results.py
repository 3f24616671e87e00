"""What a clone carries: a small checkout, and benchmark results kept compact but complete.

``benchmarks/results/label_efficiency_runs`` holds every run of the label-efficiency
benchmark in the committed form (xz-compressed records, the bulky per-class and
per-bin metrics in each run's last round only; see ``benchmarks/label_efficiency.py``).
The tests here check that a checkout stays small, that the committed runs are all in
that form, that ``--summarise`` reproduces the committed numbers and tables from them,
and that a run resumes from the compact form exactly as from the plain one.
``benchmarks/results/stopping_runs`` does the same for ``benchmarks/stopping.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import lzma
import json
import re
import subprocess
from pathlib import Path

import pytest

from activebayes.experiment import resume_experiment, run_experiment
from activebayes.loop import LoopConfig
from activebayes.rundir import RunDirectory, load_runs
from tests.conftest import FAST_LOOP, ROOT

#: the committed benchmark runs are most of it (15.3 MB for 734 label-efficiency runs, 4.0 MB
#: for 132 stopping runs, 1.3 MB for 108 posterior runs, compacted and xz-compressed; a run to
#: 2,048 labels takes about 60-100 kB); a model file, a cache or an uncompressed run would
#: blow through this
MAX_CHECKOUT_BYTES = 28_000_000
RESULTS = ROOT / "benchmarks" / "results"
RUNS = RESULTS / "label_efficiency_runs"


def _tracked_files() -> list[Path]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / name for name in listing.decode().split("\0") if name]


def _generated_block(page: Path, begin: str, end: str) -> str:
    """The text ``page`` holds between its ``begin`` and ``end`` markers (each there once)."""
    text = page.read_text()
    assert text.count(begin) == 1 and text.count(end) == 1, f"{page}: {begin} / {end} must be there once each"
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_a_checkout_stays_under_its_size_limit():
    """The files a clone puts on disk (``.git`` aside): what ``git ls-files | xargs du -cb`` adds up."""
    files = [f for f in _tracked_files() if f.is_file()]
    total = sum(f.stat().st_size for f in files)
    largest = sorted(files, key=lambda f: f.stat().st_size, reverse=True)[:5]
    assert total < MAX_CHECKOUT_BYTES, (
        f"tracked files take {total / 1e6:.2f} MB (limit {MAX_CHECKOUT_BYTES / 1e6:.0f} MB); largest: "
        + ", ".join(f"{f.relative_to(ROOT)} ({f.stat().st_size / 1e6:.2f} MB)" for f in largest)
    )


def test_committed_runs_are_in_the_compact_form():
    """Every run keeps compressed records; only the last round of a run has the per-class lists."""
    tracked = {f.relative_to(ROOT).as_posix() for f in _tracked_files()}
    plain = sorted(name for name in tracked if name.startswith("benchmarks/results/")
                   and name.endswith(("/rounds.jsonl", "/summary.json")))
    assert not plain, f"plain records committed (run `python benchmarks/label_efficiency.py --compact`): {plain[:5]}"
    runs = sorted(RUNS.glob("*/*/seed_*/config.json"))
    assert len(runs) > 100  # the scan sees the committed runs
    for config in runs:
        _compact_records(config.parent)


def _compact_records(run_dir: Path) -> list[dict]:
    """A committed run's rounds, checked to be in the compact form: xz-compressed, and the
    per-class lists in the last round only."""
    rounds = run_dir / "rounds.jsonl.xz"
    assert rounds.is_file() and not (run_dir / "rounds.jsonl").exists(), f"{run_dir} has no rounds.jsonl.xz alone"
    records = [json.loads(line) for line in lzma.decompress(rounds.read_bytes()).decode().splitlines()]
    lists = [i for i, r in enumerate(records) if any(isinstance(v, list | dict) for v in r["metrics"].values())]
    assert lists == [len(records) - 1], f"{rounds}: per-class metrics in rounds {lists}"
    return records


@pytest.fixture()
def bench(monkeypatch, tmp_path):
    """benchmarks/label_efficiency.py, writing its outputs (JSON, docs, figures) to ``tmp_path``."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import label_efficiency as module

    monkeypatch.setattr(module, "RESULTS_JSON", tmp_path / "label_efficiency.json")
    monkeypatch.setattr(module, "FIGURES", tmp_path / "figures")
    docs = tmp_path / "benchmarks.md"
    docs.write_text(module.DOCS.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(module, "DOCS", docs)
    monkeypatch.setattr(module, "_plot", lambda dataset, curves: None)  # the numbers, not the pictures
    return module


def _tables(text: str, bench) -> str:
    """The generated block of the benchmarks page, without the date it was generated on."""
    block = text.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    return re.sub(r"on \d{4}-\d{2}-\d{2}\._", "on DATE._", block)


def test_summarise_reproduces_the_committed_numbers_and_tables(bench):
    """``--summarise`` on the committed (compact) runs gives label_efficiency.json and the tables
    of docs/benchmarks.md exactly as committed, the date of generation aside."""
    committed = json.loads((RESULTS / "label_efficiency.json").read_text(encoding="utf-8"))
    committed_docs = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    with contextlib.redirect_stdout(io.StringIO()):
        bench.summarise()
    results = json.loads(bench.RESULTS_JSON.read_text(encoding="utf-8"))
    assert results["datasets"].keys() == committed["datasets"].keys() and len(committed["datasets"]) >= 10
    for key in ("datasets", "in_progress", "partial_curves"):
        assert results.get(key) == committed.get(key), key
    assert _tables(bench.DOCS.read_text(encoding="utf-8"), bench) == _tables(committed_docs, bench)
    assert not list(RUNS.rglob("rounds.jsonl"))  # summarising only reads


def _without_timings(records) -> list[dict]:
    rows = [r.to_dict() for r in records]
    for row in rows:
        row.pop("seconds")
    return rows


def test_a_compact_run_reads_and_resumes_as_the_plain_one(tmp_path, monkeypatch):
    """Cut a finished run back to two rounds, compact it as the benchmark does: it resumes to the
    same records as the uninterrupted run, and stays compact."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import label_efficiency

    config = LoopConfig(strategy="bald", **FAST_LOOP)
    full, cut = RunDirectory(tmp_path / "full"), RunDirectory(tmp_path / "cut")
    run_experiment(config, full.path, progress=False, report=False)
    cut.write_config(config)
    cut.write_rounds(full.read_rounds()[:2])
    assert label_efficiency.compact(cut.path) and not label_efficiency.compact(cut.path)  # idempotent
    assert sorted(p.name for p in cut.path.iterdir()) == ["config.json", "rounds.jsonl.xz", "run.lock"]
    assert [r.n_labelled for r in cut.read_rounds()] == [20, 30] and not cut.is_finished()
    resume_experiment(cut.path, progress=False, report=False)
    assert cut.rounds_path.name == "rounds.jsonl.xz" and cut.summary_path.name == "summary.json.xz"
    assert cut.is_finished() and not (cut.path / "rounds.jsonl").exists()
    records = cut.read_rounds()
    has_lists = [any(isinstance(v, list | dict) for v in r.metrics.values()) for r in records]
    assert has_lists == [False] + [True] * (len(records) - 1)  # the last kept round and the resumed ones whole
    expected, got = _without_timings(full.read_rounds()), _without_timings(records)
    expected[0]["metrics"] = {k: v for k, v in expected[0]["metrics"].items() if not isinstance(v, list | dict)}
    assert got == expected
    summary = cut.read_summary()
    assert summary["labelled_indices"] == full.read_summary()["labelled_indices"]
    assert load_runs(cut.path)[("bald", config.seed)][1] == records
    # compacting the finished run keeps the last round whole, the others' scalars
    label_efficiency.compact(cut.path)
    final = cut.read_rounds()
    assert final[-1].metrics == full.read_rounds()[-1].metrics
    assert all(not isinstance(v, list | dict) for r in final[:-1] for v in r.metrics.values())



def test_records_of_earlier_versions_in_gzip_read_the_same_and_compress_to_xz(tmp_path):
    """Run directories written compressed by earlier versions (``.gz``) read as the plain ones;
    ``compress`` rewrites them as ``.xz`` with the same text."""
    import gzip

    config = LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 30})
    run = RunDirectory(tmp_path / "run")
    run_experiment(config, run.path, progress=False, report=False)
    plain = {name: (run.path / name).read_text() for name in ("rounds.jsonl", "summary.json")}
    records = run.read_rounds()
    for name, text in plain.items():
        (run.path / (name + ".gz")).write_bytes(gzip.compress(text.encode()))
        (run.path / name).unlink()
    assert run.rounds_path.name == "rounds.jsonl.gz" and run.read_rounds() == records and run.is_finished()
    assert run.compress() and not run.compress()
    assert sorted(p.name for p in run.path.glob("*.*z")) == ["rounds.jsonl.xz", "summary.json.xz"]
    for name, text in plain.items():
        assert lzma.decompress((run.path / (name + ".xz")).read_bytes()).decode() == text
    assert run.read_rounds() == records


@pytest.mark.xdist_group("stopping-summary")  # scheduled first (tests/conftest.py): a minute or two alone, not at the tail
def test_the_stopping_summary_is_rebuilt_from_the_committed_stopping_runs(monkeypatch):
    """``benchmarks/results/stopping_runs`` holds every run ``stopping.json`` summarises, compact
    (xz, per-class metrics in the last round only) but with every trained round's stop-set
    predictions, which the remaining change is judged again from: summarising them gives the
    committed ``stopping.json`` exactly, so no number there comes from a run outside the repo."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping as benchmark

    committed = json.loads((RESULTS / "stopping.json").read_text())
    configs = sorted(benchmark.RUNS.glob("*/seed_*/config.json"))
    kept = {name: p for name, p in committed["protocols"].items() if p["runs_kept"]}
    assert len(configs) == sum(p["seeds"] for p in kept.values()) >= 40
    assert {c.parent.parent.name for c in configs} == set(kept)
    for config in configs:
        records = _compact_records(config.parent)
        stable = [(r.get("signals") or {}).get("stable_predictions") or {} for r in records]
        assert all(s.get("predictions") for s in stable if s.get("trained")), f"{config.parent}: predictions dropped"
    assert benchmark.summarise(write=False) == committed


def test_the_stopping_tables_in_the_docs_are_the_committed_summary(monkeypatch):
    """docs/benchmarks.md's stopping tables, and the concepts page's short one, are generated from ``stopping.json``
    (``benchmarks/stopping.py --summarise``): a number edited by hand, or a summary committed
    without its tables, fails here."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping as benchmark

    summary = json.loads((RESULTS / "stopping.json").read_text())
    block = _generated_block(ROOT / "docs" / "benchmarks.md", benchmark.BEGIN, benchmark.END)
    assert block.strip() == benchmark.markdown(summary).strip()
    short = _generated_block(ROOT / "docs" / "concepts" / "stopping.md", benchmark.CONCEPTS_BEGIN,
                             benchmark.CONCEPTS_END)
    assert short.strip() == benchmark.concepts_table(summary).strip()
    # the overview row of every protocol, with the recommended criterion's counts
    for name, data in summary["protocols"].items():
        row = data["criteria"][benchmark.RECOMMENDED]
        assert f"| {benchmark._name(name, data)} | {data['seeds']} | {row['met_goal']} |" in block


def test_a_run_being_written_is_refused_to_a_second_writer_and_left_alone_by_compact(tmp_path, bench, capsys):
    """``run.lock``: while one process holds a run, running or resuming it again, or compacting
    its records, is refused (compact_all skips it) instead of interleaving their writes."""
    from activebayes.rundir import Comparison, RunDirectoryError

    config = LoopConfig(**{**FAST_LOOP, "budget": FAST_LOOP["initial_size"] + 2 * FAST_LOOP["batch_size"]})
    comparison = Comparison(tmp_path / "comparison", config, ("random",), (0,))
    comparison.write()
    run_dir = comparison.run_dir("random", 0)
    run_experiment(config.replace(strategy="random", seed=0, budget=config.budget - config.batch_size), run_dir,
                   progress=False, report=False)
    before = sorted(p.name for p in run_dir.iterdir())
    with RunDirectory(run_dir).lock():
        with pytest.raises(RunDirectoryError, match="is in use by another process"):
            resume_experiment(run_dir, progress=False, report=False, budget=config.budget)
        with pytest.raises(RunDirectoryError, match="is in use by another process"):
            bench.compact(run_dir)
        assert bench.compact_all(tmp_path) == 0 and "skipped:" in capsys.readouterr().err
        assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing rewritten
    assert bench.compact(run_dir)  # released: compacts
    result = resume_experiment(run_dir, progress=False, report=False, budget=config.budget)
    assert result.rounds[-1].n_labelled == config.budget


def test_text_and_multilabel_tables_shorten_a_long_list_of_rounds_below_random(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import text_multilabel_summary as summary

    def entry(below):
        return {"seeds": [0, 1], "median_labels": {"0.5": 100.0, "0.6": None}, "aulc_mean": 0.5, "aulc_std": 0.01,
                "final_mean": 0.6, "rounds_below_random": below}

    result = {"metric": "test_accuracy", "targets": [0.5, 0.6],
              "strategies": {"bald": entry(list(range(72, 2049, 20))), "margin": entry([412, 432]),
                             "badge": entry([])}}
    rows = {line.split(" | ")[0].strip("| "): line for line in summary.markdown("t", result).splitlines()[4:]}
    assert rows["bald"].endswith("| 99 rounds (72–2032) |")
    assert rows["margin"].endswith("| 412, 432 |") and rows["badge"].endswith("| none |")
    assert "| 100 | not reached |" in rows["bald"]


def test_text_and_multilabel_summary_reproduces_the_committed_numbers_and_the_guide(monkeypatch):
    """``benchmarks/text_multilabel_summary.py`` rebuilds every committed task of
    ``text_multilabel.json`` from the run directories, and every ``mean ± sd`` AULC the text
    and tables guide quotes is one of them (a hand-edited or stale number fails)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import text_multilabel_summary as summary

    committed = json.loads((RESULTS / "text_multilabel.json").read_text())
    assert {"wordnet_nouns", "mnist_pairs", "mnist_pairs-batchbald_cnn"} <= set(committed)
    quoted_by_json = set()
    for task, entry in committed.items():
        fresh = json.loads(json.dumps(summary.summarise_task(task)))  # JSON's own floats and keys
        assert fresh == entry, task
        quoted_by_json |= {f"{s['aulc_mean']:.4f} ± {s['aulc_std']:.4f}" for s in entry["strategies"].values()}
    # the text model trained from token ids (benchmarks/text_from_scratch.py) is quoted there too
    # and so are the models given as a model_factory (text_from_scratch.py, pairs_set_cnn.py)
    for name in ("text_from_scratch.json", "pairs_set_cnn.json"):
        scratch = json.loads((RESULTS / name).read_text())
        quoted_by_json |= {f"{s['aulc_mean']:.4f} ± {s['aulc_std']:.4f}" for s in scratch["strategies"].values()}
    guide = (ROOT / "docs" / "guides" / "text-and-tables.md").read_text()
    quoted = re.findall(r"\b0\.\d{4} ± 0\.\d{4}\b", guide)
    assert len(quoted) >= 15 and set(quoted) <= quoted_by_json, set(quoted) - quoted_by_json


def test_text_and_multilabel_summary_pairs_a_training_variant_with_its_own_cold_start_runs(monkeypatch, tmp_path):
    """``label_efficiency.py`` names a cold start before its ``-training-<T>`` suffix
    (``<task>-cold-<S><N>-training-paper``): the summary of ``<task>-training-paper`` finds
    those runs as its ``<S>-then-<strategy>`` rows, and no other task's."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import text_multilabel_summary as summary

    runs = ROOT / "benchmarks" / "results" / "label_efficiency_runs"
    for source, name in (("mnist_pairs", "mnist_pairs-training-paper"),
                         ("mnist_pairs-cold-typicality60", "mnist_pairs-cold-typicality60-training-paper"),
                         ("mnist_pairs", "mnist_pairs")):
        (tmp_path / name).symlink_to(runs / source, target_is_directory=True)
    monkeypatch.setattr(summary, "RUNS", tmp_path)
    reference = json.loads((RESULTS / "text_multilabel.json").read_text())["mnist_pairs"]
    variant = json.loads(json.dumps(summary.summarise_task("mnist_pairs-training-paper")))
    assert variant["strategies"]["typicality-then-badge"] == reference["strategies"]["typicality-then-badge"]
    # the plain task does not take the training variant's cold-start runs as its own
    assert "typicality-then-badge" not in summary.summarise_task("mnist_pairs")["strategies"]


@pytest.mark.parametrize("script", ["text_from_scratch", "pairs_set_cnn"])
def test_a_model_factory_benchmark_summary_is_rebuilt_from_its_committed_runs(monkeypatch, script):
    """``benchmarks/<script>.py --summarise`` (the text CNN on word ids, the digit pairs' set
    CNN) rebuilds ``<script>.json`` from the committed runs alone, and the text guide shows
    its table as generated."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    benchmark = importlib.import_module(script)

    committed = json.loads((RESULTS / f"{script}.json").read_text())
    assert json.loads(json.dumps(benchmark.summarise(write=False))) == committed
    assert set(committed["strategies"]) == set(benchmark.STRATEGIES)
    assert all(len(e["seeds"]) >= 6 for e in committed["strategies"].values())
    guide = (ROOT / "docs" / "guides" / "text-and-tables.md").read_text()
    # the table sits in a list item, indented by two spaces
    assert "\n".join("  " + line for line in benchmark.markdown(committed).splitlines()) in guide


def test_the_stopping_sensitivity_table_is_the_committed_summary_and_judges_as_the_stopping_benchmark(monkeypatch):
    """``benchmarks/stopping_sensitivity.py`` re-judges the committed stopping runs at other windows,
    margins and thresholds. Its docs table is its committed summary; its current setting's counts are
    ``stopping.json``'s; and its fit fires where ``stopping.py`` fires (one single-label and one
    multi-label run here; the script checks every run when it is run)."""
    import numpy as np

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping
    import stopping_sensitivity as sensitivity

    summary = json.loads((RESULTS / "stopping_sensitivity.json").read_text())
    block = _generated_block(ROOT / "docs" / "benchmarks.md", sensitivity.BEGIN, sensitivity.END)
    assert block.strip() == sensitivity.markdown(summary).strip()

    protocols = json.loads((RESULTS / "stopping.json").read_text())["protocols"]
    current = summary["current"]
    assert (current["window"], current["margin"], current["threshold"]) == sensitivity.current_setting()
    assert current["all"]["runs"] == summary["runs"] == sum(p["seeds"] for p in protocols.values())
    assert current["all"]["met"] == sum(int(p["criteria"][stopping.RECOMMENDED]["met_goal"].split(" of ")[0])
                                        for p in protocols.values())
    assert current["all"]["early"] == sum(p["criteria"][stopping.RECOMMENDED]["too_early"] for p in protocols.values())
    assert current["all"]["cut_early"] == sum(p["cut_short"]["too_early"] for p in protocols.values())

    window, margin, threshold = sensitivity.current_setting()
    for protocol in ("digits", "mnist_pairs-budget800"):
        seed, rounds = stopping.finished_runs(stopping.RUNS / protocol)[1]
        budget = rounds[-1]["n_labelled"]
        fit_R = sensitivity.drifts(rounds, window)
        labels_R = np.array([r["n_labelled"] for r in rounds])
        fired = sensitivity.first_fire(fit_R, labels_R, budget, margin, threshold)
        assert fired is not None and fired == stopping._fires(rounds, "remaining_change", threshold, budget)
        # a looser margin fires no later; a stricter threshold no earlier
        looser = sensitivity.first_fire(fit_R, labels_R, budget, margin / 2, threshold)
        stricter = sensitivity.first_fire(fit_R, labels_R, budget, margin, threshold / 2)
        assert looser <= fired and (stricter is None or stricter >= fired)
    # the concepts page quotes the threshold's trade-off from the same summary
    concepts = " ".join((ROOT / "docs" / "concepts" / "stopping.md").read_text().split())
    by_threshold = {s["threshold"]: s["all"] for s in summary["settings"]
                    if (s["window"], s["margin"]) == (window, margin)}
    looser, loosest = by_threshold[0.0075], by_threshold[0.01]
    assert (f"{threshold:g} stopped {current['all']['early']} more than a point early and met the goal in "
            f"{current['all']['met']}, 0.0075 stopped {looser['early']} early and met it in {looser['met']}, and "
            f"0.01 stopped {loosest['early']} early and met it in {loosest['met']}") in concepts


def test_the_stopping_ideas_fits_are_the_librarys_fit_and_a_reference_decaying_one(monkeypatch):
    """``benchmarks/stopping_ideas.py`` judges other remaining-change rules offline. Its fit at the
    decay with the smallest residual is the library's (decay and drift, round by round); with
    alpha = 1 (drift falling as 1/n) it is a least-squares fit of the disagreements on log(n_j / n_i),
    checked here against a plain NumPy one."""
    import numpy as np

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping
    import stopping_ideas as ideas
    import stopping_sensitivity as sensitivity
    from activebayes.stopping import decode_classes

    seed, rounds = stopping.finished_runs(stopping.RUNS / "digits")[1]
    run = {"labels": np.array([r["n_labelled"] for r in rounds])}
    run["D"], run["scale"] = ideas.disagreements(rounds)
    from activebayes.stopping import CHANGE_DECAYS

    drift_R, se_R, decay_R = sensitivity.drifts(rounds, 16)
    measured = ~np.isnan(drift_R)
    fits_A = np.stack([ideas.fits(run, 16, a) for a in CHANGE_DECAYS])
    pick = np.argmin(fits_A[:, measured, 3], axis=0)
    assert np.array_equal(np.asarray(CHANGE_DECAYS)[pick], decay_R[measured])
    assert len(set(decay_R[measured])) > 1  # the decay is not the same everywhere: the pick is tested
    mine = fits_A[pick, np.flatnonzero(measured)]
    assert np.allclose(mine[:, 1], drift_R[measured], rtol=1e-7, atol=1e-12)
    assert np.allclose(mine[:, 2], se_R[measured], rtol=1e-7, atol=1e-12)
    t, W = len(rounds) - 1, 10
    classes = [decode_classes(r["signals"]["stable_predictions"]["predictions"]) for r in rounds[t - W + 1: t + 1]]
    n = run["labels"][t - W + 1: t + 1].astype(float)
    pairs = [(i, j) for i in range(W) for j in range(i + 1, W)]
    d = np.array([np.mean(classes[i] != classes[j]) for i, j in pairs])
    X = np.array([[1.0, np.log(n[j] / n[i])] for i, j in pairs])
    coef = np.linalg.solve(X.T @ X, X.T @ d)
    assert np.allclose(ideas.fits(run, W, 1.0)[t, :2], coef, atol=1e-12)


def test_the_runs_made_after_the_stopping_rule_was_chosen_are_judged_as_the_docs_say(monkeypatch, capsys):
    """``stopping_ideas.py --after-choice`` judges the committed runs made after the choice; the
    benchmarks page's table of them is its output (met / early / late per protocol and in all,
    and the cut budgets stopped early)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import stopping_ideas as ideas

    assert ideas.main(["--after-choice"]) == 0
    printed = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    judged = {(cells[0].strip("| "), cells[2]): (cells[3], cells[4].rstrip(" |")) for cells in printed[2:]}
    docs = (ROOT / "docs" / "benchmarks.md").read_text()
    columns = ("digits", "digits-shared", "digits-b5", "mnist")
    for name, label in (("linear drift (the previous rule)", "constant drift (the previous rule)"),
                        ("decaying drift, alpha fitted (the current rule)",
                         "**decaying drift, $\\alpha$ fitted (the current rule)**"),
                        ("decaying drift, alpha 1 (log)", "decaying drift, $\\alpha = 1$ (log)")):
        row = next(line for line in docs.splitlines() if line.strip().startswith(f"| {label} |")
                   and "of 198" in line)
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert cells[2:6] == [judged[(name, protocol)][0] for protocol in columns]
        assert cells[6:8] == list(judged[(name, "all")])
