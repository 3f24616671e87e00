"""One-line errors and warnings of the command line about tables, encoders and representations, naming what was given."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from activebayes.cli import main
from tests.conftest import tiny_table_run, write_topic_csv

TOPICS = {"net": "wifi router latency outage cable", "pay": "invoice refund charge card price"}


def _tickets_csv(path: Path, rows: int = 40) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ticket_id", "body", "team"])
        for i in range(rows):
            team = sorted(TOPICS)[i % 2]
            writer.writerow([f"t{i}", f"{TOPICS[team].split()[i % 5]} problem number {i}", team])
    return path


def test_self_supervised_representation_on_a_table_names_the_flag_before_writing(tmp_path, capsys):
    table = _tickets_csv(tmp_path / "tickets.csv")
    out = tmp_path / "run"
    code = main(["run", "--representation", "self-supervised", "--table", str(table), "--text-column", "body",
                 "--label-column", "team", "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: --representation 'self-supervised' needs an image dataset, got table ")
    assert "--model mlp" in err and "square images" not in err
    assert not out.exists()


def test_a_misspelt_encoder_is_an_unknown_name_with_a_suggestion(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    table = _tickets_csv(tmp_path / "tickets.csv")
    code = main(["run", "--table", str(table), "--text-column", "body", "--label-column", "team",
                 "--encoder", "tfidff", "--out", str(tmp_path / "run"), "-q"])
    assert code == 1
    assert capsys.readouterr().err == ("error: --encoder: unknown encoder 'tfidff' (did you mean 'tfidf'?); "
                                       "expected one of: hashing, tfidf, or a local model folder or word-vector "
                                       "file\n")


def test_an_encoder_without_a_text_column_is_refused_not_ignored(tmp_path, capsys):
    # it used to be accepted and silently unused: the run's features were the number columns alone
    table = tmp_path / "rows.csv"
    table.write_text("a,b,y\n" + "".join(f"{i},{i % 3},{'xy'[i % 2]}\n" for i in range(40)))
    out = tmp_path / "run"
    code = main(["run", "--table", str(table), "--feature-columns", "a,b", "--label-column", "y",
                 "--encoder", "hashing", "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {table}: --encoder encodes the text column, but no --text-column was given")
    assert not (out / "rounds.jsonl").exists()
    from activebayes.data.table import load_table
    from activebayes.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"encoder \(--encoder\) encodes the text column"):
        load_table(table, feature_columns=["a", "b"], label_column="y", encoder="hashing")


@pytest.mark.parametrize("budget", [[], ["--budget", "16"]])
def test_resuming_a_run_whose_table_moved_names_the_recorded_table(tmp_path, capsys, budget):
    table = write_topic_csv(tmp_path / "t3.csv", TOPICS)
    out = tmp_path / "run"
    assert main(tiny_table_run(table, "tfidf", out)) == 0
    shutil.move(table, tmp_path / "t3moved.csv")
    capsys.readouterr()
    assert main(["resume", str(out), "-q", *budget]) == 1
    assert capsys.readouterr().err == (f"error: {out / 'config.json'}: the run's table {table.resolve()} is missing "
                                       "(moved or deleted?); put it back to resume\n")


def test_a_text_column_taken_as_a_category_warns_naming_the_flags(tmp_path, capsys):
    table = _tickets_csv(tmp_path / "tickets.csv")
    code = main(["run", "--table", str(table), "--feature-columns", "*", "--id-column", "ticket_id",
                 "--label-column", "team", "--initial-size", "4", "--validation-size", "8", "--batch-size", "4",
                 "--budget", "8", "--num-samples", "2", "--eval-samples", "2", "--max-epochs", "1",
                 "--cold-start", "none", "--out", str(tmp_path / "run"), "-q"])
    err = capsys.readouterr().err
    assert code == 0
    warned = [line for line in err.splitlines() if "different value in" in line]
    assert warned == [f"warning: {table.resolve()}: column 'body' has a different value in 40 of 40 rows: as a "
                      "category it tells the model nothing; a text column? text_column='body' (--text-column body); "
                      "an id? id_column='body' (--id-column body)"]


def test_self_supervised_representation_on_a_feature_dataset_names_the_flag(tmp_path, capsys):
    """A built-in dataset of feature vectors (breast_cancer's 30 numbers) is caught when the encoder
    would be trained, naming the flag and the items' shape, not the image check's raw wording."""
    code = main(["run", "--dataset", "breast_cancer", "--representation", "self-supervised", "--budget", "40",
                 "--out", str(tmp_path / "run"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "error: --representation 'self-supervised' learns from square images, but --dataset 'breast_cancer' holds "
        "items of shape (30,): they already are features; run it without a representation")
