"""Messages from the data layer: registry wording, misspelt encoder names, the built-in
rand_hie table's duplicate-rows warning, and a categorical column that is really a text or an id."""

from __future__ import annotations

import warnings

import pytest

from activebayes.data import load_table
from activebayes.data.text import encode_texts, get_encoder
from activebayes.errors import InvalidArgumentError


def test_registering_a_taken_model_name_says_name_once():
    from activebayes.models.networks import register_model

    with pytest.raises(InvalidArgumentError) as error:
        register_model("mlp", lambda **kwargs: None)
    assert str(error.value) == "model name 'mlp' is already registered (pass replace=True to override)"


def test_registering_a_taken_dataset_or_strategy_names_it_once():
    from activebayes.data.datasets import DATASETS
    from activebayes.acquisition import register_strategy

    with pytest.raises(InvalidArgumentError, match=r"^dataset name 'digits' is already registered \(pass"):
        DATASETS.register("digits", lambda **kwargs: None)
    with pytest.raises(ValueError, match=r"strategy name 'random' is already registered") as error:
        register_strategy("random", lambda *args, **kwargs: None)
    assert "name name" not in str(error.value)


@pytest.mark.parametrize("call", [lambda: encode_texts(["a cat", "a dog"], "tfidff"),
                                  lambda: get_encoder("tfidff"),
                                  lambda: load_table([{"t": "a cat", "y": "a"}, {"t": "a dog", "y": "b"}],
                                                     text_column="t", label_column="y", encoder="tfidff")],
                         ids=["encode_texts", "get_encoder", "load_table"])
def test_a_misspelt_encoder_name_is_an_unknown_name_not_a_missing_folder(call, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError) as error:
        call()
    assert str(error.value) == ("encoder: unknown encoder 'tfidff' (did you mean 'tfidf'?); expected one of: "
                                "hashing, tfidf, or a local model folder or word-vector file")


def test_an_encoder_path_that_is_missing_is_still_a_missing_folder(tmp_path):
    from activebayes.errors import MissingFileError

    with pytest.raises(MissingFileError, match="not found: expected a local model folder"):
        get_encoder(str(tmp_path / "tfidff"))


def test_a_self_supervised_representation_of_a_table_is_refused_by_the_config():
    from activebayes.records import LoopConfig

    with pytest.raises(InvalidArgumentError, match=r"^representation \(--representation\) 'self-supervised' needs "
                                                   r"an image dataset, got table t\.csv: .*--model mlp"):
        LoopConfig(table="t.csv", text_column="body", label_column="team", representation="self-supervised")


def test_rand_hie_loads_without_the_duplicate_rows_warning():
    pytest.importorskip("statsmodels")
    from activebayes.data import load_dataset

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_dataset("rand_hie")
    assert [str(w.message) for w in caught if "identical content" in str(w.message)] == []


def _tickets(n: int = 30) -> list[dict[str, str]]:
    return [{"ticket_id": f"t{i}", "body": f"my wifi is slow {i}", "queue": ("low", "high")[i % 2],
             "team": ("network", "billing")[i % 2]} for i in range(n)]


def test_a_categorical_column_with_a_value_per_row_warns_once_naming_it():
    from activebayes.data.table import UninformativeColumnWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_table(_tickets(), feature_columns="*", label_column="team", id_column="ticket_id")
    messages = [str(w.message) for w in caught if issubclass(w.category, UninformativeColumnWarning)]
    assert messages == ["table: column 'body' has a different value in 30 of 30 rows: as a category it tells "
                        "the model nothing; a text column? text_column='body' (--text-column body); an id? "
                        "id_column='body' (--id-column body)"]
    assert issubclass(UninformativeColumnWarning, UserWarning)


@pytest.mark.parametrize("rows", [_tickets(19), [{**row, "body": f"text {i % 5}"} for i, row in enumerate(_tickets())]])
def test_few_rows_or_repeated_categories_do_not_warn(rows):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_table(rows, feature_columns="*", label_column="team", id_column="ticket_id")


