"""Strategies that read the K function samples only through their mean (``Strategy.mean_only``).

The loop scores the pool for them with ``LoopConfig.mean_samples`` functions instead of
``num_samples``; that is only sound when the picks depend on the predictive mean
``p̄ = (1/K) sum_k p_k`` alone. Two prediction sets with the same mean and a different
spread (K = 6 random samples against K = 2 samples placed symmetrically around their
mean) must give the same picks for every strategy flagged so, and different scores for
the ones that read the spread (BALD, BatchBALD, ...), so the flag is neither missing
nor claimed where it does not hold.
"""

from __future__ import annotations

import pytest
import torch

from activebayes.acquisition import available_strategies, get_strategy, select
from activebayes.loop import ActiveLearningLoop, LoopConfig
from tests.conftest import FAST_LOOP

N, K, C, D = 60, 6, 5, 8


def _same_mean_pair(*, multilabel: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A [N, K, C], B [N, 2, C])``, log-probabilities whose means over the samples agree."""
    g = torch.Generator().manual_seed(0)
    if multilabel:  # log P(y_c = 1): one Bernoulli per label
        p_N_K_C = torch.sigmoid(3 * torch.randn(N, K, C, generator=g, dtype=torch.float64))
        mean_N_C = p_N_K_C.mean(1)
        half_N_C = 0.5 * torch.minimum(mean_N_C, 1 - mean_N_C) * torch.rand(N, C, generator=g, dtype=torch.float64)
        q_N_2_C = torch.stack([mean_N_C - half_N_C, mean_N_C + half_N_C], 1)
    else:
        p_N_K_C = torch.softmax(3 * torch.randn(N, K, C, generator=g, dtype=torch.float64), -1)
        mean_N_C = p_N_K_C.mean(1)
        u_N_C = torch.rand(N, C, generator=g, dtype=torch.float64)
        direction_N_C = mean_N_C * (u_N_C - (mean_N_C * u_N_C).sum(-1, keepdim=True))  # sums to 0 over C
        q_N_2_C = torch.stack([mean_N_C + 0.9 * direction_N_C, mean_N_C - 0.9 * direction_N_C], 1)
    assert torch.allclose(q_N_2_C.mean(1), mean_N_C, atol=1e-12) and bool((q_N_2_C > 0).all())
    return p_N_K_C.log().float(), q_N_2_C.log().float()


def _pick(strategy: str, log_probs_N_K_C: torch.Tensor):
    entry = get_strategy(strategy)
    inputs = {}
    if "features" in entry.inputs:
        inputs["features_N_D"] = torch.randn(N, D, generator=torch.Generator().manual_seed(1))
    return select(log_probs_N_K_C, strategy, 5, generator=torch.Generator().manual_seed(2), **inputs)


def _reads_log_probs() -> list[str]:
    return [name for name in available_strategies() if get_strategy(name).needs_predictions]


MEAN_ONLY = [name for name in _reads_log_probs() if get_strategy(name).mean_only]
SPREAD = [name for name in _reads_log_probs() if not get_strategy(name).mean_only]


def test_the_flag_covers_the_mean_readers_and_only_them():
    assert {"badge", "entropy", "margin", "least_confidence", "softmax_entropy", "multilabel_badge",
            "multilabel_entropy"} <= set(MEAN_ONLY)
    assert {"bald", "batchbald", "epig", "variation_ratios", "multilabel_bald"} <= set(SPREAD)


@pytest.mark.parametrize("strategy", MEAN_ONLY)
def test_a_mean_only_strategy_picks_the_same_for_the_same_predictive_mean(strategy):
    A, B = _same_mean_pair(multilabel=strategy.startswith("multilabel"))
    a, b = _pick(strategy, A), _pick(strategy, B)
    assert a.indices.tolist() == b.indices.tolist()
    assert torch.allclose(a.scores.double(), b.scores.double(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("strategy", SPREAD)
def test_a_strategy_that_reads_the_spread_is_not_flagged(strategy):
    A, B = _same_mean_pair(multilabel=strategy.startswith("multilabel"))
    options = {"num_targets": 20} if "epig" in strategy else {}
    a = select(A, strategy, 5, generator=torch.Generator().manual_seed(2), **options)
    b = select(B, strategy, 5, generator=torch.Generator().manual_seed(2), **options)
    same = a.indices.tolist() == b.indices.tolist() and torch.allclose(a.scores.double(), b.scores.double(),
                                                                         rtol=1e-4, atol=1e-5)
    assert not same, f"{strategy} gave the same picks for two predictions with one mean: flag it mean_only"


def _sample_counts(monkeypatch, **config) -> list[int | None]:
    import activebayes.loop as loop_module

    seen: list[int | None] = []
    real = loop_module.score_pool

    def spy(*args, **kwargs):
        seen.append(kwargs["num_samples"])
        return real(*args, **kwargs)

    monkeypatch.setattr(loop_module, "score_pool", spy)
    ActiveLearningLoop(LoopConfig(**{**FAST_LOOP, "budget": 40, **config})).run(progress=False)
    return seen


def test_the_loop_scores_a_mean_only_strategy_with_mean_samples(monkeypatch):
    assert _sample_counts(monkeypatch, strategy="badge", num_samples=7, mean_samples=3) == [3, 3]
    assert _sample_counts(monkeypatch, strategy="bald", num_samples=7, mean_samples=3) == [7, 7]


def test_configs_written_before_mean_samples_score_every_strategy_with_num_samples():
    stored = LoopConfig(**{**FAST_LOOP, "num_samples": 100}).to_dict()
    del stored["mean_samples"]
    assert LoopConfig.from_stored(stored).mean_samples == 100  # a resumed run keeps scoring BADGE so
    assert LoopConfig.from_dict({**stored, "num_samples": 100}).mean_samples == 20  # a new config: the default
