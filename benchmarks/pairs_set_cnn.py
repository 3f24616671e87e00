"""Digit pairs with a network built for a set of digits: does acquisition lead random by
as much as on MNIST once the model learns the pairs as well as MNIST's CNN learns digits?

The multi-label task of ``label_efficiency.py --dataset mnist_pairs`` (two MNIST digits
side by side labelled with the set of digits shown; 5,000 training pairs, 500 of them
validation, 20 balanced initial labels, 10 a round to 200, K = 20 to score a fresh
2,000-item pool subsample, K = 10 for the test predictive on 10,000 test pairs; headline:
test micro-F1), with a network that reads each half with the same digit CNN and pools the
two halves' features by an elementwise maximum, so a digit's features count wherever it is:

    each 28x28 half: conv 32 5x5 -> max-pool 2 -> ReLU -> conv 64 5x5 -> max-pool 2 -> ReLU
    -> dense 128 -> ReLU;  max over the halves -> MC dropout -> dense 128 -> ReLU
    -> MC dropout -> dense 10 (one logit a digit)

(``label_efficiency.py``'s MLP and the BatchBALD CNN read the 28x56 image as one picture
and reach a micro-F1 of 0.63 and 0.77 at 200 labels.) It goes through
:class:`~activebayes.loop.ActiveLearningLoop` with a ``model_factory``, as a user's own
network does, with the loop's default training. Strategies: ``random`` and ``default``
(typicality until 60 labels, then BADGE over the BCE gradient embeddings, on the round
model's features).

Each (strategy, seed) run is one JSON file under
``benchmarks/results/pairs_set_cnn_runs/<strategy>/seed_<N>.json`` (skipped when present;
see ``factory_runs.py``); ``--summarise`` rebuilds ``benchmarks/results/pairs_set_cnn.json``
from them alone. One CPU thread a run by default, so two runs share two cores.

Usage::

    python benchmarks/pairs_set_cnn.py --strategies random,default --seeds 0-2
    python benchmarks/pairs_set_cnn.py --summarise
"""

from __future__ import annotations

import sys
from pathlib import Path

import factory_runs

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "benchmarks" / "results" / "pairs_set_cnn_runs"
RESULTS = ROOT / "benchmarks" / "results" / "pairs_set_cnn.json"
METRIC = "test_micro_f1"
STRATEGIES = ("random", "default")


def set_cnn(generator=None, num_classes: int = 10, width: int = 128, p: float = 0.5):
    """The network of the module docstring: ``[B, 1, 28, 56]`` pairs to ``[B, num_classes]`` logits."""
    import torch
    from torch import nn

    from activebayes.models.dropout import ConsistentMCDropout
    from activebayes.models.networks import MaxPool2d

    class SetCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(nn.Conv2d(1, 32, 5), MaxPool2d(2), nn.ReLU(),
                                       nn.Conv2d(32, 64, 5), MaxPool2d(2), nn.ReLU(), nn.Flatten(),
                                       nn.Linear(1024, width), nn.ReLU())
            self.dropout = ConsistentMCDropout(p)
            self.hidden = nn.Sequential(nn.Linear(width, width), nn.ReLU(), ConsistentMCDropout(p))
            self.out = nn.Linear(width, num_classes)

        def forward(self, x_B_1_H_2W: torch.Tensor) -> torch.Tensor:
            B = x_B_1_H_2W.shape[0]
            # both halves through the same trunk, as one batch: the left ones, then the right ones;
            # the batch dimension is kept up to the first MC dropout layer (the batched MC path)
            h_2B_D = self.trunk(torch.cat(x_B_1_H_2W.chunk(2, dim=-1), dim=0))
            h_B_D = torch.maximum(h_2B_D[:B], h_2B_D[B:])
            return self.out(self.hidden(self.dropout(h_B_D)))

    factory_runs.seed_torch_from(generator)  # the loop's seeded model stream
    return SetCNN()


def datasets(data_dir: str | None = None):
    """The pairs' train and test splits (multi-label ``ArrayDataset``s, 0/1 targets ``[N, 10]``)."""
    from activebayes.data.datasets import load_dataset

    data_dir = data_dir or str(ROOT.parent / "shared" / "data" / "mnist")
    return (load_dataset("mnist_pairs", data_dir=data_dir, split="train"),
            load_dataset("mnist_pairs", data_dir=data_dir, split="test"))


def config(strategy: str, seed: int, budget: int | None = None):
    """``label_efficiency.py``'s pairs protocol (``budget``: another label budget), for the
    network given as a model factory."""
    from label_efficiency import protocol

    cold = strategy == "default"
    base = protocol("mnist_pairs", None)
    return base.replace(dataset="mnist_pairs_set", data_dir=None, model="auto", strategy="badge" if cold else strategy,
                        seed=seed, budget=budget or base.budget, cold_start="typicality" if cold else None,
                        cold_start_labels=60 if cold else None)


def run(strategy: str, seed: int, data) -> dict:
    """One run (cached as JSON): labels and test micro-F1 of every round, and its time."""
    from activebayes.loop import ActiveLearningLoop

    train, test = data
    return factory_runs.cached_run(
        RUNS, strategy, seed, METRIC,
        lambda: ActiveLearningLoop(config(strategy, seed), dataset=train, test=test, model_factory=set_cnn))


def summarise(write: bool = True) -> dict:
    """AULC of every cached run, per strategy, and each strategy's lead over random."""
    return factory_runs.summarise(RUNS, STRATEGIES, METRIC, RESULTS if write else None)


def markdown(summary: dict) -> str:
    return factory_runs.markdown(summary, final="final micro-F1")


def main(argv: list[str] | None = None) -> int:
    parser = factory_runs.argument_parser(__doc__.splitlines()[0], STRATEGIES)
    parser.add_argument("--data-dir", default=None, help="MNIST folder (default ../shared/data/mnist)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads a run (default 1)")
    args = parser.parse_args(argv)
    strategies = factory_runs.chosen_strategies(parser, args.strategies, STRATEGIES)
    if args.threads < 1:
        parser.error(f"--threads: expected a positive number, got {args.threads}")
    if not args.summarise:
        import torch

        from activebayes.errors import ActiveBayesError

        torch.set_num_threads(args.threads)
        try:
            data = datasets(args.data_dir)
        except ActiveBayesError as error:
            parser.error(f"--data-dir: {error}")
        for seed in args.seeds:
            for strategy in strategies:
                r = run(strategy, seed, data)
                print(f"{strategy} seed {seed}: final micro-F1 {r[METRIC][-1]:.4f}, {r['seconds']} s", flush=True)
    summary = summarise()
    print(markdown(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
