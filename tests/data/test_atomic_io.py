from __future__ import annotations

import pytest

from activebayes._io import atomic_write_bytes, atomic_write_text, atomic_write_with


def test_atomic_write_creates_parents_and_replaces(tmp_path):
    target = tmp_path / "a" / "b" / "state.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "twö")
    assert target.read_bytes() == "twö".encode()
    atomic_write_bytes(target, b"\x00\x01")
    assert target.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "state.json"
    atomic_write_text(target, "old")

    def explode(handle):
        handle.write(b"half of the new cont")
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError, match="killed mid-write"):
        atomic_write_with(target, explode)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_type_errors(tmp_path):
    with pytest.raises(TypeError, match="text must be a str"):
        atomic_write_text(tmp_path / "x", b"bytes")
    with pytest.raises(TypeError, match="data must be bytes"):
        atomic_write_bytes(tmp_path / "x", "text")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_follow_the_umask(tmp_path, umask):
    """A written file gets 0o666 minus the umask, like any new file, not a temp file's 0600."""
    import os

    previous = os.umask(umask)
    try:
        reference = tmp_path / "plain.txt"
        reference.write_text("x")  # what open() gives under this umask
        written = atomic_write_text(tmp_path / "atomic.txt", "x")
    finally:
        os.umask(previous)
    assert (written.stat().st_mode & 0o777) == (reference.stat().st_mode & 0o777) == 0o666 & ~umask
