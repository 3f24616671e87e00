"""Every plot writes a non-empty PNG headless, returns a Figure, draws into a given ax, and shows its data."""

from __future__ import annotations

import doctest
import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from activebayes import metrics as M
from activebayes import plots as P

matplotlib = pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _save_and_check(fig, tmp_path, name):
    assert isinstance(fig, Figure)
    path = P.save_figure(fig, tmp_path / "sub" / f"{name}.png")
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1000
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left
    return path


def test_learning_curves_mean_and_band_over_seeds_with_different_grids(tmp_path):
    curves = {
        "bald": [([20, 30, 40, 50], [0.60, 0.70, 0.80, 0.85]), ([20, 35, 50], [0.62, 0.76, 0.87])],
        "random": [([20, 40, 60], [0.55, 0.65, 0.72]), ([20, 40, 60], [0.57, 0.67, 0.70])],
        "entropy": [(np.array([20, 50]), torch.tensor([0.6, 0.8]))],
    }
    fig = P.learning_curves(curves, spread="minmax")
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == len(curves)  # one line per strategy
    # bald's mean line sits on the union grid of both seeds within the common range
    x, y = lines[0].get_data()
    assert list(x) == [20, 30, 35, 40, 50]
    seed2_at_30 = 0.62 + (0.76 - 0.62) * (30 - 20) / (35 - 20)
    assert y[1] == pytest.approx((0.70 + seed2_at_30) / 2)
    assert len(ax.collections) == 2  # bands for the two strategies with > 1 seed
    assert [t.get_text() for t in ax.get_legend().get_texts()][0] == "bald (n=2)"
    _save_and_check(fig, tmp_path, "learning_curves")


