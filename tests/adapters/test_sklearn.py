"""scikit-learn both ways: SklearnPosterior (K member functions) and PosteriorClassifier (estimator checks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn")

from adapters_toy import next_draws, seed_globals, toy_dataset  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

from activebayes.adapters.sklearn import PROBABILITY_FLOOR, PosteriorClassifier, SklearnPosterior  # noqa: E402
from activebayes.errors import InvalidArgumentError, InvalidTypeError  # noqa: E402
from activebayes.loop import ActiveLearningLoop, LoopConfig  # noqa: E402
from activebayes.models import FeaturesUnavailableError  # noqa: E402


def test_forest_trees_are_the_k_functions_consistently():
    data = toy_dataset(90)
    posterior = SklearnPosterior(RandomForestClassifier(n_estimators=7, max_depth=3), num_classes=4)
    posterior.fit((data.inputs, data.targets), generator=0)
    log_probs_N_K_C = posterior.log_probs(data.inputs, num_samples=None, batch_size=90)
    assert log_probs_N_K_C.shape == (90, 7, 4) and posterior.num_functions == 7
    order = torch.randperm(90, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(posterior.log_probs(data.inputs[order], num_samples=None, batch_size=8),
                               log_probs_N_K_C[order], rtol=0, atol=0)
    # independent reference: tree k's predict_proba, class 3 (never seen) at the floor
    trees = posterior.module.members
    X = data.inputs.double().numpy()
    for k in (0, 6):
        probs = np.maximum(np.pad(trees[k].predict_proba(X), ((0, 0), (0, 1))), PROBABILITY_FLOOR)
        expected = np.log(probs / probs.sum(1, keepdims=True))
        np.testing.assert_allclose(log_probs_N_K_C[:, k].numpy(), expected, atol=1e-5)
    assert not torch.equal(log_probs_N_K_C[:, 0], log_probs_N_K_C[:, 1])
    with pytest.raises(InvalidArgumentError, match="num_samples must be None or the ensemble size 7"):
        posterior.log_probs(data.inputs, num_samples=3)


def test_bootstrap_members_are_seeded_and_differ():
    data = toy_dataset(60)
    runs = []
    for _ in range(2):
        posterior = SklearnPosterior(LogisticRegression(), num_classes=3, num_functions=5)
        assert posterior.fit((data.inputs, data.targets), generator=torch.Generator().manual_seed(4))["members"] == 5
        runs.append(posterior.log_probs(data.inputs))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
    assert not torch.allclose(runs[0][:, 0], runs[0][:, 1])


@pytest.mark.parametrize("make", [
    lambda: make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=4, max_features=1)),
    lambda: make_pipeline(StandardScaler(), LogisticRegression(solver="saga", max_iter=5, tol=1e-12)),
])
def test_a_wrapped_estimator_is_seeded_by_the_generator_not_numpys_global_state(make):
    """A random_state nested in a Pipeline left at None would draw from NumPy's global generator."""
    import warnings

    data = toy_dataset(60)
    runs = []
    for global_seed in (1, 2):
        np.random.seed(global_seed)
        posterior = SklearnPosterior(make(), num_classes=3, num_functions=3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # saga stopped by max_iter
            posterior.fit((data.inputs, data.targets), generator=torch.Generator().manual_seed(0))
        runs.append(posterior.log_probs(data.inputs))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)


def bald_reference(log_probs_N_K_C: torch.Tensor) -> np.ndarray:
    p = log_probs_N_K_C.double().exp().numpy()
    mean = p.mean(1)
    return -(mean * np.log(mean)).sum(-1) + (p * np.log(p)).sum(-1).mean(1)


