"""Hugging Face transformers 5.x: a sequence classifier, its ``Trainer`` or plain forward.

:class:`HuggingFacePosterior` wraps a ``PreTrainedModel`` whose forward takes
``input_ids`` / ``attention_mask`` (/ ``labels``) and returns ``.logits [n, C]`` (e.g.
``BertForSequenceClassification``). Pool items are token ids ``input_ids_N_L`` (one
tensor, padded to one length ``L`` with ``config.pad_token_id``; the attention mask is
``input_ids != pad_token_id``). In an activebayes dataset (``from_arrays``) they are stored
as float32, exact for ids below 2**24, and cast back to int64 before the model.

- Consistent MC dropout over the whole pool: the model's ``nn.Dropout`` modules are
  converted in place to :class:`~activebayes.models.ConsistentMCDropout`; sample ``k``
  applies the same masks to every item in every batch. A transformer carries the
  attention mask past its first dropout layer, so the K samples are K full forward
  passes (one per sample id), never an expanded batch.
- K is honoured everywhere: :meth:`HuggingFacePosterior.log_probs`,
  :meth:`~HuggingFacePosterior.evaluate` and the loop's pool scoring all return
  ``[N, K, C]`` (baal's ``Trainer`` subclass draws one sample in ``evaluate()``).
- The eval batch size is honoured: at most ``per_device_eval_batch_size`` items (or
  ``eval_batch_size=``) per forward, whatever N, and the pool is streamed in chunks.
- Training: with ``training_args=`` (``transformers.TrainingArguments``) a
  ``transformers.Trainer`` trains the model (its seed set from the round's generator;
  the global RNGs and determinism settings it sets are restored afterwards); without,
  :func:`activebayes.models.fit` trains it (``fit_options=``).

Dropout that a model applies functionally (``F.dropout(..., training=self.training)``,
e.g. BERT's attention-probability dropout) is off in evaluation and so not sampled;
the hidden-state and classifier dropout modules are.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from activebayes._seeding import global_state_restored
from activebayes._validation import check_positive_int
from activebayes.adapters._common import as_input_tensor, from_numpy, require, sample_by_sample, seed_from
from activebayes.errors import ActiveBayesError, InvalidArgumentError, InvalidTypeError
from activebayes.models.dropout import mc_dropout, mc_sampling, resample_masks
from activebayes.models.posterior import NO_LABELS, FeaturesUnavailableError, fit_summary, no_labels

__all__ = ["HuggingFaceClassifier", "HuggingFacePosterior"]

#: items per forward when neither ``eval_batch_size`` nor ``training_args`` says
DEFAULT_EVAL_BATCH_SIZE = 32


def _transformers() -> Any:
    return require("transformers", "transformers", "HuggingFacePosterior")


def check_token_ids(input_ids: Tensor, vocab_size: int | None, what: str = "input_ids", *,
                    max_length: int | None = None) -> Tensor:
    """``input_ids`` as int64 token ids in ``[0, vocab_size)``, or a one-line error naming ``what``.

    Float ids (an activebayes dataset stores them as float32) must be finite; ``vocab_size``
    ``None`` checks only that the ids are not negative. With ``max_length`` (the model's
    ``max_position_embeddings``) sequences ``[n, L]`` must have ``L <= max_length``.
    """
    if not isinstance(input_ids, Tensor):
        raise InvalidTypeError(f"{what} must be a tensor of token ids [n, L], got {type(input_ids).__name__}")
    if input_ids.is_floating_point() and not bool(torch.isfinite(input_ids).all()):
        raise InvalidArgumentError(f"{what} must be token ids (whole numbers), got NaN or inf")
    if input_ids.ndim != 2:
        raise InvalidArgumentError(f"{what} must be token ids [n, L] (one row of L tokens per item), "
                                   f"got shape {list(input_ids.shape)}")
    ids = input_ids.long()
    if max_length is not None and ids.ndim == 2 and ids.shape[1] > max_length:
        raise InvalidArgumentError(f"{what} hold sequences of {ids.shape[1]} tokens, but the model reads at most "
                                   f"{max_length} (its max_position_embeddings): truncate them to {max_length}")
    if ids.numel() == 0:
        return ids
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or (vocab_size is not None and high >= vocab_size):
        expected = "token ids >= 0" if vocab_size is None else f"token ids in [0, {vocab_size}) (the vocab_size)"
        raise InvalidArgumentError(f"{what} must be {expected}, got ids from {low} to {high}")
    return ids


def _check_ids_shape(inputs: Any, what: str = "inputs") -> None:
    """Token ids ``[N, L]`` (or ``(input_ids, labels)``), else a one-line error with their whole shape."""
    ids = inputs[0] if isinstance(inputs, (tuple, list)) and len(inputs) == 2 else inputs
    shape = getattr(ids, "shape", None)
    if shape is not None and len(shape) != 2:
        raise InvalidArgumentError(f"{what} must be token ids [N, L] (one row of L tokens per item), "
                                   f"got shape {list(shape)}")


def _config_int(model: nn.Module, name: str) -> int | None:
    value = getattr(getattr(model, "config", None), name, None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _vocab_size(model: nn.Module) -> int | None:
    return _config_int(model, "vocab_size")


def _max_length(model: nn.Module) -> int | None:
    return _config_int(model, "max_position_embeddings")


def _logits(output: Any) -> Tensor:
    """The logits ``[n, C]`` of a transformers output: ``.logits``, or a tuple's first element
    (``return_dict=False``)."""
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], Tensor):
        return output[0]
    logits = getattr(output, "logits", None)
    if not isinstance(logits, Tensor):
        raise InvalidTypeError(
            "the model must return logits [n, C] (an output with .logits, or a tuple whose first element is the "
            f"logits), got {type(output).__name__}"
        )
    return logits


class HuggingFaceClassifier(nn.Module):
    """``forward(input_ids_n_L) -> logits [n, C]`` of a transformers classifier.

    The attention mask is ``input_ids != pad_token_id`` (all ones without a pad id). The ids
    are checked against ``config.vocab_size``; a model built with ``return_dict=False``
    (a tuple output) gives its first element as the logits.
    Inside an expanding MC sampling context the K samples are K full passes, rows
    item-major, so :func:`~activebayes.models.predict_log_probs` and
    :func:`~activebayes.scoring.score_pool` run it as any MC dropout network.
    """

    def __init__(self, model: nn.Module, pad_token_id: int | None = None) -> None:
        super().__init__()
        self.model = model
        self.pad_token_id = getattr(model.config, "pad_token_id", None) if pad_token_id is None else pad_token_id

    def forward(self, input_ids: Tensor) -> Tensor:
        input_ids = check_token_ids(input_ids, _vocab_size(self.model), max_length=_max_length(self.model))
        mask = None if self.pad_token_id is None else (input_ids != self.pad_token_id).long()
        try:
            return sample_by_sample(self, lambda: _logits(self.model(input_ids=input_ids, attention_mask=mask)))
        except (RuntimeError, ValueError) as error:  # the model cannot read these ids (as predict_log_probs says)
            if isinstance(error, (ActiveBayesError, torch.cuda.OutOfMemoryError)):
                raise
            from activebayes.models.predict import unreadable_inputs

            raise unreadable_inputs(input_ids, error) from error


class _TokenDataset(Dataset):
    """``{"input_ids", "attention_mask", "labels"}`` items for a ``transformers.Trainer``."""

    def __init__(self, input_ids_N_L: Tensor, labels_N: Tensor, pad_token_id: int | None) -> None:
        self.input_ids_N_L = input_ids_N_L.long()
        self.labels_N = labels_N.long()
        self.pad_token_id = pad_token_id

    def __len__(self) -> int:
        return len(self.labels_N)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        ids = self.input_ids_N_L[index]
        mask = torch.ones_like(ids) if self.pad_token_id is None else (ids != self.pad_token_id).long()
        return {"input_ids": ids, "attention_mask": mask, "labels": self.labels_N[index]}


def _dropout_settings(config: Any) -> str:
    settings = {key: value for key, value in config.to_dict().items() if "dropout" in key}
    return ", ".join(f"{key}={value}" for key, value in sorted(settings.items())) or "no dropout settings"


def _check_samples_differ(classifier: HuggingFaceClassifier, name: str) -> None:
    """One tiny probe: do two MC samples of the converted model differ? Else a one-line error."""
    config = classifier.model.config
    vocab = int(getattr(config, "vocab_size", 2) or 2)
    length = min(8, int(getattr(config, "max_position_embeddings", 8) or 8))
    pad = classifier.pad_token_id
    ids = [(i + 1) % vocab for i in range(length)]
    input_ids = torch.tensor([[i if i != pad else (i + 1) % vocab for i in ids]])
    flags = {module: module.training for module in classifier.modules()}
    held = [layer.mask_seed for layer in classifier.modules() if hasattr(layer, "mask_seed")]
    device = next(classifier.parameters()).device
    classifier.eval()
    try:
        resample_masks(classifier, generator=0)
        with torch.no_grad(), mc_sampling(classifier, [0, 1]):
            logits = classifier(input_ids.to(device))
    finally:
        for module, flag in flags.items():
            module.training = flag
        layers = [layer for layer in classifier.modules() if hasattr(layer, "mask_seed")]
        for layer, seed in zip(layers, held, strict=True):
            layer.mask_seed = seed
    if torch.equal(logits[0], logits[1]):
        raise InvalidArgumentError(
            f"model {name} has no dropout that MC sampling can use ({_dropout_settings(config)}): set its "
            "config's hidden_dropout_prob (or classifier_dropout / dropout) > 0, e.g. 0.1, before creating the model"
        )


class HuggingFacePosterior:
    """A :class:`~activebayes.models.Posterior` around a transformers sequence classifier.

    Args:
        model: a ``transformers.PreTrainedModel`` returning ``.logits [n, C]`` from
            ``input_ids`` / ``attention_mask``, with dropout > 0 (converted in place
            to consistent MC dropout).
        training_args: ``transformers.TrainingArguments``: train with a
            ``transformers.Trainer`` (its ``seed`` / ``data_seed`` are set from the
            round's generator); its ``per_device_eval_batch_size`` is the default
            eval batch size. ``None``: train with :func:`activebayes.models.fit`.
        trainer_kwargs: more keyword arguments of ``transformers.Trainer``
            (``callbacks``, ``optimizers``, ``compute_metrics`` ...).
        fit_options: keyword arguments of :func:`activebayes.models.fit` (no Trainer).
        eval_batch_size: at most this many items per forward in prediction.
        pad_token_id: the padding id of ``input_ids`` (default: ``model.config.pad_token_id``).

    Example: see the how-to page "Hugging Face" (docs/guides/huggingface.md).
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        training_args: Any = None,
        trainer_kwargs: Mapping[str, Any] | None = None,
        fit_options: Mapping[str, Any] | None = None,
        eval_batch_size: int | None = None,
        pad_token_id: int | None = None,
    ) -> None:
        transformers = _transformers()
        if not isinstance(model, transformers.PreTrainedModel):
            raise InvalidTypeError(f"model must be a transformers.PreTrainedModel, got {type(model).__name__}")
        if training_args is not None and not isinstance(training_args, transformers.TrainingArguments):
            raise InvalidTypeError(
                f"training_args must be a transformers.TrainingArguments or None, got {type(training_args).__name__}"
            )
        if training_args is None and trainer_kwargs:
            raise InvalidArgumentError("trainer_kwargs needs training_args (the Trainer is built only with them)")
        if training_args is not None and fit_options:
            raise InvalidArgumentError("fit_options are for training without a Trainer (activebayes.models.fit): "
                                       "with training_args, set them in the TrainingArguments")
        from activebayes.models.training import check_fit_options

        check_fit_options(dict(fit_options or {}), "fit_options", set_by="HuggingFacePosterior.fit")
        if eval_batch_size is None:
            eval_batch_size = (DEFAULT_EVAL_BATCH_SIZE if training_args is None
                               else int(training_args.per_device_eval_batch_size))
        self.eval_batch_size = check_positive_int(eval_batch_size, "eval_batch_size")
        self.training_args = training_args
        self.trainer_kwargs = dict(trainer_kwargs or {})
        self.fit_options = dict(fit_options or {})
        self.model = mc_dropout(model, inplace=True)
        self._module = HuggingFaceClassifier(self.model, pad_token_id)
        _check_samples_differ(self._module, type(model).__name__)

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def num_functions(self) -> int | None:
        return None

    @property
    def num_classes(self) -> int:
        return int(self.model.config.num_labels)

    def fit(self, train, *, validation=None, generator=None, device=None) -> dict[str, Any]:
        """Train on ``train = (input_ids_N_L, labels_N)``: the Trainer's ``train()`` or activebayes ``fit``
        (nothing with no rows: the model as it is stands for the prior)."""
        if no_labels(train):
            return dict(NO_LABELS)
        train = from_numpy(train, "train")
        validation = None if validation is None else from_numpy(validation, "validation")
        if self.training_args is None:
            from activebayes.models.training import fit

            result = fit(self._module, train, validation=validation, generator=generator, device=device,
                         **self.fit_options)
            return fit_summary(result)
        from activebayes.models.training import _as_tensors, check_class_ids

        transformers = _transformers()
        # the checks of activebayes' fit: (ids, labels) of one length, labels class ids >= 0 below num_labels
        train = _as_tensors(train, "train")
        validation = None if validation is None else _as_tensors(validation, "validation")
        seed = seed_from(generator)
        args = copy.deepcopy(self.training_args)
        args.seed = seed % 2**32
        args.data_seed = seed % 2**32
        pad = self._module.pad_token_id
        vocab_size = _vocab_size(self.model)
        max_length = _max_length(self.model)
        check_token_ids(train[0], vocab_size, "train input_ids", max_length=max_length)
        if validation is not None:
            check_token_ids(validation[0], vocab_size, "validation input_ids", max_length=max_length)
        check_class_ids(train[1], self.num_classes, None if validation is None else validation[1],
                        source="(its config.num_labels)")
        eval_dataset = None if validation is None else _TokenDataset(*validation, pad)
        with global_state_restored():  # the Trainer seeds random, NumPy and torch (set_seed)
            trainer = transformers.Trainer(model=self.model, args=args, train_dataset=_TokenDataset(*train, pad),
                                           eval_dataset=eval_dataset, **self.trainer_kwargs)
            output = trainer.train()
        self.model.eval()
        return fit_summary(dict(output.metrics, global_step=int(output.global_step)))

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=None, device=None) -> Tensor:
        """``log_probs_N_K_C`` for token ids ``[N, L]``: K consistent MC dropout samples.

        ``batch_size`` (default: the eval batch size) items per forward at most.
        """
        from activebayes.models.predict import predict_log_probs

        if num_samples is None:
            raise InvalidArgumentError("num_samples is required (K function samples, e.g. num_samples=20), got None")
        batch_size = self.eval_batch_size if batch_size is None else check_positive_int(batch_size, "batch_size")
        inputs = from_numpy(inputs, "inputs")
        _check_ids_shape(inputs)
        return predict_log_probs(self._module, inputs, num_samples, batch_size=batch_size, generator=generator,
                                 device=device)

    def evaluate(self, inputs, targets, *, num_samples: int, generator=None, batch_size=None,
                 device=None) -> dict[str, Any]:
        """Accuracy, NLL, ECE, ... of the K-sample predictive (:func:`~activebayes.metrics.evaluate_classification`)."""
        from activebayes.metrics import evaluate_classification

        log_probs_N_K_C = self.log_probs(inputs, num_samples=num_samples, generator=generator,
                                         batch_size=batch_size, device=device)
        return evaluate_classification(log_probs_N_K_C, torch.as_tensor(targets), num_classes=self.num_classes)

    def features(self, inputs, *, batch_size=None, device=None) -> Tensor:
        """The classifier head's input (e.g. BERT's pooled output) ``[N, D]``, deterministic."""
        from activebayes.models.embeddings import penultimate_features

        batch_size = self.eval_batch_size if batch_size is None else batch_size
        try:
            return penultimate_features(self._module, as_input_tensor(inputs), batch_size=batch_size, device=device)
        except (InvalidArgumentError, InvalidTypeError) as error:
            raise FeaturesUnavailableError(str(error)) from None

    def __repr__(self) -> str:
        return f"HuggingFacePosterior({type(self.model).__name__})"
