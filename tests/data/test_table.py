"""Table and text pools: reading, identity, features against scikit-learn / NumPy, and bad input."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from activebayes.data.table import (
    MISSING_CATEGORY,
    FeatureMemmapInputs,
    TablePreprocessor,
    load_table,
    read_table_rows,
    resolve_feature_columns,
)
from activebayes.data.text import TfidfEncoder, encode_texts, texts_sha256
from activebayes.errors import ActiveBayesError, InvalidArgumentError, MissingFileError

pytest.importorskip("sklearn")

TEXTS = [
    "the cat sat on the mat", "a dog barked at the cat", "stocks fell sharply today",
    "the market rallied after the report", "a kitten chased the dog", "bond yields rose again",
    "the puppy slept all day", "investors sold their shares",
]
LABELS = ["animal", "animal", "finance", "finance", "animal", "finance", "animal", "finance"]


def write_csv(path, header, rows):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def text_csv(tmp_path):
    return write_csv(tmp_path / "texts.csv", ["id", "text", "label"],
                     [[f"t{i}", t, y] for i, (t, y) in enumerate(zip(TEXTS, LABELS))])


def test_tabular_features_match_numpy_and_sklearn_one_hot():
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(0)
    x = rng.normal(3, 2, size=12)
    colours = ["red", "blue", "green", "red", "red", "blue", "green", "green", "blue", "red", "red", "blue"]
    rows = [{"x": float(a), "c": c, "y": "pos" if a > 3 else "neg"} for a, c in zip(x, colours)]
    pool = load_table(rows, feature_columns=["x", "c"], label_column="y")
    prep = TablePreprocessor.from_dict(pool.preprocessing["table"])
    raw = prep.transform(rows)
    np.testing.assert_allclose(raw[:, 0], StandardScaler().fit_transform(x[:, None])[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(raw[:, 1:], OneHotEncoder().fit_transform(np.array(colours)[:, None]).toarray())
    # final per-dimension standardisation: zero mean, unit (population) std
    inputs = pool.dataset.inputs.numpy().astype(np.float64)
    np.testing.assert_allclose(inputs.mean(0), 0, atol=1e-6)
    np.testing.assert_allclose(inputs.std(0), 1, atol=1e-5)
    assert pool.dataset.classes == ("neg", "pos")
    assert pool.dataset.targets.tolist() == [int(a > 3) for a in x]
    assert json.loads(json.dumps(pool.preprocessing)) == pool.preprocessing  # storable in a run


def test_star_takes_every_column_but_the_text_label_and_id():
    rows = [{"id": f"r{i}", "x": float(i), "colour": "red" if i % 2 else "blue", "y": "pos" if i > 2 else "neg"}
            for i in range(6)]
    star = load_table(rows, feature_columns="*", label_column="y", id_column="id")
    named = load_table(rows, feature_columns=["x", "colour"], label_column="y", id_column="id")
    assert star.preprocessing == named.preprocessing and star.item_ids == named.item_ids
    torch.testing.assert_close(star.dataset.inputs, named.dataset.inputs, rtol=0, atol=0)
    with pytest.raises(InvalidArgumentError, match="feature_columns '\\*' found no column besides"):
        load_table([{"text": "a b", "y": "p"}], feature_columns="*", text_column="text", label_column="y")


def test_resolve_feature_columns():
    columns = ["id", "text", "a", "b", "label"]
    assert resolve_feature_columns("*", columns, exclude=("text", "label", "id", None)) == ["a", "b"]
    assert resolve_feature_columns(["*"], columns, exclude=("text",)) == ["id", "a", "b", "label"]
    assert resolve_feature_columns("b, a", columns, exclude=("a",)) == ["b", "a"]  # a list is taken as given
    assert resolve_feature_columns(None, columns) == []
    # a table with a column named "*": the name is that column
    assert resolve_feature_columns("*", ["*", "x"], exclude=()) == ["*"]


def test_csv_jsonl_and_parquet_read_the_same(tmp_path, text_csv):
    rows = [{"id": f"t{i}", "text": t, "label": y} for i, (t, y) in enumerate(zip(TEXTS, LABELS))]
    jsonl = tmp_path / "texts.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    pools = [load_table(text_csv, text_column="text", label_column="label", id_column="id",
                        encoder=TfidfEncoder(dim=4))]
    pools.append(load_table(jsonl, text_column="text", label_column="label", id_column="id",
                            encoder=TfidfEncoder(dim=4)))
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "texts.parquet")
    pools.append(load_table(tmp_path / "texts.parquet", text_column="text", label_column="label", id_column="id",
                            encoder=TfidfEncoder(dim=4)))
    for pool in pools[1:]:
        assert pool.item_ids == pools[0].item_ids == tuple(f"t{i}" for i in range(8))
        assert pool.texts == tuple(TEXTS)
        torch.testing.assert_close(pool.dataset.inputs, pools[0].dataset.inputs)
        assert pool.dataset.targets.tolist() == pools[0].dataset.targets.tolist()
    assert pools[0].kind == "text" and pools[0].dataset.input_shape == (4,)


def test_tfidf_features_match_sklearn_pipeline():
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    got = encode_texts(TEXTS, TfidfEncoder(dim=3, seed=1))
    weights = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True).fit_transform(TEXTS)
    want = TruncatedSVD(3, algorithm="randomized", n_iter=7, random_state=1).fit_transform(weights)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    hashed = encode_texts(TEXTS, TfidfEncoder(dim=3, hashing=True))
    assert hashed.shape == (8, 3) and np.isfinite(hashed).all()


def test_tfidf_fitting_shows_progress_when_asked_and_not_in_the_fingerprint(capsys):
    quiet = encode_texts(TEXTS, TfidfEncoder(dim=3, seed=1, progress=False))
    assert capsys.readouterr().err == ""
    shown = encode_texts(TEXTS, TfidfEncoder(dim=3, seed=1, progress=True))
    err = capsys.readouterr().err
    assert "TF-IDF + SVD of 8 texts" in err
    np.testing.assert_array_equal(quiet, shown)  # it changes nothing computed, nor the cache key
    assert TfidfEncoder(progress=True).fingerprint() == TfidfEncoder(progress=False).fingerprint()


def _topic_texts(n: int = 400, seed: int = 0) -> list[dict]:
    """Short texts of 3 topics: 6 words of the topic's 8 and 3 of all 24 (separable by a linear model)."""
    import random

    rng = random.Random(seed)
    words = {"sport": "match goal team player score league coach win".split(),
             "finance": "stock market bank rate bond price share fund".split(),
             "science": "atom cell gene star energy lab theory data".split()}
    every = sum(words.values(), [])
    rows = []
    for i in range(n):
        topic = rng.choice(sorted(words))
        rows.append({"id": f"t{i}", "text": " ".join(rng.choices(words[topic], k=6) + rng.choices(every, k=3)),
                     "y": topic})
    return rows


