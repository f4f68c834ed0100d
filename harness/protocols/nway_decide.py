"""n-way routing decisions (docs/metrics.md §14): the rule argmax(score - lam * cost) with its
tie order, the exact breakpoints in lam, and lam calibrated to a mean-cost budget (the plain
rule, the rule randomised at its tie, and the conservative variant).

Why its own module: protocols A and B both turn per-arm scores into one arm per question; this
is the one place that says how, so that a binary policy routed through the n-way path gives the
binary protocols' decisions bit for bit (``binary_scores``, ``threshold_lambda``).

Binary mapping (tested in tests/test_nway_decide.py): arm 0 = base, arm 1 = extra, scores
(0, score) and costs ``BINARY_COSTS`` = (0, 1). The rule picks extra iff score - lam > 0, ties
to the cheaper base arm:
- protocol B (``budget_rules.run_probability``: extra when score > t, at score == t with
  probability p) is lam = t with tie probability p (``decide_probabilities``), and its
  calibrated (t, p) is ``calibrate_lambda(binary_scores(cal), BINARY_COSTS, rho,
  lam_floor=-inf)``;
- protocol A (``threshold_select``: extra when score >= tau) is lam = ``threshold_lambda(tau)``
  = the float just below tau, since for floats score >= tau iff score > nextafter(tau, -inf).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.nway_inputs import (
    checked_budget,
    checked_costs,
    checked_lambda,
    checked_table,
    sum_tolerance,
)
from harness.stats import dkw_epsilon

__all__ = [
    "BINARY_COSTS",
    "binary_scores",
    "threshold_lambda",
    "decide",
    "decide_probabilities",
    "lambda_breakpoints",
    "LambdaCalibration",
    "calibrate_lambda",
    "conservative_budget",
]

BINARY_COSTS = np.array([0.0, 1.0])  # base arm 0 paid always (its cost is the zero point), extra arm 1
NUDGES = 8  # float steps tried above a computed breakpoint before the next breakpoint is taken


def binary_scores(score) -> np.ndarray:
    """A binary policy's one score per question as n-way scores: (0, score) for (base, extra)."""
    s = np.asarray(score, dtype=float)
    if s.ndim != 1:
        raise HarnessError(f"score must be one-dimensional, got shape {s.shape}")
    return np.column_stack([np.zeros(len(s)), s])


def threshold_lambda(tau: float) -> float:
    """The lam that makes the n-way rule on ``binary_scores`` run extra exactly when score >= tau
    (protocol A): the float just below tau (score >= tau iff score > nextafter(tau, -inf))."""
    return float(np.nextafter(float(tau), -np.inf))


# --------------------------------------------------------------------------------------------
# The rule
# --------------------------------------------------------------------------------------------


def _first(mask: np.ndarray) -> np.ndarray:
    return np.argmax(mask, axis=1)


def _limit_choice(s: np.ndarray, c: np.ndarray, lam: float) -> np.ndarray:
    """The rule's limit at lam = +inf (cheapest arm) or -inf (costliest arm); then the larger
    score, then the earlier arm."""
    key = c if lam > 0 else -c
    cand = key == key.min(axis=1, keepdims=True)
    top = np.where(cand, s, -np.inf).max(axis=1, keepdims=True)
    return _first(cand & (s == top))


def _choose(s: np.ndarray, c: np.ndarray, lam: float, costly_ties: bool = False) -> np.ndarray:
    """Arm per question on validated tables: the largest s - lam * c, exact ties to the cheaper
    arm (to the costlier one with ``costly_ties``), then to the earlier arm."""
    if math.isinf(lam):
        return _limit_choice(s, c, lam)
    with np.errstate(invalid="ignore", over="ignore"):
        adj = s - lam * c
    if np.isnan(adj).any():
        raise HarnessError(f"scores - lam * costs is undefined (an infinite score against an infinite penalty) at lam={lam}")
    tied = adj == adj.max(axis=1, keepdims=True)
    key = np.where(tied, -c if costly_ties else c, np.inf)
    return _first(tied & (key == key.min(axis=1, keepdims=True)))


def decide(scores, costs, lam: float) -> np.ndarray:
    """Arm index per question: argmax(score - lam * cost), exact ties to the cheaper arm, then to
    the earlier arm (docs/metrics.md §14).

    Why this tie order: a router pays only for what it expects to gain, and the order makes the
    chosen cost right-continuous and non-increasing in lam, so a smallest lam meeting a budget
    exists (``calibrate_lambda``). lam = +-inf is the rule's limit (cheapest / costliest arm,
    then the larger score, then the earlier arm). ``costs`` is a (questions x arms) table or
    one row of per-arm costs; scores may be +-inf."""
    s = checked_table("scores", scores, allow_inf=True)
    c = checked_costs(costs, s.shape)
    return _choose(s, c, checked_lambda(lam))


