r"""How many CPU threads torch uses: chosen from the work and the cores actually free.

Why: torch runs each operator on ``torch.get_num_threads()`` OpenMP threads (by
default one per physical core) and every parallel operator ends at a barrier.
When other processes keep the cores busy, some of those threads wait for a core
while the rest spin at the barrier: *oversubscription*.  The models of active
learning are small (an MLP on 8x8 digits, minibatches of 64), so an operator takes
microseconds and the waiting dominates.  Measured on this project's 2-core machine
(see ``benchmarks/busy_machine.py`` and ``benchmarks/results/busy_machine.json``):
``activebayes run`` took 16 s idle, and beside three CPU-bound processes 1,082 s
with torch's default two threads against 25 s with one thread.  On a nearly idle
machine the same job's training step is as fast with one thread as with two (a
minibatch of that MLP is ~1 MFLOP), while the Gal CNN on 28x28 images (~1.8 GFLOP
per minibatch by :func:`work_flops`) fits 1.9x faster with two threads than with
one; ``SMALL_WORK_FLOPS`` lies between (``busy_machine.py --work-scan`` places it on
a quiet machine).  With this rule the 40-label job, measured while the machine was
also shared with other agents' test runs (load 5-19), took 28 s / 57 s / 137 s
(means of 2) idle / beside one / beside three competitors, against 167 s / 298 s /
over 600 s with torch's default two threads: 4-6x faster, and as fast as
``--threads 1`` (27 s / 59 s / 208 s).

The rule (:func:`auto_threads`), for one step of work of ``work_flops`` floating
point operations (:func:`work_flops`: one forward over a minibatch):

- small work (``work_flops < SMALL_WORK_FLOPS``): **1 thread**, whatever the load;
  threads cannot win there and lose badly on a busy machine;
- otherwise ``min(ceil(work_flops / FLOPS_PER_THREAD), free cores, limit)``
  threads, where ``free cores = max(1, floor(cores - busy))``, ``cores`` are the
  CPUs this process may run on (``os.sched_getaffinity`` and a cgroup CPU quota),
  ``busy`` the runnable tasks of *other* processes right now (the median of five
  samples of ``/proc/loadavg``'s running count minus this process's running
  threads; ``os.getloadavg()`` where ``/proc`` is missing) and ``limit`` torch's own
  default (one per physical core);
- unknown work (``None``): the free cores (capped by ``limit``).

The 1-minute load average alone would be the wrong signal: it lags (three
competitors started five seconds ago show a load of 0.24) and it counts this
process's own past work.  In a container that shares a larger host's kernel,
``/proc/loadavg`` counts the host's tasks; the rule then errs towards fewer
threads, which only slows down large convolutions, and ``--threads N`` overrides.

Who decides (the precedence), see :func:`resolve_threads`:

1. an explicit number: ``activebayes --threads N``;
2. the environment: ``OMP_NUM_THREADS``, then ``MKL_NUM_THREADS``;
3. the automatic rule, **only inside** :func:`automatic_threads`.

The command line enters :func:`automatic_threads` for every command; the Python
API never changes torch's thread count by itself.  ``torch.set_num_threads`` is a
process-wide setting that belongs to the application, and torch keeps no record
of whether the user set it, so a library cannot tell a user's deliberate choice
from the default: changing it inside ``fit`` would silently override that choice.
Python users opt in with ``with automatic_threads(): ...``, which applies the
rule at entry and again in each :func:`threads_for` block (``fit`` and
``predict_log_probs`` use one, so a machine that becomes busy mid-run is seen at
the next round), and restores the previous count on exit.  The automatic mode is a
context variable set only for the duration of that ``with`` block (as
``torch.no_grad()`` is), not a module-level switch; other work inside the block
(acquisition scores, metrics) runs on the count chosen at entry.

Example:
    >>> import torch
    >>> from activebayes.models import MLP
    >>> work_flops(MLP(in_features=64, num_classes=10), (1, 8, 8), batch=64) < SMALL_WORK_FLOPS
    True
    >>> auto_threads(1e6)
    1
    >>> before = torch.get_num_threads()
    >>> with automatic_threads(3, environ={}) as choice:
    ...     (choice.threads, choice.source, torch.get_num_threads())
    (3, '--threads', 3)
    >>> torch.get_num_threads() == before
    True
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from activebayes.errors import InvalidArgumentError

__all__ = [
    "FLOPS_PER_THREAD",
    "SMALL_WORK_FLOPS",
    "THREAD_ENV_VARS",
    "ThreadChoice",
    "auto_threads",
    "automatic_threads",
    "busy_cores",
    "check_thread_limit",
    "free_cores",
    "max_threads",
    "resolve_threads",
    "threads_for",
    "torch_threads",
    "usable_cores",
    "work_flops",
]

SMALL_WORK_FLOPS = 2e7  # one step below this runs on one thread (calibration: see module docstring)
FLOPS_PER_THREAD = 1e7  # above it, at most one thread per this much work
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: An explicit count may ask for up to this many threads per CPU (:func:`max_threads`), and at least
#: ``_LEAST_THREAD_LIMIT`` (a count stored by a run on a large machine still resumes on a small one)
_THREADS_PER_CPU = 4
_LEAST_THREAD_LIMIT = 1024
_LOAD_SAMPLES = 5
_LOAD_SAMPLE_GAP_S = 0.001
_CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)

# The most threads the automatic rule may choose; None outside automatic_threads().
_AUTOMATIC_LIMIT: ContextVar[int | None] = ContextVar("activebayes_automatic_threads", default=None)


@dataclass(frozen=True)
class ThreadChoice:
    """Torch's thread count as decided at entry, and who decided it.

    ``source`` is ``"--threads"`` (an explicit number), an environment variable's
    name (``"OMP_NUM_THREADS"`` / ``"MKL_NUM_THREADS"``) or ``"auto"``.
    """

    threads: int
    source: str


# --------------------------------------------------------------------------- what the machine has
def usable_cores() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(1, cores)


def _cgroup_cpu_quota() -> float | None:
    """CPUs allowed by cgroup v2 ``cpu.max`` or v1 ``cfs_quota_us``; None when unlimited or unknown."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def _runnable_others() -> int | None:
    """Runnable tasks of other processes now: ``/proc/loadavg``'s running count minus ours."""
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
        tasks = os.listdir("/proc/self/task")
    except (OSError, ValueError, IndexError):
        return None
    own = 0
    for task in tasks:
        try:
            stat = Path(f"/proc/self/task/{task}/stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        if stat[stat.rindex(")") + 2 :].startswith("R"):
            own += 1
    return max(0, running - own)


