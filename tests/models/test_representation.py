"""The self-supervised representation (SimCLR) and the MC dropout head on top of it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from scipy import ndimage
from torch import nn

from activebayes.errors import InvalidArgumentError
from activebayes.models import (
    EncoderClassifier,
    build_model,
    fit,
    mc_dropout_layers,
    predict_log_probs,
)
from activebayes.models import representation as rep
from activebayes.models.representation import (
    Augmentation,
    ConvEncoder,
    RepresentationConfig,
    augment,
    dataset_fingerprint,
    features,
    nt_xent_loss,
    train_encoder,
    train_or_load_representation,
)

NO_AUGMENTATION = Augmentation(
    rotation=0.0, shear=0.0, scale=(1.0, 1.0), translate=0.0, contrast=0.0, erase_prob=0.0, noise=0.0
)
TINY = RepresentationConfig(width=4, feature_dim=8, projection_dim=4, epochs=2, batch_size=16)


def _images(n: int = 32, size: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 1, size, size, generator=torch.Generator().manual_seed(seed))


def _same_weights(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# --------------------------------------------------------------------------- NT-Xent
def _nt_xent_numpy(z_a: np.ndarray, z_b: np.ndarray, tau: float) -> float:
    """Chen et al. 2020, eq. 1 and the loss over all 2n positive pairs, written out in float64."""
    z = np.concatenate([z_a, z_b]).astype(np.float64)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    two_n = z.shape[0]
    n = two_n // 2
    total = 0.0
    for i in range(two_n):
        positive = (i + n) % two_n
        denominator = sum(math.exp(z[i] @ z[k] / tau) for k in range(two_n) if k != i)
        total += -math.log(math.exp(z[i] @ z[positive] / tau) / denominator)
    return total / two_n


@pytest.mark.parametrize(("n", "P", "tau"), [(2, 3, 1.0), (5, 4, 0.5), (7, 16, 0.1)])
def test_nt_xent_matches_a_float64_numpy_reference(n, P, tau):
    g = torch.Generator().manual_seed(n * 100 + P)
    z_a, z_b = torch.randn(n, P, generator=g, dtype=torch.float64), torch.randn(n, P, generator=g, dtype=torch.float64)
    expected = _nt_xent_numpy(z_a.numpy(), z_b.numpy(), tau)
    assert float(nt_xent_loss(z_a, z_b, tau)) == pytest.approx(expected, rel=1e-10)
    # float32 and an unnormalised scale give the same loss (the projections are normalised)
    assert float(nt_xent_loss(3 * z_a.float(), z_b.float(), tau)) == pytest.approx(expected, rel=1e-4)


def test_nt_xent_is_symmetric_in_the_views_and_rejects_bad_input():
    z_a, z_b = torch.randn(6, 5), torch.randn(6, 5)
    assert float(nt_xent_loss(z_a, z_b, 0.5)) == pytest.approx(float(nt_xent_loss(z_b, z_a, 0.5)), rel=1e-6)
    with pytest.raises(InvalidArgumentError, match="at least 2 images"):
        nt_xent_loss(z_a[:1], z_b[:1], 0.5)
    with pytest.raises(InvalidArgumentError, match=r"\[n, P\]"):
        nt_xent_loss(z_a, z_b[:3], 0.5)
    with pytest.raises(ValueError, match="temperature"):
        nt_xent_loss(z_a, z_b, 0.0)


# --------------------------------------------------------------------------- augmentations
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("size", [8, 28])
def test_augment_keeps_shape_and_dtype_and_is_seeded(dtype, size):
    x = _images(6, size).to(dtype)
    aug = rep.default_augmentation(size)
    first = augment(x, aug, generator=torch.Generator().manual_seed(3))
    again = augment(x, aug, generator=torch.Generator().manual_seed(3))
    other = augment(x, aug, generator=torch.Generator().manual_seed(4))
    assert first.shape == x.shape and first.dtype == dtype
    assert torch.equal(first, again)
    assert not torch.allclose(first, other)
    assert torch.isfinite(first).all()


def test_augment_without_strength_is_the_identity():
    x = _images(4, 28)
    out = augment(x, NO_AUGMENTATION, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, x, atol=1e-5, rtol=0)


@pytest.mark.parametrize("zoom", [0.8, 1.5])
def test_augment_zoom_matches_scipy_bilinear_resampling(zoom):
    """A fixed zoom (scale=(s, s)): output pixel i reads the input at its centre / s, with
    the border value outside, computed independently by scipy's map_coordinates."""
    x = _images(3, 12, seed=5).double()
    aug = dataclasses.replace(NO_AUGMENTATION, scale=(zoom, zoom))
    out = augment(x, aug, generator=torch.Generator().manual_seed(0))
    size = 12
    normalised = (2 * np.arange(size) + 1) / size - 1  # pixel centres, align_corners=False
    source = ((normalised / zoom + 1) * size - 1) / 2  # back to pixel indices
    rows, cols = np.meshgrid(source, source, indexing="ij")
    for i in range(3):
        expected = ndimage.map_coordinates(x[i, 0].numpy(), [rows, cols], order=1, mode="nearest")
        np.testing.assert_allclose(out[i, 0].numpy(), expected, atol=1e-10)


