"""Tables and multi-label targets in the loop and the CLI (issue 26).

References are independent of the library: scikit-learn's multi-label metrics, the
network's own MC-dropout logits through ``torch.sigmoid`` in float64, and the run
directory's resume contract (a resumed run equals an uninterrupted one).
"""

from __future__ import annotations

import csv
import html
import json
import math
import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from activebayes.data import Pool, load_dataset
from activebayes.errors import InvalidArgumentError
from activebayes.experiment import resume_experiment, run_experiment
from activebayes.loop import ActiveLearningLoop, LoopConfig
from activebayes.metrics.multilabel import evaluate_multilabel
from activebayes.models import MLP, fit
from activebayes.models.dropout import mc_sampling, resample_masks
from activebayes.models.multilabel import MultiLabelPosterior
from activebayes.rundir import RunDirectory
from tests.conftest import multilabel_toy
from tests.cli.cli_helpers import run_cli

TOPICS = {"sport": ["goal", "match", "team", "score", "league", "coach"],
          "food": ["bread", "cheese", "soup", "bake", "recipe", "salt"],
          "music": ["song", "guitar", "band", "album", "chord", "drum"]}
FAST = ["--initial-size", "6", "--validation-size", "24", "--batch-size", "6", "--budget", "18", "--num-samples", "4",
        "--eval-samples", "4", "--max-epochs", "2", "--cold-start", "none", "-q"]


def _texts_csv(path: Path, n: int = 90, multilabel: bool = False) -> Path:
    rng = random.Random(0)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "text", "label"])
        for i in range(n):
            topics = rng.sample(sorted(TOPICS), 2 if multilabel and i % 2 else 1)
            words = [w for t in topics for w in rng.choices(TOPICS[t], k=5)]
            writer.writerow([f"r{i}", " ".join(words), "|".join(topics)])
    return path


def _features_csv(path: Path, n: int = 90) -> Path:
    rng = random.Random(1)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["a", "b", "colour", "y"])
        for _ in range(n):
            a, b = rng.gauss(0, 1), rng.gauss(0, 1)
            writer.writerow([f"{a:.4f}", f"{b:.4f}", rng.choice(["red", "blue"]), "pos" if a + b > 0 else "neg"])
    return path


# ----------------------------------------------------------------------------- CLI end to end


def test_cli_runs_a_csv_of_texts_and_resumes_to_a_larger_budget(tmp_path, capsys):
    table = _texts_csv(tmp_path / "texts.csv")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--label-column", "label",
                           "--id-column", "id", "--test-size", "20", "--strategy", "bald", "--out", out, *FAST)
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert (config["dataset"], config["table"], config["text_column"]) == ("table", str(table.resolve()), "text")
    assert config["table_options"] == {"test_size": 20}
    rounds = RunDirectory(out).read_rounds()
    assert [r.n_labelled for r in rounds] == [6, 12, 18]
    assert all(0.0 <= r.metrics["test_accuracy"] <= 1.0 and r.metrics["test_num_items"] == 20 for r in rounds)
    acquired = [i for r in rounds for i in r.acquired]
    assert len(set(acquired)) == len(acquired) == 12
    # resumed to a larger budget, from another working directory, equals a run started with it
    code, _, err = run_cli(capsys, "resume", out, "--budget", "24", "-q")
    assert code == 0, err
    straight = run_experiment(LoopConfig.from_stored({**config, "budget": 24}), tmp_path / "straight",
                              progress=False, report=False)
    resumed = RunDirectory(out).read_rounds()
    assert [r.acquired for r in resumed] == [r.acquired for r in straight.rounds]
    assert [r.metrics["test_accuracy"] for r in resumed] == [r.metrics["test_accuracy"] for r in straight.rounds]


def _rows_of(table: Path) -> dict[str, dict[str, str]]:
    with table.open(newline="") as handle:
        return {row["id"]: row for row in csv.DictReader(handle)}


