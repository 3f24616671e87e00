"""Consistent MC dropout: K dropout masks held fixed = K coherent functions.

MC dropout (Gal & Ghahramani 2016) reads a dropout network as a distribution
over functions: every dropout mask ``z ~ Bernoulli(1 - p)`` picks one function
``f_z``.  For acquisition functions that look at several pool items *jointly*
(BatchBALD, Kirsch et al. 2019) sample ``k`` must be the *same* function for
every item, so its masks must be drawn once and held fixed across the whole pool
-- the tutorial's ``freeze`` / ``unfreeze``.  Here the masks of sample ``k`` in
layer ``l`` come from a ``torch.Generator`` seeded with
``mix(mask_seed, l, k)``: they do not depend on the batch size, the order of the
items, how the pool is chunked, or on how many samples are drawn (the first 20
samples of K=100 equal those of K=20).  ``resample_masks`` draws a new
``mask_seed`` (a new set of K functions).

Modes of a :class:`ConsistentMCDropout` layer

- ``train()``: ordinary dropout, a fresh mask per item and call.
- ``eval()`` outside a sampling context: identity (like ``nn.Dropout``), i.e. the
  deterministic "mean" network.
- ``eval()`` inside :func:`mc_sampling`: consistent MC dropout for the sample ids
  of the context.  With ``expand=True`` the first stochastic layer turns its input
  ``[n, ...]`` into ``[n * k, ...]`` (item-major: row ``i * k + j`` is item ``i``
  under sample ``sample_ids[j]``) and later layers see the expanded batch, so the
  deterministic layers before it run once per item.  With ``expand=False`` (one
  sample id) the mask is applied to every item of the batch as it is.

No global state: the mask seed lives on each layer, the sampling context is a
small object shared by the layers of one model while the context is open.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import math
import warnings
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from activebayes._seeding import draw_seed, mix_seed, seedable_init
from activebayes.errors import ActiveBayesError, InvalidArgumentError, InvalidTypeError

__all__ = [
    "BatchedSamplingError",
    "ConsistentMCDropout",
    "ConsistentMCDropout2d",
    "MCDropoutConv2d",
    "MCDropoutLinear",
    "channel_masked_conv2d",
    "mc_dropout",
    "mc_dropout_layers",
    "mc_sampling",
    "resample_masks",
    "unconverted_dropout",
]


#: Fewest samples for which :func:`channel_masked_conv2d` replaces k convolutions (its
#: per-channel pass costs about 8 ordinary ones on the CPU: measured break-even k = 8-10).
FACTORISE_MIN_SAMPLES = 12

#: While :func:`noting_temporaries` is active: the per-item bytes of the temporaries that
#: factorised layers hold outside any module (:func:`channel_masked_conv2d`'s per-channel
#: contributions), which forward hooks cannot see.
_NOTED_TEMPORARIES: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "activebayes_noted_temporaries", default=None
)


@contextlib.contextmanager
def noting_temporaries() -> Iterator[list[int]]:
    """Collect the per-item bytes of factorised layers' hidden temporaries during a forward
    (``predict_log_probs`` plans its passes with them, so none outgrows its memory budget)."""
    sizes: list[int] = []
    token = _NOTED_TEMPORARIES.set(sizes)
    try:
        yield sizes
    finally:
        _NOTED_TEMPORARIES.reset(token)


def _check_p(p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise InvalidTypeError(f"p must be a float in [0, 1], got {type(p).__name__} {p!r}")
    p = float(p)
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise InvalidArgumentError(f"p must be a dropout probability in [0, 1], got {p}")
    return p


class BatchedSamplingError(ActiveBayesError, RuntimeError):
    """The batched MC path (expand at the first MC dropout layer) does not fit this model.

    Raised when the batch dimension does not reach the first stochastic layer
    unchanged; ``predict_log_probs(..., sampling="sequential")`` works for any model.
    """


class _SamplingContext:
    """State shared by the MC dropout layers of one model during :func:`mc_sampling`."""

    def __init__(self, sample_ids: Sequence[int], *, expand: bool) -> None:
        self.sample_ids = tuple(int(k) for k in sample_ids)
        self.expand = expand
        self.batch_size: int | None = None  # items entering the root module this forward
        self.expanded = False  # has a layer expanded [n] -> [n * k] in this forward?

    def start_forward(self, batch_size: int | None) -> None:
        self.batch_size = batch_size
        self.expanded = False


class _ConsistentMCDropoutBase(nn.Module):
    """Shared machinery; subclasses define the mask shape for one item."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = _check_p(p)
        self.mask_seed: int | None = None
        self.layer_index = 0
        self._context: _SamplingContext | None = None
        self._mask_cache: tuple[tuple, Tensor] | None = None

    def extra_repr(self) -> str:
        return f"p={self.p}"

    # -- masks ---------------------------------------------------------------------------
    def _mask_shape(self, feature_shape: torch.Size) -> tuple[int, ...]:
        raise NotImplementedError

    def set_mask_seed(self, seed: int, layer_index: int = 0) -> None:
        """Hold the masks given by ``(seed, layer_index, k)`` from now on."""
        self.mask_seed = int(seed)
        self.layer_index = int(layer_index)
        self._mask_cache = None

    def masks(
        self,
        sample_ids: Sequence[int],
        feature_shape: Sequence[int],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
    ) -> Tensor:
        """Scaled masks ``[k, *mask_shape]`` (0 or ``1 / (1 - p)``) for ``sample_ids``.

        Mask ``k`` is drawn on the CPU from a generator seeded with
        ``mix(mask_seed, layer_index, k)``, so it is the same on every device and
        for every batch.  ``mask_shape`` is the item's feature shape (elementwise)
        or ``[C, 1, ...]`` (channel-wise).
        """
        if self.mask_seed is None:
            self.set_mask_seed(draw_seed(None), self.layer_index)
        shape = self._mask_shape(torch.Size(feature_shape))
        key = (tuple(sample_ids), shape, dtype, str(device), self.mask_seed, self.layer_index)
        if self._mask_cache is not None and self._mask_cache[0] == key:
            return self._mask_cache[1]
        masks = []
        for k in sample_ids:
            generator = torch.Generator().manual_seed(mix_seed(self.mask_seed, self.layer_index, k))
            keep = torch.rand(shape, generator=generator) >= self.p
            masks.append(keep)
        keep_k = torch.stack(masks)
        scale = 0.0 if self.p >= 1.0 else 1.0 / (1.0 - self.p)
        mask_k = keep_k.to(dtype=dtype) * scale
        mask_k = mask_k.to(device)
        self._mask_cache = (key, mask_k)
        return mask_k

    # -- forward -------------------------------------------------------------------------
    def _train_forward(self, input: Tensor) -> Tensor:
        raise NotImplementedError

    def expansion_masks(self, input: Tensor, *, min_samples: int = 1) -> Tensor | None:
        """The masks ``[k, *mask_shape]`` when this layer is the one to expand ``input``.

        That is: eval mode, inside an expanding :func:`mc_sampling` context whose
        forward has not expanded yet, with at least ``min_samples`` sample ids.  The
        context then counts as expanded, so the caller must return the ``[n * k, ...]``
        rows itself (e.g. with :func:`channel_masked_conv2d`).  ``None`` in every
        other case: call the layer as usual.
        """
        context = self._context
        if self.training or context is None or not context.expand or context.expanded:
            return None
        if len(context.sample_ids) < min_samples:
            return None
        n = input.shape[0]
        if context.batch_size is not None and n != context.batch_size:
            raise BatchedSamplingError(
                f"{type(self).__name__}: the first stochastic layer got a batch of {n} rows, "
                f"but {context.batch_size} items entered the model; the batched MC path "
                "needs the batch dimension kept up to the first MC dropout layer. "
                "Use predict_log_probs(..., sampling='sequential') for this model."
            )
        context.expanded = True
        return self.masks(context.sample_ids, input.shape[1:], dtype=input.dtype, device=input.device)

    def forward(self, input: Tensor) -> Tensor:
        if self.training:
            return self._train_forward(input)
        context = self._context
        if context is None:
            return input  # eval outside a sampling context: deterministic, like nn.Dropout
        sample_ids = context.sample_ids
        k = len(sample_ids)
        if not context.expand:
            if k != 1:
                raise RuntimeError("a non-expanding sampling context must hold one sample id")
            if self.p == 0.0:
                return input
            mask = self.masks(sample_ids, input.shape[1:], dtype=input.dtype, device=input.device)
            return input * mask[0]
        feature_shape = input.shape[1:]
        mask = self.expansion_masks(input)
        if mask is not None:
            n = input.shape[0]
            return (input.unsqueeze(1) * mask.unsqueeze(0)).reshape(n * k, *feature_shape)
        rows = input.shape[0]
        if context.batch_size is not None and rows != context.batch_size * k:
            raise BatchedSamplingError(
                f"{type(self).__name__}: expected the expanded batch of "
                f"{context.batch_size} items x {k} samples = {context.batch_size * k} rows, "
                f"got {rows}; the batched MC path is not valid for this model. "
                "Use predict_log_probs(..., sampling='sequential')."
            )
        if self.p == 0.0:
            return input
        mask = self.masks(sample_ids, feature_shape, dtype=input.dtype, device=input.device)
        n = rows // k
        return (input.reshape(n, k, *feature_shape) * mask.unsqueeze(0)).reshape(rows, *feature_shape)


