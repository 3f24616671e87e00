"""The dashboard's stopping panel: the latest round's signals in plain words, and whether to stop.

The panel's text is checked against numbers recomputed here from what the store holds
(the kappas, the audited answers through SciPy's exact Clopper-Pearson interval), in headless Chromium.
"""

from __future__ import annotations


import pytest
from scipy.stats import binomtest

from activebayes.app.stopping_panel import stopping_state
from activebayes.errors import ActiveBayesError
from activebayes.labelling import ProjectConfig
from activebayes.stopping import (
    CHANGE_WINDOW,
    ESTIMATED_ACCURACY,
    EXPECTED_ACCURACY,
    INFORMATION,
    REMAINING_CHANGE,
    STABLE_PREDICTIONS,
)
from tests.app.app_helpers import CHROMIUM, CHROMIUM_ARGS, LiveServer, TOKEN, make_project, wait_for

ROUNDS = 4  # the fourth model is the first with kappa over 3 rounds


# --------------------------------------------------------------------------- without a browser


def _signal(detail, fired=False, value=0.5, **extra):
    return {"value": value, "fired": fired, "detail": detail, **extra}


def test_the_verdict_follows_the_recommended_criterion_and_the_projects_own():
    quiet = {STABLE_PREDICTIONS: _signal("predictions have not stopped changing: kappa 0.800 over the last 3 rounds"),
             INFORMATION: _signal("the pool holds 50%", value=2.0),
             REMAINING_CHANGE: _signal("predictions are still changing", value=0.05)}
    state = stopping_state(quiet, [{INFORMATION: _signal("", value=4.0)}], round=3, n_labelled=30)
    assert not state["stop"] and state["verdict"].startswith("Not yet: no criterion says to stop")
    assert [s["name"] for s in state["signals"]][0] == REMAINING_CHANGE  # the recommended one comes first
    info = next(s for s in state["signals"] if s["name"] == INFORMATION)
    assert info["ratio"] == pytest.approx(0.5)  # against the first model's, from the history
    # another signal firing is shown, not obeyed, unless the project stops on it
    kappa_fired = {**quiet, STABLE_PREDICTIONS: _signal("predictions have stopped changing", fired=True)}
    state = stopping_state(kappa_fired, [], round=3, n_labelled=30)
    assert not state["stop"] and state["fired"] == [STABLE_PREDICTIONS]
    assert state["verdict"].startswith("Not yet: the predictions have not settled (predictions stable fired")
    state = stopping_state(kappa_fired, [], round=3, n_labelled=30, stop_when=("stable_predictions=0.95",))
    assert state["stop"] and state["verdict"].startswith("Yes, you can stop labelling (predictions stable)")
    assert "stop_when criterion fired" in state["verdict"]
    settled = {**quiet, REMAINING_CHANGE: _signal("predictions have settled", fired=True, value=0.01)}
    state = stopping_state(settled, [], round=9, n_labelled=90)
    assert state["stop"] and state["verdict"] == "Yes, you can stop labelling (predictions settled)."
    assert stopping_state(None, [], round=0, n_labelled=0)["verdict"].startswith("No stopping signals yet")


def test_the_stable_predictions_value_is_the_window_mean_its_criterion_compares():
    """The panel's number for stable predictions is the mean kappa over the last 3 rounds, the one
    compared with the threshold (it was this round's kappa, beside a text naming the mean)."""
    history = [{STABLE_PREDICTIONS: _signal("", value=v)} for v in (0.94, 0.95)]
    latest = {STABLE_PREDICTIONS: _signal("predictions have not stopped changing: kappa 0.9467 over the last "
                                          "3 rounds (stop at 0.95)", value=0.9502)}
    row = next(s for s in stopping_state(latest, history, round=3, n_labelled=30)["signals"]
               if s["name"] == STABLE_PREDICTIONS)
    assert row["value"] == pytest.approx((0.94 + 0.95 + 0.9502) / 3) and row["round_value"] == 0.9502
    recorded = {STABLE_PREDICTIONS: {**latest[STABLE_PREDICTIONS], "mean": 0.9467}}  # records that keep the mean
    row = next(s for s in stopping_state(recorded, history, round=3, n_labelled=30)["signals"]
               if s["name"] == STABLE_PREDICTIONS)
    assert row["value"] == 0.9467


