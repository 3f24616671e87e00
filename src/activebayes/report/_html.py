"""Plain-string HTML building blocks for the report (no template engine, no JS, no external files).

Every piece of text goes through :func:`esc`; only the fixed markup written
here is trusted.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from activebayes.errors import InvalidArgumentError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def esc(value: object) -> str:
    """``html.escape(str(value))`` (quotes too, so it is safe inside attributes)."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class Figure:
    """A rendered figure (``png`` bytes) or the reason it was skipped."""

    key: str
    caption: str
    png: bytes | None = None
    skipped: str | None = None

    def to_html(self) -> str:
        if self.png is None:
            return (
                f'<div class="skipped" data-figure="{esc(self.key)}">'
                f"<strong>Figure skipped</strong> ({esc(self.caption)}): {esc(self.skipped)}</div>"
            )
        if not self.png.startswith(PNG_SIGNATURE):
            raise InvalidArgumentError(f"figure {self.key!r} is not a PNG image")
        data = base64.b64encode(self.png).decode("ascii")
        return (
            f'<figure data-figure="{esc(self.key)}">'
            f'<img src="data:image/png;base64,{data}" alt="{esc(self.caption)}">'
            f"<figcaption>{esc(self.caption)}</figcaption></figure>"
        )


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, raw: bool = False, css: str = "") -> str:
    """An HTML table; cells are escaped unless ``raw=True`` (then they must already be escaped)."""
    cell = (lambda v: v) if raw else esc
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    cls = f' class="{esc(css)}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def paragraph(text: str) -> str:
    return f"<p>{esc(text)}</p>"


def preformatted(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


@dataclass(frozen=True)
class Section:
    """One ``<section id=key>`` with a heading and already-escaped body HTML."""

    key: str
    title: str
    body: str

    def to_html(self) -> str:
        return f'<section id="{esc(self.key)}"><h2>{esc(self.title)}</h2>{self.body}</section>'


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1280px; padding: 1.5em 2em; color: #1b1f23; background: #fff; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; margin-top: 1.8em; }
nav { font-size: 0.92em; margin: 0.8em 0 1.2em; display: flex; flex-wrap: wrap; gap: 0.3em 1em; }
nav a { color: #0550ae; text-decoration: none; white-space: nowrap; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.92em; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.65em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num, .num td { font-variant-numeric: tabular-nums; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
figure { margin: 0; padding: 0.4em; border: 1px solid #eaeef2; border-radius: 4px; box-sizing: border-box; }
.figures.many figure { max-width: calc(50% - 0.5em); }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #57606a; margin-top: 0.3em; max-width: 620px; }
.skipped, .note { color: #7d4e00; background: #fff8c5; border: 1px solid #eed888; border-radius: 4px;
                  padding: 0.4em 0.7em; font-size: 0.9em; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.85em; border-radius: 4px; }
.muted { color: #57606a; font-size: 0.9em; }
"""


#: how every report page begins: a file at ``--output`` that does not is not replaced (:func:`is_report_file`)
PAGE_START = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
              '<meta name="viewport" content="width=device-width, initial-scale=1">')


def is_report_file(path: Path) -> bool:
    """Whether ``path`` holds a report this package wrote (its first bytes are :data:`PAGE_START`)."""
    try:
        with path.open("rb") as file:
            return file.read(len(PAGE_START.encode())) == PAGE_START.encode()
    except OSError:
        return False


def page(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    """The whole self-contained document."""
    nav = "".join(f'<a href="#{esc(s.key)}">{esc(s.title)}</a>' for s in sections)
    body = "\n".join(s.to_html() for s in sections)
    return (
        PAGE_START +
        f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n"
        f'<body><header><h1>{esc(title)}</h1><p class="muted">{esc(subtitle)}</p>'
        f"<nav>{nav}</nav></header>\n<main>\n{body}\n</main></body></html>\n"
    )


def figures_block(figures: Sequence[Figure]) -> str:
    many = " many" if len(figures) > 1 else ""
    return f'<div class="figures{many}">' + "".join(f.to_html() for f in figures) + "</div>"
