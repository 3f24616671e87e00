"""The labelling app's HTTP API: start, next, answer, undo, skip, export, status, and clean errors."""

from __future__ import annotations

import csv
import io
import json

import pytest
from starlette.testclient import TestClient

from activebayes.app import DEFAULT_MAX_BODY, create_app
from activebayes.data import load_dataset

from tests.app.app_helpers import TOKEN, snapshot, wait_for

DIGITS = load_dataset("digits")


def truth(project, item: int) -> str:
    return project.classes[int(DIGITS.targets[project.index_of(item)])]


def test_next_answer_skip_undo(client, project):
    first = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    assert first["image"] == f"/api/items/{first['id']}/image" and first["rank"] == 0 and first["in_batch"]
    assert "random" in first["why"] and first["probs"] is None  # no model before the first labels
    # the same annotator asking again keeps the same item; another annotator gets another one
    assert client.post("/api/next", json={"annotator": "ann"}).json()["item"]["id"] == first["id"]
    other = client.post("/api/next", json={"annotator": "bob"}).json()["item"]
    assert other["id"] != first["id"]

    saved = client.post("/api/answer", json={"annotator": "ann", "item": first["id"], "label": truth(project, first["id"])})
    assert saved.status_code == 200
    body = saved.json()
    assert body["saved"]["label"] == truth(project, first["id"]) and body["item"]["id"] not in (first["id"], other["id"])
    assert project.store.label_of(first["id"]) == project.classes.index(truth(project, first["id"]))
    second = body["item"]
    # a label may also be given as a class id
    by_id = client.post("/api/answer", json={"annotator": "ann", "item": second["id"], "label": 3}).json()
    assert project.store.label_of(second["id"]) == 3
    assert body["you"]["labelled"] == 1 and by_id["you"] == {"annotator": "ann", "labelled": 2}  # the stored count
    third = by_id["item"]
    skipped = client.post("/api/skip", json={"annotator": "ann", "item": third["id"]}).json()
    assert skipped["skipped"]["item"] == third["id"] and skipped["item"]["id"] != third["id"]

    # undo takes back the latest first: the skip, then the answer; each item comes back
    undone = client.post("/api/undo", json={"annotator": "ann"}).json()
    assert undone["undone"]["kind"] == "skip" and undone["item"]["id"] == third["id"]
    undone = client.post("/api/undo", json={"annotator": "ann"}).json()
    assert undone["undone"] == {**undone["undone"], "kind": "answer", "item": second["id"], "label": "3"}
    assert undone["item"]["id"] == second["id"] and project.store.label_of(second["id"]) is None
    assert undone["you"]["labelled"] == 1
    kinds = [(e.kind, e.item, e.annotator) for e in project.store.events()]
    assert kinds == [("answer", first["id"], "ann"), ("answer", second["id"], "ann"), ("skip", third["id"], "ann"),
                     ("undo", third["id"], "ann"), ("undo", second["id"], "ann")]
    project.store.check_labels()


def test_items_are_served_in_ranking_order_and_the_model_retrains(client, project):
    """The batch first, then the lookahead while the next round trains; a new ranking once it is stored."""
    stored = project.store.proposal(0)
    order = stored["indices"] + [i for i in stored["ranking"] if i not in stored["indices"]]
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    served = []
    for _ in range(5):
        served.append(item["id"])
        item = client.post("/api/answer", json={"annotator": "ann", "item": item["id"],
                                                "label": truth(project, item["id"])}).json()["item"]
    assert served == order[:5] and item["id"] == order[5]  # served at once from the lookahead
    state = wait_for(lambda: (s := client.get("/api/state").json())["rounds"] == 1 and s["status"]["state"] == "ready" and s)
    assert state["round"] == 1 and state["counts"]["labelled"] == 5
    assert state["status"]["last"]["labels"] == 5 and state["status"]["last"]["total"] > 0
    # the next item comes from round 1's ranking, with the model's probabilities and score
    client.post("/api/skip", json={"annotator": "ann", "item": item["id"]})
    fresh = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    proposal = project.store.proposal(1)
    assert fresh["round"] == 1 and fresh["id"] == proposal["indices"][0]
    assert [p["p"] for p in fresh["probs"]] == pytest.approx(proposal["probs"][0])
    assert fresh["score"] == pytest.approx(proposal["ranking_scores"][0])
    assert fresh["why"].startswith(f"{proposal['strategy']} score ") and proposal["strategy"] == "badge"