def test_a_table_run_names_its_items_and_resumes_whatever_the_row_order(tmp_path, capsys, monkeypatch):
    """A run's records name pool positions: ``items.json`` ties each to its row's id, the pool
    is ordered by the items (not the file), and a changed table is refused on resume."""
    table = _texts_csv(tmp_path / "texts.csv")
    rows = _rows_of(table)
    out = tmp_path / "run"
    args = ["--table", table, "--text-column", "text", "--label-column", "label", "--id-column", "id",
            "--test-size", "20", "--strategy", "bald", *FAST]
    code, _, err = run_cli(capsys, "run", *args, "--budget", "12", "--out", out)
    assert code == 0, err
    items = json.loads((out / "items.json").read_text())
    assert len(items["pool"]) == 70 and len(items["test"]) == 20
    # the class names are kept with the items: the report names classes by them, not by ids 0-2
    assert items["classes"] == sorted(TOPICS)
    from activebayes.report import write_report

    page = html.unescape(write_report(out, output=tmp_path / "report.html").read_text())
    assert "Classes are named as in the dataset." in page and "Classes are shown by their ids" not in page
    assert sorted(items["pool"] + items["test"]) == sorted(rows)
    config = json.loads((out / "config.json").read_text())
    classes = config["classes"] if "classes" in config else sorted({r["label"] for r in rows.values()})
    for record in RunDirectory(out).read_rounds():  # each acquired position's label is its row's label
        assert [rows[items["pool"][i]]["label"] for i in record.acquired] == [classes[y] for y in record.labels]
    # the rows reversed: the same items, so the run resumes exactly, from any working directory
    lines = table.read_text().splitlines()
    table.write_text("\n".join([lines[0], *reversed(lines[1:])]) + "\n")
    monkeypatch.chdir(tmp_path.parent)
    code, _, err = run_cli(capsys, "resume", out, "--budget", "24", "-q")
    assert code == 0, err
    table.write_text("\n".join(lines) + "\n")
    straight = run_experiment(LoopConfig.from_stored({**config, "budget": 24}), tmp_path / "straight",
                              progress=False, report=False)
    resumed = RunDirectory(out).read_rounds()
    assert [r.acquired for r in resumed] == [r.acquired for r in straight.rounds]
    assert [r.metrics["test_accuracy"] for r in resumed] == [r.metrics["test_accuracy"] for r in straight.rounds]
    # a row added (or removed) changes the pool: a one-line error, and the run is left as it was
    before = (out / "rounds.jsonl").read_bytes()
    with table.open("a") as handle:
        handle.write("r999,goal match team,sport\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", "30", "-q")
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert f"table {table} changed since the run" in err and "1 new row(s): r999" in err
    assert (out / "rounds.jsonl").read_bytes() == before
    table.write_text("\n".join(lines[:-1]) + "\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", "30", "-q")
    assert code == 1 and "1 row(s) gone: r89" in err
    # labels changed: refused the same way, before the budget is raised (it failed later, naming an
    # item "not unlabelled", with config.json at the new budget and the last record dropped)
    config_before = (out / "config.json").read_bytes()
    def other_topic(line: str) -> str:  # another of the table's classes
        head, topic = line.rsplit(",", 1)
        return f"{head},{next(t for t in sorted(TOPICS) if t != topic)}"

    relabelled = [lines[0]] + [other_topic(line) if i in (3, 7) else line for i, line in enumerate(lines[1:], 1)]
    table.write_text("\n".join(relabelled) + "\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", "30", "-q")
    changed = ", ".join(line.split(",", 1)[0] for line in (lines[3], lines[7]))
    assert code == 1 and err.count("\n") == 1, err
    assert f"table {table} changed since the run" in err and f"the label of 2 row(s) changed: {changed}" in err
    assert (out / "rounds.jsonl").read_bytes() == before and (out / "config.json").read_bytes() == config_before
    # a row's text edited under its id: the same ids and labels, another item; refused the same way
    # (it resumed, the label given for the old text now standing for the new one)
    def edited(line: str) -> str:
        row_id, text, topic = line.split(",")
        return f"{row_id},{text} edited,{topic}"

    table.write_text("\n".join([lines[0]] + [edited(line) if i == 5 else line
                                              for i, line in enumerate(lines[1:], 1)]) + "\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", "30", "-q")
    assert code == 1 and err.count("\n") == 1, err
    assert f"table {table} changed since the run" in err
    assert f"the text or feature cells of 1 row(s) were edited under the same id: {lines[5].split(',')[0]}" in err
    assert (out / "rounds.jsonl").read_bytes() == before and (out / "config.json").read_bytes() == config_before
    # a run whose items.json has no content hashes (an earlier release) still resumes on the same table
    items = json.loads((out / "items.json").read_text())
    assert len(items["content"]) == 90 and all(len(sha) == 16 for sha in items["content"].values())
    del items["content"]
    (out / "items.json").write_text(json.dumps(items))
    table.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", "30", "-q")
    assert code == 0, err


