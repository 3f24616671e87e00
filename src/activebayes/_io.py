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

import errno
import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_with"]


def is_text_path(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is UTF-8 text. One that is not (bytes such as ``b'caf\\xe9'``, decoded with
    surrogates) cannot be stored where paths are kept as text (a config, JSON, SQLite, a report)."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def utf16_hint(raw: bytes) -> str:
    """For a file that is not UTF-8: what to do when it starts with a UTF-16 byte order mark (a
    spreadsheet's "Unicode text"), else ``""``."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "; it is UTF-16 (a spreadsheet's 'Unicode text'): save it as CSV UTF-8"
    return ""


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
    ensure_folder(target.parent)
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
    one, never the other): ``report.html: read-only file system``, not ``.report.html.x1y2.tmp``.
    Without ``tmp`` (``mkstemp`` failed), a name of its pattern counts as the temporary file."""
    if tmp is not None:
        return renamed_error(error, tmp, target)
    named = error.filename
    if named is not None and not (Path(os.fsdecode(named)).name.startswith(f".{target.name}.")
                                  and os.fsdecode(named).endswith(".tmp")):
        return error
    return renamed_error(error, Path(os.fsdecode(named)) if named is not None else target, target)


def renamed_error(error: OSError, tmp: Path, target: Path) -> OSError:
    """``error`` naming the user's ``target`` instead of the temporary ``tmp`` it was written
    through (``tmp`` itself, a file inside it, or no file at all): a user knows the one, never the
    other. A file inside ``tmp`` becomes the same file inside ``target``. The errno is kept."""
    if error.errno is None:
        return error
    named = error.filename
    if named is None:
        error.filename = str(target)
    else:
        try:
            inside = Path(os.fsdecode(named)).relative_to(tmp)
        except ValueError:
            return error
        error.filename = str(target) if inside == Path(".") else str(target / inside)
    error.filename2 = None
    return error


def _first_file_on_the_way(folder: Path) -> Path | None:
    """The first existing part of ``folder`` (from the top) that is not a folder, if any."""
    for part in reversed((folder, *folder.parents)):
        if part.exists() and not part.is_dir():
            return part
    return None


def ensure_folder(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` and its missing parents (existing ones are fine); returns it.

    When a part of the path is an existing file, raises :class:`NotADirectoryError`
    (``ENOTDIR``) naming that file: ``afile: not a directory``, not the
    ``afile: file exists`` that ``mkdir`` says about it.
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = _first_file_on_the_way(folder)
        if blocker is None:
            raise
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(blocker)) from None
    return folder


def remove_dead_writers_temps(folder: str | os.PathLike[str], pattern: re.Pattern[str], *, folders: bool) -> None:
    """Remove the temporary files (``folders=False``) or folders (``True``) in ``folder`` that writers
    killed mid-way (SIGKILL, a power cut) left behind: names that ``pattern`` matches in full, its
    first group the writer's pid, of a pid not running on this machine. Anything else (another
    name, a live writer's, a link, the other kind of entry) is left alone; errors are ignored."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        try:
            is_kind = entry.is_dir(follow_symlinks=False) if folders else entry.is_file(follow_symlinks=False)
            if match is None or not is_kind or pid_alive(int(match.group(1))):
                continue
            if folders:
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            continue


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` may still be running on this machine (``True`` when unsure).

    Used to tell a temporary file of a crashed writer (safe to remove) from one still being
    written. Only POSIX can ask without side effects; elsewhere every pid counts as alive.
    """
    if os.name != "posix" or pid <= 0 or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, it is someone else's
        return True
    return True


def reserve_space(fd: int, size: int) -> None:
    """Allocate ``size`` bytes on disk for the open file ``fd`` before it is written.

    A full disk then fails here, as :class:`OSError` ``ENOSPC`` (no file name: the caller
    names the file), instead of later, in the middle of a write: the only way a write
    through a memory map can fail is ``SIGBUS``, which kills the process without a word.
    A platform or file system that cannot reserve space (no ``posix_fallocate``,
    ``EOPNOTSUPP``) skips it: ordinary writes still report a full disk as ``ENOSPC``.
    """
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is None or size <= 0:
        return
    try:
        fallocate(fd, 0, size)
    except OSError as error:
        if error.errno in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS, errno.ENODEV):
            return
        raise


class NpyWriter:
    """Write a ``.npy`` array file of a known shape block of rows by block of rows, with
    ordinary file writes (never a writable memory map) into space reserved up front
    (:func:`reserve_space`): a full disk is an :class:`OSError` at creation (or at a write
    on a file system that cannot reserve), never a ``SIGBUS``.

    The file is the one ``numpy.lib.format.open_memmap(path, "w+", ...)`` would write.
    :meth:`close` checks that every row was written and fsyncs; :meth:`discard` removes
    the file. The caller names ``path`` in errors (the file may be a temporary one).
    """

    def __init__(self, path: str | os.PathLike[str], *, dtype: Any, shape: tuple[int, ...]) -> None:
        import numpy as np  # numpy is everywhere in the package, not needed by the other writers

        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(v) for v in shape)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": self.shape}
        buffer = io.BytesIO()
        try:
            np.lib.format.write_array_header_1_0(buffer, header)
        except ValueError:  # a header over 64 KiB (a very long shape): format 2.0, as numpy does
            buffer = io.BytesIO()
            np.lib.format.write_array_header_2_0(buffer, header)
        row_bytes = self.dtype.itemsize
        for v in self.shape[1:]:
            row_bytes *= v
        self._row_bytes = row_bytes
        self.rows = 0
        self.size = len(buffer.getvalue()) + row_bytes * (self.shape[0] if self.shape else 1)
        self._handle: BinaryIO | None = open(self.path, "wb")  # noqa: SIM115 - closed by close / discard
        try:
            reserve_space(self._handle.fileno(), self.size)
            self._handle.write(buffer.getvalue())
        except BaseException:
            self.discard()
            raise

    def write(self, rows: Any) -> None:
        """Append ``rows`` (``[n, *shape[1:]]``, converted to the file's dtype)."""
        import numpy as np

        if self._handle is None:
            raise InvalidArgumentError(f"{self.path} is closed")
        block = np.ascontiguousarray(rows, dtype=self.dtype)
        if block.ndim != len(self.shape) or tuple(block.shape[1:]) != self.shape[1:]:
            raise InvalidArgumentError(f"rows must have shape [n, {', '.join(map(str, self.shape[1:]))}], "
                                       f"got {tuple(block.shape)}")
        if self.rows + block.shape[0] > self.shape[0]:
            raise InvalidArgumentError(f"more rows than the {self.shape[0]} of {self.path.name}")
        if block.size:
            self._handle.write(memoryview(block).cast("B"))
        self.rows += block.shape[0]

    def close(self) -> None:
        """Flush and fsync the complete file and close it (every row must have been written)."""
        if self._handle is None:
            return
        if self.rows != self.shape[0]:
            raise InvalidArgumentError(f"{self.rows} rows were written to {self.path.name}, expected {self.shape[0]}")
        handle, self._handle = self._handle, None
        with handle:
            handle.flush()
            os.fsync(handle.fileno())

    def discard(self) -> None:
        """Close (ignoring errors: the disk may be full) and remove the file."""
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass
        self.path.unlink(missing_ok=True)


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
