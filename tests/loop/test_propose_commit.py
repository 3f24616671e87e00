"""One acquisition path: propose() -> Proposal, commit(indices, labels)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from activebayes.experiment import resume_experiment, run_experiment
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.records import Proposal, headline_accuracy, headline_metric
from activebayes.rundir import RunDirectory, RunDirectoryError
from tests.conftest import FAST_LOOP


def _strip(records):
    return [dataclasses.replace(r, seconds={}) for r in records]


def _manual_run(config: LoopConfig) -> ActiveLearningLoop:
    """The loop driven by hand: propose, read the dataset's labels, commit."""
    loop = ActiveLearningLoop(config)
    targets = loop.dataset.targets
    while True:
        proposal = loop.propose()
        if proposal.stopped:
            loop.finish(proposal)
            return loop
        loop.commit(proposal.indices, targets[proposal.indices])


@pytest.mark.parametrize("strategy", ["bald", "batchbald", "power_bald"])
def test_step_is_propose_plus_oracle_plus_commit(strategy):
    config = LoopConfig(strategy=strategy, **{**FAST_LOOP, "budget": 40})
    simulated = ActiveLearningLoop(config)
    simulated.run(progress=False)
    manual = _manual_run(config)
    assert _strip(manual.history) == _strip(simulated.history)
    assert manual.finished and manual.stop_reason == simulated.stop_reason


def test_on_phase_reports_each_phase_as_it_starts():
    loop = ActiveLearningLoop(LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 30}))
    seen: list[tuple[str, bool]] = []
    # the model of this round exists once fitting started; "acquire" comes after the fit
    proposal = loop.propose(on_phase=lambda name: seen.append((name, loop.model is not None)))
    assert [name for name, _ in seen] == ["fit", "evaluate", "signals", "acquire"] == list(proposal.seconds)
    assert seen[1][1] and seen[2][1]
    loop.commit(proposal.indices, loop.dataset.targets[proposal.indices])
    seen.clear()
    stopped = loop.propose(on_phase=lambda name: seen.append((name, True)))
    assert stopped.stop_reason is not None and [name for name, _ in seen] == ["fit", "evaluate", "signals"]


@pytest.mark.parametrize("strategy", ["bald", "batchbald", "power_entropy", "random"])
def test_the_batch_is_the_prefix_of_a_longer_ranking(strategy):
    config = LoopConfig(strategy=strategy, **FAST_LOOP)
    plain = ActiveLearningLoop(config).propose()
    ahead = ActiveLearningLoop(config).propose(lookahead=15)
    assert ahead.indices == plain.indices
    assert len(ahead.ranking) == len(plain.indices) + 15
    assert ahead.ranking[: len(ahead.indices)] == ahead.indices
    assert len(set(ahead.ranking)) == len(ahead.ranking)
    # the model's predictive for each ranked item: a distribution over the classes
    probs = torch.tensor(ahead.probs)
    assert probs.shape == (len(ahead.ranking), 10)
    assert torch.allclose(probs.sum(1), torch.ones(len(ahead.ranking)), atol=1e-5)


def test_commit_takes_any_unlabelled_items_and_keeps_their_scores():
    loop = ActiveLearningLoop(LoopConfig(strategy="bald", **FAST_LOOP))
    proposal = loop.propose(lookahead=5)
    outside = next(i for i in loop.pool.unlabelled_indices.tolist() if i not in proposal.ranking)
    chosen = [proposal.ranking[11], proposal.indices[0], outside]
    record = loop.commit(chosen, loop.dataset.targets[chosen])
    assert record.acquired == chosen
    assert record.scores[:2] == [proposal.ranking_scores[11], proposal.scores[0]]
    assert math.isnan(record.scores[2])
    assert loop.pool.n_labelled == 23 and loop.round == 1
    # the next round starts from these labels
    assert loop.propose().n_labelled == 23


