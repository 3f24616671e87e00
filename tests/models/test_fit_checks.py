"""fit checks the model's first forward pass: it reads the inputs and returns logits [n, C] for the targets;
fit_options are checked against fit's keyword arguments."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models import Ensemble, NetworkPosterior, fit
from activebayes.models.multilabel import MultiLabelPosterior
from activebayes.models.training import check_fit_options


class TwoD(nn.Module):
    """A small network on 2-D points that gets one thing wrong (``mistake``) or nothing (``None``)."""

    def __init__(self, mistake: str | None = None, *, classes: int = 2) -> None:
        super().__init__()
        self.mistake = mistake
        self.body = nn.Sequential(nn.Linear(5 if mistake == "width" else 2, 16), nn.ReLU())
        self.head = nn.Linear(16, 1 if mistake == "one_output" else classes)

    def forward(self, x):
        logits = self.head(self.body(x))
        if self.mistake == "flat":
            return logits[:, 0]
        if self.mistake == "tuple":
            return logits, logits.detach()
        if self.mistake == "long":
            return logits.long()
        return logits


@pytest.fixture
def points():
    g = torch.Generator().manual_seed(0)
    return torch.randn(10, 2, generator=g), torch.arange(10) % 2


def test_a_last_layer_with_too_few_outputs_is_named(points):
    with pytest.raises(InvalidArgumentError, match=r"^train targets hold class id 1, but the model returns logits for "
                                                   r"C = 1 classes \(shape \[10, 1\]\): the model's last layer needs "
                                                   r"at least 2 outputs, one per class \(C = 2\)$"):
        fit(TwoD("one_output"), points, max_epochs=1, generator=0)


def test_logits_of_shape_n_are_refused(points):
    with pytest.raises(InvalidArgumentError, match=r"^model must return logits \[n, C\] .*got shape \[10\] "
                                                   r"for a batch of 10 items$"):
        fit(TwoD("flat"), points, max_epochs=1, generator=0)


def test_a_tuple_instead_of_logits_is_refused(points):
    with pytest.raises(InvalidTypeError, match=r"^model must return logits \[n, C\] \(a tensor\), got tuple$"):
        fit(TwoD("tuple"), points, max_epochs=1, generator=0)


def test_integer_logits_are_refused(points):
    with pytest.raises(InvalidTypeError, match=r"floating-point logits \[n, C\], got dtype torch.int64"):
        fit(TwoD("long"), points, max_epochs=1, generator=0)


def test_inputs_the_model_cannot_read_name_their_shape(points):
    with pytest.raises(InvalidArgumentError) as caught:
        fit(TwoD("width"), points, max_epochs=1, generator=0)
    assert str(caught.value) == ("the model cannot read inputs of shape [10, 2] (one item: (2,)): "
                                 "mat1 and mat2 shapes cannot be multiplied (10x2 and 5x16)")
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_validation_label_the_logits_cannot_hold_is_refused(points):
    x, y = points
    with pytest.raises(InvalidArgumentError) as caught:
        fit(TwoD(), points, validation=(x, torch.full_like(y, 2)), max_epochs=1, generator=0)
    assert str(caught.value) == ("val targets hold class id 2, but the model returns logits for C = 2 classes "
                                 "(shape [10, 2]): the model's last layer needs at least 3 outputs, one per class "
                                 "(C = 3)")


def test_train_labels_counted_from_one_are_named(points):
    x, y = points
    with pytest.raises(InvalidArgumentError, match=r"^train targets hold class id 2, but the model returns logits "
                                                   r"for C = 2 classes \(shape \[10, 2\]\): class ids count from 0 "
                                                   r"and these start at 1 \(subtract 1\?\), or the model's last "
                                                   r"layer needs at least 3 outputs$"):
        fit(TwoD(), (x, y + 1), max_epochs=1, generator=0)


def test_a_negative_label_is_named_with_its_rows_in_train_and_validation(points):
    # -1 as an "unlabelled" marker: torch's cross-entropy would raise a bare IndexError
    x, y = points
    marked = y.clone()
    marked[[3, 7]] = -1
    with pytest.raises(InvalidArgumentError, match=r"^train targets must be class ids >= 0, got -1 in 2 item\(s\) "
                                                   r"\(rows \[3, 7\]\); leave unlabelled items out of training"):
        fit(TwoD(), (x, marked), max_epochs=1, generator=0)
    with pytest.raises(InvalidArgumentError, match=r"^validation targets must be class ids >= 0, got -1 in 5 item"):
        fit(TwoD(), points, validation=(x, y - 1), max_epochs=1, generator=0)


@pytest.mark.skipif(torch.cuda.device_count() > 7, reason="the machine has a cuda:7")
@pytest.mark.parametrize("device", ["cuda:7", "gpu", torch.device("cuda", 7)])
def test_fit_and_predict_name_a_device_the_machine_lacks(points, device):
    # torch's own errors here: "Torch not compiled with CUDA enabled", "Expected one of cpu, cuda, ..."
    from activebayes.models import MLP, mc_dropout, predict_log_probs
    from activebayes.models.embeddings import penultimate_features

    net = mc_dropout(MLP(in_features=2, num_classes=2, hidden=8))
    message = r"^device must be a device this machine has \(.*cpu.*\), got '(cuda:7|gpu)'$"
    with pytest.raises(InvalidArgumentError, match=message):
        fit(net, points, max_epochs=1, generator=0, device=device)
    with pytest.raises(InvalidArgumentError, match=message):
        predict_log_probs(net, points[0], num_samples=2, generator=0, device=device)
    with pytest.raises(InvalidArgumentError, match=message):
        penultimate_features(net, points[0], device=device)
    assert fit(net, points, max_epochs=1, generator=0, device=torch.device("cpu")).epochs_run == 1


def test_more_outputs_than_classes_still_train(points):
    # fit cannot know the task's classes; the loop's evaluation refuses "num_classes=2 but predictions have 3"
    assert fit(TwoD(classes=3), points, max_epochs=1, generator=0).epochs_run == 1


def test_an_ensemble_of_stackable_members_is_checked_before_training_in_lockstep(points):
    members = [nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1)) for _ in range(3)]
    ensemble = Ensemble(members)
    with pytest.raises(InvalidArgumentError, match=r"logits for C = 1 classes \(shape \[10, 1\]\): the model's last layer needs at least 2 outputs"):
        fit(ensemble, points, max_epochs=1, generator=0)
    assert all(m.training for m in members)
    wide = Ensemble([nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)) for _ in range(3)])
    with pytest.raises(InvalidArgumentError, match=r"^the model cannot read inputs of shape \[10, 2\]"):
        fit(wide, points, max_epochs=1, generator=0)


def test_a_multilabel_fit_needs_one_logit_per_label():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(12, 2, generator=g), (torch.rand(12, 3, generator=g) > 0.5).float()
    with pytest.raises(InvalidArgumentError, match=r"^model returned logits of shape \[12, 2\] for 3 labels: its "
                                                   r"last layer must have 3 outputs"):
        fit(TwoD(), (x, y), multilabel=True, max_epochs=1, generator=0)
    assert fit(TwoD(classes=3), (x, y), multilabel=True, max_epochs=1, generator=0).epochs_run == 1


def test_an_unknown_fit_option_names_the_close_match():
    with pytest.raises(InvalidArgumentError) as caught:
        check_fit_options({"max_epoch": 3, "lr": 0.01, "speed": 2})
    message = str(caught.value)
    assert message.startswith("fit_options has unknown keys 'max_epoch' (did you mean 'max_epochs'?), 'speed'; ")
    assert "expected keys of activebayes.models.fit: batch_size, lr, max_epochs," in message
    assert "\n" not in message


@pytest.mark.parametrize("key", ["generator", "device", "validation", "multilabel"])
def test_fit_options_cannot_set_what_the_posterior_passes(key):
    with pytest.raises(InvalidArgumentError, match=rf"^fit_options cannot set '{key}': the posterior's fit passes"):
        NetworkPosterior(TwoD(), **{key: None})


def test_posteriors_check_their_fit_options_when_built():
    with pytest.raises(InvalidArgumentError, match=r"unknown key 'max_epoch' \(did you mean 'max_epochs'\?\)"):
        NetworkPosterior(TwoD(), max_epoch=3)
    with pytest.raises(InvalidArgumentError, match=r"unknown key 'patiense' \(did you mean 'patience'\?\)"):
        MultiLabelPosterior(TwoD(), patiense=3)
    assert NetworkPosterior(TwoD(), max_epochs=3, lr=0.01).fit_options == {"max_epochs": 3, "lr": 0.01}


def test_inputs_of_the_wrong_shape_are_named_as_such_in_prediction():
    """Not the batched path's 'use sampling=sequential' advice, which would not help."""
    from activebayes.models import build_model, predict_log_probs

    net = build_model("gal_cnn", num_classes=10, input_shape=(1, 28, 28), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"the model cannot read inputs of shape .*one item: \(1, 8, 8\)"):
        predict_log_probs(net, torch.randn(4, 1, 8, 8), 3)


