"""The loop with --posterior ensemble / laplace: fits the posterior, records it, and is reproducible."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from activebayes.errors import InvalidArgumentError
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.models import Ensemble, LastLayerLaplace


def _config(posterior: str, strategy: str = "badge") -> LoopConfig:
    return LoopConfig(dataset="digits", posterior=posterior, strategy=strategy, cold_start=None, budget=40,
                      initial_size=20, batch_size=10, validation_size=50, num_samples=8, eval_samples=4,
                      ensemble_size=3 if posterior == "ensemble" else None,
                      fit_options={"max_epochs": 2, "min_samples_per_epoch": 256})


@pytest.mark.parametrize("posterior", ["ensemble", "laplace"])
def test_the_loop_runs_each_posterior_reproducibly(posterior):
    runs = [ActiveLearningLoop(_config(posterior)).run(progress=False) for _ in range(2)]
    first, second = runs
    assert [r.acquired for r in first.rounds] == [r.acquired for r in second.rounds]
    assert first.rounds[-1].n_labelled == 40 and len(first.rounds[0].acquired) == 10
    loop = ActiveLearningLoop(_config(posterior))
    loop.step()
    if posterior == "laplace":
        assert isinstance(loop.model, LastLayerLaplace)
        assert loop.history[0].fit["laplace_prior_precision"] > 0
    else:
        assert isinstance(loop.model, Ensemble) and len(loop.model) == 3


def test_posterior_is_checked_and_offered_by_the_cli():
    with pytest.raises(InvalidArgumentError, match=r"posterior \(--posterior\)"):
        LoopConfig(posterior="swag")
    assert LoopConfig.from_dict({"dataset": "digits"}).posterior == "mc_dropout"  # older configs
    from activebayes.cli import cli

    for command in ("run", "compare"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert "--posterior [mc_dropout|ensemble|laplace]" in result.output


@pytest.mark.parametrize("posterior", ["ensemble", "laplace"])
def test_heads_on_the_self_supervised_representation_share_its_frozen_encoder(posterior, tmp_path, monkeypatch):
    monkeypatch.setenv("ACTIVEBAYES_CACHE_DIR", str(tmp_path))
    config = _config(posterior, strategy="bald").replace(
        representation="self-supervised", model="encoder_head", budget=30,
        representation_options={"epochs": 1, "width": 4, "feature_dim": 8, "projection_dim": 4, "batch_size": 64})
    loop = ActiveLearningLoop(config)
    loop.step()
    first = loop.model
    loop.step()
    encoders = {id(m) for m in loop.model.modules() if type(m).__name__ == "FrozenEncoder"}
    assert encoders == {id(m) for m in first.modules() if type(m).__name__ == "FrozenEncoder"}
    assert len(encoders) == 1  # one encoder for every member and every round: the pool is encoded once
    frozen = next(m for m in loop.model.modules() if type(m).__name__ == "FrozenEncoder")
    assert not any(p.requires_grad for p in frozen.parameters())
    torch.testing.assert_close(frozen.encoder.state_dict()["net.0.weight"],
                               loop.representation.encoder.state_dict()["net.0.weight"])  # not trained by fit


def test_a_laplace_head_is_evaluated_with_its_probit_predictive():
    from sklearn.metrics import accuracy_score

    from activebayes.models.laplace import probit_predictive

    loop = ActiveLearningLoop(_config("laplace"))
    proposal = loop.propose()
    probs_N_C = probit_predictive(loop.model, loop.test.inputs)
    want = accuracy_score(loop.test.targets.numpy(), probs_N_C.argmax(-1).numpy())
    assert proposal.metrics["test_accuracy"] == pytest.approx(want)
    # not what 4 sampled functions give (the old evaluation)
    sampled = loop._predict(loop.test.inputs, key="test", num_samples=4).exp().mean(1)
    assert not torch.allclose(sampled, probs_N_C, atol=1e-3)