def test_a_mistyped_table_path_is_a_missing_file_not_another_config(tmp_path, capsys):
    """The default folder is named after the file's stem, so a typo (``texts.tsv`` for
    ``texts.csv``) found the earlier run and was refused as "a different config"."""
    table = _texts_csv(tmp_path / "texts.csv")
    out = tmp_path / "run"
    args = ["--text-column", "text", "--label-column", "label", *FAST]
    code, _, err = run_cli(capsys, "run", "--table", table, *args, "--out", out)
    assert code == 0, err
    for command in ("run", "compare"):
        code, _, err = run_cli(capsys, command, "--table", tmp_path / "texts.tsv", *args, "--out", out)
        assert code == 1 and err == f"error: --table: no such file {tmp_path / 'texts.tsv'}\n", err


def test_a_table_run_without_its_items_file_is_not_resumed(tmp_path, capsys):
    """A run started before ``items.json`` recorded rows by file position: resuming it could
    misread every record, so it is refused."""
    table = _texts_csv(tmp_path / "texts.csv")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--label-column", "label",
                           "--budget", "12", "--out", out, *[a for a in FAST if a not in ("--budget", "18")])
    assert code == 0, err
    (out / "items.json").unlink()
    code, _, err = run_cli(capsys, "resume", out, "--budget", "18", "-q")
    assert code == 1 and "without items.json" in err and "start a new run" in err


def test_a_python_config_stores_the_table_as_an_absolute_path(tmp_path, monkeypatch):
    table = _texts_csv(tmp_path / "texts.csv")
    monkeypatch.chdir(tmp_path)
    config = LoopConfig(table="texts.csv", text_column="text", label_column="label", budget=12, initial_size=6,
                        validation_size=24, batch_size=6, num_samples=4, eval_samples=4, cold_start=None,
                        fit_options={"max_epochs": 2})
    assert config.table == str(table)
    run_experiment(config, tmp_path / "run", progress=False, report=False)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["table"] == str(table)
    monkeypatch.chdir(tmp_path.parent)
    assert len(resume_experiment(tmp_path / "run", progress=False, report=False, budget=18).rounds) == 3


def test_cli_runs_a_csv_of_features(tmp_path, capsys):
    table = _features_csv(tmp_path / "rows.csv")
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--table", table, "--feature-columns", "a,b,colour", "--label-column", "y",
                           "--strategy", "entropy", "--out", out, *FAST)
    assert code == 0, err
    rounds = RunDirectory(out).read_rounds()
    assert rounds[-1].n_labelled == 18
    # no test set: the headline is the validation accuracy
    assert "test_accuracy" not in rounds[0].metrics and 0 <= rounds[-1].accuracy <= 1
    assert json.loads((out / "config.json").read_text())["feature_columns"] == ["a", "b", "colour"]


