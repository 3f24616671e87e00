"""RayExecutor: a local Ray cluster gives exactly the picks of in-process score_pool.

One Ray instance for the module (2 CPUs, 300 MB object store), shut down at the end.
Every case below is one pass over the pool on the cluster; the reference is the same
call with the default in-process executor.
"""

from __future__ import annotations

import builtins

import numpy as np
import pytest
import torch

from activebayes.data import load_memmap, write_memmap
from activebayes.models import MLP
from activebayes.scoring import score_pool

ray = pytest.importorskip("ray", reason="Ray is optional: pip install 'activebayes[ray]'")

from activebayes.distributed import RayExecutor  # noqa: E402

# Ray tests share one pytest-xdist worker (--dist loadgroup): one Ray at a time on a small machine
pytestmark = pytest.mark.xdist_group("ray")

N_ALL, FEATURES, C, K = 900, 6, 4, 8  # items are 1x2x3 'images'


@pytest.fixture(scope="module")
def executor():
    ray.init(address="local", num_cpus=2, object_store_memory=300 * 2**20, include_dashboard=False,
             log_to_driver=False)  # "local": never a cluster another test started
    try:
        yield RayExecutor(num_workers=2)
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A model and a pool of uint8 2x3 'images' stored in the memmap format (and in memory)."""
    torch.manual_seed(0)
    net = MLP(in_features=FEATURES, num_classes=C, hidden=(16,), p=0.5)
    rng = np.random.default_rng(1)
    pixels = (rng.beta(0.5, 0.5, size=(N_ALL, 2, 3)) * 255).astype(np.uint8)
    folder = tmp_path_factory.mktemp("pool")
    lazy = load_memmap(write_memmap(folder / "memmap", pixels, normalization=(0.5, 0.3), progress=False))
    pool = lazy.inputs[:]  # the same rows in memory, float32 [N, 1, 2, 3]
    np.save(folder / "float32.npy", pool.numpy())
    candidates = torch.randperm(N_ALL, generator=torch.Generator().manual_seed(2))[:700]
    return net, pool, lazy, np.load(folder / "float32.npy", mmap_mode="r"), candidates


class Dataset:
    def __init__(self, inputs) -> None:
        self.inputs = inputs


def _score(net, data, candidates, strategy, **kwargs):
    return score_pool(net, data, candidates, strategy, 6, num_samples=K, mask_generator=3, selection_seed=4,
                      chunk_size=50, **kwargs)


COSTS = torch.rand(700, generator=torch.Generator().manual_seed(5), dtype=torch.float64) + 0.5
FEATURES_700 = torch.randn(700, 3, generator=torch.Generator().manual_seed(6))


@pytest.mark.parametrize(
    ("strategy", "data", "kwargs"),
    [
        ("bald", "tensor", {}),                                   # exact top-k; inputs via the object store
        ("entropy", "numpy_memmap", {}),                          # a NumPy memmap reopened on the workers
        ("power_bald", "lazy", {"options": {"beta": 2.0}}),       # keyed Gumbel noise; activebayes memmap dataset
        ("batchbald", "lazy", {"options": {"prefilter": 60, "num_configurations": 300, "max_exact_configs": 16}}),
        ("bald", "tensor", {"costs_N": COSTS, "cost_budget": 4.0, "options": {"cost_aware": True}}),  # all scores
        ("badge", "lazy", {"strategy_inputs": {"features_N_D": FEATURES_700}}),  # [n, C] gradient factors per chunk
    ],
    ids=["bald", "entropy", "power_bald", "batchbald_prefilter", "bald_cost_budget", "badge"],
)
def test_ray_equals_one_process(executor, setup, strategy, data, kwargs):
    net, pool, lazy, float_memmap, candidates = setup
    inputs = {"tensor": pool, "numpy_memmap": float_memmap, "lazy": lazy}[data]
    local = _score(net, pool, candidates, strategy, **kwargs)
    on_ray = _score(net, Dataset(inputs) if data != "lazy" else inputs, candidates, strategy, executor=executor,
                    **kwargs)
    assert on_ray.indices.tolist() == local.indices.tolist()
    assert torch.equal(on_ray.scores, local.scores)  # the same chunks, the same arithmetic: bit for bit


def test_memmap_transport_reopens_the_file(setup):
    from activebayes.distributed import NumpyMemmap, _reader, _transportable

    _, pool, lazy, array, _ = setup
    transported = _transportable(array)
    assert isinstance(transported, NumpyMemmap) and transported.filename == str(array.filename)
    reader = _reader(transported)
    index = torch.tensor([3, 1, 899])
    assert torch.equal(reader[index], pool[index])
    # an in-memory tensor travels as a NumPy array; activebayes' lazy inputs as themselves (their path)
    assert isinstance(_transportable(pool), np.ndarray)
    assert _transportable(lazy.inputs) is lazy.inputs


def test_missing_ray_names_the_extra(monkeypatch):
    import activebayes.distributed as distributed

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    assert not distributed.ray_available()
    with pytest.raises(ImportError, match=r"pip install 'activebayes\[ray\]'"):
        RayExecutor(num_workers=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"num_workers": 0}, "num_workers"), ({"cpus_per_worker": 0}, "cpus_per_worker"), ({"address": ""}, "address")],
)
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RayExecutor(**kwargs)


class PidLoggingMLP(MLP):
    """An MLP that writes the process id of each forward to a file (run on the actors)."""

    def __init__(self, log: str, seed: int) -> None:
        torch.manual_seed(seed)
        super().__init__(in_features=FEATURES, num_classes=C, hidden=(16,), p=0.5)
        self.log = log

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        import os

        with open(self.log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
        return super().forward(inputs)


def test_the_replicas_are_kept_between_passes_and_take_each_pass_model(executor, setup, tmp_path):
    """The second pass runs in the processes of the first (no new actors), with the second pass's model."""
    import sys

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    _, pool, _, _, candidates = setup
    pids = []
    for seed in (7, 8):
        log = tmp_path / f"pass{seed}.log"
        net = PidLoggingMLP(str(log), seed)
        on_ray = _score(net, Dataset(pool), candidates, "bald", executor=executor)
        local = _score(net, pool, candidates, "bald")
        assert on_ray.indices.tolist() == local.indices.tolist() and torch.equal(on_ray.scores, local.scores)
        pids.append(set(log.read_text().split()) - {str(__import__("os").getpid())})
    assert pids[0] and pids[1] <= pids[0], pids
    first = _score(PidLoggingMLP(str(tmp_path / "x.log"), 7), pool, candidates, "bald")
    assert first.indices.tolist() != on_ray.indices.tolist()  # the two models pick differently: the payload changed
