"""PyTorch Lightning 2.x: your LightningModule and your ``Trainer``, K coherent functions.

:class:`LightningPosterior` wraps a ``LightningModule`` with ``nn.Dropout`` layers and a
factory of your ``lightning.Trainer``. Nothing is subclassed:

- ``fit`` calls ``trainer.fit(module, train_dataloaders, val_dataloaders)`` on a fresh
  Trainer from your factory; batches are ``(inputs_b, targets_b)``, shuffled by a
  seeded generator and all full (the last one of an epoch topped up, so BatchNorm
  never sees a batch of one item), and dropout's RNG is seeded (so a seed gives the
  same weights).
- ``log_probs`` calls ``trainer.predict`` with the :class:`MCDropoutPredictions`
  callback: around each ``predict_step`` it opens a consistent MC dropout context for
  sample ids ``0..K-1`` (masks fixed once per call from a seed), so your
  ``predict_step(batch, batch_idx)``, given a batch of inputs ``[n, ...]``, returns
  logits for ``n * K`` rows, item-major, that the callback collects as ``[n, K, C]``
  (``sampling="sequential"``: K ``predict_step`` passes of ``n`` rows instead).
- ``module`` is a :class:`PredictStepModule`: an ``nn.Module`` whose ``forward`` is your
  ``predict_step``, for the loop's pool scoring (:func:`~activebayes.scoring.score_pool`,
  Ray). It holds the same converted dropout layers, so both paths give the same numbers.

The module's ``nn.Dropout`` / ``nn.Dropout1d``/``2d``/``3d`` layers (and subclasses that
keep their ``forward``) are converted in place to
:class:`~activebayes.models.ConsistentMCDropout` / ``ConsistentMCDropout2d`` (ordinary
dropout in training); alpha dropout and subclasses overriding ``forward`` are refused.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler, TensorDataset

from activebayes._seeding import global_state_restored
from activebayes._validation import check_choice, check_positive_int
from activebayes.adapters._common import as_input_tensor, from_numpy, require, scalar_summary, seed_from
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models.dropout import (
    BatchedSamplingError,
    mc_dropout,
    mc_dropout_layers,
    mc_sampling,
    resample_masks,
    unconverted_dropout,
)
from activebayes.models.posterior import NO_LABELS, FeaturesUnavailableError, no_labels
from activebayes.models.predict import (SAMPLING_MODES, looks_like_probabilities, probabilities_error,
                                       unreadable_inputs)

__all__ = ["LightningPosterior", "MCDropoutPredictions", "PredictStepModule"]


def _lightning() -> Any:
    return require("lightning.pytorch", "lightning", "LightningPosterior")


class _Rows(Dataset):
    """Batches of bare inputs ``[n, ...]`` (what ``predict_step`` receives)."""

    def __init__(self, inputs_N: Tensor) -> None:
        self.inputs_N = inputs_N

    def __len__(self) -> int:
        return len(self.inputs_N)

    def __getitem__(self, index: int) -> Tensor:
        return self.inputs_N[index]


def check_lightning_module(module: object) -> None:
    """A LightningModule with a dropout layer and its own ``predict_step``, or a one-line error."""
    pl = _lightning()
    if not isinstance(module, pl.LightningModule):
        raise InvalidTypeError(f"module must be a lightning.pytorch.LightningModule, got {type(module).__name__}")
    name = type(module).__name__
    if type(module).predict_step is pl.LightningModule.predict_step:
        raise InvalidArgumentError(
            f"module {name} has no predict_step: define predict_step(self, batch, batch_idx) returning "
            "logits [n, C] for a batch of inputs [n, ...]"
        )
    unconvertible = unconverted_dropout(module)
    if unconvertible:
        raise InvalidArgumentError(
            f"module {name} has dropout that MC sampling cannot hold fixed: {', '.join(unconvertible)} "
            "(alpha dropout, or an nn.Dropout subclass overriding forward); use nn.Dropout / nn.Dropout2d "
            "(or activebayes.models.ConsistentMCDropout) there"
        )
    dropout = [m for m in module.modules() if isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0]
    if not dropout and not [m for m in mc_dropout_layers(module) if m.p > 0]:
        raise InvalidArgumentError(
            f"module {name} has no dropout layer with p > 0: add an nn.Dropout(p=0.5) before its last "
            "nn.Linear (MC dropout needs one to draw K functions)"
        )


class PredictStepModule(nn.Module):
    """``forward(inputs_n) = lightning_module.predict_step(inputs_n, 0)``: logits ``[n, C]``.

    The ``nn.Module`` the loop's pool scoring runs (:attr:`LightningPosterior.module`).
    """

    def __init__(self, lightning_module: nn.Module) -> None:
        super().__init__()
        self.lightning_module = lightning_module

    def forward(self, inputs: Tensor) -> Tensor:
        return self.lightning_module.predict_step(inputs, 0)


def _checked_logits(outputs: Any, n: int, rows: tuple[int, ...], what: str) -> Tensor:
    """``predict_step``'s outputs as float logits ``[rows, C]``, or a one-line error."""
    if not isinstance(outputs, Tensor) or outputs.ndim != 2 or outputs.shape[0] not in rows:
        shape = tuple(outputs.shape) if isinstance(outputs, Tensor) else type(outputs).__name__
        raise InvalidArgumentError(
            f"predict_step must return logits [n, C] for a batch of n inputs (here {what}), got {shape}"
        )
    return outputs.detach().float()


