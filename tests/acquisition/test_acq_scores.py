"""Per-item scores against independent NumPy float64 formulas, peers and the seed 004 example."""

from __future__ import annotations

import doctest
import math

import acq_reference as ref
import numpy as np
import pytest
import torch

from activebayes import acquisition
from activebayes.acquisition import scores as scores_module

TIGHT = 1e-10


def random_log_probs(N: int, K: int, C: int, *, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scale_N_1_1 = torch.rand(N, 1, 1, generator=g, dtype=torch.float64) * 6
    shift_N_1_C = torch.randn(N, 1, C, generator=g, dtype=torch.float64) * 2
    logits = torch.randn(N, K, C, generator=g, dtype=torch.float64) * scale_N_1_1 + shift_N_1_C
    return torch.log_softmax(logits, dim=-1).to(dtype)


def edge_cases() -> dict[str, torch.Tensor]:
    uniform = torch.full((3, 5, 4), -math.log(4), dtype=torch.float64)
    one_hot_probs = torch.zeros(4, 3, 3, dtype=torch.float64)
    one_hot_probs[0, :, 0] = 1  # all samples agree
    one_hot_probs[1, [0, 1, 2], [0, 1, 2]] = 1  # all disagree
    one_hot_probs[2, [0, 1, 2], [1, 1, 2]] = 1  # 2 : 1 vote
    one_hot_probs[3, :, 2] = 1
    mixed = torch.tensor([[[0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]], dtype=torch.float64)
    return {
        "random": random_log_probs(40, 7, 5, seed=1),
        "uniform": uniform,
        "one_hot": one_hot_probs.log(),
        "mixed_zeros": mixed.log(),
        "K=1": random_log_probs(6, 1, 4, seed=2),
        "C=2": random_log_probs(9, 6, 2, seed=3),
        "C=1": torch.zeros(3, 4, 1, dtype=torch.float64),
        "N=1": random_log_probs(1, 8, 10, seed=4),
        "very_confident": torch.log_softmax(torch.randn(5, 4, 3, dtype=torch.float64) * 200, -1),
    }


EDGE = edge_cases()


@pytest.mark.parametrize("case", list(EDGE))
@pytest.mark.parametrize("name", list(ref.SCORES))
def test_scores_match_numpy_float64(name: str, case: str) -> None:
    log_probs = EDGE[case]
    ours = getattr(acquisition, name)(log_probs)
    expected = ref.SCORES[name](log_probs.exp().numpy())
    assert ours.dtype == torch.float64
    assert ours.shape == (log_probs.shape[0],)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=TIGHT)


@pytest.mark.parametrize("name", list(ref.SCORES))
def test_chunking_and_float32(name: str) -> None:
    log_probs = random_log_probs(50, 6, 4, seed=7)
    fn = getattr(acquisition, name)
    whole = fn(log_probs)
    np.testing.assert_allclose(fn(log_probs, chunk_size=3).numpy(), whole.numpy(), rtol=0, atol=1e-12)
    single = fn(log_probs.float())
    expected = ref.SCORES[name](log_probs.float().double().exp().numpy())
    np.testing.assert_allclose(single.numpy(), expected, rtol=0, atol=2e-5)


def test_known_values() -> None:
    two_confident_disagreeing = torch.log(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]], dtype=torch.float64))
    assert acquisition.bald(two_confident_disagreeing).item() == pytest.approx(math.log(2), abs=1e-15)
    assert acquisition.expected_entropy(two_confident_disagreeing).item() == 0.0
    assert acquisition.variation_ratios(two_confident_disagreeing).item() == pytest.approx(0.5)
    uniform = EDGE["uniform"]
    np.testing.assert_allclose(acquisition.predictive_entropy(uniform).numpy(), math.log(4), atol=1e-15)
    np.testing.assert_allclose(acquisition.bald(uniform).numpy(), 0.0, atol=1e-15)
    np.testing.assert_allclose(acquisition.variation_ratios(uniform).numpy(), 0.75, atol=1e-15)
    np.testing.assert_allclose(acquisition.margin(uniform).numpy(), 0.0, atol=1e-15)


def test_seed_004_mixtures() -> None:
    """Seed 004: four mixtures with K=20 -> entropy 1.2376 and conditional entropy 1.2069 each."""
    probs = ref.seed_004_probs()
    log_probs = torch.from_numpy(probs).log()
    np.testing.assert_allclose(acquisition.predictive_entropy(log_probs).numpy(), 1.2376, atol=1e-3)
    np.testing.assert_allclose(acquisition.expected_entropy(log_probs).numpy(), 1.2069, atol=1e-3)
    np.testing.assert_allclose(acquisition.bald(log_probs).numpy(), 1.2376 - 1.2069, atol=2e-3)


