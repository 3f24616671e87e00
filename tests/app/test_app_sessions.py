"""Annotator sessions, leases on the dashboard, the atomic server claim, the listening socket."""

from __future__ import annotations

import socket
import threading

import pytest
from starlette.testclient import TestClient

from activebayes.app import create_app
from activebayes.labelstore import LabelStore
from tests.app.app_helpers import TOKEN, snapshot


def open_session(http, **body) -> dict[str, str]:
    response = http.post("/api/session", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_only_the_session_that_answered_can_take_it_back(project):
    with TestClient(create_app(project, token=TOKEN), headers={"X-Token": TOKEN}) as http:
        alice = open_session(http, name="alice")
        mallory = open_session(http)
        assert alice["annotator"] == "alice" and mallory["annotator"].startswith("anon-")
        as_alice, as_mallory = {"X-Session": alice["session"]}, {"X-Session": mallory["session"]}
        item = http.post("/api/next", json={}, headers=as_alice).json()["item"]
        saved = http.post("/api/answer", json={"item": item["id"], "label": "4"}, headers=as_alice)
        assert saved.status_code == 200 and project.store.label_of(item["id"]) == 4
        before = snapshot(project)
        # naming alice in the body does not make another session alice
        for path, body in (("/api/undo", {"annotator": "alice"}), ("/api/next", {"annotator": "alice"})):
            refused = http.post(path, json=body, headers=as_mallory)
            assert refused.status_code == 403 and "labels as" in refused.json()["error"]
        assert http.post("/api/undo", json={}, headers=as_mallory).status_code == 409  # nothing of theirs
        # nor can it take alice's name
        taken = http.post("/api/session", json={"session": mallory["session"], "name": "alice"})
        assert taken.status_code == 409 and "another session" in taken.json()["error"]
        assert snapshot(project) == before
        # a reload: the page sends its session again and is the same annotator, with its count
        again = open_session(http, session=alice["session"])
        assert again == alice
        state = http.get("/api/state", headers=as_alice).json()
        assert state["you"] == {"annotator": "alice", "labelled": 1}
        undone = http.post("/api/undo", json={}, headers=as_alice)
        assert undone.status_code == 200 and undone.json()["undone"]["item"] == item["id"]
        # and without a session no one labels
        anonymous = http.post("/api/next", json={"annotator": "bob"})
        assert anonymous.status_code == 401 and "session" in anonymous.json()["error"]
    # the sessions outlive the server (kept in the store, as digests only)
    with TestClient(create_app(project, token=TOKEN), headers={"X-Token": TOKEN}) as http:
        assert open_session(http, session=alice["session"])["annotator"] == "alice"
    assert alice["session"] not in str(project.store.meta("sessions"))


def test_one_client_cannot_lease_the_pool_under_invented_names(project):
    with TestClient(create_app(project, token=TOKEN, sessions_per_minute=5), headers={"X-Token": TOKEN}) as http:
        held = []
        for k in range(5):
            session = open_session(http, name=f"invented-{k}")
            for _ in range(3):  # one annotator holds one item, however often it asks
                item = http.post("/api/next", json={}, headers={"X-Session": session["session"]}).json()["item"]
            held.append(item["id"])
        assert len(set(held)) == 5
        refused = http.post("/api/session", json={"name": "invented-5"})
        assert refused.status_code == 429 and "a minute" in refused.json()["error"]
        leases = http.get("/api/state").json()["leases"]
        assert leases["count"] == 5 and leases["annotators"] == 5
        assert sorted(row["item"] for row in leases["held"]) == sorted(held)
        assert {row["annotator"] for row in leases["held"]} == {f"invented-{k}" for k in range(5)}
        assert all(0 < row["seconds_left"] <= leases["lease_seconds"] for row in leases["held"])


def test_the_server_claim_is_atomic(project):
    """30 barrier-synchronised pairs of servers claiming at once: exactly one of each pair wins."""
    path = project.store.path
    stores = [LabelStore.open(path), LabelStore.open(path)]
    both = 0
    try:
        for attempt in range(30):
            project.store.set_meta("server", None)
            barrier = threading.Barrier(2)
            won: list[int] = []

            def claim(k: int, attempt: int = attempt) -> None:
                pid = 10_000_000 + 2 * attempt + k  # two distinct servers, both alive
                barrier.wait()
                if stores[k].claim_server({"pid": pid, "host": "127.0.0.1"}, alive=lambda claim: True) is None:
                    won.append(pid)

            threads = [threading.Thread(target=claim, args=(k,)) for k in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            both += len(won) == 2
            assert len(won) >= 1 and project.store.meta("server")["pid"] in won
        assert both == 0, f"{both} of 30 pairs both started"
        # releasing drops only one's own claim
        stores[0].release_server(12345)
        assert project.store.meta("server") is not None
    finally:
        for store in stores:
            store.close()


def test_the_listening_socket_disables_nagle():
    """asyncio sets TCP_NODELAY on accepted connections only for an IPPROTO_TCP socket; without it a
    kept-open browser connection waited ~40 ms (Nagle + delayed ACK) at each request."""
    from activebayes.app.serve import _bind

    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        sock.close()


@pytest.mark.parametrize("host", ["", "   "])
def test_an_empty_host_is_refused(host):
    from activebayes.app.serve import check_host

    with pytest.raises(ValueError, match="--host: expected an address"):
        check_host(host)