def _batched_logits(outputs: Any, n: int, k: int) -> Tensor:
    """Logits ``[n, k, C]`` from one expanded ``predict_step`` (rows item-major)."""
    logits = _checked_logits(outputs, n, (n, n * k), f"{n} items x {k} samples = {n * k} rows under MC sampling")
    if logits.shape[0] == n:  # no dropout layer was reached: K identical samples
        logits = logits.unsqueeze(1).expand(n, k, logits.shape[-1])
    return logits.reshape(n, k, -1)


def _sequential_logits(trainer: Any, pl_module: nn.Module, first: Any, batch: Any, batch_idx: int,
                       k: int) -> Tensor:
    """Logits ``[n, k, C]``: ``first`` (sample 0) and one more ``predict_step`` per sample id 1..k-1."""
    n = len(batch)
    what = f"{n} items, one sample per pass"
    samples = [_checked_logits(first, n, (n,), what)]
    for sample_id in range(1, k):
        with mc_sampling(pl_module, [sample_id], expand=False):
            outputs = trainer.strategy.predict_step(batch, batch_idx)
        samples.append(_checked_logits(outputs, n, (n,), what))
    return torch.stack(samples, dim=1)


class MCDropoutPredictions:
    """A Lightning callback that turns ``trainer.predict`` into K consistent MC dropout samples.

    Created with ``num_samples`` (K) and a ``generator`` (a ``torch.Generator`` or an
    int mask seed, as in :func:`~activebayes.models.predict_log_probs`; ``None`` keeps
    the masks the module holds); ``on_predict_start`` fixes the masks of the module's
    :class:`~activebayes.models.ConsistentMCDropout` layers (``resample_masks``). With
    ``sampling="batched"`` each ``predict_step`` runs inside ``mc_sampling(module, range(K))``
    and returns logits ``[n * K, C]``; with ``"sequential"`` it runs with the masks of
    sample 0 and the callback calls ``predict_step`` again for samples 1..K-1 (K full
    passes, for a module that mixes activations from before and after its first
    dropout). The logits are stored as log-probabilities; :attr:`log_probs_N_K_C`
    concatenates the batches in order.

    Built lazily as a subclass of ``lightning.pytorch.Callback`` (use :meth:`create`).
    """

    @staticmethod
    def create(num_samples: int, generator: torch.Generator | int | None = None, sampling: str = "batched") -> Any:
        pl = _lightning()
        check_positive_int(num_samples, "num_samples")
        check_choice(sampling, "sampling", SAMPLING_MODES)

        class _MCDropoutPredictions(pl.Callback):
            def __init__(self) -> None:
                self.num_samples = num_samples
                self.generator = generator
                self.sampling = sampling
                self.batches: list[Tensor] = []
                self._stack: contextlib.ExitStack | None = None

            def on_predict_start(self, trainer: Any, pl_module: nn.Module) -> None:
                self.batches = []
                # as predict_log_probs: a generator / int seed draws the masks, None keeps those held
                layers = mc_dropout_layers(pl_module)
                if self.generator is not None or any(layer.mask_seed is None for layer in layers):
                    resample_masks(pl_module, generator=self.generator)

            def on_predict_batch_start(self, trainer: Any, pl_module: nn.Module, batch: Any, batch_idx: int,
                                       dataloader_idx: int = 0) -> None:
                batched = self.sampling == "batched"
                sample_ids = range(self.num_samples) if batched else [0]
                self._stack = contextlib.ExitStack()
                self._stack.enter_context(mc_sampling(pl_module, sample_ids, expand=batched))

            def on_predict_batch_end(self, trainer: Any, pl_module: nn.Module, outputs: Any, batch: Any,
                                     batch_idx: int, dataloader_idx: int = 0) -> None:
                assert self._stack is not None
                self._close()
                if self.sampling == "batched":
                    logits_n_k_C = _batched_logits(outputs, len(batch), self.num_samples)
                else:
                    logits_n_k_C = _sequential_logits(trainer, pl_module, outputs, batch, batch_idx,
                                                      self.num_samples)
                if looks_like_probabilities(logits_n_k_C.reshape(-1, logits_n_k_C.shape[-1])):
                    raise probabilities_error("of predict_step")
                self.batches.append(F.log_softmax(logits_n_k_C, dim=-1).cpu())

            def on_predict_end(self, trainer: Any, pl_module: nn.Module) -> None:
                self._close()

            def on_exception(self, trainer: Any, pl_module: nn.Module, exception: BaseException) -> None:
                self._close()  # a failed predict_step must not leave the sampling context open

            def _close(self) -> None:
                if self._stack is not None:
                    self._stack.close()
                    self._stack = None

            @property
            def log_probs_N_K_C(self) -> Tensor:
                return torch.cat(self.batches)

        return _MCDropoutPredictions()


