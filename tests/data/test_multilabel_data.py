"""Multi-label data: rows with no positive class, what a label cell may hold, tables that look
multi-label but are read as single-label, and the ``mnist_pairs`` example."""

from __future__ import annotations

import dataclasses
import doctest
import json
import warnings

import pytest
import torch

from activebayes.data import ArrayDataset, Pool, load_table
from activebayes.data._core import DataError
from activebayes.errors import InvalidArgumentError
from activebayes.experiment import run_experiment
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.metrics.multilabel import evaluate_multilabel
from tests.conftest import FAST_FIT, multilabel_toy

# ----------------------------------------------------------------------------- rows with no positive class


def _with_empty_rows(rows=(5, 9, 12, 40, 41, 77), item_ids=False) -> ArrayDataset:
    data = multilabel_toy()
    targets = data.targets.clone()
    targets[list(rows)] = 0
    ids = tuple(f"doc{i}" for i in range(len(data))) if item_ids else None
    return dataclasses.replace(data, targets=targets, item_ids=ids)


def test_a_pool_refuses_multilabel_rows_with_no_class_naming_targets_count_and_rows():
    data = _with_empty_rows()
    assert data.multilabel  # the dataset itself accepts them: a test set may have such items
    with pytest.raises(InvalidArgumentError) as error:
        Pool.create(data, validation_size=20, initial_size=8, seed=0)
    message = str(error.value)
    assert "\n" not in message
    assert "targets: 6 of 300 multi-label rows have no positive class (rows 5, 9, 12, 40, 41, ...)" in message
    assert "needs at least one class" in message and "test set may keep" in message
    # nothing that answers from the targets gets round them: not an empty start either
    with pytest.raises(InvalidArgumentError, match="6 of 300"):
        Pool.create(data, validation_size=0, initial="empty")


def test_the_refusal_names_item_ids_when_the_dataset_has_them():
    with pytest.raises(InvalidArgumentError, match=r"rows 5 \('doc5'\), 9 \('doc9'\), 12 \('doc12'\)"):
        Pool.create(_with_empty_rows(item_ids=True), initial_size=8, seed=0)


def test_all_zero_targets_are_a_labelling_placeholder_only_when_the_pool_reads_no_targets():
    data = multilabel_toy()
    placeholder = dataclasses.replace(data, targets=torch.zeros_like(data.targets))
    pool = Pool.create(placeholder, validation_size=0, initial="empty")  # a person gives every answer
    assert pool.n_unlabelled == len(data)
    pool.label([0, 1], [[1, 0, 0, 0], [0, 1, 1, 0]])
    with pytest.raises(InvalidArgumentError, match="300 of 300 multi-label rows have no positive class"):
        Pool.create(placeholder, validation_size=10, initial="empty")
    with pytest.raises(InvalidArgumentError, match="300 of 300"):
        Pool.create(placeholder, initial_size=8)


def test_a_test_set_may_keep_rows_with_no_class():
    data = _with_empty_rows()
    log_probs = torch.nn.functional.logsigmoid(torch.randn(len(data), 3, 4, generator=torch.Generator().manual_seed(0)))
    metrics = evaluate_multilabel(log_probs, data.targets)
    assert 0 <= metrics["micro_f1"] <= 1


def test_the_loop_and_run_experiment_refuse_them_before_anything_is_written(tmp_path):
    data = _with_empty_rows()
    config = LoopConfig(strategy="multilabel_bald", cold_start=None, initial_size=8, validation_size=20,
                        batch_size=5, budget=18, num_samples=3, eval_samples=3, evaluate_test=False,
                        fit_options=FAST_FIT)
    with pytest.raises(InvalidArgumentError, match="have no positive class"):
        ActiveLearningLoop(config, dataset=data)
    run_dir = tmp_path / "run"
    with pytest.raises(InvalidArgumentError, match="have no positive class"):
        run_experiment(config, run_dir, progress=False, report=False,
                       loop_factory=lambda c: ActiveLearningLoop(c, dataset=data))
    assert not run_dir.exists()


# ----------------------------------------------------------------------------- what a label cell may hold

ROWS = [{"x": float(i), "t": f"text {i}"} for i in range(4)]


