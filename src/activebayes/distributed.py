r"""Score a pool on a Ray cluster, with exactly the picks of one process.

:class:`RayExecutor` runs the chunks of :func:`activebayes.scoring.score_pool` as a
Ray Data pipeline: a dataset of candidate index blocks (one row per chunk of candidate
indices, with their costs), ``map_batches`` on a pool of actors (each holds a copy of
the model with its MC dropout mask seeds and a reader of the pool's items), and the
driver merges what the chunks return::

    from activebayes.distributed import RayExecutor
    from activebayes.scoring import score_pool

    with RayExecutor(num_workers=8) as ray_executor:           # or address="auto"
        picks = score_pool(model, dataset, candidates_N, "bald", 10, num_samples=100,
                           mask_generator=seed, selection_seed=seed, executor=ray_executor)

Why the picks are the same as in one process (see :mod:`activebayes.scoring`): the
chunks are the same ``chunk_size`` slices of the index-sorted candidates wherever they
run; an item's K predictions depend only on the model and its mask seeds (carried by the
pickled model); stochastic noise is keyed by the item's original index; and each
chunk's result is reduced by a rule whose merge does not depend on order or grouping
(top-k by ``(key desc, index asc)``; all scores, sorted by index at the end). What the
driver receives per chunk: its top ``batch_size`` candidates (top-k and power / softmax
without a cost budget), every score (cost budgets, softrank), or its top-``M`` BALD
items with their ``[m, K, C]`` predictions (BatchBALD, whose greedy steps then run on
the driver on the cluster-wide top ``M``).

Fault tolerance: Ray Data restarts actors that die (``max_restarts=-1``) and retries
their tasks (``max_task_retries=-1``); the input blocks live on the driver's node, so
losing a worker node mid-scoring costs only the chunks in flight there, and the result
is unchanged.

Items are read on the workers: an in-memory tensor of inputs is put into Ray's object
store once (as a NumPy array, read zero-copy by every actor on a node); a NumPy memmap is
reopened from its file; any other reader (a memory-mapped dataset's ``inputs``) is
pickled, so it should pickle as its file path, not its data.

Ray is optional: ``pip install 'activebayes[ray]'``.
"""

from __future__ import annotations

import copy
import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from activebayes._validation import check_positive_int
from activebayes.scoring import ChunkWork, PredictSpec, Rows, RowsAccumulator, concat_rows, run_chunk
from activebayes.errors import InvalidArgumentError

__all__ = ["RayExecutor", "ray_available"]

_ITEMS = "_items"  # output column: how many pool items a returned batch covered (progress)


def _import_ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as error:
        raise ImportError(
            "activebayes.distributed needs Ray (with Ray Data): pip install 'activebayes[ray]'"
        ) from error
    return ray


def ray_available() -> bool:
    """Whether Ray (with Ray Data) can be imported."""
    try:
        _import_ray()
    except ImportError:
        return False
    return True


# ------------------------------------------------------------------------ item readers