# --------------------------------------------------------------------------- a newcomer's pass over text-and-tables.md


def _patients(n: int = 40) -> list[dict[str, str]]:
    return [{"id": f"p{i}", "age": str(20 + i), "weight": str(60 + (7 * i) % 30), "smoker": "yes" if i % 3 else "no",
             "y": "sick" if i % 2 else "well"} for i in range(n)]


def test_a_number_column_with_a_stray_cell_names_it_instead_of_one_hot_encoding_every_number():
    from activebayes.data import DataError

    rows = _patients()
    rows[3]["weight"] = "NA"  # R's missing marker: the column became 38 categories, silently
    with pytest.raises(DataError) as info:
        load_table(rows, feature_columns="age,weight,smoker", label_column="y")
    message = str(info.value)
    assert message.startswith("table: row 4, column 'weight': expected a number (39 of the column's 40 values are), "
                              "got 'NA'") and "categorical_columns" in message
    pool = load_table(rows, feature_columns="age,weight,smoker", label_column="y", categorical_columns="weight")
    assert len(pool.preprocessing["table"]["categorical"]["weight"]) == len({r["weight"] for r in rows})
    assert list(pool.preprocessing["table"]["numeric"]) == ["age"]  # smoker: no numbers, one-hot as before


@pytest.mark.parametrize(("column", "flag"), [("id", "--id-column"), ("text", "--text-column")])
def test_feature_columns_naming_the_id_or_text_column_is_refused(column, flag):
    rows = [{**r, "text": f"note {i}"} for i, r in enumerate(_patients())]
    with pytest.raises(InvalidArgumentError, match=rf"feature_columns \(--feature-columns\) must not name the "
                                                   rf"\w+ '{column}', given as \w+ \({flag}\)"):
        load_table(rows, text_column="text", feature_columns=f"age,{column}", id_column="id", label_column="y")


def test_jsonl_strings_may_hold_unicode_line_separators_and_csv_cells_may_be_long(tmp_path):
    import csv
    import json

    from activebayes.data.table import read_table_rows

    rows = [{"id": f"r{i}", "text": f"first part\u2028second part {i}\u0085end", "y": "a"} for i in range(3)]
    jsonl = tmp_path / "t.jsonl"  # what json.dumps(ensure_ascii=False) writes: the separators unescaped
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert read_table_rows(jsonl)[1] == rows
    long = "word " * 40_000  # 200,000 characters: over the csv module's default limit of 131,072
    with open(tmp_path / "t.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["id", "text"], ["r0", long], ["r1", "short"]])
    assert [r["text"] for r in read_table_rows(tmp_path / "t.csv")[1]] == [long, "short"]


def test_a_text_column_of_numbers_and_a_multilabel_column_without_sets_warn_and_jsonl_whole_floats_are_ints():
    rows = [{"t": f"note number {i}", "n": str(i * 3), "y": ["a", "b"][i % 2]} for i in range(20)]
    with pytest.warns(UserWarning, match=r"table: text_column \(--text-column\) 'n' holds only numbers"):
        load_table(rows, text_column="n", label_column="y")
    with pytest.warns(UserWarning, match=r"multilabel=True \(--multilabel\), but every row has exactly one class"):
        load_table(rows, text_column="t", label_column="y", multilabel=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a real multi-label column does not warn
        load_table([{**r, "y": "a|b" if i % 3 else "a"} for i, r in enumerate(rows)], text_column="t",
                   label_column="y", multilabel=True)
    numbered = [{"t": f"text {i}", "y": [1, 0, 1.0, 0.0][i % 4]} for i in range(40)]  # JSONL's 1 and 1.0
    assert load_table(numbered, text_column="t", label_column="y").preprocessing["classes"] == ["0", "1"]
