"""Streaming classes: batch-by-batch accumulation equals one-shot; reset; collections; evaluate record."""

from __future__ import annotations

import doctest
import importlib
import json

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

from activebayes import metrics as M


def _close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=tol, rtol=0, equal_nan=True)


def _data(seed=0, N=97, K=4, C=5):
    gen = torch.Generator().manual_seed(seed)
    log_probs_N_K_C = torch.log_softmax(2 * torch.randn(N, K, C, generator=gen, dtype=torch.float64), -1)
    targets_N = torch.randint(0, C - 1, (N,), generator=gen)  # class C-1 never a target
    return log_probs_N_K_C, targets_N


def _batches(n, sizes=(1, 7, 20, 33)):
    start, i = 0, 0
    while start < n:
        stop = min(n, start + sizes[i % len(sizes)])
        yield slice(start, stop)
        start, i = stop, i + 1


@pytest.mark.parametrize("average", ["macro", "micro", "weighted", None])
def test_accumulated_equals_one_shot(average):
    log_probs_N_K_C, y = _data()
    C = log_probs_N_K_C.shape[-1]
    metrics = {
        "precision": (M.Precision(C, average=average), M.precision_score),
        "recall": (M.Recall(C, average=average), M.recall_score),
        "f1": (M.F1Score(C, average=average), M.f1_score),
    }
    for sl in _batches(len(y)):
        for metric, _ in metrics.values():
            metric.update(log_probs_N_K_C[sl], y[sl])
    for metric, fn in metrics.values():
        _close(metric.compute(), fn(y, log_probs_N_K_C, average=average, num_classes=C))
    # the one-shot values themselves agree with scikit-learn on the argmax of the mean
    pred = log_probs_N_K_C.exp().mean(1).argmax(-1)
    _close(metrics["f1"][0].compute(), skm.f1_score(y, pred, average=average, labels=range(C), zero_division=0))


def test_confusion_accuracy_calibration_accumulate_and_reset():
    log_probs_N_K_C, y = _data(1)
    C = log_probs_N_K_C.shape[-1]
    cm, acc, cal = M.ConfusionMatrix(C), M.Accuracy(), M.Calibration(num_bins=10)
    for epoch in range(2):  # seed 003's loop, with reset at the end of each epoch
        for sl in _batches(len(y)):
            for metric in (cm, acc, cal):
                metric.update(log_probs_N_K_C[sl], y[sl].numpy())
        assert cm.compute().tolist() == M.confusion_matrix(y, log_probs_N_K_C, num_classes=C).tolist()
        _close(acc.compute(), M.accuracy_score(y, log_probs_N_K_C))
        out = cal.compute()
        _close(out["nll"], M.log_loss(y, log_probs_N_K_C))
        _close(out["brier"], M.brier_score(y, log_probs_N_K_C))
        _close(out["ece"], M.expected_calibration_error(y, log_probs_N_K_C, num_bins=10))
        assert cal.reliability().counts.tolist() == M.reliability_bins(y, log_probs_N_K_C, num_bins=10).counts.tolist()
        for metric in (cm, acc, cal):
            metric.reset()
    with pytest.warns(UserWarning, match="before the ``update``"):
        assert int(cm.compute().sum()) == 0


def test_forward_returns_batch_value_and_accumulates():
    log_probs_N_K_C, y = _data(2)
    acc = M.Accuracy()
    batch_values = [acc(log_probs_N_K_C[sl], y[sl]) for sl in _batches(len(y))]
    assert batch_values[0] in (0.0, 1.0)
    _close(acc.compute(), M.accuracy_score(y, log_probs_N_K_C))


def test_metric_collection_and_binary_average():
    log_probs_N_K_C, y = _data(3, C=2)
    y = (y > 0).long() if y.max() > 1 else y
    coll = M.MetricCollection(
        [M.Accuracy(), M.F1Score(2, average="binary"), M.Calibration()], prefix="val_"
    )
    for sl in _batches(len(y)):
        coll.update(log_probs_N_K_C[sl], y[sl])
    out = coll.compute()
    assert set(out) == {"val_accuracy", "val_f1", "val_nll", "val_brier", "val_ece"}
    _close(out["val_f1"], M.f1_score(y, log_probs_N_K_C))
    named = M.MetricCollection({"f1_macro": M.F1Score(2), "cm": M.ConfusionMatrix(2)})
    named.update(log_probs_N_K_C, y)
    assert named.compute()["cm"].sum() == len(y)
    with pytest.raises(ValueError, match="unique"):
        M.MetricCollection([M.Accuracy(), M.Accuracy()])


def test_a_collection_is_called_like_torchmetrics_one_and_moves_its_metrics():
    # forward: this batch's values in one flat dict, accumulated for compute(); .to() moves every state
    log_probs_N_K_C, y = _data(5)
    coll = M.MetricCollection([M.Accuracy(), M.F1Score(5, average="macro"), M.Calibration()], prefix="val_")
    assert coll.to("cpu") is coll
    batches = list(_batches(len(y)))
    for sl in batches:
        out = coll(log_probs_N_K_C[sl], y[sl])
        assert set(out) == {"val_accuracy", "val_f1", "val_nll", "val_brier", "val_ece"}
        _close(out["val_accuracy"], skm.accuracy_score(y[sl], log_probs_N_K_C[sl].exp().mean(1).argmax(-1)))
        mean_probs = log_probs_N_K_C[sl].exp().mean(1).numpy()
        _close(out["val_nll"], -np.log(mean_probs[np.arange(len(mean_probs)), y[sl].numpy()]).mean())
    total = coll.compute()
    _close(total["val_accuracy"], skm.accuracy_score(y, log_probs_N_K_C.exp().mean(1).argmax(-1)))
    _close(total["val_f1"], M.f1_score(y, log_probs_N_K_C, average="macro", labels=list(range(5))))
    assert len(batches) > 1


