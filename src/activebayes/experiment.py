"""Run directories, resumable runs, and strategies x seeds comparisons.

A run directory holds one active learning run::

    RUN/
      config.json          the LoopConfig (written once, atomically)
      rounds.jsonl         one JSON object per finished round (rewritten atomically)
      checkpoints/         model weights after each round (latest few kept)
      summary.json         written when the run has finished
      report.html          the run's report (see activebayes.report)

A comparison directory holds one run directory per (strategy, seed), laid out as
``COMPARISON/<strategy>/seed_<seed>/`` plus ``comparison.json`` naming them.

Crash safety: every file is written to a temporary file and renamed into place,
and a round's record is written only after the round is complete. A run killed
at any moment resumes from its directory: completed rounds are replayed onto a
fresh pool (their acquired indices and labels), and because every random step of
round ``r`` is seeded from ``(seed, r, purpose)`` the resumed run ends with
exactly the results an uninterrupted run would have.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from activebayes._io import atomic_write_bytes, atomic_write_text
from activebayes.loop import ActiveLearningLoop, LoopConfig, LoopResult, RoundRecord

CONFIG_FILE = "config.json"
ROUNDS_FILE = "rounds.jsonl"
SUMMARY_FILE = "summary.json"
COMPARISON_FILE = "comparison.json"
CHECKPOINT_DIR = "checkpoints"
KEEP_CHECKPOINTS = 2


class RunDirectoryError(ValueError):
    """A run directory is missing, corrupt, or belongs to a different config."""


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunDirectory:
    """Reads and writes one run's files (see the module docstring)."""

    path: Path

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def rounds_path(self) -> Path:
        return self.path / ROUNDS_FILE

    @property
    def summary_path(self) -> Path:
        return self.path / SUMMARY_FILE

    def exists(self) -> bool:
        return self.config_path.is_file()

    def is_finished(self) -> bool:
        return self.summary_path.is_file()

    def read_config(self) -> LoopConfig:
        if not self.config_path.is_file():
            raise RunDirectoryError(f"{self.path} is not a run directory: {CONFIG_FILE} is missing")
        try:
            return LoopConfig.from_stored(json.loads(self.config_path.read_text()))
        except (json.JSONDecodeError, TypeError) as error:
            raise RunDirectoryError(f"{self.config_path} is not a valid config: {error}") from None

    def write_config(self, config: LoopConfig) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.config_path, json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n")

    def read_rounds(self) -> list[RoundRecord]:
        if not self.rounds_path.is_file():
            return []
        records = []
        for number, line in enumerate(self.rounds_path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(RoundRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError) as error:
                raise RunDirectoryError(f"{self.rounds_path}:{number} is not a valid round record: {error}") from None
        for expected, record in enumerate(records):
            if record.round != expected:
                raise RunDirectoryError(f"{self.rounds_path}: round {record.round} found where round {expected} was expected")
        return records

    def write_rounds(self, records: Sequence[RoundRecord]) -> None:
        text = "".join(json.dumps(r.to_dict(), sort_keys=True) + "\n" for r in records)
        atomic_write_text(self.rounds_path, text)

    def checkpoint_path(self, round_index: int) -> Path:
        return self.path / CHECKPOINT_DIR / f"round_{round_index:04d}.pt"

    def write_checkpoint(self, round_index: int, model: torch.nn.Module) -> None:
        import io

        path = self.checkpoint_path(round_index)
        path.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        atomic_write_bytes(path, buffer.getvalue())
        for old in sorted(path.parent.glob("round_*.pt"))[:-KEEP_CHECKPOINTS]:
            old.unlink(missing_ok=True)

    def read_checkpoint(self, round_index: int) -> dict[str, Any] | None:
        path = self.checkpoint_path(round_index)
        if not path.is_file():
            return None
        return torch.load(path, map_location="cpu", weights_only=True)

    def write_summary(self, result: LoopResult) -> None:
        labels, accuracy = result.learning_curve
        summary = {
            "stop_reason": result.stop_reason,
            "rounds": len(result.rounds),
            "n_labelled": labels[-1] if labels else 0,
            "final_metrics": result.rounds[-1].metrics if result.rounds else {},
            "learning_curve": {"n_labelled": labels, "accuracy": accuracy},
            "labelled_indices": result.labelled_indices,
            "seconds": sum(sum(r.seconds.values()) for r in result.rounds),
        }
        atomic_write_text(self.summary_path, json.dumps(summary, indent=2, sort_keys=True) + "\n")


def run_experiment(
    config: LoopConfig,
    run_dir: str | os.PathLike[str],
    *,
    progress: bool = True,
    loop_factory: Callable[[LoopConfig], ActiveLearningLoop] = ActiveLearningLoop,
    on_round: Callable[[RoundRecord], None] | None = None,
    report: bool = True,
) -> LoopResult:
    """Run (or continue) one active learning run in ``run_dir``.

    A new directory gets ``config.json``; an existing one must hold the same
    config and is resumed from its ``rounds.jsonl`` (a finished run returns at
    once). Each finished round is appended atomically before the next starts.
    """
    directory = RunDirectory(Path(run_dir))
    if directory.exists():
        stored = directory.read_config()
        if stored != config:
            differences = sorted(k for k, v in config.to_dict().items() if stored.to_dict().get(k) != v)
            raise RunDirectoryError(
                f"{directory.path} already holds a run with a different config "
                f"(differs in: {', '.join(differences)}); use `activebayes resume` or another --out"
            )
    loop = loop_factory(config)  # validates names and loads data before anything is written
    if not directory.exists():
        directory.write_config(config)
    return _continue(directory, loop, progress=progress, on_round=on_round, report=report)


def resume_experiment(
    run_dir: str | os.PathLike[str],
    *,
    progress: bool = True,
    loop_factory: Callable[[LoopConfig], ActiveLearningLoop] = ActiveLearningLoop,
    report: bool = True,
) -> LoopResult:
    """Continue the run stored in ``run_dir`` from its last complete round."""
    directory = RunDirectory(Path(run_dir))
    loop = loop_factory(directory.read_config())
    return _continue(directory, loop, progress=progress, on_round=None, report=report)


def _continue(
    directory: RunDirectory,
    loop: ActiveLearningLoop,
    *,
    progress: bool,
    on_round: Callable[[RoundRecord], None] | None,
    report: bool,
) -> LoopResult:
    config = loop.config
    records = directory.read_rounds()
    if records:
        model_state = None
        if config.warm_start:
            model_state = directory.read_checkpoint(records[-1].round)
            if model_state is None:
                raise RunDirectoryError(
                    f"{directory.path}: warm-start run has no checkpoint for round {records[-1].round}"
                )
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
    if report:
        _write_report(directory.path)
    return result


def _write_report(path: Path) -> None:
    try:
        from activebayes.report import write_report
    except ImportError:  # the report module is optional at this layer
        return
    write_report(path)


# --------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class Comparison:
    """Several strategies x seeds of one base config, each in its own run directory."""

    path: Path
    base: LoopConfig
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]

    def run_dir(self, strategy: str, seed: int) -> Path:
        return self.path / strategy / f"seed_{seed}"

    def configs(self) -> Iterable[tuple[Path, LoopConfig]]:
        for strategy in self.strategies:
            for seed in self.seeds:
                yield self.run_dir(strategy, seed), self.base.replace(strategy=strategy, seed=seed)

    def write(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        data = {
            "base": self.base.to_dict(),
            "strategies": list(self.strategies),
            "seeds": list(self.seeds),
            "runs": [str(p.relative_to(self.path)) for p, _ in self.configs()],
        }
        atomic_write_text(self.path / COMPARISON_FILE, json.dumps(data, indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Comparison:
        path = Path(path)
        file = path / COMPARISON_FILE
        if not file.is_file():
            raise RunDirectoryError(f"{path} is not a comparison directory: {COMPARISON_FILE} is missing")
        try:
            data = json.loads(file.read_text())
            return cls(path, LoopConfig.from_stored(data["base"]), tuple(data["strategies"]), tuple(data["seeds"]))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise RunDirectoryError(f"{file} is not a valid comparison file: {error}") from None


def run_comparison(
    base: LoopConfig,
    strategies: Sequence[str],
    seeds: Sequence[int],
    out: str | os.PathLike[str],
    *,
    progress: bool = True,
    report: bool = True,
    on_run: Callable[[str, int, LoopResult], None] | None = None,
) -> dict[tuple[str, int], LoopResult]:
    """Run every (strategy, seed) pair; finished runs are skipped, unfinished ones resumed."""
    from activebayes.acquisition import get_strategy

    if not strategies:
        raise ValueError("strategies must name at least one acquisition strategy")
    if not seeds:
        raise ValueError("seeds must hold at least one seed")
    for name in strategies:
        get_strategy(name)  # unknown names fail before any work
    if len(set(strategies)) != len(strategies) or len(set(seeds)) != len(seeds):
        raise ValueError(f"strategies and seeds must not repeat, got {list(strategies)} and {list(seeds)}")
    comparison = Comparison(Path(out), base, tuple(strategies), tuple(int(s) for s in seeds))
    if (comparison.path / COMPARISON_FILE).is_file():
        stored = Comparison.read(comparison.path)
        if stored.base != base:
            raise RunDirectoryError(f"{comparison.path} holds a comparison with a different base config")
        comparison = Comparison(
            comparison.path,
            base,
            tuple(dict.fromkeys([*stored.strategies, *strategies])),
            tuple(dict.fromkeys([*stored.seeds, *comparison.seeds])),
        )
    comparison.write()
    return _run_all(comparison, progress=progress, report=report, on_run=on_run)


def resume_comparison(path: str | os.PathLike[str], *, progress: bool = True, report: bool = True) -> dict[tuple[str, int], LoopResult]:
    return _run_all(Comparison.read(path), progress=progress, report=report, on_run=None)


def _run_all(
    comparison: Comparison,
    *,
    progress: bool,
    report: bool,
    on_run: Callable[[str, int, LoopResult], None] | None,
) -> dict[tuple[str, int], LoopResult]:
    from tqdm.auto import tqdm

    results: dict[tuple[str, int], LoopResult] = {}
    pairs = list(comparison.configs())
    for run_dir, config in tqdm(pairs, desc="runs", unit="run", disable=not progress):
        result = run_experiment(config, run_dir, progress=progress, report=False)
        results[(config.strategy, config.seed)] = result
        if on_run is not None:
            on_run(config.strategy, config.seed, result)
    if report:
        _write_report(comparison.path)
    return results


def is_comparison(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / COMPARISON_FILE).is_file()


def load_runs(path: str | os.PathLike[str]) -> dict[tuple[str, int], tuple[LoopConfig, list[RoundRecord]]]:
    """Every run under ``path`` (a run or a comparison directory): ``(strategy, seed) -> (config, rounds)``."""
    path = Path(path)
    if is_comparison(path):
        comparison = Comparison.read(path)
        dirs = [comparison.run_dir(s, seed) for s in comparison.strategies for seed in comparison.seeds]
    elif (path / CONFIG_FILE).is_file():
        dirs = [path]
    else:
        raise RunDirectoryError(f"{path} is neither a run directory ({CONFIG_FILE}) nor a comparison ({COMPARISON_FILE})")
    runs = {}
    for run_dir in dirs:
        directory = RunDirectory(run_dir)
        if not directory.exists():
            continue
        config = directory.read_config()
        runs[(config.strategy, config.seed)] = (config, directory.read_rounds())
    return runs


__all__ = [
    "Comparison",
    "RunDirectory",
    "RunDirectoryError",
    "is_comparison",
    "load_runs",
    "resume_comparison",
    "resume_experiment",
    "run_comparison",
    "run_experiment",
]