def test_prequential_accuracy_matches_the_stored_predictions(client, project):
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    for _ in range(5):
        item = client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": truth(project, item["id"])},
                           ).json()["item"]
    wait_for(lambda: client.get("/api/state").json()["rounds"] == 1)
    client.post("/api/skip", json={"annotator": "ann", "item": item["id"]})
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    for _ in range(8):  # labelled while round 1's model ranks them: its predictions are held out
        item = client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": truth(project, item["id"])},
                           ).json()["item"]
    state = client.get("/api/state").json()
    # reference: each answer against the stored probabilities of the round whose ranking served it
    answered = [e for e in project.store.active_answers() if e.predicted is not None]
    assert len(answered) == 8 and {e.round for e in answered} <= {1, 2}
    correct: dict[int, list[bool]] = {}
    for event in answered:
        proposal = project.store.proposal(event.round)
        probs = dict(zip(proposal["ranking"], proposal["probs"], strict=True))[event.item]
        assert event.predicted == max(range(10), key=probs.__getitem__)
        correct.setdefault(event.round, []).append(event.predicted == event.label)
    overall = [c for values in correct.values() for c in values]
    assert state["accuracy"]["prequential"] == pytest.approx(sum(overall) / len(overall))
    for round_, values in correct.items():
        point = next(p for p in state["curve"] if p["round"] == round_)
        assert point["prequential_n"] == len(values)
        assert point["prequential_accuracy"] == pytest.approx(sum(values) / len(values))
    assert all(0 <= p["test_accuracy"] <= 1 for p in state["curve"])  # the digits test split


def test_export_formats(client, project):
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": "7"})
    response = client.get("/api/export/csv")
    assert response.status_code == 200 and "attachment" in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert len(rows) == len(DIGITS) and [(r["item"], r["label"], r["annotator"]) for r in rows if r["label"]] == [
        (str(item["id"]), "7", "ann")]
    data = client.get("/api/export/json").json()
    assert [r["label_id"] for r in data if r["label"]] == [7]
    tasks = client.get("/api/export/labelstudio").json()
    annotated = [t for t in tasks if t["annotations"]]
    assert len(tasks) == len(DIGITS) and annotated[0]["annotations"][0]["result"][0]["value"]["choices"] == ["7"]


def test_pages_take_the_token_from_the_address_and_the_api_only_from_headers(project):
    app = create_app(project, token=TOKEN)
    with TestClient(app) as browser:
        page = browser.get("/")  # the page shell holds no data: served without the token (a reload works)
        assert page.status_code == 200 and "set-cookie" not in page.headers
        assert browser.get("/?token=wrong").status_code == 401  # a wrong address is refused at once
        page = browser.get(f"/dashboard?token={TOKEN}", follow_redirects=False)
        assert page.status_code == 200 and "<svg id=\"curve\"" in page.text
        assert "set-cookie" not in page.headers  # no cookie: other services on this host never see the token
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert browser.get("/static/label.js").status_code == 200
        assert browser.get("/api/state").status_code == 401
        # the query string is never accepted on the API, even with the right token
        refused = browser.get(f"/api/state?token={TOKEN}")
        assert refused.status_code == 401 and "header" in refused.json()["error"]
        # no redirect anywhere, so none off-site (`GET //evil.example/?token=T` used to answer 303 to it)
        for path in ("//evil.example/", "/", "/dashboard"):
            response = browser.get(f"http://testserver{path}?token={TOKEN}", follow_redirects=False)
            assert not 300 <= response.status_code < 400 and "location" not in response.headers
    for headers in ({"X-Token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": f"bearer {TOKEN}"}):
        with TestClient(app, headers=headers) as scripted:
            assert scripted.get("/api/state").json()["classes"] == list(project.classes)


