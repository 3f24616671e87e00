"""benchmarks/text_from_scratch.py: word ids and the text CNN trained from them."""

from __future__ import annotations

import torch

from tests.conftest import ROOT


def _benchmark(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import text_from_scratch

    return text_from_scratch


def test_word_ids_keep_words_seen_twice_most_frequent_first(monkeypatch):
    benchmark = _benchmark(monkeypatch)
    ids_N_L, size = benchmark.token_ids(["The cat sat", "a DOG", "cat cat dog dog cat"],
                                        ["cat dog cat dog cat the"], length=4)
    # vocabulary: cat (3) -> 2, dog (2) -> 3; "the" once and "sat" / "a" never: unknown (1); 0 pads
    assert size == 4
    assert ids_N_L.tolist() == [[1, 2, 1, 0], [1, 3, 0, 0], [2, 2, 3, 3]]


def test_the_text_cnn_ignores_padding_and_is_seeded_by_the_loops_generator(monkeypatch):
    benchmark = _benchmark(monkeypatch)
    ids_N_L = torch.tensor([[5.0, 2.0, 7.0], [3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    model = benchmark.text_cnn(10, 4, torch.Generator().manual_seed(0)).eval()
    padded_N_L = torch.cat([ids_N_L, torch.zeros(3, 5)], dim=1)
    with torch.no_grad():
        assert torch.allclose(model(ids_N_L), model(padded_N_L), atol=1e-6)  # max over present words only
        assert torch.isfinite(model(ids_N_L)).all()  # an empty gloss too
    again = benchmark.text_cnn(10, 4, torch.Generator().manual_seed(0))
    other = benchmark.text_cnn(10, 4, torch.Generator().manual_seed(1))
    assert torch.equal(model.embedding.weight, again.embedding.weight)
    assert not torch.equal(model.embedding.weight, other.embedding.weight)
