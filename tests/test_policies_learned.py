"""Learned routers: signal recovery, independent checks of the numbers, degenerate data, state."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from harness.errors import ConfigError, FeatureError, HarnessError
from harness.retrieval.feature_names import BASELINE
from harness.task import RoutingTask
from policies.base import ScoreContext
from policies.builtin import RandomPolicy
from policies.learned import GBMPolicy, LogisticPolicy, QPPRouter, RidgePolicy

LEARNED = (RidgePolicy, LogisticPolicy, GBMPolicy)


@pytest.fixture
def task(planted_table):
    return RoutingTask.from_table(planted_table)


def _split(task):
    """Fit on even-numbered documents, test on odd ones (grouped by document)."""
    even = np.array([int(g[3:]) % 2 == 0 for g in task.groups])
    return task.take(np.flatnonzero(even)), task.take(np.flatnonzero(~even))


def _fit_score(policy, train, test, seed=0):
    policy.fit(train.feature_matrix(policy.features), train.delta, train.groups, seed=seed)
    return policy.score(test.feature_matrix(policy.features), ScoreContext(qids=test.qids, seed=seed))


@pytest.mark.parametrize("cls", LEARNED)
def test_recovers_planted_signal_better_than_random(task, cls):
    train, test = _split(task)
    s = _fit_score(cls(), train, test)
    rho = spearmanr(s, test.delta).statistic
    rho_random = spearmanr(RandomPolicy().score(test.feature_matrix(()), ScoreContext(qids=test.qids)), test.delta).statistic
    assert rho > 0.35, rho
    assert rho > rho_random + 0.25, (rho, rho_random)


def test_qpp_router_reads_qpp_features_only(task):
    pol = QPPRouter()
    assert pol.features and all(f.startswith("qpp_") for f in pol.features)
    train, test = _split(task)
    s = _fit_score(pol, train, test)
    assert s.shape == (test.n,) and np.all(np.isfinite(s))
    # in the synthetic table QPP features are pure noise: no real signal to recover
    assert abs(spearmanr(s, test.delta).statistic) < 0.3


def _with_bad_values(X: pd.DataFrame) -> pd.DataFrame:
    X = X.copy()
    X.iloc[0, 0] = np.nan
    X.iloc[1, 0] = np.inf
    X.iloc[2, 1] = -np.inf
    return X


def test_ridge_coefficients_equal_closed_form(task):
    X = _with_bad_values(task.feature_matrix(BASELINE))
    y = task.delta
    pol = RidgePolicy().fit(X, y, task.groups)
    # independent: inf -> NaN -> nanmedian, population-std standardisation, closed-form ridge
    A = X.to_numpy(dtype=float).copy()
    A[~np.isfinite(A)] = np.nan
    med = np.nanmedian(A, axis=0)
    A = np.where(np.isnan(A), med, A)
    Z = (A - A.mean(axis=0)) / A.std(axis=0)
    coef = np.linalg.solve(Z.T @ Z + 20.0 * np.eye(Z.shape[1]), Z.T @ (y - y.mean()))
    np.testing.assert_allclose(pol.coef_, coef, rtol=1e-9, atol=1e-12)
    assert pol.intercept_ == pytest.approx(y.mean(), abs=1e-12)
    s = pol.score(X, ScoreContext(qids=task.qids))
    np.testing.assert_allclose(s, Z @ coef + y.mean(), rtol=1e-9, atol=1e-12)
    assert pol.n_imputed_ == 3 and pol.get_state()["n_imputed"] == 3


def test_logistic_score_is_p_plus_minus_p_minus_from_sklearn(task):
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = task.feature_matrix(BASELINE)
    pol = LogisticPolicy().fit(X, task.delta, task.groups)
    ref = make_pipeline(
        SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression(C=1.0, max_iter=1000)
    ).fit(X.to_numpy(), task.delta_class)
    proba = ref.predict_proba(X.to_numpy())
    classes = list(ref.classes_)
    assert classes == [-1, 0, 1]
    expected = proba[:, classes.index(1)] - proba[:, classes.index(-1)]
    np.testing.assert_allclose(pol.score(X, ScoreContext(qids=task.qids)), expected, rtol=1e-9, atol=1e-12)


def test_gbm_probabilities_match_lightgbm_and_are_deterministic(task):
    import lightgbm as lgb

    X = task.feature_matrix(BASELINE)
    a = GBMPolicy().fit(X, task.delta, task.groups, seed=3)
    b = GBMPolicy().fit(X, task.delta, task.groups, seed=3)
    sa = a.score(X, ScoreContext(qids=task.qids))
    np.testing.assert_array_equal(sa, b.score(X, ScoreContext(qids=task.qids)))
    assert a.get_state()["model"] == b.get_state()["model"]
    # independent: train LightGBM directly with the documented parameters
    params = dict(a.get_state()["params"], objective="multiclass", num_class=3)
    booster = lgb.train(params, lgb.Dataset(X.to_numpy(), label=task.delta_class + 1.0), num_boost_round=100)
    p = booster.predict(X.to_numpy())
    np.testing.assert_allclose(sa, p[:, 2] - p[:, 0], rtol=1e-9, atol=1e-12)
    assert np.all(np.abs(sa) <= 1)


def _degenerate_delta(n: int, values: tuple[int, ...]) -> np.ndarray:
    return np.array([values[i % len(values)] for i in range(n)], dtype=float)


@pytest.mark.parametrize("cls", LEARNED)
@pytest.mark.parametrize(
    "values",
    [(0, 0, 0, 1), (0, 0, 0, -1), (0,), (1,), (-1,)],
    ids=["no_harms", "no_rescues", "only_zero", "only_plus", "only_minus"],
)
def test_degenerate_class_sets_give_finite_scores(task, cls, values):
    X = task.feature_matrix(BASELINE)
    delta = _degenerate_delta(task.n, values)
    pol = cls().fit(X, delta, task.groups)
    s = pol.score(X, ScoreContext(qids=task.qids))
    assert s.shape == (task.n,) and np.all(np.isfinite(s))
    if cls is not RidgePolicy:
        if len(set(values)) == 1:  # one class c: every question scores c
            np.testing.assert_array_equal(s, np.full(task.n, float(values[0])))
        elif -1 not in values:  # no harms: score = P(+1) in [0, 1]
            assert np.all((s >= 0) & (s <= 1)) and s.std() > 0
        else:  # no rescues: score = -P(-1) in [-1, 0]
            assert np.all((s <= 0) & (s >= -1)) and s.std() > 0
    else:
        if len(set(values)) == 1:  # constant target: ridge predicts it exactly
            np.testing.assert_allclose(s, float(values[0]), atol=1e-12)


@pytest.mark.parametrize("cls", LEARNED)
def test_all_nan_column_and_inf_values_are_imputed_and_counted(task, cls):
    X = task.feature_matrix(BASELINE).copy()
    X["dense_margin12"] = np.nan
    X.iloc[:5, 0] = np.inf
    X.iloc[5:7, 3] = -np.inf
    pol = cls().fit(X, task.delta, task.groups)
    assert pol.n_imputed_ == task.n + 7
    assert pol.get_state()["n_imputed"] == task.n + 7
    s = pol.score(X, ScoreContext(qids=task.qids))
    assert np.all(np.isfinite(s))
    assert pol.n_imputed_scored_ == task.n + 7
    # the all-NaN column is imputed with 0.0 (documented), never dropped
    assert pol.medians_[1] == 0.0 and len(pol.medians_) == len(BASELINE)


@pytest.mark.parametrize("cls", LEARNED + (QPPRouter,))
@pytest.mark.parametrize("values", [None, (0, 0, 0, 1), (0,)], ids=["planted", "two_classes", "one_class"])
def test_state_round_trip_scores_identically(task, cls, values):
    train, test = _split(task)
    delta = train.delta if values is None else _degenerate_delta(train.n, values)
    pol = cls()
    pol.fit(train.feature_matrix(pol.features), delta, train.groups, seed=5)
    state = json.loads(json.dumps(pol.get_state(), allow_nan=False))
    rebuilt = cls()
    rebuilt.set_state(state)
    X = test.feature_matrix(pol.features)
    ctx = ScoreContext(qids=test.qids)
    np.testing.assert_array_equal(rebuilt.score(X, ctx), pol.score(X, ctx))
    assert rebuilt.get_state() == state


def test_state_for_other_features_is_refused(task):
    pol = RidgePolicy().fit(task.feature_matrix(BASELINE), task.delta, task.groups)
    other = RidgePolicy(features="bm25")
    with pytest.raises(HarnessError, match="fitted on features"):
        other.set_state(pol.get_state())
    with pytest.raises(HarnessError, match="kind"):
        LogisticPolicy().set_state(pol.get_state())


def test_unfitted_and_bad_fit_inputs_are_clear_errors(task):
    X = task.feature_matrix(BASELINE)
    with pytest.raises(HarnessError, match="before fit"):
        RidgePolicy().score(X, ScoreContext(qids=task.qids))
    with pytest.raises(HarnessError, match="delta values"):
        RidgePolicy().fit(X, task.delta[:-1], task.groups)
    bad = task.delta.copy()
    bad[0] = np.nan
    with pytest.raises(HarnessError, match="non-finite"):
        LogisticPolicy().fit(X, bad, task.groups)


def test_hyperparameters_are_validated():
    with pytest.raises(ConfigError, match="policy.alpha"):
        RidgePolicy(alpha=0)
    with pytest.raises(ConfigError, match="policy.num_leaves"):
        GBMPolicy(num_leaves=2.5)
    with pytest.raises(ConfigError, match="policy.C"):
        LogisticPolicy(C=-1)


def test_missing_feature_is_a_feature_error_naming_feature_and_table(planted_table):
    table = planted_table.drop(columns=["feat.dense_top1"])
    task = RoutingTask.from_table(table, source="outcomes.parquet")
    pol = RidgePolicy()
    with pytest.raises(FeatureError) as err:
        task.feature_matrix(pol.features)
    assert "dense_top1" in str(err.value) and "outcomes.parquet" in str(err.value)
    # a frame handed to the policy directly without the column: the policy names itself
    with pytest.raises(FeatureError, match="'ridge'.*dense_top1"):
        pol.fit(task.features, task.delta, task.groups)
