"""The experiment runner: resumable runs and strategies x seeds comparisons.

:func:`run_experiment` runs (or continues) one active learning run in a run
directory, :func:`run_comparison` runs strategies x seeds, one run directory
each. The directory format belongs to :mod:`activebayes.rundir`.

Crash safety: a round's record is written (atomically) only after the round is
complete. A run killed at any moment resumes from its directory: completed
rounds are replayed onto a fresh pool (their acquired indices and labels), and
because every random step of round ``r`` is seeded from ``(seed, r, purpose)``
the resumed run ends with exactly the results an uninterrupted run would have.
Runtime settings (the device, the prediction batch size) may change on resume:
a run started on a CPU continues on a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from activebayes import _progress
from activebayes._threads import automatic_threads
from activebayes.loop import ActiveLearningLoop, check_config_names
from activebayes.scoring import PoolExecutor
from activebayes.records import RUNTIME_FIELDS, LoopConfig, LoopResult, RoundRecord
from activebayes.report import write_report
from activebayes.rundir import (
    COMPARISON_FILE,
    Comparison,
    RunDirectory,
    InUseError,
    RunDirectoryError,
    check_free_folder,
    config_differences,
)
from activebayes.data.table import check_table_file
from activebayes.data.table_task import pin_feature_columns
from activebayes.errors import InvalidArgumentError


def _runtime_overrides(config: LoopConfig, overrides: Mapping[str, Any] | None) -> LoopConfig:
    """``config`` with runtime settings replaced (only :data:`RUNTIME_FIELDS` may change)."""
    if not overrides:
        return config
    changes = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(changes) - set(RUNTIME_FIELDS))
    if unknown:
        raise InvalidArgumentError(
            f"only runtime settings ({', '.join(RUNTIME_FIELDS)}) may change when a run is resumed, "
            f"got {', '.join(unknown)}"
        )
    return config.replace(**changes)


def _config_threads(config: LoopConfig) -> contextlib.AbstractContextManager[Any]:
    """Torch computes on ``config.threads`` CPU threads inside (restored after); ``None``: unchanged."""
    return contextlib.nullcontext() if config.threads is None else automatic_threads(config.threads)


def _quiet_inside(function: Callable[..., Any]) -> Callable[..., Any]:
    """``progress=None`` (the default) draws bars only when stderr is a terminal (not into a pipe or a
    log file); ``progress=False`` also silences the steps deep inside (a text encoder fitted while a
    table loads, the representation trained while the loop is built, a download: :mod:`activebayes._progress`)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["progress"] = _progress.shown(kwargs.get("progress"))
        with _progress.default(None if kwargs["progress"] else False):
            return function(*args, **kwargs)

    return wrapper


def _factory(loop_factory: Callable[[LoopConfig], ActiveLearningLoop] | None,
             executor: PoolExecutor | None) -> Callable[[LoopConfig], ActiveLearningLoop]:
    if loop_factory is not None:
        return loop_factory
    return functools.partial(ActiveLearningLoop, executor=executor)


@_quiet_inside
def run_experiment(
    config: LoopConfig,
    run_dir: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    loop_factory: Callable[[LoopConfig], ActiveLearningLoop] | None = None,
    on_round: Callable[[RoundRecord], None] | None = None,
    report: bool = True,
    executor: PoolExecutor | None = None,
    on_start: Callable[[ActiveLearningLoop], None] | None = None,
) -> LoopResult:
    """Run (or continue) one active learning run in ``run_dir``.

    A new directory gets ``config.json``; an existing one must hold a config
    with the same identity (:meth:`LoopConfig.identity`; the device and other
    runtime settings may differ) and is resumed from its ``rounds.jsonl`` (a
    finished run returns at once). Each finished round is written atomically
    before the next starts. ``on_start(loop)`` is called once the loop is built (its
    data loaded and checked), before anything is written.
    """
    directory = RunDirectory(Path(run_dir))
    check_config_names(config)  # a misspelt name is reported as such, not as a config mismatch
    _check_table_file(config)  # a mistyped path is reported as such, not as a config mismatch
    if not (directory.exists() and directory.read_config().feature_columns == config.feature_columns):
        config = pin_feature_columns(config)  # '*' is stored as the columns it means (an earlier run keeps it)
    if directory.exists():
        directory.check_config(config)  # runtime settings (device, ...) may differ
    else:
        check_free_folder(directory.path, kind="run")
    with _config_threads(config):
        loop = _factory(loop_factory, executor)(config)  # validates names, loads data; nothing written yet
        if on_start is not None:
            on_start(loop)
        if not directory.exists():
            directory.write_config(config)
        with directory.lock():  # one writer at a time: a second run or resume of it is refused
            return _continue(directory, loop, progress=progress, on_round=on_round, report=report)


