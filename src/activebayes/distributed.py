r"""Score a pool on a Ray cluster, with exactly the picks of one process.

:class:`RayExecutor` runs the chunks of :func:`activebayes.scoring.score_pool` on a pool
of Ray actors, the model replicas: the candidates' chunks are dealt into blocks, each
free actor takes the next block (with the pass's model, its MC dropout mask seeds and a
reader of the pool's items, put into the object store once per pass), and the driver
merges what the blocks return. The actors live as long as the executor, so only its
first pass pays for starting them::

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

Fault tolerance: Ray restarts an actor that dies (``max_restarts=-1``) and retries
its block (``max_task_retries=-1``); the blocks are sent from the driver, so losing a
worker node mid-scoring costs only the blocks in flight there, and the result is
unchanged.

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
_IN_FLIGHT = 2  # blocks queued at each actor at a time


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            "activebayes.distributed needs Ray: pip install 'activebayes[ray]'"
        ) from error
    return ray


def ray_available() -> bool:
    """Whether Ray can be imported."""
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
    """One model replica (a Ray actor kept for the executor's life): blocks of chunks -> kept rows.

    Each pass puts its :class:`_Payload` (model, item reader, work) into the object store once;
    an actor fetches it on its first block of the pass and keeps it until the next pass's
    payload arrives. A block is a list of chunks, each ``(indices, costs or None)``.
    """

    def __init__(self) -> None:
        self._payload_id: str | None = None

    def score(self, payload_ref: list, block: list[tuple[np.ndarray, np.ndarray | None]]) -> dict[str, np.ndarray]:
        """The reduced rows of the block's chunks, with how many items it covered (``_items``)."""
        ray = _import_ray()
        if payload_ref[0].hex() != self._payload_id:
            payload: _Payload = ray.get(payload_ref[0])
            torch.set_num_threads(payload.threads)
            self.model, self.inputs, self.work, self.spec = payload.model, _reader(payload.inputs), payload.work, payload.spec
            self._payload_id = payload_ref[0].hex()
        parts: list[Rows] = []
        items = 0
        for indices, costs in block:
            costs_n = None if costs is None else torch.from_numpy(np.array(costs, dtype=np.float64))
            parts.append(run_chunk(self.model, self.inputs, torch.from_numpy(np.array(indices, dtype=np.int64)),
                                   costs_n, self.work, self.spec))
            items += len(indices)
        rows = concat_rows(parts)
        if len(parts) > 1:
            rows = self.work.reduce(rows)
        out = {key: value.numpy() for key, value in rows.items()}
        out[_ITEMS] = np.array([items], dtype=np.int64)
        return out


def _blocks(indices_N: Tensor, costs_N: Tensor | None, chunk_size: int,
            n_blocks: int) -> list[list[tuple[np.ndarray, np.ndarray | None]]]:
    """The ``chunk_size`` slices of the (index-sorted) candidates, dealt into ``n_blocks`` runs of
    consecutive chunks (the chunks are the same as in one process; only their grouping differs)."""
    indices = indices_N.numpy()
    costs = None if costs_N is None else costs_N.numpy()
    chunks = [(indices[start : start + chunk_size], None if costs is None else costs[start : start + chunk_size])
              for start in range(0, len(indices), chunk_size)]
    bounds = np.linspace(0, len(chunks), n_blocks + 1).round().astype(int)
    return [chunks[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


# ------------------------------------------------------------------------ the executor


class RayExecutor:
    """Runs :func:`~activebayes.scoring.score_pool`'s passes on a pool of Ray actors, kept between passes.

    Args:
        address: an existing cluster (``"auto"``: the one ``ray start`` runs on this node,
            ``"ray://head:10001"``, ``"10.0.0.1:6379"``); ``None`` joins the Ray instance this
            process already runs, or starts a new local one (with ``num_workers x
            cpus_per_worker`` CPUs).
        num_workers: actors (model replicas) in the pool.
        cpus_per_worker: CPUs each actor reserves (and torch threads it uses).
        gpus_per_worker: GPUs each actor reserves (then pass ``device="cuda"`` to ``score_pool``).
        object_store_memory: bytes of object store for a local Ray started here.
        blocks_per_worker: blocks of chunks per actor and pass (more: finer load balancing and retries).
        ray_remote_args: extra actor options (e.g. ``{"max_restarts": 3}``,
            ``{"scheduling_strategy": "SPREAD"}``).
        init_options: extra ``ray.init`` options for a Ray started here.

    The actors start on the first pass and stay for the next ones; :meth:`close` (or the
    ``with`` block) stops them, and shuts down a Ray this executor started.

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
        self._actors: list[Any] = []
        self._actors_job: str | None = None

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

    def _session(self) -> str:
        """Which Ray this process is connected to: its node and job (a Ray started again in the
        same process numbers its jobs from 1 again, so the job alone does not tell)."""
        context = self._ray.get_runtime_context()
        return f"{context.get_node_id()}/{context.get_job_id()}"

    def _actor_pool(self) -> list[Any]:
        """The executor's model replicas: started on its first pass and kept for the next ones
        (started again when Ray was restarted meanwhile)."""
        ray = self._ray
        job = self._session()
        if self._actors and self._actors_job == job:
            return self._actors
        options: dict[str, Any] = {"num_cpus": self.cpus_per_worker, "max_restarts": -1, "max_task_retries": -1,
                                   **self.ray_remote_args}
        if self.gpus_per_worker:
            options.setdefault("num_gpus", self.gpus_per_worker)
        actor_class = ray.remote(ChunkScorer).options(**options)
        self._actors = [actor_class.remote() for _ in range(self.num_workers)]
        self._actors_job = job
        return self._actors

    def close(self) -> None:
        """Stop the model replicas, and shut Ray down if this executor started it."""
        ray = self._ray
        if self._actors and ray.is_initialized() and self._actors_job == self._session():
            for actor in self._actors:
                ray.kill(actor)
        self._actors, self._actors_job = [], None
        if self._started and ray.is_initialized():
            ray.shutdown()
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
        actors = self._actor_pool()
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
        blocks = _blocks(indices_N, costs_N, chunk_size, min(n_chunks, self.num_workers * self.blocks_per_worker))
        accumulator = RowsAccumulator(work)
        todo = iter(blocks)
        pending: dict[Any, Any] = {}  # result ref -> the actor scoring that block

        def give(actor: Any) -> None:
            block = next(todo, None)
            if block is not None:
                pending[actor.score.remote([payload_ref], block)] = actor

        # each actor holds _IN_FLIGHT blocks (no idle round trip between two) and takes the next one as
        # soon as it returns one; a block of an actor that dies is retried on its restarted replica
        for actor in actors * _IN_FLIGHT:
            give(actor)
        with tqdm(total=N, desc=f"{description} on Ray", unit="item", disable=not progress, leave=False, delay=1.0) as bar:
            while pending:
                [done], _ = ray.wait(list(pending), num_returns=1)
                give(pending.pop(done))
                rows = {key: torch.from_numpy(np.array(value)) for key, value in ray.get(done).items()}
                covered = int(rows.pop(_ITEMS).sum())
                accumulator.add(rows)
                bar.update(covered)
                accumulator.items += covered
        if accumulator.items != N:
            raise RuntimeError(f"Ray scored {accumulator.items} of {N} candidates")
        return accumulator.result()

