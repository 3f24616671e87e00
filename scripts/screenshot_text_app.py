#!/usr/bin/env python3
"""A screenshot of the labelling app showing a text item: docs/assets/label-text.png.

Builds a project over 60 WordNet noun glosses (animal / food / plant; the Debian package
``wordnet-base``) in /tmp/glosses-demo, labels 20 of them in headless Chromium with the
keyboard (the glosses' true classes) so the model has retrained twice, and saves the
labelling page. Usage: ``python scripts/screenshot_text_app.py [OUT.png]``.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from playwright.sync_api import sync_playwright  # noqa: E402

from activebayes.plots._base import palette_png  # noqa: E402

from tests.app.app_helpers import TOKEN, LiveServer, wait_for  # noqa: E402
from tests.app.text_helpers import CLASSES, gloss_rows, make_text_project, write_csv  # noqa: E402

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def main(out: Path) -> int:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    folder = Path("/tmp/glosses-demo")
    shutil.rmtree(folder, ignore_errors=True)
    rows = gloss_rows(20)
    project = make_text_project(folder / "project", write_csv(folder / "glosses.csv", rows), batch_size=10)
    truth = {row["id"]: row["y"] for row in rows}
    live = LiveServer(project)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=ARGS)
            page = browser.new_page(viewport={"width": 1060, "height": 600})
            page.goto(f"{live.url}/?token={TOKEN}")
            page.wait_for_selector("body[data-ready='1']")
            for _ in range(20):
                item = int(page.get_attribute("body", "data-item"))
                page.keyboard.press(str(CLASSES.index(truth[project.store.item(item).key]) + 1))
                page.wait_for_selector(f"body:not([data-item='{item}'])")
            wait_for(lambda: project.store.n_rounds() >= 2, timeout=300)
            time.sleep(1.0)
            page.reload()
            page.wait_for_selector("body[data-ready='1']")
            time.sleep(3.5)  # the state poll: status line and model bars
            out.write_bytes(palette_png(page.screenshot()))  # a 256-colour palette
            browser.close()
    finally:
        live.stop()
        project.close()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "assets" / "label-text.png"))
