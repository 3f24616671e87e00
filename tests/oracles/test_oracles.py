from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from activebayes.data import Pool, from_arrays, load_dataset
from activebayes.labelling import AnswerFileError, FileOracle, LabelsPendingError, read_answers, write_query
from activebayes.oracles import Oracle, SimulatedOracle

DIGIT_CLASSES = tuple(str(c) for c in range(10))


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


@pytest.fixture
def animals():
    inputs = np.arange(12, dtype=np.float32).reshape(6, 1, 1, 2)
    ds = from_arrays(inputs, classes=["cat", "dog", "bird"], name="animals")
    # pretend these came from an image folder
    import dataclasses

    return dataclasses.replace(ds, paths=tuple(f"/photos/{i}.jpg" for i in range(6)))


def fill_csv(path, labels_by_index, *, drop=(), extra_rows=()):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    fieldnames = list(rows[0].keys())
    out = []
    for row in rows:
        index = int(row["index"])
        if index in drop:
            continue
        row["label"] = labels_by_index.get(index, "")
        out.append(row)
    out.extend(extra_rows)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fieldnames)
        writer.writeheader()
        writer.writerows(out)


# ----------------------------------------------------------------------------- simulated


def test_simulated_oracle_returns_dataset_targets(digits):
    oracle = SimulatedOracle(digits)
    assert isinstance(oracle, Oracle)
    picked = torch.tensor([10, 3, 999])
    assert torch.equal(oracle.label(picked), digits.targets[picked])
    assert torch.equal(oracle(picked), digits.targets[picked])
    assert oracle.n_queried == 6
    with pytest.raises(IndexError, match="pool_indices must lie in 0 .. 1296"):
        oracle.label([1297])
    with pytest.raises(ValueError, match="no targets"):
        SimulatedOracle(from_arrays(np.zeros((2, 1)), classes=["a"]))


def test_simulated_oracle_feeds_a_pool(digits):
    pool = Pool.create(digits, initial="empty", seed=0)
    picked = pool.take([0, 4, 8])
    pool.label(picked, SimulatedOracle(digits).label(picked))
    assert torch.equal(pool.labelled_data()[1], digits.targets[picked])


# ----------------------------------------------------------------------------- write_query / read_answers


def test_write_query_csv_columns(animals, tmp_path):
    path = write_query(tmp_path / "q.csv", indices=[4, 1], scores=[0.9, 0.25], dataset=animals, round=2)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["index"] for r in rows] == ["4", "1"]
    assert [r["path"] for r in rows] == ["/photos/4.jpg", "/photos/1.jpg"]
    assert [float(r["score"]) for r in rows] == [0.9, 0.25]
    assert {r["label"] for r in rows} == {""} and {r["round"] for r in rows} == {"2"}
    assert [int(r["rank"]) for r in rows] == [0, 1]
    assert [p.name for p in tmp_path.iterdir()] == ["q.csv"]  # no temp file left


def test_write_query_validates(animals, tmp_path):
    with pytest.raises(ValueError, match="duplicates"):
        write_query(tmp_path / "q.csv", indices=[1, 1], scores=None, dataset=animals, round=0)
    with pytest.raises(ValueError, match="scores must have shape"):
        write_query(tmp_path / "q.csv", indices=[1, 2], scores=[0.1], dataset=animals, round=0)
    with pytest.raises(IndexError, match="must lie in 0 .. 5"):
        write_query(tmp_path / "q.csv", indices=[6], scores=None, dataset=animals, round=0)
    with pytest.raises(ValueError, match="round must be an int >= 0"):
        write_query(tmp_path / "q.csv", indices=[1], scores=None, dataset=animals, round=-1)
    assert not (tmp_path / "q.csv").exists()


def test_csv_round_trip_with_names_ids_and_case(animals, tmp_path):
    path = write_query(tmp_path / "q.csv", indices=[0, 2, 5], scores=[3.0, 2.0, 1.0], dataset=animals, round=0)
    fill_csv(path, {0: "dog", 2: " 2 ", 5: "CAT"})
    answers = read_answers(path, expected_indices=[0, 2, 5], classes=animals.classes)
    assert answers == {0: 1, 2: 2, 5: 0}


def test_json_round_trip(animals, tmp_path):
    path = write_query(tmp_path / "q.json", indices=[3, 1], scores=None, dataset=animals, round=1)
    document = json.loads(path.read_text())
    assert document["classes"] == ["cat", "dog", "bird"] and document["round"] == 1
    assert [item["label"] for item in document["items"]] == [None, None]
    document["items"][0]["label"] = "bird"
    document["items"][1]["label"] = 0
    path.write_text(json.dumps(document))
    assert read_answers(path, expected_indices=[1, 3], classes=animals.classes) == {3: 2, 1: 0}
    mapping = tmp_path / "answers.json"
    mapping.write_text(json.dumps({"3": "dog", "1": "cat"}))
    assert read_answers(mapping, expected_indices=[1, 3], classes=animals.classes) == {3: 1, 1: 0}
    # a problem of a list entry names it by its place in the list, counted from 1: not an item id
    document["items"][1]["label"] = None
    path.write_text(json.dumps(document))
    with pytest.raises(AnswerFileError) as raised:
        read_answers(path, expected_indices=[1, 3], classes=animals.classes)
    assert [p.text() for p in raised.value.problems] == ["entry 2 of the list: index 1 has no label "
                                                         "(pass allow_partial=True to accept)"]


