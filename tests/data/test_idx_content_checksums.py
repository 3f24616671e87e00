"""IDX files are verified by their content: official data re-compressed or uncompressed loads,
anything else is rejected naming the file."""

from __future__ import annotations

import gzip
import hashlib
import shutil

import numpy as np
import pytest
import torch

from activebayes.data import IDX_DATASETS, DataError, load_dataset, read_idx

TEST_FILES = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
SUBSET_FILES = ("train-5k-images-idx3-ubyte.gz", "train-5k-labels-idx1-ubyte.gz")


@pytest.fixture(scope="module")
def reference(mnist_dir):
    return load_dataset("mnist", split="test", data_dir=mnist_dir)


def _plain(mnist_dir, name: str) -> bytes:
    return gzip.decompress((mnist_dir / name).read_bytes())


def test_known_content_checksums_match_the_shared_files(mnist_dir):
    # independent of the loader: hashlib over gzip.decompress of the README's official files
    by_name = {
        f.filename: f
        for split in IDX_DATASETS["mnist"].splits.values()
        for pair in split
        for f in pair
    }
    for name in TEST_FILES + SUBSET_FILES:
        assert by_name[name].content_sha256 == hashlib.sha256(_plain(mnist_dir, name)).hexdigest()


@pytest.mark.parametrize("level", [1, 6])
def test_recompressed_official_files_load(mnist_dir, tmp_path, reference, level):
    for name in TEST_FILES:
        blob = gzip.compress(_plain(mnist_dir, name), compresslevel=level, mtime=0)
        assert blob != (mnist_dir / name).read_bytes()  # really another .gz than the official one
        (tmp_path / name).write_bytes(blob)
    ds = load_dataset("mnist", split="test", data_dir=tmp_path)
    assert torch.equal(ds.inputs, reference.inputs) and torch.equal(ds.targets, reference.targets)


def test_uncompressed_official_files_load(mnist_dir, tmp_path, reference):
    # the names without .gz (what gunzip leaves), and a mixed pair in the torchvision layout
    for name in TEST_FILES:
        (tmp_path / name.removesuffix(".gz")).write_bytes(_plain(mnist_dir, name))
    ds = load_dataset("mnist", split="test", data_dir=tmp_path)
    assert torch.equal(ds.inputs, reference.inputs) and torch.equal(ds.targets, reference.targets)

    raw = tmp_path / "tv" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-5k-images-idx3-ubyte").write_bytes(_plain(mnist_dir, SUBSET_FILES[0]))
    shutil.copy(mnist_dir / SUBSET_FILES[1], raw / SUBSET_FILES[1])
    train = load_dataset("mnist", split="train", data_dir=tmp_path / "tv")
    official = load_dataset("mnist", split="train", data_dir=mnist_dir)
    assert torch.equal(train.inputs, official.inputs) and torch.equal(train.targets, official.targets)


def test_uncompressed_content_under_the_gz_name_loads(mnist_dir, tmp_path, reference):
    for name in TEST_FILES:
        (tmp_path / name).write_bytes(_plain(mnist_dir, name))
    ds = load_dataset("mnist", split="test", data_dir=tmp_path)
    assert torch.equal(ds.inputs, reference.inputs)


@pytest.mark.parametrize("compress", [True, False])
def test_one_changed_pixel_is_rejected_naming_the_file(mnist_dir, tmp_path, compress):
    content = bytearray(_plain(mnist_dir, TEST_FILES[0]))
    offset = 16 + 5 * 784 + 14 * 28 + 14  # image 5, centre pixel
    content[offset] = (content[offset] + 1) % 256
    images = tmp_path / (TEST_FILES[0] if compress else TEST_FILES[0].removesuffix(".gz"))
    images.write_bytes(gzip.compress(bytes(content), compresslevel=1) if compress else bytes(content))
    shutil.copy(mnist_dir / TEST_FILES[1], tmp_path / TEST_FILES[1])
    expected_sha = hashlib.sha256(_plain(mnist_dir, TEST_FILES[0])).hexdigest()
    found_sha = hashlib.sha256(bytes(content)).hexdigest()
    with pytest.raises(DataError) as info:
        load_dataset("mnist", split="test", data_dir=tmp_path)
    message = str(info.value)
    assert message.startswith(f"{images}: checksum mismatch")
    assert f"uncompressed content sha256 {found_sha}, expected {expected_sha}" in message
    assert "expected 9fb629c4189551a2d022fa330f9573f3" in message  # the official .gz md5
    # the same file still decodes without a checksum: only the verification rejects it
    decoded = read_idx(images)
    reference = np.frombuffer(_plain(mnist_dir, TEST_FILES[0]), np.uint8, offset=16).reshape(-1, 28, 28)
    assert int((decoded != reference).sum()) == 1


def test_without_a_content_checksum_only_the_official_gz_passes(mnist_dir, tmp_path):
    # KMNIST's content checksums are unknown: the .gz md5 is then the only way to pass
    name = TEST_FILES[1]
    official_md5 = hashlib.md5((mnist_dir / name).read_bytes()).hexdigest()
    np.testing.assert_array_equal(read_idx(mnist_dir / name, md5=official_md5), read_idx(mnist_dir / name))
    copy = tmp_path / name
    copy.write_bytes(gzip.compress(_plain(mnist_dir, name), compresslevel=1))
    with pytest.raises(DataError, match=r"checksum mismatch: md5 [0-9a-f]{32}, expected .*no content checksum is known"):
        read_idx(copy, md5=official_md5)
    # with the content checksum the same copy passes
    sha = hashlib.sha256(_plain(mnist_dir, name)).hexdigest()
    np.testing.assert_array_equal(read_idx(copy, md5=official_md5, content_sha256=sha), read_idx(mnist_dir / name))
    assert IDX_DATASETS["kmnist"].splits["test"][0][0].content_sha256 is None


def test_truncated_recompressed_copy_reports_checksum_and_gzip(mnist_dir, tmp_path):
    name = TEST_FILES[1]
    blob = gzip.compress(_plain(mnist_dir, name), compresslevel=1)
    path = tmp_path / name
    path.write_bytes(blob[: len(blob) // 2])
    sha = hashlib.sha256(_plain(mnist_dir, name)).hexdigest()
    with pytest.raises(DataError, match=r"checksum mismatch: .*content cannot be decoded: corrupt or truncated gzip"):
        read_idx(path, md5="ec29112dd5afa0611ce80d1b7f02629c", content_sha256=sha)
