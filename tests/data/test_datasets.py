from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest
import torch

from activebayes.data import (
    ArrayDataset,
    DataError,
    available_datasets,
    digits_split_indices,
    from_arrays,
    image_folder,
    load_dataset,
)


@pytest.mark.parametrize(
    "module",
    ["activebayes._io", "activebayes.data.dataset", "activebayes.data.idx", "activebayes.data.datasets",
     "activebayes.data.pool", "activebayes.oracles.base", "activebayes.labelling.interchange"],
)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_available_datasets():
    assert set(available_datasets()) == {"digits", "mnist", "fashion_mnist", "kmnist", "memmap", "repeated_mnist",
                                        "wordnet_nouns", "breast_cancer", "wine", "iris", "mnist_pairs", "rand_hie"}


def test_unknown_dataset_and_split():
    with pytest.raises(ValueError, match="unknown dataset 'cifar'"):
        load_dataset("cifar")
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        load_dataset("digits", split="valid")


# ----------------------------------------------------------------------------- digits


def test_digits_equals_sklearn_load_digits():
    from sklearn.datasets import load_digits

    reference = load_digits()
    train_idx, test_idx = digits_split_indices(reference.target)
    for split, rows in (("train", train_idx), ("test", test_idx)):
        ds = load_dataset("digits", split=split)
        assert ds.inputs.dtype == torch.float32 and ds.inputs.shape == (len(rows), 1, 8, 8)
        mean, std = ds.normalization
        pixels = (ds.inputs.double() * std + mean) * 16
        np.testing.assert_allclose(pixels[:, 0].numpy(), reference.images[rows], atol=1e-4)
        np.testing.assert_array_equal(ds.targets.numpy(), reference.target[rows])
        assert ds.classes == tuple(str(c) for c in range(10))


def test_digits_split_is_fixed_stratified_and_complete():
    from sklearn.datasets import load_digits

    targets = load_digits().target
    train_idx, test_idx = digits_split_indices(targets)
    assert len(train_idx) == 1297 and len(test_idx) == 500
    np.testing.assert_array_equal(np.sort(np.concatenate([train_idx, test_idx])), np.arange(1797))
    # stratified: each class gets its share of the 500 test items up to rounding
    share = np.bincount(targets, minlength=10) * 500 / 1797
    assert np.all(np.abs(np.bincount(targets[test_idx], minlength=10) - share) < 1)
    # deterministic and standardised on the train split
    again, _ = digits_split_indices(targets)
    np.testing.assert_array_equal(train_idx, again)
    train = load_dataset("digits")
    assert abs(float(train.inputs.mean())) < 1e-4 and abs(float(train.inputs.std()) - 1) < 1e-3


# ----------------------------------------------------------------------------- ArrayDataset / from_arrays


def test_from_arrays_numpy_and_subset():
    x = np.arange(24, dtype=np.int64).reshape(6, 4)
    y = np.array([0, 1, 2, 0, 1, 2])
    ds = from_arrays(x, y, name="toy")
    assert ds.inputs.dtype == torch.float32 and ds.targets.dtype == torch.long
    assert ds.classes == ("0", "1", "2") and ds.num_classes == 3 and ds.input_shape == (4,)
    sub = ds.subset([5, 0])
    np.testing.assert_array_equal(sub.inputs.numpy(), x[[5, 0]].astype(np.float32))
    assert sub.targets.tolist() == [2, 0] and len(sub) == 2 and sub.name == "toy"


def test_from_arrays_unlabelled_with_classes():
    ds = from_arrays(torch.randn(5, 3), classes=["cat", "dog"])
    assert ds.targets is None and ds.classes == ("cat", "dog") and not ds.is_labelled


@pytest.mark.parametrize(
    ("inputs", "targets", "error", "match"),
    [
        (np.zeros((3, 2)), np.array([0, 1]), ValueError, r"targets must have shape \[N\] = \[3\]"),
        (np.zeros((3, 2)), np.zeros((3, 2, 2)), ValueError, r"targets must have shape \[N\] = \[3\] \(class ids\) or "
                                                            r"\[N, C\] \(multi-label 0/1 indicators\)"),
        (np.zeros((3, 2)), np.array([0, -1, 1]), ValueError, "targets must be >= 0"),
        (np.zeros((3, 2)), np.array([0.5, 1, 1]), TypeError, "integer class ids"),
        (np.array([[np.nan, 1.0]]), None, ValueError, "NaN or inf"),
        ("not an array", None, TypeError, "inputs must be a NumPy array or torch.Tensor"),
        (np.zeros((2, 2), dtype=bool), None, TypeError, "real numbers"),
    ],
)
def test_from_arrays_rejects_bad_input(inputs, targets, error, match):
    with pytest.raises(error, match=match):
        from_arrays(inputs, targets)


def test_from_arrays_refuses_labels_counted_from_one_unless_classes_name_class_zero():
    """Iris-style labels 1..3 made classes ('0', '1', '2', '3') with an empty class 0, and the loop
    failed later with "initial='balanced' needs 2 item(s) of class '0'"."""
    with pytest.raises(ValueError, match=r"^targets hold class ids 1 \.\. 3 and no 0: class ids count from 0, so class "
                                         r"0 would have no item \(subtract 1\), or give classes= naming all 4, 0 "
                                         r"included$"):
        from_arrays(np.zeros((3, 2)), [1, 2, 3])
    assert from_arrays(np.zeros((3, 2)), [0, 1, 2]).num_classes == 3
    named = from_arrays(np.zeros((3, 2)), [1, 2, 3], classes=["none", "a", "b", "c"])  # class 0 named: meant
    assert named.num_classes == 4 and named.targets.tolist() == [1, 2, 3]


