from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from activebayes.loop import ActiveLearningLoop, LoopConfig, Plateau, RoundRecord, TargetAccuracy
from activebayes.stopping import PLATEAU, TARGET
from tests.conftest import FAST_LOOP


def _strip(records):
    """Records without wall-clock timings (the only field allowed to differ between runs)."""
    return [dataclasses.replace(r, seconds={}) for r in records]


@pytest.fixture(scope="module")
def bald_run():
    loop = ActiveLearningLoop(LoopConfig(strategy="bald", **FAST_LOOP))
    return loop, loop.run(progress=False)


def test_loop_bookkeeping(bald_run):
    loop, result = bald_run
    pool = loop.pool
    assert [r.n_labelled for r in result.rounds] == [20, 30, 40, 50]
    assert result.stop_reason.startswith("label budget")
    seen: set[int] = set()
    initial = set(pool.labelled_indices.tolist()) - {i for r in result.rounds for i in r.acquired}
    assert len(initial) == 20
    validation = set(pool.validation_indices.tolist())
    for record in result.rounds[:-1]:
        assert len(record.acquired) == 10 == len(set(record.acquired)) == len(record.scores)
        assert not (set(record.acquired) & (seen | initial | validation))
        seen |= set(record.acquired)
        # simulated oracle: labels are the dataset's
        assert record.labels == loop.dataset.targets[record.acquired].tolist()
        assert sum(record.class_counts) == record.n_labelled
        # BALD scores come in pick order (top-k: non-increasing)
        assert all(a >= b - 1e-9 for a, b in zip(record.scores, record.scores[1:]))
    assert result.rounds[-1].acquired == []
    assert set(pool.labelled_indices.tolist()) == initial | seen
    assert not (set(pool.unlabelled_indices.tolist()) & (initial | seen | validation))
    last = result.rounds[-1].metrics
    assert 0.5 < last["test_accuracy"] <= 1.0
    assert 0.0 <= last["test_ece"] <= 1.0 and last["test_nll"] > 0


def test_bald_picks_are_bald_top_k_of_the_pool(bald_run):
    """Round 1's picks equal an independent BALD top-k over the whole unlabelled pool."""
    from activebayes.acquisition import bald
    from activebayes.models import predict_log_probs
    from activebayes._seeding import make_generator

    loop, result = bald_run
    config = loop.config
    # rebuild round 0's model exactly as the loop did and score the pool by hand
    replay = ActiveLearningLoop(config)
    replay.step()
    candidates = torch.tensor(sorted(set(replay.pool.unlabelled_indices.tolist()) | set(result.rounds[0].acquired)))
    log_probs = predict_log_probs(replay.model, loop.dataset.inputs[candidates], config.num_samples,
                                  generator=make_generator(config.seed, 0, "pool"))
    top = candidates[bald(log_probs).argsort(descending=True)[:10]]
    assert sorted(top.tolist()) == sorted(result.rounds[0].acquired)


def test_same_seed_same_run_and_other_seed_differs(bald_run):
    _, first = bald_run
    again = ActiveLearningLoop(LoopConfig(strategy="bald", **FAST_LOOP)).run(progress=False)
    assert _strip(again.rounds) == _strip(first.rounds)
    other = ActiveLearningLoop(LoopConfig(strategy="bald", seed=1, **FAST_LOOP)).run(progress=False)
    assert other.rounds[0].acquired != first.rounds[0].acquired


def test_random_strategy_and_uneven_budget():
    config = LoopConfig(strategy="random", **{**FAST_LOOP, "budget": 45})
    result = ActiveLearningLoop(config).run(progress=False)
    assert [r.n_labelled for r in result.rounds] == [20, 30, 40, 45]
    assert len(result.rounds[-2].acquired) == 5


def test_batchbald_ensemble_warm_start_and_subsample():
    config = LoopConfig(strategy="batchbald", ensemble_size=2, warm_start=True, pool_subsample=200,
                        **{**FAST_LOOP, "budget": 40})
    result = ActiveLearningLoop(config).run(progress=False)
    assert [r.n_labelled for r in result.rounds] == [20, 30, 40]
    assert all(len(set(r.acquired)) == len(r.acquired) for r in result.rounds)


def test_cost_budget_is_never_exceeded():
    n = 1297
    costs = torch.linspace(1.0, 3.0, n, dtype=torch.float64)
    config = LoopConfig(strategy="entropy", cost_budget=25.0, **{**FAST_LOOP, "budget": 200})
    loop = ActiveLearningLoop(config, costs_N=costs)
    result = loop.run(progress=False)
    spent = sum(float(costs[r.acquired].sum()) for r in result.rounds)
    assert spent <= 25.0 + 1e-9
    assert result.rounds[-1].cost_spent == pytest.approx(spent)
    assert "cost budget" in result.stop_reason


