"""The app on a folder of images, a failing trainer, and `serve`'s address and warnings."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import time

import numpy as np
import pytest
from PIL import Image
from starlette.testclient import TestClient

from activebayes.app import WorkerThread, create_app, serve
from activebayes.cli import main
from activebayes.labelling import LabellingProject, ProjectConfig
from tests.app.app_helpers import FAST_FIT, TOKEN, fast_config, make_project, wait_for, with_sessions


def test_images_are_served_by_item_id_from_the_folder(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(4):
        Image.fromarray(np.full((5, 7), 40 * i, dtype=np.uint8)).save(folder / f"p{i}.png")
    Image.fromarray(np.full((5, 7), 200, dtype=np.uint8)).save(folder / "scan.tif")
    config = ProjectConfig(images=str(folder), classes=("cat", "dog"), model="mlp", batch_size=2, num_samples=4,
                           eval_samples=4, fit_options=FAST_FIT)
    with LabellingProject.create(tmp_path / "proj", config) as project:
        project.advance(min_pending=10**12)
        with TestClient(create_app(project, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            with_sessions(client)
            for item in project.store.items():
                response = client.get(f"/api/items/{item.id}/image")
                assert response.status_code == 200 and response.headers["content-type"] == "image/png"
                # every format decoded and re-encoded (never the raw file): the same pixels
                picture = np.asarray(Image.open(io.BytesIO(response.content)).convert("L"))
                with Image.open(folder / item.key) as original:
                    assert np.array_equal(picture, np.asarray(original.convert("L")))
                assert response.headers["etag"] == f'"{item.sha256}"'
            first = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
            assert first["key"] in {p.name for p in folder.iterdir()}
            # an image that vanished while the app runs: a clean 404, nothing else
            (folder / first["key"]).unlink()
            gone = client.get(f"/api/items/{first['id']}/image")
            assert gone.status_code == 404 and "gone" in gone.json()["error"]


@contextlib.contextmanager
def _failing_trainer(project, monkeypatch, message: str):
    """The app with a trainer whose every round fails with ``message``: ``(client, times it tried)``."""
    calls: list[float] = []

    def broken(self, *args, **kwargs):
        calls.append(time.monotonic())
        raise RuntimeError(message)

    worker = WorkerThread(project.directory, poll=0.05)
    monkeypatch.setattr(LabellingProject, "advance", broken)
    worker.start()
    try:
        with TestClient(create_app(project, token=TOKEN, notify=worker.wake),
                        headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            with_sessions(client)
            yield client, calls
    finally:
        worker.stop()


def _answer_one(client):
    item = client.post("/api/next", json={"annotator": "ann"}).json()["item"]
    return client.post("/api/answer", json={"annotator": "ann", "item": item["id"], "label": "1"})


def test_a_failing_trainer_reports_and_the_page_keeps_serving(project, monkeypatch):
    with _failing_trainer(project, monkeypatch, "out of memory (simulated)") as (client, _):
        state = wait_for(lambda: (s := client.get("/api/state").json())["status"]["state"] == "error" and s)
        assert "out of memory (simulated)" in state["status"]["error"]
        saved = _answer_one(client)
        assert saved.status_code == 200 and saved.json()["item"] is not None


def test_a_trainer_failing_the_same_way_waits_for_the_next_answer(project, monkeypatch):
    with _failing_trainer(project, monkeypatch, "the model does not fit (simulated)") as (client, calls):
        state = wait_for(lambda: (s := client.get("/api/state").json())["status"].get("retry")
                         == "on the next answer" and s)
        assert "failed 3 times in a row the same way" in state["status"]["error"]
        tried = len(calls)
        time.sleep(1.5)  # a timer's retries would come after 0.4, 0.8 s, ...
        assert len(calls) == tried == 3
        _answer_one(client)
        wait_for(lambda: len(calls) > tried)
        assert "failed 4 times" in wait_for(lambda: (e := client.get("/api/state").json()["status"]["error"])
                                             .startswith("RuntimeError") and "4 times" in e and e)


class _Stop(Exception):
    pass


def test_serve_prints_the_address_with_a_token_and_warns_beyond_loopback(tmp_path):
    project = make_project(tmp_path / "proj")
    lines: list[str] = []
    warnings: list[str] = []

    def stop(url: str) -> None:
        raise _Stop(url)

    with pytest.raises(_Stop) as info:
        serve(project, port=0, worker="thread", echo=lines.append, warn=warnings.append, ready=stop)
    url = info.value.args[0]
    assert url.startswith("http://127.0.0.1:") and "/?token=" in url and len(url.split("token=")[1]) >= 32
    assert any(url in line for line in lines) and not warnings
    with pytest.raises(_Stop) as again:
        serve(project, host="0.0.0.0", port=0, worker="thread", echo=lines.append, warn=warnings.append, ready=stop)
    assert again.value.args[0].split("token=")[1] != url.split("token=")[1]  # a new token each start
    assert [w for w in warnings if w.startswith("warning: listening on 0.0.0.0")] and not any("warning" in line
                                                                                              for line in lines)
    # one server per project: another live process serving it is refused, a dead one is not
    project.store.set_meta("server", {"pid": os.getppid(), "host": "127.0.0.1", "port": 1})
    with pytest.raises(ValueError, match=f"already being served by process {os.getppid()}"):
        serve(project, port=0, worker="thread", echo=lines.append, ready=stop)
    project.store.set_meta("server", {"pid": 2**22 + 12345, "host": "127.0.0.1", "port": 1})
    with pytest.raises(_Stop):
        serve(project, port=0, worker="thread", echo=lines.append, ready=stop)
    assert project.store.meta("server") is None  # released on the way out
    project.close()


def test_the_label_command_writes_its_warning_and_notices_to_stderr(tmp_path, capsys, monkeypatch):
    """stdout holds what a script may read (the address, the dashboard, the ``stopped;`` line);
    the warning about listening beyond this machine and the notices go to stderr."""
    import uvicorn

    LabellingProject.create(tmp_path / "proj", fast_config()).close()  # no ranking yet: a notice

    def interrupted(self, sockets=None):  # Ctrl-C as soon as the server would start
        raise KeyboardInterrupt

    monkeypatch.setattr(uvicorn.Server, "run", interrupted)
    code = main(["label", str(tmp_path / "proj"), "--host", "0.0.0.0", "--port", "0", "--worker", "thread", "-q"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "warning: listening on 0.0.0.0: anyone who can reach this machine" in err and "warning" not in out
    assert "preparing the first ranking ..." in err and "preparing" not in out
    assert "/?token=" in out and "/dashboard" in out and "stopped; 0 of " in out and "token=" not in err


def test_label_command_mistakes_are_one_line(tmp_path, capsys, monkeypatch):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    project = make_project(tmp_path / "proj")
    project.close()
    for args, needle in [  # a dataset of bare feature vectors: tests/app/test_app_builtin_texts.py
        (["label", tmp_path / "new"], "--dataset"),
        (["label", tmp_path / "new", "--images", tmp_path / "nope", "--classes", "a,b"], "nope"),
        (["label", tmp_path / "proj", "--batch-size", "3"], "settings are fixed"),
        (["label", tmp_path / "proj", "--port", str(busy.getsockname()[1]), "--worker", "thread"], "--port 0"),
        # a new project used to be created (and left behind) before the taken port was found
        (["label", tmp_path / "new", "--dataset", "digits", "--port", str(busy.getsockname()[1])], "--port 0"),
        (["export", tmp_path / "new"], "--table FILE --text-column COL"),
        (["label", tmp_path / "new", "--dataset", "digits", "--host", ""], "--host: expected an address"),
        # a host that does not resolve, or an address of another machine, blamed --port (and with
        # --port 0 was found only after the new project was made)
        (["label", tmp_path / "new", "--dataset", "digits", "--host", "999.1.1.1"],
         "error: --host: cannot listen on '999.1.1.1' (no such host name or address); expected an address"),
        (["label", tmp_path / "new", "--dataset", "digits", "--host", "999.1.1.1", "--port", "0"],
         "--host: cannot listen on '999.1.1.1'"),
        (["label", tmp_path / "proj", "--host", "192.0.2.1", "--port", "0"], "--host: cannot listen on '192.0.2.1'"),
        (["label", tmp_path / "new", "--dataset", "digits", "--token", "x"], "--token: expected at least 16"),
        (["label", tmp_path / "new", "--dataset", "digits", "--token-file", tmp_path / "no-token"], "--token-file"),
        (["label", tmp_path / "new", "--dataset", "digits", "--device", "tpu9"], "--device must be a device"),
    ]:
        code = main([str(a) for a in args])
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert code == 1 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err
    monkeypatch.setenv("ACTIVEBAYES_TOKEN", "short")  # the way `ps` cannot see is checked the same
    code = main(["label", str(tmp_path / "new"), "--dataset", "digits"])
    assert code == 1 and "--token: expected at least 16" in capsys.readouterr().err
    busy.close()
    assert not (tmp_path / "new").exists()


def test_the_training_worker_yields_the_cpu_to_the_server(monkeypatch):
    """The trainer lowers its own priority before it loads anything (nice values are per thread on
    Linux, so a thread shows it as a process would), and the server's threads keep theirs."""
    import threading

    from activebayes.app import worker

    seen: dict[str, int] = {}

    def opened(*args, **kwargs):
        seen["worker"] = os.getpriority(os.PRIO_PROCESS, 0)
        raise RuntimeError("stop after the priority is set")

    monkeypatch.setattr(worker.LabellingProject, "open", opened)
    base = os.getpriority(os.PRIO_PROCESS, 0)

    def train() -> None:
        try:
            worker.run_worker("unused", threading.Event(), threading.Event())
        except RuntimeError:
            pass

    thread = threading.Thread(target=train)
    thread.start()
    thread.join(10)
    assert seen["worker"] == min(19, base + worker.WORKER_NICENESS)
    assert os.getpriority(os.PRIO_PROCESS, 0) == base


