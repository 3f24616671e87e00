"""The report's sections: numbers from :mod:`activebayes.analysis`, figures from :mod:`activebayes.plots`.

Each section function takes the :class:`~activebayes.report._data.ReportData`
read from the directory and a :class:`Figures` helper that embeds a figure
(or a note saying why it is missing), and returns a
:class:`~activebayes.report._html.Section`. No aggregation happens here: over
seeds, numbers come from the analysis functions, pooled reliability bins from
:meth:`activebayes.metrics.ReliabilityBins.pool`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from activebayes import plots
from activebayes.analysis import (
    CLASSIC_TARGETS,
    LearningCurve,
    OverSeeds,
    StrategySummary,
    default_targets,
    final_metric,
    final_reliability,
    learning_curves_from_runs,
    per_round_mean,
    phase_seconds,
    summarise_strategy,
)
from activebayes.report import _figures
from activebayes.report._data import DatasetUnavailable, ReportData
from activebayes.report._stopping import stopping
from activebayes.report._html import Figure, Section, esc, figures_block, note, paragraph, preformatted, table

# metric names as evaluate_classification stores them (prefixed with the split: test_accuracy, ...)
FINAL_METRICS = {"accuracy": "accuracy", "macro F1": "f1_macro", "NLL": "nll", "Brier": "brier"}
# a multi-label run's (activebayes.metrics.multilabel.evaluate_multilabel); "accuracy" is its headline, micro-F1
MULTILABEL_FINAL_METRICS = {"micro-F1": "accuracy", "macro F1": "macro_f1", "samples F1": "samples_f1",
                            "Hamming loss": "hamming_loss", "subset accuracy": "subset_accuracy", "NLL": "nll"}
ECE_POOLED = "ECE (pooled over seeds)"
ECE_MEAN = "ECE (mean ± sd over seeds)"


class Figures:
    """Embeds figures: ``figures(key, caption, build)`` calls ``build()`` and returns a
    :class:`~activebayes.report._html.Figure` (a PNG, or why there is none)."""

    def __init__(self) -> None:
        self.no_matplotlib = _figures.matplotlib_missing()

    def __call__(self, key: str, caption: str, build: Callable[[], Any]) -> Figure:
        return _figures.render(key, caption, build, no_matplotlib=self.no_matplotlib)


# --------------------------------------------------------------------------- text helpers


def _fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def _fmt_labels(value: float | None) -> str:
    if value is None:
        return "not reached"
    return f"{value:g}" if value != int(value) else str(int(value))


def _mean_sd(stats: OverSeeds | None, digits: int = 4) -> str:
    """``"mean ± sd"`` over seeds (sample sd), or the one value of a single seed."""
    if stats is None:
        return "—"
    if stats.n_seeds == 1:
        return _fmt(float(stats.values_S[0]), digits)
    return f"{stats.mean:.{digits}f} ± {stats.std:.{digits}f}"


def _seeds_text(n_seeds: int, seeds: Sequence[int], how: str = "mean") -> str:
    return f"seed {seeds[0]}" if n_seeds == 1 else f"{how} over {n_seeds} seeds"


def _titled(figure: Any, title: str) -> Any:
    """Prefix the main axes' title (figures of several strategies sit side by side)."""
    if figure is not None and getattr(figure, "axes", None):
        ax = figure.axes[0]
        ax.set_title(f"{title}: {ax.get_title()}" if ax.get_title() else title)
    return figure


def _or_note(figures: Sequence[Figure]) -> str:
    return figures_block(figures) if figures else note("No finished rounds yet.")


# --------------------------------------------------------------------------- learning curves


class Curves:
    """The headline learning curves and their summaries, per strategy."""

    def __init__(self, data: ReportData, targets: Sequence[float] | None) -> None:
        runs = {(run.strategy, run.seed): (run.config, run.rounds) for rs in data.runs.values() for run in rs}
        self.curves: dict[str, list[LearningCurve]] = learning_curves_from_runs(runs, metric=data.key("accuracy"))
        #: whether the targets were read from the curves (none given and 90% out of reach)
        self.targets = tuple(default_targets(self.curves) if targets is None else targets)
        self.targets_from_curves = targets is None and self.targets != CLASSIC_TARGETS
        self.summaries: dict[str, StrategySummary] = {
            s: summarise_strategy(c, targets=self.targets, strategy=s) for s, c in self.curves.items()
        }


