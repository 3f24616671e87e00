"""Real offline data: WordNet noun glosses, scikit-learn's bundled tables, MNIST pairs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from activebayes.data import load_dataset
from activebayes.data.wordnet import LEXNAMES, find_wordnet_dir, read_wordnet_nouns, wordnet_nouns, wordnet_split
from activebayes.errors import ActiveBayesError, InvalidArgumentError, MissingFileError

GLOSSES = [
    (5, "dog", "a domesticated canine animal that barks"),
    (5, "cat", "a small feline animal that purrs"),
    (5, "horse", "a large hoofed animal ridden by people"),
    (6, "hammer", "a hand tool with a heavy metal head"),
    (6, "car", "a motor vehicle with four wheels"),
    (6, "chair", "a seat with a back for one person"),
    (13, "bread", "food made from flour water and yeast baked"),
    (13, "apple", "fruit with red or green skin and crisp flesh"),
]


def write_data_noun(folder, entries=GLOSSES, *, corrupt_offset=False):
    """A small data.noun in WordNet's format: licence lines, then synsets at their byte offsets."""
    out = b"  1 This software and database is being provided to you, the LICENSEE  \n"
    for lexfile, word, gloss in entries:
        offset = len(out) + (7 if corrupt_offset else 0)
        out += f"{offset:08d} {lexfile:02d} n 01 {word} 0 000 | {gloss}  \n".encode()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.noun").write_bytes(out)
    return folder


def test_reader_parses_and_checks_a_small_database(tmp_path):
    nouns = read_wordnet_nouns(write_data_noun(tmp_path / "wn"))
    assert nouns.glosses == tuple(g for _, _, g in GLOSSES)
    assert nouns.lemmas[0] == ("dog",)
    assert nouns.categories == ("noun.animal", "noun.artifact", "noun.food")
    assert nouns.item_ids[0] == f"n{nouns.offsets[0]:08d}"


def test_corrupt_or_missing_files(tmp_path):
    with pytest.raises(ActiveBayesError, match=r"line 2: synset offset .* is not the line's byte offset"):
        read_wordnet_nouns(write_data_noun(tmp_path / "bad", corrupt_offset=True))
    with pytest.raises(MissingFileError, match="data.noun not found"):
        read_wordnet_nouns(tmp_path / "empty")
    folder = write_data_noun(tmp_path / "verb", [(35, "hit", "deal a blow")])
    with pytest.raises(ActiveBayesError, match="lexicographer file 35 is not a noun file"):
        read_wordnet_nouns(folder)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "data.noun").write_bytes(b"hello world\n")
    with pytest.raises(ActiveBayesError, match="line 1 is not a WordNet noun synset line"):
        read_wordnet_nouns(garbage)
    folder = write_data_noun(tmp_path / "lex")
    (folder / "lexnames").write_text("00\tadj.all\t3\n02 broken\n", encoding="utf-8")
    with pytest.raises(ActiveBayesError, match=r"lexnames: line 2 must be"):
        read_wordnet_nouns(folder)


