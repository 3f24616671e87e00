"""Confusion matrix, accuracy, precision / recall / F1 against scikit-learn and torchmetrics."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
import torch
import torchmetrics.functional.classification as tmf

from activebayes import metrics as M

AVERAGES = ["macro", "micro", "weighted", None]


def _random_case(rng: np.random.Generator):
    """Targets / predictions over C classes, often with classes absent from one or both."""
    C = int(rng.integers(2, 7))
    N = int(rng.integers(1, 40))
    used_t = rng.choice(C, size=int(rng.integers(1, C + 1)), replace=False)
    used_p = rng.choice(C, size=int(rng.integers(1, C + 1)), replace=False)
    y = rng.choice(used_t, size=N)
    p = rng.choice(used_p, size=N)
    return C, y, p


def _close(a, b, tol=1e-6):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, atol=tol, rtol=0, equal_nan=True)


@pytest.mark.parametrize("zero_division", [0.0, 1.0, math.nan])
def test_prf_random_multiclass_vs_sklearn(zero_division):
    rng = np.random.default_rng(0)
    sk_fns = {"precision": skm.precision_score, "recall": skm.recall_score, "f1": skm.f1_score}
    ours = {"precision": M.precision_score, "recall": M.recall_score, "f1": M.f1_score}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(15):
            C, y, p = _random_case(rng)
            for average in AVERAGES:
                for name in sk_fns:
                    # default labels: ids present in y or p (sklearn's default)
                    expected = sk_fns[name](y, p, average=average, zero_division=zero_division)
                    got = ours[name](y, p, average=average, zero_division=zero_division)
                    _close(got, expected)
                    # num_classes: all C classes count, as sklearn's labels=range(C)
                    expected = sk_fns[name](
                        y, p, average=average, labels=list(range(C)), zero_division=zero_division
                    )
                    got = ours[name](
                        torch.as_tensor(y), torch.as_tensor(p), average=average,
                        num_classes=C, zero_division=zero_division,
                    )
                    _close(got, expected)
                # a subset of labels in a given order
                labels = list(rng.permutation(C)[: int(rng.integers(1, C + 1))])
                expected = skm.f1_score(y, p, average=average, labels=labels, zero_division=zero_division)
                got = M.f1_score(y, p, average=average, labels=labels, zero_division=zero_division)
                _close(got, expected)


def test_prf_random_binary_vs_sklearn_and_torchmetrics():
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(40):
            N = int(rng.integers(1, 30))
            y = rng.integers(0, 2, N)
            p = rng.integers(0, 2, N) if rng.random() > 0.2 else np.zeros(N, dtype=int)
            for pos_label in (0, 1):
                if len(set(y) | set(p)) == 2 or pos_label in set(y) | set(p) or True:
                    try:
                        expected = skm.f1_score(y, p, average="binary", pos_label=pos_label)
                    except ValueError:
                        with pytest.raises(ValueError):
                            M.f1_score(y, p, average="binary", pos_label=pos_label)
                        continue
                    _close(M.f1_score(y, p, pos_label=pos_label), expected)
                    _close(
                        M.precision_score(y, p, pos_label=pos_label),
                        skm.precision_score(y, p, pos_label=pos_label),
                    )
                    _close(
                        M.recall_score(y, p, pos_label=pos_label),
                        skm.recall_score(y, p, pos_label=pos_label),
                    )
            # torchmetrics' binary metrics treat class 1 as positive and 0/0 as 0
            yt, pt = torch.as_tensor(y), torch.as_tensor(p)
            _close(M.precision_score(y, p), tmf.binary_precision(pt, yt))
            _close(M.recall_score(y, p), tmf.binary_recall(pt, yt))
            _close(M.f1_score(y, p), tmf.binary_f1_score(pt, yt))


def test_macro_vs_torchmetrics_when_all_classes_present():
    rng = np.random.default_rng(2)
    for _ in range(20):
        C = int(rng.integers(2, 6))
        N = 50
        y = torch.as_tensor(np.concatenate([np.arange(C), rng.integers(0, C, N - C)]))
        probs = torch.softmax(torch.as_tensor(rng.normal(size=(N, C))), -1)
        for avg in ("macro", "micro", "weighted"):
            _close(
                M.f1_score(y, probs, average=avg),
                tmf.multiclass_f1_score(probs, y, num_classes=C, average=avg),
            )
            _close(
                M.precision_score(y, probs, average=avg),
                tmf.multiclass_precision(probs, y, num_classes=C, average=avg),
            )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_confusion_matrix_and_accuracy_vs_sklearn():
    rng = np.random.default_rng(3)
    for _ in range(40):
        C, y, p = _random_case(rng)
        _close(M.confusion_matrix(y, p), skm.confusion_matrix(y, p))
        _close(M.confusion_matrix(y, p, num_classes=C), skm.confusion_matrix(y, p, labels=range(C)))
        labels = [int(y[0]), *[c for c in rng.permutation(C)[:2].tolist() if c != y[0]]]
        _close(M.confusion_matrix(y, p, labels=labels), skm.confusion_matrix(y, p, labels=labels))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for norm in ("true", "pred", "all"):
                _close(
                    M.confusion_matrix(y, p, num_classes=C, normalize=norm),
                    np.nan_to_num(skm.confusion_matrix(y, p, labels=range(C), normalize=norm)),
                )
        _close(M.accuracy_score(y, p), skm.accuracy_score(y, p))
        _close(M.accuracy_score(y, p, normalize=False), skm.accuracy_score(y, p, normalize=False))


def test_seed_001_macro_f1_is_not_f1_of_macro_p_and_r():
    y_true = [0, 1, 0, 1, 0, 1, 1, 0]
    y_pred = [0, 1, 0, 0, 1, 1, 0, 0]
    p = M.precision_score(y_true, y_pred, average="macro")
    r = M.recall_score(y_true, y_pred, average="macro")
    f1 = M.f1_score(y_true, y_pred, average="macro")
    assert p == pytest.approx(19 / 30, abs=1e-12)
    assert r == pytest.approx(5 / 8, abs=1e-12)
    assert f1 == pytest.approx(0.6190476190476191, abs=1e-7)
    # mean of per-class F1 (class 0: P 3/5 R 3/4; class 1: P 2/3 R 2/4) ...
    per_class = [2 * a * b / (a + b) for a, b in ((3 / 5, 3 / 4), (2 / 3, 2 / 4))]
    assert f1 == pytest.approx(sum(per_class) / 2, abs=1e-12)
    # ... differs from the harmonic mean of macro P and macro R
    assert 2 * p * r / (p + r) == pytest.approx(0.6291390728476821, abs=1e-12)


def test_probabilities_and_bayesian_inputs_reduce_by_argmax_of_mean():
    gen = torch.Generator().manual_seed(0)
    N, K, C = 40, 5, 4
    log_probs_N_K_C = torch.log_softmax(3 * torch.randn(N, K, C, generator=gen), -1)
    mean_probs_N_C = log_probs_N_K_C.exp().mean(1)
    y = torch.randint(0, C, (N,), generator=gen)
    for fn in (M.f1_score, M.precision_score, M.recall_score):
        for avg in ("macro", "weighted", None):
            _close(fn(y, log_probs_N_K_C, average=avg), fn(y, mean_probs_N_C, average=avg))
            _close(
                fn(y, log_probs_N_K_C, average=avg),
                fn(y, mean_probs_N_C.argmax(-1), average=avg, num_classes=C),
            )
    assert M.accuracy_score(y, log_probs_N_K_C) == M.accuracy_score(y, mean_probs_N_C.numpy())
    # the mean is taken over probabilities, not log-probabilities: a case where they disagree
    lp = torch.log(torch.tensor([[[0.02, 0.98], [0.8, 0.2], [0.8, 0.2]]], dtype=torch.float64))
    assert M.confusion_matrix([1], lp, num_classes=2).tolist() == [[0, 0], [1, 0]]  # mean p: [0.54, 0.46]
    assert lp.mean(1).argmax().item() == 1  # a (wrong) mean of log-probs picks class 1


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: M.f1_score([0, 1], [0, 1], average="mean"), "average"),
        (lambda: M.f1_score([0, 1, 2], [0, 1, 2]), "binary"),
        (lambda: M.f1_score([0, 1], [0], average="macro"), "same number"),
        (lambda: M.f1_score([0, 1], [0.2, 0.7], average="macro"), "integer"),
        (lambda: M.f1_score([0, float("nan")], [0, 1], average="macro"), "NaN"),
        (lambda: M.f1_score([0, 1], [[0.5, 0.7], [0.2, 0.8]], average="macro"), "sum to 1"),
        (lambda: M.f1_score([0, 1], [[1.5, -0.5], [0.2, 0.8]], average="macro"), r"\[0, 1\]"),
        (lambda: M.f1_score([0, 3], [0, 1], num_classes=2, average="macro"), "num_classes"),
        (lambda: M.f1_score([0, 1], [0, 1], zero_division=0.5), "zero_division"),
        (lambda: M.f1_score([0, 1], [0, 1], average="macro", num_classes=3.0), "num_classes"),
        (lambda: M.confusion_matrix([-1, 1], [0, 1]), "non-negative"),
        (lambda: M.accuracy_score("abc", [0]), "targets"),
        (lambda: M.f1_score([0, 1], torch.zeros(2, 2, 2, 2), average="macro"), "labels"),
    ],
)
def test_bad_input_raises_clear_errors(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        M.f1_score([0, 1], [0, 1], "macro")  # type: ignore[misc]


def test_accuracy_of_probabilities_refuses_a_target_beyond_their_classes():
    """As log_loss, brier_score and the calibration metrics do (it returned 0.5 here)."""
    probs_N_C = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
    with pytest.raises(ValueError, match=r"^targets must be class ids < C=2 \(the predictions' classes\), got 5$"):
        M.accuracy_score([0, 5], probs_N_C)
    assert M.accuracy_score([0, 1], probs_N_C) == skm.accuracy_score([0, 1], [0, 1])
    assert M.accuracy_score([0, 5], [0, 1]) == 0.5  # labels against labels: no number of classes to check against


def test_log_probabilities_given_as_probabilities_get_their_own_advice():
    # not "did you pass logits? Use torch.softmax": these are already normalised, in log space
    gen = torch.Generator().manual_seed(0)
    probs_N_C = torch.softmax(3 * torch.randn(50, 4, generator=gen), -1)
    y = torch.randint(0, 4, (50,), generator=gen)
    with pytest.raises(ValueError, match=r"these look like log-probabilities: pass their \.exp\(\), or "
                                         r"log-probabilities \[N, K, C\] \(for one sample, predictions\.unsqueeze"):
        M.f1_score(y, probs_N_C.log(), average="macro")
    with pytest.raises(ValueError, match=r"did you pass logits\? Use torch\.softmax"):
        M.log_loss(y, 3 * torch.randn(50, 4, generator=gen))
    # both suggested forms give the probabilities' value
    expected = skm.f1_score(y, probs_N_C.argmax(-1), average="macro")
    assert M.f1_score(y, probs_N_C.log().exp(), average="macro") == pytest.approx(expected, abs=1e-12)
    assert M.f1_score(y, probs_N_C.log().unsqueeze(1), average="macro") == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_probabilities_from_a_softmax_are_accepted(dtype):
    # a bfloat16 softmax row can sum to 1.003 (eps = 2^-7); the tolerance follows the dtype
    gen = torch.Generator().manual_seed(1)
    logits = 3 * torch.randn(400, 10, generator=gen)
    probs = torch.softmax(logits.to(dtype), -1)
    assert float((probs.double().sum(-1) - 1).abs().max()) > 1e-3 or dtype == torch.float16
    y = torch.randint(0, 10, (400,), generator=gen)
    reference = skm.log_loss(y, (probs.double() / probs.double().sum(-1, keepdim=True)).numpy(), labels=range(10))
    assert M.log_loss(y, probs) == pytest.approx(reference, abs=0.02)
    unnormalised = probs.double() * 0.9
    with pytest.raises(ValueError, match=r"rows must sum to 1"):
        M.log_loss(y, unnormalised.to(dtype))


def test_num_classes_and_pos_label_are_checked_alike_in_every_metric():
    """As every other count in the library: NumPy ints are ints (np.int64(3) was refused as 'not a positive
    int, got np.int64(3)'), floats and strings are named with their type."""
    y, p = [0, 1, 2, 1], torch.tensor([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.2, 0.7, 0.1]])
    assert M.f1_score(y, p, average="macro", num_classes=np.int64(3)) == 1.0
    assert M.f1_score([0, 1, 1], [0, 1, 0], pos_label=np.int64(1)) == skm.f1_score([0, 1, 1], [0, 1, 0])
    record = M.evaluate_classification(p, y, num_classes=np.int64(3))
    assert type(record["num_classes"]) is int  # the record is written as JSON
    for call in (lambda: M.f1_score(y, p, average="macro", num_classes=3.0),
                 lambda: M.roc_auc_score(y, p, num_classes="3")):
        with pytest.raises(TypeError, match=r"^num_classes must be an int, got (float 3.0|str '3')$"):
            call()
    with pytest.raises(ValueError, match=r"^num_classes must be >= 1, got 0$"):
        M.roc_auc_score(y, p, num_classes=0)  # was 'num_classes=0 but scores have 3 classes'
    with pytest.raises(TypeError, match=r"^pos_label must be an int, got str '1'$"):
        M.roc_curve([0, 1], [0.2, 0.8], pos_label="1")  # was 'targets must be binary with pos_label=1 among them'
    with pytest.raises(ValueError, match=r"^pos_label must be a class id < 2, got 5$"):
        M.roc_curve([0, 1], [[0.8, 0.2], [0.2, 0.8]], pos_label=5)  # was torch's IndexError


def test_a_class_id_beyond_num_classes_is_named_with_the_argument_that_holds_it():
    # was 'class ids must be < num_classes=2, got a label 2 in targets/predictions' (which of them?)
    with pytest.raises(ValueError, match=r"^predictions must be class ids < num_classes=2, got 2$"):
        M.f1_score([0, 1], [0, 2], average="macro", num_classes=2)
    with pytest.raises(ValueError, match=r"^targets must be class ids < num_classes=2, got 3$"):
        M.confusion_matrix([0, 3], [0, 1], num_classes=2)
    with pytest.raises(ValueError, match=r"^targets must be class ids < C=2 \(the predictions' classes\), got 2$"):
        M.precision_score([0, 2], [[0.9, 0.1], [0.3, 0.7]], average="macro")
    with pytest.raises(ValueError, match=r"^targets must be class ids < num_classes=2, got 2$"):
        M.evaluate_classification(torch.tensor([[0.9, 0.1], [0.3, 0.7]]), [0, 2], num_classes=2)