def _cold_start_sentence(data: ReportData) -> str:
    """What the first rounds used, read from the rounds' records (one sentence, or nothing)."""
    used: dict[str, int] = {}  # cold-start strategy -> the largest label count it acquired at
    for runs in data.runs.values():
        for run in runs:
            cold = run.config.cold_start if run.config is not None else None
            for record in run.rounds:
                if cold is not None and record.strategy == cold and record.strategy != run.strategy:
                    used[cold] = max(used.get(cold, 0), record.n_labelled)
    if not used:
        return ""
    parts = ", ".join(f"{name} in the rounds trained on up to {n} labels" for name, n in used.items())
    return f" Cold start: the batches were picked by {parts}, by each run's strategy after that."


def _missing_sentence(data: ReportData) -> str:
    """Which runs comparison.json lists that are not there (one sentence, or nothing)."""
    if not data.missing:
        return ""
    absent = [s for s in data.listed_strategies if s not in data.runs]
    named = "; ".join(f"{strategy} seed {seed} ({strategy}/seed_{seed})" for strategy, seed in data.missing)
    gone = f" No run at all of {', '.join(absent)}." if absent else ""
    return (f" Missing: comparison.json lists {len(data.missing)} run(s) that are not in the directory (not "
            f"started, or deleted): {named}.{gone} They are left out of every table and figure.")


def _unfinished_note(data: ReportData) -> str:
    """A note naming the runs that have not stopped (their curves are shorter), or nothing."""
    unfinished = data.unfinished()
    if not unfinished:
        return ""
    named = ", ".join(f"{run.label} ({run.rounds[-1].n_labelled} labels so far)" if run.rounds
                      else f"{run.label} (no round finished yet)" for run in unfinished)
    return note(f"Not finished: {named}. Their curves end early: labels to reach, AULC and final values of these "
                "seeds cover fewer labels than a finished run's (they are marked in the AULC table).")


def overview(data: ReportData, curves: Curves) -> Section:
    n_runs = sum(len(r) for r in data.runs.values())
    kind = "comparison" if data.is_comparison else "single run"
    dataset = data.data_label()
    strategies = data.listed_strategies
    parts = [paragraph(
        f"{kind.capitalize()} of {len(strategies)} strateg{'y' if len(strategies) == 1 else 'ies'} "
        f"({', '.join(strategies)}), {n_runs} run(s), {dataset}. Accuracy below is {data.split} {data.metric_name}; "
        "'labels' counts every labelled item the round's model was trained on, the initial set included."
        + _cold_start_sentence(data) + _missing_sentence(data)
    ), _unfinished_note(data)]
    rows = []
    for strategy, runs in data.runs.items():
        for run in runs:
            last = run.rounds[-1] if run.rounds else None
            accuracy = (last.metrics or {}).get(data.key("accuracy")) if last else None
            seconds = sum(sum((r.seconds or {}).values()) for r in run.rounds)
            stop = next((r.stop_reason for r in reversed(run.rounds) if r.stop_reason), None)
            rows.append([
                strategy, str(run.seed), str(len(run.rounds)), str(last.n_labelled) if last else "—",
                _fmt(accuracy), stop or ("not finished" if run.rounds else "no rounds yet"), f"{seconds:.1f}",
            ])
    parts.append(table(["strategy", "seed", "rounds", "final labels", f"final {data.split} {data.metric_name}",
                        "stop reason", "seconds"], rows))
    if not curves.curves:
        parts.append(note("No finished rounds with an accuracy yet: nothing to plot or summarise."))
    return Section("overview", "Overview", "".join(parts))