def test_registered_dataset_on_a_small_database(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    entries = [(lex, f"{w}{i}", f"{g} variant {i}") for i in range(4) for lex, w, g in GLOSSES]
    folder = write_data_noun(tmp_path / "wn", entries)
    monkeypatch.setattr("activebayes.data.wordnet.WORDNET_TEST_SIZE", 8)
    monkeypatch.setenv("ACTIVEBAYES_DATA_DIR", str(tmp_path / "cache"))
    train = load_dataset("wordnet_nouns", data_dir=folder)
    test = load_dataset("wordnet_nouns", data_dir=folder, split="test")
    assert (len(train), len(test)) == (24, 8)
    assert train.classes == ("noun.animal", "noun.artifact", "noun.food")
    train_idx, test_idx = wordnet_split(32, test_size=8)
    lex = np.array([e[0] for e in entries])
    names = {5: 0, 6: 1, 13: 2}
    assert train.targets.tolist() == [names[v] for v in lex[train_idx]]
    np.testing.assert_allclose(train.inputs.double().mean(0), 0, atol=1e-5)
    assert any((tmp_path / "cache" / "embeddings").iterdir())  # cached by content
    again = wordnet_nouns("train", data_dir=folder)
    torch.testing.assert_close(again.inputs, train.inputs)


def test_split_is_fixed_and_disjoint():
    a_train, a_test = wordnet_split(1000, test_size=100)
    b_train, b_test = wordnet_split(1000, test_size=100)
    np.testing.assert_array_equal(a_test, b_test)
    assert len(np.intersect1d(a_train, a_test)) == 0 and len(a_train) + len(a_test) == 1000


def test_the_real_wordnet_database():
    try:
        folder = find_wordnet_dir()
    except MissingFileError:
        pytest.skip("WordNet (Debian package wordnet-base) is not installed")
    nouns = read_wordnet_nouns(folder)
    assert len(nouns.glosses) == 82115  # WordNet 3.0's noun synsets
    assert len(nouns.categories) == 26 and nouns.categories[0] == "noun.Tops"
    dog = nouns.item_ids.index("n02084071")
    assert LEXNAMES[nouns.lexfiles[dog]] == "noun.animal" and "domestic dog" in nouns.lemmas[dog]


@pytest.mark.parametrize("name,n_features,classes", [("breast_cancer", 30, 2), ("wine", 13, 3), ("iris", 4, 3)])
def test_sklearn_tables(name, n_features, classes):
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    train, test = load_dataset(name), load_dataset(name, split="test")
    assert train.input_shape == (n_features,) and train.num_classes == classes
    bunch = getattr(sklearn_datasets, f"load_{name}")()
    assert len(train) + len(test) == len(bunch.target)
    np.testing.assert_allclose(train.inputs.double().mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(train.inputs.double().std(0, unbiased=False), 1, atol=1e-4)
    # the class proportions are kept in both splits (stratified)
    np.testing.assert_allclose(np.bincount(test.targets.numpy()) / len(test),
                               np.bincount(bunch.target) / len(bunch.target), atol=0.02)


def test_mnist_pairs(mnist_dir):
    from activebayes.data.multilabel_mnist import mnist_pairs

    pairs = mnist_pairs("test", data_dir=mnist_dir, n_items=300)
    mnist = load_dataset("mnist", data_dir=mnist_dir, split="test")
    assert pairs.dataset.input_shape == (1, 28, 56) and pairs.targets_N_C.shape == (300, 10)
    for i in (0, 17, 299):
        a, b = (int(s.split("[")[1].rstrip("]")) for s in pairs.item_ids[i].split("+"))
        torch.testing.assert_close(pairs.dataset.inputs[i, :, :, :28], mnist.inputs[a])
        torch.testing.assert_close(pairs.dataset.inputs[i, :, :, 28:], mnist.inputs[b])
        want = torch.zeros(10, dtype=torch.long)
        want[mnist.targets[a]] = want[mnist.targets[b]] = 1
        assert pairs.targets_N_C[i].tolist() == want.tolist()
    assert set(pairs.targets_N_C.sum(1).tolist()) <= {1, 2}
    again = mnist_pairs("test", data_dir=mnist_dir, n_items=300)
    assert again.item_ids == pairs.item_ids


def test_wordnet_glosses_as_word_vectors_from_the_cli(tmp_path, monkeypatch, capsys):
    """``--dataset wordnet_nouns --encoder FILE``: the glosses' mean word vectors, standardised
    with the training split's statistics, stored in the run as a dataset option."""
    import json

    from activebayes.cli import main
    from activebayes.data.text import embedding_scale

    entries = [(lex, f"{w}{i}", f"{g} variant {i}") for i in range(6) for lex, w, g in GLOSSES]
    folder = write_data_noun(tmp_path / "wn", entries)
    monkeypatch.setattr("activebayes.data.wordnet.WORDNET_TEST_SIZE", 8)
    monkeypatch.setenv("ACTIVEBAYES_DATA_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    words = sorted({w for _, _, g in GLOSSES for w in g.split()} | {"variant"})
    vectors = {w: rng.normal(size=4) for w in words}
    path = tmp_path / "glove.txt"
    path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in vectors.items()))
    raw = np.array([np.mean([vectors[w] for w in g.split() if w in vectors], axis=0) for _, _, g in entries])
    train_idx, test_idx = wordnet_split(len(entries), test_size=8)
    mean, scale = raw[train_idx].mean(0), embedding_scale(raw[train_idx].std(0))
    for split, rows in (("train", train_idx), ("test", test_idx)):
        got = load_dataset("wordnet_nouns", data_dir=folder, split=split, options={"encoder": str(path)})
        np.testing.assert_allclose(got.inputs.numpy(), (raw[rows] - mean) / scale, atol=1e-5)
    out = tmp_path / "run"
    code = main(["run", "--dataset", "wordnet_nouns", "--data-dir", str(folder), "--encoder", str(path),
                 "--initial-size", "6", "--validation-size", "6", "--batch-size", "4", "--budget", "14",
                 "--num-samples", "4", "--eval-samples", "4", "--max-epochs", "2", "--cold-start", "none",
                 "--out", str(out), "-q"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["dataset_options"] == {"encoder": str(path)}
    code = main(["run", "--dataset", "digits", "--encoder", str(path), "--out", str(tmp_path / "digits"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "--encoder: only with --table FILE or --dataset wordnet_nouns, got --dataset digits" in err
    assert "Traceback" not in err
    assert not (tmp_path / "digits").exists()


def test_rand_hie_is_statsmodels_table_through_the_table_path():
    """rand_hie against the CSV read independently: 20,190 rows split 14,133 / 6,057 by id hash,
    labels from ``mdvis > 0``, features standardised over all rows in float64 (population sd)."""
    pytest.importorskip("statsmodels")
    import csv

    from activebayes.data.real_tables import RAND_HIE_COLUMNS, RAND_HIE_TEST_SIZE, rand_hie_csv
    from activebayes.data.table import load_table
    from activebayes.data.table_task import split_by_item_id

    train, test = load_dataset("rand_hie"), load_dataset("rand_hie", split="test")
    assert (len(train), len(test)) == (20_190 - RAND_HIE_TEST_SIZE, RAND_HIE_TEST_SIZE)
    assert train.classes == ("no_visit", "visit") and train.input_shape == (9,)
    with open(rand_hie_csv(), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    x_N_D = np.array([[float(r[c]) for c in RAND_HIE_COLUMNS] for r in rows])
    y_N = np.array([float(r["mdvis"]) > 0 for r in rows], dtype=np.int64)
    assert y_N.sum() == 13_882  # person-years with a doctor's visit
    want_N_D = (x_N_D - x_N_D.mean(0)) / x_N_D.std(0)
    # the split: the test rows are those whose content ids hash lowest (the order of the file does not matter)
    ids = load_table([{c: r[c] for c in RAND_HIE_COLUMNS} for r in rows], feature_columns=list(RAND_HIE_COLUMNS)).item_ids
    train_rows, test_rows = split_by_item_id(ids, RAND_HIE_TEST_SIZE)
    assert not set(train_rows.tolist()) & set(test_rows.tolist())
    assert set(split_by_item_id(ids[::-1], RAND_HIE_TEST_SIZE)[1].tolist()) == {len(ids) - 1 - i
                                                                               for i in test_rows.tolist()}
    for split, rows_idx in ((train, train_rows), (test, test_rows)):
        np.testing.assert_allclose(split.inputs.double().numpy(), want_N_D[rows_idx.numpy()], atol=1e-5)
        assert split.targets.tolist() == y_N[rows_idx.numpy()].tolist()


def test_rand_hie_without_statsmodels_is_a_one_line_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "statsmodels" else real(name, *a))
    with pytest.raises(InvalidArgumentError, match=r"pip install 'activebayes\[tables\]'"):
        load_dataset("rand_hie")
