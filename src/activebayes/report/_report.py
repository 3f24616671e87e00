"""Assemble the HTML report of a run or comparison directory (see :func:`write_report`)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from activebayes.analysis import (
    LearningCurve,
    StrategySummary,
    _check_target,
    learning_curves_from_runs,
    summarise_strategy,
)
from activebayes.report import _figures
from activebayes.rundir import headline_metric, is_comparison, load_runs, read_config_text
from activebayes.report._html import Figure, Section, esc, figures_block, note, page, paragraph, preformatted, table

DEFAULT_FILE = "report.html"

# metric keys written by activebayes.metrics.evaluate_classification (first match wins;
# the later spellings are accepted for records written by other versions)
_KEYS: dict[str, tuple[str, ...]] = {
    "accuracy": ("accuracy",),
    "macro F1": ("f1_macro", "macro_f1"),
    "NLL": ("nll", "log_loss"),
    "Brier": ("brier", "brier_score"),
    "ECE": ("ece", "expected_calibration_error"),
}
_PER_CLASS = {
    "precision": ("precision_per_class", "per_class_precision"),
    "recall": ("recall_per_class", "per_class_recall"),
}
_CONFUSION = ("confusion_matrix",)
_RELIABILITY = ("reliability", "reliability_bins", "reliability_diagram")


@dataclass(frozen=True)
class _Run:
    strategy: str
    seed: int
    config: Any  # LoopConfig
    rounds: list[Any]  # RoundRecord


def _lookup(metrics: Mapping[str, Any], prefix: str, names: Sequence[str]) -> Any:
    for name in names:
        value = metrics.get(prefix + name)
        if value is not None:
            return value
    return None


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def _fmt_labels(value: float | None) -> str:
    if value is None:
        return "not reached"
    return f"{value:g}" if value != int(value) else str(int(value))


def _mean_std_text(values: Sequence[float], digits: int = 4) -> str:
    if not values:
        return "—"
    array = np.asarray(values, dtype=np.float64)
    if array.size == 1:
        return _fmt(float(array[0]), digits)
    return f"{array.mean():.{digits}f} ± {array.std(ddof=1):.{digits}f}"


class _Report:
    """Collects the data of one directory and produces its sections."""

    def __init__(self, path: Path, targets: Sequence[float]) -> None:
        self.path = path
        self.targets = tuple(targets)
        self.is_comparison = is_comparison(path)
        loaded = load_runs(path)
        self.runs: dict[str, list[_Run]] = {}
        for (strategy, seed), (config, rounds) in loaded.items():
            self.runs.setdefault(str(strategy), []).append(_Run(str(strategy), int(seed), config, list(rounds)))
        for runs in self.runs.values():
            runs.sort(key=lambda run: run.seed)
        self.config_text = read_config_text(path)
        all_metrics = [r.metrics or {} for runs in self.runs.values() for run in runs for r in run.rounds]
        self.split = headline_metric(all_metrics).removesuffix("_accuracy")
        self.prefix = f"{self.split}_"
        self.curves: dict[str, list[LearningCurve]] = learning_curves_from_runs(loaded, metric=f"{self.prefix}accuracy")
        self.summaries: dict[str, StrategySummary] = {
            s: summarise_strategy(c, targets=self.targets, strategy=s) for s, c in self.curves.items()
        }
        self.no_matplotlib = _figures.matplotlib_missing()
        self._dataset: Any = None
        self._dataset_error: str | None = None

    # ----------------------------------------------------------------- helpers

    def figure(self, key: str, caption: str, build: Callable[[], Any]) -> Figure:
        return _figures.render(key, caption, build, no_matplotlib=self.no_matplotlib)

    def runs_with_rounds(self, strategy: str) -> list[_Run]:
        return [run for run in self.runs[strategy] if run.rounds]

    def seeds_text(self, runs: Sequence[_Run], how: str = "mean") -> str:
        if len(runs) == 1:
            return f"seed {runs[0].seed}"
        return f"{how} over {len(runs)} seeds"

    def dataset(self, config: Any) -> Any:
        """The training split the acquired indices point into (loaded once; ``None`` if it cannot be)."""
        if self._dataset is None and self._dataset_error is None:
            try:
                from activebayes.data import load_dataset

                self._dataset = load_dataset(config.dataset, data_dir=config.data_dir, split="train")
            except Exception as error:  # missing files, no network, unknown dataset, ...
                self._dataset_error = f"the dataset {config.dataset!r} could not be loaded ({type(error).__name__}: {error})"
        if self._dataset is None:
            raise _figures.FigureSkipped(self._dataset_error)
        return self._dataset

    def class_names(self, num_classes: int) -> list[str] | None:
        """The dataset's class names when it loads and has ``num_classes`` classes, else ``None``."""
        first = next((run.config for runs in self.runs.values() for run in runs), None)
        if first is not None:
            try:
                self.dataset(first)
            except _figures.FigureSkipped:
                return None
        if self._dataset is not None and len(self._dataset.classes) == num_classes:
            return list(self._dataset.classes)
        return None

    def common_n_labelled(self, runs: Sequence[_Run]) -> np.ndarray | None:
        """``[R]`` label counts of the rounds every seed has, if the seeds agree on them."""
        length = min(len(run.rounds) for run in runs)
        counts = {tuple(r.n_labelled for r in run.rounds[:length]) for run in runs}
        return np.asarray(counts.pop()) if len(counts) == 1 else None

    def per_round(self, runs: Sequence[_Run], extract: Callable[[Any], Any]) -> np.ndarray | None:
        """``[R, ...]`` mean over seeds of ``extract(round)`` on the rounds every seed has."""
        length = min(len(run.rounds) for run in runs)
        stacks = []
        for run in runs:
            values = [extract(r) for r in run.rounds[:length]]
            if any(v is None for v in values):
                return None
            stacks.append(np.asarray(values, dtype=np.float64))
        if not stacks or stacks[0].size == 0 or any(s.shape != stacks[0].shape for s in stacks):
            return None
        return np.mean(stacks, axis=0)

    # ----------------------------------------------------------------- sections

    def overview(self) -> Section:
        n_runs = sum(len(r) for r in self.runs.values())
        first = next((run.config for runs in self.runs.values() for run in runs), None)
        parts = []
        kind = "comparison" if self.is_comparison else "single run"
        dataset = f"dataset {first.dataset}" if first is not None else "no runs"
        parts.append(paragraph(
            f"{kind.capitalize()} of {len(self.runs)} strateg{'y' if len(self.runs) == 1 else 'ies'} "
            f"({', '.join(self.runs)}), {n_runs} run(s), {dataset}. Accuracy below is {self.split} accuracy; "
            "'labels' counts every labelled item the round's model was trained on, the initial set included."
        ))
        rows = []
        for strategy, runs in self.runs.items():
            for run in runs:
                last = run.rounds[-1] if run.rounds else None
                acc = (last.metrics or {}).get(f"{self.prefix}accuracy") if last else None
                seconds = sum(sum((r.seconds or {}).values()) for r in run.rounds)
                stop = next((r.stop_reason for r in reversed(run.rounds) if r.stop_reason), None)
                rows.append([
                    strategy, str(run.seed), str(len(run.rounds)),
                    str(last.n_labelled) if last else "—", _fmt(acc),
                    stop or ("not finished" if run.rounds else "no rounds yet"), f"{seconds:.1f}",
                ])
        parts.append(table(["strategy", "seed", "rounds", "final labels", f"final {self.split} accuracy",
                            "stop reason", "seconds"], rows))
        if not self.curves:
            parts.append(note("No finished rounds with an accuracy yet: nothing to plot or summarise."))
        return Section("overview", "Overview", "".join(parts))

    def learning_curves(self) -> Section:
        body = paragraph(
            f"Number of labels against {self.split} accuracy after each round; one line per strategy: the mean "
            "over seeds, with a band of ± one standard deviation over seeds (on the label range all seeds share)."
        )
        if not self.curves:
            return Section("learning-curves", "Learning curves", body + note("No learning curves yet."))
        curves = {s: [(c.n_labelled_R, c.accuracy_R) for c in cs] for s, cs in self.curves.items()}
        fig = self.figure(
            "learning-curves", f"Labels vs {self.split} accuracy",
            lambda: _figures.plot_function("learning_curves")(curves, ylabel=f"{self.split} accuracy"),
        )
        return Section("learning-curves", "Learning curves", body + figures_block([fig]))

    def labels_to_reach(self) -> Section:
        explain = paragraph(
            "Labels needed to first reach each target accuracy (the first round whose model reaches it). "
            "Median over seeds, with the interquartile range and the min–max range; a seed that never "
            "reached the target counts as needing more labels than the budget, so a median or quartile that "
            "falls on such a seed is shown as 'not reached'."
        )
        if not self.summaries:
            return Section("labels-to-reach", "Labels to reach target accuracy", explain + note("No data yet."))
        header = ["strategy"] + [f"{self.split} accuracy ≥ {t:g}" for t in self.targets]
        rows = []
        for strategy, summary in self.summaries.items():
            row = [esc(strategy)]
            best = max(float(c.accuracy_R.max()) for c in self.curves[strategy])
            for t in self.targets:
                reach = summary.reach[t]
                if reach.n_seeds == 1:
                    cell = esc(_fmt_labels(reach.values_S[0]))
                    if reach.n_reached == 0:
                        cell += f'<br><span class="muted">best accuracy: {best:.4f}</span>'
                else:
                    cell = f"<strong>{esc(_fmt_labels(reach.median))}</strong>"
                    extra = []
                    if reach.minimum is not None and reach.minimum == reach.maximum:
                        extra.append(f"every seed: {reach.minimum}")
                    else:
                        if reach.median is not None:
                            extra.append(f"IQR {_fmt_labels(reach.q25)}–{_fmt_labels(reach.q75)}")
                        if reach.minimum is not None:
                            extra.append(f"range {_fmt_labels(reach.minimum)}–{_fmt_labels(reach.maximum)}")
                    extra.append(f"reached by {reach.n_reached}/{reach.n_seeds} seeds")
                    if reach.n_reached == 0:
                        extra.append(f"best accuracy of any seed: {best:.4f}")
                    cell += f'<br><span class="muted">{esc("; ".join(extra))}</span>'
                row.append(cell)
            rows.append(row)
        return Section("labels-to-reach", "Labels to reach target accuracy", explain + table(header, rows, raw=True))

    def aulc(self) -> Section:
        explain = paragraph(
            "Area under the learning curve: the trapezoid integral of accuracy over the number of labels, "
            "divided by the label range, i.e. the mean accuracy over the labelling budget (higher is better). "
            "Mean ± standard deviation over seeds."
        )
        if not self.summaries:
            return Section("aulc", "Area under the learning curve", explain + note("No data yet."))
        rows = []
        for strategy, summary in self.summaries.items():
            labels = sorted(set(summary.final_n_labelled_S))
            rows.append([
                strategy, str(summary.n_seeds), _mean_std_text(summary.aulc_S),
                ", ".join(f"{v:.4f}" for v in summary.aulc_S),
                _mean_std_text(summary.final_accuracy_S), ", ".join(map(str, labels)),
            ])
        header = ["strategy", "seeds", "AULC", "AULC per seed", f"final {self.split} accuracy", "final labels"]
        return Section("aulc", "Area under the learning curve", explain + table(header, rows))

    def final_metrics(self) -> Section:
        explain = paragraph(
            f"{self.split.capitalize()} metrics of each run's last round (mean ± standard deviation over seeds). "
            "Macro-F1 is the mean of the per-class F1 scores; NLL, Brier score and ECE (equal-width confidence bins) "
            "measure calibration, lower is better."
        )
        rows = []
        for strategy, runs in self.runs.items():
            finals = [run.rounds[-1].metrics or {} for run in runs if run.rounds]
            if not finals:
                continue
            row = [strategy]
            for keys in _KEYS.values():
                values = [v for v in (_lookup(m, self.prefix, keys) for m in finals) if v is not None]
                row.append(_mean_std_text(values))
            rows.append(row)
        if not rows:
            return Section("final-metrics", "Final metrics", explain + note("No finished rounds yet."))
        return Section("final-metrics", "Final metrics", explain + table(["strategy", *_KEYS], rows))

    def calibration(self) -> Section:
        figures = []
        for strategy in self.runs:
            runs = self.runs_with_rounds(strategy)
            bins = [_lookup(run.rounds[-1].metrics or {}, self.prefix, _RELIABILITY) for run in runs]
            bins = [b for b in bins if b is not None]
            caption = f"{strategy}: reliability diagram, final round ({self.seeds_text(runs, 'bins pooled')})"
            if not bins:
                continue
            figures.append(self.figure(
                f"reliability-{strategy}", caption,
                lambda bins=bins, strategy=strategy: _titled(
                    _figures.plot_function("reliability_diagram")(_pool_reliability(bins)), strategy),
            ))
        if not figures:
            return Section("calibration", "Calibration", note(
                "Skipped: the run records hold no reliability bins (only the ECE, shown under Final metrics)."
            ))
        return Section("calibration", "Calibration", figures_block(figures))

    def class_balance(self) -> Section:
        figures = []
        for strategy in self.runs:
            runs = self.runs_with_rounds(strategy)
            if not runs:
                continue
            counts = self.per_round(runs, lambda r: r.class_counts)
            caption = f"{strategy}: labelled-set class counts per round ({self.seeds_text(runs)})"

            def build(counts=counts, runs=runs, strategy=strategy):
                if counts is None:
                    raise _figures.FigureSkipped("the rounds hold no class counts")
                return _titled(_figures.plot_function("class_balance")(
                    counts, n_labelled=self.common_n_labelled(runs), class_names=self.class_names(counts.shape[1])
                ), strategy)

            figures.append(self.figure(f"class-balance-{strategy}", caption, build))
        return Section("class-balance", "Labelled-set class balance", _or_note(figures))

    def per_class(self) -> Section:
        figures = []
        for strategy in self.runs:
            runs = self.runs_with_rounds(strategy)
            if not runs:
                continue
            for metric, keys in _PER_CLASS.items():
                values = self.per_round(runs, lambda r, keys=keys: _lookup(r.metrics or {}, self.prefix, keys))
                caption = f"{strategy}: per-class {self.split} {metric} per round ({self.seeds_text(runs)})"

                def build(values=values, metric=metric, runs=runs, strategy=strategy):
                    if values is None:
                        raise _figures.FigureSkipped(f"the rounds hold no per-class {metric}")
                    return _titled(_figures.plot_function("per_class_over_rounds")(
                        values, metric=metric, n_labelled=self.common_n_labelled(runs),
                        class_names=self.class_names(values.shape[1]),
                    ), strategy)

                figures.append(self.figure(f"per-class-{metric}-{strategy}", caption, build))
        return Section("per-class", "Per-class precision and recall", _or_note(figures))

    def confusion(self) -> Section:
        figures = []
        for strategy in self.runs:
            runs = self.runs_with_rounds(strategy)
            matrices = [_lookup(run.rounds[-1].metrics or {}, self.prefix, _CONFUSION) for run in runs]
            matrices = [np.asarray(m, dtype=np.int64) for m in matrices if m is not None]
            if not matrices:
                continue
            summed = len({m.shape for m in matrices}) == 1
            cm = np.sum(matrices, axis=0) if summed else matrices[0]
            which = f"summed over {len(matrices)} seeds" if summed and len(matrices) > 1 else f"seed {runs[0].seed}"
            caption = f"{strategy}: {self.split} confusion matrix of the final round ({which}; rows: true class)"
            figures.append(self.figure(
                f"confusion-{strategy}", caption,
                lambda cm=cm, strategy=strategy: _titled(_figures.plot_function("confusion_matrix_plot")(
                    cm, class_names=self.class_names(cm.shape[0])), strategy),
            ))
        return Section("confusion", "Confusion matrix", _or_note(figures))

    def acquired(self) -> Section:
        figures = []
        for strategy in self.runs:
            runs = self.runs_with_rounds(strategy)
            run = runs[0] if runs else None
            record = next((r for r in reversed(run.rounds) if r.acquired), None) if run else None
            if record is None:
                continue
            caption = (f"{strategy}, seed {run.seed}: the {len(record.acquired)} items acquired in round "
                       f"{record.round} (after training on {record.n_labelled} labels), with their class counts")

            def build(run=run, record=record, strategy=strategy):
                dataset = self.dataset(run.config)
                images = _thumbnails(dataset, record.acquired)
                labels = np.asarray(record.labels, dtype=np.int64) if record.labels else None
                return _figures.plot_function("image_grid")(
                    images, labels=labels, title=f"{strategy}, round {record.round}",
                    num_classes=len(dataset.classes),
                )

            figures.append(self.figure(f"acquired-{strategy}", caption, build))
        return Section("acquired", "Acquired items", _or_note(figures))

    def timing(self) -> Section:
        seconds = {}
        rows = []
        for strategy in self.runs:
            runs = self.runs_with_rounds(strategy)
            if not runs:
                continue
            seconds[strategy] = _figures.stack_seconds([run.rounds for run in runs])
            totals_S_P = np.array([[sum(float((r.seconds or {}).get(p, 0.0)) for r in run.rounds)
                                    for p in _figures.PHASES] for run in runs])
            rows.append([strategy, *(f"{v:.2f}" for v in totals_S_P.mean(0)), f"{totals_S_P.sum(1).mean():.2f}"])
        if not seconds:
            return Section("time", "Time per round", note("No finished rounds yet."))
        caption = "Seconds per round by phase (mean over seeds)"
        fig = self.figure("time-per-round", caption, lambda: _figures.seconds_per_round(seconds))
        text = paragraph("Total seconds per run by phase (mean over seeds).")
        return Section("time", "Time per round", figures_block([fig]) + text +
                       table(["strategy", *_figures.PHASES, "total"], rows))

    def configuration(self) -> Section:
        what = "comparison.json (base config, strategies, seeds)" if self.is_comparison else "config.json"
        return Section("config", "Configuration", paragraph(f"From {what}:") + preformatted(self.config_text))

    def sections(self) -> list[Section]:
        sections = [self.overview(), self.learning_curves(), self.labels_to_reach(), self.aulc(), self.final_metrics(),
                    self.calibration(), self.class_balance(), self.per_class(), self.confusion(), self.acquired(),
                    self.timing(), self.configuration()]
        if self.no_matplotlib is not None:
            sections[0] = Section(sections[0].key, sections[0].title,
                                  note(f"This report has no figures: {self.no_matplotlib}.") + sections[0].body)
        return sections

    def html(self) -> str:
        kind = "comparison" if self.is_comparison else "run"
        return page(f"activebayes report: {self.path.resolve().name}", f"{kind} directory {self.path.resolve()}",
                    self.sections())


