from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import shutil
import struct
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from activebayes.data import DataError, download_file, file_md5, load_dataset, parse_idx, read_idx

README_MD5 = {
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    "train-5k-images-idx3-ubyte.gz": "81edc6ee08338daf429913bd1a71a8ff",
    "train-5k-labels-idx1-ubyte.gz": "12a57e01969d72ff608d06fba11a36a0",
}
# the official MNIST test set's class histogram (LeCun et al.)
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def idx_bytes(array: np.ndarray, code: int = 0x08) -> bytes:
    """An independent IDX encoder (struct, big-endian) for the tests."""
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ----------------------------------------------------------------------------- real MNIST


def test_shared_mnist_checksums_match_readme(mnist_dir):
    for name, md5 in README_MD5.items():
        assert hashlib.md5((mnist_dir / name).read_bytes()).hexdigest() == md5
        assert file_md5(mnist_dir / name) == md5


def test_mnist_test_split_real_files(mnist_dir):
    ds = load_dataset("mnist", split="test", data_dir=mnist_dir)
    assert len(ds) == 10_000 and ds.input_shape == (1, 28, 28) and ds.inputs.dtype == torch.float32
    assert torch.bincount(ds.targets, minlength=10).tolist() == MNIST_TEST_COUNTS
    # pixels: undo the standardisation and compare with a plain gzip + frombuffer decode
    raw = np.frombuffer(gzip.decompress((mnist_dir / "t10k-images-idx3-ubyte.gz").read_bytes()), np.uint8, offset=16)
    raw = raw.reshape(10_000, 28, 28)
    mean, std = ds.normalization
    recovered = (ds.inputs[:, 0].double() * std + mean) * 255
    np.testing.assert_allclose(recovered.numpy(), raw, atol=1e-3)
    labels = np.frombuffer(gzip.decompress((mnist_dir / "t10k-labels-idx1-ubyte.gz").read_bytes()), np.uint8, offset=8)
    np.testing.assert_array_equal(ds.targets.numpy(), labels)
    # sanity of the data itself: 0..255 ink, mean near the usual 0.13
    assert raw.min() == 0 and raw.max() == 255 and abs(raw.mean() / 255 - 0.1325) < 0.005


def test_mnist_train_falls_back_to_5k_subset(mnist_dir, tmp_path):
    ds = load_dataset("mnist", split="train", data_dir=mnist_dir)
    assert len(ds) == 5_000 and ds.input_shape == (1, 28, 28)
    assert torch.bincount(ds.targets, minlength=10).tolist() == [500] * 10
    # the subset's pixels look like MNIST digits (ink fraction, range)
    mean, std = ds.normalization
    pixels = ds.inputs * std + mean
    assert float(pixels.min()) > -1e-5 and float(pixels.max()) < 1 + 1e-5
    assert 0.10 < float(pixels.mean()) < 0.16
    # the torchvision-style layout <data_dir>/mnist/ is found as well
    (tmp_path / "mnist").mkdir()
    for name in ("train-5k-images-idx3-ubyte.gz", "train-5k-labels-idx1-ubyte.gz"):
        shutil.copy(mnist_dir / name, tmp_path / "mnist" / name)
    again = load_dataset("mnist", data_dir=tmp_path)
    assert torch.equal(again.inputs, ds.inputs) and torch.equal(again.targets, ds.targets)


def test_missing_files_error_names_folder_and_files(tmp_path):
    with pytest.raises(DataError) as info:
        load_dataset("fashion_mnist", split="test", data_dir=tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message
    assert "t10k-images-idx3-ubyte.gz" in message and "t10k-labels-idx1-ubyte.gz" in message
    assert "download=True" in message
    with pytest.raises(DataError, match="train-5k-images-idx3-ubyte.gz"):
        load_dataset("mnist", split="train", data_dir=tmp_path)
    assert listing(tmp_path) == []


# ----------------------------------------------------------------------------- bad files


@pytest.fixture
def good_idx(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, size=(5, 3, 4), dtype=np.uint8)
    path = tmp_path / "imgs-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(idx_bytes(images)))
    return path, images


def test_read_idx_roundtrip_against_independent_encoder(good_idx, tmp_path):
    path, images = good_idx
    np.testing.assert_array_equal(read_idx(path, expected_ndim=3), images)
    values = np.array([[-1.5, 2.25], [3.0, 1e9]], dtype=np.float64)
    np.testing.assert_array_equal(parse_idx(idx_bytes(values, 0x0E)), values)
    shorts = np.array([-300, 7, 32000], dtype=np.int16)
    np.testing.assert_array_equal(parse_idx(idx_bytes(shorts, 0x0B)), shorts)
    plain = tmp_path / "plain-idx1-ubyte"
    plain.write_bytes(idx_bytes(np.arange(7, dtype=np.uint8)))
    assert read_idx(plain, expected_ndim=1).tolist() == list(range(7))


def test_truncated_gzip(good_idx):
    path, _ = good_idx
    path.write_bytes(path.read_bytes()[:-12])
    with pytest.raises(DataError, match="corrupt or truncated gzip"):
        read_idx(path)


def test_truncated_payload(tmp_path):
    path = tmp_path / "short.gz"
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 2, 2), np.uint8))[:-3]))
    with pytest.raises(DataError, match=r"truncated: header says shape \(4, 2, 2\)"):
        read_idx(path)
    path.write_bytes(gzip.compress(idx_bytes(np.zeros((4, 2, 2), np.uint8)) + b"xx"))
    with pytest.raises(DataError, match="trailing bytes"):
        read_idx(path)


