"""Runs of a user's own network (``ActiveLearningLoop`` with a ``model_factory``), one JSON
file per (strategy, seed), and their summary: what ``text_from_scratch.py`` and
``pairs_set_cnn.py`` share.

A run file ``<runs>/<strategy>/seed_<N>.json`` holds ``strategy``, ``seed``, ``labels``
(labelled items after each round), the headline metric of each round under its own name
(``test_accuracy``, ``test_micro_f1``) and ``seconds``. It is written atomically when the
run ends and skipped when present, so an interrupted benchmark reruns only what is missing.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def cached_run(runs: Path, strategy: str, seed: int, metric: str, make_loop: Callable[[], object]) -> dict:
    """The run of ``strategy`` and ``seed``: read from ``runs`` if present, else run
    ``make_loop()`` (an ``ActiveLearningLoop``) to its end and write it."""
    from activebayes._io import atomic_write_text

    path = runs / strategy / f"seed_{seed}.json"
    if path.is_file():
        return json.loads(path.read_text())
    start = time.perf_counter()
    rounds = make_loop().run(progress=False).rounds
    out = {"strategy": strategy, "seed": seed, "labels": [r.n_labelled for r in rounds],
           metric: [r.metrics[metric] for r in rounds], "seconds": round(time.perf_counter() - start, 1)}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(out) + "\n")
    return out


def summarise(runs: Path, strategies: Sequence[str], metric: str, results: Path | None = None) -> dict:
    """AULC (normalised area under the ``metric`` curve) of every run in ``runs``, per
    strategy (in the order of ``strategies``), and each strategy's lead over ``random`` on
    the seeds both have; written to ``results`` as JSON when given."""
    from activebayes.analysis import area_under_learning_curve

    aulc: dict[str, dict[int, float]] = {}
    final: dict[str, dict[int, float]] = {}
    for path in sorted(runs.glob("*/seed_*.json")):
        r = json.loads(path.read_text())
        aulc.setdefault(r["strategy"], {})[r["seed"]] = area_under_learning_curve(r["labels"], r[metric])
        final.setdefault(r["strategy"], {})[r["seed"]] = r[metric][-1]
    out: dict = {"strategies": {}}
    for strategy in sorted(aulc, key=list(strategies).index):
        values = [aulc[strategy][s] for s in sorted(aulc[strategy])]
        entry = {"seeds": sorted(aulc[strategy]), "aulc_mean": round(statistics.fmean(values), 4),
                 "aulc_std": round(statistics.stdev(values), 4) if len(values) > 1 else None,
                 "final_mean": round(statistics.fmean(final[strategy].values()), 4)}
        common = sorted(set(aulc[strategy]) & set(aulc.get("random", {})))
        if strategy != "random" and common:
            leads = [aulc[strategy][s] - aulc["random"][s] for s in common]
            entry["lead_over_random"] = round(statistics.fmean(leads), 4)
            entry["lead_per_seed"] = [round(v, 4) for v in leads]
        out["strategies"][strategy] = entry
    if results is not None:
        from activebayes._io import atomic_write_text

        atomic_write_text(results, json.dumps(out, indent=1) + "\n")
    return out


def markdown(summary: dict, final: str = "final accuracy") -> str:
    """The summary as a markdown table (``final``: the last column's name for the metric)."""
    lines = [f"| strategy | seeds | AULC (mean ± sd) | {final} | lead over random (per seed) |",
             "|---|---|---|---|---|"]
    for strategy, e in summary["strategies"].items():
        lead = (f"{e['lead_over_random']:+.4f} ({', '.join(f'{v:+.3f}' for v in e['lead_per_seed'])})"
                if "lead_over_random" in e else "–")
        spread = "" if e["aulc_std"] is None else f" ± {e['aulc_std']:.4f}"
        lines.append(f"| {strategy} | {len(e['seeds'])} | {e['aulc_mean']:.4f}{spread} | "
                     f"{e['final_mean']:.4f} | {lead} |")
    return "\n".join(lines)


def seed_torch_from(generator) -> None:
    """Seed torch's global generator from the loop's model stream ``generator`` (``None``:
    leave it): the network built next, and the dropout of its training, are then the
    run's seed's. Both benchmarks' committed runs were made this way."""
    import torch

    if generator is not None:
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))


def argument_parser(description: str, strategies: Sequence[str]):
    """The flags both benchmarks take: ``--strategies``, ``--seeds``, ``--summarise``."""
    import argparse

    from label_efficiency import seeds_arg

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--strategies", default=",".join(strategies),
                        help=f"comma-separated, from {', '.join(strategies)}")
    parser.add_argument("--seeds", type=seeds_arg, default="0-5", help="0,1,2 or a range 0-5")
    parser.add_argument("--summarise", action="store_true", help="only summarise the cached runs")
    return parser


def chosen_strategies(parser, text: str, strategies: Sequence[str]) -> list[str]:
    """The strategies named in ``--strategies``; an unknown name is the parser's one-line error."""
    chosen = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in strategies]
    if unknown:
        parser.error(f"--strategies: unknown {', '.join(unknown)}; choose from {', '.join(strategies)}")
    return chosen