class ConsistentMCDropout(_ConsistentMCDropoutBase):
    r"""Elementwise consistent MC dropout.

    Each unit of an item's features ``x`` (shape ``[n, *F]``) is kept with
    probability ``1 - p`` and scaled: ``y = x * z / (1 - p)``, ``z ~ Bernoulli(1 - p)``.
    In training a fresh ``z`` per item and call (``F.dropout``); inside
    :func:`mc_sampling` the mask of sample ``k`` (shape ``F``) is fixed for every
    item until :func:`resample_masks`; in eval outside a context it is the identity.

    Example:
        >>> layer = ConsistentMCDropout(0.5).eval()
        >>> x = torch.ones(3, 4)
        >>> with mc_sampling(layer, [0, 1]):
        ...     y = layer(x)          # [3 * 2, 4]: item-major, sample k fixed per item
        >>> bool((y.view(3, 2, 4)[0] == y.view(3, 2, 4)[2]).all())
        True
    """

    def _mask_shape(self, feature_shape: torch.Size) -> tuple[int, ...]:
        return tuple(feature_shape)

    def _train_forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, training=True)


class ConsistentMCDropout2d(_ConsistentMCDropoutBase):
    r"""Channel-wise consistent MC dropout (whole feature maps; Tompson et al. 2015).

    For inputs ``[n, C, *S]`` one Bernoulli ``z_c`` per channel zeroes the whole map:
    ``y[:, c] = x[:, c] * z_c / (1 - p)``; the mask of sample ``k`` has shape
    ``[C, 1, ..., 1]``.  Works for any number of spatial dims (1d, 2d, 3d), so it
    also replaces ``nn.Dropout1d`` / ``nn.Dropout3d``.  Modes as :class:`ConsistentMCDropout`.

    Example:
        >>> layer = ConsistentMCDropout2d(0.5).eval()
        >>> with mc_sampling(layer, [0, 1, 2]):
        ...     y = layer(torch.ones(2, 8, 5, 5))
        >>> y.shape
        torch.Size([6, 8, 5, 5])
    """

    def _mask_shape(self, feature_shape: torch.Size) -> tuple[int, ...]:
        if len(feature_shape) == 0:
            raise InvalidArgumentError("ConsistentMCDropout2d needs inputs [n, C, ...], got [n]")
        return (feature_shape[0], *([1] * (len(feature_shape) - 1)))

    def _train_forward(self, input: Tensor) -> Tensor:
        if self.p == 0.0:
            return input
        if input.ndim < 2:
            raise InvalidArgumentError(
                f"ConsistentMCDropout2d needs a batched input [n, C, ...], got shape {tuple(input.shape)}"
            )
        shape = (input.shape[0], input.shape[1], *([1] * (input.ndim - 2)))
        keep = torch.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(1.0 - self.p)
        scale = 0.0 if self.p >= 1.0 else 1.0 / (1.0 - self.p)
        return input * (keep * scale)


