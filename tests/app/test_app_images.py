"""What the app serves of an image folder stays inside it, bounded and re-encoded (issue 28 item 4)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PIL.PngImagePlugin import PngInfo
from starlette.testclient import TestClient

from activebayes.app import WorkerThread, create_app
from activebayes.labelling import LabellingProject
from tests.app.app_helpers import TOKEN, fast_config, wait_for


@pytest.fixture
def image_project(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(0)
    extra = PngInfo()
    extra.add_text("Comment", "<script>a chunk the app must not pass on</script>")  # the re-encoding drops it
    for i in range(8):
        pixels = rng.integers(0, 256, size=(12, 12, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"img_{i}.png", pnginfo=extra)
    Image.fromarray(np.full((10, 14, 3), 200, dtype=np.uint8)).save(folder / "photo.jpg", quality=90)
    (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    project = LabellingProject.create(tmp_path / "proj", fast_config(dataset=None, images=str(folder),
                                                                     classes=("a", "b"), model="mlp"))
    yield project, folder
    project.close()


def test_every_image_is_served_re_encoded_from_inside_the_folder(image_project, tmp_path):
    project, folder = image_project
    keys = {item.id: item.key for item in project.store.items()}
    assert "broken.png" not in keys.values()  # unreadable: not an item, never served
    outside = tmp_path / "outside.png"
    Image.fromarray(np.zeros((5, 5), dtype=np.uint8)).save(outside)
    with TestClient(create_app(project, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        for item, key in keys.items():
            if key in ("img_3.png", "img_4.png"):
                continue  # fetched below, after their files are swapped for links (not from the app's cache)
            response = client.get(f"/api/items/{item}/image")
            assert response.status_code == 200 and response.headers["content-type"] == "image/png"
            raw = (folder / key).read_bytes()
            assert response.content != raw and b"<script>" not in response.content  # re-encoded, not the file
            served = Image.open(io.BytesIO(response.content))
            with Image.open(folder / key) as original:
                assert served.size == original.size
                if key.endswith(".png"):
                    assert np.array_equal(np.asarray(served.convert("RGB")), np.asarray(original.convert("RGB")))
        # a file swapped for a link out of the folder after the scan: refused, its target never sent
        victim = next(i for i, k in keys.items() if k == "img_3.png")
        (folder / "img_3.png").unlink()
        (folder / "img_3.png").symlink_to(outside)
        response = client.get(f"/api/items/{victim}/image")
        assert response.status_code == 404 and "outside the image folder" in response.json()["error"]
        # a link to a non-image anywhere: the same
        victim = next(i for i, k in keys.items() if k == "img_4.png")
        (folder / "img_4.png").unlink()
        (folder / "img_4.png").symlink_to("/etc/passwd")
        response = client.get(f"/api/items/{victim}/image")
        assert response.status_code == 404 and b"root:" not in response.content


def test_an_unreadable_image_never_puts_the_trainer_in_error(image_project):
    project, folder = image_project
    worker = WorkerThread(project.directory, poll=0.05).start()
    try:
        status = wait_for(lambda: (project.store.meta("status") or {}).get("state") in ("ready", "error")
                          and project.store.meta("status"), timeout=300)
    finally:
        worker.stop()
    assert status["state"] == "ready" and not worker.errors, status


def test_skipped_files_are_noted_for_the_pages(image_project):
    project, folder = image_project
    with TestClient(create_app(project, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        skipped = client.get("/api/state").json()["skipped"]
    assert [key for key, _ in skipped] == ["broken.png"] and "cannot read image" in skipped[0][1]
    (folder / "broken.png").unlink()
    with LabellingProject.open(project.directory) as again:  # the next scan: nothing skipped any more
        assert again.store.meta("skipped") == []


def test_an_image_changed_on_disk_is_not_served_as_the_old_item(image_project):
    """An item is its path and its content: new pixels under the same name are another item, so
    the old item's picture is not replaced by them (a label would go to a picture nobody saw)."""
    project, folder = image_project
    keys = {item.key: item.id for item in project.store.items()}
    with TestClient(create_app(project, token=TOKEN), headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        item = keys["img_5.png"]
        Image.fromarray(np.zeros((12, 12, 3), dtype=np.uint8)).save(folder / "img_5.png")
        response = client.get(f"/api/items/{item}/image")
        assert response.status_code == 409 and "changed on disk" in response.json()["error"]
        # an unchanged one is served as before
        assert client.get(f"/api/items/{keys['img_6.png']}/image").status_code == 200
