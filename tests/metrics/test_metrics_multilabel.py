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
