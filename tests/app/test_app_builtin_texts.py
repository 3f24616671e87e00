"""Built-in datasets of texts and table rows in the labelling app: what the page shows of each
item is the item the model learns from (checked against the raw data, read independently), the
page and the exports carry it, and a dataset of bare feature vectors is still refused."""

from __future__ import annotations

import csv
import json
import socket

import numpy as np
import pytest
import torch

from activebayes.app import WorkerThread, create_app
from activebayes.cli import main
from activebayes.data import ArrayDataset, DataError, dataset_contents, has_contents, load_dataset, register_dataset
from activebayes.data.datasets import DATASET_CONTENTS, DATASETS
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.labelling import LabellingProject
from tests.app.app_helpers import TOKEN, fast_config, make_project, with_sessions


def _fields(content: dict) -> dict[str, str]:
    assert content["kind"] == "row"
    return dict(content["fields"])


@pytest.mark.parametrize("name", ["iris", "wine", "breast_cancer"])
def test_sklearn_table_contents_are_the_raw_rows_of_the_standardised_items(name):
    from sklearn import datasets

    bunch = getattr(datasets, f"load_{name}")()
    dataset = load_dataset(name)
    contents = dataset_contents(name)
    assert len(contents) == len(dataset) and has_contents(name)
    raw_N_D = np.array([[float(v) for v in _fields(c).values()] for c in contents])
    assert list(_fields(contents[0])) == list(bunch.feature_names)
    # each shown row standardises (float64, population sd, over the training rows shown) to its item's features
    expected = (raw_N_D - raw_N_D.mean(0)) / raw_N_D.std(0)
    np.testing.assert_allclose(dataset.inputs.numpy(), expected, atol=2e-4)
    # and is a row of scikit-learn's table, as scikit-learn gives it
    rows = {tuple(np.round(r, 9)) for r in np.asarray(bunch.data, dtype=np.float64)}
    assert all(tuple(np.round(r, 9)) in rows for r in raw_N_D)
    test = dataset_contents(name, split="test")
    assert len(test) == len(load_dataset(name, split="test")) == len(bunch.data) - len(contents)


def test_rand_hie_contents_are_the_csv_rows_of_the_standardised_items():
    from activebayes.data.real_tables import RAND_HIE_COLUMNS, rand_hie_csv

    with open(rand_hie_csv(), newline="", encoding="utf-8") as handle:
        all_N_D = np.array([[float(row[c]) for c in RAND_HIE_COLUMNS] for row in csv.DictReader(handle)])
    mean, sd = all_N_D.mean(0), all_N_D.std(0)  # rand_hie standardises over all 20,190 rows
    for split in ("train", "test"):
        dataset, contents = load_dataset("rand_hie", split=split), dataset_contents("rand_hie", split=split)
        assert len(contents) == len(dataset)
        shown_N_D = np.array([[float(v) for v in _fields(c).values()] for c in contents])
        assert list(_fields(contents[0])) == list(RAND_HIE_COLUMNS)
        np.testing.assert_allclose(dataset.inputs.numpy(), (shown_N_D - mean) / sd, atol=1e-4)


