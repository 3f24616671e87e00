"""A built-in multi-label dataset (``ArrayDataset.multilabel``, e.g. ``mnist_pairs``) makes a
multi-label labelling project with no flag: answers are sets of classes, the loop trains and
scores it as multi-label (test micro-F1), and the held-out figure of every multi-label project
is the micro-F1 of its label decisions."""

from __future__ import annotations

import csv
from collections.abc import Iterator

import pytest
import torch
from starlette.testclient import TestClient

from activebayes.app import create_app
from activebayes.app.server import LabelApp, _Served
from activebayes.cli import main
from activebayes.data import ArrayDataset, load_dataset
from activebayes.labelling import LabellingProject, ProjectError
from activebayes.labelling.store import classes_mask, mask_classes
from tests.app.app_helpers import TOKEN, fast_config, make_project, wait_for, with_sessions
from tests.app.conftest import served

#: a small built-in multi-label dataset registered by the tests: two 8x8 digits side by side
PAIRS = "digit_pairs_test"


def _digit_pairs(split: str, **options: object) -> ArrayDataset:
    """``mnist_pairs`` in small (scikit-learn's digits, 150 / 60 items): targets the 0/1 indicators
    ``[N, 10]`` of the two digits shown."""
    digits = load_dataset("digits", split=split)
    n = 150 if split == "train" else 60
    g = torch.Generator().manual_seed(0 if split == "train" else 1)
    left, right = torch.randperm(len(digits), generator=g)[:n], torch.randperm(len(digits), generator=g)[:n]
    targets_N_C = torch.zeros(n, len(digits.classes), dtype=torch.long)
    targets_N_C[torch.arange(n), digits.targets[left]] = 1
    targets_N_C[torch.arange(n), digits.targets[right]] = 1
    return ArrayDataset(inputs=torch.cat([digits.inputs[left], digits.inputs[right]], dim=-1).contiguous(),
                        targets=targets_N_C, classes=digits.classes, name=PAIRS, normalization=digits.normalization)


@pytest.fixture
def pairs() -> Iterator[ArrayDataset]:
    from activebayes.data.datasets import DATASETS, register_dataset

    register_dataset(PAIRS, _digit_pairs)
    try:
        yield _digit_pairs("train")
    finally:
        DATASETS.unregister(PAIRS)


@pytest.fixture
def pairs_project(tmp_path, pairs) -> Iterator[LabellingProject]:
    project = make_project(tmp_path / "pairs", dataset=PAIRS)
    yield project
    project.close()


@pytest.fixture
def pairs_client(pairs_project) -> Iterator[TestClient]:
    yield from served(pairs_project)


def truth(pairs: ArrayDataset, project: LabellingProject, item: int) -> list[str]:
    """The classes shown in ``item`` (its two digits), by name."""
    row = pairs.targets[project.index_of(item)]
    return [pairs.classes[c] for c in range(len(row)) if row[c]]


def _answer_batch(client, pairs, project, n: int) -> dict:
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    for _ in range(n):
        reply = client.post("/api/answer", json={"annotator": "ann", "item": item["id"],
                                                 "labels": truth(pairs, project, item["id"])})
        assert reply.status_code == 200, reply.text
        item = reply.json()["item"]
    return item


