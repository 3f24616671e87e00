"""Fixtures of the labelling app's tests (the app needs the `app` extra: skipped without it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.testclient import TestClient  # noqa: E402

from activebayes.app import WorkerThread, create_app  # noqa: E402
from activebayes.labelling import LabellingProject  # noqa: E402
from tests.app.app_helpers import TOKEN, LiveServer, make_project, with_sessions  # noqa: E402


@pytest.fixture
def project(tmp_path) -> Iterator[LabellingProject]:
    p = make_project(tmp_path / "proj")
    yield p
    p.close()


def served(project: LabellingProject) -> Iterator[TestClient]:
    """A test client of ``project``'s app with its trainer running; the trainer must end without errors."""
    worker = WorkerThread(project.directory, poll=0.05).start()
    app = create_app(project, token=TOKEN, notify=worker.wake)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield with_sessions(test_client)
    worker.stop()
    assert not worker.errors, worker.errors


@pytest.fixture
def client(project) -> Iterator[TestClient]:
    yield from served(project)


@pytest.fixture
def live(project) -> Iterator[LiveServer]:
    server = LiveServer(project)
    yield server
    server.stop()
    assert not server.worker.errors, server.worker.errors
