"""LightningPosterior against the real lightning 2.x: consistency, picks equal to the native loop, errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

pl = pytest.importorskip("lightning.pytorch")

from activebayes.adapters import LightningPosterior  # noqa: E402
from activebayes.errors import InvalidArgumentError, InvalidTypeError  # noqa: E402
from activebayes.loop import ActiveLearningLoop, LoopConfig  # noqa: E402
from activebayes.models import ConsistentMCDropout, mc_dropout, mc_dropout_layers, predict_log_probs  # noqa: E402
from activebayes.models.dropout import BatchedSamplingError  # noqa: E402

from adapters_toy import determinism_settings, next_draws, seed_globals, toy_dataset  # noqa: E402


def make_net(d: int = 6, classes: int = 3) -> nn.Module:
    return nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, classes))


class Classifier(pl.LightningModule):
    def __init__(self, net: nn.Module, lr: float = 1e-2) -> None:
        super().__init__()
        self.net = net
        self.lr = lr

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict_step(self, batch, batch_idx):
        return self(batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def trainer(max_epochs: int = 2):
    return pl.Trainer(max_epochs=max_epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)


def test_trainer_predict_gives_consistent_samples_equal_to_the_scoring_module():
    torch.manual_seed(0)
    posterior = LightningPosterior(Classifier(make_net()), trainer)
    x_N_D = torch.randn(40, 6)
    log_probs_N_K_C = posterior.log_probs(x_N_D, num_samples=6, generator=3, batch_size=40)
    assert log_probs_N_K_C.shape == (40, 6, 3)
    # other batch sizes and orders: sample k is one function for every item
    order = torch.randperm(40, generator=torch.Generator().manual_seed(1))
    shuffled = posterior.log_probs(x_N_D[order], num_samples=6, generator=3, batch_size=7)
    torch.testing.assert_close(shuffled, log_probs_N_K_C[order], rtol=0, atol=1e-6)
    # the module the loop scores (score_pool) gives the same numbers
    native = predict_log_probs(posterior.module, x_N_D, 6, generator=3, batch_size=11)
    torch.testing.assert_close(native, log_probs_N_K_C, rtol=0, atol=1e-6)
    # an independent reference: sample k = the net with dropout mask k applied by hand
    layer = posterior.lightning_module.net[2]
    hidden_N_H = torch.relu(posterior.lightning_module.net[0](x_N_D))
    masks_K_H = layer.masks(range(6), hidden_N_H.shape[1:])
    reference = F.log_softmax(posterior.lightning_module.net[3](hidden_N_H[:, None] * masks_K_H), -1)
    torch.testing.assert_close(reference.detach(), log_probs_N_K_C, rtol=0, atol=1e-5)
    # the samples differ (dropout is sampled) and another seed gives other functions
    assert not torch.allclose(log_probs_N_K_C[:, 0], log_probs_N_K_C[:, 1])
    assert not torch.allclose(posterior.log_probs(x_N_D, num_samples=6, generator=4), log_probs_N_K_C)


def test_fit_is_seeded_and_trains():
    x_N_D, y_N = toy_dataset(60).inputs, toy_dataset(60).targets
    states = []
    for _ in range(2):
        torch.manual_seed(0)
        posterior = LightningPosterior(Classifier(make_net(), lr=0.1), lambda: trainer(5), batch_size=16)
        before = {k: v.clone() for k, v in posterior.lightning_module.state_dict().items()}
        summary = posterior.fit((x_N_D, y_N), generator=torch.Generator().manual_seed(7))
        states.append(posterior.lightning_module.state_dict())
    assert summary["epochs_run"] == 5 and summary["global_step"] == 5 * 4
    assert not torch.equal(before["net.0.weight"], states[0]["net.0.weight"])
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key
    accuracy = (posterior.log_probs(x_N_D, num_samples=8, generator=0).exp().mean(1).argmax(1) == y_N).float().mean()
    assert accuracy > 0.8


class _StopAtFirstBatch(pl.Callback):
    def on_train_batch_end(self, *args, **kwargs):
        raise RuntimeError("stopped by the test")


def test_fit_leaves_the_global_rngs_and_settings_as_they_were(keep_global_state):
    """fit seeds torch for dropout and a Trainer(deterministic=True) sets torch's deterministic flag and
    CUBLAS_WORKSPACE_CONFIG: fit restores them all, on an error too; its weights do not depend on them."""
    x_N_D, y_N = toy_dataset(60).inputs, toy_dataset(60).targets

    def deterministic_trainer(*callbacks):
        return pl.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                          enable_progress_bar=False, enable_model_summary=False, deterministic=True,
                          callbacks=list(callbacks))

    posteriors = []
    for factory in (deterministic_trainer, deterministic_trainer, lambda: deterministic_trainer(_StopAtFirstBatch())):
        torch.manual_seed(0)
        posteriors.append(LightningPosterior(Classifier(make_net(), lr=0.1), factory, batch_size=16))
    seed_globals(11)
    expected, settings = next_draws(), determinism_settings()
    seed_globals(11)
    posteriors[0].fit((x_N_D, y_N), generator=torch.Generator().manual_seed(3))
    assert next_draws() == expected
    assert determinism_settings() == settings
    seed_globals(11)
    with pytest.raises(RuntimeError, match="stopped by the test"):
        posteriors[2].fit((x_N_D, y_N), generator=torch.Generator().manual_seed(3))
    assert next_draws() == expected
    assert determinism_settings() == settings
    seed_globals(12)  # other global streams: the same fit
    posteriors[1].fit((x_N_D, y_N), generator=torch.Generator().manual_seed(3))
    for key, value in posteriors[0].lightning_module.state_dict().items():
        assert torch.equal(value, posteriors[1].lightning_module.state_dict()[key]), key


def test_loop_through_lightning_picks_what_the_native_loop_picks():
    """Training differs between Lightning and activebayes' fit, so both keep the factory's
    weights (SGD with lr=0 through each trainer): then every round's picks must be identical."""
    dataset = toy_dataset(160)
    config = LoopConfig(strategy="bald", initial_size=12, validation_size=20, batch_size=8, budget=36,
                        num_samples=8, eval_samples=4, evaluate_test=False, cold_start=None, seed=5,
                        fit_options={"max_epochs": 1, "lr": 0.0, "weight_decay": 0.0, "optimizer": "sgd",
                                     "min_samples_per_epoch": 1})

    def native_factory(generator):
        torch.manual_seed(int(torch.randint(0, 2**31, (), generator=generator)))
        return mc_dropout(make_net())

    def lightning_factory(generator):
        torch.manual_seed(int(torch.randint(0, 2**31, (), generator=generator)))
        return LightningPosterior(Classifier(make_net(), lr=0.0), lambda: trainer(1))

    native = ActiveLearningLoop(config, dataset=dataset, model_factory=native_factory).run(progress=False)
    loop = ActiveLearningLoop(config, dataset=dataset, model_factory=lightning_factory)
    adapted = loop.run(progress=False)
    assert isinstance(loop.posterior, LightningPosterior)
    assert len(adapted.rounds) == len(native.rounds) >= 4
    assert [r.acquired for r in adapted.rounds] == [r.acquired for r in native.rounds]
    assert [r.metrics["validation_accuracy"] for r in adapted.rounds] == [
        r.metrics["validation_accuracy"] for r in native.rounds]
    assert adapted.rounds[1].fit["global_step"] >= 1  # the Lightning trainer did run


