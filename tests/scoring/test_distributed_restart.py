"""A RayExecutor whose Ray was shut down between passes starts new replicas on the next pass.

The executor keeps its actors between passes; a Ray started again in the same process numbers
its jobs from 1 again, so the executor must not take the old actors' handles for live ones.
"""

from __future__ import annotations

import pytest
import torch

from activebayes.models import MLP
from activebayes.scoring import score_pool

ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'activebayes[ray]'")

from activebayes.distributed import RayExecutor  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")


def test_a_pass_after_ray_restarted_starts_new_replicas():
    torch.manual_seed(0)
    net = MLP(in_features=5, num_classes=3, hidden=(8,), p=0.5)
    pool = torch.randn(120, 5, generator=torch.Generator().manual_seed(1))
    kwargs = dict(num_samples=4, mask_generator=3, selection_seed=4, chunk_size=20)
    expected = score_pool(net, pool, torch.arange(120), "bald", 4, **kwargs)
    executor = RayExecutor(num_workers=1, object_store_memory=100 * 2**20)
    try:
        first = score_pool(net, pool, torch.arange(120), "bald", 4, executor=executor, **kwargs)
        actors = list(executor._actors)
        ray.shutdown()  # by someone else: the executor's actors are gone
        second = score_pool(net, pool, torch.arange(120), "bald", 4, executor=executor, **kwargs)
        assert executor._actors and executor._actors[0] is not actors[0]
    finally:
        executor.close()
        ray.shutdown()
    for picks in (first, second):
        assert picks.indices.tolist() == expected.indices.tolist() and torch.equal(picks.scores, expected.scores)
    assert not ray.is_initialized()
