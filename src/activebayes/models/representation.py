r"""A representation learnt from the unlabelled pool: SimCLR-style contrastive pre-training.

With a handful of labels a network trained from scratch is a poor judge of its own
uncertainty (the cold-start problem of active learning).  The unlabelled pool is free
information: an encoder trained on it *without labels* gives features in which a small
Bayesian head separates the classes from a few labels (Siméoni et al. 2021; Hacohen et
al. 2022, TypiClust).  This module trains such an encoder with SimCLR (Chen, Kornblith,
Norouzi & Hinton 2020, "A Simple Framework for Contrastive Learning of Visual
Representations") and caches it on disk.

The method.  Every image ``x_i`` of a minibatch of ``n`` gets two random views
``a_i = t(x_i)``, ``b_i = t'(x_i)`` (:func:`augment`); the encoder ``f`` and a projection
head ``g`` map them to ``z = g(f(view)) / ||g(f(view))||``.  With the ``2n`` projections
``z_1 .. z_2n`` (views a then b) and ``pos(i)`` the other view of the same image, the
NT-Xent loss (normalised temperature-scaled cross-entropy, :func:`nt_xent_loss`) is

.. math::

    \ell = \frac{1}{2n} \sum_{i=1}^{2n} -\log
        \frac{\exp(z_i^\top z_{pos(i)} / \tau)}{\sum_{k \ne i} \exp(z_i^\top z_k / \tau)}

a ``2n - 1``-way classification of the positive among the other views.  After training
the projection head is discarded: the features are ``f(x)`` (SimCLR's finding: the layer
before the projection keeps more information than ``g(f(x))``).

Augmentations (plain torch, no torchvision): a random affine map (rotation, shear,
scale, translation) applied with ``affine_grid`` / ``grid_sample``, a random contrast
gain around the background, random erasing of a rectangle and Gaussian pixel noise.
No flips: a mirrored digit is another symbol.  :func:`default_augmentation` is milder
for small images (the 8x8 digits) than for 28x28 ones.

Public API:

- :class:`RepresentationConfig`, :class:`Augmentation`, :func:`default_augmentation`;
- :func:`augment`, :func:`nt_xent_loss` (the functional core);
- :class:`ConvEncoder` (``[n, C, S, S] -> features [n, D]``), :func:`train_encoder`;
- :func:`train_or_load_representation` -> :class:`Representation` (trained once, cached
  by ``(dataset fingerprint, config, seed)``, resumable, atomic);
- :func:`features` (``[N, D]`` for the typicality / BADGE strategies).

The Bayesian model on top is :class:`activebayes.models.EncoderClassifier`
(``build_model("encoder_head", ..., encoder=representation)``).

Example:
    >>> images = torch.randn(64, 1, 8, 8)
    >>> config = RepresentationConfig(epochs=1, batch_size=32, width=8, feature_dim=16)
    >>> rep = train_or_load_representation(images, config, seed=0, cache=False)
    >>> features(rep.encoder, images).shape
    torch.Size([64, 16])
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from activebayes._io import atomic_write_bytes, ensure_folder
from activebayes._seeding import derive_seed, global_rng_seeded, make_generator, seedable_init
from activebayes._threads import threads_for
from activebayes._validation import check_nonnegative_float, check_positive_int
from activebayes.errors import InvalidArgumentError, InvalidTypeError

try:  # POSIX only: a lock so that parallel runs train one encoder, not one each
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "CACHE_FORMAT",
    "Augmentation",
    "ConvEncoder",
    "EncoderTraining",
    "EpochLoss",
    "Representation",
    "RepresentationConfig",
    "augment",
    "dataset_fingerprint",
    "default_augmentation",
    "default_cache_dir",
    "features",
    "nt_xent_loss",
    "train_encoder",
    "train_or_load_representation",
]

CACHE_FORMAT = 1  # bump when the stored form or the training procedure changes results


# --------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class Augmentation:
    """Strengths of the random view ``t(x)`` (see :func:`augment`); 0 switches a part off.

    Attributes:
        rotation: largest rotation, degrees (uniform in ``[-rotation, rotation]``).
        shear: largest shear angle, degrees.
        scale: ``(smallest, largest)`` zoom factor (> 1 enlarges the content, as a crop would).
        translate: largest shift as a fraction of the image side.
        contrast: the gain around the background is uniform in ``[1 - contrast, 1 + contrast]``.
        erase_prob: probability of erasing one rectangle (set to the background value).
        erase_area: ``(smallest, largest)`` erased fraction of the image area.
        noise: standard deviation of added Gaussian noise (in input units).
    """

    rotation: float = 15.0
    shear: float = 10.0
    scale: tuple[float, float] = (0.85, 1.2)
    translate: float = 0.12
    contrast: float = 0.3
    erase_prob: float = 0.5
    erase_area: tuple[float, float] = (0.05, 0.2)
    noise: float = 0.1

    def __post_init__(self) -> None:
        for name in ("rotation", "shear", "translate", "contrast", "noise"):
            check_nonnegative_float(getattr(self, name), f"Augmentation.{name}")
        if not 0.0 <= self.erase_prob <= 1.0:
            raise InvalidArgumentError(f"Augmentation.erase_prob must be in [0, 1], got {self.erase_prob!r}")
        for name, low_bound in (("scale", 0.0), ("erase_area", 0.0)):
            value = tuple(float(v) for v in getattr(self, name))
            if len(value) != 2 or not low_bound < value[0] <= value[1]:
                raise InvalidArgumentError(
                    f"Augmentation.{name} must be (low, high) with {low_bound} < low <= high, got {getattr(self, name)!r}"
                )
            object.__setattr__(self, name, value)
        if self.erase_area[1] > 1.0:
            raise InvalidArgumentError(f"Augmentation.erase_area must be within (0, 1], got {self.erase_area!r}")


def default_augmentation(image_size: int) -> Augmentation:
    """The augmentation used for images of side ``image_size``.

    28x28 digits (and larger): rotation 15 deg, shear 10 deg, zoom 0.85-1.2, shift 12%,
    contrast 0.3, erasing (p 0.5, 5-20% of the area), noise 0.1.  Small images (side < 16,
    the 8x8 digits, where one pixel is 12% of the side): rotation 10, shear 5, zoom
    0.9-1.1, shift one pixel at most, no erasing, noise 0.05.

    Example:
        >>> default_augmentation(8).erase_prob
        0.0
    """
    check_positive_int(image_size, "image_size")
    if image_size < 16:
        return Augmentation(
            rotation=10.0, shear=5.0, scale=(0.9, 1.1), translate=min(0.12, 1.0 / image_size),
            contrast=0.2, erase_prob=0.0, noise=0.05,
        )
    return Augmentation()


@dataclass(frozen=True)
class RepresentationConfig:
    """How the encoder is built and trained (every field is part of the cache key).

    Attributes:
        width: channels of the encoder's first convolution (later stages 2x and 4x).
        feature_dim: D, the size of the features :func:`features` returns.
        projection_dim: output size of the projection head (discarded after training).
        temperature: tau of the NT-Xent loss.
        epochs: passes over the images (150: with 50, the MNIST heads needed 120-160 labels
            to reach 95% test accuracy, with 150 about 100; see docs/representation.md).
        batch_size: images per step (2 x that many views; ``2 * batch_size - 2`` negatives each).
        lr: peak AdamW learning rate (linear warm-up over the first epoch, cosine decay to 0).
        weight_decay: AdamW's decoupled weight decay.
        augmentation: an :class:`Augmentation`, or ``None`` for :func:`default_augmentation`
            of the image size.
        max_items: train on at most this many images (a seeded subset), ``None``: all.
    """

    width: int = 32
    feature_dim: int = 128
    projection_dim: int = 64
    temperature: float = 0.5
    epochs: int = 150
    batch_size: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-4
    augmentation: Augmentation | None = None
    max_items: int | None = None

    def __post_init__(self) -> None:
        for name in ("width", "feature_dim", "projection_dim", "epochs"):
            check_positive_int(getattr(self, name), f"RepresentationConfig.{name}")
        check_positive_int(self.batch_size, "RepresentationConfig.batch_size")
        if self.batch_size < 2:
            raise InvalidArgumentError(
                f"RepresentationConfig.batch_size must be >= 2 (NT-Xent needs negatives), got {self.batch_size}"
            )
        check_nonnegative_float(self.temperature, "RepresentationConfig.temperature", allow_zero=False)
        check_nonnegative_float(self.lr, "RepresentationConfig.lr", allow_zero=False)
        check_nonnegative_float(self.weight_decay, "RepresentationConfig.weight_decay")
        if self.augmentation is not None and not isinstance(self.augmentation, Augmentation):
            raise InvalidTypeError(
                f"RepresentationConfig.augmentation must be an Augmentation or None, "
                f"got {type(self.augmentation).__name__}"
            )
        if self.max_items is not None:
            check_positive_int(self.max_items, "RepresentationConfig.max_items")

    def resolved(self, image_size: int) -> RepresentationConfig:
        """This config with ``augmentation`` filled in for ``image_size``."""
        if self.augmentation is not None:
            return self
        return dataclasses.replace(self, augmentation=default_augmentation(image_size))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RepresentationConfig:
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidArgumentError(
                f"unknown RepresentationConfig key(s) {', '.join(map(repr, unknown))}; "
                f"expected some of: {', '.join(sorted(known))}"
            )
        augmentation = data.get("augmentation")
        if isinstance(augmentation, Mapping):
            data["augmentation"] = Augmentation(**augmentation)
        return cls(**data)


# --------------------------------------------------------------------------- augmentation
def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> Tensor:
    return low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)


def augment(images_n_C_H_W: Tensor, augmentation: Augmentation, *, generator: torch.Generator) -> Tensor:
    r"""One random view of every image: ``[n, C, H, W] -> [n, C, H, W]``, same dtype and device.

    Per image, in this order:

    1. an affine map: output pixel ``p`` reads the input at ``A p + t`` (normalised
       coordinates in ``[-1, 1]``) with ``A = R(theta) Sh(phi) / s``: rotation
       ``theta ~ U(-rotation, rotation)``, shear ``phi ~ U(-shear, shear)``, zoom
       ``s ~ U(scale)``, shift ``t ~ U(-2 translate, 2 translate)^2``; bilinear
       ``grid_sample``, the border value outside the image (the background of digits);
    2. contrast: ``x <- b + g (x - b)``, ``g ~ U(1 - contrast, 1 + contrast)``, with ``b``
       the image's smallest value (its background);
    3. random erasing (Zhong et al. 2020) with probability ``erase_prob``: a rectangle of
       ``U(erase_area)`` of the area, aspect ratio log-uniform in ``[1/3, 3]``, set to ``b``;
    4. Gaussian noise ``N(0, noise^2)``.

    Every random number comes from ``generator`` (a CPU ``torch.Generator``), drawn in a
    fixed order on the CPU and then moved to the images' device, so a seed gives the
    same views on every device.

    Example:
        >>> x = torch.randn(4, 1, 28, 28)
        >>> g = torch.Generator().manual_seed(0)
        >>> augment(x, default_augmentation(28), generator=g).shape
        torch.Size([4, 1, 28, 28])
    """
    if not isinstance(images_n_C_H_W, Tensor) or images_n_C_H_W.ndim != 4:
        got = tuple(images_n_C_H_W.shape) if isinstance(images_n_C_H_W, Tensor) else type(images_n_C_H_W).__name__
        raise InvalidArgumentError(f"images_n_C_H_W must be a tensor [n, C, H, W], got {got}")
    if not images_n_C_H_W.is_floating_point():
        raise InvalidTypeError(f"images_n_C_H_W must be floating point, got dtype {images_n_C_H_W.dtype}")
    if not isinstance(generator, torch.Generator):
        raise InvalidTypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    aug = augmentation
    x = images_n_C_H_W
    n, _, H, W = x.shape
    device, dtype = x.device, x.dtype
    # all random numbers first, in a fixed order, on the CPU
    theta = torch.deg2rad(_uniform(n, -aug.rotation, aug.rotation, generator))
    phi = torch.deg2rad(_uniform(n, -aug.shear, aug.shear, generator))
    zoom = _uniform(n, aug.scale[0], aug.scale[1], generator)
    shift = _uniform(2 * n, -2 * aug.translate, 2 * aug.translate, generator).view(n, 2)
    gain = _uniform(n, 1.0 - aug.contrast, 1.0 + aug.contrast, generator)
    erase = torch.rand(n, generator=generator, dtype=torch.float64) < aug.erase_prob
    area = _uniform(n, aug.erase_area[0], aug.erase_area[1], generator)
    log_aspect = _uniform(n, -math.log(3.0), math.log(3.0), generator)
    corner = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    noise = torch.randn(x.shape, generator=generator, dtype=torch.float32) if aug.noise > 0 else None

    # 1. affine: [n, 2, 3] maps output to input coordinates
    cos, sin, tan = torch.cos(theta), torch.sin(theta), torch.tan(phi)
    # R(theta) @ [[1, tan], [0, 1]] / zoom
    a11, a12 = cos / zoom, (cos * tan - sin) / zoom
    a21, a22 = sin / zoom, (sin * tan + cos) / zoom
    matrix_n_2_3 = torch.stack(
        [torch.stack([a11, a12, shift[:, 0]], dim=1), torch.stack([a21, a22, shift[:, 1]], dim=1)], dim=1
    )
    grid = F.affine_grid(matrix_n_2_3.to(device=device, dtype=dtype), list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)

    # 2. contrast around the background
    background_n = images_n_C_H_W.flatten(1).amin(dim=1).view(n, 1, 1, 1)
    x = background_n + gain.to(device=device, dtype=dtype).view(n, 1, 1, 1) * (x - background_n)

    # 3. random erasing
    if aug.erase_prob > 0:
        height = torch.sqrt(area * torch.exp(log_aspect)).clamp(max=1.0) * H
        width = torch.sqrt(area / torch.exp(log_aspect)).clamp(max=1.0) * W
        top = corner[:, 0] * (H - height)
        left = corner[:, 1] * (W - width)
        rows = torch.arange(H, dtype=torch.float64).view(1, H, 1) + 0.5
        cols = torch.arange(W, dtype=torch.float64).view(1, 1, W) + 0.5
        inside = (
            (rows >= top.view(n, 1, 1)) & (rows < (top + height).view(n, 1, 1))
            & (cols >= left.view(n, 1, 1)) & (cols < (left + width).view(n, 1, 1))
            & erase.view(n, 1, 1)
        )
        mask = inside.unsqueeze(1).to(device)
        x = torch.where(mask, background_n.expand_as(x), x)

    # 4. noise
    if noise is not None:
        x = x + aug.noise * noise.to(device=device, dtype=dtype)
    return x


# --------------------------------------------------------------------------- loss
def nt_xent_loss(z_a_n_P: Tensor, z_b_n_P: Tensor, temperature: float) -> Tensor:
    r"""SimCLR's NT-Xent loss of two views' projections (Chen et al. 2020, eq. 1).

    ``z_a_n_P[i]`` and ``z_b_n_P[i]`` are projections of two views of image ``i``.  With
    ``z`` the ``2n`` rows (a then b) scaled to unit length, ``s_ij = z_i . z_j / tau`` and
    ``pos(i)`` the other view of ``i``'s image:

    .. math::

        \ell = \frac{1}{2n} \sum_{i=1}^{2n}
            \Big(-s_{i,pos(i)} + \log \sum_{k \ne i} e^{s_{ik}}\Big)

    Returns the scalar mean loss (a tensor with gradient).  Its minimum is 0 (never
    reached); for ``n`` identical views with orthogonal images it is
    ``log(1 + (2n - 2) e^{-1/tau})``.

    Example:
        >>> z = torch.eye(4)
        >>> round(float(nt_xent_loss(z, z, 0.5)), 4)  # log(1 + 6 e^-2)
        0.5944
    """
    if not isinstance(z_a_n_P, Tensor) or not isinstance(z_b_n_P, Tensor):
        raise InvalidTypeError("z_a_n_P and z_b_n_P must be tensors [n, P]")
    if z_a_n_P.ndim != 2 or z_a_n_P.shape != z_b_n_P.shape:
        raise InvalidArgumentError(
            f"z_a_n_P and z_b_n_P must both have shape [n, P], got {tuple(z_a_n_P.shape)} and {tuple(z_b_n_P.shape)}"
        )
    n = z_a_n_P.shape[0]
    if n < 2:
        raise InvalidArgumentError(f"NT-Xent needs at least 2 images (negatives), got n={n}")
    temperature = check_nonnegative_float(temperature, "temperature", allow_zero=False)
    z_2n_P = F.normalize(torch.cat([z_a_n_P, z_b_n_P]), dim=1)
    logits_2n_2n = z_2n_P @ z_2n_P.T / temperature
    self_mask = torch.eye(2 * n, dtype=torch.bool, device=z_2n_P.device)
    logits_2n_2n = logits_2n_2n.masked_fill(self_mask, float("-inf"))
    index = torch.arange(n, device=z_2n_P.device)
    positives_2n = torch.cat([index + n, index])
    return F.cross_entropy(logits_2n_2n, positives_2n)


# --------------------------------------------------------------------------- encoder
def _encoder_strides(image_size: int) -> tuple[tuple[int, int, int], int]:
    """Strides of the three convolutions (2 while the side is above 5) and the final side."""
    side, strides = image_size, []
    for _ in range(3):
        stride = 2 if side > 5 else 1
        side = (side - 1) // stride + 1  # 3x3, padding 1
        strides.append(stride)
    return (strides[0], strides[1], strides[2]), side


class ConvEncoder(nn.Module):
    """A small convolutional encoder: ``[n, C, S, S] -> features [n, D]``.

    Three ``conv 3x3 -> batch norm -> relu`` stages with ``width``, ``2 width`` and
    ``4 width`` channels, each with stride 2 while the map is larger than 5x5 (28x28 ->
    14 -> 7 -> 4; 8x8 -> 4 -> 4 -> 4), average pooling down to at most 4x4, then the
    map is flattened and a linear layer gives ``feature_dim`` features.  Flattening keeps
    *where* strokes are, which matters for digits: global average pooling instead (as in
    ResNets) gave a much weaker representation here (linear probe with 50 MNIST labels
    63% against 86%, 30 epochs, same recipe otherwise).  About 4.8 MFLOP per 28x28
    image (width 32), a fifth of the BatchBALD CNN's forward pass.
    ``generator`` (a ``torch.Generator`` or an int seed) seeds the initial weights; ``None``: torch's global RNG.

    Example:
        >>> ConvEncoder(image_size=28, width=8, feature_dim=16)(torch.randn(2, 1, 28, 28)).shape
        torch.Size([2, 16])
    """

    @seedable_init
    def __init__(self, *, in_channels: int = 1, image_size: int = 28, width: int = 32, feature_dim: int = 128,
                 generator: torch.Generator | int | None = None) -> None:
        super().__init__()
        check_positive_int(in_channels, "in_channels")
        check_positive_int(image_size, "image_size")
        check_positive_int(width, "width")
        check_positive_int(feature_dim, "feature_dim")
        self.in_channels, self.image_size, self.width, self.feature_dim = in_channels, image_size, width, feature_dim
        strides, side = _encoder_strides(image_size)
        pooled = min(side, 4)
        channels = (width, 2 * width, 4 * width)
        layers: list[nn.Module] = []
        previous = in_channels
        for stride, out in zip(strides, channels):
            layers += [nn.Conv2d(previous, out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            previous = out
        if pooled != side:
            layers.append(nn.AdaptiveAvgPool2d(pooled))
        layers += [nn.Flatten(), nn.Linear(previous * pooled * pooled, feature_dim)]
        self.net = nn.Sequential(*layers)

    def forward(self, inputs: Tensor) -> Tensor:
        return self.net(inputs)


def _projection_head(feature_dim: int, projection_dim: int) -> nn.Module:
    return nn.Sequential(nn.ReLU(), nn.Linear(feature_dim, feature_dim), nn.ReLU(), nn.Linear(feature_dim, projection_dim))


# --------------------------------------------------------------------------- training
@dataclass(frozen=True)
class EpochLoss:
    """One epoch of contrastive training: its mean NT-Xent loss."""

    epoch: int
    loss: float


def _check_images(inputs: object, name: str = "inputs") -> Tensor:
    if not isinstance(inputs, Tensor):
        raise InvalidTypeError(f"{name} must be a tensor of images [N, C, S, S] or [N, S, S], got {type(inputs).__name__}")
    if inputs.ndim == 3:
        inputs = inputs.unsqueeze(1)
    if inputs.ndim != 4 or inputs.shape[2] != inputs.shape[3]:
        raise InvalidArgumentError(f"{name} must be square images [N, C, S, S] or [N, S, S], got shape {tuple(inputs.shape)}")
    if inputs.shape[0] < 2:
        raise InvalidArgumentError(f"{name} must hold at least 2 images, got {inputs.shape[0]}")
    if not inputs.is_floating_point():
        raise InvalidTypeError(f"{name} must be floating point (standardised images), got dtype {inputs.dtype}")
    return inputs


def _lr_at(step: int, steps_per_epoch: int, total_steps: int, peak: float) -> float:
    """Linear warm-up over the first epoch, then cosine decay to 0 at ``total_steps``."""
    warmup = min(steps_per_epoch, total_steps)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return peak * 0.5 * (1.0 + math.cos(math.pi * progress))


def _batches(n: int, batch_size: int, generator: torch.Generator) -> list[Tensor]:
    """One epoch's minibatches: a permutation cut into ``batch_size`` pieces; a last piece
    smaller than half a batch is dropped (it would give a noisy step with few negatives)."""
    order = torch.randperm(n, generator=generator)
    pieces = list(order.split(batch_size))
    if len(pieces) > 1 and pieces[-1].shape[0] < max(2, batch_size // 2):
        pieces.pop()
    return pieces


def _build(config: RepresentationConfig, in_channels: int, image_size: int, seed: int) -> tuple[ConvEncoder, nn.Module]:
    with global_rng_seeded(derive_seed(seed, "representation", "init")):
        encoder = ConvEncoder(
            in_channels=in_channels, image_size=image_size, width=config.width, feature_dim=config.feature_dim
        )
        head = _projection_head(config.feature_dim, config.projection_dim)
    return encoder, head


@dataclass(frozen=True)
class EncoderTraining:
    """What :func:`train_encoder` returns.

    Attributes:
        encoder: the trained :class:`ConvEncoder` (eval mode).
        history: the loss per epoch.
        seconds: wall-clock training time (summed over resumed pieces).
        cpu_seconds: CPU time of this process while training (all its threads); on one
            thread this is the wall time the training would take on an idle core.
    """

    encoder: ConvEncoder
    history: tuple[EpochLoss, ...]
    seconds: float
    cpu_seconds: float


@dataclass
class _TrainState:
    encoder: ConvEncoder
    head: nn.Module
    optimizer: torch.optim.Optimizer
    epoch: int = 0  # epochs finished
    history: list[EpochLoss] = field(default_factory=list)
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def _state_dict(state: _TrainState) -> dict[str, Any]:
    return {
        "encoder": state.encoder.state_dict(),
        "head": state.head.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "epoch": state.epoch,
        "history": [dataclasses.asdict(h) for h in state.history],
        "seconds": state.seconds,
        "cpu_seconds": state.cpu_seconds,
    }


def _load_state(state: _TrainState, stored: Mapping[str, Any]) -> None:
    state.encoder.load_state_dict(stored["encoder"])
    state.head.load_state_dict(stored["head"])
    state.optimizer.load_state_dict(stored["optimizer"])
    state.epoch = int(stored["epoch"])
    state.history = [EpochLoss(**h) for h in stored["history"]]
    state.seconds = float(stored["seconds"])
    state.cpu_seconds = float(stored["cpu_seconds"])


def _train_epoch(
    state: _TrainState,
    images_N: Tensor,
    config: RepresentationConfig,
    augmentation: Augmentation,
    seed: int,
    device: torch.device,
) -> float:
    """One epoch; all its randomness from ``make_generator(seed, "representation", epoch)``."""
    epoch = state.epoch
    generator = make_generator(seed, "representation", "epoch", epoch)
    batches = _batches(images_N.shape[0], config.batch_size, generator)
    steps_per_epoch = len(batches)
    total_steps = steps_per_epoch * config.epochs
    state.encoder.train()
    state.head.train()
    total, count = 0.0, 0
    for step_in_epoch, index in enumerate(batches):
        x_n = images_N[index].to(device)
        views_2n = torch.cat([augment(x_n, augmentation, generator=generator), augment(x_n, augmentation, generator=generator)])
        z_2n_P = state.head(state.encoder(views_2n))
        n = index.shape[0]
        loss = nt_xent_loss(z_2n_P[:n], z_2n_P[n:], config.temperature)
        lr = _lr_at(epoch * steps_per_epoch + step_in_epoch, steps_per_epoch, total_steps, config.lr)
        for group in state.optimizer.param_groups:
            group["lr"] = lr
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        state.optimizer.step()
        total += float(loss.detach()) * n
        count += n
    return total / count


def train_encoder(
    inputs: Tensor,
    config: RepresentationConfig | None = None,
    *,
    seed: int = 0,
    device: torch.device | str | None = None,
    progress: bool = False,
    checkpoint: str | os.PathLike[str] | None = None,
) -> EncoderTraining:
    """Train a :class:`ConvEncoder` on ``inputs`` without labels (SimCLR, see the module docstring).

    Args:
        inputs: standardised images ``[N, C, S, S]`` (or ``[N, S, S]``), N >= 2.
        config: :class:`RepresentationConfig` (default: its defaults).
        seed: every random draw (initialisation, order, augmentations) derives from it:
            epoch ``e`` uses ``make_generator(seed, "representation", "epoch", e)``, so the
            same seed gives the same weights, and a resumed training the same as an
            uninterrupted one.
        device: train there (default: the CPU).
        progress: a tqdm bar over epochs with the loss.
        checkpoint: a file to save the training state to after every epoch (atomically),
            and to resume from if it exists.

    Returns:
        :class:`EncoderTraining`: the encoder (eval mode, on ``device``), the loss per epoch
        and the seconds spent training (summed over resumed pieces).
    """
    images_N = _check_images(inputs)
    config = RepresentationConfig() if config is None else config
    if not isinstance(config, RepresentationConfig):
        raise InvalidTypeError(f"config must be a RepresentationConfig or None, got {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidTypeError(f"seed must be an int, got {type(seed).__name__}")
    config = config.resolved(images_N.shape[-1])
    assert config.augmentation is not None
    run_device = torch.device("cpu" if device is None else device)
    if config.max_items is not None and images_N.shape[0] > config.max_items:
        subset = torch.randperm(images_N.shape[0], generator=make_generator(seed, "representation", "subset"))
        images_N = images_N[subset[: config.max_items].sort().values]
    images_N = images_N.float().contiguous().to(run_device)
    encoder, head = _build(config, images_N.shape[1], images_N.shape[-1], seed)
    encoder.to(run_device)
    head.to(run_device)
    parameters = [*encoder.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(parameters, lr=config.lr, weight_decay=config.weight_decay)
    state = _TrainState(encoder, head, optimizer)
    checkpoint_path = Path(checkpoint) if checkpoint is not None else None
    if checkpoint_path is not None and checkpoint_path.is_file():
        _load_state(state, torch.load(checkpoint_path, map_location=run_device, weights_only=True))
    with threads_for(encoder, tuple(images_N.shape[1:]), 2 * config.batch_size), tqdm(
        total=config.epochs, initial=state.epoch, desc="representation", unit="epoch", disable=not progress, leave=False
    ) as bar:
        while state.epoch < config.epochs:
            tic, cpu_tic = time.perf_counter(), time.process_time()
            loss = _train_epoch(state, images_N, config, config.augmentation, seed, run_device)
            state.history.append(EpochLoss(state.epoch + 1, loss))
            state.epoch += 1
            state.seconds += time.perf_counter() - tic
            state.cpu_seconds += time.process_time() - cpu_tic
            if checkpoint_path is not None and state.epoch < config.epochs:
                _save(_state_dict(state), checkpoint_path)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")
    encoder.eval()
    return EncoderTraining(
        encoder=encoder, history=tuple(state.history), seconds=state.seconds, cpu_seconds=state.cpu_seconds
    )


# --------------------------------------------------------------------------- features
def features(
    encoder: nn.Module,
    inputs: Tensor,
    *,
    batch_size: int = 512,
    device: torch.device | str | None = None,
) -> Tensor:
    """The encoder's features of every item: ``[N, ...] -> features_N_D`` (float32, CPU).

    :func:`activebayes.models.encoders.encode_pool` for a module or :class:`Representation`:
    ``encoder`` runs in eval mode without gradients in chunks of ``batch_size`` (its
    train/eval flags, ``requires_grad`` flags and device are restored).  These are the
    features SimCLR evaluates (before the projection head); the typicality and BADGE
    strategies cluster / embed them.

    Example:
        >>> enc = ConvEncoder(image_size=8, width=4, feature_dim=6)
        >>> features(enc, torch.randn(10, 1, 8, 8)).shape
        torch.Size([10, 6])
    """
    from activebayes.models.encoders import encode_pool  # encoders reads Representation: imported here

    if isinstance(encoder, Representation):
        encoder = encoder.encoder
    if not isinstance(encoder, nn.Module):
        raise InvalidTypeError(f"encoder must be an nn.Module or a Representation, got {type(encoder).__name__}")
    if not isinstance(inputs, Tensor) or inputs.ndim < 2:
        got = tuple(inputs.shape) if isinstance(inputs, Tensor) else type(inputs).__name__
        raise InvalidArgumentError(f"inputs must be a tensor [N, ...], got {got}")
    check_positive_int(batch_size, "batch_size")
    if inputs.shape[0] == 0:
        return torch.empty(0, 0)
    return encode_pool(encoder, inputs, batch_size=batch_size, device=device)


# --------------------------------------------------------------------------- cache
def default_cache_dir() -> Path:
    """``$ACTIVEBAYES_CACHE_DIR/representations`` if set, else ``~/.cache/activebayes/representations``."""
    env = os.environ.get("ACTIVEBAYES_CACHE_DIR")
    root = Path(env).expanduser() if env else Path("~/.cache/activebayes").expanduser()
    return root / "representations"


def dataset_fingerprint(inputs: Tensor) -> str:
    """sha256 of the images' shape, dtype and bytes (float32, C order): the data part of the cache key.

    Example:
        >>> dataset_fingerprint(torch.zeros(2, 3)) == dataset_fingerprint(torch.zeros(2, 3))
        True
    """
    if not isinstance(inputs, Tensor):
        raise InvalidTypeError(f"inputs must be a tensor, got {type(inputs).__name__}")
    array = inputs.detach().to("cpu", torch.float32).contiguous()
    digest = hashlib.sha256()
    digest.update(repr((tuple(array.shape), str(array.dtype))).encode())
    digest.update(array.numpy().tobytes())
    return digest.hexdigest()


def _cache_key(fingerprint: str, config: RepresentationConfig, seed: int) -> str:
    text = json.dumps(
        {"format": CACHE_FORMAT, "data": fingerprint, "config": config.to_dict(), "seed": int(seed)}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True, eq=False)
class Representation:
    """A trained encoder and where it came from.

    Attributes:
        encoder: the :class:`ConvEncoder` (eval mode): ``[n, C, S, S] -> [n, D]``.
        config: the resolved :class:`RepresentationConfig` it was trained with.
        seed: its seed.
        fingerprint: :func:`dataset_fingerprint` of the training images.
        history: NT-Xent loss per epoch.
        seconds: wall-clock training time (also when loaded: the stored value).
        cpu_seconds: CPU time of the training (see :class:`EncoderTraining`).
        trained: ``True`` if this call trained it, ``False`` if it came from the cache.
        path: the cache file, or ``None`` without a cache.
    """

    encoder: ConvEncoder
    config: RepresentationConfig
    seed: int
    fingerprint: str
    history: tuple[EpochLoss, ...]
    seconds: float
    cpu_seconds: float
    trained: bool
    path: Path | None = None

    @property
    def feature_dim(self) -> int:
        """D."""
        return self.encoder.feature_dim


def _save(blob: Any, path: Path) -> None:
    """``torch.save(blob)`` into memory, then atomically to ``path``: a full disk is then the
    ``OSError`` (``ENOSPC``, naming ``path``) of an ordinary write, not the ``RuntimeError``
    ("unexpected pos") that torch's zip writer makes of it when it writes the file itself."""
    buffer = io.BytesIO()
    torch.save(blob, buffer)
    atomic_write_bytes(path, buffer.getbuffer())


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX); a no-op elsewhere."""
    if fcntl is None:
        yield
        return
    ensure_folder(path.parent)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _encoder_args(encoder: ConvEncoder) -> dict[str, int]:
    return {
        "in_channels": encoder.in_channels,
        "image_size": encoder.image_size,
        "width": encoder.width,
        "feature_dim": encoder.feature_dim,
    }


def _load_cached(path: Path, device: torch.device) -> Representation:
    stored = torch.load(path, map_location=device, weights_only=True)
    meta = json.loads(stored["meta"])
    encoder = ConvEncoder(**meta["encoder_args"])
    encoder.load_state_dict(stored["encoder"])
    encoder.to(device).eval()
    return Representation(
        encoder=encoder,
        config=RepresentationConfig.from_dict(meta["config"]),
        seed=int(meta["seed"]),
        fingerprint=meta["fingerprint"],
        history=tuple(EpochLoss(**h) for h in meta["history"]),
        seconds=float(meta["seconds"]),
        cpu_seconds=float(meta["cpu_seconds"]),
        trained=False,
        path=path,
    )


def train_or_load_representation(
    inputs: Tensor,
    config: RepresentationConfig | None = None,
    *,
    seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    cache: bool = True,
    device: torch.device | str | None = None,
    progress: bool = False,
) -> Representation:
    """The encoder for ``(inputs, config, seed)``: loaded from the cache, else trained and cached.

    The cache file is ``<cache_dir>/<key>.pt`` with ``key`` a hash of
    :func:`dataset_fingerprint` ``(inputs)``, the resolved ``config``, ``seed`` and
    :data:`CACHE_FORMAT`.  It is written atomically once training has finished; while
    training, the state after each epoch is kept in ``<key>.partial.pt`` (atomically) and a
    training that was killed resumes from it, giving the same weights as an
    uninterrupted one.  A lock file ``<key>.lock`` (left in place, empty) makes concurrent
    callers with the same key wait for one training instead of each training its own (POSIX).

    Args:
        inputs: the pool's standardised images ``[N, C, S, S]`` (or ``[N, S, S]``); no labels.
            Pass every image the model may learn from without labels (e.g. the training
            split: pool and validation), never the test set.
        config: :class:`RepresentationConfig` (default: its defaults).
        seed: the training seed (part of the cache key).
        cache_dir: the cache folder; ``None``: :func:`default_cache_dir`.
        cache: ``False`` trains every time and writes nothing.
        device: train / load onto this device (default: the CPU).
        progress: tqdm bar over epochs.

    Returns:
        :class:`Representation` (``.trained`` tells whether this call trained it).

    Example:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> images = torch.randn(32, 1, 8, 8)
        >>> config = RepresentationConfig(epochs=1, batch_size=16, width=4, feature_dim=8)
        >>> train_or_load_representation(images, config, seed=1, cache_dir=folder).trained
        True
        >>> train_or_load_representation(images, config, seed=1, cache_dir=folder).trained
        False
    """
    images_N = _check_images(inputs)
    config = RepresentationConfig() if config is None else config
    if not isinstance(config, RepresentationConfig):
        raise InvalidTypeError(f"config must be a RepresentationConfig or None, got {type(config).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidTypeError(f"seed must be an int, got {type(seed).__name__}")
    config = config.resolved(images_N.shape[-1])
    run_device = torch.device("cpu" if device is None else device)
    fingerprint = dataset_fingerprint(images_N)
    if not isinstance(cache, bool):
        raise InvalidTypeError(f"cache must be a bool, got {type(cache).__name__}")
    if not cache:
        return _train(images_N, config, seed, fingerprint, run_device, progress, None, None)
    folder = default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()
    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentError(f"cache_dir must be a folder, got the file {folder}")
    key = _cache_key(fingerprint, config, seed)
    path = folder / f"{key}.pt"
    if path.is_file():
        return _load_cached(path, run_device)
    with _locked(folder / f"{key}.lock"):
        if path.is_file():  # another process trained it while we waited
            return _load_cached(path, run_device)
        return _train(images_N, config, seed, fingerprint, run_device, progress, path, folder / f"{key}.partial.pt")


def _train(
    images_N: Tensor,
    config: RepresentationConfig,
    seed: int,
    fingerprint: str,
    device: torch.device,
    progress: bool,
    path: Path | None,
    partial: Path | None,
) -> Representation:
    result = train_encoder(images_N, config, seed=seed, device=device, progress=progress, checkpoint=partial)
    encoder, history = result.encoder, result.history
    if path is not None:
        meta = {
            "format": CACHE_FORMAT,
            "config": config.to_dict(),
            "seed": int(seed),
            "fingerprint": fingerprint,
            "encoder_args": _encoder_args(encoder),
            "history": [dataclasses.asdict(h) for h in history],
            "seconds": result.seconds,
            "cpu_seconds": result.cpu_seconds,
        }
        _save({"meta": json.dumps(meta, sort_keys=True), "encoder": encoder.state_dict()}, path)
        if partial is not None:
            partial.unlink(missing_ok=True)
    return Representation(
        encoder=encoder, config=config, seed=int(seed), fingerprint=fingerprint, history=tuple(history),
        seconds=result.seconds, cpu_seconds=result.cpu_seconds, trained=True, path=path,
    )
