"""The ``activebayes`` command line.

``activebayes run`` with no arguments is the README's main job: BALD with MC
dropout on the embedded handwritten digits, a couple of minutes on a laptop CPU.

User mistakes (unknown names, bad numbers, missing files, corrupt configs) end
with a one-line ``error: ...`` message and a non-zero exit status, never a
traceback; set ``ACTIVEBAYES_DEBUG=1`` to see the traceback anyway.
"""

from __future__ import annotations

import collections
import difflib
import errno
import dataclasses
import functools
import os
import re
import signal
import sqlite3
import sys
import warnings
import threading
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from activebayes import _progress
from activebayes._threads import automatic_threads, check_thread_limit
from activebayes._memory import keep_freed_memory
from activebayes._validation import available_devices, check_device, check_positive_int
from activebayes.acquisition import available_strategies
from activebayes.data import (ArrayDataset, DataError, MissingSplitError, available_datasets, convert_to_memmap,
                              has_contents, load_dataset)
from activebayes.data.table import check_table_file
from activebayes.distributed import RayExecutor
from activebayes.errors import ActiveBayesError, InvalidArgumentError, InvalidTypeError, MissingFileError
from activebayes.experiment import resume_comparison, resume_experiment, run_comparison, run_experiment
from activebayes.labelling.interchange import AnswerFileError, is_picture_shape
from activebayes.labelling.project import LabellingProject, check_new_project_folder, is_project
from activebayes.labelling.settings import ProjectConfig
from activebayes.loop import check_config_names, check_loop_data, config_strategies
from activebayes.models import available_models
from activebayes.records import (DEFAULT_STRATEGY, POSTERIOR_CHOICES, LoopConfig, cli_settings, headline_metric,
                                 headline_name, schedule_name)
from activebayes.report import write_report
from activebayes.rundir import COMPARISON_FILE, Comparison, RunDirectory, is_comparison, is_run

DEFAULT_RUNS_DIR = "runs"

# Errors a user can cause: the library's own (wrong arguments, bad or missing files, ...)
# and the operating system's refusals about paths the user named (a read-only or full
# disk, missing permissions, a missing folder). Anything else, a ValueError or TypeError
# from deep inside included, is a bug and keeps its traceback.
_USER_ERRORS: tuple[type[BaseException], ...] = (ActiveBayesError,)
_PATH_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)

#: OSError numbers that say something about the user's environment, with what to do.
_ENVIRONMENT_ERRNOS: dict[int, str] = {
    errno.EROFS: "choose a writable place",
    errno.EACCES: "check its permissions or choose another place",
    errno.EPERM: "check its permissions or choose another place",
    errno.ENOSPC: "free some disk space",
    errno.EDQUOT: "free some disk space (the disk quota is used up)",
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path: a part of it is a file",
    errno.EISDIR: "it is a folder, a file was expected",
    errno.EEXIST: "remove it or choose another name",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.EMFILE: "too many open files; close some programs",
}


#: OSError numbers saying that a place cannot be written (another one may be chosen).
_UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})


def _environment_message(error: OSError) -> str | None:
    """One line naming the path for an operating-system refusal a user can fix, else None."""
    if error.errno not in _ENVIRONMENT_ERRNOS:
        return None
    what = (error.strerror or os.strerror(error.errno)).lower()
    path = error.filename if error.filename is not None else None
    if path is None:
        return f"{what} ({_ENVIRONMENT_ERRNOS[error.errno]})"
    also = f" (and {error.filename2})" if getattr(error, "filename2", None) else ""
    return f"{os.fsdecode(path)}{also}: {what}; {_ENVIRONMENT_ERRNOS[error.errno]}"


#: Python argument spellings in library messages and the flags that set them (CLI messages
#: name flags only).
_FLAG_WORDS: tuple[tuple[str, str], ...] = (
    (r"\bdownload=True \(--download\)", "--download"),
    (r"\bdata_dir=<([^>]*)>", r"--data-dir <\1>"),
    (r"\bdata_dir=", "--data-dir "),
    (r"\bdownload=True\b", "--download"),
    (r"\boverwrite=True \(--overwrite\)", "--overwrite"),
    (r"\boverwrite=True\b", "--overwrite"),
    (r"\bevaluate_test=False \(--no-test\)", "--no-test"),
)


def _flag_wording(message: str) -> str:
    """``message`` with Python argument spellings replaced by the CLI's flags
    (``data_dir=<folder>`` -> ``--data-dir <folder>``, ``strategy (--strategy)`` -> ``--strategy``)."""
    for pattern, flag in _FLAG_WORDS:
        message = re.sub(pattern, flag, message)

    def flag_only(match: re.Match[str]) -> str:
        name, flag = match.group(1), match.group(2)
        return flag if flag in ("--" + name.replace("_", "-"), _SETTING_FLAGS.get(name)) else match.group(0)

    message = re.sub(r"\b([a-z_]+) \((--[a-z-]+)\)", flag_only, message)

    def flag_value(match: re.Match[str]) -> str:  # budget=30 -> --budget 30 (settings with a flag only)
        name, value = match.group(1), match.group(2)
        if name not in _SETTINGS_WITH_FLAGS:
            return match.group(0)
        return f"--{name.replace('_', '-')} {'none' if value == 'None' else value}"

    # Python code quoted in the message ("from Python: resume_experiment(path, budget=40)") stays Python
    quoted = re.findall(r"from Python: [\w.]+\([^)]*\)", message)
    for i, code in enumerate(quoted):
        message = message.replace(code, f"\0{i}\0", 1)
    message = re.sub(r"(?<![\w/?&.-])([a-z][a-z_]*)=([^\s,;)]+)", flag_value, message)
    for i, code in enumerate(quoted):
        message = message.replace(f"\0{i}\0", code, 1)
    first = re.match(r"([a-z][a-z_]*) (must|needs)\b", message)  # "budget must be ..." -> "--budget must be ..."
    if first and first.group(1) in _SETTINGS_WITH_FLAGS:
        message = f"--{first.group(1).replace('_', '-')}{message[len(first.group(1)):]}"
    return message


#: Settings a user sets by a flag of the same name (``cold_start`` -> ``--cold-start``): the
#: config's command-line settings (:func:`activebayes.records.setting`) and the commands' own.
_SETTINGS_WITH_FLAGS = frozenset(
    {f.name for f, flag in cli_settings(LoopConfig) if flag.split("/")[0] == "--" + f.name.replace("_", "-")}
    | {"strategy", "seed", "max_epochs", "size", "targets"}  # and the commands' own (run, convert, report)
)


#: The flag of each config setting that is a command-line option (``costs_file`` -> ``--costs``).
_SETTING_FLAGS = {f.name: flag.split("/")[0] for f, flag in cli_settings(LoopConfig)}


#: Where a command's results go, for the interruption messages (set as a command starts).
_current: dict[str, str] = {}


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that the command stops like on Ctrl-C."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def _resume_command() -> str:
    """``activebayes resume DIR``, with the ``--budget N`` the interrupted command was going to
    (without it, resume would go on to the old budget, or refuse a run already raised)."""
    budget = _current.get("budget")
    return f"activebayes resume {_current['directory']}" + (f" --budget {budget}" if budget is not None else "")


def _stopped_message(how: str) -> str:
    if _current.get("directory") is not None:
        return f"{how}; resume with `{_resume_command()}`"
    if _current.get("project") is not None:  # query / label / import: each answer is stored as it comes
        return f"{how}; the project keeps every label stored: run the same command again to go on"
    return how


def _resume_hint() -> str:
    """``"; resume with `activebayes resume DIR` ..."`` when a command stopped by a full disk had
    started a run or comparison (every file is written atomically, so it resumes), else ``""``."""
    directory = _current.get("directory")
    if directory is None or not (is_run(directory) or is_comparison(directory)):
        return ""
    return f"; once there is space, resume with `{_resume_command()}`"


