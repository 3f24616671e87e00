"""One acquisition path: the simulated loop, the file round trip and the app pick the same items."""

from __future__ import annotations

import csv

from starlette.testclient import TestClient

from activebayes.app import WorkerThread, create_app
from activebayes.data import load_dataset
from activebayes.labelling import LabellingProject
from activebayes.loop import ActiveLearningLoop
from activebayes.records import LoopConfig
from tests.app.app_helpers import FAST_FIT, TOKEN, fast_config, wait_for, with_sessions

ROUNDS = 3
SETTINGS = dict(strategy="bald", cold_start=None, seed=3, batch_size=4, num_samples=8, eval_samples=4)


def test_simulated_loop_file_round_trip_and_app_pick_the_same_items(tmp_path):
    digits = load_dataset("digits")
    targets = digits.targets

    # 1. the simulated loop, configured by hand (not from the project)
    config = LoopConfig(dataset="digits", initial="empty", initial_size=0, validation_size=0, budget=len(digits),
                        fit_options=FAST_FIT, **SETTINGS)
    loop = ActiveLearningLoop(config, dataset=digits, test=load_dataset("digits", split="test"))
    simulated = [loop.step().acquired for _ in range(ROUNDS)]

    # 2. the file round trip: query, fill in the true labels, import
    files = []
    with LabellingProject.create(tmp_path / "files", fast_config(**SETTINGS)) as project:
        for _ in range(ROUNDS):
            result = project.query()
            files.append(result.indices)
            with result.path.open(newline="") as handle:
                rows = list(csv.DictReader(handle))
            for row, index in zip(rows, result.indices, strict=True):
                row["label"] = str(int(targets[index]))
            with result.path.open("w", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
            project.import_answers(result.path)

    # 3. the app: one annotator answers each round's batch, then the model retrains
    app_picks = []
    with LabellingProject.create(tmp_path / "app", fast_config(**SETTINGS)) as project:
        project.advance(min_pending=10**12)
        worker = WorkerThread(project.directory, poll=0.05).start()
        try:
            with TestClient(create_app(project, token=TOKEN, notify=worker.wake),
                            headers={"Authorization": f"Bearer {TOKEN}"}) as client:
                with_sessions(client)
                for round_ in range(ROUNDS):
                    wait_for(lambda r=round_: project.store.n_rounds() == r and project.store.proposal(r))
                    picked = []
                    for k in range(SETTINGS["batch_size"]):
                        item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
                        assert item["round"] == round_
                        index = project.index_of(item["id"])
                        last = k == SETTINGS["batch_size"] - 1
                        client.post("/api/answer", json={"annotator": "ann", "item": item["id"],
                                                         "label": int(targets[index]), "next": not last})
                        picked.append(index)
                    app_picks.append(picked)
                wait_for(lambda: project.store.n_rounds() == ROUNDS)
        finally:
            worker.stop()
        assert not worker.errors
        committed = [[project.index_of(i) for i, _ in pairs] for _, _, pairs in project.store.rounds()]

    assert simulated[0] != simulated[1]
    assert files == simulated
    assert app_picks == simulated and committed == simulated