def test_target_accuracy_stops_early():
    config = LoopConfig(strategy="random", target_accuracy=0.05, **FAST_LOOP)
    result = ActiveLearningLoop(config).run(progress=False)
    assert len(result.rounds) == 1 and "target" in result.stop_reason
    assert result.rounds[-1].stop_kind == TARGET


def _record(r: int, acc: float) -> RoundRecord:
    return RoundRecord(r, 10 * r, [], [], [], {"validation_accuracy": acc, "test_accuracy": acc}, [], 0.0, {}, {})


def test_stopping_criteria_on_synthetic_histories():
    plateau = Plateau(patience=2, min_delta=0.01)
    rising = [_record(i, a) for i, a in enumerate([0.5, 0.6, 0.7, 0.8])]
    flat = [_record(i, a) for i, a in enumerate([0.5, 0.8, 0.805, 0.79])]
    assert plateau(rising, n_labelled=0, cost_spent=0) is None
    assert plateau(flat, n_labelled=0, cost_spent=0).kind == PLATEAU
    assert TargetAccuracy(0.8)(rising, n_labelled=0, cost_spent=0).kind == TARGET
    assert TargetAccuracy(0.81)(rising, n_labelled=0, cost_spent=0) is None


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"budget": 20}, "budget must be larger than initial_size"),
        ({"budget": 25, "batch_size": 30}, "budget must be at least batch_size"),
        ({"batch_size": 0}, r"batch_size \(--batch-size\) must be >= 1, got 0"),
        ({"num_samples": -1}, r"num_samples \(--num-samples\) must be >= 1, got -1"),
        ({"eval_samples": 0}, r"eval_samples \(--eval-samples\) must be >= 1, got 0"),
        ({"initial": "lots"}, "unknown initial"),
        ({"target_accuracy": 1.5}, "target_accuracy"),
        # a NaN never fired; it was refused only when the loop was built, as Plateau's 'min_delta'
        ({"plateau_patience": 2, "plateau_min_delta": float("nan")}, r"^plateau_min_delta must be a finite number >= 0"),
        ({"ensemble_size": 1}, r"ensemble_size \(--ensemble-size\) must be >= 2, got 1"),
        ({"pool_subsample": 5, "batch_size": 10},
         r"^pool_subsample \(--pool-subsample\) must be at least batch_size \(--batch-size\): each round picks its "
         r"batch from the subsample; got pool_subsample=5 and batch_size=10$"),
    ],
)
def test_config_errors(changes, match):
    with pytest.raises(ValueError, match=match):
        LoopConfig(**{**FAST_LOOP, **changes})


def test_unknown_strategy_fails_before_any_work():
    with pytest.raises(ValueError, match="unknown .*strategy"):
        ActiveLearningLoop(LoopConfig(strategy="telepathy", **FAST_LOOP))


def test_one_function_sample_is_refused_for_a_strategy_that_scores_disagreement(tmp_path):
    # K = 1: every BALD score is 0; the loop would fit a model, then pick the pool's first items
    from activebayes.cli import main

    with pytest.raises(ValueError, match=r"^num_samples \(--num-samples\) must be >= 2 for strategy 'bald', which "):
        ActiveLearningLoop(LoopConfig(**{**FAST_LOOP, "strategy": "bald", "num_samples": 1}))
    ActiveLearningLoop(LoopConfig(**{**FAST_LOOP, "strategy": "entropy", "num_samples": 1}))  # the mean of one
    assert main(["run", "--strategy", "batchbald", "--num-samples", "1", "--out", str(tmp_path / "run"),
                 "--quiet"]) == 1  # the CLI's one-line error for a bad value
    assert not (tmp_path / "run").exists()


def test_config_round_trip_and_unknown_key():
    config = LoopConfig(strategy="bald", **FAST_LOOP)
    assert LoopConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match=r"unknown config key\(s\) 'bugdet' \(did you mean 'budget'\?\); expected"):
        LoopConfig.from_dict({**config.to_dict(), "bugdet": 3})


def test_pool_and_evaluation_use_their_own_sample_counts(monkeypatch):
    """num_samples is K for scoring the pool, eval_samples K for validation / test."""
    import activebayes.models.predict as predict_module
    import activebayes.scoring as scoring_module

    calls: list[tuple[str, int, int]] = []
    real = predict_module.predict_log_probs

    def spy(where):
        def predict(model, inputs, num_samples=None, **kwargs):
            out = real(model, inputs, num_samples, **kwargs)
            calls.append((where, inputs.shape[0], out.shape[1]))
            return out
        return predict

    monkeypatch.setattr(predict_module, "predict_log_probs", spy("loop"))  # the posterior's log_probs
    monkeypatch.setattr(scoring_module, "predict_log_probs", spy("pool"))
    config = LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 30, "num_samples": 7, "eval_samples": 3,
                                            "stop_set_size": 0})
    loop = ActiveLearningLoop(config)
    loop.run(progress=False)
    n_validation, n_test = 50, len(loop.test.inputs)
    n_pool_first = len(loop.dataset.inputs) - n_validation - 20
    assert calls[:2] == [("loop", n_validation, 3), ("loop", n_test, 3)]
    pool_calls = [(n, k) for where, n, k in calls if where == "pool"]
    assert pool_calls and {k for _, k in pool_calls} == {7}
    assert sum(n for n, _ in pool_calls) == n_pool_first  # round 0 scores the whole unlabelled pool once
    assert {k for where, _, k in calls if where == "loop"} == {3}