def test_wordnet_contents_are_the_glosses_of_the_items():
    from activebayes.data.wordnet import read_wordnet_nouns, wordnet_item_ids

    try:
        nouns = read_wordnet_nouns()
    except (DataError, OSError):
        pytest.skip("WordNet (Debian package wordnet-base) is not installed")
    by_id = dict(zip(nouns.item_ids, zip(nouns.glosses, nouns.lemmas, strict=True), strict=True))
    for split in ("train", "test"):
        contents = dataset_contents("wordnet_nouns", split=split)
        ids = wordnet_item_ids(split=split)
        assert len(contents) == len(ids)
        for i in (0, 1, len(ids) // 2, len(ids) - 1):
            gloss, lemmas = by_id[ids[i]]
            assert contents[i] == {"kind": "text", "text": gloss, "fields": [["words", ", ".join(lemmas)]]}


def test_pictures_have_no_contents_and_bad_names_or_contents_are_errors():
    assert dataset_contents("digits") is None and not has_contents("digits")
    with pytest.raises(InvalidArgumentError, match="iris"):
        dataset_contents("irsi")
    with pytest.raises(InvalidArgumentError, match="split"):
        dataset_contents("iris", split="validation")
    name = "test_bad_contents"
    register_dataset(name, lambda split, **_: load_dataset("iris", split=split),
                     contents=lambda split, **_: [{"kind": "row", "fields": "not a list"}])
    try:
        with pytest.raises(InvalidTypeError, match=r"contents\[0\] must be"):
            dataset_contents(name)
        register_dataset(name, lambda split, **_: load_dataset("iris", split=split), replace=True)
        assert not has_contents(name)  # replaced without contents: the old ones are gone
    finally:
        DATASETS.unregister(name)
    with pytest.raises(InvalidTypeError, match="contents must be callable"):
        register_dataset("test_not_callable", lambda split, **_: None, contents="rows")
    assert "test_not_callable" not in DATASET_CONTENTS


def test_the_app_shows_a_builtin_table_as_rows_and_exports_them(tmp_path):
    project = make_project(tmp_path / "proj", dataset="iris")
    raw = {i: _fields(c) for i, c in enumerate(dataset_contents("iris"))}
    worker = WorkerThread(project.directory, poll=0.05).start()
    try:
        from starlette.testclient import TestClient

        with TestClient(create_app(project, token=TOKEN, notify=worker.wake),
                        headers={"Authorization": f"Bearer {TOKEN}"}) as plain:
            client = with_sessions(plain)
            state = client.get("/api/state").json()
            assert state["kind"] == "row" and state["source"] == "iris"
            item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
            position = project.index_of(item["id"])
            assert item["kind"] == "row" and item["image"] is None
            assert dict(item["content"]["fields"]) == raw[position]
            assert client.get(f"/api/items/{item['id']}/content").json()["fields"] == item["content"]["fields"]
            refused = client.get(f"/api/items/{item['id']}/image")
            assert refused.status_code == 404 and "/content" in refused.json()["error"]
            client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": "setosa"})
            exported = {r["key"]: r for r in client.get("/api/export/json").json()}
            assert exported[item["key"]]["label"] == "setosa"
            assert exported[item["key"]]["fields"] == raw[position]
            tasks = {t["data"]["activebayes_key"]: t for t in client.get("/api/export/labelstudio").json()}
            task = tasks[item["key"]]
            assert "image" not in task["data"] and "sepal length (cm)" in task["data"]["text"]
            assert task["annotations"][0]["result"][0]["to_name"] == "text"
    finally:
        worker.stop()
        project.close()
    assert not worker.errors, worker.errors


def test_query_files_of_a_builtin_table_carry_each_rows_text(tmp_path):
    project = LabellingProject.create(tmp_path / "proj", fast_config(dataset="wine"))
    try:
        result = project.query()
        with open(result.path, newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        raw = dataset_contents("wine")
        for row, position in zip(rows, result.indices, strict=True):
            shown = dict(line.split(": ", 1) for line in row["text"].splitlines())
            assert shown == _fields(raw[position]) and row["key"] == f"wine[{position}]"
    finally:
        project.close()


def test_label_accepts_builtin_texts_and_rows_but_refuses_bare_feature_vectors(tmp_path, capsys):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = str(busy.getsockname()[1])
    name = "test_bare_vectors"
    register_dataset(name, lambda split, **_: ArrayDataset(inputs=torch.randn(20, 5, generator=torch.Generator()
                                                                              .manual_seed(0)),
                                                           targets=torch.arange(20) % 2, classes=("a", "b"),
                                                           name=name))
    try:
        # a project of bare vectors made by `activebayes query` cannot be shown in the app either
        LabellingProject.create(tmp_path / "vectors", fast_config(dataset=name)).close()
        for args, needle in [
            (["label", tmp_path / "new", "--dataset", name], "are feature vectors of shape (5,) without either"),
            (["label", tmp_path / "vectors"], f"--dataset {name}: the labelling app shows"),
            # a dataset with contents gets past the check: the busy port is the error, found before the
            # project is made
            (["label", tmp_path / "rows", "--dataset", "breast_cancer", "--port", port, "--worker", "thread"],
             "--port 0"),
        ]:
            code = main([str(a) for a in args])
            err = capsys.readouterr().err
            lines = err.strip().splitlines()  # one line: a taken port is found before the first ranking
            assert code == 1 and len(lines) == 1 and needle in lines[0], err
        assert not (tmp_path / "new").exists() and not (tmp_path / "rows").exists()
        with LabellingProject.create(tmp_path / "rows", fast_config(dataset="breast_cancer")) as made:
            assert made.item_kind == "row" and json.loads(json.dumps(made.item_content(made.item_ids[0])))["fields"]
    finally:
        DATASETS.unregister(name)
        busy.close()