def test_the_device_reaches_the_first_ranking_and_the_trainer(tmp_path, monkeypatch):
    """``label --device`` is not stored with the project: the first ranking and every round the
    trainer (thread or process) runs build their loop on it."""
    import importlib

    serve_module = importlib.import_module("activebayes.app.serve")  # the module: the package's `serve` is the function
    worker_module = importlib.import_module("activebayes.app.worker")

    project = make_project(tmp_path / "proj")
    seen: list[tuple[str, str | None]] = []
    real_build = LabellingProject.build_loop

    def build(self):
        loop = real_build(self)
        seen.append(("loop", loop.config.device))
        return loop

    monkeypatch.setattr(LabellingProject, "build_loop", build)
    project.device = "cpu"
    assert project.build_loop().config.device == "cpu" and seen == [("loop", "cpu")]
    assert "device" not in project.config.to_dict()  # a property of the machine, not of the project

    spawned = []

    class Recorder:
        def __init__(self, directory, *, device=None, **kwargs):
            spawned.append(device)

        def start(self):
            raise _Stop("worker")

    monkeypatch.setattr(serve_module, "WorkerThread", Recorder)
    monkeypatch.setattr(serve_module, "WorkerProcess", Recorder)
    for kind in ("thread", "process"):
        with pytest.raises(_Stop):
            serve(project, port=0, worker=kind, echo=lambda line: None)
    assert spawned == ["cpu", "cpu"]
    project.close()

    # the trainer itself: run_worker opens the project and sets the device before any round
    stop, wake = worker_module.threading.Event(), worker_module.threading.Event()
    seen.clear()

    def first_round_then_stop(self, *args, **kwargs):
        seen.append(("advance", self.device))
        stop.set()
        raise RuntimeError("one round is enough")

    monkeypatch.setattr(LabellingProject, "advance", first_round_then_stop)
    worker_module.run_worker(tmp_path / "proj", stop, wake, poll=0.01, device="cpu")
    assert seen == [("advance", "cpu")]