def test_a_multilabel_builtin_dataset_makes_a_multilabel_project_scored_by_micro_f1(pairs_client, pairs_project,
                                                                                     pairs):
    project = pairs_project
    assert project.config.multilabel and project.store.multilabel  # no flag given
    assert project.config.table_options == {"multilabel": True}  # stored with the settings
    state = pairs_client.get("/api/state").json()
    assert state["multilabel"] is True and state["classes"] == list(pairs.classes)
    assert state["accuracy"]["metric"] == "micro-F1"

    item = pairs_client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    single = pairs_client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": "3"})
    assert single.status_code == 400 and "labels" in single.json()["error"]  # an answer is a set
    saved = pairs_client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "labels": ["5", 3]}).json()
    assert saved["saved"]["labels"] == ["3", "5"] and project.store.labels() == {item["id"]: 0b101000}
    pairs_client.post("/api/undo", json={"annotator": "ann"})
    _answer_batch(pairs_client, pairs, project, 5)
    wait_for(lambda: pairs_client.get("/api/state").json()["rounds"] == 1, timeout=300)
    state = wait_for(lambda: (lambda s: s if s["status"]["state"] in ("ready", "error") else None)(
        pairs_client.get("/api/state").json()), timeout=300)
    assert state["status"]["state"] == "ready", state["status"]  # the trainer did not fail

    # trained and scored as multi-label: the rounds' headline is the test split's micro-F1
    loop = project.build_loop()
    assert loop.multilabel and loop.test is not None and loop.test.multilabel
    labels = loop.pool.labels_of(loop.pool.labelled_indices)
    assert labels.shape == (5, 10) and labels.sum(1).min() >= 1
    for position, row in zip(loop.pool.labelled_indices.tolist(), labels.tolist(), strict=True):
        assert row == pairs.targets[position].tolist()
    metrics = [record.get("metrics") or {} for _round, record, _ in project.store.rounds()]
    assert all("test_micro_f1" in m and "test_accuracy" not in m for m in metrics)
    assert [p["test_accuracy"] for p in state["curve"][:1]] == [metrics[0]["test_micro_f1"]]
    latest = project.store.latest_proposal()[1]["metrics"]["test_micro_f1"]
    assert state["accuracy"]["test"] == pytest.approx(latest) and 0 <= latest <= 1
    # the settings are fixed: the same command continues it, with or without --multilabel
    project.close()
    for settings in ({"dataset": PAIRS}, {"dataset": PAIRS, "multilabel": True}):
        LabellingProject.open(project.directory, settings=settings).close()


def test_the_held_out_figure_of_a_multilabel_project_is_micro_f1(pairs_client, pairs_project, pairs):
    """``accuracy.prequential`` (the page's and the dashboard's held-out figure): the micro-F1 of
    each served model's label decisions (classes with p >= 1/2, the loop's evaluation rule)
    against the answers given after it ranked the items, never whole sets matched exactly."""
    project = pairs_project
    item = _answer_batch(pairs_client, pairs, project, 5)
    wait_for(lambda: pairs_client.get("/api/state").json()["rounds"] == 1, timeout=300)
    pairs_client.post("/api/skip", json={"annotator": "ann", "item": item["id"]})
    _answer_batch(pairs_client, pairs, project, 8)  # served from round 1's ranking: held out
    state = pairs_client.get("/api/state").json()
    answered = [e for e in project.store.active_answers() if e.predicted is not None]
    assert len(answered) == 8 and {e.round for e in answered} <= {1, 2}
    counts: dict[int, list[int]] = {}
    exact = []
    for event in answered:
        proposal = project.store.proposal(event.round)
        probs = dict(zip(proposal["ranking"], proposal["probs"], strict=True))[event.item]
        assert event.predicted == classes_mask(c for c, p in enumerate(probs) if p >= 0.5)
        tp = len(set(mask_classes(event.predicted)) & set(mask_classes(event.label)))
        fp = len(mask_classes(event.predicted)) - tp
        fn = len(mask_classes(event.label)) - tp
        totals = counts.setdefault(event.round, [0, 0, 0, 0])
        for k, value in enumerate((1, tp, fp, fn)):
            totals[k] += value
        exact.append(event.predicted == event.label)

    def f1(tp: int, fp: int, fn: int) -> float:
        return 2 * tp / (2 * tp + fp + fn)

    overall = [sum(t[k] for t in counts.values()) for k in range(4)]
    assert state["accuracy"]["prequential_n"] == 8
    assert state["accuracy"]["prequential"] == pytest.approx(f1(*overall[1:]))
    assert state["accuracy"]["metric"] == "micro-F1"
    for round_, (n, tp, fp, fn) in counts.items():
        point = next(p for p in state["curve"] if p["round"] == round_)
        assert point["prequential_n"] == n and point["prequential_accuracy"] == pytest.approx(f1(tp, fp, fn))
    if overall[1] and not all(exact):  # a decision right in a set not right as a whole
        assert state["accuracy"]["prequential"] != pytest.approx(sum(exact) / len(exact))