def learning_curves(data: ReportData, curves: Curves, figures: Figures) -> Section:
    body = paragraph(
        f"Number of labels against {data.split} {data.metric_name} after each round; one line per strategy: the mean "
        "over seeds, with a band from the lowest to the highest seed (on the label range all seeds share)."
    )
    if not curves.curves:
        return Section("learning-curves", "Learning curves", body + note("No learning curves yet."))
    pairs = {s: [(c.n_labelled_R, c.accuracy_R) for c in cs] for s, cs in curves.curves.items()}
    figure = figures(
        "learning-curves", f"Labels vs {data.split} {data.metric_name} (mean over seeds; band: min–max over seeds)",
        lambda: plots.learning_curves(pairs, spread="minmax", ylabel=f"{data.split} {data.metric_name}",
                                      title="Learning curves"),
    )
    return Section("learning-curves", "Learning curves", body + figures_block([figure]))


def labels_to_reach(data: ReportData, curves: Curves) -> Section:
    explain = paragraph(
        "Labels needed to first reach each target accuracy (the first round whose model reaches it). "
        "Median over seeds, with the interquartile range and the min–max range; a seed that never "
        "reached the target counts as needing more labels than the budget, so a median or quartile that "
        "falls on such a seed is shown as 'not reached'."
        + (" No run reached 0.9 here, so the targets are read from the mean curve of random (without "
           "random, of the strategy with the lowest area under its curve): its value at about half the "
           "budget and at the budget, rounded down to two decimals. `activebayes report --targets` sets others."
           if curves.targets_from_curves else "")
    )
    title = "Labels to reach target accuracy"
    if not curves.summaries:
        return Section("labels-to-reach", title, explain + note("No data yet."))
    header = ["strategy"] + [f"{data.split} {data.metric_name} ≥ {t:g}" for t in curves.targets]
    rows = []
    for strategy, summary in curves.summaries.items():
        row = [esc(strategy)]
        best = max(c.accuracy_R.max() for c in curves.curves[strategy])
        for target in curves.targets:
            reach = summary.reach[target]
            if reach.n_seeds == 1:
                cell = esc(_fmt_labels(reach.values_S[0]))
                if reach.n_reached == 0:
                    cell += f'<br><span class="muted">best {esc(data.metric_name)}: {best:.4f}</span>'
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
                    extra.append(f"best {data.metric_name} of any seed: {best:.4f}")
                cell += f'<br><span class="muted">{esc("; ".join(extra))}</span>'
            row.append(cell)
        rows.append(row)
    return Section("labels-to-reach", title, explain + table(header, rows, raw=True))


def aulc(data: ReportData, curves: Curves) -> Section:
    explain = paragraph(
        "Area under the learning curve: the trapezoid integral of accuracy over the number of labels, "
        "divided by the label range, i.e. the mean accuracy over the labelling budget (higher is better). "
        "Mean ± sample standard deviation over seeds."
    )
    title = "Area under the learning curve"
    if not curves.summaries:
        return Section("aulc", title, explain + note("No data yet."))
    rows = []
    for strategy, summary in curves.summaries.items():
        rows.append([
            strategy, str(summary.n_seeds), _mean_sd(OverSeeds(np.asarray(summary.aulc_S))),
            ", ".join(f"{v:.4f}" for v in summary.aulc_S),
            _mean_sd(OverSeeds(np.asarray(summary.final_accuracy_S))),
            ", ".join(map(str, sorted(set(summary.final_n_labelled_S)))),
            _unfinished_seeds(data, curves, strategy),
        ])
    header = ["strategy", "seeds", "AULC", "AULC per seed", f"final {data.split} {data.metric_name}", "final labels",
              "not finished"]
    return Section("aulc", title, explain + table(header, rows))


def _unfinished_seeds(data: ReportData, curves: Curves, strategy: str) -> str:
    """The strategy's summarised seeds whose run has not stopped (``"seed 0 (20 labels)"``), or ``"—"``."""
    finished = {run.seed: run.finished for run in data.runs.get(strategy, [])}
    named = [f"seed {c.seed} ({c.final_n_labelled} labels)" for c in curves.curves[strategy]
             if not finished.get(c.seed, True)]
    return ", ".join(named) or "—"