def test_text_features_keep_the_embedding_spectrum():
    """Text features are centred and divided by one common scale, not per dimension: the SVD's
    noisy last components stay small, and a linear model separates separable texts."""
    from sklearn.linear_model import LogisticRegression

    rows = _topic_texts()
    pool = load_table(rows, text_column="text", label_column="y", id_column="id")
    raw_N_D = encode_texts([r["text"] for r in rows], TfidfEncoder()).astype(np.float64)
    x_N_D = pool.dataset.inputs.numpy().astype(np.float64)
    # NumPy float64 reference: (raw - mean) / sqrt(mean of the per-dimension variances)
    want = (raw_N_D - raw_N_D.mean(0)) / np.sqrt(raw_N_D.var(0).mean())
    np.testing.assert_allclose(x_N_D, want, rtol=1e-4, atol=1e-5)
    assert abs(x_N_D.var(0).mean() - 1.0) < 1e-4 and x_N_D.std(0).max() > 3 * x_N_D.std(0).min()
    y = pool.dataset.targets.numpy()
    model = LogisticRegression(max_iter=2000).fit(x_N_D[:60], y[:60])
    assert model.score(x_N_D[300:], y[300:]) >= 0.95  # per-dimension whitening gave 0.54


def test_identity_is_content_not_position():
    rows = [{"text": t} for t in TEXTS]
    a = load_table(rows, text_column="text", encoder=TfidfEncoder(dim=2))
    b = load_table(rows[::-1], text_column="text", encoder=TfidfEncoder(dim=2))
    assert a.item_ids == b.item_ids[::-1]
    assert all(i.startswith("sha256:") for i in a.item_ids)
    assert a.dataset.targets is None and a.dataset.classes == ()  # unlabelled: a real project
    dup = load_table(rows + rows[:1], text_column="text", encoder=TfidfEncoder(dim=2))
    assert dup.item_ids[-1] == dup.item_ids[0] + "~2"
    assert a.index_of(a.item_ids[3]) == 3


