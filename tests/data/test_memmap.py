"""Out-of-core datasets: the memory-mapped format, its converter, lazy inputs, and the code that reads them.

The in-memory loaders are the references: for the same source, out-of-core and
in-memory datasets must give bitwise identical items, pools and predictions.
Pixel values and checksums are also checked against independent decoders
(gzip + np.frombuffer, hashlib).
"""

from __future__ import annotations

import doctest
import gzip
import importlib
import hashlib
import json
import math
import pickle
import re
import shutil
import warnings

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from activebayes.data import (
    ArrayDataset,
    DataError,
    LazyInputs,
    MemmapInputs,
    Pool,
    convert_to_memmap,
    from_arrays,
    image_folder,
    load_dataset,
    load_memmap,
    normalize_pixels,
    write_memmap,
)
from activebayes.models import MLP, predict_log_probs

MNIST_TEST = ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _leftovers(folder):
    """Temporary folders a failed conversion might have left behind."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize(
    "module",
    ["activebayes.data._core", "activebayes.data.lazy", "activebayes.data.memmap", "activebayes.data.convert",
     "activebayes.data.image_folder"],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_normalize_pixels_matches_numpy_and_leaves_its_input_alone():
    pixels = torch.arange(256, dtype=torch.uint8)
    expected = (pixels.numpy().astype(np.float32) / np.float32(255) - np.float32(0.1307)) / np.float32(0.3081)
    np.testing.assert_array_equal(normalize_pixels(pixels, (0.1307, 0.3081)).numpy(), expected)
    floats = torch.tensor([0.0, 255.0])
    assert normalize_pixels(floats, None).tolist() == [0.0, 1.0] and floats.tolist() == [0.0, 255.0]


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def mnist_test(mnist_dir):
    return load_dataset("mnist", split="test", data_dir=mnist_dir)


@pytest.fixture(scope="module")
def mnist_memmap(mnist_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("memmap") / "mnist" / "test"
    convert_to_memmap(mnist_dir, out, dataset="mnist", split="test", progress=False)
    return out


@pytest.fixture(scope="module")
def toy_pair(tmp_path_factory):
    """A 300-item labelled uint8 pool: (memmap dataset, the same data in memory)."""
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(300, 1, 6, 6), dtype=np.uint8)
    targets = np.repeat(np.arange(3), 100)
    rng.shuffle(targets)
    folder = tmp_path_factory.mktemp("toy") / "pool"
    write_memmap(folder, pixels, targets=targets, classes=["a", "b", "c"], name="toy",
                 normalization=(0.25, 0.5), progress=False)
    lazy = load_memmap(folder)
    inputs = ((torch.from_numpy(pixels).float() / 255.0) - 0.25) / 0.5
    memory = ArrayDataset(inputs=inputs, targets=torch.from_numpy(targets), classes=("a", "b", "c"), name="toy",
                          normalization=(0.25, 0.5))
    return lazy, memory, pixels


def _image_tree(root, *, labelled=True, n_per_class=6):
    from PIL import Image

    rng = np.random.default_rng(1)
    files = []
    for c, cls in enumerate(("cat", "dog")):
        folder = root / cls if labelled else root
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n_per_class):
            h, w = int(rng.integers(5, 20)), int(rng.integers(5, 20))
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            suffix = ".png" if i % 2 else ".bmp"
            path = folder / f"{cls}{i:02d}{suffix}"
            Image.fromarray(pixels).save(path)
            files.append(path)
    return files


# ----------------------------------------------------------------------------- IDX -> memmap


def test_mnist_round_trip_equals_in_memory_loader(mnist_dir, mnist_test, mnist_memmap):
    ds = load_memmap(mnist_memmap, verify=True)
    assert ds.is_lazy and isinstance(ds.inputs, MemmapInputs) and not mnist_test.is_lazy
    assert len(ds) == 10_000 and ds.input_shape == (1, 28, 28) and ds.inputs.shape == mnist_test.inputs.shape
    assert ds.name == "mnist" and ds.classes == mnist_test.classes and ds.normalization == (0.1307, 0.3081)
    assert torch.equal(ds.inputs[:], mnist_test.inputs)  # bitwise, after normalisation
    assert torch.equal(ds.targets, mnist_test.targets)
    # the stored pixels and checksum against an independent decoder of the official file
    raw = gzip.decompress((mnist_dir / MNIST_TEST[0]).read_bytes())[16:]
    assert (mnist_memmap / "inputs.npy").stat().st_size < len(raw) + 256  # uint8 on disk, not float32
    np.testing.assert_array_equal(np.load(mnist_memmap / "inputs.npy"), np.frombuffer(raw, np.uint8).reshape(-1, 28, 28))
    meta = json.loads((mnist_memmap / "meta.json").read_text())
    assert meta["inputs"]["sha256"] == hashlib.sha256(raw).hexdigest()
    assert meta["format"] == "activebayes-memmap" and meta["version"] == 1 and meta["n_items"] == 10_000
    assert meta["normalization"] == {"scale": 255.0, "mean": 0.1307, "std": 0.3081}


def test_load_dataset_memmap_split_layout(mnist_memmap, mnist_test):
    root = mnist_memmap.parent  # .../mnist/{test}
    test = load_dataset("memmap", data_dir=root, split="test")
    assert test.is_lazy and torch.equal(test.inputs[-5:], mnist_test.inputs[-5:])
    with pytest.raises(DataError, match=r"split 'train' not found: looked for .*train.meta\.json"):
        load_dataset("memmap", data_dir=root, split="train")
    # a single dataset folder is the train split
    assert len(load_dataset("memmap", data_dir=mnist_memmap, split="train")) == 10_000
    # a folder without a test split says how to make one, or to run without it
    with pytest.raises(DataError, match=r"split 'test' not found.*`activebayes convert SOURCE .*test --split test`.*"
                                        r"--no-test"):
        load_dataset("memmap", data_dir=mnist_memmap, split="test")
    with pytest.raises(DataError, match="needs data_dir"):
        load_dataset("memmap")


def test_idx_file_conversion_finds_labels_and_scales(mnist_dir, tmp_path):
    out = convert_to_memmap(mnist_dir / MNIST_TEST[0], tmp_path / "raw", standardize=False, progress=False)
    ds = load_memmap(out)
    raw = np.frombuffer(gzip.decompress((mnist_dir / MNIST_TEST[0]).read_bytes()), np.uint8, offset=16)
    expected = raw.reshape(-1, 1, 28, 28).astype(np.float32) / np.float32(255)
    np.testing.assert_array_equal(ds.inputs[[0, 9_999, 17]].numpy(), expected[[0, 9_999, 17]])
    labels = np.frombuffer(gzip.decompress((mnist_dir / MNIST_TEST[1]).read_bytes()), np.uint8, offset=8)
    np.testing.assert_array_equal(ds.targets.numpy(), labels)
    assert ds.name == "t10k-images" and ds.classes == tuple(str(c) for c in range(10)) and ds.normalization is None


def test_recompressed_copy_converts_and_changed_pixel_is_rejected(mnist_dir, mnist_test, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    content = bytearray(gzip.decompress((mnist_dir / MNIST_TEST[0]).read_bytes()))
    (src / MNIST_TEST[0]).write_bytes(gzip.compress(bytes(content), compresslevel=1))
    shutil.copy(mnist_dir / MNIST_TEST[1], src / MNIST_TEST[1])
    out = convert_to_memmap(src, tmp_path / "ok", dataset="mnist", split="test", progress=False)
    assert torch.equal(load_memmap(out).inputs[:100], mnist_test.inputs[:100])

    content[16 + 123 * 784 + 400] ^= 0x01  # one pixel of image 123
    (src / MNIST_TEST[0]).write_bytes(gzip.compress(bytes(content), compresslevel=1))
    with pytest.raises(DataError) as info:
        convert_to_memmap(src, tmp_path / "bad", dataset="mnist", split="test", chunk_size=500, progress=False)
    message = str(info.value)
    assert message.startswith(f"{src / MNIST_TEST[0]}: checksum mismatch")
    assert f"uncompressed content sha256 {hashlib.sha256(bytes(content)).hexdigest()}, expected 0fa7898d" in message
    assert not (tmp_path / "bad").exists() and _leftovers(tmp_path) == []


# ----------------------------------------------------------------------------- image folders


@pytest.mark.parametrize("grayscale", [True, False])
def test_image_folder_converted_lazy_and_in_memory_are_identical(tmp_path, grayscale):
    files = _image_tree(tmp_path / "images")
    memory = image_folder(tmp_path / "images", size=(7, 9), grayscale=grayscale)
    lazy = image_folder(tmp_path / "images", size=(7, 9), grayscale=grayscale, lazy=True)
    out = convert_to_memmap(tmp_path / "images", tmp_path / "pool", size=(7, 9), grayscale=grayscale,
                            chunk_size=5, progress=False)
    converted = load_memmap(out, verify=True)
    for ds in (lazy, converted):
        assert ds.is_lazy and ds.inputs.shape == memory.inputs.shape == (12, 1 if grayscale else 3, 7, 9)
        assert torch.equal(ds.inputs[:], memory.inputs)
        assert torch.equal(ds.targets, memory.targets) and ds.classes == memory.classes == ("cat", "dog")
        assert ds.paths == memory.paths and ds.normalization == memory.normalization
    assert memory.paths == tuple(str(f.resolve()) for f in files)
    # the normalisation: the exact mean / population std of the resized pixels (independent decode, float64)
    from PIL import Image

    mode = "L" if grayscale else "RGB"
    pixels = np.stack([np.asarray(Image.open(f).convert(mode).resize((9, 7), Image.Resampling.BILINEAR)) for f in files])
    mean, std = memory.normalization
    assert mean == pytest.approx(pixels.mean() / 255, rel=1e-12) and std == pytest.approx(pixels.std() / 255, rel=1e-12)
    # chunking does not change what is written
    again = convert_to_memmap(tmp_path / "images", tmp_path / "pool2", size=(7, 9), grayscale=grayscale,
                              chunk_size=1024, progress=False)
    assert json.loads((again / "meta.json").read_text())["inputs"] == json.loads((out / "meta.json").read_text())["inputs"]


def test_flat_image_folder_unlabelled_with_given_normalization(tmp_path):
    _image_tree(tmp_path / "flat", labelled=False, n_per_class=3)
    out = convert_to_memmap(tmp_path / "flat", tmp_path / "pool", size=(4, 4), classes=["x", "y"],
                            normalization=(0.5, 0.2), progress=False)
    ds = load_memmap(out)
    reference = image_folder(tmp_path / "flat", size=(4, 4), classes=["x", "y"], normalization=(0.5, 0.2))
    assert ds.targets is None and ds.classes == ("x", "y") and ds.normalization == (0.5, 0.2)
    assert torch.equal(ds.inputs[:], reference.inputs)


def test_lazy_image_folder_pickles_without_pixels_and_reads_in_workers(tmp_path):
    _image_tree(tmp_path / "images")
    ds = image_folder(tmp_path / "images", size=(16, 16), lazy=True)
    blob = pickle.dumps(ds.inputs)
    assert len(blob) < 4_000  # paths and options, not 12 x 256 floats of pixels
    assert torch.equal(pickle.loads(blob)[:], ds.inputs[:])
    sampler = BatchSampler(SequentialSampler(range(len(ds))), batch_size=5, drop_last=False)
    loader = DataLoader(ds.inputs, batch_size=None, sampler=sampler, num_workers=1)
    assert torch.equal(torch.cat(list(loader)), ds.inputs[:])


def test_lazy_image_folder_reports_a_broken_file_when_read(tmp_path):
    _image_tree(tmp_path / "images")
    ds = image_folder(tmp_path / "images", size=(8, 8), normalization=(0.5, 0.5), lazy=True)  # no decoding yet
    broken = tmp_path / "images" / "dog" / "dog03.png"
    broken.write_bytes(b"\x89PNG truncated")
    assert ds.inputs[:2].shape == (2, 1, 8, 8)  # other rows still read
    with pytest.raises(DataError, match=rf"{broken}: cannot read image"):
        ds.inputs[9]


def test_failed_conversion_leaves_nothing(tmp_path):
    _image_tree(tmp_path / "images")
    (tmp_path / "images" / "dog" / "dog05.png").write_bytes(b"not an image")
    with pytest.raises(DataError, match=r"dog05\.png: cannot read image"):
        convert_to_memmap(tmp_path / "images", tmp_path / "pool", chunk_size=4, progress=False)
    assert not (tmp_path / "pool").exists() and _leftovers(tmp_path) == []


def test_destination_rules(tmp_path, toy_pair):
    _image_tree(tmp_path / "images", n_per_class=2)
    out = convert_to_memmap(tmp_path / "images", tmp_path / "pool", size=(4, 4), progress=False)
    with pytest.raises(DataError, match="already exists; pass overwrite=True"):
        convert_to_memmap(tmp_path / "images", out, size=(4, 4), progress=False)
    convert_to_memmap(tmp_path / "images", out, size=(5, 5), overwrite=True, progress=False)
    assert load_memmap(out).input_shape == (1, 5, 5) and _leftovers(tmp_path) == []
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(DataError, match="is not a memmap dataset folder .* refusing to replace it"):
        convert_to_memmap(tmp_path / "images", precious, overwrite=True, progress=False)
    assert (precious / "thesis.tex").read_text() == "do not delete"


def test_writer_refuses_a_scale_that_load_memmap_would_refuse(tmp_path, toy_pair):
    """finish(scale=inf) wrote a meta.json whose pool is a constant (and that load_memmap now refuses)."""
    from activebayes.data.memmap import MemmapWriter

    _, _, pixels = toy_pair
    for scale in (math.inf, math.nan, 0.0, -1.0, True):
        with MemmapWriter(tmp_path / "pool", n_items=300, item_shape=pixels.shape[1:]) as writer:
            writer.write(pixels)
            with pytest.raises(ValueError, match=rf"scale must be a finite number > 0, got {scale!r}"):
                writer.finish(name="toy", classes=(), scale=scale)
    assert not (tmp_path / "pool").exists() and _leftovers(tmp_path) == []


def test_a_folder_that_is_not_a_memmap_folder_is_never_advised_overwrite(tmp_path, toy_pair):
    """Without overwrite, such a folder was told "pass overwrite=True", which was then refused."""
    _, _, pixels = toy_pair
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    (tmp_path / "notes.txt").write_text("a file")
    for destination, what in ((precious, "a folder"), (tmp_path / "notes.txt", "a file")):
        for overwrite in (False, True):
            with pytest.raises(DataError) as caught:
                write_memmap(destination, pixels, overwrite=overwrite, progress=False)
            message = str(caught.value)
            assert "pass overwrite=True" not in message
            assert message.startswith(f"{destination} exists and is not a memmap dataset folder ({what}, no meta.json")
            assert "even with overwrite=True: choose another destination, or remove it yourself" in message
    assert (precious / "thesis.tex").read_text() == "do not delete" and (tmp_path / "notes.txt").read_text() == "a file"
    assert _leftovers(tmp_path) == []
    # a folder whose meta.json is damaged is named as such ("no meta.json" sent the user looking for a missing file)
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "meta.json").write_text('{"format": ')
    with pytest.raises(DataError, match=rf"^{re.escape(str(damaged))} exists and is not a memmap dataset folder \(a "
                                        r"folder whose meta.json is damaged or not of format '.*'\); refusing"):
        write_memmap(damaged, pixels, overwrite=True, progress=False)


# ----------------------------------------------------------------------------- lazy inputs behave like the tensor


def test_indexing_matches_the_in_memory_tensor(toy_pair):
    lazy, memory, _ = toy_pair
    x, t = lazy.inputs, memory.inputs
    assert isinstance(x, LazyInputs) and len(x) == len(t) and x.shape == t.shape and x.dtype == t.dtype
    assert x.ndim == t.ndim and x.size(0) == t.size(0)
    keys = [
        0, -1, 299, np.int64(7), torch.tensor(3),
        slice(None), slice(10, 20), slice(5, 250, 7), slice(-3, None), slice(20, 10),
        torch.tensor([5, 3, 3, 299, 0]), np.array([17, 2]), [4, 4, 1], torch.tensor([], dtype=torch.long),
        torch.tensor([-1, -300]), torch.arange(300) % 3 == 0, torch.tensor([[1, 2], [3, 4]]),
        (torch.tensor([8, 9]), 0), (slice(1, 4), 0, slice(None), 2), (5, 0, 1),
    ]
    for key in keys:
        assert torch.equal(x[key], t[key]), key
    for bad in (300, -301, torch.tensor([0, 300]), [1, -301]):
        with pytest.raises(IndexError, match="out of bounds"):
            x[bad]
    with pytest.raises(TypeError, match="indexed with an int, a slice"):
        x[1.5]
    with pytest.raises(IndexError, match="index 300 is out of bounds"):
        x.rows([0, 300])
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        x.rows([0, 1]).rows([2])
    assert torch.equal(x.rows([-1, 0]).rows([-1])[:], t[[0]])
    with pytest.raises(IndexError, match=r"boolean mask must have shape \[N\] = \[300\]"):
        x[torch.ones(5, dtype=torch.bool)]


def test_views_chunks_subset_and_pickle(toy_pair):
    lazy, memory, _ = toy_pair
    index = torch.tensor([299, 0, 150, 151, 152, 7])
    view = lazy.rows(index)
    assert isinstance(view, LazyInputs) and torch.equal(view[:], memory.inputs[index])
    assert torch.equal(view.rows([5, 0])[:], memory.inputs[index[[5, 0]]])
    assert torch.equal(view[2:5], memory.inputs[150:153]) and torch.equal(view[-1], memory.inputs[7])
    assert torch.equal(torch.cat(list(lazy.inputs.iter_chunks(64))), memory.inputs)
    sub = lazy.subset(index)
    assert sub.is_lazy and torch.equal(sub.inputs[:], memory.subset(index).inputs)
    assert torch.equal(sub.targets, memory.targets[index])
    assert torch.equal(lazy.rows(index)[:], memory.rows(index))
    blob = pickle.dumps(lazy)
    assert len(blob) < 10_000  # the file name and N labels, not the 300 x 36 pixels as floats
    assert torch.equal(pickle.loads(blob).inputs[:], memory.inputs)
    assert torch.equal(pickle.loads(pickle.dumps(view))[:], view[:])


def test_write_memmap_from_chunks_equals_from_array(tmp_path, toy_pair):
    _, memory, pixels = toy_pair
    a = write_memmap(tmp_path / "a", pixels, progress=False)
    b = write_memmap(tmp_path / "b", (pixels[i : i + 7] for i in range(0, 300, 7)), n_items=300, progress=False)
    assert (a / "meta.json").read_text().replace('"a"', '"b"') == (b / "meta.json").read_text()
    ds = load_memmap(b, verify=True)
    mean, std = ds.normalization  # "standardize": the exact statistics of the pixels written
    assert mean == pytest.approx(pixels.mean() / 255, rel=1e-12) and std == pytest.approx(pixels.std() / 255, rel=1e-12)
    assert ds.targets is None and ds.classes == ()


def test_write_memmap_takes_tensors_and_checks_chunk_items_targets_and_layout(tmp_path, toy_pair):
    _, _, pixels = toy_pair
    from_array = load_memmap(write_memmap(tmp_path / "a", pixels, progress=False))
    # a tensor is one array (it was iterated row by row: "item_shape must be (C, H, W) ..., got (6,)")
    from_tensor = load_memmap(write_memmap(tmp_path / "t", torch.from_numpy(pixels), progress=False))
    assert torch.equal(from_tensor.inputs[torch.arange(300)], from_array.inputs[torch.arange(300)])
    chunks = (torch.from_numpy(pixels[i : i + 50]) for i in range(0, 300, 50))
    from_chunks = load_memmap(write_memmap(tmp_path / "c", chunks, n_items=300, progress=False))
    assert torch.equal(from_chunks.inputs[torch.arange(300)], from_array.inputs[torch.arange(300)])
    for bad in (0, -1, 2.5, True):  # 0 was range()'s "arg 3 must not be zero", -1 "0 rows were written"
        with pytest.raises((ValueError, TypeError), match=rf"chunk_items must be an int >= 1, got {bad!r}"):
            write_memmap(tmp_path / "bad", pixels, chunk_items=bad, progress=False)
    # -1 as "unlabelled" was "targets must lie in 0 .. -1 (0 classes)", after every pixel was written
    targets = np.zeros(300, dtype=np.int64)
    targets[7] = -1
    with pytest.raises(ValueError, match=r"targets must be class ids >= 0, got -1 at item 7 .* targets=None"):
        write_memmap(tmp_path / "neg", pixels, targets=targets, progress=False)
    assert not (tmp_path / "neg").exists() and not (tmp_path / "bad").exists()
    # a wrong number of targets (or paths) was caught by finish(), after every pixel was written
    consumed = []

    def chunks():
        for i in range(0, 300, 50):
            consumed.append(i)
            yield pixels[i : i + 50]

    with pytest.raises(ValueError, match=r"targets must have shape \[N\] = \[300\] \(one label per item\), got \(299,\)"):
        write_memmap(tmp_path / "short", chunks(), n_items=300, targets=np.zeros(299, np.int64), progress=False)
    assert consumed == [0]  # only the first chunk, read for the item shape; nothing written
    with pytest.raises(ValueError, match=r"targets must have shape \[N\] = \[300\] \(one label per item\), got \(301,\)"):
        write_memmap(tmp_path / "short", pixels, targets=np.zeros(301, np.int64), progress=False)
    with pytest.raises(ValueError, match=r"paths must have one entry per item \(300\), got 2"):
        write_memmap(tmp_path / "short", chunks(), n_items=300, paths=["a", "b"], progress=False)
    assert consumed == [0, 0] and not (tmp_path / "short").exists() and _leftovers(tmp_path) == []
    # PIL / NumPy images are [N, H, W, 3]: they would be read as 6 channels of 6 x 3 images
    hwc = np.ascontiguousarray(np.broadcast_to(pixels.transpose(0, 2, 3, 1), (300, 6, 6, 3)))
    with pytest.warns(UserWarning, match=r"look channels-last .* pixels\.transpose\(0, 3, 1, 2\)"):
        write_memmap(tmp_path / "hwc", hwc, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_memmap(tmp_path / "chw", np.ascontiguousarray(hwc.transpose(0, 3, 1, 2)), progress=False)


def test_a_relative_path_is_opened_by_its_absolute_path(tmp_path, toy_pair, monkeypatch):
    """Ray actors started elsewhere (``ray start``) open the folder by the path the dataset carries."""
    _, _, pixels = toy_pair
    write_memmap(tmp_path / "pool", pixels, progress=False)
    monkeypatch.chdir(tmp_path)
    ds = load_memmap("pool")
    monkeypatch.chdir("/")
    moved = pickle.loads(pickle.dumps(ds))  # what a worker in another folder receives
    assert torch.equal(moved.inputs[torch.arange(300)], ds.inputs[torch.arange(300)])


# ----------------------------------------------------------------------------- the pool and the model


def test_pool_over_memmap_behaves_as_over_memory(toy_pair):
    lazy, memory, _ = toy_pair
    pools = [Pool.create(ds, validation_size=30, initial_size=9, seed=3) for ds in (lazy, memory)]
    for pool in pools:
        picked = pool.take([0, 5, 10])
        pool.label(picked)
        pool.append(pool.take([1]), [2])
        pool.delete([2, 3])
        pool.check_invariants()
    a, b = pools
    assert a.state_dict() | {"dataset": None} == b.state_dict() | {"dataset": None}
    for x, y in ((a.labelled_data(), b.labelled_data()), (a.validation_data(), b.validation_data())):
        assert torch.equal(x[0], y[0]) and torch.equal(x[1], y[1])
    assert torch.equal(a.unlabelled_inputs(), b.unlabelled_inputs())
    resumed = Pool.from_state_dict(lazy, a.state_dict())
    assert torch.equal(resumed.labelled_indices, a.labelled_indices)


@pytest.mark.parametrize("sampling", ["batched", "sequential"])
def test_predict_log_probs_over_lazy_inputs_equals_in_memory(toy_pair, sampling):
    lazy, memory, _ = toy_pair
    net = MLP(in_features=36, num_classes=3, hidden=(16,))
    for lazy_inputs, tensor_inputs in (
        (lazy.inputs, memory.inputs),
        (lazy.rows(torch.arange(0, 300, 2)), memory.rows(torch.arange(0, 300, 2))),
        ((lazy.inputs, lazy.targets), (memory.inputs, memory.targets)),
    ):
        expected = predict_log_probs(net, tensor_inputs, 5, batch_size=32, generator=0, sampling=sampling)
        got = predict_log_probs(net, lazy_inputs, 5, batch_size=32, generator=0, sampling=sampling)
        assert torch.equal(got, expected)


def test_predict_on_real_mnist_memmap_equals_in_memory(mnist_memmap, mnist_test):
    ds = load_memmap(mnist_memmap)
    net = MLP(in_features=784, num_classes=10, hidden=(32,))
    rows = torch.arange(1, 10_000, 3)
    expected = predict_log_probs(net, mnist_test.inputs[rows], 4, batch_size=500, generator=1)
    assert torch.equal(predict_log_probs(net, ds.rows(rows), 4, batch_size=500, generator=1), expected)


# ----------------------------------------------------------------------------- corrupt / missing files


@pytest.fixture
def toy_folder(tmp_path, toy_pair):
    _, _, pixels = toy_pair
    folder = write_memmap(tmp_path / "pool", pixels, targets=np.arange(300) % 3, progress=False)
    return folder


def _edit_meta(folder, **changes):
    meta = json.loads((folder / "meta.json").read_text())
    for key, value in changes.items():
        target = meta
        *parents, leaf = key.split("__")
        for parent in parents:
            target = target[parent]
        if value is ...:
            del target[leaf]
        else:
            target[leaf] = value
    (folder / "meta.json").write_text(json.dumps(meta))


def test_missing_folder_and_meta(tmp_path, toy_folder):
    with pytest.raises(DataError, match=r"nowhere.meta\.json: file not found: the memmap dataset folder .* does not exist"):
        load_memmap(tmp_path / "nowhere")
    (toy_folder / "meta.json").unlink()
    with pytest.raises(DataError, match=r"meta\.json: file not found: .* has no meta.json \(expected meta\.json, inputs\.npy"):
        load_memmap(toy_folder)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"format": "hdf5"}, r"meta\.json: format 'hdf5', expected 'activebayes-memmap'"),
        ({"version": 7}, r"meta\.json: version 7 is not supported"),
        ({"name": ...}, r"meta\.json: missing field 'name'"),
        ({"n_items": "300"}, r"meta\.json: field 'n_items' must be an int, got '300'"),
        ({"inputs__shape": [300, 6, 6]}, r"inputs\.npy: shape \(300, 1, 6, 6\), but meta\.json says \(300, 6, 6\)"),
        ({"inputs__shape": [299, 1, 6, 6]}, r"'inputs\.shape' must be \[N, C, H, W\] or \[N, H, W\] with N = n_items = 300"),
        ({"targets__dtype": "float32"}, r"'targets\.dtype' must be one of \('uint8', 'int64'\), got 'float32'"),
        ({"normalization__std": 0}, r"normalization std must be > 0, got 0"),
        ({"classes": ["a", "b"]}, r"targets\.npy: labels must lie in 0 \.\. 1 \(2 classes\), got values from 0 to 2"),
        # was InvalidArgumentError "classes must be unique" from ArrayDataset, naming neither file nor name
        ({"classes": ["a", "b", "a"]}, r"meta\.json: field 'classes' must hold unique names, got 'a' more than once"),
        # inf was accepted: every input (pixels / inf - mean) / std, a constant pool
        ({"normalization__scale": float("inf")},
         r"meta\.json: field 'normalization\.scale' must be a finite number > 0, got inf"),
        ({"normalization__scale": float("nan")},
         r"meta\.json: field 'normalization\.scale' must be a finite number > 0, got nan"),
        ({"normalization__scale": 0}, r"meta\.json: field 'normalization\.scale' must be a finite number > 0, got 0"),
        # the files' own fields were never read: a meta.json of other files passed as this folder's
        ({"inputs__dtype": "float32"}, r"meta\.json: field 'inputs\.dtype' is 'float32', but .*inputs\.npy holds uint8"),
        ({"inputs__file": "pixels.npy"},
         r"meta\.json: field 'inputs\.file' is 'pixels\.npy', but the inputs are read from .*pool/inputs\.npy"),
        ({"inputs__dtype": ...}, r"meta\.json: missing field 'inputs\.dtype'"),
        ({"targets__file": "labels.npy"},
         r"meta\.json: field 'targets\.file' is 'labels\.npy', but the targets are read from .*pool/targets\.npy"),
    ],
)
def test_bad_meta_is_named(toy_folder, change, match):
    _edit_meta(toy_folder, **change)
    with pytest.raises(DataError, match=match):
        load_memmap(toy_folder)


def test_bad_json(toy_folder):
    (toy_folder / "meta.json").write_text("{not json")
    with pytest.raises(DataError, match=r"meta\.json: not valid JSON"):
        load_memmap(toy_folder)


def test_a_truncated_meta_json_is_named_as_damaged_not_missing(toy_folder, tmp_path):
    """load_dataset("memmap") (``run --dataset memmap --data-dir``) said a folder whose meta.json was
    cut short was not found ("memmap dataset split 'train' not found: looked for .../meta.json")."""
    meta = toy_folder / "meta.json"
    meta.write_text(meta.read_text()[:50])
    with pytest.raises(DataError, match=rf"^{re.escape(str(meta))}: not valid JSON \("):
        load_dataset("memmap", data_dir=str(toy_folder), split="train")
    split = tmp_path / "splits"
    split.mkdir()
    shutil.move(toy_folder, split / "test")  # the layout of a folder per split
    with pytest.raises(DataError, match=rf"^{re.escape(str(split / 'test' / 'meta.json'))}: not valid JSON \("):
        load_dataset("memmap", data_dir=str(split), split="test")
    (split / "test" / "meta.json").write_text("[1, 2]")  # JSON, but not a memmap folder's
    with pytest.raises(DataError, match=r"meta\.json: expected a JSON object, got list"):
        load_dataset("memmap", data_dir=str(split), split="test")


def test_missing_truncated_or_wrong_inputs(toy_folder):
    inputs = toy_folder / "inputs.npy"
    blob = inputs.read_bytes()
    inputs.write_bytes(blob[: len(blob) - 100])
    with pytest.raises(DataError, match=rf"{inputs}: not a readable \.npy array .* holds {len(blob) - 100} bytes: truncated"):
        load_memmap(toy_folder)
    np.save(inputs, np.zeros((300, 1, 6, 6), np.float32))
    with pytest.raises(DataError, match=rf"{inputs}: expected uint8 pixels, got dtype float32"):
        load_memmap(toy_folder)
    inputs.write_bytes(b"")  # what an interrupted copy leaves (it was a bare EOFError)
    with pytest.raises(DataError, match=rf"{inputs}: not a readable \.npy array .* holds 0 bytes: truncated"):
        load_memmap(toy_folder)
    inputs.unlink()
    with pytest.raises(DataError, match=rf"{inputs}: file not found \(expected a uint8 \.npy array"):
        load_memmap(toy_folder)


def test_changed_byte_is_caught_by_verify(toy_folder):
    inputs = toy_folder / "inputs.npy"
    blob = bytearray(inputs.read_bytes())
    blob[-1] ^= 0xFF
    inputs.write_bytes(bytes(blob))
    assert len(load_memmap(toy_folder)) == 300  # the structure is fine; only the content changed
    with pytest.raises(DataError, match=rf"{inputs}: content checksum mismatch: sha256 [0-9a-f]{{64}}, expected [0-9a-f]{{64}}"):
        load_memmap(toy_folder, verify=True)


def test_bytes_after_the_array_are_caught(toy_folder):
    """NumPy maps the bytes an .npy header names and ignores the rest, so bytes appended to a
    file passed even ``verify`` (its checksum is of the array's content)."""
    for name in ("inputs.npy", "targets.npy"):
        path = toy_folder / name
        blob = path.read_bytes()
        path.write_bytes(blob + b"\x00" * 7)
        with pytest.raises(DataError, match=rf"{path}: the file holds {len(blob) + 7} bytes, but its header "
                                            rf"describes {len(blob)} \(7 bytes after the array"):
            load_memmap(toy_folder, verify=True)
        path.write_bytes(blob)
    assert len(load_memmap(toy_folder, verify=True)) == 300


def test_missing_or_wrong_targets_and_paths(toy_folder, toy_pair):
    targets = toy_folder / "targets.npy"
    np.save(targets, np.zeros(299, np.uint8))
    with pytest.raises(DataError, match=rf"{targets}: expected uint8 labels of shape \(300,\), got uint8 of shape \(299,\)"):
        load_memmap(toy_folder)
    targets.unlink()
    with pytest.raises(DataError, match=rf"{targets}: file not found \(meta\.json says the dataset has targets\)"):
        load_memmap(toy_folder)
    _, _, pixels = toy_pair
    with_paths = write_memmap(toy_folder.parent / "paths", pixels, paths=[f"img{i}.png" for i in range(300)],
                              progress=False)
    assert load_memmap(with_paths).paths[299] == "img299.png"
    (with_paths / "paths.txt").write_text("only\ntwo\n")
    with pytest.raises(DataError, match=r"paths\.txt: expected 300 lines \(one path per item\), got 2"):
        load_memmap(with_paths)
    with pytest.raises(DataError, match=r"paths\.txt: content checksum mismatch"):
        load_memmap(with_paths, verify=True)


def test_array_dataset_accepts_only_float_lazy_inputs(toy_pair):
    lazy, _, _ = toy_pair
    with pytest.raises(TypeError, match="inputs must be a torch.Tensor or LazyInputs, got ndarray"):
        ArrayDataset(inputs=np.zeros((2, 2)), targets=None, classes=(), name="x")
    with pytest.raises(ValueError, match=r"targets must have shape \[N\] = \[300\]"):
        ArrayDataset(inputs=lazy.inputs, targets=torch.zeros(3, dtype=torch.long), classes=("a",), name="x")
    assert not from_arrays(np.zeros((2, 2))).is_lazy


def test_convert_names_arrays_and_points_to_write_memmap(tmp_path):
    for source in (np.zeros((5, 28, 28), np.uint8), torch.zeros(5, 28, 28)):
        with pytest.raises(TypeError, match=r"source must be a path .* got (ndarray|Tensor); .*write_memmap"):
            convert_to_memmap(source, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_write_memmap_names_arguments_given_in_the_wrong_order(tmp_path):
    """write_memmap(pixels, destination) was torch's or os.fspath's TypeError traceback, and a path as
    pixels was read as an iterable of chunks ("n_items is required")."""
    from activebayes.errors import InvalidTypeError

    pixels = np.zeros((3, 5, 5), dtype=np.uint8)
    with pytest.raises(InvalidTypeError, match=r"^destination must be a folder path, got ndarray; the order is "
                                               r"write_memmap\(destination, pixels, \.\.\.\)$"):
        write_memmap(pixels, tmp_path / "out")
    with pytest.raises(InvalidTypeError, match=r"^destination must be a folder path, got int$"):
        write_memmap(5, pixels)
    with pytest.raises(InvalidTypeError, match=r"^pixels must be a uint8 array or an iterable of such chunks, got a "
                                               r"path '.*images'; the order is write_memmap\(destination, pixels"):
        write_memmap(tmp_path / "out", str(tmp_path / "images"))
    assert not (tmp_path / "out").exists()
    write_memmap(tmp_path / "out", pixels)  # the right order
    assert len(load_memmap(tmp_path / "out")) == 3