def busy_cores() -> float:
    """Cores kept busy by other processes: the median of a few instantaneous samples.

    Linux: ``/proc/loadavg``'s count of runnable tasks minus this process's running
    threads, sampled ``_LOAD_SAMPLES`` times ~1 ms apart.  Elsewhere the 1-minute load
    average (lags, and includes this process), or 0 where there is none.
    """
    samples = []
    for i in range(_LOAD_SAMPLES):
        sample = _runnable_others()
        if sample is None:
            break
        samples.append(sample)
        if i + 1 < _LOAD_SAMPLES:
            time.sleep(_LOAD_SAMPLE_GAP_S)
    if samples:
        return float(statistics.median(samples))
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


def free_cores(*, cores: int | None = None, busy: float | None = None) -> int:
    """``max(1, floor(cores - busy))``; measured (:func:`usable_cores`, :func:`busy_cores`) when not given."""
    cores = usable_cores() if cores is None else cores
    busy = busy_cores() if busy is None else busy
    return max(1, math.floor(cores - busy + 1e-9))


# --------------------------------------------------------------------------- what the work needs
def work_flops(model: nn.Module, item_shape: Sequence[int], batch: int) -> float:
    r"""Floating point operations of one forward of ``model`` over ``batch`` items (an estimate).

    ``2 * batch * (sum of dense weights + sum over convolutions of weights * positions)``
    with ``positions = prod(item_shape[1:])`` (the spatial size of a channels-first
    item; an upper bound, strides and pooling ignored): one multiply-add per weight
    and item, per position for a convolution.  Biases are not counted (as in
    ``torch.utils.flop_counter``); other layers count their parameters once.

    Args:
        model: any module (an ensemble counts all its members).
        item_shape: the shape of one input item, without the batch dimension.
        batch: items per step (a minibatch in ``fit``, a chunk in ``predict_log_probs``).

    Example:
        >>> work_flops(nn.Linear(64, 10), (64,), batch=2)  # 2 * 2 * 64 * 10
        2560.0
    """
    positions = math.prod(int(size) for size in item_shape[1:]) if len(item_shape) > 1 else 1
    per_item = 0
    for module in model.modules():
        if isinstance(module, _CONV_TYPES):
            per_item += module.weight.numel() * positions
        elif isinstance(module, nn.Linear):
            per_item += module.weight.numel()
        else:
            per_item += sum(p.numel() for p in module.parameters(recurse=False))
    return 2.0 * batch * per_item


