"""Reference networks with consistent MC dropout, and a registry of them.

- :class:`GalCNN`: Gal, Islam & Ghahramani 2017, "Deep Bayesian Active Learning
  with Image Data" (the Keras MNIST CNN): conv 32 4x4, relu, conv 32 4x4, relu,
  max-pool 2, dropout 0.25, dense 128, relu, dropout 0.5, dense C.
- :class:`BatchBALDCNN`: Kirsch, van Amersfoort & Gal 2019 (BatchBALD, the
  batchbald_redux example): conv 32 5x5, dropout2d, max-pool 2, relu, conv 64
  5x5, dropout2d, max-pool 2, relu, dense 128, dropout, relu, dense C.
- :class:`MLP`: flatten, [dense, relu, dropout] x len(hidden), dense C: the
  default for scikit-learn's 8x8 digits and tabular data.
- :class:`EncoderClassifier`: a pretrained encoder (e.g. the self-supervised one of
  :mod:`activebayes.models.representation`), frozen or fine-tuned, and a consistent MC
  dropout head; registered as ``"encoder_head"`` (``build_model(..., encoder=...)``).

All return logits ``[n, C]``; every dropout is consistent MC dropout.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
import re
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from activebayes._validation import check_positive_int, unknown_name_message
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes._seeding import draw_seed, global_rng_seeded, seedable_init
from activebayes.models.encoders import cached_rows
from activebayes.models.ensemble import Ensemble
from activebayes.models.dropout import (
    FACTORISE_MIN_SAMPLES,
    ConsistentMCDropout,
    ConsistentMCDropout2d,
    channel_masked_conv2d,
)
from activebayes.models.representation import Representation
from activebayes._registry import Registry

__all__ = [
    "MLP",
    "BatchBALDCNN",
    "EncoderClassifier",
    "GalCNN",
    "available_models",
    "build_model",
    "register_model",
]


def _conv_out(size: int, kernel: int, padding: int) -> int:
    return size + 2 * padding - kernel + 1


def _image_hw(image_size: int | Sequence[int]) -> tuple[int, int]:
    """``image_size`` (a side ``S`` or a ``(height, width)`` pair) as ``(H, W)``, checked."""
    if isinstance(image_size, numbers.Integral) and not isinstance(image_size, bool):
        check_positive_int(int(image_size), "image_size")
        return int(image_size), int(image_size)
    if isinstance(image_size, (str, bytes)) or not isinstance(image_size, Sequence) or len(image_size) != 2:
        raise ValueError(f"image_size must be a side S or a (height, width) pair, got {image_size!r}")
    height, width = image_size
    check_positive_int(height, "image_size[0] (height)")
    check_positive_int(width, "image_size[1] (width)")
    return int(height), int(width)


def _resolve_padding(padding: int | str, image_size: int | Sequence[int], kernels: Sequence[int],
                     pools: Sequence[bool]) -> int:
    """``"auto"``: 0 (valid convs, as in the papers) if the image is big enough, else "same"."""
    height, width = _image_hw(image_size)

    def final(pad: int) -> int:
        return min(_spatial(height, pad, kernels, pools), _spatial(width, pad, kernels, pools))

    if padding == "auto":
        if final(0) >= 1:
            return 0
        return max(kernels) // 2
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be 'auto' or an int >= 0, got {padding!r}")
    if final(padding) < 1:
        raise ValueError(
            f"image_size={image_size} is too small for this network with padding={padding}; "
            "use padding='auto' or a larger image"
        )
    return padding


def _conv_geometry(image_size: int | Sequence[int], padding: int | str, *, kernels: Sequence[int],
                   pools: Sequence[bool]) -> tuple[int, int]:
    """``(padding, H' * W')``: the resolved padding and the spatial positions left after the
    convolutions and pools, i.e. the dense layer's inputs per channel."""
    height, width = _image_hw(image_size)
    pad = _resolve_padding(padding, (height, width), kernels, pools)
    return pad, _spatial(height, pad, kernels, pools) * _spatial(width, pad, kernels, pools)


