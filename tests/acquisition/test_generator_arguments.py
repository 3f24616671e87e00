"""``generator`` arguments of the public acquisition functions, and ``score_pool`` on a posterior.

The rule (``activebayes._seeding``): a ``generator`` is a ``torch.Generator``, an int seed
or ``None`` (torch's global generator); an int is read as :func:`~activebayes.acquisition.select`
reads it, ``torch.Generator().manual_seed(mix_seed(seed))``. References: ``select`` itself,
the explicit generator an int stands for, torch's global generator state, and for
``score_pool`` the same call on the posterior's module (and ``select`` on the posterior's
own predictions).
"""

from __future__ import annotations

import hashlib
import inspect
import math

import pytest
import torch
from torch import Tensor, nn

from activebayes._seeding import keyed_uniform
from activebayes.acquisition import badge, joint_entropy, kmeans, kmeans_plus_plus, select, typicality
from activebayes.acquisition.badge import badge_from_factors, loss_gradient_factors
from activebayes.acquisition.clustering import d2_seeding
from activebayes.acquisition.joint_entropy import sample_configurations
from activebayes.acquisition.scores import random_scores
from activebayes.errors import InvalidTypeError
from activebayes.models import MLP, Ensemble, as_posterior, predict_log_probs, resample_masks
from activebayes.scoring import score_pool


