"""n-way policies: one score per arm of a set (docs/metrics.md §14, docs/policies.md).

An n-way policy predicts, per question, how good each arm is (its outcome, or the probability
that it is the cheapest arm that succeeds). It never decides: the harness routes each question to
argmax(score - lam * cost) with lam frozen or calibrated to a budget, exactly as a binary policy
only ranks questions and the harness picks its threshold.

Scoring applies the numbers kept in the state (linear predictors summed without BLAS, LightGBM
boosters from their model text), so a policy rebuilt from its frozen JSON state scores
bit-identically to the one that was fitted.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit

from harness.errors import ConfigError, HarnessError
from policies.base import FLOAT, INT, JSON, MATRIX, NAMES, STR, FLOATS, Policy, ScoreContext
from policies.builtin import resolve_features, uniform_from_seed
from policies.learned import MAX_BOOST_ROUNDS, MAX_PENALTY, _positive
from policies.preprocess import column_medians, count_missing, feature_array, impute, linear_predictor


@dataclass(frozen=True)
class ArmScoreContext:
    """What an n-way policy may know besides the features: the question ids, the seed, and (for
    the oracle only, never deployable) the true outcome of every arm."""

    qids: np.ndarray
    arms: tuple[str, ...]
    seed: int = 0
    true_outcomes: np.ndarray | None = None


class ArmPolicy(Policy):
    """Base class of n-way policies: ``fit_arms`` learns from every arm's outcomes and costs,
    ``score_arms`` returns an (n questions x k arms) float matrix, larger = better arm."""

    n_way: ClassVar[bool] = True

    def fit(self, X, delta, groups=None, seed: int = 0):
        raise HarnessError(f"policy {self.name!r} scores arms (n-way); route it with arms.route and protocol=arms")

    def score(self, X, ctx: ScoreContext):
        raise HarnessError(f"policy {self.name!r} scores arms (n-way); route it with arms.route and protocol=arms")

    def fit_arms(self, X: pd.DataFrame, outcomes: np.ndarray, costs: np.ndarray, groups, seed: int = 0) -> "ArmPolicy":
        """Learn from development questions (default: nothing to learn)."""
        return self

    @abc.abstractmethod
    def score_arms(self, X: pd.DataFrame, ctx: ArmScoreContext) -> np.ndarray:
        """One float per question and arm (columns in ``ctx.arms`` order)."""


def check_arm_fit_inputs(policy: ArmPolicy, X: pd.DataFrame, outcomes, costs) -> tuple[np.ndarray, np.ndarray]:
    """Outcomes and costs as (n, k) float arrays aligned with X, finite (HarnessError naming the policy)."""
    y = np.asarray(outcomes, dtype=float)
    c = np.asarray(costs, dtype=float)
    if y.ndim != 2 or y.shape[0] != len(X) or y.shape[1] < 2 or c.shape != y.shape:
        raise HarnessError(f"policy {policy.name!r}: fit_arms needs (questions x arms) outcomes and costs for "
                           f"{len(X)} questions, got {y.shape} and {c.shape}")
    if not (np.isfinite(y).all() and np.isfinite(c).all()):
        raise HarnessError(f"policy {policy.name!r}: fit_arms got non-finite outcomes or costs")
    return y, c


class _LearnedArms(ArmPolicy):
    """Shared bookkeeping: features, imputation, standardisation (one per policy, all arms)."""

    trainable = True
    kind = "arms"
    state_params = {"kind": STR, "features": NAMES}
    fitted_attributes = {"n_arms": INT, "n_train": INT, "n_imputed": INT, "medians": FLOATS, "mean": FLOATS,
                         "scale": FLOATS}

    def __init__(self, features="baseline"):
        self.features = resolve_features(features)

    def _design(self, X: pd.DataFrame, outcomes, costs) -> tuple[np.ndarray, np.ndarray]:
        y, _ = check_arm_fit_inputs(self, X, outcomes, costs)
        arr = feature_array(X, self.features, self.name)
        self.n_imputed_ = count_missing(arr)
        self.n_train_ = len(arr)
        self.n_arms_ = y.shape[1]
        self.medians_ = column_medians(arr)
        filled = impute(arr, self.medians_)
        self.mean_ = filled.mean(axis=0)
        scale = filled.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)  # as StandardScaler: a constant column is left at 0
        return (filled - self.mean_) / self.scale_, y

    def _standardised(self, X: pd.DataFrame, ctx: ArmScoreContext) -> np.ndarray:
        if not self.is_fitted():
            raise HarnessError(f"policy {self.name!r} ({type(self).__name__}) scored before fit_arms() or set_state()")
        if len(ctx.arms) != self.n_arms_:
            raise HarnessError(f"policy {self.name!r} was fitted on {self.n_arms_} arms, scored with {len(ctx.arms)}")
        arr = feature_array(X, self.features, self.name)
        if arr.shape[1] != len(self.medians_):
            raise HarnessError(f"policy {self.name!r} was fitted on {len(self.medians_)} feature columns, "
                               f"the scored frame has {arr.shape[1]}")
        return (impute(arr, self.medians_) - self.mean_) / self.scale_


class ArmRidge(_LearnedArms):
    """One ridge regression per arm on the arm's outcome (standardised features, alpha 20):
    score = the arm's predicted outcome."""

    name = "arm_ridge"
    kind = "arm_ridge"
    state_params = {**_LearnedArms.state_params, "alpha": FLOAT}
    fitted_attributes = {**_LearnedArms.fitted_attributes, "coef": MATRIX, "intercept": FLOATS}

    def __init__(self, features="baseline", alpha: float = 20.0):
        super().__init__(features)
        self.alpha = _positive(alpha, "policy.alpha", high=MAX_PENALTY, low=1 / MAX_PENALTY)

    def fit_arms(self, X, outcomes, costs, groups=None, seed: int = 0) -> "ArmRidge":
        from sklearn.linear_model import Ridge

        z, y = self._design(X, outcomes, costs)
        model = Ridge(alpha=float(self.alpha)).fit(z, y)
        self.coef_ = np.asarray(model.coef_, dtype=float).reshape(y.shape[1], z.shape[1])
        self.intercept_ = np.asarray(model.intercept_, dtype=float).reshape(-1)
        return self

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        return linear_predictor(self._standardised(X, ctx), self.coef_, self.intercept_)


