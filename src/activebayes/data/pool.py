"""The active learning pool: which items of one dataset are labelled, unlabelled, held out.

A :class:`Pool` never copies the data. It keeps one status per dataset row
(unlabelled / labelled / validation / excluded) and, for labelled items, the label
the oracle gave (which in a real job may differ from ``dataset.targets``). Every
index it takes or returns is an ORIGINAL dataset row index, so every item is
traceable; tensors are gathered by indexing only when asked for.

The test set is a separate split (``load_dataset(name, split="test")``), not part
of the pool.

The tutorial's primitives (seed 000) map to index-level operations:

====================================  =====================================================
tutorial (copies datasets)            Pool (indices only)
====================================  =====================================================
``take(S_pool, idx)``                 ``pool.take(idx)``: positions in ``unlabelled_indices``
                                      -> original indices (nothing moves)
``append(S_train, S_requested)``      ``pool.append(original, labels)`` (= ``label``)
``delete(S_pool, idx)``               implied by ``append``; ``pool.delete(idx)`` removes
                                      items from the unlabelled set without a label
                                      (e.g. an image the annotator rejected)
====================================  =====================================================

So the tutorial's ``take`` / ``append`` / ``delete`` step is ``pool.label(pool.take(idx))``.

Example:
    >>> from activebayes.data import load_dataset
    >>> pool = Pool.create(load_dataset("digits"), validation_size=100, initial_size=20, seed=0)
    >>> pool.n_labelled, pool.n_validation, pool.class_counts().tolist()
    (20, 100, [2, 2, 2, 2, 2, 2, 2, 2, 2, 2])
    >>> picked = pool.take([0, 1, 2])          # positions among the unlabelled items
    >>> pool.label(picked)                      # simulated: labels from dataset.targets
    >>> pool.n_labelled
    23
"""

from __future__ import annotations

import numbers

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from .._validation import check_choice, check_positive_int
from .dataset import ArrayDataset, as_index_tensor
from activebayes.errors import InvalidArgumentError, InvalidIndexError, InvalidTypeError

__all__ = ["Pool", "UNLABELLED", "LABELLED", "VALIDATION", "EXCLUDED"]

UNLABELLED, LABELLED, VALIDATION, EXCLUDED = 0, 1, 2, 3
_STATUS_NAMES = {UNLABELLED: "unlabelled", LABELLED: "labelled", VALIDATION: "validation", EXCLUDED: "excluded"}
_STATE_VERSION = 1


def _generator(seed: int | None, generator: torch.Generator | int | None) -> torch.Generator:
    if seed is not None and generator is not None:
        raise InvalidArgumentError("pass either seed or generator, not both")
    if generator is not None:
        if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):  # a seed, as generator= takes elsewhere
            return torch.Generator().manual_seed(int(generator))
        if not isinstance(generator, torch.Generator):
            raise InvalidTypeError(f"generator must be a torch.Generator or an int seed, got "
                                   f"{type(generator).__name__}")
        return generator
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise InvalidTypeError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    return torch.Generator().manual_seed(int(seed))


def _proportional(counts_C: Tensor, total: int) -> Tensor:
    """Split ``total`` over classes in proportion to ``counts_C`` (largest remainder)."""
    quota_C = counts_C.double() * total / counts_C.sum()
    take_C = quota_C.floor().long()
    short = total - int(take_C.sum())
    if short:
        order = torch.argsort(-(quota_C - take_C), stable=True)
        take_C[order[:short]] += 1
    return take_C


def _check_indicators(labels: object, index: Tensor, num_classes: int) -> Tensor:
    """Multi-label answers: 0/1 indicators ``[B, C]``, at least one class per item."""
    try:
        label_B_C = torch.as_tensor(labels)
    except (TypeError, ValueError, RuntimeError):
        raise InvalidTypeError(f"labels of a multi-label dataset must be 0/1 indicators [B, C], got {labels!r}") from None
    if label_B_C.is_floating_point() or label_B_C.dtype == torch.bool:
        if not bool(((label_B_C == 0) | (label_B_C == 1)).all()):
            raise InvalidArgumentError("labels of a multi-label dataset must hold only 0 and 1")
    label_B_C = label_B_C.long()
    if label_B_C.shape != (len(index), num_classes):
        raise InvalidArgumentError(f"labels of a multi-label dataset must have shape [B, C] = [{len(index)}, "
                                   f"{num_classes}], got {tuple(label_B_C.shape)}")
    if label_B_C.numel() and not bool(((label_B_C == 0) | (label_B_C == 1)).all()):
        raise InvalidArgumentError("labels of a multi-label dataset must hold only 0 and 1")
    empty = (label_B_C.sum(1) == 0).nonzero().flatten()
    if len(empty):
        raise InvalidArgumentError(f"item {int(index[empty[0]])}: a multi-label answer needs at least one class, got none")
    return label_B_C


