"""Training for active learning: ``fit`` and ``reset_parameters``.

Adam (lr 1e-3), minibatches of 64, early stopping with the best weights restored, as in
the BatchBALD reference setup (Kirsch et al. 2019, the batchbald_redux example), with
epochs **sized by the labelled set** by default: minibatches of at most N items and
epochs of at least 20 steps (so 10 labels train in seconds, not in the minutes that
5,056 draws per epoch take), early stopping on the validation accuracy (patience 5,
never before 200 steps: a small validation set peaks by chance early) or, without a
validation set, once the training loss stops falling. ``PAPER_FIT_OPTIONS`` is the
paper's own setting (epochs of at least 5,056 draws in batches of 64, patience 3, every
epoch run without validation), which the benchmarks use where they compare with the
published numbers. Weight decay 1e-4 as in the MLSS tutorial (seed 000). The loss is
``F.cross_entropy`` on logits: a fused, numerically stable ``log_softmax + nll`` (seed
000 explains why that beats ``log(softmax)`` or BCE on probabilities in float32).
"""

from __future__ import annotations

import copy
import difflib
import inspect
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import Dataset, TensorDataset
from tqdm.auto import tqdm

from activebayes._validation import check_choice, check_positive_int, check_torch_device
from activebayes._seeding import as_generator, draw_seed, global_rng_seeded
from activebayes._threads import threads_for
from activebayes.models._lockstep import fit_lockstep, stackable
from activebayes.models.encoders import split_frozen
from activebayes.models.ensemble import Ensemble
from activebayes.errors import ActiveBayesError, InvalidArgumentError, InvalidTypeError
from activebayes.metrics.multilabel import label_decisions
from activebayes.metrics.predictive import log_mean_exp

__all__ = ["OPTIMIZERS", "PAPER_FIT_OPTIONS", "EpochRecord", "FitResult", "fit", "reset_parameters"]

OPTIMIZERS = ("adam", "sgd")

#: Sized by the data (the default): minibatches of at most N items, an epoch of at least
#: this many optimizer steps (20 for a tiny set; a plain pass over N >= 20 * 64 items) ...
MIN_STEPS_PER_EPOCH = 20
#: ... and early stopping on a validation set may stop after this many steps in all (a
#: small validation set peaks by chance early on; the digits protocol lost label
#: efficiency when it could stop after 100).
MIN_STEPS = 200
#: Without a validation set an epoch improves when its mean training loss falls by 1% ...
TRAIN_LOSS_MIN_DROP = 0.01
#: ... and training stops once it is below this (the labelled set is fitted).
TRAIN_LOSS_DONE = 0.05