class MCDropoutLinear(nn.Module):
    """Consistent MC dropout on the input, then ``nn.Linear`` (the tutorial's DropoutLinear).

    ``[n, in_features] -> [n, out_features]``: ``y = W (x * z / (1 - p)) + b``.
    ``generator`` (a ``torch.Generator`` or an int seed) seeds the initial weights; ``None``: torch's global RNG.

    Example:
        >>> layer = MCDropoutLinear(4, 2, p=0.5)
        >>> layer(torch.randn(3, 4)).shape
        torch.Size([3, 2])
    """

    @seedable_init
    def __init__(self, in_features: int, out_features: int, p: float = 0.5, *, bias: bool = True,
                 generator: torch.Generator | int | None = None) -> None:
        super().__init__()
        self.dropout = ConsistentMCDropout(p)
        self.linear = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        return self.linear(self.dropout(input))


class MCDropoutConv2d(nn.Module):
    """Consistent MC dropout on the input, then ``nn.Conv2d`` (the tutorial's DropoutConv2d).

    ``[n, C_in, H, W] -> [n, C_out, H', W']``.  Dropout is channel-wise
    (:class:`ConsistentMCDropout2d`) unless ``channelwise=False``; the remaining
    keyword arguments go to ``nn.Conv2d``.  When channel-wise dropout here is the
    first stochastic layer of an MC pass over at least ``FACTORISE_MIN_SAMPLES``
    samples, the k convolutions are computed as one (:func:`channel_masked_conv2d`).
    ``generator`` (a ``torch.Generator`` or an int seed) seeds the initial weights; ``None``: torch's global RNG.

    Example:
        >>> layer = MCDropoutConv2d(1, 4, 3, p=0.25)
        >>> layer(torch.randn(2, 1, 8, 8)).shape
        torch.Size([2, 4, 6, 6])
    """

    @seedable_init
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: int | tuple[int, int] | str = 0,
        *,
        p: float = 0.5,
        channelwise: bool = True,
        generator: torch.Generator | int | None = None,
        **conv_options: object,
    ) -> None:
        super().__init__()
        self.dropout = ConsistentMCDropout2d(p) if channelwise else ConsistentMCDropout(p)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, **conv_options)

    def forward(self, input: Tensor) -> Tensor:
        conv = self.conv
        factorable = (
            isinstance(self.dropout, ConsistentMCDropout2d)
            and conv.groups == 1
            and conv.padding_mode == "zeros"
            and input.ndim == 4
        )
        masks = self.dropout.expansion_masks(input, min_samples=FACTORISE_MIN_SAMPLES) if factorable else None
        if masks is None:
            return conv(self.dropout(input))
        return channel_masked_conv2d(
            input, masks, conv.weight, conv.bias, stride=conv.stride, padding=conv.padding, dilation=conv.dilation
        )


