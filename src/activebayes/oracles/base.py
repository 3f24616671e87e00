"""The oracle protocol and the simulated oracle.

An oracle answers "what are the labels of these items?": given original dataset
indices ``indices_B`` it returns class ids ``labels_B`` (LongTensor ``[B]``).
Oracles are also plain callables (``oracle(indices_B)``), which is all the loop needs.

Example:
    >>> from activebayes.data import load_dataset
    >>> ds = load_dataset("digits")
    >>> oracle = SimulatedOracle(ds)
    >>> bool((oracle.label([0, 5]) == ds.targets[[0, 5]]).all())
    True
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor

from ..data.dataset import ArrayDataset
from activebayes.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Oracle", "SimulatedOracle"]


@runtime_checkable
class Oracle(Protocol):
    """Anything that labels original dataset indices: ``label(indices_B) -> labels_B``."""

    def label(self, pool_indices: Tensor) -> Tensor:
        """Class ids ``[B]`` (int64, in ``0 .. C-1``) for original indices ``[B]``."""
        ...


class SimulatedOracle:
    """Answers with the dataset's own targets (a simulation of a perfect annotator).

    ``n_queried`` counts the labels given so far.
    """

    def __init__(self, dataset: ArrayDataset) -> None:
        if not isinstance(dataset, ArrayDataset):
            raise InvalidTypeError(f"dataset must be an ArrayDataset, got {type(dataset).__name__}")
        if dataset.targets is None:
            raise InvalidArgumentError(f"dataset {dataset.name!r} has no targets to simulate an oracle with")
        self.dataset = dataset
        self.n_queried = 0

    def label(self, pool_indices: object) -> Tensor:
        """``dataset.targets[pool_indices]``; raises ``IndexError`` for indices outside the dataset."""
        index = self.dataset.check_indices(pool_indices, "pool_indices")
        assert self.dataset.targets is not None
        self.n_queried += int(index.numel())
        return self.dataset.targets[index].clone()

    __call__ = label

    def __repr__(self) -> str:
        return f"SimulatedOracle(dataset={self.dataset.name!r}, n_queried={self.n_queried})"
