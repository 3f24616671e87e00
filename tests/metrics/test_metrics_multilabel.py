"""Multi-label per-label P/R/F1 and Hamming loss with an ignore mask."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

from activebayes import metrics as M


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=tol, rtol=0, equal_nan=True)


def test_unmasked_matches_sklearn():
    rng = np.random.default_rng(30)
    for _ in range(20):
        N, L = int(rng.integers(1, 30)), int(rng.integers(2, 6))  # L = 1 is "binary" to sklearn
        Y = rng.integers(0, 2, (N, L))
        P = rng.random((N, L))
        Yhat = (P >= 0.5).astype(int)
        _close(M.hamming_loss(Y, P), skm.hamming_loss(Y, Yhat))
        _close(M.hamming_loss(torch.as_tensor(Y), torch.as_tensor(Yhat)), skm.hamming_loss(Y, Yhat))
        for avg in (None, "macro", "micro", "weighted"):
            got = M.multilabel_precision_recall_f1(Y, P, average=avg)
            p, r, f, _ = skm.precision_recall_fscore_support(Y, Yhat, average=avg, zero_division=0)
            _close(got.precision, p)
            _close(got.recall, r)
            _close(got.f1, f)


def test_mask_ignores_padded_positions_vs_numpy():
    rng = np.random.default_rng(31)
    B, T, L = 6, 5, 7  # seed 001's layout: batch x sequence x labels, masks [B, T]
    Y = rng.integers(0, 2, (B, T, L))
    P = rng.random((B, T, L))
    lengths = rng.integers(1, T + 1, B)
    mask_B_T = np.arange(T)[None, :] < lengths[:, None]
    valid = np.broadcast_to(mask_B_T[:, :, None], Y.shape)
    Yhat = P >= 0.3
    ref_hamming = ((Yhat != Y) & valid).sum() / valid.sum()
    _close(M.hamming_loss(Y, P, mask=mask_B_T, threshold=0.3), ref_hamming)
    _close(M.hamming_loss(Y, P, mask=valid, threshold=0.3), ref_hamming)
    # padded positions count as nothing, not even as true negatives
    Yv, Pv = Y[mask_B_T], Yhat[mask_B_T]  # [n_valid, L]
    got = M.multilabel_precision_recall_f1(Y, P, mask=torch.as_tensor(mask_B_T), threshold=0.3)
    p, r, f, s = skm.precision_recall_fscore_support(Yv, Pv.astype(int), average=None, zero_division=0)
    _close(got.precision, p)
    _close(got.recall, r)
    _close(got.f1, f)
    assert got.support.tolist() == s.tolist()
    # garbage in padded positions changes nothing
    Y2, P2 = Y.copy(), P.copy()
    Y2[~mask_B_T] = 1
    P2[~mask_B_T] = 0.0
    _close(M.hamming_loss(Y2, P2, mask=mask_B_T, threshold=0.3), ref_hamming)


def test_multiclass_hamming_is_one_minus_accuracy():
    rng = np.random.default_rng(32)
    y, p = rng.integers(0, 4, 40), rng.integers(0, 4, 40)
    _close(M.hamming_loss(y, p), skm.hamming_loss(y, p))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: M.hamming_loss([[0, 1]], [[0, 1, 1]]), "shape"),
        (lambda: M.hamming_loss([[0, 2]], [[0, 1]]), "0 and 1"),
        (lambda: M.hamming_loss([[0, 1]], [[0, 1]], mask=[[1, 1, 1]]), "mask"),
        (lambda: M.hamming_loss([[0, 1]], [[0, 1]], mask=[[0, 0]]), "no valid"),
        (lambda: M.hamming_loss([[0, 1]], [[0.2, 1.7]]), "sigmoid"),
        (lambda: M.hamming_loss([0, 1], [0, 1], mask=[1, 1]), "multi-label"),
    ],
)
def test_multilabel_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# ----------------------------------------------------------------------------- evaluate_multilabel's edges


def test_micro_f1_of_no_positives_and_no_predictions_is_zero_everywhere():
    """0/0 micro-F1 (nothing to find, nothing predicted) is 0 in the headline and the functional
    form alike, as scikit-learn's default zero_division; samples-F1 keeps its documented 1."""
    from activebayes.metrics.multilabel import evaluate_multilabel

    Y = np.zeros((4, 3), dtype=int)
    P = np.full((4, 1, 3), 0.1)
    got = evaluate_multilabel(torch.log(torch.tensor(P)), Y)
    Yhat = (P[:, 0] >= 0.5).astype(int)
    assert got["micro_f1"] == skm.f1_score(Y, Yhat, average="micro", zero_division=0) == 0.0
    assert got["micro_f1"] == M.multilabel_precision_recall_f1(Y, P[:, 0], average="micro").f1
    assert got["macro_f1"] == skm.f1_score(Y, Yhat, average="macro", zero_division=0) == 0.0
    assert got["samples_f1"] == skm.f1_score(Y, Yhat, average="samples", zero_division=1) == 1.0
    assert got["hamming_loss"] == 0.0 and got["subset_accuracy"] == 1.0
    # and the validation micro-F1 that early stopping reads agrees
    from activebayes.models.training import _micro_f1

    assert _micro_f1(torch.tensor(P[:, 0]), torch.tensor(Y)) == got["micro_f1"]
    # the functional form follows its zero_division, as scikit-learn does
    assert M.multilabel_precision_recall_f1(Y, P[:, 0], average="micro", zero_division=1).f1 == \
        skm.f1_score(Y, Yhat, average="micro", zero_division=1) == 1.0


