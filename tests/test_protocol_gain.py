"""Protocol C: selective-use metrics by hand, correlations vs scipy, Williams comparison,
planted signal ordering, continuous gain, determinism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from harness.protocols import compare_policies_williams, run_gain_protocol
from harness.protocols.gain import selective_metrics
from harness.stats import williams_test
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.test_protocol_policies import ConstantPolicy, LstsqPolicy, OraclePolicy, RandomPolicy


def _task(n_docs=60, seed=0):
    return RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed))


def test_selective_metrics_hand_case():
    scores = np.array([0.5, -0.2, 0.1, -1.0, 0.0])
    base = np.array([0, 1, 1, 0, 1.0])
    extra = np.array([1, 0, 1, 1, 0.0])
    # ran: T F T F F -> chosen 1,1,1,0,1 = 0.8; correct: T(1>=0) T(1>=0) T(tie) F(0<1) T(1>=0) = 0.8
    # Q(extra)=0.6, Q(oracle)=mean(1,1,1,1,1)=1.0 -> gap closed (0.8-0.6)/(1.0-0.6) = 0.5
    m = selective_metrics(scores, base, extra, threshold=0.0)
    assert m["quality"] == pytest.approx(0.8)
    assert m["decision_accuracy"] == pytest.approx(0.8)
    assert m["gap_closed"] == pytest.approx(0.5)
    assert m["extra_share"] == pytest.approx(0.4)
    assert math.isnan(selective_metrics(scores, base, np.maximum(base, extra))["gap_closed"])


def test_correlations_and_decisions_match_scipy():
    res = run_gain_protocol(_task(), LstsqPolicy, seed=1)
    d = res.tables["decisions"]
    assert res.metrics["gain/pearson"] == pytest.approx(sps.pearsonr(d.score, d.gain).statistic)
    assert res.metrics["gain/spearman"] == pytest.approx(sps.spearmanr(d.score, d.gain).statistic)
    assert res.metrics["gain/kendall"] == pytest.approx(sps.kendalltau(d.score, d.gain).statistic)
    assert res.metrics["gain/kendall_p"] == pytest.approx(sps.kendalltau(d.score, d.gain).pvalue)
    chosen = np.where(d.ran_extra, d.extra, d.base)
    assert res.metrics["gain/selective/quality"] == pytest.approx(chosen.mean())
    assert res.metrics["n/fit"] + res.metrics["n/test"] == 300
    assert "gap closed" in res.summary()


def test_constant_policy_has_nan_correlation_not_an_error():
    res = run_gain_protocol(_task(), ConstantPolicy, seed=0)
    assert math.isnan(res.metrics["gain/pearson"]) and math.isnan(res.metrics["gain/kendall"])
    assert res.metrics["gain/selective/extra_share"] == 0.0


def test_compare_policies_williams():
    rng = np.random.default_rng(0)
    gain = rng.normal(size=200)
    a = gain + rng.normal(size=200)
    b = gain + 3 * rng.normal(size=200)
    out = compare_policies_williams(a, b, gain)
    r_a, r_b, r_ab = np.corrcoef([a, b, gain])[[0, 1, 0], [2, 2, 1]]
    assert (out["r_a"], out["r_b"], out["r_ab"]) == pytest.approx((r_a, r_b, r_ab))
    assert (out["t"], out["p"]) == pytest.approx(williams_test(r_a, r_b, r_ab, 200))
    assert out["t"] > 0 and out["p"] < 0.01  # a is clearly the better predictor


def test_planted_signal_ordering():
    task = _task(n_docs=200, seed=1)
    r = {name: run_gain_protocol(task, f, seed=0).metrics for name, f in
         (("oracle", OraclePolicy), ("trained", LstsqPolicy), ("random", RandomPolicy))}
    assert r["oracle"]["gain/pearson"] > r["trained"]["gain/pearson"] > r["random"]["gain/pearson"]
    assert r["oracle"]["gain/selective/gap_closed"] == pytest.approx(1.0)
    assert r["oracle"]["gain/selective/decision_accuracy"] == 1.0


def test_continuous_gain_is_log_ratio():
    t = _task()
    rng = np.random.default_rng(0)
    cont = RoutingTask(t.qids, t.groups, rng.random(t.n), rng.random(t.n), t.features, metric="f1", continuous=True)
    res = run_gain_protocol(cont, OraclePolicy, seed=0)
    d = res.tables["decisions"]
    np.testing.assert_allclose(d.gain, np.log((d.extra + 0.01) / (d.base + 0.01)))
    # the oracle's delta has the sign of the log ratio: every decision is right
    assert res.metrics["gain/selective/decision_accuracy"] == 1.0
    assert res.metrics["gain/selective/gap_closed"] == pytest.approx(1.0)


def test_deterministic():
    a = run_gain_protocol(_task(), LstsqPolicy, seed=3)
    b = run_gain_protocol(_task(), LstsqPolicy, seed=3)
    assert a.metrics == b.metrics
    pd.testing.assert_frame_equal(a.tables["decisions"], b.tables["decisions"])