def _friendly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn user errors into one-line messages (exit status 1), stops into a message (130 / 143)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _current.clear()
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            # ``--quiet``, or stderr not a terminal: no bars, also from steps deep inside (_progress)
            bars = _progress.for_command(bool(kwargs.get("quiet")))
            with _progress.default(bars):
                return command(*args, **kwargs)
        except click.ClickException:
            raise
        except _USER_ERRORS as error:
            if os.environ.get("ACTIVEBAYES_DEBUG"):
                raise
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise click.ClickException(_flag_wording(message)) from None
        except OSError as error:
            message = _environment_message(error)
            if message is None and isinstance(error, _PATH_ERRORS) and str(error).strip():
                message = str(error).strip().splitlines()[0]
            if message is None or os.environ.get("ACTIVEBAYES_DEBUG"):
                raise
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                message += _resume_hint()
            raise click.ClickException(message) from None
        except sqlite3.DatabaseError as error:  # a labelling project's store: a read-only or full disk, or damaged
            text = str(error).lower()
            where = _current.get("project")
            if where is None or os.environ.get("ACTIVEBAYES_DEBUG"):
                raise
            store = Path(where) / "labels.sqlite"
            if any(w in text for w in ("malformed", "not a database", "no such table", "no such column")):
                raise click.ClickException(f"{store}: {text}: the project's label store is damaged (or not one); "
                                           "put back a copy of it, or create a new project") from None
            if not isinstance(error, sqlite3.OperationalError) or not any(
                    w in text for w in ("readonly", "unable to open", "disk", "full")):
                raise
            raise click.ClickException(f"{store}: {text}; check that the folder is writable and the disk not "
                                       "full") from None
        except KeyboardInterrupt:
            click.echo(_stopped_message("interrupted"), err=True)
            sys.exit(130)
        except _Terminated:
            click.echo(_stopped_message("terminated (SIGTERM)"), err=True)
            sys.exit(143)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    return wrapper


# --------------------------------------------------------------------------- shared options

def _setting_option(f: dataclasses.Field, flag: str) -> Callable[..., Any]:
    """The click option of one config setting: type, choices, help and shown default all come
    from the field (:func:`activebayes.records.setting`); its value is ``None`` unless given,
    so a TOML file or the config's own default decides."""
    meta = f.metadata
    shown = meta["default_text"] or ("" if f.default is None or f.default == () else
                                     flag.split("/")[0 if f.default else 1] if "/" in flag else str(f.default))
    help_text = meta["help"] + (f" [{shown}]" if shown else "")
    if "/" in flag:
        return click.option(flag, f.name, default=None, help=help_text)
    if meta["choices"]:
        kind: Any = click.Choice(list(meta["choices"]))
    elif meta["kind"] == "dir":
        kind = click.Path(file_okay=False)
    elif meta["kind"] == "file":
        kind = click.Path(dir_okay=False)
    elif meta["kind"] == "text":  # a comma-separated list: a repeated flag adds to it, never replaces it
        return click.option(flag, f.name, type=str, multiple=True, callback=_joined,
                            help=help_text + " Repeatable: the values add up.")
    else:
        kind = {"int": int, "float": float}.get(str(f.type).split(" ")[0].split("[")[0], str)
    return click.option(flag, f.name, type=kind, default=None, help=help_text)

#: flags that are ``load_table`` options (``LoopConfig.table_options``)
_TABLE_OPTIONS = ("encoder", "test_size", "multilabel", "missing", "classes")
#: ``--missing``: what a missing cell of a --table does (``load_table``'s ``missing``)
_MISSING_HELP = ("A missing cell of the --table: error (a one-line error naming its row and column), or impute "
                 "(the column's mean for numbers, a '<missing>' category otherwise). [error]")


def _joined(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> str | None:
    """A list option (``multiple``) as one comma-separated value: ``--stop-when a --stop-when b``
    is ``"a,b"``, as ``--stop-when a,b`` (a repeat adds, never silently replaces); ``None`` when
    not given, so that a TOML file or the default decides. An empty value stays in (``""``, ``"a,"``),
    for the setting's own check to refuse."""
    return ",".join(values) if values else None


def _loop_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for f, flag in reversed(cli_settings(LoopConfig)):
        command = _setting_option(f, flag)(command)
    # load_table options (LoopConfig.table_options) for a --table pool
    command = click.option("--missing", "missing", type=click.Choice(["error", "impute"]), default=None,
                           help=_MISSING_HELP)(command)
    command = click.option("--multilabel", "multilabel", is_flag=True, default=None, help="The table's labels are sets of classes separated by '|'.")(command)
    command = click.option("--classes", "classes", type=str, default=None, help="Comma-separated class names of a --table, in order; its labels must be among them. [the sorted labels found]")(command)
    command = click.option("--encoder", "encoder", type=str, default=None, help="Text encoder of a --table pool (or of --dataset wordnet_nouns): tfidf, hashing, a word-vector file (GloVe) or a local model folder. [tfidf]")(command)
    command = click.option("--test-size", "test_size", type=int, default=None, help="Rows of a --table held out as a test set (chosen by their ids). [0]")(command)
    command = click.option("--max-epochs", "max_epochs", type=int, default=None, help="Training epochs per round (upper bound with early stopping).")(command)
    command = click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None, help="TOML file with any of these options (flags win).")(command)
    command = click.option("--out", "out", type=click.Path(file_okay=False), default=None, help="Output directory.")(command)
    command = click.option("-q", "--quiet", is_flag=True, help="No progress bars.")(command)
    return command


def _ray_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option("--ray-workers", "ray_workers", type=click.IntRange(min=1), default=None,
                           help="Model replicas (actors) scoring the pool on Ray. [2]")(command)
    command = click.option("--ray-address", "ray_address", default=None,
                           help="Score the pool on this existing Ray cluster (e.g. auto, ray://head:10001); implies --ray.")(command)
    command = click.option("--ray", "ray", is_flag=True,
                           help="Score the pool on Ray (a local cluster unless --ray-address); same picks as one process.")(command)
    return command


def _executor(flags: dict[str, Any]) -> Any:
    """A Ray executor when --ray / --ray-address was given (removed from ``flags``), else None."""
    ray, address, workers = flags.pop("ray", False), flags.pop("ray_address", None), flags.pop("ray_workers", None)
    if not (ray or address):
        if workers is not None:
            raise InvalidArgumentError("--ray-workers needs --ray or --ray-address")
        return None
    executor = RayExecutor(address=address, num_workers=workers or 2)
    executor.check_address()  # an unreachable cluster: a one-line error now, before anything is written
    click.get_current_context().call_on_close(executor.close)  # a Ray started here stops with the command
    return executor