def _near_misses(token: str) -> dict[str, str]:
    return {"empty": "", "prefix": token[:8], "all but the last character": token[:-1],
            "last character changed": token[:-1] + ("x" if token[-1] != "x" else "y"),
            "one character more": token + "0", "first character changed": ("x" if token[0] != "x" else "y") + token[1:]}


@pytest.mark.parametrize("way", ["bearer", "x-token", "cookie", "query"])
def test_every_near_miss_of_the_token_is_refused_by_every_way_it_can_come(project, way):
    """A guard comparing a prefix, the first 8 characters or all but the last would let one of these in."""
    app = create_app(project, token=TOKEN)
    with TestClient(app) as http:
        for what, candidate in _near_misses(TOKEN).items():
            headers, params = {}, {}
            if way == "bearer":
                headers["Authorization"] = f"Bearer {candidate}"
            elif way == "x-token":
                headers["X-Token"] = candidate
            elif way == "cookie":
                headers["Cookie"] = f"activebayes_token_{http.base_url.port or 80}={candidate}; activebayes_token={candidate}"
            else:
                params["token"] = candidate
            for method, path in (("GET", "/api/state"), ("POST", "/api/next"), ("GET", "/api/export/csv"),
                                 ("GET", "/api/items/1/image")):
                response = http.request(method, path, headers=headers, params=params, json={} if method == "POST" else None)
                assert response.status_code == 401, (way, what, method, path, response.status_code)
            if way == "query":  # on a page: a wrong token in the address is refused too
                assert http.get("/", params=params).status_code == 401, what


BAD_REQUESTS = [
    # (name, method, path, body or raw bytes, headers, status, words in the message)
    ("wrong token", "POST", "/api/answer", {"annotator": "ann", "item": "ITEM", "label": "1"},
     {"Authorization": "Bearer nope"}, 401, "token"),
    ("no token", "GET", "/api/state", None, {"Authorization": ""}, 401, "token"),
    ("unknown class", "POST", "/api/answer", {"annotator": "ann", "item": "ITEM", "label": "banana"}, {}, 422,
     "expected a class name ('0', '1', '2', "),
    # the digits' class names are numerals: the message says a number is an id
    ("class id out of range", "POST", "/api/answer", {"annotator": "ann", "item": "ITEM", "label": 10}, {}, 422,
     "label 10 is not a class of this project; expected a class name ('0', '1', '2', '3', '4', '5', '6', '7', '8', "
     "'9') or an id 0..9 (a number is an id, a string a name)"),
    ("unknown item", "POST", "/api/answer", {"annotator": "ann", "item": 987654, "label": "1"}, {}, 404, "no item"),
    ("a path for an item id", "POST", "/api/answer", {"annotator": "ann", "item": "../../etc/passwd", "label": "1"},
     {}, 400, "integer item id"),
    ("a path in the image URL", "GET", "/api/items/..%2F..%2Fetc%2Fpasswd/image", None, {}, 404, "no such"),
    ("an absolute path in the image URL", "GET", "/api/items//etc/passwd/image", None, {}, 404, "no such"),
    ("unknown item image", "GET", "/api/items/987654/image", None, {}, 404, "no item"),
    ("oversized body", "POST", "/api/answer", b'{"annotator": "' + b"a" * (DEFAULT_MAX_BODY + 10) + b'"}',
     {"content-type": "application/json"}, 413, "larger than"),
    ("not JSON", "POST", "/api/answer", b"item=1&label=2", {"content-type": "application/x-www-form-urlencoded"}, 415,
     "application/json"),
    ("malformed JSON", "POST", "/api/answer", b"{not json", {"content-type": "application/json"}, 400, "not valid JSON"),
    ("JSON list", "POST", "/api/answer", b"[1, 2]", {"content-type": "application/json"}, 400, "JSON object"),
    ("no label", "POST", "/api/answer", {"annotator": "ann", "item": "ITEM"}, {}, 400, "needs a label"),
    ("bad annotator name", "POST", "/api/session", {"name": ""}, {}, 400, "annotator name"),
    ("a session that is not one", "POST", "/api/session", {"session": 12}, {}, 400, "session"),
    ("no session", "POST", "/api/next", {}, {}, 401, "session"),
    ("another session's annotator", "POST", "/api/undo", {"annotator": "ann"}, {"X-Session": "CY"}, 403,
     "this session labels as 'cy'"),
    ("JSON nested 8,000 deep", "POST", "/api/answer", b"[" * 8000 + b"]" * 8000, {"content-type": "application/json"},
     400, "nested too deep"),
    ("an integer of 5,000 digits", "POST", "/api/answer", b'{"item": ' + b"9" * 5000 + b', "label": 1}',
     {"content-type": "application/json"}, 400, "number"),
    ("item 2**63", "POST", "/api/answer", {"annotator": "ann", "item": 2**63, "label": "1"}, {}, 400, "integer item id"),
    ("item -1", "POST", "/api/skip", {"annotator": "ann", "item": -1}, {}, 400, "integer item id"),
    ("image of item 2**63", "GET", f"/api/items/{2**63}/image", None, {}, 404, "no item"),
    ("image of item 10**5000", "GET", f"/api/items/{10**400}/image", None, {}, 404, "no item"),
    ("Content-Length of 5,000 digits", "POST", "/api/next", b"{}", {"content-type": "application/json",
                                                                    "content-length": "9" * 5000}, 413, "larger than"),
    ("Content-Length not a number", "POST", "/api/next", b"{}", {"content-type": "application/json",
                                                                "content-length": b"\xb2"}, 400, "content-length"),
    ("already labelled", "POST", "/api/answer", {"annotator": "ann", "item": "LABELLED", "label": "1"}, {}, 409,
     "already labelled"),
    ("leased to another", "POST", "/api/answer", {"annotator": "bob", "item": "ITEM", "label": "1"}, {}, 409,
     "leased to another"),
    ("nothing to undo", "POST", "/api/undo", {"annotator": "nobody"}, {}, 409, "to take back"),
    ("unknown route", "GET", "/api/secrets", None, {}, 404, "no such"),
    ("wrong method", "GET", "/api/answer", None, {}, 405, "not allowed"),
    ("unknown export", "GET", "/api/export/xml", None, {}, 404, "export format"),
    ("static traversal", "GET", "/static/..%2F..%2Flabelstore.py", None, {}, 404, "no"),
]


