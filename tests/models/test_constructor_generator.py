"""``generator=`` of the public network constructors (``activebayes._seeding.seedable_init``).

Every class of :mod:`activebayes.models` that initialises weights takes a keyword-only
``generator`` (a ``torch.Generator``, an int seed or ``None``). Before, they drew only from
torch's global RNG: ``MLP(...)`` twice gave two networks, and seeding one meant seeding the
whole process. References: the same constructor under another seed, torch's global
generator state, and ``build_model`` (which seeded the same way already and must not change).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest
import torch
from torch import nn

import activebayes.models as models
from activebayes.errors import InvalidTypeError
from activebayes.models import (
    MLP,
    BatchBALDCNN,
    ConvEncoder,
    EncoderClassifier,
    GalCNN,
    LastLayerLaplace,
    MCDropoutConv2d,
    MCDropoutLinear,
    build_model,
)

Seed = torch.Generator | int | None

#: one small instance of each public class that initialises weights, built with ``generator``
SEEDED: dict[str, Callable[[Seed], nn.Module]] = {
    "MLP": lambda g: MLP(in_features=6, num_classes=3, hidden=(8, 5), generator=g),
    "GalCNN": lambda g: GalCNN(image_size=8, num_classes=3, generator=g),
    "BatchBALDCNN": lambda g: BatchBALDCNN(image_size=8, num_classes=3, generator=g),
    "EncoderClassifier": lambda g: EncoderClassifier(nn.Flatten(), num_classes=3, feature_dim=16, hidden=8,
                                                     generator=g),
    "ConvEncoder": lambda g: ConvEncoder(image_size=8, width=4, feature_dim=8, generator=g),
    "MCDropoutLinear": lambda g: MCDropoutLinear(4, 2, generator=g),
    "MCDropoutConv2d": lambda g: MCDropoutConv2d(1, 4, 3, p=0.25, generator=g),
    "LastLayerLaplace": lambda g: LastLayerLaplace(nn.Identity(), feature_dim=4, num_classes=3, generator=g),
}
#: exported modules without random weights of their own: nothing for a generator to seed
UNSEEDED = {
    "ConsistentMCDropout": "no weights; masks come from (mask_seed, layer, k)",
    "ConsistentMCDropout2d": "no weights; masks come from (mask_seed, layer, k)",
    "Ensemble": "takes built members (Ensemble.from_factory takes generator=)",
    "FrozenEncoder": "wraps the user's encoder as given",
}


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.clone() for key, value in module.state_dict().items()}


def same(a: nn.Module, b: nn.Module) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[key], wb[key]) for key in wa)


def test_every_exported_module_class_is_seeded_or_has_no_weights_to_seed() -> None:
    exported = {name for name in models.__all__
                if inspect.isclass(getattr(models, name)) and issubclass(getattr(models, name), nn.Module)}
    assert exported == set(SEEDED) | set(UNSEEDED)
    for name in SEEDED:
        parameter = inspect.signature(getattr(models, name)).parameters["generator"]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
        assert "generator" in getattr(models, name).__doc__


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_the_same_seed_gives_the_same_weights_and_another_seed_others(name: str) -> None:
    build = SEEDED[name]
    torch.manual_seed(1)
    a = build(3)
    torch.manual_seed(2)  # the global RNG plays no part
    b = build(3)
    assert same(a, b)
    assert not same(a, build(4))


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_a_generator_seeds_as_well(name: str) -> None:
    build = SEEDED[name]
    a = build(torch.Generator().manual_seed(5))
    b = build(torch.Generator().manual_seed(5))
    assert same(a, b)
    assert not same(a, build(torch.Generator().manual_seed(6)))
    generator = torch.Generator().manual_seed(5)
    assert not same(build(generator), build(generator))  # a generator is drawn from, as everywhere


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_torch_global_rng_is_as_it_was_after_a_seeded_construction(name: str) -> None:
    torch.manual_seed(123)
    expected = torch.rand(8)
    torch.manual_seed(123)
    SEEDED[name](0)
    SEEDED[name](torch.Generator().manual_seed(0))
    assert torch.equal(torch.rand(8), expected)


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_none_draws_from_the_global_rng_as_before(name: str) -> None:
    torch.manual_seed(9)
    a = SEEDED[name](None)
    after_a = torch.rand(4)
    torch.manual_seed(9)
    b = SEEDED[name](None)
    assert same(a, b)
    assert torch.equal(torch.rand(4), after_a)  # the global RNG advanced, as it did
    assert not same(a, SEEDED[name](None))


@pytest.mark.parametrize("name", ["MLP", "ConvEncoder", "LastLayerLaplace"])
@pytest.mark.parametrize("bad", ["0", 1.5, True])
def test_a_generator_of_another_type_is_refused_by_name(name: str, bad: object) -> None:
    with pytest.raises(InvalidTypeError, match=r"^generator must be a torch.Generator, an int seed or None, got "):
        SEEDED[name](bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("model", "build"), [
    ("mlp", lambda g: MLP(in_features=64, num_classes=4, generator=g)),
    ("gal_cnn", lambda g: GalCNN(num_classes=4, image_size=8, generator=g)),
    ("batchbald_cnn", lambda g: BatchBALDCNN(num_classes=4, image_size=8, generator=g)),
])
def test_a_seeded_class_is_what_build_model_builds_with_that_seed(model: str, build) -> None:
    assert same(build(11), build_model(model, num_classes=4, input_shape=(1, 8, 8), generator=11))
    assert same(build(torch.Generator().manual_seed(2)),
                build_model(model, num_classes=4, input_shape=(1, 8, 8), generator=torch.Generator().manual_seed(2)))


def test_build_model_weights_are_unchanged() -> None:
    """Pinned on the code before constructors took ``generator`` (committed results depend on it)."""
    net = build_model("mlp", num_classes=3, input_shape=(5,), hidden=(4,), generator=1)
    total = sum(float(value.double().abs().sum()) for value in net.state_dict().values())
    assert total == pytest.approx(PINNED_MLP_ABS_SUM, rel=1e-6)
    ensemble = build_model("mlp", num_classes=3, input_shape=(5,), hidden=(4,), ensemble_size=2, generator=1)
    total = sum(float(value.double().abs().sum()) for value in ensemble.state_dict().values())
    assert total == pytest.approx(PINNED_ENSEMBLE_ABS_SUM, rel=1e-6)


PINNED_MLP_ABS_SUM = 9.21768865850754
PINNED_ENSEMBLE_ABS_SUM = 18.603980803862214


def test_seedable_init_needs_the_keyword_declared() -> None:
    from activebayes._seeding import seedable_init

    with pytest.raises(TypeError, match="must declare a keyword-only generator=None"):

        class Net(nn.Module):
            @seedable_init
            def __init__(self, width: int) -> None:
                super().__init__()
