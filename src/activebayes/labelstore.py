"""The old path of the label store: use :mod:`activebayes.labelling.store` (the store) and
:mod:`activebayes.labelling.interchange` (its export formats, Label Studio in and out).

This module only re-exports their names, so code written against
``activebayes.labelstore`` keeps working.
"""

from __future__ import annotations

from activebayes.labelling.interchange import (
    EXPORT_COLUMNS,
    LabelStudioAnswers,
    csv_cell,
    export_text,
    label_studio_config,
    label_studio_tasks,
    read_label_studio,
)
from activebayes.labelling.items import file_sha256
from activebayes.labelling.store import (
    EVENT_KINDS,
    SCHEMA_VERSION,
    AlreadyLabelledError,
    Event,
    Item,
    ItemChanges,
    ItemFile,
    LabelStore,
    LabelStoreError,
    Lease,
    LeaseConflictError,
    NothingToUndoError,
    UnknownItemError,
)

__all__ = [
    "EVENT_KINDS",
    "EXPORT_COLUMNS",
    "SCHEMA_VERSION",
    "AlreadyLabelledError",
    "Event",
    "Item",
    "ItemChanges",
    "ItemFile",
    "LabelStore",
    "LabelStoreError",
    "LabelStudioAnswers",
    "Lease",
    "LeaseConflictError",
    "NothingToUndoError",
    "UnknownItemError",
    "csv_cell",
    "export_text",
    "file_sha256",
    "label_studio_config",
    "label_studio_tasks",
    "read_label_studio",
]
