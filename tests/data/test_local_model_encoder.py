"""Local Hugging Face / sentence-transformers model folders as text encoders, against the real libraries.

The models are tiny random BERTs written to a temporary folder (nothing is downloaded, and a
test blocks every socket to prove it). The reference is independent of the encoder's batching:
each text run through the model alone, unpadded, and its token states averaged in float64.
"""

from __future__ import annotations

import json
import os
import socket

import numpy as np
import pytest
import torch

from activebayes.cli import main
from activebayes.data.table import load_table
from activebayes.data.text import LocalModelEncoder, encode_texts, get_encoder
from tests.conftest import tiny_table_run, write_topic_csv

transformers = pytest.importorskip("transformers")

TEXTS = [
    "the cat sat on the mat", "a dog barked", "stocks fell sharply today after the report on the market",
    "cat", "the market rallied", "a kitten chased the dog across the mat today", "bond yields rose",
]
TOPICS = {"animal": "cat dog kitten puppy mat barked chased slept", "finance": "stocks market bond yields shares fell rose"}


def _tiny_bert(folder, seed: int = 0):
    words = sorted({w for t in [*TEXTS, *TOPICS.values()] for w in t.split()})
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
    tokenizer = transformers.BertTokenizer(vocab_file=str(folder / "vocab.txt"))
    config = transformers.BertConfig(vocab_size=len(words) + 5, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
    with torch.random.fork_rng():  # seeded weights, the global generator left as it was
        torch.manual_seed(seed)
        model = transformers.BertModel(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _reference_N_D(folder, texts) -> np.ndarray:
    """Each text alone (no padding), the mean of its token states, in float64."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    model = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    rows = []
    with torch.no_grad():
        for text in texts:
            hidden_T_D = model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]
            rows.append(hidden_T_D.double().numpy().mean(axis=0))
    return np.stack(rows)


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_transformers_folder_is_mean_pooled_over_real_tokens_only(tmp_path, no_network, monkeypatch):
    folder = _tiny_bert(tmp_path / "bert")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # batches of 3 mix short and long texts, so padding would show in an unmasked mean
    features_N_D = LocalModelEncoder(folder, batch_size=3).fit_transform(TEXTS)
    assert features_N_D.dtype == np.float32 and features_N_D.shape == (len(TEXTS), 16)
    np.testing.assert_allclose(features_N_D, _reference_N_D(folder, TEXTS), atol=2e-5, rtol=1e-5)
    assert "HF_HUB_OFFLINE" not in os.environ  # set only while the model loads


def test_sentence_transformers_folder_matches_the_same_weights_mean_pooled(tmp_path, no_network):
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    bert = _tiny_bert(tmp_path / "bert")
    word = Transformer(str(bert))
    pooling = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    st.SentenceTransformer(modules=[word, pooling], device="cpu").save(str(tmp_path / "st"))
    assert (tmp_path / "st" / "modules.json").is_file()
    features_N_D = get_encoder(str(tmp_path / "st")).fit_transform(TEXTS)
    np.testing.assert_allclose(features_N_D, _reference_N_D(bert, TEXTS), atol=2e-5, rtol=1e-5)


def test_weights_saved_again_in_the_same_folder_are_encoded_afresh(tmp_path, no_network):
    folder = _tiny_bert(tmp_path / "bert", seed=0)
    first = encode_texts(TEXTS, LocalModelEncoder(folder), cache_dir=tmp_path / "cache")
    fingerprint = LocalModelEncoder(folder).fingerprint()
    retrained = _tiny_bert(tmp_path / "retrained", seed=1)  # same files, same sizes, other weights
    for path in retrained.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    assert LocalModelEncoder(folder).fingerprint() != fingerprint
    second = encode_texts(TEXTS, LocalModelEncoder(folder), cache_dir=tmp_path / "cache")
    np.testing.assert_allclose(second, _reference_N_D(retrained, TEXTS), atol=2e-5, rtol=1e-5)
    assert not np.allclose(first, second)


def test_cli_runs_a_csv_of_texts_on_a_local_model_folder(tmp_path, capsys, no_network):
    folder = _tiny_bert(tmp_path / "bert")
    table = write_topic_csv(tmp_path / "texts.csv", TOPICS)
    out = tmp_path / "run"
    code = main(tiny_table_run(table, folder, out))
    assert code == 0, capsys.readouterr().err
    config = json.loads((out / "config.json").read_text())
    assert config["table_options"]["encoder"] == str(folder)
    pool = load_table(table, text_column="text", label_column="label", encoder=str(folder))
    assert pool.dataset.inputs.shape[1] == 16


def test_a_folder_that_is_not_a_model_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code = main(["run", "--table", str(tmp_path / "t.csv"), "--text-column", "text", "--label-column", "label",
                 "--encoder", str(tmp_path / "empty"), "--out", str(tmp_path / "run"), "-q"])
    assert code == 1
    (tmp_path / "t.csv").write_text("text,label\nhello there,a\nbye now,b\n")
    code = main(["run", "--table", str(tmp_path / "t.csv"), "--text-column", "text", "--label-column", "label",
                 "--encoder", str(tmp_path / "empty"), "--out", str(tmp_path / "run"), "-q"])
    err = capsys.readouterr().err
    assert code == 1 and "holds neither config.json nor modules.json" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_long_encoding_shows_progress_unless_told_not_to(tmp_path, capsys):
    folder = _tiny_bert(tmp_path / "bert")
    capsys.readouterr()
    LocalModelEncoder(folder, batch_size=2, progress=True).fit_transform(TEXTS)
    assert "encode texts" in capsys.readouterr().err
    LocalModelEncoder(folder, batch_size=2, progress=False).fit_transform(TEXTS)
    assert "encode texts" not in capsys.readouterr().err


def test_the_model_runs_on_the_gpu_when_there_is_one(tmp_path, monkeypatch):
    folder = _tiny_bert(tmp_path / "bert")
    assert LocalModelEncoder(folder).device == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert LocalModelEncoder(folder).device == "cuda"
    assert LocalModelEncoder(folder, device="cpu").device == "cpu"
    assert LocalModelEncoder(folder).fingerprint() == LocalModelEncoder(folder, device="cpu").fingerprint()
