"""The labelling app over a table of texts (WordNet glosses): next, answer, undo, content, exports,
HTML kept as text, and multi-label answers."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from activebayes.app import WorkerThread, create_app
from activebayes.labelling import LabellingProject
from activebayes.labelling.interchange import label_studio_config
from tests.app.app_helpers import TOKEN, with_sessions
from tests.app.text_helpers import CLASSES, gloss_rows, make_text_project, write_csv

HTML_TEXT = '<b>bold</b> <img src=x onerror="alert(1)"> & <script>alert(2)</script> a dog'


def _client(project: LabellingProject) -> Iterator[TestClient]:
    worker = WorkerThread(project.directory, poll=0.05).start()
    app = create_app(project, token=TOKEN, notify=worker.wake)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield with_sessions(test_client)
    worker.stop()
    assert not worker.errors, worker.errors


@pytest.fixture
def rows():
    rows = gloss_rows(10)
    rows.append({"id": "html-1", "text": HTML_TEXT, "y": "animal"})
    return rows


@pytest.fixture
def text_project(tmp_path, rows) -> Iterator[LabellingProject]:
    project = make_text_project(tmp_path / "proj", write_csv(tmp_path / "glosses.csv", rows))
    yield project
    project.close()


@pytest.fixture
def text_client(text_project) -> Iterator[TestClient]:
    yield from _client(text_project)


def test_a_text_project_serves_texts_and_takes_answers_undo_and_exports(text_client, text_project, rows):
    by_id = {row["id"]: row for row in rows}
    state = text_client.get("/api/state").json()
    assert state["kind"] == "text" and state["multilabel"] is False and state["classes"] == list(CLASSES)
    assert state["source"] == str(text_project.config.table)

    first = text_client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    assert first["kind"] == "text" and first["image"] is None
    assert first["content"] == {"kind": "text", "text": by_id[first["key"]]["text"]}
    content = text_client.get(f"/api/items/{first['id']}/content").json()
    assert content == {"id": first["id"], "key": first["key"], "kind": "text", "text": by_id[first["key"]]["text"]}
    image = text_client.get(f"/api/items/{first['id']}/image")
    assert image.status_code == 404 and "/content" in image.json()["error"]

    truth = by_id[first["key"]]["y"]
    saved = text_client.post("/api/answer", json={"annotator": "ann", "item": first["id"], "label": truth}).json()
    assert saved["saved"]["label"] == truth and saved["item"]["id"] != first["id"]
    second = saved["item"]
    text_client.post("/api/answer", json={"annotator": "ann", "item": second["id"], "label": "food"})
    undone = text_client.post("/api/undo", json={"annotator": "ann"}).json()
    assert undone["undone"]["label"] == "food" and undone["item"]["id"] == second["id"]
    assert text_project.store.labels() == {first["id"]: CLASSES.index(truth)}

    exported = list(csv.DictReader(io.StringIO(text_client.get("/api/export/csv").text)))
    assert len(exported) == len(rows) and exported[0].keys() >= {"key", "label", "text"}
    labelled = {r["key"]: (r["label"], r["text"]) for r in exported if r["label"]}
    assert labelled == {first["key"]: (truth, by_id[first["key"]]["text"])}
    assert all(r["text"] == by_id[r["key"]]["text"] for r in exported)
    as_json = text_client.get("/api/export/json").json()
    assert {r["key"]: r["text"] for r in as_json} == {r["id"]: r["text"] for r in rows}
    tasks = text_client.get("/api/export/labelstudio").json()
    task = next(t for t in tasks if t["data"]["activebayes_key"] == first["key"])
    assert task["data"]["text"] == by_id[first["key"]]["text"] and "image" not in task["data"]
    assert task["annotations"][0]["result"] == [{"from_name": "label", "to_name": "text", "type": "choices",
                                                 "value": {"choices": [truth]}}]
    text_project.store.check_labels()


def test_html_in_a_text_is_returned_as_text(text_client, text_project):
    item = next(i for i in text_project.store.items() if i.key == "html-1")
    content = text_client.get(f"/api/items/{item.id}/content")
    assert content.headers["content-type"].startswith("application/json")
    assert content.json()["text"] == HTML_TEXT  # the very characters: the page sets them as textContent
    exported = text_client.get("/api/export/csv").text
    assert next(r for r in csv.DictReader(io.StringIO(exported)) if r["key"] == "html-1")["text"] == HTML_TEXT


def test_the_content_of_an_image_item_is_a_404(client, project):
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    assert item["kind"] == "image" and item["content"] is None
    reply = client.get(f"/api/items/{item['id']}/content")
    assert reply.status_code == 404 and "/image" in reply.json()["error"]
    assert client.get("/api/items/999999/content").status_code == 404


def test_label_studio_export_imports_back_into_a_text_project(tmp_path, text_client, text_project, rows):
    items = []
    for label in ("animal", "plant", "food"):
        item = text_client.post("/api/next", json={"annotator": "ann"}).json()["item"]
        text_client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": label, "next": False})
        items.append((item["key"], label))
    exported = tmp_path / "tasks.json"
    exported.write_text(text_client.get("/api/export/labelstudio").text, encoding="utf-8")
    # the same texts in another project: Label Studio's answers come back by item id and content hash
    other = make_text_project(tmp_path / "other", text_project.config.table)
    try:
        result = other.import_answers(exported)
        assert len(result.new) == 3
        assert {other.store.item(i).key: other.classes[y] for i, y in other.store.labels().items()} == dict(items)
    finally:
        other.close()


# --------------------------------------------------------------------------- multi-label


@pytest.fixture
def multi_project(tmp_path, rows) -> Iterator[LabellingProject]:
    project = make_text_project(tmp_path / "multi", write_csv(tmp_path / "glosses.csv", rows),
                                table_options={"multilabel": True})
    yield project
    project.close()


@pytest.fixture
def multi_client(multi_project) -> Iterator[TestClient]:
    yield from _client(multi_project)


def test_multilabel_answers_are_sets_of_classes(tmp_path, multi_client, multi_project):
    assert multi_client.get("/api/state").json()["multilabel"] is True
    assert multi_project.config.strategy == "badge"  # the default, run as multilabel_badge by the loop
    assert multi_project.build_loop()._strategy.name == "multilabel_badge"
    first = multi_client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    empty = multi_client.post("/api/answer", json={"annotator": "ann", "item": first["id"], "labels": []})
    assert empty.status_code == 422
    assert empty.json()["error"] == f"item {first['id']}: a multi-label answer needs at least one class, got none"
    single = multi_client.post("/api/answer", json={"annotator": "ann", "item": first["id"], "label": "food"})
    assert single.status_code == 400 and "labels" in single.json()["error"]
    unknown = multi_client.post("/api/answer", json={"annotator": "ann", "item": first["id"], "labels": ["fish"]})
    assert unknown.status_code == 422 and "fish" in unknown.json()["error"]
    assert multi_project.store.events() == []  # nothing stored by a refused answer

    saved = multi_client.post("/api/answer", json={"annotator": "ann", "item": first["id"],
                                                   "labels": ["plant", "food"]}).json()
    assert saved["saved"]["labels"] == ["food", "plant"] and saved["saved"]["label"] == "food|plant"
    assert multi_project.store.labels() == {first["id"]: 0b110}
    second = saved["item"]
    multi_client.post("/api/answer", json={"annotator": "ann", "item": second["id"], "labels": [0]})
    undone = multi_client.post("/api/undo", json={"annotator": "ann"}).json()
    assert undone["undone"]["label"] == "animal" and undone["item"]["id"] == second["id"]
    assert multi_project.store.class_counts() == [0, 1, 1]

    exported = {r["key"]: r for r in multi_client.get("/api/export/json").json()}
    assert exported[first["key"]]["labels"] == ["food", "plant"] and exported[second["key"]]["labels"] == []
    as_csv = {r["key"]: r for r in csv.DictReader(io.StringIO(multi_client.get("/api/export/csv").text))}
    assert as_csv[first["key"]]["label"] == "food|plant"
    tasks = multi_client.get("/api/export/labelstudio").json()
    task = next(t for t in tasks if t["data"]["activebayes_key"] == first["key"])
    assert task["annotations"][0]["result"][0]["value"]["choices"] == ["food", "plant"]
    assert 'choice="multiple"' in label_studio_config(CLASSES, kind="text", multilabel=True)
    # Label Studio's answers come back as sets
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    other = make_text_project(tmp_path / "other", multi_project.config.table, table_options={"multilabel": True})
    try:
        other.import_answers(path)
        assert {other.store.item(i).key: y for i, y in other.store.labels().items()} == {first["key"]: 0b110}
    finally:
        other.close()


def test_multilabel_answers_reach_the_loop_as_indicators(multi_project):
    loop, proposal = multi_project.advance(min_pending=10**12)
    assert loop.multilabel
    masks = [0b001, 0b011, 0b100, 0b110, 0b111]
    for position, mask in zip(proposal.indices, masks, strict=True):
        multi_project.store.answer(multi_project.item_ids[position], mask, "ann")
    loop, following = multi_project.advance(loop)
    assert loop.round == 1 and not following.stopped
    labels = loop.pool.labels_of(loop.pool.labelled_indices)
    assert labels.shape == (5, 3)
    assert sorted(map(tuple, labels.tolist())) == sorted([(1, 0, 0), (1, 1, 0), (0, 0, 1), (0, 1, 1), (1, 1, 1)])
    assert multi_project.loop_is_current(loop)
    rebuilt = multi_project.build_loop()  # replayed from the store: the same labels
    assert rebuilt.pool.labels_of(rebuilt.pool.labelled_indices).tolist() == labels.tolist()


def test_a_multilabel_project_measures_the_stopping_signals_on_label_decisions(tmp_path, rows):
    """--stop-when and --audit-fraction on a --multilabel project: the rounds record the signals
    (kappa and the remaining change on label decisions, the audited answers as whole label
    sets) and the dashboard's stopping panel reads them."""
    from activebayes.app.stopping_panel import stopping_state
    from activebayes.stopping import ESTIMATED_ACCURACY, EXPECTED_ACCURACY, REMAINING_CHANGE, STABLE_PREDICTIONS

    project = make_text_project(tmp_path / "multi", write_csv(tmp_path / "glosses.csv", rows),
                                table_options={"multilabel": True}, stop_when=("remaining_change",),
                                audit_fraction=0.4)
    try:
        loop, proposal = project.advance(min_pending=10**12)
        for _ in range(2):
            for k, position in enumerate(proposal.indices):
                project.store.answer(project.item_ids[position], 0b001 + (k % 3) * 0b010, "ann")
            loop, proposal = project.advance(loop)
        assert loop.round == 2 and len(proposal.audit) == 2  # 40% of 5 answers drawn uniformly
        assert "micro-F1" in proposal.signals[EXPECTED_ACCURACY]["detail"]
        assert proposal.signals[STABLE_PREDICTIONS]["value"] is not None  # two models compared
        audit = loop.history[-1].signals["audit"]
        assert audit["n"] == 2 and 0 <= audit["correct"] <= 2
        state = stopping_state(proposal.signals, [r.signals for r in loop.history], round=loop.round,
                               n_labelled=proposal.n_labelled, stop_when=project.config.stop_when)
        texts = {s["name"]: s["text"] for s in state["signals"]}
        assert "micro-F1" in texts[EXPECTED_ACCURACY] and not state["stop"]
        titles = {s["name"]: s["title"] for s in state["signals"]}
        assert "accuracy" in titles[EXPECTED_ACCURACY]  # a single-label heading on a multi-label project
        state = stopping_state(proposal.signals, [r.signals for r in loop.history], round=loop.round,
                               n_labelled=proposal.n_labelled, stop_when=project.config.stop_when, multilabel=True)
        titles = {s["name"]: s["title"] for s in state["signals"]}
        assert titles[EXPECTED_ACCURACY] == "The model's own micro-F1 estimate"
        assert titles[REMAINING_CHANGE].startswith("Label decisions settled")
        assert "label sets" in titles[ESTIMATED_ACCURACY]
        # and the dashboard's state carries them (the server passes the project's kind)
        from activebayes.app.server import _stopping_panel

        panel = _stopping_panel(project.store, project.config.stop_when, multilabel=project.store.multilabel)
        assert {s["name"]: s["title"] for s in panel["signals"]}[EXPECTED_ACCURACY] == titles[EXPECTED_ACCURACY]
    finally:
        project.close()