def test_augment_contrast_erasing_and_noise_do_what_they_say():
    x = _images(8, 28, seed=2)
    background = x.flatten(1).amin(dim=1)
    g = torch.Generator().manual_seed(1)
    # contrast: x' - b = gain * (x - b), one gain per image within [1 - c, 1 + c]
    out = augment(x, dataclasses.replace(NO_AUGMENTATION, contrast=0.3), generator=g)
    x_b, out_b = (x - background.view(-1, 1, 1, 1)).flatten(1), (out - background.view(-1, 1, 1, 1)).flatten(1)
    gains = (out_b * x_b).sum(dim=1) / (x_b * x_b).sum(dim=1)  # least squares, one gain per image
    assert ((gains >= 0.7 - 1e-5) & (gains <= 1.3 + 1e-5)).all()
    assert gains.std() > 0.01  # drawn per image
    torch.testing.assert_close(out_b, gains.view(-1, 1) * x_b, atol=1e-4, rtol=0)
    # erasing: every image gets one rectangle of ~20% of its area set to its background
    out = augment(x, dataclasses.replace(NO_AUGMENTATION, erase_prob=1.0, erase_area=(0.2, 0.2)), generator=g)
    erased = (out.flatten(1) == background.view(-1, 1)) & (x.flatten(1) != background.view(-1, 1))
    torch.testing.assert_close(out.flatten(1)[~erased], x.flatten(1)[~erased], atol=1e-5, rtol=0)
    fraction = erased.double().mean(dim=1)
    assert ((fraction > 0.1) & (fraction < 0.3)).all()
    # noise: the difference has the requested standard deviation
    out = augment(x, dataclasses.replace(NO_AUGMENTATION, noise=0.5), generator=g)
    assert float((out - x).std()) == pytest.approx(0.5, rel=0.05)


def test_augmentation_validates_its_fields():
    with pytest.raises(ValueError, match="scale"):
        Augmentation(scale=(1.2, 0.8))
    with pytest.raises(ValueError, match="erase_prob"):
        Augmentation(erase_prob=1.5)
    with pytest.raises(ValueError, match="batch_size"):
        RepresentationConfig(batch_size=1)


# --------------------------------------------------------------------------- training
def test_training_is_reproducible_with_the_seed():
    x = _images()
    first = train_encoder(x, TINY, seed=7)
    again = train_encoder(x, TINY, seed=7)
    other = train_encoder(x, TINY, seed=8)
    assert _same_weights(first.encoder, again.encoder)
    assert not _same_weights(first.encoder, other.encoder)
    assert [h.epoch for h in first.history] == [1, 2]
    assert all(math.isfinite(h.loss) for h in first.history)


