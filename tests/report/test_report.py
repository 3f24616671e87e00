"""The HTML report of a real comparison, checked against independent NumPy recomputations from ``rounds.jsonl``.

Every number the report shows (labels to reach, AULC, final metrics, pooled and
per-seed ECE, per-class values) and the data every figure is drawn from are
recomputed here from the JSON lines the loop wrote, without the analysis
functions the report uses. The stored reliability bins are checked against the
final model's own predictions (rebuilt from its checkpoint).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import math
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from activebayes import plots
from activebayes._seeding import make_generator
from activebayes.data import load_dataset
from activebayes.errors import ActiveBayesError
from activebayes.experiment import run_experiment
from activebayes.models import build_model, predict_log_probs
from activebayes.records import LoopConfig
from activebayes.report import _data, _figures, _report, write_report
from activebayes.rundir import RunDirectory, RunDirectoryError
from tests.conftest import FAST_LOOP
from tests.conftest import tiny_png
from tests.report.conftest import SEEDS, STRATEGIES

SECTIONS = ("overview", "learning-curves", "stopping", "labels-to-reach", "aulc", "final-metrics", "calibration",
            "class-balance", "per-class", "confusion", "acquired", "time", "config")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # NumPy 2 renamed trapz


# --------------------------------------------------------------------------- reading the page and the runs


def _rounds(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rounds.jsonl").read_text().splitlines() if line.strip()]


def _runs(comparison_dir: Path, strategy: str) -> list[list[dict]]:
    return [_rounds(comparison_dir / strategy / f"seed_{seed}") for seed in SEEDS]


def _final(comparison_dir: Path, strategy: str, key: str) -> np.ndarray:
    """``[S, ...]`` the final round's ``metrics[key]`` of each seed."""
    return np.array([rounds[-1]["metrics"][key] for rounds in _runs(comparison_dir, strategy)], dtype=np.float64)


def _mean_sd(values: np.ndarray, digits: int = 4) -> str:
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def _section(page: str, key: str) -> str:
    return page.split(f'<section id="{key}">')[1].split("</section>")[0]


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<br>", " | ", re.sub(r"<(?!br>)[^>]+>", "", cell))).strip()


def _table(section: str, index: int = 0) -> list[dict[str, str]]:
    """The ``index``-th table of a section as one ``{header: cell text}`` per row."""
    found = re.findall(r"<table[^>]*>(.*?)</table>", section, flags=re.DOTALL)[index]
    header = [_text(h) for h in re.findall(r"<th>(.*?)</th>", found)]
    rows = re.findall(r"<tr>(.*?)</tr>", found.split("<tbody>")[1])
    return [dict(zip(header, (_text(c) for c in re.findall(r"<td>(.*?)</td>", row)), strict=True)) for row in rows]


def _row(section: str, strategy: str, index: int = 0) -> dict[str, str]:
    return next(row for row in _table(section, index) if row["strategy"] == strategy)


def _figure_slots(page: str) -> dict[str, str]:
    """``data-figure key -> "img" or the skip text`` for every figure slot on the page."""
    slots = {m.group(1): "img" for m in re.finditer(r'<figure data-figure="([^"]+)"><img src="data:image/png', page)}
    for match in re.finditer(r'<div class="skipped" data-figure="([^"]+)">(.*?)</div>', page):
        slots[match.group(1)] = html.unescape(match.group(2))
    return slots


def _caption(page: str, key: str) -> str:
    return html.unescape(re.search(rf'data-figure="{re.escape(key)}">.*?<figcaption>(.*?)</figcaption>',
                                   page, flags=re.DOTALL).group(1))


def _reach_text(values_S: list[float]) -> str:
    """The labels-to-reach cell's headline, computed with NumPy (inf = not reached)."""
    median = float(np.median(values_S))
    return "not reached" if np.isinf(median) else f"{median:g}"


@pytest.fixture(scope="module")
def report(comparison_report):
    path, calls = comparison_report
    return path.read_text(encoding="utf-8"), calls