def channel_masked_conv2d(
    input_n_C_H_W: Tensor,
    masks_k_C: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    *,
    stride: int | tuple[int, ...] = 1,
    padding: int | tuple[int, ...] | str = 0,
    dilation: int | tuple[int, ...] = 1,
) -> Tensor:
    r"""``conv2d(x_i * m_k)`` for every item ``i`` and channel mask ``k``: ``[n * k, O, H', W']``.

    Rows are item-major (row ``i * k + j`` is item ``i`` under mask ``j``), as an
    expanding MC dropout layer lays them out.  A convolution is linear in its input
    channels, so with one scale ``m_{kc}`` per channel

    .. math:: \operatorname{conv}(x \odot m_k)_o = b_o + \sum_c m_{kc}\, (W_{oc} \star x_c),

    and the per-channel contributions ``W_{oc} * x_c`` are computed once per item (one
    grouped convolution, the cost of one ordinary pass) and mixed by a ``[k, C]``
    matrix product.  Against ``k`` full convolutions that is ``1/k + 1/|kernel|``
    of the multiply-adds (about 5% for ``k = 100`` and a 5x5 kernel); the sums run
    in another order, so results agree to float rounding.

    Args:
        input_n_C_H_W: the items, ``[n, C, H, W]``.
        masks_k_C: channel scales, ``[k, C]`` or ``[k, C, 1, 1]`` (e.g. 0 or ``1 / (1 - p)``).
        weight: ``[O, C, kh, kw]`` (an ungrouped convolution's weight).
        bias: ``[O]`` or ``None``.
        stride: as ``torch.nn.functional.conv2d``.
        padding: as ``torch.nn.functional.conv2d`` (zeros).
        dilation: as ``torch.nn.functional.conv2d``.

    Example:
        >>> x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
        >>> masks = torch.tensor([[2.0, 0.0, 2.0], [0.0, 2.0, 2.0]])
        >>> out = channel_masked_conv2d(x, masks, w)
        >>> torch.allclose(out[1], F.conv2d(x[:1] * masks[1].view(3, 1, 1), w)[0], atol=1e-5)
        True
    """
    if input_n_C_H_W.ndim != 4:
        raise InvalidArgumentError(f"input_n_C_H_W must be [n, C, H, W], got shape {tuple(input_n_C_H_W.shape)}")
    n, C = input_n_C_H_W.shape[:2]
    if weight.ndim != 4 or weight.shape[1] != C:
        raise InvalidArgumentError(
            f"weight must be [O, {C}, kh, kw] for inputs with {C} channels, got shape {tuple(weight.shape)}"
        )
    k = masks_k_C.shape[0]
    if masks_k_C.numel() != k * C:
        raise InvalidArgumentError(f"masks_k_C must be [k, {C}] (or [k, {C}, 1, 1]), got shape {tuple(masks_k_C.shape)}")
    O = weight.shape[0]
    # group c maps input channel c to O outputs: rows c * O + o of the grouped weight are W[o, c]
    per_channel = F.conv2d(
        input_n_C_H_W, weight.transpose(0, 1).reshape(C * O, 1, *weight.shape[2:]), None,
        stride=stride, padding=padding, dilation=dilation, groups=C,
    )
    H, W = per_channel.shape[-2:]
    noted = _NOTED_TEMPORARIES.get()
    if noted is not None and n:
        noted.append(per_channel[0].numel() * per_channel.element_size())
    mixed_n_k_L = torch.matmul(masks_k_C.reshape(k, C).to(per_channel.dtype), per_channel.reshape(n, C, O * H * W))
    out = mixed_n_k_L.reshape(n * k, O, H, W)
    if bias is not None:
        out += bias.reshape(1, O, 1, 1)
    return out