def _titled(figure: Any, strategy: str) -> Any:
    """Prefix the main axes' title with the strategy (figures of several strategies sit side by side)."""
    if figure is not None and getattr(figure, "axes", None):
        ax = figure.axes[0]
        ax.set_title(f"{strategy}: {ax.get_title()}" if ax.get_title() else strategy)
    return figure


def _or_note(figures: Sequence[Figure]) -> str:
    return figures_block(figures) if figures else note("No finished rounds yet.")


def _thumbnails(dataset: Any, indices: Sequence[int]) -> np.ndarray:
    """``[B, H, W]`` (or ``[B, H, W, 3]``) pixel values in [0, 1] of the given dataset items."""
    import torch

    index_B = torch.as_tensor(list(indices), dtype=torch.long)
    n_items = dataset.inputs.shape[0]
    if index_B.numel() and (int(index_B.min()) < 0 or int(index_B.max()) >= n_items):
        raise _figures.FigureSkipped(f"acquired indices fall outside the dataset ({n_items} items)")
    images = dataset.inputs[index_B].double()
    if images.ndim == 2:  # flat features: no picture to show
        raise _figures.FigureSkipped(f"the dataset items are not images (shape {tuple(dataset.inputs.shape[1:])})")
    if dataset.normalization is not None:
        mean, std = dataset.normalization
        images = images * std + mean
    else:  # per-image min-max
        flat = images.flatten(1)
        low, high = flat.min(1).values, flat.max(1).values
        shape = (-1,) + (1,) * (images.ndim - 1)
        images = (images - low.view(shape)) / (high - low).clamp(min=1e-12).view(shape)
    images = images.clamp(0, 1)
    if images.ndim == 4:  # [B, channels, H, W]
        images = images[:, 0] if images.shape[1] == 1 else images.permute(0, 2, 3, 1)
    return images.numpy()


