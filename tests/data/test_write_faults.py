"""Writes that fail: a full disk, a read-only folder, a file where a folder should be, a writer
killed mid-way. Each ends in one line naming the path the user gave (never an internal temporary
name), leaves nothing behind, and a later write cleans up after a killed one.

A full disk is simulated (``os.posix_fallocate`` / a write raising ``ENOSPC``), a read-only folder
too (``os.mkdir`` raising ``EROFS``): nothing here mounts anything or needs root.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from activebayes._io import atomic_write_text
from activebayes.cli import main
from activebayes.data import convert_to_memmap, load_memmap, write_memmap
from tests.conftest import ROOT


def _images(root: Path, n: int = 3) -> Path:
    rng = np.random.default_rng(0)
    for name in ("cat", "dog"):
        (root / "images" / name).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8)).save(root / "images" / name / f"{i}.png")
    return root / "images"


def _err(capsys, *args: object) -> tuple[int, str]:
    code = main([str(a) for a in args])
    return code, capsys.readouterr().err


def _hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def _full_disk(monkeypatch) -> None:
    def fallocate(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", fallocate, raising=False)


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --------------------------------------------------------------------------- a full disk


def test_convert_onto_a_full_disk_is_one_line_naming_the_destination(tmp_path, monkeypatch, capsys):
    """Was a SIGBUS (a write through a memory map past the disk's space): exit 135, no message,
    and the full-size temporary folder left behind."""
    images = _images(tmp_path)
    _full_disk(monkeypatch)
    out = tmp_path / "out" / "mm"
    code, err = _err(capsys, "convert", images, out, "--size", 8, 8, "-q")
    assert code == 1
    assert err == f"error: {out}: no space left on device; free some disk space\n"
    assert not out.exists() and list((tmp_path / "out").iterdir()) == []


def test_write_memmap_onto_a_full_disk_raises_enospc_naming_the_destination(tmp_path, monkeypatch):
    _full_disk(monkeypatch)
    with pytest.raises(OSError) as raised:
        write_memmap(tmp_path / "pool", np.zeros((4, 1, 3, 3), np.uint8), progress=False)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "pool")
    assert list(tmp_path.iterdir()) == []


def test_a_disk_that_cannot_reserve_space_still_converts(tmp_path, monkeypatch):
    """A file system without fallocate: the pixels are written the ordinary way, the same bytes."""
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    pixels = np.random.default_rng(1).integers(0, 256, (5, 1, 4, 3), dtype=np.uint8)
    reference = write_memmap(tmp_path / "a", pixels, progress=False)
    monkeypatch.setattr(os, "posix_fallocate", unsupported, raising=False)
    written = write_memmap(tmp_path / "b", pixels, progress=False)
    assert (written / "inputs.npy").read_bytes() == (reference / "inputs.npy").read_bytes()
    assert np.array_equal(np.load(written / "inputs.npy"), pixels)
    assert _hidden(tmp_path) == []


# --------------------------------------------------------------------------- a killed writer

_KILLED_WRITER = """
import os, signal, sys
import numpy as np
from activebayes.data.memmap import MemmapWriter
writer = MemmapWriter(sys.argv[1], n_items=4, item_shape=(1, 8, 8))
writer.write(np.zeros((2, 1, 8, 8), np.uint8))
os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer or a power cut would
"""

_LIVE_WRITER = """
import sys
import numpy as np
from activebayes.data.memmap import MemmapWriter
writer = MemmapWriter(sys.argv[1], n_items=4, item_shape=(1, 8, 8))
writer.write(np.zeros((2, 1, 8, 8), np.uint8))
print(writer.tmp.name, flush=True)
sys.stdin.readline()  # still writing until told
writer.abort()
"""


def _python(script: str, *args: object, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)], env=env,
                            cwd=ROOT, **kwargs)


def test_a_later_convert_removes_the_temp_folder_of_a_killed_one(tmp_path, capsys):
    images = _images(tmp_path)
    out = tmp_path / "mm"
    killed = _python(_KILLED_WRITER, out)
    assert killed.wait(timeout=120) == -9
    assert len(_hidden(tmp_path)) == 1  # what SIGKILL leaves: nothing can clean up then
    code, err = _err(capsys, "convert", images, out, "--size", 8, 8, "-q")
    assert code == 0, err
    assert _hidden(tmp_path) == [] and len(load_memmap(out)) == 6


def test_a_live_writers_temp_folder_and_other_names_are_left_alone(tmp_path):
    out = tmp_path / "mm"
    dead = _dead_pid()
    decoys = [f".mm.{dead}.abcd1234.tmp.keep", f".mmx.{dead}.abcd1234.tmp", f".m.{dead}.abcd1234.tmp",
              f".mm.{dead}.abc.tmp", ".mm.notapid.abcd1234.tmp", f"mm.{dead}.abcd1234.tmp"]
    for name in decoys:
        (tmp_path / name).mkdir()
        (tmp_path / name / "inputs.npy").write_bytes(b"x")
    (tmp_path / f".mm.{dead}.abcd1234.tmp").write_text("a file, not our folder")
    stale = tmp_path / f".mm.{dead}.zz_y9876.tmp"
    stale.mkdir()
    (stale / "inputs.npy").write_bytes(b"x" * 100)
    live = _python(_LIVE_WRITER, out, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        live_tmp = live.stdout.readline().strip()
        assert live_tmp.startswith(f".mm.{live.pid}.") and (tmp_path / live_tmp).is_dir()
        write_memmap(out, np.zeros((3, 1, 2, 2), np.uint8), progress=False)
        assert (tmp_path / live_tmp / "inputs.npy").is_file()  # still being written: untouched
    finally:
        live.communicate("\n", timeout=120)
    assert not stale.exists()
    assert sorted(_hidden(tmp_path)) == sorted([*[d for d in decoys if d.startswith(".")],
                                                f".mm.{dead}.abcd1234.tmp"])
    assert len(load_memmap(out)) == 3


# --------------------------------------------------------------------------- internal names


@pytest.fixture
def read_only(tmp_path: Path, monkeypatch) -> Path:
    """A folder in which nothing can be made, as on a read-only file system (tests may run as root)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if os.path.abspath(os.fsdecode(path)).startswith(str(folder)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    return folder


def test_convert_into_a_read_only_folder_names_the_destination(tmp_path, read_only, capsys, monkeypatch):
    images = _images(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, err = _err(capsys, "convert", "images", "ro/mm", "--size", 8, 8, "-q")
    assert code == 1
    assert err == "error: ro/mm: read-only file system; choose a writable place\n"
    assert images.is_dir() and list(read_only.iterdir()) == []


def test_a_project_in_a_read_only_folder_names_the_project(tmp_path, read_only, capsys):
    target = read_only / "p"
    code, err = _err(capsys, "query", target, "--dataset", "digits", "-q")
    assert code == 1
    assert err == f"error: {target}: read-only file system; choose a writable place\n"


# --------------------------------------------------------------------------- a file on the way


def test_a_file_where_a_folder_should_be_is_not_a_directory(tmp_path):
    (tmp_path / "afile").write_text("hello")
    for path in (tmp_path / "afile" / "r.html", tmp_path / "afile" / "deeper" / "r.html"):
        with pytest.raises(NotADirectoryError) as raised:
            atomic_write_text(path, "x")
        assert raised.value.errno == errno.ENOTDIR and raised.value.filename == str(tmp_path / "afile")
    from activebayes._io import ensure_folder

    with pytest.raises(NotADirectoryError):
        ensure_folder(tmp_path / "afile")
    assert ensure_folder(tmp_path / "a" / "b").is_dir()
    assert (tmp_path / "afile").read_text() == "hello"


@pytest.mark.parametrize("command", ["convert", "query"])
def test_commands_say_a_part_of_the_path_is_a_file(command, tmp_path, capsys, monkeypatch):
    images = _images(tmp_path)
    (tmp_path / "afile").write_text("hello")
    monkeypatch.chdir(tmp_path)
    if command == "convert":
        code, err = _err(capsys, "convert", images, "afile/sub", "--size", 8, 8, "-q")
        named = "afile"
    else:
        code, err = _err(capsys, "query", "afile/p", "--images", images, "--classes", "cat,dog", "-q")
        named = str(tmp_path / "afile")  # a project's paths are absolute
    assert code == 1
    assert err == f"error: {named}: not a directory; check the path: a part of it is a file\n"
    assert (tmp_path / "afile").read_text() == "hello" and _hidden(tmp_path) == []


def test_convert_to_memmap_below_a_file_raises_not_a_directory(tmp_path):
    images = _images(tmp_path)
    (tmp_path / "afile").write_text("hello")
    with pytest.raises(NotADirectoryError) as raised:
        convert_to_memmap(images, tmp_path / "afile" / "x" / "mm", size=(8, 8), progress=False)
    assert raised.value.filename == str(tmp_path / "afile")


# --------------------------------------------------------------------------- figures


def test_save_figure_is_fsynced_before_it_replaces_the_file(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from activebayes.plots import roc_plot
    from activebayes.plots._base import save_figure

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    fig = roc_plot([0, 0.5, 1], [0, 0.8, 1])
    for name, palette in (("roc.png", True), ("roc.svg", True), ("plain.png", False)):
        out = save_figure(fig, tmp_path / "figures" / name, palette=palette)
        assert out == tmp_path / "figures" / name and out.stat().st_size > 0
    assert len(synced) >= 3
    assert _hidden(tmp_path / "figures") == []
    (tmp_path / "afile").write_text("hello")
    with pytest.raises(NotADirectoryError):
        save_figure(fig, tmp_path / "afile" / "roc.png")


def test_a_file_on_the_way_of_a_download_or_a_run_directory_says_not_a_directory(tmp_path):
    import errno as _errno

    from activebayes.data.idx import download_file
    from activebayes.loop import LoopConfig
    from activebayes.rundir import RunDirectory

    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    with pytest.raises(NotADirectoryError) as download:
        download_file("http://127.0.0.1:9/x.gz", blocker / "sub" / "x.gz", md5="0" * 32)
    with pytest.raises(NotADirectoryError) as run:
        RunDirectory(blocker / "run").write_config(LoopConfig())
    for raised in (download.value, run.value):
        assert raised.errno == _errno.ENOTDIR and raised.filename == str(blocker)
    assert blocker.read_text() == "mine"
