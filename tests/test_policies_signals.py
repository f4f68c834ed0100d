"""Single-signal routers: orientation, missing values, one config per feature."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from scipy.stats import spearmanr

from harness.errors import ConfigError, HarnessError
from harness.retrieval.feature_names import FEATURE_SETS
from harness.task import RoutingTask
from policies.base import ScoreContext
from policies.registry import builtin_policy_configs, default_conf_dir
from policies.signals import SIGNAL_SIGNS, SingleSignalPolicy

SIGNAL_FEATURES = FEATURE_SETS["baseline"] + FEATURE_SETS["bm25"] + FEATURE_SETS["qpp"] + FEATURE_SETS["uncertainty"]


def _ctx(n):
    return ScoreContext(qids=np.array([f"q{i}" for i in range(n)]))


def test_score_is_sign_times_feature_and_nan_takes_fit_median():
    X = pd.DataFrame({"dense_top1": [0.9, 0.5, np.nan, 0.7, np.inf]})
    pol = SingleSignalPolicy("dense_top1")
    assert pol.sign == -1 and pol.features == ("dense_top1",)
    assert pol.trainable  # so that the harness fits the imputation median on development data
    pol.fit(X, np.zeros(5), np.array(["d"] * 5))
    assert pol.median_ == pytest.approx(0.7)  # median of the finite values 0.9, 0.5, 0.7
    assert pol.n_imputed_ == 2
    np.testing.assert_allclose(pol.score(X, _ctx(5)), [-0.9, -0.5, -0.7, -0.7, -0.7])
    assert pol.n_imputed_scored_ == 2


def test_unfitted_nan_scores_zero_and_state_round_trip():
    X = pd.DataFrame({"rerank_top1_dense_rank": [1.0, 11.0, np.nan]})
    pol = SingleSignalPolicy("rerank_top1_dense_rank")
    np.testing.assert_array_equal(pol.score(X, _ctx(3)), [1.0, 11.0, 0.0])
    assert pol.get_state() == {}
    pol.fit(pd.DataFrame({"rerank_top1_dense_rank": [2.0, 4.0, 9.0]}), np.zeros(3), None)
    state = json.loads(json.dumps(pol.get_state()))
    other = SingleSignalPolicy("rerank_top1_dense_rank")
    other.set_state(state)
    np.testing.assert_array_equal(other.score(X, _ctx(3)), [1.0, 11.0, 4.0])
    with pytest.raises(HarnessError, match="state is for feature"):
        SingleSignalPolicy("dense_top1").set_state(state)


def test_bad_sign_and_unknown_feature_without_sign():
    with pytest.raises(ConfigError, match="policy.sign"):
        SingleSignalPolicy("dense_top1", sign=2)
    with pytest.raises(ConfigError, match="policy.sign"):
        SingleSignalPolicy("my_feature")
    assert SingleSignalPolicy("my_feature", sign=1).sign == 1
    with pytest.raises(ConfigError, match="policy.feature"):
        SingleSignalPolicy("")


def test_one_config_per_signal_feature_with_the_table_sign():
    configs = builtin_policy_configs(default_conf_dir())
    assert set(SIGNAL_SIGNS) == set(SIGNAL_FEATURES)
    for feature in SIGNAL_FEATURES:
        cfg = configs[f"signal_{feature}"]
        assert cfg["name"] == f"signal_{feature}"
        assert cfg["_target_"] == "policies.signals.SingleSignalPolicy"
        assert cfg["feature"] == feature and cfg["sign"] == SIGNAL_SIGNS[feature]
    # the documented orientation for the keep-vs-hybrid pair
    assert SIGNAL_SIGNS["dense_top1"] == -1 and SIGNAL_SIGNS["rerank_top1_dense_rank"] == 1
    assert all(SIGNAL_SIGNS[f] == -1 for f in FEATURE_SETS["qpp"] if f.endswith("_dense"))
    assert all(SIGNAL_SIGNS[f] == 1 for f in FEATURE_SETS["qpp"] if f.endswith("_bm25"))
    assert all(SIGNAL_SIGNS[f] == 1 for f in FEATURE_SETS["uncertainty"])  # unsure from memory: retrieve


def test_oriented_signals_rank_rescues_high_on_planted_table(planted_table):
    # The synthetic latent lowers dense_top1 / overlap and raises the dense rank of the
    # reranked top-1 when hybrid helps: every oriented signal must correlate positively.
    task = RoutingTask.from_table(planted_table)
    for feature in ("dense_top1", "dense_mean_top5", "overlap_dense_rerank10", "rerank_top1_dense_rank"):
        pol = SingleSignalPolicy(feature)
        X = task.feature_matrix(pol.features)
        pol.fit(X, task.delta, task.groups)
        rho = spearmanr(pol.score(X, ScoreContext(qids=task.qids)), task.delta).statistic
        assert rho > 0.3, (feature, rho)


def test_signal_yaml_is_valid_hydra_config():
    path = default_conf_dir() / "policy" / "signal_dense_top1.yaml"
    cfg = OmegaConf.load(path)
    assert cfg.sign == -1 and cfg.feature == "dense_top1"