def seeded(seed: int) -> torch.Generator:
    """The generator an int seed stands for: ``mix_seed`` is blake2b-8 of the decimal seed, 63 bits."""
    digest = hashlib.blake2b(str(seed).encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") & ((1 << 63) - 1))


def log_probs(N: int, K: int, C: int, seed: int) -> Tensor:
    return torch.log_softmax(torch.randn(N, K, C, generator=torch.Generator().manual_seed(seed)) * 2, -1)


LP = log_probs(40, 4, 3, seed=0)
FEATURES = torch.randn(40, 5, generator=torch.Generator().manual_seed(1))
BLOBS = torch.cat([torch.randn(15, 2, generator=torch.Generator().manual_seed(c)) + 4 * c for c in range(4)])


def _badge(generator):
    return badge(LP, FEATURES, 6, generator=generator).indices.tolist()


def _badge_from_factors(generator):
    return badge_from_factors(loss_gradient_factors(LP), FEATURES, 6, generator=generator).indices.tolist()


def _kmeans(generator):
    return kmeans(BLOBS, 6, generator=generator, max_iter=1).labels_N.tolist()


def _kmeans_plus_plus(generator):
    return kmeans_plus_plus(BLOBS, 6, generator=generator)


def _d2_seeding(generator):
    points = BLOBS.double()
    return d2_seeding(len(points), 6, lambda i: ((points - points[i]) ** 2).sum(-1), first=None, generator=generator)[0]


def _typicality(generator):
    return typicality(BLOBS, BLOBS[:0], 5, generator=generator, num_clusters=7).indices.tolist()


def _random_scores(generator):
    return random_scores(50, generator=generator).tolist()


def _joint_entropy(generator):
    return joint_entropy(log_probs(3, 4, 3, seed=2), num_configurations=40, generator=generator)


def _sample_configurations(generator):
    return sample_configurations(log_probs(3, 4, 3, seed=2), 40, generator=generator)[0].tolist()


CALLS = {
    "badge": _badge,
    "badge_from_factors": _badge_from_factors,
    "kmeans": _kmeans,
    "kmeans_plus_plus": _kmeans_plus_plus,
    "d2_seeding": _d2_seeding,
    "typicality": _typicality,
    "random_scores": _random_scores,
    "joint_entropy": _joint_entropy,
    "sample_configurations": _sample_configurations,
}
FUNCTIONS = {
    "badge": badge, "badge_from_factors": badge_from_factors, "kmeans": kmeans, "kmeans_plus_plus": kmeans_plus_plus,
    "d2_seeding": d2_seeding, "typicality": typicality, "random_scores": random_scores,
    "joint_entropy": joint_entropy, "sample_configurations": sample_configurations,
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_int_seed_is_the_generator_it_stands_for(name: str) -> None:
    call = CALLS[name]
    state = torch.get_rng_state()
    torch.manual_seed(100)
    first = call(7)
    torch.manual_seed(200)  # the global generator plays no part
    again = call(7)
    assert first == again == call(seeded(7))
    assert call(8) == call(seeded(8)) and call(8) != first  # the seed matters
    torch.manual_seed(300)
    before = torch.get_rng_state()
    call(7)
    assert torch.equal(torch.get_rng_state(), before)  # and is not advanced
    torch.set_rng_state(state)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_none_still_draws_from_the_global_generator(name: str) -> None:
    call = CALLS[name]
    state = torch.get_rng_state()
    torch.manual_seed(5)
    first = call(None)
    torch.manual_seed(5)
    assert call(None) == first
    torch.manual_seed(5)
    assert call(torch.default_generator) == first  # what None meant before: torch's global generator
    torch.set_rng_state(state)


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("wrong", ["abc", 1.5, True])
def test_a_wrong_generator_is_named(name: str, wrong: object) -> None:
    with pytest.raises(InvalidTypeError, match=f"generator must be a torch.Generator, an int seed or None, "
                                               f"got {type(wrong).__name__}"):
        CALLS[name](wrong)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_the_int_seed_is_annotated_and_documented(name: str) -> None:
    function = FUNCTIONS[name]
    assert str(inspect.signature(function).parameters["generator"].annotation) == "torch.Generator | int | None"
    assert "an int seed" in " ".join(function.__doc__.split())


def test_an_int_seed_gives_what_select_gives() -> None:
    assert badge(LP, FEATURES, 6, generator=7).indices.tolist() == select(
        LP, "badge", 6, features_N_D=FEATURES, generator=7).indices.tolist()
    assert typicality(BLOBS, BLOBS[:0], 5, generator=7, num_clusters=7).indices.tolist() == select(
        len(BLOBS), "typicality", 5, features_N_D=BLOBS, labelled_features_L_D=BLOBS[:0], generator=7,
        num_clusters=7).indices.tolist()
    assert torch.topk(random_scores(50, generator=7), 5).indices.tolist() == select(
        50, "random", 5, generator=7).indices.tolist()


def test_exact_joint_entropy_takes_an_int_seed_it_does_not_need() -> None:
    lp = torch.log(torch.tensor([[[0.5, 0.5]], [[0.5, 0.5]]], dtype=torch.float64))
    assert joint_entropy(lp, generator=3) == pytest.approx(2 * math.log(2))


# ---------------------------------------------------------------------------- score_pool on a posterior

N_ALL, IN, C, K = 120, 5, 3, 6
POOL = torch.randn(N_ALL, IN, generator=torch.Generator().manual_seed(3)) * 2
CANDIDATES = torch.randperm(N_ALL, generator=torch.Generator().manual_seed(4))[:90]


def mc_net() -> MLP:
    torch.manual_seed(0)
    return MLP(in_features=IN, num_classes=C, hidden=(8,), p=0.5)


def picks(model, strategy: str, **kwargs) -> tuple[list[int], list[float]]:
    args = dict(num_samples=K, mask_generator=9, selection_seed=4, chunk_size=32)
    args.update(kwargs)
    selection = score_pool(model, POOL, CANDIDATES, strategy, 5, **args)
    return selection.indices.tolist(), selection.scores.tolist()


@pytest.mark.parametrize("strategy", ["bald", "power_bald", "batchbald", "random"])
def test_score_pool_on_a_network_posterior_is_score_pool_on_its_module(strategy: str) -> None:
    posterior = as_posterior(mc_net())
    assert picks(posterior, strategy) == picks(posterior.module, strategy)


def test_score_pool_on_a_posterior_samples_as_the_posterior_does() -> None:
    posterior = as_posterior(mc_net(), sampling="sequential")
    assert picks(posterior, "bald") == picks(posterior.module, "bald", sampling="sequential")
    assert picks(posterior, "bald", sampling="batched") == picks(posterior.module, "bald")


class OwnPosterior:
    """A posterior that is not a module: K fixed functions (an ensemble)."""

    def __init__(self, module: nn.Module) -> None:
        self._module = module

    @property
    def module(self) -> nn.Module:
        return self._module

    @property
    def num_functions(self) -> int | None:
        return 3

    def fit(self, train, *, validation=None, generator=None, device=None):
        return {}

    def log_probs(self, inputs, *, num_samples, generator=None, batch_size=512, device=None) -> Tensor:
        return predict_log_probs(self._module, inputs, None, batch_size=batch_size)

    def features(self, inputs, *, batch_size=512, device=None) -> Tensor:
        raise NotImplementedError


def test_score_pool_on_a_posterior_of_fixed_functions_picks_from_its_predictions() -> None:
    torch.manual_seed(1)
    posterior = OwnPosterior(Ensemble([MLP(in_features=IN, num_classes=C, hidden=(8,)) for _ in range(3)]))
    got = score_pool(posterior, POOL, CANDIDATES, "bald", 5, num_samples=None, mask_generator=None, selection_seed=0)
    ordered = CANDIDATES.sort().values
    expected = select(posterior.log_probs(POOL[ordered], num_samples=None), "bald", 5)
    assert got.indices.tolist() == ordered[expected.indices].tolist()
    torch.testing.assert_close(got.scores, expected.scores)


def test_score_pool_names_what_it_cannot_run() -> None:
    with pytest.raises(InvalidTypeError, match="model must be a torch.nn.Module or an activebayes Posterior .* got object"):
        score_pool(object(), POOL, CANDIDATES, "bald", 5, num_samples=K, mask_generator=None, selection_seed=0)
    with pytest.raises(InvalidTypeError, match=r"whose \.module is a str, not a torch.nn.Module"):
        score_pool(OwnPosterior("not a module"), POOL, CANDIDATES, "bald", 5, num_samples=None,
                   mask_generator=None, selection_seed=0)


def test_score_pool_on_a_sklearn_posterior() -> None:
    pytest.importorskip("sklearn")
    from sklearn.ensemble import RandomForestClassifier

    from activebayes.adapters.sklearn import SklearnPosterior

    posterior = SklearnPosterior(RandomForestClassifier(n_estimators=6, max_depth=3), num_classes=C)
    posterior.fit((POOL[:60], torch.arange(60) % C), generator=0)
    args = dict(num_samples=None, mask_generator=None, selection_seed=0)
    got = score_pool(posterior, POOL, CANDIDATES, "bald", 5, **args)
    assert got.indices.tolist() == score_pool(posterior.module, POOL, CANDIDATES, "bald", 5, **args).indices.tolist()
    ordered = CANDIDATES.sort().values
    expected = select(posterior.log_probs(POOL[ordered], num_samples=None), "bald", 5)
    assert got.indices.tolist() == ordered[expected.indices].tolist()


# ------------------------------------------------- score_pool's selection_seed and select's generator (documented)


def test_score_pool_random_is_the_top_of_keyed_uniforms() -> None:
    got = score_pool(mc_net(), POOL, CANDIDATES, "random", 5, num_samples=K, mask_generator=None, selection_seed=7)
    assert got.indices.tolist() == CANDIDATES[torch.topk(keyed_uniform(7, CANDIDATES), 5).indices].tolist()


def test_select_with_the_raw_seeded_generator_reproduces_score_pool_badge() -> None:
    net = mc_net()
    features = torch.randn(len(CANDIDATES), 4, generator=torch.Generator().manual_seed(5))
    got = score_pool(net, POOL, CANDIDATES, "badge", 5, num_samples=K, mask_generator=9, selection_seed=7,
                     strategy_inputs={"features_N_D": features}, chunk_size=32)
    order = torch.argsort(CANDIDATES)
    resample_masks(net, generator=9)
    lp = predict_log_probs(net, POOL[CANDIDATES[order]], K)
    expected = select(lp, "badge", 5, features_N_D=features[order], generator=torch.Generator().manual_seed(7))
    assert got.indices.tolist() == CANDIDATES[order][expected.indices].tolist()