def _training_loader(inputs_N: Tensor, targets_N: Tensor, batch_size: int, seed: int) -> DataLoader:
    """Seeded shuffled batches of ``min(batch_size, N)`` items, every batch full.

    An epoch is every item once in a random order, topped up with the first items of a
    second order to whole batches (as activebayes' ``fit``, whose epochs are whole
    minibatches): a BatchNorm module never gets a last batch of one item. When
    ``batch_size`` divides N this is ``DataLoader(shuffle=True)`` with the same order.
    """
    dataset = TensorDataset(inputs_N, targets_N)
    step = min(batch_size, len(dataset))
    generator = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(dataset, num_samples=math.ceil(len(dataset) / step) * step, generator=generator)
    return DataLoader(dataset, batch_size=step, sampler=sampler, generator=generator)


def _plain_pass_error(module: nn.Module, inputs_n: Tensor) -> RuntimeError | None:
    """The error of one plain pass (one function, no expansion) of ``module`` on an item, if it fails."""
    flags = {layer: layer.training for layer in module.modules()}
    device = next(module.parameters(), torch.empty(0)).device
    module.eval()
    try:
        with torch.no_grad(), mc_sampling(module, [0], expand=False):
            module(inputs_n[:1].to(device))
    except RuntimeError as error:
        return error
    finally:
        for layer, flag in flags.items():
            layer.training = flag
    return None