@_quiet_inside
def resume_experiment(
    run_dir: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    loop_factory: Callable[[LoopConfig], ActiveLearningLoop] | None = None,
    report: bool = True,
    runtime: Mapping[str, Any] | None = None,
    executor: PoolExecutor | None = None,
    budget: int | None = None,
) -> LoopResult:
    """Continue the run stored in ``run_dir`` from its last complete round.

    ``runtime`` replaces runtime settings for the rest of the run, e.g.
    ``{"device": "cuda"}`` to continue a CPU run on a GPU; the results do not
    depend on them. ``budget`` continues a run, finished or not, to a larger label
    budget; its rounds are those a run started with that budget computes
    (:meth:`RunDirectory.raise_budget`).
    """
    directory = RunDirectory(Path(run_dir))
    directory.read_config()  # not a run directory: says so before anything else
    given = directory.read_given()
    if given and loop_factory is None:
        names = ", ".join(f"{name} ({value})" for name, value in given.items())
        raise RunDirectoryError(
            f"{directory.path} was run from Python with its own {names}, which config.json cannot name; "
            "resumed without them it would go on with other ones: resume it from Python, "
            "resume_experiment(DIR, loop_factory=...), with the same ones")
    with directory.lock():
        config = _runtime_overrides(directory.read_config(), runtime)
        if budget is not None:
            config = config.replace(budget=budget)  # written by raise_budget once the data is checked
        with _config_threads(config):  # the stored thread count, unless runtime changes it
            loop = _factory(loop_factory, executor)(config)
            _check_given(directory, loop)
            _check_items(directory, loop)
            if budget is not None:
                directory.raise_budget(budget)
            return _continue(directory, loop, progress=progress, on_round=None, report=report)


def _continue(
    directory: RunDirectory,
    loop: ActiveLearningLoop,
    *,
    progress: bool,
    on_round: Callable[[RoundRecord], None] | None,
    report: bool,
) -> LoopResult:
    config = loop.config  # the caller holds directory.lock()
    _check_given(directory, loop)
    _check_items(directory, loop)
    if loop.given and not directory.read_given():
        directory.write_given(loop.given)
    records = directory.read_rounds()
    if records:
        model_state = directory.warm_start_state(records[-1].round) if config.warm_start else None
        loop.restore(records, model_state)

    def save(record: RoundRecord) -> None:
        if config.checkpoints and loop.model is not None:
            directory.write_checkpoint(record.round, loop.model)
        directory.write_rounds(loop.history)
        if on_round is not None:
            on_round(record)

    result = loop.run(progress=progress, on_round=save)
    if not directory.is_finished():
        directory.write_summary(result)
    if report:  # a dataset given from Python is shown as it is (config.json names only the default one)
        write_report(directory.path, dataset=loop.dataset if "dataset" in loop.given else None)
    return result


def _check_table_file(config: LoopConfig) -> None:
    """Before a stored run's config is compared with it: a folder named after the file's stem
    may hold an earlier run, which a mistyped path would otherwise be blamed on."""
    if config.table is not None:
        check_table_file(config.table)


#: given entries that decide the run's data: one that differs on a resume is refused (a changed
#: function name, ``model_factory`` or ``oracle``, may be a rename, and is warned about)
_GIVEN_DATA = ("dataset", "test", "costs_N")


def _check_given(directory: RunDirectory, loop: ActiveLearningLoop) -> None:
    """A resumed run gets what it was given from Python before (``given.json``): a dataset left out
    fell back to the config's built-in one, and another dataset mixed two in one learning curve."""
    stored = directory.read_given()
    if not stored:
        return
    missing = [name for name in stored if name not in loop.given]
    if missing:
        names = ", ".join(f"{name} ({stored[name]})" for name in missing)
        raise RunDirectoryError(f"{directory.path} was run with its own {names}; the loop resuming it was not given "
                                f"{'it' if len(missing) == 1 else 'them'}: pass the same to ActiveLearningLoop in "
                                "loop_factory")
    changed = {name: (stored[name], loop.given[name]) for name in stored if stored[name] != loop.given[name]}
    data = [name for name in changed if name in _GIVEN_DATA]
    if data:
        names = "; ".join(f"{name} was {changed[name][0]}, now {changed[name][1]}" for name in data)
        raise RunDirectoryError(f"{directory.path} was run on other data than the loop resuming it is given ({names}): "
                                "resume it with the same, or start a new run")
    if changed:
        names = "; ".join(f"{name} was {was}, now {now}" for name, (was, now) in changed.items())
        warnings.warn(f"{directory.path} is resumed with another {names} than it was run with", UserWarning,
                      stacklevel=4)


