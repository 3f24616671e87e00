"""scikit-learn both ways: a classifier as K functions, and a posterior as an estimator.

- :class:`SklearnPosterior`: a scikit-learn classifier as an activebayes
  :class:`~activebayes.models.Posterior`, so every acquisition function and the loop run
  on it. Its K functions are the members of a fitted ensemble (a random forest's or
  extra-trees' trees, a ``BaggingClassifier``'s members: ``members="ensemble"``), or K
  clones of any classifier fitted on stratified bootstrap resamples of the labelled set
  (``members="bootstrap"``). Member ``k`` is one fixed function, so sample ``k`` is the
  same for every item in every batch and order. Zero probabilities (a pure tree leaf)
  are floored at ``PROBABILITY_FLOOR`` so that log-probabilities stay finite.
- :class:`PosteriorClassifier`: an activebayes posterior (by default an MC dropout MLP,
  or your own network / posterior) as a scikit-learn classifier (``fit``,
  ``predict_proba``, ``predict``, ``get_params``, ``set_params``), for pipelines,
  grid search, skorch and scikit-activeml; :meth:`PosteriorClassifier.sample_log_probs`
  gives the ``[N, K, C]`` samples BALD-style query strategies need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from activebayes._seeding import global_state_restored
from activebayes._validation import check_choice, check_positive_int
from activebayes.adapters._common import as_input_tensor, as_number_tensor, from_numpy, require, seed_from
from activebayes.errors import InvalidArgumentError, InvalidTypeError
from activebayes.metrics.predictive import predictive_log_probs
from activebayes.models.posterior import NO_LABELS, FeaturesUnavailableError, Posterior, as_posterior, no_labels

require("sklearn", "scikit-learn", "activebayes.adapters.sklearn")

from sklearn.base import BaseEstimator, ClassifierMixin, clone, is_classifier  # noqa: E402
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier  # noqa: E402
from sklearn.utils import check_random_state  # noqa: E402
from sklearn.utils.multiclass import check_classification_targets  # noqa: E402
from sklearn.utils.validation import check_is_fitted, validate_data  # noqa: E402

__all__ = ["PROBABILITY_FLOOR", "PosteriorClassifier", "SklearnFunctions", "SklearnPosterior"]

#: smallest probability a member may give a class (a pure leaf gives 0): keeps log p finite
PROBABILITY_FLOOR = 1e-6

MEMBER_KINDS = ("auto", "ensemble", "bootstrap")


def _as_matrix(inputs: Tensor) -> np.ndarray:
    """Items ``[n, ...]`` as the float64 matrix ``[n, D]`` scikit-learn reads."""
    return inputs.detach().reshape(len(inputs), -1).cpu().to(torch.float64).numpy()


class SklearnFunctions(nn.Module):
    """K fitted scikit-learn classifiers as a :class:`~activebayes.models.FunctionSampler`.

    ``forward_samples(inputs_n, sample_ids) -> log-probabilities [n, k, C]`` (member
    ``k``'s ``predict_proba``, its classes placed in the columns of the ``num_classes``
    classes, floored at :data:`PROBABILITY_FLOOR`); ``forward(inputs_n)`` is the mean
    member's log-probabilities ``[n, C]``.

    Args:
        members: fitted classifiers with ``predict_proba``.
        columns: per member, the class id (``0..C-1``) of each ``predict_proba`` column.
        num_classes: C.
        features: per member, the input columns it reads (``None``: all).
    """

    def __init__(self, members: Sequence[Any], columns: Sequence[np.ndarray], num_classes: int,
                 features: Sequence[np.ndarray | None] | None = None) -> None:
        super().__init__()
        self.num_classes = int(num_classes)
        self.set_members(members, columns, features)

    def set_members(self, members: Sequence[Any], columns: Sequence[np.ndarray],
                    features: Sequence[np.ndarray | None] | None = None) -> None:
        """Replace the K functions in place (the module object stays the one the loop holds)."""
        self.members = list(members)
        self.columns = [np.asarray(c, dtype=np.int64) for c in columns]
        self.features = list(features) if features is not None else [None] * len(self.members)

    @property
    def num_function_samples(self) -> int:
        return len(self.members)

    def check_fitted(self) -> None:
        """Raise :class:`~activebayes.models.laplace.NotFittedError` when no member is fitted yet."""
        from activebayes.models.laplace import NotFittedError

        if not self.members:
            raise NotFittedError(
                "the scikit-learn posterior is not fitted yet (no members): call fit with labelled rows first")

    def forward_samples(self, inputs: Tensor, sample_ids: Sequence[int]) -> Tensor:
        self.check_fitted()
        X = _as_matrix(inputs)
        out = np.full((len(X), len(sample_ids), self.num_classes), 0.0)
        for j, k in enumerate(sample_ids):
            features = self.features[k]
            probs = self.members[k].predict_proba(X if features is None else X[:, features])
            out[:, j, self.columns[k]] = probs
        out = np.maximum(out, PROBABILITY_FLOOR)
        out /= out.sum(-1, keepdims=True)
        return torch.from_numpy(np.log(out)).float()

    def forward(self, inputs: Tensor) -> Tensor:
        log_probs_n_K_C = self.forward_samples(inputs, range(len(self.members)))
        return predictive_log_probs(log_probs_n_K_C)

    def extra_repr(self) -> str:
        return f"{len(self.members)} x {type(self.members[0]).__name__}, num_classes={self.num_classes}"


def _is_member_ensemble(estimator: Any) -> bool:
    return isinstance(estimator, (RandomForestClassifier, ExtraTreesClassifier, BaggingClassifier))


def _with_seed(estimator: Any, seed: int) -> Any:
    """Seed every ``random_state`` of ``estimator``, nested ones included (the forest in a
    ``Pipeline``, the base estimator of a ``BaggingClassifier``): one left at ``None`` would draw
    from NumPy's global generator, and the same ``generator`` would not give the same fit."""
    seeded = {name: seed % 2**32 for name in estimator.get_params(deep=True)
              if name == "random_state" or name.endswith("__random_state")}
    if seeded:
        estimator.set_params(**seeded)
    return estimator


