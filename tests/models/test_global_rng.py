"""``global_rng_seeded``: what runs inside draws from seeded global generators, and the
caller's generators (CPU and CUDA) are as they were afterwards.

On a CUDA machine, fitting a model used to reseed CUDA's global generator for good: the
block forked only the CPU generator but seeded with ``torch.manual_seed``, which seeds
(or, CUDA not yet started, queues a seed for) every CUDA device too.
"""

from __future__ import annotations

import pytest
import torch

from activebayes._seeding import global_rng_seeded
from activebayes.models import build_model, fit


def test_the_block_draws_from_its_seed_and_restores_the_cpu_generator() -> None:
    torch.manual_seed(123)
    expected_after = torch.rand(4)
    torch.manual_seed(123)
    with global_rng_seeded(7):
        inside = torch.rand(5)
    assert torch.equal(inside, torch.rand(5, generator=torch.Generator().manual_seed(7)))
    assert torch.equal(torch.rand(4), expected_after)


def test_cuda_is_neither_seeded_nor_queued_when_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.manual_seed`` queues a CUDA seed that applies when the user first starts CUDA."""
    if torch.cuda.is_initialized():
        pytest.skip("CUDA already started in this process")
    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda seed: calls.append(seed))
    monkeypatch.setattr(torch.cuda, "manual_seed", lambda seed: calls.append(seed))
    model = build_model("mlp", num_classes=3, input_shape=(4,), generator=1)
    fit(model, (torch.randn(30, 4), torch.arange(30) % 3), max_epochs=1, generator=2)
    assert calls == []
    assert not torch.cuda.is_initialized()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_generators_are_seeded_inside_and_restored_after() -> None:
    torch.cuda.init()
    torch.cuda.manual_seed_all(5)
    expected_after = torch.rand(4, device="cuda")
    torch.cuda.manual_seed_all(5)
    with global_rng_seeded(9):
        inside = torch.rand(6, device="cuda")
    assert torch.equal(torch.rand(4, device="cuda"), expected_after)
    torch.cuda.manual_seed_all(9)
    assert torch.equal(inside, torch.rand(6, device="cuda"))

    def trained(seed: int) -> torch.Tensor:
        model = build_model("mlp", num_classes=3, input_shape=(4,), generator=1).cuda()
        inputs = torch.randn(40, 4, generator=torch.Generator().manual_seed(0))
        fit(model, (inputs, torch.arange(40) % 3), max_epochs=2, generator=seed, device="cuda")
        return torch.cat([p.detach().flatten() for p in model.parameters()]).cpu()

    torch.cuda.manual_seed_all(5)
    first = trained(3)
    assert torch.equal(torch.rand(4, device="cuda"), expected_after)  # fit left CUDA's stream alone
    assert torch.equal(trained(3), first) and not torch.equal(trained(4), first)
