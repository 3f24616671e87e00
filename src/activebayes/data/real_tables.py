"""Real tables that install offline: scikit-learn's ``"breast_cancer"``, ``"wine"``, ``"iris"``,
and statsmodels' ``"rand_hie"`` (20,190 rows).

scikit-learn's tables are each split once, deterministically and stratified
(:func:`~activebayes.data.datasets.digits_split_indices`: no random numbers; 30% test), and
their numeric columns are standardised with the training split's mean and (population)
standard deviation, kept in ``ArrayDataset.normalization``-free form: the statistics are
recomputed identically on every load. None has a missing value. scikit-learn is needed
(the ``text`` extra).

**rand_hie**: the RAND Health Insurance Experiment (public domain), as statsmodels ships
it (Cameron and Trivedi 2005's subset; ``pip install statsmodels``, the ``tables`` extra):
20,190 person-years, 9 columns (coinsurance, deductible and participation incentive of
the person's plan, physical limitation, chronic diseases, self-rated health as good / fair
/ poor). The task: did the person see a doctor that year (``mdvis > 0``: ``"visit"``, 69%
of rows, against ``"no_visit"``)? The rows go through the library's own table path
(:func:`~activebayes.data.table.load_table`: content ids, checks, standardisation over all
rows, no label used), and the test set is the :data:`RAND_HIE_TEST_SIZE` rows whose ids hash
lowest (``activebayes.data.table_task.split_by_item_id``, as ``--test-size`` splits a
``--table``). statsmodels is located, not imported: only its CSV file is read.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from activebayes.errors import InvalidArgumentError, MissingFileError

from .dataset import ArrayDataset

if TYPE_CHECKING:
    from .table import TablePool

__all__ = ["RAND_HIE_COLUMNS", "RAND_HIE_TEST_SIZE", "SKLEARN_TABLES", "rand_hie", "rand_hie_contents", "rand_hie_csv",
           "sklearn_table", "sklearn_table_contents"]

SKLEARN_TABLES = {"breast_cancer": "load_breast_cancer", "wine": "load_wine", "iris": "load_iris"}
TEST_FRACTION = 0.3
#: rand_hie's feature columns (statsmodels' ``randhie.csv`` less the outcome ``mdvis``)
RAND_HIE_COLUMNS = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")
#: rand_hie's held-out rows (30% of 20,190)
RAND_HIE_TEST_SIZE = 6_057


def _sklearn_split(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...], tuple[str, ...], np.ndarray, np.ndarray]:
    """scikit-learn's table ``name``: float64 values ``[N, D]``, labels ``[N]``, column and
    class names, and the fixed ``(train, test)`` rows."""
    from .datasets import digits_split_indices

    if name not in SKLEARN_TABLES:
        raise InvalidArgumentError(f"unknown table {name!r}; expected one of {', '.join(SKLEARN_TABLES)}")
    try:
        from sklearn import datasets
    except ImportError:
        raise InvalidArgumentError(f"dataset {name!r} needs scikit-learn: pip install 'activebayes[text]'") from None
    bunch = getattr(datasets, SKLEARN_TABLES[name])()
    x, y = np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target, dtype=np.int64)
    if not np.isfinite(x).all():
        raise InvalidArgumentError(f"{name}: the bundled table holds NaN / inf values")
    train, test = digits_split_indices(y, test_size=int(round(TEST_FRACTION * len(y))))
    return (x, y, tuple(str(c) for c in bunch.feature_names), tuple(str(c) for c in bunch.target_names),
            train, test)


def sklearn_table(name: str, split: str = "train", **_: object) -> ArrayDataset:
    """The ``split`` of scikit-learn's bundled table ``name`` as standardised float32 features ``[N, D]``."""
    x, y, _columns, classes, train, test = _sklearn_split(name)
    mean, std = x[train].mean(0), x[train].std(0)
    std = np.where(std > 0, std, 1.0)
    rows = train if split == "train" else test
    return ArrayDataset(inputs=torch.from_numpy(((x[rows] - mean) / std).astype(np.float32)),
                        targets=torch.from_numpy(y[rows]), classes=classes, name=name)


def sklearn_table_contents(name: str, split: str = "train", **_: object) -> list[dict[str, Any]]:
    """What a person sees of each row of :func:`sklearn_table` ``split``, in its order: the
    row's columns with their values as scikit-learn gives them (not standardised; up to 12
    significant digits)."""
    x, _y, columns, _classes, train, test = _sklearn_split(name)
    return [{"kind": "row", "fields": [[c, f"{v:.12g}"] for c, v in zip(columns, row.tolist(), strict=True)]}
            for row in x[train if split == "train" else test]]


def rand_hie_csv() -> Path:
    """The path of statsmodels' ``datasets/randhie/randhie.csv`` (statsmodels found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("statsmodels")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidArgumentError("dataset 'rand_hie' reads the table statsmodels ships: "
                                   "pip install 'activebayes[tables]' (or statsmodels)")
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "randhie" / "randhie.csv"
    if not path.is_file():
        raise MissingFileError(f"dataset 'rand_hie': statsmodels is installed but {path} is missing")
    return path


def _rand_hie_rows() -> tuple[list[dict[str, str]], TablePool, torch.Tensor, torch.Tensor]:
    """rand_hie's rows (its feature columns as the CSV writes them, and the label), their
    pool (:func:`~activebayes.data.table.load_table`) and its ``(train, test)`` rows."""
    from ._core import DataError
    from .table import DuplicateRowsWarning, load_table, read_table_rows
    from .table_task import split_by_item_id

    path = rand_hie_csv()
    columns, rows = read_table_rows(path)
    missing = [c for c in ("mdvis", *RAND_HIE_COLUMNS) if c not in columns]
    if missing:
        raise DataError(f"{path}: expected the columns {', '.join(missing)}; is it statsmodels' randhie.csv?")
    if len(rows) != 20_190:
        raise DataError(f"{path}: expected 20,190 rows (statsmodels' randhie.csv), got {len(rows):,}")
    labelled = []
    for n, row in enumerate(rows, start=1):
        try:
            visits = float(row["mdvis"])
        except (TypeError, ValueError):
            raise DataError(f"{path}: row {n}, column 'mdvis': expected a number, got {row['mdvis']!r}") from None
        labelled.append({**{c: row[c] for c in RAND_HIE_COLUMNS}, "visit": "visit" if visits > 0 else "no_visit"})
    with warnings.catch_warnings():  # identical person-years with different outcomes: the bundled table never
        warnings.simplefilter("ignore", DuplicateRowsWarning)  # changes order, so content ids stay stable
        pool = load_table(labelled, feature_columns=list(RAND_HIE_COLUMNS), label_column="visit",
                          classes=("no_visit", "visit"), name="rand_hie")
    train, test = split_by_item_id(pool.item_ids, RAND_HIE_TEST_SIZE)
    return labelled, pool, train, test


def rand_hie(split: str = "train", **_: object) -> ArrayDataset:
    """The ``split`` of the RAND Health Insurance Experiment table (see the module docstring)."""
    _labelled, pool, train, test = _rand_hie_rows()
    return pool.dataset.subset(train if split == "train" else test)


def rand_hie_contents(split: str = "train", **_: object) -> list[dict[str, Any]]:
    """What a person sees of each row of :func:`rand_hie` ``split``, in its order: the nine
    columns as statsmodels' CSV writes them."""
    labelled, _pool, train, test = _rand_hie_rows()
    return [{"kind": "row", "fields": [[c, labelled[i][c]] for c in RAND_HIE_COLUMNS]}
            for i in (train if split == "train" else test).tolist()]
