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