# --------------------------------------------------------------------------- final-round metrics


def _ece_header(data: ReportData) -> str:
    return ECE_MEAN if data.max_seeds > 1 else "ECE"


def final_metrics(data: ReportData) -> Section:
    several = data.max_seeds > 1
    explain = paragraph(
        f"{data.split.capitalize()} metrics of each run's last round"
        + (" (mean ± sample standard deviation over seeds)" if several else "")
        + ". Macro-F1 is the mean of the per-class F1 scores; NLL, Brier score and ECE (15 equal-width "
        "confidence bins) measure calibration, lower is better."
        + (" The ECE here is each seed's own ECE, averaged; Calibration also shows the ECE of the bins "
           "pooled over seeds." if several else "")
    )
    multilabel = data.headline != "accuracy"
    if multilabel:
        explain = paragraph(f"{data.split.capitalize()} multi-label metrics of each run's last round (predicted "
                            "label: mean sigmoid >= 0.5). Micro-F1 pools every label decision; macro-F1 is the "
                            "mean of the per-class F1; samples F1 the mean per-item F1; NLL the summed binary "
                            "cross-entropy per item.")
    metrics = MULTILABEL_FINAL_METRICS if multilabel else FINAL_METRICS
    rows = []
    for strategy in data.runs:
        rounds_per_seed = data.rounds_per_seed(strategy)
        if not rounds_per_seed:
            continue
        row = [strategy, str(len(rounds_per_seed))]
        row += [_mean_sd(final_metric(rounds_per_seed, data.key(name))) for name in metrics.values()]
        if not multilabel:
            row.append(_mean_sd(final_metric(rounds_per_seed, data.key("ece"))))
        rows.append(row)
    if not rows:
        return Section("final-metrics", "Final metrics", explain + note("No finished rounds yet."))
    header = ["strategy", "seeds", *metrics] + ([] if multilabel else [_ece_header(data)])
    return Section("final-metrics", "Final metrics", explain + table(header, rows))


def calibration(data: ReportData, figures: Figures) -> Section:
    several = data.max_seeds > 1
    explain = paragraph(
        f"Reliability of each strategy's final-round models: the {data.split} items binned by top-label "
        "confidence (15 equal-width bins), the accuracy of each bin against its mean confidence. "
        "With n_b of the N items in bin b, acc_b their accuracy and conf_b their mean confidence, the "
        "expected calibration error is ECE = Σ_b (n_b / N) · |acc_b − conf_b|, the count-weighted mean gap, "
        "and the maximum calibration error is MCE = max_b |acc_b − conf_b| over the non-empty bins, the "
        "largest gap in any one bin (both 0 for a calibrated model, lower is better)."
        + (f" {ECE_POOLED}: the seeds' bins added together (items, summed confidence, summed correct), "
           f"then one ECE, as drawn in the diagram; MCE (pooled) is the MCE of the same pooled bins. "
           f"{ECE_MEAN}: each seed's own ECE, averaged, as under "
           f"Final metrics. With one {data.split} set, pooling can only cancel gaps (a seed's over-confidence "
           "against another's under-confidence in the same bin), so the pooled ECE is at most the mean."
           if several else "")
    )
    rows, figure_list = [], []
    for strategy in data.runs:
        runs = data.finished_runs(strategy)
        rounds_per_seed = data.rounds_per_seed(strategy)
        bins = final_reliability(rounds_per_seed, data.key("reliability"))
        if bins is None:
            continue
        per_seed = final_metric(rounds_per_seed, data.key("ece"))
        seeds = [run.seed for run in runs]
        if several:
            rows.append([strategy, str(len(runs)), str(bins.num_items), _fmt(bins.ece), _mean_sd(per_seed),
                         _fmt(bins.mce)])
            label = f"{ECE_POOLED} {bins.ece:.4f}" if len(runs) > 1 else f"ECE {bins.ece:.4f} (seed {seeds[0]})"
        else:
            rows.append([strategy, str(bins.num_items), _fmt(bins.ece), _fmt(bins.mce)])
            label = f"ECE {bins.ece:.4f}"
        caption = (f"{strategy}: reliability of the final round ({_seeds_text(len(runs), seeds, 'bins pooled')}); "
                   f"{label}")

        def build(bins=bins, strategy=strategy, label=label):
            figure = plots.reliability_diagram(bins)
            figure.axes[0].set_title(f"{strategy}: reliability, final round\n{label}")
            return figure

        figure_list.append(figures(f"reliability-{strategy}", caption, build))
    if not rows:
        return Section("calibration", "Calibration", explain + note(f"Skipped: {_no_bins_reason(data)}."))
    if several:
        header = ["strategy", "seeds", "test items (all seeds)", ECE_POOLED, ECE_MEAN, "MCE (pooled)"]
    else:
        header = ["strategy", "test items", "ECE", "MCE"]
    if data.split != "test":
        header = [h.replace("test items", f"{data.split} items") for h in header]
    return Section("calibration", "Calibration", explain + table(header, rows) + figures_block(figure_list))