class ArmLogistic(_LearnedArms):
    """One logistic regression per arm on its 0/1 outcome (C 1.0): score = P(the arm succeeds).
    An arm that succeeds on every development question (or on none) gets that constant."""

    name = "arm_logistic"
    kind = "arm_logistic"
    state_params = {**_LearnedArms.state_params, "C": FLOAT}
    fitted_attributes = {**_LearnedArms.fitted_attributes, "coef": MATRIX, "intercept": FLOATS}

    def __init__(self, features="baseline", C: float = 1.0):
        super().__init__(features)
        self.C = _positive(C, "policy.C", high=MAX_PENALTY, low=1 / MAX_PENALTY)

    def fit_arms(self, X, outcomes, costs, groups=None, seed: int = 0) -> "ArmLogistic":
        from sklearn.linear_model import LogisticRegression

        z, y = self._design(X, outcomes, costs)
        if not np.isin(y, (0.0, 1.0)).all():
            raise HarnessError(f"policy {self.name!r} needs 0/1 outcomes (a hit, a correct answer); use arm_ridge")
        coef, intercept = np.zeros((y.shape[1], z.shape[1])), np.zeros(y.shape[1])
        for j in range(y.shape[1]):
            if y[:, j].min() == y[:, j].max():  # one class: the constant log-odds of +-36 (expit saturates)
                intercept[j] = 36.0 if y[0, j] == 1 else -36.0
                continue
            model = LogisticRegression(C=float(self.C), max_iter=1000).fit(z, y[:, j].astype(int))
            coef[j], intercept[j] = model.coef_.reshape(-1), float(model.intercept_[0])
        self.coef_, self.intercept_ = coef, intercept
        return self

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        return expit(linear_predictor(self._standardised(X, ctx), self.coef_, self.intercept_))


class ArmGBM(_LearnedArms):
    """One LightGBM regressor per arm on its outcome (deterministic, row-wise, one thread, seeded
    from ``fit_arms``' seed): score = the arm's predicted outcome."""

    name = "arm_gbm"
    kind = "arm_gbm"
    state_params = {**_LearnedArms.state_params, "num_boost_round": INT}
    fitted_attributes = {**_LearnedArms.fitted_attributes, "models": JSON}

    def __init__(self, features="baseline", num_boost_round: int = 100):
        super().__init__(features)
        self.num_boost_round = _positive(num_boost_round, "policy.num_boost_round", integer=True, high=MAX_BOOST_ROUNDS)

    def fit_arms(self, X, outcomes, costs, groups=None, seed: int = 0) -> "ArmGBM":
        import lightgbm as lgb

        _, y = self._design(X, outcomes, costs)
        arr = impute(feature_array(X, self.features, self.name), self.medians_)
        params = {"objective": "regression", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20,
                  "lambda_l2": 1.0, "deterministic": True, "force_row_wise": True, "num_threads": 1,
                  "seed": int(seed), "verbose": -1}
        self.models_ = [lgb.train(params, lgb.Dataset(arr, label=y[:, j], params={"verbose": -1}),
                                  num_boost_round=int(self.num_boost_round)).model_to_string()
                        for j in range(y.shape[1])]
        return self

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        import lightgbm as lgb

        self._standardised(X, ctx)  # the fitted and shape checks
        arr = impute(feature_array(X, self.features, self.name), self.medians_)
        return np.column_stack([lgb.Booster(model_str=m).predict(arr, num_threads=1) for m in self.models_])


