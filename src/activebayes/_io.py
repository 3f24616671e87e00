"""Crash-safe file writes: write to a temporary file, flush, fsync, ``os.replace``.

A reader (or a process resumed after SIGKILL) sees either the old file or the
complete new one, never a half-written file. Used by the datasets (downloads),
the file oracle (imported labels) and the experiment runner (run directories).

Example:
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "state.json"
    >>> _ = atomic_write_text(p, '{"round": 1}')
    >>> p.read_text()
    '{"round": 1}'
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from activebayes.errors import InvalidTypeError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_with"]


def _fsync_dir(directory: Path) -> None:
    # Make the rename itself durable; not every platform lets us open a folder.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _current_umask() -> int:
    # Linux reports it without changing it (thread-safe); elsewhere os.umask can
    # only be read by setting it, so set it straight back.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_with(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(handle)`` on a temporary file next to ``path``, then rename it over ``path``.

    The temporary file lives in the same folder (so the rename is atomic) and is
    removed if ``write`` raises; ``path`` is then left untouched. Missing parent
    folders are created. The file gets the permissions any new file would get
    (``0o666`` minus the umask), not the owner-only mode of a temporary file.
    Returns ``path`` as a :class:`~pathlib.Path`.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as error:  # a read-only folder, a full disk: name the file being written
        raise _naming(error, target) from None
    tmp = Path(tmp_name)
    try:
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        raise _naming(error, target, tmp) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(target.parent)
    return target


def _naming(error: OSError, target: Path, tmp: Path | None = None) -> OSError:
    """``error`` naming ``target``, not the temporary file it was written through (a user knows the
    one, never the other): ``report.html: read-only file system``, not ``.report.html.x1y2.tmp``."""
    named = error.filename
    is_tmp = named is None or (tmp is not None and os.fsdecode(named) == str(tmp)) or (
        Path(os.fsdecode(named)).name.startswith(f".{target.name}.") and os.fsdecode(named).endswith(".tmp"))
    if is_tmp and error.errno is not None:
        error.filename = str(target)
        error.filename2 = None
    return error


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically replace ``path`` with ``data`` (temp file + fsync + ``os.replace``)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidTypeError(f"data must be bytes, got {type(data).__name__}")
    return atomic_write_with(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> Path:
    """Atomically replace ``path`` with ``text`` encoded as ``encoding`` (UTF-8 by default)."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be a str, got {type(text).__name__}")
    return atomic_write_bytes(path, text.encode(encoding))