def decide_probabilities(scores, costs, lam: float, tie_prob: float = 0.0) -> np.ndarray:
    """(questions x arms) probabilities of the rule randomised at its ties: a question whose best
    adjusted score is shared by arms of different costs takes the costliest of them with
    probability ``tie_prob`` and ``decide``'s cheaper one otherwise (binary: run_probability).

    Why: a lam alone meets a budget only up to one breakpoint's step; the coin at the tie meets
    it exactly in expectation, as protocol B's threshold does. No draw is made."""
    s = checked_table("scores", scores, allow_inf=True)
    c = checked_costs(costs, s.shape)
    lam = checked_lambda(lam)
    p = float(tie_prob)
    if not 0.0 <= p <= 1.0:
        raise ConfigError("tie_prob", f"must be in [0, 1], got {tie_prob!r}")
    return _route_probabilities(s, c, lam, p)


def _route_probabilities(s: np.ndarray, c: np.ndarray, lam: float, p: float) -> np.ndarray:
    n, m = s.shape
    rows = np.arange(n)
    probs = np.zeros((n, m))
    probs[rows, _choose(s, c, lam)] += 1.0 - p
    probs[rows, _choose(s, c, lam, costly_ties=True)] += p
    return probs


# --------------------------------------------------------------------------------------------
# Breakpoints and calibration to a budget
# --------------------------------------------------------------------------------------------


def _envelope_events(s: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(breakpoint, cost increase) of every switch of every question's chosen arm, walking lam
    down from +inf along the upper envelope of the lines s_j - lam * c_j."""
    n, m = s.shape
    rows = np.arange(n)
    cur = _limit_choice(s, c, math.inf)
    prev = np.full(n, math.inf)
    lams, steps = [], []
    for _ in range(m - 1):
        sa, ca = s[rows, cur][:, None], c[rows, cur][:, None]
        dc = c - ca
        costlier = dc > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = np.where(costlier, (s - sa) / np.where(costlier, dc, 1.0), -np.inf)
        nxt = cross.max(axis=1)
        live = np.isfinite(nxt)
        if not live.any():
            break
        nxt = np.minimum(nxt, prev)  # float noise only: the envelope's breakpoints descend
        at = costlier & (cross == cross.max(axis=1, keepdims=True))
        new = _first(at & (c == np.where(at, c, -np.inf).max(axis=1, keepdims=True)))
        lams.append(nxt[live])
        steps.append(c[rows, new][live] - ca[live, 0])
        cur = np.where(live, new, cur)
        prev = np.where(live, nxt, prev)
    if not lams:
        return np.zeros(0), np.zeros(0)
    return np.concatenate(lams), np.concatenate(steps)


def lambda_breakpoints(scores, costs) -> tuple[np.ndarray, np.ndarray]:
    """(lams descending, total cost) of the rule's mean cost as a step function of lam.

    Why: the chosen cost of each question only changes where its upper envelope of the lines
    s_j - lam * c_j switches arm, so the mean cost over questions is exact from these steps:
    for lam >= lams[0] it is the cheapest route's; at lams[i] (ties to the cheaper arm) and up
    to lams[i - 1] it is cost_sums[i] / n; below the last breakpoint cost_sums[-1] / n. Returns
    the distinct breakpoints and the sum of chosen costs just below each, with the lam = +inf
    sum first: ``cost_sums`` has one more entry than ``lams``."""
    s = checked_table("scores", scores)
    c = checked_costs(costs, s.shape)
    return _steps(s, c)


def _steps(s: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = np.arange(s.shape[0])
    start = float(np.sum(c[rows, _limit_choice(s, c, math.inf)]))
    lams, steps = _envelope_events(s, c)
    order = np.argsort(-lams, kind="stable")
    lams, steps = lams[order], steps[order]
    if len(lams) == 0:
        return lams, np.array([start])
    last = np.r_[lams[1:] != lams[:-1], True]
    sums = start + np.cumsum(steps)[last]
    return lams[last], np.r_[start, sums]


class LambdaCalibration(NamedTuple):
    """lam meeting a mean-cost budget, its tie coin and what the rule spends at it."""

    lam: float  # smallest lam >= lam_floor whose rule (ties to the cheaper arm) meets the budget
    tie_prob: float  # probability of the costlier tied arm at lam so that the expected cost is the budget
    mean_cost: float  # mean chosen cost of decide(scores, costs, lam)
    usage: np.ndarray  # share of questions per arm of decide(scores, costs, lam)
    expected_cost: float  # mean cost with the tie coin
    expected_usage: np.ndarray  # expected share per arm with the tie coin
    target: float  # the budget calibrated to


def calibrate_lambda(scores, costs, budget: float, *, lam_floor: float = 0.0) -> LambdaCalibration:
    """The smallest lam >= ``lam_floor`` whose rule has mean cost <= ``budget``, with the tie
    probability that spends the budget exactly in expectation (docs/metrics.md §14).

    Why lam >= 0 by default: at lam = 0 every question already gets its best-scored arm, and a
    negative price would buy costlier arms the scores do not prefer. lam_floor = -inf spends the
    whole budget as protocol B's binary threshold does (its (t, p) bit for bit on
    ``binary_scores``). The mean cost is a step function of lam (``lambda_breakpoints``); the
    answer is a breakpoint (or ``lam_floor`` or -inf), checked by evaluating the rule there and,
    where float rounding of the crossing puts a question on the costlier side, moved up by float
    steps. tie_prob = (budget * n - sum at lam) / (sum with costlier ties - sum at lam), clipped
    to [0, 1]; 0 at ``lam_floor`` (nothing beyond the floor is bought), 1 at lam = -inf. A
    budget below the cheapest route's mean cost is an error."""
    s = checked_table("scores", scores)
    c = checked_costs(costs, s.shape)
    budget = checked_budget(budget)
    floor = checked_lambda(lam_floor)
    n = s.shape[0]
    total = budget * n
    tol = sum_tolerance(total)
    lams, sums = _steps(s, c)
    if sums[0] > total + tol:
        raise ConfigError("budget", f"{budget:g} is below the cheapest route's mean cost {sums[0] / n:g}")
    lam = _smallest_lambda(s, c, lams, sums, total + tol, floor)
    rows = np.arange(n)
    spent = float(np.sum(c[rows, _choose(s, c, lam)]))
    p = _tie_probability(s, c, lam, floor, total, spent)
    probs = _route_probabilities(s, c, lam, p)
    usage = np.bincount(_choose(s, c, lam), minlength=s.shape[1]) / n
    return LambdaCalibration(lam, p, spent / n, usage, float(np.sum(probs * c)) / n, probs.mean(axis=0), budget)