def _no_bins_reason(data: ReportData) -> str:
    if data.max_seeds == 0:
        return "no finished rounds yet"
    if data.headline != "accuracy":
        return "a multi-label run records no reliability bins nor ECE (no single top label to calibrate)"
    if any(final_metric(data.rounds_per_seed(s), data.key("ece")) is not None for s in data.runs):
        return "the run records hold no reliability bins (only the ECE, shown under Final metrics)"
    return "the run records hold no reliability bins nor ECE"


# --------------------------------------------------------------------------- classes


def _num_classes(data: ReportData, metrics: Sequence[str] = ("recall",)) -> int | None:
    """C, read from the first of ``metrics``' per-class values a final round holds."""
    for metric in metrics:
        for strategy in data.runs:
            stats = final_metric(data.rounds_per_seed(strategy), data.key(f"{metric}_per_class"))
            if stats is not None:
                return int(stats.values_S.shape[1])
    return None


def _per_class_metrics(data: ReportData) -> tuple[str, ...]:
    """What Per-class shows: precision and recall; for a multi-label run its F1 (``f1_per_class``),
    with precision and recall where the records hold them."""
    if data.headline == "accuracy":
        return ("precision", "recall")
    held = tuple(m for m in ("precision", "recall") if _num_classes(data, (m,)) is not None)
    return (*held, "f1")


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def class_balance(data: ReportData, figures: Figures) -> Section:
    figure_list = []
    for strategy in data.runs:
        runs = data.finished_runs(strategy)
        if not runs:
            continue
        counts = per_round_mean(data.rounds_per_seed(strategy), lambda r: r.class_counts)
        caption = (f"{strategy}: labelled-set class counts per round "
                   f"({_seeds_text(len(runs), [r.seed for r in runs])})")

        def build(counts=counts, strategy=strategy):
            if counts is None:
                raise _figures.FigureSkipped("the rounds hold no class counts")
            names = data.class_names(counts.mean_R.shape[1])
            return _titled(plots.class_balance(counts.mean_R, n_labelled=counts.n_labelled_R, class_names=names),
                           strategy)

        figure_list.append(figures(f"class-balance-{strategy}", caption, build))
    return Section("class-balance", "Labelled-set class balance", _or_note(figure_list))


