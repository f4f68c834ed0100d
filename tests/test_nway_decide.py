"""The n-way decision rule and lam's calibration to a mean-cost budget: hand-computed cases, a
plain-loop rule, brute-force scans over every crossing and a fine grid, and the binary
protocols' own functions (threshold >= tau, calibrated (t, p), DKW slack) reproduced bit for bit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.errors import ConfigError, HarnessError
from harness.protocols import nway_decide as nd
from harness.protocols.budget_rules import calibrated_rule, exact_count, exact_rule, run_probability
from harness.protocols.threshold_select import select_tau
from harness.stats import dkw_epsilon


def _loop_decide(s, c, lam):
    """The rule written as a plain loop (exact arithmetic data only)."""
    out = []
    for q in range(len(s)):
        best = None
        for j in range(len(s[q])):
            key = (s[q][j] - lam * c[q][j], -c[q][j], -j)
            if best is None or key > best[0]:
                best = (key, j)
        out.append(best[1])
    return np.array(out)


def _exact_table(seed, n=None, m=None):
    """Scores on multiples of 12 and integer costs 0..4: every crossing (s_j - s_k) / (c_j - c_k)
    and every s - lam * c is exact in floats, so ties are real ties."""
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(1, 9))
    m = m or int(rng.integers(2, 5))
    s = 12.0 * rng.integers(-3, 4, size=(n, m))
    c = rng.integers(0, 5, size=(n, m)).astype(float)
    return s, c


def _crossings(s, c):
    """Every pairwise crossing of every question's lines (a superset of the breakpoints)."""
    out = set()
    for q in range(len(s)):
        for j, k in itertools.combinations(range(s.shape[1]), 2):
            if c[q, j] != c[q, k]:
                out.add(float((s[q, j] - s[q, k]) / (c[q, j] - c[q, k])))
    return out


def _cost_sum(s, c, lam):
    return float(np.sum(c[np.arange(len(s)), nd.decide(s, c, lam)]))


# --------------------------------------------------------------------------------------------
# The rule
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lam, expected",
    [(0.0, 2), (0.5, 2), (1.0, 0), (0.75, 2), (2.0, 0), (-1.0, 2)],
)
def test_decide_hand_case_largest_adjusted_score_ties_to_cheaper(lam, expected):
    # scores (1, 2, 3), costs (0, 1, 2): adjusted 1, 2 - lam, 3 - 2 lam; at lam = 1 all three tie
    assert nd.decide([[1.0, 2.0, 3.0]], [0.0, 1.0, 2.0], lam).tolist() == [expected]


