"""Learned routers: ridge on delta (seed 000), logistic and LightGBM on the delta class (seed 003).

All share one preprocessing path (policies.preprocess): +-inf -> NaN -> fit-time column median
(0.0 for an all-missing column); the linear models then standardise. Scoring never calls a
fitted sklearn/LightGBM object directly: it applies the numbers kept in ``get_state()``, with
linear predictors summed in a fixed order without BLAS (preprocess.linear_predictor), so a
policy rebuilt from the frozen JSON state scores bit-identically to the one that was fitted,
whatever the CPU or the arrays' memory layout.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, softmax

from harness.errors import ConfigError, FeatureError, HarnessError
from harness.retrieval.feature_names import expand
from policies.base import FLOAT, FLOATS, INT, INTS, JSON, MATRIX, NAMES, STR, Codec, Policy, ScoreContext
from policies.builtin import resolve_features
from policies.preprocess import (
    check_fit_inputs,
    column_medians,
    count_missing,
    delta_classes,
    feature_array,
    impute,
    linear_predictor,
)

CLASSES = (-1, 0, 1)


def _booster_to_json(booster, policy) -> str | None:
    return None if booster is None else booster.model_to_string()


def _booster_from_json(text, policy):
    if text is None:
        return None
    import lightgbm as lgb

    return lgb.Booster(model_str=text)


#: a LightGBM booster, kept as its model text (never pickle); None for "no model"
LIGHTGBM_MODEL = Codec("lightgbm_model", _booster_to_json, _booster_from_json)


# Upper bounds of the counts a policy config sets: a zero too many ends in one line naming the
# key, not in hours of boosting or an out-of-memory kill (the shipped values are far below).
MAX_BOOST_ROUNDS = 10_000  # policy.num_boost_round
MAX_LEAVES = 4_096  # policy.num_leaves
MAX_DEPTH = 64  # policy.max_depth
MAX_MIN_DATA = 1_000_000  # policy.min_data_in_leaf
MAX_ITER = 1_000_000  # policy.max_iter
MAX_PENALTY = 1e12  # policy.alpha, policy.alphas, policy.C, policy.lambda_l2: regularisation strengths
MAX_LEARNING_RATE = 10.0  # policy.learning_rate (0.05 by default; above 1 each tree overshoots)


def _positive(value, key: str, integer: bool = False, high: float | None = None, low: float = 0.0):
    """Validate a hyperparameter (ConfigError naming ``key``: a finite number > 0 and >= ``low``,
    an integer if asked, at most ``high``) and return it unchanged."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
          and value >= low and (high is None or value <= high))
    if integer:
        ok = ok and float(value).is_integer()
    if not ok:
        kind = "a positive integer" if integer else "a positive finite number"
        interval = f"[{low:g}, {high:g}]" if low else f"(0, {high:g}]"
        bound = "" if high is None else f" at most {high:,}" if integer else f" in {interval}"
        raise ConfigError(key, f"expected {kind}{bound}, got {value!r}")
    return value


class _Learned(Policy):
    """Shared bookkeeping: features, imputation counts, fitted check, the state header.

    The state header (``kind``, ``features``; ``n_imputed``, ``n_train``) is declared here and
    extended by each subclass; ``get_state``/``set_state`` are the generic ones of Policy.
    """

    trainable = True
    kind = "learned"
    state_params = {"kind": STR, "features": NAMES}
    fitted_attributes = {"n_imputed": INT, "n_train": INT}

    def __init__(self, features="baseline"):
        self.features = resolve_features(features)

    def _prepare_fit(self, X: pd.DataFrame, delta) -> tuple[np.ndarray, np.ndarray]:
        d = check_fit_inputs(X, delta, self.name)
        arr = feature_array(X, self.features, self.name)
        self.n_imputed_ = count_missing(arr)  # values imputed in the development matrix at fit
        self.n_train_ = int(len(d))
        return arr, d

    def _prepare_score(self, X: pd.DataFrame) -> np.ndarray:
        if not self.is_fitted():
            raise HarnessError(f"policy {self.name!r} ({type(self).__name__}) scored before fit() or set_state()")
        arr = feature_array(X, self.features, self.name)
        fitted = getattr(self, "medians_", None)
        if fitted is not None and arr.shape[1] != len(fitted):  # a pattern ("probe_mem_*") matched other columns
            raise FeatureError(f"policy {self.name!r} was fitted on {len(fitted)} feature columns of "
                               f"{list(self.features)}, the scored frame has {arr.shape[1]}")
        self.n_imputed_scored_ = count_missing(arr)  # values imputed in the last scored matrix
        return arr


