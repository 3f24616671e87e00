"""Real tables bundled with scikit-learn (no download): ``"breast_cancer"``, ``"wine"``, ``"iris"``.

Each is split once, deterministically and stratified (:func:`~activebayes.data.datasets.digits_split_indices`:
no random numbers; 30% test), and its numeric columns are standardised with the
training split's mean and (population) standard deviation, kept in
``ArrayDataset.normalization``-free form: the statistics are recomputed identically
on every load. None has a missing value. scikit-learn is needed (the ``text`` extra).

A larger real table, covertype (581,012 rows), is *not* bundled with scikit-learn
(``fetch_covtype`` downloads it), so it is not offered here.
"""

from __future__ import annotations

import numpy as np
import torch

from activebayes.errors import InvalidArgumentError

from .dataset import ArrayDataset

__all__ = ["SKLEARN_TABLES", "sklearn_table"]

SKLEARN_TABLES = {"breast_cancer": "load_breast_cancer", "wine": "load_wine", "iris": "load_iris"}
TEST_FRACTION = 0.3


def sklearn_table(name: str, split: str = "train", **_: object) -> ArrayDataset:
    """The ``split`` of scikit-learn's bundled table ``name`` as standardised float32 features ``[N, D]``."""
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
    mean, std = x[train].mean(0), x[train].std(0)
    std = np.where(std > 0, std, 1.0)
    rows = train if split == "train" else test
    return ArrayDataset(inputs=torch.from_numpy(((x[rows] - mean) / std).astype(np.float32)),
                        targets=torch.from_numpy(y[rows]), classes=tuple(str(c) for c in bunch.target_names),
                        name=name)