def _check_answerable(dataset: ArrayDataset, needs_targets: bool) -> None:
    """A multi-label pool's targets are the answers of a simulated annotator, and a multi-label
    answer needs at least one class: refuse rows with none before anything runs (the loop would
    otherwise stop mid-run when the oracle gives one). All-zero targets with ``needs_targets``
    false are the placeholder of a dataset whose labels a person gives (a labelling project)."""
    assert dataset.targets is not None
    empty_N = (dataset.targets.sum(1) == 0).nonzero().flatten()
    n_items = len(dataset)
    if not len(empty_N) or (len(empty_N) == n_items and not needs_targets):
        return
    shown = empty_N[:5].tolist()
    ids = dataset.item_ids
    rows = ", ".join(f"{i} ({ids[i]!r})" if ids is not None else str(i) for i in shown)
    more = ", ..." if len(empty_N) > len(shown) else ""
    raise InvalidArgumentError(
        f"dataset {dataset.name!r}: targets: {len(empty_N)} of {n_items} multi-label rows have no positive "
        f"class (rows {rows}{more}); a pool's targets are the simulated annotator's answers and a multi-label "
        "answer needs at least one class: drop those rows or give them a class of their own (e.g. 'none'); "
        "a test set may keep such rows")


def _balanced_multilabel(targets_N_C: Tensor, free: Tensor, n_initial: int, gen: torch.Generator) -> Tensor:
    """``n_initial`` free items: classes in a random order, round after round, one random free item
    carrying the class each (a class with none left is skipped; then any free items)."""
    n_classes = targets_N_C.shape[1]
    available = torch.ones(len(free), dtype=torch.bool)
    chosen: list[int] = []
    order = torch.randperm(n_classes, generator=gen).tolist()
    while len(chosen) < n_initial:
        progressed = False
        for c in order:
            if len(chosen) == n_initial:
                break
            members = (available & (targets_N_C[free, c] == 1)).nonzero().flatten()
            if len(members):
                pick = members[torch.randint(len(members), (1,), generator=gen)]
                available[pick] = False
                chosen.append(int(pick))
                progressed = True
        if not progressed:
            rest = available.nonzero().flatten()
            rest = rest[torch.randperm(len(rest), generator=gen)[: n_initial - len(chosen)]]
            chosen.extend(int(i) for i in rest)
            break
    return free[torch.tensor(chosen, dtype=torch.long)]