def test_fits_leave_the_global_rngs_as_they_were(keep_global_state):
    """A seeded PosteriorClassifier / SklearnPosterior fit neither draws from nor reseeds the global RNGs
    (the MLP is built under a seeded torch RNG, CUDA's included); the result does not depend on them."""
    data = toy_dataset(60)
    X, y = data.inputs.numpy(), data.targets.numpy()
    seed_globals(11)
    expected = next_draws()
    probabilities = []
    for seed in (11, 12):
        seed_globals(seed)
        classifier = PosteriorClassifier(max_epochs=2, random_state=3).fit(X, y)
        SklearnPosterior(RandomForestClassifier(n_estimators=3), num_classes=3).fit((data.inputs, data.targets),
                                                                                    generator=0)
        if seed == 11:
            assert next_draws() == expected
        probabilities.append(classifier.predict_proba(X))
    np.testing.assert_array_equal(probabilities[0], probabilities[1])


def test_loop_with_a_forest_picks_the_top_bald_items_of_its_trees():
    """The loop driven through the adapter against an independent BALD over the fitted trees."""
    data = toy_dataset(150)
    config = LoopConfig(strategy="bald", initial_size=12, validation_size=20, batch_size=5, budget=27,
                        evaluate_test=False, cold_start=None, seed=2)
    loop = ActiveLearningLoop(config, dataset=data, model_factory=lambda g: SklearnPosterior(
        RandomForestClassifier(n_estimators=10, max_depth=4), num_classes=3))
    rounds = 0
    while not loop.finished:
        proposal = loop.propose()
        if proposal.stop_reason:
            break
        unlabelled_N = loop.pool.unlabelled_indices
        scores_N = bald_reference(loop.posterior.module.forward_samples(data.inputs[unlabelled_N], range(10)))
        # trees' leaves give many exactly tied BALD scores: the picks must hold the top-5 scores
        score_of = dict(zip(unlabelled_N.tolist(), scores_N, strict=True))
        picked = sorted((score_of[i] for i in proposal.indices), reverse=True)
        np.testing.assert_allclose(picked, np.sort(scores_N)[::-1][:5], atol=1e-5)
        assert np.ptp(scores_N) > 0.1  # the scores do separate items
        loop.commit(proposal.indices, data.targets[proposal.indices])
        rounds += 1
    assert rounds == 3
    assert 0.0 <= loop.history[-1].metrics["validation_accuracy"] <= 1.0


def test_sklearn_errors():
    with pytest.raises(InvalidTypeError, match="estimator must be a scikit-learn classifier with predict_proba"):
        SklearnPosterior(StandardScaler(), num_classes=2)
    with pytest.raises(InvalidArgumentError, match="members='ensemble' needs a RandomForestClassifier"):
        SklearnPosterior(LogisticRegression(), num_classes=2, members="ensemble")
    with pytest.raises(FeaturesUnavailableError, match="pick a strategy that needs only predictions"):
        SklearnPosterior(LogisticRegression(), num_classes=2).features(torch.zeros(2, 2))
    data = toy_dataset(30)
    with pytest.raises(InvalidArgumentError, match=r"^train targets must be class ids in \[0, 2\)"):
        SklearnPosterior(LogisticRegression(), num_classes=2).fit((data.inputs, data.targets))


@pytest.mark.parametrize("estimator, got", [
    ("forest", r"got str 'forest'$"),
    (None, r"got NoneType None$"),
    (RandomForestClassifier, r"got the class RandomForestClassifier: pass an instance, RandomForestClassifier\(\)$"),
    (LinearRegression(), r"got LinearRegression, which is not a classifier$"),
    (SVC(), r"got SVC, which has no predict_proba \(use SVC\(probability=True\)\)$"),
])
def test_an_estimator_that_is_not_a_classifier_instance_is_named(estimator, got):
    expected = (r"^estimator must be a scikit-learn classifier with predict_proba \(an instance, fitted or not, "
                r"e\.g\. RandomForestClassifier\(\); it is cloned at every fit\), ")
    with pytest.raises(InvalidTypeError, match=expected + got) as error:
        SklearnPosterior(estimator, num_classes=3)
    assert "\n" not in str(error.value)