def test_cli_imputes_missing_cells_with_every_other_column(tmp_path, capsys):
    rows = (tmp_path / "rows.csv")
    _features_csv(rows)
    lines = rows.read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[3].split(",")
    cells[header.index("a")] = ""  # one missing number
    rows.write_text("\n".join([*lines[:3], ",".join(cells), *lines[4:]]) + "\n")
    code, _, err = run_cli(capsys, "run", "--table", rows, "--feature-columns", "*", "--label-column", "y",
                           "--out", tmp_path / "bad", *FAST)
    assert code == 1 and "row 3, column 'a': missing value" in err and "--missing impute" in err
    assert not (tmp_path / "bad").exists()
    out = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--table", rows, "--feature-columns", "*", "--label-column", "y",
                           "--missing", "impute", "--out", out, *FAST)
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    # '*' is stored as the columns it meant when the run started (it was stored as '*', so a column
    # added to the file later became an input of the resumed rounds)
    assert config["feature_columns"] == ["a", "b", "colour"] and config["table_options"]["missing"] == "impute"
    assert RunDirectory(out).read_rounds()[-1].n_labelled == 18
    # the same command again finds the run (the same config), and a column added since changes nothing
    code, _, err = run_cli(capsys, "run", "--table", rows, "--feature-columns", "*", "--label-column", "y",
                           "--missing", "impute", "--out", out, *FAST)
    assert code == 0, err
    widened = rows.read_text().splitlines()
    rows.write_text("\n".join([widened[0] + ",extra", *(f"{line},{i}" for i, line in enumerate(widened[1:]))]) + "\n")
    code, _, err = run_cli(capsys, "resume", out, "--budget", "24", "-q")
    assert code == 0, err
    assert json.loads((out / "config.json").read_text())["feature_columns"] == ["a", "b", "colour"]


@pytest.mark.parametrize("content, args, expected", [
    ("id,text,label\nr1,hello,a\n", ["--text-column", "body", "--label-column", "label"],
     "--text-column 'body' is not a column of the table (columns: id, text, label)"),
    ("text,label\nhello there,a\n,b\n", ["--text-column", "text", "--label-column", "label"],
     "row 2, column 'text': empty text"),
    (b"text,label\nhello,a\n\xff\xfe bad,b\n", ["--text-column", "text", "--label-column", "label"],
     "line 3 is not valid UTF-8"),
    ("text,label\nhello,a\nhi,b\n", ["--text-column", "text"], "a run needs known labels"),
    ("text,label\n" + "".join(f"t{i},{'ab'[i % 2]}\n" for i in range(30)), ["--text-column", "text", "--label-column",
     "label"], "dataset 't' has 30 items, fewer than --initial-size 6 + --validation-size 24 + --batch-size 6 = 36: "
     "lower them (--validation-size 18 fits with the others as they are)"),
    ("a,y\n1,p\nx,q\n", ["--feature-columns", "a,missing", "--label-column", "y"],
     "--feature-columns 'missing' is not a column of the table"),
    ("a,y\n1,p\n,q\n", ["--feature-columns", "a", "--label-column", "y"], "row 2, column 'a': missing value"),
    ("text,label\nhello,a\nhi,b\n", ["--text-column", "text", "--label-column", "label", "--model", "batchbald_cnn"],
     "--model 'batchbald_cnn' needs images, input_shape (C, H, W) or (H, W); got items of shape (1,)"),
])
def test_cli_table_errors_are_one_line_and_write_nothing(tmp_path, capsys, content, args, expected):
    table = tmp_path / "t.csv"
    table.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, out, err = run_cli(capsys, "run", "--table", table, *args, "--out", tmp_path / "run", *[a for a in FAST if a != "-q"])
    assert code == 1
    assert err.startswith("error: ") and expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert out == ""  # no "run: ... -> DIR" plan for a run that never starts
    assert not (tmp_path / "run").exists()


def test_a_table_of_unknown_format_says_what_to_do_from_the_command_line(tmp_path, capsys):
    table = tmp_path / "t.txt"
    table.write_text("text,label\nhello,a\n")
    code, _, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--out", tmp_path / "run", *FAST)
    assert code == 1 and "unknown format '.txt'" in err and "rename the file (from Python: format=)" in err


def test_cli_table_flags_need_a_table_and_exclude_a_dataset(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "--text-column", "text", "--out", tmp_path / "a", "-q")
    assert code == 1 and "--text-column: only with a table" in err
    code, _, err = run_cli(capsys, "run", "--dataset", "mnist", "--table", tmp_path / "t.csv", "--text-column", "t",
                           "--out", tmp_path / "b", "-q")
    assert code == 1 and "not both" in err
    code, _, err = run_cli(capsys, "run", "--table", tmp_path / "missing.csv", "--text-column", "t",
                           "--out", tmp_path / "c", "-q")
    assert code == 1 and err == f"error: --table: no such file {tmp_path / 'missing.csv'}\n"
    assert not any((tmp_path / name).exists() for name in ("a", "b", "c"))


