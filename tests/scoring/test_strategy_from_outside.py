"""A joint (non-per-item) strategy registered from outside the package, in one place, streams.

``class_balanced_bald`` picks, round robin over the predicted classes (classes ordered by
their best item), each class's highest-BALD items. It is not a per-item score, so it
brings its own streaming plan: each chunk keeps, per predicted class, its top
``batch_size`` items by ``(BALD desc, index asc)`` -- an exact merge rule -- and the
round robin runs on the kept rows. Checked against a NumPy float64 reference on the
whole pool, streamed with small chunks (the pass keeps only those rows, never
``[N, K, C]``), on a local Ray cluster, and in the loop on digits.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pytest
import torch

from activebayes.acquisition import (
    PoolPlan,
    PoolRequest,
    Selection,
    bald,
    get_strategy,
    register_strategy,
    select,
    unregister_strategy,
)
from activebayes.acquisition.streaming import lexicographic_top
from activebayes.errors import InvalidArgumentError
from activebayes.models import MLP, predict_log_probs, resample_masks
from activebayes.scoring import LocalExecutor, score_pool

NAME = "test_class_balanced_bald"
N_ALL, FEATURES, C, K = 500, 6, 4, 8
MASK_SEED, SELECTION_SEED = 11, 5


# ------------------------------------------------------------ the strategy, in one place


def _rows(indices_n: torch.Tensor, log_probs_n_K_C: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"index": indices_n, "score": bald(log_probs_n_K_C).double(),
            "predicted": log_probs_n_K_C.exp().mean(1).argmax(-1)}


def _top_per_class(rows: dict[str, torch.Tensor], per_class: int) -> dict[str, torch.Tensor]:
    kept = []
    for c in rows["predicted"].unique().tolist():
        positions = torch.nonzero(rows["predicted"] == c).squeeze(1)
        kept.append(positions[lexicographic_top(rows["score"][positions], None, rows["index"][positions], per_class)])
    top = torch.cat(kept)
    return {key: value[top] for key, value in rows.items()}


def _round_robin(rows: dict[str, torch.Tensor], batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(indices, scores)``: round r takes each class's r-th best, classes by their best item."""
    order = lexicographic_top(rows["score"], None, rows["index"])  # best first over all rows
    rank_within_class = torch.empty_like(order)
    seen: dict[int, int] = {}
    for position in order.tolist():
        c = int(rows["predicted"][position])
        rank_within_class[position] = seen.get(c, 0)
        seen[c] = seen.get(c, 0) + 1
    picks = order[torch.argsort(rank_within_class[order], stable=True)][:batch_size]
    return rows["index"][picks].clone(), rows["score"][picks]


@dataclass(frozen=True)
class PerClassTop:
    """Chunk work: per predicted class, the top ``per_class`` items by BALD (bounded by ``per_class`` x C)."""

    per_class: int
    needs_predictions: bool = True
    keep: int | None = None  # reduced in map already: at most per_class x C rows per chunk

    def map(self, indices_n, costs_n, log_probs_n_K_C):
        return self.reduce(_rows(indices_n, log_probs_n_K_C))

    def reduce(self, rows):
        return _top_per_class(rows, self.per_class)


def class_balanced_bald(predictions, batch_size, *, name, generator, plan, device):
    """In memory (``select``): the same rule on the whole ``[N, K, C]``."""
    if plan is not None:
        raise InvalidArgumentError(f"strategy {name!r} does not take a cost budget")
    indices, scores = _round_robin(_rows(torch.arange(len(predictions)), predictions), batch_size)
    return Selection(indices, scores, name)


def class_balanced_plan(request: PoolRequest) -> PoolPlan:
    """Streaming: per-class top rows from every chunk, round robin on the merged rows."""
    if request.budget is not None:
        raise InvalidArgumentError(f"strategy {request.name!r} does not take a cost budget")
    PLANS.append(request)

    def finish(rows):
        indices, scores = _round_robin(rows, request.batch_size)
        return Selection(indices, scores, request.name)

    return PoolPlan(PerClassTop(request.batch_size), finish, "per-class BALD")


PLANS: list[PoolRequest] = []
CONTEXTS: list = []


def context_defaults(context) -> dict:
    CONTEXTS.append(context)
    return {}


@pytest.fixture(autouse=True)
def registered():
    register_strategy(NAME, class_balanced_bald, plan=class_balanced_plan, defaults=context_defaults)
    PLANS.clear()
    CONTEXTS.clear()
    try:
        yield
    finally:
        unregister_strategy(NAME)


# ------------------------------------------------------------ references and fixtures