def test_commit_rejects_bad_answers_and_changes_nothing():
    loop = ActiveLearningLoop(LoopConfig(strategy="bald", **FAST_LOOP))
    with pytest.raises(RuntimeError, match="propose"):
        loop.commit([0], [0])
    proposal = loop.propose()
    labelled = int(loop.pool.labelled_indices[0])
    with pytest.raises(ValueError):
        loop.commit([labelled], [0])
    with pytest.raises(ValueError, match="one label per index"):
        loop.commit(proposal.indices[:2], [1])
    with pytest.raises(ValueError):
        loop.commit(proposal.indices[:1], [10])  # 10 classes: 0..9
    assert loop.pool.n_labelled == 20 and loop.round == 0 and loop.pending == proposal
    stale = dataclasses.replace(proposal, round=3)
    with pytest.raises(ValueError, match="round 3"):
        loop.commit(proposal.indices, loop.dataset.targets[proposal.indices], proposal=stale)


def test_a_stored_proposal_commits_in_another_process(tmp_path):
    """The file round trip: propose + store (query), later commit from a fresh loop (import)."""
    config = LoopConfig(strategy="bald", **FAST_LOOP)
    direct = ActiveLearningLoop(config)
    proposal = direct.propose()
    expected = direct.commit(proposal.indices, direct.dataset.targets[proposal.indices])

    stored = Proposal.from_dict(json.loads(json.dumps(proposal.to_dict())))  # as the labelling store keeps it
    assert stored == proposal
    later = ActiveLearningLoop(config)  # nothing proposed in this process
    record = later.commit(stored.indices, later.dataset.targets[stored.indices], proposal=stored)
    assert dataclasses.replace(record, seconds={}) == dataclasses.replace(expected, seconds={})


def test_stopping_proposal_records_the_final_round():
    loop = ActiveLearningLoop(LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 30}))
    first = loop.propose()
    loop.commit(first.indices, loop.dataset.targets[first.indices])
    last = loop.propose()
    assert last.stop_reason.startswith("label budget") and last.indices == [] and last.stop_kind == "label_budget"
    assert not loop.finished and len(loop.history) == 1  # proposing has no side effects
    record = loop.finish(last)
    assert loop.finished and loop.history[-1] == record and record.stop_reason == last.stop_reason
    with pytest.raises(RuntimeError, match="stopped"):
        loop.propose()


def test_runtime_settings_are_not_part_of_a_runs_identity(tmp_path):
    config = LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 40})
    reference = run_experiment(config, tmp_path / "reference", progress=False, report=False)

    class Stop(Exception):
        pass

    def stop_after_first(record):
        raise Stop

    with pytest.raises(Stop):
        run_experiment(config, tmp_path / "moved", progress=False, report=False, on_round=stop_after_first)
    # resumed with another device spelling and prediction batch size: the same picks,
    # metrics equal up to float rounding (batched matmuls sum in another order)
    resumed = resume_experiment(tmp_path / "moved", progress=False, report=False,
                                runtime={"device": "cpu", "predict_batch_size": 7})
    assert [(r.acquired, r.labels) for r in resumed.rounds] == [(r.acquired, r.labels) for r in reference.rounds]
    for got, want in zip(resumed.rounds, reference.rounds, strict=True):
        assert got.scores == pytest.approx(want.scores, rel=1e-6)
        assert got.metrics["test_accuracy"] == want.metrics["test_accuracy"]
        assert got.metrics["test_nll"] == pytest.approx(want.metrics["test_nll"], rel=1e-6)
    # run_experiment on the same directory with only a runtime change is the same run
    again = run_experiment(config.replace(device="cpu"), tmp_path / "moved", progress=False, report=False)
    assert _strip(again.rounds) == _strip(resumed.rounds)
    with pytest.raises(RunDirectoryError, match="strategy"):
        run_experiment(config.replace(strategy="entropy"), tmp_path / "moved", progress=False, report=False)
    with pytest.raises(ValueError, match="runtime settings"):
        resume_experiment(tmp_path / "moved", progress=False, report=False, runtime={"seed": 3})


def test_headline_metric_is_test_accuracy_when_there_is_one():
    assert headline_metric({"validation_accuracy": 0.5, "test_accuracy": 0.7}) == "test_accuracy"
    assert headline_metric({"validation_accuracy": 0.5}) == "validation_accuracy"
    assert headline_accuracy({"validation_accuracy": 0.5}) == 0.5
    assert headline_accuracy({}) is None