def test_training_lowers_the_contrastive_loss():
    x = _images(64)
    config = dataclasses.replace(TINY, epochs=8, lr=5e-3)
    history = train_encoder(x, config, seed=0).history
    assert history[-1].loss < history[0].loss


class _Interrupt(Exception):
    pass


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, epochs: int) -> None:
    original = rep._train_epoch
    calls = []

    def epoch(*args, **kwargs):
        if len(calls) == epochs:
            raise _Interrupt
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(rep, "_train_epoch", epoch)


def test_a_killed_training_leaves_no_cache_and_resumes_to_the_same_weights(tmp_path, monkeypatch):
    x = _images()
    config = dataclasses.replace(TINY, epochs=3)
    uninterrupted = train_or_load_representation(x, config, seed=2, cache_dir=tmp_path / "a")
    with monkeypatch.context() as patch:
        _interrupt_after(patch, 2)
        with pytest.raises(_Interrupt):
            train_or_load_representation(x, config, seed=2, cache_dir=tmp_path / "b")
    files = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert not any(name.endswith(".pt") and not name.endswith(".partial.pt") for name in files), files
    assert not any(name.endswith(".tmp") for name in files), files
    assert any(name.endswith(".partial.pt") for name in files), files
    resumed = train_or_load_representation(x, config, seed=2, cache_dir=tmp_path / "b")
    assert resumed.trained
    assert _same_weights(resumed.encoder, uninterrupted.encoder)
    assert [h.loss for h in resumed.history] == [h.loss for h in uninterrupted.history]
    assert not any(p.name.endswith(".partial.pt") for p in (tmp_path / "b").iterdir())


def test_cache_hit_returns_the_same_weights_without_training(tmp_path, monkeypatch):
    x = _images()
    trained = train_or_load_representation(x, TINY, seed=3, cache_dir=tmp_path)
    assert trained.trained and trained.path is not None and trained.path.is_file()
    calls = []
    original = rep.train_encoder

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(rep, "train_encoder", counting)
    loaded = train_or_load_representation(x.clone(), TINY, seed=3, cache_dir=tmp_path)
    assert calls == [] and not loaded.trained
    assert _same_weights(loaded.encoder, trained.encoder)
    assert loaded.config == trained.config and loaded.history == trained.history
    assert loaded.fingerprint == dataset_fingerprint(x)
    torch.testing.assert_close(features(loaded, x), features(trained, x), rtol=0, atol=0)
    # another seed, config or data set is another key: trained anew
    train_or_load_representation(x, TINY, seed=4, cache_dir=tmp_path)
    train_or_load_representation(x, dataclasses.replace(TINY, temperature=0.2), seed=3, cache_dir=tmp_path)
    x2 = x.clone()
    x2[0, 0, 0, 0] += 1.0
    train_or_load_representation(x2, TINY, seed=3, cache_dir=tmp_path)
    assert len(calls) == 3


def test_train_or_load_validates_its_arguments(tmp_path):
    with pytest.raises(ValueError, match="square images"):
        train_or_load_representation(torch.randn(4, 1, 8, 6), TINY, cache=False)
    with pytest.raises(TypeError, match="config"):
        train_or_load_representation(_images(), {"epochs": 1}, cache=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="cache_dir"):
        train_or_load_representation(_images(), TINY, cache_dir=tmp_path / "file")


def test_features_are_the_encoder_output_in_eval_mode():
    encoder = ConvEncoder(image_size=8, width=4, feature_dim=6).train()
    x = _images(10)
    out = features(encoder, x, batch_size=3)
    assert encoder.training  # restored
    with torch.no_grad():
        expected = encoder.eval()(x)
    torch.testing.assert_close(out, expected)


# --------------------------------------------------------------------------- the MC dropout head
@pytest.fixture(scope="module")
def representation():
    return train_or_load_representation(_images(48, 28), dataclasses.replace(TINY, epochs=1), seed=0, cache=False)


