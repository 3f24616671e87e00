from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activebayes.data import Pool, from_arrays, load_dataset


def toy_dataset(n_items: int = 40, n_classes: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    targets = np.arange(n_items) % n_classes
    rng.shuffle(targets)
    inputs = np.arange(n_items, dtype=np.float32)[:, None] * np.ones((1, 3), dtype=np.float32)
    return from_arrays(inputs, targets, name="toy")


def check_partition(pool: Pool) -> None:
    """Independent check: the four sets partition 0..N-1 (no item in two sets)."""
    sets = [set(pool.labelled_indices.tolist()), set(pool.unlabelled_indices.tolist()),
            set(pool.validation_indices.tolist()), set(pool.excluded_indices.tolist())]
    sizes = [pool.n_labelled, pool.n_unlabelled, pool.n_validation, pool.n_excluded]
    assert [len(s) for s in sets] == sizes
    for i in range(4):
        for j in range(i + 1, 4):
            assert not sets[i] & sets[j]
    assert set().union(*sets) == set(range(len(pool.dataset)))
    pool.check_invariants()


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


def test_balanced_initial_set_has_equal_class_counts(digits):
    for seed in range(3):
        pool = Pool.create(digits, validation_size=100, initial_size=20, initial="balanced", seed=seed)
        assert pool.class_counts().tolist() == [2] * 10
        # counted independently from the dataset's targets
        counts = np.bincount(digits.targets[pool.labelled_indices].numpy(), minlength=10)
        assert counts.tolist() == [2] * 10
        check_partition(pool)


def test_balanced_with_remainder_differs_by_at_most_one(digits):
    pool = Pool.create(digits, initial_size=23, seed=1)
    counts = pool.class_counts()
    assert int(counts.sum()) == 23 and int(counts.max() - counts.min()) == 1


def test_stratified_validation_and_random_initial(digits):
    pool = Pool.create(digits, validation_size=300, initial="random", initial_size=50, seed=0)
    val_targets = digits.targets[pool.validation_indices]
    share = torch.bincount(digits.targets, minlength=10).double() * 300 / len(digits)
    assert bool(((torch.bincount(val_targets, minlength=10) - share).abs() < 1).all())
    assert torch.equal(pool.validation_data()[1], val_targets)
    assert pool.n_labelled == 50 and pool.n_validation == 300
    random_val = Pool.create(digits, validation_size=300, validation="random", initial="empty", seed=0)
    assert random_val.n_validation == 300 and random_val.n_labelled == 0
    check_partition(pool)
    check_partition(random_val)


def test_same_seed_same_pool_and_generator_equivalent(digits):
    a = Pool.create(digits, validation_size=100, seed=7)
    b = Pool.create(digits, validation_size=100, generator=torch.Generator().manual_seed(7))
    c = Pool.create(digits, validation_size=100, seed=8)
    assert a.state_dict() == b.state_dict()
    assert a.state_dict() != c.state_dict()
    with pytest.raises(ValueError, match="either seed or generator"):
        Pool.create(digits, seed=1, generator=torch.Generator())
    # an int generator is a seed, as everywhere else generator= is taken
    assert Pool.create(digits, validation_size=100, generator=7).state_dict() == a.state_dict()
    assert torch.equal(a.subsample_unlabelled(50, generator=3), a.subsample_unlabelled(50, seed=3))
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator or an int seed, got float"):
        Pool.create(digits, generator=7.0)


def test_data_views_map_back_to_dataset(digits):
    pool = Pool.create(digits, validation_size=50, seed=0)
    inputs, labels = pool.labelled_data()
    assert torch.equal(inputs, digits.inputs[pool.labelled_indices])
    assert torch.equal(labels, digits.targets[pool.labelled_indices])
    assert torch.equal(pool.unlabelled_inputs(), digits.inputs[pool.unlabelled_indices])
    v_inputs, v_targets = pool.validation_data()
    assert torch.equal(v_inputs, digits.inputs[pool.validation_indices])
    # no copy of the dataset is kept
    assert pool.dataset is digits


def test_oracle_labels_are_stored_even_when_they_differ(digits):
    pool = Pool.create(digits, initial="empty", seed=0)
    picked = pool.take([0, 1, 2])
    wrong = (digits.targets[picked] + 1) % 10
    pool.label(picked, wrong)
    assert torch.equal(pool.labels_of(picked), wrong)
    assert torch.equal(pool.labelled_data()[1], wrong)
    assert int(pool.class_counts().sum()) == 3


def test_take_append_delete_follow_the_tutorial(digits):
    pool = Pool.create(digits, initial="empty", seed=0)
    before = pool.unlabelled_indices
    positions = torch.tensor([5, 0, 17])
    taken = pool.take(positions)
    assert torch.equal(taken, before[positions])  # take: positions -> original indices, nothing moves
    assert pool.n_unlabelled == len(digits)
    pool.append(taken)  # append + (implied) delete from the pool
    assert torch.equal(pool.labelled_indices, taken)
    expected_rest = before[~torch.isin(before, taken)]
    assert torch.equal(pool.unlabelled_indices, expected_rest)
    dropped = pool.delete([0, 1])
    assert torch.equal(dropped, expected_rest[:2])
    assert pool.status_of(dropped) == ["excluded", "excluded"]
    check_partition(pool)


def test_label_errors_leave_pool_unchanged(digits):
    pool = Pool.create(digits, validation_size=20, seed=0)
    state = pool.state_dict()
    labelled = int(pool.labelled_indices[0])
    validation = int(pool.validation_indices[0])
    free = pool.unlabelled_indices[:2]
    with pytest.raises(ValueError, match=f"item {labelled} is not unlabelled \\(it is labelled\\)"):
        pool.label([int(free[0]), labelled])
    with pytest.raises(ValueError, match="it is validation"):
        pool.label([validation])
    with pytest.raises(IndexError, match=r"must lie in 0 .. 1296"):
        pool.label([len(digits)])
    with pytest.raises(ValueError, match="duplicates"):
        pool.label([int(free[0]), int(free[0])])
    with pytest.raises(ValueError, match=r"labels must lie in 0 .. 9"):
        pool.label(free, [0, 10])
    with pytest.raises(ValueError, match="labels must have shape"):
        pool.label(free, [0])
    with pytest.raises(IndexError, match="positions must lie"):
        pool.take([pool.n_unlabelled])
    with pytest.raises(IndexError, match=r"positions must lie in 0 \.\. .* got \[-1\]"):  # not the last item
        pool.take([-1])
    with pytest.raises(ValueError, match="has no label"):
        pool.labels_of(free)
    assert pool.state_dict() == state


def test_create_errors(digits):
    with pytest.raises(ValueError, match="unknown initial 'half'"):
        Pool.create(digits, initial="half")
    with pytest.raises(ValueError, match="exceeds the 1297 items"):
        Pool.create(digits, validation_size=1290, initial_size=20)
    with pytest.raises(ValueError, match="validation_size must be >= 0"):
        Pool.create(digits, validation_size=-1)
    unlabelled = from_arrays(np.zeros((10, 2)), classes=["a", "b"])
    with pytest.raises(ValueError, match="unlabelled"):
        Pool.create(unlabelled, initial="balanced")
    pool = Pool.create(unlabelled, initial="empty")
    with pytest.raises(ValueError, match="pass the oracle's labels"):
        pool.label([0])
    pool.label([0, 3], [1, 0])
    assert pool.class_counts().tolist() == [1, 1]
    tiny = from_arrays(np.zeros((5, 1)), [0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match="needs 2 item\\(s\\) of class '1'"):
        Pool.create(tiny, initial_size=4)


def test_state_dict_is_json_and_round_trips(digits):
    pool = Pool.create(digits, validation_size=60, seed=3)
    pool.label(pool.take([3, 1, 4]), [1, 5, 9])
    pool.delete([2])
    state = json.loads(json.dumps(pool.state_dict()))
    restored = Pool.from_state_dict(digits, state)
    assert restored.state_dict() == pool.state_dict()
    for name in ("labelled_indices", "unlabelled_indices", "validation_indices", "excluded_indices"):
        assert torch.equal(getattr(restored, name), getattr(pool, name))
    assert torch.equal(restored.labelled_data()[1], pool.labelled_data()[1])
    with pytest.raises(ValueError, match="saved for a dataset of 1297 items"):
        Pool.from_state_dict(load_dataset("digits", split="test"), state)
    broken = dict(state, validation=[*state["validation"], state["labelled"][0]])
    with pytest.raises(ValueError):
        Pool.from_state_dict(digits, broken)


def test_subsample_unlabelled(digits):
    pool = Pool.create(digits, validation_size=100, seed=0)
    sub = pool.subsample_unlabelled(200, seed=1)
    assert len(sub) == 200 and bool(torch.isin(sub, pool.unlabelled_indices).all())
    assert torch.equal(sub, torch.sort(sub).values) and torch.unique(sub).numel() == 200
    assert torch.equal(sub, pool.subsample_unlabelled(200, generator=torch.Generator().manual_seed(1)))
    assert torch.equal(pool.subsample_unlabelled(10_000, seed=0), pool.unlabelled_indices)
    # uniform: over many draws, every unlabelled item is picked about equally often
    hits = torch.zeros(len(digits))
    gen = torch.Generator().manual_seed(0)
    for _ in range(200):
        hits[pool.subsample_unlabelled(100, generator=gen)] += 1
    rate = hits[pool.unlabelled_indices] / 200
    assert abs(float(rate.mean()) - 100 / pool.n_unlabelled) < 1e-6
    assert float(rate.max()) < 0.25  # expected 0.084; a biased sampler would concentrate


# ----------------------------------------------------------------------------- property test

operation = st.one_of(
    st.tuples(st.just("label"), st.lists(st.integers(0, 10_000), min_size=0, max_size=6), st.booleans()),
    st.tuples(st.just("raw"), st.lists(st.integers(-3, 45), min_size=1, max_size=4), st.booleans()),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 10_000), min_size=1, max_size=2), st.booleans()),
    st.tuples(st.just("roundtrip"), st.just([]), st.booleans()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    validation_size=st.integers(0, 10),
    initial=st.sampled_from(["balanced", "random", "empty"]),
    seed=st.integers(0, 2**16),
    ops=st.lists(operation, max_size=12),
)
def test_random_label_sequences_keep_sets_disjoint(validation_size, initial, seed, ops):
    dataset = toy_dataset()
    pool = Pool.create(dataset, validation_size=validation_size, initial=initial, initial_size=8, seed=seed)
    expected_labels = {int(i): int(dataset.targets[i]) for i in pool.labelled_indices}
    for kind, values, use_own_labels in ops:
        before = pool.state_dict()
        try:
            if kind == "label" and pool.n_unlabelled:
                positions = sorted({v % pool.n_unlabelled for v in values})
                chosen = pool.take(positions)
                labels = [(int(i) * 7) % 4 for i in chosen] if use_own_labels else None
                pool.label(chosen, labels)
                for k, i in enumerate(chosen.tolist()):
                    expected_labels[i] = labels[k] if labels is not None else int(dataset.targets[i])
            elif kind == "raw":
                # arbitrary original indices: may be unknown, labelled, validation or repeated
                pool.label(values)
                for i in values:
                    expected_labels[i] = int(dataset.targets[i])
            elif kind == "delete" and pool.n_unlabelled:
                pool.delete(sorted({v % pool.n_unlabelled for v in values}))
            elif kind == "roundtrip":
                pool = Pool.from_state_dict(dataset, json.loads(json.dumps(pool.state_dict())))
        except (ValueError, IndexError):
            assert pool.state_dict() == before  # a rejected operation changes nothing
        check_partition(pool)
        # indices map back: stored labels are what was given, inputs are the dataset's rows
        labelled = pool.labelled_indices
        assert {int(i): int(y) for i, y in zip(labelled, pool.labels_of(labelled))} == expected_labels
        assert torch.equal(pool.labelled_data()[0][:, 0], labelled.float())
        assert torch.equal(pool.unlabelled_inputs()[:, 0], pool.unlabelled_indices.float())
