"""IDX files (the MNIST family's format), md5 checks and checksum-verified downloads.

IDX layout (LeCun et al., http://yann.lecun.com/exdb/mnist/): a 4-byte magic
``0x00 0x00 <dtype> <ndim>``, then ``ndim`` big-endian uint32 sizes, then the
values in C order (big-endian for multi-byte types). ``dtype`` is one of
0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64.
Files are usually gzip-compressed (``*.gz``).

Checksums are over content: a file is accepted when either the md5 of the file
as stored matches the official ``.gz`` or the sha256 of its decoded (uncompressed)
IDX bytes matches the official content, so official data that was re-compressed
(another gzip level, a mirror that re-gzips) or is stored uncompressed loads, and
anything else is rejected naming the file.

Example:
    >>> import numpy as np
    >>> blob = bytes([0, 0, 0x08, 1]) + (3).to_bytes(4, "big") + bytes([7, 8, 9])
    >>> parse_idx(blob).tolist()
    [7, 8, 9]
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from ._core import DataError
from activebayes._io import ensure_folder
from activebayes.errors import InvalidArgumentError

__all__ = [
    "IdxStream",
    "check_idx_checksums",
    "checksum_error",
    "decode_idx_bytes",
    "download_file",
    "file_md5",
    "parse_idx",
    "read_idx",
]

_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def parse_idx(data: bytes, *, source: str = "<bytes>") -> np.ndarray:
    """Decode the (already decompressed) bytes of one IDX file into a NumPy array.

    Raises :class:`DataError` naming ``source`` on a wrong magic number, an
    unknown type code, or a size that does not match the header (truncated file
    or trailing bytes).
    """
    if len(data) < 4:
        raise DataError(f"{source}: not an IDX file: only {len(data)} byte(s)")
    if data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DataError(
            f"{source}: not an IDX file: wrong magic number 0x{data[:4].hex()} "
            "(expected 00 00 <type code 08/09/0b/0c/0d/0e> <ndim>)"
        )
    dtype = _IDX_DTYPES[data[2]]
    ndim = data[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise DataError(f"{source}: truncated IDX header ({len(data)} bytes for {ndim} dimension(s))")
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) != expected:
        what = "truncated" if len(data) < expected else "has trailing bytes"
        raise DataError(
            f"{source}: IDX file {what}: header says shape {shape} ({expected} bytes), file has {len(data)} bytes"
        )
    values = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return values.astype(dtype.newbyteorder("="), copy=True)


def decode_idx_bytes(raw: bytes, *, source: str = "<bytes>") -> bytes:
    """The uncompressed IDX bytes of a file's content: gunzipped if it starts with ``1f 8b``.

    Raises :class:`DataError` naming ``source`` for broken or truncated gzip data.
    """
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{source}: corrupt or truncated gzip data ({exc})") from None


def read_idx(
    path: str | os.PathLike[str],
    *,
    md5: str | None = None,
    content_sha256: str | None = None,
    expected_ndim: int | None = None,
) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not), optionally verifying it first.

    Args:
        path: the file; gzip is detected from its first two bytes (``1f 8b``).
        md5: hex md5 of the official file as distributed (the ``.gz``).
        content_sha256: hex sha256 of the official *decoded* IDX bytes (the file
            uncompressed). When ``md5`` or ``content_sha256`` is given, the file
            passes if either matches: the official ``.gz`` itself, or any copy
            whose content is the official content (re-compressed at another gzip
            level, or stored uncompressed).
        expected_ndim: if given, the number of dimensions the array must have
            (3 for images ``[N, H, W]``, 1 for labels ``[N]``).

    Raises :class:`DataError` naming the file for a missing file, a checksum
    mismatch (giving what was expected and what was found), broken gzip data,
    or a malformed IDX payload. The file is only read.

    Example:
        >>> import gzip, hashlib, tempfile, pathlib
        >>> blob = bytes([0, 0, 0x08, 1]) + (2).to_bytes(4, "big") + bytes([5, 6])
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "x-idx1-ubyte.gz"
        >>> _ = path.write_bytes(gzip.compress(blob, compresslevel=1))
        >>> read_idx(path, content_sha256=hashlib.sha256(blob).hexdigest()).tolist()
        [5, 6]
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    raw = path.read_bytes()
    if md5 is not None or content_sha256 is not None:
        data = _verified_content(path, raw, md5=md5, content_sha256=content_sha256)
    else:
        data = decode_idx_bytes(raw, source=str(path))
    array = parse_idx(data, source=str(path))
    if expected_ndim is not None and array.ndim != expected_ndim:
        raise DataError(
            f"{path}: expected an IDX array with {expected_ndim} dimension(s), got shape {array.shape}"
        )
    return array


def _verified_content(path: Path, raw: bytes, *, md5: str | None, content_sha256: str | None) -> bytes:
    """The decoded bytes of ``raw`` if the file or its content is the official one, else DataError."""
    actual_md5 = hashlib.md5(raw, usedforsecurity=False).hexdigest()
    if md5 is not None and actual_md5 == md5.lower():
        return decode_idx_bytes(raw, source=str(path))
    try:
        data = decode_idx_bytes(raw, source=str(path))
    except DataError as exc:
        problem = str(exc).removeprefix(f"{path}: ")
        raise checksum_error(path, actual_md5=actual_md5, md5=md5, content_sha256=content_sha256,
                             decode_problem=problem) from None
    actual_sha = hashlib.sha256(data).hexdigest()
    check_idx_checksums(path, actual_md5=actual_md5, actual_content_sha256=actual_sha, md5=md5,
                        content_sha256=content_sha256)
    return data


def check_idx_checksums(
    path: str | os.PathLike[str],
    *,
    actual_md5: str,
    actual_content_sha256: str,
    md5: str | None,
    content_sha256: str | None,
) -> None:
    """Raise :class:`DataError` unless the file's md5 or its content's sha256 is the expected one.

    The rule of :func:`read_idx` for callers that hash while streaming (the converter).
    """
    if md5 is not None and actual_md5 == md5.lower():
        return
    if content_sha256 is not None and actual_content_sha256 == content_sha256.lower():
        return
    if md5 is None and content_sha256 is None:
        return
    raise checksum_error(path, actual_md5=actual_md5, md5=md5, content_sha256=content_sha256,
                         actual_content_sha256=actual_content_sha256)


def checksum_error(
    path: str | os.PathLike[str],
    *,
    actual_md5: str,
    md5: str | None,
    content_sha256: str | None,
    actual_content_sha256: str | None = None,
    decode_problem: str | None = None,
) -> DataError:
    """The one checksum-mismatch message: what was expected and what was found, naming the file."""
    problems: list[str] = []
    if md5 is not None:
        problems.append(f"md5 {actual_md5}, expected {md5.lower()} (the official file as distributed)")
    if decode_problem is not None:
        problems.append(f"the content cannot be decoded: {decode_problem}")
    elif content_sha256 is not None:
        problems.append(f"uncompressed content sha256 {actual_content_sha256}, expected {content_sha256.lower()}")
    if content_sha256 is None:
        problems.append("no content checksum is known for this file, so only the official .gz is accepted")
    return DataError(
        f"{path}: checksum mismatch: {'; '.join(problems)}. The file is corrupt, partial or another "
        "dataset's file: delete it and download again"
    )


class IdxStream:
    """An IDX file (gzip or plain) read item by item in chunks, hashing the decoded bytes as they pass.

    For files too large to decode at once (the converter streams them). Use as a
    context manager; ``shape`` and ``dtype`` come from the header, :meth:`chunks`
    yields native-endian arrays ``[n, *shape[1:]]``, and :meth:`finish` checks that
    nothing is missing or left over and returns the sha256 of the whole decoded file
    (header included, as :func:`read_idx` verifies it).

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "x-idx1-ubyte"
        >>> _ = path.write_bytes(bytes([0, 0, 0x08, 1]) + (3).to_bytes(4, "big") + bytes([7, 8, 9]))
        >>> with IdxStream(path) as stream:
        ...     [c.tolist() for c in stream.chunks(2)], len(stream.finish())
        ([[7, 8], [9]], 64)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise DataError(f"{self.path}: file not found")
        with open(self.path, "rb") as probe:
            compressed = probe.read(2) == b"\x1f\x8b"
        self._handle = gzip.open(self.path, "rb") if compressed else open(self.path, "rb")  # noqa: SIM115
        try:
            magic = self._read(4, "header")
            if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_DTYPES:
                raise DataError(
                    f"{self.path}: not an IDX file: wrong magic number 0x{magic.hex()} "
                    "(expected 00 00 <type code 08/09/0b/0c/0d/0e> <ndim>)"
                )
            ndim = magic[3]
            dims = self._read(4 * ndim, "header")
            if ndim == 0 or len(dims) < 4 * ndim:
                raise DataError(f"{self.path}: truncated IDX header ({4 + len(dims)} bytes for {ndim} dimension(s))")
        except BaseException:
            self._handle.close()
            raise
        self.dtype = _IDX_DTYPES[magic[2]]
        self.shape = tuple(int.from_bytes(dims[4 * i : 4 * i + 4], "big") for i in range(ndim))
        self._item_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        self._digest = hashlib.sha256(magic + dims)
        self._done = 0

    def _read(self, n_bytes: int, what: str) -> bytes:
        try:
            return self._handle.read(n_bytes)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{self.path}: corrupt or truncated gzip data in the {what} ({exc})") from None

    def chunks(self, n_items: int) -> Iterator[np.ndarray]:
        """The remaining items, at most ``n_items`` per chunk."""
        while self._done < self.shape[0]:
            n = min(n_items, self.shape[0] - self._done)
            data = self._read(n * self._item_bytes, "data")
            if len(data) != n * self._item_bytes:
                expected = 4 + 4 * len(self.shape) + self.shape[0] * self._item_bytes
                got = 4 + 4 * len(self.shape) + self._done * self._item_bytes + len(data)
                raise DataError(
                    f"{self.path}: IDX file truncated: header says shape {self.shape} ({expected} bytes), "
                    f"the data ends after {got} bytes"
                )
            self._digest.update(data)
            self._done += n
            array = np.frombuffer(data, dtype=self.dtype).reshape(n, *self.shape[1:])
            yield array.astype(self.dtype.newbyteorder("="), copy=False)

    def finish(self) -> str:
        """Check the file ends where its header says; return the sha256 of the decoded file."""
        if self._done != self.shape[0]:
            raise DataError(f"{self.path}: only {self._done} of {self.shape[0]} items were read")
        if self._read(1, "data"):
            raise DataError(f"{self.path}: IDX file has trailing bytes after the {self.shape} array its header declares")
        return self._digest.hexdigest()

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> IdxStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def file_md5(path: str | os.PathLike[str], *, chunk_size: int = 1 << 20) -> str:
    """Hex md5 of a file, read in chunks."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(
    urls: str | Sequence[str],
    destination: str | os.PathLike[str],
    *,
    md5: str,
    timeout: float = 30.0,
    progress: bool = False,
) -> Path:
    """Download the first URL that works to ``destination``, verifying its md5.

    Streams into a temporary file in the destination folder while hashing, and
    only renames it to ``destination`` (``os.replace``, atomic) when the md5
    matches. On any failure the temporary file is removed and ``destination``
    is left as it was. URLs are tried in order (mirrors); ``file://`` works too.

    Raises :class:`DataError` listing every URL tried and why it failed.
    """
    candidates = [urls] if isinstance(urls, str) else list(urls)
    if not candidates:
        raise InvalidArgumentError("urls must name at least one URL")
    destination = Path(destination)
    ensure_folder(destination.parent)  # a file on the way: "not a directory", not "file exists"
    failures: list[str] = []
    for url in candidates:
        fd, tmp_name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".part")
        tmp = Path(tmp_name)
        try:
            digest = hashlib.md5(usedforsecurity=False)
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
                total = response.headers.get("Content-Length") if hasattr(response, "headers") else None
                bar = None
                if progress:
                    bar = tqdm(total=int(total) if total else None, unit="B", unit_scale=True, desc=destination.name)
                try:
                    for chunk in iter(lambda: response.read(1 << 16), b""):
                        out.write(chunk)
                        digest.update(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                finally:
                    if bar is not None:
                        bar.close()
                out.flush()
                os.fsync(out.fileno())
            actual = digest.hexdigest()
            if actual != md5.lower():
                failures.append(f"{url}: checksum mismatch (md5 {actual}, expected {md5.lower()})")
                tmp.unlink(missing_ok=True)
                continue
            os.replace(tmp, destination)
            return destination
        except (urllib.error.URLError, OSError, ValueError) as exc:
            tmp.unlink(missing_ok=True)
            failures.append(f"{url}: {exc}")
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    raise DataError(f"could not download {destination.name}; tried: " + "; ".join(failures))