# --------------------------------------------------------------------------- the rule
def auto_threads(
    work_flops: float | None = None, *, cores: int | None = None, busy: float | None = None, limit: int | None = None
) -> int:
    """Threads for one step of ``work_flops`` operations (see the module docstring for the rule).

    Args:
        work_flops: operations of one step (:func:`work_flops`), or None when unknown.
        cores / busy: the machine (:func:`usable_cores`, :func:`busy_cores`); measured
            when None, and only when the work is not small.
        limit: the most threads to use; None: ``cores``.

    Example:
        >>> auto_threads(1e6, cores=8, busy=0.0)  # a small MLP minibatch
        1
        >>> auto_threads(1e9, cores=8, busy=0.0, limit=4)  # a large convolution, idle machine
        4
        >>> auto_threads(1e9, cores=2, busy=3.0)  # the same beside three busy processes
        1
    """
    if work_flops is not None:
        if isinstance(work_flops, bool) or not isinstance(work_flops, (int, float)) or not work_flops >= 0:
            raise InvalidArgumentError(f"work_flops must be a number >= 0 or None, got {work_flops!r}")
        if work_flops < SMALL_WORK_FLOPS:
            return 1
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgumentError(f"limit must be an int >= 1 or None, got {limit!r}")
    threads = free_cores(cores=cores, busy=busy)
    if work_flops is not None:
        threads = min(threads, max(1, math.ceil(work_flops / FLOPS_PER_THREAD)))
    if limit is not None:
        threads = min(threads, limit)
    return max(1, threads)


def max_threads() -> int:
    """The most threads an explicit count may ask for: ``max(1024, 4 * os.cpu_count())``.

    More threads than cores only wait for one another (oversubscription, see the module
    docstring), and torch cannot start a million: the process dies (a segmentation fault,
    or libgomp's "out of memory" on their stacks). Four per CPU still allows deliberate
    oversubscription; 1024 on any machine lets a run resume with the count it stored.
    """
    return max(_LEAST_THREAD_LIMIT, _THREADS_PER_CPU * (os.cpu_count() or 1))


def check_thread_limit(threads: int, name: str) -> None:
    """Refuse a thread count above :func:`max_threads`, naming where it came from (``name``)."""
    limit = max_threads()
    if threads > limit:
        raise InvalidArgumentError(
            f"{name} must be at most {limit} ({_THREADS_PER_CPU} per CPU of the {os.cpu_count() or 1} here, and "
            f"{_LEAST_THREAD_LIMIT} at least): more threads than cores only wait for one another, and torch "
            f"crashes starting that many; got {threads}")