def _load(labels, **options):
    rows = [{**row, "topics": y} for row, y in zip(ROWS, labels, strict=True)]
    return load_table(rows, feature_columns=["x"], label_column="topics", **options)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]],
         r"row 1, column 'topics': expected a list of class names .* got int 1 in the list \[1, 0, 1\]; "
         "a 0/1 indicator vector is not read"),
        ([["a"], [True], ["b"], ["a"]], r"row 2, column 'topics': .* got bool True in the list \[true\]"),
        ([["a"], ["b"], ["a", None], ["b"]], r"row 3, column 'topics': .* got null in the list \[\"a\", null\]"),
        ([["a"], [["a"]], ["b"], ["a"]], r"row 2, column 'topics': .* got list \[\"a\"\] in the list"),
        ([["a"], [{"a": 1}], ["b"], ["a"]], r"row 2, column 'topics': .* got dict \{\"a\": 1\} in the list"),
        ([{"sport": 1}, ["a"], ["b"], ["a"]], r"row 1, column 'topics': .* got dict \{\"sport\": 1\}$"),
        ([["a"], ["b"], 3, ["a"]], r"row 3, column 'topics': .* got int 3$"),
        (["a", "[1,0,1]", "b", "a"], r"row 2, column 'topics': .* got the text '\[1,0,1\]', which looks like a list"),
        (["a", "b", "['a', 'b']", "a"], r"row 3, column 'topics': .* looks like a list"),
    ],
)
def test_a_multilabel_cell_that_does_not_name_classes_is_an_error(labels, message):
    with pytest.raises(DataError, match=message) as error:
        _load(labels, multilabel=True)
    assert "\n" not in str(error.value)


def test_multilabel_cells_that_name_classes_still_load():
    pool = _load([["a", "b"], "a||b", [" b ", ""], "a"], multilabel=True)
    assert pool.dataset.classes == ("a", "b")
    assert pool.targets_N_C.tolist() == [[1, 1], [1, 1], [0, 1], [1, 0]]
    pool = _load(["[misc]", "a", "b|[misc]", "a"], multilabel=True, classes=["[misc]", "a", "b"])
    assert pool.targets_N_C.tolist() == [[1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 1, 0]]


def test_jsonl_indicator_vectors_are_refused_from_a_file(tmp_path):
    path = tmp_path / "ind.jsonl"
    rows = [{"id": f"r{i}", "body": f"text number {i} about things", "topics": t}
            for i, t in enumerate([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"ind.jsonl: row 1, column 'topics': .*indicator vector is not read"):
        load_table(path, text_column="body", label_column="topics", id_column="id", multilabel=True)


def test_a_list_in_a_single_label_cell_points_to_multilabel():
    with pytest.raises(DataError, match=r"row 1, column 'topics': expected one class name, got list \[\"a\", \"b\"\]; "
                                        r"a row with several classes needs multilabel=True \(--multilabel\)"):
        _load([["a", "b"], "a", "b", "a"])
    with pytest.raises(DataError, match=r"label 'a\|b' is not among the classes \(a, b\); '\|' separates several "
                                        r"classes only with multilabel=True"):
        _load(["a|b", "a", "b", "a"], classes=["a", "b"])


# ----------------------------------------------------------------------------- sets read as single labels


@pytest.mark.parametrize("labels", [["a|b", "a", "b", "a"], ["a|b", "b|c", "c|a", "a|b"]])
def test_single_label_names_that_read_like_sets_warn(labels):
    with pytest.warns(UserWarning, match=r"table: column 'topics': \d of 4 labels look like sets of classes separated "
                                         r"by '\|' \(e.g. 'a\|b'\).*pass multilabel=True \(--multilabel\)"):
        pool = _load(labels)
    assert "a|b" in pool.dataset.classes  # still loaded as asked


@pytest.mark.parametrize("labels", [
    ["Electronics|Phones", "Electronics|TV", "Home|Kitchen", "Home|Garden"],  # a hierarchy
    ["a|b", "a|b", "c", "c"],  # one combined name whose parts are not classes
    ["a", "b", "c", "a"],
])
def test_no_warning_for_names_that_do_not_read_like_sets(labels):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _load(labels)
    with warnings.catch_warnings():  # classes given: the names are what the user says they are
        warnings.simplefilter("error")
        _load(["a|b", "a", "b", "a"], classes=["a", "b", "a|b"])


# ----------------------------------------------------------------------------- mnist_pairs


def test_the_mnist_pairs_example_shows_the_real_output(mnist_dir):
    from activebayes.data import multilabel_mnist

    docstring = multilabel_mnist.mnist_pairs.__doc__.replace("../shared/data/mnist", str(mnist_dir))
    test = doctest.DocTestParser().get_doctest(docstring, {"mnist_pairs": multilabel_mnist.mnist_pairs},
                                               "mnist_pairs", None, 0)
    assert len(test.examples) == 2
    for example in test.examples:
        example.options.pop(doctest.SKIP, None)  # skipped in the doctest run (data files); run here
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