def test_every_row_carries_the_sha256_of_its_input_cells():
    """``item_sha256`` is the NumPy-free reference: hashlib over the cells as canonical JSON;
    an id column does not change it, an edited cell does, and a subset keeps it by item."""
    import hashlib

    rows = [{"id": f"r{i}", "text": t, "n": str(i)} for i, t in enumerate(TEXTS)]
    pool = load_table(rows, text_column="text", feature_columns="n", id_column="id", encoder=TfidfEncoder(dim=2))
    expected = [hashlib.sha256(json.dumps([["text", r["text"]], ["n", r["n"]]], ensure_ascii=False,
                                          separators=(",", ":")).encode()).hexdigest() for r in rows]
    assert pool.dataset.item_sha256 == tuple(expected)
    no_ids = load_table(rows, text_column="text", feature_columns="n", encoder=TfidfEncoder(dim=2))
    assert no_ids.dataset.item_sha256 == tuple(expected)
    assert no_ids.item_ids == tuple("sha256:" + sha[:16] for sha in expected)
    edited = load_table([{**rows[0], "text": rows[0]["text"] + "!"}, *rows[1:]], text_column="text",
                        feature_columns="n", id_column="id", encoder=TfidfEncoder(dim=2))
    assert edited.item_ids == pool.item_ids and edited.dataset.item_sha256[1:] == tuple(expected[1:])
    assert edited.dataset.item_sha256[0] != expected[0]
    part = pool.dataset.subset([3, 1])
    assert part.item_ids == ("r3", "r1") and part.item_sha256 == (expected[3], expected[1])
    with pytest.raises(InvalidArgumentError, match="item_sha256 needs item_ids and one entry per item"):
        dataclasses.replace(pool.dataset, item_sha256=tuple(expected[:2]))


def test_identical_rows_with_different_labels_warn_that_only_their_order_tells_them_apart():
    rows = [{"x": 1.0, "y": "a"}, {"x": 2.0, "y": "b"}, {"x": 1.0, "y": "b"}, {"x": 2.0, "y": "b"}, {"x": 3.0, "y": "a"}]
    with pytest.warns(UserWarning, match=r"1 group\(s\) of rows have identical content but different labels "
                                         r"\(row 1: 'a', row 3: 'b'\).*id_column"):
        load_table(rows, feature_columns=["x"], label_column="y")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # copies that agree, and copies told apart by an id, are fine
        load_table(rows[1:], feature_columns=["x"], label_column="y")
        load_table([{**r, "id": i} for i, r in enumerate(rows)], feature_columns=["x"], label_column="y",
                   id_column="id")


def test_cache_by_content_and_memmap(tmp_path):
    calls = []

    class Counting(TfidfEncoder):
        def fit_transform(self, texts):
            calls.append(len(texts))
            return super().fit_transform(texts)

    first = encode_texts(TEXTS, Counting(dim=3), cache_dir=tmp_path)
    second = encode_texts(TEXTS, Counting(dim=3), cache_dir=tmp_path)
    np.testing.assert_array_equal(first, second)
    assert calls == [8]
    encode_texts(TEXTS[:-1] + ["something else entirely"], Counting(dim=3), cache_dir=tmp_path)
    assert calls == [8, 8]
    mapped = encode_texts(TEXTS, Counting(dim=3), cache_dir=tmp_path, mmap_bytes=0)
    assert isinstance(mapped, np.memmap) and calls == [8, 8]
    pool = load_table([{"text": t} for t in TEXTS], text_column="text", encoder=Counting(dim=3),
                      cache_dir=tmp_path, mmap_bytes=0)
    assert isinstance(pool.dataset.inputs, FeatureMemmapInputs)
    in_memory = load_table([{"text": t} for t in TEXTS], text_column="text", encoder=Counting(dim=3))
    torch.testing.assert_close(pool.dataset.inputs[torch.arange(8)], in_memory.dataset.inputs, atol=1e-5, rtol=1e-5)
    assert texts_sha256(["ab", "c"]) != texts_sha256(["a", "bc"])