@pytest.mark.parametrize(
    ("labels", "drop", "extra", "messages"),
    [
        ({0: "dog", 2: "horse", 5: "cat"}, (), (), ["row 2 (line 3): label 'horse' for index 2 is not a class"]),
        ({0: "dog", 2: "3", 5: "cat"}, (), (), ["label '3' for index 2 is not a class; expected one of [cat, dog, bird] or an id 0..2"]),
        ({0: "dog", 2: "bird", 5: "cat"}, (), ({"index": "4", "label": "dog"},), ["row 4 (line 5): index 4 was not queried (unknown id)"]),
        ({0: "dog", 2: "bird", 5: "cat"}, (), ({"index": "2", "label": "bird"},), ["row 4 (line 5): index 2 is a duplicate (first seen in row 2 (line 3))"]),
        ({0: "dog", 2: "bird", 5: "cat"}, (), ({"index": "2", "label": "dog"},),
         ["row 4 (line 5): index 2 is given twice with different labels ('bird' and 'dog') (first seen in row 2 (line 3))"]),
        ({0: "dog", 2: "bird", 5: "cat"}, (5,), (), ["1 queried index(es) have no row: 5"]),
        ({0: "dog", 5: "cat"}, (), (), ["row 2 (line 3): index 2 has no label"]),
        ({0: "dog", 2: "bird", 5: "cat"}, (), ({"index": "x7", "label": "dog"},), ["row 4 (line 5): index 'x7' is not an integer"]),
        ({0: "horse", 2: "", 5: "cat"}, (), (), ["label 'horse'", "index 2 has no label"]),  # every problem reported
        # a number longer than int() reads (4300 digits) was a traceback; its cell is shown cut short
        ({0: "dog", 2: "9" * 100_000, 5: "cat"}, (), (),
         ["row 2 (line 3): label '" + "9" * 39 + "... (100000 characters) for index 2 is not a class"]),
        ({0: "dog", 2: "bird", 5: "cat"}, (), ({"index": "9" * 100_000, "label": "dog"},),
         ["row 4 (line 5): index '" + "9" * 39 + "... (100000 characters) is too long to be an id"]),
        ({0: "dog", 2: "²", 5: "cat"}, (), (), ["row 2 (line 3): label '²' for index 2 is not a class"]),  # a digit int() refuses
        ({0: "dog", 2: "--1", 5: "cat"}, (), (), ["row 2 (line 3): label '--1' for index 2 is not a class"]),
    ],
)
def test_bad_answers_name_the_row(animals, tmp_path, labels, drop, extra, messages):
    path = write_query(tmp_path / "q.csv", indices=[0, 2, 5], scores=None, dataset=animals, round=0)
    fill_csv(path, labels, drop=drop, extra_rows=extra)
    with pytest.raises(AnswerFileError) as info:
        read_answers(path, expected_indices=[0, 2, 5], classes=animals.classes)
    assert isinstance(info.value, ValueError)
    for message in messages:
        assert message in str(info.value)
    assert len(info.value.problems) == len(messages)


def test_partial_answers_when_allowed(animals, tmp_path):
    path = write_query(tmp_path / "q.csv", indices=[0, 2, 5], scores=None, dataset=animals, round=0)
    fill_csv(path, {2: "bird"}, drop=(5,))
    assert read_answers(path, expected_indices=[0, 2, 5], classes=animals.classes, allow_partial=True) == {2: 2}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", "", "the file is empty"),
        ("noheader.csv", "id,answer\n1,cat\n", "lacks column(s) ['index', 'label']"),
        ("ragged.csv", "index,label\n0,cat,extra\n", "row 1 (line 2): has 3 field(s), the header has 2"),
        ("bad.json", "{not json", "line 1: malformed JSON"),
        ("scalar.json", "42", "expected a JSON list"),
        ("latin1.csv", b"index,label\n0,\xe9\n", "not UTF-8 text"),
        # what a spreadsheet saves in some locales: ';' between cells, or UTF-16 "Unicode text"
        ("semicolons.csv", "index;label\n0;cat\n", "lacks column(s) ['index', 'label']; expected at least 'index' "
                                                   "and 'label' (its cells are separated by ';': save it as "
                                                   "comma-separated CSV, UTF-8)"),
        ("utf16.csv", "index\tlabel\n0\tcat\n".encode("utf-16"), "; it is UTF-16 (a spreadsheet's 'Unicode "
                                                                     "text'): save it as CSV UTF-8"),
    ],
)
def test_malformed_files(tmp_path, name, content, message):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(AnswerFileError, match=None) as info:
        read_answers(path, expected_indices=[0], classes=["cat", "dog"])
    assert message in str(info.value) and str(path) in str(info.value)


def test_missing_answer_file(tmp_path):
    with pytest.raises(AnswerFileError, match="does not exist"):
        read_answers(tmp_path / "nope.csv", expected_indices=[0], classes=["a"])