def test_streaming_bad_input():
    with pytest.raises(ValueError, match="num_classes"):
        M.ConfusionMatrix(3).update(torch.tensor([0, 3]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="binary"):
        M.F1Score(3, average="binary")
    with pytest.raises(ValueError, match="Calibration needs"):
        M.Calibration().update(torch.tensor([0.2, 0.7]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="classes"):
        M.Precision(3).update(torch.full((2, 4), 0.25), torch.tensor([0, 1]))


def test_evaluate_classification_record():
    log_probs_N_K_C, y = _data(4)
    C = log_probs_N_K_C.shape[-1]
    record = M.evaluate_classification(log_probs_N_K_C, y, num_classes=C)
    json.dumps(record, allow_nan=False)  # JSON-serialisable, no NaN
    mean_probs = log_probs_N_K_C.exp().mean(1)
    from_mean = M.evaluate_classification(mean_probs.numpy(), y.numpy(), num_classes=C)
    assert from_mean.keys() == record.keys()
    for key, value in from_mean.items():  # Bayesian [N, K, C] input == its mean probabilities
        if isinstance(value, dict):
            for part in value:
                _close(record[key][part], value[part])
        else:
            _close(record[key], value)
    pred = mean_probs.argmax(-1).numpy()
    yn = y.numpy()
    _close(record["accuracy"], skm.accuracy_score(yn, pred))
    for avg in ("macro", "micro", "weighted"):
        p, r, f, _ = skm.precision_recall_fscore_support(yn, pred, average=avg, labels=range(C), zero_division=0)
        _close([record[f"precision_{avg}"], record[f"recall_{avg}"], record[f"f1_{avg}"]], [p, r, f])
    p, r, f, s = skm.precision_recall_fscore_support(yn, pred, average=None, labels=range(C), zero_division=0)
    _close(record["precision_per_class"], p)
    _close(record["recall_per_class"], r)
    _close(record["f1_per_class"], f)
    assert record["support_per_class"] == s.tolist()
    assert record["support_per_class"][-1] == 0  # an absent class is still listed
    _close(record["nll"], skm.log_loss(yn, mean_probs.numpy(), labels=range(C)))
    _close(record["brier"], np.mean(((mean_probs.numpy() - np.eye(C)[yn]) ** 2).sum(1)))
    _close(record["ece"], M.expected_calibration_error(y, mean_probs))
    assert record["confusion_matrix"] == skm.confusion_matrix(yn, pred, labels=range(C)).tolist()
    with pytest.raises(ValueError, match="num_classes"):
        M.evaluate_classification(mean_probs, y, num_classes=C + 1)
    with pytest.raises(ValueError, match="predictions"):
        M.evaluate_classification(torch.zeros(len(y), dtype=torch.long), y, num_classes=C)
    # the functional metrics take (targets, predictions); this record takes (predictions, targets)
    for swapped in (mean_probs, mean_probs.numpy().tolist(), log_probs_N_K_C):
        with pytest.raises(ValueError, match=r"targets look like predictions: the order is "
                                             r"evaluate_classification\(predictions, targets\)"):
            M.evaluate_classification(y, swapped, num_classes=C)
    with pytest.raises(ValueError, match=r"got shape \(\d+,\)$"):  # no hint when the targets are not predictions
        M.evaluate_classification(y, y, num_classes=C)


@pytest.mark.parametrize(
    "module",
    ["classification", "binary", "calibration", "multilabel", "streaming", "evaluate", "__init__"],
)
def test_docstring_examples_run(module):
    name = "activebayes.metrics" if module == "__init__" else f"activebayes.metrics.{module}"
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("name", ["ConfusionMatrix", "Precision", "Recall", "F1Score"])
def test_a_streaming_metric_without_num_classes_names_itself(name):
    # the default was Python's "_PRF.__init__() missing 1 required positional argument"
    with pytest.raises(TypeError, match=rf"^{name} needs num_classes, the number of classes C, e.g\. {name}\(10\)$"):
        getattr(M, name)()


def test_accuracy_and_calibration_take_num_classes_as_torchmetrics_users_pass_it():
    """Accuracy(num_classes=3) and Calibration(num_classes=3) were refused with torchmetrics' own
    'Unexpected keyword arguments'; they take it now and check the ids / predictions against it."""
    import torchmetrics

    from activebayes.metrics.streaming import Accuracy, Calibration

    preds, targets = torch.tensor([0, 1, 2, 2]), torch.tensor([0, 1, 1, 2])
    ours = Accuracy(num_classes=3)
    ours.update(preds, targets)
    theirs = torchmetrics.classification.MulticlassAccuracy(num_classes=3, average="micro")
    assert ours.compute() == pytest.approx(float(theirs(preds, targets)))
    with pytest.raises(ValueError, match=r"^predictions must be class ids < num_classes=3, got 3$"):
        ours.update(torch.tensor([3]), torch.tensor([0]))
    calibration = Calibration(num_classes=3)
    calibration.update(torch.full((2, 3), 1 / 3), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match=r"^predictions have 2 classes but the metric has num_classes=3$"):
        calibration.update(torch.full((2, 2), 0.5), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"num_classes must be >= 1"):
        Accuracy(num_classes=0)