def test_jackknife_reduces_plug_in_bias() -> None:
    """With few samples the plug-in entropy is biased low; the jackknife moves it towards the truth."""
    g = torch.Generator().manual_seed(0)
    C, K_small, K_large = 6, 5, 4000
    alpha = torch.ones(C, dtype=torch.float64) * 0.3
    dirichlet = torch.distributions.Dirichlet(alpha)
    torch.manual_seed(0)
    probs_N_K_C = dirichlet.sample((200, K_large))
    truth = acquisition.bald(probs_N_K_C.log()) + 0  # large-K estimate of the mutual information
    index = torch.randint(K_large, (K_small,), generator=g)
    small = probs_N_K_C[:, index].log()
    plug_in_error = (acquisition.bald(small) - truth).mean().abs()
    jackknife_error = (acquisition.jackknife_bald(small) - truth).mean().abs()
    assert jackknife_error < 0.5 * plug_in_error


def test_baal_bald_and_entropy() -> None:
    heuristics = pytest.importorskip("baal.active.heuristics")
    log_probs = random_log_probs(60, 9, 5, seed=11)
    probs_N_C_K = log_probs.exp().permute(0, 2, 1).numpy()  # baal: samples last
    np.testing.assert_allclose(
        acquisition.bald(log_probs).numpy(), heuristics.BALD().get_uncertainties(probs_N_C_K), atol=1e-10
    )
    np.testing.assert_allclose(
        acquisition.predictive_entropy(log_probs).numpy(),
        heuristics.Entropy().get_uncertainties(probs_N_C_K),
        atol=1e-10,
    )
    ranks = heuristics.BALD()(probs_N_C_K)
    assert ranks[:5].tolist() == torch.topk(acquisition.bald(log_probs), 5).indices.tolist()


def test_batchbald_redux_entropies() -> None:
    bbr = pytest.importorskip("batchbald_redux.batchbald")
    log_probs = random_log_probs(70, 8, 6, seed=12)
    np.testing.assert_allclose(
        acquisition.expected_entropy(log_probs).numpy(),
        bbr.compute_conditional_entropy(log_probs).numpy(),
        atol=1e-10,
    )
    np.testing.assert_allclose(
        acquisition.predictive_entropy(log_probs).numpy(), bbr.compute_entropy(log_probs).numpy(), atol=1e-10
    )


@pytest.mark.parametrize("correction", [0, 1])
def test_predictive_variance(correction: int) -> None:
    g = torch.Generator().manual_seed(0)
    samples_N_K = torch.randn(30, 7, generator=g, dtype=torch.float64) * torch.rand(30, 1, generator=g)
    expected = samples_N_K.numpy().var(axis=1, ddof=correction)
    ours = acquisition.predictive_variance(samples_N_K, correction=correction, chunk_size=4)
    np.testing.assert_allclose(ours.numpy(), expected, atol=TIGHT)
    vector_N_K_D = torch.randn(5, 6, 3, generator=g, dtype=torch.float64)
    np.testing.assert_allclose(
        acquisition.predictive_variance(vector_N_K_D).numpy(), vector_N_K_D.numpy().var(axis=1).sum(-1), atol=TIGHT
    )