def mc_dropout_layers(module: nn.Module) -> list[_ConsistentMCDropoutBase]:
    """The consistent MC dropout layers of ``module`` in ``module.modules()`` order."""
    return [m for m in module.modules() if isinstance(m, _ConsistentMCDropoutBase)]


def resample_masks(module: nn.Module, *, generator: torch.Generator | int | None = None) -> int:
    """Draw a new set of K functions: a new mask seed for every MC dropout layer.

    The tutorial's ``unfreeze`` + ``freeze``.  Layer ``l`` (in ``module.modules()``
    order) then uses masks ``mix(seed, l, k)`` for sample ``k`` until the next call.

    Args:
        module: a model holding :class:`ConsistentMCDropout` / ``...2d`` layers.
        generator: ``torch.Generator`` to draw the seed from, an ``int`` seed used
            as is, or ``None`` (torch's global generator).

    Returns:
        The mask seed now held (pass it as ``generator=`` to get the same masks back).

    Example:
        >>> net = nn.Sequential(nn.Linear(3, 3), ConsistentMCDropout(0.5))
        >>> resample_masks(net, generator=7)
        7
    """
    if not isinstance(module, nn.Module):
        raise InvalidTypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if isinstance(generator, int) and not isinstance(generator, bool):
        seed = int(generator)
    else:
        seed = draw_seed(generator)
    for index, layer in enumerate(mc_dropout_layers(module)):
        layer.set_mask_seed(seed, index)
    return seed


@contextlib.contextmanager
def mc_sampling(
    module: nn.Module, sample_ids: Sequence[int], *, expand: bool = True
) -> Iterator[_SamplingContext]:
    """Inside this block the MC dropout layers of ``module`` (in eval mode) sample.

    With ``expand=True`` a forward pass ``module(x)`` with ``x`` of shape ``[n, ...]``
    returns ``[n * k, ...]`` rows (item-major, ``k = len(sample_ids)``) if the
    model has an MC dropout layer, or ``[n, ...]`` otherwise.  With ``expand=False``
    exactly one sample id is allowed and every item uses its masks.  The context
    object yielded tells (``.expanded``) whether the last forward expanded the batch.

    Example:
        >>> net = nn.Sequential(nn.Linear(3, 5), ConsistentMCDropout(0.5), nn.Linear(5, 2)).eval()
        >>> with mc_sampling(net, range(4)):
        ...     net(torch.randn(10, 3)).shape
        torch.Size([40, 2])
    """
    sample_ids = [int(k) for k in sample_ids]
    if not sample_ids:
        raise InvalidArgumentError("sample_ids must not be empty")
    if not expand and len(sample_ids) != 1:
        raise InvalidArgumentError(f"expand=False needs exactly one sample id, got {len(sample_ids)}")
    layers = mc_dropout_layers(module)
    if any(layer._context is not None for layer in layers):
        raise RuntimeError("mc_sampling contexts cannot be nested on the same layers")
    context = _SamplingContext(sample_ids, expand=expand)

    def pre_hook(_module: nn.Module, args: tuple) -> None:
        first = args[0] if args else None
        context.start_forward(first.shape[0] if isinstance(first, Tensor) and first.ndim > 0 else None)

    handle = module.register_forward_pre_hook(pre_hook)
    for layer in layers:
        layer._context = context
    try:
        yield context
    finally:
        handle.remove()
        for layer in layers:
            layer._context = None


