"""The loop on a GPU: each kind of round runs there end to end.

Skipped without CUDA; run on the GPU machine lent to the project (``pytest tests/loop/test_loop_devices.py``).
The acquisition functions' own device checks are in ``tests/acquisition/test_acq_devices.py``.
"""

from __future__ import annotations

import pytest
import torch

from activebayes.experiment import run_experiment
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.rundir import RunDirectory
from tests.conftest import FAST_LOOP, multilabel_toy

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ROUNDS = [
    # the default (typicality on the network's features, then BADGE), with every stopping signal
    dict(strategy="badge", cold_start="typicality", cold_start_labels=30, stop_set_size=200, audit_fraction=0.2),
    dict(strategy="batchbald", acquisition_options={"num_configurations": 500}),
    dict(strategy="epig"),
    dict(strategy="power_bald"),
    dict(strategy="bald", ensemble_size=3),
    dict(strategy="bald", pool_subsample=300, warm_start=True),
]


@pytest.mark.parametrize("settings", ROUNDS, ids=[s["strategy"] + str(i) for i, s in enumerate(ROUNDS)])
def test_a_digits_run_on_cuda_finishes_with_every_round_recorded(settings, tmp_path):
    config = LoopConfig(**{**FAST_LOOP, **settings, "device": "cuda", "seed": 1})
    run_experiment(config, tmp_path / "run", progress=False, report=False)
    rounds = RunDirectory(tmp_path / "run").read_rounds()
    assert rounds[-1].n_labelled == config.budget and rounds[-1].stop_reason is not None
    assert all(0.0 < r.metrics["test_accuracy"] <= 1.0 for r in rounds)


@pytest.mark.parametrize("strategy", ["multilabel_batchbald", "multilabel_badge", "multilabel_power_bald"])
def test_a_multilabel_run_on_cuda_finishes(strategy):
    data = multilabel_toy(n=240)
    train, test = data.subset(torch.arange(200)), data.subset(torch.arange(200, 240))
    config = LoopConfig(strategy=strategy, budget=26, initial_size=8, validation_size=30, batch_size=6,
                        num_samples=8, eval_samples=4, cold_start=None, fit_options={"max_epochs": 2},
                        device="cuda", seed=2)
    loop = ActiveLearningLoop(config, dataset=train, test=test)
    result = loop.run(progress=False)
    assert result.rounds[-1].n_labelled == 26 and "test_micro_f1" in result.rounds[-1].metrics
