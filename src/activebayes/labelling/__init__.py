"""Real labelling with a person in the loop, one module per concept.

- :mod:`~activebayes.labelling.project`: :class:`LabellingProject`, a project directory
  tying the label store to the active learning loop (create, open, advance a round, export);
- :mod:`~activebayes.labelling.settings`: :class:`ProjectConfig`, the project's settings
  and their checks;
- :mod:`~activebayes.labelling.items`: the folder / dataset scan and the map between
  item ids and dataset positions;
- :mod:`~activebayes.labelling.store`: :class:`~activebayes.labelling.store.LabelStore`,
  the durable SQLite label store (items, answer events, leases, rounds);
- :mod:`~activebayes.labelling.interchange`: the file formats (query files, answers
  files, CSV / JSON exports, Label Studio in and out);
- :mod:`~activebayes.labelling.roundtrip`: the file round trip (``activebayes query`` /
  ``import``), and :class:`FileOracle`, the same round trip for an in-memory dataset.

A labelling project is a directory::

    PROJECT/
      labels.sqlite                    the label store
      queries/query-0000.csv, ...      the batches written by ``activebayes query``
      queries/thumbnails/              PNG thumbnails of the queried items
      exports/                         files written by ``export`` / the app

The old module :mod:`activebayes.labelstore` re-exports the store and its export
formats under their old names.
"""

from __future__ import annotations

from activebayes.labelling.interchange import AnswerFileError, AnswerProblem, AnswersFile, read_answers, write_query
from activebayes.labelling.items import scan_dataset, scan_folder
from activebayes.labelling.project import STORE_FILE, LabellingProject, is_project
from activebayes.labelling.roundtrip import FileOracle, ImportResult, LabelsPendingError, QueryResult
from activebayes.labelling.settings import ProjectConfig, ProjectError

__all__ = [
    "STORE_FILE",
    "AnswerFileError",
    "AnswerProblem",
    "AnswersFile",
    "FileOracle",
    "ImportResult",
    "LabellingProject",
    "LabelsPendingError",
    "ProjectConfig",
    "ProjectError",
    "QueryResult",
    "is_project",
    "read_answers",
    "scan_dataset",
    "scan_folder",
    "write_query",
]
