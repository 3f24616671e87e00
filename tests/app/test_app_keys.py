"""The label page's keys mean what they say (issue 29 item 2), and its story of round 0 matches the record.

``classKeys`` is checked with Node (pure function, milliseconds); the keyboard itself in
headless Chromium: with classes ``0..9`` the key ``3`` stores ``"3"``, the page shows what was
stored where nobody misses it, and Backspace takes it back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.app.app_helpers import CHROMIUM, CHROMIUM_ARGS, TOKEN, make_project, with_sessions

LABEL_JS = Path(__file__).parents[2] / "src" / "activebayes" / "app" / "static" / "label.js"
NODE = shutil.which("node")


def class_keys(names: list[str]) -> list[str]:
    """label.js's ``classKeys(names)``, run by Node on the file's top-level functions."""
    source = LABEL_JS.read_text()
    functions = source[: source.index("(function () {")]
    script = functions + f"\nprocess.stdout.write(JSON.stringify(classKeys({json.dumps(names)})));"
    return json.loads(subprocess.run([NODE, "-e", script], capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize(("names", "keys"), [
    ([str(d) for d in range(10)], [str(d) for d in range(10)]),   # the digit classes: their own keys
    (["3", "2", "1"], ["3", "2", "1"]),
    (["cat", "dog"], ["1", "2"]),                                  # numbered, as before
    (["a", "1", "other"], ["a", "1", "2"]),                        # numbers skip the keys names took
    # beyond ten classes (WordNet's 26 categories): letters after the digits, never the skip key s
    ([f"noun.{i}" for i in range(26)], [*"1234567890", *"abcdefghijklmnop"]),
    ([f"c{i}" for i in range(40)], [*"1234567890", *"abcdefghijklmnopqrtuvwxyz", *[""] * 5]),
    (["A", "x", *(f"c{i}" for i in range(11))], ["A", "x", *"1234567890", "b"]),  # a name takes both cases
])
def test_a_class_named_by_one_key_is_typed_by_that_key(names, keys):
    assert class_keys(names) == keys


@pytest.fixture
def round0_project(tmp_path):
    project = make_project(tmp_path / "proj", cold_start="typicality")
    yield project
    project.close()


def test_round_zero_is_told_as_the_record_tells_it(round0_project):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from activebayes.app import create_app

    stored = round0_project.store.latest_proposal()[1]
    assert stored["strategy"] == "typicality" and stored["n_labelled"] == 0
    app = create_app(round0_project, token=TOKEN)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        session = with_sessions(client)
        item = session.post("/api/next", json={"annotator": "ann"}).json()["item"]
        state = session.get("/api/state").json()
    assert item["strategy"] == "typicality"
    # the state names what picked the round served now, and what the project is set to
    assert (state["strategy"], state["configured_strategy"]) == ("typicality", round0_project.config.strategy)
    assert "typicality" in item["why"] and "random" not in item["why"], item["why"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_digit_key_stores_that_digit_and_backspace_takes_it_back(live, project):
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(90_000)
            page.goto(f"{live.url}/?token={TOKEN}")
            page.wait_for_selector("body[data-ready='1']")
            shown = page.eval_on_selector_all("#classes button kbd", "nodes => nodes.map(n => n.textContent)")
            assert shown == [str(d) for d in range(10)]
            item = int(page.get_attribute("body", "data-item"))
            page.keyboard.press("3")
            page.wait_for_selector(f"body:not([data-item='{item}'])")
            page.wait_for_selector("#last[data-label='3']")
            assert "3" in page.inner_text("#last") and "Backspace" in page.inner_text("#last")
            assert page.inner_text("#stored-flash") == "3"
            assert project.store.labels() == {item: project.classes.index("3")}
            page.keyboard.press("Backspace")
            page.wait_for_selector(f"body[data-item='{item}']")
            assert project.store.labels() == {}
            assert "took back" in page.inner_text("#last")
        finally:
            browser.close()


# --------------------------------------------------------------------------- the dashboard (issue 29 item 10)


@pytest.fixture
def trained_live(tmp_path):
    from tests.app.app_helpers import LiveServer, wait_for

    project = make_project(tmp_path / "dash", batch_size=10)
    server = LiveServer(project)
    store = project.store
    for name in ("anon-0123456789abcdef0123456789abcdef", "a-very-long-annotator-name-without-any-spaces-at-all"):
        for _ in range(5):  # ten labels: one round, as a newcomer's first model
            item = store.lease_next(name, store.item_ids())
            store.answer(item, 0, name)
    server.worker.wake()
    wait_for(lambda: store.n_rounds() == 1 and (store.meta("status") or {}).get("state") == "ready", timeout=300)
    yield server
    server.stop()
    project.close()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_first_round_is_readable_on_the_dashboard(trained_live):
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(90_000)
            page.goto(f"{trained_live.url}/dashboard?token={TOKEN}")
            page.wait_for_selector("body[data-ready='1']")
            page.wait_for_selector("#curve circle")
            ticks = [int(t) for t in page.eval_on_selector_all("#curve text[y='280']", "n => n.map(e => e.textContent)")]
            steps = {b - a for a, b in zip(ticks, ticks[1:])}
            assert ticks[0] == 0 and len(steps) == 1 and ticks[-1] > 10, ticks  # evenly spaced, room after 10
            circles = page.eval_on_selector_all("#curve circle", "n => n.map(e => Number(e.getAttribute('cx')))")
            assert circles and max(circles) < 640 - 16 - 50, circles  # the point is not pinned to the right edge
            caption = page.inner_text("#curve-note")
            for cls, colour, line in [("test", "blue", "blue line"), ("preq", "orange", "orange dashed line")]:
                dots = page.locator(f"#curve circle.dot-{cls}").count()
                drawn_line = page.locator(f"#curve polyline.{cls}").count() > 0
                # the caption names each series as it is drawn, and nothing that is not drawn
                assert (colour in caption) == (dots > 0), (cls, dots, caption)
                assert (line in caption) == drawn_line, (cls, drawn_line, caption)
                assert (f"{colour} dot" in caption) == (dots == 1), (cls, dots, caption)
            assert page.locator("#curve circle").count() >= 1
            fits = page.evaluate("(() => { const t = document.getElementById('annotators');"
                                 " return [t.scrollWidth, t.parentElement.clientWidth]; })()")
            assert fits[0] <= fits[1], fits  # the annotators table stays inside its card
        finally:
            browser.close()
