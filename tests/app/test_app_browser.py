"""A real browser (headless Chromium driven by Playwright) labels 30 items with the keyboard."""

from __future__ import annotations

import time

import pytest

from activebayes.data import load_dataset
from tests.app.app_helpers import CHROMIUM, CHROMIUM_ARGS, TOKEN

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


def key_for(label: int) -> str:
    return str(label)  # the digits' classes are named 0..9: each is typed by its own key


def _poll(condition, page, seconds: float) -> None:
    """Wait until ``condition()`` holds or ``seconds`` pass (the page's CSP forbids eval, so
    the test polls instead of ``wait_for_function``)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        page.wait_for_timeout(100)


def test_label_thirty_items_with_the_keyboard_including_undo(live, project):
    targets = load_dataset("digits").targets
    given: dict[int, int] = {}
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(90_000)  # a busy CI machine: every step waits for one request at most
            page.goto(f"{live.url}/?token={TOKEN}")  # the token once, then the cookie
            assert page.url == f"{live.url}/"
            page.wait_for_selector("body[data-ready='1']")
            assert page.locator("#classes button").count() == 10
            assert page.inner_text("#stat-accuracy-name") == "held-out accuracy"  # a single-label project
            annotator = page.input_value("#annotator")
            assert annotator.startswith("anon-")
            assert page.context.cookies() == []  # the token lives in this origin's localStorage, not a cookie
            undo_keys = {10: "Control+z", 20: "Backspace"}
            while len(given) < 30:
                item = int(page.get_attribute("body", "data-item"))
                label = int(targets[project.index_of(item)])
                if len(given) in undo_keys and undo_keys[len(given)]:
                    # a slip of the finger, taken back at once
                    page.keyboard.press(key_for((label + 1) % 10))
                    page.wait_for_selector(f"body:not([data-item='{item}'])")
                    page.keyboard.press(undo_keys.pop(len(given)))
                    page.wait_for_selector(f"body[data-item='{item}']")
                    _poll(lambda: "took back" in page.inner_text("#toast"), page, 30)
                    assert "took back" in page.inner_text("#toast")
                page.keyboard.press(key_for(label))
                page.wait_for_selector(f"body:not([data-item='{item}'])")
                given[item] = label
            # the counter follows the stored answer, which may land just after the next item shows
            _poll(lambda: page.inner_text("#stat-mine") == "30", page, 30)
            assert page.inner_text("#stat-mine") == "30"
            # the image of the item on screen loads (it may still be in flight right after a key)
            # (the page's CSP forbids eval, so poll from here rather than with wait_for_function)
            loaded = "(() => { const img = document.getElementById('item-image');" \
                     " return img.complete && img.naturalWidth > 0; })()"
            # judged on the one atomic check: reading naturalWidth again afterwards raced the next
            # item's image, whose new src resets it to 0 until that one loads
            deadline = time.monotonic() + 60
            while not (shown := page.evaluate(loaded)) and time.monotonic() < deadline:
                page.wait_for_timeout(100)
            assert shown, "the item's image did not load within 60 s"
            # a reload (no token in the address any more) is the same annotator, and "by you" keeps counting
            page.reload()
            page.wait_for_selector("body[data-ready='1']")
            assert page.input_value("#annotator") == annotator
            deadline = time.monotonic() + 30
            while page.inner_text("#stat-mine") != "30" and time.monotonic() < deadline:
                page.wait_for_timeout(100)
            assert page.inner_text("#stat-mine") == "30"
        finally:
            browser.close()
    store = project.store
    active = store.active_answers()
    assert {e.item: e.label for e in active} == given and len(active) == 30
    assert {e.annotator for e in store.events()} == {annotator}
    kinds = [e.kind for e in store.events()]
    assert kinds.count("answer") == 32 and kinds.count("undo") == 2 and kinds.count("skip") == 0
    store.check_labels()
