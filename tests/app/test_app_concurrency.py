"""Four annotators at once against a real server: 1,000 answers, none lost, none twice, no shared lease."""

from __future__ import annotations

import threading

import httpx

from activebayes.data import load_dataset
from tests.app.app_helpers import TOKEN, LiveServer, make_project, with_sessions

ANNOTATORS = 4
ANSWERS_EACH = 250


def test_four_clients_give_a_thousand_answers(tmp_path):
    # random acquisition and a tiny fit: the test is about the store and the leases, not the model
    project = make_project(tmp_path / "proj", strategy="random", batch_size=100, lookahead=100)
    targets = load_dataset("digits").targets
    index_of = {item: project.index_of(item) for item in project.item_ids}
    server = LiveServer(project)
    acknowledged: dict[str, list[tuple[int, int]]] = {f"annotator-{k}": [] for k in range(ANNOTATORS)}
    failures: list[str] = []

    def annotate(name: str) -> None:
        with with_sessions(httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)) as http:
            item = http.post("/api/next", json={"annotator": name}).json()["item"]
            while len(acknowledged[name]) < ANSWERS_EACH:
                label = int(targets[index_of[item["id"]]])
                response = http.post("/api/answer", json={"annotator": name, "item": item["id"], "label": label})
                if response.status_code != 200:
                    failures.append(f"{name}: {response.status_code} {response.text}")
                    return
                acknowledged[name].append((item["id"], label))
                item = response.json()["item"]

    threads = [threading.Thread(target=annotate, args=(name,)) for name in acknowledged]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
    finally:
        server.stop()
    assert not failures, failures[:3]
    assert not server.worker.errors

    store = project.store
    given = [(name, item, label) for name, pairs in acknowledged.items() for item, label in pairs]
    assert len(given) == ANNOTATORS * ANSWERS_EACH
    answers = store.events(kind="answer")
    # none lost: every acknowledged answer is stored, by the annotator who gave it
    assert sorted((e.annotator, e.item, e.label) for e in answers) == sorted(given)
    # no item answered twice
    assert len({e.item for e in answers}) == len(answers) == 1000
    assert store.labels() == {item: label for _, item, label in given}
    store.check_labels()
    # no item leased to two annotators at once (intervals from the lease log)
    spans: dict[int, list[tuple[float, float, str]]] = {}
    for item, who, granted, expires, ended in store.lease_log():
        spans.setdefault(item, []).append((granted, min(expires, ended if ended is not None else expires), who))
    for item, intervals in spans.items():
        intervals.sort()
        for (_, end, who), (start, _, other) in zip(intervals, intervals[1:]):
            assert end <= start or who == other, f"item {item} leased to {who} and {other} at once"
    # the model kept retraining in the background meanwhile
    assert store.n_rounds() >= 5
