"""Multi-label BatchBALD takes ``batchbald``'s option names and generator convention.

The loop runs ``multilabel_batchbald`` for ``batchbald`` on a multi-label dataset, so the
same ``acquisition_options`` must work on both (``num_configurations``,
``max_exact_configs``); the old names (``num_samples``, ``max_configurations``, ``seed``)
still work with a ``DeprecationWarning``; ``generator=None`` draws from torch's global
generator as ``batchbald`` does, while a given generator picks exactly what it picked
before the rename (the committed benchmark runs are replayed bit for bit).

The expected picks below were computed with the code before the rename
(``multilabel_batchbald(..., max_configurations=64, num_samples=300, seed=s)`` with
``s`` one ``torch.randint(0, 2**62, (1,))`` draw from the strategy's generator).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from activebayes._seeding import as_generator
from activebayes.acquisition import get_strategy, select
from activebayes.acquisition import multilabel as ml
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.loop import ActiveLearningLoop, LoopConfig
from tests.conftest import multilabel_toy


def _log_probs(N: int = 40, K: int = 6, C: int = 4, seed: int = 11) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return ml.multilabel_log_probs(torch.randn(N, K, C, generator=g, dtype=torch.float64) * 2)


# 2^(C·2) = 256 > 64: the first pick is exact, the rest are sampled (the generator matters)
NEW = {"num_configurations": 300, "max_exact_configs": 64}
OLD = {"num_samples": 300, "max_configurations": 64}


def test_select_takes_batchbalds_option_names_and_picks_what_the_old_names_picked():
    lp = _log_probs()
    new = select(lp, "multilabel_batchbald", 5, generator=torch.Generator().manual_seed(7), **NEW)
    assert new.indices.tolist() == [14, 19, 15, 3, 10]  # the old code with the old names
    with pytest.warns(DeprecationWarning) as caught:
        old = select(lp, "multilabel_batchbald", 5, generator=torch.Generator().manual_seed(7), **OLD)
    messages = " ".join(str(w.message) for w in caught)
    assert "num_samples" in messages and "num_configurations" in messages
    assert "max_configurations" in messages and "max_exact_configs" in messages
    assert old.indices.tolist() == new.indices.tolist() and torch.equal(old.scores, new.scores)
    # the default options and a given generator: unchanged too
    assert select(lp, "multilabel_batchbald", 5, generator=torch.Generator().manual_seed(7)).indices.tolist() == \
        [14, 19, 10, 39, 3]


def test_the_options_are_batchbalds_and_the_error_lists_the_new_names():
    options = set(get_strategy("multilabel_batchbald").options)
    single = set(get_strategy("batchbald").options) | set(get_strategy("batchbald").stream_options)
    assert {"num_configurations", "max_exact_configs"} <= options
    assert single - options == {"dtype"}  # the joint entropies are float64 by design
    assert not {"num_samples", "max_configurations", "seed"} & options
    lp = _log_probs(12, 4, 2)
    with pytest.raises(InvalidTypeError, match="its options are: ") as error:
        select(lp, "multilabel_batchbald", 2, num_configuration=10)
    listed = str(error.value).split("its options are: ")[1]
    assert "num_configurations" in listed and "max_exact_configs" in listed
    assert "num_samples" not in listed and "max_configurations" not in listed
    # both spellings of one option: an error naming both
    with pytest.raises(InvalidArgumentError, match="num_samples.*num_configurations"):
        select(lp, "multilabel_batchbald", 2, num_samples=10, num_configurations=10)
    with pytest.raises(InvalidArgumentError, match="max_configurations.*max_exact_configs"):
        select(lp, "multilabel_batchbald", 2, max_configurations=16, max_exact_configs=16)


def test_batchbalds_other_options_work_on_label_vectors():
    lp = _log_probs()
    g = torch.Generator
    base = select(lp, "multilabel_batchbald", 4, generator=g().manual_seed(1), **NEW)
    chunked = select(lp, "multilabel_batchbald", 4, generator=g().manual_seed(1), chunk_size=3, progress=False,
                     cost_aware=False, **NEW)
    assert chunked.indices.tolist() == base.indices.tolist()
    torch.testing.assert_close(chunked.scores, base.scores, rtol=1e-12, atol=1e-12)
    # prefilter: BatchBALD on the items of highest summed BALD, in the pool's indices
    whole = select(lp, "multilabel_batchbald", 4, generator=g().manual_seed(1), prefilter=len(lp), **NEW)
    assert whole.indices.tolist() == base.indices.tolist()
    kept = torch.sort(ml.multilabel_bald(lp), descending=True, stable=True).indices[:10].sort().values
    few = select(lp, "multilabel_batchbald", 4, generator=g().manual_seed(1), prefilter=10, **NEW)
    alone = select(lp[kept], "multilabel_batchbald", 4, generator=g().manual_seed(1), **NEW)
    assert few.indices.tolist() == kept[alone.indices].tolist()
    with pytest.raises(InvalidArgumentError, match="prefilter must be >= batch_size=4"):
        select(lp, "multilabel_batchbald", 4, prefilter=3)
    # max_exact_configs=0 (batchbald: always sampled) is valid here too
    sampled = select(lp, "multilabel_batchbald", 4, generator=g().manual_seed(1), num_configurations=300,
                     max_exact_configs=0)
    assert len(set(sampled.indices.tolist())) == 4
    exact = ml.multilabel_joint_entropy(lp[:2])
    assert ml.multilabel_joint_entropy(lp[:2], max_exact_configs=0, num_configurations=20_000, generator=0) == \
        pytest.approx(exact, abs=0.05)


def test_a_multilabel_loop_takes_batchbalds_acquisition_options():
    data = multilabel_toy(n=140)

    def acquired(options):
        config = LoopConfig(strategy="batchbald", budget=20, initial_size=8, validation_size=30, batch_size=6,
                            num_samples=6, eval_samples=4, cold_start=None, fit_options={"max_epochs": 1},
                            acquisition_options=options)
        loop = ActiveLearningLoop(config, dataset=data)
        assert loop._strategy.name == "multilabel_batchbald"
        return [record.acquired for record in loop.run(progress=False).rounds]

    new = acquired({"num_configurations": 120, "max_exact_configs": 16})
    with pytest.warns(DeprecationWarning) as caught:
        old = acquired({"num_samples": 120, "max_configurations": 16})
    assert {str(w.message).split()[0] for w in caught} == {"num_samples", "max_configurations"}
    assert new == old and sum(len(a) for a in new) == 12


def test_function_names_match_batchbald_and_the_old_names_warn():
    lp = _log_probs()
    new = ml.multilabel_batchbald(lp, 5, generator=torch.Generator().manual_seed(3), **NEW)
    assert new.indices.tolist() == [14, 19, 4, 6, 15]  # the old code with seed=3
    with pytest.warns(DeprecationWarning) as caught:
        old = ml.multilabel_batchbald(lp, 5, seed=3, **OLD)
    assert {str(w.message).split()[0] for w in caught} == {"num_samples", "max_configurations", "seed"}
    assert all(w.filename == __file__ for w in caught)  # the warning points at the caller
    assert old.indices.tolist() == new.indices.tolist() and torch.equal(old.scores, new.scores)
    with pytest.raises(InvalidArgumentError, match="seed.*generator"):
        ml.multilabel_batchbald(lp, 5, seed=3, generator=3)
    with pytest.raises(InvalidArgumentError, match="num_samples.*num_configurations"):
        ml.multilabel_batchbald(lp, 5, num_samples=3, num_configurations=3)
    with pytest.raises(InvalidArgumentError, match="max_configurations.*max_exact_configs"):
        ml.multilabel_batchbald(lp, 5, max_configurations=3, max_exact_configs=3)
    # the same for the joint entropy alone
    with pytest.warns(DeprecationWarning):
        before = ml.multilabel_joint_entropy(lp[:3], max_configurations=1, num_samples=500, seed=4)
    assert before == ml.multilabel_joint_entropy(lp[:3], max_exact_configs=1, num_configurations=500,
                                                 generator=torch.Generator().manual_seed(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names do not warn
        ml.multilabel_joint_entropy(lp[:3], max_exact_configs=1, num_configurations=50, generator=1)
        ml.multilabel_batchbald(lp, 2, generator=1, **NEW)


def test_generator_follows_the_librarys_convention():
    lp = _log_probs()
    # an int seed is what as_generator makes of it, as in batchbald
    by_int = ml.multilabel_batchbald(lp, 5, generator=5, **NEW)
    by_generator = ml.multilabel_batchbald(lp, 5, generator=as_generator(5), **NEW)
    assert by_int.indices.tolist() == by_generator.indices.tolist() and torch.equal(by_int.scores, by_generator.scores)
    assert ml.multilabel_joint_entropy(lp[:3], max_exact_configs=1, generator=5) == \
        ml.multilabel_joint_entropy(lp[:3], max_exact_configs=1, generator=as_generator(5))
    with pytest.raises(InvalidTypeError, match="generator"):
        ml.multilabel_batchbald(lp, 5, generator="5")

    # None: torch's global generator (reproducible with torch.manual_seed, different across seeds)
    a, b, c = (_under_global_seed(s, lambda: ml.multilabel_batchbald(lp, 5, **NEW)) for s in (0, 0, 1))
    assert torch.equal(a.scores, b.scores) and a.indices.tolist() == b.indices.tolist()
    assert not torch.equal(a.scores[1:], c.scores[1:])  # the sampled steps drew other configurations


def _under_global_seed(seed, fn):
    torch.manual_seed(seed)
    return fn()


def test_the_strategy_draws_from_the_global_generator_without_one_like_batchbald():
    """It once seeded its draws with 0 for ``generator=None``: the same batch under any global seed."""
    lp = _log_probs()  # C = 4: the default 4,096 exact configurations cover 3 picks, the 4th and 5th are sampled
    a, b, c = (_under_global_seed(s, lambda: select(lp, "multilabel_batchbald", 5)) for s in (0, 0, 1))
    assert torch.equal(a.scores, b.scores) and a.indices.tolist() == b.indices.tolist()
    assert torch.equal(a.scores[:3], c.scores[:3]) and not torch.equal(a.scores[3:], c.scores[3:])
    # as single-label batchbald does
    softmax_lp = torch.log_softmax(3 * torch.randn(40, 6, 4, generator=torch.Generator().manual_seed(0)), -1)
    a, b = (_under_global_seed(s, lambda: select(softmax_lp, "batchbald", 4, num_configurations=60,
                                                 max_exact_configs=4)) for s in (0, 1))
    assert not torch.equal(a.scores[1:], b.scores[1:])