def test_a_fitted_classifier_is_taken_and_refitted():
    data = toy_dataset(30)
    fitted = LogisticRegression().fit(data.inputs.numpy(), data.targets.numpy())
    posterior = SklearnPosterior(fitted, num_classes=3, num_functions=2)
    posterior.fit((data.inputs, data.targets), generator=0)
    assert posterior.log_probs(data.inputs).shape == (30, 2, 3)


def test_posterior_classifier_in_a_pipeline_predicts_consistently():
    data = toy_dataset(120)
    X, y = data.inputs.numpy() * 10 + 3, np.array(["a", "b", "c"])[data.targets.numpy()]
    model = make_pipeline(StandardScaler(), PosteriorClassifier(max_epochs=20, num_samples=10, random_state=0))
    model.fit(X[:90], y[:90])
    assert (model.predict(X[90:]) == y[90:]).mean() > 0.8
    probs = model.predict_proba(X[90:])
    # an item's probabilities do not depend on the other items or their order (consistent MC dropout)
    np.testing.assert_allclose(model.predict_proba(X[90:][::-1])[::-1], probs, atol=1e-6)
    np.testing.assert_allclose(model.predict_proba(X[95:96])[0], probs[5], atol=1e-6)
    classifier = model[-1]
    samples = classifier.sample_log_probs(StandardScaler().fit(X[:90]).transform(X[90:]))
    assert samples.shape == (30, 10, 3)
    np.testing.assert_allclose(np.exp(samples).mean(1), probs, atol=1e-6)
    assert classifier.get_params()["num_samples"] == 10


@parametrize_with_checks([PosteriorClassifier(max_epochs=10, random_state=0)])
def test_posterior_classifier_passes_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_fit_with_no_labels_fits_nothing():
    from activebayes.models.posterior import NO_LABELS

    posterior = SklearnPosterior(LogisticRegression(), num_classes=3, num_functions=2)
    assert posterior.fit((torch.zeros(0, 4), torch.zeros(0, dtype=torch.long))) == NO_LABELS


def test_posterior_classifier_takes_reversed_and_read_only_arrays():
    """Any array scikit-learn takes: a view with negative strides (``X[::-1]``) and a read-only one
    (as a DataFrame's ``.values`` can be) give what a plain copy gives, without warnings."""
    import warnings

    data = toy_dataset(80)
    X, y = data.inputs.numpy().astype(np.float32), data.targets.numpy()
    plain = PosteriorClassifier(max_epochs=3, num_samples=5, random_state=0).fit(X[::-1].copy(), y[::-1].copy())
    reversed_view = PosteriorClassifier(max_epochs=3, num_samples=5, random_state=0).fit(X[::-1], y[::-1])
    np.testing.assert_allclose(reversed_view.predict_proba(X[::-1]), plain.predict_proba(X[::-1].copy()))
    frozen = X.copy()
    frozen.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns about a read-only array it cannot share
        np.testing.assert_allclose(plain.predict_proba(frozen), plain.predict_proba(X))


def test_a_feature_strategy_on_a_forest_gives_the_advice_once():
    data = toy_dataset(60)
    loop = ActiveLearningLoop(LoopConfig(strategy="badge", initial_size=12, validation_size=10, batch_size=5,
                                         budget=22, evaluate_test=False, cold_start=None),
                              dataset=data, model_factory=lambda g: SklearnPosterior(
                                  RandomForestClassifier(n_estimators=5, max_depth=3), num_classes=3))
    with pytest.raises(InvalidArgumentError) as raised:
        loop.run(progress=False)
    assert str(raised.value).count("pick a strategy") == 1 and "'power_bald'" in str(raised.value)


def test_log_probs_read_numpy_inputs_as_fit_does():
    data = toy_dataset(40)
    posterior = SklearnPosterior(RandomForestClassifier(n_estimators=3, max_depth=3), num_classes=4)
    posterior.fit((data.inputs.numpy(), data.targets.numpy()), generator=0)
    torch.testing.assert_close(posterior.log_probs(data.inputs.numpy(), num_samples=None),
                               posterior.log_probs(data.inputs, num_samples=None), rtol=0, atol=0)