class RidgePolicy(_Learned):
    """Seed 000's router: median imputation -> standardisation -> ridge (alpha 20) on delta.

    Score = predicted delta. Fitted with the sklearn Pipeline docs/metrics.md names; the state keeps the
    medians, the scaler's mean/scale and the ridge coefficients.
    """

    name = "ridge"
    estimates_gain = True  # predicted delta
    kind = "ridge"
    state_params = {**_Learned.state_params, "alpha": FLOAT}
    fitted_attributes = {
        **_Learned.fitted_attributes,
        "medians": FLOATS,
        "mean": FLOATS,
        "scale": FLOATS,
        "coef": FLOATS,
        "intercept": FLOAT,
    }

    def __init__(self, features="baseline", alpha: float = 20.0):
        super().__init__(features)
        self.alpha = _positive(alpha, "policy.alpha", high=MAX_PENALTY, low=1 / MAX_PENALTY)

    def fit(self, X, delta, groups=None, seed: int = 0) -> "RidgePolicy":
        arr, d = self._prepare_fit(X, delta)
        return self._fit_pipeline(arr, d, float(self.alpha))

    def _fit_pipeline(self, arr: np.ndarray, d: np.ndarray, alpha: float) -> "RidgePolicy":
        """Imputer -> scaler -> ridge(alpha) on the development matrix; keeps their numbers."""
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import Ridge
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import StandardScaler

        pipe = Pipeline(
            [
                ("impute", SimpleImputer(strategy="median", keep_empty_features=True)),
                ("scale", StandardScaler()),
                ("ridge", Ridge(alpha=alpha)),
            ]
        ).fit(arr, d)
        self.medians_ = np.asarray(pipe["impute"].statistics_, dtype=float)
        self.mean_ = np.asarray(pipe["scale"].mean_, dtype=float)
        self.scale_ = np.asarray(pipe["scale"].scale_, dtype=float)
        self.coef_ = np.asarray(pipe["ridge"].coef_, dtype=float).reshape(-1)
        self.intercept_ = float(pipe["ridge"].intercept_)
        return self

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        arr = self._prepare_score(X)
        z = (impute(arr, self.medians_) - self.mean_) / self.scale_
        return linear_predictor(z, self.coef_, self.intercept_)


class QPPRouter(RidgePolicy):
    """The "QPP router": the same ridge, over the query-performance predictors (seed 002 4.2)."""

    name = "qpp_ridge"

    def __init__(self, features="qpp", alpha: float = 20.0):
        super().__init__(features, alpha)


#: the default penalties a cross-validated ridge chooses from: 10^-1 .. 10^5, half a decade apart
DEFAULT_ALPHAS = tuple(float(10.0 ** (e / 2.0)) for e in range(-2, 11))
RIDGE_CV_FOLDS = 5  # grouped folds (documents), fewer when there are fewer documents


def grouped_folds(groups, n: int, k: int = RIDGE_CV_FOLDS) -> list[np.ndarray]:
    """Held-out index sets of a grouped K-fold split (sklearn's GroupKFold, K = min(k, number of
    groups)); each question its own group when ``groups`` is None. Empty when fewer than 2 groups."""
    from sklearn.model_selection import GroupKFold

    g = np.arange(n) if groups is None else np.asarray(groups).astype(str)
    n_groups = len(np.unique(g))
    if n_groups < 2:
        return []
    return [test for _, test in GroupKFold(n_splits=min(k, n_groups)).split(np.zeros((n, 1)), groups=g)]