def _smallest_lambda(s, c, lams, sums, limit: float, floor: float) -> float:
    """The smallest breakpoint (or -inf) whose step meets ``limit``, never below ``floor``,
    confirmed by the rule itself."""
    fits = np.flatnonzero(sums <= limit)  # sums is non-decreasing: a prefix fits
    i = int(fits[-1])  # steps 0..i fit: every lam >= lams[i] (or any lam when i is the last)
    candidates = [-math.inf] if i == len(lams) else [float(lams[i])]
    candidates += [float(v) for v in lams[:i][::-1]] + [math.inf]
    rows = np.arange(s.shape[0])
    for lam in candidates:
        lam = max(lam, floor)
        for _ in range(NUDGES if math.isfinite(lam) else 1):
            if float(np.sum(c[rows, _choose(s, c, lam)])) <= limit:
                return lam
            lam = float(np.nextafter(lam, math.inf))
    return math.inf  # unreachable: the cheapest route meets the limit


def _tie_probability(s, c, lam: float, floor: float, total: float, spent: float) -> float:
    if lam == -math.inf:
        return 1.0
    if lam <= floor:
        return 0.0
    rows = np.arange(s.shape[0])
    costly = float(np.sum(c[rows, _choose(s, c, lam, costly_ties=True)]))
    if costly <= spent:
        return 0.0
    return float(min(1.0, max(0.0, (total - spent) / (costly - spent))))


def conservative_budget(budget: float, costs, n_cal: int, delta: float = 0.05) -> float:
    """The budget to calibrate to so that the test mean cost stays <= ``budget`` with
    probability about 1 - ``delta``: max(cheapest route's mean cost, budget - R * eps), with R
    the range of the cost values in ``costs`` and eps = DKW slack sqrt(ln((K - 1) / delta) /
    (2 n_cal)), K >= 2 the number of distinct cost values (docs/metrics.md §14).

    Why: a question's chosen cost is non-increasing in lam, so each indicator "chosen cost >= the
    k-th cost level" is a threshold in lam, for which the one-sided DKW bound holds uniformly;
    the mean cost is a weighted sum of K - 1 of them (weights summing to R), hence a union bound
    at delta / (K - 1). Binary (costs 0 / 1): max(0, rho - eps), protocol B's rule exactly. The
    bound holds when test costs take the calibration table's values (unit costs per arm)."""
    budget = checked_budget(budget)
    if not 0.0 < float(delta) < 1.0:
        raise ConfigError("dkw_delta", f"must be in (0, 1), got {delta!r}")
    c = np.asarray(costs, dtype=float)
    c = checked_table("costs", c[None, :] if c.ndim == 1 else c)
    levels = np.unique(c)
    cheapest = float(np.mean(c.min(axis=1)))
    if len(levels) < 2:
        return max(cheapest, budget)
    eps = dkw_epsilon(int(n_cal), delta / (len(levels) - 1))
    spread = float(levels[-1] - levels[0])
    return max(cheapest, budget - spread * eps)