def test_decide_equal_cost_ties_go_to_the_earlier_arm():
    s = [[0.0, 1.0, 1.0], [5.0, 5.0, 5.0]]
    c = [[0.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    assert nd.decide(s, c, 0.0).tolist() == [1, 0]


@pytest.mark.parametrize("lam, expected", [(math.inf, [1, 0]), (-math.inf, [2, 2])])
def test_decide_infinite_lambda_is_the_rules_limit(lam, expected):
    # +inf: cheapest arm, then the larger score; -inf: costliest arm, then the larger score
    s = [[3.0, 4.0, 0.0], [1.0, 1.0, 9.0]]
    c = [[1.0, 1.0, 5.0], [0.0, 2.0, 3.0]]
    assert nd.decide(s, c, lam).tolist() == expected


@pytest.mark.parametrize("seed", range(40))
def test_decide_equals_a_plain_loop_on_tied_tables(seed):
    s, c = _exact_table(seed)
    for lam in [0.0, 1.0, 6.0, 12.0, -4.0, 3.0] + sorted(_crossings(s, c)):
        assert nd.decide(s, c, lam).tolist() == _loop_decide(s, c, lam).tolist()


def test_decide_broadcasts_one_cost_row():
    s = np.array([[0.0, 1.0], [0.0, 3.0]])
    assert nd.decide(s, [0.0, 2.0], 1.0).tolist() == nd.decide(s, [[0.0, 2.0], [0.0, 2.0]], 1.0).tolist() == [0, 1]


@pytest.mark.parametrize(
    "scores, costs, lam, needle",
    [
        ([[1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]], 0.0, "costs must be one row of 2"),
        ([[1.0, 2.0]], [1.0, -1.0], 0.0, "costs must be non-negative"),
        ([[1.0, math.nan]], [1.0, 2.0], 0.0, "scores holds 1 non-finite"),
        ([1.0, 2.0], [1.0, 2.0], 0.0, "scores must be a (questions x arms) table"),
        ([[1.0, 2.0]], [1.0, math.inf], 0.0, "costs holds 1 non-finite"),
    ],
)
def test_decide_bad_input_is_one_error_naming_the_argument(scores, costs, lam, needle):
    with pytest.raises(HarnessError, match=None) as exc:
        nd.decide(scores, costs, lam)
    assert needle in str(exc.value)


def test_decide_nan_lambda_is_a_config_error():
    with pytest.raises(ConfigError, match="'lam'"):
        nd.decide([[1.0, 2.0]], [0.0, 1.0], math.nan)


# --------------------------------------------------------------------------------------------
# Binary compatibility
# --------------------------------------------------------------------------------------------


def _binary_score(seed, n):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    if seed % 2:
        s = np.round(s, 1)  # many ties
    return s


@pytest.mark.parametrize("seed", range(30))
def test_binary_threshold_rule_score_at_least_tau_is_reproduced(seed):
    s = _binary_score(seed, 40)
    taus = list(np.unique(s)) + [math.inf, -math.inf, 0.0, float(s[0]) + 1e-300]
    for tau in taus:
        chosen = nd.decide(nd.binary_scores(s), nd.BINARY_COSTS, nd.threshold_lambda(tau))
        assert chosen.tolist() == (s >= tau).astype(int).tolist()


@pytest.mark.parametrize("seed", range(10))
def test_binary_selected_tau_gives_the_same_extra_calls(seed):
    rng = np.random.default_rng(seed)
    s = np.round(rng.normal(size=60), 1)
    base = rng.integers(0, 2, 60).astype(float)
    delta = rng.integers(0, 2, 60) - base
    tau, _, k = select_tau(s, base, delta, 0.02)
    chosen = nd.decide(nd.binary_scores(s), nd.BINARY_COSTS, nd.threshold_lambda(tau))
    assert int(chosen.sum()) == k


@pytest.mark.parametrize("seed", range(40))
def test_binary_calibrated_threshold_and_tie_probability_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    cal = _binary_score(seed, int(rng.integers(1, 60)))
    test = np.r_[_binary_score(seed + 1000, 30), cal[:5]]
    for rho in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, float(rng.random())):
        t, p = calibrated_rule(cal, rho)
        got = nd.calibrate_lambda(nd.binary_scores(cal), nd.BINARY_COSTS, rho, lam_floor=-math.inf)
        assert (got.lam, got.tie_prob) == (t, p)
        probs = nd.decide_probabilities(nd.binary_scores(test), nd.BINARY_COSTS, got.lam, got.tie_prob)
        assert probs[:, 1].tolist() == run_probability(test, t, p).tolist()


@pytest.mark.parametrize("seed", range(20))
def test_binary_exact_frontier_rule_is_calibration_on_the_test_half(seed):
    s = _binary_score(seed, 37)
    for rho in (0.1, 0.25, 0.5, 0.75, 0.9):
        k = exact_count(len(s), rho)
        t, p = exact_rule(s, k)
        got = nd.calibrate_lambda(nd.binary_scores(s), nd.BINARY_COSTS, k / len(s), lam_floor=-math.inf)
        assert got.lam == t
        assert got.tie_prob == pytest.approx(p, abs=1e-12)
        assert got.expected_cost * len(s) == pytest.approx(k, abs=1e-9)


@pytest.mark.parametrize("n_cal, rho, delta", [(10, 0.5, 0.05), (200, 0.1, 0.05), (57, 0.9, 0.2), (3, 0.25, 0.05)])
def test_binary_conservative_budget_is_protocol_bs(n_cal, rho, delta):
    costs = np.tile(nd.BINARY_COSTS, (n_cal, 1))
    assert nd.conservative_budget(rho, costs, n_cal, delta) == max(0.0, rho - dkw_epsilon(n_cal, delta))
    assert nd.conservative_budget(rho, nd.BINARY_COSTS, n_cal, delta) == max(0.0, rho - dkw_epsilon(n_cal, delta))


def test_conservative_budget_hand_case_three_cost_levels():
    # levels 0, 1, 3: range 3, union bound over 2 levels -> eps = sqrt(ln(2 / 0.05) / (2 * 50))
    eps = math.sqrt(math.log(2 / 0.05) / 100)
    assert nd.conservative_budget(2.0, [0.0, 1.0, 3.0], 50, 0.05) == pytest.approx(2.0 - 3 * eps, abs=1e-15)
    assert nd.conservative_budget(0.1, [[1.0, 2.0, 4.0], [0.0, 5.0, 5.0]], 50, 0.05) == 0.5  # floor: cheapest route


# --------------------------------------------------------------------------------------------
# Breakpoints and calibration
# --------------------------------------------------------------------------------------------


def test_calibration_hand_case():
    # q0: lines 0 and 1 - lam (cost 0, 1) cross at 1; q1: lines 0 and 3 - 2 lam cross at 1.5
    s = [[0.0, 1.0], [0.0, 3.0]]
    c = [[0.0, 1.0], [0.0, 2.0]]
    lams, sums = nd.lambda_breakpoints(s, c)
    assert lams.tolist() == [1.5, 1.0] and sums.tolist() == [0.0, 2.0, 3.0]
    got = nd.calibrate_lambda(s, c, 1.0)
    assert (got.lam, got.tie_prob, got.mean_cost, got.usage.tolist()) == (1.0, 0.0, 1.0, [0.5, 0.5])
    got = nd.calibrate_lambda(s, c, 1.25)  # q0 ties at lam = 1: its costlier arm with p = 0.5
    assert (got.lam, got.tie_prob, got.mean_cost, got.expected_cost) == (1.0, 0.5, 1.0, 1.25)
    assert got.expected_usage.tolist() == [0.25, 0.75]
    got = nd.calibrate_lambda(s, c, 0.5)
    assert (got.lam, got.tie_prob, got.mean_cost, got.expected_cost) == (1.5, 0.5, 0.0, 0.5)
    got = nd.calibrate_lambda(s, c, 2.0)  # everything fits: lam stops at the floor 0
    assert (got.lam, got.tie_prob, got.mean_cost) == (0.0, 0.0, 1.5)


def test_calibration_below_the_cheapest_route_is_refused():
    with pytest.raises(ConfigError, match="'budget'.*below the cheapest route's mean cost 1"):
        nd.calibrate_lambda([[0.0, 1.0]], [1.0, 2.0], 0.5)


@pytest.mark.parametrize("seed", range(60))
def test_breakpoints_give_the_rules_mean_cost_everywhere(seed):
    s, c = _exact_table(seed)
    lams, sums = nd.lambda_breakpoints(s, c)
    assert (np.diff(lams) < 0).all() and (np.diff(sums) > 0).all()
    edges = np.r_[math.inf, lams]
    for i, lam in enumerate(lams):
        assert _cost_sum(s, c, lam) == sums[i]  # at a breakpoint: ties to the cheaper arm
        assert _cost_sum(s, c, (lam + (edges[i] if i else lam + 2.0)) / 2) == sums[i]
    below = (lams[-1] - 1.0) if len(lams) else 0.0
    assert _cost_sum(s, c, below) == sums[-1]
    assert _cost_sum(s, c, math.inf) == sums[0]


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("floor", [0.0, -math.inf])
def test_calibration_equals_brute_force_over_crossings_and_a_grid(seed, floor):
    s, c = _exact_table(seed)
    n = len(s)
    grid = set(np.linspace(-40.0, 40.0, 801).tolist()) | _crossings(s, c) | {floor, math.inf}
    grid = sorted(v for v in grid if v >= floor)
    sums = [_cost_sum(s, c, lam) for lam in grid]
    assert all(a >= b for a, b in zip(sums, sums[1:]))  # mean cost non-increasing in lam
    for total in sorted(set(sums)) + [sums[-1] + 0.5, sums[0] + 1.0]:
        budget = total / n
        if budget < min(sums) / n:
            continue
        brute = next(lam for lam, v in zip(grid, sums) if v <= total)
        got = nd.calibrate_lambda(s, c, budget, lam_floor=floor)
        assert got.lam == brute
        assert got.mean_cost == _cost_sum(s, c, brute) / n
        assert got.usage.tolist() == (np.bincount(nd.decide(s, c, brute), minlength=s.shape[1]) / n).tolist()
        if floor == -math.inf and got.lam > -math.inf:
            assert got.expected_cost == pytest.approx(budget, abs=1e-12)  # the coin spends it exactly
        assert got.expected_cost <= budget + 1e-12


@pytest.mark.parametrize("seed", range(10))
def test_calibration_on_float_data_meets_the_budget_and_is_minimal(seed):
    rng = np.random.default_rng(seed)
    s = rng.random((50, 4))
    c = rng.random((50, 4)) * 100
    for budget in np.quantile(np.sort(c, axis=1).mean(axis=0), [0.1, 0.5, 0.9]):
        got = nd.calibrate_lambda(s, c, budget)
        assert got.mean_cost <= budget * (1 + 1e-9)
        if got.lam > 0:  # a little less penalty spends more than the budget
            assert _cost_sum(s, c, got.lam * (1 - 1e-6)) / 50 > budget


def test_decide_probabilities_hand_case_and_bad_tie_prob():
    probs = nd.decide_probabilities([[0.0, 1.0], [0.0, 3.0]], [[0.0, 1.0], [0.0, 2.0]], 1.0, 0.25)
    assert probs.tolist() == [[0.75, 0.25], [0.0, 1.0]]
    with pytest.raises(ConfigError, match="'tie_prob'"):
        nd.decide_probabilities([[0.0, 1.0]], [0.0, 1.0], 1.0, 1.5)


def test_decide_infinite_scores_and_an_undefined_penalty():
    assert nd.decide([[0.0, math.inf], [0.0, -math.inf]], [0.0, 1.0], 5.0).tolist() == [1, 0]
    with pytest.raises(HarnessError, match="undefined .* at lam=1e"):
        nd.decide([[math.inf, 0.0]], [10.0, 0.0], 1e308)


def test_conservative_budget_refuses_a_delta_outside_0_1():
    with pytest.raises(ConfigError, match="'dkw_delta'"):
        nd.conservative_budget(1.0, [0.0, 1.0, 2.0], 50, 1.5)