def test_predictive_variance_errors() -> None:
    with pytest.raises(ValueError, match="samples_N_K must have 2 dimensions"):
        acquisition.predictive_variance(torch.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        acquisition.predictive_variance(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="empty"):
        acquisition.predictive_variance(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="K > correction"):
        acquisition.predictive_variance(torch.zeros(2, 1), correction=1)


@pytest.mark.parametrize(("correction", "error", "message"), [
    (-1, ValueError, r"^correction must be >= 0, got -1$"),  # was a variance divided by K + 1
    (1.5, TypeError, r"^correction must be an int, got float 1.5$"),  # was divided by K - 1.5
    (True, TypeError, r"^correction must be an int, got bool True$"),
    ("1", TypeError, r"^correction must be an int, got str '1'$"),  # was Python's own 'unsupported operand type(s)'
])
def test_predictive_variance_names_a_correction_that_is_not_a_count(correction, error, message) -> None:
    with pytest.raises(error, match=message):
        acquisition.predictive_variance(torch.randn(5, 4), correction=correction)


def test_predictive_variance_refuses_vector_outputs_with_no_dimensions() -> None:
    # [N, K, 0] summed variances over nothing: zeros for every item (and torch's degrees-of-freedom warning)
    with pytest.raises(ValueError, match=r"^samples_N_K has a zero-sized dimension: shape \(5, 4, 0\)$"):
        acquisition.predictive_variance(torch.randn(5, 4, 0))


def test_random_scores_seeded() -> None:
    a = acquisition.random_scores(100, generator=torch.Generator().manual_seed(3))
    b = acquisition.random_scores(100, generator=torch.Generator().manual_seed(3))
    c = acquisition.random_scores(100, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.dtype == torch.float64 and bool(((a >= 0) & (a < 1)).all())
    with pytest.raises(ValueError, match="N must be >= 1"):
        acquisition.random_scores(0)


BAD_INPUTS = {
    "ndim": (torch.zeros(3, 4), "must have 3 dimensions"),
    "nan": (torch.full((2, 3, 2), math.log(0.5)).index_put_((torch.tensor(1),), torch.tensor(float("nan"))), "NaN"),
    "pos_inf": (torch.tensor([[[0.0, float("inf")]]]), "NaN or \\+inf"),
    "not_normalised": (torch.log(torch.tensor([[[0.3, 0.3]]])), "normalised"),
    "probabilities": (torch.tensor([[[0.3, 0.7]]]), "log-probabilities"),
    "logits": (torch.tensor([[[2.0, -1.0]]]), "log-probabilities"),
    "empty_pool": (torch.zeros(0, 3, 2), "empty"),
    "all_minus_inf": (torch.full((1, 2, 2), -math.inf), "normalised"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
@pytest.mark.parametrize("name", list(ref.SCORES))
def test_bad_inputs_raise(name: str, case: str) -> None:
    value, message = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=message):
        getattr(acquisition, name)(value)


def test_bad_types_raise() -> None:
    with pytest.raises(TypeError, match=r"log_probs_N_K_C must be a torch.Tensor, got ndarray; convert it with torch.from_numpy"):
        acquisition.bald(np.zeros((2, 3, 4)))
    with pytest.raises(TypeError, match="floating point"):
        acquisition.bald(torch.zeros(2, 3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        acquisition.bald(random_log_probs(3, 2, 2), chunk_size=0)


def test_error_names_the_bad_rows() -> None:
    log_probs = random_log_probs(20, 3, 4)
    log_probs[13, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"\(pool row 13\)$"):
        acquisition.bald(log_probs, chunk_size=4)
    log_probs = random_log_probs(50, 3, 4)
    log_probs[[41, 7, 9, 12, 30, 33, 49]] += 0.2  # not normalised, in several chunks: the first chunk's are named
    with pytest.raises(ValueError, match=r"\(pool rows 7, 9, 12 \(3 rows\)\)$"):
        acquisition.predictive_entropy(log_probs, chunk_size=16)
    with pytest.raises(ValueError, match=r"\(pool rows 7, 9, 12, 30, 33 and 2 more \(7 rows\)\)$"):
        acquisition.predictive_entropy(log_probs)


def test_docstring_examples() -> None:
    result = doctest.testmod(scores_module, extraglobs={"torch": torch}, raise_on_error=False)
    assert result.failed == 0 and result.attempted >= 10


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", ["bald", "predictive_entropy", "margin"])
def test_half_precision_outputs_are_scored_as_their_float64_values(name: str, dtype: torch.dtype) -> None:
    """A network run in bf16 / fp16 gives rows off by its rounding (0.012 for bf16 over 100 classes)."""
    logits = torch.randn(60, 8, 100, generator=torch.Generator().manual_seed(0)) * 3
    log_probs = torch.log_softmax(logits.to(dtype), dim=-1)
    deviation = (torch.logsumexp(log_probs.double(), -1).exp() - 1).abs().max()
    assert deviation > {torch.bfloat16: 1e-3, torch.float16: 1e-4}[dtype]  # beyond a fixed 1e-3 / 1e-4
    as_float64 = log_probs.double()
    as_float64 = as_float64 - torch.logsumexp(as_float64, -1, keepdim=True)  # the same rows, renormalised
    expected_N = torch.from_numpy(ref.SCORES[name](as_float64.exp().numpy()))
    assert torch.allclose(getattr(acquisition, name)(log_probs).double(), expected_N, atol=0.05)


def test_float32_results_cast_to_float64_pass_over_many_classes() -> None:
    logits = torch.randn(100, 4, 4000, generator=torch.Generator().manual_seed(1)) * 3
    log_probs = torch.log_softmax(logits, dim=-1).double()
    assert (torch.logsumexp(log_probs, -1).exp() - 1).abs().max() > 1e-6  # float32's rounding, over 1e-6
    assert acquisition.bald(log_probs).shape == (100,)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
def test_rows_off_by_more_than_rounding_are_refused_with_the_deviation(dtype: torch.dtype) -> None:
    log_probs = torch.log_softmax(torch.randn(10, 3, 100, generator=torch.Generator().manual_seed(2)), -1)
    shifted = (log_probs + math.log(1.3)).to(dtype)  # every row sums to 1.3
    with pytest.raises(ValueError, match=r"sums to 1\.(29|30)\d*, off by 0\.(29|3)\d* \(tolerance [0-9.e-]+ for "):
        acquisition.bald(shifted)
