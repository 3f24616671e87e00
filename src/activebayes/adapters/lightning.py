"""PyTorch Lightning 2.x: your LightningModule and your ``Trainer``, K coherent functions.

:class:`LightningPosterior` wraps a ``LightningModule`` with ``nn.Dropout`` layers and a
factory of your ``lightning.Trainer``. Nothing is subclassed:

- ``fit`` calls ``trainer.fit(module, train_dataloaders, val_dataloaders)`` on a fresh
  Trainer from your factory; batches are ``(inputs_b, targets_b)``, shuffled by a
  seeded generator, and dropout's RNG is seeded (so a seed gives the same weights).
- ``log_probs`` calls ``trainer.predict`` with the :class:`MCDropoutPredictions`
  callback: around each ``predict_step`` it opens a consistent MC dropout context for
  sample ids ``0..K-1`` (masks fixed once per call from a seed), so your
  ``predict_step(batch, batch_idx)``, given a batch of inputs ``[n, ...]``, returns
  logits for ``n * K`` rows, item-major, that the callback collects as ``[n, K, C]``.
- ``module`` is a :class:`PredictStepModule`: an ``nn.Module`` whose ``forward`` is your
  ``predict_step``, for the loop's pool scoring (:func:`~activebayes.scoring.score_pool`,
  Ray). It holds the same converted dropout layers, so both paths give the same numbers.

The module's ``nn.Dropout`` layers are converted in place to
:class:`~activebayes.models.ConsistentMCDropout` (ordinary dropout in training).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from activebayes._validation import Device, check_positive_int
from activebayes.adapters._common import as_input_tensor, require, scalar_summary, seed_from
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models.dropout import mc_dropout, mc_dropout_layers, mc_sampling, resample_masks
from activebayes.models.posterior import NO_LABELS, FeaturesUnavailableError, no_labels

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


class MCDropoutPredictions:
    """A Lightning callback that turns ``trainer.predict`` into K consistent MC dropout samples.

    Created with ``num_samples`` (K) and a ``generator`` (a ``torch.Generator`` or an
    int mask seed, as in :func:`~activebayes.models.predict_log_probs`; ``None`` keeps
    the masks the module holds); ``on_predict_start`` fixes the masks of the module's
    :class:`~activebayes.models.ConsistentMCDropout` layers (``resample_masks``), each ``predict_step`` runs inside
    ``mc_sampling(module, range(K))`` and its logits ``[n * K, C]`` are stored as
    log-probabilities; :attr:`log_probs_N_K_C` concatenates the batches in order.

    Built lazily as a subclass of ``lightning.pytorch.Callback`` (use :meth:`create`).
    """

    @staticmethod
    def create(num_samples: int, generator: torch.Generator | int | None = None) -> Any:
        pl = _lightning()
        check_positive_int(num_samples, "num_samples")

        class _MCDropoutPredictions(pl.Callback):
            def __init__(self) -> None:
                self.num_samples = num_samples
                self.generator = generator
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
                self._stack = contextlib.ExitStack()
                self._stack.enter_context(mc_sampling(pl_module, range(self.num_samples), expand=True))

            def on_predict_batch_end(self, trainer: Any, pl_module: nn.Module, outputs: Any, batch: Any,
                                     batch_idx: int, dataloader_idx: int = 0) -> None:
                assert self._stack is not None
                self._stack.close()
                self._stack = None
                n, k = len(batch), self.num_samples
                if not isinstance(outputs, Tensor) or outputs.ndim != 2 or outputs.shape[0] not in (n, n * k):
                    shape = tuple(outputs.shape) if isinstance(outputs, Tensor) else type(outputs).__name__
                    raise InvalidArgumentError(
                        f"predict_step must return logits [n, C] for a batch of n inputs (here {n} items x "
                        f"{k} samples = {n * k} rows under MC sampling), got {shape}"
                    )
                logits = outputs.detach().float()
                if logits.shape[0] == n:  # no dropout layer was reached: K identical samples
                    logits = logits.unsqueeze(1).expand(n, k, logits.shape[-1])
                self.batches.append(F.log_softmax(logits.reshape(n, k, -1), dim=-1).cpu())

            def on_predict_end(self, trainer: Any, pl_module: nn.Module) -> None:
                if self._stack is not None:
                    self._stack.close()
                    self._stack = None

            @property
            def log_probs_N_K_C(self) -> Tensor:
                return torch.cat(self.batches)

        return _MCDropoutPredictions()


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
        batch_size: items per training batch.
        predict_batch_size: items per ``predict_step`` (each runs ``K`` samples, so
            ``predict_batch_size * K`` rows pass the layers after the first dropout).

    Example: see the how-to page "Lightning" (docs/guides/lightning.md).
    """

    def __init__(
        self,
        module: nn.Module,
        trainer_factory: Callable[[], Any],
        *,
        batch_size: int = 64,
        predict_batch_size: int = 256,
    ) -> None:
        check_lightning_module(module)
        if not callable(trainer_factory):
            raise InvalidTypeError(
                f"trainer_factory must be a callable () -> lightning.Trainer, got {type(trainer_factory).__name__}"
            )
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.predict_batch_size = check_positive_int(predict_batch_size, "predict_batch_size")
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

        ``device`` is not used: the Trainer's ``accelerator`` decides where to train. With no
        rows nothing is trained: the module as it is stands for the prior.
        """
        if no_labels(train):
            return dict(NO_LABELS)
        pl = _lightning()
        inputs_N, targets_N = train
        seed = seed_from(generator)
        loader = DataLoader(TensorDataset(inputs_N, targets_N), batch_size=self.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(seed))
        val_loader = None
        if validation is not None and type(self.lightning_module).validation_step is not pl.LightningModule.validation_step:
            val_loader = DataLoader(TensorDataset(*validation), batch_size=self.predict_batch_size)
        trainer = self._trainer()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            trainer.fit(self.lightning_module, train_dataloaders=loader, val_dataloaders=val_loader)
        summary = {"epochs_run": int(trainer.current_epoch), "global_step": int(trainer.global_step)}
        summary.update(scalar_summary(dict(trainer.callback_metrics)))
        return summary

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=None, device=None) -> Tensor:
        """``log_probs_N_K_C`` by ``trainer.predict`` with :class:`MCDropoutPredictions`.

        ``generator`` fixes the K masks as in :func:`~activebayes.models.predict_log_probs`
        (``None`` keeps the masks held); sample ``k``
        is one function for every item. ``batch_size`` (default ``predict_batch_size``)
        items per ``predict_step``. ``device`` is not used: the Trainer's accelerator decides.
        """
        if num_samples is None:
            raise InvalidArgumentError("num_samples is required (K function samples, e.g. num_samples=20), got None")
        inputs_N = as_input_tensor(inputs)
        batch_size = self.predict_batch_size if batch_size is None else check_positive_int(batch_size, "batch_size")
        callback = MCDropoutPredictions.create(num_samples, generator)
        trainer = self._trainer(callback)
        loader = DataLoader(_Rows(inputs_N), batch_size=batch_size)
        trainer.predict(self.lightning_module, dataloaders=loader, return_predictions=False)
        return callback.log_probs_N_K_C

    def features(self, inputs, *, batch_size=512, device=None) -> Tensor:
        from activebayes.models.embeddings import penultimate_features

        try:
            return penultimate_features(self._module, as_input_tensor(inputs), batch_size=batch_size, device=device)
        except (InvalidArgumentError, InvalidTypeError) as error:
            raise FeaturesUnavailableError(str(error)) from None

    def __repr__(self) -> str:
        return f"LightningPosterior({type(self.lightning_module).__name__})"