def ridge_cv_errors(arr: np.ndarray, d: np.ndarray, folds: list[np.ndarray], alphas) -> np.ndarray:
    """Pooled squared error of the held-out questions for each penalty: in each fold the whole
    pipeline (median imputation, standardisation, ridge with an unpenalised intercept) is fitted
    on the other folds; the ridge for every penalty comes from one SVD of the fold's standardised
    matrix, X = U S V', coef = V diag(s / (s^2 + alpha)) U' (y - mean y)."""
    errors = np.zeros(len(alphas))
    alphas = np.asarray(alphas, dtype=float)
    for test in folds:
        train = np.setdiff1d(np.arange(len(d)), test)
        medians = column_medians(arr[train])
        tr, te = impute(arr[train], medians), impute(arr[test], medians)
        mean, scale = tr.mean(axis=0), tr.std(axis=0)
        scale[scale == 0] = 1.0  # StandardScaler's rule for a constant column
        ztr, zte = (tr - mean) / scale, (te - mean) / scale
        zc = ztr - ztr.mean(axis=0)
        y_mean = d[train].mean()
        u, sv, vt = np.linalg.svd(zc, full_matrices=False)
        uy = u.T @ (d[train] - y_mean)
        shrink = sv[None, :] / (sv[None, :] ** 2 + alphas[:, None])  # (alphas, components)
        coefs = (shrink * uy[None, :]) @ vt  # (alphas, features)
        pred = (zte - ztr.mean(axis=0)) @ coefs.T + y_mean  # (questions, alphas)
        errors += ((pred - d[test][:, None]) ** 2).sum(axis=0)
    return errors / max(1, sum(len(t) for t in folds))


class RidgeCVPolicy(RidgePolicy):
    """Ridge on delta whose penalty is chosen inside the training questions: for wide feature
    sets (a model's hidden state: 1,152 columns; a sentence embedding: 384) where a fixed penalty
    fits noise or nothing. Grouped K-fold cross-validation (K = 5 folds of documents: questions
    of one document are not independent, so a question-level leave-one-out would favour too
    small a penalty), the whole pipeline refitted inside each fold; the penalty with the least
    pooled squared error wins, the larger one on a tie; with fewer than 2 documents the largest.
    Only the training questions are seen, so the held-out ones judge the choice. Score =
    predicted delta. ``columns_`` keeps the columns the feature patterns matched at fit, and
    scoring refuses a frame whose matches differ.

    Seed 002's Internal Prober with a frozen model (``policy=probe_ridge``, features from the
    ``hidden_state`` block) and the query-encoder stand-in (``policy=query_encoder_ridge``).
    """

    name = "ridge_cv"
    kind = "ridge_cv"
    state_params = {**_Learned.state_params, "alphas": FLOATS}
    fitted_attributes = {**RidgePolicy.fitted_attributes, "alpha": FLOAT, "columns": NAMES}

    def __init__(self, features="probe", alphas=DEFAULT_ALPHAS):
        _Learned.__init__(self, features)
        if isinstance(alphas, (str, bytes)) or not hasattr(alphas, "__iter__"):
            raise ConfigError("policy.alphas", f"expected a list of positive numbers, got {alphas!r}")
        values = [_positive(a, "policy.alphas", high=MAX_PENALTY, low=1 / MAX_PENALTY) for a in alphas]
        if not values:
            raise ConfigError("policy.alphas", "must list at least one penalty")
        self.alphas = tuple(float(a) for a in values)

    def fit(self, X, delta, groups=None, seed: int = 0) -> "RidgeCVPolicy":
        arr, d = self._prepare_fit(X, delta)
        self.columns_ = list(expand(self.features, X.columns)[0])
        folds = grouped_folds(groups, len(d))
        if folds:
            errors = ridge_cv_errors(arr, d, folds, self.alphas)
            best = np.flatnonzero(errors <= errors.min() * (1 + 1e-12) + 1e-300)
            self.alpha_ = float(max(self.alphas[i] for i in best))  # a tie: the larger penalty
        else:
            self.alpha_ = float(max(self.alphas))
        return self._fit_pipeline(arr, d, self.alpha_)

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        if self.is_fitted():
            found = list(expand(self.features, X.columns)[0])
            if found != list(self.columns_):
                raise FeatureError(f"policy {self.name!r} was fitted on the columns {_brief(self.columns_)} of "
                                   f"{list(self.features)}; the scored frame matches {_brief(found)}")
        return super().score(X, ctx)


def _brief(names) -> str:
    names = list(names)
    return str(names) if len(names) <= 6 else f"{names[:3]} ... {names[-2:]} ({len(names)} columns)"