def test_csv_with_bom_and_extra_columns(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("\ufeffIndex,Label,comment\n7,b,looks like b\n".encode("utf-8"))
    assert read_answers(path, expected_indices=[7], classes=["a", "b"]) == {7: 1}


# ----------------------------------------------------------------------------- thumbnails


def test_thumbnails_show_the_original_pixels(digits, tmp_path):
    from PIL import Image
    from sklearn.datasets import load_digits

    from activebayes.data import digits_split_indices

    reference = load_digits()
    train_rows, _ = digits_split_indices(reference.target)
    path = write_query(tmp_path / "q.csv", indices=[0, 7], scores=[1.0, 0.5], dataset=digits, round=0,
                       thumbnails_dir=tmp_path / "thumbs")
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        picture = np.asarray(Image.open(row["thumbnail"]))
        assert picture.shape == (64, 64)  # 8x8 digits upscaled 8x for a person to see
        expected = np.round(reference.images[train_rows[int(row["index"])]] / 16 * 255)
        np.testing.assert_allclose(picture[::8, ::8], expected, atol=1)


# ----------------------------------------------------------------------------- FileOracle


def test_file_oracle_round_trip_and_idempotent_import(animals, tmp_path):
    oracle = FileOracle(tmp_path / "job", animals)
    with pytest.raises(LabelsPendingError, match="2 item\\(s\\) have no label yet"):
        oracle.label([1, 4])
    query = oracle.query([1, 4], [0.7, 0.3], round=0)
    assert query.name == "query-0000.csv"
    assert oracle.pending().tolist() == [1, 4]
    fill_csv(query, {1: "bird", 4: "cat"})
    assert oracle.import_answers() == {1: 2, 4: 0}
    assert torch.equal(oracle(torch.tensor([4, 1])), torch.tensor([0, 2]))
    state = (tmp_path / "job" / "oracle.json").read_bytes()
    oracle.import_answers(query)  # the same file again: nothing changes
    assert (tmp_path / "job" / "oracle.json").read_bytes() == state
    # a fresh oracle over the same directory sees the imported labels (resume)
    again = FileOracle(tmp_path / "job", animals)
    assert again.labels == {1: 2, 4: 0} and again.pending().tolist() == []


def test_file_oracle_never_loses_labels(animals, tmp_path):
    oracle = FileOracle(tmp_path, animals, fmt="json")
    first = oracle.query([0, 1], round=0)
    document = json.loads(first.read_text())
    for item, label in zip(document["items"], ["cat", "dog"]):
        item["label"] = label
    first.write_text(json.dumps(document))
    oracle.import_answers()
    second = oracle.query([2, 3], round=1)
    state_before = (tmp_path / "oracle.json").read_bytes()
    # a bad answers file for round 1 is rejected as a whole; round 0's labels stay
    second.write_text(json.dumps({"2": "bird", "3": "unicorn"}))
    with pytest.raises(AnswerFileError, match="'unicorn'"):
        oracle.import_answers()
    assert (tmp_path / "oracle.json").read_bytes() == state_before
    assert FileOracle(tmp_path, animals).labels == {0: 0, 1: 1}
    # a conflicting relabel of round 0 needs overwrite=True
    first.write_text(json.dumps({"0": "bird", "1": "dog"}))
    with pytest.raises(AnswerFileError, match="index 0: already imported as 'cat', the file says 'bird'"):
        oracle.import_answers(first, round=0)
    assert oracle.labels == {0: 0, 1: 1}
    oracle.import_answers(first, round=0, overwrite=True)
    assert FileOracle(tmp_path, animals).labels == {0: 2, 1: 1}
    # partial answers for round 1 keep the rest pending
    second.write_text(json.dumps({"2": "bird", "3": None}))
    oracle.import_answers(allow_partial=True)
    assert oracle.pending().tolist() == [3]
    with pytest.raises(LabelsPendingError):
        oracle.label([2, 3])


def test_file_oracle_state_must_match_dataset(animals, tmp_path):
    FileOracle(tmp_path, animals).query([0], round=0)
    other = from_arrays(np.zeros((6, 1)), classes=["x", "y", "z"])
    with pytest.raises(ValueError, match="saved for classes"):
        FileOracle(tmp_path, other)
    with pytest.raises(ValueError, match="no query for round 5"):
        FileOracle(tmp_path, animals).import_answers(round=5)


@pytest.mark.parametrize("name", ["AnswerFileError", "FileOracle", "LabelsPendingError", "read_answers", "write_query"])
def test_moved_names_still_import_from_oracles_with_a_deprecation_warning(name):
    import activebayes.labelling
    import activebayes.oracles

    with pytest.warns(DeprecationWarning, match=f"activebayes.oracles.{name} moved to activebayes.labelling"):
        moved = getattr(activebayes.oracles, name)
    assert moved is getattr(activebayes.labelling, name)


def test_one_labels_pending_error_for_both_round_trips():
    from activebayes.labelling import ProjectError

    assert issubclass(LabelsPendingError, ProjectError) and issubclass(LabelsPendingError, RuntimeError)