class Pool:
    """Disjoint labelled / unlabelled / validation (/ excluded) index sets over one dataset.

    Build one with :meth:`Pool.create` (or :meth:`Pool.from_state_dict` to resume).
    Invariants (checked by :meth:`check_invariants`): every dataset row has exactly
    one status, every index refers to a row of ``dataset``, and labelled rows carry
    a label in ``0 .. C-1``.
    """

    def __init__(self, dataset: ArrayDataset) -> None:
        if not isinstance(dataset, ArrayDataset):
            raise InvalidTypeError(f"dataset must be an ArrayDataset, got {type(dataset).__name__}")
        self.dataset = dataset
        n_items = len(dataset)
        self._status_N = torch.full((n_items,), UNLABELLED, dtype=torch.int8)
        # the oracle's labels: class ids [N], or 0/1 indicators [N, C] for a multi-label dataset
        self._label_N = torch.full((n_items, dataset.num_classes) if dataset.multilabel else (n_items,), -1,
                                   dtype=torch.long)
        self._labelled_order: list[Tensor] = []  # chunks of labelled indices in labelling order

    # ------------------------------------------------------------------ factories
    @classmethod
    def create(
        cls,
        dataset: ArrayDataset,
        *,
        validation_size: int = 0,
        validation: str = "stratified",
        initial_size: int = 20,
        initial: str = "balanced",
        seed: int | None = None,
        generator: torch.Generator | int | None = None,
    ) -> Pool:
        """Split ``dataset`` into validation, an initial labelled set, and the unlabelled rest.

        Args:
            dataset: the training split; needs ``targets`` unless ``validation_size == 0``
                and ``initial == "empty"`` (a real labelling job).
            validation_size: items held out for validation (early stopping / model
                selection), labelled with ``dataset.targets``.
            validation: ``"stratified"`` (per class in proportion to the class sizes,
                largest-remainder rounding, random within class) or ``"random"``.
            initial_size: size of the initial labelled set (ignored for ``"empty"``).
            initial: ``"balanced"`` (``initial_size // C`` per class, the remainder to
                distinct randomly chosen classes, so counts differ by at most one and
                are equal when ``C`` divides ``initial_size``), ``"random"`` (uniform
                over the non-validation items) or ``"empty"``.
            seed: randomness (default 0); the same seed gives the same pool.
            generator: a ``torch.Generator`` (or an int seed) to draw from instead of ``seed``.

        The initial set is drawn after (and disjoint from) the validation set and is
        labelled with ``dataset.targets`` (a simulated oracle).

        Multi-label datasets (``targets_N_C``): ``"stratified"`` validation is drawn uniformly
        (classes overlap, so there are no strata), and ``"balanced"`` takes classes in a
        random order, round after round, each time one random free item that carries the
        class, so every class is present at least ``initial_size // C`` times when it can be.
        Their targets are the simulated annotator's answers, so a row with no positive class is
        an error naming the rows (a multi-label answer needs at least one class); only targets
        that are all zero, with ``validation_size == 0`` and ``initial == "empty"``, are allowed:
        the placeholder of a dataset a person labels. A test set is not a pool and may keep
        such rows (:func:`~activebayes.metrics.multilabel.evaluate_multilabel` scores them).
        """
        check_choice(initial, "initial", ("balanced", "random", "empty"))
        check_choice(validation, "validation", ("stratified", "random"))
        check_positive_int(validation_size, "validation_size", allow_zero=True)
        check_positive_int(initial_size, "initial_size", allow_zero=True)
        gen = _generator(seed, generator)
        pool = cls(dataset)
        n_items, n_classes = len(dataset), dataset.num_classes
        needs_targets = validation_size > 0 or (initial != "empty" and initial_size > 0)
        if needs_targets and dataset.targets is None:
            raise InvalidArgumentError(
                f"dataset {dataset.name!r} is unlabelled: use validation_size=0 and initial='empty', "
                "then label items through an oracle"
            )
        if dataset.multilabel:
            _check_answerable(dataset, needs_targets)
        n_initial = 0 if initial == "empty" else initial_size
        if validation_size + n_initial > n_items:
            raise InvalidArgumentError(
                f"validation_size + initial_size = {validation_size} + {n_initial} exceeds the "
                f"{n_items} items of dataset {dataset.name!r}"
            )
        targets_N = dataset.targets
        if validation_size:
            assert targets_N is not None
            if validation == "random" or dataset.multilabel:
                val_idx = torch.randperm(n_items, generator=gen)[:validation_size]
            else:
                counts_C = torch.bincount(targets_N, minlength=n_classes)
                take_C = _proportional(counts_C, validation_size)
                chunks = []
                for c in range(n_classes):
                    members = torch.nonzero(targets_N == c).flatten()
                    chunks.append(members[torch.randperm(len(members), generator=gen)[: int(take_C[c])]])
                val_idx = torch.cat(chunks)
            pool._status_N[val_idx] = VALIDATION
            pool._label_N[val_idx] = targets_N[val_idx]
        if n_initial:
            assert targets_N is not None
            free = torch.nonzero(pool._status_N == UNLABELLED).flatten()
            if initial == "random":
                init_idx = free[torch.randperm(len(free), generator=gen)[:n_initial]]
            elif dataset.multilabel:
                init_idx = _balanced_multilabel(targets_N, free, n_initial, gen)
            else:
                base, extra = divmod(n_initial, n_classes)
                take_C = torch.full((n_classes,), base, dtype=torch.long)
                take_C[torch.randperm(n_classes, generator=gen)[:extra]] += 1
                chunks = []
                for c in range(n_classes):
                    members = free[targets_N[free] == c]
                    if len(members) < int(take_C[c]):
                        raise InvalidArgumentError(
                            f"initial='balanced' needs {int(take_C[c])} item(s) of class "
                            f"{dataset.classes[c]!r}, but only {len(members)} are available outside validation"
                        )
                    chunks.append(members[torch.randperm(len(members), generator=gen)[: int(take_C[c])]])
                init_idx = torch.cat(chunks)
            # a random order within the initial set, not class-sorted
            init_idx = init_idx[torch.randperm(len(init_idx), generator=gen)]
            pool.label(init_idx)
        return pool

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return len(self.dataset)

    def __repr__(self) -> str:
        return (
            f"Pool(dataset={self.dataset.name!r}, labelled={self.n_labelled}, unlabelled={self.n_unlabelled}, "
            f"validation={self.n_validation}, excluded={self.n_excluded})"
        )

    def _where(self, status: int) -> Tensor:
        return torch.nonzero(self._status_N == status).flatten()

    @property
    def labelled_indices(self) -> Tensor:
        """Original indices of labelled items, in the order they were labelled. ``[n_labelled]``."""
        if not self._labelled_order:
            return torch.empty(0, dtype=torch.long)
        return torch.cat(self._labelled_order)

    @property
    def unlabelled_indices(self) -> Tensor:
        """Original indices of unlabelled items, ascending. Positions for :meth:`take` refer to this."""
        return self._where(UNLABELLED)

    @property
    def validation_indices(self) -> Tensor:
        """Original indices of the validation items, ascending."""
        return self._where(VALIDATION)

    @property
    def excluded_indices(self) -> Tensor:
        """Original indices removed with :meth:`delete`, ascending."""
        return self._where(EXCLUDED)

    @property
    def n_labelled(self) -> int:
        return int((self._status_N == LABELLED).sum())

    @property
    def n_unlabelled(self) -> int:
        return int((self._status_N == UNLABELLED).sum())

    @property
    def n_validation(self) -> int:
        return int((self._status_N == VALIDATION).sum())

    @property
    def n_excluded(self) -> int:
        return int((self._status_N == EXCLUDED).sum())

    def status_of(self, indices: object) -> list[str]:
        """Status names ("labelled", "unlabelled", "validation", "excluded") of original indices."""
        index = self.dataset.check_indices(indices)
        return [_STATUS_NAMES[int(s)] for s in self._status_N[index]]

    def labelled_data(self) -> tuple[Tensor, Tensor]:
        """``(inputs [n_labelled, ...], labels [n_labelled])`` in labelling order; labels are the oracle's."""
        index = self.labelled_indices
        return self.dataset.inputs[index], self._label_N[index]

    def unlabelled_inputs(self) -> Tensor:
        """Inputs of the unlabelled items ``[n_unlabelled, ...]``, rows in ``unlabelled_indices`` order."""
        return self.dataset.inputs[self.unlabelled_indices]

    def validation_data(self) -> tuple[Tensor, Tensor]:
        """``(inputs, targets)`` of the validation items (targets from the dataset)."""
        index = self.validation_indices
        return self.dataset.inputs[index], self._label_N[index]

    def labels_of(self, indices: object) -> Tensor:
        """Stored labels of labelled or validation items (original indices). ``[B]``."""
        index = self.dataset.check_indices(indices)
        status = self._status_N[index]
        bad = (status != LABELLED) & (status != VALIDATION)
        if bool(bad.any()):
            first = int(index[bad][0])
            raise InvalidArgumentError(f"item {first} has no label: it is {_STATUS_NAMES[int(self._status_N[first])]}")
        return self._label_N[index].clone()

    def class_counts(self) -> Tensor:
        """Number of labelled items per class, ``LongTensor [C]`` (multi-label: items carrying each class)."""
        labels = self._label_N[self._status_N == LABELLED]
        if self.dataset.multilabel:
            return labels.sum(0)
        return torch.bincount(labels, minlength=self.dataset.num_classes)

    # ------------------------------------------------------------------ updates
    def _check_unlabelled(self, index: Tensor, name: str) -> None:
        if index.numel() != torch.unique(index).numel():
            values, counts = torch.unique(index, return_counts=True)
            raise InvalidArgumentError(f"{name} contains duplicates, e.g. {int(values[counts > 1][0])}")
        status = self._status_N[index]
        bad = status != UNLABELLED
        if bool(bad.any()):
            first = int(index[bad][0])
            state = _STATUS_NAMES[int(self._status_N[first])]
            raise InvalidArgumentError(f"{name}: item {first} is not unlabelled (it is {state}); {int(bad.sum())} such item(s)")

    def label(self, indices: object, labels: object | None = None) -> None:
        """Move unlabelled items (original indices) to the labelled set.

        Args:
            indices: ``[B]`` original dataset indices, all currently unlabelled, no duplicates.
            labels: ``[B]`` class ids from an oracle (multi-label: 0/1 indicators ``[B, C]``, at
                least one class each); default ``dataset.targets[indices]``
                (simulation). Stored as given, even where they differ from the targets.

        Raises ``IndexError`` for unknown indices and ``ValueError`` for labelled,
        validation, excluded or repeated ones, or labels outside ``0 .. C-1``;
        the pool is unchanged when it raises.
        """
        index = self.dataset.check_indices(indices)
        self._check_unlabelled(index, "indices")
        if labels is None:
            if self.dataset.targets is None:
                raise InvalidArgumentError(f"dataset {self.dataset.name!r} is unlabelled: pass the oracle's labels")
            label_B = self.dataset.targets[index]
        else:
            if self.dataset.multilabel:
                label_B = _check_indicators(labels, index, self.dataset.num_classes)
            else:
                label_B = as_index_tensor(labels, "labels")
                if label_B.shape != index.shape:
                    raise InvalidArgumentError(f"labels must have shape {tuple(index.shape)} like indices, got {tuple(label_B.shape)}")
                n_classes = self.dataset.num_classes
                if label_B.numel() and (int(label_B.min()) < 0 or int(label_B.max()) >= n_classes):
                    raise InvalidArgumentError(
                        f"labels must lie in 0 .. {n_classes - 1} (C = {n_classes}), "
                        f"got {int(label_B.min())} .. {int(label_B.max())}"
                    )
        if index.numel() == 0:
            return
        self._status_N[index] = LABELLED
        self._label_N[index] = label_B
        self._labelled_order.append(index.clone())

    def take(self, positions: object) -> Tensor:
        """Original indices of the unlabelled items at ``positions`` (into ``unlabelled_indices``).

        The tutorial's ``take(S_pool, idx)``: acquisition scores computed on
        :meth:`unlabelled_inputs` pick positions; this maps them back. Nothing moves.
        """
        pos = as_index_tensor(positions, "positions")
        unlabelled = self.unlabelled_indices
        # no Python-style negative positions: an off-by-one -1 would name the last item silently
        if pos.numel() and (int(pos.min()) < 0 or int(pos.max()) >= len(unlabelled)):
            raise InvalidIndexError(f"positions must lie in 0 .. {len(unlabelled) - 1} (unlabelled items), got {pos.tolist()}")
        return unlabelled[pos]

    def append(self, indices: object, labels: object | None = None) -> None:
        """The tutorial's ``append``: add items (original indices) to the labelled set; same as :meth:`label`."""
        self.label(indices, labels)

    def delete(self, positions: object) -> Tensor:
        """Remove the unlabelled items at ``positions`` from the pool without labelling them.

        They become "excluded" (never scored or acquired again). Returns their original indices.
        """
        index = self.take(positions)
        self.exclude(index)
        return index

    def exclude(self, indices: object) -> None:
        """Mark unlabelled items (original indices) as excluded, e.g. items an annotator rejected."""
        index = self.dataset.check_indices(indices)
        self._check_unlabelled(index, "indices")
        self._status_N[index] = EXCLUDED

    def subsample_unlabelled(self, n: int, *, generator: torch.Generator | int | None = None, seed: int | None = None) -> Tensor:
        """A uniform random subset of ``n`` unlabelled original indices (ascending), for scoring huge pools.

        Returns all unlabelled indices when ``n >= n_unlabelled``.
        """
        check_positive_int(n, "n")
        gen = _generator(seed, generator)
        unlabelled = self.unlabelled_indices
        if n >= len(unlabelled):
            return unlabelled
        chosen = torch.randperm(len(unlabelled), generator=gen)[:n]
        return unlabelled[torch.sort(chosen).values]

    # ------------------------------------------------------------------ persistence
    def check_invariants(self) -> None:
        """Assert the bookkeeping is consistent (internal invariant check)."""
        n_items = len(self.dataset)
        assert self._status_N.shape == (n_items,)
        assert bool(((self._status_N >= UNLABELLED) & (self._status_N <= EXCLUDED)).all())
        order = self.labelled_indices
        assert torch.unique(order).numel() == order.numel(), "an item was labelled twice"
        assert torch.equal(torch.sort(order).values, self._where(LABELLED)), "labelled order out of sync"
        labelled = self._status_N == LABELLED
        upper = 2 if self.dataset.multilabel else self.dataset.num_classes
        assert bool((self._label_N[labelled] >= 0).all()) and bool((self._label_N[labelled] < upper).all())
        parts = [self.labelled_indices, self.unlabelled_indices, self.validation_indices, self.excluded_indices]
        assert sum(p.numel() for p in parts) == n_items
        assert torch.equal(torch.sort(torch.cat(parts)).values, torch.arange(n_items))

    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable snapshot (plain ints and lists) for resuming with :meth:`from_state_dict`."""
        order = self.labelled_indices
        return {
            "version": _STATE_VERSION,
            "dataset": self.dataset.name,
            "n_items": len(self.dataset),
            "num_classes": self.dataset.num_classes,
            "labelled": order.tolist(),
            "labels": self._label_N[order].tolist(),
            "labelled_chunks": [len(chunk) for chunk in self._labelled_order],
            "validation": self.validation_indices.tolist(),
            "excluded": self.excluded_indices.tolist(),
        }

    @classmethod
    def from_state_dict(cls, dataset: ArrayDataset, state: Mapping[str, Any]) -> Pool:
        """Rebuild a pool over ``dataset`` from :meth:`state_dict` output, validating it."""
        if not isinstance(state, Mapping):
            raise InvalidTypeError(f"state must be a mapping from Pool.state_dict(), got {type(state).__name__}")
        missing = {"version", "n_items", "labelled", "labels", "validation", "excluded"} - set(state)
        if missing:
            raise InvalidArgumentError(f"state is missing key(s) {sorted(missing)}; expected the output of Pool.state_dict()")
        if state["version"] != _STATE_VERSION:
            raise InvalidArgumentError(f"state version {state['version']!r} is not supported (expected {_STATE_VERSION})")
        if state["n_items"] != len(dataset):
            raise InvalidArgumentError(
                f"state was saved for a dataset of {state['n_items']} items ({state.get('dataset')!r}), "
                f"got {len(dataset)} items ({dataset.name!r})"
            )
        if "dataset" in state and state["dataset"] != dataset.name:
            raise InvalidArgumentError(f"state was saved for dataset {state['dataset']!r}, got dataset {dataset.name!r}")
        pool = cls(dataset)
        validation = dataset.check_indices(state["validation"], "state['validation']")
        excluded = dataset.check_indices(state["excluded"], "state['excluded']")
        for name, index in (("validation", validation), ("excluded", excluded)):
            pool._check_unlabelled(index, f"state[{name!r}]")
            pool._status_N[index] = VALIDATION if name == "validation" else EXCLUDED
        if validation.numel():
            if dataset.targets is None:
                raise InvalidArgumentError("state has validation items but the dataset has no targets")
            pool._label_N[validation] = dataset.targets[validation]
        labelled = dataset.check_indices(state["labelled"], "state['labelled']")
        labels = (torch.as_tensor(state["labels"], dtype=torch.long) if dataset.multilabel
                  else as_index_tensor(state["labels"], "state['labels']"))
        chunks = list(state.get("labelled_chunks", [len(labelled)] if len(labelled) else []))
        if sum(chunks) != len(labelled):
            raise InvalidArgumentError("state['labelled_chunks'] does not add up to the number of labelled items")
        if labels.shape[:1] != labelled.shape:
            raise InvalidArgumentError("state['labels'] must have one label per labelled index")
        start = 0
        for size in chunks:
            pool.label(labelled[start : start + size], labels[start : start + size])
            start += size
        return pool