#: The BatchBALD paper's training (Kirsch et al. 2019): epochs of at least 5,056 draws in
#: minibatches of 64 whatever the labelled set's size; every epoch runs without a validation set.
PAPER_FIT_OPTIONS: dict[str, int] = {"min_samples_per_epoch": 5056, "max_epochs": 30, "patience": 3}


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of training: mean train loss and (if a validation set was given) its metrics."""

    epoch: int
    train_loss: float
    validation_loss: float | None = None
    validation_accuracy: float | None = None


@dataclass(frozen=True)
class FitResult:
    """What ``fit`` did.

    Attributes:
        epochs_run: epochs trained (for an ensemble: the most any member ran).
        best_epoch: epoch (1-based) whose weights were kept; the last epoch when
            there is no validation set (for an ensemble: the latest member's).
        best_validation_loss / best_validation_accuracy: at ``best_epoch`` (for an
            ensemble: of the ensemble's mean predictive after training); ``None``
            without validation.
        history: one :class:`EpochRecord` per epoch (empty for an ensemble).
        members: per-member results of an ensemble, else empty.
    """

    epochs_run: int
    best_epoch: int
    best_validation_loss: float | None
    best_validation_accuracy: float | None
    history: list[EpochRecord] = field(default_factory=list)
    members: tuple[FitResult, ...] = ()


def _from_array_dataset(data: object, name: str) -> object:
    """An activebayes :class:`~activebayes.data.ArrayDataset` as the pair ``(inputs, targets)`` it
    holds (lazy inputs read: a training set is small); anything else as it is."""
    from activebayes.data.dataset import ArrayDataset

    if not isinstance(data, ArrayDataset):
        return data
    if data.targets is None:
        raise InvalidArgumentError(f"{name} is a dataset without targets ({data.name}): training needs "
                                   "labels")
    inputs = data.inputs if isinstance(data.inputs, Tensor) else data.inputs[torch.arange(len(data))]
    return (inputs, data.targets)


def _as_tensors(data: object, name: str, multilabel: bool = False) -> tuple[Tensor, Tensor]:
    """``(inputs [N, ...], targets [N] long)`` from a tuple, an activebayes ``ArrayDataset`` or a Dataset of
    ``(x, y)`` (``multilabel``: targets ``[N, C]`` 0/1 indicators, returned as float32)."""
    data = _from_array_dataset(data, name)
    if multilabel:
        return _multilabel_tensors(data, name)
    if isinstance(data, TensorDataset):
        data = data.tensors
    if isinstance(data, (tuple, list)):
        if len(data) != 2 or not all(isinstance(t, Tensor) for t in data):
            got = ", ".join(type(t).__name__ for t in data)
            hint = "; convert arrays with torch.as_tensor" if any(type(t).__module__ == "numpy" for t in data) else ""
            raise InvalidTypeError(f"{name} must be a tuple (inputs, targets) of tensors or a Dataset of (x, y), "
                                   f"got a {type(data).__name__} of {len(data)} ({got}){hint}")
        inputs, targets = data
    elif isinstance(data, Dataset) and hasattr(data, "__len__"):
        items = [data[i] for i in range(len(data))]  # type: ignore[arg-type]
        if items and not all(isinstance(item, (tuple, list)) and len(item) >= 2 for item in items):
            raise InvalidTypeError(f"{name} must yield (x, y) pairs; got items of type {type(items[0]).__name__}")
        inputs = torch.stack([torch.as_tensor(item[0]) for item in items]) if items else torch.empty(0)
        targets = torch.as_tensor([int(item[1]) for item in items], dtype=torch.long)
    else:
        raise InvalidTypeError(
            f"{name} must be a tuple (inputs, targets) of tensors, an activebayes ArrayDataset or a torch Dataset "
            f"of (x, y), got {type(data).__name__}"
        )
    if inputs.ndim == 0 or inputs.shape[0] == 0:
        raise InvalidArgumentError(f"{name} is empty: it has no items")
    targets = check_class_targets(targets, inputs.shape[0], name)
    _check_finite_inputs(inputs, name)
    return inputs, targets


def check_class_targets(targets: Tensor, n: int, name: str) -> Tensor:
    """``targets`` of the ``n`` items of ``name`` as int64 class ids, or a one-line error: shape ``[n]``,
    an integer dtype (a float label such as 1.7 is not truncated), no id below 0."""
    if targets.ndim != 1 or targets.shape[0] != n:
        raise InvalidArgumentError(f"{name} targets must have shape [N] = [{n}], got {tuple(targets.shape)}")
    if targets.is_floating_point():
        raise InvalidTypeError(f"{name} targets must be integer class indices, got dtype {targets.dtype}")
    negative = torch.nonzero(targets < 0).flatten().tolist()
    if negative:
        more = f" and {len(negative) - 5} more" if len(negative) > 5 else ""
        raise InvalidArgumentError(
            f"{name} targets must be class ids >= 0, got {int(targets[negative[0]])} in {len(negative)} item(s) "
            f"(rows {negative[:5]}{more}); leave unlabelled items out of training instead of marking them")
    return targets.long()


def _check_finite_inputs(inputs: Tensor, name: str) -> None:
    """Refuse NaN / inf inputs: one such item makes every weight NaN after the first step."""
    from activebayes.models.predict import nonfinite_rows

    rows = nonfinite_rows(inputs)
    if rows:
        more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
        raise InvalidArgumentError(f"{name} inputs hold NaN or inf in {len(rows)} item(s) (rows {rows[:5]}{more}); "
                                   "training on them would make every weight NaN")


def _multilabel_tensors(data: object, name: str) -> tuple[Tensor, Tensor]:
    """``(inputs [N, ...], targets_N_C float32 0/1)`` from a tuple of tensors."""
    if isinstance(data, TensorDataset):
        data = data.tensors
    if not (isinstance(data, (tuple, list)) and len(data) == 2 and all(isinstance(t, Tensor) for t in data)):
        raise InvalidTypeError(f"{name} must be a tuple (inputs, targets_N_C) of tensors for a multi-label fit")
    inputs, targets = data
    if inputs.ndim == 0 or inputs.shape[0] == 0:
        raise InvalidArgumentError(f"{name} is empty: it has no items")
    if targets.ndim != 2 or targets.shape[0] != inputs.shape[0]:
        raise InvalidArgumentError(f"{name} targets of a multi-label fit must be 0/1 indicators [N, C] with "
                                   f"N = {inputs.shape[0]}, got shape {tuple(targets.shape)}")
    if not bool(((targets == 0) | (targets == 1)).all()):
        raise InvalidArgumentError(f"{name} targets of a multi-label fit must hold only 0 and 1")
    _check_finite_inputs(inputs, name)
    return inputs, targets.float()


class EarlyStopping:
    """When to stop one network's training, and which epoch's weights to keep (see ``fit``)."""

    def __init__(self, *, has_validation: bool, paper: bool, patience: int, min_epochs: int, min_steps: int,
                 train_loss_min_drop: float, train_loss_done: float) -> None:
        self.has_validation, self.paper = has_validation, paper
        self.patience, self.min_epochs, self.min_steps = patience, min_epochs, min_steps
        self.min_drop, self.done = train_loss_min_drop, train_loss_done
        self.best_key: tuple[float, float] | None = None
        self.best_epoch = 0
        self.since_best = 0

    def update(self, epoch: int, train_loss: float, steps: int,
               validation: tuple[float, float] | None = None) -> tuple[bool, bool]:
        """``(keep, stop)`` after ``epoch``: keep these weights (with validation, a new best);
        stop training now."""
        may_stop = epoch >= self.min_epochs
        if validation is None:
            self.best_epoch = epoch  # without validation the last weights are kept
            if self.paper:  # every epoch runs
                return True, False
            if self.best_key is None or train_loss < self.best_key[0] * (1.0 - self.min_drop):
                self.best_key, self.since_best = (train_loss, 0.0), 0
            else:
                self.since_best += 1
            return True, (self.since_best >= self.patience or train_loss < self.done) and may_stop
        val_loss, val_acc = validation
        key = (val_acc, -val_loss)
        if self.best_key is None or key > self.best_key:
            self.best_key, self.best_epoch, self.since_best = key, epoch, 0
            return True, False
        self.since_best += 1
        return False, self.since_best >= self.patience and may_stop and (self.paper or steps >= self.min_steps)


def _no_batch_of_one(model: nn.Module, target: int, step_size: int) -> int:
    """An epoch of ``target`` draws, one more batch's worth where its last batch would hold a single
    item and the model has batch norm (which cannot train on one item); otherwise unchanged. A
    single training item with batch norm is an error naming the layer."""
    norms = [type(m).__name__ for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if norms and step_size == 1:
        raise InvalidArgumentError(f"the model has batch norm ({norms[0]}), which cannot train on batches of one "
                                   "item, and these are (train holds 1 item, or batch_size is 1): train on 2 or more "
                                   "(in the loop, initial_size >= 2) with batch_size >= 2")
    if target % step_size == 1 and step_size > 1 and norms:
        return target + step_size - 1
    return target


def _epoch_indices(n: int, target: int, generator: torch.Generator) -> Tensor:
    """One epoch's order: a permutation, or (if ``n < target``) ``target`` draws, each item ``floor``/``ceil(target/n)`` times."""
    if n >= target:
        return torch.randperm(n, generator=generator)
    passes = math.ceil(target / n)
    order = torch.cat([torch.randperm(n, generator=generator) for _ in range(passes)])
    return order[:target]


def _schedule(n: int, batch_size: int, min_samples_per_epoch: int | None, min_steps_per_epoch: int,
              has_validation: bool, patience: int, min_epochs: int, min_steps: int) -> tuple[int, int, EarlyStopping]:
    """``(step_size, draws per epoch, early stopping)`` for ``n`` training items (see ``fit``)."""
    paper = min_samples_per_epoch is not None
    if paper:  # the BatchBALD protocol: fixed-length epochs of full minibatches, whatever N
        step_size, target = batch_size, max(n, min_samples_per_epoch)
    else:  # sized by the data: minibatches of at most N items, epochs of a few steps at least
        step_size = min(batch_size, n)
        target = max(n, min_steps_per_epoch * step_size)
    stopping = EarlyStopping(has_validation=has_validation, paper=paper, patience=patience, min_epochs=min_epochs,
                             min_steps=min_steps, train_loss_min_drop=TRAIN_LOSS_MIN_DROP,
                             train_loss_done=TRAIN_LOSS_DONE)
    return step_size, target, stopping


def _first_logits(model: nn.Module, x: Tensor, targets: Tensor, val: tuple[Tensor, Tensor] | None) -> Tensor:
    """``model(x)`` for the first batch, checked once: the model reads ``x`` and returns
    floating logits ``[n, C]`` with a column for every class (every label) of the targets."""
    try:
        logits = model(x)
    except (RuntimeError, IndexError) as error:
        from activebayes.models.predict import is_input_error, unreadable_inputs

        if not is_input_error(error):
            raise

        raise unreadable_inputs(x, error) from error
    if not isinstance(logits, Tensor):
        raise InvalidTypeError(f"model must return logits [n, C] (a tensor), got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise InvalidTypeError(f"model must return floating-point logits [n, C], got dtype {logits.dtype}")
    if logits.ndim != 2 or logits.shape[0] != x.shape[0]:
        raise InvalidArgumentError(f"model must return logits [n, C] (one row per item, one column per class), "
                                   f"got shape {list(logits.shape)} for a batch of {x.shape[0]} items")
    if targets.ndim == 2:  # multi-label: one logit per label
        if logits.shape[1] != targets.shape[1]:
            raise InvalidArgumentError(
                f"model returned logits of shape {list(logits.shape)} for {targets.shape[1]} labels: its last layer "
                f"must have {targets.shape[1]} outputs (C = {targets.shape[1]}), one per label")
        return logits
    from activebayes.models.predict import looks_like_probabilities, probabilities_error

    if looks_like_probabilities(logits):
        raise probabilities_error("on the first training batch")
    check_class_ids(targets, logits.shape[1], None if val is None else val[1],
                    source=f"(shape {list(logits.shape)})")
    return logits


def check_class_ids(targets: Tensor, num_classes: int, val_targets: Tensor | None = None, *,
                    source: str = "") -> None:
    """Refuse class ids ``>= num_classes`` (the model's C; ``source`` says where C comes from) in the
    train or validation targets, pointing at ids counted from 1 when no target is 0."""
    if not len(targets):
        return
    train_max = int(targets.max())
    val_max = int(val_targets.max()) if val_targets is not None and len(val_targets) else -1
    classes = 1 + max(train_max, val_max)
    if num_classes < classes:
        C = num_classes
        where = "train" if train_max >= val_max else "val"
        lowest = min(int(targets.min()), int(val_targets.min()) if val_targets is not None and len(val_targets)
                     else classes)
        said = f"{where} targets hold class id {classes - 1}, but the model returns logits for C = {C} classes" \
               + (f" {source}" if source else "")
        if lowest >= 1:  # no class 0 anywhere: most likely ids counted from 1
            raise InvalidArgumentError(f"{said}: class ids count from 0 and these start at {lowest} (subtract 1?), "
                                       f"or the model's last layer needs at least {classes} outputs")
        raise InvalidArgumentError(f"{said}: the model's last layer needs at least {classes} outputs, one per class "
                                   f"(C = {classes})")


def _model_device(model: nn.Module) -> torch.device:
    for tensor in model.parameters():
        return tensor.device
    return torch.device("cpu")


def _micro_f1(probs_N_C: Tensor, targets_N_C: Tensor) -> float:
    """Micro-averaged F1 of ``probs >= 0.5`` against 0/1 targets: ``2 TP / (2 TP + FP + FN)``; 0 when there are
    no positives and none predicted (as :func:`~activebayes.metrics.evaluate_multilabel` and scikit-learn)."""
    predicted = label_decisions(probs_N_C)
    truth = targets_N_C > 0.5
    tp = int((predicted & truth).sum())
    wrong = int((predicted != truth).sum())
    return 0.0 if 2 * tp + wrong == 0 else 2 * tp / (2 * tp + wrong)


def _evaluate_multilabel(model: nn.Module, inputs: Tensor, targets: Tensor, batch_size: int,
                         device: torch.device) -> tuple[float, float]:
    """Mean per-item binary cross-entropy (summed over labels) and micro-F1 of the eval-mode network.

    An :class:`Ensemble`'s forward gives ``[n, K, C]``: the mean of its K sigmoids."""
    was_training = model.training
    model.eval()
    total_loss, probs = 0.0, []
    with torch.no_grad():
        for start in range(0, inputs.shape[0], max(batch_size, 256)):
            x = inputs[start : start + max(batch_size, 256)].to(device)
            y = targets[start : start + max(batch_size, 256)].to(device)
            logits = model(x).float()
            p = torch.sigmoid(logits).mean(1) if logits.ndim == 3 else torch.sigmoid(logits)
            p = p.clamp(1e-7, 1 - 1e-7)
            total_loss += float(F.binary_cross_entropy(p, y, reduction="sum"))
            probs.append(p.cpu())
    model.train(was_training)
    return total_loss / inputs.shape[0], _micro_f1(torch.cat(probs), targets)


def _evaluate(model: nn.Module, inputs: Tensor, targets: Tensor, batch_size: int, device: torch.device) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of the deterministic (eval-mode) network."""
    if targets.ndim == 2:
        return _evaluate_multilabel(model, inputs, targets, batch_size, device)
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, inputs.shape[0], max(batch_size, 256)):
            x = inputs[start : start + max(batch_size, 256)].to(device)
            y = targets[start : start + max(batch_size, 256)].to(device)
            logits = model(x)
            total_loss += float(F.cross_entropy(logits.float(), y, reduction="sum"))
            correct += int((logits.argmax(dim=-1) == y).sum())
    model.train(was_training)
    n = inputs.shape[0]
    return total_loss / n, correct / n


def fit(
    model: nn.Module,
    train: tuple[Tensor, Tensor] | Dataset,
    *,
    validation: tuple[Tensor, Tensor] | Dataset | None = None,
    optimizer: str = "adam",
    lr: float = 1e-3,
    weight_decay: float = 1e-4,
    momentum: float = 0.9,
    batch_size: int = 64,
    max_epochs: int = 30,
    min_epochs: int = 1,
    patience: int = 5,
    min_samples_per_epoch: int | None = None,
    min_steps_per_epoch: int = MIN_STEPS_PER_EPOCH,
    min_steps: int = MIN_STEPS,
    generator: torch.Generator | int | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    multilabel: bool = False,
) -> FitResult:
    r"""Train ``model`` on ``train`` with minibatches, early stopping and seeds.

    Minimises the mean cross-entropy ``-(1/|b|) \sum_{i in b} log softmax(f(x_i))_{y_i}``
    (``F.cross_entropy`` on logits) plus L2 ``weight_decay`` (the optimizer's coupled
    decay) with Adam or SGD (``momentum``).

    Epochs sized by the data (the default, ``min_samples_per_epoch=None``): minibatches
    of ``b = min(batch_size, N)`` items and epochs of ``max(N, min_steps_per_epoch * b)``
    draws, every item equally often (repeated permutations, BatchBALD's
    ``RandomFixedLengthSampler`` idea), so the work follows the labelled set.  With
    ``min_samples_per_epoch`` (the BatchBALD paper's 5,056: ``**PAPER_FIT_OPTIONS``) an
    epoch draws ``max(N, min_samples_per_epoch)`` samples in minibatches of ``batch_size``.

    With ``validation`` the deterministic (eval-mode) network is scored after every
    epoch; an epoch is better if its accuracy is higher, or equal with a lower loss.
    Training stops after ``patience`` epochs without improvement (never before
    ``min_epochs``, nor, sized by the data, before ``min_steps`` optimizer steps), and
    the best weights are restored.  Without validation, sized by the data, training stops
    once the epoch's mean training loss is below 0.05 or has not fallen by 1% for
    ``patience`` epochs (the last weights kept); with ``min_samples_per_epoch`` all
    ``max_epochs`` run.  An :class:`Ensemble` trains each member independently
    (member seeds drawn from ``generator``); members that are small deterministic heads
    (``Linear`` / ``ReLU`` / ``LayerNorm`` without weights, the ensemble head on frozen
    features) train in lockstep, their weights stacked and one batched step for all, with
    the result of training each alone up to rounding (:mod:`activebayes.models._lockstep`).

    Reproducible: shuffling uses a generator from ``generator`` and the global RNG
    (dropout masks in training, ...) is seeded from it inside a ``fork_rng`` block, so
    the same seed gives bitwise the same weights on the CPU and the caller's RNG is untouched.

    Args:
        model: returns logits ``[n, C]`` (log-probabilities also work).
        train: ``(inputs [N, ...], targets [N])`` tensors, or a Dataset of ``(x, y)``.
        validation: the same form, for early stopping (optional).
        optimizer: ``"adam"`` or ``"sgd"``.
        lr: learning rate.
        weight_decay: L2 penalty of the optimizer.
        momentum: SGD only.
        batch_size: items per optimizer step.
        max_epochs: at most this many epochs.
        min_epochs: at least this many epochs before early stopping may stop.
        patience: epochs without improvement before stopping.
        min_samples_per_epoch: samples drawn per epoch at least, in minibatches of
            ``batch_size`` (1 = plain epochs; 5,056 = the BatchBALD paper); ``None``
            (default): epochs sized by the data.
        min_steps_per_epoch: sized by the data, optimizer steps per epoch at least.
        min_steps: sized by the data, steps before validation early stopping may stop.
        generator: torch.Generator, int seed or None (global RNG).
        device: train there (the model is moved); default: where its parameters are.
        progress: tqdm bar over epochs.
        multilabel: targets are 0/1 indicators ``[N, C]`` and the loss is the binary
            cross-entropy of C independent sigmoids, ``F.binary_cross_entropy_with_logits``
            (mean over items and labels); early stopping then ranks epochs by micro-F1 of
            ``sigmoid >= 0.5`` (reported as ``validation_accuracy``), ties by the summed BCE.

    Returns:
        :class:`FitResult`.

    Example:
        >>> from activebayes.models import MLP
        >>> x, y = torch.randn(40, 4), torch.randint(0, 3, (40,))
        >>> fit(MLP(in_features=4, num_classes=3), (x, y), max_epochs=2, generator=0).epochs_run
        2
    """
    if not isinstance(model, nn.Module):
        raise InvalidTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    _check_fit_values(optimizer=optimizer, lr=lr, weight_decay=weight_decay, momentum=momentum,
                      batch_size=batch_size, max_epochs=max_epochs, min_epochs=min_epochs, patience=patience,
                      min_samples_per_epoch=min_samples_per_epoch, min_steps_per_epoch=min_steps_per_epoch,
                      min_steps=min_steps)
    inputs, targets = _as_tensors(train, "train", multilabel)
    val = _as_tensors(validation, "validation", multilabel) if validation is not None else None
    gen = as_generator(generator)
    if device is not None:
        model.to(check_torch_device(device, "device"))
    split = split_frozen(model)
    if split is not None:  # a head on a frozen encoder: encode each item once, train the head on features
        encode, model = split
        inputs = _encoded(encode, inputs, _model_device(model))
        if val is not None:
            val = (_encoded(encode, val[0], _model_device(model)), val[1])
    options = dict(
        optimizer=optimizer, lr=float(lr), weight_decay=float(weight_decay), momentum=float(momentum),
        batch_size=batch_size, max_epochs=max_epochs, min_epochs=min_epochs, patience=patience,
        min_samples_per_epoch=min_samples_per_epoch, min_steps_per_epoch=min_steps_per_epoch, min_steps=min_steps,
        progress=progress,
    )
    if isinstance(model, Ensemble):
        if targets.ndim == 1 and stackable(list(model.members)):  # small deterministic heads: all at once
            results = _fit_members_lockstep(list(model.members), inputs, targets, val,
                                            [as_generator(draw_seed(gen)) for _ in model.members], **options)
        else:
            results = tuple(
                _fit_one(member, inputs, targets, val, generator=as_generator(draw_seed(gen)), **options)
                for member in model.members
            )
        loss = accuracy = None
        if val is not None:
            loss, accuracy = _evaluate_ensemble(model, *val, batch_size)
        return FitResult(
            epochs_run=max(r.epochs_run for r in results),
            best_epoch=max(r.best_epoch for r in results),
            best_validation_loss=loss,
            best_validation_accuracy=accuracy,
            members=results,
        )
    return _fit_one(model, inputs, targets, val, generator=gen, **options)


def _check_fit_values(*, optimizer: str, lr: float, weight_decay: float, momentum: float, batch_size: int,
                      max_epochs: int, min_epochs: int, patience: int, min_samples_per_epoch: int | None,
                      min_steps_per_epoch: int, min_steps: int) -> None:
    """The values of :func:`fit`'s training options (also checked by :func:`check_fit_options`)."""
    check_choice(optimizer, "optimizer", OPTIMIZERS)
    for value, name in ((lr, "lr"), (weight_decay, "weight_decay"), (momentum, "momentum")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise InvalidArgumentError(f"{name} must be a number >= 0, got {value!r}")
    check_positive_int(batch_size, "batch_size")
    check_positive_int(max_epochs, "max_epochs")
    check_positive_int(min_epochs, "min_epochs")
    check_positive_int(patience, "patience")
    if min_samples_per_epoch is not None:
        check_positive_int(min_samples_per_epoch, "min_samples_per_epoch")
    check_positive_int(min_steps_per_epoch, "min_steps_per_epoch")
    check_positive_int(min_steps, "min_steps", allow_zero=True)


#: ``fit``'s keyword arguments a posterior's ``fit`` passes itself, never ``fit_options``.
FIT_ARGUMENTS = ("validation", "generator", "device", "multilabel")


def check_fit_options(options: Mapping[str, Any], name: str = "fit_options", *,
                      reserved: Collection[str] = FIT_ARGUMENTS, set_by: str = "Posterior.fit") -> None:
    """Refuse keys of ``options`` that :func:`fit` does not take as options (a misspelt
    ``max_epoch``), naming ``name``, the close match and the accepted keys; ``reserved``
    keys are arguments that ``set_by`` passes itself."""
    accepted = sorted(p.name for p in inspect.signature(fit).parameters.values()
                      if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in reserved)
    taken = [key for key in options if key in reserved]
    if taken:
        *first, last = sorted(reserved)
        raise InvalidArgumentError(f"{name} cannot set {', '.join(map(repr, taken))}: {set_by} passes "
                                   f"{', '.join(first)} and {last} itself; options are {', '.join(accepted)}")
    unknown = [key for key in options if key not in accepted]
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(str(key).lower(), accepted, n=1, cutoff=0.6)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise InvalidArgumentError(f"{name} has unknown key{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
                                   f"expected keys of activebayes.models.fit: {', '.join(accepted)}")
    # and their values (max_epochs = 0, ...), as fit() would check them in round 0's training
    values = {p.name: p.default for p in inspect.signature(_check_fit_values).parameters.values()}
    defaults = {p.name: p.default for p in inspect.signature(fit).parameters.values() if p.name in values}
    try:
        _check_fit_values(**{**defaults, **{k: v for k, v in options.items() if k in values}})
    except ActiveBayesError as error:
        raise type(error)(f"{name}: {error}") from None


def _encoded(encode: Callable[[Tensor], Tensor], inputs: Tensor, device: torch.device, chunk: int = 1024) -> Tensor:
    """``encode(inputs)`` chunk by chunk, without gradients, on ``inputs``' device."""
    with torch.no_grad():
        return torch.cat([encode(inputs[start : start + chunk].to(device)).to(inputs.device)
                          for start in range(0, inputs.shape[0], chunk)])


def _evaluate_ensemble(model: Ensemble, inputs: Tensor, targets: Tensor, batch_size: int) -> tuple[float, float]:
    """Cross-entropy and accuracy of the mean predictive ``(1/K) sum_k softmax(f_k(x))``."""
    device = _model_device(model)
    if targets.ndim == 2:
        return _evaluate_multilabel(model, inputs, targets, batch_size, device)
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, inputs.shape[0], 256):
            x, y = inputs[start : start + 256].to(device), targets[start : start + 256].to(device)
            log_probs_n_K_C = F.log_softmax(model(x).float(), dim=-1)
            log_mean_n_C = log_mean_exp(log_probs_n_K_C, dim=1)  # unchecked: a diverged member's NaN is a NaN loss
            total_loss += float(F.nll_loss(log_mean_n_C, y, reduction="sum"))
            correct += int((log_mean_n_C.argmax(dim=-1) == y).sum())
    model.train(was_training)
    return total_loss / inputs.shape[0], correct / inputs.shape[0]


def _fit_members_lockstep(
    members: list[nn.Module],
    inputs: Tensor,
    targets: Tensor,
    val: tuple[Tensor, Tensor] | None,
    generators: list[torch.Generator],
    *,
    optimizer: str,
    lr: float,
    weight_decay: float,
    momentum: float,
    batch_size: int,
    max_epochs: int,
    min_epochs: int,
    patience: int,
    min_samples_per_epoch: int | None,
    min_steps_per_epoch: int,
    min_steps: int,
    progress: bool,
) -> tuple[FitResult, ...]:
    """The members of an ensemble trained together (:mod:`activebayes.models._lockstep`),
    each with the result ``_fit_one`` gives it alone."""
    schedules = [_schedule(inputs.shape[0], batch_size, min_samples_per_epoch, min_steps_per_epoch, val is not None,
                           patience, min_epochs, min_steps) for _ in members]
    step_size, target, _ = schedules[0]
    target = _no_batch_of_one(members[0], target, step_size)
    was_training = [m.training for m in members]
    with torch.no_grad():  # one member's first batch, checked (eval mode: its layers draw nothing random)
        members[0].eval()
        try:
            _first_logits(members[0], inputs[:step_size].to(_model_device(members[0])), targets, val)
        finally:
            members[0].train(was_training[0])
    with threads_for(members[0], inputs.shape[1:], batch_size), tqdm(
        total=max_epochs, desc="fit", unit="epoch", disable=not progress, leave=False
    ) as bar:
        runs = fit_lockstep(members, inputs, targets, val, generators, optimizer=optimizer, lr=lr,
                            weight_decay=weight_decay, momentum=momentum, batch_size=batch_size, step_size=step_size,
                            target=target, max_epochs=max_epochs, stopping=[s[2] for s in schedules],
                            epoch_indices=_epoch_indices, progress_bar=bar)
    for member, mode in zip(members, was_training, strict=True):
        member.train(mode)
    return tuple(_result([EpochRecord(*row) for row in rows], best_epoch) for rows, best_epoch in runs)


def _result(history: list[EpochRecord], best_epoch: int) -> FitResult:
    """One network's :class:`FitResult`: its epochs, and the metrics of the epoch it kept."""
    best = history[best_epoch - 1]
    return FitResult(epochs_run=len(history), best_epoch=best_epoch, best_validation_loss=best.validation_loss,
                     best_validation_accuracy=best.validation_accuracy, history=history)


def _fit_one(
    model: nn.Module,
    inputs: Tensor,
    targets: Tensor,
    val: tuple[Tensor, Tensor] | None,
    *,
    generator: torch.Generator,
    optimizer: str,
    lr: float,
    weight_decay: float,
    momentum: float,
    batch_size: int,
    max_epochs: int,
    min_epochs: int,
    patience: int,
    min_samples_per_epoch: int | None,
    min_steps_per_epoch: int,
    min_steps: int,
    progress: bool,
) -> FitResult:
    device = _model_device(model)
    if optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=weight_decay)
    history: list[EpochRecord] = []
    best_state: dict[str, Tensor] | None = None
    n = inputs.shape[0]
    step_size, target, stopping = _schedule(n, batch_size, min_samples_per_epoch, min_steps_per_epoch, val is not None,
                                            patience, min_epochs, min_steps)
    target = _no_batch_of_one(model, target, step_size)
    steps = 0
    was_training = model.training
    with global_rng_seeded(draw_seed(generator)), threads_for(model, inputs.shape[1:], batch_size), tqdm(
        total=max_epochs, desc="fit", unit="epoch", disable=not progress, leave=False
    ) as bar:
        for epoch in range(1, max_epochs + 1):
            model.train()
            order = _epoch_indices(n, target, generator)
            total, seen = 0.0, 0
            for start in range(0, order.shape[0], step_size):
                index = order[start : start + step_size]
                x, y = inputs[index].to(device), targets[index].to(device)
                logits = model(x) if steps else _first_logits(model, x, targets, val)  # checked once
                loss = F.binary_cross_entropy_with_logits(logits, y) if y.ndim == 2 else F.cross_entropy(logits, y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * index.shape[0]
                seen += index.shape[0]
                steps += 1
            bar.update(1)
            validation = _evaluate(model, *val, batch_size, device) if val is not None else None
            history.append(EpochRecord(epoch, total / seen, *(validation or (None, None))))
            if validation is not None:
                bar.set_postfix(val_acc=f"{validation[1]:.3f}")
            keep, stop = stopping.update(epoch, total / seen, steps, validation)
            if keep and validation is not None:
                best_state = copy.deepcopy(model.state_dict())
            if stop:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.train(was_training)
    return _result(history, stopping.best_epoch)


def reset_parameters(model: nn.Module, *, generator: torch.Generator | int | None = None) -> nn.Module:
    """Re-initialise every submodule that has ``reset_parameters()`` (seeded).

    Use between active learning rounds to train from scratch (Gal et al. 2017 and
    BatchBALD retrain from scratch); not calling it is the warm start.  MC dropout
    masks are not touched (see ``resample_masks``).

    Args:
        model: any ``nn.Module`` (an :class:`Ensemble` re-initialises every member).
        generator: torch.Generator, int seed or None (global RNG); same seed ->
            bitwise the same weights.

    Returns:
        ``model`` (modified in place).

    Example:
        >>> net = nn.Linear(3, 2)
        >>> w = reset_parameters(net, generator=1).weight.clone()
        >>> bool((reset_parameters(net, generator=1).weight == w).all())
        True
    """
    if not isinstance(model, nn.Module):
        raise InvalidTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    with global_rng_seeded(draw_seed(generator)):
        for module in model.modules():
            reset = getattr(module, "reset_parameters", None)
            if callable(reset):
                reset()
    return model
