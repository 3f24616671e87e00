"""The per-class section of a real multi-label comparison: per-class precision, recall and F1,
checked against scikit-learn.

Two strategies x two seeds on a small multi-label dataset, written by the product's own
runner. Each final model is rebuilt from its checkpoint and predicts the test set again;
scikit-learn's ``precision_recall_fscore_support(average=None)`` of those predictions is
what the table must show (mean over seeds), and the figures are drawn from every round's
``precision_per_class``, ``recall_per_class`` and ``f1_per_class``.
"""

from __future__ import annotations

import functools
import json
import shutil

import numpy as np
import pytest
import torch

from activebayes import plots
from activebayes._seeding import make_generator
from activebayes.experiment import run_experiment
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.report import _figures, write_report
from activebayes.rundir import Comparison, RunDirectory
from tests.conftest import multilabel_toy
from tests.conftest import tiny_png
from tests.report.test_report import _caption, _figure_slots, _rounds, _section, _table, _text

# one worker builds the runs once for the whole module
pytestmark = pytest.mark.xdist_group("report-multilabel")

STRATEGIES = ("multilabel_entropy", "random")
SEEDS = (0, 1)
CLASSES = 4


@pytest.fixture(scope="module")
def multilabel_run(tmp_path_factory):
    """``(comparison directory, loop factory, test set)``: 8 -> 20 labels, 3 rounds per run (about 4 s)."""
    data = multilabel_toy(n=200, c=CLASSES)
    train, test = data.subset(torch.arange(150)), data.subset(torch.arange(150, 200))
    base = LoopConfig(budget=20, initial_size=8, validation_size=30, batch_size=6, num_samples=4, eval_samples=4,
                      cold_start=None, fit_options={"max_epochs": 3, "min_samples_per_epoch": 512})
    comparison = Comparison(tmp_path_factory.mktemp("multilabel") / "compare", base, STRATEGIES, SEEDS)
    comparison.write()

    def factory(config):
        return ActiveLearningLoop(config, dataset=train, test=test)

    for run_dir, config in comparison.configs():
        run_experiment(config, run_dir, progress=False, report=False, loop_factory=factory)
    return comparison.path, factory, test


@pytest.fixture(scope="module")
def multilabel_report(multilabel_run, tmp_path_factory):
    """``(page, [(args, kwargs) of each plots.per_class_over_rounds call])`` (figures stored as 1x1 PNGs)."""
    path, _, _ = multilabel_run
    calls = []
    original = plots.per_class_over_rounds

    @functools.wraps(original)
    def recording(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "per_class_over_rounds", recording)
        patch.setattr(_figures, "to_png", lambda figure: tiny_png())
        page = write_report(path, output=tmp_path_factory.mktemp("r") / "report.html").read_text(encoding="utf-8")
    return page, calls


def _sklearn_prf(multilabel_run, strategy: str, seed: int) -> np.ndarray:
    """``[3, C]`` scikit-learn's per-class precision, recall and F1 of the final model, rebuilt from its
    checkpoint, on the test set."""
    metrics = pytest.importorskip("sklearn.metrics")
    path, factory, test = multilabel_run
    run = RunDirectory(path / strategy / f"seed_{seed}")
    config, records = run.read_config(), run.read_rounds()
    r = len(records) - 1
    loop = factory(config)
    loop.restore(records, run.read_checkpoint(r))
    # the loop evaluates round r with K = eval_samples functions drawn from (seed, r, "test")
    log_probs = loop.posterior.log_probs(test.inputs, num_samples=config.eval_samples,
                                         generator=make_generator(config.seed, r, "test"))
    predicted = (log_probs.double().exp().mean(1).numpy() >= 0.5).astype(int)
    precision, recall, f1, _ = metrics.precision_recall_fscore_support(test.targets.numpy(), predicted,
                                                                       average=None, zero_division=0)
    return np.stack([precision, recall, f1])


def _sklearn_f1(multilabel_run, strategy: str, seed: int) -> np.ndarray:
    return _sklearn_prf(multilabel_run, strategy, seed)[2]