class NoPredictStep(Classifier):
    predict_step = pl.LightningModule.predict_step


def test_bad_modules_give_one_line_errors():
    with pytest.raises(InvalidArgumentError, match=r"no predict_step: define predict_step\(self, batch, batch_idx\)"):
        LightningPosterior(NoPredictStep(make_net()), trainer)
    no_dropout = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    with pytest.raises(InvalidArgumentError, match=r"no dropout layer with p > 0: add an nn.Dropout") as error:
        LightningPosterior(Classifier(no_dropout), trainer)
    assert "\n" not in str(error.value)
    with pytest.raises(InvalidTypeError, match="module must be a lightning.pytorch.LightningModule"):
        LightningPosterior(make_net(), trainer)
    with pytest.raises(InvalidTypeError, match="trainer_factory must return a lightning.pytorch.Trainer"):
        LightningPosterior(Classifier(make_net()), lambda: "trainer").log_probs(torch.randn(2, 6), num_samples=2)


def test_fit_with_no_labels_trains_nothing():
    from activebayes.models.posterior import NO_LABELS

    module = Classifier(make_net())
    before = [p.detach().clone() for p in module.parameters()]
    posterior = LightningPosterior(module, trainer)
    assert posterior.fit((torch.zeros(0, 6), torch.zeros(0, dtype=torch.long))) == NO_LABELS
    assert all(torch.equal(a, b) for a, b in zip(before, module.parameters()))


