"""EPIG, BADGE and typicality run in the loop with the inputs they read."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from activebayes._seeding import derive_seed
from activebayes.acquisition import select
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.models.embeddings import penultimate_features
from tests.conftest import FAST_LOOP


@pytest.mark.parametrize("strategy", ["epig", "power_epig", "badge", "typicality"])
def test_new_strategies_run_in_the_loop_and_repeat_with_the_seed(strategy):
    config = LoopConfig(strategy=strategy, **{**FAST_LOOP, "budget": 40, "acquisition_options": (
        {"num_targets": 50} if "epig" in strategy else {})})
    first = ActiveLearningLoop(config).run(progress=False)
    again = ActiveLearningLoop(config).run(progress=False)
    assert [r.acquired for r in first.rounds] == [r.acquired for r in again.rounds]
    assert [len(r.acquired) for r in first.rounds] == [10, 10, 0]


def test_typicality_works_from_the_first_label_on_raw_inputs():
    """With no labels, typicality clusters the flattened inputs (no model needed)."""
    config = LoopConfig(strategy="typicality", **{**FAST_LOOP, "initial": "empty"})
    loop = ActiveLearningLoop(config)
    proposal = loop.propose()
    assert proposal.strategy == "typicality" and len(proposal.indices) == 10
    candidates_N = loop.pool.unlabelled_indices
    features_N_D = loop.dataset.inputs[candidates_N].reshape(len(candidates_N), -1)
    expected = select(features_N_D.shape[0], "typicality", 10, features_N_D=features_N_D,
                      labelled_features_L_D=features_N_D[:0],
                      generator=torch.Generator().manual_seed(derive_seed(0, "acquire", 0)), num_clusters=10)
    assert proposal.indices == candidates_N[expected.indices].tolist()


def test_badge_reads_the_round_models_penultimate_features():
    config = LoopConfig(strategy="badge", **FAST_LOOP)
    loop = ActiveLearningLoop(config)
    proposal = loop.propose()
    candidates_N = loop.pool.unlabelled_indices
    features_N_D = penultimate_features(loop.model, loop.dataset.inputs[candidates_N])
    assert features_N_D.shape[1] != loop.dataset.inputs[0].numel()  # a learnt layer, not the pixels
    log_probs = loop._predict(loop.dataset.inputs[candidates_N], key="pool", num_samples=config.num_samples)
    expected = select(log_probs, "badge", 10, features_N_D=features_N_D,
                      generator=torch.Generator().manual_seed(derive_seed(0, "acquire", 0)))
    assert proposal.indices == candidates_N[expected.indices].tolist()
    assert dataclasses.asdict(proposal)["strategy"] == "badge"


def test_cold_start_strategy_acquires_until_its_label_count_then_the_main_one():
    base = {**FAST_LOOP, "budget": 60}
    mixed = ActiveLearningLoop(LoopConfig(**{**base, "strategy": "bald", "cold_start": "typicality", "cold_start_labels": 40}))
    mixed_rounds = mixed.run(progress=False).rounds
    typical_rounds = ActiveLearningLoop(LoopConfig(strategy="typicality", **base)).run(progress=False).rounds
    # rounds trained on 20 and 30 labels acquire by typicality, those on 40 and 50 by BALD
    assert [(r.n_labelled, r.strategy) for r in mixed_rounds] == [
        (20, "typicality"), (30, "typicality"), (40, "bald"), (50, "bald"), (60, None)]
    # the cold-start rounds pick exactly what a typicality run picks (same seed, same labels)
    assert [r.acquired for r in mixed_rounds[:2]] == [r.acquired for r in typical_rounds[:2]]
    assert mixed_rounds[2].acquired != typical_rounds[2].acquired


@pytest.mark.parametrize("options, message", [
    (dict(cold_start_labels=30), r"cold_start_labels \(--cold-start-labels\) needs a cold_start strategy"),
    (dict(cold_start=3), "cold_start must be a strategy name or None, got int"),
    (dict(cold_start="typicallity", cold_start_labels=30), r"cold_start \(--cold-start\): unknown strategy 'typicallity' \(did you mean 'typicality'"),
    (dict(cold_start="random", cold_start_labels=-1), r"cold_start_labels \(--cold-start-labels\) must be >= 1"),
    # at or below the initial labels the cold-start strategy would never acquire
    (dict(cold_start="typicality", cold_start_labels=20), r"must be larger than initial_size \(20\)"),
])
def test_cold_start_settings_are_checked(options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        ActiveLearningLoop(LoopConfig(strategy="bald", **{**FAST_LOOP, **options}))


def test_the_default_cold_start_is_typicality_for_six_labels_per_class():
    from activebayes.records import COLD_START_LABELS_PER_CLASS

    default = LoopConfig()
    assert (default.strategy, default.cold_start, default.cold_start_labels) == ("badge", "typicality", None)
    base = {k: v for k, v in FAST_LOOP.items() if k != "cold_start"}
    loop = ActiveLearningLoop(LoopConfig(**base))
    assert loop.cold_start_labels == COLD_START_LABELS_PER_CLASS * loop.dataset.num_classes == 60
    assert ActiveLearningLoop(LoopConfig(**{**base, "cold_start_labels": 30})).cold_start_labels == 30
    assert ActiveLearningLoop(LoopConfig(**{**base, "cold_start": "none"})).cold_start_labels == 0
    # initial labels already past the default count: no cold start and no error (unlike an explicit count)
    late = ActiveLearningLoop(LoopConfig(**{**base, "initial_size": 60, "budget": 70}))
    assert late.propose().strategy == "badge"


def test_configs_written_before_the_cold_start_resume_without_one():
    stored = LoopConfig(**FAST_LOOP).to_dict()
    del stored["cold_start"], stored["cold_start_labels"]
    assert LoopConfig.from_stored(stored).cold_start is None
    # last release wrote "none" as cold_start=None, cold_start_labels=0
    assert LoopConfig.from_stored({**stored, "cold_start": None, "cold_start_labels": 0}).same_run(
        LoopConfig(**FAST_LOOP))
    assert LoopConfig.from_dict(stored).cold_start == "typicality"  # a new config gets the default


def test_typicality_on_an_ensemble_clusters_its_first_members_features():
    config = LoopConfig(strategy="typicality", ensemble_size=2, **FAST_LOOP)
    loop = ActiveLearningLoop(config)
    proposal = loop.propose()  # picks are not committed: the pool is as the round saw it
    candidates_N, labelled_L = loop.pool.unlabelled_indices, loop.pool.labelled_indices
    member = loop.model.members[0]
    expected = select(len(candidates_N), "typicality", 10,
                      features_N_D=penultimate_features(member, loop.dataset.inputs[candidates_N]),
                      labelled_features_L_D=penultimate_features(member, loop.dataset.inputs[labelled_L]),
                      generator=torch.Generator().manual_seed(derive_seed(0, "acquire", 0)), num_clusters=30)
    assert proposal.indices == candidates_N[expected.indices].tolist()


def test_feature_strategies_choose_among_a_seeded_subset_of_a_big_pool(monkeypatch):
    import activebayes.loop as loop_module

    seen = []
    real = loop_module.score_pool

    def spy(model, dataset, candidates_N, *args, **kwargs):
        seen.append(candidates_N.clone())
        return real(model, dataset, candidates_N, *args, **kwargs)

    monkeypatch.setattr(loop_module, "score_pool", spy)
    monkeypatch.setattr(loop_module, "_FEATURE_STRATEGY_ITEMS", 100)
    picks = []
    for strategy in ("typicality", "typicality", "bald"):
        loop = ActiveLearningLoop(LoopConfig(strategy=strategy, **FAST_LOOP))
        picks.append(loop.propose().indices)
    unlabelled = set(loop.pool.unlabelled_indices.tolist())
    typical, again, bald_candidates = seen
    assert len(typical) == 100 and set(typical.tolist()) <= unlabelled and torch.equal(typical, again)
    assert set(picks[0]) <= set(typical.tolist()) and picks[0] == picks[1]
    assert len(bald_candidates) == len(unlabelled)  # per-item scores stream over the whole pool


class _NoLinear(torch.nn.Module):
    """A classifier without an nn.Linear layer: nothing for penultimate_features to find."""

    def __init__(self, generator: torch.Generator) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 10, generator=generator) * 0.1)

    def forward(self, x):
        return torch.log_softmax(x.flatten(1) @ self.weight, dim=-1)


def test_a_model_without_features_gets_an_error_naming_the_cold_start():
    base = {k: v for k, v in FAST_LOOP.items() if k != "cold_start"}
    loop = ActiveLearningLoop(LoopConfig(**base), model_factory=_NoLinear)
    with pytest.raises(ValueError, match=r"the cold start \('typicality', cold_start / --cold-start\) reads "
                                         r"the model's features .* has no nn.Linear layer.*cold_start=None"):
        loop.propose()
    # the default strategy after it (BADGE) reads features too
    no_cold_start = ActiveLearningLoop(LoopConfig(**{**base, "cold_start": None}), model_factory=_NoLinear)
    with pytest.raises(ValueError, match=r"the strategy \('badge', strategy / --strategy\) reads the model's "
                                         r"features .* has no nn.Linear layer.*strategy='power_bald'"):
        no_cold_start.propose()
    plain = ActiveLearningLoop(LoopConfig(**{**base, "cold_start": None, "strategy": "power_bald"}),
                               model_factory=_NoLinear)
    assert len(plain.propose().indices) == 10