def test_the_table_is_scikit_learns_per_class_scores_of_the_final_models(multilabel_run, multilabel_report):
    path, _, test = multilabel_run
    page, _ = multilabel_report
    section = _section(page, "per-class")
    assert "<h2>Per-class precision, recall and F1</h2>" in section
    assert "macro-F1 under Final metrics" in _text(section)
    rows = _table(section)
    # the report was written without the runs' own dataset: the toy's 'abcd' are not stored
    assert [row["class"] for row in rows] == [str(c) for c in range(CLASSES)]
    support = test.targets.sum(0).tolist()
    for strategy in STRATEGIES:
        prf_S_3_C = np.array([_sklearn_prf(multilabel_run, strategy, seed) for seed in SEEDS])
        for m, metric in enumerate(("precision", "recall", "f1")):
            stored = np.array([_rounds(path / strategy / f"seed_{seed}")[-1]["metrics"][f"test_{metric}_per_class"]
                               for seed in SEEDS])
            np.testing.assert_allclose(stored, prf_S_3_C[:, m], atol=1e-12)
        for c, row in enumerate(rows):
            assert row["test items with the class"] == str(support[c])
            assert row[f"{strategy}: precision / recall / F1"] == " / ".join(
                f"{v:.3f}" for v in prf_S_3_C[:, :, c].mean(0))


def test_the_figures_are_every_rounds_per_class_f1_over_labels(multilabel_run, multilabel_report):
    path, _, _ = multilabel_run
    page, calls = multilabel_report
    # a precision, a recall and an F1 figure per strategy
    assert [kwargs["metric"] for _, kwargs in calls] == ["precision", "recall", "f1"] * len(STRATEGIES)
    calls = [call for call in calls if call[1]["metric"] == "f1"]
    slots = _figure_slots(page)
    for (args, kwargs), strategy in zip(calls, STRATEGIES, strict=True):
        runs = [_rounds(path / strategy / f"seed_{seed}") for seed in SEEDS]
        expected_R_C = np.mean([[r["metrics"]["test_f1_per_class"] for r in rounds] for rounds in runs], axis=0)
        assert kwargs["metric"] == "f1" and expected_R_C.shape == (3, CLASSES)
        np.testing.assert_allclose(args[0], expected_R_C, atol=1e-12)
        assert list(kwargs["n_labelled"]) == [8, 14, 20] == [r["n_labelled"] for r in runs[0]]
        key = f"per-class-f1-{strategy}"
        assert slots[key] == "img"
        assert _caption(page, key) == f"{strategy}: per-class test F1 per round (mean over 2 seeds)"
    final_means = np.mean([_sklearn_f1(multilabel_run, STRATEGIES[0], seed) for seed in SEEDS], axis=0)
    np.testing.assert_allclose(calls[0][0][0][-1], final_means, atol=1e-12)  # the last round is the table's


def test_stored_precision_and_recall_are_shown_beside_the_f1(multilabel_run, tmp_path):
    """The table shows the records' per-class precision and recall (planted here) beside the F1."""
    path, _, _ = multilabel_run
    copy = tmp_path / "compare"
    shutil.copytree(path, copy)
    for rounds_file in copy.glob("*/seed_*/rounds.jsonl"):
        rows = [json.loads(line) for line in rounds_file.read_text().splitlines() if line.strip()]
        for row in rows:
            row["metrics"]["test_precision_per_class"] = [0.25] * CLASSES
            row["metrics"]["test_recall_per_class"] = [0.75] * CLASSES
        rounds_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_figures, "matplotlib_missing", lambda: "not drawn in this test")
        page = write_report(copy).read_text(encoding="utf-8")
    section = _section(page, "per-class")
    assert "<h2>Per-class precision, recall and F1</h2>" in section
    f1_S_C = np.array([_rounds(copy / "random" / f"seed_{seed}")[-1]["metrics"]["test_f1_per_class"]
                       for seed in SEEDS])
    for c, row in enumerate(_table(section)):
        assert row["random: precision / recall / F1"] == f"0.250 / 0.750 / {f1_S_C[:, c].mean():.3f}"
    shown = {key for key in _figure_slots(page) if key.startswith("per-class-")}
    assert shown == {f"per-class-{m}-{s}" for m in ("precision", "recall", "f1") for s in STRATEGIES}
