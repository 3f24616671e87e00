"""WordNet with a text model trained from token ids: does acquisition lead random by more
than on frozen features, as it does on MNIST with a CNN trained from scratch?

The WordNet noun task of ``label_efficiency.py --dataset wordnet_nouns`` (72,115 training
glosses, 26 lexicographer categories, 10,000 test glosses, 52 balanced initial labels,
500 validation, 20 labels a round to 512, K = 50 to score a fresh 5,000-item pool
subsample, K = 20 for the test predictive), but the items are the glosses' first
``LENGTH`` word ids (a vocabulary of the training glosses' words seen at least twice; 1
for any other word, 0 for padding) and the model learns its word embeddings:

    embedding (64) -> convolution over 3 words (128) -> max over the words -> ReLU
    -> MC dropout -> dense 128 -> ReLU -> MC dropout -> dense 26

It goes through :class:`~activebayes.loop.ActiveLearningLoop` with a ``model_factory``,
as a user's own network does. Strategies: ``random``, ``badge`` and ``default``
(typicality until 6 labels a class, then BADGE; both on the round model's features).

Each (strategy, seed) run is one JSON file under
``benchmarks/results/text_from_scratch_runs/<strategy>/seed_<N>.json`` (skipped when
present); ``--summarise`` rebuilds ``benchmarks/results/text_from_scratch.json`` from
them alone.

Usage::

    python benchmarks/text_from_scratch.py --strategies random,badge,default --seeds 0-5
    python benchmarks/text_from_scratch.py --summarise
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import factory_runs

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "results" / "text_from_scratch_runs"
RESULTS = ROOT / "benchmarks" / "results" / "text_from_scratch.json"
#: words kept of each gloss (WordNet's noun glosses: median 9 words)
LENGTH = 24
#: the ids of padding and of a word outside the vocabulary
PAD, UNKNOWN = 0, 1
STRATEGIES = ("random", "badge", "default")


def token_ids(texts: list[str], vocabulary_texts: list[str], length: int = LENGTH):
    """``[N, length]`` word ids (int64) of ``texts``: lower-cased ``[a-z]+`` words, the
    vocabulary the words of ``vocabulary_texts`` seen at least twice (most frequent first,
    from id 2), other words ``UNKNOWN``, cut or padded with ``PAD`` to ``length``; and the
    vocabulary's size including the two reserved ids."""
    import numpy as np

    def words(text: str) -> list[str]:
        return re.findall(r"[a-z]+", text.lower())

    counts = Counter(w for text in vocabulary_texts for w in words(text))
    vocabulary = {w: k + 2 for k, (w, c) in enumerate(counts.most_common()) if c >= 2}
    ids_N_L = np.full((len(texts), length), PAD, dtype=np.int64)
    for i, text in enumerate(texts):
        row = [vocabulary.get(w, UNKNOWN) for w in words(text)][:length]
        ids_N_L[i, : len(row)] = row
    return ids_N_L, len(vocabulary) + 2


def text_cnn(vocabulary_size: int, num_classes: int, generator=None, dim: int = 64, width: int = 128):
    """The network of the module docstring; it reads word ids stored as float32 (exact below 2**24)."""
    import torch
    from torch import nn

    from activebayes.models.networks import ConsistentMCDropout

    class TextCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocabulary_size, dim, padding_idx=PAD)
            self.conv = nn.Conv1d(dim, width, 3, padding=1)
            self.head = nn.Sequential(nn.ReLU(), ConsistentMCDropout(0.5), nn.Linear(width, width), nn.ReLU(),
                                      ConsistentMCDropout(0.5), nn.Linear(width, num_classes))

        def forward(self, ids_B_L: torch.Tensor) -> torch.Tensor:
            ids_B_L = ids_B_L.long()
            h_B_W_L = self.conv(self.embedding(ids_B_L).transpose(1, 2))
            words_B_1_L = (ids_B_L != PAD).unsqueeze(1)
            # max over the words present (an empty gloss gives zeros)
            h_B_W = h_B_W_L.masked_fill(~words_B_1_L, float("-inf")).max(-1).values
            return self.head(torch.where(words_B_1_L.any(-1), h_B_W, torch.zeros_like(h_B_W)))

    factory_runs.seed_torch_from(generator)  # the loop's seeded model stream
    return TextCNN()


def datasets():
    """WordNet's train and test splits as word ids (float32 ``ArrayDataset``s) and the vocabulary size."""
    import numpy as np
    import torch

    from activebayes.data.dataset import ArrayDataset
    from activebayes.data.wordnet import read_wordnet_nouns, wordnet_split

    nouns = read_wordnet_nouns()
    train, test = wordnet_split(len(nouns.glosses))
    label_of = {nouns.lexnames.index(name): c for c, name in enumerate(nouns.categories)}
    ids_N_L, vocabulary_size = token_ids(list(nouns.glosses), [nouns.glosses[i] for i in train.tolist()])

    def split(rows):
        targets = np.array([label_of[f] for f in nouns.lexfiles[rows].tolist()], dtype=np.int64)
        return ArrayDataset(inputs=torch.from_numpy(ids_N_L[rows].astype(np.float32)),
                            targets=torch.from_numpy(targets), classes=nouns.categories, name="wordnet_token_ids")

    return split(train), split(test), vocabulary_size


def config(strategy: str, seed: int):
    """``label_efficiency.py``'s WordNet protocol, for the network given as a model factory."""
    from label_efficiency import protocol

    cold = strategy == "default"
    return protocol("wordnet_nouns", None).replace(
        dataset="wordnet_token_ids", model="auto", strategy="badge" if cold else strategy, seed=seed,
        cold_start="typicality" if cold else None, cold_start_labels=156 if cold else None)


def run(strategy: str, seed: int, data) -> dict:
    """One run (cached as JSON): labels and test accuracy of every round, and its time."""
    from activebayes.loop import ActiveLearningLoop

    train, test, vocabulary_size = data
    return factory_runs.cached_run(
        RUNS, strategy, seed, "test_accuracy",
        lambda: ActiveLearningLoop(config(strategy, seed), dataset=train, test=test,
                                   model_factory=lambda g: text_cnn(vocabulary_size, len(train.classes), g)))


def summarise(write: bool = True) -> dict:
    """AULC of every cached run, per strategy, and each strategy's lead over random."""
    return factory_runs.summarise(RUNS, STRATEGIES, "test_accuracy", RESULTS if write else None)


def markdown(summary: dict) -> str:
    return factory_runs.markdown(summary)


def main(argv: list[str] | None = None) -> int:
    parser = factory_runs.argument_parser(__doc__.splitlines()[0], STRATEGIES)
    args = parser.parse_args(argv)
    strategies = factory_runs.chosen_strategies(parser, args.strategies, STRATEGIES)
    if not args.summarise:
        data = datasets()
        for seed in args.seeds:
            for strategy in strategies:
                r = run(strategy, seed, data)
                print(f"{strategy} seed {seed}: final accuracy {r['test_accuracy'][-1]:.4f}, {r['seconds']} s",
                      flush=True)
    summary = summarise()
    print(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