def _check_items(directory: RunDirectory, loop: ActiveLearningLoop) -> None:
    """A pool whose items have ids (a table's rows): store them with a new run, and check them
    on a resume, since the records name pool positions (:meth:`RunDirectory.check_items`)."""
    pool_ids = getattr(loop.dataset, "item_ids", None)
    if pool_ids is None:
        return
    test_ids = None if loop.test is None else getattr(loop.test, "item_ids", None)
    source = f"table {loop.config.table}" if loop.config.table is not None else f"dataset {loop.dataset.name!r}"
    labels = _known_labels(loop.dataset, pool_ids)
    if labels is not None and test_ids is not None:
        test_labels = _known_labels(loop.test, test_ids)
        labels = None if test_labels is None else {**labels, **test_labels}
    content = _content_hashes(loop.dataset, pool_ids)
    if content is not None and test_ids is not None:
        test_content = _content_hashes(loop.test, test_ids)
        content = None if test_content is None else {**content, **test_content}
    directory.check_items(source, pool_ids, test_ids, labels=labels, content=content)
    if directory.read_items() is None:
        directory.write_items(pool_ids, test_ids, labels=labels, classes=getattr(loop.dataset, "classes", None),
                              content=content)


def _content_hashes(dataset: Any, item_ids: Sequence[str]) -> dict[str, str] | None:
    """Item id -> the first 16 hex digits of the SHA-256 of its input cells
    (``dataset.item_sha256``), enough to tell an edit; ``None`` without them."""
    hashes = getattr(dataset, "item_sha256", None)
    if hashes is None:
        return None
    return {item: sha[:16] for item, sha in zip(item_ids, hashes, strict=True)}


def _known_labels(dataset: Any, item_ids: Sequence[str]) -> dict[str, Any] | None:
    """Item id -> the dataset's known label (a class id, or a multi-label 0/1 list); ``None``
    without labels."""
    targets = getattr(dataset, "targets", None)
    if targets is None:
        return None
    return dict(zip(item_ids, targets.tolist(), strict=True))


# --------------------------------------------------------------------------- comparisons


@_quiet_inside
def run_comparison(
    base: LoopConfig,
    strategies: Sequence[str],
    seeds: Sequence[int],
    out: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    report: bool = True,
    on_run: Callable[[str, int, LoopResult], None] | None = None,
    executor: PoolExecutor | None = None,
) -> dict[tuple[str, int], LoopResult]:
    """Run every (strategy, seed) pair; finished runs are skipped, unfinished ones resumed.

    ``executor`` scores the pools elsewhere (e.g. a Ray cluster); results do not depend on it.
    """
    if not strategies:
        raise InvalidArgumentError("strategies must name at least one acquisition strategy")
    if not seeds:
        raise InvalidArgumentError("seeds must hold at least one seed")
    for name in strategies:  # unknown names, options a strategy does not take: before any work
        check_config_names(base.replace(strategy=name))
    if len(set(strategies)) != len(strategies) or len(set(seeds)) != len(seeds):
        raise InvalidArgumentError(f"strategies and seeds must not repeat, got {list(strategies)} and {list(seeds)}")
    _check_table_file(base)
    comparison = Comparison(Path(out), base, tuple(strategies), tuple(int(s) for s in seeds))
    check_free_folder(Path(out), kind="comparison")
    created, new = not comparison.path.exists(), False
    try:
        with comparison.lock(shared=True):  # refused while `resume COMPARISON --budget N` changes it
            with comparison.updating():  # one reader-merger-writer of comparison.json at a time
                new = not (comparison.path / COMPARISON_FILE).is_file()
                comparison = _merged_comparison(comparison, base, strategies)
                comparison.write()
            return _run_all(comparison, progress=progress, report=report, on_run=on_run, executor=executor)
    except BaseException:
        if new:  # a new comparison whose first run failed before writing anything (data that does not
            # load: a wrong --data-dir): leave nothing behind, so the corrected command starts afresh
            comparison.withdraw_if_empty(remove_folder=created)
        raise


