"""A real browser (headless Chromium driven by Playwright) labels a CSV of 60 WordNet glosses
with the keyboard, undoes once and exports; a multi-label project takes sets by toggled keys."""

from __future__ import annotations

import csv
import io
import time
from pathlib import Path

import pytest

from tests.app.app_helpers import CHROMIUM, CHROMIUM_ARGS, LiveServer, TOKEN
from tests.app.text_helpers import CLASSES, gloss_rows, make_text_project, write_csv

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
HTML_TEXT = "<b>not bold</b> <img src=x> a gloss with markup"


def key_for(label: str) -> str:
    return str(CLASSES.index(label) + 1)  # the classes' names are words: typed by the numbers 1, 2, 3


def _live(tmp_path, **changes):
    rows = gloss_rows(20)  # 60 rows
    rows.insert(0, {"id": "markup", "text": HTML_TEXT, "y": "animal"})
    project = make_text_project(tmp_path / "proj", write_csv(tmp_path / "glosses.csv", rows), **changes)
    return project, LiveServer(project), {row["id"]: row for row in rows}


def _open(browser, live):
    page = browser.new_page(viewport={"width": 1100, "height": 720})
    page.set_default_timeout(90_000)
    page.goto(f"{live.url}/?token={TOKEN}")
    page.wait_for_selector("body[data-ready='1']")
    return page


def _shown_text(page) -> str:
    return page.inner_text("#item-text .text")


def test_label_a_csv_of_texts_with_the_keyboard_undo_once_and_export(tmp_path):
    tic = time.monotonic()
    project, live, rows = _live(tmp_path)
    given: dict[str, str] = {}
    try:
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = _open(browser, live)
                assert [page.get_attribute(f"#classes button:nth-child({k + 1})", "data-key")
                        for k in range(3)] == ["1", "2", "3"]
                assert page.is_hidden("#item-image") and page.is_visible("#item-text")
                undone = False
                while len(given) < 12:
                    item = int(page.get_attribute("body", "data-item"))
                    key = project.store.item(item).key
                    assert _shown_text(page) == rows[key]["text"]  # the text as it is in the file
                    label = rows[key]["y"]
                    if len(given) == 5 and not undone:  # a slip, taken back at once
                        wrong = CLASSES[(CLASSES.index(label) + 1) % 3]
                        page.keyboard.press(key_for(wrong))
                        page.wait_for_selector(f"body:not([data-item='{item}'])")
                        page.keyboard.press("Backspace")
                        page.wait_for_selector(f"body[data-item='{item}']")
                        assert "took back" in page.inner_text("#toast") and _shown_text(page) == rows[key]["text"]
                        undone = True
                    page.keyboard.press(key_for(label))
                    page.wait_for_selector(f"body:not([data-item='{item}'])")
                    given[key] = label
                assert page.inner_text("#stat-mine") == "12"
                page.goto(f"{live.url}/dashboard")
                page.wait_for_selector("#exports a[data-export='csv']")
                with page.expect_download() as download:
                    page.click("#exports a[data-export='csv']")
                exported = Path(download.value.path()).read_text(encoding="utf-8")
            finally:
                browser.close()
    finally:
        live.stop()
    rows_out = list(csv.DictReader(io.StringIO(exported)))
    assert len(rows_out) == 61 and all(r["text"] == rows[r["key"]]["text"] for r in rows_out)
    assert {r["key"]: r["label"] for r in rows_out if r["label"]} == given
    store = project.store
    assert {store.item(e.item).key: CLASSES[e.label] for e in store.active_answers()} == given
    kinds = [e.kind for e in store.events()]
    assert kinds.count("answer") == 13 and kinds.count("undo") == 1
    store.check_labels()
    project.close()
    print(f"labelled 12 texts, one undo, exported: {time.monotonic() - tic:.1f} s")


def test_markup_in_a_text_is_shown_as_text_and_multilabel_keys_toggle(tmp_path):
    project, live, rows = _live(tmp_path, table_options={"multilabel": True})
    markup = next(i for i in project.store.items() if i.key == "markup")
    try:
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = _open(browser, live)
                assert page.is_visible("#submit")
                # a multi-label project's held-out figure is the micro-F1 of its label decisions
                assert page.inner_text("#stat-accuracy-name") == "held-out micro-F1"
                item = int(page.get_attribute("body", "data-item"))
                page.keyboard.press("Enter")  # nothing chosen: refused on the page, nothing sent
                assert "at least one class" in page.inner_text("#toast")
                page.keyboard.press("1")
                page.keyboard.press("3")
                page.keyboard.press("2")
                page.keyboard.press("2")  # toggled off again
                assert page.get_attribute("body", "data-chosen") == "animal|plant"
                assert page.get_attribute("#classes button[data-label='plant']", "aria-pressed") == "true"
                assert page.get_attribute("#classes button[data-label='food']", "aria-pressed") == "false"
                page.keyboard.press("Enter")
                page.wait_for_selector(f"body:not([data-item='{item}'])")
                assert page.get_attribute("body", "data-chosen") == ""  # the next item starts empty
                assert project.store.labels() == {item: 0b101}
                page.keyboard.press("Backspace")
                page.wait_for_selector(f"body[data-item='{item}']")
                assert project.store.labels() == {}
                # the item with markup, leased to this page: its text shows as characters
                project.store.release(page.input_value("#annotator"))
                project.store.lease_next(page.input_value("#annotator"), [markup.id])
                page.reload()
                page.wait_for_selector(f"body[data-item='{markup.id}']")
                assert _shown_text(page) == HTML_TEXT
                assert page.locator("#item-text b").count() == 0 and page.locator("#item-text img").count() == 0
                page.goto(f"{live.url}/dashboard")
                page.wait_for_selector("body[data-ready='1']")
                terms = page.eval_on_selector_all("#counts dt", "n => n.map(e => e.textContent)")
                assert "held-out micro-F1" in terms and "test micro-F1" in terms
                assert not any("accuracy" in t for t in terms), terms
                assert page.get_attribute("#curve", "aria-label") == "micro-F1 against labels"
            finally:
                browser.close()
    finally:
        live.stop()
        project.close()


def test_more_than_ten_classes_are_typed_by_letters_after_the_digits(tmp_path):
    classes = tuple(f"category {i:02d}" for i in range(12))
    project, live, _rows = _live(tmp_path, classes=classes)
    try:
        with playwright_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                page = _open(browser, live)
                shown = page.eval_on_selector_all("#classes button kbd", "nodes => nodes.map(n => n.textContent)")
                assert shown == [*"1234567890", "a", "b"]
                assert page.inner_text("#key-help") == "the key on each button"
                item = int(page.get_attribute("body", "data-item"))
                page.keyboard.press("b")  # the twelfth class
                page.wait_for_selector(f"body:not([data-item='{item}'])")
                page.wait_for_selector("#last[data-label='category 11']")
                second = int(page.get_attribute("body", "data-item"))
                page.keyboard.press("s")  # still the skip key
                page.wait_for_selector(f"body:not([data-item='{second}'])")
            finally:
                browser.close()
        assert project.classes[project.store.label_of(item)] == "category 11" and project.store.counts()["skips"] == 1
    finally:
        live.stop()
        project.close()