def stratified_bootstrap(targets_N: np.ndarray, generator: torch.Generator) -> np.ndarray:
    """Indices of a bootstrap resample drawn within each class (every class keeps its count)."""
    picks = []
    for label in np.unique(targets_N):
        members = np.flatnonzero(targets_N == label)
        draw = torch.randint(0, len(members), (len(members),), generator=generator).numpy()
        picks.append(members[draw])
    return np.sort(np.concatenate(picks))


def _check_estimator(estimator: Any) -> None:
    """A scikit-learn classifier instance with ``predict_proba`` (fitted or not: it is cloned), or a one-line error."""
    expected = ("estimator must be a scikit-learn classifier with predict_proba (an instance, fitted or not, "
                "e.g. RandomForestClassifier(); it is cloned at every fit)")
    if isinstance(estimator, type):
        raise InvalidTypeError(f"{expected}, got the class {estimator.__name__}: pass an instance, "
                               f"{estimator.__name__}()")
    if not (hasattr(estimator, "fit") and hasattr(estimator, "get_params")):
        shown = repr(estimator)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise InvalidTypeError(f"{expected}, got {type(estimator).__name__} {shown}")
    try:
        classifier = is_classifier(estimator)
    except (AttributeError, TypeError):
        classifier = False
    if not classifier:
        raise InvalidTypeError(f"{expected}, got {type(estimator).__name__}, which is not a classifier")
    if not hasattr(estimator, "predict_proba"):
        name = type(estimator).__name__
        hint = f" (use {name}(probability=True))" if name in ("SVC", "NuSVC") else ""
        raise InvalidTypeError(f"{expected}, got {name}, which has no predict_proba{hint}")