class _ClassScorer(_Learned):
    """Score = P(delta class +1) - P(delta class -1) (seed 003's BUR score), which is the
    expected delta under the predicted class probabilities (``estimates_gain``).

    A class absent from the development data has probability 0. With a single class c in the
    development data no model is fitted and every question scores c (which is P(+1) - P(-1)
    for a model that is certain of c).
    """

    estimates_gain = True

    def _class_labels(self, delta) -> np.ndarray:
        y = delta_classes(delta)
        self.classes_ = np.array(sorted(set(int(c) for c in y)), dtype=int)
        return y

    def _score_from_proba(self, proba: np.ndarray) -> np.ndarray:
        classes = list(self.classes_)
        p_plus = proba[:, classes.index(1)] if 1 in classes else 0.0
        p_minus = proba[:, classes.index(-1)] if -1 in classes else 0.0
        return np.zeros(len(proba)) + p_plus - p_minus


class LogisticPolicy(_ClassScorer):
    """BUR-linear: median imputation -> standardisation -> multinomial logistic regression.

    sklearn's defaults are kept (L2, C = 1.0, lbfgs); with two classes sklearn fits the
    equivalent binary model. Probabilities are recomputed from the kept coefficients
    (softmax, or the logistic function for two classes), exactly as ``predict_proba`` does.
    """

    name = "logistic"
    kind = "logistic"
    state_params = {**_Learned.state_params, "C": FLOAT}
    fitted_attributes = {
        **_Learned.fitted_attributes,
        "classes": INTS,
        "medians": FLOATS,
        "mean": FLOATS,
        "scale": FLOATS,
        "coef": MATRIX,  # one row per class (one row for two classes, none for one)
        "intercept": FLOATS,
    }

    def __init__(self, features="baseline", C: float = 1.0, max_iter: int = 1000):
        super().__init__(features)
        self.C = _positive(C, "policy.C", high=MAX_PENALTY, low=1 / MAX_PENALTY)
        self.max_iter = _positive(max_iter, "policy.max_iter", integer=True, high=MAX_ITER)

    def fit(self, X, delta, groups=None, seed: int = 0) -> "LogisticPolicy":
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        arr, d = self._prepare_fit(X, delta)
        y = self._class_labels(d)
        imputer = SimpleImputer(strategy="median", keep_empty_features=True).fit(arr)
        scaler = StandardScaler()
        z = scaler.fit_transform(imputer.transform(arr))  # fitted once, also for the classifier
        self.medians_ = np.asarray(imputer.statistics_, dtype=float)
        self.mean_ = np.asarray(scaler.mean_, dtype=float)
        self.scale_ = np.asarray(scaler.scale_, dtype=float)
        if len(self.classes_) == 1:
            self.coef_ = np.zeros((0, arr.shape[1]))
            self.intercept_ = np.zeros(0)
        else:
            model = LogisticRegression(C=float(self.C), max_iter=int(self.max_iter)).fit(z, y)
            if list(model.classes_) != list(self.classes_):  # pragma: no cover - sklearn contract
                raise HarnessError(f"logistic policy: unexpected classes {model.classes_}")
            self.coef_ = np.asarray(model.coef_, dtype=float)
            self.intercept_ = np.asarray(model.intercept_, dtype=float)
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities, columns in the order of ``classes_``."""
        arr = self._prepare_score(X)
        if len(self.classes_) == 1:
            return np.ones((len(arr), 1))
        z = (impute(arr, self.medians_) - self.mean_) / self.scale_
        logits = linear_predictor(z, self.coef_, self.intercept_)
        if len(self.classes_) == 2:
            p1 = expit(logits[:, 0])
            return np.column_stack([1.0 - p1, p1])
        return softmax(logits, axis=1)

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        return self._score_from_proba(self.predict_proba(X))


class GBMPolicy(_ClassScorer):
    """BUR-GBM: LightGBM on the delta class, score = P(+1) - P(-1).

    Choices (docs/metrics.md says only "LightGBM multiclass"): small trees for a few hundred rows
    (``num_leaves`` 7, ``max_depth`` 3, ``min_data_in_leaf`` 10, 100 rounds at learning rate
    0.05, L2 1.0); deterministic, row-wise, one thread, seeded from ``fit``'s seed, so results
    do not depend on the number of jobs. Three classes -> ``multiclass``; two -> ``binary`` on
    "is the larger class"; one -> constant score (no model). Features are median-imputed
    like the linear models (LightGBM's own NaN routing is not used) so all routers see the
    same inputs; trees need no scaling.
    """

    name = "gbm"
    kind = "gbm"
    state_params = {**_Learned.state_params, "num_boost_round": INT}
    fitted_attributes = {
        **_Learned.fitted_attributes,
        "classes": INTS,
        "medians": FLOATS,
        "seed": INT,  # fit's seed
        "params": JSON,  # the LightGBM parameters the model was trained with
        "model": LIGHTGBM_MODEL,  # the booster (None: a single class, constant score)
    }

    def __init__(
        self,
        features="baseline",
        num_boost_round: int = 100,
        num_leaves: int = 7,
        max_depth: int = 3,
        learning_rate: float = 0.05,
        min_data_in_leaf: int = 10,
        lambda_l2: float = 1.0,
    ):
        super().__init__(features)
        self.num_boost_round = _positive(num_boost_round, "policy.num_boost_round", integer=True, high=MAX_BOOST_ROUNDS)
        self.num_leaves = _positive(num_leaves, "policy.num_leaves", integer=True, high=MAX_LEAVES)
        self.max_depth = _positive(max_depth, "policy.max_depth", integer=True, high=MAX_DEPTH)
        self.learning_rate = _positive(learning_rate, "policy.learning_rate", high=MAX_LEARNING_RATE)
        self.min_data_in_leaf = _positive(min_data_in_leaf, "policy.min_data_in_leaf", integer=True, high=MAX_MIN_DATA)
        if not isinstance(lambda_l2, (int, float)) or isinstance(lambda_l2, bool) or not 0 <= lambda_l2 <= MAX_PENALTY:
            raise ConfigError("policy.lambda_l2", f"expected a finite number in [0, {MAX_PENALTY:g}], got {lambda_l2!r}")
        self.lambda_l2 = lambda_l2

    def _params(self, seed: int) -> dict[str, Any]:
        return {
            "num_leaves": int(self.num_leaves),
            "max_depth": int(self.max_depth),
            "learning_rate": float(self.learning_rate),
            "min_data_in_leaf": int(self.min_data_in_leaf),
            "lambda_l2": float(self.lambda_l2),
            "deterministic": True,
            "force_row_wise": True,
            "num_threads": 1,
            "seed": int(seed),
            "verbose": -1,
            "feature_pre_filter": False,
        }

    def fit(self, X, delta, groups=None, seed: int = 0) -> "GBMPolicy":
        import lightgbm as lgb

        arr, d = self._prepare_fit(X, delta)
        y = self._class_labels(d)
        self.medians_ = column_medians(arr)
        self.seed_ = int(seed)
        self.params_ = self._params(seed)
        model = None
        k = len(self.classes_)
        if k >= 2:
            params = self._params(seed)
            if k == 2:
                params["objective"] = "binary"
                label = (y == self.classes_[1]).astype(float)
            else:
                params["objective"] = "multiclass"
                params["num_class"] = k
                label = np.searchsorted(self.classes_, y).astype(float)
            data = lgb.Dataset(impute(arr, self.medians_), label=label, params={"verbose": -1}, free_raw_data=True)
            booster = lgb.train(params, data, num_boost_round=int(self.num_boost_round))
            # Score with the booster rebuilt from its own text, exactly what the frozen state holds.
            model = lgb.Booster(model_str=booster.model_to_string())
        self.model_ = model  # last: a fit that fails before here leaves no model behind
        return self

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities, columns in the order of ``classes_``."""
        arr = self._prepare_score(X)
        if self.model_ is None:
            return np.ones((len(arr), 1))
        pred = np.asarray(self.model_.predict(impute(arr, self.medians_), num_threads=1), dtype=float)
        if len(self.classes_) == 2:
            return np.column_stack([1.0 - pred, pred])
        return pred.reshape(len(arr), len(self.classes_))

    def score(self, X: pd.DataFrame, ctx: ScoreContext) -> np.ndarray:
        return self._score_from_proba(self.predict_proba(X))