def test_project_settings_reach_the_loop_and_bad_ones_are_refused():
    config = ProjectConfig(dataset="digits", audit_fraction=0.2, stop_when=("stable_predictions",),
                           round_seeds="shared")
    loop = config.loop_config(100, name="digits", evaluate_test=False)
    assert loop.audit_fraction == 0.2 and loop.stop_when == ("stable_predictions",)
    assert loop.round_seeds == "shared"
    assert ProjectConfig(dataset="digits").loop_config(100, name="d", evaluate_test=False).round_seeds == "per_round"
    assert ProjectConfig.from_dict(config.to_dict()) == config
    assert ProjectConfig(dataset="digits").loop_config(100, name="d", evaluate_test=False).audit_fraction == 0.0
    with pytest.raises(ActiveBayesError, match="audit_fraction"):
        ProjectConfig(dataset="digits", audit_fraction=1.5)
    with pytest.raises(ActiveBayesError, match="--stop-when"):
        ProjectConfig(dataset="digits", stop_when=("nope",))
    with pytest.raises(ActiveBayesError, match="round_seeds.*'sometimes'"):
        ProjectConfig(dataset="digits", round_seeds="sometimes")


def test_the_label_command_takes_round_seeds(tmp_path):
    from click.testing import CliRunner

    from activebayes.cli import cli
    from activebayes.labelling import LabellingProject

    project = tmp_path / "p"
    result = CliRunner().invoke(cli, ["query", str(project), "--dataset", "digits", "--round-seeds", "shared",
                                      "--max-epochs", "1", "--num-samples", "2", "-q"])
    assert result.exit_code == 0, result.output
    assert LabellingProject.open(project).config.round_seeds == "shared"
    again = CliRunner().invoke(cli, ["query", str(project), "--round-seeds", "per_round", "-q"])
    assert again.exit_code != 0 and "--round-seeds" in again.output and "shared" in again.output


# --------------------------------------------------------------------------- in the browser


