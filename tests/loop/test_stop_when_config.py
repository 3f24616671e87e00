"""``stop_when`` and ``audit_fraction`` in a config: every accepted form stored one way, every
mistake a one-line error naming the setting and its flag (new-user report on stopping: D2, D4,
D5, D6, N2, N5)."""

from __future__ import annotations

import json

import pytest

from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.records import LoopConfig
from activebayes.rundir import RunDirectory, config_differences
from activebayes.stopping import normalise_stop_when, parse_stop_when
from tests.conftest import FAST_LOOP


# --------------------------------------------------------------------------- D2: audits need batches of 2


def test_an_audit_with_batches_of_one_is_refused_naming_both_flags():
    """``_with_audit`` keeps the strategy's pick in a batch of one: an audit fraction there would
    be silently ignored, and an estimated_accuracy criterion could never fire."""
    with pytest.raises(InvalidArgumentError) as info:
        LoopConfig(batch_size=1, audit_fraction=0.2, stop_when="estimated_accuracy=0.5")
    message = str(info.value)
    assert "\n" not in message
    assert "audit_fraction (--audit-fraction)" in message and "batch_size (--batch-size)" in message
    assert "got batch_size=1" in message
    LoopConfig(batch_size=2, audit_fraction=0.2)  # one audited item, one picked
    LoopConfig(batch_size=1, audit_fraction=0.0)  # no audit: batches of one are fine


# --------------------------------------------------------------------------- D4: a mapping keeps its thresholds


def test_a_mapping_keeps_its_thresholds():
    assert LoopConfig(stop_when={"remaining_change": 0.02}).stop_when == ("remaining_change=0.02",)
    assert LoopConfig(stop_when={"stable_predictions": None, "information": 0.05}).stop_when == (
        "stable_predictions", "information=0.05")
    assert parse_stop_when({"remaining-change": 0.02}) == {"remaining_change": 0.02}
    with pytest.raises(InvalidArgumentError, match="remaining_change's threshold"):
        LoopConfig(stop_when={"remaining_change": 2})
    with pytest.raises(InvalidTypeError, match=r"stop_when \(--stop-when\): remaining_change's threshold must be a "
                                               r"number, got str '0.02'"):
        LoopConfig(stop_when={"remaining_change": "0.02"})


# --------------------------------------------------------------------------- D5: wrong types, one line


@pytest.mark.parametrize(("value", "came"), [
    (None, "got None"),
    (5, "got int 5"),
    (0.5, "got float 0.5"),
    ([5], "got an item of type int: 5"),
    ((("remaining_change", 0.01),), "got an item of type tuple"),
])
def test_a_stop_when_of_another_type_is_a_type_error_naming_the_flag(value, came):
    with pytest.raises(InvalidTypeError) as info:
        LoopConfig(stop_when=value)
    message = str(info.value)
    assert message.startswith("stop_when (--stop-when) ") and came in message and "\n" not in message


# --------------------------------------------------------------------------- D6: one stored form


@pytest.mark.parametrize("spelling", [
    "remaining_change", "remaining-change", " remaining_change", "remaining_change=0.005", "remaining_change=5e-3",
    ("remaining_change ",), ["remaining-change=0.0050"], {"remaining_change": 0.005}, {"remaining_change": None},
])
def test_equivalent_spellings_are_stored_one_way_and_are_the_same_run(spelling):
    config = LoopConfig(stop_when=spelling)
    assert config.stop_when == ("remaining_change",)
    assert config.same_run(LoopConfig(stop_when="remaining_change"))


def test_the_stored_form_is_in_one_order_and_keeps_only_thresholds_that_are_not_the_default():
    # the order criteria were given in used to be kept, so the same criteria were two different runs
    assert normalise_stop_when(["information=0.05", "stable-predictions=0.99", "remaining_change=0.02"]) == (
        "remaining_change=0.02", "stable_predictions", "information=0.05")
    assert normalise_stop_when(("information,remaining_change",)) == ("remaining_change", "information")
    assert normalise_stop_when(()) == ()
    given = LoopConfig(stop_when="information,stable_predictions")
    assert given.same_run(LoopConfig(stop_when=["stable_predictions", "information"]))
    assert config_differences(given, LoopConfig(stop_when="stable_predictions,information")) == ""


def test_stop_when_without_a_stop_set_names_both_flags_and_the_least_size():
    with pytest.raises(InvalidArgumentError) as info:
        LoopConfig(stop_when="estimated_accuracy=0.8", audit_fraction=0.2, stop_set_size=0)
    assert str(info.value).startswith("stop_when (--stop-when) needs a stop set: stop_set_size (--stop-set-size) "
                                      "must be at least 100, got 0")