class SklearnPosterior:
    """A scikit-learn classifier as a :class:`~activebayes.models.Posterior` with K member functions.

    Args:
        estimator: a classifier instance with ``predict_proba``, fitted or not (cloned at every ``fit``).
        num_classes: C, the number of classes of the pool (labels are ``0..C-1``).
        members: ``"ensemble"``: the fitted members of a ``RandomForestClassifier``,
            ``ExtraTreesClassifier`` or ``BaggingClassifier`` are the K functions (K =
            its ``n_estimators``); ``"bootstrap"``: ``num_functions`` clones fitted on
            stratified bootstrap resamples; ``"auto"``: ``"ensemble"`` for those three.
        num_functions: K for ``"bootstrap"``.

    ``num_functions`` is fixed: the loop then passes ``num_samples=None`` (like an
    :class:`~activebayes.models.Ensemble`). No feature space: strategies reading
    features (BADGE, typicality) raise :class:`~activebayes.models.FeaturesUnavailableError`.

    Example:
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> posterior = SklearnPosterior(RandomForestClassifier(n_estimators=8), num_classes=3)
        >>> x, y = torch.randn(30, 4), torch.arange(30) % 3
        >>> _ = posterior.fit((x, y), generator=0)
        >>> posterior.log_probs(x, num_samples=None).shape
        torch.Size([30, 8, 3])
    """

    def __init__(self, estimator: Any, *, num_classes: int, members: str = "auto", num_functions: int = 10) -> None:
        _check_estimator(estimator)
        check_choice(members, "members", MEMBER_KINDS)
        if members == "ensemble" and not _is_member_ensemble(estimator):
            raise InvalidArgumentError(
                f"members='ensemble' needs a RandomForestClassifier, ExtraTreesClassifier or BaggingClassifier, "
                f"got {type(estimator).__name__}; use members='bootstrap'"
            )
        self.estimator = estimator
        self.num_classes = check_positive_int(num_classes, "num_classes")
        self.members = "ensemble" if members == "auto" and _is_member_ensemble(estimator) else (
            "bootstrap" if members == "auto" else members)
        self.num_bootstrap = check_positive_int(num_functions, "num_functions")
        self._module = SklearnFunctions([], [], self.num_classes)

    @property
    def module(self) -> SklearnFunctions:
        """The K fitted members (none before :meth:`fit`; the same object after every fit)."""
        return self._module

    @property
    def num_functions(self) -> int | None:
        if self.members == "ensemble":
            return int(self.estimator.get_params()["n_estimators"])
        return self.num_bootstrap

    def fit(self, train, *, validation=None, generator=None, device=None) -> dict[str, Any]:
        """Fit the members on ``train = (inputs_N, targets_N)``, seeded by ``generator``.

        ``validation`` and ``device`` are not used (scikit-learn fits on the CPU). With no
        rows nothing is fitted (the protocol's prior; the loop predicts nothing then).
        """
        if no_labels(train):
            return dict(NO_LABELS)
        from activebayes.models.training import check_class_targets

        inputs_N, targets_N = from_numpy(train, "train")
        X = _as_matrix(as_input_tensor(inputs_N))
        # as activebayes' fit checks them: integer class ids >= 0 (a float label 1.7 is not truncated)
        y = check_class_targets(as_number_tensor(targets_N, "train targets"), len(X), "train").numpy()
        if len(y) and y.max() >= self.num_classes:
            raise InvalidArgumentError(f"train targets must be class ids in [0, {self.num_classes}), got {y.min()}..{y.max()}")
        gen = torch.Generator().manual_seed(seed_from(generator))
        if self.members == "ensemble":
            fitted = _with_seed(clone(self.estimator), seed_from(gen)).fit(X, y)
            members = list(fitted.estimators_)
            columns = [fitted.classes_[np.asarray(m.classes_, dtype=np.int64)] for m in members]
            features = list(getattr(fitted, "estimators_features_", [None] * len(members)))
        else:
            members, columns = [], []
            for _ in range(self.num_bootstrap):
                rows = stratified_bootstrap(y, gen)
                member = _with_seed(clone(self.estimator), seed_from(gen)).fit(X[rows], y[rows])
                members.append(member)
                columns.append(np.asarray(member.classes_, dtype=np.int64))
            features = None
        self._module.set_members(members, columns, features)
        return {"members": len(members), "kind": self.members}

    def log_probs(self, inputs, *, num_samples=None, generator=None, batch_size=512, device=None) -> Tensor:
        """``[N, K, C]``: member ``k``'s log-probabilities (``num_samples`` must be None or K)."""
        from activebayes.models.predict import predict_log_probs

        self._module.check_fitted()  # else K = 0 members: 'num_samples must be >= 1, got 0'
        return predict_log_probs(self.module, from_numpy(inputs, "inputs"), num_samples, batch_size=batch_size)

    def features(self, inputs, *, batch_size=512, device=None) -> Tensor:
        raise FeaturesUnavailableError(
            "a scikit-learn classifier has no feature space for BADGE / typicality: pick a strategy that needs only "
            "predictions (e.g. strategy='bald' or 'power_bald')"
        )

    def __repr__(self) -> str:
        return f"SklearnPosterior({type(self.estimator).__name__}, members={self.members!r})"


ModelBuilder = Callable[[int, int, torch.Generator], "nn.Module | Posterior"]


def _tensor(X: np.ndarray) -> torch.Tensor:
    """``X`` as a tensor sharing memory where it can: a C-contiguous, writable array (a view with
    negative strides, ``X[::-1]``, or a read-only one from a DataFrame is copied first)."""
    return torch.from_numpy(np.require(X, requirements=["C", "W"]))


