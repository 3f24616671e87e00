"""A table as the loop's pool: :func:`table_splits` turns a :class:`~activebayes.records.LoopConfig`'s
``table`` fields into a training pool and an optional test set.

The table is read once with :func:`~activebayes.data.load_table` (text encoded, features
standardised, over all rows: unsupervised, no label is used). Multi-label tables
(``table_options["multilabel"]``) give a dataset with 0/1 indicator targets ``[N, C]``.
``table_options["test_size"]`` rows are held out as the test set: the items whose ids have
the smallest sha256, so the split is a property of the items (their ids), unchanged by
the row order, the seed or rows added later. The training pool is ordered by the same key,
not by the file's rows: a run's positions (``rounds.jsonl``'s ``acquired``) name the same
items whatever order the rows are in, and its ``items.json`` names each position's id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch

from activebayes.errors import InvalidArgumentError

from .dataset import ArrayDataset
from .table import ALL_OTHER_COLUMNS, TablePool, load_table, read_table_rows, resolve_feature_columns

__all__ = ["pin_feature_columns", "split_by_item_id", "table_pool", "table_splits"]


def pin_feature_columns(config: Any) -> Any:
    """``config`` with ``feature_columns=("*",)`` replaced by the names it stands for in the
    table now (every column but the text, label and id columns), else ``config`` itself.

    A run stores its config when it starts, so a column added to the file later does not
    change a resumed run's inputs."""
    if config.table is None or tuple(config.feature_columns) != (ALL_OTHER_COLUMNS,):
        return config
    columns, _ = read_table_rows(config.table, format=config.table_options.get("format"))
    resolved = resolve_feature_columns(config.feature_columns, columns,
                                       exclude=(config.text_column, config.label_column, config.id_column))
    if not resolved:  # load_table says what '*' found nothing in
        return config
    return config.replace(feature_columns=tuple(resolved))


def table_pool(config: Any) -> TablePool:
    """The :class:`~activebayes.data.table.TablePool` of ``config.table`` (all rows, ``test_size`` ignored)."""
    options = dict(config.table_options)
    options.pop("test_size", None)
    return load_table(config.table, text_column=config.text_column,
                      feature_columns=list(config.feature_columns) or None, label_column=config.label_column,
                      id_column=config.id_column, **options)


def table_splits(config: Any) -> tuple[ArrayDataset, ArrayDataset | None]:
    """``(train, test)`` of ``config.table`` (``test`` is ``None`` without ``test_size``).

    Every error of the table (a missing column, an empty text, a file that is not UTF-8, a
    label not among the classes, ...) is :func:`load_table`'s one-line error naming the row
    and the column.
    """
    test_size = int(config.table_options.get("test_size", 0) or 0)
    dataset = table_pool(config).dataset
    if test_size and dataset.targets is None:
        raise InvalidArgumentError("table_options test_size (--test-size) needs known labels: give label_column "
                                   "(--label-column)")
    if test_size >= len(dataset):
        raise InvalidArgumentError(f"test_size (--test-size) must be smaller than the table's {len(dataset)} rows, "
                                   f"got {test_size}")
    assert dataset.item_ids is not None
    order = _id_order(dataset.item_ids)  # the items' own order: the file's row order does not matter
    if not test_size:
        return dataset.subset(order), None
    return dataset.subset(order[test_size:]), dataset.subset(order[:test_size])


def _id_order(item_ids: Sequence[str]) -> torch.Tensor:
    """The rows in ascending sha256 of their ids (the key :func:`split_by_item_id` splits by)."""
    keys = [hashlib.sha256(item.encode("utf-8")).hexdigest() for item in item_ids]
    return torch.tensor(sorted(range(len(keys)), key=keys.__getitem__), dtype=torch.long)


def split_by_item_id(item_ids: Sequence[str], test_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train_rows, test_rows)``, each ascending: the ``test_size`` items whose ids have the
    smallest sha256 are the test set, whatever the row order (no random numbers)."""
    order = _id_order(item_ids)
    return order[test_size:].sort().values, order[:test_size].sort().values