def test_random_runs_do_not_depend_on_the_pool_sample_count():
    """Random acquisition never scores the pool: K for the pool changes nothing."""
    a = ActiveLearningLoop(LoopConfig(strategy="random", **FAST_LOOP)).run(progress=False)
    b = ActiveLearningLoop(LoopConfig(strategy="random", **{**FAST_LOOP, "num_samples": 9})).run(progress=False)
    assert _strip(a.rounds) == _strip(b.rounds)


def test_configs_stored_before_eval_samples_evaluate_with_num_samples():
    stored = LoopConfig(strategy="bald", **FAST_LOOP).to_dict()
    del stored["eval_samples"]
    stored["num_samples"] = 6
    assert LoopConfig.from_stored(stored).eval_samples == 6
    assert LoopConfig.from_dict(stored).eval_samples == 20  # a new config takes the default


def test_users_own_model_through_the_converter():
    """A plain nn.Module with nn.Dropout, made consistent by mc_dropout, plugs into the loop."""
    from torch import nn

    from activebayes.models import ConsistentMCDropout, mc_dropout

    def factory(generator: torch.Generator) -> nn.Module:
        # default initialisers draw from the global RNG, which the loop seeds per round
        net = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 10))
        return mc_dropout(net)

    config = LoopConfig(strategy="bald", **{**FAST_LOOP, "budget": 40})
    loop = ActiveLearningLoop(config, model_factory=factory)
    result = loop.run(progress=False)
    assert [r.n_labelled for r in result.rounds] == [20, 30, 40]
    again = ActiveLearningLoop(config, model_factory=factory).run(progress=False)
    assert _strip(again.rounds) == _strip(result.rounds)  # reproducible without seeding by hand
    assert any(isinstance(m, ConsistentMCDropout) for m in loop.model.modules())
    assert result.rounds[-1].metrics["test_accuracy"] > 0.5


def test_a_network_on_the_meta_device_is_named_not_a_torch_error():
    """A network built under ``torch.device("meta")`` has shapes but no values: it failed deep in
    the first prediction with torch's "Tensor.item() cannot be called on meta tensors"."""
    from torch import nn

    from activebayes.errors import InvalidArgumentError
    from activebayes.models import NetworkPosterior

    def factory(generator: torch.Generator) -> nn.Module:
        with torch.device("meta"):
            return nn.Sequential(nn.Flatten(), nn.Linear(64, 10))

    loop = ActiveLearningLoop(LoopConfig(strategy="bald", **FAST_LOOP), model_factory=factory)
    with pytest.raises(InvalidArgumentError, match=r"^the network model_factory returned: 2 parameter\(s\) or "
                                                   r"buffer\(s\) are on the 'meta' device.*\(1\.weight, 1\.bias\): "
                                                   r"materialise them first"):
        loop.run(progress=False)
    with pytest.raises(InvalidArgumentError, match=r"^module: 2 parameter\(s\)"):
        NetworkPosterior(factory(torch.Generator()))
    NetworkPosterior(factory(torch.Generator()).to_empty(device="cpu"))  # materialised: accepted


def test_wrong_model_options_are_named_when_the_loop_is_built(tmp_path):
    """They failed in the first round (a TypeError from the model's constructor), after the run
    directory was written, so the corrected command met "a different config"."""
    from activebayes.errors import InvalidArgumentError
    from activebayes.experiment import run_experiment

    for options, said in (({"foo": 1}, "unexpected keyword argument 'foo'"),
                          ({"hidden": "x"}, "hidden must be an int (one hidden layer) or a sequence of ints (one "
                                            "per hidden layer), got str 'x'")):
        config = LoopConfig(**{**FAST_LOOP, "model_options": options})
        with pytest.raises(InvalidArgumentError, match=rf"^model_options {options!r} do not fit model 'auto': .*"
                                                       rf"{re.escape(said)}"):
            ActiveLearningLoop(config)
        with pytest.raises(InvalidArgumentError):
            run_experiment(config, tmp_path / "run", progress=False, report=False)
        assert not (tmp_path / "run").exists()
    state = torch.random.get_rng_state()
    ActiveLearningLoop(LoopConfig(**{**FAST_LOOP, "model_options": {"hidden": [16]}}))  # fine, and the
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG is left as it was