def _read_toml(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    file = Path(path)
    if not file.is_file():
        raise MissingFileError(f"--config: no such file {path}")
    try:
        data = tomllib.loads(file.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise InvalidArgumentError(f"--config: {path} is not valid TOML: {error}") from None
    return {key.replace("-", "_"): value for key, value in data.items()}


#: The smallest value of each integer flag (one wording for every out-of-range number).
def _check_names(values: Mapping[str, Any]) -> None:
    """Unknown --dataset / --model / --strategy / --cold-start names, listing what `activebayes list` shows."""
    lists = {"dataset": ("datasets", available_datasets()), "model": ("models", available_models()),
             "strategy": ("strategies", available_strategies()), "cold_start": ("strategies", available_strategies())}
    accepted = {"strategy": available_strategies(aliases=True), "cold_start": [*available_strategies(aliases=True), "none"],
                "model": ["auto", *available_models()], "dataset": available_datasets()}
    for name, (section, shown) in lists.items():
        value = values.get(name)
        if value is None or not isinstance(value, str) or value in accepted[name]:
            continue
        close = difflib.get_close_matches(value, shown, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        extra = ", or none" if name == "cold_start" else ""
        raise InvalidArgumentError(f"--{name.replace('_', '-')}: unknown {section[:-1] if section != 'strategies' else 'strategy'} "
                                   f"{value!r}{hint}; expected one of: {', '.join(shown)}{extra} "
                                   f"(`activebayes list {section}`)")


def _stored_encoder(encoder: str) -> str:
    """``--encoder`` as a config stores it: a word-vector file or model folder as an absolute
    path (so the run or project reopens from anywhere), a built-in name as it is; a misspelt
    name is refused (with the built-in names), not taken for a missing file."""
    from activebayes.data.text import BUILTIN_ENCODERS, check_encoder_name

    check_encoder_name(encoder, "--encoder")
    return encoder if encoder in BUILTIN_ENCODERS else str(Path(encoder).expanduser().resolve())


def _explicit_threads() -> int | None:
    """The thread count this command was given (``--threads N``, else ``OMP_NUM_THREADS`` /
    ``MKL_NUM_THREADS``); ``None`` when it chooses automatically. A run stores it
    (``LoopConfig.threads``), so that its resumption computes on as many threads."""
    context = click.get_current_context(silent=True)  # None: called from Python, outside a command
    obj = (context.find_root().obj if context is not None else None) or {}
    choice = obj.get("threads")
    return None if choice is None or choice.source == "auto" else choice.threads


def _build_config(file_values: Mapping[str, Any], flags: Mapping[str, Any], *, config_file: str | None = None,
                  **overrides: Any) -> Any:
    """The run's config from the ``--config`` file's values (read from ``config_file``), the
    flags and the command's own settings (flags win over the file)."""
    values = dict(file_values)
    overrides = {**overrides, "threads": _explicit_threads()}  # the command's; else a config file's
    values.update({k: v for k, v in flags.items() if v is not None})
    values.update({k: v for k, v in overrides.items() if v is not None})
    from_flags = {name for name, value in {**flags, **overrides}.items() if value is not None}

    def from_the_file(key: str | None) -> bool:  # a bad value the --config file gave, not a flag
        return config_file is not None and key in file_values and key not in from_flags

    def setting_name(key: str) -> str:  # how an error names a setting: the file's key, else its flag
        return f"--config {config_file}: {key}" if from_the_file(key) else f"--{key.replace('_', '-')}"

    check_device(values.get("device"), setting_name("device"))
    if values.get("ensemble_size") is not None and values.get("posterior") == "mc_dropout":
        # only a posterior given (flag or file) is refused: the config's default is mc_dropout, and a config
        # with ensemble_size and that default is an ensemble (as before --posterior existed)
        raise InvalidArgumentError(f"--ensemble-size {values['ensemble_size']} makes a deep ensemble, but --posterior "
                                   "mc_dropout asks for MC dropout: give --posterior ensemble with --ensemble-size N, "
                                   "or leave --ensemble-size out")
    if values.get("table") is not None and (flags.get("dataset") is not None or file_values.get("dataset") is not None):
        raise InvalidArgumentError(f"give --dataset or --table, not both: got --dataset "
                                   f"{flags.get('dataset') or file_values.get('dataset')} and --table {values['table']}")
    given = {name: values.pop(name, None) for name in _TABLE_OPTIONS}
    table_options = {name: value for name, value in given.items() if value is not None and value is not False}
    if values.get("table") is None:
        only_tables = [f"--{name.replace('_', '-')}" for name in table_options if name != "encoder"]
        if only_tables:
            raise InvalidArgumentError(f"{', '.join(only_tables)}: only with a table (--table FILE)")
    if "encoder" in table_options:
        table_options["encoder"] = _stored_encoder(table_options["encoder"])
    if isinstance(table_options.get("classes"), str):  # a TOML file may give a list
        table_options["classes"] = list(_class_names(table_options["classes"]))
    if "encoder" in table_options and values.get("table") is None:  # a named dataset's encoder (wordnet_nouns)
        from activebayes.data.datasets import DATASET_OPTIONS

        dataset = values.get("dataset", LoopConfig.dataset)
        if "encoder" not in DATASET_OPTIONS.get(dataset, ("encoder",)):
            takes = ", ".join(name for name, options in DATASET_OPTIONS.items() if "encoder" in options)
            raise InvalidArgumentError(f"--encoder: only with --table FILE or --dataset {takes}, "
                                       f"got --dataset {dataset}")
        values["dataset_options"] = {**dict(values.get("dataset_options", {})), "encoder": table_options.pop("encoder")}
    if table_options:
        values["table_options"] = {**dict(values.get("table_options", {})), **table_options}
    for key in ("table", "data_dir", "costs_file"):  # stored absolute, so the run resumes and reports from anywhere
        if values.get(key) and isinstance(values[key], str | os.PathLike):  # another type: LoopConfig says so
            values[key] = str(Path(values[key]).expanduser().resolve())
    max_epochs = values.pop("max_epochs", None)
    if max_epochs is not None:
        check_positive_int(max_epochs, setting_name("max_epochs"))  # a file's "3" too: an error, not a TypeError
        values["fit_options"] = {**dict(values.get("fit_options", {})), "max_epochs": max_epochs}
    if from_the_file("threads") and isinstance(values["threads"], int):  # named as the file's, not --threads
        check_thread_limit(values["threads"], setting_name("threads"))
    try:
        _check_names(values)
    except InvalidArgumentError as error:  # "--cold-start: unknown strategy ...": from the file, say so
        named = re.match(r"--([a-z-]+): (.*)", str(error), re.DOTALL)
        if named is None or not from_the_file(named.group(1).replace("-", "_")):
            raise
        raise InvalidArgumentError(f"--config {config_file}: {named.group(1).replace('-', '_')}: "
                                   f"{named.group(2)}") from None
    try:
        config = LoopConfig.from_dict(values)
    except (InvalidArgumentError, InvalidTypeError) as error:  # flags have known names: an unknown key came from the file
        first = re.match(r"(?:unknown )?([a-z][a-z_]*)", str(error))  # "budget must ...", "unknown initial ..."
        if config_file is not None and (str(error).startswith("unknown config key")
                                        or from_the_file(first.group(1) if first else None)):
            raise type(error)(f"--config {config_file}: {error}") from None
        raise
    check_config_names(config)  # before a command prints its plan or creates a directory
    return config


def _class_names(text: str) -> tuple[str, ...]:
    """``--classes a,b,c`` as names; an empty name (``a,,b``) is a mistake, not a name to drop."""
    names = tuple(c.strip() for c in text.split(","))
    if not all(names):
        raise InvalidArgumentError(f"--classes: an empty class name in {text!r}; separate the names by single commas")
    return names


#: The most seeds ``--seeds`` may name: each seed is a run of every strategy (10,000 seeds of four
#: strategies are 40,000 runs, weeks on one machine), so more is a typo (``0-1000000000``), refused
#: before the list is made (a billion seeds would exhaust the memory).
_MAX_SEEDS = 10_000


def _parse_seeds(text: str | list[int] | int) -> list[int]:
    """``"0,1,2"``, ``"0-4"`` (inclusive), or a TOML list; at most :data:`_MAX_SEEDS` of them."""
    if isinstance(text, (int, list)):  # a config file's seed = 3 or seeds = [0, 1]
        values = text if isinstance(text, list) else [text]
        if not values or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in values):
            raise InvalidArgumentError(f"--seeds must name one or more non-negative integers, got {text!r}")
        if len(values) > _MAX_SEEDS:
            raise InvalidArgumentError(f"--seeds names {len(values):,} seeds, more than {_MAX_SEEDS:,}")
        return _unrepeated_seeds(list(values), text)
    ranges: list[range] = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            if "-" in part[1:]:
                lo, hi = (int(end) for end in part.split("-", 1))
            elif part:
                lo = hi = int(part)
            else:
                continue
        except ValueError:
            raise InvalidArgumentError(f"--seeds must be a comma-separated list of integers or a range like 0-4, got {text!r}") from None
        if hi < lo:
            raise InvalidArgumentError(f"--seeds: the range {part!r} runs backwards; write {hi}-{lo}")
        ranges.append(range(lo, hi + 1))
    count = sum(r.stop - r.start for r in ranges)  # not len(): a range beyond sys.maxsize has none
    if count > _MAX_SEEDS:
        raise InvalidArgumentError(f"--seeds names {count:,} seeds, more than {_MAX_SEEDS:,} (each seed is a run of "
                                   f"every strategy); give fewer, e.g. 0-4, got {text!r}")
    seeds = [seed for r in ranges for seed in r]
    if not seeds or any(s < 0 for s in seeds):
        raise InvalidArgumentError(f"--seeds must name one or more non-negative integers, got {text!r}")
    return _unrepeated_seeds(seeds, text)


def _unrepeated_seeds(seeds: list[int], text: object) -> list[int]:
    """``seeds``, refused when one is named twice (``0-2,1``): a comparison runs each seed once."""
    repeated = sorted(seed for seed, count in collections.Counter(seeds).items() if count > 1)
    if repeated:
        raise InvalidArgumentError(f"--seeds must not repeat a seed, got {text!r} "
                                   f"(named twice: {', '.join(map(str, repeated))})")
    return seeds


def _parse_names(text: str | list[str], flag: str) -> list[str]:
    """``"a,b"`` or a config file's list: names, at least one, none empty or repeated."""
    if isinstance(text, list) and not all(isinstance(name, str) for name in text):
        raise InvalidArgumentError(f"{flag} must be names (text), got {text!r}")
    names = [s.strip() for s in (text if isinstance(text, list) else str(text).split(","))]
    if not any(names):
        raise InvalidArgumentError(f"{flag} must name at least one, got {text!r}")
    if not all(names):  # "bald," or "bald,,random": a name lost between commas
        raise InvalidArgumentError(f"{flag} has an empty name (two commas, or one at an end), got {text!r}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"{flag} must not repeat a name, got {text!r}")
    return names


def _parse_strategies(text: str | list[str]) -> list[str]:
    return _parse_names(text, "--strategies")


def _given(flag: Any, from_file: Any, default: Any) -> Any:
    """The flag's value, else the file's, else ``default``: an empty value given is kept (for its check)."""
    return flag if flag is not None else from_file if from_file is not None else default


def _measured_on(metric: str) -> str:
    """A headline metric as a person reads it, with where it was measured: ``"test accuracy"``,
    ``"validation micro-F1"`` (a run without a test set reports its validation split)."""
    return f"{metric.split('_', 1)[0]} {headline_name(metric)}"


def _print_results(path: Path) -> None:
    report = path / "report.html"
    click.echo(f"results: {path}" + (f"\nreport:  {report}" if report.is_file() else ""))


def _print_comparison_table(path: Path) -> None:
    """A line per strategy of a comparison, in the order given: its seeds, the area under its
    learning curve (:func:`~activebayes.analysis.area_under_learning_curve`, mean ± sd over the seeds)
    and its final headline metric (mean over the seeds)."""
    from activebayes.analysis import summarise_runs
    from activebayes.rundir import Comparison, load_runs

    runs = load_runs(path)
    metric = headline_metric([r.metrics or {} for _, rounds in runs.values() for r in rounds])
    summaries = summarise_runs(runs, metric=metric, targets=())
    missing = Comparison.read(path).missing_runs()  # left out of the table: say so, as the report does
    note = ("" if not missing else "- missing runs, not started or deleted: " +
            ", ".join(f"{strategy} seed {seed} ({strategy}/seed_{seed})" for strategy, seed in missing) +
            f"; `activebayes resume {path}` runs them")
    if not summaries:
        if note:
            click.echo(note)
        return
    # a run that has not stopped (interrupted, or still running) ends early: its area and final value are not
    # comparable with a finished run's, so the line is marked and the runs are named below
    unfinished = {key: rounds[-1].n_labelled for key, (_, rounds) in runs.items()
                  if rounds and rounds[-1].stop_reason is None}
    width = max(len("strategy"), *(len(name) for name in summaries))
    click.echo(f"{'strategy':<{width}}  seeds  AULC (mean ± sd)  final {_measured_on(metric)}")
    for name, summary in summaries.items():
        spread = f"± {summary.aulc_std:.4f}" if summary.n_seeds > 1 else "        "  # no spread from one seed
        mark = "  *" if any(strategy == name for strategy, _ in unfinished) else ""
        click.echo(f"{name:<{width}}  {summary.n_seeds:>5}  {summary.aulc_mean:.4f} {spread}   "
                   f"{summary.final_accuracy_mean:.4f}{mark}")
    if unfinished:
        named = ", ".join(f"{strategy} seed {seed} (at {labels} labels)" for (strategy, seed), labels in unfinished.items())
        click.echo(f"* includes runs not finished: {named}; `activebayes resume {path}` finishes them")
    if note:
        click.echo(note)


# --------------------------------------------------------------------------- commands


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="activebayes")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="CPU threads for torch, overriding the automatic choice (one thread for small "
                   "models or when other processes keep the cores busy, more for large convolutions "
                   "on free cores; OMP_NUM_THREADS / MKL_NUM_THREADS are honoured). [auto]")
def cli(threads: int | None) -> None:
    """Bayesian deep active learning: fit, acquire, label, repeat."""
    # The thread count for the whole command (restored when it ends): --threads N, else
    # OMP_NUM_THREADS / MKL_NUM_THREADS, else chosen per fit / predict from the work and the
    # free cores (activebayes._threads explains the rule and what was measured).
    context = click.get_current_context()
    try:
        context.obj = {"threads": context.with_resource(automatic_threads(threads))}
    except ActiveBayesError as error:  # --threads 1000000 (or OMP_NUM_THREADS): before any command runs
        raise click.ClickException(_flag_wording(str(error))) from None
    keep_freed_memory()  # MC prediction in passes reuses the heap (activebayes._memory)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """A warning as the command line shows it: ``warning: MESSAGE`` on stderr, one line; not the
    library's file and source line. Another package's warning also names its kind and module."""
    text = " ".join(str(message).split())
    if not Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent):
        text = f"{text} ({category.__name__}, {Path(filename).name})"
    click.echo(f"warning: {text}", err=True)


def main(args: list[str] | None = None) -> int:
    """Entry point: every error a user can cause ends in one line on stderr, every warning too."""
    with warnings.catch_warnings():  # restores the caller's showwarning (main() is also called in-process)
        warnings.showwarning = _show_warning
        return _main(args)


def _main(args: list[str] | None) -> int:
    try:
        cli.main(args=args, prog_name="activebayes", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as error:
        hint = ""
        if isinstance(error, click.NoSuchOption) and error.option_name == "--threads" and error.ctx is not None:
            # an option of the whole program, not of the command: say where it goes
            click.echo(f"error: --threads goes before the command: activebayes --threads N "
                       f"{error.ctx.info_name} ...", err=True)
            return error.exit_code
        if isinstance(error, click.NoSuchOption) and error.ctx is not None and error.ctx.parent is None:
            placed = _command_option_placement(error.option_name, args)
            if placed:  # a command's option given before the command
                click.echo(f"error: {placed}", err=True)
                return error.exit_code
        if isinstance(error, click.UsageError) and error.ctx is not None:
            hint = f" (see `{error.ctx.command_path} --help`)"
        click.echo(f"error: {error.format_message()}{hint}", err=True)
        return error.exit_code
    return 0


def _command_option_placement(option: str, args: list[str] | None) -> str | None:
    """Where ``option`` goes when a command's option was given before the command
    (``activebayes -q run``): ``None`` when no command takes it."""
    commands = [name for name, command in cli.commands.items()
                if any(option in (*param.opts, *param.secondary_opts) for param in command.params)]
    if not commands:
        return None
    given = [arg for arg in (sys.argv[1:] if args is None else args) if arg in cli.commands]
    command = given[0] if given and given[0] in commands else commands[0] if len(commands) == 1 else "COMMAND"
    return (f"{option} goes after the command: activebayes {command} {option} ... "
            f"(an option of {', '.join(sorted(commands))})")


@cli.command()
@_loop_options
@_ray_options
@click.option("--strategy", "strategy", default=None, help=f"Acquisition strategy (see `activebayes list`). [{DEFAULT_STRATEGY}]")
@click.option("--seed", "seed", type=int, default=None, help="Random seed. [0]")
@_friendly
def run(quiet: bool, out: str | None, config_file: str | None, max_epochs: int | None, warm_start: bool | None,
        download: bool | None, strategy: str | None, seed: int | None, **flags: Any) -> None:
    """Run one active learning experiment (default: typicality, then BADGE, on the embedded digits)."""
    executor = _executor(flags)
    file_values = _read_toml(config_file)
    out = out or file_values.pop("out", None)
    for key, single in (("strategies", "strategy"), ("seeds", "seed")):
        if key in file_values:  # a compare set-up: run would take one of them, silently
            raise InvalidArgumentError(f"{config_file}: {key} is a setting of `activebayes compare --config`; "
                                       f"`activebayes run` takes one {single} = ...")
    if strategy is not None and "," in strategy:
        raise InvalidArgumentError(f"--strategy: `activebayes run` runs one strategy, got {strategy!r}; "
                                   f"`activebayes compare --strategies {strategy}` runs several")
    if seed is not None and seed < 0:
        raise InvalidArgumentError(f"--seed must be >= 0, got {seed}")
    config = _build_config(file_values, flags, config_file=config_file, strategy=strategy, seed=seed,
                           max_epochs=max_epochs, warm_start=warm_start, download=download)
    schedule = schedule_name(config)
    name = Path(config.table).stem if config.table is not None else config.dataset
    path = Path(out or Path(DEFAULT_RUNS_DIR) / f"{name}-{schedule}-seed{config.seed}")
    _current["directory"] = str(path)
    finished_before = is_run(path) and RunDirectory(path).is_finished()

    def announce(loop: Any) -> None:  # once the data is loaded and checked: no plan printed for a run that fails
        if not quiet:
            click.echo(f"run: {schedule} on {name}, seed {config.seed}, "
                       f"{config.initial_size} -> {config.budget} labels, {config.batch_size} per round -> {path}")

    result = run_experiment(config, path, progress=_progress.shown() and not finished_before, executor=executor,
                            on_start=announce)
    _print_finished(result, path, finished_before=finished_before, quiet=quiet)
    _print_results(path)


def _going_on(result: Any, path: Path) -> str:
    """How a finished run can go on labelling, by what stopped it: `resume --budget N` only where
    its label budget stopped it (:meth:`~activebayes.rundir.RunDirectory.larger_budget_refusal`)."""
    from activebayes import stopping

    why_not = RunDirectory(path).larger_budget_refusal()
    if why_not is None:
        return f"`activebayes resume {path} --budget N` continues it to a larger budget"
    kind = stopping.stop_kind_of(result.rounds[-1]) if result.rounds else None
    new_run = "to label further, start a new run with another --out"
    if kind == stopping.EMPTY_POOL:
        return "every item of its pool is labelled: nothing is left to label"
    if kind == stopping.LABEL_BUDGET:  # its last batch was cut short to meet the budget
        return f"it cannot go on to a larger budget ({why_not}): {new_run} and the larger --budget"
    if kind in stopping.SIGNALS:
        what, change = f"its --stop-when criterion {kind}", f"without {kind} in --stop-when (or with another threshold)"
    elif kind == stopping.TARGET:
        what, change = "its target accuracy", "without --target-accuracy (or with a higher one)"
    elif kind == stopping.COST_BUDGET:
        what, change = "its cost budget", "with a larger --cost-budget"
    elif kind == stopping.PLATEAU:
        what, change = "a plateau", "without --plateau-patience (or with a larger one)"
    else:
        what, change = "something other than its label budget", ""
    return f"stopped by {what}, it cannot go on to a larger budget; {new_run}{', ' + change if change else ''}"


def _print_finished(result: Any, path: Path, *, finished_before: bool, quiet: bool) -> None:
    """The `finished:` line of a run (or, for a run finished earlier, that nothing was trained)."""
    if finished_before:
        click.echo(f"nothing to train: {path} finished earlier ({result.stop_reason}); {_going_on(result, path)}")
    if not result.rounds:
        return
    last = result.rounds[-1]
    acc = "-" if last.accuracy is None else f"{last.accuracy:.4f}"
    click.echo(f"finished: {result.stop_reason}; {last.n_labelled} labels, "
               f"{_measured_on(headline_metric(last.metrics or {}))} {acc}")


@cli.command()
@_loop_options
@_ray_options
@click.option("--strategy", "--strategies", "strategy", multiple=True, callback=_joined,
              help="Comma-separated strategies; repeatable. [random,entropy,bald,batchbald]")
@click.option("--seeds", "seeds", multiple=True, callback=_joined, help="Seeds: '0,1,2' or '0-4'; repeatable. [0,1,2]")
@_friendly
def compare(quiet: bool, out: str | None, config_file: str | None, max_epochs: int | None, warm_start: bool | None,
            download: bool | None, strategy: str | None, seeds: str | None, **flags: Any) -> None:
    """Compare several strategies over several seeds (and datasets).

    With one dataset OUT is one comparison directory; with several
    (`--dataset digits,mnist`) OUT holds one comparison directory per dataset.
    Every strategy starts with the same cold start (by default typicality until 6
    labels per class); `--cold-start none` compares the strategies from the first round.
    """
    executor = _executor(flags)
    file_values = _read_toml(config_file)
    out = out or file_values.pop("out", None)
    # a flag replaces the file's value, in either spelling (strategies / strategy, seeds / seed, datasets / dataset)
    file_strategies = _file_list(file_values, "strategies", "strategy", config_file)
    file_seeds = _file_list(file_values, "seeds", "seed", config_file)
    file_datasets = _file_list(file_values, "datasets", "dataset", config_file)
    # an empty value given (--strategies "" or ",", strategies = []) is refused, not taken for the default
    strategies = _parse_strategies(_given(strategy, file_strategies, "random,entropy,bald,batchbald"))
    seed_list = _parse_seeds(_given(seeds, file_seeds, "0,1,2"))
    datasets = _parse_names(_given(flags.pop("dataset", None), file_datasets, "digits"), "--dataset")
    bases = [
        _build_config(file_values, flags, config_file=config_file, dataset=name, strategy=strategies[0], seed=0,
                      max_epochs=max_epochs, warm_start=warm_start, download=download)
        for name in datasets
    ]  # every config is validated before any run starts
    for name in strategies[1:]:
        _check_names({"strategy": name})
        config_strategies(bases[0].replace(strategy=name))
    for base in bases[1:]:  # each later dataset loads and fits its sizes: not found out after the first one's runs
        check_loop_data(base)
    root = Path(out or Path(DEFAULT_RUNS_DIR) / f"{'-'.join(datasets)}-compare")
    _current["directory"] = str(root)
    for base in bases:
        path = root / base.dataset if len(bases) > 1 else root
        if not quiet:
            click.echo(f"compare: {', '.join(strategies)} x seeds {seed_list} on {base.dataset} -> {path}")
            joined = _joined_grid(path, base, strategies, seed_list)
            if joined:
                click.echo(joined)
        run_comparison(base, strategies, seed_list, path, progress=_progress.shown(), executor=executor)
        _print_comparison_table(path)
        _warn_if_only_the_cold_start_acquired(path, base)
        _print_results(path)


def _joined_grid(path: Path, base: LoopConfig, strategies: list[str], seeds: list[int]) -> str | None:
    """The line saying that ``path`` holds a comparison of these settings that the command joins, when
    the joined grid holds more runs than asked for (every strategy runs on every seed); else ``None``."""
    if not is_comparison(path):
        return None
    stored = Comparison.read(path)
    if not stored.base.same_run(base.replace(strategy=stored.base.strategy, seed=stored.base.seed)):
        return None  # another config: refused when the comparison starts
    all_strategies = list(dict.fromkeys([*stored.strategies, *strategies]))
    all_seeds = list(dict.fromkeys([*stored.seeds, *seeds]))
    if (all_strategies, all_seeds) == (strategies, seeds):
        return None
    return (f"joins the comparison there: {', '.join(all_strategies)} x seeds {all_seeds} (every strategy on every "
            "seed; runs already finished are not run again)")


def _file_list(file_values: dict[str, Any], plural: str, single: str, config_file: str | None) -> Any:
    """The ``--config`` file's ``plural`` (a compare list) or ``single`` value, taken out of
    ``file_values``; a file that gives both is refused (one of them would be dropped without a word)."""
    if plural in file_values and single in file_values:
        raise InvalidArgumentError(f"--config {config_file}: give {plural} or {single}, not both; got {plural} = "
                                   f"{file_values[plural]!r} and {single} = {file_values[single]!r}")
    return file_values.pop(plural, file_values.pop(single, None))


def _warn_if_only_the_cold_start_acquired(path: Path, base: Any) -> None:
    """A comparison whose budget ends within the cold start compares nothing: every run's picks came
    from the same cold-start strategy. Say so (on stderr), with what to change."""
    from activebayes.rundir import load_runs

    if base.cold_start is None:
        return
    runs = load_runs(path)
    used = {r.strategy for _, rounds in runs.values() for r in rounds if r.strategy is not None}  # who picked each batch
    if used and used <= {base.cold_start}:
        labels = max((rounds[-1].n_labelled for _, rounds in runs.values() if rounds), default=0)
        click.echo(f"warning: every batch was picked by the cold start ({base.cold_start}) up to the last of {labels} "
                   "labels, so the strategies compared never picked anything; raise --budget beyond the cold start "
                   "(--cold-start-labels; 6 per class by default) or pass --cold-start none", err=True)


def _check_resumable(config: LoopConfig, stored_in: Path, *, device: str | None,
                     strategies: tuple[str, ...] = ()) -> None:
    """Refuse, before anything is changed, to resume a run (or a comparison of ``strategies``)
    that this command cannot continue, naming the file that stored the cause (the user gave no
    flag to blame): its table moved, a name only a Python process registered, a device this
    machine lacks (unless ``device``, the --device given, replaces it)."""
    _check_stored_table(config, stored_in)
    for strategy in strategies or (config.strategy,):
        _check_stored_names(config.replace(strategy=strategy), stored_in)
    if device is None:
        _check_stored_device(config, stored_in)


def _check_stored_table(config: LoopConfig, stored_in: Path) -> None:
    """Refuse to resume a run (or comparison) whose recorded table was moved or deleted."""
    if config.table is not None and not Path(config.table).is_file():
        raise MissingFileError(f"{stored_in}: the run's table {config.table} is missing (moved or deleted?); "
                               f"put it back to resume")


def _check_stored_names(config: LoopConfig, stored_in: Path) -> None:
    """Refuse a stored dataset, model or strategy name this process does not know: one registered
    from Python (``register_strategy``, ...) is known only where it is registered again."""
    try:
        check_config_names(config)
    except InvalidArgumentError as error:
        unknown = re.sub(r"^[a-z_]+ \(--[a-z-]+\): ", "", str(error))  # the run's setting, not a flag given
        unknown = re.sub(r" \(--[a-z-]+\)", "", unknown)
        raise InvalidArgumentError(f"{stored_in}: {unknown}; a name registered from Python is known only to a "
                                   "process that registers it: resume from Python after registering it "
                                   "(resume_experiment / resume_comparison)") from None


def _check_stored_device(config: LoopConfig, stored_in: Path) -> None:
    """Refuse a stored device this machine lacks, saying how to go on here (--device)."""
    available = available_devices()
    if config.device is not None and str(config.device) not in available:
        raise InvalidArgumentError(f"{stored_in}: the run was started with --device {config.device}, which this "
                                   f"machine lacks (it has {', '.join(available)}); continue it here with "
                                   f"--device {available[0]}")


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--device", default=None, help="Continue on this torch device (e.g. cuda); results do not depend on it.")
@click.option("--budget", type=int, default=None,
              help="Continue to this larger label budget, also after the run has finished.")
@_ray_options
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@_friendly
def resume(directory: str, device: str | None, budget: int | None, quiet: bool, **ray_flags: Any) -> None:
    """Resume a run or comparison directory after an interruption, or take it to a larger --budget."""
    executor = _executor(ray_flags)
    path = Path(directory)
    if not path.is_dir():
        raise MissingFileError(f"DIRECTORY: no such run directory {directory}")
    if budget is not None:
        check_positive_int(budget, "--budget")
    # --threads N (or OMP_NUM_THREADS) replaces the thread count the run stored; without it, the stored one
    runtime = {"device": check_device(device, "--device"), "threads": _explicit_threads()}
    _current["directory"] = str(path)
    _current["budget"] = budget
    if is_comparison(path):
        comparison = Comparison.read(path)
        _check_resumable(comparison.base, path / COMPARISON_FILE, device=device, strategies=comparison.strategies)
        resume_comparison(path, progress=_progress.shown(), runtime=runtime, executor=executor, budget=budget)
        _print_comparison_table(path)
    elif is_run(path):
        run = RunDirectory(path)
        # --budget N of the run's own budget (repeated after it finished) has nothing more to train either
        finished_before = budget in (None, run.read_config().budget) and run.is_finished()
        # a run given its own data or model from Python is refused below (resume_experiment says why):
        # no "resume: ..." line first, which would name the config's default dataset
        given = run.read_given()
        if budget is not None:
            run.check_budget_raise(budget)  # a smaller budget: the error, before any "resume:" line
        if not given:  # a run given its data from Python has no table to check
            _check_resumable(run.read_config(), run.config_path, device=device)
        if not quiet and not finished_before and not given:
            with run.lock():  # a run another process holds: its refusal, before any "resume:" line
                pass
            stored = run.read_config()
            rounds = run.read_rounds()
            name = Path(stored.table).stem if stored.table is not None else stored.dataset
            click.echo(f"resume: {schedule_name(stored)} on {name}, seed {stored.seed}, at "
                       f"{rounds[-1].n_labelled if rounds else 0} of {budget or stored.budget} labels -> {path}")
        result = resume_experiment(path, progress=_progress.shown() and not finished_before, runtime=runtime,
                                   executor=executor, budget=budget)
        _print_finished(result, path, finished_before=finished_before, quiet=quiet)
    else:  # a multi-dataset comparison: one comparison directory per dataset
        parts = _dataset_comparisons(path)
        if not parts:
            raise InvalidArgumentError(f"DIRECTORY: {directory} holds no run (config.json) or comparison (comparison.json)")
        for part in parts:
            comparison = Comparison.read(part)
            _check_resumable(comparison.base, part / COMPARISON_FILE, device=device,
                             strategies=comparison.strategies)
        for part in parts:
            resume_comparison(part, progress=_progress.shown(), runtime=runtime, executor=executor, budget=budget)
            _print_comparison_table(part)
            _print_results(part)
        return
    _print_results(path)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--output", type=click.Path(dir_okay=False), default=None, help="HTML file to write. [DIRECTORY/report.html]")
@click.option("--targets", multiple=True, callback=_joined, help="Accuracies for the labels-needed table; repeatable. [0.9,0.95; where no run reaches 0.9, two read from random's mean curve]")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@_friendly
def report(directory: str, output: str | None, targets: str | None, quiet: bool) -> None:
    """Write the HTML report of a run or comparison directory (of a multi-dataset comparison: one per dataset)."""
    path = Path(directory)
    if not path.is_dir():
        raise MissingFileError(f"DIRECTORY: no such run directory {directory}")
    if is_project(path):
        raise InvalidArgumentError(f"DIRECTORY: {directory} is a labelling project, not a run; its learning curve, "
                                   f"rounds and stopping signals are on the dashboard of `activebayes label "
                                   f"{directory}`, which also exports its labels")
    try:
        target_list = None if targets is None else [float(t) for t in targets.split(",")]  # an empty value too: refused
    except ValueError:
        raise InvalidArgumentError(f"--targets must be comma-separated accuracies like 0.9,0.95, got {targets!r}") from None
    parts = [] if is_run(path) or is_comparison(path) else _dataset_comparisons(path)
    if parts and output is not None:
        raise InvalidArgumentError(f"--output: {directory} holds one comparison per dataset "
                                   f"({', '.join(part.name for part in parts)}), a report each; give one of them "
                                   f"with --output FILE, e.g. `activebayes report {parts[0]} --output {output}`")
    for part in parts or [path]:  # a multi-dataset comparison (compare --dataset a,b): a report per dataset
        _write_report(part, output, target_list)


def _dataset_comparisons(path: Path) -> list[Path]:
    """The comparison directories of a multi-dataset comparison (``compare --dataset a,b``), one per dataset."""
    return sorted(part for part in path.iterdir() if is_comparison(part))


def _write_report(path: Path, output: str | None, targets: list[float] | None) -> None:
    """Write the report of the run or comparison ``path`` and say where (a comparison's table first)."""
    try:
        written = write_report(path, output=output, targets=targets, progress=_progress.shown())
    except OSError as error:
        if output is not None or error.filename is None or error.errno not in _UNWRITABLE:
            raise
        what = (error.strerror or os.strerror(error.errno)).lower()
        space = f"{_ENVIRONMENT_ERRNOS[error.errno]}, or " if error.errno in (errno.ENOSPC, errno.EDQUOT) else ""
        raise click.ClickException(f"{os.fsdecode(error.filename)}: {what}; {space}write the report "
                                   "elsewhere with --output FILE") from None
    if is_comparison(path):
        _print_comparison_table(path)
    click.echo(f"report: {written}")


_PROJECT_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "dataset": ("--dataset", {"type": str, "help": "Label items of this built-in dataset (its labels are ignored)."}),
    "images": ("--images", {"type": click.Path(file_okay=False), "help": "Label a folder of images (stored as an absolute path)."}),
    "table": ("--table", {"type": click.Path(dir_okay=False), "help": "Label the rows of a CSV / TSV / JSONL / Parquet file (texts or table rows; stored as an absolute path)."}),
    "text_column": ("--text-column", {"type": str, "help": "Column of the --table holding each item's text."}),
    "feature_columns": ("--feature-columns", {"type": str, "multiple": True, "callback": _joined, "help": "Comma-separated columns of the --table shown and learnt from as a row ('*': every column but the text and id columns, fixed when the project is created); repeatable."}),
    "id_column": ("--id-column", {"type": str, "help": "Column of unique row ids of the --table. [a hash of the row's content]"}),
    "encoder": ("--encoder", {"type": str, "help": "Text encoder of a --table: tfidf, hashing, a word-vector file (GloVe) or a local model folder. [tfidf]"}),
    "multilabel": ("--multilabel", {"is_flag": True, "help": "Each item may take several classes (toggle them, Enter stores): for a --table; a multi-label --dataset such as mnist_pairs is one without it."}),
    "missing": ("--missing", {"type": click.Choice(["error", "impute"]), "help": _MISSING_HELP}),
    "classes": ("--classes", {"type": str, "multiple": True, "callback": _joined, "help": "Comma-separated class names (required with --images and --table); repeatable."}),
    "data_dir": ("--data-dir", {"type": click.Path(file_okay=False), "help": "Folder with the dataset's files."}),
    "strategy": ("--strategy", {"type": str, "help": "Acquisition strategy."}),
    "cold_start": ("--cold-start", {"type": str, "help": "Strategy for the first rounds (6 labels per class); 'none' for none."}),
    "model": ("--model", {"type": str, "help": "Model name, or 'auto'."}),
    "posterior": ("--posterior", {"type": str, "help": f"Bayesian head: {', '.join(POSTERIOR_CHOICES)}."}),
    "batch_size": ("--batch-size", {"type": int, "help": "Labels per round (the model retrains after each)."}),
    "num_samples": ("--num-samples", {"type": int, "help": "K, function samples for scoring the pool."}),
    "seed": ("--seed", {"type": int, "help": "Random seed."}),
    "max_epochs": ("--max-epochs", {"type": int, "help": "Training epochs per round (upper bound with early stopping)."}),
    "audit_fraction": ("--audit-fraction", {"type": float, "help": "Share of each batch drawn uniformly, to estimate accuracy from the answers (the dashboard's stopping panel)."}),
    "round_seeds": ("--round-seeds", {"type": str, "help": "per_round: each round's model from a fresh random stream; shared: the same one every round (successive models differ by their labels only: steadier stopping signals)."}),
}

_IMPORT_FLAGS = {"allow_partial": "--allow-partial", "overwrite": "--overwrite"}


def _project_default(name: str) -> str:
    """`` [default]`` for a project setting's help, from :class:`ProjectConfig` (whose shared
    settings have the loop's defaults): written nowhere else, so the help cannot drift."""
    found = [f for f in dataclasses.fields(ProjectConfig) if f.name == name]
    if not found or found[0].default in (None, dataclasses.MISSING) or name in ("fit_options", "table_options"):
        return ""
    default = found[0].default
    return f" [{default:g}]" if isinstance(default, float) else f" [{default}]"


def _project_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for name, (flag, kwargs) in reversed(list(_PROJECT_FLAGS.items())):
        kwargs = {**kwargs, "help": kwargs["help"] + _project_default(name)} if "help" in kwargs else kwargs
        command = click.option(flag, name, default=None, **kwargs)(command)
    return command


def _open_project(project: str, settings: Mapping[str, Any], *, progress: bool,
                  announce: bool = False) -> LabellingProject:
    """Open PROJECT (no settings allowed) or create it from the settings given; ``announce``: say so
    in one line before a new project's items are prepared when no bars show it (off a terminal)."""
    _current["project"] = project
    given = {k: v for k, v in settings.items() if v is not None}
    for name in ("batch_size", "num_samples", "seed", "max_epochs"):
        if name in given and given[name] < (0 if name == "seed" else 1):
            raise InvalidArgumentError(f"--{name.replace('_', '-')} must be >= {0 if name == 'seed' else 1}, got {given[name]}")
    if is_project(project):  # the same settings again continue it; a different one is an error naming both values
        return LabellingProject.open(project, settings=given)
    if not {"dataset", "images", "table"} & set(given):
        raise InvalidArgumentError(f"{project} is not a labelling project yet: a new project needs --images FOLDER "
                         "--classes a,b,..., --table FILE --text-column COL --classes a,b,... or --dataset NAME")
    if "classes" in given:
        given["classes"] = _class_names(given["classes"])
    max_epochs = given.pop("max_epochs", None)
    if max_epochs is not None:
        given["fit_options"] = {"max_epochs": max_epochs}
    # `query` too: as `run` names them (--cold-start: "or none")
    _check_names({name: given.get(name) for name in ("dataset", "model", "strategy", "cold_start")})
    if "data_dir" in given and "dataset" not in given:  # the folder of a --dataset's files: else stored unused
        raise InvalidArgumentError(f"--data-dir: only with --dataset NAME (the folder of its files); --images and "
                                   f"--table name their own, got --data-dir {given['data_dir']}")
    if "images" in given and not Path(given["images"]).is_dir():
        raise MissingFileError(f"--images: no such folder {given['images']}")
    if "table" in given:
        check_table_file(given["table"])
    options = {name: given.pop(name) for name in ("encoder", "multilabel", "missing") if given.get(name)}
    if "encoder" in options:
        options["encoder"] = _stored_encoder(options["encoder"])
    if options:
        given["table_options"] = options
    config = ProjectConfig(**given)  # the loop's checks too (audit_fraction needs batches of 2 or more)
    check_new_project_folder(project)  # before the "creating" line
    if announce and not progress:  # a log or a service: minutes of embedding a large dataset must not look like a hang
        click.echo(f"creating {project}: reading and preparing its items (minutes for a large dataset or table)",
                   err=True)
    try:
        return LabellingProject.create(project, config, progress=progress)
    except MissingSplitError as error:  # its advice (download=) is `run`'s: the labelling commands have no --download
        found = str(error).split(" Pass download=True")[0]
        raise MissingSplitError(f"{found} Give the folder that holds them with --data-dir.") from None
    except DataError as error:  # "image folder F holds no images ...": name the flag that gave F
        if config.images is None or not str(error).startswith("image folder "):
            raise
        raise DataError(f"--images: {str(error)[len('image folder '):]}") from None


def _check_showable(name: str, data_dir: str | None, dataset: ArrayDataset | None = None) -> None:
    """The labelling app shows a built-in dataset's items as pictures, or as texts / rows when
    the dataset has contents (:func:`~activebayes.data.dataset_contents`); a dataset of feature
    vectors without them is a one-line error naming ``--dataset``."""
    if has_contents(name):
        return
    dataset = dataset if dataset is not None else load_dataset(name, data_dir=data_dir, split="train")
    if not is_picture_shape(dataset.input_shape):
        raise InvalidArgumentError(
            f"--dataset {name}: the labelling app shows a dataset's items as pictures [1 or 3, H, W] or as the "
            f"texts / rows it was registered with (register_dataset(..., contents=...)), and these are feature "
            f"vectors of shape {tuple(dataset.input_shape)} without either; to label rows or texts, write them to "
            f"a file and use --table FILE with --feature-columns or --text-column")


def _describe_project(labelling: LabellingProject) -> None:
    summary = labelling.summary()
    source = labelling.config.source
    click.echo(f"project {labelling.directory}: {summary['items']} items from {source}, "
               f"{summary['labelled']} labelled, {summary['rounds']} round(s)")
    changed = "table" if labelling.config.table is not None else "folder"
    for line in labelling.changes.summary():
        click.echo(f"  {changed} changed: {line}")


@cli.command()
@click.argument("project", type=click.Path(file_okay=False))
@_project_options
@click.option("--device", default=None, help="Train and score on this torch device (e.g. cuda); not a project setting, so each start may pick its own. [cpu]")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@_friendly
def query(project: str, device: str | None, quiet: bool, **settings: Any) -> None:
    """Write the next batch of items for a person to label (the file round trip).

    The first call creates the labelling project PROJECT (`--images FOLDER --classes
    a,b,...`, `--table FILE --text-column COL --classes a,b,...` or `--dataset NAME`);
    later calls reuse its settings. Fill in the `label`
    column of the written file, then run `activebayes import FILE --project PROJECT`.
    The labels of the app (`activebayes label PROJECT`) and of the files share one store.
    """
    device = check_device(device, "--device")  # before a new project is created
    with _open_project(project, settings, progress=_progress.shown(), announce=not quiet) as labelling:
        labelling.device = device
        _describe_project(labelling)
        result = labelling.query(progress=_progress.shown())
        if result.committed:
            click.echo(f"trained on {result.n_labelled} label(s) ({result.committed} new)")
        click.echo(f"round {result.round}: {len(result.indices)} items to label ({result.strategy}, "
                   f"{result.n_labelled} labelled so far)")
        click.echo(f"query: {result.path}")
        click.echo(f"fill in its label column, then: activebayes import {result.path} --project {project}")


@cli.command(name="import")
@click.argument("answers", type=click.Path(dir_okay=False))
@click.option("--project", "project", type=click.Path(file_okay=False), required=True, help="The labelling project directory.")
@click.option("--allow-partial", is_flag=True, help="Import the labelled rows of a file where some labels are still empty.")
@click.option("--overwrite", is_flag=True, help="Replace labels stored earlier when the file disagrees.")
@_friendly
def import_(answers: str, project: str, allow_partial: bool, overwrite: bool) -> None:
    """Import a filled-in query file (or a Label Studio JSON export) into a labelling project.

    The whole file is checked first: every problem is listed with the flag that
    accepts it, and nothing is stored unless all rows are fine.
    """
    _current["project"] = project
    with LabellingProject.open(project) as labelling:
        if not Path(answers).is_file():
            raise MissingFileError(f"ANSWERS: no such file {answers}")
        for line in labelling.changes.summary():
            click.echo(f"  folder changed: {line}")
        try:
            result = labelling.import_answers(answers, allow_partial=allow_partial, overwrite=overwrite)
        except AnswerFileError as error:
            for problem in error.problems:
                click.echo(f"  {problem.text(_IMPORT_FLAGS)}", err=True)
            raise click.ClickException(f"{len(error.problems)} problem(s) in {answers}; nothing was imported") from None
        if result.stored:
            replaced = f", {len(result.changed)} replaced" if result.changed else ""
            click.echo(f"imported {len(result.new)} new label(s){replaced}; {result.n_labelled} labelled in total")
        elif result.unchanged:
            click.echo(f"nothing new: the {result.unchanged} label(s) in the file were stored already; "
                       f"{result.n_labelled} labelled in total")
        else:
            click.echo(f"nothing imported: the file holds no label yet; {result.n_labelled} labelled in total")
        if result.earlier:
            rounds = ", ".join(f"round {r}: {n}" for r, n in sorted(result.earlier.items()))
            click.echo(f"{sum(result.earlier.values())} row(s) answer items of earlier queries ({rounds})")
        if result.unannotated:
            click.echo(f"{result.unannotated} task(s) without an annotation were left alone")
        pending = labelling.unanswered()
        if pending is not None:  # `query` refuses until they are answered: no hint that fails
            path, missing = pending
            click.echo(f"{missing} item(s) of {path} have no label yet: fill them in and import it again; "
                       f"then the next batch: activebayes query {project}")
        else:
            click.echo(f"next batch: activebayes query {project}")


@cli.command()
@click.argument("project", type=click.Path(file_okay=False))
@_project_options
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port to listen on; 0 picks any free port.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; anything but loopback is reachable by others (a warning is printed).")
@click.option("--token", default=None, envvar="ACTIVEBAYES_TOKEN", show_envvar=True, help="Access token, 16 characters or more (default: a new random one each start). The environment variable or --token-file keep it out of `ps`.")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None, help="Read the access token from this file's first line.")
@click.option("--worker", type=click.Choice(["process", "thread"]), default="process", show_default=True, help="Where the model retrains: a separate process (the page stays fast) or a thread.")
@click.option("--device", default=None, help="Train and score on this torch device (e.g. cuda); not a project setting, so each start may pick its own. [cpu]")
@click.option("--sync", "synchronous", type=click.Choice(["full", "normal"]), default="full", show_default=True, help="Answer durability: full fsyncs each answer (survives a power cut); normal survives the server being killed, not a power cut, and answers faster on slow disks.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@_friendly
def label(project: str, port: int, host: str, token: str | None, token_file: str | None, worker: str,
          device: str | None, synchronous: str, quiet: bool, **settings: Any) -> None:
    """Label in the browser while the model learns (the labelling app).

    Creates PROJECT (`--images FOLDER --classes a,b,...`, `--table FILE --text-column
    COL --classes a,b,...` or `--dataset NAME`) or carries on with it, starts a web
    server and prints its address with an access token, as Jupyter does. Needs the
    `app` extra: pip install "activebayes[app]".
    """
    try:
        from activebayes.app import serve
    except ImportError as error:  # the optional web stack
        raise click.ClickException(f"the labelling app needs Starlette and uvicorn ({error}); "
                                   "install them with: pip install 'activebayes[app]'") from None
    from activebayes.app.serve import check_host, check_port, check_token

    if token_file is not None:
        try:
            token = Path(token_file).read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, UnicodeDecodeError, IndexError) as error:
            raise InvalidArgumentError(f"--token-file: cannot read a token from {token_file} "
                                       f"({getattr(error, 'strerror', None) or 'empty or not text'})") from None
    host = check_host(host)  # before a new project is created
    device = check_device(device, "--device")
    if token is not None:
        check_token(token)
    if settings.get("dataset") is not None and not is_project(project):  # before a new project is created
        _check_names({"dataset": settings["dataset"]})  # as `run` names it: --dataset, a close name, the list
        _check_showable(settings["dataset"], settings.get("data_dir"))
    check_port(host, port)  # a taken port: before a new project is created
    with _open_project(project, settings, progress=_progress.shown(), announce=not quiet) as labelling:
        if labelling.config.dataset is not None:
            _check_showable(labelling.config.dataset, labelling.config.data_dir, labelling.dataset)
        labelling.device = device
        _describe_project(labelling)
        serve(labelling, host=host, port=port, token=token, worker=worker, echo=click.echo,
              warn=lambda line: click.echo(line, err=True), synchronous=synchronous)