def _pool_reliability(bins_list: Sequence[Mapping[str, Any]]) -> Any:
    """Pool stored reliability bins over seeds into one ``ReliabilityBins`` (count-weighted)."""
    import torch

    counts, conf_sums, correct_sums = [], [], []
    for bins in bins_list:
        if not isinstance(bins, Mapping):
            raise _figures.FigureSkipped(f"stored reliability bins have an unknown form ({type(bins).__name__})")
        bins = {key.removesuffix("_B"): value for key, value in bins.items()}  # count_B -> count, ...
        if bins.get("counts", bins.get("count")) is None:
            raise _figures.FigureSkipped(f"stored reliability bins have no counts (keys: {sorted(bins)})")
        count = np.asarray(bins.get("counts", bins.get("count")), dtype=np.float64)
        if "conf_sum" in bins and "correct_sum" in bins:
            conf_sum = np.asarray(bins["conf_sum"], dtype=np.float64)
            correct_sum = np.asarray(bins["correct_sum"], dtype=np.float64)
        else:
            conf = np.asarray([np.nan if v is None else v for v in bins["confidence"]], dtype=np.float64)
            acc = np.asarray([np.nan if v is None else v for v in bins["accuracy"]], dtype=np.float64)
            conf_sum = np.nan_to_num(conf) * count
            correct_sum = np.nan_to_num(acc) * count
        counts.append(count)
        conf_sums.append(conf_sum)
        correct_sums.append(correct_sum)
    if len({c.shape for c in counts}) != 1:
        raise _figures.FigureSkipped("the seeds stored different numbers of reliability bins")
    from activebayes.metrics.calibration import ReliabilityBins

    return ReliabilityBins.from_sums(
        torch.as_tensor(np.sum(counts, 0)), torch.as_tensor(np.sum(conf_sums, 0)), torch.as_tensor(np.sum(correct_sums, 0))
    )


