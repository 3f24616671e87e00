"""The report's stopping section: each no-test-set signal against labels, beside the learning curve.

Every round's record holds the signals of :mod:`activebayes.stopping` (``RoundRecord.signals``:
``value``, ``fired``, ``detail``), whether or not they stopped the run. The section plots
each signal's value against the labels, marks the rounds where it fired (against the run's
``stop_when`` threshold, or the default one), and says in words which criterion stopped
each run, at how many labels. Runs written before signals were recorded still render:
the section says so and keeps the stop sentence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from activebayes.records import RoundRecord
from activebayes.report._html import Section, esc, figures_block, note, paragraph, table
from activebayes.stopping import (
    ESTIMATED_ACCURACY,
    EXPECTED_ACCURACY,
    INFORMATION,
    REMAINING_CHANGE,
    SIGNAL_WINDOW,
    SIGNALS,
    STABLE_PREDICTIONS,
    largest_change,
    parse_stop_when,
    stable_predictions_means,
    stop_kind_of,
)

#: the signals, in the order they are drawn, and what each panel shows
SIGNAL_PANELS: dict[str, str] = {
    REMAINING_CHANGE: "predictions still to change (recommended)",
    STABLE_PREDICTIONS: "kappa of successive models, mean of 3 rounds",
    EXPECTED_ACCURACY: "expected accuracy (posterior)",
    INFORMATION: "pool's information / first model's",
    ESTIMATED_ACCURACY: "accuracy estimated from audits",
}
FIRED_COLOUR = "#c44e52"


@dataclass(frozen=True)
class SignalCurves:
    """One run's signals against labels, as recorded (``nan`` where a value was not measured).

    Attributes:
        seed: the run's seed.
        n_labelled_R: labels each round's model was trained on.
        accuracy_R: the headline accuracy of each round (``nan`` where missing).
        values: signal name -> ``[R]`` the value its criterion compares with the threshold: the
            recorded ``value``; for the stable predictions the mean kappa over the last 3 rounds
            (:func:`~activebayes.stopping.stable_predictions_means`), not the single round's.
        fired: signal name -> ``[R]`` the recorded ``fired``.
        low_R, high_R: the estimated accuracy's interval (``nan`` without audits).
        recorded: signal name -> whether any round recorded it (runs made before a signal
            existed did not).
    """

    seed: int
    n_labelled_R: np.ndarray
    accuracy_R: np.ndarray
    values: dict[str, np.ndarray]
    fired: dict[str, np.ndarray]
    low_R: np.ndarray
    high_R: np.ndarray
    recorded: dict[str, bool] = field(default_factory=dict)

    def first_fired(self, name: str) -> int | None:
        """Index of the first round where ``name`` fired (``None``: it never did)."""
        hits = np.flatnonzero(self.fired[name])
        return int(hits[0]) if hits.size else None


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def signal_curves(rounds: Sequence[RoundRecord], seed: int, accuracy_key: str) -> SignalCurves | None:
    """The recorded signals of one run's rounds, or ``None`` when no round recorded any
    (runs written before signals existed)."""
    if not any(r.signals for r in rounds):
        return None
    signals = [r.signals or {} for r in rounds]

    def column(name: str, key: str) -> np.ndarray:
        return np.array([_number(s.get(name, {}).get(key)) for s in signals], dtype=np.float64)

    return SignalCurves(
        seed=seed,
        n_labelled_R=np.array([r.n_labelled for r in rounds], dtype=np.int64),
        accuracy_R=np.array([_number((r.metrics or {}).get(accuracy_key)) for r in rounds], dtype=np.float64),
        values={name: (np.array([_number(v) for v in stable_predictions_means(signals)], dtype=np.float64)
                       if name == STABLE_PREDICTIONS else column(name, "value")) for name in SIGNAL_PANELS},
        fired={name: np.array([bool(s.get(name, {}).get("fired")) for s in signals]) for name in SIGNAL_PANELS},
        low_R=column(ESTIMATED_ACCURACY, "low"),
        high_R=column(ESTIMATED_ACCURACY, "high"),
        recorded={name: any(name in s for s in signals) for name in SIGNAL_PANELS},
    )


def window_change(values_R: np.ndarray) -> np.ndarray:
    """The expected-accuracy criterion's number each round: the largest change between
    successive values over the last :data:`~activebayes.stopping.SIGNAL_WINDOW` rounds
    (``nan`` until the window is full of measured values)."""
    change_R = np.full(len(values_R), np.nan)
    for r in range(SIGNAL_WINDOW, len(values_R)):
        change = largest_change([float(v) for v in values_R[r - SIGNAL_WINDOW: r + 1]])
        change_R[r] = math.nan if change is None else change
    return change_R


def thresholds_of(config: Any) -> dict[str, float | None]:
    """Each signal's threshold in a run: its ``stop_when`` one, else the default."""
    chosen = parse_stop_when(getattr(config, "stop_when", ()) or ())
    return {name: chosen.get(name, SIGNALS[name][0]) for name in SIGNAL_PANELS}