def per_class(data: ReportData, figures: Figures) -> Section:
    multilabel = data.headline != "accuracy"
    metrics = _per_class_metrics(data)
    names_shown = _and([plots.metric_label(m) for m in metrics])
    C = _num_classes(data, metrics)
    parts = []
    if C is not None:
        names = data.class_names(C) or [str(c) for c in range(C)]
        how = ("each class its own yes / no decision, predicted when its mean sigmoid is >= 0.5; "
               "F1 = 2 TP / (2 TP + FP + FN), 0 for a class neither present nor predicted; their mean over "
               "classes is the macro-F1 under Final metrics" if multilabel else "one class against the rest")
        parts.append(paragraph(
            f"Per-class {data.split} {names_shown} ({how}): the table shows the final round, the figures every "
            f"round, both as the mean over seeds. {data.class_names_note(C)}"
        ))
        header = ["class", f"{data.split} items with the class" if multilabel else f"{data.split} items"]
        columns = []
        support = None
        for strategy in data.runs:
            rounds_per_seed = data.rounds_per_seed(strategy)
            finals = [final_metric(rounds_per_seed, data.key(f"{m}_per_class")) for m in metrics]
            support = support if support is not None else final_metric(rounds_per_seed, data.key("support_per_class"))
            if any(stats is None for stats in finals):
                continue
            header.append(f"{strategy}: {' / '.join(plots.metric_label(m) for m in metrics)}")
            means = [np.atleast_1d(stats.mean) for stats in finals]
            columns.append([" / ".join(f"{v:.3f}" for v in values) for values in zip(*means, strict=True)])
        items = [str(int(v)) for v in support.values_S[0]] if support is not None else ["—"] * C
        rows = [[names[c], items[c], *(column[c] for column in columns)] for c in range(C)]
        parts.append(table(header, rows))
    figure_list = []
    for strategy in data.runs:
        runs = data.finished_runs(strategy)
        if not runs:
            continue
        for metric in metrics:
            values = per_round_mean(data.rounds_per_seed(strategy),
                                    lambda r, m=metric: (r.metrics or {}).get(data.key(f"{m}_per_class")))
            caption = (f"{strategy}: per-class {data.split} {plots.metric_label(metric)} per round "
                       f"({_seeds_text(len(runs), [r.seed for r in runs])})")

            def build(values=values, metric=metric, strategy=strategy):
                if values is None:
                    raise _figures.FigureSkipped(f"the rounds hold no per-class {plots.metric_label(metric)}")
                return _titled(plots.per_class_over_rounds(
                    values.mean_R, metric=metric, n_labelled=values.n_labelled_R,
                    class_names=data.class_names(values.mean_R.shape[1]),
                    # multi-label: each label its own yes / no decision, not one class against the rest
                    title=f"{plots.metric_label(metric)} per class" if multilabel else None,
                ), strategy)

            figure_list.append(figures(f"per-class-{metric}-{strategy}", caption, build))
    parts.append(_or_note(figure_list))
    return Section("per-class", f"Per-class {names_shown}", "".join(parts))


def confusion(data: ReportData, figures: Figures) -> Section:
    figure_list = []
    for strategy in data.runs:
        runs = data.finished_runs(strategy)
        matrices = final_metric(data.rounds_per_seed(strategy), data.key("confusion_matrix"))
        if matrices is None:
            continue
        which = f"summed over {matrices.n_seeds} seeds" if matrices.n_seeds > 1 else f"seed {runs[0].seed}"
        caption = f"{strategy}: {data.split} confusion matrix of the final round ({which}; rows: true class)"
        cm_C_C = np.rint(matrices.total).astype(np.int64)

        def build(cm_C_C=cm_C_C, strategy=strategy):
            names = data.class_names(cm_C_C.shape[0])
            return _titled(plots.confusion_matrix_plot(cm_C_C, class_names=names), strategy)

        figure_list.append(figures(f"confusion-{strategy}", caption, build))
    if not figure_list and data.max_seeds > 0:
        why = ("a multi-label run has no confusion matrix (an item may have several labels)"
               if data.headline != "accuracy" else "the final rounds' records hold no confusion matrix")
        return Section("confusion", "Confusion matrix", note(f"Not shown: {why}."))
    return Section("confusion", "Confusion matrix", _or_note(figure_list))