def test_cli_run_takes_the_class_names_of_a_table(tmp_path, capsys):
    """A class written in brackets reads like a list in a multi-label cell; the error's advice,
    ``--classes``, is a flag of ``run`` (it named only Python's ``classes=``)."""
    table = _texts_csv(tmp_path / "texts.csv", multilabel=True)
    lines = table.read_text().splitlines()
    table.write_text("\n".join([lines[0]] + [line.rsplit(",", 1)[0] + "," + "|".join(
        "[sport]" if t == "sport" else t for t in line.rsplit(",", 1)[1].split("|")) for line in lines[1:]]) + "\n")
    args = ["--table", table, "--text-column", "text", "--label-column", "label", "--multilabel", *FAST]
    code, _, err = run_cli(capsys, "run", *args, "--out", tmp_path / "bad")
    assert code == 1 and "which looks like a list" in err and "--classes a,b,..." in err
    names = ",".join(sorted({*TOPICS} - {"sport"}) + ["[sport]"])
    code, _, err = run_cli(capsys, "run", *args, "--classes", names, "--out", tmp_path / "run")
    assert code == 0, err
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["table_options"]["classes"] == names.split(",")
    assert json.loads((tmp_path / "run" / "items.json").read_text())["classes"] == names.split(",")
    code, _, err = run_cli(capsys, "run", "--dataset", "digits", "--classes", "a,b", "--out", tmp_path / "digits")
    assert code == 1 and "--classes: only with a table (--table FILE)" in err
    code, _, err = run_cli(capsys, "run", *args, "--classes", "a,,b", "--out", tmp_path / "empty")
    assert code == 1 and "--classes: an empty class name" in err


def test_cli_multilabel_table(tmp_path, capsys, monkeypatch):
    table = _texts_csv(tmp_path / "texts.csv", multilabel=True)
    out = tmp_path / "run"
    code, stdout, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--label-column", "label",
                                "--multilabel", "--test-size", "20", "--strategy", "multilabel_bald", "--out", out, *FAST)
    assert code == 0, err
    rounds = RunDirectory(out).read_rounds()
    # the finished line names the headline it prints: micro-F1, not "accuracy"
    assert f"labels, test micro-F1 {rounds[-1].accuracy:.4f}\n" in stdout
    assert all(len(y) == 3 and set(y) <= {0, 1} and sum(y) >= 1 for r in rounds for y in r.labels)
    assert 0 <= rounds[-1].metrics["test_micro_f1"] <= 1 and rounds[-1].accuracy == rounds[-1].metrics["test_micro_f1"]
    assert (out / "report.html").is_file()
    code, _, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--label-column", "label",
                           "--multilabel", "--strategy", "margin", "--out", tmp_path / "bad", *FAST)
    assert code == 1 and "'margin' reads single-label (softmax) predictions" in err
    assert not (tmp_path / "bad").exists()
    # the default (typicality, then badge) runs BADGE on label vectors, and the records say so
    code, _, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--label-column", "label",
                           "--multilabel", "--out", tmp_path / "default", *FAST, "--cold-start", "typicality",
                           "--cold-start-labels", "12")
    assert code == 0, err
    rounds = RunDirectory(tmp_path / "default").read_rounds()
    assert [r.strategy for r in rounds] == ["typicality", "multilabel_badge", None]  # the last round: budget reached
    assert all(len(y) == 3 and set(y) <= {0, 1} for r in rounds for y in r.labels)
    # the progress bar names the headline too (bars are drawn on a terminal only)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run_cli(capsys, "run", "--table", table, "--text-column", "text", "--label-column", "label",
                             "--multilabel", "--test-size", "20", "--out", tmp_path / "shown", *FAST[:-1])
    assert code == 0 and "f1=" in err and "acc=" not in err, err
    assert "labels, test micro-F1 0." in out, out


# ----------------------------------------------------------------------------- multi-label pieces


