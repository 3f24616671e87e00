"""The text-feature cache: written atomically with the permissions of any new file, without touching the umask."""

from __future__ import annotations

import os

import numpy as np
import pytest

from activebayes.data.text import encode_texts

TEXTS = [f"item {i} about {'goals and matches' if i % 2 else 'atoms and cells'}" for i in range(40)]


def test_the_cache_never_sets_the_process_umask(tmp_path, monkeypatch):
    """Setting the umask, even for a moment, races with threads creating files (the labelling app)."""

    def forbidden(mask):
        raise AssertionError(f"os.umask({mask:#o}) called")

    monkeypatch.setattr(os, "umask", forbidden)
    features = encode_texts(TEXTS, cache_dir=tmp_path)
    (cached,) = tmp_path.glob("embeddings-*.npy")
    np.testing.assert_array_equal(np.load(cached), features)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_the_cache_file_gets_the_permissions_of_a_new_file(tmp_path):
    previous = os.umask(0o027)
    try:
        encode_texts(TEXTS, cache_dir=tmp_path)
    finally:
        os.umask(previous)
    (cached,) = tmp_path.glob("embeddings-*.npy")
    assert cached.stat().st_mode & 0o777 == 0o640


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_folder_only_skips_the_cache(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        features = encode_texts(TEXTS, cache_dir=folder)
    finally:
        folder.chmod(0o700)
    assert features.shape[0] == len(TEXTS) and not list(folder.iterdir())