def test_learning_curves_keep_every_strategy_distinct_past_the_colour_cycle():
    # 11 strategies (the label-efficiency benchmark's) and tab10's 10 colours: no two lines alike
    curves = {f"s{i}": [([20, 30], [0.5, 0.6 + i / 100])] for i in range(23)}
    lines = P.learning_curves(curves).axes[0].get_lines()
    looks = [(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in lines]
    assert len(set(looks)) == len(curves)
    assert looks[0] == (matplotlib.colors.to_hex("C0"), "-") and looks[10][1] == "--"


def test_aggregate_curves_against_numpy_interp():
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(4):
        x = np.sort(rng.choice(np.arange(10, 200), size=12, replace=False))
        runs.append((x, rng.random(12)))
    band = P.aggregate_curves(runs)
    lo, hi = max(r[0][0] for r in runs), min(r[0][-1] for r in runs)
    assert band.x[0] == lo and band.x[-1] == hi
    ys = np.stack([np.interp(band.x, x, y) for x, y in runs])
    np.testing.assert_allclose(band.mean, ys.mean(0))
    np.testing.assert_allclose(band.std, ys.std(0, ddof=1))
    np.testing.assert_allclose(band.min, ys.min(0))
    with pytest.raises(ValueError, match="overlap"):
        P.aggregate_curves([([1, 2], [0.1, 0.2]), ([3, 4], [0.1, 0.2])])
    with pytest.raises(ValueError, match="repeats"):
        P.aggregate_curves([([1, 1], [0.1, 0.2])])


def test_class_balance_and_per_class_over_rounds(tmp_path):
    counts = np.array([[2, 2, 2], [3, 5, 2], [6, 7, 2]])
    fig = P.class_balance(counts, n_labelled=counts.sum(1))
    lines = fig.axes[0].get_lines()
    assert len(lines) == 3
    assert list(lines[1].get_ydata()) == [2, 5, 7] and list(lines[1].get_xdata()) == [6, 10, 15]
    _save_and_check(fig, tmp_path, "balance")

    # confusion matrices over rounds -> per-class recall, as seed 000 computes it
    rng = np.random.default_rng(1)
    cms = rng.integers(0, 9, (5, 4, 4))
    fig = P.per_class_over_rounds(cms, metric="recall")
    tp = cms.diagonal(axis1=-2, axis2=-1)
    expected = tp / cms.sum(-1)
    for c, line in enumerate(fig.axes[0].get_lines()):
        np.testing.assert_allclose(line.get_ydata(), expected[:, c])
    assert fig.axes[0].get_title() == "Recall (one-vs-rest)"
    _save_and_check(fig, tmp_path, "recall")
    values = rng.random((5, 4))
    fig = P.per_class_over_rounds(values, metric="precision", class_names=list("abcd"))
    np.testing.assert_allclose(fig.axes[0].get_lines()[2].get_ydata(), values[:, 2])
    fig = P.per_class_over_rounds(values, metric="f1", n_labelled=[8, 14, 20, 26, 32])  # a multi-label run's
    np.testing.assert_allclose(fig.axes[0].get_lines()[1].get_ydata(), values[:, 1])
    assert list(fig.axes[0].get_lines()[1].get_xdata()) == [8, 14, 20, 26, 32]
    assert (fig.axes[0].get_ylabel(), fig.axes[0].get_title()) == ("F1", "F1 (one-vs-rest)")
    with pytest.raises(ValueError, match="class_names"):
        P.per_class_over_rounds(values, class_names=["a"])


def test_image_grid_title_has_class_counts(tmp_path):
    gen = torch.Generator().manual_seed(0)
    images_B_1_H_W = torch.rand(10, 1, 28, 28, generator=gen)
    labels_B = torch.tensor([0, 1, 1, 3, 3, 3, 9, 9, 1, 0])
    fig = P.image_grid(images_B_1_H_W, labels=labels_B, title="# 30 (Acc.) 71.0%", num_classes=10)
    title = fig.axes[0].get_title()
    counts = np.bincount(labels_B.numpy(), minlength=10)
    assert title == "# 30 (Acc.) 71.0%\n10 items — class counts: 0×2, 1×3, 3×3, 9×2\nnone of class 2, 4, 5, 6, 7, 8"
    shown = dict(part.split("×") for part in title.split("\n")[1].split(": ", 1)[1].split(", "))
    assert {int(k): int(v) for k, v in shown.items()} == {c: int(n) for c, n in enumerate(counts) if n}
    image = fig.axes[0].get_images()[0].get_array()
    assert image.shape == (3 * 29 + 1, 4 * 29 + 1)  # ceil(sqrt(10)) = 4 columns, 3 rows, 1 px padding
    _save_and_check(fig, tmp_path, "grid")
    fig = P.image_grid(np.random.default_rng(0).random((3, 8, 8, 3)), ncols=3)
    assert fig.axes[0].get_images()[0].get_array().shape == (10, 28, 3)
    with pytest.raises(ValueError, match="one entry per image"):
        P.image_grid(images_B_1_H_W, labels=[0, 1])
    with pytest.raises(ValueError, match="images must be"):
        P.image_grid(np.zeros((2, 5, 8, 8)))


def test_diagnostic_plots(tmp_path):
    rng = np.random.default_rng(2)
    N, C = 300, 3
    logits = rng.normal(size=(N, C)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = rng.integers(0, C, N)

    cm = M.confusion_matrix(y, probs)
    fig = P.confusion_matrix_plot(cm, class_names=["a", "b", "c"])
    texts = sorted(int(t.get_text()) for t in fig.axes[0].texts)
    assert texts == sorted(cm.flatten().tolist())
    _save_and_check(fig, tmp_path, "cm")
    fig = P.confusion_matrix_plot(cm, normalize="true")
    diag = [float(fig.axes[0].texts[i * C + i].get_text()) for i in range(C)]
    np.testing.assert_allclose(diag, M.recall_score(y, probs, average=None).numpy(), atol=5e-3)

    bins = M.reliability_bins(y, probs, num_bins=10)
    fig = P.reliability_diagram(bins)
    assert f"{bins.ece:.3f}" in fig.axes[0].get_title()
    bars = fig.axes[0].containers[0]
    assert len(bars) == int((bins.counts > 0).sum())
    _save_and_check(fig, tmp_path, "reliability")
    fig2 = P.reliability_diagram(predictions=probs, targets=y, num_bins=10)
    assert fig2.axes[0].get_title() == fig.axes[0].get_title()

    s = probs[:, 1]
    yb = (y == 1).astype(int)
    fpr, tpr, _ = M.roc_curve(yb, s)
    fig = P.roc_plot(fpr, tpr, auc=M.roc_auc_score(yb, s), label="model")
    assert "AUC" in fig.axes[0].get_legend().get_texts()[0].get_text()
    _save_and_check(fig, tmp_path, "roc")
    pr = M.precision_recall_curve(yb, s)
    fig = P.pr_plot(pr.recall, pr.precision, ap=M.average_precision_score(yb, s), prevalence=yb.mean())
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), pr.precision.numpy())
    _save_and_check(fig, tmp_path, "pr")