_toy = multilabel_toy


def test_evaluate_multilabel_matches_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    g = torch.Generator().manual_seed(3)
    log_probs = torch.nn.functional.logsigmoid(2 * torch.randn(200, 7, 5, generator=g))
    targets = (torch.rand(200, 5, generator=g) < 0.35).long()
    targets[targets.sum(1) == 0, 1] = 1
    got = evaluate_multilabel(log_probs, targets)
    probs = np.exp(log_probs.double().numpy()).mean(1)
    pred, y = (probs >= 0.5).astype(int), targets.numpy()
    assert got["micro_f1"] == pytest.approx(metrics.f1_score(y, pred, average="micro"), abs=1e-12)
    assert got["macro_f1"] == pytest.approx(metrics.f1_score(y, pred, average="macro", zero_division=0), abs=1e-12)
    assert got["samples_f1"] == pytest.approx(metrics.f1_score(y, pred, average="samples", zero_division=1), abs=1e-12)
    assert got["hamming_loss"] == pytest.approx(metrics.hamming_loss(y, pred), abs=1e-12)
    assert got["subset_accuracy"] == pytest.approx(metrics.accuracy_score(y, pred), abs=1e-12)
    p = np.clip(probs, 1e-12, 1 - 1e-12)
    assert got["nll"] == pytest.approx(float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).sum(1).mean()), rel=1e-9)


def test_multilabel_posterior_log_probs_are_log_sigmoids_of_the_same_k_functions():
    torch.manual_seed(0)
    net = MLP(in_features=6, num_classes=4, hidden=(16,), p=0.5)
    posterior = MultiLabelPosterior(net)
    x = torch.randn(9, 6)
    got = posterior.log_probs(x, num_samples=5, generator=torch.Generator().manual_seed(7))
    assert got.shape == (9, 5, 4) and got.dtype == torch.float32
    resample_masks(net, generator=torch.Generator().manual_seed(7))
    net.eval()
    with torch.no_grad():
        for k in range(5):
            with mc_sampling(net, [k], expand=False):
                logits = net(x).double()
            expected = torch.log(torch.sigmoid(logits))
            assert torch.allclose(got[:, k].double(), expected, atol=2e-6), k
    assert not torch.allclose(got[:, 0], got[:, 1])  # K different functions


def test_fit_multilabel_uses_binary_cross_entropy():
    data = _toy()
    with torch.random.fork_rng():  # its initial weights, whatever the tests before left in the global RNG
        torch.manual_seed(0)
        net = MLP(in_features=6, num_classes=4, hidden=(32,))
    result = fit(net, (data.inputs, data.targets), validation=(data.inputs[:100], data.targets[:100]),
                 generator=0, max_epochs=4, min_samples_per_epoch=5056, multilabel=True)
    first = result.history[0]
    assert first.validation_accuracy is not None and result.best_validation_accuracy > 0.8  # micro-F1
    # the first epoch's train loss is a mean BCE: below log 2 per label once learning started
    assert 0 < first.train_loss < math.log(2)
    with pytest.raises(InvalidArgumentError, match=r"targets must have shape \[N\]"):
        fit(MLP(in_features=6, num_classes=4), (data.inputs, data.targets), generator=0, max_epochs=1)


def test_multilabel_pool_balanced_initial_and_answers():
    data = _toy(c=4)
    pool = Pool.create(data, validation_size=30, initial_size=8, seed=0)
    counts = pool.class_counts()
    assert pool.n_labelled == 8 and bool((counts >= 2).all())
    assert torch.equal(counts, data.targets[pool.labelled_indices].sum(0))
    free = pool.unlabelled_indices[:2]
    with pytest.raises(InvalidArgumentError, match="at least one class"):
        pool.label(free, [[0, 0, 0, 0], [1, 0, 0, 0]])
    with pytest.raises(InvalidArgumentError, match=r"\[B, C\] = \[2, 4\]"):
        pool.label(free, [1, 2])
    pool.label(free, [[0, 1, 0, 0], [1, 0, 0, 1]])
    assert pool.labels_of(free).tolist() == [[0, 1, 0, 0], [1, 0, 0, 1]]
    pool.check_invariants()