def test_build_model_copies_the_encoder_and_needs_one(representation):
    a = build_model("encoder_head", num_classes=3, input_shape=(1, 28, 28), encoder=representation, generator=0)
    b = build_model("encoder_head", num_classes=3, input_shape=(1, 28, 28), encoder=representation, generator=0)
    assert isinstance(a, EncoderClassifier)
    assert a.encoder is not representation.encoder and a.encoder is not b.encoder
    assert _same_weights(a, b)  # seeded head, same encoder
    assert len(mc_dropout_layers(a)) == 2
    with pytest.raises(ValueError, match="encoder="):
        build_model("encoder_head", num_classes=3, input_shape=(1, 28, 28))


def test_frozen_encoder_runs_once_per_item_and_samples_are_consistent(representation):
    # without the feature cache: the batched MC path runs the deterministic encoder on items
    net = build_model(
        "encoder_head", num_classes=4, input_shape=(1, 28, 28), encoder=representation, generator=1,
        feature_cache=False,
    )
    rows = []
    handle = net.encoder.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[0]))
    x = _images(12, 28, seed=9)
    K = 6
    log_probs_N_K_C = predict_log_probs(net, x, K, generator=5, batch_size=12)
    # the encoder saw items, never item x sample rows (a one-item probe plus the chunk)
    assert max(rows) == 12 and sum(rows) < 2 * 12
    handle.remove()
    # sample k is one function: other chunkings and the sequential path give the same numbers
    for batch_size in (1, 5):
        torch.testing.assert_close(predict_log_probs(net, x, K, generator=5, batch_size=batch_size), log_probs_N_K_C)
    torch.testing.assert_close(
        predict_log_probs(net, x, K, generator=5, sampling="sequential"), log_probs_N_K_C, rtol=1e-5, atol=1e-6
    )
    # ... and the K samples differ (the head's dropout is sampled)
    assert not torch.allclose(log_probs_N_K_C[:, 0], log_probs_N_K_C[:, 1])


def test_fit_trains_only_the_head_of_a_frozen_encoder_and_all_of_a_fine_tuned_one(representation):
    x, y = _images(20, 28, seed=3), torch.arange(20) % 4
    for freeze in (True, False):
        net = build_model(
            "encoder_head", num_classes=4, input_shape=(1, 28, 28), encoder=representation,
            freeze_encoder=freeze, generator=2,
        )
        encoder_before = {k: v.clone() for k, v in net.encoder.state_dict().items()}
        head_before = {k: v.clone() for k, v in net.head.state_dict().items()}
        fit(net, (x, y), max_epochs=1, min_samples_per_epoch=64, batch_size=16, generator=0)
        after = net.encoder.state_dict()
        weights_changed = any(
            not torch.equal(encoder_before[k], after[k]) for k in after if k.endswith("weight")
        )
        stats_unchanged = all(
            torch.equal(encoder_before[k], after[k]) for k in after if "running" in k or "num_batches" in k
        )
        assert weights_changed is (not freeze)
        assert stats_unchanged  # batch norm keeps the pretraining statistics in both modes
        assert any(not torch.equal(head_before[k], v) for k, v in net.head.state_dict().items())


