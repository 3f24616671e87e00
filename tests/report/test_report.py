"""The HTML report: sections, embedded PNGs, tables against independent NumPy numbers, escaping, atomicity."""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from synthetic_runs import write_comparison, write_run

from activebayes.rundir import RunDirectoryError
from activebayes.loop import LoopConfig
from activebayes.report import write_report

SECTIONS = ("overview", "learning-curves", "labels-to-reach", "aulc", "final-metrics", "calibration",
            "class-balance", "per-class", "confusion", "acquired", "time", "config")
# figure key prefix -> the activebayes.plots function drawing it (None: drawn by the report itself)
FIGURE_FUNCTIONS = {
    "learning-curves": "learning_curves",
    "reliability-": "reliability_diagram",
    "class-balance-": "class_balance",
    "per-class-": "per_class_over_rounds",
    "confusion-": "confusion_matrix_plot",
    "acquired-": "image_grid",
    "time-per-round": None,
}
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _figure_slots(html: str) -> dict[str, str]:
    """``data-figure key -> "img" or the skip text`` for every figure slot on the page."""
    slots = {}
    for match in re.finditer(r'<figure data-figure="([^"]+)"><img src="data:image/png;base64,([^"]+)"', html):
        slots[match.group(1)] = "img"
    for match in re.finditer(r'<div class="skipped" data-figure="([^"]+)">(.*?)</div>', html):
        slots[match.group(1)] = match.group(2)
    return slots


def _rounds(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "rounds.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def comparison_html(comparison_dir: Path, comparison_report: Path) -> str:
    assert comparison_report == comparison_dir / "report.html"
    return comparison_report.read_text(encoding="utf-8")


def test_comparison_report_has_every_section(comparison_html):
    for key in SECTIONS:
        assert f'<section id="{key}">' in comparison_html, key
        assert f'href="#{key}"' in comparison_html  # in the table of contents
    assert comparison_html.startswith("<!DOCTYPE html>")


def test_one_embedded_png_per_figure(comparison_html):
    slots = _figure_slots(comparison_html)
    # 1 learning-curve figure + per strategy (2): reliability, class balance, precision, recall,
    # confusion, acquired images; + 1 time-per-round figure
    assert len(slots) == 1 + 2 * 6 + 1
    images = re.findall(r'<img src="data:image/png;base64,([^"]+)"', comparison_html)
    assert len(images) == sum(v == "img" for v in slots.values()) == comparison_html.count("<img")
    for data in images:
        png = base64.b64decode(data, validate=True)
        assert png.startswith(PNG_SIGNATURE) and png[12:16] == b"IHDR"
        width, height = np.frombuffer(png[16:24], dtype=">u4")
        assert 100 < width < 3000 and 100 < height < 3000
    # self-contained: nothing fetched from elsewhere, no scripts
    assert not re.search(r'(src|href)="(https?:|//|file:)', comparison_html)
    assert "<script" not in comparison_html and "<link" not in comparison_html


def test_figures_render_wherever_their_plot_function_exists(comparison_html):
    import activebayes.plots as plots

    slots = _figure_slots(comparison_html)
    assert slots["time-per-round"] == "img"
    for key, state in slots.items():
        function = next(f for prefix, f in FIGURE_FUNCTIONS.items() if key.startswith(prefix))
        if function is None or hasattr(plots, function):
            assert state == "img", f"{key}: {state}"
        else:
            assert f"activebayes.plots.{function} is not available" in state


def test_labels_to_reach_and_aulc_tables_match_numpy(comparison_dir, comparison_html):
    for strategy in ("bald", "random"):
        curves = []
        for seed in (0, 1):
            rounds = _rounds(comparison_dir / strategy / f"seed_{seed}")
            curves.append((np.array([r["n_labelled"] for r in rounds]),
                           np.array([r["metrics"]["test_accuracy"] for r in rounds])))
        areas = [np.trapezoid(acc, n) / (n[-1] - n[0]) if hasattr(np, "trapezoid") else np.trapz(acc, n) / (n[-1] - n[0])
                 for n, acc in curves]
        assert f"{np.mean(areas):.4f} ± {np.std(areas, ddof=1):.4f}" in comparison_html
        finals = [acc[-1] for _, acc in curves]
        assert f"{np.mean(finals):.4f} ± {np.std(finals, ddof=1):.4f}" in comparison_html
        section = comparison_html.split('<section id="labels-to-reach">')[1].split("</section>")[0]
        row = section.split(f"<td>{strategy}</td>")[1].split("</tr>")[0]
        for target in (0.9, 0.95):
            reached = [int(n[np.argmax(acc >= target)]) for n, acc in curves if (acc >= target).any()]
            if len(reached) == 2:
                assert f"<strong>{np.median(reached):g}</strong>" in row
                assert "reached by 2/2 seeds" in row
            elif not reached:
                best = max(acc.max() for _, acc in curves)
                assert "<strong>not reached</strong>" in row and "reached by 0/2 seeds" in row
                assert f"best accuracy of any seed: {best:.4f}" in row


def test_final_metrics_table_matches_the_records(comparison_dir, comparison_html):
    section = comparison_html.split('<section id="final-metrics">')[1].split("</section>")[0]
    for strategy in ("bald", "random"):
        finals = [_rounds(comparison_dir / strategy / f"seed_{s}")[-1]["metrics"] for s in (0, 1)]
        for key in ("test_accuracy", "test_f1_macro", "test_nll", "test_brier", "test_ece"):
            values = [m[key] for m in finals]
            assert f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}" in section, key


