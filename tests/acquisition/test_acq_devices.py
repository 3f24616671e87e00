"""Every registered strategy picks the same batch wherever it computes.

``select(..., device=D)`` computes on ``D`` and returns CPU results; with the same generator
seed the picks must be those of the CPU, the scores equal to float rounding. On a machine
without an accelerator this runs the ``device="cpu"`` path only; where CUDA is present (the
GPU machine lent to the project) it checks every strategy there too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from activebayes.acquisition import available_strategies, select
from activebayes.acquisition.multilabel import multilabel_log_probs
from activebayes.acquisition.strategies import REGISTRY

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
N, K, C, D, L = 60, 8, 4, 6, 5


def _inputs(name: str) -> tuple[torch.Tensor | int, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(sum(map(ord, name)))
    entry = REGISTRY.get(name)
    scale_N_1_1 = 0.5 + 3 * torch.rand(N, 1, 1, generator=g, dtype=torch.float64)
    logits_N_K_C = torch.randn(N, K, C, generator=g, dtype=torch.float64) * scale_N_1_1
    if name.startswith("multilabel_"):
        log_probs: torch.Tensor | int = multilabel_log_probs(logits_N_K_C)
    elif entry.needs_predictions:
        log_probs = torch.log_softmax(logits_N_K_C, -1)
    else:
        log_probs = N
    inputs = {}
    if "features" in entry.inputs:
        inputs["features_N_D"] = torch.randn(N, D, generator=g, dtype=torch.float64)
    if "labelled_features" in entry.inputs:
        inputs["labelled_features_L_D"] = torch.randn(L, D, generator=g, dtype=torch.float64)
    if "target_log_probs" in entry.inputs + tuple(entry.optional_inputs):
        inputs["target_log_probs_M_K_C"] = torch.log_softmax(
            torch.randn(20, K, C, generator=g, dtype=torch.float64) * 2, -1)
    return log_probs, inputs


def test_the_strategies_checked_are_all_the_registered_ones():
    assert {"badge", "batchbald", "epig", "typicality", "multilabel_batchbald", "random"} <= set(available_strategies())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", available_strategies())
def test_every_strategy_picks_the_same_batch_on_every_device(name, device):
    log_probs, inputs = _inputs(name)
    here = select(log_probs, name, 5, generator=torch.Generator().manual_seed(3), **inputs)
    moved = {key: value.to(device) for key, value in inputs.items()}
    there = select(log_probs.to(device) if isinstance(log_probs, torch.Tensor) else log_probs, name, 5,
                   generator=torch.Generator().manual_seed(3), device=device, **moved)
    assert there.indices.device.type == "cpu" and there.scores.device.type == "cpu"
    assert there.indices.tolist() == here.indices.tolist()
    np.testing.assert_allclose(there.scores.double().numpy(), here.scores.double().numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["variation_ratios", "bald", "least_confidence", "batchbald"])
def test_tied_scores_go_to_the_lower_index(name, device):
    # 8 distinct items, each repeated 30 times in a shuffled pool: every score is tied 30 ways
    g = torch.Generator().manual_seed(7)
    distinct_8_K_C = torch.log_softmax(2 * torch.randn(8, 4, 3, generator=g, dtype=torch.float64), -1)
    copies_N = torch.randperm(240, generator=g) % 8
    log_probs = distinct_8_K_C[copies_N]
    picked = select(log_probs.to(device), name, 12, generator=torch.Generator().manual_seed(0), device=device)
    if name == "batchbald":  # greedy: each step takes the first of its equal maxima, the lowest free copy
        indices = picked.indices.tolist()
        for n, i in enumerate(indices):
            lower_copies = [j for j in range(i) if copies_N[j] == copies_N[i]]
            assert set(lower_copies) <= set(indices[:n]), (n, i, lower_copies)
        return
    scores_N = REGISTRY.get(name).score_fn(log_probs).numpy()
    expected = np.lexsort((np.arange(240), -scores_N))[:12]  # score descending, then index ascending
    assert picked.indices.tolist() == expected.tolist()