def test_posterior_classifier_takes_one_int_as_one_hidden_layer():
    """hidden=64 was a raw TypeError ('int' object is not iterable)."""
    X, y = toy_dataset(30).inputs.numpy(), toy_dataset(30).targets.numpy()
    one = PosteriorClassifier(hidden=16, max_epochs=1, random_state=0).fit(X, y)
    same = PosteriorClassifier(hidden=(16,), max_epochs=1, random_state=0).fit(X, y)
    np.testing.assert_array_equal(one.predict_proba(X), same.predict_proba(X))
    for bad in (16.0, "16"):
        with pytest.raises(InvalidTypeError, match=r"^hidden must be an int \(one hidden layer\) or a sequence of ints "
                                                   r"\(one per hidden layer\), got (float 16.0|str '16')$"):
            PosteriorClassifier(hidden=bad, max_epochs=1).fit(X, y)


def test_sklearn_posterior_checks_labels_as_activebayes_fit_does():
    """String labels were a raw torch TypeError and float labels (1.7) were truncated by .long()."""
    data = toy_dataset(12)
    posterior = SklearnPosterior(RandomForestClassifier(n_estimators=2), num_classes=4)
    X = data.inputs.numpy()
    with pytest.raises(InvalidTypeError, match=r"^train targets must hold numbers, got a NumPy array of dtype <U\d+; "
                                               r"encode the labels as class ids 0..C-1"):
        posterior.fit((X, data.targets.numpy().astype(str)), generator=0)
    with pytest.raises(InvalidTypeError, match=r"^train targets must hold numbers, got list of dtype <U\d+"):
        posterior.fit((X, ["a", "b", "c"] * 4), generator=0)
    with pytest.raises(InvalidTypeError,
                       match=r"^train targets must be integer class indices, got dtype torch.float64$"):
        posterior.fit((X, data.targets.numpy() + 0.7), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"^train targets must be class ids >= 0, got -1"):
        posterior.fit((X, data.targets - 1), generator=0)
    with pytest.raises(InvalidArgumentError, match=r"^train targets must have shape \[N\] = \[12\], got \(11,\)$"):
        posterior.fit((X, data.targets[:11]), generator=0)
    posterior.fit((X, data.targets.tolist()), generator=0)  # a list of ints is fine


def test_sklearn_posterior_log_probs_before_fit_says_fit_first():
    """It said 'num_samples must be >= 1, got 0' (no members yet)."""
    posterior = SklearnPosterior(RandomForestClassifier(n_estimators=2), num_classes=3)
    with pytest.raises(InvalidArgumentError, match=r"^the scikit-learn posterior is not fitted yet \(no members\): "
                                                   r"call fit with labelled rows first$"):
        posterior.log_probs(torch.randn(3, 4), num_samples=None)


def test_scoring_an_unfitted_sklearn_posterior_says_fit_first():
    """score_pool (and predict_log_probs) on the posterior or its module before fit said
    'num_samples must be >= 1, got 0'; a module holding no functions at all is named too."""
    from activebayes.models.predict import predict_log_probs
    from activebayes.scoring import score_pool

    posterior = SklearnPosterior(RandomForestClassifier(n_estimators=2), num_classes=3)
    for model in (posterior, posterior.module):
        with pytest.raises(InvalidArgumentError, match=r"^the scikit-learn posterior is not fitted yet"):
            score_pool(model, torch.randn(6, 4), torch.arange(6), "bald", 2, num_samples=None, mask_generator=0,
                       selection_seed=0)

    class NoFunctions(torch.nn.Module):  # a user's FunctionSampler holding none yet
        num_function_samples = 0

        def forward_samples(self, inputs, sample_ids):
            raise AssertionError("not called")

    with pytest.raises(InvalidArgumentError, match=r"^NoFunctions holds no function samples \(K = 0\): fit it"):
        predict_log_probs(NoFunctions(), torch.randn(3, 4))