def test_wrong_magic(tmp_path):
    path = tmp_path / "magic.gz"
    path.write_bytes(gzip.compress(b"\x00\x00\x07\x01" + b"\x00\x00\x00\x01" + b"\x05"))
    with pytest.raises(DataError, match="wrong magic number 0x00000701"):
        read_idx(path)
    path.write_bytes(gzip.compress(b"PK\x03\x04 a zip file, not idx"))
    with pytest.raises(DataError, match="wrong magic"):
        read_idx(path)


def test_wrong_dimensions(good_idx):
    path, _ = good_idx
    with pytest.raises(DataError, match=r"expected an IDX array with 1 dimension"):
        read_idx(path, expected_ndim=1)


def test_wrong_checksum_in_data_folder_is_a_clear_error(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    # valid IDX files, but not the official ones -> md5 mismatch, before decoding
    (folder / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros((2, 28, 28), np.uint8))))
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(np.zeros(2, np.uint8))))
    before = {p: p.read_bytes() for p in folder.iterdir()}
    with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte.gz: checksum mismatch: md5 [0-9a-f]{32}, expected 9fb629c4"):
        load_dataset("mnist", split="test", data_dir=folder)
    assert {p: p.read_bytes() for p in folder.iterdir()} == before  # nothing written or removed


def test_truncated_real_file_fails_checksum(mnist_dir, tmp_path):
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(mnist_dir / name, tmp_path / name)
    blob = (tmp_path / "t10k-images-idx3-ubyte.gz").read_bytes()
    (tmp_path / "t10k-images-idx3-ubyte.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataError, match="checksum mismatch"):
        load_dataset("mnist", split="test", data_dir=tmp_path)
    # without the checksum, the truncation itself is reported
    with pytest.raises(DataError, match="corrupt or truncated gzip"):
        read_idx(tmp_path / "t10k-images-idx3-ubyte.gz")
    assert listing(tmp_path) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]


# ----------------------------------------------------------------------------- downloads


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


@contextmanager
def local_server(folder: Path):
    """Serve ``folder`` on 127.0.0.1 (random port) from a thread; always shut down."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_download_from_local_server_verifies_and_loads(mnist_dir, tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(mnist_dir / name, served / name)
    data_dir = tmp_path / "data"
    with local_server(served) as url, local_server(tmp_path / "empty_mirror_does_not_exist") as dead:
        ds = load_dataset("mnist", split="test", data_dir=data_dir, download=True, mirrors=[dead, url])
    reference = load_dataset("mnist", split="test", data_dir=mnist_dir)
    assert torch.equal(ds.inputs, reference.inputs) and torch.equal(ds.targets, reference.targets)
    assert listing(data_dir) == ["mnist", "mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz"]
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        assert file_md5(data_dir / "mnist" / name) == README_MD5[name]


def test_download_with_wrong_checksum_writes_nothing(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    (served / "t10k-images-idx3-ubyte.gz").write_bytes(b"not the real file")
    (served / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not the real file either")
    data_dir = tmp_path / "data"
    with local_server(served) as url:
        with pytest.raises(DataError, match=r"t10k-images-idx3-ubyte.gz: checksum mismatch \(md5 [0-9a-f]{32}, expected 9fb629c4"):
            load_dataset("mnist", split="test", data_dir=data_dir, download=True, mirrors=[url])
    # no partial or temporary file left behind
    assert listing(data_dir) == ["mnist"]


def test_download_file_from_file_url_and_missing_url(tmp_path):
    payload = b"hello idx" * 1000
    source = tmp_path / "payload.bin"
    source.write_bytes(payload)
    destination = tmp_path / "out" / "payload.bin"
    md5 = hashlib.md5(payload).hexdigest()
    download_file([(tmp_path / "nope.bin").as_uri(), source.as_uri()], destination, md5=md5)
    assert destination.read_bytes() == payload
    # an existing good file is only replaced by a verified one
    with pytest.raises(DataError, match=r"nope.bin"):
        download_file((tmp_path / "nope.bin").as_uri(), destination, md5=md5)
    assert destination.read_bytes() == payload
    assert listing(tmp_path / "out") == ["payload.bin"]