@pytest.fixture
def rounds_live(tmp_path):
    """A project labelled with the true labels for ``ROUNDS`` rounds of 10, 3 of them audited each."""
    from activebayes.data import load_dataset

    targets = load_dataset("digits").targets
    project = make_project(tmp_path / "stop", batch_size=10, audit_fraction=0.3)
    server = LiveServer(project)
    store = project.store
    for r in range(ROUNDS):
        wait_for(lambda r=r: store.n_rounds() == r and (store.meta("status") or {}).get("state") == "ready",
                 timeout=300)
        batch = store.latest_proposal()[1]["indices"]  # what the app serves first, audited items included
        assert len(batch) == 10
        for item in batch:
            assert store.lease_next("ann", [item]) == item
            store.answer(item, int(targets[project.index_of(item)]), "ann")
        server.worker.wake()
    wait_for(lambda: store.n_rounds() == ROUNDS and (store.meta("status") or {}).get("state") == "ready",
             timeout=300)
    yield server
    server.stop()
    project.close()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_stopping_panel_reads_the_latest_round_in_plain_words(rounds_live, tmp_path):
    playwright_api = pytest.importorskip("playwright.sync_api")
    store = rounds_live.project.store
    records = [record for _round, record, _committed in store.rounds()]
    round_, proposal = store.latest_proposal()
    latest = proposal["signals"]
    assert round_ == ROUNDS and proposal["n_labelled"] == 10 * ROUNDS
    # numbers recomputed here: the mean kappa of the last 3 models, the audited answers' interval
    kappas = [r["signals"][STABLE_PREDICTIONS]["value"] for r in records[2:]] + [latest[STABLE_PREDICTIONS]["value"]]
    assert len(kappas) == 3 and all(k is not None for k in kappas)
    kappa_text = f"kappa {sum(kappas) / 3:.3f} over the last 3 rounds"
    audits = [r["signals"]["audit"] for r in records[-3:]]
    n, correct = sum(a["n"] for a in audits), sum(a["correct"] for a in audits)
    assert n == 9  # 3 uniformly drawn items in each of the last 3 batches
    interval = binomtest(correct, n).proportion_ci(confidence_level=0.9, method="exact")
    audit_text = (f"from {n} uniformly drawn answers: {correct / n:.1%} "
                  f"(90% interval {interval.low:.1%}-{interval.high:.1%})")
    first_info = records[1]["signals"][INFORMATION]["value"]
    ratio = latest[INFORMATION]["value"] / first_info
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(90_000)
            page.goto(f"{rounds_live.url}/dashboard?token={TOKEN}")
            page.wait_for_selector("body[data-ready='1']")
            page.wait_for_selector("#stop-signals li")

            def line(name):
                return page.inner_text(f"#stop-signals li[data-signal='{name}']")

            assert page.inner_text("#worker-note").startswith("trainer: thread on cpu")
            assert kappa_text in line(STABLE_PREDICTIONS)
            assert ("have stopped changing" in line(STABLE_PREDICTIONS)) == latest[STABLE_PREDICTIONS]["fired"]
            assert audit_text in line(ESTIMATED_ACCURACY)
            assert f"{ratio:.0%} of the information it held at the first model" in line(INFORMATION)
            assert f"[ratio {ratio:.3f}]" in line(INFORMATION)
            assert f"expects {latest[EXPECTED_ACCURACY]['value']:.1%} accuracy" in line(EXPECTED_ACCURACY)
            # 4 models: the remaining change needs a full window, so nothing can say stop yet
            assert latest[REMAINING_CHANGE]["value"] is None
            assert f"from the {CHANGE_WINDOW}th trained model on (4 so far)" in line(REMAINING_CHANGE)
            fired = [name for name in (STABLE_PREDICTIONS, ESTIMATED_ACCURACY, INFORMATION, EXPECTED_ACCURACY)
                     if latest[name]["fired"]]
            verdict = page.inner_text("#stop-verdict")
            assert page.get_attribute("#stop-verdict", "data-stop") == "no"
            assert verdict.startswith("Not yet: the predictions have not settled" if fired
                                      else "Not yet: no criterion says to stop")
            for name in fired:
                assert "says stop" in line(name)
            assert f"trained on {10 * ROUNDS} labels (round {ROUNDS})" in page.inner_text("#stop-note")
            # the learning curve's two end values never print over each other (equal accuracies did)
            assert page.evaluate("AB.spread([50, 52, 200], 14)") == [50, 64, 200]
            assert page.evaluate("AB.spread([52, 50], 14)") == [64, 50]
            ends = page.locator("#curve text[class^='value-']")
            assert ends.count() >= 1
            ys = sorted(ends.nth(i).bounding_box()["y"] for i in range(ends.count()))
            assert all(b - a >= 13 for a, b in zip(ys, ys[1:]))
            shot = tmp_path / "stopping.png"
            page.locator("#stopping").screenshot(path=str(shot))
            assert shot.read_bytes().startswith(b"\x89PNG")
        finally:
            browser.close()
    # the audited items of the batch are served as such (their score is NaN in the record: null here)
    import httpx

    from activebayes.data import load_dataset
    from tests.app.app_helpers import with_sessions

    targets = load_dataset("digits").targets
    served = []
    with with_sessions(httpx.Client(base_url=rounds_live.url, headers={"Authorization": f"Bearer {TOKEN}"},
                                    timeout=60)) as http:
        for _ in range(10):
            item = http.post("/api/next", json={"annotator": "viewer"}).json()["item"]
            served.append(item)
            label = int(targets[rounds_live.project.index_of(item["id"])])
            assert http.post("/api/answer", json={"annotator": "viewer", "item": item["id"], "label": label,
                                                  "next": False}).status_code == 200
    audited = [item for item in served if item["why"].startswith("drawn uniformly at random")]
    assert len(audited) == 3 and all(item["score"] is None for item in audited)
    assert all(isinstance(item["score"], float) for item in served if item not in audited)
