"""A strategy is one object: one registry type, one check, its own defaults and fallbacks, one name per meaning."""

from __future__ import annotations

import ast
import inspect
import warnings
from pathlib import Path

import pytest
import torch

import activebayes.loop as loop_module
import activebayes.scoring as scoring_module
from activebayes.acquisition import AcquisitionContext, available_strategies, batchbald, get_strategy, select
from activebayes.acquisition.joint_entropy import joint_entropy
from activebayes.acquisition.strategies import BATCHBALD_MEMORY_BYTES, REGISTRY, check_call
from activebayes.data import available_datasets, load_dataset, register_dataset
from activebayes.data.datasets import DATASETS
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.models import available_models, build_model, register_model
from activebayes.models.networks import MODELS
from activebayes._registry import Registry


def random_log_probs(N: int, K: int, C: int, seed: int = 0) -> torch.Tensor:
    return torch.log_softmax(2 * torch.randn(N, K, C, generator=torch.Generator().manual_seed(seed)), -1)


# ------------------------------------------------------------------------ one registry type


def test_registry_registers_replaces_lists_and_suggests():
    shapes: Registry[int] = Registry("shape")
    shapes.register("circle", 1, aliases=("round",))
    shapes.register("square", 2)
    assert shapes.get("round") == 1 and shapes.names() == ["circle", "square"]
    assert shapes.names(aliases=True) == ["circle", "round", "square"] and len(shapes) == 2
    with pytest.raises(InvalidArgumentError, match="shape name 'round' is already registered"):
        shapes.register("oval", 3, aliases=("round",))
    shapes.register("circle", 4, replace=True)  # replacing drops the old entry's aliases
    assert shapes.get("circle") == 4 and "round" not in shapes
    with pytest.raises(InvalidArgumentError, match=r"unknown shape 'sqare' \(did you mean 'square'"):
        shapes.get("sqare")
    with pytest.raises(InvalidArgumentError, match="unknown shape 'xyz'; expected one of: circle, square$"):
        shapes.get("xyz")
    shapes.unregister("square")
    assert shapes.names() == ["circle"]
    with pytest.raises(InvalidArgumentError, match="names must be non-empty strings"):
        shapes.register("", 5)


def test_strategies_models_and_datasets_share_the_registry_type():
    assert all(isinstance(registry, Registry) for registry in (REGISTRY._registry, MODELS, DATASETS))
    assert available_models() == MODELS.names() and "auto" in available_models()
    assert available_datasets() == tuple(DATASETS.names())
    assert available_strategies() == REGISTRY.names()
    with pytest.raises(ValueError, match=r"unknown model name 'mpl' \(did you mean 'mlp'"):
        build_model("mpl", num_classes=3, input_shape=(4,))
    with pytest.raises(ValueError, match=r"unknown dataset 'digit' \(did you mean 'digits'"):
        load_dataset("digit")


def test_register_model_and_dataset_replace_and_refuse_taken_names():
    def tiny(*, num_classes, input_shape, **options):
        return torch.nn.Linear(input_shape[0], num_classes)

    register_model("test_tiny", tiny)
    try:
        assert isinstance(build_model("test_tiny", num_classes=3, input_shape=(4,)), torch.nn.Linear)
        with pytest.raises(ValueError, match="'test_tiny' is already registered"):
            register_model("test_tiny", tiny)
        register_model("test_tiny", lambda **kwargs: torch.nn.Identity(), replace=True)
        assert isinstance(build_model("test_tiny", num_classes=3, input_shape=(4,)), torch.nn.Identity)
        with pytest.raises(TypeError, match="factory must be callable"):
            register_model("test_other", 3)
    finally:
        MODELS.unregister("test_tiny")
    digits = load_dataset("digits")
    register_dataset("test_digits", lambda split, **kwargs: digits)
    try:
        assert load_dataset("test_digits") is digits and "test_digits" in available_datasets()
        with pytest.raises(ValueError, match="'test_digits' is already registered"):
            register_dataset("test_digits", lambda split, **kwargs: digits)
    finally:
        DATASETS.unregister("test_digits")
    assert "test_digits" not in available_datasets()


# ------------------------------------------------------------------------ the strategy knows itself


CONTEXT = AcquisitionContext(pool_size=50_000, num_classes=10, n_labelled=30, batch_size=10, num_samples=100)


