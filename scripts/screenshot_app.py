#!/usr/bin/env python3
"""Screenshots of the labelling app (the labelling page and the dashboard) in headless Chromium.

Builds a demo project in a temporary folder, labels a few rounds through the app's own
API with the dataset's true labels (so the model has retrained and the dashboard has a
learning curve), then opens both pages in headless Chromium (Playwright driving the
system's ``chromium``; no browser is downloaded) and saves::

    docs/figures/app_label.png        the labelling page
    docs/figures/app_dashboard.png    the dashboard
    docs/figures/app_stopping.png     the dashboard's stopping panel (a fifth of each batch audited)

Usage::

    python scripts/screenshot_app.py                                  # digits
    python scripts/screenshot_app.py --dataset mnist --data-dir ../shared/data/mnist

Exit status 0 when both screenshots were written; 2 when Chromium or Playwright is missing.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from activebayes.plots._base import palette_png

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]
TOKEN = "screenshot-token"


def wait_for(condition, timeout: float = 600.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {condition}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="mlp")
    from activebayes.stopping import CHANGE_WINDOW

    parser.add_argument("--rounds", type=int, default=CHANGE_WINDOW + 1,
                        help=f"rounds to label before the screenshots [{CHANGE_WINDOW + 1}: from the "
                             f"{CHANGE_WINDOW}th trained model on, the remaining change is measured]")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "figures")
    args = parser.parse_args(argv)

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if chromium is None or sync_playwright is None:
        print("error: needs chromium (apt-get install chromium) and playwright (pip install playwright)",
              file=sys.stderr)
        return 2

    import httpx
    import uvicorn

    from activebayes.app import WorkerThread, create_app
    from activebayes.data import load_dataset
    from activebayes.labelling import LabellingProject, ProjectConfig

    targets = load_dataset(args.dataset, data_dir=args.data_dir, split="train").targets
    with tempfile.TemporaryDirectory(prefix="ab-screenshot-app-") as tmp:
        config = ProjectConfig(dataset=args.dataset, data_dir=args.data_dir, model=args.model,
                               batch_size=args.batch_size, num_samples=20, eval_samples=10, lookahead=60,
                               fit_options={"max_epochs": 10}, audit_fraction=0.2)
        project = LabellingProject.create(Path(tmp) / "demo", config)
        project.advance(min_pending=10**12)
        worker = WorkerThread(project.directory, poll=0.1).start()
        app = create_app(project, token=TOKEN, notify=worker.wake)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        wait_for(lambda: server.started)
        try:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as http:
                for round_ in range(args.rounds):
                    wait_for(lambda r=round_: project.store.n_rounds() == r and project.store.proposal(r))
                    names = ["alice", "bob"]
                    sessions = {name: http.post("/api/session", json={"name": name}).json()["session"]
                                for name in names} if round_ == 0 else sessions
                    for k in range(args.batch_size):
                        name = names[k % 2]
                        headers = {"X-Session": sessions[name]}
                        item = http.post("/api/next", json={}, headers=headers).json()["item"]
                        label = int(targets[project.index_of(item["id"])])
                        http.post("/api/answer", json={"item": item["id"], "label": label, "next": False},
                                  headers=headers)
                    print(f"round {round_}: {args.batch_size} labels given")
                wait_for(lambda: project.store.n_rounds() == args.rounds)
                wait_for(lambda: http.get("/api/state").json()["status"]["state"] == "ready")
            args.out_dir.mkdir(parents=True, exist_ok=True)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=ARGS)
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                page.goto(f"{url}/?token={TOKEN}")
                page.wait_for_selector("body[data-ready='1']")
                page.fill("#annotator", "alice")
                page.keyboard.press("Tab")
                page.wait_for_selector("#item-image:not(.busy)")
                page.wait_for_selector("#probs .row")
                page.wait_for_timeout(500)
                page.screenshot(path=str(args.out_dir / "app_label.png"))
                page.goto(f"{url}/dashboard")
                page.wait_for_selector("body[data-ready='1']")
                page.wait_for_selector("#curve polyline")
                page.wait_for_timeout(500)
                page.screenshot(path=str(args.out_dir / "app_dashboard.png"), full_page=True)
                page.locator("#stopping").screenshot(path=str(args.out_dir / "app_stopping.png"))
                browser.close()
            for name in ("app_label.png", "app_dashboard.png", "app_stopping.png"):  # a 256-colour palette
                shot = args.out_dir / name
                shot.write_bytes(palette_png(shot.read_bytes()))
        finally:
            server.should_exit = True
            thread.join(30)
            worker.stop()
            project.close()
    for name in ("app_label.png", "app_dashboard.png", "app_stopping.png"):
        print(f"written: {args.out_dir / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