class PosteriorClassifier(ClassifierMixin, BaseEstimator):
    """An activebayes posterior as a scikit-learn classifier.

    ``fit(X, y)`` builds the network afresh (seeded by ``random_state``) and trains
    it; ``predict_proba(X)`` is the mean of ``num_samples`` consistent MC dropout
    samples, fixed by the seed drawn at ``fit``: an item's probabilities do not
    depend on the other items of ``X`` or their order.

    Args:
        model: ``None`` (an :class:`~activebayes.models.MLP` with ``hidden`` and
            ``p``), or ``(in_features, num_classes, generator) -> nn.Module |
            Posterior`` for your own network or posterior.
        hidden: hidden widths of the default MLP (one int: one hidden layer).
        p: its dropout probability.
        num_samples: K, the MC samples averaged by ``predict_proba`` (ignored for a
            posterior with its own fixed K, e.g. an ensemble).
        lr: learning rate of :func:`activebayes.models.fit` (for an ``nn.Module``; so are
            the next four).
        max_epochs: epochs at most.
        batch_size: items per optimizer step.
        min_samples_per_epoch: samples drawn per epoch at least.
        weight_decay: L2 penalty.
        random_state: int seed or ``None`` (drawn from NumPy's global RNG at fit).
        device: train and predict there (e.g. ``"cuda"``).
    """

    def __init__(self, model: ModelBuilder | None = None, *, hidden: int | tuple[int, ...] = (64,), p: float = 0.25,
                 num_samples: int = 20, lr: float = 1e-2, max_epochs: int = 50, batch_size: int = 64,
                 min_samples_per_epoch: int = 256, weight_decay: float = 1e-4, random_state: int | None = None,
                 device: str | None = None) -> None:
        self.model = model
        self.hidden = hidden
        self.p = p
        self.num_samples = num_samples
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.min_samples_per_epoch = min_samples_per_epoch
        self.weight_decay = weight_decay
        self.random_state = random_state
        self.device = device

    def _seed(self) -> int:
        if isinstance(self.random_state, int | np.integer) and not isinstance(self.random_state, bool):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(0, 2**31 - 1))

    def fit(self, X: Any, y: Any) -> PosteriorClassifier:
        from activebayes.models.networks import MLP

        X, y = validate_data(self, X, y, dtype=np.float32)
        check_classification_targets(y)
        self.classes_, y_encoded = np.unique(y, return_inverse=True)
        check_positive_int(self.num_samples, "num_samples")
        self.seed_ = self._seed()
        generator = torch.Generator().manual_seed(self.seed_)
        in_features, num_classes = X.shape[1], len(self.classes_)
        if self.model is None:
            with global_state_restored():
                torch.manual_seed(self.seed_)
                built: Any = MLP(in_features=in_features, num_classes=num_classes, hidden=self.hidden,
                                 p=self.p)
        elif callable(self.model):
            built = self.model(in_features, num_classes, generator)
        else:
            raise InvalidTypeError(
                f"model must be None or a callable (in_features, num_classes, generator) -> nn.Module | "
                f"Posterior, got {type(self.model).__name__}"
            )
        options = dict(lr=self.lr, max_epochs=self.max_epochs, batch_size=self.batch_size,
                       min_samples_per_epoch=self.min_samples_per_epoch, weight_decay=self.weight_decay)
        posterior = as_posterior(built, **options) if isinstance(built, nn.Module) else as_posterior(built)
        posterior.fit((_tensor(X), torch.from_numpy(y_encoded).long()), generator=generator,
                      device=self.device)
        self.posterior_ = posterior
        return self

    def sample_log_probs(self, X: Any) -> np.ndarray:
        """``log_probs_N_K_C`` as a NumPy array: K function samples, fixed since ``fit``."""
        check_is_fitted(self, "posterior_")
        X = validate_data(self, X, dtype=np.float32, reset=False)
        posterior = self.posterior_
        k = None if posterior.num_functions is not None else self.num_samples
        log_probs_N_K_C = posterior.log_probs(_tensor(X), num_samples=k,
                                              generator=torch.Generator().manual_seed(self.seed_),
                                              device=self.device)
        return log_probs_N_K_C.double().numpy()

    def predict_proba(self, X: Any) -> np.ndarray:
        """``[N, C]``: the mean of the K samples' probabilities (columns in ``classes_`` order)."""
        probs_N_C = np.exp(self.sample_log_probs(X)).mean(axis=1)
        return probs_N_C / probs_N_C.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        probs_N_C = self.predict_proba(X)  # checks fitted first
        return self.classes_[np.argmax(probs_N_C, axis=1)]
