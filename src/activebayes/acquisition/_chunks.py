"""Chunked streaming over the pool with fused value checks (internal).

Every pool-wide computation in :mod:`activebayes.acquisition` walks the pool in
chunks of rows so that temporaries stay a small, fixed multiple of one chunk,
whatever N is. The values of ``log_probs_N_K_C`` are checked chunk by chunk on
the probabilities the computation needs anyway (one ``exp``), so validation
costs no extra pass over the input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch import Tensor

from activebayes._validation import (
    check_log_probs,
    check_positive_int,
    check_torch_device,
    log_probs_tolerance,
)
from activebayes.errors import InvalidArgumentError

#: Elements of ``[n, K, C]`` per chunk: 2**18 (1 MiB in float32, cache friendly).
#: Temporaries are a few times this, independent of N.
CHUNK_ELEMENTS = 1 << 18


def rows_per_chunk(row_elements: int, chunk_size: int | None = None) -> int:
    """Rows per chunk: ``chunk_size`` if given, else as many as fit in CHUNK_ELEMENTS."""
    if chunk_size is not None:
        return check_positive_int(chunk_size, "chunk_size")
    return max(1, CHUNK_ELEMENTS // max(1, row_elements))


def iter_chunks(N: int, rows: int) -> Iterator[tuple[int, int]]:
    for start in range(0, N, rows):
        yield start, min(N, start + rows)


def resolve_device(tensor: Tensor, device: torch.device | str | None) -> torch.device:
    """Where to compute: ``device``, checked to exist on this machine, else the tensor's."""
    return tensor.device if device is None else check_torch_device(device)


def check_chunk_sums(
    log_probs_n_K_C: Tensor, sums_n_K: Tensor, name: str, atol: float, offset: int
) -> None:
    """Raise a clear error when a chunk's rows are not normalised (also catches NaN / +inf).

    ``sums_n_K`` are ``exp(log_probs).sum(-1)``; NaN and +inf make the comparison fail.
    On failure the full validator runs on the chunk to say exactly what is wrong.
    """
    good_n = ((sums_n_K.double() - 1).abs() <= atol).all(-1)  # NaN and +inf compare False: bad
    if bool(good_n.all()):
        return
    try:  # the full validator (log-sum-exp, in float32 or wider) decides and says what is wrong
        check_log_probs(log_probs_n_K_C, name, atol=atol)
    except ValueError as error:
        raise InvalidArgumentError(f"{error} ({_rows_named((~good_n).nonzero().flatten() + offset)})") from None


def _rows_named(rows: Tensor, shown: int = 5) -> str:
    """``"pool row 41234"`` or ``"pool rows 3, 8, 9 and 2 more (5 rows)"``: the bad rows' pool indices."""
    listed = ", ".join(str(int(r)) for r in rows[:shown])
    if len(rows) == 1:
        return f"pool row {listed}"
    more = f" and {len(rows) - shown} more" if len(rows) > shown else ""
    return f"pool rows {listed}{more} ({len(rows)} rows)"


def clamp_log(log_probs: Tensor) -> Tensor:
    """Replace ``-inf`` by the most negative finite value: ``0 * clamp_log(log 0) = 0``."""
    return log_probs.clamp_min(torch.finfo(log_probs.dtype).min)


def map_log_probs(
    log_probs_N_K_C: Tensor,
    fn: Callable[[Tensor, Tensor], Tensor],
    *,
    name: str = "log_probs_N_K_C",
    device: torch.device | str | None = None,
    chunk_size: int | None = None,
) -> Tensor:
    """Apply ``fn(log_probs_n_K_C, probs_n_K_C) -> scores_n`` chunk by chunk.

    ``log_probs_n_K_C`` is the raw chunk (it may hold ``-inf`` for probability 0;
    kernels must make ``0 log 0 = 0``, e.g. with :func:`clamp_log`) and
    ``probs_n_K_C = exp(log_probs_n_K_C)``, computed once and used for the value check.
    Returns float64 ``scores_N`` on the input's device (computed on ``device`` when given).
    """
    check_log_probs(log_probs_N_K_C, name, values=False)
    N, K, C = log_probs_N_K_C.shape
    compute_device = resolve_device(log_probs_N_K_C, device)
    atol = log_probs_tolerance(log_probs_N_K_C.dtype, C)
    scores_N = torch.empty(N, dtype=torch.float64, device=compute_device)
    for start, end in iter_chunks(N, rows_per_chunk(K * C, chunk_size)):
        log_probs_n_K_C = log_probs_N_K_C[start:end].to(compute_device, non_blocking=True)
        probs_n_K_C = log_probs_n_K_C.exp()
        check_chunk_sums(log_probs_n_K_C, probs_n_K_C.sum(-1, dtype=torch.float64), name, atol, start)
        scores_N[start:end] = fn(log_probs_n_K_C, probs_n_K_C)
    return scores_N.to(log_probs_N_K_C.device)