@cli.command()
@click.argument("source", type=click.Path())
@click.argument("destination", type=click.Path(file_okay=False))
@click.option("--dataset", default=None, help="SOURCE is this IDX dataset's folder (mnist, fashion_mnist, kmnist).")
@click.option("--split", type=click.Choice(["train", "test"]), default=None, help="Split of --dataset. [train]")
@click.option("--labels", type=click.Path(dir_okay=False), default=None, help="IDX labels file for an IDX images SOURCE (found by name if omitted).")
@click.option("--size", type=(int, int), default=None, help="Image folders: resize to H W. [28 28]")
@click.option("--rgb", is_flag=True, help="Image folders: keep three colour channels (default: grayscale).")
@click.option("--classes", default=None, help="Image folders: comma-separated class names (subfolders).")
@click.option("--no-standardize", is_flag=True, help="Scale pixels to [0, 1] only (default: standardise, an IDX dataset by its published mean and std, "
                   "an image folder by the pool's).")
@click.option("--normalization", type=(float, float), default=None, help="Fixed MEAN STD instead of the pool's.")
@click.option("--name", default=None, help="Dataset name stored in meta.json.")
@click.option("--overwrite", is_flag=True, help="Replace DESTINATION if it already is a memory-mapped dataset.")
@click.option("--chunk-size", type=click.IntRange(min=1), default=1024, help="Items decoded per chunk. [1024]")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@_friendly
def convert(source: str, destination: str, dataset: str | None, split: str | None, labels: str | None,
            size: tuple[int, int] | None, rgb: bool, classes: str | None, no_standardize: bool,
            normalization: tuple[float, float] | None, name: str | None, overwrite: bool, chunk_size: int,
            quiet: bool) -> None:
    """Convert IDX files or a folder of images to the memory-mapped format (for big pools).

    The result is read on demand: `activebayes run --dataset memmap --data-dir DESTINATION`.
    """
    class_list = list(_class_names(classes)) if classes else None
    try:
        written = convert_to_memmap(
            source, destination, dataset=dataset, split=split, labels=labels, size=tuple(size) if size else None,
            grayscale=not rgb, classes=class_list, standardize=not no_standardize,
            normalization=tuple(normalization) if normalization else None, name=name,
            overwrite=overwrite, chunk_size=chunk_size, progress=_progress.shown(),
        )
    except MissingSplitError as error:  # its advice (download=, data_dir=) is the loaders', not convert's
        found = str(error).split(" Pass download=True")[0]
        raise MissingFileError(f"SOURCE: {found} Give the folder that holds them as SOURCE.") from None
    click.echo(f"memory-mapped dataset: {written}")


