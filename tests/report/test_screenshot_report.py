"""A comparison report opened in headless Chromium renders every image (scripts/screenshot_report.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshot_report.py"

sys.path.insert(0, str(SCRIPT.parent))
from screenshot_report import find_chromium, png_size  # noqa: E402

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="chromium is not installed")


def _run(report: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), str(report), str(out)],
                          capture_output=True, text=True, timeout=300, check=False)


def test_comparison_report_renders_every_image_in_chromium(comparison_report, tmp_path):
    report, _ = comparison_report  # the report of a real 2-strategy x 2-seed comparison (conftest.py)
    n_img = report.read_text().count("<img")
    assert n_img >= 1
    shot = tmp_path / "report.png"
    result = _run(report, shot)
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout.strip().splitlines()[-1])
    assert verdict["total"] == verdict["rendered"] == verdict["img_tags"] == n_img
    assert verdict["broken"] == []
    assert png_size(shot) == (1400, 4000)


def test_broken_and_external_images_are_caught(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="data:image/png;base64,AAAA" alt="corrupt">'
        '<img src="next_to_it.png" alt="not embedded"></body></html>'
    )
    (tmp_path / "next_to_it.png").write_bytes(b"")  # exists but is not a picture
    result = _run(page, tmp_path / "bad.png")
    assert result.returncode == 1
    verdict = json.loads(result.stdout.strip().splitlines()[-1])
    assert verdict["total"] == 2 and verdict["rendered"] == 0
    assert "2 of 2 images did not render" in result.stderr
