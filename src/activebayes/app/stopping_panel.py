"""What the dashboard's stopping panel shows: the latest round's stopping signals in plain words.

The loop measures every signal of :mod:`activebayes.stopping` each round and stores them
with the round's proposal (``signals``: ``value``, ``fired``, ``detail``). This turns them
into sentences with the numbers behind them, and one verdict: whether the recommended
criterion (:data:`~activebayes.stopping.DEFAULT_CRITERION`) or one the project stops on says to
stop. The other signals are shown, not obeyed: on the benchmarks they stop too early more
often (docs/concepts/stopping.md). The page only writes these strings as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from activebayes.stopping import (
    DEFAULT_CRITERION,
    ESTIMATED_ACCURACY,
    EXPECTED_ACCURACY,
    INFORMATION,
    REMAINING_CHANGE,
    STABLE_PREDICTIONS,
    stable_predictions_means,
)

#: signal -> its heading on the panel
TITLES = {
    REMAINING_CHANGE: "Predictions settled (recommended)",
    STABLE_PREDICTIONS: "Predictions stable",
    ESTIMATED_ACCURACY: "Accuracy from audited answers",
    INFORMATION: "Information left in the pool",
    EXPECTED_ACCURACY: "The model's own accuracy estimate",
}

#: a multi-label project's headings where they differ: the signals compare label decisions,
#: the model's estimate is of its micro-F1 and an audited answer counts when its whole label set is right
MULTILABEL_TITLES = {
    **TITLES,
    REMAINING_CHANGE: "Label decisions settled (recommended)",
    STABLE_PREDICTIONS: "Label decisions stable",
    ESTIMATED_ACCURACY: "Exact label sets, from audited answers",
    EXPECTED_ACCURACY: "The model's own micro-F1 estimate",
}


def _first_information(history: Sequence[Mapping[str, Any] | None]) -> float | None:
    for signals in history:
        value = ((signals or {}).get(INFORMATION) or {}).get("value")
        if value is not None:
            return float(value)
    return None


def stopping_state(signals: Mapping[str, Any] | None, history: Sequence[Mapping[str, Any] | None], *,
                   round: int | None, n_labelled: int | None, stop_when: Sequence[str] = (),
                   multilabel: bool = False) -> dict[str, Any]:
    """The panel's content for the latest ``signals`` (``history``: the signals of the rounds before;
    ``multilabel``: a multi-label project's headings, :data:`MULTILABEL_TITLES`).

    Returns ``{"round", "n_labelled", "stop", "fired", "verdict", "signals": [...]}``; each
    signal: ``name``, ``title``, ``text`` (the loop's sentence), ``fired``, ``value`` (for stable
    predictions the mean kappa over the window, which the criterion compares, and ``round_value``
    this round's kappa) and, where they exist, ``low`` / ``high`` / ``n`` (the estimated accuracy's interval and answers) or
    ``ratio`` (the pool's information over the first model's).
    """
    signals = signals or {}
    titles = MULTILABEL_TITLES if multilabel else TITLES

    def short(name: str) -> str:
        return titles[name].removesuffix(" (recommended)").lower()

    rows = []
    for name, title in titles.items():
        signal = signals.get(name) or {}
        row: dict[str, Any] = {"name": name, "title": title, "fired": bool(signal.get("fired")),
                               "value": signal.get("value"),
                               "text": str(signal.get("detail") or "not measured yet")}
        for key in ("low", "high", "n"):
            if signal.get(key) is not None:
                row[key] = signal[key]
        if name == STABLE_PREDICTIONS and signal:  # the number compared with the threshold: the window's mean
            row["round_value"] = signal.get("value")
            row["value"] = stable_predictions_means([*history, signals])[-1]
        if name == INFORMATION and signal.get("value") is not None:
            first = _first_information([*history, signals])
            row["ratio"] = float(signal["value"]) / first if first else None
        rows.append(row)
    fired = [row["name"] for row in rows if row["fired"]]
    chosen = [str(s).partition("=")[0].strip().replace("-", "_") for s in stop_when]
    deciding = [DEFAULT_CRITERION, *(name for name in chosen if name != DEFAULT_CRITERION)]
    says_stop = [name for name in deciding if name in fired]
    if not signals:
        verdict = "No stopping signals yet: they are measured once the first model is trained."
    elif says_stop:
        names = ", ".join(short(name) for name in says_stop)
        verdict = f"Yes, you can stop labelling ({names})."
        if any(name in chosen for name in says_stop):
            verdict += " The project's stop_when criterion fired, so no new batch is picked."
    elif fired:
        names = ", ".join(short(name) for name in fired)
        settling = "label decisions" if multilabel else "predictions"
        verdict = (f"Not yet: the {settling} have not settled ({names} fired, but alone that stops too early "
                   "more often).")
    else:
        verdict = "Not yet: no criterion says to stop; keep labelling."
    return {"round": round, "n_labelled": n_labelled, "stop": bool(says_stop), "fired": fired, "verdict": verdict,
            "stop_when": chosen, "signals": rows}