@cli.command()
@click.argument("project", type=click.Path(file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "labelstudio"]), default=None,
              help="csv or json (every item with its label), or labelstudio (Label Studio's JSON tasks). "
                   "[from --out's .csv or .json ending, else csv]")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="File to write, ending .csv or .json as the format; - writes to stdout. [PROJECT/exports/labels.csv, labels.json or labelstudio-tasks.json]")
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists already (the default file in PROJECT/exports is always rewritten).")
@_friendly
def export(project: str, fmt: str, out: str | None, overwrite: bool) -> None:
    """Write a labelling project's items with their labels (what the dashboard's export links give).

    The project is only read (its label store opened read-only): a read-only project exports
    with --out pointing somewhere writable.
    """
    _current["project"] = project
    to_stdout = out == "-"  # a pipe: the export on stdout, the summary line on stderr
    fmt = _export_format(fmt, None if to_stdout else out)
    if out is not None and not to_stdout and not overwrite and os.path.lexists(out):
        raise InvalidArgumentError(f"--out {out} exists already: pass --overwrite to replace it, or choose another name")
    with LabellingProject.open(project, rescan=False, read_only=True) as labelling:
        if to_stdout:
            click.echo(labelling.export_text(fmt), nl=False)
        path = "stdout" if to_stdout else labelling.export(out, fmt=fmt)
        exported = labelling.store.labels(present_only=fmt == "labelstudio")  # CSV / JSON keep gone items' labels
        click.echo(f"exported {len(exported)} label(s) of {len(labelling.store.items())} "
                   f"item(s): {path}", err=to_stdout)