def stop_sentence(strategy: str, seed: int, rounds: Sequence[RoundRecord]) -> str:
    """Which criterion stopped the run, at how many labels, and why, in words."""
    if not rounds:
        return f"{strategy}, seed {seed}: no finished rounds yet."
    last = rounds[-1]
    kind = stop_kind_of(last)
    if kind is None:
        return f"{strategy}, seed {seed}: not stopped yet ({last.n_labelled} labels so far)."
    return f"{strategy}, seed {seed}: stopped by {kind} at {last.n_labelled} labels ({last.stop_reason})."


def stopping_figure(strategy: str, runs: Sequence[SignalCurves], thresholds: dict[str, float | None],
                    split: str, *, metric_name: str = "accuracy") -> Any:
    """The learning curve and one panel per signal, against labels, one line per seed.

    Filled red markers: rounds where the signal fired; a dotted vertical line at the
    first such round, also drawn on the learning curve so the accuracy there shows.
    The information panel divides by the run's first measured value (the criterion's
    ratio), the stable predictions' panel shows the mean kappa over the last 3 rounds (what
    its criterion compares); the estimated accuracy is drawn with its interval. A signal no
    run measured gets a panel that says so instead of empty axes. ``metric_name`` is how the
    headline reads (``"micro-F1"`` for a multi-label run).
    """
    from matplotlib.figure import Figure as MplFigure  # optional dependency

    fig = MplFigure(figsize=(3.3 * (1 + len(SIGNAL_PANELS)), 3.0), layout="constrained")
    axes = fig.subplots(1, 1 + len(SIGNAL_PANELS), squeeze=False).ravel()
    curve_ax = axes[0]
    for run in runs:
        curve_ax.plot(run.n_labelled_R, run.accuracy_R, marker="o", ms=3, lw=1.5, label=f"seed {run.seed}")
    curve_ax.set_title(f"{strategy}: {split} {metric_name}")
    curve_ax.set_ylabel(f"{split} {metric_name}")
    for ax, (name, title) in zip(axes[1:], SIGNAL_PANELS.items(), strict=True):
        threshold = thresholds.get(name)
        ax.set_title(f"{name}\n{title}", fontsize="medium")
        if not any(np.isfinite(run.values[name]).any() for run in runs):
            ax.text(0.5, 0.5, f"not measured in {'this run' if len(runs) == 1 else 'these runs'}",
                    transform=ax.transAxes, ha="center", va="center", color="grey")
            ax.set_yticks([])
            ax.set_xlim(curve_ax.get_xlim())  # the labels of the learning curve beside it, not 0 to 1
            continue
        for i, run in enumerate(runs):
            colour = f"C{i % 10}"
            y = run.values[name]
            if name == INFORMATION:
                finite = y[np.isfinite(y)]
                y = y / finite[0] if finite.size and finite[0] > 0 else y * math.nan
            ax.plot(run.n_labelled_R, y, marker="o", ms=3, lw=1.5, color=colour)
            if name == ESTIMATED_ACCURACY:
                ax.fill_between(run.n_labelled_R, run.low_R, run.high_R, color=colour, alpha=0.15, lw=0)
            hits = run.fired[name]
            if hits.any():
                ax.plot(run.n_labelled_R[hits], y[hits], ls="none", marker="o", ms=7, color=FIRED_COLOUR,
                        label="fired" if i == 0 else None)
            first = run.first_fired(name)
            if first is not None:
                for target in (ax, curve_ax):
                    target.axvline(run.n_labelled_R[first], color=FIRED_COLOUR, ls=":", lw=1)
        if threshold is not None and name in (REMAINING_CHANGE, STABLE_PREDICTIONS, INFORMATION, ESTIMATED_ACCURACY):
            ax.axhline(threshold, color="grey", ls="--", lw=1, label=f"threshold {threshold:g}")
        if name == EXPECTED_ACCURACY:  # its criterion compares the change over the window, not the value
            change_ax = ax.twinx()
            for i, run in enumerate(runs):
                change_ax.plot(run.n_labelled_R, window_change(run.values[name]), ls="--", lw=1,
                               color=f"C{i % 10}", alpha=0.6)
            if threshold is not None:
                change_ax.axhline(threshold, color="grey", ls=":", lw=1)
            change_ax.set_ylabel(f"dashed: largest change over {SIGNAL_WINDOW} rounds (stop below "
                                 f"{threshold:g}, dotted)" if threshold is not None else
                                 f"dashed: largest change over {SIGNAL_WINDOW} rounds", fontsize="x-small")
        if any(h for h in ax.get_legend_handles_labels()[1]):
            ax.legend(fontsize="x-small", loc="best")
    if len(runs) > 1:
        curve_ax.legend(fontsize="x-small", loc="lower right")
    for ax in axes:
        ax.set_xlabel("labels")
        ax.grid(alpha=0.3)
    return fig


