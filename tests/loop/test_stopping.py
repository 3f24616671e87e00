"""Stopping criteria return structured reasons; the loop's stop check has no side effects."""

import pytest
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.records import RoundRecord
from activebayes.stopping import (
    CUSTOM,
    EMPTY_POOL,
    LABEL_BUDGET,
    TARGET,
    CostBudget,
    LabelBudget,
    Plateau,
    StopReason,
    TargetAccuracy,
    first_stop,
    stop_kind_of,
)


def _record(stop_reason=None, stop_kind=None) -> RoundRecord:
    return RoundRecord(0, 10, [], [], [], {}, [], 0.0, {}, {}, stop_reason=stop_reason, stop_kind=stop_kind)


def test_first_stop_order_custom_strings_and_empty_pool():
    assert first_stop([LabelBudget(50)], [], n_labelled=49, cost_spent=0.0, n_unlabelled=3) is None
    assert first_stop([LabelBudget(50)], [], n_labelled=50, cost_spent=0.0, n_unlabelled=3).kind == LABEL_BUDGET
    assert first_stop([], [], n_labelled=1, cost_spent=0.0, n_unlabelled=0).kind == EMPTY_POOL
    # the first criterion that fires wins; a user's plain string becomes a custom reason
    reason = first_stop([lambda h, **kw: "mine", LabelBudget(1)], [], n_labelled=5, cost_spent=0.0, n_unlabelled=1)
    assert reason == StopReason(CUSTOM, "mine")
    assert CostBudget(10.0, 2.0)([], n_labelled=0, cost_spent=8.5) is not None
    assert CostBudget(10.0, 2.0)([], n_labelled=0, cost_spent=8.0) is None


@pytest.mark.parametrize(
    ("reason", "kind", "want"),
    [
        (None, None, None),
        ("label budget reached (150 >= 150)", None, "label_budget"),  # a record written before stop_kind
        ("plateau: validation_accuracy did not improve for 3 rounds", None, "plateau"),
        ("cost budget reached (9 spent of 10)", None, "cost_budget"),
        ("whatever my criterion said", None, CUSTOM),
        ("label budget reached, reworded", "target", "target"),  # the stored kind wins over the wording
    ],
)
def test_stop_kind_of_reads_stored_kind_then_legacy_sentences(reason, kind, want):
    assert stop_kind_of(_record(reason, kind)) == want


def test_a_stopping_proposal_changes_nothing_until_finish():
    config = LoopConfig(strategy="random", budget=40, initial_size=20, batch_size=10, validation_size=20,
                        cold_start=None, eval_samples=2, num_samples=2, fit_options={"max_epochs": 1},
                        target_accuracy=0.01)
    loop = ActiveLearningLoop(config)
    proposal = loop.propose()
    assert proposal.stopped and proposal.stop_kind == TARGET and proposal.indices == []
    assert loop.history == [] and not loop.finished  # no side effects: a labelling project may go on
    again = loop.propose()  # proposing again is allowed and gives the same answer
    assert again.stop_kind == TARGET and again.metrics == proposal.metrics
    record = loop.finish(again)
    assert loop.finished and loop.history == [record] and record.stop_kind == TARGET
    with pytest.raises(RuntimeError, match="already stopped"):
        loop.propose()


def test_finish_refuses_a_proposal_that_did_not_stop():
    config = LoopConfig(strategy="random", budget=40, initial_size=20, batch_size=10, validation_size=20,
                        cold_start=None, eval_samples=2, num_samples=2, fit_options={"max_epochs": 1})
    loop = ActiveLearningLoop(config)
    with pytest.raises(ValueError, match="stopping proposal"):
        loop.finish(loop.propose())
    assert not loop.finished and loop.history == []


@pytest.mark.parametrize(("build", "error", "message"), [
    # Plateau(0) raised "max() arg is an empty sequence" at the first round; (-1) compared the wrong rounds
    (lambda: Plateau(0), ValueError, r"^patience must be >= 1, got 0$"),
    (lambda: Plateau(1.5), TypeError,
     r"^patience must be an int, got float 1.5$"),
    (lambda: Plateau(2, min_delta=float("nan")), ValueError,
     r"^min_delta must be a finite number >= 0, got nan$"),  # never fired
    (lambda: LabelBudget("10"), TypeError, r"^budget must be an int, got str '10'$"),  # failed at the first round
    (lambda: LabelBudget(-1), ValueError, r"^budget must be >= 0, got -1$"),
    (lambda: CostBudget(float("nan"), 1.0), ValueError, r"^budget must be a finite number >= 0, got nan$"),
    (lambda: TargetAccuracy(60), ValueError,
     r"^target must be a share in \[0, 1\] \(the headline metric is an accuracy\), got 60; for 60% pass 0.6$"),
    (lambda: TargetAccuracy(float("nan")), ValueError,
     r"^target must be a finite number >= 0, got nan$"),  # never fired
    (lambda: TargetAccuracy(0.9, metric=3), TypeError,
     r"^metric must be a metric name such as 'validation_accuracy' or None, got 3$"),
])
def test_a_criterion_names_a_bad_argument_when_it_is_built(build, error, message):
    with pytest.raises(error, match=message):
        build()
