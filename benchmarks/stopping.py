"""When to stop without a test set: how early each stopping signal fires, and what it costs.

Each seed runs the default strategy (typicality, then BADGE) once to the protocol's
budget with every signal recorded each round (``activebayes.stopping.round_signals``)
and ``audit_fraction`` of each batch drawn uniformly at random. Because the signals
are recorded whether or not they stop a run, one run per seed tells where each
criterion *would* have stopped it:

- labels at the first round it fires, test accuracy there, labels saved, and the points
  below the run's final accuracy (the mean test accuracy of its last 3 rounds: one
  round's is noisy) and below the best accuracy it reached by its budget;
- "too early": more than 1 point below the final accuracy;
- where each run's curve flattens: the labels from which its 3-round running mean stays
  within 1 point of the final accuracy (a curve that gets there only within the 3 rounds
  averaged into the final accuracy is still climbing at the budget);
- for the accuracy estimate from the audited answers: its error against the test
  accuracy of the models that predicted those answers, and how often that accuracy
  lies inside the stated 90% interval (coverage);
- for the recommended criterion, the same runs cut short at every 5th round's labels, as
  if that had been the budget (near a budget its horizon is a few labels);
- what to read it against: a stop chosen in hindsight of where each curve flattens (the
  last round that still saves a third of the flat stretch), judged the same way, and the
  standard deviation of one round's accuracy around the run's trend.

Runs are kept, and committed, under ``benchmarks/results/stopping_runs/<protocol>/seed_<N>/``
(resumable): each finished run is compacted at once, in the benchmarks' committed form
(``label_efficiency.compact``) with every round's stop-set predictions kept, since the
remaining change is judged again from them. The summary, rebuilt from those runs alone,
goes to ``benchmarks/results/stopping.json`` and its tables into ``docs/benchmarks.md``,
between the ``stopping:begin`` / ``stopping:end`` markers.

Usage::

    python benchmarks/stopping.py --dataset digits --seeds 0-5
    python benchmarks/stopping.py --summarise
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "results" / "stopping_runs"
#: seeds run after the default rule was chosen, kept apart from the runs it was chosen on
#: (``stopping_ideas.py --after-choice`` judges them; ``--summarise`` leaves them out)
RUNS_AFTER = ROOT / "benchmarks" / "results" / "stopping_runs_after"
RESULTS = ROOT / "benchmarks" / "results" / "stopping.json"

#: the thresholds each criterion is judged at: the defaults (the estimate's is a target), a
#: looser remaining change (it saves more labels, and stops early more often), and kappa 0.995
#: as well (with shared round seeds successive models agree more closely)
#: the recommended criterion's threshold (the overview and the cut budgets are about it)
RECOMMENDED_THRESHOLD = 0.005
CRITERIA = [
    ("remaining_change", RECOMMENDED_THRESHOLD),
    ("remaining_change", 0.01),
    ("stable_predictions", 0.99),
    ("stable_predictions", 0.995),
    ("expected_accuracy", 0.005),
    ("information", 0.1),
    ("estimated_accuracy", 0.9),
]


def protocol(dataset: str, data_dir: str | None):
    from activebayes.loop import LoopConfig

    common = dict(initial="balanced", initial_size=20, batch_size=10, checkpoints=False, audit_fraction=0.2,
                  stop_set_size=1000, mean_samples=100)  # BADGE scored with K = 100, as in the measured runs
    if dataset == "digits":
        return LoopConfig(dataset="digits", model="mlp", validation_size=100, budget=450, **common)
    if dataset in ("mnist", "repeated_mnist"):
        return LoopConfig(dataset=dataset, data_dir=data_dir or str(ROOT.parent / "shared" / "data" / "mnist"),
                          model="batchbald_cnn", validation_size=500, budget=300, **common)
    if dataset == "mnist_pairs":  # multi-label: label_efficiency.py's digit pairs on the MLP, with the signals
        return LoopConfig(dataset=dataset, data_dir=data_dir or str(ROOT.parent / "shared" / "data" / "mnist"),
                          model="mlp", validation_size=500, budget=400,
                          **{**common, "mean_samples": 20}, num_samples=20, eval_samples=10, pool_subsample=2000)
    if dataset == "wordnet_nouns":  # real text: label_efficiency.py's WordNet protocol, with the signals
        return LoopConfig(dataset=dataset, data_dir=data_dir, model="mlp", validation_size=500, budget=512,
                          **{**common, "initial_size": 52, "batch_size": 20, "mean_samples": 50},
                          num_samples=50, pool_subsample=5000)
    raise SystemExit(f"unknown --dataset {dataset!r}: digits, mnist, repeated_mnist, wordnet_nouns or mnist_pairs")


def run(dataset: str, seeds: list[int], data_dir: str | None, representation: str, threads: int | None = None,
        round_seeds: str = "per_round", encoder_epochs: int | None = None, batch_size: int | None = None,
        budget: int | None = None, word_vectors: str | None = None, device: str | None = None) -> None:
    from activebayes.experiment import run_experiment
    from label_efficiency import compact

    if threads:
        import torch

        torch.set_num_threads(threads)

    for seed in seeds:
        config = protocol(dataset, data_dir).replace(seed=seed)
        if representation != "none":  # the encoder with an MC dropout head on its frozen features
            config = config.replace(model="encoder_head", representation=representation)
            if encoder_epochs is not None:
                config = config.replace(representation_options={"epochs": encoder_epochs})
        config = config.replace(round_seeds=round_seeds)
        if batch_size is not None:
            config = config.replace(batch_size=batch_size)
        if budget is not None:
            config = config.replace(budget=budget)
        if device is not None:  # e.g. cuda: the same protocol, stored in each run's config
            config = config.replace(device=device)
        if word_vectors is not None:  # the glosses as mean GloVe vectors instead of TF-IDF
            config = config.replace(dataset_options={"encoder": str(Path(word_vectors).expanduser().resolve())})
        name = run_name(dataset, representation, round_seeds, encoder_epochs, batch_size, budget, word_vectors)
        tic = time.perf_counter()
        run_experiment(config, RUNS / name / f"seed_{seed}", progress=False, report=False)
        compact(RUNS / name / f"seed_{seed}", all_predictions=True)
        print(f"{name} seed {seed}: {time.perf_counter() - tic:.0f} s", flush=True)


def run_name(dataset: str, representation: str = "none", round_seeds: str = "per_round",
             encoder_epochs: int | None = None, batch_size: int | None = None, budget: int | None = None,
             word_vectors: str | None = None) -> str:
    """The runs' folder under ``RUNS``: the protocol's name, with a suffix for each setting changed."""
    return (dataset + ("-glove" if word_vectors is not None else "") + ("-ssl" if representation != "none" else "")
            + (f"-e{encoder_epochs}" if representation != "none" and encoder_epochs is not None else "")
            + ("-shared" if round_seeds == "shared" else "")
            + (f"-b{batch_size}" if batch_size is not None else "")
            + (f"-budget{budget}" if budget is not None else ""))


def _fires(rounds: list[dict], name: str, threshold: float, budget: int) -> int | None:
    """Index of the first round where ``name`` fires at ``threshold`` (re-judged from its value,
    or, for the remaining change, from the stored predictions with the library's fit)."""
    from activebayes.records import RoundRecord
    from activebayes.stopping import SIGNAL_WINDOW, decode_classes, remaining_change_signal

    window = SIGNAL_WINDOW
    records = None  # the rounds as RoundRecords, for the remaining change
    for i, r in enumerate(rounds):
        signals = r.get("signals") or {}
        if name == "remaining_change":  # the library's signal, from the records before and this round's predictions
            current = (signals.get("stable_predictions") or {}).get("predictions")
            if current is None:
                continue
            if records is None:
                records = [RoundRecord.from_dict(q) for q in rounds]
            if remaining_change_signal(records[:i], decode_classes(current), r["n_labelled"], budget,
                                       threshold, multilabel=current.startswith("bits:"))["fired"]:
                return i
        elif name == "stable_predictions":
            kappas = [(q.get("signals") or {}).get(name, {}).get("value") for q in rounds[max(0, i - window + 1): i + 1]]
            if len(kappas) == window and None not in kappas and sum(kappas) / window >= threshold:
                return i
        elif name == "expected_accuracy":
            values = [(q.get("signals") or {}).get(name, {}).get("value") for q in rounds[max(0, i - window): i + 1]]
            if len(values) == window + 1 and None not in values:
                if max(abs(b - a) for a, b in zip(values, values[1:], strict=False)) < threshold:
                    return i
        elif name == "information":
            first = next((q["signals"][name]["value"] for q in rounds
                          if (q.get("signals") or {}).get(name, {}).get("value")), None)
            value = signals.get(name, {}).get("value")
            if i > 0 and first and value is not None and value / first < threshold:
                return i
        elif name == "estimated_accuracy":
            # the library's interval from the audited counts of the window (as round_signals computes it)
            from activebayes.stopping import exact_interval

            audits = [q["signals"]["audit"] for q in rounds[max(0, i - window): i]
                      if (q.get("signals") or {}).get("audit")]
            n = sum(a["n"] for a in audits)
            if n and exact_interval(sum(a["correct"] for a in audits), n)[0] >= threshold:
                return i
    return None


#: rounds averaged for a run's final accuracy (one round's test accuracy is noisy)
FINAL_ROUNDS = 3
#: budgets cut short: each run is judged again as if its budget had been the labels of every
#: CUT_EVERY-th round from round CUT_FROM on (fixed, so that rules with other windows are judged
#: on the same budgets)
CUT_EVERY = 5
CUT_FROM = 12


def _headline(runs: list[tuple[str, list[dict]]]) -> str:
    """What "accuracy" means for these runs: the records' headline (``records.headline_metric``):
    the test accuracy, or a multi-label run's test micro-F1 (the goal's "within 1 point" is of that)."""
    from activebayes.records import headline_metric

    return headline_metric(runs[0][1][0]["metrics"])


def cut_short(runs: list[tuple[str, list[dict]]], threshold: float) -> dict:
    """The remaining change at ``threshold`` on every run cut at shorter budgets: how often it
    stops more than a point below the cut run's final accuracy. Near a budget the horizon is a
    few labels, so this is where a drift under-estimated over the window costs the most."""
    cases = []
    metric = _headline(runs)
    for seed, rounds in runs:
        for k in range(CUT_FROM, len(rounds) - 1, CUT_EVERY):
            cut, budget = rounds[: k + 1], rounds[k]["n_labelled"]
            accuracy = [r["metrics"][metric] for r in cut]
            final = statistics.fmean(accuracy[-FINAL_ROUNDS:])
            i = _fires(cut, "remaining_change", threshold, budget)
            below = None if i is None else round(100 * (final - accuracy[i]), 2)
            cases.append({"seed": seed, "budget": budget, "labels": None if i is None else cut[i]["n_labelled"],
                          "below_final": below, "saved": 0 if i is None else budget - cut[i]["n_labelled"]})
    early = [c for c in cases if c["below_final"] is not None and c["below_final"] > 1.0]
    return {"budgets": len(cases), "fired": sum(c["labels"] is not None for c in cases), "too_early": len(early),
            "max_below_final": max((c["below_final"] for c in early), default=None),
            "median_saved": statistics.median(c["saved"] for c in cases) if cases else None, "early": early}


def flat_from(labels: list[int], accuracy: list[float], final: float, within: float = 0.01) -> int:
    """Labels from which the curve stays flat: the first round from which every later
    ``FINAL_ROUNDS``-round running mean is within ``within`` of the final accuracy."""
    means = [statistics.fmean(accuracy[max(0, i - FINAL_ROUNDS + 1): i + 1]) for i in range(len(accuracy))]
    start = len(labels) - 1
    for i in range(len(labels) - 1, -1, -1):
        if means[i] < final - within:
            break
        start = i
    return labels[start]


def verdict(below_final: float | None, saved: int, flattened: bool, flat: int, budget: int) -> str:
    """The goal's verdict on one run's stop: ``"met"``; ``"early"``, more than a point below the
    final accuracy; or ``"late"``, having saved under a third of the labels spent after the curve
    flattened at ``flat``. ``below_final`` is ``None`` when the criterion never fired: that meets
    the goal only where the curve had not flattened before the budget."""
    if below_final is None:
        return "late" if flattened else "met"
    if below_final > 1.0:
        return "early"
    return "met" if not flattened or saved >= (budget - flat) / 3 else "late"


def hindsight_stop(labels: list[int], budget: int, flat: int) -> int:
    """Index of the round a rule that knew in hindsight where the curve flattens would stop
    at: the last round that still saves a third of the labels spent after ``flat`` (the goal's
    least risky stop: any later one saves too few)."""
    allowed = [i for i, n in enumerate(labels) if budget - n >= (budget - flat) / 3]
    return allowed[-1]


def round_noise(accuracy: list[float]) -> float | None:
    r"""The standard deviation of one round's accuracy around the run's trend, over the second
    half of its rounds: each round's residual from the mean of its two neighbours on each side,
    :math:`r_i = a_i - \frac14 (a_{i-2} + a_{i-1} + a_{i+1} + a_{i+2})`. With independent noise
    :math:`\sigma` around a locally straight curve, :math:`\mathrm{Var}(r_i) = \frac54 \sigma^2`, so
    :math:`\hat\sigma = \mathrm{sd}(r) / \sqrt{5/4}`. ``None`` with fewer than 3 residuals."""
    residuals = [accuracy[i] - statistics.fmean(accuracy[i - 2: i] + accuracy[i + 1: i + 3])
                 for i in range(max(2, len(accuracy) // 2), len(accuracy) - 2)]
    if len(residuals) < 3:
        return None
    return statistics.stdev(residuals) / math.sqrt(1.25)


def finished_runs(directory: Path) -> list[tuple[str, list[dict]]]:
    """``(seed folder, round records as dicts)`` of every finished run of one protocol's folder."""
    from activebayes.rundir import RunDirectory

    runs = []
    for seed_dir in sorted(directory.glob("seed_*"), key=lambda p: int(p.name.removeprefix("seed_"))):
        run = RunDirectory(seed_dir)
        if run.is_finished():
            runs.append((seed_dir.name, [r.to_dict() for r in run.read_rounds()]))
    return runs


def summarise(write: bool = True) -> dict:
    """The summary of every finished run under ``RUNS`` (written to ``stopping.json`` unless
    ``write`` is false).

    A protocol ``stopping.json`` holds from before the runs were committed, and that has no
    committed runs yet, is carried over as it is, marked ``"runs_kept": false`` (the tables
    mark it too) until its runs are made again.
    """
    from activebayes.stopping import SIGNAL_WINDOW

    out: dict = {"criteria": [f"{name}={threshold:g}" for name, threshold in CRITERIA], "final_rounds": FINAL_ROUNDS,
                 "protocols": {}}
    earlier = json.loads(RESULTS.read_text())["protocols"] if RESULTS.is_file() else {}
    for directory in sorted(p for p in RUNS.glob("*") if p.is_dir()):
        runs = finished_runs(directory)
        if not runs:
            continue
        budget = runs[0][1][-1]["n_labelled"]
        metric = _headline(runs)
        # what the audited answers estimate: the accuracy, or a multi-label run's subset accuracy
        # (an audited item counts as right when every label is)
        audited = "test_accuracy" if metric == "test_accuracy" else "test_subset_accuracy"
        protocol_out: dict = {"seeds": len(runs), "budget": budget, "runs": {}, "criteria": {}, "estimate": {}}
        for seed, rounds in runs:
            labels = [r["n_labelled"] for r in rounds]
            accuracy = [r["metrics"][metric] for r in rounds]
            final = statistics.fmean(accuracy[-FINAL_ROUNDS:])
            flat = flat_from(labels, accuracy, final)
            # within a point only over the rounds averaged into the final accuracy itself: the
            # curve is still climbing at the budget
            flattened = flat < labels[-FINAL_ROUNDS]
            # the stop a rule knowing the flat point in hindsight would make, and how far below final it is
            i = hindsight_stop(labels, budget, flat) if flattened else None
            noise = round_noise(accuracy)
            protocol_out["runs"][seed] = {"final": round(final, 4), "best": max(accuracy), "flat_from": flat,
                                          "flattened": flattened,
                                          "hindsight_below_final": None if i is None
                                          else round(100 * (final - accuracy[i]), 2),
                                          "round_sd": None if noise is None else round(100 * noise, 2)}
        for name, threshold in CRITERIA:
            rows = []
            for seed, rounds in runs:
                accuracy = [r["metrics"][metric] for r in rounds]
                run = protocol_out["runs"][seed]
                i = _fires(rounds, name, threshold, budget)
                if i is None:
                    rows.append({"seed": seed, "labels": None, "accuracy": None, "below_final": None,
                                 "below_best": None, "saved": 0,
                                 "goal": verdict(None, 0, run["flattened"], run["flat_from"], budget) == "met"})
                    continue
                below_final = round(100 * (run["final"] - accuracy[i]), 2)
                saved = budget - rounds[i]["n_labelled"]
                rows.append({"seed": seed, "labels": rounds[i]["n_labelled"], "accuracy": accuracy[i],
                             "below_final": below_final, "below_best": round(100 * (run["best"] - accuracy[i]), 2),
                             "saved": saved,
                             "goal": verdict(below_final, saved, run["flattened"], run["flat_from"], budget) == "met"})
            fired = [r for r in rows if r["labels"] is not None]
            protocol_out["criteria"][f"{name}={threshold:g}"] = {
                "threshold": threshold,
                "fired": f"{len(fired)} of {len(rows)}",
                "median_labels": statistics.median(r["labels"] for r in fired) if fired else None,
                "median_below_final": round(statistics.median(r["below_final"] for r in fired), 2) if fired else None,
                "max_below_final": max(r["below_final"] for r in fired) if fired else None,
                "max_below_best": max(r["below_best"] for r in fired) if fired else None,
                "too_early": sum(r["below_final"] > 1.0 for r in fired),
                "median_saved": statistics.median(r["saved"] for r in rows),
                "min_saved": min(r["saved"] for r in rows),
                # the goal, per run: within 1 point of the final accuracy, having saved at
                # least a third of the labels spent after the curve flattened
                "met_goal": f"{sum(r['goal'] for r in rows)} of {len(rows)}",
                "runs": rows,
            }
        # the audited estimate against the accuracy of the models whose predictions were audited
        from activebayes.stopping import exact_interval

        errors, covered, n_checked = [], 0, 0
        for _seed, rounds in runs:
            for i, r in enumerate(rounds):
                estimate = (r.get("signals") or {}).get("estimated_accuracy") or {}
                if estimate.get("value") is None:
                    continue
                source = [q for q in rounds[max(0, i - SIGNAL_WINDOW): i] if (q.get("signals") or {}).get("audit")]
                n = sum(q["signals"]["audit"]["n"] for q in source)
                correct = sum(q["signals"]["audit"]["correct"] for q in source)
                truth = sum(q["signals"]["audit"]["n"] * q["metrics"][audited] for q in source) / n
                errors.append(abs(estimate["value"] - truth))
                # the library's interval from the counts (runs recorded before it changed held Wilson's)
                low, high = exact_interval(correct, n)
                covered += low <= truth <= high
                n_checked += 1
        if n_checked:
            protocol_out["estimate"] = {"rounds": n_checked, "mean_abs_error": round(statistics.fmean(errors), 4),
                                        "coverage": round(covered / n_checked, 3), "nominal": 0.9}
        # what the signals cost: their share of each round's time
        shares = [r["seconds"].get("signals", 0.0) / sum(r["seconds"].values())
                  for _seed, rounds in runs for r in rounds if sum(r["seconds"].values()) > 0]
        protocol_out["signals_share_of_round"] = {"median": round(statistics.median(shares), 4),
                                                  "max": round(max(shares), 4)}
        protocol_out["cut_short"] = cut_short(runs, RECOMMENDED_THRESHOLD)
        # what to read the criterion against: a stop chosen in hindsight, and the noise of one round's accuracy
        hindsight = [r["hindsight_below_final"] for r in protocol_out["runs"].values()
                     if r["hindsight_below_final"] is not None]
        early = [b for b in hindsight if b > 1.0]
        protocol_out["hindsight"] = {"flattened": len(hindsight), "too_early": len(early),
                                     "max_below_final": max(early, default=None),
                                     "met_goal": f"{len(protocol_out['runs']) - len(early)} of {len(runs)}"}
        sds = [r["round_sd"] for r in protocol_out["runs"].values() if r["round_sd"] is not None]
        protocol_out["round_sd_median"] = round(statistics.median(sds), 2) if sds else None
        protocol_out["runs_kept"] = True
        out["protocols"][directory.name] = protocol_out
    for name, data in earlier.items():
        if name not in out["protocols"] and not data.get("runs_kept", False):
            out["protocols"][name] = {**data, "runs_kept": False}
    out["protocols"] = dict(sorted(out["protocols"].items()))
    if write:
        from activebayes._io import atomic_write_text

        atomic_write_text(RESULTS, json.dumps(out, indent=1) + "\n")
    return out


#: how the tables name each criterion at its threshold
LABELS = {
    "remaining_change=0.005": "`remaining_change` (below 0.005; recommended)",
    "remaining_change=0.01": "`remaining_change=0.01`",
    "stable_predictions=0.99": "`stable_predictions` (kappa 0.99 over 3 rounds)",
    "stable_predictions=0.995": "`stable_predictions=0.995`",
    "expected_accuracy=0.005": "`expected_accuracy` (change < 0.005 over 3 rounds)",
    "information=0.1": "`information` (below 10% of the first model's)",
    "estimated_accuracy=0.9": "`estimated_accuracy` (lower bound ≥ 0.90)",
}


def _number(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if not isinstance(value, float):
        return str(value)
    text = f"{value:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


#: how the docs name each protocol (its cache folder), in the order they show them
PROTOCOLS = {
    "digits": "digits",
    "digits-shared": "digits, shared round seeds",
    "digits-b5": "digits, 5 labels a round",
    "mnist-ssl-e150": "MNIST-ssl (150-epoch encoder)",
    "mnist-ssl-e150-shared": "MNIST-ssl (150-epoch), shared seeds",
    "mnist-ssl-e50": "MNIST-ssl (50-epoch encoder)",
    "mnist-ssl-e50-shared": "MNIST-ssl (50-epoch), shared seeds",
    "mnist": "MNIST from scratch",
    "mnist-shared": "MNIST from scratch, shared seeds",
    "repeated_mnist": "Repeated MNIST",
    "wordnet_nouns": "WordNet (text)",
    "wordnet_nouns-budget2048": "WordNet (text), to 2,048 labels",
    "wordnet_nouns-glove-budget2048": "WordNet on GloVe, to 2,048 labels",
    "mnist_pairs": "digit pairs (multi-label; micro-F1)",
    "mnist_pairs-budget800": "digit pairs, to 800 labels",
}
#: the criterion the overview table is about
RECOMMENDED = f"remaining_change={RECOMMENDED_THRESHOLD:g}"
BEGIN, END = "<!-- stopping:begin -->", "<!-- stopping:end -->"
DOCS = ROOT / "docs" / "benchmarks.md"
CONCEPTS_BEGIN, CONCEPTS_END = "<!-- stopping-summary:begin -->", "<!-- stopping-summary:end -->"
CONCEPTS = ROOT / "docs" / "concepts" / "stopping.md"


def _ordered(summary: dict) -> list[tuple[str, dict]]:
    known = [(name, summary["protocols"][name]) for name in PROTOCOLS if name in summary["protocols"]]
    return known + [(name, data) for name, data in sorted(summary["protocols"].items()) if name not in PROTOCOLS]


def _name(name: str, data: dict) -> str:
    """How a table names a protocol: its docs name, marked when its runs were not kept."""
    return PROTOCOLS.get(name, name) + ("" if data.get("runs_kept", True) else " ¹")


#: the note under a table with a protocol whose runs were not kept
NOT_KEPT = ("¹ Measured on an earlier version of the library, before the runs were committed; "
            "not rerun yet, so these rows are not rebuilt from `benchmarks/results/stopping_runs`.")


def _span(values: list) -> str:
    return str(min(values)) if min(values) == max(values) else f"{min(values)}–{max(values)}"


def markdown(summary: dict) -> str:
    """The tables of the benchmarks page's stopping section, from ``stopping.json``'s summary."""
    lines = ["### The recommended criterion, `remaining_change`", "",
             "| protocol | seeds | met the goal | stopped > 1 point early | labels saved | flat from "
             "| hindsight stop: met the goal | one round's sd (points) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, data in _ordered(summary):
        row = data["criteria"].get(RECOMMENDED)
        if row is None:
            continue
        early = [r["below_final"] for r in row["runs"] if r["below_final"] is not None and r["below_final"] > 1.0]
        early_text = f"{len(early)} ({', '.join(_number(float(e)) for e in early)} points)" if early else "0"
        flats = [r["flat_from"] for r in data["runs"].values()]
        hindsight = data.get("hindsight")
        lines.append(f"| {_name(name, data)} | {data['seeds']} | {row['met_goal']} | {early_text} | "
                     f"{_span([r['saved'] for r in row['runs']])} of {data['budget']} | {_span(flats)} | "
                     f"{hindsight['met_goal'] if hindsight else '–'} | {_number(data.get('round_sd_median'), 2)} |")
    if not all(data.get("runs_kept", True) for data in summary["protocols"].values()):
        lines += ["", NOT_KEPT]
    lines += ["", f"**Budgets cut short**: every run judged again as if its budget had been the labels of "
                  f"every {CUT_EVERY}th round from the {CUT_FROM + 1}th on, with the final accuracy that of the cut run:",
              "",
              "| protocol | budgets | fired | stopped > 1 point early | most points below final "
              "| median labels saved |",
              "| --- | --- | --- | --- | --- | --- |"]
    for name, data in _ordered(summary):
        if c := data.get("cut_short"):
            lines.append(f"| {_name(name, data)} | {c['budgets']} | {c['fired']} | {c['too_early']} | "
                         f"{_number(c['max_below_final'])} | {_number(c['median_saved'], 0)} |")
    lines += ["", "### Per protocol, every criterion"]
    for name, data in _ordered(summary):
        flats = sorted(r["flat_from"] for r in data["runs"].values())
        lines += ["", f"**{_name(name, data)}** ({data['seeds']} seeds, budget {data['budget']}; flat from "
                      f"{flats[0]}–{flats[-1]} labels, median {_number(statistics.median(flats), 0)}):", "",
                  "| criterion (threshold) | fired | median labels at the stop | median labels saved (fewest) "
                  "| median / max points below final | runs stopped > 1 point below final "
                  "| max points below the best round | met the goal |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for criterion, row in data["criteria"].items():
            below = (f"{_number(row['median_below_final'])} / {_number(row['max_below_final'])}"
                     if row["median_below_final"] is not None else "–")
            lines.append(f"| {LABELS.get(criterion, criterion)} | {row['fired']} | "
                         f"{_number(row['median_labels'], 0)} | "
                         f"{_number(row['median_saved'], 0)} ({row['min_saved']}) "
                         f"| {below} | {row['too_early']} | {_number(row['max_below_best'])} | {row['met_goal']} |")
    lines += ["", "**The accuracy estimate from the audited answers** (the audited answers of the last 3 rounds, "
                  "Clopper–Pearson's exact 90% interval), against the test accuracy of the models that made the "
                  "audited predictions:", "",
              "| protocol | rounds | mean absolute error | true accuracy inside the 90% interval |",
              "| --- | --- | --- | --- |"]
    for name, data in _ordered(summary):
        if e := data["estimate"]:
            lines.append(f"| {_name(name, data)} | {e['rounds']} | {e['mean_abs_error']:.3f} | "
                         f"{e['coverage']:.1%} |")
    lines += ["", "**Cost**: the signals' share of each round's time (the `signals` entry of each record's "
                  "`seconds`):", "", "| protocol | median | max |", "| --- | --- | --- |"]
    for name, data in _ordered(summary):
        share = data["signals_share_of_round"]
        lines.append(f"| {_name(name, data)} | {share['median']:.1%} | {share['max']:.1%} |")
    return "\n".join(lines)


def concepts_table(summary: dict) -> str:
    """The concepts page's short table: the recommended criterion per protocol, at the full
    budget and cut short, beside stabilising predictions at its default."""
    lines = ["| protocol | runs | `remaining_change` met the goal | stopped > 1 point early | labels saved "
             "| budgets cut short: stopped > 1 point early | `stable_predictions` (0.99) met the goal |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, data in _ordered(summary):
        row = data["criteria"][RECOMMENDED]
        cut = data["cut_short"]
        lines.append(f"| {_name(name, data)} | {data['seeds']} | {row['met_goal']} | {row['too_early']} | "
                     f"{_span([r['saved'] for r in row['runs']])} of {data['budget']} | "
                     f"{cut['too_early']} of {cut['budgets']} | "
                     f"{data['criteria']['stable_predictions=0.99']['met_goal']} |")
    if not all(data.get("runs_kept", True) for data in summary["protocols"].values()):
        lines += ["", NOT_KEPT]
    return "\n".join(lines)


def write_docs(summary: dict) -> None:
    """Replace the generated blocks of the benchmarks page and the concepts page with the tables."""
    from label_efficiency import write_between_markers

    write_between_markers(DOCS, BEGIN, END, markdown(summary))
    # blank lines around it: a table run into the comment line would not be read as a table
    write_between_markers(CONCEPTS, CONCEPTS_BEGIN, CONCEPTS_END, f"\n{concepts_table(summary)}\n")


def main(argv: list[str] | None = None) -> int:
    from label_efficiency import seeds_arg

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--seeds", type=seeds_arg, default="0-5", help="0,1,2 or a range 0-5")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--representation", default="none", choices=["none", "self-supervised"])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: chosen from the load)")
    parser.add_argument("--round-seeds", default="per_round", choices=["per_round", "shared"],
                        help="LoopConfig.round_seeds (shared: the runs go to <dataset>-shared)")
    parser.add_argument("--encoder-epochs", type=int, default=None,
                        help="with --representation: the encoder's epochs (the runs go to <dataset>-ssl-e<N>)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="labels per round instead of the protocol's (the runs go to <dataset>-b<N>)")
    parser.add_argument("--budget", type=int, default=None,
                        help="labels to run to instead of the protocol's (the runs go to <dataset>-budget<N>)")
    parser.add_argument("--word-vectors", default=None,
                        help="wordnet_nouns: the glosses as the mean of these word vectors (GloVe) instead of "
                             "TF-IDF (the runs go to <dataset>-glove)")
    parser.add_argument("--device", default=None, help="torch device of the runs, e.g. cuda (default: CPU)")
    parser.add_argument("--summarise", action="store_true", help="only summarise the cached runs")
    parser.add_argument("--after-choice", action="store_true",
                        help="the runs go to benchmarks/results/stopping_runs_after: seeds run after the default "
                             "rule was chosen (stopping_ideas.py --after-choice judges them), not summarised")
    args = parser.parse_args(argv)
    if args.after_choice and args.summarise:
        parser.error("--after-choice runs are judged by stopping_ideas.py --after-choice, not --summarise")
    if args.word_vectors is not None and (args.dataset != "wordnet_nouns" or not Path(args.word_vectors).is_file()):
        parser.error("--word-vectors needs --dataset wordnet_nouns and an existing word-vector file")
    initial = protocol(args.dataset, args.data_dir).initial_size
    if args.budget is not None and args.budget <= initial:
        parser.error(f"--budget must exceed the protocol's {initial} initial labels, got {args.budget}")
    if args.after_choice:
        global RUNS
        RUNS = RUNS_AFTER
        run(args.dataset, args.seeds, args.data_dir, args.representation, args.threads, args.round_seeds,
            args.encoder_epochs, args.batch_size, args.budget, args.word_vectors, args.device)
        return 0
    if not args.summarise:
        run(args.dataset, args.seeds, args.data_dir, args.representation, args.threads, args.round_seeds,
            args.encoder_epochs, args.batch_size, args.budget, args.word_vectors, args.device)
    summary = summarise()
    write_docs(summary)
    print(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
