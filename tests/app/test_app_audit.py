"""Audited answers in the labelling app: an item drawn to audit counts whenever it is answered.

The audited items are the last of each batch, and the app serves a round's first item from
the previous ranking while the model retrains (``in_batch: false``), so a round commits
before its last items are answered: they are committed with the next round. Their answers
must still count as audited, against the predictions of the model that drew them, once.
"""

from __future__ import annotations

import pytest
import torch
from starlette.testclient import TestClient

from activebayes.app import create_app
from activebayes.data import load_dataset
from activebayes.errors import InvalidArgumentError
from activebayes.loop import _audit_answers
from activebayes.records import Proposal
from activebayes.stopping import ESTIMATED_ACCURACY
from tests.app.app_helpers import TOKEN, make_project, with_sessions

TARGETS = load_dataset("digits").targets
BATCH = 10


def _label_as_the_app_does(project, rounds: int) -> tuple[list[dict], dict]:
    """One annotator answers ``BATCH`` items with their true labels, then the trainer commits
    and proposes (as :func:`~activebayes.app.worker.run_worker` does once ``BATCH`` answers are
    pending); the answer to the tenth item leases the next one from the old ranking."""
    loop = None
    served = []
    app = create_app(project, token=TOKEN)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        with_sessions(client)
        for _ in range(rounds):
            for _ in range(BATCH):
                item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
                served.append(item)
                label = int(TARGETS[project.index_of(item["id"])])
                assert client.post("/api/answer", json={"annotator": "ann", "item": item["id"],
                                                        "label": label}).status_code == 200
            loop, _ = project.advance(loop, min_pending=BATCH)
        state = client.get("/api/state").json()
    return served, state


def _drawn(project, round_: int) -> dict[int, int]:
    """``item id -> predicted class`` of the items round ``round_``'s proposal drew to audit."""
    stored = project.store.proposal(round_)
    return {item: max(range(len(p)), key=p.__getitem__)
            for item, s, p in zip(stored["ranking"], stored["ranking_scores"], stored["probs"] or [], strict=False)
            if s != s}


@pytest.mark.parametrize(("fraction", "per_batch"), [(0.2, 2), (0.1, 1)])
def test_audited_answers_count_when_answered_after_their_round_committed(tmp_path, fraction, per_batch):
    rounds = 5
    project = make_project(tmp_path / "proj", batch_size=BATCH, lookahead=20, audit_fraction=fraction)
    try:
        served, state = _label_as_the_app_does(project, rounds)
        # the situation the app creates: a round's first item comes from the previous ranking,
        # and the last (audited) item of a batch is answered in the next round
        assert any(not item["in_batch"] for item in served[BATCH:])
        records = [record for _, record, _ in project.store.rounds()]
        committed = [[item for item, _ in pairs] for _, _, pairs in project.store.rounds()]
        assert len(records) == rounds
        drawn = {r: _drawn(project, r) for r in range(rounds)}
        assert not drawn[0] and all(len(drawn[r]) == per_batch for r in range(1, rounds))
        late = [item for r in range(1, rounds - 1) for item in drawn[r] if item not in committed[r]]
        assert late and all(any(item in c for c in committed[r + 1:]) for r in range(1, rounds - 1)
                            for item in drawn[r] if item in late)

        # every drawn item answered by now is credited once, against the model that drew it
        answered = {item for c in committed for item in c}
        expected_n = expected_correct = 0
        for r in range(1, rounds):
            for item, predicted in drawn[r].items():
                if item in answered:
                    expected_n += 1
                    expected_correct += int(predicted == int(TARGETS[project.index_of(item)]))
        audits = [(record.get("signals") or {}).get("audit") or {"n": 0, "correct": 0} for record in records]
        assert sum(a["n"] for a in audits) == expected_n
        assert sum(a["correct"] for a in audits) == expected_correct
        # from the third round on each round counts what a batch draws: its own audited answers
        # and the previous batch's that came late
        assert [a["n"] for a in audits[2:]] == [per_batch] * (rounds - 2)

        # the estimate is there, from the audited answers of the last 3 rounds
        latest = project.store.latest_proposal()[1]["signals"][ESTIMATED_ACCURACY]
        assert latest["n"] == 3 * per_batch
        panel = next(s for s in state["stopping"]["signals"] if s["name"] == ESTIMATED_ACCURACY)
        assert panel["n"] == 3 * per_batch and f"from {3 * per_batch} uniformly drawn answers" in panel["text"]
    finally:
        project.close()


def _proposal(round_: int, audit: list[int], probs: list[list[float]]) -> Proposal:
    return Proposal(round=round_, ranking=list(audit), ranking_scores=[float("nan")] * len(audit),
                    indices=list(audit), scores=[float("nan")] * len(audit), probs=probs, audit=list(audit),
                    n_labelled=10, metrics={}, class_counts=[5, 5], cost_spent=0.0, fit={}, seconds={},
                    strategy="bald")


def test_an_item_drawn_twice_counts_once_against_the_latest_model_that_drew_it():
    older = _proposal(1, [5, 6], [[0.9, 0.1], [0.9, 0.1]])
    newer = _proposal(2, [6, 7], [[0.1, 0.9], [0.1, 0.9]])
    current = _proposal(3, [], [])
    answers = torch.tensor([0, 1, 1, 0])  # items 5, 6, 7, and 8 (never drawn)
    counted = _audit_answers(current, torch.tensor([5, 6, 7, 8]), answers, earlier=[newer, older])
    assert counted == {"n": 3, "correct": 3}  # 5 by the older model, 6 and 7 by the newer one


def test_commit_refuses_earlier_proposals_that_are_not_earlier(tmp_path):
    project = make_project(tmp_path / "proj", batch_size=4, audit_fraction=0.5)
    try:
        loop, proposal = project.advance()
        with pytest.raises(InvalidArgumentError, match="earlier proposals"):
            loop.commit(proposal.indices, [int(TARGETS[i]) for i in proposal.indices], proposal=proposal,
                        earlier=[proposal])
    finally:
        project.close()