def acquired(data: ReportData, figures: Figures) -> Section:
    figure_list = []
    for strategy in data.runs:
        runs = data.finished_runs(strategy)
        run = runs[0] if runs else None
        record = next((r for r in reversed(run.rounds) if r.acquired), None) if run else None
        if record is None:
            continue
        caption = (f"{strategy}, seed {run.seed}: the {len(record.acquired)} items acquired in round "
                   f"{record.round} (after training on {record.n_labelled} labels), with their class counts")

        def build(run=run, record=record, strategy=strategy):
            try:
                images = data.thumbnails(record.acquired)
                names = list(data.dataset().classes)
            except DatasetUnavailable as reason:
                raise _figures.FigureSkipped(str(reason)) from None
            labels = np.asarray(record.labels, dtype=np.int64) if record.labels else None
            if labels is not None and labels.ndim != 1:  # multi-label answers: the images alone
                labels = None
            return plots.image_grid(
                images, labels=labels, class_names=names,
                title=f"{strategy}, seed {run.seed}: acquired in round {record.round}",
            )

        figure_list.append(figures(f"acquired-{strategy}", caption, build))
    return Section("acquired", "Acquired items", _or_note(figure_list))


# --------------------------------------------------------------------------- time and configuration


def _phases(data: ReportData) -> tuple[str, ...]:
    """The phases the table shows: :data:`_figures.PHASES`, then any other the records time."""
    recorded = {name for runs in data.runs.values() for run in runs for r in run.rounds for name in (r.seconds or {})}
    return _figures.PHASES + tuple(sorted(recorded - set(_figures.PHASES)))


def timing(data: ReportData, figures: Figures) -> Section:
    per_round, rows = {}, []
    phases = _phases(data)
    for strategy in data.runs:
        seconds = phase_seconds(data.rounds_per_seed(strategy), phases)
        if seconds is None:
            continue
        per_round[strategy] = seconds.per_round.mean_R
        totals_P = np.atleast_1d(seconds.totals.mean)
        rows.append([strategy, *(f"{v:.2f}" for v in totals_P), f"{seconds.totals.values_S.sum(1).mean():.2f}"])
    if not per_round:
        return Section("time", "Time per round", note("No finished rounds yet."))
    figure = figures("time-per-round", "Seconds per round by phase (mean over seeds)",
                     lambda: _figures.seconds_per_round(per_round))
    text = paragraph("Total seconds per run by phase (mean over seeds); the total is every phase's, as in the "
                     "Overview.")
    return Section("time", "Time per round",
                   figures_block([figure]) + text + table(["strategy", *phases, "total"], rows))


def configuration(data: ReportData) -> Section:
    what = "comparison.json (base config, strategies, seeds)" if data.is_comparison else "config.json"
    return Section("config", "Configuration", paragraph(f"From {what}:") + preformatted(data.config_text))


def sections(data: ReportData, targets: Sequence[float] | None, *, progress: bool = False) -> list[Section]:
    """Every section of the page, in order; ``progress``: a bar over them while they are drawn."""
    figures = Figures()
    curves = Curves(data, targets)
    builders: list[tuple[str, Callable[[], Section]]] = [
        ("overview", lambda: overview(data, curves)),
        ("learning curves", lambda: learning_curves(data, curves, figures)),
        ("stopping", lambda: stopping(data, figures)),
        ("labels to reach", lambda: labels_to_reach(data, curves)),
        ("AULC", lambda: aulc(data, curves)),
        ("final metrics", lambda: final_metrics(data)),
        ("calibration", lambda: calibration(data, figures)),
        ("class balance", lambda: class_balance(data, figures)),
        ("per class", lambda: per_class(data, figures)),
        ("confusion", lambda: confusion(data, figures)),
        ("acquired", lambda: acquired(data, figures)),
        ("time", lambda: timing(data, figures)),
        ("configuration", lambda: configuration(data)),
    ]
    result = []
    with tqdm(total=len(builders), desc="report", unit="section", leave=False, disable=not progress) as bar:
        for name, build in builders:
            bar.set_postfix_str(name)
            result.append(build())
            bar.update()
    if figures.no_matplotlib is not None:
        first = result[0]
        result[0] = Section(first.key, first.title,
                            note(f"This report has no figures: {figures.no_matplotlib}.") + first.body)
    return result