def test_context_defaults_are_the_loops_old_rules():
    # typicality: as many clusters as the labelled set plus this batch
    assert get_strategy("typicality").context_defaults(CONTEXT) == {"num_clusters": 40}
    assert get_strategy("typiclust").context_defaults(CONTEXT) == {"num_clusters": 40}
    # BatchBALD: the whole pool while [N, K, C] float32 fits 1 GiB, else a BALD pre-filter of what fits
    assert BATCHBALD_MEMORY_BYTES == 2**30
    big = AcquisitionContext(pool_size=500_000, num_classes=10, n_labelled=30, batch_size=10, num_samples=100)
    assert get_strategy("batchbald").context_defaults(big) == {"prefilter": 2**30 // (100 * 10 * 4)}  # 268,435
    assert get_strategy("batchbald").context_defaults(CONTEXT) == {"prefilter": 50_000}
    small = AcquisitionContext(pool_size=1_000, num_classes=10, n_labelled=30, batch_size=10, num_samples=100)
    assert get_strategy("batchbald").context_defaults(small) == {"prefilter": 1_000}
    huge_k = AcquisitionContext(pool_size=1_000, num_classes=10, n_labelled=0, batch_size=10, num_samples=10**8)
    assert get_strategy("batchbald").context_defaults(huge_k) == {"prefilter": 10}  # never below the batch
    assert get_strategy("bald").context_defaults(CONTEXT) == {}


def test_random_before_the_first_label_is_a_property_of_the_strategy():
    first = AcquisitionContext(pool_size=100, num_classes=10, n_labelled=0, batch_size=10)
    for name in ("bald", "batchbald", "badge", "epig", "power_bald"):
        assert get_strategy(name).for_context(first).name == "random"
        assert get_strategy(name).for_context(CONTEXT).name == name
    for name in ("typicality", "random"):  # they read no predictions: they act from the start
        assert get_strategy(name).for_context(first).name == name


def test_every_built_in_strategy_has_a_plan_or_a_per_item_score():
    joint = {name for name in available_strategies() if get_strategy(name).mode is None}
    with_plan = {name for name in joint if get_strategy(name).planner is not None}
    assert with_plan == {"random", "batchbald", "badge"}
    # gather-all fallback (multi-label BatchBALD: the loop selects in memory, see activebayes.loop)
    assert joint - with_plan == {"epig", "power_epig", "typicality", "multilabel_batchbald", "multilabel_badge"}


# ------------------------------------------------------------------------ one check


@pytest.mark.parametrize(
    ("strategy", "options", "error", "match"),
    [
        ("bald", {"beta": 1.0}, InvalidTypeError, "strategy 'bald' got an unknown option 'beta'"),
        ("power_bald", {"beta": -1.0}, InvalidArgumentError, "beta must be a finite number >= 0"),
        ("bald", {"cost_aware": True}, InvalidArgumentError, "cost_aware=True needs costs_N and cost_budget"),
        ("random", {"num_configurations": 3}, InvalidTypeError, "its options are: cost_aware"),
    ],
)
def test_select_and_score_pool_share_one_check(strategy, options, error, match):
    log_probs = random_log_probs(20, 3, 4)
    with pytest.raises(error, match=match):
        select(log_probs, strategy, 3, **options)
    with pytest.raises(error, match=match):
        scoring_module.score_pool(torch.nn.Linear(2, 4), torch.zeros(20, 2), torch.arange(20), strategy, 3,
                                  num_samples=3, mask_generator=0, selection_seed=0, options=options)


def test_prefilter_is_a_streaming_option_of_batchbald():
    entry = get_strategy("batchbald")
    assert check_call(entry, 30, 5, options={"prefilter": 8}, streamed=True).options == {"prefilter": 8}
    with pytest.raises(InvalidTypeError, match="prefilter: only when streaming a pool, in score_pool"):
        select(random_log_probs(30, 3, 4), "batchbald", 5, prefilter=8)
    with pytest.raises(InvalidArgumentError, match="prefilter must be >= batch_size=5"):
        check_call(entry, 30, 5, options={"prefilter": 4}, streamed=True)


# ------------------------------------------------------------------------ one meaning per name


def test_num_configurations_is_batchbalds_m_and_num_samples_is_deprecated():
    log_probs = random_log_probs(40, 6, 3, seed=3)
    new = select(log_probs, "batchbald", 6, num_configurations=300, max_exact_configs=9,
                 generator=torch.Generator().manual_seed(1))
    with pytest.warns(DeprecationWarning, match="num_samples is deprecated.*use num_configurations"):
        old = select(log_probs, "batchbald", 6, num_samples=300, max_exact_configs=9,
                     generator=torch.Generator().manual_seed(1))
    assert old.indices.tolist() == new.indices.tolist() and torch.equal(old.scores, new.scores)
    other = select(log_probs, "batchbald", 6, num_configurations=301, max_exact_configs=9,
                   generator=torch.Generator().manual_seed(1))
    assert not torch.equal(other.scores, new.scores)  # the option reaches BatchBALD
    with pytest.warns(DeprecationWarning):
        direct = batchbald(log_probs, 6, num_samples=300, max_exact_configs=9, generator=torch.Generator().manual_seed(1))
    assert direct.indices.tolist() == new.indices.tolist()
    with pytest.raises(InvalidArgumentError, match="pass only num_configurations, got both"):
        batchbald(log_probs, 6, num_samples=300, num_configurations=300)
    with pytest.warns(DeprecationWarning):
        estimate = joint_entropy(log_probs[:4], num_samples=500, generator=torch.Generator().manual_seed(0))
    assert estimate == joint_entropy(log_probs[:4], num_configurations=500, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        select(log_probs, "batchbald", 3, num_configurations=100)  # the new name never warns


def _string_literals(module) -> set[str]:
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}


def test_no_strategy_name_is_a_string_literal_in_scoring_or_the_loop():
    names = set(available_strategies(aliases=True))
    assert not names & _string_literals(scoring_module)
    assert not names & _string_literals(loop_module)


def test_score_pool_reads_in_one_screen():
    source = inspect.getsource(scoring_module.score_pool)
    docstring = inspect.getdoc(scoring_module.score_pool) or ""
    assert len(source.splitlines()) - len(docstring.splitlines()) <= 60