def test_missing_values_error_or_documented_imputation():
    rows = [{"x": 1.0, "c": "a"}, {"x": None, "c": "b"}, {"x": 3.0, "c": None}]
    with pytest.raises(ActiveBayesError, match=r"row 2, column 'x': missing value"):
        load_table(rows, feature_columns=["x", "c"])
    pool = load_table(rows, feature_columns=["x", "c"], missing="impute")
    prep = TablePreprocessor.from_dict(pool.preprocessing["table"])
    raw = prep.transform(rows)
    assert raw[1, 0] == 0.0  # the mean (1 + 3) / 2, standardised
    assert prep.categorical["c"][-1] == MISSING_CATEGORY and raw[2, prep.categorical["c"].index(MISSING_CATEGORY) + 1] == 1
    assert sorted(pool.preprocessing["table"]["impute"]) == ["c", "x"]
    assert torch.isfinite(pool.dataset.inputs).all()
    with pytest.raises(ActiveBayesError, match=r"row 1, column 'x': nan is not a finite number"):
        load_table([{"x": "nan"}, {"x": "1"}], feature_columns=["x"])


def test_multilabel_targets():
    rows = [{"t": "red cat", "y": "cat|red"}, {"t": "blue dog", "y": "dog| blue"}, {"t": "red dog", "y": ["dog", "red"]}]
    pool = load_table(rows, text_column="t", label_column="y", multilabel=True, encoder=TfidfEncoder(dim=2))
    assert pool.dataset.classes == ("blue", "cat", "dog", "red")
    assert pool.targets_N_C.tolist() == [[0, 1, 0, 1], [1, 0, 1, 0], [0, 0, 1, 1]]
    # the dataset carries them too, with the rows' ids, so it goes into the loop as it is
    assert pool.dataset.multilabel and torch.equal(pool.dataset.targets, pool.targets_N_C)
    assert pool.dataset.item_ids == pool.item_ids
    subset = pool.dataset.subset([2, 0])
    assert subset.item_ids == (pool.item_ids[2], pool.item_ids[0]) and subset.targets.tolist()[0] == [0, 0, 1, 1]


def test_a_multilabel_table_dataset_goes_into_the_loop():
    from activebayes.loop import ActiveLearningLoop, LoopConfig

    rows = [{"t": f"{a} {b} item {i}", "y": f"{a}|{b}"} for i, (a, b) in
            enumerate([("red", "cat"), ("blue", "dog"), ("red", "dog"), ("blue", "cat")] * 10)]
    pool = load_table(rows, text_column="t", label_column="y", multilabel=True, encoder=TfidfEncoder(dim=4))
    loop = ActiveLearningLoop(LoopConfig(strategy="multilabel_bald", cold_start=None, initial_size=4,
                                         validation_size=8, batch_size=4, budget=8, num_samples=4, eval_samples=2,
                                         fit_options={"max_epochs": 1}), dataset=pool.dataset)
    assert loop.multilabel
    result = loop.run(progress=False)
    assert result.rounds[-1].n_labelled == 8 and "validation_micro_f1" in result.rounds[-1].metrics


@pytest.mark.parametrize("rows,kwargs,message", [
    ([{"t": "a b"}], {"text_column": "text"}, r"^table: text_column \(--text-column\) 'text' is not a column of the table \(columns: t\)$"),
    ([{"t": "a b"}, {"t": "  "}], {"text_column": "t"}, r"^table: row 2, column 't': empty text$"),
    ([{"t": "red apple", "y": "x"}, {"t": "green pear", "y": "z"}], {"text_column": "t", "label_column": "y", "classes": ["x", "y"]},
     r"^table: row 2, column 'y': label 'z' is not among the classes \(x, y\)$"),
    ([{"i": "1", "t": "a b"}, {"i": "1", "t": "c d"}], {"text_column": "t", "id_column": "i"},
     r"^table: row 2, column 'i': id '1' is used twice \(rows 1 and 2\); ids must be unique$"),
    ([{"t": "a b", "y": "x"}, {"t": "c d", "y": " | "}], {"text_column": "t", "label_column": "y", "multilabel": True},
     r"^table: row 2, column 'y': a multi-label answer needs at least one class, got none$"),
    ([{"t": "a b", "y": "x"}, {"t": "c d", "y": "x"}], {"text_column": "t", "label_column": "y"},
     r"^table: column 'y': every row has the class 'x'; a classifier needs two or more classes"),
    ([{"t": "a b", "y": "x"}, {"t": "c d", "y": "x"}], {"text_column": "t", "label_column": "y", "multilabel": True},
     r"^table: column 'y': every row has the class 'x'; a classifier needs two or more classes"),
])
def test_bad_input_is_one_line_naming_row_and_column(rows, kwargs, message):
    with pytest.raises(ActiveBayesError, match=message) as info:
        load_table(rows, encoder=TfidfEncoder(dim=1), **kwargs)
    assert "\n" not in str(info.value)