def test_from_arrays_takes_multilabel_indicators():
    """[N, C] 0/1 indicators (documented for datasets) were refused: "targets must have shape [N]"."""
    y = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]])
    ds = from_arrays(np.random.default_rng(0).normal(size=(4, 5)), y, classes=["cat", "dog", "car"])
    assert ds.multilabel and ds.classes == ("cat", "dog", "car") and ds.targets.tolist() == y.tolist()
    assert from_arrays(np.zeros((4, 2)), y).classes == ("0", "1", "2")
    assert from_arrays(np.zeros((4, 2)), y).subset([2]).targets.tolist() == [[1, 1, 0]]
    with pytest.raises(ValueError, match=r"^targets of shape \[N, C\] = \[4, 3\] are multi-label indicators and must "
                                         r"be 0 or 1, got values \[2\]$"):
        from_arrays(np.zeros((4, 2)), y * 2)


def test_from_arrays_label_outside_given_classes():
    with pytest.raises(ValueError, match=r"targets must lie in 0 .. 1"):
        from_arrays(np.zeros((3, 2)), [0, 1, 2], classes=["a", "b"])


def test_array_dataset_validates_fields():
    with pytest.raises(TypeError, match="inputs must be float32"):
        ArrayDataset(inputs=torch.zeros(2, 2, dtype=torch.float64), targets=None, classes=(), name="x")
    with pytest.raises(ValueError, match="paths must have one entry per item"):
        ArrayDataset(inputs=torch.zeros(2, 2), targets=None, classes=(), name="x", paths=("a",))
    ds = from_arrays(np.zeros((3, 1)), [0, 1, 0])
    with pytest.raises(IndexError, match=r"must lie in 0 .. 2"):
        ds.subset([3])
    with pytest.raises(TypeError, match="must hold integers"):
        ds.subset([0.0])


# ----------------------------------------------------------------------------- image folders


def _write_png(path, value, size=(10, 12)):
    from PIL import Image

    Image.fromarray(np.full(size, value, dtype=np.uint8)).save(path)


def test_image_folder_flat_is_unlabelled_with_paths(tmp_path):
    for i, value in enumerate([0, 51, 255]):
        _write_png(tmp_path / f"img{i}.png", value)
    (tmp_path / "notes.txt").write_text("not an image")
    ds = image_folder(tmp_path, size=(8, 8), classes=["a", "b"], standardize=False)
    assert ds.targets is None and ds.classes == ("a", "b")
    assert ds.inputs.shape == (3, 1, 8, 8)
    np.testing.assert_allclose(ds.inputs[:, 0, 0, 0].numpy(), [0, 51 / 255, 1], atol=1e-6)
    assert [p.rsplit("/", 1)[-1] for p in ds.paths] == ["img0.png", "img1.png", "img2.png"]
    standardised = image_folder(tmp_path, size=(8, 8))
    mean, std = standardised.normalization
    np.testing.assert_allclose((standardised.inputs * std + mean).numpy(), ds.inputs.numpy(), atol=1e-5)


def test_image_folder_class_subfolders(tmp_path):
    for cls, value in (("cat", 10), ("dog", 200)):
        (tmp_path / cls).mkdir()
        for i in range(2):
            _write_png(tmp_path / cls / f"{i}.png", value)
    ds = image_folder(tmp_path, size=(4, 4), grayscale=False, standardize=False)
    assert ds.classes == ("cat", "dog") and ds.targets.tolist() == [0, 0, 1, 1]
    assert ds.inputs.shape == (4, 3, 4, 4)
    np.testing.assert_allclose(ds.inputs[2, :, 0, 0].numpy(), [200 / 255] * 3, atol=1e-6)
    # a class subfolder without images is not a class, and a warning says so
    (tmp_path / "bird").mkdir()
    (tmp_path / "bird" / "notes.txt").write_text("no picture here")
    with pytest.warns(UserWarning, match=r"subfolder\(s\) bird hold no image, so they are not classes; the "
                                         r"classes are cat, dog"):
        assert image_folder(tmp_path, size=(4, 4)).classes == ("cat", "dog")
    # one stray image at the top makes the folder flat: the class subfolders' images are named as left out
    _write_png(tmp_path / "stray.png", 90)
    with pytest.warns(UserWarning, match=r"holds 1 image\(s\) directly, so it is read as one flat folder and the 4 "
                                         r"image\(s\) in its subfolder\(s\) cat, dog are left out"):
        flat = image_folder(tmp_path, size=(4, 4))
    assert len(flat) == 1 and flat.targets is None


def test_image_folder_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        image_folder(tmp_path / "missing")
    with pytest.raises(DataError, match="holds no images"):
        image_folder(tmp_path)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(DataError, match="broken.png: cannot read image"):
        image_folder(tmp_path)


def test_class_names_as_targets_say_how_to_pass_them():
    import numpy as np

    from activebayes.data import from_arrays
    from activebayes.errors import InvalidTypeError

    x = np.zeros((4, 2), dtype=np.float32)
    with pytest.raises(InvalidTypeError, match=r"^targets must be a numeric array, got dtype <U3 \(class names\? pass "
                                               r"integer class ids and the names as classes=\.\.\."):
        from_arrays(x, np.array(["cat", "dog", "cat", "dog"]))
    with pytest.raises(InvalidTypeError, match=r"^targets must hold numbers, got a sequence of dtype <U3 \(class "
                                               r"names\?"):
        from_arrays(x, ["cat", "dog", "cat", "dog"])
    names, ids = np.unique(["cat", "dog", "cat", "dog"], return_inverse=True)  # what the hint suggests
    assert from_arrays(x, ids, classes=tuple(names)).targets.tolist() == [0, 1, 0, 1]
