"""The on-disk caches of the models (embeddings, self-supervised encoders) when a write fails:
a full disk is an ``OSError`` (``ENOSPC``) naming the cache file, which the command line reports in
one line; an error or Ctrl-C leaves no temporary file; a killed writer's temporary file is removed
by the next writer. A full disk is simulated: nothing is mounted."""

from __future__ import annotations

import dataclasses
import errno
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import activebayes._io as io_module
from activebayes.models import compute_embeddings
from activebayes.models.representation import RepresentationConfig, train_or_load_representation

TINY = RepresentationConfig(width=4, feature_dim=8, projection_dim=4, epochs=1, batch_size=16)


class Flaky(nn.Module):
    """Flattens its input; its ``fail_at``-th call raises ``error``."""

    def __init__(self, fail_at: int | None, error: BaseException | None = None):
        super().__init__()
        self.fail_at, self.error, self.calls = fail_at, error, 0

    def forward(self, x):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error
        return x.flatten(1)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --------------------------------------------------------------------------- the embedding cache


@pytest.mark.parametrize("error", [KeyboardInterrupt(), RuntimeError("encoder broke")])
def test_an_error_while_encoding_leaves_no_temporary_file(tmp_path, error):
    inputs = torch.randn(500, 1, 4, 4)
    with pytest.raises(type(error)):
        compute_embeddings(Flaky(3, error), inputs, batch_size=100, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
    cached = compute_embeddings(Flaky(None), inputs, batch_size=100, cache_dir=tmp_path)
    torch.testing.assert_close(cached[torch.arange(500)], inputs.flatten(1))
    assert [p.name.endswith(".tmp.npy") for p in tmp_path.iterdir()] == [False]


def test_a_full_disk_under_the_embedding_cache_is_enospc_naming_the_cache_file(tmp_path, monkeypatch):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    with pytest.raises(OSError) as raised:
        compute_embeddings(Flaky(None), torch.randn(50, 1, 4, 4), batch_size=20, cache_dir=tmp_path / "cache")
    error = raised.value
    assert error.errno == errno.ENOSPC
    named = os.fsdecode(error.filename)
    assert os.path.dirname(named) == str(tmp_path / "cache")
    assert os.path.basename(named).startswith("embeddings-") and named.endswith(".npy") and ".tmp" not in named
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_killed_writers_temporary_file_is_removed_by_the_next_one(tmp_path):
    inputs = torch.randn(40, 1, 4, 4)
    first = compute_embeddings(Flaky(None), inputs, batch_size=20, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    del first
    stem = path.name.removesuffix(".npy")
    stale = tmp_path / f"{stem}.{_dead_pid()}.tmp.npy"
    path.rename(stale)  # what a writer killed by SIGKILL leaves behind: a full-size temporary file
    live = tmp_path / f"{stem}.{os.getppid()}.tmp.npy"  # a running process's: being written
    live.write_bytes(b"x")
    other = tmp_path / "embeddings-otherkey.1.tmp.npy"
    other.write_bytes(b"x")
    again = compute_embeddings(Flaky(None), inputs, batch_size=20, cache_dir=tmp_path)
    torch.testing.assert_close(again[torch.arange(40)], inputs.flatten(1))
    assert not stale.exists() and live.exists() and other.exists() and path.is_file()


# --------------------------------------------------------------------------- the encoder cache


class _FullDiskHandle:
    """A file on a disk with ``room`` bytes left: a write past them fails as on a full disk (as
    write() says it: no file name). torch.save writing such a file itself made a RuntimeError
    ("unexpected pos") of it once a first piece had been written."""

    def __init__(self, handle, room: int = 100):
        self._handle, self._room = handle, room

    def write(self, data):
        size = memoryview(data).nbytes
        if size > self._room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._room -= size
        return self._handle.write(data)

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


@pytest.mark.parametrize("epochs,written", [(1, "final"), (2, "checkpoint")])
def test_a_full_disk_under_the_encoder_cache_is_enospc_naming_the_file(tmp_path, monkeypatch, epochs, written):
    """Was torch's ``RuntimeError: ... unexpected pos`` (a traceback) when torch.save wrote the file."""
    real_fdopen = os.fdopen
    monkeypatch.setattr(io_module.os, "fdopen", lambda fd, *a, **k: _FullDiskHandle(real_fdopen(fd, *a, **k)))
    config = dataclasses.replace(TINY, epochs=epochs)
    with pytest.raises(OSError) as raised:
        train_or_load_representation(torch.randn(32, 1, 8, 8), config, seed=0, cache_dir=tmp_path)
    error = raised.value
    assert error.errno == errno.ENOSPC
    named = os.fsdecode(error.filename)
    assert os.path.dirname(named) == str(tmp_path)
    assert named.endswith(".partial.pt" if written == "checkpoint" else ".pt")
    if written == "final":
        assert not named.endswith(".partial.pt")
    assert not any(p.name.endswith(".tmp") or p.name.startswith(".") for p in tmp_path.iterdir())