@pytest.mark.parametrize("multilabel", [False, True])
def test_nan_or_inf_inputs_are_refused_before_training_and_named(points, multilabel):
    x, y = points
    x = x.clone()
    x[3, 1], x[7, 0] = float("nan"), float("inf")
    targets = torch.nn.functional.one_hot(y, 2).float() if multilabel else y
    model = TwoD()
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(InvalidArgumentError, match=r"train inputs hold NaN or inf in 2 item\(s\) \(rows \[3, 7\]\)"):
        fit(model, (x, targets), max_epochs=1, generator=0, multilabel=multilabel)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # nothing trained


def test_a_model_of_another_dtype_is_named_as_a_dtype_mismatch(points):
    x, y = points
    with pytest.raises(InvalidArgumentError, match=r"inputs of dtype float32: .*dtype.*model\.to\(inputs\.dtype\)"):
        fit(TwoD().double(), (x, y), max_epochs=1, generator=0)


class Softmaxed(nn.Module):
    """A network ending in a softmax (probabilities out) or a log-softmax (log-probabilities out)."""

    def __init__(self, final: nn.Module) -> None:
        from activebayes.models import ConsistentMCDropout

        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), ConsistentMCDropout(0.5), nn.Linear(16, 3), final)

    def forward(self, x):
        return self.net(x)