def _spatial(side: int, padding: int, kernels: Sequence[int], pools: Sequence[bool]) -> int:
    """One spatial side after the convolutions and 2x2 pools (below 1: too small)."""
    for kernel, pool in zip(kernels, pools):
        side = _conv_out(side, kernel, padding)
        if side < 1:
            return 0
        if pool:
            side //= 2
    return side


class MaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` that, without autograd, pools 2x2 windows as three elementwise maxima.

    The same values exactly (a maximum is exact); on the CPU about 4x faster than
    torch's pooling kernel, which also computes the indices.  Applies to
    ``kernel_size=2, stride=2`` without padding, dilation or ceil mode; everything
    else, and every pass that records gradients (training), is ``nn.MaxPool2d``'s.
    """

    def forward(self, input: Tensor) -> Tensor:
        plain = (
            torch.is_grad_enabled()
            or input.ndim < 3
            or min(input.shape[-2:]) < 2
            or self.return_indices
            or self.ceil_mode
            or self.kernel_size not in (2, (2, 2))
            or self.stride not in (2, (2, 2))
            or self.padding not in (0, (0, 0))
            or self.dilation not in (1, (1, 1))
        )
        if plain:
            return super().forward(input)
        height, width = input.shape[-2] // 2 * 2, input.shape[-1] // 2 * 2
        x = input[..., :height, :width]
        rows = torch.maximum(x[..., 0::2, :], x[..., 1::2, :])
        return torch.maximum(rows[..., 0::2], rows[..., 1::2])


class GalCNN(nn.Module):
    """The MNIST CNN of Gal, Islam & Ghahramani 2017 with consistent MC dropout.

    ``[n, in_channels, H, W] -> logits [n, num_classes]`` (``image_size``: a side ``S`` or
    ``(H, W)``).  Valid convolutions as in the paper; with ``padding="auto"`` images too
    small for that (a side below 8) get "same" padding.  28x28: 32 x 11 x 11 = 3872 features before the
    dense layer;
    8x8 digits: 32 x 1 x 1.  The first MC dropout follows the pooling, so both
    convolutions run once per item in ``predict_log_probs``.
    ``generator`` (a ``torch.Generator`` or an int seed) seeds the initial weights; ``None``: torch's global RNG.

    Example:
        >>> GalCNN(image_size=8, generator=0)(torch.randn(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    @seedable_init
    def __init__(
        self,
        *,
        num_classes: int = 10,
        in_channels: int = 1,
        image_size: int | tuple[int, int] = 28,
        p_conv: float = 0.25,
        p_fc: float = 0.5,
        padding: int | str = "auto",
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__()
        check_positive_int(num_classes, "num_classes")
        check_positive_int(in_channels, "in_channels")
        pad, area = _conv_geometry(image_size, padding, kernels=(4, 4), pools=(False, True))
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 4, padding=pad),
            nn.ReLU(),
            nn.Conv2d(32, 32, 4, padding=pad),
            nn.ReLU(),
            MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            ConsistentMCDropout(p_conv),
            nn.Flatten(),
            nn.Linear(32 * area, 128),
            nn.ReLU(),
            ConsistentMCDropout(p_fc),
            nn.Linear(128, num_classes),
        )

    def forward(self, inputs: Tensor) -> Tensor:
        return self.classifier(self.features(inputs))


class BatchBALDCNN(nn.Module):
    """The BatchBALD paper's MNIST CNN (Kirsch et al. 2019) with consistent MC dropout.

    ``[n, in_channels, H, W] -> logits [n, num_classes]`` (``image_size``: a side ``S`` or
    ``(H, W)``): the function of the
    batchbald_redux example (conv 32 5x5 -> MC dropout2d -> max-pool 2 -> relu ->
    conv 64 5x5 -> MC dropout2d -> max-pool 2 -> relu -> flatten (64 x 4 x 4 = 1024
    for 28x28) -> dense 128 -> MC dropout -> relu -> dense C), with each channel
    dropout moved after its max-pool and relu. That is the same function: a channel
    dropout multiplies channel ``c`` by ``m_c = z_c / (1 - p) >= 0``, and for
    ``m >= 0``, ``maxpool(m x) = m maxpool(x)`` and ``relu(m x) = m relu(x)`` (exactly,
    also in floating point, since rounding is monotone). The masks have shape
    ``[C, 1, 1]`` in either place, so training draws the same random numbers. The
    reordering lets :func:`predict_log_probs` run conv1, its pool and relu once per
    item instead of K times (a test checks the outputs equal the original order's).
    With K >= ``FACTORISE_MIN_SAMPLES`` function samples, conv2 under the K channel
    masks is then one pass over per-channel contributions
    (:func:`~activebayes.models.channel_masked_conv2d`; equal to float rounding), and
    its bias is added after the pool, on a quarter of the values.  The speed-ups are
    measured side by side by ``benchmarks/inference.py``.  Valid convolutions;
    ``padding="auto"`` switches to "same" (2) for small images (8x8 digits: 64 x 2 x 2).
    ``generator`` (a ``torch.Generator`` or an int seed) seeds the initial weights; ``None``: torch's global RNG.

    Example:
        >>> BatchBALDCNN(image_size=8)(torch.randn(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    @seedable_init
    def __init__(
        self,
        *,
        num_classes: int = 10,
        in_channels: int = 1,
        image_size: int | tuple[int, int] = 28,
        p_conv: float = 0.5,
        p_fc: float = 0.5,
        padding: int | str = "auto",
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__()
        check_positive_int(num_classes, "num_classes")
        check_positive_int(in_channels, "in_channels")
        pad, area = _conv_geometry(image_size, padding, kernels=(5, 5), pools=(True, True))
        self.net = nn.Sequential(
            # parameter indices 0, 4, 9, 12 as in the original order (same state_dict keys)
            nn.Conv2d(in_channels, 32, 5, padding=pad),
            MaxPool2d(2),
            nn.ReLU(),
            ConsistentMCDropout2d(p_conv),
            nn.Conv2d(32, 64, 5, padding=pad),
            MaxPool2d(2),
            nn.ReLU(),
            ConsistentMCDropout2d(p_conv),
            nn.Flatten(),
            nn.Linear(64 * area, 128),
            ConsistentMCDropout(p_fc),
            nn.ReLU(),
            nn.Linear(128, num_classes),
        )

    def forward(self, inputs: Tensor) -> Tensor:
        net = self.net
        features = net[:3](inputs)  # conv1, pool, relu: deterministic, once per item
        masks = net[3].expansion_masks(features, min_samples=FACTORISE_MIN_SAMPLES)
        if masks is None:  # training, the mean network, few samples, or one at a time
            return net[3:](features)
        # MC sampling: conv2 for all k channel masks from per-channel contributions, and its
        # bias after the pool (max-pooling commutes with adding a per-channel constant)
        conv = net[4]
        rows = channel_masked_conv2d(features, masks, conv.weight, None, padding=conv.padding)
        rows = net[5](rows)
        rows += conv.bias.reshape(1, -1, 1, 1)
        return net[6:](rows)


class MLP(nn.Module):
    """Flatten, then ``[dense, relu, MC dropout] x len(hidden)``, then dense ``num_classes``.

    ``[n, *shape] -> logits [n, num_classes]`` with ``prod(shape) == in_features``.
    ``hidden``: the widths of the hidden layers, or one int for a single hidden layer (as
    the heads take it). The first dense layer runs once per item in ``predict_log_probs``.
    ``generator`` (a ``torch.Generator`` or an int seed) seeds the initial weights; ``None``: torch's global RNG.

    Example:
        >>> MLP(in_features=64, num_classes=10)(torch.randn(3, 1, 8, 8)).shape
        torch.Size([3, 10])
        >>> a, b = MLP(in_features=4, num_classes=2, generator=7), MLP(in_features=4, num_classes=2, generator=7)
        >>> all(torch.equal(a.state_dict()[key], b.state_dict()[key]) for key in a.state_dict())
        True
    """

    @seedable_init
    def __init__(
        self, *, in_features: int, num_classes: int, hidden: int | Sequence[int] = (128,), p: float = 0.5,
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__()
        check_positive_int(in_features, "in_features")
        check_positive_int(num_classes, "num_classes")
        # one width, as the heads take it (hidden=128), or one per hidden layer
        if isinstance(hidden, numbers.Integral) and not isinstance(hidden, bool):
            hidden = (int(hidden),)
        elif isinstance(hidden, str | bytes) or not hasattr(hidden, "__iter__"):
            raise InvalidTypeError(f"hidden must be an int (one hidden layer) or a sequence of ints (one per hidden "
                                   f"layer), got {type(hidden).__name__} {hidden!r}")
        hidden = tuple(hidden)
        for width in hidden:
            check_positive_int(width, "hidden[i]")
        layers: list[nn.Module] = [nn.Flatten()]
        width_in = in_features
        for width in hidden:
            layers += [nn.Linear(width_in, width), nn.ReLU(), ConsistentMCDropout(p)]
            width_in = width
        layers.append(nn.Linear(width_in, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(inputs)


def _probe_feature_dim(encoder: nn.Module, input_shape: Sequence[int]) -> int:
    """D of ``encoder``: its ``feature_dim`` attribute, else the width of one probe forward."""
    dim = getattr(encoder, "feature_dim", None)
    if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0:
        return dim
    parameter = next(encoder.parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            out = encoder(torch.zeros(1, *input_shape, device=device))
    finally:
        encoder.train(was_training)
    if not isinstance(out, Tensor) or out.ndim < 2 or out.shape[0] != 1:
        raise InvalidArgumentError(
            f"encoder must map [n, *input_shape] to features [n, D], got {type(out).__name__} "
            f"{tuple(out.shape) if isinstance(out, Tensor) else ''}"
        )
    return int(out[0].numel())


class EncoderClassifier(nn.Module):
    r"""A pretrained encoder and a consistent MC dropout head: ``[n, ...] -> logits [n, C]``.

    ``logits = W_2 relu(W_1 (m_1 * norm(f(x))) + b_1) * m_2 + b_2``, i.e. the encoder
    ``f`` (``[n, ...] -> [n, D]``), a parameter-free standardisation of each item's
    features (``norm``: layer norm without affine weights, so the head sees features of
    unit scale whatever the encoder), MC dropout ``m_1`` (``p_features``) on the
    features, dense ``hidden``, relu, MC dropout ``m_2`` (``p``), dense C.

    ``freeze_encoder=True`` (default): the encoder's weights get no gradient and it stays
    in eval mode (batch norm with its pretraining statistics) whatever ``train()`` says;
    its features are then a deterministic function of the item, and since the first MC
    dropout layer comes right after them, :func:`predict_log_probs` runs the encoder once
    per item and only the small head K times.  ``freeze_encoder=False`` fine-tunes the
    encoder with the head (its batch norm layers still keep the pretraining statistics:
    a few labelled items are too few to estimate them); the encoder then still runs once
    per item in MC prediction (the dropout is all in the head).

    With a frozen encoder the features of an item never change, so by default
    (``feature_cache=True``) the model remembers them: each input row is keyed by a hash
    of its bytes (blake2b, 128 bits) and the encoder runs only on rows it has not seen.
    ``fit`` then pays for the encoder once per labelled item instead of once per item per
    epoch, and scoring the pool and the test set once per item per model.  The memory is
    ``D`` floats per distinct item (at most :attr:`MAX_CACHED_ITEMS` items; beyond that
    the encoder simply runs).  The cache belongs to this model object (a new model per
    round starts empty); call :meth:`clear_feature_cache` after changing the encoder's
    weights by hand.  Moving the model (``.to(...)``) clears it.

    Re-initialising the model between rounds means building it again
    (``build_model("encoder_head", ..., encoder=...)`` copies the pretrained encoder);
    :func:`~activebayes.models.reset_parameters` would reset the encoder too.

    Args:
        encoder: ``nn.Module`` mapping ``[n, ...]`` to features ``[n, D]``; used as is (not
            copied: :func:`build_model` copies).
        num_classes: C.
        feature_dim: D; default: ``encoder.feature_dim`` or a probe forward of
            ``input_shape``.
        input_shape: one item's shape, needed only to probe D.
        hidden: width of the head's hidden layer.
        p_features: MC dropout probability on the features.
        p: MC dropout probability on the hidden layer.
        freeze_encoder: see above.
        feature_cache: remember the frozen encoder's features per item (see above);
            ignored when fine-tuning.
        generator: seeds the head's initial weights (a ``torch.Generator`` or an int seed;
            ``None``: torch's global RNG); the encoder is used as given.

    Example:
        >>> enc = nn.Sequential(nn.Flatten(), nn.Linear(64, 16))
        >>> net = EncoderClassifier(enc, num_classes=10, feature_dim=16)
        >>> net(torch.randn(3, 1, 8, 8)).shape
        torch.Size([3, 10])
    """

    @seedable_init
    def __init__(
        self,
        encoder: nn.Module,
        *,
        num_classes: int,
        feature_dim: int | None = None,
        input_shape: Sequence[int] | None = None,
        hidden: int = 128,
        p_features: float = 0.25,
        p: float = 0.5,
        freeze_encoder: bool = True,
        feature_cache: bool = True,
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(encoder, nn.Module):
            raise InvalidTypeError(f"encoder must be a torch.nn.Module, got {type(encoder).__name__}")
        check_positive_int(num_classes, "num_classes")
        check_positive_int(hidden, "hidden")
        for flag, flag_name in ((freeze_encoder, "freeze_encoder"), (feature_cache, "feature_cache")):
            if not isinstance(flag, bool):
                raise InvalidTypeError(f"{flag_name} must be a bool, got {type(flag).__name__}")
        if feature_dim is None:
            if input_shape is None and getattr(encoder, "feature_dim", None) is None:
                raise InvalidArgumentError(
                    "EncoderClassifier needs feature_dim, an encoder with a feature_dim attribute, or input_shape"
                )
            feature_dim = _probe_feature_dim(encoder, tuple(input_shape or ()))
        check_positive_int(feature_dim, "feature_dim")
        self.freeze_encoder = freeze_encoder
        self.feature_cache = feature_cache and freeze_encoder
        self._features: dict[bytes, Tensor] = {}
        self.encoder = encoder
        if freeze_encoder:
            encoder.requires_grad_(False)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.LayerNorm(feature_dim, elementwise_affine=False),
            ConsistentMCDropout(p_features),
            nn.Linear(feature_dim, hidden),
            nn.ReLU(),
            ConsistentMCDropout(p),
            nn.Linear(hidden, num_classes),
        )
        self.train(self.training)

    def train(self, mode: bool = True) -> EncoderClassifier:
        super().train(mode)
        if self.freeze_encoder:
            self.encoder.eval()
        else:
            for module in self.encoder.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.eval()
        return self

    MAX_CACHED_ITEMS = 500_000

    def clear_feature_cache(self) -> None:
        """Forget the remembered features (after changing the frozen encoder's weights)."""
        self._features = {}

    def _apply(self, fn, *args, **kwargs):  # .to(), .cuda(), .double(), ...: features change
        self._features = {}
        return super()._apply(fn, *args, **kwargs)

    def _frozen_features(self, inputs: Tensor) -> Tensor:
        """The encoder's features of ``inputs`` (no gradient), remembered per row."""
        if not self.feature_cache:
            with torch.no_grad():
                return self.encoder(inputs)
        def encode(rows: Tensor) -> Tensor:
            with torch.no_grad():
                return self.encoder(rows)

        return cached_rows(self._features, inputs, encode, self.MAX_CACHED_ITEMS)

    def split_frozen(self) -> tuple[Callable[[Tensor], Tensor], nn.Module] | None:
        """``(encode, head)`` with a frozen encoder (``fit`` trains the head on features), else ``None``."""
        return (self._frozen_features, self.head) if self.freeze_encoder else None

    def forward(self, inputs: Tensor) -> Tensor:
        if self.freeze_encoder:
            features = self._frozen_features(inputs)
        else:
            features = self.encoder(inputs)
        return self.head(features)


# -- registry ----------------------------------------------------------------------------
ModelFactory = Callable[..., nn.Module]


def _image_shape(name: str, input_shape: tuple[int, ...]) -> tuple[int, int | tuple[int, int]]:
    """``(channels, image_size)`` of ``(C, H, W)`` or ``(H, W)``: a side for square images, else ``(H, W)``."""
    if len(input_shape) == 2:
        input_shape = (1, *input_shape)
    if len(input_shape) != 3:
        raise InvalidArgumentError(f"model (--model) {name!r} needs images, input_shape (C, H, W) or (H, W); "
                                   f"got items of shape {input_shape}: use 'mlp' (or 'auto')")
    channels, height, width = input_shape
    return channels, (height if height == width else (height, width))


def _build_mlp(*, num_classes: int, input_shape: tuple[int, ...], **options: object) -> nn.Module:
    return MLP(in_features=math.prod(input_shape), num_classes=num_classes, **options)


def _build_gal_cnn(*, num_classes: int, input_shape: tuple[int, ...], **options: object) -> nn.Module:
    channels, size = _image_shape("gal_cnn", input_shape)
    return GalCNN(num_classes=num_classes, in_channels=channels, image_size=size, **options)


def _build_batchbald_cnn(*, num_classes: int, input_shape: tuple[int, ...], **options: object) -> nn.Module:
    channels, size = _image_shape("batchbald_cnn", input_shape)
    return BatchBALDCNN(num_classes=num_classes, in_channels=channels, image_size=size, **options)


def _build_encoder_head(
    *, num_classes: int, input_shape: tuple[int, ...], encoder: object = None, **options: object
) -> nn.Module:
    if encoder is None:
        raise InvalidArgumentError(
            "model 'encoder_head' needs encoder=: a Representation (train_or_load_representation) "
            "or an nn.Module mapping [n, *input_shape] to features [n, D]"
        )
    module = encoder.encoder if isinstance(encoder, Representation) else encoder
    if not isinstance(module, nn.Module):
        raise InvalidTypeError(
            f"encoder must be a Representation or a torch.nn.Module, got {type(encoder).__name__}"
        )
    return EncoderClassifier(
        copy.deepcopy(module), num_classes=num_classes, input_shape=input_shape, **options  # type: ignore[arg-type]
    )


def _builtin_options(name: str) -> list[str] | None:
    """The options a built-in network takes through :func:`build_model` (its class's keywords
    less those the builder sets), or ``None`` for a registered one."""
    built = {"mlp": (MLP, {"in_features", "num_classes"}),
             "gal_cnn": (GalCNN, {"num_classes", "in_channels", "image_size"}),
             "batchbald_cnn": (BatchBALDCNN, {"num_classes", "in_channels", "image_size"}),
             "encoder_head": (EncoderClassifier, {"num_classes", "input_shape"})}.get(name)
    if built is None:
        return None
    cls, set_by_builder = built
    set_by_builder = set_by_builder | {"generator"}  # build_model's own keyword
    keywords = [p.name for p in inspect.signature(cls.__init__).parameters.values()
                if p.name != "self" and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return sorted({*keywords, *(("encoder",) if name == "encoder_head" else ())} - set_by_builder)


#: The reference networks by name (:func:`register_model` adds yours).
MODELS: Registry[ModelFactory] = Registry("model name")
for _name, _factory in (("mlp", _build_mlp), ("gal_cnn", _build_gal_cnn), ("batchbald_cnn", _build_batchbald_cnn),
                        ("encoder_head", _build_encoder_head)):
    MODELS.register(_name, _factory)


def register_model(name: str, factory: ModelFactory, *, replace: bool = False) -> None:
    """Add ``factory(*, num_classes, input_shape, **options) -> nn.Module`` under ``name``.

    A taken name raises :class:`~activebayes.errors.InvalidArgumentError` unless ``replace=True``.
    """
    if not callable(factory):
        raise InvalidTypeError(f"factory must be callable, got {type(factory).__name__}")
    MODELS.register(name, factory, replace=replace)


AUTO = "auto"


def default_model_name(input_shape: Sequence[int]) -> str:
    """What ``build_model("auto", ...)`` builds for items of ``input_shape``.

    Vectors and small images (side < 20, e.g. the 8x8 digits): ``"mlp"``.
    Larger images: ``"batchbald_cnn"``, which on real MNIST was clearly more
    accurate than ``"gal_cnn"`` with few labels (balanced sets, 2 seeds, same
    ``fit`` defaults; test accuracy 60.5% vs 51.9% at 20 labels, 83.3% vs 75.4% at
    60, 89.4% vs 87.0% at 150; see docs/models.md), at the price of a slower MC
    prediction (its first dropout comes before the second convolution, which runs K times).
    """
    shape = tuple(int(s) for s in input_shape)
    if len(shape) < 2 or min(shape[-2:]) < 20:
        return "mlp"
    return "batchbald_cnn"


def _build_auto(*, num_classes: int, input_shape: Sequence[int], **options: object) -> nn.Module:
    """``"auto"``: the network :func:`default_model_name` picks for ``input_shape``."""
    return MODELS.get(default_model_name(input_shape))(num_classes=num_classes, input_shape=input_shape, **options)


MODELS.register(AUTO, _build_auto)


#: The reference networks that read images (``(C, H, W)`` or ``(H, W)`` items).
IMAGE_MODELS = ("gal_cnn", "batchbald_cnn")


def check_model_input(name: str, input_shape: Sequence[int]) -> None:
    """Raise :class:`~activebayes.errors.InvalidArgumentError` if reference network ``name``
    cannot read items of ``input_shape`` (a CNN given table rows), before anything is built."""
    if name in IMAGE_MODELS:
        _image_shape(name, tuple(int(s) for s in input_shape))


def available_models() -> list[str]:
    """Names accepted by :func:`build_model`, sorted (``"auto"`` among them: see :func:`default_model_name`)."""
    return MODELS.names()


def build_model(
    name: str,
    *,
    num_classes: int,
    input_shape: Sequence[int],
    ensemble_size: int | None = None,
    generator: torch.Generator | int | None = None,
    **options: object,
) -> nn.Module:
    """Build a reference network by name; ``ensemble_size=E`` gives an :class:`Ensemble`.

    Args:
        name: one of :func:`available_models` (``"mlp"``, ``"gal_cnn"``, ``"batchbald_cnn"``,
            ``"encoder_head"``), or ``"auto"`` to choose by ``input_shape``
            (:func:`default_model_name`).  ``"encoder_head"`` needs ``encoder=`` (a
            :class:`~activebayes.models.representation.Representation` or an ``nn.Module``),
            copied into each model built; options ``freeze_encoder``, ``feature_cache``,
            ``hidden``, ``p_features``, ``p`` (:class:`EncoderClassifier`).
        num_classes: C.
        input_shape: one item's shape without the batch dimension, e.g. ``(1, 28, 28)``
            or ``(64,)`` (the MLP flattens; CNNs need ``(C, H, W)`` or ``(H, W)``).
        ensemble_size: ``None`` for one MC dropout network, else E members (each with
            its own seeded initialisation; their dropout is used in training only).
        generator: seeds the initialisation (generator, int seed, or global RNG).
        **options: passed to the network (``hidden=``, ``p=``, ``p_conv=``, ``encoder=``, ...).

    Example:
        >>> type(build_model("mlp", num_classes=10, input_shape=(64,), generator=0)).__name__
        'MLP'
        >>> len(build_model("gal_cnn", num_classes=10, input_shape=(1, 8, 8), ensemble_size=3))
        3
    """
    factory = MODELS.get(name)
    check_positive_int(num_classes, "num_classes")
    shape = tuple(int(s) for s in input_shape)
    if not shape or any(s < 1 for s in shape):
        raise ValueError(f"input_shape must be a non-empty shape of positive sizes, got {input_shape!r}")

    def make() -> nn.Module:
        try:
            return factory(num_classes=num_classes, input_shape=shape, **options)
        except TypeError as error:  # an option the built-in network does not take: name it and list its options
            bad = re.search(r"unexpected keyword argument '(\w+)'", str(error))
            accepted = _builtin_options(name)
            if bad is None or bad.group(1) not in options or accepted is None:
                raise
            raise InvalidArgumentError(unknown_name_message(f"option of model {name!r}", bad.group(1), accepted)
                                       + " (model_options, or build_model's keywords)") from None

    if ensemble_size is not None:
        return Ensemble.from_factory(make, ensemble_size, generator=generator)
    with global_rng_seeded(draw_seed(generator)):
        return make()
