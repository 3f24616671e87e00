"""TablePool.transform: new rows get the pool's whole transform (text encoder, feature columns,
then the final standardisation), so a row of the pool transforms to exactly its own input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from activebayes.data.table import TablePreprocessor, load_table
from activebayes.data import DataError

TOPICS = {"billing": ["invoice paid twice", "refund my card", "charged for nothing", "wrong amount billed"],
          "network": ["router keeps dropping", "no signal at home", "wifi slow at night", "cable modem offline"]}


def _rows():
    rows = []
    for i in range(24):
        label = "billing" if i % 2 else "network"
        rows.append({"id": f"r{i}", "text": f"{TOPICS[label][i % 4]} case {i}", "minutes": float(3 * i % 7),
                     "plan": ["basic", "pro", "family"][i % 3], "label": label})
    return rows


def test_the_pools_own_rows_transform_to_their_inputs_for_a_table():
    rows = _rows()
    pool = load_table(rows, feature_columns=["minutes", "plan"], label_column="label", id_column="id")
    assert torch.equal(pool.transform(rows), pool.dataset.inputs)
    assert torch.equal(pool.transform(rows[5:6]), pool.dataset.inputs[5:6])
    # the feature columns' transform alone is not the model's input: the joined vector is
    # standardised once more (the category columns are not 0/1 for the model)
    alone = TablePreprocessor.from_dict(pool.preprocessing["table"]).transform(rows)
    assert not np.allclose(alone, pool.dataset.inputs.numpy())


@pytest.mark.parametrize("features", [[], ["minutes", "plan"]], ids=["text", "text+table"])
def test_the_pools_own_rows_transform_to_their_inputs_with_texts(features):
    pytest.importorskip("sklearn")
    rows = _rows()
    pool = load_table(rows, text_column="text", feature_columns=features, label_column="label", id_column="id")
    # the encoder is fitted on the pool's texts again: SVD's transform of a text it was fitted on
    # equals its fit_transform up to float32 rounding
    np.testing.assert_allclose(pool.transform(rows).numpy(), pool.dataset.inputs.numpy(), atol=2e-5)
    new = [{"text": "invoice charged twice", "minutes": 2.0, "plan": "pro"}]
    assert pool.transform(new).shape == (1, pool.dataset.inputs.shape[1])


def test_bad_new_rows_name_the_row_and_column():
    rows = _rows()
    pool = load_table(rows, text_column="text", feature_columns=["minutes", "plan"], label_column="label")
    with pytest.raises(DataError, match=r"^rows: row 2, column 'text': empty text$"):
        pool.transform([rows[0], {"text": "", "minutes": 1.0, "plan": "pro"}])
    with pytest.raises(DataError, match=r"^rows: row 1, column 'text': expected a text, got int$"):
        pool.transform([{"text": 7, "minutes": 1.0, "plan": "pro"}])
    with pytest.raises(DataError, match=r"row 1, column 'plan'"):
        pool.transform([{"text": "refund", "minutes": 1.0, "plan": "enterprise"}])  # an unseen category
    with pytest.raises(ValueError, match="rows must be a non-empty sequence"):
        pool.transform([])