def write_report(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    targets: Iterable[float] = (0.9, 0.95),
) -> Path:
    """Write one self-contained HTML report of a run or comparison directory.

    The page holds: an overview of the runs; learning curves (labels vs test
    accuracy, mean and spread over seeds, one line per strategy); the labels
    needed to reach each of ``targets`` (median, IQR and range over seeds, "not
    reached" shown as such; see :func:`activebayes.analysis.summarise_strategy`);
    the area under the learning curve; final test accuracy, macro-F1, NLL,
    Brier and ECE; a reliability diagram when bins were stored; the labelled
    set's class balance and per-class precision / recall over rounds; the
    final confusion matrix; a grid of one round's acquired images; time per
    round; and the configuration. Figures are PNGs embedded as base64 data
    URIs, so the file needs nothing else (no scripts, no external CSS). Without
    matplotlib (an optional extra) the report is written without figures and
    says so; a figure that cannot be drawn is replaced by a note with the reason.

    Args:
        path: a run directory (``config.json``) or comparison directory (``comparison.json``).
        output: HTML file to write; default ``<path>/report.html``.
        targets: accuracies in ``(0, 1]`` for the labels-needed table.

    Returns:
        The path written (atomically: temp file + ``os.replace``).

    Example::

        >>> from activebayes.report import write_report
        >>> write_report("runs/bald_vs_random")          # doctest: +SKIP
        PosixPath('runs/bald_vs_random/report.html')
    """
    from activebayes._io import atomic_write_text

    directory = Path(path)
    if not directory.is_dir():
        raise FileNotFoundError(f"path must be a run or comparison directory, got {str(path)!r} (no such directory)")
    if isinstance(targets, str | bytes):
        raise TypeError(f"targets must be a sequence of accuracies in (0, 1], got {targets!r}")
    target_list = tuple(dict.fromkeys(_check_target(t, "targets") for t in targets))
    if not target_list:
        raise ValueError("targets must hold at least one accuracy in (0, 1], got none")
    destination = Path(output) if output is not None else directory / DEFAULT_FILE
    html_text = _Report(directory, target_list).html()
    return atomic_write_text(destination, html_text)
