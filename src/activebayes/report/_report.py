"""Write the HTML report of a run or comparison directory (see :func:`write_report`).

Three steps, one module each: read the directory (:mod:`._data`, through
:mod:`activebayes.rundir`), build the sections from numbers the analysis
functions compute and figures the plot functions draw (:mod:`._sections`),
and render self-contained HTML (:mod:`._html`, :mod:`._figures`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from activebayes import _progress
from activebayes._io import atomic_write_text
from activebayes.analysis import check_targets
from activebayes.data import ArrayDataset
from activebayes.errors import InvalidArgumentError, MissingFileError
from activebayes.report._data import ReportData
from activebayes.report._html import is_report_file, page
from activebayes.report._sections import sections
from activebayes.rundir import REPORT_FILE

DEFAULT_FILE = REPORT_FILE


def render_report(path: Path, targets: Sequence[float] | None, *, progress: bool = False,
                  dataset: ArrayDataset | None = None) -> str:
    """The report page of the directory ``path`` as one HTML string (``progress``: a bar over its sections;
    ``dataset``: the runs' own training split, see :func:`write_report`)."""
    data = ReportData(path, dataset)
    kind = "comparison" if data.is_comparison else "run"
    # the directory's name only: the page is meant to be sent to others, who have no use for
    # (and should not see) where it lies on this machine
    name = path.resolve().name
    return page(f"activebayes report: {name}", f"{kind} directory {name}", sections(data, targets, progress=progress))


def write_report(
    path: str | os.PathLike[str],
    *,
    output: str | os.PathLike[str] | None = None,
    targets: Iterable[float] | None = None,
    progress: bool | None = None,
    dataset: ArrayDataset | None = None,
) -> Path:
    """Write one self-contained HTML report of a run or comparison directory.

    The page holds: an overview of the runs; learning curves (labels vs test
    accuracy, mean and range over seeds, one line per strategy); the labels
    needed to reach each of ``targets`` (median, IQR and range over seeds, "not
    reached" shown as such; see :func:`activebayes.analysis.summarise_strategy`);
    the area under the learning curve; final test accuracy, macro-F1, NLL,
    Brier and ECE (mean ± sd over seeds); calibration: the reliability diagram
    of the final round with bins pooled over seeds, and both the pooled ECE and
    the mean of the seeds' ECEs; the labelled set's class balance and per-class
    precision / recall (a multi-label run: per-class F1; class names from the
    dataset when it loads); the final confusion matrix; a grid of one round's
    acquired images with their class counts; time per round; and the configuration. Figures are PNGs embedded as
    base64 data URIs, so the file needs nothing else (no scripts, no external
    CSS). Without matplotlib (an optional extra) the report is written without
    figures and says so; a figure that cannot be drawn is replaced by a note
    with the reason.

    Args:
        path: a run directory (``config.json``) or comparison directory (``comparison.json``).
        output: HTML file to write; default ``<path>/report.html``. An existing file is replaced
            only when it is a report this package wrote: any other file is kept and refused.
        targets: accuracies in ``(0, 1]`` for the labels-needed table; by default 0.9 and
            0.95, or, where no run reaches 0.9, two read from random's mean curve
            (:func:`~activebayes.analysis.default_targets`).
        progress: a progress bar over the sections while they are drawn (a report takes
            seconds); ``None``: only on a terminal, or as the process default says
            (:mod:`activebayes._progress`: ``run_experiment(progress=False)`` and ``--quiet``
            silence it).
        dataset: the training split the runs' indices point into, for runs given their own
            data from Python (``ActiveLearningLoop(config, dataset=...)``): the report then
            shows its class names and acquired items. ``None``: the dataset the config names;
            for runs given their own data the report shows class ids and no pictures
            (:func:`~activebayes.experiment.run_experiment` passes the run's own).

    Returns:
        The path written (atomically: temp file + ``os.replace``).

    Example::

        >>> from activebayes.report import write_report
        >>> write_report("runs/bald_vs_random")          # doctest: +SKIP
        PosixPath('runs/bald_vs_random/report.html')
    """
    directory = Path(path)
    if not directory.is_dir():
        raise MissingFileError(f"path must be a run or comparison directory, got {str(path)!r} (no such directory)")
    target_list = None if targets is None else check_targets(targets)
    destination = Path(output) if output is not None else directory / DEFAULT_FILE
    if output is not None and destination.exists() and not (destination.is_file() and is_report_file(destination)):
        raise InvalidArgumentError(f"output (--output): {destination} exists and is not a report this package wrote; "
                                   "it is kept: choose another file, or delete it first")
    return atomic_write_text(destination, render_report(directory, target_list,
                                                          progress=_progress.shown(progress), dataset=dataset))
