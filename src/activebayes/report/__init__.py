"""One self-contained HTML report per run or comparison directory.

:func:`write_report` reads a run directory (``config.json`` + ``rounds.jsonl``)
or a comparison directory (``comparison.json`` + ``<strategy>/seed_<seed>/``) and
writes ``report.html``: learning curves, the labels needed to reach target
accuracies, area under the learning curve, final metrics, calibration, class
balance, per-class precision / recall (a multi-label run: per-class F1), confusion
matrix, acquired images, time per round and the configuration, with every figure
embedded as a PNG data URI.

Example::

    >>> from activebayes.report import write_report
    >>> write_report("runs/compare", targets=(0.9, 0.95))   # doctest: +SKIP
    PosixPath('runs/compare/report.html')
"""

from __future__ import annotations

from activebayes.report._report import DEFAULT_FILE, write_report

__all__ = ["DEFAULT_FILE", "write_report"]
