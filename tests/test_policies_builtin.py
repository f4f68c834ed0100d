"""Reference policies: constants, random, oracle."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from harness.errors import ConfigError, HarnessError
from harness.task import RoutingTask
from policies.base import ScoreContext
from policies.builtin import AlwaysBase, AlwaysExtra, OraclePolicy, RandomPolicy, resolve_features


@pytest.fixture
def task(planted_table):
    return RoutingTask.from_table(planted_table)


def _ctx(task, seed=0, oracle=False):
    return ScoreContext(qids=task.qids, seed=seed, true_delta=task.delta if oracle else None)


def test_constants(task):
    X = task.feature_matrix(AlwaysBase().features)
    assert X.shape == (task.n, 0)
    np.testing.assert_array_equal(AlwaysBase().score(X, _ctx(task)), np.full(task.n, -1.0))
    np.testing.assert_array_equal(AlwaysExtra().score(X, _ctx(task)), np.full(task.n, 1.0))
    assert not AlwaysBase.trainable and AlwaysBase().get_state() == {}


def test_random_matches_independent_hash_and_is_uniform(task):
    X = task.feature_matrix(())
    s = RandomPolicy().score(X, _ctx(task, seed=7))
    # independent recomputation of the documented rule for the first three questions
    for i in range(3):
        h = hashlib.blake2b(f"7\x000\x00{task.qids[i]}".encode(), digest_size=8).digest()  # seed 7, stream 0
        assert s[i] == (int.from_bytes(h, "big") >> 11) / 2**53
    assert np.all((s >= 0) & (s < 1))
    # 300 draws: mean of U(0,1) within 4 standard errors of 0.5
    assert abs(s.mean() - 0.5) < 4 * np.sqrt(1 / 12 / task.n)


def test_random_reproducible_differs_across_seeds_and_subset_independent(task):
    pol = RandomPolicy()
    X = task.feature_matrix(())
    a = pol.score(X, _ctx(task, seed=1))
    b = pol.score(X, _ctx(task, seed=1))
    c = pol.score(X, _ctx(task, seed=2))
    np.testing.assert_array_equal(a, b)
    assert np.mean(a == c) < 0.01
    sub = np.arange(task.n)[::-3]  # a subset, in another order
    part = task.take(sub)
    np.testing.assert_array_equal(pol.score(part.feature_matrix(()), _ctx(part, seed=1)), a[sub])
    # seed_offset selects an independent stream: not a shifted seed (seed 1 + offset 1 != seed 2)
    off = RandomPolicy(seed_offset=1).score(X, _ctx(task, seed=1))
    assert not np.array_equal(off, c) and not np.array_equal(off, b)
    np.testing.assert_array_equal(off, RandomPolicy(seed_offset=1).score(X, _ctx(task, seed=1)))
    assert RandomPolicy(seed_offset=1).get_state() == {"seed_offset": 1}


def test_random_rejects_bad_offset():
    with pytest.raises(ConfigError, match="policy.seed_offset"):
        RandomPolicy(seed_offset="x")


def test_oracle_orders_rescues_above_ties_above_harms(task):
    s = OraclePolicy().score(task.feature_matrix(()), _ctx(task, oracle=True))
    d = task.delta
    assert set(d) == {-1.0, 0.0, 1.0}
    assert s[d == 1].min() > s[d == 0].max()
    assert s[d == 0].min() > s[d == -1].max()
    # no reordering of different deltas: the ranking by score equals the ranking by delta
    np.testing.assert_array_equal(np.argsort(s, kind="stable"), np.argsort(d, kind="stable"))
    assert OraclePolicy.oracle


def test_oracle_without_true_delta_is_a_clear_error(task):
    with pytest.raises(HarnessError, match="true_delta"):
        OraclePolicy().score(task.feature_matrix(()), _ctx(task))
    bad = ScoreContext(qids=task.qids, true_delta=task.delta[:-1])
    with pytest.raises(HarnessError, match="true_delta has"):
        OraclePolicy().score(task.feature_matrix(()), bad)


def test_resolve_features_forms():
    assert resolve_features("bm25") == ("bm25_top1", "bm25_margin12")
    assert resolve_features("bm25+baseline")[:3] == ("bm25_top1", "bm25_margin12", "dense_top1")
    assert resolve_features(["dense_top1", "bm25_top1", "dense_top1"]) == ("dense_top1", "bm25_top1")
    with pytest.raises(ConfigError, match="policy.features"):
        resolve_features(3)
    with pytest.raises(ConfigError, match="policy.features"):
        resolve_features([])
