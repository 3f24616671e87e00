"""ROC / PR curves, AUROC / AP, threshold sweep, binary confusion, pos_weight."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
import torch
import torchmetrics.functional.classification as tmf

from activebayes import metrics as M


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), atol=tol, rtol=0, equal_nan=True)


def _binary_case(rng, *, ties: bool):
    N = int(rng.integers(2, 50))
    y = rng.integers(0, 2, N)
    y[0], y[1] = 0, 1  # both classes present
    s = rng.integers(0, 5, N) / 4 if ties else rng.random(N)
    return y, s


@pytest.mark.parametrize("ties", [False, True])
def test_curves_and_areas_vs_sklearn(ties):
    rng = np.random.default_rng(10 + ties)
    for _ in range(40):
        y, s = _binary_case(rng, ties=ties)
        for drop in (True, False):
            ours = M.roc_curve(y, s, drop_intermediate=drop)
            ref = skm.roc_curve(y, s, drop_intermediate=drop)
            for a, b in zip(ours, ref, strict=True):
                _close(a, b)
        ours = M.precision_recall_curve(torch.as_tensor(y), torch.as_tensor(s))
        for a, b in zip(ours, skm.precision_recall_curve(y, s), strict=True):
            _close(a, b)
        _close(M.roc_auc_score(y, s), skm.roc_auc_score(y, s))
        _close(M.average_precision_score(y, s), skm.average_precision_score(y, s))
        # pos_label=0 flips the problem
        _close(M.roc_curve(y, -s, pos_label=0).tpr, skm.roc_curve(y, -s, pos_label=0)[1])


def test_two_class_probabilities_use_pos_label_column():
    rng = np.random.default_rng(12)
    y, s = _binary_case(rng, ties=False)
    probs = np.stack([1 - s, s], axis=1)
    _close(M.roc_curve(y, probs).fpr, skm.roc_curve(y, s)[0])
    log_probs_N_K_C = torch.log(torch.as_tensor(probs))[:, None, :].expand(-1, 3, -1)
    _close(M.threshold_sweep(y, log_probs_N_K_C).f1, M.threshold_sweep(y, s).f1)


def test_multiclass_auroc_and_ap_vs_sklearn():
    rng = np.random.default_rng(13)
    for _ in range(10):
        C, N = int(rng.integers(3, 6)), 60
        y = np.concatenate([np.arange(C), rng.integers(0, C, N - C)])
        logits = rng.normal(size=(N, C)) + 1.5 * np.eye(C)[y] * rng.random()
        probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        for avg in ("macro", "weighted"):
            _close(M.roc_auc_score(y, probs, average=avg), skm.roc_auc_score(y, probs, multi_class="ovr", average=avg))
            onehot = np.eye(C)[y]
            _close(M.average_precision_score(y, probs, average=avg), skm.average_precision_score(onehot, probs, average=avg))
        _close(M.roc_auc_score(y, probs, average=None), skm.roc_auc_score(onehot, probs, average=None))


def test_undefined_areas_raise():
    with pytest.raises(ValueError, match="one class"):
        M.roc_auc_score([1, 1], [0.2, 0.3])
    with pytest.raises(ValueError, match="positive"):
        M.average_precision_score([0, 0], [0.2, 0.3])
    with pytest.raises(ValueError, match="absent"):
        M.roc_auc_score([0, 1, 1], [[0.2, 0.3, 0.5]] * 3)
    with pytest.raises(ValueError, match="binary"):
        M.roc_curve([0, 1, 2], [0.2, 0.3, 0.4])


def test_seed_002_validation_confusion_matrix():
    cm = M.BinaryConfusion.from_matrix([[7, 2], [1, 10]])
    assert cm.precision == pytest.approx(0.8333, abs=5e-5)
    assert cm.recall == pytest.approx(0.9091, abs=5e-5)
    assert cm.tpr == pytest.approx(0.9090909090909091, abs=1e-12)
    assert cm.fpr == pytest.approx(0.2222222222222222, abs=1e-12)
    # the same matrix from scores at threshold 0.5: 9 negatives (2 above), 11 positives (1 below)
    y = np.array([0] * 9 + [1] * 11)
    scores = np.array([0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.49, 0.5, 0.9] + [0.3] + [0.6] * 10)
    got = M.binary_confusion_matrix(y, scores, threshold=0.5)
    assert got.matrix.tolist() == skm.confusion_matrix(y, scores >= 0.5).tolist() == [[7, 2], [1, 10]]
    assert got.precision == skm.precision_score(y, scores >= 0.5)
    assert got.f1 == pytest.approx(skm.f1_score(y, scores >= 0.5), abs=1e-12)
    assert got.accuracy == pytest.approx(17 / 20)
    # the seed's other thresholds move the trade-off: 0.3 -> more positives, 0.7 -> fewer
    assert M.binary_confusion_matrix(y, scores, threshold=0.3).fn == 0
    assert M.binary_confusion_matrix(y, scores, threshold=0.95).tp == 0


def test_threshold_sweep_vs_sklearn_per_threshold():
    rng = np.random.default_rng(14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(8):
            y, s = _binary_case(rng, ties=bool(rng.integers(0, 2)))
            for thresholds in (None, 11, [0.0, 0.25, 0.5, 1.01]):
                sweep = M.threshold_sweep(y, s, thresholds=thresholds)
                for i, t in enumerate(sweep.thresholds.tolist()):
                    yhat = s >= t
                    tn, fp, fn, tp = skm.confusion_matrix(y, yhat, labels=[0, 1]).ravel()
                    assert (int(sweep.tn[i]), int(sweep.fp[i]), int(sweep.fn[i]), int(sweep.tp[i])) == (tn, fp, fn, tp)
                    _close(sweep.precision[i], tp / (tp + fp) if tp + fp else 0.0)
                    _close(sweep.recall[i], tp / (tp + fn))
                    _close(sweep.f1[i], 2 * tp / (2 * tp + fp + fn))
                    _close(sweep.fpr[i], fp / (fp + tn))
                if thresholds == 11:  # spot-check one threshold against scikit-learn's scores
                    yhat = s >= 0.5
                    _close(sweep.f1[5], skm.f1_score(y, yhat, zero_division=0))
                    _close(sweep.precision[5], skm.precision_score(y, yhat, zero_division=0))
            best = M.threshold_sweep(y, s).best("f1")
            assert best.f1 == pytest.approx(float(M.threshold_sweep(y, s).f1.max()))
            assert M.binary_confusion_matrix(y, s, threshold=best.threshold) == best


def test_threshold_sweep_matches_torchmetrics_binned_curve():
    rng = np.random.default_rng(15)
    y, s = _binary_case(rng, ties=False)
    grid = torch.linspace(0, 1, 21, dtype=torch.float64)
    prec, rec, _ = tmf.binary_precision_recall_curve(torch.as_tensor(s), torch.as_tensor(y), thresholds=grid)
    sweep = M.threshold_sweep(y, s, thresholds=grid)
    # torchmetrics appends a final (precision 1, recall 0) point, and 0/0 precision is 1 there
    has_pred = (sweep.tp + sweep.fp) > 0
    _close(sweep.recall, rec[:-1])
    _close(sweep.precision[has_pred], prec[:-1][has_pred])


def test_positive_class_weight_balances_bce():
    y = torch.tensor([1.0, 0.0, 0.0, 0.0])
    w = M.positive_class_weight(y)
    assert w.shape == (1,) and w.item() == 3.0
    # seed 002: weighted-sum loss / (w n_pos + n_neg) is the loss where positives weigh as much as negatives
    logits = torch.tensor([2.1972, -1.3863, 0.5, -0.2])
    loss_sum = torch.nn.BCEWithLogitsLoss(reduction="sum", pos_weight=w)(logits, y)
    p = torch.sigmoid(logits).double().numpy()
    yn = y.double().numpy()
    ref = -(3.0 * yn * np.log(p) + (1 - yn) * np.log(1 - p)).sum() / (3 * 1 + 3)
    _close(loss_sum.item() / (3 * 1 + 3), ref, tol=1e-5)
    # multi-label: one weight per label, negatives / positives
    Y = np.array([[1, 0], [1, 1], [0, 0], [0, 0], [1, 0]])
    _close(M.positive_class_weight(Y), (Y.shape[0] - Y.sum(0)) / Y.sum(0))
    with pytest.raises(ValueError, match="positive"):
        M.positive_class_weight([0, 0])
    with pytest.raises(ValueError, match="0 and 1"):
        M.positive_class_weight([0, 2])


def test_binary_confusion_matrix_threshold_is_a_real_number_and_not_nan():
    # np.float32(0.5) was refused as 'threshold must be a number'; nan got the same TypeError as a string
    assert M.binary_confusion_matrix([0, 1], [0.2, 0.7], threshold=np.float32(0.5)).tp == 1
    with pytest.raises(ValueError, match=r"^threshold must be a number, got nan \(no score is >= nan"):
        M.binary_confusion_matrix([0, 1], [0.2, 0.7], threshold=float("nan"))
    with pytest.raises(TypeError, match=r"^threshold must be a real number, got str '0.5'$"):
        M.binary_confusion_matrix([0, 1], [0.2, 0.7], threshold="0.5")


@pytest.mark.parametrize("targets", [[1, 1, 1], [0, 0, 0]])
def test_curves_of_targets_with_one_class_warn_as_scikit_learn_does(targets):
    """With one class in the targets the ROC curve's rates or the PR curve's recall are undefined:
    scikit-learn's values (NaN, recall 1), and now, as scikit-learn, a warning instead of silence."""
    import warnings

    import sklearn.metrics as skm

    scores = [0.2, 0.7, 0.4]
    with pytest.warns(UserWarning, match="roc_curve: targets hold no (negative|positive) item"):
        ours = M.roc_curve(targets, scores)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fpr, tpr, _ = skm.roc_curve(targets, scores, drop_intermediate=True)
    np.testing.assert_allclose(ours.fpr.numpy(), fpr)
    np.testing.assert_allclose(ours.tpr.numpy(), tpr)
    if targets[0] == 0:
        with pytest.warns(UserWarning, match="precision_recall_curve: targets hold no positive item"):
            M.precision_recall_curve(targets, scores)