def _export_format(fmt: str | None, out: str | None) -> str:
    """``--format``, or the one ``--out``'s ending names (csv without one); an ending that is not the
    format's (``.csv``, or ``.json`` for json and labelstudio) is an error."""
    ending = Path(out).suffix.lower() if out is not None else ""
    if fmt is None:
        if ending not in ("", ".csv", ".json"):
            raise InvalidArgumentError(f"--out {out} ends {ending}, but export writes CSV or JSON: give --out a name "
                                       "ending .csv or .json")
        return "json" if ending == ".json" else "csv"
    wanted = ".csv" if fmt == "csv" else ".json"
    if ending and ending != wanted:
        writes = "CSV" if fmt == "csv" else "JSON"
        other = ", or leave --format out" if ending in (".csv", ".json") else ""
        raise InvalidArgumentError(f"--format {fmt} writes {writes}, but --out {out} ends {ending}: give --out a name "
                                   f"ending {wanted}{other}")
    return fmt


@cli.command(name="list")
@click.argument("what", required=False, type=click.Choice(["strategies", "models", "posteriors", "datasets"]))
def list_(what: str | None) -> None:
    """List acquisition strategies (and the other names they answer to), models, posteriors and datasets."""
    sections: dict[str, Callable[[], list[str]]] = {  # each asked for only when shown
        "strategies": available_strategies,
        "strategy aliases": lambda: sorted(set(available_strategies(aliases=True)) - set(available_strategies())),
        "models": available_models,
        "posteriors": lambda: list(POSTERIOR_CHOICES),
        "datasets": available_datasets,
    }
    for name, names in sections.items():
        if what in (None, name.split()[0]):
            items = names()
            if items:
                click.echo(f"{name}: {', '.join(items)}")