def test_feature_cache_gives_the_same_predictions_and_skips_the_encoder(representation):
    x = _images(10, 28, seed=4)
    cached = build_model("encoder_head", num_classes=4, input_shape=(1, 28, 28), encoder=representation, generator=3)
    plain = build_model(
        "encoder_head", num_classes=4, input_shape=(1, 28, 28), encoder=representation, generator=3,
        feature_cache=False,
    )
    assert _same_weights(cached, plain)
    rows = []
    cached.encoder.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[0]))
    expected = predict_log_probs(plain, x, 4, generator=1)
    torch.testing.assert_close(predict_log_probs(cached, x, 4, generator=1), expected)
    seen = sum(rows)
    # a second pass, in another order and chunking, reads every feature from the cache
    permutation = torch.randperm(10, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(predict_log_probs(cached, x[permutation], 4, generator=1, batch_size=3), expected[permutation])
    assert sum(rows) == seen
    # fit sees the same features as without the cache: same weights after training
    y = torch.arange(10) % 4
    for net in (cached, plain):
        fit(net, (x, y), max_epochs=2, min_samples_per_epoch=40, batch_size=8, generator=0)
    torch.testing.assert_close(cached.state_dict(), plain.state_dict())
    assert sum(rows) == seen  # fit needed no encoder pass either
    cached.double()  # a new dtype: features computed again
    assert not cached._features


# --------------------------------------------------------------------------- the recipe can fail
def _captured_pairs(monkeypatch, augment_fn=None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Train one tiny epoch, recording the projections NT-Xent sees for the two views."""
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    real_loss = rep.nt_xent_loss

    def spy(z_a, z_b, temperature):
        pairs.append((z_a.detach().clone(), z_b.detach().clone()))
        return real_loss(z_a, z_b, temperature)

    monkeypatch.setattr(rep, "nt_xent_loss", spy)
    if augment_fn is not None:
        monkeypatch.setattr(rep, "augment", augment_fn)
    config = dataclasses.replace(TINY, epochs=1, batch_size=8)
    train_encoder(_images(24, size=8), config, seed=0)
    return pairs


def test_each_simclr_step_sees_two_different_views_of_every_item(monkeypatch):
    pairs = _captured_pairs(monkeypatch)
    assert len(pairs) == 3  # 24 images, 8 per step
    for z_a, z_b in pairs:
        # every item's two views are different random draws: their projections differ
        assert bool(((z_a - z_b).abs().amax(dim=1) > 1e-6).all())
    # the check can fail: a recipe whose two views are the same draw is caught
    real_augment = rep.augment

    def same_draw(images, augmentation, *, generator):
        state = generator.get_state()
        out = real_augment(images, augmentation, generator=generator)
        generator.set_state(state)  # the second call repeats the first draw
        return out

    monkeypatch.undo()
    broken = _captured_pairs(monkeypatch, same_draw)
    assert all(torch.equal(z_a, z_b) for z_a, z_b in broken)


def _nearest_neighbour_accuracy(features_N_D, targets_N, per_class: int, seed: int) -> float:
    """1-NN (cosine) with ``per_class`` labelled items per class, accuracy on the rest."""
    g = torch.Generator().manual_seed(seed)
    labelled = torch.cat([
        torch.nonzero(targets_N == c).reshape(-1)[torch.randperm(int((targets_N == c).sum()), generator=g)[:per_class]]
        for c in range(int(targets_N.max()) + 1)
    ])
    rest = torch.ones(len(targets_N), dtype=torch.bool)
    rest[labelled] = False
    f = torch.nn.functional.normalize(features_N_D, dim=1)
    predicted = targets_N[labelled][(f[rest] @ f[labelled].T).argmax(dim=1)]
    return float((predicted == targets_N[rest]).float().mean())


def test_a_trained_encoder_beats_a_randomly_initialised_one_on_digits():
    """k-NN probe on the sklearn digits (real images, 8x8): 5 labels per class, 3 label draws."""
    from activebayes.data import load_dataset

    digits = load_dataset("digits", split="train")
    config = RepresentationConfig(width=16, feature_dim=64, projection_dim=32, epochs=5, batch_size=128)
    trained = train_encoder(digits.inputs, config, seed=0).encoder
    untrained, _ = rep._build(config.resolved(8), 1, 8, 0)  # the same initialisation, not trained
    untrained.eval()
    ours = features(trained, digits.inputs)
    random_init = features(untrained, digits.inputs)
    accuracy = [(_nearest_neighbour_accuracy(ours, digits.targets, 5, s),
                 _nearest_neighbour_accuracy(random_init, digits.targets, 5, s)) for s in range(3)]
    trained_mean = sum(a for a, _ in accuracy) / 3
    random_mean = sum(b for _, b in accuracy) / 3
    assert trained_mean > random_mean + 0.05, accuracy