class ArrayInputs:
    """Items of a NumPy array (e.g. read zero-copy from Ray's object store) as float tensors."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def __getitem__(self, index: Tensor) -> Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.array[index.numpy()]))


@dataclass(frozen=True)
class NumpyMemmap:
    """A NumPy memmap reopened on the worker from its file (pickles as the path)."""

    filename: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    order: str

    def open(self) -> ArrayInputs:
        array = np.memmap(self.filename, dtype=np.dtype(self.dtype), mode="r", shape=self.shape,
                          offset=self.offset, order=self.order)
        return ArrayInputs(array)


def _transportable(inputs: Any) -> Any:
    """What travels to the workers for ``inputs`` (see the module docstring)."""
    if isinstance(inputs, Tensor):
        return inputs.detach().cpu().numpy()
    if isinstance(inputs, np.memmap) and inputs.filename is not None:
        base = inputs
        while isinstance(base.base, np.memmap):
            base = base.base
        if base is inputs or base.shape == inputs.shape:
            order = "F" if inputs.flags.f_contiguous and not inputs.flags.c_contiguous else "C"
            return NumpyMemmap(str(inputs.filename), inputs.dtype.str, tuple(inputs.shape), int(inputs.offset), order)
    return inputs


def _reader(transported: Any) -> Any:
    if isinstance(transported, np.ndarray):
        return ArrayInputs(transported)
    if isinstance(transported, NumpyMemmap):
        return transported.open()
    return transported


def _on_cpu(model: nn.Module) -> nn.Module:
    """The model as it travels: on the CPU (a copy if it lives elsewhere; masks seeds are attributes, kept)."""
    tensors = [*model.parameters(), *model.buffers()]
    if all(tensor.device.type == "cpu" for tensor in tensors):
        return model
    return copy.deepcopy(model).cpu()


# ------------------------------------------------------------------------ the actors


@dataclass(frozen=True)
class _Payload:
    """Everything an actor needs; put into the object store once per pass."""

    model: nn.Module
    inputs: Any
    work: ChunkWork
    spec: PredictSpec
    threads: int


class ChunkScorer:
    """Ray Data callable class: one model replica; chunks of candidates -> kept rows.

    A row of the input is one chunk: ``"indices"`` (its original indices, padded to
    ``chunk_size`` with -1), ``"count"`` (how many are real) and, with a cost budget,
    ``"costs"`` (padded the same way). Only the chunks an actor scores reach it.
    """

    def __init__(self, payload_ref: list) -> None:
        ray = _import_ray()
        payload: _Payload = ray.get(payload_ref[0])
        torch.set_num_threads(payload.threads)
        self.model = payload.model
        self.inputs = _reader(payload.inputs)
        self.work = payload.work
        self.spec = payload.spec

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        parts: list[Rows] = []
        items = 0
        for row, count in enumerate(batch["count"].tolist()):
            indices_n = torch.from_numpy(np.array(batch["indices"][row, :count], dtype=np.int64))
            costs_n = None
            if "costs" in batch:
                costs_n = torch.from_numpy(np.array(batch["costs"][row, :count], dtype=np.float64))
            parts.append(run_chunk(self.model, self.inputs, indices_n, costs_n, self.work, self.spec))
            items += count
        rows = concat_rows(parts)
        if len(parts) > 1:
            rows = self.work.reduce(rows)
        out = {key: value.numpy() for key, value in rows.items()}
        counts = np.zeros(len(out["index"]), dtype=np.int64)
        counts[0] = items
        out[_ITEMS] = counts
        return out


def _chunk_rows(indices_N: Tensor, costs_N: Tensor | None, chunk_size: int) -> list[dict[str, Any]]:
    """One row per ``chunk_size`` slice of the (index-sorted) candidates, padded to a fixed shape."""
    indices = indices_N.numpy()
    costs = None if costs_N is None else costs_N.numpy()
    rows = []
    for start in range(0, len(indices), chunk_size):
        count = min(chunk_size, len(indices) - start)
        padded = np.full(chunk_size, -1, dtype=np.int64)
        padded[:count] = indices[start : start + count]
        row: dict[str, Any] = {"indices": padded, "count": count}
        if costs is not None:
            padded_costs = np.zeros(chunk_size, dtype=np.float64)
            padded_costs[:count] = costs[start : start + count]
            row["costs"] = padded_costs
        rows.append(row)
    return rows


# ------------------------------------------------------------------------ the executor


class RayExecutor:
    """Runs :func:`~activebayes.scoring.score_pool`'s passes on Ray (Ray Data on an actor pool).

    Args:
        address: an existing cluster (``"auto"``: the one ``ray start`` runs on this node,
            ``"ray://head:10001"``, ``"10.0.0.1:6379"``); ``None`` joins the Ray instance this
            process already runs, or starts a new local one (with ``num_workers x
            cpus_per_worker`` CPUs).
        num_workers: actors (model replicas) in the pool.
        cpus_per_worker: CPUs each actor reserves (and torch threads it uses).
        gpus_per_worker: GPUs each actor reserves (then pass ``device="cuda"`` to ``score_pool``).
        object_store_memory: bytes of object store for a local Ray started here.
        blocks_per_worker: input blocks per actor (more: finer load balancing and retries).
        ray_remote_args: extra actor options for ``map_batches`` (e.g. ``{"max_restarts": 3}``).
        init_options: extra ``ray.init`` options for a Ray started here.

    Ray started by this executor is shut down by :meth:`close` (or the ``with`` block).

    Example::

        with RayExecutor(address="auto") as executor:
            picks = score_pool(model, dataset, candidates_N, "power_bald", 10, num_samples=100,
                               mask_generator=1, selection_seed=2, executor=executor)
    """

    def __init__(
        self,
        *,
        address: str | None = None,
        num_workers: int = 2,
        cpus_per_worker: float = 1.0,
        gpus_per_worker: float = 0.0,
        object_store_memory: int | None = None,
        blocks_per_worker: int = 16,
        ray_remote_args: Mapping[str, Any] | None = None,
        init_options: Mapping[str, Any] | None = None,
    ) -> None:
        if address is not None and (not isinstance(address, str) or not address):
            raise InvalidArgumentError(f"address must be a non-empty string (e.g. 'auto') or None, got {address!r}")
        self.address = address
        self.num_workers = check_positive_int(num_workers, "num_workers")
        if isinstance(cpus_per_worker, bool) or not isinstance(cpus_per_worker, int | float) or not cpus_per_worker > 0:
            raise InvalidArgumentError(f"cpus_per_worker must be a number > 0, got {cpus_per_worker!r}")
        if isinstance(gpus_per_worker, bool) or not isinstance(gpus_per_worker, int | float) or gpus_per_worker < 0:
            raise InvalidArgumentError(f"gpus_per_worker must be a number >= 0, got {gpus_per_worker!r}")
        self.cpus_per_worker = float(cpus_per_worker)
        self.gpus_per_worker = float(gpus_per_worker)
        if object_store_memory is not None:
            object_store_memory = check_positive_int(object_store_memory, "object_store_memory")
        self.object_store_memory = object_store_memory
        self.blocks_per_worker = check_positive_int(blocks_per_worker, "blocks_per_worker")
        self.ray_remote_args = dict(ray_remote_args or {})
        self.init_options = dict(init_options or {})
        self._ray = _import_ray()
        self._started = False

    def __repr__(self) -> str:
        where = self.address or "local"
        return f"RayExecutor(address={where!r}, num_workers={self.num_workers}, cpus_per_worker={self.cpus_per_worker:g})"

    # -- lifecycle ---------------------------------------------------------------------
    def check_address(self, timeout: float = 5.0) -> None:
        """Raise :class:`~activebayes.errors.InvalidArgumentError` within ``timeout`` seconds when
        ``address`` names a ``host:port`` nothing listens on (``ray.init`` would retry for minutes)."""
        address = self.address
        if address is None or address in ("auto", "local"):
            return
        host, _, port = address.removeprefix("ray://").rpartition(":")
        if not host or not port.isdigit():
            return  # not host:port: left to ray.init
        try:
            socket.create_connection((host, int(port)), timeout=timeout).close()
        except OSError as error:
            raise InvalidArgumentError(
                f"address (--ray-address) {address!r}: cannot connect to {host}:{port} "
                f"({error.strerror or error or 'timed out'}); is `ray start --head` running there?") from None

    def start(self) -> None:
        """Connect to ``address``, join the running Ray, or start a local one."""
        ray = self._ray
        if ray.is_initialized():
            return
        self.check_address()
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init_options}
        if self.address is not None:
            ray.init(address=self.address, **options)
        else:
            options.setdefault("num_cpus", max(1, math.ceil(self.num_workers * self.cpus_per_worker)))
            if self.object_store_memory is not None:
                options.setdefault("object_store_memory", self.object_store_memory)
            # "local": a new instance, never the last cluster `ray start` left in /tmp/ray
            ray.init(address="local", **options)
        self._started = True

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False

    def __enter__(self) -> RayExecutor:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- one pass ----------------------------------------------------------------------
    def run(
        self,
        model: nn.Module,
        inputs: Any,
        indices_N: Tensor,
        costs_N: Tensor | None,
        work: ChunkWork,
        *,
        spec: PredictSpec,
        chunk_size: int,
        progress: bool,
        description: str,
    ) -> Rows:
        """Run ``work`` over every candidate on the cluster; the reduced rows (see :class:`~activebayes.scoring.PoolExecutor`)."""
        ray = self._ray
        self.start()
        N = int(indices_N.shape[0])
        n_chunks = math.ceil(N / chunk_size)
        payload = _Payload(
            model=_on_cpu(model),
            inputs=_transportable(inputs),
            work=work,
            spec=spec,
            threads=max(1, int(self.cpus_per_worker)),
        )
        payload_ref = ray.put(payload)
        n_blocks = min(n_chunks, self.num_workers * self.blocks_per_worker)
        context = ray.data.DataContext.get_current()
        saved = (context.enable_progress_bars, context.print_on_execution_start)
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        try:
            # blocks of chunks built here and put into the object store (no tasks): they live on the
            # driver's node, and each actor maps only the chunks it scores
            chunks = ray.data.from_items(_chunk_rows(indices_N, costs_N, chunk_size), override_num_blocks=n_blocks)
            remote_args = {"num_cpus": self.cpus_per_worker, **self.ray_remote_args}
            if self.gpus_per_worker:
                remote_args.setdefault("num_gpus", self.gpus_per_worker)
            scored = chunks.map_batches(
                ChunkScorer,
                batch_size=1,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=self.num_workers),
                fn_constructor_kwargs={"payload_ref": [payload_ref]},
                **remote_args,
            )
            accumulator = RowsAccumulator(work)
            with tqdm(total=N, desc=f"{description} on Ray", unit="item", disable=not progress, leave=False) as bar:
                for batch in scored.iter_batches(batch_size=None, batch_format="numpy"):
                    rows = {key: torch.from_numpy(np.array(value)) for key, value in batch.items()}
                    covered = int(rows.pop(_ITEMS).sum())
                    accumulator.add(rows)
                    bar.update(covered)
                    accumulator.items += covered
        finally:
            context.enable_progress_bars, context.print_on_execution_start = saved
            del payload_ref
        if accumulator.items != N:
            raise RuntimeError(f"Ray scored {accumulator.items} of {N} candidates")
        return accumulator.result()