PROBABILITIES = r"look like probabilities \(every row in \[0, 1\], summing to 1\).*remove its final Softmax"


def test_a_model_ending_in_softmax_is_refused_in_training_and_prediction(points):
    """Probabilities read as logits flatten every prediction towards uniform: refused, not predicted."""
    from activebayes.models import predict_log_probs

    x, _ = points
    y = torch.arange(10) % 3
    with pytest.raises(InvalidArgumentError, match="on the first training batch " + PROBABILITIES):
        fit(Softmaxed(nn.Softmax(dim=-1)), (x, y), max_epochs=1, generator=0)
    for k in (1, 4):  # one function (no expansion) and the batched MC forward
        with pytest.raises(InvalidArgumentError, match=PROBABILITIES):
            predict_log_probs(Softmaxed(nn.Softmax(dim=-1)), x, num_samples=k, generator=0)
    with pytest.raises(InvalidArgumentError, match=PROBABILITIES):
        NetworkPosterior(Softmaxed(nn.Softmax(dim=-1))).log_probs(x, num_samples=2, generator=0)
    # log-probabilities are logits up to a constant per row: accepted, and predicted as the same distribution
    net = Softmaxed(nn.LogSoftmax(dim=-1))
    fit(net, (x, y), max_epochs=2, generator=0)
    log_probs_N_K_C = predict_log_probs(net, x, num_samples=4, generator=0)
    net.net[-1] = nn.Identity()
    assert torch.allclose(predict_log_probs(net, x, num_samples=4, generator=0), log_probs_N_K_C, atol=1e-6)


def test_training_data_of_the_wrong_types_say_what_came(points):
    x, y = points
    with pytest.raises(InvalidTypeError, match=r"^train must be a tuple \(inputs, targets\) of tensors or a Dataset of "
                                               r"\(x, y\), got a tuple of 2 \(ndarray, ndarray\); convert arrays with "
                                               r"torch.as_tensor$"):
        fit(TwoD(), (x.numpy(), y.numpy()), max_epochs=1, generator=0)
    with pytest.raises(InvalidTypeError, match=r"got a list of 2 \(Tensor, list\)$"):
        fit(TwoD(), [x, y.tolist()], max_epochs=1, generator=0)
