"""`activebayes convert`: IDX or image folders -> the memory-mapped format, from the command line."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from activebayes.cli import main
from activebayes.data import image_folder, load_dataset, load_memmap
from activebayes.data.datasets import IDX_DATASETS


def test_convert_an_idx_dataset_then_read_it_back(tmp_path, capsys, mnist_dir):
    out = tmp_path / "mnist-test"
    code = main(["convert", str(mnist_dir), str(out), "--dataset", "mnist", "--split", "test", "--quiet"])
    assert code == 0, capsys.readouterr().err
    converted = load_memmap(out)
    reference = load_dataset("mnist", data_dir=str(mnist_dir), split="test")
    assert len(converted) == len(reference) == 10_000
    picks = torch.tensor([0, 17, 4321, 9999])
    assert torch.equal(converted.inputs[picks], reference.inputs[picks])
    assert torch.equal(converted.targets, reference.targets)


def test_convert_an_image_folder(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for name in ("cat", "dog"):
        (tmp_path / "images" / name).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (10, 12), dtype=np.uint8)).save(tmp_path / "images" / name / f"{i}.png")
    out = tmp_path / "converted"
    code = main(["convert", str(tmp_path / "images"), str(out), "--size", "8", "8", "--classes", "cat,dog", "-q"])
    assert code == 0, capsys.readouterr().err
    converted = load_memmap(out)
    reference = image_folder(tmp_path / "images", size=(8, 8), classes=["cat", "dog"])
    assert torch.equal(converted.inputs[torch.arange(6)], reference.inputs)
    assert converted.classes == reference.classes


def test_a_folder_of_idx_files_without_dataset_names_the_flags(tmp_path, capsys, mnist_dir):
    """The README's "IDX files or an image folder": given MNIST's folder without --dataset, it
    said the folder "holds no images", naming neither IDX files nor the flags that read them."""
    code = main(["convert", str(mnist_dir), str(tmp_path / "out"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert f"{mnist_dir} holds IDX files (t10k-images-idx3-ubyte" in err
    assert "(--dataset mnist / fashion_mnist / kmnist; from Python, dataset=) and its split (--split train / test)" in err
    assert not (tmp_path / "out").exists()


def test_convert_mistakes_are_one_line_and_write_nothing(tmp_path, capsys):
    code = main(["convert", str(tmp_path / "missing"), str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_convert_into_an_empty_folder_and_a_source_without_the_files(tmp_path, capsys):
    rng = np.random.default_rng(1)
    (tmp_path / "images" / "a").mkdir(parents=True)
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8)).save(tmp_path / "images" / "a" / f"{i}.png")
    (tmp_path / "made").mkdir()  # a folder made for the result: used, no --overwrite needed
    assert main(["convert", str(tmp_path / "images"), str(tmp_path / "made"), "--size", "8", "8", "-q"]) == 0
    assert len(load_memmap(tmp_path / "made")) == 3
    capsys.readouterr()
    # an IDX source without its files: the advice is convert's own (no --download, no --data-dir here)
    assert main(["convert", str(tmp_path / "nothing"), str(tmp_path / "out"), "--dataset", "mnist"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "data files not found" in err and "Give the folder that holds them as SOURCE" in err
    assert "--download" not in err and "data_dir" not in err and not (tmp_path / "out").exists()


def test_size_is_positive_and_refused_where_it_resizes_nothing(tmp_path, capsys):
    """`convert --dataset mnist --size 0 0` was accepted without a word (the IDX images keep their
    28 x 28; --size was read for image folders only), as was --size with one IDX images file."""
    idx = tmp_path / "few-images-idx3-ubyte"
    idx.write_bytes(bytes([0, 0, 8, 3]) + (3).to_bytes(4, "big") + (5).to_bytes(4, "big") * 2 + bytes(75))
    for args, said in [
        (["--dataset", "mnist", "--size", "0", "0"], "error: --size must be (height, width) with positive ints, got (0, 0)"),
        (["--dataset", "mnist", "--size", "28", "28"], "error: --size resizes the images of an image folder; it does "
                                                       "nothing for --dataset 'mnist', whose images, classes and labels "
                                                       "are its own: leave --size out"),
    ]:
        code = main(["convert", str(tmp_path / "nothing"), str(tmp_path / "out"), *args, "-q"])
        err = capsys.readouterr().err
        assert code == 1 and err == said + "\n", err
    code = main(["convert", str(idx), str(tmp_path / "out"), "--size", "5", "5", "-q"])
    err = capsys.readouterr().err
    assert code == 1 and err == (f"error: --size resizes the images of an image folder; it does nothing for {idx}, an "
                                 "IDX file whose images keep their own size and channels: leave --size out\n"), err
    assert not (tmp_path / "out").exists()
    assert main(["convert", str(idx), str(tmp_path / "out"), "-q"]) == 0  # without --size: their own 5 x 5
    assert tuple(load_memmap(tmp_path / "out").inputs.shape) == (3, 1, 5, 5)


def test_options_for_other_sources_are_refused_and_no_standardize_is_kept(tmp_path, capsys, mnist_dir):
    """--rgb, --classes and --labels did nothing for a source they do not apply to, without a word;
    --no-standardize with --dataset stored the published mean and std all the same."""
    idx = tmp_path / "few-images-idx3-ubyte"
    idx.write_bytes(bytes([0, 0, 8, 3]) + (3).to_bytes(4, "big") + (5).to_bytes(4, "big") * 2 + bytes(75))
    folder = tmp_path / "images" / "cat"
    folder.mkdir(parents=True)
    Image.fromarray(np.zeros((6, 6), dtype=np.uint8)).save(folder / "0.png")
    mnist = "--dataset 'mnist', whose images, classes and labels are its own"
    for source, args, said in [
        (mnist_dir, ["--dataset", "mnist", "--rgb"], f"--rgb (grayscale=False) keeps the colours of an image folder's "
                                                     f"images; it does nothing for {mnist}: leave --rgb (grayscale=False) out"),
        (mnist_dir, ["--dataset", "mnist", "--classes", "a,b"], "--classes names the classes of an image folder or of "
                                                                f"one IDX images file; it does nothing for {mnist}: leave "
                                                                "--classes out"),
        (mnist_dir, ["--dataset", "mnist", "--labels", str(idx)], "--labels names the labels file of one IDX images file; "
                                                                  f"it does nothing for {mnist}: leave --labels out"),
        (tmp_path / "images", ["--labels", str(idx)], "--labels names the labels file of one IDX images file; it does "
                                                      f"nothing for image folder {tmp_path / 'images'}: leave --labels out"),
        (idx, ["--rgb"], f"--rgb (grayscale=False) keeps the colours of an image folder's images; it does nothing for "
                         f"{idx}, an IDX file whose images keep their own size and channels: leave --rgb (grayscale=False) "
                         "out"),
        # --split did nothing for an image folder or one IDX file, without a word
        (tmp_path / "images", ["--split", "test"], "--split chooses the split of a --dataset; it does nothing for image "
                                                   f"folder {tmp_path / 'images'}: leave --split out"),
        (idx, ["--split", "train"], f"--split chooses the split of a --dataset; it does nothing for {idx}, an IDX file "
                                    "whose images keep their own size and channels: leave --split out"),
    ]:
        code = main(["convert", str(source), str(tmp_path / "out"), *args, "-q"])
        err = capsys.readouterr().err
        assert code == 1 and err == f"error: {said}\n", err
        assert not (tmp_path / "out").exists()
    out = tmp_path / "plain"
    assert main(["convert", str(mnist_dir), str(out), "--dataset", "mnist", "--split", "test", "--no-standardize",
                 "-q"]) == 0, capsys.readouterr().err
    pixels = load_memmap(out).inputs[torch.arange(100)]
    assert float(pixels.min()) == 0.0 and float(pixels.max()) == 1.0  # [0, 1], not standardised
    standardised = load_dataset("mnist", data_dir=str(mnist_dir), split="test").inputs[:100]
    spec = IDX_DATASETS["mnist"]
    assert torch.allclose(standardised, (pixels - spec.mean) / spec.std, atol=1e-5)