def _merged_comparison(comparison: Comparison, base: LoopConfig, strategies: Sequence[str]) -> Comparison:
    """``comparison`` joined with the one stored at its path (more strategies and seeds), or itself when
    none is stored; a stored one of other settings is refused."""
    if (comparison.path / COMPARISON_FILE).is_file():
        stored = Comparison.read(comparison.path)
        # a comparison has no single strategy or seed: its runs are strategies x seeds
        mine = base.replace(strategy=stored.base.strategy, seed=stored.base.seed)
        if not stored.base.same_run(mine):
            differences = stored.base.differences(mine)
            values = config_differences(stored.base, mine)
            if differences == ["budget"] and base.budget > stored.base.budget:
                advice = (f"`activebayes resume {comparison.path} --budget {base.budget}` (from Python: "
                          f"resume_comparison(path, budget={base.budget})) continues it to the larger budget; or "
                          "choose another folder (--out)")
            else:
                advice = "choose another folder (--out) for these settings, or delete the directory to start again"
            raise RunDirectoryError(f"{comparison.path} holds a comparison with other settings ({values}); {advice}")
        comparison = Comparison(
            comparison.path,
            mine,  # the stored first strategy and seed: comparison.json keeps its base
            tuple(dict.fromkeys([*stored.strategies, *strategies])),
            tuple(dict.fromkeys([*stored.seeds, *comparison.seeds])),
        )
    return comparison


@_quiet_inside
def resume_comparison(
    path: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    report: bool = True,
    runtime: Mapping[str, Any] | None = None,
    executor: PoolExecutor | None = None,
    budget: int | None = None,
) -> dict[tuple[str, int], LoopResult]:
    """Continue every run of the comparison in ``path`` (``runtime``, ``executor``,
    ``budget`` as in :func:`resume_experiment`).

    A larger ``budget`` holds the comparison and every started run (their locks) while it
    raises them: it is refused ("is in use by another process"), with nothing changed, while
    another process runs or resumes the comparison or one of its runs.
    """
    comparison = Comparison.read(path)
    if budget is not None and budget != comparison.base.budget:
        _raise_comparison_budget(comparison, budget)
    with comparison.lock(shared=True):
        comparison = Comparison.read(path)  # as it is now, under the lock
        base = _runtime_overrides(comparison.base, runtime)
        comparison = Comparison(comparison.path, base, comparison.strategies, comparison.seeds)
        return _run_all(comparison, progress=progress, report=report, on_run=None, executor=executor)


def _raise_comparison_budget(comparison: Comparison, budget: int) -> None:
    """Raise every started run of ``comparison``, then ``comparison.json``, to ``budget``, holding
    the comparison and each run (refused, with nothing changed, while any is in use)."""
    with comparison.lock(), comparison.updating(), contextlib.ExitStack() as held:
        comparison = Comparison.read(comparison.path)  # as it is now, under the lock
        if budget == comparison.base.budget:
            return
        started = [RunDirectory(run_dir) for run_dir, _ in comparison.configs() if RunDirectory(run_dir).exists()]
        for directory in started:
            held.enter_context(directory.lock())
        for directory in started:  # every run can go on before any is changed
            directory.check_budget_raise(budget)
        for directory in started:  # every started run first: repeating the call heals a crash
            directory.raise_budget(budget)
        dataclasses.replace(comparison, base=comparison.base.replace(budget=budget)).write()


def _run_all(
    comparison: Comparison,
    *,
    progress: bool,
    report: bool,
    on_run: Callable[[str, int, LoopResult], None] | None,
    executor: PoolExecutor | None = None,
) -> dict[tuple[str, int], LoopResult]:
    results: dict[tuple[str, int], LoopResult] = {}
    busy: list[str] = []
    pairs = list(comparison.configs())
    for run_dir, config in tqdm(pairs, desc="runs", unit="run", disable=not progress):
        try:
            result = run_experiment(config, run_dir, progress=progress, report=False, executor=executor)
        except InUseError:  # another process shares the comparison and runs this one: go on with the rest
            busy.append(f"{config.strategy} seed {config.seed}")
            continue
        results[(config.strategy, config.seed)] = result
        if on_run is not None:
            on_run(config.strategy, config.seed, result)
    if busy:
        raise InUseError(
            f"{comparison.path}: {len(results)} of {len(pairs)} runs are finished; {len(busy)} are being run by "
            f"another process ({', '.join(busy)}): once it is done, `activebayes report {comparison.path}` "
            f"writes the report (or `activebayes resume {comparison.path}` finishes what it left)")
    if report:
        write_report(comparison.path)
    return results


__all__ = [
    "automatic_threads",
    "resume_comparison",
    "resume_experiment",
    "run_comparison",
    "run_experiment",
]