def test_drawing_into_given_axes(tmp_path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 8))
    axes = fig.subplots(2, 3).flatten()
    assert P.learning_curves({"a": [([1, 2], [0.1, 0.2])]}, ax=axes[0]) is fig
    assert P.class_balance([[1, 2], [2, 2]], ax=axes[1]) is fig
    assert P.image_grid(np.zeros((2, 4, 4)), labels=[0, 1], ax=axes[2]) is fig
    assert P.confusion_matrix_plot([[1, 0], [0, 1]], ax=axes[3]) is fig
    assert P.roc_plot([0, 1], [0, 1], ax=axes[4]) is fig
    assert P.roc_plot([0, 0, 1], [0, 1, 1], ax=axes[4]) is fig  # overlay: one chance line only
    assert len(axes[4].get_lines()) == 3
    assert P.pr_plot([1, 0], [0.5, 1], ax=axes[5]) is fig
    assert len(axes[0].get_lines()) == 1 and axes[2].get_title() == "2 items — class counts: 0×1, 1×1"
    _save_and_check(fig, tmp_path, "panel")


def test_save_figure_is_atomic_on_failure(tmp_path, monkeypatch):
    fig = P.roc_plot([0, 1], [0, 1])
    target = tmp_path / "roc.png"
    P.save_figure(fig, target)
    before = target.read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(fig, "savefig", boom)
    with pytest.raises(RuntimeError):
        P.save_figure(fig, target)
    assert target.read_bytes() == before  # old file intact, no temp file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["roc.png"]


def test_a_png_is_saved_with_a_palette_that_keeps_the_picture(tmp_path):
    """256 colours: every pixel within a few levels of the full-colour rendering, and smaller."""
    from PIL import Image

    fig = P.roc_plot([0, 0.2, 0.5, 1], [0, 0.6, 0.8, 1])
    small = P.save_figure(fig, tmp_path / "small.png")
    full = P.save_figure(fig, tmp_path / "full.png", palette=False)
    with Image.open(small) as a, Image.open(full) as b:
        assert a.mode == "P" and b.mode == "RGBA" and a.size == b.size
        difference = np.abs(np.asarray(a.convert("RGBA"), dtype=int) - np.asarray(b, dtype=int))
    assert np.percentile(difference, 99) <= 16 and difference.mean() < 1.5  # 16 of 255 levels at the edges
    assert small.stat().st_size < full.stat().st_size


def test_headless_without_display_and_no_import_time_matplotlib():
    code = (
        "import sys, activebayes.plots as P, activebayes.metrics as M;"
        "assert 'matplotlib' not in sys.modules;"
        "M.evaluate_classification([[0.9, 0.1], [0.2, 0.8]], [0, 1], num_classes=2);"
        "assert 'matplotlib' not in sys.modules and 'torchmetrics' not in sys.modules;"
        "fig = P.class_balance([[1, 2], [3, 4]]);"
        "import matplotlib.pyplot as plt; assert plt.get_fignums() == []"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


@pytest.mark.parametrize("module", ["_base", "curves", "images", "diagnostics"])
def test_plot_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(f"activebayes.plots.{module}"))
    assert result.attempted > 0 and result.failed == 0


def test_the_plotted_band_is_the_analysis_mean_curve_where_seeds_share_their_label_counts():
    from activebayes.analysis import mean_learning_curve

    rng = np.random.default_rng(3)
    x = np.arange(20, 160, 10)
    runs = [(x, rng.random(x.size)) for _ in range(5)]
    band, mean = P.aggregate_curves(runs), mean_learning_curve(runs)
    np.testing.assert_array_equal(band.x, mean.n_labelled_P)
    for plotted, analysed in ((band.mean, mean.mean_P), (band.std, mean.std_P), (band.min, mean.min_P),
                              (band.max, mean.max_P)):
        np.testing.assert_allclose(plotted, analysed, rtol=1e-12)
    assert band.num_seeds == mean.n_seeds == 5
    np.testing.assert_array_equal(P.aggregate_curves(runs[:1]).std, np.zeros(x.size))
