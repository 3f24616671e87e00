"""A worker node lost mid-scoring: Ray restarts its actor elsewhere and the picks do not change.

Two nodes on this machine (``ray.cluster_utils.Cluster``): the head (2 CPUs) and a worker
(1 CPU). The two model replicas are spread over both; once the worker node has scored a
chunk it is removed without warning. Scoring must complete with the picks of one process.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from activebayes.models import MLP
from activebayes.scoring import score_pool

ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'activebayes[ray]'")

from ray.cluster_utils import Cluster  # noqa: E402

from activebayes.distributed import RayExecutor  # noqa: E402

# Ray tests share one pytest-xdist worker (--dist loadgroup): one Ray at a time on a small machine
pytestmark = pytest.mark.xdist_group("ray")

N_ALL, FEATURES, C, K = 400, 6, 4, 8
MB = 2**20


class LoggingMLP(MLP):
    """An MLP that is slow (so the node can die mid-pass) and logs which node ran each forward."""

    def __init__(self, log: str, delay: float) -> None:
        super().__init__(in_features=FEATURES, num_classes=C, hidden=(16,), p=0.5)
        self.log = log
        self.delay = delay

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        if ray.is_initialized():  # on a Ray worker (the in-process reference runs before ray.init)
            time.sleep(self.delay)
            with open(self.log, "a") as handle:
                handle.write(ray.get_runtime_context().get_node_id() + "\n")
        return super().forward(inputs)


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_node_lost_mid_scoring_gives_the_same_picks(tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    log = tmp_path / "forwards.log"
    torch.manual_seed(0)
    net = LoggingMLP(str(log), delay=0.1)
    pool = torch.randn(N_ALL, FEATURES, generator=torch.Generator().manual_seed(1)) * 3
    candidates = torch.arange(N_ALL)
    kwargs = dict(num_samples=K, mask_generator=3, selection_seed=4, chunk_size=10)
    expected = score_pool(net, pool, candidates, "bald", 5, **kwargs)  # in this process

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 150 * MB})
    try:
        worker = cluster.add_node(num_cpus=1, object_store_memory=150 * MB)
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        worker_id = worker.node_id
        executor = RayExecutor(num_workers=2, ray_remote_args={"scheduling_strategy": "SPREAD"})
        result: dict[str, object] = {}

        def run() -> None:
            try:
                result["picks"] = score_pool(net, pool, candidates, "bald", 5, executor=executor, **kwargs)
            except BaseException as error:  # re-raised in the test thread
                result["error"] = error

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 300  # actors start slowly on a loaded machine
        while worker_id not in _lines(log) and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.1)
        assert worker_id in _lines(log), "no chunk ran on the worker node (actors not spread?)"
        lost_after = len(_lines(log))
        cluster.remove_node(worker, allow_graceful=False)
        thread.join(timeout=120)
        assert not thread.is_alive(), "scoring did not finish after the node was lost"
        if "error" in result:
            raise result["error"]  # type: ignore[misc]
        picks = result["picks"]
        assert picks.indices.tolist() == expected.indices.tolist()
        assert torch.equal(picks.scores, expected.scores)
        forwards = _lines(log)
        assert len(forwards) > lost_after  # scoring went on after the loss ...
        assert set(forwards[lost_after:]) - {worker_id}  # ... on the surviving node
    finally:
        ray.shutdown()
        cluster.shutdown()