@pytest.fixture(scope="module")
def targets(comparison_dir) -> tuple[float, ...]:
    """Targets reached by every seed at once, by some seeds only, and by none (from the recorded accuracies)."""
    curves = [[r["metrics"]["test_accuracy"] for r in rounds] for s in STRATEGIES for rounds in _runs(comparison_dir, s)]
    best = sorted(max(c) for c in curves)
    lowest = min(min(c) for c in curves)
    some = (best[0] + best[1]) / 2 if best[0] < best[1] else best[0]  # above the worst seed's best round
    return (math.floor(lowest * 1e4) / 1e4, math.floor(some * 1e4) / 1e4, 0.999)


@pytest.fixture(scope="module")
def report_with_targets(comparison_dir, targets, tmp_path_factory) -> str:
    """The comparison's report for ``targets`` (figures drawn but stored as 1x1 PNGs)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_figures, "to_png", lambda figure: tiny_png())
        path = write_report(comparison_dir, output=tmp_path_factory.mktemp("t") / "r.html", targets=targets)
    return path.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the page


def test_every_section_and_one_embedded_png_per_figure(report):
    page, _ = report
    assert page.startswith("<!DOCTYPE html>")
    for key in SECTIONS:
        assert f'<section id="{key}">' in page and f'href="#{key}"' in page, key
    slots = _figure_slots(page)
    # learning curves + per strategy: stopping, reliability, class balance, precision, recall, confusion,
    # acquired + time
    assert len(slots) == 1 + len(STRATEGIES) * 7 + 1
    assert all(state == "img" for state in slots.values()), slots
    images = re.findall(r'<img src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == len(slots) == page.count("<img")
    for data in images:
        png = base64.b64decode(data, validate=True)
        assert png.startswith(PNG_SIGNATURE) and png[12:16] == b"IHDR"
        width, height = np.frombuffer(png[16:24], dtype=">u4")
        assert 100 < width < 3000 and 100 < height < 3000
    # self-contained: nothing fetched from elsewhere, no scripts
    assert not re.search(r'(src|href)="(https?:|//|file:)', page)
    assert "<script" not in page and "<link" not in page


def test_overview_lists_every_run_as_recorded(comparison_dir, report):
    page, _ = report
    rows = _table(_section(page, "overview"))
    assert [(r["strategy"], r["seed"]) for r in rows] == [(s, str(seed)) for s in STRATEGIES for seed in SEEDS]
    for row in rows:
        rounds = _rounds(comparison_dir / row["strategy"] / f"seed_{row['seed']}")
        assert row["rounds"] == str(len(rounds)) and row["final labels"] == str(rounds[-1]["n_labelled"])
        assert row["final test accuracy"] == f"{rounds[-1]['metrics']['test_accuracy']:.4f}"
        assert row["stop reason"] == rounds[-1]["stop_reason"]
        assert row["seconds"] == f"{sum(sum(r['seconds'].values()) for r in rounds):.1f}"


# --------------------------------------------------------------------------- learning curves


def test_learning_curves_figure_is_drawn_from_the_recorded_accuracies(comparison_dir, report):
    _, calls = report
    ((args, kwargs),) = calls["learning_curves"]
    drawn = args[0]
    assert list(drawn) == list(STRATEGIES)
    for strategy in STRATEGIES:
        for (n_R, acc_R), rounds in zip(drawn[strategy], _runs(comparison_dir, strategy), strict=True):
            assert list(n_R) == [r["n_labelled"] for r in rounds]
            assert list(acc_R) == [r["metrics"]["test_accuracy"] for r in rounds]
    assert kwargs["spread"] == "minmax"


def test_aulc_table_matches_numpy(comparison_dir, report):
    page, _ = report
    section = _section(page, "aulc")
    for strategy in STRATEGIES:
        areas, finals = [], []
        for rounds in _runs(comparison_dir, strategy):
            n = np.array([r["n_labelled"] for r in rounds], dtype=np.float64)
            acc = np.array([r["metrics"]["test_accuracy"] for r in rounds])
            areas.append(_trapezoid(acc, n) / (n[-1] - n[0]))
            finals.append(acc[-1])
        row = _row(section, strategy)
        assert row["AULC"] == _mean_sd(np.array(areas))
        assert row["AULC per seed"] == ", ".join(f"{a:.4f}" for a in areas)
        assert row["final test accuracy"] == _mean_sd(np.array(finals))
        assert row["seeds"] == str(len(SEEDS))


@pytest.mark.parametrize("scale", [0.5, 1.3])
def test_default_targets_are_090_095_or_read_from_randoms_curve(comparison_dir, tmp_path, fast_figures, scale):
    """Without --targets: 0.9 and 0.95 where some run reaches 0.9, else random's mean curve at about half
    the budget and at the budget, rounded down to two decimals (runs' accuracies rescaled to make each case)."""
    scaled = tmp_path / "scaled"
    shutil.copytree(comparison_dir, scaled)
    for path in scaled.glob("*/seed_*/rounds.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for row in rows:
            row["metrics"]["test_accuracy"] = min(1.0, row["metrics"]["test_accuracy"] * scale)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    runs = {s: _runs(scaled, s) for s in STRATEGIES}
    if any(r["metrics"]["test_accuracy"] >= 0.9 for seeds in runs.values() for rounds in seeds for r in rounds):
        expected = [0.9, 0.95]
    else:
        n = np.array([r["n_labelled"] for r in runs["random"][0]], dtype=np.float64)
        mean = np.array([[r["metrics"]["test_accuracy"] for r in rounds] for rounds in runs["random"]]).mean(0)
        mid = int(np.argmin(np.abs(n - n[-1] / 2)))
        expected = list(dict.fromkeys(math.floor(v * 100) / 100 for v in (mean[mid], mean[-1])))
    assert (scale < 1) == (expected != [0.9, 0.95])  # both cases are made
    section = _section(write_report(scaled, output=tmp_path / "r.html").read_text(encoding="utf-8"), "labels-to-reach")
    header = [h for h in _table(section)[0] if h != "strategy"]
    assert header == [f"test accuracy ≥ {t:g}" for t in expected]
    assert ("No run reached 0.9 here" in section) == (scale < 1)


def test_labels_to_reach_matches_numpy(comparison_dir, targets, report_with_targets):
    section = _section(report_with_targets, "labels-to-reach")
    reached_counts = set()
    for strategy in STRATEGIES:
        row = _row(section, strategy)
        for target in targets:
            values = []
            for rounds in _runs(comparison_dir, strategy):
                hits = [r["n_labelled"] for r in rounds if r["metrics"]["test_accuracy"] >= target]
                values.append(float(hits[0]) if hits else np.inf)
            cell = row[f"test accuracy ≥ {target:g}"]
            reached = int(np.isfinite(values).sum())
            reached_counts.add(reached)
            assert cell.startswith(_reach_text(values)), (target, cell, values)
            assert f"reached by {reached}/{len(values)} seeds" in cell
            finite = sorted(v for v in values if np.isfinite(v))
            if reached == len(values) and finite[0] == finite[-1]:
                assert f"every seed: {finite[0]:g}" in cell
            elif reached:
                high = f"{finite[-1]:g}" if reached == len(values) else "not reached"
                assert f"range {finite[0]:g}–{high}" in cell
            else:
                best = max(r["metrics"]["test_accuracy"] for rounds in _runs(comparison_dir, strategy) for r in rounds)
                assert f"best accuracy of any seed: {best:.4f}" in cell
    assert {0, len(SEEDS)} <= reached_counts  # the targets cover "every seed" and "no seed"


# --------------------------------------------------------------------------- final metrics and calibration


def test_final_metrics_table_matches_rounds_jsonl(comparison_dir, report):
    page, _ = report
    section = _section(page, "final-metrics")
    for strategy in STRATEGIES:
        row = _row(section, strategy)
        for header, key in (("accuracy", "test_accuracy"), ("macro F1", "test_f1_macro"), ("NLL", "test_nll"),
                            ("Brier", "test_brier"), ("ECE (mean ± sd over seeds)", "test_ece")):
            assert row[header] == _mean_sd(_final(comparison_dir, strategy, key)), header


def _numpy_pooled_bins(comparison_dir: Path, strategy: str) -> dict[str, np.ndarray]:
    """The seeds' final-round stored bins added with NumPy."""
    stored = [rounds[-1]["metrics"]["test_reliability"] for rounds in _runs(comparison_dir, strategy)]
    count = np.sum([s["count"] for s in stored], axis=0).astype(np.float64)
    conf_sum = np.sum([s["conf_sum"] for s in stored], axis=0)
    correct_sum = np.sum([s["correct_sum"] for s in stored], axis=0)
    full = count > 0
    with np.errstate(invalid="ignore"):
        confidence, accuracy = conf_sum / count, correct_sum / count
    return {
        "count": count, "confidence": confidence, "accuracy": accuracy,
        "ece": np.abs(conf_sum - correct_sum).sum() / count.sum(),
        "mce": np.abs(accuracy - confidence)[full].max(),
    }


def test_calibration_shows_the_ece_of_the_pooled_bins_and_the_mean_of_the_seeds(comparison_dir, report):
    """A wrong pooling (bins not added, a field zeroed, a mean of ECEs in its place) changes these numbers."""
    page, calls = report
    section = _section(page, "calibration")
    drawn = [args[0] for args, _ in calls["reliability_diagram"]]
    assert len(drawn) == len(STRATEGIES)
    for strategy, bins in zip(STRATEGIES, drawn, strict=True):
        expected = _numpy_pooled_bins(comparison_dir, strategy)
        per_seed = _final(comparison_dir, strategy, "test_ece")
        row = _row(section, strategy)
        assert row["ECE (pooled over seeds)"] == f"{expected['ece']:.4f}"
        assert row["ECE (mean ± sd over seeds)"] == _mean_sd(per_seed)
        assert row["MCE (pooled)"] == f"{expected['mce']:.4f}"
        assert row["test items (all seeds)"] == str(int(expected["count"].sum()))
        # the diagram is drawn from the pooled bins, and its caption names the pooled ECE
        np.testing.assert_array_equal(bins.counts.numpy(), expected["count"])
        np.testing.assert_allclose(bins.confidence.numpy(), expected["confidence"], rtol=0, atol=1e-12)
        np.testing.assert_allclose(bins.accuracy.numpy(), expected["accuracy"], rtol=0, atol=1e-12)
        assert bins.ece == pytest.approx(expected["ece"], abs=1e-12)
        assert _caption(page, f"reliability-{strategy}").endswith(f"ECE (pooled over seeds) {expected['ece']:.4f}")
        # each seed's stored ECE is its own bins' ECE (what the mean column averages)
        for rounds, ece in zip(_runs(comparison_dir, strategy), per_seed, strict=True):
            stored = rounds[-1]["metrics"]["test_reliability"]
            gap = np.abs(np.subtract(stored["conf_sum"], stored["correct_sum"])).sum() / np.sum(stored["count"])
            assert ece == pytest.approx(gap, abs=1e-12)
    assert "ECE (mean ± sd over seeds)" in _section(page, "final-metrics")


def _page_of(kind: str, comparison_dir: Path) -> tuple[Path, str]:
    """The directory and the report page (figures stubbed) of the comparison or of one of its runs."""
    directory = comparison_dir if kind == "comparison" else comparison_dir / "bald" / "seed_0"
    return directory, html.unescape(_report.render_report(directory, (0.9,)))


@pytest.mark.parametrize("kind", ["comparison", "run"])
def test_calibration_defines_the_ece_and_the_mce_it_shows(comparison_dir, kind, fast_figures):
    """Both columns of the calibration table are defined, with their formulas, beside the table."""
    _, page = _page_of(kind, comparison_dir)
    section = _section(page, "calibration")
    assert "MCE" in " ".join(_table(section)[0])  # the column the definition is for
    assert "ECE = Σ_b (n_b / N) · |acc_b − conf_b|" in section
    assert "MCE = max_b |acc_b − conf_b| over the non-empty bins" in section


@pytest.mark.parametrize("kind", ["comparison", "run"])
def test_page_names_no_absolute_path(comparison_dir, kind, fast_figures):
    """The report is meant to be mailed: where the runs lie on this machine stays out of it."""
    directory, page = _page_of(kind, comparison_dir)
    assert str(directory.resolve().parent) not in page and str(comparison_dir.parent) not in page
    assert f"{kind} directory {directory.name}" in page


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("seed", SEEDS)
def test_stored_bins_are_the_final_model_predictions_binned(comparison_dir, strategy, seed):
    """Rebuild the final round's model from its checkpoint, predict the test set, bin with NumPy."""
    run = RunDirectory(comparison_dir / strategy / f"seed_{seed}")
    config = run.read_config()
    rounds = _rounds(run.path)
    r = len(rounds) - 1
    train = load_dataset(config.dataset, split="train")
    test = load_dataset(config.dataset, split="test")
    model = build_model(config.model, num_classes=train.num_classes, input_shape=tuple(train.input_shape))
    model.load_state_dict(run.read_checkpoint(r))
    # the loop evaluates round r with the generator derived from (seed, r, "test")
    log_probs = predict_log_probs(model, test.inputs, config.eval_samples, batch_size=config.predict_batch_size,
                                  generator=make_generator(config.seed, r, "test"))
    probs = log_probs.double().exp().mean(1).numpy()
    targets_N = test.targets.numpy()
    conf, correct = probs.max(1), (probs.argmax(1) == targets_N).astype(np.float64)
    stored = rounds[-1]["metrics"]["test_reliability"]
    B = len(stored["count"])
    which = np.minimum(np.floor(conf * B).astype(int), B - 1)
    np.testing.assert_array_equal(stored["count"], np.bincount(which, minlength=B))
    np.testing.assert_allclose(stored["conf_sum"], np.bincount(which, conf, B), atol=1e-6)
    np.testing.assert_allclose(stored["correct_sum"], np.bincount(which, correct, B), atol=0)
    assert rounds[-1]["metrics"]["test_accuracy"] == pytest.approx(correct.mean(), abs=1e-12)


# --------------------------------------------------------------------------- per-round figures and classes


def test_per_round_figures_are_drawn_from_the_mean_over_seeds(comparison_dir, report):
    _, calls = report
    balance = [args[0] for args, _ in calls["class_balance"]]
    per_class = {(kwargs["metric"], i // 2): (args[0], kwargs) for i, (args, kwargs) in
                 enumerate(calls["per_class_over_rounds"])}
    confusion = [args[0] for args, _ in calls["confusion_matrix_plot"]]
    for i, strategy in enumerate(STRATEGIES):
        runs = _runs(comparison_dir, strategy)
        R = min(len(rounds) for rounds in runs)
        counts = np.mean([[r["class_counts"] for r in rounds[:R]] for rounds in runs], axis=0)
        np.testing.assert_allclose(balance[i], counts)
        for metric in ("precision", "recall"):
            values, kwargs = per_class[(metric, i)]
            expected = np.mean([[r["metrics"][f"test_{metric}_per_class"] for r in rounds[:R]] for rounds in runs], 0)
            np.testing.assert_allclose(values, expected, atol=1e-12)
            assert list(kwargs["n_labelled"]) == [r["n_labelled"] for r in runs[0][:R]]
            assert kwargs["class_names"] == [str(c) for c in range(10)]  # the digits dataset's names
        np.testing.assert_array_equal(confusion[i], _final(comparison_dir, strategy, "test_confusion_matrix").sum(0))


def test_per_class_table_matches_rounds_jsonl(comparison_dir, report):
    page, _ = report
    rows = _table(_section(page, "per-class"))
    support = _final(comparison_dir, STRATEGIES[0], "test_support_per_class")[0]
    assert [row["class"] for row in rows] == [str(c) for c in range(10)]
    for c, row in enumerate(rows):
        assert row["test items"] == str(int(support[c]))
        for strategy in STRATEGIES:
            precision = _final(comparison_dir, strategy, "test_precision_per_class").mean(0)[c]
            recall = _final(comparison_dir, strategy, "test_recall_per_class").mean(0)[c]
            assert row[f"{strategy}: precision / recall"] == f"{precision:.3f} / {recall:.3f}"


def test_acquired_items_are_titled_with_readable_class_counts(comparison_dir, report):
    page, calls = report
    assert "(freq)" not in page
    for (args, kwargs), strategy in zip(calls["image_grid"], STRATEGIES, strict=True):
        rounds = _rounds(comparison_dir / strategy / f"seed_{SEEDS[0]}")
        record = next(r for r in reversed(rounds) if r["acquired"])
        assert kwargs["labels"].tolist() == record["labels"]
        assert args[0].shape[0] == len(record["acquired"])
        title = plots.image_grid(*args, **kwargs).axes[0].get_title()
        lines = title.split("\n")
        assert lines[0] == f"{strategy}, seed {SEEDS[0]}: acquired in round {record['round']}"
        counts = np.bincount(record["labels"], minlength=10)
        shown = " ".join(lines[1:])
        assert shown.startswith(f"{len(record['labels'])} items — class counts: ")
        parsed = dict(part.split("×") for part in shown.split("class counts: ")[1].split(" none of")[0].split(", "))
        assert {int(k): int(v) for k, v in parsed.items()} == {c: int(n) for c, n in enumerate(counts) if n}
        absent = [str(c) for c in range(10) if counts[c] == 0]
        assert shown.endswith(f"none of class {', '.join(absent)}") if absent else "none of" not in shown
        caption = _caption(page, f"acquired-{strategy}")
        assert f"the {len(record['acquired'])} items acquired in round {record['round']}" in caption


def test_class_names_come_from_the_dataset(comparison_dir, tmp_path, fast_figures, monkeypatch):
    """With a dataset whose classes have names, every per-class figure, table and title uses them."""
    names = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
    digits = load_dataset("digits", split="train")
    monkeypatch.setattr(_data, "load_dataset", lambda *a, **k: dataclasses.replace(digits, classes=names))
    seen: dict[str, list[dict]] = {}

    def recording(name, original):
        def wrapper(*args, **kwargs):
            seen.setdefault(name, []).append(kwargs)
            return original(*args, **kwargs)

        return wrapper

    for name in ("class_balance", "per_class_over_rounds", "confusion_matrix_plot", "image_grid"):
        monkeypatch.setattr(plots, name, recording(name, getattr(plots, name)))
    page = write_report(comparison_dir, output=tmp_path / "r.html").read_text()
    assert sorted(seen) == ["class_balance", "confusion_matrix_plot", "image_grid", "per_class_over_rounds"]
    assert all(kwargs["class_names"] == list(names) for calls in seen.values() for kwargs in calls), seen
    assert [row["class"] for row in _table(_section(page, "per-class"))] == list(names)
    assert "Classes are named as in the dataset." in page
    record = next(r for r in reversed(_rounds(comparison_dir / STRATEGIES[0] / "seed_0")) if r["acquired"])
    title = plots.class_count_title(record["labels"], class_names=names)
    assert all(f"{names[c]}×" in title for c in set(record["labels"]))


# --------------------------------------------------------------------------- other directories


def test_single_run_report(comparison_dir, targets, fast_figures):
    run = comparison_dir / "bald" / "seed_1"  # every run of a comparison is a run directory of its own
    page = write_report(run, targets=targets[:1]).read_text()
    for key in SECTIONS:
        assert f'<section id="{key}">' in page
    assert "Single run of 1 strategy (bald)" in page
    rounds = _rounds(run)
    hits = [r["n_labelled"] for r in rounds if r["metrics"]["test_accuracy"] >= targets[0]]
    assert _table(_section(page, "labels-to-reach"))[0][f"test accuracy ≥ {targets[0]:g}"] == str(hits[0])
    assert "&quot;strategy&quot;: &quot;bald&quot;" in page  # the run's config (escaped)
    row = _table(_section(page, "calibration"))[0]
    stored = rounds[-1]["metrics"]["test_reliability"]
    assert row["ECE"] == f"{rounds[-1]['metrics']['test_ece']:.4f}"
    assert row["test items"] == str(sum(stored["count"]))
    assert "pooled" not in _section(page, "calibration") and "± " not in _section(page, "final-metrics")
    slots = _figure_slots(page)
    assert len(slots) == 1 + 7 + 1 and all(v == "img" for v in slots.values())


def _copy_run(comparison_dir: Path, destination: Path, **config_changes) -> Path:
    shutil.copytree(comparison_dir / "bald" / "seed_0", destination)
    directory = RunDirectory(destination)
    directory.write_config(directory.read_config().replace(**config_changes))
    return destination


def test_text_is_escaped(comparison_dir, tmp_path, fast_figures):
    hostile = '<b onmouseover="x">&amp;'
    run = _copy_run(comparison_dir, tmp_path / "run", strategy=hostile)
    directory = RunDirectory(run)
    records = directory.read_rounds()
    directory.write_rounds([*records[:-1], dataclasses.replace(records[-1], stop_reason="<i>stopped</i>")])
    page = write_report(run).read_text()
    assert hostile not in page and "<i>stopped</i>" not in page
    assert "&lt;b onmouseover=&quot;x&quot;&gt;&amp;amp;" in page
    assert "&lt;i&gt;stopped&lt;/i&gt;" in page


def test_report_without_matplotlib(comparison_dir, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    page = write_report(comparison_dir, output=tmp_path / "plain.html").read_text()
    assert "<img" not in page
    assert "This report has no figures: matplotlib is not installed" in page
    for key in SECTIONS:
        assert f'<section id="{key}">' in page
    # the tables are all still there, with the same numbers
    row = _row(_section(page, "calibration"), "bald")
    assert row["ECE (pooled over seeds)"] == f"{_numpy_pooled_bins(comparison_dir, 'bald')['ece']:.4f}"


def test_dataset_that_cannot_be_loaded_skips_only_the_image_grid(comparison_dir, tmp_path, fast_figures):
    run = _copy_run(comparison_dir, tmp_path / "run", dataset="mnist", data_dir=str(tmp_path / "nowhere"))
    page = write_report(run).read_text()
    slots = _figure_slots(page)
    assert "could not be loaded" in slots.pop("acquired-bald")
    assert all(state == "img" for state in slots.values()), slots
    assert "Classes are shown by their ids 0–9: the dataset 'mnist' could not be loaded" in html.unescape(page)


def test_run_without_a_test_set_reports_validation_metrics(tmp_path, fast_figures):
    config = LoopConfig(**{**FAST_LOOP, "budget": 30, "evaluate_test": False})
    run_experiment(config, tmp_path / "run", progress=False, report=False)
    page = write_report(tmp_path / "run").read_text()
    rounds = _rounds(tmp_path / "run")
    assert not any(key.startswith("test_") for r in rounds for key in r["metrics"])
    final = rounds[-1]["metrics"]
    row = _table(_section(page, "final-metrics"))[0]
    assert row["accuracy"] == f"{final['validation_accuracy']:.4f}" and row["ECE"] == f"{final['validation_ece']:.4f}"
    calibration = _table(_section(page, "calibration"))[0]
    assert calibration["validation items"] == str(final["validation_num_items"])
    text = html.unescape(re.sub(r"<[^>]+>", " ", page.split('<section id="config">')[0]))
    assert not re.search(r"\btest\b", text), re.search(r".{40}\btest\b.{40}", text).group(0)
    assert all(state == "img" for state in _figure_slots(page).values())


def test_run_without_rounds_yet(tmp_path):
    RunDirectory(tmp_path / "fresh").write_config(LoopConfig())
    page = write_report(tmp_path / "fresh").read_text()
    assert "No finished rounds with an accuracy yet" in page
    assert "<img" not in page


def test_comparison_still_running(comparison_dir, tmp_path, fast_figures, monkeypatch):
    """One run has no directory yet, another has fewer rounds: seeds are averaged on the rounds all have."""
    copy = tmp_path / "cmp"
    shutil.copytree(comparison_dir, copy)
    shutil.rmtree(copy / "random" / "seed_1")
    short = RunDirectory(copy / "bald" / "seed_1")
    short.write_rounds(short.read_rounds()[:2])
    short.summary_path.unlink()
    drawn = []
    original = plots.class_balance
    monkeypatch.setattr(plots, "class_balance", lambda counts, **k: drawn.append(counts) or original(counts, **k))
    page = write_report(copy).read_text()
    bald = [_rounds(copy / "bald" / f"seed_{s}") for s in SEEDS]
    np.testing.assert_allclose(drawn[0], np.mean([[r["class_counts"] for r in rounds[:2]] for rounds in bald], 0))
    row = _row(_section(page, "calibration"), "random")
    only = _rounds(copy / "random" / "seed_0")[-1]["metrics"]
    assert row["seeds"] == "1" and row["ECE (mean ± sd over seeds)"] == f"{only['test_ece']:.4f}"
    overview = _table(_section(page, "overview"))
    assert [r["stop reason"] for r in overview if r["strategy"] == "bald"][1] == "not finished"


def test_write_is_atomic(comparison_dir, tmp_path, monkeypatch):
    from activebayes.report._html import PAGE_START

    monkeypatch.setattr(_report, "render_report",
                        lambda path, targets, progress=False, dataset=None: PAGE_START + "new")
    out = tmp_path / "sub" / "r.html"
    assert write_report(comparison_dir, output=out) == out
    assert out.read_text() == PAGE_START + "new"
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]  # no temp file left

    # a failure while replacing leaves the old report and no temp file
    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(_report, "render_report",
                        lambda path, targets, progress=False, dataset=None: PAGE_START + "newer")
    monkeypatch.setattr("os.replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_report(comparison_dir, output=out)
    assert out.read_text() == PAGE_START + "new"
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]


def test_bad_arguments(tmp_path, comparison_dir):
    with pytest.raises(FileNotFoundError, match="run or comparison directory") as missing:
        write_report(tmp_path / "missing")
    assert isinstance(missing.value, ActiveBayesError)
    with pytest.raises(RunDirectoryError, match="neither a run directory"):
        write_report(tmp_path)
    with pytest.raises(ValueError, match=r"targets must be an accuracy in \(0, 1\], got 95"):
        write_report(comparison_dir, targets=(0.9, 95))
    with pytest.raises(TypeError, match="targets"):
        write_report(comparison_dir, targets="0.9")
    with pytest.raises(ValueError, match="at least one"):
        write_report(comparison_dir, targets=())
    assert not (comparison_dir / "report.html").exists()  # nothing written on bad arguments


def test_overview_names_the_cold_start_read_from_the_rounds(tmp_path, fast_figures):
    base = {**FAST_LOOP, "budget": 50, "evaluate_test": False}
    config = LoopConfig(**{**base, "cold_start": "typicality", "cold_start_labels": 40})
    run_experiment(config, tmp_path / "cold", progress=False, report=False)
    overview = html.unescape(re.sub(r"<[^>]+>", " ", _section(write_report(tmp_path / "cold").read_text(), "overview")))
    assert [r["strategy"] for r in _rounds(tmp_path / "cold")] == ["typicality", "typicality", "badge", None]
    assert "Cold start: the batches were picked by typicality in the rounds trained on up to 30 labels" in overview
    run_experiment(LoopConfig(**{**base, "budget": 30}), tmp_path / "plain", progress=False, report=False)
    assert "Cold start" not in write_report(tmp_path / "plain").read_text()
