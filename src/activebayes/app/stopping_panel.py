"""What the dashboard's stopping panel shows: the latest round's stopping signals in plain words.

The loop measures every signal of :mod:`activebayes.stopping` each round and stores them
with the round's proposal (``signals``: ``value``, ``fired``, ``detail``). This turns them
into sentences with the numbers behind them, and one verdict: whether any criterion says
to stop. The page only writes these strings as text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from activebayes.stopping import ESTIMATED_ACCURACY, EXPECTED_ACCURACY, INFORMATION, STABLE_PREDICTIONS

#: signal -> its heading on the panel
TITLES = {
    STABLE_PREDICTIONS: "Predictions stable",
    ESTIMATED_ACCURACY: "Accuracy from audited answers",
    INFORMATION: "Information left in the pool",
    EXPECTED_ACCURACY: "The model's own accuracy estimate",
}


def _first_information(history: Sequence[Mapping[str, Any] | None]) -> float | None:
    for signals in history:
        value = ((signals or {}).get(INFORMATION) or {}).get("value")
        if value is not None:
            return float(value)
    return None


def stopping_state(signals: Mapping[str, Any] | None, history: Sequence[Mapping[str, Any] | None], *,
                   round: int | None, n_labelled: int | None, stop_when: Sequence[str] = ()) -> dict[str, Any]:
    """The panel's content for the latest ``signals`` (``history``: the signals of the rounds before).

    Returns ``{"round", "n_labelled", "stop", "fired", "verdict", "signals": [...]}``; each
    signal: ``name``, ``title``, ``text`` (the loop's sentence), ``fired``, ``value`` and, where
    they exist, ``low`` / ``high`` / ``n`` (the estimated accuracy's interval and answers) or
    ``ratio`` (the pool's information over the first model's).
    """
    signals = signals or {}
    rows = []
    for name, title in TITLES.items():
        signal = signals.get(name) or {}
        row: dict[str, Any] = {"name": name, "title": title, "fired": bool(signal.get("fired")),
                               "value": signal.get("value"),
                               "text": str(signal.get("detail") or "not measured yet")}
        for key in ("low", "high", "n"):
            if signal.get(key) is not None:
                row[key] = signal[key]
        if name == INFORMATION and signal.get("value") is not None:
            first = _first_information([*history, signals])
            row["ratio"] = float(signal["value"]) / first if first else None
        rows.append(row)
    fired = [row["name"] for row in rows if row["fired"]]
    chosen = [str(s).partition("=")[0].strip().replace("-", "_") for s in stop_when]
    if not signals:
        verdict = "No stopping signals yet: they are measured once the first model is trained."
    elif fired:
        names = ", ".join(TITLES[name].lower() for name in fired)
        verdict = f"Yes, you can stop labelling: {len(fired)} of {len(rows)} criteria say so ({names})."
        if any(name in chosen for name in fired):
            verdict += " The project's stop_when criterion fired, so no new batch is picked."
    else:
        verdict = "Not yet: no criterion says to stop; keep labelling."
    return {"round": round, "n_labelled": n_labelled, "stop": bool(fired), "fired": fired, "verdict": verdict,
            "stop_when": chosen, "signals": rows}