def _first_cell(run: SignalCurves, name: str, split: str, metric_name: str = "accuracy") -> str:
    if not run.recorded.get(name, True):
        return "not recorded"
    first = run.first_fired(name)
    if first is None:
        return "never" if np.isfinite(run.values[name]).any() else "not measured"
    accuracy = run.accuracy_R[first]
    where = f"{int(run.n_labelled_R[first])} labels"
    return where if math.isnan(accuracy) else f"{where} ({split} {metric_name} {accuracy:.4f})"


def stopping(data: Any, figures: Any) -> Section:
    """The "When to stop" section of the report."""
    title = "When to stop"
    explain = paragraph(
        "Signals that need no labelled held-out items, measured every round whether or not they stop the run "
        "(see the docs' 'When to stop labelling'): the share of the stop set's predictions still expected to "
        "change within the horizon beyond retraining noise (the recommended criterion), the kappa between "
        "successive models' predictions on a fixed stop set (plotted as its criterion compares it: the mean over "
        "the last 3 rounds), the posterior's expected accuracy, the pool's total information as a share of the first "
        "model's, and the accuracy estimated from uniformly drawn audit answers with its 90% interval. "
        "Red markers: rounds where a signal fired (against the run's stop_when threshold, or the default); a "
        "dotted line at the first, drawn on the learning curve too."
    )
    sentences, rows, figure_list = [], [], []
    legacy, unmeasured = [], []
    for strategy, runs in data.runs.items():
        curves = []
        for run in runs:
            if not run.rounds:
                continue
            sentences.append(stop_sentence(strategy, run.seed, run.rounds))
            found = signal_curves(run.rounds, run.seed, data.key("accuracy"))
            if found is None:
                (unmeasured if run.config.stop_set_size == 0 else legacy).append(f"{strategy}, seed {run.seed}")
                continue
            curves.append(found)
            rows.append([strategy, str(run.seed),
                         *(_first_cell(found, name, data.split, data.metric_name) for name in SIGNAL_PANELS)])
        if curves:
            thresholds = thresholds_of(runs[0].config)
            caption = (f"{strategy}: {data.split} {data.metric_name} and each stopping signal against labels "
                       f"({'seed ' + str(curves[0].seed) if len(curves) == 1 else f'{len(curves)} seeds'}); "
                       "red: where a signal fired")

            def build(strategy=strategy, curves=curves, thresholds=thresholds):
                return stopping_figure(strategy, curves, thresholds, data.split, metric_name=data.metric_name)

            figure_list.append(figures(f"stopping-{strategy}", caption, build))
    body = explain
    if sentences:
        body += "<ul class=\"stops\">" + "".join(f"<li>{esc(s)}</li>" for s in sentences) + "</ul>"
    if rows:
        body += paragraph("Where each signal would have fired first:")
        body += table(["strategy", "seed", *SIGNAL_PANELS], rows)
    if legacy:
        body += note(f"No stopping signals recorded for {', '.join(legacy)}: written before activebayes "
                     "recorded them; only the stop reason is shown.")
    if unmeasured:
        body += note(f"No stopping signals measured for {', '.join(unmeasured)}: run without a stop set "
                     "(--stop-set-size 0); only the stop reason is shown.")
    if not sentences:
        body += note("No finished rounds yet.")
    body += figures_block(figure_list) if figure_list else ""
    return Section("stopping", title, body)


__all__ = ["SIGNAL_PANELS", "SignalCurves", "signal_curves", "stop_sentence", "stopping", "stopping_figure",
           "thresholds_of", "window_change"]