def test_the_dashboard_names_the_trainers_device(tmp_path):
    from activebayes.app import WorkerProcess

    assert WorkerThread(tmp_path, device="cuda:1").info()["device"] == "cuda:1"
    assert WorkerProcess(tmp_path, device="cuda").info()["device"] == "cuda"
    assert WorkerProcess(tmp_path).info()["device"] == WorkerThread(tmp_path).info()["device"] == "cpu"
    # the dashboard shows it ("trainer: thread on cpu"): tests/app/test_app_stopping.py, in Chromium


def test_the_cli_sets_the_device_on_the_project_it_serves(tmp_path, monkeypatch):
    import activebayes.app as app

    served = []
    monkeypatch.setattr(app, "serve", lambda project, **kwargs: served.append(project.device))
    assert main(["label", str(tmp_path / "p"), "--dataset", "digits", "--device", "cpu", "-q"]) == 0
    assert main(["label", str(tmp_path / "p"), "-q"]) == 0  # another start, the default device
    assert served == ["cpu", None]


def test_a_new_project_off_a_terminal_says_it_is_being_prepared(tmp_path, monkeypatch, capsys):
    """No progress bars go to a log; a first start that embeds a large dataset for minutes says
    so in one line before it (and not with -q, nor when the project exists)."""
    import activebayes.app as app

    monkeypatch.setattr(app, "serve", lambda project, **kwargs: None)
    capsys.readouterr()
    assert main(["label", str(tmp_path / "p"), "--dataset", "digits"]) == 0
    first = capsys.readouterr().err
    assert first.startswith(f"creating {tmp_path / 'p'}: reading and preparing its items"), first
    assert main(["label", str(tmp_path / "p")]) == 0
    assert "creating" not in capsys.readouterr().err
    assert main(["label", str(tmp_path / "q"), "--dataset", "digits", "-q"]) == 0
    assert "creating" not in capsys.readouterr().err
    assert main(["label", str(tmp_path / "r")]) == 1  # no source: the one error line only
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'r'} is not a labelling project yet")
    assert main(["query", str(tmp_path / "s"), "--dataset", "digits"]) == 0  # the file round trip too
    assert capsys.readouterr().err.startswith(f"creating {tmp_path / 's'}: reading and preparing its items")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")  # refused: the refusal alone, no "creating" line first
    assert main(["query", str(tmp_path / "full"), "--dataset", "digits"]) == 1
    assert capsys.readouterr().err == (f"error: {tmp_path / 'full'} exists and is not an empty folder; choose a new "
                                       "project directory\n")