class LightningPosterior:
    """A :class:`~activebayes.models.Posterior` driving your LightningModule through your Trainer.

    Args:
        module: a ``lightning.pytorch.LightningModule`` with at least one ``nn.Dropout``
            (converted in place to consistent MC dropout) whose ``training_step`` takes
            batches ``(inputs_b, targets_b)`` and whose ``predict_step(batch, batch_idx)``
            returns logits ``[n, C]`` for a batch of inputs ``[n, ...]`` (keeping the
            batch dimension up to the first dropout layer). ``validation_step``, if
            defined, gets ``(inputs_b, targets_b)`` of the validation set.
        trainer_factory: ``() -> lightning.Trainer``, called once per ``fit`` and per
            ``log_probs`` (your accelerator, precision, callbacks, max_epochs ...).
        batch_size: items per training batch (``min(batch_size, N)``; every batch is full,
            see :meth:`fit`).
        predict_batch_size: items per ``predict_step`` (each runs ``K`` samples, so
            ``predict_batch_size * K`` rows pass the layers after the first dropout).
        sampling: ``"batched"`` (one ``predict_step`` per batch for all K samples; the
            layers before the first dropout run once per item) or ``"sequential"`` (K
            ``predict_step`` passes per batch, for a module that mixes activations from
            before and after its first dropout, e.g. ``h + dropout(h)``). The loop's pool
            scoring samples the same way.

    Example: see the how-to page "Lightning" (docs/guides/lightning.md).
    """

    def __init__(
        self,
        module: nn.Module,
        trainer_factory: Callable[[], Any],
        *,
        batch_size: int = 64,
        predict_batch_size: int = 256,
        sampling: str = "batched",
    ) -> None:
        check_lightning_module(module)
        if not callable(trainer_factory):
            raise InvalidTypeError(
                f"trainer_factory must be a callable () -> lightning.Trainer, got {type(trainer_factory).__name__}"
            )
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.predict_batch_size = check_positive_int(predict_batch_size, "predict_batch_size")
        self.sampling = check_choice(sampling, "sampling", SAMPLING_MODES)  # the loop's score_pool reads it
        self.lightning_module = mc_dropout(module, inplace=True)
        self.trainer_factory = trainer_factory
        self._module = PredictStepModule(self.lightning_module)

    def _trainer(self, *extra_callbacks: Any) -> Any:
        pl = _lightning()
        trainer = self.trainer_factory()
        if not isinstance(trainer, pl.Trainer):
            raise InvalidTypeError(
                f"trainer_factory must return a lightning.pytorch.Trainer, got {type(trainer).__name__}"
            )
        trainer.callbacks.extend(extra_callbacks)
        return trainer

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def num_functions(self) -> int | None:
        return None

    def fit(self, train, *, validation=None, generator=None, device=None) -> dict[str, Any]:
        """``trainer.fit`` on ``train = (inputs_N, targets_N)``; seeded by ``generator``.

        Batches hold ``min(batch_size, N)`` items, all full: the last one of an epoch is
        topped up with other items (so a BatchNorm module never gets a batch of one item).
        ``device`` is not used: the Trainer's ``accelerator`` decides where to train. With no
        rows nothing is trained: the module as it is stands for the prior.
        """
        if no_labels(train):
            return dict(NO_LABELS)
        pl = _lightning()
        inputs_N, targets_N = from_numpy(train, "train")
        validation = None if validation is None else from_numpy(validation, "validation")
        seed = seed_from(generator)
        loader = _training_loader(inputs_N, targets_N, self.batch_size, seed)
        val_loader = None
        if validation is not None and type(self.lightning_module).validation_step is not pl.LightningModule.validation_step:
            val_loader = DataLoader(TensorDataset(*validation), batch_size=self.predict_batch_size)
        with global_state_restored():  # a Trainer(deterministic=True) sets torch flags
            trainer = self._trainer()
            torch.manual_seed(seed)
            try:
                trainer.fit(self.lightning_module, train_dataloaders=loader, val_dataloaders=val_loader)
            except RuntimeError as error:
                inputs_N = torch.as_tensor(inputs_N)
                plain = None if isinstance(error, torch.cuda.OutOfMemoryError) else (
                    _plain_pass_error(self._module, inputs_N))
                if plain is None:
                    raise
                raise unreadable_inputs(inputs_N, plain) from error
        summary = {"epochs_run": int(trainer.current_epoch), "global_step": int(trainer.global_step)}
        summary.update(scalar_summary(dict(trainer.callback_metrics)))
        return summary

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=None, device=None) -> Tensor:
        """``log_probs_N_K_C`` by ``trainer.predict`` with :class:`MCDropoutPredictions`.

        ``generator`` fixes the K masks as in :func:`~activebayes.models.predict_log_probs`
        (``None`` keeps the masks held); sample ``k``
        is one function for every item. ``batch_size`` (default ``predict_batch_size``)
        items per ``predict_step``. With ``sampling="batched"`` a ``predict_step`` that fails
        on the expanded batch while one plain pass works raises
        :class:`~activebayes.models.dropout.BatchedSamplingError` (use ``sampling="sequential"``).
        ``device`` is not used: the Trainer's accelerator decides.
        """
        if num_samples is None:
            raise InvalidArgumentError("num_samples is required (K function samples, e.g. num_samples=20), got None")
        inputs_N = as_input_tensor(inputs)
        batch_size = self.predict_batch_size if batch_size is None else check_positive_int(batch_size, "batch_size")
        callback = MCDropoutPredictions.create(num_samples, generator, self.sampling)
        trainer = self._trainer(callback)
        loader = DataLoader(_Rows(inputs_N), batch_size=batch_size)
        try:
            trainer.predict(self.lightning_module, dataloaders=loader, return_predictions=False)
        except RuntimeError as error:
            if isinstance(error, torch.cuda.OutOfMemoryError) or not len(inputs_N):
                raise
            plain = _plain_pass_error(self._module, inputs_N)
            if plain is not None:  # not the batched path: the module cannot read these inputs at all
                raise unreadable_inputs(inputs_N, plain) from error
            if self.sampling != "batched":
                raise
            raise self._batched_failure(error) from error
        return callback.log_probs_N_K_C

    def _batched_failure(self, error: RuntimeError) -> BatchedSamplingError:
        reason = str(error).split("; ")[0]
        return BatchedSamplingError(
            f"predict_step of {type(self.lightning_module).__name__} failed under batched MC sampling ({reason}), "
            "though one plain pass works; if it mixes activations from before and after its first dropout "
            "layer (a skip connection around it), use LightningPosterior(..., sampling='sequential')"
        )

    def features(self, inputs, *, batch_size=512, device=None) -> Tensor:
        from activebayes.models.embeddings import penultimate_features

        try:
            return penultimate_features(self._module, as_input_tensor(inputs), batch_size=batch_size, device=device)
        except (InvalidArgumentError, InvalidTypeError) as error:
            raise FeaturesUnavailableError(str(error)) from None

    def __repr__(self) -> str:
        return f"LightningPosterior({type(self.lightning_module).__name__})"
