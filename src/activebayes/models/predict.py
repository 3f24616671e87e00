"""K function samples for a pool: ``predict_log_probs(model, data, K) -> [N, K, C]``.

The one predictive representation of activebayes: ``log_probs_N_K_C[i, k, c] =
log p(y_i = c | x_i, w_k)`` with ``w_k`` the k-th function sample (fixed MC
dropout masks, or the k-th ensemble member).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import Dataset, TensorDataset
from tqdm.auto import tqdm

from activebayes._threads import threads_for
from activebayes._validation import check_choice, check_positive_int, check_torch_device
from activebayes.models.dropout import (
    FACTORISE_MIN_SAMPLES,
    BatchedSamplingError,
    mc_dropout_layers,
    mc_sampling,
    noting_temporaries,
    resample_masks,
)
from activebayes.errors import ActiveBayesError, InvalidArgumentError, InvalidTypeError
from activebayes.models.posterior import SampledFunctions
from activebayes._seeding import as_generator

__all__ = ["FunctionSampler", "SAMPLING_MODES", "predict_log_probs"]

SAMPLING_MODES = ("batched", "sequential")
_LIVE_TENSORS = 4  # safety factor: tensors alive at once per layer (input, output, temporaries)
#: Default activation budget of one pass (MB).  On the CPU 128 MB, i.e. tensors of at most
#: 32 MB: glibc serves larger blocks from fresh zeroed pages on every allocation, which
#: made MC prediction of the BatchBALD CNN 2.6x slower at 512 MB (benchmarks/inference.py).
#: Other devices cache their allocations, and larger passes keep them busy.
CPU_MEMORY_BUDGET_MB = 128.0
DEVICE_MEMORY_BUDGET_MB = 512.0


@runtime_checkable
class FunctionSampler(Protocol):
    """A posterior with a fixed, finite set of function samples (e.g. an :class:`Ensemble`).

    ``forward_samples(inputs_n, sample_ids)`` returns logits ``[n, k, C]`` for the
    requested samples; ``num_function_samples`` is K.
    """

    @property
    def num_function_samples(self) -> int: ...

    def forward_samples(self, inputs: Tensor, sample_ids: Sequence[int]) -> Tensor: ...


class _Inputs:
    """Uniform chunked access to the inputs of a tensor, a tuple, an array-like read on demand, or a Dataset.

    Array-likes are objects with ``shape``, a torch ``dtype``, ``len()`` and
    ``x[start:end]`` giving a tensor: :class:`activebayes.data.LazyInputs` (memory-mapped
    pools, lazy image folders, and views of their rows). They are read one chunk at
    a time, the next chunk being read in a background thread while the model runs
    on the current one, so memory holds about two chunks of inputs whatever N.
    """

    def __init__(self, data: object) -> None:
        self.tensor: Tensor | None = None
        self.array: object | None = None
        self.dataset: Dataset | None = None
        from activebayes.data.dataset import ArrayDataset

        if isinstance(data, ArrayDataset):  # activebayes' own dataset: its inputs (held or read on demand)
            data = data.inputs
        if isinstance(data, Tensor):
            self.tensor = data
        elif isinstance(data, (tuple, list)) and len(data) > 2 and all(isinstance(t, Tensor) for t in data):
            raise InvalidArgumentError(
                f"data is a {type(data).__name__} of {len(data)} tensors; pass the inputs as one tensor [N, ...] "
                "(torch.stack(data) for per-item tensors) or a pair (inputs, targets)")
        elif isinstance(data, (tuple, list)) and data and isinstance(data[0], Tensor):
            self.tensor = data[0]
        elif isinstance(data, (tuple, list)) and data and _is_array_like(data[0]):
            self.array = data[0]
        elif isinstance(data, TensorDataset):
            self.tensor = data.tensors[0]
        elif _is_array_like(data):
            self.array = data
        elif isinstance(data, Dataset) and hasattr(data, "__len__"):
            self.dataset = data
        else:
            raise InvalidTypeError(
                "data must be a tensor of inputs [N, ...], a tuple (inputs, targets), lazy inputs "
                "(activebayes.data.LazyInputs), an activebayes ArrayDataset or a torch Dataset yielding x or (x, y), "
                f"got {type(data).__name__}"
            )
        if self.tensor is not None and self.tensor.ndim == 0:
            raise InvalidArgumentError("data must have a leading item dimension [N, ...], got a 0-d tensor")
        if len(self) == 0:
            raise InvalidArgumentError("data is empty: there are no items to predict")

    def __len__(self) -> int:
        if self.tensor is not None:
            return int(self.tensor.shape[0])
        if self.array is not None:
            return len(self.array)  # type: ignore[arg-type]
        return len(self.dataset)  # type: ignore[arg-type]

    def get(self, start: int, end: int) -> Tensor:
        if self.tensor is not None:
            return self.tensor[start:end]
        if self.array is not None:
            return torch.as_tensor(self.array[start:end])  # type: ignore[index]
        items = []
        for index in range(start, end):
            item = self.dataset[index]  # type: ignore[index]
            if isinstance(item, (tuple, list)):
                item = item[0]
            if isinstance(item, Mapping):
                raise InvalidTypeError(
                    f"data's items must be an input x or a pair (x, y), got a dict (keys {sorted(item)[:4]}); "
                    "a Hugging Face model's dict inputs go through activebayes.adapters.huggingface")
            try:
                items.append(torch.as_tensor(item))
            except (TypeError, ValueError, RuntimeError) as error:
                raise InvalidTypeError(f"data's item {index} is not a tensor or array of inputs: "
                                       f"{type(item).__name__} ({error})") from None
        return torch.stack(items)

    def chunks(self, n_chunk: int) -> Iterator[tuple[int, int, Tensor]]:
        """``(start, end, inputs[start:end])`` for consecutive chunks of ``n_chunk`` items."""
        bounds = [(start, min(len(self), start + n_chunk)) for start in range(0, len(self), n_chunk)]
        if self.array is None or len(bounds) == 1:
            for start, end in bounds:
                yield start, end, self.get(start, end)
            return
        # read ahead: chunk i + 1 is read from disk while the model runs on chunk i
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="activebayes-read") as reader:
            pending = reader.submit(self.get, *bounds[0])
            for i, (start, end) in enumerate(bounds):
                chunk = pending.result()
                if i + 1 < len(bounds):
                    pending = reader.submit(self.get, *bounds[i + 1])
                yield start, end, chunk


def _is_array_like(data: object) -> bool:
    """Tensor-like inputs read on demand: ``shape``, a torch ``dtype``, ``len()`` and slicing to tensors."""
    return (
        not isinstance(data, (Tensor, Dataset, tuple, list))
        and isinstance(getattr(data, "dtype", None), torch.dtype)
        and hasattr(data, "shape")
        and hasattr(data, "__getitem__")
        and hasattr(data, "__len__")
    )


def _model_device(model: nn.Module) -> torch.device:
    for tensor in [*model.parameters(), *model.buffers()]:
        return tensor.device
    return torch.device("cpu")


def _plan_chunks(
    model: nn.Module, x_1: Tensor, num_samples: int, *, batch_size: int, budget_bytes: float, expand: bool
) -> tuple[int, int]:
    """Items per chunk and samples per pass from one probe forward of one item.

    Hooks record every module's input and output (inputs too, so a tensor a model
    computes outside its modules, e.g. :func:`channel_masked_conv2d`'s rows, counts
    when it enters the next module); tensors with ``k_probe`` rows are
    per-(item, sample) activations of the stochastic tail, the others
    per-item activations of the deterministic head.  A pass over ``n`` items and
    ``k`` samples then holds about ``LIVE * (n * head + n * k * tail)`` bytes.  With
    enough samples the probe takes the factorised path (``FACTORISE_MIN_SAMPLES``), whose
    per-item temporaries (:func:`~activebayes.models.channel_masked_conv2d`'s per-channel
    contributions, C times a convolution's output) count in ``head``: sized without them,
    passes of K = 20 samples grew past glibc's 32 MB mmap threshold and spent a third
    of their time on fresh zeroed pages.
    """
    k_probe = 1
    if expand and num_samples >= 2:
        k_probe = FACTORISE_MIN_SAMPLES if num_samples >= FACTORISE_MIN_SAMPLES else 2
    head_bytes = [x_1.numel() * x_1.element_size()]
    tail_bytes = [0]

    def record(_module: nn.Module, args: tuple, output: object) -> None:
        for tensor in (args[0] if args else None, output):
            if not isinstance(tensor, Tensor) or tensor.ndim == 0:
                continue
            size = tensor.numel() * tensor.element_size()
            if k_probe > 1 and tensor.shape[0] == k_probe:
                tail_bytes.append(size // k_probe)
            elif k_probe == 1:
                tail_bytes.append(size)
            else:
                head_bytes.append(size)

    handles = [m.register_forward_hook(record) for m in model.modules()]
    try:
        with noting_temporaries() as temporaries, mc_sampling(model, range(k_probe), expand=expand):
            model(x_1)
        head_bytes.extend(temporaries)
    except BatchedSamplingError:
        raise
    except (RuntimeError, IndexError) as error:
        if expand:
            raise _batched_failure(model, x_1, error) from error
        if is_input_error(error):  # one function at a time (sequential sampling): the inputs themselves
            raise unreadable_inputs(x_1, error) from error
        raise
    finally:
        for handle in handles:
            handle.remove()
    head, tail = max(head_bytes), max(tail_bytes)
    usable = budget_bytes / _LIVE_TENSORS
    if not expand:
        per_item = max(head, tail, 1)
        return max(1, min(batch_size, int(usable // per_item))), 1
    k_chunk = max(1, min(num_samples, int(usable // max(tail, 1))))
    n_chunk = max(1, min(batch_size, int(usable // max(head + k_chunk * tail, 1))))
    return n_chunk, k_chunk


def looks_like_probabilities(outputs_n_C: Tensor) -> bool:
    """Whether a model's outputs ``[n, C]`` are probabilities (every row in [0, 1], summing to 1),
    as after a final ``Softmax``, not the logits (or log-probabilities) a posterior expects. Logits
    whose every row lands on a sum of 1 do not happen by chance."""
    if outputs_n_C.ndim != 2 or outputs_n_C.shape[-1] < 2 or not outputs_n_C.is_floating_point() or not len(outputs_n_C):
        return False
    outputs = outputs_n_C.detach()
    if bool(outputs.min() < 0) or bool(outputs.max() > 1):  # logits almost always have a negative: one pass
        return False
    return bool(((outputs.double().sum(dim=-1) - 1).abs() < 1e-4).all())


def probabilities_error(where: str) -> InvalidArgumentError:
    """The error for a model that ends in a softmax: activebayes applies ``log_softmax`` to its
    outputs, which would flatten every prediction towards uniform (and its uncertainty with it)."""
    return InvalidArgumentError(
        f"the model's outputs {where} look like probabilities (every row in [0, 1], summing to 1), but activebayes "
        "reads them as logits, which would make every prediction nearly uniform; end the model with logits (remove "
        "its final Softmax) or log-probabilities (nn.LogSoftmax)")


def _logits_rows(logits: object, rows: int, what: str) -> Tensor:
    if not isinstance(logits, Tensor) or logits.ndim != 2:
        shape = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise InvalidArgumentError(f"the model must return logits [n, C] for {what}, got {shape}")
    if looks_like_probabilities(logits):
        raise probabilities_error(f"for {what}")
    if logits.shape[0] != rows:
        raise InvalidArgumentError(
            f"the model returned {logits.shape[0]} rows for {what}, expected {rows}; "
            "if the batched MC path is not valid for this model use sampling='sequential' (in the loop: a model_factory "
                "returning as_posterior(model, sampling='sequential'))"
        )
    return logits


def hold_functions(model: SampledFunctions, num_samples: int | None, generator: torch.Generator | int | None) -> int:
    """Fix the K functions of a :class:`SampledFunctions` model for a whole pass; returns K.

    A generator (or int seed) draws ``num_samples`` functions from it (sample ``k`` is then
    one function for every item and chunk); ``None`` keeps the functions the model holds,
    drawn once from the global RNG if it holds none (as MC dropout masks are).
    """
    if num_samples is None:
        raise InvalidArgumentError(
            f"num_samples is required for a model whose function samples are drawn on request "
            f"({type(model).__name__}, e.g. a last-layer Laplace posterior): K, e.g. num_samples=20; got None"
        )
    check_positive_int(num_samples, "num_samples")
    held = int(model.num_function_samples)
    if generator is not None:
        model.draw_functions(num_samples, as_generator(generator, "generator"))
    elif held == 0:
        model.draw_functions(num_samples, as_generator(None))
    elif held != num_samples:
        raise InvalidArgumentError(
            f"num_samples={num_samples} but {type(model).__name__} holds {held} drawn functions; pass "
            f"num_samples={held}, or a generator (mask_generator in score_pool) to draw {num_samples}"
        )
    return num_samples


def predict_log_probs(
    model: nn.Module,
    data: Tensor | tuple | Dataset,
    num_samples: int | None = None,
    *,
    batch_size: int = 256,
    generator: torch.Generator | int | None = None,
    device: torch.device | str | None = None,
    progress: bool = False,
    sampling: str = "batched",
    memory_budget_mb: float | None = None,
) -> Tensor:
    r"""Log-probabilities of K function samples for every item: ``[N, K, C]``.

    ``log_probs_N_K_C[i, k] = log_softmax(f_{w_k}(x_i))`` where ``w_k`` is sample
    ``k`` of the posterior: consistent MC dropout masks (held fixed for every item,
    Gal & Ghahramani 2016; Kirsch et al. 2019) or the k-th member of an
    :class:`Ensemble`.  Everything except MC dropout runs in eval mode (batch norm
    uses running statistics); the model's train/eval flags are restored afterwards.

    Two ways to sample (``sampling=``):

    - ``"batched"`` (default, fast): layers before the first MC dropout layer run
      once per item; that layer expands ``[n, ...]`` to ``[n * k, ...]`` and the
      stochastic tail runs once for all k samples.  Valid when the batch dimension
      flows unchanged to the first MC dropout layer and later layers treat rows
      independently (true for feed-forward nets; a clear error otherwise).
    - ``"sequential"``: K full forward passes, pass k applying masks k to every item
      (what baal's MC wrapper does, but with consistent masks).  Same result, for
      any architecture, slower.

    Memory stays bounded for any N and K: a probe forward of one item measures
    activation sizes, and items (at most ``batch_size`` per chunk) and samples are
    chunked so a pass fits in ``memory_budget_mb`` (K is split when even one item
    times K samples would not fit; the head then reruns per K slice).  Only the
    result ``[N, K, C]`` (float32, on the CPU) grows with N x K.

    Args:
        model: an ``nn.Module`` returning logits ``[n, C]`` (log-probabilities work
            too), with consistent MC dropout layers (see ``mc_dropout``), or an
            :class:`Ensemble` / other :class:`FunctionSampler`.
        data: inputs ``[N, ...]``, a tuple ``(inputs, targets)``, inputs read on
            demand (:class:`activebayes.data.LazyInputs`, e.g. ``dataset.rows(pool_N)``
            of a memory-mapped dataset: streamed chunk by chunk), or a Dataset
            yielding ``x`` or ``(x, y)``.
        num_samples: K.  Required for MC dropout models and for models whose
            functions are drawn on request (:class:`~activebayes.models.SampledFunctions`,
            e.g. last-layer Laplace: a generator draws K of them, ``None`` keeps the K
            held); for an ensemble ``None`` or its size; for a model without stochastic layers ``None`` means 1
            (K > 1 gives K identical copies and a warning).
        batch_size: most items per chunk through the deterministic head.
        generator: ``None`` keeps the masks the model holds (drawn once from the
            global RNG if it holds none), so repeated calls see the same K
            functions; a generator or int seed first calls
            ``resample_masks(model, generator=generator)``.
        device: run on this device (the model is moved there); default: where
            the model's parameters are.
        progress: show a tqdm bar over items.
        sampling: ``"batched"`` or ``"sequential"`` (see above).
        memory_budget_mb: activation memory allowed per pass; ``None``: 128 MB on the
            CPU (faster there than larger passes), 512 MB on other devices.

    Returns:
        ``log_probs_N_K_C``, float32 on the CPU.

    Example:
        >>> from activebayes.models import MLP
        >>> net = MLP(in_features=4, num_classes=3)
        >>> predict_log_probs(net, torch.randn(10, 4), 5, generator=0).shape
        torch.Size([10, 5, 3])
    """
    if not isinstance(model, nn.Module):
        raise InvalidTypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_positive_int(batch_size, "batch_size")
    check_choice(sampling, "sampling", SAMPLING_MODES)
    if memory_budget_mb is not None:
        if isinstance(memory_budget_mb, bool) or not isinstance(memory_budget_mb, (int, float)):
            raise InvalidTypeError(
                f"memory_budget_mb must be a number or None, got {type(memory_budget_mb).__name__}"
            )
        if not memory_budget_mb > 0:
            raise InvalidArgumentError(f"memory_budget_mb must be > 0, got {memory_budget_mb}")
    inputs = _Inputs(data)

    sampler = model if isinstance(model, FunctionSampler) else None
    layers = mc_dropout_layers(model) if sampler is None else []
    if isinstance(model, SampledFunctions):
        num_samples = hold_functions(model, num_samples, generator)
    if sampler is not None:
        size = sampler.num_function_samples
        if size == 0:  # e.g. a scikit-learn posterior's module before fit: not 'num_samples must be >= 1, got 0'
            getattr(sampler, "check_fitted", lambda: None)()  # its own words, where it has them
            from activebayes.models.laplace import NotFittedError

            raise NotFittedError(f"{type(model).__name__} holds no function samples (K = 0): fit it before predicting")
        if num_samples is None:
            num_samples = size
        check_positive_int(num_samples, "num_samples")
        if num_samples != size:
            raise InvalidArgumentError(
                f"num_samples must be None or the ensemble size {size} "
                f"(one function sample per member), got {num_samples}"
            )
    elif num_samples is None:
        if layers:
            raise InvalidArgumentError(
                "num_samples is required for a model with MC dropout layers (K function "
                "samples, e.g. num_samples=20), got None"
            )
        num_samples = 1
    else:
        check_positive_int(num_samples, "num_samples")
    if sampler is None and not layers and num_samples > 1:
        from activebayes.models.dropout import _replacement, unconverted_dropout

        convertible = any(_replacement(m) is not None for m in model.modules())  # what mc_dropout converts
        others = unconverted_dropout(model)
        hint = (" (it has nn.Dropout layers: convert them with mc_dropout(model))" if convertible else
                f" (its dropout {', '.join(others[:3])} cannot be held fixed across samples: replace it by "
                "nn.Dropout, then mc_dropout(model))" if others else "")
        warnings.warn(
            f"the model has no consistent MC dropout layer{hint}; its {num_samples} "
            "function samples are identical",
            stacklevel=2,
        )

    if device is not None:
        model.to(check_torch_device(device, "device"))
    run_device = _model_device(model)
    if memory_budget_mb is None:
        memory_budget_mb = CPU_MEMORY_BUDGET_MB if run_device.type == "cpu" else DEVICE_MEMORY_BUDGET_MB
    if sampler is None:
        if generator is not None:
            resample_masks(model, generator=generator)
        elif any(layer.mask_seed is None for layer in layers):
            resample_masks(model)

    N, K = len(inputs), num_samples
    flags = {module: module.training for module in model.modules()}
    model.eval()
    try:
        with torch.no_grad(), threads_for(model, lambda: inputs.get(0, 1).shape[1:], min(N, batch_size)):
            return _predict(
                model,
                sampler,
                inputs,
                N,
                K,
                batch_size=batch_size,
                device=run_device,
                progress=progress,
                expand=sampling == "batched",
                budget_bytes=memory_budget_mb * 2**20,
            )
    finally:
        for module, flag in flags.items():
            module.training = flag


def _predict(
    model: nn.Module,
    sampler: FunctionSampler | None,
    inputs: _Inputs,
    N: int,
    K: int,
    *,
    batch_size: int,
    device: torch.device,
    progress: bool,
    expand: bool,
    budget_bytes: float,
) -> Tensor:
    if sampler is not None:
        # a sampler's own forward (ensemble members, Laplace weight samples) holds one function's
        # activations at a time; only its logits [n, k, C] grow with k, so take as many samples
        # per call as they fit (its features, e.g. a frozen encoder's, are then computed once)
        x_1 = inputs.get(0, 1).to(device)
        try:
            C = _forward_chunk(model, sampler, x_1, 1, [0], expand=expand,
                               check=False).shape[-1]  # only its shape: the pass below names bad outputs
        except (RuntimeError, IndexError) as error:
            if not is_input_error(error):
                raise
            raise unreadable_inputs(x_1, error) from error
        n_chunk = batch_size
        k_chunk = max(1, min(K, int(budget_bytes // (2 * 4 * n_chunk * C))))
    else:
        x_1 = inputs.get(0, 1).to(device)
        n_chunk, k_chunk = _plan_chunks(
            model, x_1, K, batch_size=batch_size, budget_bytes=budget_bytes, expand=expand
        )
    log_probs_N_K_C: Tensor | None = None
    with tqdm(total=N, desc="predict", unit="item", disable=not progress, leave=False) as bar:
        for start, end, x_n in inputs.chunks(n_chunk):
            x_n = x_n.to(device)
            n = end - start
            for k_start in range(0, K, k_chunk):
                ids = list(range(k_start, min(K, k_start + k_chunk)))
                try:
                    log_probs_n_k_C = _forward_chunk(model, sampler, x_n, n, ids, expand=expand)
                except _NonFiniteOutputs as bad:
                    raise nan_outputs(x_n, bad, start) from None
                if log_probs_N_K_C is None:
                    C = log_probs_n_k_C.shape[-1]
                    log_probs_N_K_C = torch.empty(N, K, C, dtype=torch.float32)
                log_probs_N_K_C[start:end, ids[0] : ids[-1] + 1] = log_probs_n_k_C.float().cpu()
            bar.update(n)
    assert log_probs_N_K_C is not None
    return log_probs_N_K_C


#: words of a torch error raised because a forward pass could not read its inputs, their shape or dtype
#: ("mat1 and mat2 shapes cannot be multiplied", "expected input[...] to have 1 channels", "invalid for
#: input of size", "mat1 and mat2 must have the same dtype", ...)
_INPUT_ERROR = re.compile(r"shape|size|dimension|channel|dtype|scalar type", re.IGNORECASE)


def is_input_error(error: BaseException) -> bool:
    """Whether ``error``, raised by a model's forward pass, says it cannot read its inputs: torch's
    ``RuntimeError`` for a shape or dtype, or ``IndexError`` for a missing dimension (``nn.Flatten`` of
    ``[N]``); not running out of memory, and not one of the library's own errors."""
    return (isinstance(error, RuntimeError | IndexError)
            and not isinstance(error, ActiveBayesError | torch.cuda.OutOfMemoryError)
            and bool(_INPUT_ERROR.search(str(error))))


def unreadable_inputs(x_n: Tensor, error: Exception) -> InvalidArgumentError:
    """The one-line error for a forward pass that cannot read ``x_n`` (prediction and ``fit`` alike)."""
    message = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if "dtype" in message or "scalar type" in message:
        return InvalidArgumentError(
            f"the model cannot read inputs of dtype {str(x_n.dtype).removeprefix('torch.')}: {message}; convert the "
            "inputs to the model's dtype (e.g. inputs.float()) or the model to the inputs' (model.to(inputs.dtype))")
    return InvalidArgumentError(f"the model cannot read inputs of shape {list(x_n.shape)} (one item: "
                                f"{tuple(x_n.shape[1:])}): {message}")


def nonfinite_rows(x_n: Tensor) -> list[int]:
    """Rows of ``x_n`` holding a NaN or an infinite value (none for integer inputs)."""
    if not x_n.is_floating_point():
        return []
    return torch.nonzero(~torch.isfinite(x_n.reshape(len(x_n), -1)).all(dim=1)).flatten().tolist()


class NaNOutputsError(InvalidArgumentError):
    """The model's outputs give no probabilities (NaN log-probabilities) for some rows of its
    input: ``rows`` (positions in that input), ``found`` (what the outputs held there: ``NaN``,
    ``+inf``, ``-inf for every class``) and ``why``. :meth:`for_items` names them by the
    caller's own item ids."""

    def __init__(self, rows: list[int], why: str, found: str = "NaN") -> None:
        self.rows, self.why, self.found = rows, why, found
        super().__init__(self._message(rows))

    def _message(self, items: list[int]) -> str:
        more = f" and {len(items) - 5} more" if len(items) > 5 else ""
        return f"the model's outputs are not finite ({self.found}) for items {items[:5]}{more}: {self.why}"

    def for_items(self, item_ids: Tensor) -> InvalidArgumentError:
        """The same error naming ``item_ids[row]`` (e.g. dataset indices of a chunk) for each row."""
        return InvalidArgumentError(self._message([int(item_ids[row]) for row in self.rows]))


class _NonFiniteOutputs(Exception):
    """Raised by :func:`_forward_chunk` for outputs whose log-softmax is NaN: the rows (items of
    the chunk) and what their outputs held; :func:`_predict` turns it into :class:`NaNOutputsError`."""

    def __init__(self, rows: list[int], found: str) -> None:
        super().__init__(rows, found)
        self.rows, self.found = rows, found


def _checked_log_softmax(logits: Tensor, n: int) -> Tensor:
    """``log_softmax(logits)`` over the last axis; :class:`_NonFiniteOutputs` where it is NaN.

    ``logits`` has ``n`` items first (``[n, C]``, ``[n * k, C]`` item-major or ``[n, k, C]``).
    A ``-inf`` logit is a class of probability 0 (fine); a NaN or ``+inf`` logit, or ``-inf``
    for every class, leaves no probabilities."""
    log_probs = F.log_softmax(logits.float(), dim=-1)
    if not bool(torch.isnan(log_probs).any()):
        return log_probs
    C = logits.shape[-1]
    logits_n_k_C = logits.detach().reshape(n, -1, C)
    bad_n = torch.isnan(log_probs.reshape(n, -1)).any(dim=1)
    kinds = [("NaN", torch.isnan(logits_n_k_C).flatten(1).any(dim=1)),
             ("+inf", (logits_n_k_C == math.inf).flatten(1).any(dim=1)),
             ("-inf for every class", (logits_n_k_C == -math.inf).all(dim=-1).any(dim=1))]
    found = " and ".join(name for name, rows_n in kinds if bool((rows_n & bad_n).any()))
    raise _NonFiniteOutputs(torch.nonzero(bad_n).flatten().tolist(), found or "NaN")


def nan_outputs(x_n: Tensor, bad: _NonFiniteOutputs, offset: int) -> NaNOutputsError:
    """The error for a model whose outputs leave no probabilities: which items, what their
    outputs held, and whether their inputs hold NaN or inf."""
    bad_inputs = set(nonfinite_rows(x_n))
    why = ("their inputs hold NaN or inf" if all(r in bad_inputs for r in bad.rows) else
           f"the model's weights or computation give {bad.found} (trained on NaN inputs, diverged, "
           "or overflowed?)")
    return NaNOutputsError([offset + r for r in bad.rows], why, bad.found)


def _batched_failure(model: nn.Module, x_n: Tensor, error: Exception) -> Exception:
    """What a failed batched MC forward means: if one plain pass (one function, no expansion)
    fails too, the model cannot read these inputs at all; else the batched path does not fit it."""
    try:
        with torch.no_grad(), mc_sampling(model, [0], expand=False):
            model(x_n[:1])
    except (RuntimeError, IndexError) as plain:
        return unreadable_inputs(x_n, plain)
    return BatchedSamplingError(
        f"the batched MC forward failed ({error}); if the model mixes activations "
        "from before and after its first MC dropout layer, use sampling='sequential' (in the loop: a model_factory "
        "returning as_posterior(model, sampling='sequential'))")


def _forward_chunk(
    model: nn.Module, sampler: FunctionSampler | None, x_n: Tensor, n: int, ids: list[int], *, expand: bool,
    check: bool = True,
) -> Tensor:
    """Log-probabilities ``[n, k, C]`` of samples ``ids`` for one chunk of items
    (:class:`_NonFiniteOutputs` where they are NaN, unless not ``check``)."""
    k = len(ids)

    def log_softmax(logits: Tensor) -> Tensor:
        return _checked_log_softmax(logits, n) if check else F.log_softmax(logits.float(), dim=-1)

    if sampler is not None:
        logits_n_k_C = sampler.forward_samples(x_n, ids)
        if not isinstance(logits_n_k_C, Tensor) or logits_n_k_C.shape[:2] != (n, k):
            raise InvalidArgumentError(f"forward_samples must return [n, k, C] = [{n}, {k}, C]")
        if looks_like_probabilities(logits_n_k_C.reshape(n * k, -1)):
            raise probabilities_error("of forward_samples")
        return log_softmax(logits_n_k_C)
    if expand:
        try:
            with mc_sampling(model, ids, expand=True) as context:
                logits = model(x_n)
            expanded = context.expanded
        except BatchedSamplingError:
            raise
        except (RuntimeError, IndexError) as error:
            raise _batched_failure(model, x_n, error) from error
        if not expanded:
            logits = _logits_rows(logits, n, "a chunk of items")
            return log_softmax(logits).unsqueeze(1).expand(n, k, logits.shape[-1])
        logits = _logits_rows(logits, n * k, f"{n} items x {k} samples")
        return log_softmax(logits).reshape(n, k, -1)
    outputs = []
    for sample_id in ids:
        with mc_sampling(model, [sample_id], expand=False):
            logits = _logits_rows(model(x_n), n, "a chunk of items")
        outputs.append(log_softmax(logits))
    return torch.stack(outputs, dim=1)