def test_per_class_precision_recall_f1_and_support_are_scikit_learns():
    """A class never predicted (precision 0/0) and one never present (recall 0/0) included."""
    from activebayes.metrics.multilabel import evaluate_multilabel

    rng = np.random.default_rng(3)
    Y = (rng.random((40, 5)) < 0.4).astype(int)
    Y[:, 4] = 0  # never present
    P_N_K_C = rng.random((40, 6, 5))
    P_N_K_C[:, :, 3] *= 0.4  # mean below 0.5: never predicted
    got = evaluate_multilabel(torch.log(torch.tensor(P_N_K_C)), Y)
    Yhat = (P_N_K_C.mean(1) >= 0.5).astype(int)
    precision, recall, f1, support = skm.precision_recall_fscore_support(Y, Yhat, average=None, zero_division=0)
    np.testing.assert_allclose(got["precision_per_class"], precision, atol=1e-12)
    np.testing.assert_allclose(got["recall_per_class"], recall, atol=1e-12)
    np.testing.assert_allclose(got["f1_per_class"], f1, atol=1e-12)
    assert got["support_per_class"] == support.tolist()
    assert got["precision_per_class"][3] == 0.0 and got["recall_per_class"][4] == 0.0


@pytest.mark.parametrize("threshold", [1.5, 0.0, 1.0, -0.2, float("nan"), float("inf"), "0.5", True, None])
def test_threshold_must_be_a_finite_number_between_zero_and_one(threshold):
    from activebayes.metrics.multilabel import evaluate_multilabel

    lp = torch.log(torch.full((4, 3, 2), 0.6))
    Y = [[1, 0], [0, 1], [1, 1], [0, 0]]
    for call in (lambda: evaluate_multilabel(lp, Y, threshold=threshold),
                 lambda: M.multilabel_precision_recall_f1(Y, lp.exp()[:, 0], threshold=threshold),
                 lambda: M.hamming_loss(Y, lp.exp()[:, 0], threshold=threshold)):
        with pytest.raises(ValueError, match=r"^threshold must be a (finite )?number in \(0, 1\)") as error:
            call()
        assert "\n" not in str(error.value)
    assert evaluate_multilabel(lp, Y, threshold=0.7)["micro_f1"] == 0.0  # p̄ = 0.6 < 0.7: nothing predicted


def test_shape_errors_name_both_arguments():
    from activebayes.metrics.multilabel import evaluate_multilabel

    lp = torch.log(torch.full((4, 3, 2), 0.6))
    with pytest.raises(ValueError, match=r"^log_probs_N_K_C \[4, 3, 2\] and targets_N_C \[4, 3\] disagree in "
                                         r"C \(classes\)$"):
        evaluate_multilabel(lp, [[1, 0, 1]] * 4)
    with pytest.raises(ValueError, match=r"^log_probs_N_K_C \[4, 3, 2\] and targets_N_C \[3, 2\] disagree in "
                                         r"N \(items\)$"):
        evaluate_multilabel(lp, [[1, 0]] * 3)
    with pytest.raises(ValueError, match=r"^predictions \[2, 3\] and targets \[2, 2\] disagree in shape"):
        M.multilabel_precision_recall_f1([[1, 0], [0, 1]], [[1, 0, 1], [0, 1, 0]])
    # class ids as targets, 0/1 indicators as predictions: the shapes, not the dtype, are the problem
    with pytest.raises(ValueError, match=r"^predictions \[2, 2\] and targets \[2\] disagree in shape: with class ids "
                                         r"\[N\] as targets, predictions are class ids \[N\]"):
        M.hamming_loss([1, 0], [[1, 0], [0, 1]])
    assert M.hamming_loss([1, 0], [[0.2, 0.8], [0.6, 0.4]]) == 0.0  # probabilities [N, C] still work


def test_a_numpy_float_threshold_is_a_number():
    """np.float32(0.7) was refused as 'threshold must be a number in (0, 1)'."""
    import numpy as np

    from activebayes.metrics.multilabel import evaluate_multilabel

    lp = torch.log(torch.full((4, 3, 2), 0.6))
    Y = [[1, 0], [0, 1], [1, 1], [0, 0]]
    assert evaluate_multilabel(lp, Y, threshold=np.float32(0.7)) == evaluate_multilabel(lp, Y, threshold=0.7)
    assert M.hamming_loss(Y, lp.exp()[:, 0], threshold=np.float32(0.5)) == M.hamming_loss(Y, lp.exp()[:, 0])
