"""The label store: events and derived labels, leases, item identity, durability settings, exports."""

from __future__ import annotations

import csv
import io
import json
import random
import sqlite3

import pytest

from activebayes.labelstore import (
    AlreadyLabelledError,
    ItemFile,
    LabelStore,
    LabelStoreError,
    LeaseConflictError,
    NothingToUndoError,
    UnknownItemError,
    export_text,
    label_studio_config,
    label_studio_tasks,
    read_label_studio,
)

CLASSES = ("cat", "dog", "bird")


def sha(text: str) -> str:
    return (text.encode().hex() * 64)[:64]


@pytest.fixture
def store(tmp_path):
    s = LabelStore.create(tmp_path / "labels.sqlite", classes=CLASSES)
    s.sync_items([ItemFile(f"img_{i}.png", sha(f"content {i}")) for i in range(8)])
    yield s
    s.close()


def test_durability_settings(store):
    raw = sqlite3.connect(store.path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    store.set_synchronous("normal")
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1
    with pytest.raises(LabelStoreError, match="'full' or 'normal'"):
        store.set_synchronous("off")


def test_create_refuses_bad_classes_and_existing_files(tmp_path):
    with pytest.raises(LabelStoreError, match="two or more distinct"):
        LabelStore.create(tmp_path / "a.sqlite", classes=["cat", "cat"])
    LabelStore.create(tmp_path / "b.sqlite", classes=["x", "y"]).close()
    with pytest.raises(FileExistsError):
        LabelStore.create(tmp_path / "b.sqlite", classes=["x", "y"])
    with pytest.raises(FileNotFoundError):
        LabelStore.open(tmp_path / "missing.sqlite")


class ReferenceLabels:
    """An independent model of the event semantics: a plain list of events, scanned."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def answer(self, item, label, who):
        self.events.append({"kind": "answer", "item": item, "label": label, "who": who, "undone": False})

    def skip(self, item, who):
        self.events.append({"kind": "skip", "item": item, "who": who, "undone": False})

    def undo(self, who):
        for event in reversed(self.events):
            if event["who"] == who and event["kind"] in ("answer", "skip") and not event["undone"]:
                event["undone"] = True
                return event
        return None

    def labels(self):
        out = {}
        for event in self.events:
            if event["kind"] == "answer" and not event["undone"]:
                out[event["item"]] = event["label"]
        return out


def test_labels_follow_the_events_like_a_reference(store):
    rng = random.Random(7)
    reference = ReferenceLabels()
    items = store.item_ids()
    for step in range(300):
        who = rng.choice(["ann", "bob", "cy"])
        op = rng.random()
        if op < 0.5:
            item, label = rng.choice(items), rng.randrange(3)
            store.answer(item, label, who, overwrite=True, now=1000.0 + step)
            reference.answer(item, label, who)
        elif op < 0.65:
            item = rng.choice(items)
            store.skip(item, who, now=1000.0 + step)
            reference.skip(item, who)
        else:
            expected = reference.undo(who)
            if expected is None:
                with pytest.raises(NothingToUndoError):
                    store.undo(who, now=1000.0 + step)
            else:
                _, target = store.undo(who, lease_seconds=0.5, now=1000.0 + step)
                assert (target.kind, target.item) == (expected["kind"], expected["item"])
        assert store.labels() == reference.labels()
    store.check_labels()
    kinds = [e.kind for e in store.events()]
    assert kinds.count("answer") == sum(e["kind"] == "answer" for e in reference.events)


def test_answer_validation_writes_nothing(store):
    item = store.item_ids()[0]
    store.answer(item, 1, "ann")
    before = (store.events(), store.labels())
    for call, error in [
        (lambda: store.answer(item, 2, "bob"), AlreadyLabelledError),
        (lambda: store.answer(9999, 0, "bob"), UnknownItemError),
        (lambda: store.answer("img_1.png", 0, "bob"), UnknownItemError),
        (lambda: store.answer(store.item_ids()[1], 3, "bob"), LabelStoreError),
        (lambda: store.answer(store.item_ids()[1], True, "bob"), LabelStoreError),
        (lambda: store.answer(store.item_ids()[1], 0, ""), LabelStoreError),
        (lambda: store.answer(store.item_ids()[1], 0, "x" * 65), LabelStoreError),
    ]:
        with pytest.raises(error):
            call()
    assert (store.events(), store.labels()) == before


def test_leases_keep_annotators_apart_and_expire(store):
    order = store.item_ids()
    a = store.lease_next("ann", order, seconds=10, now=0.0)
    b = store.lease_next("bob", order, seconds=10, now=1.0)
    assert a == order[0] and b == order[1]
    assert store.lease_next("ann", order, seconds=10, now=2.0) == a  # ann keeps hers (renewed)
    with pytest.raises(LeaseConflictError):
        store.answer(a, 0, "bob", now=3.0)
    # ann walks away: after the expiry bob may take her item
    assert store.lease_next("cy", [a, *order], seconds=10, now=13.0) == a
    with pytest.raises(LeaseConflictError):
        store.answer(a, 0, "ann", now=14.0)
    store.answer(a, 2, "cy", now=15.0)
    assert store.label_of(a) == 2 and all(lease.item != a for lease in store.leases(now=15.0))
    # a skip hides the item from this annotator only
    store.skip(b, "bob", now=16.0)
    assert store.lease_next("bob", order, seconds=10, now=17.0) not in (a, b)
    assert store.lease_next("dee", order, seconds=10, now=18.0) == b
    # no two lease intervals of one item overlap
    intervals: dict[int, list[tuple[float, float]]] = {}
    for item, _who, granted, expires, ended in store.lease_log():
        intervals.setdefault(item, []).append((granted, min(expires, ended if ended is not None else expires)))
    for spans in intervals.values():
        spans.sort()
        assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_undo_gives_the_item_back_and_stops_at_nothing(store):
    order = store.item_ids()
    item = store.lease_next("ann", order, now=0.0)
    store.answer(item, 1, "ann", now=1.0)
    assert store.lease_next("ann", order, now=2.0) != item
    undo, target = store.undo("ann", now=3.0)
    assert target.item == item and undo.target == target.id
    assert store.label_of(item) is None
    assert store.lease_next("ann", order, now=4.0) == item  # back to the one who took it back
    with pytest.raises(NothingToUndoError):
        store.undo("ann", now=5.0)


def test_sync_items_keeps_each_label_with_its_content(store):
    ids = {item.key: item.id for item in store.items()}
    store.answer(ids["img_0.png"], 0, "ann")
    store.answer(ids["img_1.png"], 1, "ann")
    store.answer(ids["img_2.png"], 2, "ann")
    files = [ItemFile(f"img_{i}.png", sha(f"content {i}")) for i in range(8)]
    files[0] = ItemFile("renamed.png", sha("content 0"))            # moved
    files[1] = ItemFile("img_1.png", sha("new content of 1"))       # changed
    del files[2]                                                    # removed
    files.append(ItemFile("img_9.png", sha("content 9")))           # added
    changes = store.sync_items(files)
    assert changes.moved == [("img_0.png", "renamed.png")]
    assert changes.changed == ["img_1.png"] and changes.labelled_changed == 1
    assert changes.removed == ["img_2.png"] and changes.labelled_removed == 1
    assert changes.added == ["img_9.png"]
    by_key = {item.key: item.id for item in store.items()}
    assert store.labels() == {by_key["renamed.png"]: 0}
    assert store.labels(present_only=False) == {ids["img_0.png"]: 0, ids["img_1.png"]: 1, ids["img_2.png"]: 2}
    assert by_key["img_1.png"] != ids["img_1.png"]  # new content, new item, no label
    # the removed image comes back: so does its label
    back = store.sync_items([*files, ItemFile("img_2.png", sha("content 2"))])
    assert back.returned == ["img_2.png"] and store.label_of(ids["img_2.png"]) == 2
    assert len(store.labels()) == 2
    assert not store.sync_items([*files, ItemFile("img_2.png", sha("content 2"))]).any


def test_rounds_and_uncommitted(store):
    items = store.item_ids()
    store.answer(items[3], 0, "ann")
    store.answer(items[1], 1, "ann")
    assert list(store.uncommitted()) == [items[3], items[1]]  # the order they were given
    store.save_round(0, {"round": 0, "acquired": [items[3], items[1]]}, [(items[3], 0), (items[1], 1)],
                     {"round": 1, "ranking": [items[5]]})
    assert store.uncommitted() == {} and store.n_rounds() == 1
    assert store.committed() == {items[3]: (0, 0), items[1]: (0, 1)}
    assert store.latest_proposal() == (1, {"round": 1, "ranking": [items[5]]})
    with pytest.raises(LabelStoreError, match="round 3 cannot be committed"):
        store.save_round(3, {}, [])


def test_exports_one_row_per_item(store, tmp_path):
    items = store.item_ids()
    store.answer(items[2], 1, "ann")
    rows = store.export_rows(root=tmp_path)
    assert len(rows) == 8 and {r["key"] for r in rows} == {f"img_{i}.png" for i in range(8)}
    labelled = [r for r in rows if r["label"]]
    assert labelled == [next(r for r in rows if r["item"] == items[2])]
    assert labelled[0]["label"] == "dog" and labelled[0]["annotator"] == "ann"
    assert labelled[0]["path"] == str(tmp_path / labelled[0]["key"])
    parsed = list(csv.DictReader(io.StringIO(export_text(rows, "csv"))))
    assert [r["label"] for r in parsed] == [r["label"] for r in rows]
    assert json.loads(export_text(rows, "json"))[0]["key"] == rows[0]["key"]


def test_label_studio_round_trip_and_matching(store, tmp_path):
    items = store.item_ids()
    store.answer(items[0], 2, "ann")
    store.answer(items[4], 0, "ann")
    tasks = label_studio_tasks(store.export_rows())
    labelled = [t for t in tasks if t["annotations"]]
    assert len(tasks) == 8 and len(labelled) == 2
    result = labelled[0]["annotations"][0]["result"][0]
    assert result["type"] == "choices" and result["from_name"] == "label" and result["to_name"] == "image"
    assert labelled[0]["data"]["image"].startswith("/data/local-files/?d=img_")
    assert '<Choice value="bird"/>' in label_studio_config(CLASSES)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(tasks))
    found = read_label_studio(path, items=store.items(), classes=CLASSES)
    assert found.labels == {items[0]: 2, items[4]: 0} and found.unannotated == 6 and not found.problems
    # tasks made in Label Studio itself: matched by the file the image points at
    foreign = [
        {"id": 1, "data": {"image": "/data/local-files/?d=photos/img_3.png"},
         "annotations": [{"result": [{"type": "choices", "value": {"choices": ["dog"]}}]}]},
        {"id": 2, "data": {"image": "/data/upload/7/1a2b3c4d-img_5.png"},
         "annotations": [{"was_cancelled": True, "result": []},
                         {"result": [{"type": "choices", "value": {"choices": ["cat"]}}]}]},
        {"id": 3, "data": {"image": "https://example.org/img_6.png"},
         "annotations": [{"result": [{"type": "choices", "value": {"choices": ["horse"]}}]}]},
        {"id": 4, "data": {"image": "/data/upload/1/unknown.png"},
         "annotations": [{"result": [{"type": "choices", "value": {"choices": ["cat"]}}]}]},
    ]
    path.write_text(json.dumps(foreign))
    found = read_label_studio(path, items=store.items(), classes=CLASSES)
    assert found.labels == {items[3]: 1, items[5]: 0}
    assert len(found.problems) == 2
    assert "'horse' is not a class" in found.problems[0] and "unknown.png" in found.problems[1]


def test_prequential_scores_are_accuracy_or_micro_f1_over_label_decisions(tmp_path, store):
    """The app's held-out figure: the accuracy of a single-label store; the micro-F1 of a
    multi-label store's label decisions (class by class), not whole sets matched exactly."""
    for item, (label, predicted, round_) in zip(store.item_ids(), [(0, 0, 1), (1, 2, 1), (2, 2, 2), (0, 1, 2)],
                                                strict=False):
        store.answer(item, label, "ann", round=round_, predicted=predicted)
    assert store.prequential_scores(last=50) == ({1: (2, 0.5), 2: (2, 0.5)}, (4, 0.5))
    assert store.prequential_scores(last=2) == ({1: (2, 0.5), 2: (2, 0.5)}, (2, 0.5))  # the latest two

    multi = LabelStore.create(tmp_path / "multi.sqlite", classes=("a", "b", "c", "d"), multilabel=True)
    try:
        multi.sync_items([ItemFile(f"x{i}", sha(f"x {i}")) for i in range(6)])
        assert multi.prequential_scores() == ({}, (0, None))
        # (answer, predicted, round) as bitmasks: no set is predicted exactly, yet most decisions are right
        answers = [(0b0011, 0b0001, 1),   # TP 1, FN 1
                   (0b0100, 0b0110, 1),   # TP 1, FP 1
                   (0b1001, 0b1001, 2),   # TP 2 (the one exact set)
                   (0b0010, 0b0000, 2),   # FN 1: nothing predicted
                   (0b1111, 0b0111, 2)]   # TP 3, FN 1
        for item, (label, predicted, round_) in zip(multi.item_ids(), answers, strict=False):
            multi.answer(item, label, "ann", round=round_, predicted=predicted)
        multi.answer(multi.item_ids()[5], 0b0001, "ann", round=2, predicted=0b1110)  # TP 0, FP 3, FN 1 ...
        multi.undo("ann")  # ... taken back: not counted

        def micro_f1(rows):
            tp = sum(bin(y & p).count("1") for y, p, _ in rows)
            fp = sum(bin(p & ~y).count("1") for y, p, _ in rows)
            fn = sum(bin(y & ~p).count("1") for y, p, _ in rows)
            return 2 * tp / (2 * tp + fp + fn)

        per_round, recent = multi.prequential_scores(last=50)
        assert per_round == {1: (2, pytest.approx(4 / 6)), 2: (3, pytest.approx(10 / 12))}
        assert recent == (5, pytest.approx(micro_f1(answers))) and recent[1] == pytest.approx(14 / 18)
        assert multi.prequential_scores(last=2)[1] == (2, pytest.approx(micro_f1(answers[-2:])))
        assert multi.prequential(last=50)[1] == (5, 1)  # the exact sets, as before: 1 of 5
    finally:
        multi.close()