def test_single_run_report(single_run_dir):
    html = write_report(single_run_dir, targets=(0.8,)).read_text()
    for key in SECTIONS:
        assert f'<section id="{key}">' in html
    assert "Single run of 1 strategy (batchbald)" in html
    rounds = _rounds(single_run_dir)
    n = np.array([r["n_labelled"] for r in rounds])
    acc = np.array([r["metrics"]["test_accuracy"] for r in rounds])
    expected = f"{int(n[np.argmax(acc >= 0.8)])}" if (acc >= 0.8).any() else "not reached"
    section = html.split('<section id="labels-to-reach">')[1].split("</section>")[0]
    assert f"<td>{expected}</td>" in section and "accuracy ≥ 0.8" in section
    assert "&quot;strategy&quot;: &quot;batchbald&quot;" in html  # the run's config (escaped)
    slots = _figure_slots(html)
    assert len(slots) == 1 + 6 + 1
    assert html.count("<img") == sum(v == "img" for v in slots.values())


def test_text_is_escaped(tmp_path, fast_figures):
    hostile = '<b onmouseover="x">&amp;'
    config = LoopConfig(dataset="digits", strategy=hostile, seed=0, initial_size=20, batch_size=10, budget=40)
    run = write_run(tmp_path / "run", config, rounds=2)
    records = _rounds(run)
    records[-1]["stop_reason"] = "<i>stopped</i>"
    (run / "rounds.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    html = write_report(run).read_text()
    assert hostile not in html and "<i>stopped</i>" not in html
    assert "&lt;b onmouseover=&quot;x&quot;&gt;&amp;amp;" in html
    assert "&lt;i&gt;stopped&lt;/i&gt;" in html


def test_report_without_matplotlib(comparison_dir, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    html = write_report(comparison_dir, output=tmp_path / "plain.html").read_text()
    assert "<img" not in html
    assert "This report has no figures: matplotlib is not installed" in html
    for key in SECTIONS:
        assert f'<section id="{key}">' in html
    assert "Labels to reach" in html and "± " in html  # the tables are still there


def test_dataset_that_cannot_be_loaded_skips_only_the_image_grid(tmp_path, fast_figures):
    config = LoopConfig(dataset="mnist", data_dir=str(tmp_path / "nowhere"), strategy="bald", seed=0,
                        initial_size=20, batch_size=10, budget=40)
    run = write_run(tmp_path / "run", config, rounds=3)
    html = write_report(run).read_text()
    slots = _figure_slots(html)
    assert "could not be loaded" in slots["acquired-bald"]
    assert slots["time-per-round"] == "img"


def test_run_without_rounds_yet(tmp_path):
    run = tmp_path / "fresh"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(LoopConfig().to_dict()))
    html = write_report(run).read_text()
    assert "No finished rounds with an accuracy yet" in html
    assert "<img" not in html


def test_write_is_atomic(comparison_dir, tmp_path, monkeypatch):
    import activebayes.report._report as report_module

    monkeypatch.setattr(report_module._Report, "html", lambda self: "<html>new</html>")
    out = tmp_path / "sub" / "r.html"
    assert write_report(comparison_dir, output=out) == out
    assert out.read_text() == "<html>new</html>"
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]  # no temp file left

    # a failure while replacing leaves the old report and no temp file
    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(report_module._Report, "html", lambda self: "<html>newer</html>")
    monkeypatch.setattr("os.replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_report(comparison_dir, output=out)
    assert out.read_text() == "<html>new</html>"
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.html"]


def test_bad_arguments(tmp_path, comparison_dir):
    with pytest.raises(FileNotFoundError, match="run or comparison directory"):
        write_report(tmp_path / "missing")
    with pytest.raises(RunDirectoryError, match="neither a run directory"):
        write_report(tmp_path)
    with pytest.raises(ValueError, match=r"targets must be an accuracy in \(0, 1\]"):
        write_report(comparison_dir, targets=(0.9, 95))
    with pytest.raises(TypeError, match="targets"):
        write_report(comparison_dir, targets="0.9")
    with pytest.raises(ValueError, match="at least one"):
        write_report(comparison_dir, targets=())


def test_comparison_with_a_missing_run(tmp_path, fast_figures):
    """A comparison still running: one (strategy, seed) has no directory yet."""
    cmp_dir = write_comparison(tmp_path / "cmp", strategies=("bald",), seeds=(0, 1), rounds=3)
    data = json.loads((cmp_dir / "comparison.json").read_text())
    data["seeds"].append(2)
    (cmp_dir / "comparison.json").write_text(json.dumps(data))
    html = write_report(cmp_dir).read_text()
    assert "2/2 seeds" in html or "not reached" in html
    assert '<section id="labels-to-reach">' in html
