"""The n-way exact frontier against brute force over every route (n_arms ** n_questions of them)
for the integral optimum and scipy's linprog for the LP relaxation, on 0/1 and graded tables,
plus hand-computed cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from harness.errors import ConfigError, HarnessError
from harness.protocols import nway_frontier as nf
from harness.protocols import nway_references as nr


def _table(seed, graded):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 8)), int(rng.integers(2, 5))
    y = np.round(rng.random((n, m)), 2) if graded else rng.integers(0, 2, (n, m)).astype(float)
    c = rng.integers(0, 5, (n, m)).astype(float)  # integer costs: every sum is exact
    return y, c


def _all_routes(y, c):
    """(cost sum, outcome sum) of every route."""
    n, m = y.shape
    routes = np.array(list(itertools.product(range(m), repeat=n)))
    rows = np.arange(n)
    return c[rows, routes].sum(axis=1), y[rows, routes].sum(axis=1)


def _budgets(cost_sums, n):
    sums = np.unique(cost_sums)
    return sorted(set((sums / n).tolist()) | set(((sums[:-1] + sums[1:]) / 2 / n).tolist()) | {sums[-1] / n + 1.0})


def _lp(y, c, budget):
    """LP relaxation of the multiple-choice knapsack, solved by scipy."""
    n, m = y.shape
    a_eq = np.kron(np.eye(n), np.ones(m))
    res = linprog(-y.ravel(), A_ub=c.ravel()[None, :], b_ub=[budget * n], A_eq=a_eq, b_eq=np.ones(n),
                  bounds=(0, 1), method="highs")
    assert res.status == 0
    return -res.fun / n


@pytest.mark.parametrize("seed", range(40))
def test_binary_frontier_equals_brute_force_at_every_budget(seed):
    y, c = _table(seed, graded=False)
    n = len(y)
    cost_sums, hit_sums = _all_routes(y, c)
    for budget in _budgets(cost_sums, n):
        best = hit_sums[cost_sums <= budget * n].max() / n
        got = nf.binary_frontier(y, c, budget)
        assert got.integral == pytest.approx(best, abs=1e-12) and got.proven
        rows = np.arange(n)
        assert np.mean(y[rows, got.route]) == pytest.approx(got.integral, abs=1e-12)
        assert got.integral_cost <= budget + 1e-12
        assert got.upper_bound == pytest.approx(_lp(y, c, budget), abs=1e-9)
        assert got.lp.mean_cost <= budget + 1e-12 and got.lp.mean_outcome == pytest.approx(got.upper_bound, abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_graded_frontier_lp_bound_is_linprogs_and_integral_is_feasible(seed):
    y, c = _table(seed, graded=True)
    n = len(y)
    cost_sums, out_sums = _all_routes(y, c)
    for budget in _budgets(cost_sums, n):
        best = out_sums[cost_sums <= budget * n].max() / n
        got = nf.graded_frontier(y, c, budget)
        assert got.upper_bound == pytest.approx(_lp(y, c, budget), abs=1e-9)
        assert got.integral <= best + 1e-12 <= got.upper_bound + 2e-12  # found <= optimum <= LP bound
        assert got.gap == pytest.approx(got.upper_bound - got.integral, abs=1e-15) and got.gap >= 0
        assert np.mean(y[np.arange(n), got.route]) == pytest.approx(got.integral, abs=1e-12)
        assert got.integral_cost <= budget + 1e-12 and not got.proven


@pytest.mark.parametrize("seed", range(40))
def test_graded_frontier_on_0_1_outcomes_equals_the_binary_one(seed):
    y, c = _table(seed, graded=False)
    cost_sums, _ = _all_routes(y, c)
    for budget in _budgets(cost_sums, len(y)):
        a, b = nf.binary_frontier(y, c, budget), nf.graded_frontier(y, c, budget)
        assert a.integral == pytest.approx(b.integral, abs=1e-12)
        assert a.upper_bound == pytest.approx(b.upper_bound, abs=1e-12)
        assert nf.exact_frontier(y, c, budget).integral == a.integral


def test_binary_frontier_hand_case():
    # q0: cheapest arm 0 (cost 1) fails, arm 2 succeeds for 3 more; q1: arm 1 (cost 0) fails,
    # arm 0 succeeds for 2 more; q2: its cheapest arm succeeds; q3: nothing succeeds (pays 1)
    y = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    c = [[1.0, 2.0, 4.0], [2.0, 0.0, 3.0], [1.0, 0.0, 1.0], [2.0, 1.0, 3.0]]
    got = nf.binary_frontier(y, c, 4.0 / 4)  # 2 left over the cheapest route's 2: rescue q1
    assert (got.integral, got.upper_bound, got.route.tolist()) == (0.5, 0.5, [0, 0, 1, 1])
    got = nf.binary_frontier(y, c, 5.5 / 4)  # 3.5 left: q1 (2), then q0 half (1.5 of 3)
    assert (got.integral, got.upper_bound) == (0.5, 0.625)
    assert got.lp.probs[0].tolist() == [0.5, 0.0, 0.5]
    got = nf.binary_frontier(y, c, 10.0)
    assert got.integral == nr.oracle_route(y, c).mean_outcome == 0.75


def test_graded_frontier_hand_case_fractional_last_segment():
    # one question, hull (0, 0.2) -> (1, 0.6) -> (3, 0.8); arm 3 (cost 2, 0.3) is under it
    y = [[0.2, 0.6, 0.8, 0.3]]
    c = [[0.0, 1.0, 3.0, 2.0]]
    got = nf.graded_frontier(y, c, 2.0)  # segment 1 whole (1), then half of segment 2 (1 of 2)
    assert got.upper_bound == pytest.approx(0.7, abs=1e-15) and got.integral == 0.6
    assert got.route.tolist() == [1] and got.lp.probs[0].tolist() == [0.0, 0.5, 0.5, 0.0]


@pytest.mark.parametrize("seed", range(20))
def test_frontier_curve_passes_through_the_lp_bound_and_ends_at_the_oracle(seed):
    y, c = _table(seed + 100, graded=seed % 2 == 0)
    fc, fo = nf.frontier_curve(y, c)
    assert (np.diff(fc) > 0).all() and (np.diff(fo) > -1e-15).all()
    for budget in np.linspace(fc[0], fc[-1], 9):
        assert np.interp(budget, fc, fo) == pytest.approx(nf.exact_frontier(y, c, budget).upper_bound, abs=1e-12)
    oracle = nr.oracle_route(y, c)
    assert (fc[-1], fo[-1]) == pytest.approx((oracle.mean_cost, oracle.mean_outcome), abs=1e-12)


def test_frontier_refuses_a_budget_below_the_cheapest_route_and_graded_outcomes_as_binary():
    with pytest.raises(ConfigError, match="'budget'.*below the cheapest route's mean cost 1"):
        nf.exact_frontier([[0.0, 1.0]], [1.0, 2.0], 0.5)
    with pytest.raises(HarnessError, match="binary_frontier: outcomes must be 0/1"):
        nf.binary_frontier([[0.5, 1.0]], [1.0, 2.0], 2.0)
