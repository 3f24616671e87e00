#!/usr/bin/env python3
"""Open an activebayes HTML report in headless Chromium, check every image rendered, save a screenshot.

Usage::

    python scripts/screenshot_report.py REPORT.html OUT.png [--height 4000] [--full-page]

Two Chromium runs:

1. **Render check.** A copy of the report with a small checking script appended
   is loaded with ``--dump-dom`` and a virtual-time budget (so the load event has
   fired and every image has been decoded before the DOM is printed). On
   ``load`` the script records, for every ``<img>``, whether it finished loading
   with a non-zero ``naturalWidth`` / ``naturalHeight`` (a broken or missing
   image has 0), plus the page height, into a ``<pre id="render-check">`` element
   as JSON; this script parses that element out of the dumped DOM. The copy
   lives in a fresh temporary folder, so an image that points at a file next to
   the report (not embedded) fails the check too. The number of ``<img>`` tags in
   the source must equal the number the browser saw.
2. **Screenshot.** The original report is opened with ``--screenshot`` at
   ``--window-size=1400,HEIGHT`` (``--full-page``: the page's measured height,
   at most 16,000 px). The PNG's signature and size are checked.

Exit status 0 when every image rendered and the screenshot was written; 1 with
the reasons on stderr otherwise; 2 when Chromium is not installed
(``apt-get install -y chromium`` on Debian).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BASE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
WIDTH = 1400
MAX_HEIGHT = 16000
TIMEOUT_S = 120

CHECK_SCRIPT = """
<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var report = {
    total: images.length,
    rendered: 0,
    broken: [],
    height: Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)
  };
  images.forEach(function (img, i) {
    if (img.complete && img.naturalWidth > 0 && img.naturalHeight > 0) {
      report.rendered += 1;
    } else {
      report.broken.push({index: i, alt: img.alt || "", src: (img.getAttribute("src") || "").slice(0, 60)});
    }
  });
  var out = document.createElement("pre");
  out.id = "render-check";
  out.textContent = JSON.stringify(report);
  document.body.appendChild(out);
});
</script>
"""


def find_chromium() -> str | None:
    """The Chromium executable (``$CHROMIUM`` first), or ``None``."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) else None
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run_chromium(chromium: str, args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    command = [chromium, *BASE_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def count_img_tags(source: str) -> int:
    return len(re.findall(r"<img\b", source, flags=re.IGNORECASE))


def check_rendering(chromium: str, report: Path, workdir: Path) -> dict:
    """Load a checking copy of ``report``; return the page's JSON verdict (see the module docstring)."""
    source = report.read_text(encoding="utf-8")
    marker = source.lower().rfind("</body>")
    checked = source[:marker] + CHECK_SCRIPT + source[marker:] if marker >= 0 else source + CHECK_SCRIPT
    copy = workdir / "render_check.html"
    copy.write_text(checked, encoding="utf-8")
    result = _run_chromium(
        chromium,
        ["--dump-dom", "--virtual-time-budget=15000", f"--window-size={WIDTH},4000", copy.as_uri()],
        workdir / "profile-check",
    )
    found = re.search(r'<pre id="render-check">(.*?)</pre>', result.stdout, flags=re.DOTALL)
    if found is None:
        raise RuntimeError(
            "the checking script did not report (page did not finish loading?); "
            f"chromium exit {result.returncode}: {result.stderr.strip()[-800:]}"
        )
    verdict = json.loads(html.unescape(found.group(1)))
    verdict["img_tags"] = count_img_tags(source)
    return verdict


def png_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` from a PNG's IHDR chunk; raises ``ValueError`` if it is not a PNG."""
    header = path.read_bytes()[:24]
    if len(header) < 24 or not header.startswith(b"\x89PNG\r\n\x1a\n") or header[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG file")
    return struct.unpack(">II", header[16:24])


def take_screenshot(chromium: str, report: Path, out: Path, height: int, workdir: Path) -> tuple[int, int]:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    result = _run_chromium(
        chromium,
        [f"--screenshot={out.resolve()}", f"--window-size={WIDTH},{height}", "--virtual-time-budget=15000",
         report.resolve().as_uri()],
        workdir / "profile-shot",
    )
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot (exit {result.returncode}): {result.stderr.strip()[-800:]}")
    return png_size(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the report HTML file")
    parser.add_argument("out", type=Path, help="the screenshot PNG to write")
    parser.add_argument("--height", type=int, default=4000, help="window height in pixels [4000]")
    parser.add_argument("--full-page", action="store_true", help="use the page's measured height instead")
    args = parser.parse_args(argv)

    if not args.report.is_file():
        print(f"error: REPORT {args.report} is not a file", file=sys.stderr)
        return 1
    chromium = find_chromium()
    if chromium is None:
        print("error: chromium not found; install it (Debian: apt-get install -y chromium) or set $CHROMIUM",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ab-screenshot-") as tmp:
        workdir = Path(tmp)
        verdict = check_rendering(chromium, args.report, workdir)
        height = min(int(verdict["height"]) + 40, MAX_HEIGHT) if args.full_page else args.height
        width, shot_height = take_screenshot(chromium, args.report, args.out, height, workdir)
    verdict.update({"screenshot": str(args.out), "screenshot_size": [width, shot_height]})
    print(json.dumps(verdict))
    problems = []
    if verdict["broken"]:
        problems.append(f"{len(verdict['broken'])} of {verdict['total']} images did not render: {verdict['broken']}")
    if verdict["total"] != verdict["img_tags"]:
        problems.append(f"the source has {verdict['img_tags']} <img> tags but the browser saw {verdict['total']}")
    if width != WIDTH:
        problems.append(f"screenshot is {width} px wide, expected {WIDTH}")
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
