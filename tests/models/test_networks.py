"""Reference networks and the registry."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from activebayes.models import (
    MLP,
    BatchBALDCNN,
    ConsistentMCDropout,
    ConsistentMCDropout2d,
    Ensemble,
    GalCNN,
    available_models,
    build_model,
    predict_log_probs,
)
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models.networks import check_model_input


def _n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_gal_cnn_layout_matches_the_paper():
    net = GalCNN()
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    drops = [m for m in net.modules() if isinstance(m, ConsistentMCDropout)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [(32, (4, 4)), (32, (4, 4))]
    assert [(l.in_features, l.out_features) for l in linears] == [(32 * 11 * 11, 128), (128, 10)]
    assert [d.p for d in drops] == [0.25, 0.5]
    # Keras count for the same layers: conv 1*16*32+32, conv 32*16*32+32, dense 3872*128+128, 128*10+10
    assert _n_params(net) == (16 * 32 + 32) + (32 * 16 * 32 + 32) + (3872 * 128 + 128) + (128 * 10 + 10)


def test_batchbald_cnn_layout_matches_the_reference_example():
    net = BatchBALDCNN()
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [(32, (5, 5)), (64, (5, 5))]
    assert [(l.in_features, l.out_features) for l in linears] == [(1024, 128), (128, 10)]
    kinds = [type(m) for m in net.net if isinstance(m, (ConsistentMCDropout, ConsistentMCDropout2d))]
    assert kinds == [ConsistentMCDropout2d, ConsistentMCDropout2d, ConsistentMCDropout]


@pytest.mark.parametrize("name", ["mlp", "gal_cnn", "batchbald_cnn"])
@pytest.mark.parametrize("shape", [(1, 28, 28), (1, 8, 8), (3, 12, 12), (1, 28, 56), (2, 8, 30), (1, 5, 40)])
def test_every_registered_model_works_on_mnist_and_digits_shapes(name, shape):
    net = build_model(name, num_classes=7, input_shape=shape, generator=0)
    x = torch.randn(3, *shape)
    assert net(x).shape == (3, 7)
    log_probs = predict_log_probs(net, x, 4, generator=0)
    assert log_probs.shape == (3, 4, 7)
    assert (log_probs[:, 0] - log_probs[:, 1]).abs().max() > 0  # stochastic


def test_registry_names_and_errors():
    assert available_models() == ["auto", "batchbald_cnn", "encoder_head", "gal_cnn", "mlp"]
    with pytest.raises(ValueError, match="unknown model name 'resnet'"):
        build_model("resnet", num_classes=10, input_shape=(1, 28, 28))
    with pytest.raises(InvalidArgumentError, match=r"model \(--model\) 'gal_cnn' needs images, input_shape \(C, H, W\)"
                       r" or \(H, W\); got items of shape \(64,\): use 'mlp'"):
        build_model("gal_cnn", num_classes=10, input_shape=(64,))
    check_model_input("batchbald_cnn", (1, 28, 56))  # images, and any shape for the MLP, pass
    check_model_input("mlp", (89,))
    with pytest.raises(InvalidArgumentError, match="'batchbald_cnn' needs images"):
        check_model_input("batchbald_cnn", (89,))
    with pytest.raises(ValueError, match="height"):
        BatchBALDCNN(image_size=(0, 28))
    with pytest.raises(ValueError, match="side S or a \\(height, width\\) pair"):
        GalCNN(image_size=(28, 28, 28))
    with pytest.raises(ValueError, match="too small"):
        GalCNN(image_size=6, padding=0)


def test_build_model_is_seeded_and_builds_ensembles():
    a = build_model("mlp", num_classes=3, input_shape=(5,), generator=1)
    b = build_model("mlp", num_classes=3, input_shape=(5,), generator=1)
    c = build_model("mlp", num_classes=3, input_shape=(5,), generator=2)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    assert not torch.equal(next(a.parameters()), next(c.parameters()))
    ens = build_model("mlp", num_classes=3, input_shape=(5,), ensemble_size=4, generator=1)
    assert isinstance(ens, Ensemble) and len(ens) == 4
    w = [m.net[1].weight for m in ens.members]
    assert not torch.equal(w[0], w[1])  # independently initialised
    ens2 = build_model("mlp", num_classes=3, input_shape=(5,), ensemble_size=4, generator=1)
    assert all(torch.equal(x, y) for x, y in zip(ens.parameters(), ens2.parameters()))


def test_mlp_options_and_ensemble_errors():
    net = MLP(in_features=10, num_classes=2, hidden=(8, 6, 4), p=0.2)
    assert [m.p for m in net.modules() if isinstance(m, ConsistentMCDropout)] == [0.2] * 3
    with pytest.raises(ValueError, match="members"):
        Ensemble([])
    with pytest.raises(TypeError, match=r"members\[1\]"):
        Ensemble([nn.Linear(2, 2), "not a module"])
    with pytest.raises(ValueError, match="size"):
        Ensemble.from_factory(lambda: nn.Linear(2, 2), 0)


def test_auto_model_choice():
    from activebayes.models import BatchBALDCNN, MLP, available_models, build_model, default_model_name

    assert default_model_name((64,)) == "mlp"
    assert default_model_name((1, 8, 8)) == "mlp"
    assert default_model_name((1, 28, 28)) == "batchbald_cnn"
    assert "auto" in available_models()
    assert isinstance(build_model("auto", num_classes=10, input_shape=(1, 8, 8), generator=0), MLP)
    assert isinstance(build_model("auto", num_classes=10, input_shape=(1, 28, 28), generator=0), BatchBALDCNN)


def _original_order(net: BatchBALDCNN) -> nn.Module:
    """batchbald_redux's order (channel dropout straight after each conv), built from the
    same module objects: same weights, same held masks."""
    m = net.net
    return nn.Sequential(m[0], m[3], m[1], m[2], m[4], m[7], m[5], m[6], *m[8:])


@pytest.mark.parametrize("image_size", [28, 8])
def test_batchbald_cnn_reordered_dropout_is_the_same_function(image_size):
    # channel dropout after max-pool + relu instead of before: exact for scales z/(1-p) >= 0
    net = build_model("batchbald_cnn", num_classes=10, input_shape=(1, image_size, image_size), generator=0)
    assert list(net.state_dict()) == ["net.0.weight", "net.0.bias", "net.4.weight", "net.4.bias",
                                      "net.9.weight", "net.9.bias", "net.12.weight", "net.12.bias"]
    x = torch.randn(37, 1, image_size, image_size)
    # the network's layers run one after another (no factorised conv2): exactly the original order
    layers_N_K_C = predict_log_probs(nn.Sequential(*net.net), x, 16, generator=3, batch_size=8)
    reference_N_K_C = predict_log_probs(_original_order(net), x, 16, batch_size=5)  # the held masks
    assert torch.equal(layers_N_K_C, reference_N_K_C)
    # BatchBALDCNN.forward computes conv2 for all masks from per-channel sums: float rounding apart
    ours_N_K_C = predict_log_probs(net, x, 16, batch_size=8)
    torch.testing.assert_close(ours_N_K_C, reference_N_K_C, rtol=0, atol=1e-5)
    assert (ours_N_K_C - reference_N_K_C).abs().max() < 1e-5
    net.eval()
    assert torch.equal(net(x), _original_order(net)(x))


def test_batchbald_cnn_reordered_dropout_trains_to_the_same_weights():
    from activebayes.models import fit

    torch.manual_seed(0)
    x, y = torch.randn(48, 1, 28, 28), torch.randint(0, 10, (48,))
    net = build_model("batchbald_cnn", num_classes=10, input_shape=(1, 28, 28), generator=1)
    reference = BatchBALDCNN()
    reference.load_state_dict(net.state_dict())
    options = dict(validation=(x[:16], y[:16]), max_epochs=2, min_samples_per_epoch=96, generator=5)
    fit(net, (x, y), **options)
    fit(_original_order(reference), (x, y), **options)  # trains reference's own layers
    for name, value in net.state_dict().items():
        assert torch.allclose(value, reference.state_dict()[name], atol=1e-6), name


@pytest.mark.parametrize("height, width, flat", [(28, 56, 64 * 4 * 11), (56, 28, 64 * 11 * 4), (28, 28, 1024)])
def test_batchbald_cnn_takes_non_square_images(height, width, flat):
    # valid 5x5 convs and 2x2 pools per side: 28 -> 24 -> 12 -> 8 -> 4, 56 -> 52 -> 26 -> 22 -> 11
    net = build_model("auto", num_classes=10, input_shape=(1, height, width), generator=0)
    assert isinstance(net, BatchBALDCNN)
    assert net.net[9].in_features == flat
    assert net(torch.randn(2, 1, height, width)).shape == (2, 10)
    # a square image_size given as a pair builds the same network as the side
    a, b = BatchBALDCNN(image_size=28), BatchBALDCNN(image_size=(28, 28))
    assert [p.shape for p in a.parameters()] == [p.shape for p in b.parameters()]


def test_gal_cnn_pads_only_when_one_side_is_too_small():
    # 8 x 40: valid 4x4 convs leave 2 x 34, pooled 1 x 17 -- no padding needed
    assert GalCNN(image_size=(8, 40)).features[0].padding == (0, 0)
    # 5 x 40: the height would vanish, so "same" padding (2) for both sides
    assert GalCNN(image_size=(5, 40)).features[0].padding == (2, 2)


@pytest.mark.parametrize(("name", "option", "message"), [
    ("gal_cnn", {"dropout": 0.3}, "unknown option of model 'gal_cnn' 'dropout'; expected one of: p_conv, p_fc, padding"),
    ("mlp", {"hiden": (8,)}, "unknown option of model 'mlp' 'hiden' (did you mean 'hidden'?); expected one of: hidden, p"),
])
def test_an_option_a_built_in_network_does_not_take_is_named_with_its_options(name, option, message):
    from activebayes.models import build_model

    with pytest.raises(InvalidArgumentError) as caught:
        build_model(name, num_classes=10, input_shape=(1, 28, 28), **option)
    assert str(caught.value) == message + " (model_options, or build_model's keywords)"
    # a network registered by the user keeps its own TypeError (its options are not known here)
    from activebayes.models import register_model
    from activebayes.models.networks import MODELS

    register_model("strict_net", lambda *, num_classes, input_shape: nn.Linear(4, num_classes), replace=True)
    try:
        with pytest.raises(TypeError, match="unexpected keyword argument 'width'"):
            build_model("strict_net", num_classes=3, input_shape=(4,), width=2)
    finally:
        MODELS.unregister("strict_net")


def test_the_mlp_takes_one_width_as_the_heads_do():
    """``hidden=64`` (the heads' spelling) is one hidden layer of 64, as ``hidden=(64,)``; it was a TypeError."""
    one = MLP(in_features=64, num_classes=10, hidden=64)
    widths = [m.out_features for m in one.net if isinstance(m, nn.Linear)]
    assert widths == [64, 10] == [m.out_features for m in MLP(in_features=64, num_classes=10, hidden=(64,)).net
                                  if isinstance(m, nn.Linear)]
    built = build_model("mlp", num_classes=10, input_shape=(1, 8, 8), hidden=32, generator=0)
    assert [m.out_features for m in built.modules() if isinstance(m, nn.Linear)] == [32, 10]


def test_ensemble_members_with_different_numbers_of_classes_are_named():
    """It was a raw RuntimeError: stack expects each tensor to be equal size."""
    ensemble = Ensemble([nn.Linear(4, 3), nn.Linear(4, 5), nn.Linear(4, 3)])
    with pytest.raises(InvalidArgumentError, match=r"^the ensemble's members must all return logits \[n, C\] for the "
                                                   r"same C classes, got: members 0, 2 give \[2, 3\]; members 1 give "
                                                   r"\[2, 5\]$"):
        ensemble(torch.randn(2, 4))


def test_ensemble_factory_with_arguments_is_named_before_it_is_called():
    """Ensemble.from_factory(lambda gen: ..., 3) was a raw TypeError (missing 1 required positional argument)."""
    calls = []

    def factory(generator):
        calls.append(generator)
        return nn.Linear(4, 3)

    with pytest.raises(InvalidTypeError, match=r"^factory is called with no arguments \(\(\) -> a new nn.Module, each "
                                               r"member built under its own seed of the global RNG\), but "
                                               r".*factory\(generator\) needs some$"):
        Ensemble.from_factory(factory, 3)
    assert calls == []
    with pytest.raises(InvalidTypeError, match=r"^factory must return a new torch.nn.Module per call, got NoneType$"):
        Ensemble.from_factory(lambda: None, 3)
    assert len(Ensemble.from_factory(lambda width=3: nn.Linear(4, width), 2)) == 2  # defaults are fine