class NamedDropout(nn.Dropout):
    """An nn.Dropout subclass keeping its forward: converted like nn.Dropout."""


class OwnForwardDropout(nn.Dropout):
    def forward(self, input):
        return super().forward(input) * 1.0


def test_a_dropout_subclass_keeping_forward_is_sampled():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), NamedDropout(0.5), nn.Linear(16, 3))
    posterior = LightningPosterior(Classifier(net), trainer)
    assert type(posterior.lightning_module.net[2]) is ConsistentMCDropout and posterior.lightning_module.net[2].p == 0.5
    log_probs_N_K_C = posterior.log_probs(torch.randn(10, 6), num_samples=4, generator=0)
    assert not torch.allclose(log_probs_N_K_C[:, 0], log_probs_N_K_C[:, 1])  # not K identical samples


@pytest.mark.parametrize("layer", [OwnForwardDropout(0.5), nn.AlphaDropout(0.5), nn.FeatureAlphaDropout(0.5)],
                         ids=lambda layer: type(layer).__name__)
def test_dropout_that_cannot_be_held_fixed_is_refused_naming_the_layer(layer):
    net = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), layer, nn.Linear(16, 3))
    with pytest.raises(InvalidArgumentError, match=rf"module Classifier has dropout that MC sampling cannot hold "
                                                   rf"fixed: net.2 \({type(layer).__name__}\)") as error:
        LightningPosterior(Classifier(net), trainer)
    assert "\n" not in str(error.value)
    assert type(net[2]) is type(layer)  # refused before anything was converted


class BatchNormClassifier(Classifier):
    def __init__(self) -> None:
        super().__init__(nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5),
                                       nn.Linear(32, 3)))
        self.batch_sizes: list[int] = []

    def training_step(self, batch, batch_idx):
        self.batch_sizes.append(len(batch[0]))
        return super().training_step(batch, batch_idx)


def test_fit_gives_batchnorm_full_batches_when_one_item_is_left_over():
    x_N_D, y_N = torch.randn(65, 8), torch.arange(65) % 3  # batch_size 64: a last batch of 1 item
    module = BatchNormClassifier()
    summary = LightningPosterior(module, lambda: trainer(2)).fit((x_N_D, y_N), generator=0)
    assert summary["global_step"] == 2 * 2
    assert module.batch_sizes == [64] * 4  # every batch full: the last one topped up
    # a batch size that divides N: the same order as a shuffled DataLoader, every item once per epoch
    module = BatchNormClassifier()
    LightningPosterior(module, lambda: trainer(1), batch_size=13).fit((x_N_D, y_N), generator=0)
    assert module.batch_sizes == [13] * 5


class SkipAroundDropout(Classifier):
    """``h + dropout(h)``: mixes activations from before and after its first dropout."""

    def __init__(self) -> None:
        super().__init__(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3)))

    def forward(self, x):
        hidden = self.net[1](self.net[0](x))
        return self.net[3](hidden + self.net[2](hidden))