def _env_threads(environ: Mapping[str, str]) -> tuple[int, str] | None:
    """The first of ``THREAD_ENV_VARS`` set to a positive integer, with its name.

    ``OMP_NUM_THREADS`` may list one count per nesting level (``"4,2"``): the first
    counts.  A value that is not a positive integer is ignored, as OpenMP ignores it.
    """
    for name in THREAD_ENV_VARS:
        value = environ.get(name, "").split(",")[0].strip()
        if value.isdigit() and int(value) >= 1:
            return int(value), name
    return None


def resolve_threads(requested: int | None = None, *, environ: Mapping[str, str] | None = None) -> ThreadChoice | None:
    """Who sets the thread count: ``requested`` (``--threads N``), else the environment, else None (automatic).

    Args:
        requested: an explicit thread count, or None.
        environ: the environment (default ``os.environ``); ``OMP_NUM_THREADS`` wins over
            ``MKL_NUM_THREADS``.

    Raises:
        InvalidArgumentError: the count (given or from the environment) is above :func:`max_threads`.

    Example:
        >>> resolve_threads(None, environ={"OMP_NUM_THREADS": "3"})
        ThreadChoice(threads=3, source='OMP_NUM_THREADS')
        >>> resolve_threads(2, environ={"OMP_NUM_THREADS": "3"})
        ThreadChoice(threads=2, source='--threads')
        >>> resolve_threads(None, environ={}) is None
        True
    """
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise InvalidArgumentError(f"threads must be an int >= 1 or None (automatic), got {requested!r}")
        check_thread_limit(requested, "threads (--threads)")
        return ThreadChoice(requested, "--threads")
    found = _env_threads(os.environ if environ is None else environ)
    if found is not None:
        check_thread_limit(*found)
    return None if found is None else ThreadChoice(*found)


# --------------------------------------------------------------------------- applying it
@contextmanager
def torch_threads(threads: int) -> Iterator[int]:
    """Run the block with ``torch.set_num_threads(threads)``; the previous count is restored."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidArgumentError(f"threads must be an int >= 1, got {threads!r}")
    previous = torch.get_num_threads()
    if threads != previous:
        torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


@contextmanager
def automatic_threads(
    requested: int | None = None, *, environ: Mapping[str, str] | None = None
) -> Iterator[ThreadChoice]:
    """Torch's thread count for a block: ``requested``, else the environment, else the automatic rule.

    With an explicit choice (``requested`` or ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``)
    that count is set for the block and nothing else changes it.  Otherwise the count
    is set from the free cores (:func:`auto_threads` with unknown work) and each
    :func:`threads_for` block inside (``fit``, ``predict_log_probs``) chooses again from
    its work, never above the count at entry (torch's default unless it was changed).
    The previous count is restored on exit.  The command line runs every command inside this block.

    Yields:
        :class:`ThreadChoice`: the count set at entry and its source.
    """
    choice = resolve_threads(requested, environ=environ)
    limit = None
    if choice is None:
        limit = torch.get_num_threads()
        choice = ThreadChoice(auto_threads(None, limit=limit), "auto")
    token = _AUTOMATIC_LIMIT.set(limit)
    try:
        with torch_threads(choice.threads):
            yield choice
    finally:
        _AUTOMATIC_LIMIT.reset(token)


@contextmanager
def threads_for(
    model: nn.Module, item_shape: Sequence[int] | Callable[[], Sequence[int]], batch: int
) -> Iterator[int]:
    """Inside :func:`automatic_threads`: run the block on ``auto_threads(work_flops(...))`` threads.

    Outside it (a user's own setting, or an explicit ``--threads`` / environment
    choice) this does nothing.  ``item_shape`` may be a callable, called only when the
    rule applies.

    Yields:
        the thread count the block runs with.
    """
    limit = _AUTOMATIC_LIMIT.get()
    if limit is None:
        yield torch.get_num_threads()
        return
    shape = item_shape() if callable(item_shape) else item_shape
    with torch_threads(auto_threads(work_flops(model, shape, batch), limit=limit)) as threads:
        yield threads