@pytest.mark.parametrize(("name", "method", "path", "body", "headers", "status", "words"), BAD_REQUESTS,
                         ids=[case[0] for case in BAD_REQUESTS])
def test_bad_requests_get_a_clean_4xx_and_change_nothing(client, project, name, method, path, body, headers,
                                                         status, words):
    held = client.post("/api/next", json={"annotator": "ann"}).json()["item"]["id"]  # leased to ann
    labelled = client.post("/api/next", json={"annotator": "cy"}).json()["item"]["id"]
    client.post("/api/answer", json={"annotator": "cy", "item": labelled, "label": "2", "next": False})
    before = snapshot(project)
    if isinstance(body, dict):
        body = {k: (held if v == "ITEM" else labelled if v == "LABELLED" else v) for k, v in body.items()}
        kwargs = {"json": body}
    else:
        kwargs = {"content": body} if body is not None else {}
    request_headers = {k: (client.sessions["cy"] if v == "CY" else v) for k, v in headers.items()}
    response = client.request(method, path, headers=request_headers, **kwargs)
    assert response.status_code == status, response.text
    message = response.json()["error"]
    assert words in message.lower() or words in message
    assert snapshot(project) == before


def test_an_item_never_offered_can_be_answered_without_an_answering_time(client, project):
    # labelling.md: a script may label items it chose itself; only a lease held by another refuses it
    offered = client.post("/api/next", json={"annotator": "ann"}).json()["item"]["id"]
    chosen = next(i for i in project.item_ids if i != offered)
    saved = client.post("/api/answer", json={"annotator": "bob", "item": chosen, "label": truth(project, chosen),
                                             "next": False})
    assert saved.status_code == 200 and saved.json()["saved"]["seconds"] is None
    assert project.store.label_of(chosen) == project.classes.index(truth(project, chosen))
    refused = client.post("/api/answer", json={"annotator": "bob", "item": offered, "label": 0})
    assert refused.status_code == 409 and "leased to another annotator" in refused.json()["error"]