def test_bad_files(tmp_path):
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("id,text\n1,caf\xe9 au lait\n".encode("latin-1"))
    with pytest.raises(ActiveBayesError, match=r"latin1.csv: line 2 is not valid UTF-8 \(byte 0xe9"):
        load_table(bad, text_column="text")
    utf16 = tmp_path / "utf16.csv"  # a spreadsheet's "Unicode text": the error said only "save the file as UTF-8"
    utf16.write_bytes("id,text\n1,café\n".encode("utf-16"))
    with pytest.raises(ActiveBayesError, match=r"save the file as UTF-8; it is UTF-16 \(a spreadsheet's 'Unicode text'\)"):
        load_table(utf16, text_column="text")
    with pytest.raises(MissingFileError, match=r"table \(--table\): no such file"):
        load_table(tmp_path / "nope.csv", text_column="text")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok"}\n{"text": \n', encoding="utf-8")
    with pytest.raises(ActiveBayesError, match=r"broken.jsonl: line 2 is not valid JSON"):
        read_table_rows(broken)
    with pytest.raises(InvalidArgumentError, match="unknown format"):
        read_table_rows(write_csv(tmp_path / "t.xlsx", ["a"], [["1"]]))
    # a quote never closed: named at the line it opens on (the rest of the file was read into
    # that one cell, silently); a row spanning lines is named at its first line
    unclosed = tmp_path / "unclosed.csv"
    unclosed.write_text('id,text,label\n1,hello,a\n2,"oops bad,b\n3,fine,a\n4,also fine,b\n', encoding="utf-8")
    with pytest.raises(ActiveBayesError, match=r"unclosed.csv: line 3: a quoted cell opened on this line is never "
                                               r"closed"):
        read_table_rows(unclosed)
    wide = tmp_path / "wide.csv"
    wide.write_text('a,b\n1,2\n3,"two\nlines",4\n5,6\n', encoding="utf-8")
    with pytest.raises(ActiveBayesError, match=r"wide.csv: line 3 has 3 cells, the header 2"):
        read_table_rows(wide)
    # quoting a spreadsheet writes loosely is still read as before
    loose = tmp_path / "loose.csv"
    loose.write_text('a,b\n1,5" screen\n2,"x"y\n3,"multi\nline"\n', encoding="utf-8")
    assert read_table_rows(loose)[1] == [{"a": "1", "b": '5" screen'}, {"a": "2", "b": "xy"},
                                         {"a": "3", "b": "multi\nline"}]
    with pytest.raises(InvalidArgumentError, match="text_column .* and/or feature_columns"):
        load_table([{"a": 1}])


def test_text_pool_trains_in_the_loop(text_csv):
    from activebayes.loop import ActiveLearningLoop, LoopConfig

    rows = [{"text": t + f" {i}", "label": y} for i in range(6) for t, y in zip(TEXTS, LABELS)]
    pool = load_table(rows, text_column="text", label_column="label", encoder=TfidfEncoder(dim=8))
    config = LoopConfig(strategy="bald", initial_size=4, validation_size=8, batch_size=4, budget=12, num_samples=4,
                        eval_samples=4, evaluate_test=False, cold_start=None,
                        fit_options={"max_epochs": 3, "min_samples_per_epoch": 64, "patience": 2})
    result = ActiveLearningLoop(config, dataset=pool.dataset).run(progress=False)
    assert len(result.labelled_indices) == 12
    assert all(0 <= i < len(pool) for i in result.labelled_indices)