class ArmKNN(_LearnedArms):
    """RouterBench's kNN router: an arm's score is its mean outcome over the ``k`` development
    questions nearest in standardised features (Euclidean; ties to the earlier question)."""

    name = "arm_knn"
    kind = "arm_knn"
    state_params = {**_LearnedArms.state_params, "k": INT}
    fitted_attributes = {**_LearnedArms.fitted_attributes, "points": MATRIX, "outcomes": JSON}

    def __init__(self, features="baseline", k: int = 25):
        super().__init__(features)
        self.k = _positive(k, "policy.k", integer=True, high=100_000)

    def fit_arms(self, X, outcomes, costs, groups=None, seed: int = 0) -> "ArmKNN":
        z, y = self._design(X, outcomes, costs)
        self.points_, self.outcomes_ = z, [[float(v) for v in row] for row in y]
        return self

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        z = self._standardised(X, ctx)
        pts, y = np.asarray(self.points_, dtype=float), np.asarray(self.outcomes_, dtype=float)
        k = min(int(self.k), len(pts))
        out = np.empty((len(z), y.shape[1]))
        for i, row in enumerate(z):
            d = ((pts - row) ** 2).sum(axis=1)
            nearest = np.argsort(d, kind="stable")[:k]
            out[i] = y[nearest].mean(axis=0)
        return out


class CheapestSuffices(_LearnedArms):
    """Adaptive-RAG's classifier, over arms: the label of a development question is the cheapest
    arm (by mean development cost) whose outcome is the question's best; a multinomial logistic
    regression on query features predicts it, and an arm's score is its predicted probability."""

    name = "cheapest_suffices"
    kind = "cheapest_suffices"
    state_params = {**_LearnedArms.state_params, "C": FLOAT}
    fitted_attributes = {**_LearnedArms.fitted_attributes, "coef": MATRIX, "intercept": FLOATS}

    def __init__(self, features="query", C: float = 1.0):
        super().__init__(features)
        self.C = _positive(C, "policy.C", high=MAX_PENALTY, low=1 / MAX_PENALTY)

    def fit_arms(self, X, outcomes, costs, groups=None, seed: int = 0) -> "CheapestSuffices":
        from sklearn.linear_model import LogisticRegression

        z, y = self._design(X, outcomes, costs)
        label = cheapest_best_arm(y, np.asarray(costs, dtype=float).mean(axis=0))
        coef, intercept = np.zeros((y.shape[1], z.shape[1])), np.full(y.shape[1], -36.0)
        seen = np.unique(label)
        if len(seen) == 1:
            intercept[seen[0]] = 36.0
        else:
            model = LogisticRegression(C=float(self.C), max_iter=1000).fit(z, label)
            rows = model.coef_ if len(seen) > 2 else np.vstack([-model.coef_[0] / 2, model.coef_[0] / 2])
            icpt = model.intercept_ if len(seen) > 2 else np.array([-model.intercept_[0] / 2, model.intercept_[0] / 2])
            coef[seen], intercept[seen] = rows, icpt
        self.coef_, self.intercept_ = coef, intercept
        return self

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        logits = linear_predictor(self._standardised(X, ctx), self.coef_, self.intercept_)
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)


def cheapest_best_arm(outcomes: np.ndarray, arm_costs: np.ndarray) -> np.ndarray:
    """Per question, the cheapest arm (by ``arm_costs``, then the earlier arm) among those with
    the question's best outcome."""
    y = np.asarray(outcomes, dtype=float)
    best = y == y.max(axis=1, keepdims=True)
    key = np.where(best, np.asarray(arm_costs, dtype=float)[None, :], np.inf)
    return np.argmin(key, axis=1)  # argmin takes the first of equal minima: the earlier arm


class ArmOracle(ArmPolicy):
    """score = each arm's true outcome: the best arm per question (the harness's rule then takes
    the cheapest of equal ones). Upper bound only, never deployable."""

    name = "arm_oracle"
    oracle = True
    requires_fit = False

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        if ctx.true_outcomes is None:
            raise HarnessError("policy 'arm_oracle' needs the true outcomes (the harness gives them to oracles only)")
        return np.asarray(ctx.true_outcomes, dtype=float).copy()


class ArmRandom(ArmPolicy):
    """i.i.d. uniform scores per (seed, question, arm): the floor a router must beat."""

    name = "arm_random"
    requires_fit = False

    def __init__(self, seed_offset: int = 0):
        if not isinstance(seed_offset, int) or isinstance(seed_offset, bool) or not 0 <= seed_offset < 2**31:
            raise ConfigError("policy.seed_offset", f"expected an integer in [0, 2**31), got {seed_offset!r}")
        self.seed_offset = seed_offset

    def score_arms(self, X, ctx: ArmScoreContext) -> np.ndarray:
        """Each (question, arm) its own draw (``uniform_from_seed`` of "<qid>\x00<arm>"): the same
        score in whichever fold, subset or order the question is scored, as the binary random."""
        if len(ctx.qids) != len(X):
            raise HarnessError(f"arm_random: {len(X)} rows but {len(ctx.qids)} question ids")
        return np.column_stack([uniform_from_seed(int(ctx.seed), [f"{q}\x00{arm}" for q in ctx.qids],
                                                  stream=self.seed_offset) for arm in ctx.arms])
