"""n-way reference rows: single arms, the oracle, random at a matched cost and the cost-matched
mix, against hand-computed cases, plain loops, a scipy maximum-entropy solve, brute force over
mixes of two arms and binary protocol B's random_matched."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize

from harness.errors import ConfigError, HarnessError
from harness.protocols import budget_rules
from harness.protocols import nway_references as nr


def _table(seed, n=12, m=4, graded=False):
    rng = np.random.default_rng(seed)
    y = rng.random((n, m)) if graded else rng.integers(0, 2, (n, m)).astype(float)
    c = rng.integers(0, 5, (n, m)).astype(float)
    return y, c


def test_single_arms_hand_case():
    y = [[1.0, 0.0], [0.5, 1.0]]
    c = [[1.0, 3.0], [2.0, 5.0]]
    mean_y, mean_c = nr.single_arms(y, c)
    assert mean_y.tolist() == [0.75, 0.5] and mean_c.tolist() == [1.5, 4.0]


def test_oracle_hand_case_best_then_cheaper_then_earlier():
    y = [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.7, 0.7]]
    c = [[2.0, 1.0, 0.0], [3.0, 0.0, 0.0], [0.0, 2.0, 1.0]]
    r = nr.oracle_route(y, c)
    assert r.probs.argmax(axis=1).tolist() == [1, 1, 2]
    assert r.outcome.tolist() == [1.0, 0.0, 0.7] and r.cost.tolist() == [1.0, 0.0, 1.0]
    assert r.mean_cost == pytest.approx(2 / 3, abs=1e-15) and r.usage.tolist() == [0.0, 2 / 3, 1 / 3]


@pytest.mark.parametrize("seed", range(20))
def test_oracle_equals_a_plain_loop(seed):
    y, c = _table(seed, graded=seed % 2 == 1)
    r = nr.oracle_route(y, c)
    for q in range(len(y)):
        best = max(range(y.shape[1]), key=lambda j: (y[q, j], -c[q, j], -j))
        assert r.probs[q].tolist() == [1.0 if j == best else 0.0 for j in range(y.shape[1])]


@pytest.mark.parametrize("seed", range(20))
def test_random_matched_two_arms_is_binary_random_matched_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 50))
    base, extra = rng.integers(0, 2, n).astype(float), rng.random(n)
    y = np.column_stack([base, extra])
    for k in range(n + 1):
        got = nr.random_matched(y, [0.0, 1.0], k / n)
        assert got.route.mean_outcome == budget_rules.random_matched(base, extra - base, k)
        assert got.arm_probs.tolist() == [1 - k / n, k / n]


def _scipy_maxent(arm_c, target):
    m = len(arm_c)
    res = optimize.minimize(
        lambda p: float(np.sum(p * np.log(np.maximum(p, 1e-300)))),
        np.full(m, 1.0 / m),
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}, {"type": "eq", "fun": lambda p: p @ arm_c - target}],
        bounds=[(0.0, 1.0)] * m,
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert res.success
    return res.x


@pytest.mark.parametrize("seed", range(12))
def test_random_matched_is_the_maximum_entropy_blind_route(seed):
    y, c = _table(seed, m=3 + seed % 3, graded=True)
    arm_c = c.mean(axis=0)
    if np.ptp(arm_c) == 0:
        pytest.skip("all arms cost the same")
    for share in (0.2, 0.5, 0.8):
        target = arm_c.min() + share * np.ptp(arm_c)
        got = nr.random_matched(y, c, target)
        assert got.route.mean_cost == pytest.approx(target, abs=1e-12)
        assert got.arm_probs == pytest.approx(_scipy_maxent(arm_c, target), abs=2e-5)
        assert got.route.outcome.tolist() == pytest.approx((y @ got.arm_probs).tolist(), abs=1e-15)


def test_random_matched_at_the_average_cost_is_the_uniform_arm_and_ends_are_single_arms():
    y = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])
    c = np.array([0.0, 1.0, 5.0])
    assert nr.random_matched(y, c, 2.0).arm_probs == pytest.approx([1 / 3] * 3, abs=1e-14)
    assert nr.random_matched(y, c, 0.0).arm_probs.tolist() == [1.0, 0.0, 0.0]
    assert nr.random_matched(y, c, 5.0).arm_probs.tolist() == [0.0, 0.0, 1.0]
    for bad in (5.5, -1.0, float("nan")):
        with pytest.raises(ConfigError, match="'target_cost'.*outside the arms' mean costs"):
            nr.random_matched(y, c, bad)


def _hand_mix_table():
    # arm means (cost, outcome): A (0, 0.2), B (1, 0.5), C (2, 0.6), D (1.5, 0.3): D under the hull
    y = np.array([[0.0, 1.0, 1.0, 0.0], [0.4, 0.0, 0.2, 0.6]] * 2)
    c = np.array([0.0, 1.0, 2.0, 1.5])
    return y, c


@pytest.mark.parametrize(
    "budget, lo, hi, share, outcome",
    [(0.5, 0, 1, 0.5, 0.35), (1.75, 1, 2, 0.25, 0.575), (1.0, 1, 1, 1.0, 0.5), (3.0, 2, 2, 1.0, 0.6), (0.0, 0, 0, 1.0, 0.2)],
)
def test_cost_matched_mix_hand_case(budget, lo, hi, share, outcome):
    y, c = _hand_mix_table()
    got = nr.cost_matched_mix(y, c, budget)
    assert got.hull_arms.tolist() == [0, 1, 2]
    assert (got.cheap_arm, got.costly_arm, got.share_cheap) == (lo, hi, share)
    assert got.route.mean_outcome == pytest.approx(outcome, abs=1e-15)
    assert got.route.mean_cost == pytest.approx(min(budget, 2.0), abs=1e-15)
    assert got.route.outcome.tolist() == (share * y[:, lo] + (1 - share) * y[:, hi]).tolist()


def _best_blind_mix(arm_y, arm_c, budget):
    """Best mean outcome of any mix of at most two arms with expected cost <= budget (a blind
    route's LP over the simplex has an optimum on at most two arms)."""
    best = max((v for v, k in zip(arm_y, arm_c) if k <= budget), default=-np.inf)
    for i, j in itertools.permutations(range(len(arm_c)), 2):
        if arm_c[i] <= budget <= arm_c[j] and arm_c[i] < arm_c[j]:
            q = (arm_c[j] - budget) / (arm_c[j] - arm_c[i])
            best = max(best, q * arm_y[i] + (1 - q) * arm_y[j])
    return best


@pytest.mark.parametrize("seed", range(30))
def test_cost_matched_mix_is_the_best_blind_mix_by_brute_force(seed):
    y, c = _table(seed, m=2 + seed % 4, graded=seed % 2 == 0)
    arm_y, arm_c = y.mean(axis=0), c.mean(axis=0)
    for budget in np.linspace(arm_c.min(), arm_c.max() + 0.5, 13):
        got = nr.cost_matched_mix(y, c, budget)
        assert got.route.mean_outcome == pytest.approx(_best_blind_mix(arm_y, arm_c, budget), abs=1e-12)
        assert got.route.mean_cost <= budget + 1e-12


def test_cost_matched_mix_below_the_cheapest_arm_is_refused():
    y, c = _hand_mix_table()
    with pytest.raises(ConfigError, match="'budget'.*below the cheapest arm's mean cost 1"):
        nr.cost_matched_mix(y, c + 1.0, 0.5)


def test_route_from_probabilities_refuses_a_misshaped_matrix_and_outcomes_outside_0_1():
    with pytest.raises(ConfigError, match="'probs'"):
        nr.route_from_probabilities(np.ones((2, 3)), np.ones((2, 2)), [0.0, 1.0])
    with pytest.raises(HarnessError, match="outcomes must lie in \\[0, 1\\]"):
        nr.single_arms([[0.0, 1.5]], [0.0, 1.0])


def test_a_half_overspends_beyond_its_sampling_error_by_the_stated_formula():
    """``arms_run.overspend_counts`` on hand numbers: a half's allowance is z_0.95 x the sample
    sd of its per-question costs x sqrt(1 / n_train + 1 / n_test) (z from the normal quantile by
    bisection on math.erf, the sd by the statistics module), the stated tolerance tol x range;
    a half just above either bound counts, one just below does not."""
    import math
    import statistics

    from harness.protocols.arms_run import overspend_counts

    def z(p):  # the standard normal quantile, bisection on erf
        lo, hi = -10.0, 10.0
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p else (lo, mid)
        return (lo + hi) / 2

    cost = np.array([1.0, 3.0, 2.0, 6.0, 0.0, 4.0, 5.0, 1.0, 2.0, 2.0])
    tests = [np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7, 8, 9])]  # halves of 4 and 6 of n = 10
    allow = [z(0.95) * statistics.stdev(cost[t].tolist()) * math.sqrt(1 / (10 - len(t)) + 1 / len(t)) for t in tests]
    assert allow[0] == pytest.approx(1.6448536 * statistics.stdev([1, 3, 2, 6]) * math.sqrt(1 / 6 + 1 / 4))
    for shift, want in ((1e-6, (1, 1)), (-1e-6, (0, 0))):
        over = [allow[0] + shift, allow[1] + shift]
        assert overspend_counts(cost, 2.0, over, tests, 10, 0.0, 0.0) == (want[0] + want[1], 2)
    tol, spread = 0.1, 6.0  # stated tolerance: 0.6 of cost
    assert overspend_counts(cost, 2.0, [0.6 + 1e-6, 0.6 - 1e-6], tests, 10, tol, spread)[1] == 1