def test_a_run_directory_stores_the_normalised_form_with_every_threshold(tmp_path, monkeypatch):
    """Each threshold is written out: stored bare, a criterion took whatever default a later
    release has (a bare ``remaining_change`` stored at 0.01 resumed at 0.005)."""
    import activebayes.stopping as stopping

    RunDirectory(tmp_path).write_config(LoopConfig(**FAST_LOOP, stop_when=" remaining-change, information=0.05"))
    stored = json.loads((tmp_path / "config.json").read_text())["stop_when"]
    assert stored == [f"remaining_change={stopping.SIGNALS['remaining_change'][0]!r}", "information=0.05"]
    directory = RunDirectory(tmp_path)
    assert directory.read_config().stop_when == ("remaining_change", "information=0.05")
    directory.check_config(LoopConfig(**FAST_LOOP, stop_when="remaining_change,information=0.05"))  # the same run
    # a later release with another default: the stored run keeps its threshold
    monkeypatch.setitem(stopping.SIGNALS, "remaining_change", (0.004, stopping.SIGNALS["remaining_change"][1]))
    assert directory.read_config().stop_when == ("remaining_change=0.005", "information=0.05")
    assert stopping.explicit_stop_when("estimated_accuracy=0.9, remaining-change") == (
        "remaining_change=0.004", "estimated_accuracy=0.9")


def test_a_run_directory_stored_raw_by_an_earlier_version_still_matches(tmp_path):
    """Earlier versions stored the spelling as typed (``[" remaining-change"]``): it reads back
    normalised, so an equivalent config resumes it instead of being refused as another run."""
    data = LoopConfig(**FAST_LOOP, stop_when="remaining_change").pinned().to_dict()
    data["stop_when"] = [" remaining-change"]
    (tmp_path / "config.json").write_text(json.dumps(data))
    directory = RunDirectory(tmp_path)
    assert directory.read_config().stop_when == ("remaining_change",)
    for now in ("remaining_change", "remaining_change=0.005", "remaining-change"):
        config = LoopConfig(**FAST_LOOP, stop_when=now)
        directory.check_config(config)  # no "different config" error
        assert config_differences(directory.read_config(), config) == ""
    with pytest.raises(Exception, match="different config"):
        directory.check_config(LoopConfig(**FAST_LOOP, stop_when="remaining_change=0.02"))


# --------------------------------------------------------------------------- N2: an empty criterion


@pytest.mark.parametrize("value", ["", ",,", "remaining_change,", ",remaining_change", "a,,b", ("",),
                                   ("remaining_change", " ")])
def test_an_empty_criterion_is_refused_as_python_refuses_it(value):
    with pytest.raises(InvalidArgumentError, match=r"stop_when \(--stop-when\): an empty criterion"):
        LoopConfig(stop_when=value)


# --------------------------------------------------------------------------- N5: audit_fraction's type


@pytest.mark.parametrize(("value", "came"), [("0.2", "got str '0.2'"), (True, "got bool True"), (None, "got NoneType")])
def test_an_audit_fraction_that_is_not_a_number_says_so(value, came):
    with pytest.raises(InvalidTypeError) as info:
        LoopConfig(audit_fraction=value)
    assert str(info.value).startswith("audit_fraction (--audit-fraction) must be a number in [0, 1)")
    assert came in str(info.value)
    with pytest.raises(InvalidArgumentError, match=r"must be in \[0, 1\), got 1.5"):
        LoopConfig(audit_fraction=1.5)


def test_a_labelling_project_stores_stop_when_as_the_loop_does_and_checks_its_audit():
    """ProjectConfig keeps the loop's one form of stop_when (it split a string into characters and
    dropped a mapping's thresholds) and refuses an audit with batches of one, before anything exists."""
    from activebayes.labelling.settings import ProjectConfig

    assert ProjectConfig(dataset="digits", stop_when={"remaining_change": 0.02}).stop_when == ("remaining_change=0.02",)
    assert ProjectConfig(dataset="digits", stop_when="remaining-change").stop_when == ("remaining_change",)
    assert ProjectConfig(dataset="digits", stop_when=("remaining_change=0.005",)).stop_when == ("remaining_change",)
    with pytest.raises(InvalidArgumentError, match=r"audit_fraction \(--audit-fraction\) 0.2 needs batch_size"):
        ProjectConfig(dataset="digits", batch_size=1, audit_fraction=0.2)