def test_multilabel_loop_resumes_exactly(tmp_path):
    data = _toy(n=240)
    train, test = data.subset(torch.arange(200)), data.subset(torch.arange(200, 240))
    config = LoopConfig(strategy="multilabel_batchbald", budget=26, initial_size=8, validation_size=30,
                        batch_size=6, num_samples=8, eval_samples=4, cold_start=None,
                        fit_options={"max_epochs": 2}, acquisition_options={"num_configurations": 200})

    def factory(c):
        return ActiveLearningLoop(c, dataset=train, test=test)

    full = run_experiment(config, tmp_path / "full", progress=False, loop_factory=factory, report=False)
    assert [r.n_labelled for r in full.rounds] == [8, 14, 20, 26]
    assert full.metric == "test_micro_f1" and all(len(y) == 4 for r in full.rounds for y in r.labels)
    assert [r.labels for r in full.rounds[:-1]] == [train.targets[r.acquired].tolist() for r in full.rounds[:-1]]
    half = run_experiment(config.replace(budget=20), tmp_path / "half", progress=False, loop_factory=factory,
                          report=False)
    assert len(half.rounds) == 3
    RunDirectory(tmp_path / "half").raise_budget(26)
    resumed = resume_experiment(tmp_path / "half", progress=False, loop_factory=factory, report=False)
    assert [r.acquired for r in resumed.rounds] == [r.acquired for r in full.rounds]
    assert [r.metrics["test_micro_f1"] for r in resumed.rounds] == [r.metrics["test_micro_f1"] for r in full.rounds]


def test_strategies_must_fit_the_kind_of_targets():
    with pytest.raises(InvalidArgumentError, match="is for multi-label targets"):
        ActiveLearningLoop(LoopConfig(strategy="multilabel_bald", cold_start=None))
    data = _toy()
    with pytest.raises(InvalidArgumentError, match="'margin' reads single-label"):
        ActiveLearningLoop(LoopConfig(strategy="margin", cold_start=None), dataset=data)
    with pytest.raises(InvalidArgumentError, match="cold_start.*'least_confidence' reads single-label"):
        ActiveLearningLoop(LoopConfig(strategy="random", cold_start="least_confidence"), dataset=data)
    # the familiar names mean their label-vector versions on multi-label targets
    for name in ("badge", "bald", "power_bald", "entropy", "batchbald"):
        loop = ActiveLearningLoop(LoopConfig(strategy=name, cold_start="bald"), dataset=data)
        assert (loop._strategy.name, loop._cold_start.name) == (f"multilabel_{name}", "multilabel_bald")


def test_mnist_pairs_is_a_registered_multilabel_dataset(mnist_dir):
    test = load_dataset("mnist_pairs", data_dir=mnist_dir, split="test")
    mnist = load_dataset("mnist", data_dir=mnist_dir, split="test")
    assert test.multilabel and test.targets.shape == (len(mnist), 10) and test.input_shape == (1, 28, 56)
    assert bool((test.targets.sum(1) >= 1).all()) and bool((test.targets.sum(1) <= 2).all())


def test_report_of_a_multilabel_run_shows_its_metrics(tmp_path, recwarn):
    from activebayes.report import write_report

    data = _toy(n=160)
    config = LoopConfig(strategy="multilabel_entropy", budget=14, initial_size=8, validation_size=30, batch_size=6,
                        num_samples=4, eval_samples=4, cold_start=None, fit_options={"max_epochs": 1})
    result = run_experiment(config, tmp_path / "run", progress=False, report=False,
                            loop_factory=lambda c: ActiveLearningLoop(c, dataset=data.subset(torch.arange(120)),
                                                                      test=data.subset(torch.arange(120, 160))))
    html = Path(write_report(tmp_path / "run")).read_text()
    final = result.rounds[-1].metrics
    assert "test micro-F1" in html and "Hamming loss" in html and "subset accuracy" in html
    assert f"{final['test_hamming_loss']:.4f}" in html
    assert not [w for w in recwarn if "failed" in str(w.message)]  # every figure was drawn
