"""A misspelt fit option or a model of the wrong shape fails with one line naming it, before a run starts."""

from __future__ import annotations

import pytest
import torch
from sklearn.datasets import make_moons
from torch import nn

from activebayes.cli import main
from activebayes.data import from_arrays
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.loop import ActiveLearningLoop
from activebayes.models import ConsistentMCDropout
from activebayes.records import LoopConfig


def test_a_misspelt_fit_option_in_a_toml_config_fails_before_the_run_directory_is_written(tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text("budget = 40\n[fit_options]\nmax_epoch = 3\n")
    out = tmp_path / "runs"
    assert main(["run", "--config", str(config), "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "fit_options (--config [fit_options]) has unknown key 'max_epoch' (did you mean 'max_epochs'?)" in err
    assert not out.exists()


@pytest.mark.parametrize("command", ["run", "compare"])
def test_an_unknown_key_in_a_toml_config_names_the_file_and_the_close_key(tmp_path, capsys, command):
    config = tmp_path / "bad.toml"
    config.write_text("budgett = 3\nzzz = 1\n")
    out = tmp_path / "runs"
    assert main([command, "--config", str(config), "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: --config {config}: unknown config key(s) 'budgett' (did you mean 'budget'?), "
                          "'zzz'; expected some of: ") and err.count("\n") == 1, err
    assert not out.exists()


def test_a_misspelt_fit_option_fails_when_the_loop_is_built():
    with pytest.raises(InvalidArgumentError, match=r"^fit_options \(--config \[fit_options\]\) has unknown key "
                                                   r"'max_epoch' \(did you mean 'max_epochs'\?\); expected keys "
                                                   r"of activebayes.models.fit: .*max_epochs"):
        ActiveLearningLoop(LoopConfig(fit_options={"max_epoch": 3}))


def test_fit_options_cannot_set_what_the_loop_passes():
    with pytest.raises(InvalidArgumentError, match=r"^fit_options \(--config \[fit_options\]\) cannot set "
                                                   r"'generator': the loop passes device, generator, multilabel "
                                                   r"and validation itself"):
        ActiveLearningLoop(LoopConfig(fit_options={"generator": 3}))


class TwoD(nn.Module):
    def __init__(self, mistake: str | None = None) -> None:
        super().__init__()
        self.mistake = mistake
        self.body = nn.Sequential(nn.Linear(5 if mistake == "width" else 2, 16), nn.ReLU(),
                                  ConsistentMCDropout(0.1))
        self.head = nn.Linear(16, {"one_output": 1, "three_outputs": 3}.get(mistake, 2))

    def forward(self, x):
        logits = self.head(self.body(x))
        return (logits, logits) if self.mistake == "tuple" else logits


def _moons_loop(mistake: str | None, **config) -> ActiveLearningLoop:
    x, y = make_moons(200, noise=0.1, random_state=0)
    settings = dict(budget=30, initial_size=10, validation_size=20, batch_size=10, cold_start=None,
                    stop_set_size=0, evaluate_test=False)
    return ActiveLearningLoop(LoopConfig(**{**settings, **config}), dataset=from_arrays(x, y),
                              model_factory=lambda g: TwoD(mistake))


@pytest.mark.parametrize(("mistake", "error", "message"), [
    ("one_output", InvalidArgumentError, r"^train targets hold class id 1, but the model returns logits for C = 1 "
                                         r"classes \(shape \[10, 1\]\): the model's last layer needs at least "
                                         r"2 outputs, one per class \(C = 2\)$"),
    ("tuple", InvalidTypeError, r"^model must return logits \[n, C\] \(a tensor\), got tuple$"),
    ("width", InvalidArgumentError, r"^the model cannot read inputs of shape \[10, 2\] \(one item: \(2,\)\): "
                                    r"mat1 and mat2 shapes cannot be multiplied \(10x2 and 5x16\)$"),
    # more outputs than classes trained, then failed in the metrics naming neither the model nor the factory
    ("three_outputs", InvalidArgumentError, r"^model_factory's model returns logits for C = 3 classes, but "
                                            r"dataset '.*' has 2: its last layer needs 2 outputs, one per class$"),
])
def test_a_user_model_of_the_wrong_shape_is_named_in_the_first_round(mistake, error, message):
    loop = _moons_loop(mistake)
    with pytest.raises(error, match=message):
        loop.step()


def test_a_user_network_gets_the_fit_options_checked_when_built():
    loop = _moons_loop(None, fit_options={"max_epoch": 3})  # the factory might return its own Posterior
    with pytest.raises(InvalidArgumentError, match=r"^fit_options has unknown key 'max_epoch' \(did you mean "
                                                   r"'max_epochs'\?\)"):
        loop.step()
    assert _moons_loop(None, fit_options={"max_epochs": 2}).step().fit["epochs_run"] <= 2


class _SkipNet(nn.Module):
    """A skip connection around the dropout: the batched MC path cannot run it."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(2, 16), nn.Linear(16, 2)
        self.d = ConsistentMCDropout(0.2)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return self.b(self.d(h) + h)


def test_a_network_the_batched_path_cannot_run_samples_sequentially_in_the_loop():
    from activebayes.models import as_posterior, predict_log_probs
    from activebayes.models.predict import BatchedSamplingError

    x, y = make_moons(n_samples=120, noise=0.2, random_state=0)
    data = from_arrays(x.astype("float32"), y)
    config = LoopConfig(strategy="bald", cold_start=None, initial_size=10, validation_size=20, batch_size=5,
                        budget=20, num_samples=6, eval_samples=4, evaluate_test=False, fit_options={"max_epochs": 3})
    with pytest.raises(BatchedSamplingError, match=r"as_posterior\(model, sampling='sequential'\)"):
        ActiveLearningLoop(config, dataset=data, model_factory=lambda g: _SkipNet()).run(progress=False)
    loop = ActiveLearningLoop(config, dataset=data,
                              model_factory=lambda g: as_posterior(_SkipNet(), sampling="sequential"))
    result = loop.run(progress=False)
    assert result.rounds[-1].n_labelled == 20
    # the config's training reached the network, and its samples are the sequential path's
    assert loop.posterior.fit_options == {"max_epochs": 3} and loop.posterior.sampling == "sequential"
    expected = predict_log_probs(loop.posterior.module, data.inputs[:7], 6, sampling="sequential",
                                 generator=torch.Generator().manual_seed(3))
    got = loop.posterior.log_probs(data.inputs[:7], num_samples=6, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(got, expected)
    with pytest.raises(InvalidArgumentError, match="sampling"):
        as_posterior(_SkipNet(), sampling="parallel")


@pytest.mark.parametrize("options, message", [
    ({"max_epochs": 0}, r"^fit_options \(--config \[fit_options\]\): max_epochs must be"),
    ({"lr": -1.0}, r"^fit_options \(--config \[fit_options\]\): lr must be a number >= 0, got -1.0"),
    ({"optimizer": "adamw"}, r"^fit_options \(--config \[fit_options\]\): .*optimizer"),
])
def test_a_bad_fit_option_value_fails_when_the_loop_is_built(options, message):
    with pytest.raises(InvalidArgumentError, match=message):
        ActiveLearningLoop(LoopConfig(fit_options=options))


def test_a_target_accuracy_with_nothing_to_measure_it_on_fails_when_the_loop_is_built():
    with pytest.raises(InvalidArgumentError, match=r"^target_accuracy \(--target-accuracy\) 0.9 is checked on the "
                                                   r"test set, else on the validation set, and this run has neither: "
                                                   r"evaluate_test=False \(--no-test\) and validation_size "
                                                   r"\(--validation-size\) 0; "):
        ActiveLearningLoop(LoopConfig(target_accuracy=0.9, evaluate_test=False, validation_size=0))
    x, y = make_moons(200, noise=0.1, random_state=0)  # data given from Python, without a test set
    with pytest.raises(InvalidArgumentError, match=r"this run has neither: no test set given and validation_size"):
        ActiveLearningLoop(LoopConfig(target_accuracy=0.9, validation_size=0, cold_start=None),
                           dataset=from_arrays(x, y))
    ActiveLearningLoop(LoopConfig(target_accuracy=0.9, evaluate_test=False))  # the validation accuracy's


def test_an_unknown_acquisition_option_fails_before_the_run_directory_is_written(tmp_path, capsys):
    """It failed when the strategy first acquired, after the cold start's rounds had been written."""
    config = tmp_path / "bad.toml"
    config.write_text('strategy = "power_bald"\nbudget = 50\ninitial_size = 20\nvalidation_size = 50\n'
                      'num_samples = 4\neval_samples = 4\nmean_samples = 4\ncold_start_labels = 30\n'
                      '[fit_options]\nmax_epochs = 2\n[acquisition_options]\nbetta = 2.0\n')
    out = tmp_path / "runs"
    assert main(["run", "--config", str(config), "--out", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert err == ("error: acquisition_options (--config [acquisition_options]): strategy 'power_bald' got an "
                   "unknown option 'betta'; its options are: beta, chunk_size, cost_aware\n"), err
    assert not out.exists()


def test_acquisition_options_are_checked_against_the_strategy_that_takes_them():
    from tests.conftest import multilabel_toy

    with pytest.raises(InvalidArgumentError, match=r"^acquisition_options \(--config \[acquisition_options\]\): "
                                                   r"strategy 'bald' got an unknown option 'beta'; its options "
                                                   r"are: chunk_size, cost_aware$"):
        ActiveLearningLoop(LoopConfig(strategy="bald", acquisition_options={"beta": 1.0}))
    # streamed BatchBALD's prefilter, and a deprecated name (renamed with a warning when it acquires)
    ActiveLearningLoop(LoopConfig(strategy="batchbald", acquisition_options={"prefilter": 50, "num_samples": 9}))
    # on a multi-label dataset batchbald is multilabel_batchbald, which has options of its own
    settings = dict(strategy="batchbald", cold_start=None, initial_size=10, validation_size=20, batch_size=5,
                    budget=30, evaluate_test=False)
    ActiveLearningLoop(LoopConfig(**settings, acquisition_options={"chunk_elements": 1000}), dataset=multilabel_toy())
    with pytest.raises(InvalidArgumentError, match=r"strategy 'multilabel_batchbald' got an unknown option 'dtype'"):
        ActiveLearningLoop(LoopConfig(**settings, acquisition_options={"dtype": "float64"}), dataset=multilabel_toy())


def test_a_comparison_checks_every_strategys_options_before_its_first_run(tmp_path):
    """An option the second strategy does not take failed when its turn came, after the first
    strategy's runs (minutes to hours); every strategy is checked before anything is written."""
    from activebayes.experiment import run_comparison

    out = tmp_path / "cmp"
    with pytest.raises(InvalidArgumentError, match=r"^acquisition_options \(--config \[acquisition_options\]\): "
                                                   r"strategy 'random' got an unknown option 'beta'; its options "
                                                   r"are: cost_aware$"):
        run_comparison(LoopConfig(acquisition_options={"beta": 2.0}), ["power_bald", "random"], [0], out)
    assert not out.exists()
    with pytest.raises(InvalidArgumentError, match=r"num_samples \(--num-samples\) must be >= 2 for strategy 'bald'"):
        run_comparison(LoopConfig(num_samples=1, strategy="random"), ["random", "bald"], [0], out)
    assert not out.exists()


@pytest.mark.parametrize("setting", [{"posterior": "laplace"}, {"ensemble_size": 3}, {"model": "mlp"},
                                     {"model_options": {"hidden": 8}}])
def test_model_settings_a_model_factory_replaces_are_warned_about(setting):
    """With a model_factory, posterior="laplace" (ensemble_size, model, model_options) did nothing without a word."""
    name, value = next(iter(setting.items()))
    with pytest.warns(UserWarning, match=rf"^model_factory builds the model, so the config's {name}=.* is not used: "
                                         r"have the factory return that posterior"):
        _moons_loop(None, **setting)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _moons_loop(None)  # the defaults: nothing to say


@pytest.mark.parametrize(("factory", "message"), [
    (lambda: TwoD(), r"^model_factory is called with 1 argument \(a torch.Generator -> a new nn.Module or "
                     r"Posterior\), but .*<lambda>\(\) cannot take it$"),
    (TwoD(), r"^model_factory must be a function \(a torch.Generator -> a new nn.Module or Posterior\), got the "
             r"network TwoD itself: the loop builds a fresh one each round, so pass lambda generator: TwoD\(\.\.\.\)$"),
    ("mlp", r"^model_factory must be a function \(a torch.Generator -> a new nn.Module or Posterior\), got str$"),
])
def test_a_model_factory_that_cannot_take_the_generator_is_named_when_the_loop_is_built(factory, message):
    """`model_factory=lambda: MyNet()` (or the network itself) was a raw TypeError in round 0's training."""
    x, y = make_moons(200, noise=0.1, random_state=0)
    with pytest.raises(InvalidTypeError, match=message):
        ActiveLearningLoop(LoopConfig(budget=30, initial_size=10, validation_size=20, batch_size=10, cold_start=None),
                           dataset=from_arrays(x, y), model_factory=factory)


class _NoFeatures:
    """A user's posterior (a network inside) whose features() is left unimplemented."""

    def __init__(self) -> None:
        from activebayes.models import as_posterior

        self._inner = as_posterior(TwoD(), max_epochs=2)

    module = property(lambda self: self._inner.module)
    num_functions = property(lambda self: self._inner.num_functions)

    def fit(self, train, **kwargs):
        return self._inner.fit(train, **kwargs)

    def log_probs(self, inputs, **kwargs):
        return self._inner.log_probs(inputs, **kwargs)

    def features(self, inputs, **kwargs):
        raise NotImplementedError


def test_a_posterior_without_features_is_named_when_badge_reads_them():
    """features() raising NotImplementedError (natural for a protocol) ended BADGE with a bare NotImplementedError."""
    x, y = make_moons(200, noise=0.1, random_state=0)
    loop = ActiveLearningLoop(LoopConfig(budget=30, initial_size=10, validation_size=20, batch_size=10, cold_start=None,
                                         strategy="badge", stop_set_size=0, evaluate_test=False),
                              dataset=from_arrays(x, y), model_factory=lambda g: _NoFeatures())
    with pytest.raises(InvalidArgumentError, match=r"_NoFeatures.features is not implemented \(it raised "
                                                       r"NotImplementedError\).*pick a strategy that needs only "
                                                       r"predictions"):
        loop.step()


def test_a_stopping_criterion_reading_a_metric_the_run_lacks_is_said_once():
    """Plateau(2, metric="val_accuracy") never fired and the run went on to its budget without a word."""
    import warnings

    from activebayes.stopping import Plateau, TargetAccuracy
    from tests.conftest import FAST_LOOP

    loop = ActiveLearningLoop(LoopConfig(strategy="random", **FAST_LOOP),
                              stopping=[Plateau(2, metric="val_accuracy"), TargetAccuracy(0.99, metric="test_accuracy")])
    with pytest.warns(UserWarning, match=r"^stopping criterion Plateau reads metric 'val_accuracy', which this run "
                                         r"does not record, so it can never fire; the run records: .*\bvalidation_accuracy\b") as seen:
        loop.step()
    assert len([w for w in seen if "can never fire" in str(w.message)]) == 1  # TargetAccuracy's metric is recorded
    assert seen[0].filename == __file__  # points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loop.step()  # once per run
