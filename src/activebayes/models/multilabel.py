r"""The multi-label posterior: K coherent samples of C independent sigmoids.

A multi-label network returns logits ``f_w(x) [n, C]``, one per class, and
``P(y_c = 1 | x, w) = σ(f_w(x)_c)``: the classes are independent Bernoullis given the
weights. :class:`MultiLabelPosterior` wraps such a network (consistent MC dropout or an
:class:`~activebayes.models.Ensemble`) and follows the :class:`~activebayes.models.Posterior`
protocol with one convention for its predictions:

.. math:: \texttt{log\_probs\_N\_K\_C}[n, k, c] = \log \sigma\bigl(f_{w_k}(x_n)_c\bigr) = \log P(y_{n,c} = 1 \mid x_n, w_k),

the **log-sigmoid of the positive label** (what :mod:`activebayes.acquisition.multilabel`
and :func:`~activebayes.metrics.multilabel.evaluate_multilabel` take). Rows do not sum
to one; ``log P(y_c = 0) = log(1 - exp(log_probs))`` (``logsigmoid(-f)``).

The K samples are the same K functions :func:`~activebayes.models.predict_log_probs` draws
(the same masks from the same generator, chunk- and order-independent): the network is
run with one extra zero logit appended, so ``predict_log_probs`` returns
``log_softmax([f, 0])`` and ``f_c = log_softmax_c - log_softmax_{C+1}`` recovers every
logit exactly up to float32 rounding (about ``1e-7 · max |f|``); the log-sigmoid is then
taken in float64.

:meth:`MultiLabelPosterior.fit` trains with the binary cross-entropy
(:func:`~activebayes.models.fit` with ``multilabel=True``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from activebayes.errors import InvalidTypeError
from activebayes.models.posterior import NO_LABELS, NetworkPosterior, SampledFunctions, fit_summary, no_labels

__all__ = ["MultiLabelPosterior"]


def _with_zero(logits: Tensor) -> Tensor:
    return torch.cat([logits, logits.new_zeros(*logits.shape[:-1], 1)], dim=-1)


class _ReferenceLogit(nn.Module):
    """The network with a constant zero logit appended: ``[n, C] -> [n, C + 1]``."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, inputs: Tensor) -> Tensor:
        return _with_zero(self.inner(inputs))


class _SamplerReferenceLogit(_ReferenceLogit):
    """The same for a network with a fixed set of function samples (an ensemble)."""

    @property
    def num_function_samples(self) -> int:
        return int(self.inner.num_function_samples)

    def forward_samples(self, inputs: Tensor, sample_ids: Sequence[int]) -> Tensor:
        return _with_zero(self.inner.forward_samples(inputs, sample_ids))


class MultiLabelPosterior:
    """A multi-label network as a posterior: per-label Bernoulli likelihoods (see the module docstring).

    Args:
        module: returns logits ``[n, C]`` (one per class); consistent MC dropout layers or an
            :class:`~activebayes.models.Ensemble`.
        fit_options: keyword arguments of :func:`~activebayes.models.fit`.
    """

    def __init__(self, module: nn.Module, **fit_options: Any) -> None:
        if not isinstance(module, nn.Module) or isinstance(module, SampledFunctions):
            raise InvalidTypeError("a multi-label posterior needs a network (nn.Module with MC dropout, or an "
                                   f"Ensemble), got {type(module).__name__}")
        self._network = NetworkPosterior(module, **fit_options)
        self.fit_options = dict(fit_options)

    @property
    def module(self) -> nn.Module:
        return self._network.module

    @property
    def num_functions(self) -> int | None:
        return self._network.num_functions

    def fit(self, train, *, validation=None, generator=None, device=None) -> dict[str, Any]:
        from activebayes.models.training import fit

        if no_labels(train):  # the prior: the network as built
            return dict(NO_LABELS)
        return fit_summary(fit(self.module, train, validation=validation, generator=generator, device=device,
                               multilabel=True, **self.fit_options))

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=512, device=None) -> Tensor:
        """``log P(y_c = 1 | x_n, w_k)``: float32 ``[N, K, C]`` (log-sigmoid of the logits)."""
        from activebayes.models.predict import FunctionSampler, predict_log_probs

        module = self.module
        wrapped = _SamplerReferenceLogit(module) if isinstance(module, FunctionSampler) else _ReferenceLogit(module)
        k = None if self.num_functions is not None else num_samples
        log_softmax_N_K_C1 = predict_log_probs(wrapped, inputs, k, batch_size=batch_size, generator=generator,
                                               device=device)
        logits_N_K_C = log_softmax_N_K_C1[..., :-1].double() - log_softmax_N_K_C1[..., -1:].double()
        return F.logsigmoid(logits_N_K_C).float()

    def features(self, inputs, *, batch_size=512, device=None) -> Tensor:
        return self._network.features(inputs, batch_size=batch_size, device=device)

    def __repr__(self) -> str:
        return f"MultiLabelPosterior({type(self.module).__name__})"