def numpy_reference(log_probs_N_K_C: torch.Tensor, batch_size: int) -> list[int]:
    """The rule in NumPy float64: BALD, predicted class, round robin (ties to the lower index)."""
    p = log_probs_N_K_C.double().exp().numpy()
    mean = p.mean(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.nansum(mean * np.log(mean), -1)
        expected = -np.nansum(p * np.log(p), -1).mean(1)
    score, predicted = entropy - expected, mean.argmax(-1)
    per_class = {c: sorted(np.flatnonzero(predicted == c), key=lambda n: (-score[n], n)) for c in set(predicted)}
    classes = sorted(per_class, key=lambda c: (-score[per_class[c][0]], per_class[c][0]))
    picks = [per_class[c][r] for r in range(max(map(len, per_class.values()))) for c in classes
             if r < len(per_class[c])]
    return [int(n) for n in picks[:batch_size]]


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return MLP(in_features=FEATURES, num_classes=C, hidden=(16,), p=0.5)


@pytest.fixture(scope="module")
def pool():
    g = torch.Generator().manual_seed(1)
    return torch.randn(N_ALL, FEATURES, generator=g) * torch.rand(N_ALL, 1, generator=g) * 4


@pytest.fixture(scope="module")
def candidates():
    return torch.randperm(N_ALL, generator=torch.Generator().manual_seed(2))[:400]


def full_log_probs(net, pool, sorted_candidates):
    resample_masks(net, generator=MASK_SEED)
    return predict_log_probs(net, pool[sorted_candidates], K, generator=None)


def stream(net, pool, candidates, batch_size, **kwargs):
    return score_pool(net, pool, candidates, NAME, batch_size, num_samples=K, mask_generator=MASK_SEED,
                      selection_seed=SELECTION_SEED, **kwargs)


class RecordingExecutor(LocalExecutor):
    def __init__(self) -> None:
        self.columns: list[set[str]] = []

    def run(self, model, inputs, indices_N, costs_N, work, **kwargs):
        rows = super().run(model, inputs, indices_N, costs_N, work, **kwargs)
        self.columns.append(set(rows))
        return rows


# ------------------------------------------------------------ the tests


def test_registered_from_outside_it_knows_its_plan():
    entry = get_strategy(NAME)
    assert entry.mode is None and entry.score_fn is None and entry.needs_predictions
    assert entry.without_labels == "random"  # it reads predictions: random before the first label


@pytest.mark.parametrize("chunk_size", [17, 64, 1000])
def test_streamed_equals_in_memory_and_the_numpy_reference(net, pool, candidates, chunk_size):
    sorted_candidates = candidates.sort().values
    log_probs = full_log_probs(net, pool, sorted_candidates)
    expected = sorted_candidates[numpy_reference(log_probs, 9)].tolist()
    in_memory = select(log_probs, NAME, 9)
    assert sorted_candidates[in_memory.indices].tolist() == expected
    executor = RecordingExecutor()
    streamed = stream(net, pool, candidates, 9, chunk_size=chunk_size, executor=executor)
    assert streamed.indices.tolist() == expected and streamed.strategy == NAME
    torch.testing.assert_close(streamed.scores, in_memory.scores, rtol=1e-6, atol=1e-9)
    # its own plan ran (one pass keeping per-class rows), not the gather-all fallback
    assert executor.columns == [{"index", "score", "predicted"}] and len(PLANS) == 1
    assert len(set(streamed.indices.tolist())) == 9


def test_its_options_and_inputs_are_checked_like_every_strategy(net, pool, candidates):
    with pytest.raises(TypeError, match=f"strategy '{NAME}' got an unknown option 'beta'; its options are: none"):
        stream(net, pool, candidates, 3, options={"beta": 1.0})
    with pytest.raises(TypeError, match=f"strategy '{NAME}' got an unknown option 'beta'"):
        select(torch.log_softmax(torch.randn(10, 2, 3), -1), NAME, 3, beta=1.0)
    with pytest.raises(ValueError, match="does not take a cost budget"):
        stream(net, pool, candidates, 3, costs_N=torch.ones(len(candidates)), cost_budget=5.0)
    assert PLANS == []




@pytest.mark.xdist_group("ray")
def test_on_a_local_ray_cluster_the_picks_are_the_same(net, pool, candidates):
    ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'activebayes[ray]'")
    from activebayes.distributed import RayExecutor

    # the work class lives in this test module, which Ray's workers cannot import: send it by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address="local", num_cpus=2, object_store_memory=300 * 2**20, include_dashboard=False,
             log_to_driver=False)
    try:
        on_ray = stream(net, pool, candidates, 7, chunk_size=50, executor=RayExecutor(num_workers=2))
    finally:
        ray.shutdown()
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    local = stream(net, pool, candidates, 7, chunk_size=50)
    assert on_ray.indices.tolist() == local.indices.tolist()
    assert torch.equal(on_ray.scores, local.scores)


def test_in_the_loop_on_digits():
    from activebayes.loop import ActiveLearningLoop, LoopConfig
    from tests.conftest import FAST_LOOP

    config = LoopConfig(strategy=NAME, **FAST_LOOP)
    result = ActiveLearningLoop(config).run(progress=False)
    acquired = [record.acquired for record in result.rounds]
    assert [len(batch) for batch in acquired] == [10, 10, 10, 0]
    assert all(record.strategy == NAME for record in result.rounds[:3])
    assert len({i for batch in acquired for i in batch}) == 30
    # the loop streamed through the strategy's plan every round, with the round's context
    assert [request.batch_size for request in PLANS] == [10, 10, 10]
    assert [(c.n_labelled, c.batch_size, c.num_classes, c.num_samples) for c in CONTEXTS] == [
        (20, 10, 10, 4), (30, 10, 10, 4), (40, 10, 10, 4)]
    assert [c.pool_size for c in CONTEXTS] == [request.N for request in PLANS]
    again = ActiveLearningLoop(config).run(progress=False)
    assert [record.acquired for record in again.rounds] == acquired