def test_a_class_at_one_half_is_predicted_as_in_the_evaluation(pairs_project):
    """The served prediction takes the classes with p >= 1/2 (evaluate_multilabel's rule), not > 1/2."""
    app = LabelApp(pairs_project)
    probs = [0.5, 0.49999, 0.9] + [0.1] * 7
    served = _Served(None, 3, [7], {7: (0, 1.0, probs, True)}, "multilabel_badge", 10, 1, {})
    assert app._prediction_in(served, 7) == (3, 0b101)
    probs[0] = 0.5 - 1e-8  # an exact 1/2 rounded low by the log-space mean (it was left out)
    assert app._prediction_in(served, 7) == (3, 0b101)


def test_a_multilabel_builtin_dataset_through_the_file_round_trip(tmp_path, pairs, capsys):
    """`activebayes query --dataset NAME` on a multi-label dataset: the query file takes label sets."""
    project_dir = tmp_path / "proj"
    args = ["query", str(project_dir), "--dataset", PAIRS, "--batch-size", "4", "--num-samples", "4",
            "--max-epochs", "1", "--cold-start", "none", "-q"]
    assert main(args) == 0, capsys.readouterr().err
    with LabellingProject.open(project_dir) as project:
        assert project.store.multilabel
        path = project.query_path(0)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == 4
    for k, row in enumerate(rows):
        row["label"] = f"{k}|{k + 5}"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["import", str(path), "--project", str(project_dir)]) == 0, capsys.readouterr().err
    with LabellingProject.open(project_dir) as project:
        assert sorted(project.store.labels().values()) == sorted(1 << k | 1 << (k + 5) for k in range(4))


def test_multilabel_on_a_single_label_dataset_is_refused_when_the_project_is_created(tmp_path, capsys, pairs):
    with pytest.raises(ProjectError, match="--multilabel: dataset 'digits' is single-label"):
        LabellingProject.create(tmp_path / "digits", fast_config(table_options={"multilabel": True}))
    code = main(["query", str(tmp_path / "cli"), "--dataset", "digits", "--multilabel", "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "--multilabel: dataset 'digits' is single-label" in err and err.count("\n") == 1
    # a strategy that reads single-label predictions, on a multi-label dataset
    with pytest.raises(ProjectError, match="--strategy 'margin' reads single-label predictions"):
        LabellingProject.create(tmp_path / "margin", fast_config(dataset=PAIRS, strategy="margin"))
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing left behind


def test_a_project_made_single_label_from_a_multilabel_dataset_is_refused_with_a_reason(tmp_path, pairs):
    """A project created before a multi-label dataset made a multi-label project (its store takes
    one class per answer) cannot train: opening its items says why, instead of a shape error."""
    project = LabellingProject.create(tmp_path / "old", fast_config(dataset=PAIRS))
    project.store.set_meta("multilabel", False)
    project.store.set_meta("project", {**project.config.to_dict(), "table_options": {}})
    project.close()
    with LabellingProject.open(tmp_path / "old") as old:
        assert not old.store.multilabel
        with pytest.raises(ProjectError, match="is multi-label .* but this project was created single-label"):
            old.build_loop()


def test_mnist_pairs_makes_a_multilabel_project(tmp_path, mnist_dir):
    """The reported case: `activebayes label PROJ --dataset mnist_pairs` takes label sets."""
    project = LabellingProject.create(tmp_path / "mnist_pairs", fast_config(dataset="mnist_pairs",
                                                                            data_dir=str(mnist_dir)))
    try:
        assert project.store.multilabel and project.config.multilabel
        with TestClient(create_app(project, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            client = with_sessions(client)
            assert client.get("/api/state").json()["multilabel"] is True
            item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
            saved = client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "labels": ["3", "5"]})
            assert saved.status_code == 200 and saved.json()["saved"]["labels"] == ["3", "5"]
    finally:
        project.close()


def test_open_or_create_continues_a_multilabel_dataset_project_with_its_settings(tmp_path, pairs):
    config = fast_config(dataset=PAIRS)
    LabellingProject.open_or_create(tmp_path / "p", config).close()
    with LabellingProject.open_or_create(tmp_path / "p", config) as again:  # the same settings continue it
        assert again.store.multilabel and again.config.multilabel
    with pytest.raises(ProjectError, match="existing project with other settings"):
        LabellingProject.open_or_create(tmp_path / "p", fast_config(dataset=PAIRS, seed=1))