_CONVERSIONS: dict[type[nn.Module], type[_ConsistentMCDropoutBase]] = {
    nn.Dropout: ConsistentMCDropout,
    nn.Dropout1d: ConsistentMCDropout2d,
    nn.Dropout2d: ConsistentMCDropout2d,
    nn.Dropout3d: ConsistentMCDropout2d,
}


def _replacement(module: nn.Module) -> type[_ConsistentMCDropoutBase] | None:
    """The consistent layer for ``module``: an ``nn.Dropout*`` or a subclass keeping its ``forward``."""
    for base in type(module).__mro__:
        if base in _CONVERSIONS:
            return _CONVERSIONS[base] if type(module).forward is base.forward else None
    return None


def unconverted_dropout(module: nn.Module) -> list[str]:
    """Names (``"net.2 (AlphaDropout)"``) of the dropout layers with ``p > 0`` that :func:`mc_dropout`
    leaves as they are: ``nn.AlphaDropout`` / ``nn.FeatureAlphaDropout`` and subclasses of
    ``nn.Dropout*`` that override ``forward``. In eval mode they are the identity, so MC
    samples do not vary through them."""
    return [
        f"{name or type(module).__name__} ({type(layer).__name__})"
        for name, layer in module.named_modules()
        if isinstance(layer, nn.modules.dropout._DropoutNd) and layer.p > 0 and _replacement(layer) is None
    ]


def _convert(module: nn.Module) -> nn.Module:
    replacement = _replacement(module)
    if replacement is not None:
        new = replacement(module.p)
        new.train(module.training)
        return new
    for name, child in list(module._modules.items()):
        if child is not None:
            module._modules[name] = _convert(child)
    return module


def mc_dropout(module: nn.Module, *, inplace: bool = False) -> nn.Module:
    """Turn a user's model into a consistent MC dropout model, without rewriting it.

    Every ``nn.Dropout`` becomes :class:`ConsistentMCDropout` and every
    ``nn.Dropout1d`` / ``nn.Dropout2d`` / ``nn.Dropout3d`` becomes
    :class:`ConsistentMCDropout2d` with the same ``p`` and training flag; so does a
    subclass of one of them that keeps its ``forward`` (e.g. one that only sets ``p``).
    In eval mode (outside sampling) and with ``p=0`` the converted model computes
    exactly what the original did.  Not converted: functional dropout (``F.dropout``
    inside ``forward``), ``nn.AlphaDropout`` / ``nn.FeatureAlphaDropout`` and subclasses
    that override ``forward`` (their own computation would be lost); a warning names
    such layers with ``p > 0`` (see :func:`unconverted_dropout`): replace them by
    ``nn.Dropout`` or :class:`ConsistentMCDropout` modules. A model with no dropout layer
    at all draws a warning too: its K samples would all be one function.

    Args:
        module: any ``nn.Module`` (also a bare dropout layer).
        inplace: modify ``module`` itself; by default a deep copy is converted.

    Returns:
        The converted module (``module`` itself when ``inplace=True``, except that a
        bare dropout layer is returned as its replacement).

    Example:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 2))
        >>> type(mc_dropout(net)[2]).__name__
        'ConsistentMCDropout'
    """
    if not isinstance(module, nn.Module):
        raise InvalidTypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
    if not inplace:
        module = copy.deepcopy(module)
    converted = _convert(module)
    left = unconverted_dropout(converted)
    if left:
        warnings.warn(
            f"mc_dropout cannot convert {len(left)} dropout layer(s): {', '.join(left)}; they are the identity "
            "in eval mode, so MC samples do not vary through them: replace them by nn.Dropout (or "
            "ConsistentMCDropout) modules",
            stacklevel=2,
        )
    elif not mc_dropout_layers(converted):
        warnings.warn(
            f"mc_dropout found no dropout layer in {type(module).__name__}: its K samples are all the same "
            "function, so BALD and the other epistemic scores are 0; add nn.Dropout before its last layer(s), or "
            "use an Ensemble or build_posterior('laplace', network=...) (F.dropout inside forward is not converted)",
            stacklevel=2,
        )
    return converted