def test_skip_connection_is_a_clear_error_batched_and_sampled_sequentially():
    torch.manual_seed(0)
    x_N_D = torch.randn(10, 6)
    batched = LightningPosterior(SkipAroundDropout(), trainer)
    with pytest.raises(BatchedSamplingError, match=r"use LightningPosterior\(\.\.\., sampling='sequential'\)"):
        batched.log_probs(x_N_D, num_samples=4, generator=0)
    assert all(layer._context is None for layer in mc_dropout_layers(batched.module))  # no context left open
    module = SkipAroundDropout()
    posterior = LightningPosterior(module, trainer, sampling="sequential", predict_batch_size=3)
    assert posterior.sampling == "sequential"  # what the loop's pool scoring reads
    log_probs_N_K_C = posterior.log_probs(x_N_D, num_samples=4, generator=0)
    # an independent reference: sample k = h + mask_k * h for every item
    hidden_N_H = torch.relu(module.net[0](x_N_D))
    masks_K_H = module.net[2].masks(range(4), hidden_N_H.shape[1:])
    reference = F.log_softmax(module.net[3](hidden_N_H[:, None] + hidden_N_H[:, None] * masks_K_H), -1)
    torch.testing.assert_close(log_probs_N_K_C, reference.detach(), rtol=0, atol=1e-5)
    native = predict_log_probs(posterior.module, x_N_D, 4, generator=0, sampling="sequential")
    torch.testing.assert_close(native, log_probs_N_K_C, rtol=0, atol=1e-6)
    with pytest.raises(InvalidArgumentError, match="sampling"):
        LightningPosterior(SkipAroundDropout(), trainer, sampling="one-by-one")


@pytest.mark.parametrize("sampling", ["batched", "sequential"])
def test_inputs_the_module_cannot_read_give_the_native_one_line_error(sampling):
    posterior = LightningPosterior(Classifier(make_net(d=8)), trainer, sampling=sampling)
    with pytest.raises(InvalidArgumentError, match=r"the model cannot read inputs of shape \[5, 7\] \(one item: "
                                                   r"\(7,\)\): mat1 and mat2 shapes cannot be multiplied") as error:
        posterior.log_probs(torch.randn(5, 7), num_samples=3, generator=0)
    assert "\n" not in str(error.value)
    assert isinstance(error.value.__cause__, RuntimeError)  # the module's own failure
    assert all(layer._context is None for layer in mc_dropout_layers(posterior.module))  # no context left open
    with pytest.raises(InvalidArgumentError, match=r"the model cannot read inputs of shape \[5, 7\]") as error:
        posterior.fit((torch.randn(5, 7), torch.arange(5) % 3), generator=0)
    assert isinstance(error.value.__cause__, RuntimeError)
    # the native wording
    with pytest.raises(InvalidArgumentError, match=r"the model cannot read inputs of shape .* \(one item: \(7,\)\)"):
        predict_log_probs(posterior.module, torch.randn(5, 7), 3, generator=0)


@pytest.mark.parametrize("sampling", ["batched", "sequential"])
def test_a_module_ending_in_softmax_is_refused_as_the_native_path_refuses_it(sampling):
    """Its probabilities read as logits would make every prediction nearly uniform."""
    net = nn.Sequential(*make_net(), nn.Softmax(dim=-1))
    posterior = LightningPosterior(Classifier(net), trainer, sampling=sampling)
    with pytest.raises(InvalidArgumentError, match=r"the model's outputs of predict_step look like probabilities"):
        posterior.log_probs(torch.randn(5, 6), num_samples=3, generator=0)
    assert all(layer._context is None for layer in mc_dropout_layers(posterior.module))  # no context left open


def test_numpy_arrays_are_read_as_tensors_in_fit_and_log_probs():
    """fit((x.numpy(), y.numpy())) was a raw TypeError ('int' object is not callable) from TensorDataset."""
    x_N_D, y_N = toy_dataset(24).inputs, toy_dataset(24).targets
    weights = []
    for train in ((x_N_D, y_N), (x_N_D.numpy(), y_N.numpy())):
        torch.manual_seed(0)
        posterior = LightningPosterior(Classifier(make_net()), lambda: trainer(1), batch_size=8)
        posterior.fit(train, validation=train, generator=3)
        weights.append(posterior.lightning_module.net[0].weight.detach().clone())
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=0)
    torch.testing.assert_close(posterior.log_probs(x_N_D.numpy(), num_samples=3, generator=0),
                               posterior.log_probs(x_N_D, num_samples=3, generator=0), rtol=0, atol=0)
    with pytest.raises(InvalidTypeError,
                       match=r"^train targets must hold numbers, got a NumPy array of dtype <U\d+; encode the labels"):
        posterior.fit((x_N_D.numpy(), y_N.numpy().astype(str)), generator=0)
