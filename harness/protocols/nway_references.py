"""Reference rows of n-way routing (docs/metrics.md §14): every single arm, the oracle, random at
a matched cost and the cost-matched mix of the single arms' upper convex hull.

Why its own module: a router is judged against these rows at its own mean cost; each row is an
expected route (a (questions x arms) matrix of probabilities), so paired comparisons use its
per-question expected outcome and no random draw decides a verdict.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from harness.errors import ConfigError
from harness.protocols.nway_decide import _choose
from harness.protocols.nway_inputs import checked_budget, checked_pair_tables
from harness.protocols.routing_summaries import convex_hull_upper

__all__ = [
    "Route",
    "route_from_probabilities",
    "single_arms",
    "oracle_route",
    "RandomMatched",
    "random_matched",
    "CostMatchedMix",
    "cost_matched_mix",
]

BISECTION_STEPS = 200  # the max-entropy temperature, bisected in float to its last digits


class Route(NamedTuple):
    """An expected route: per question a probability per arm, and what it gives and spends."""

    probs: np.ndarray  # (questions x arms), rows sum to 1
    outcome: np.ndarray  # per-question expected outcome
    cost: np.ndarray  # per-question expected cost
    mean_outcome: float
    mean_cost: float
    usage: np.ndarray  # expected share of questions per arm


def route_from_probabilities(probs, outcomes, costs) -> Route:
    """The ``Route`` of a (questions x arms) probability matrix (one-hot for a plain route).

    Why: every reference and every randomised rule is compared through the same expectations."""
    y, c = checked_pair_tables(outcomes, costs)
    p = np.asarray(probs, dtype=float)
    if p.shape != y.shape:
        raise ConfigError("probs", f"must have the outcomes' shape {y.shape}, got {p.shape}")
    per_q = np.sum(p * y, axis=1)
    per_c = np.sum(p * c, axis=1)
    return Route(p, per_q, per_c, float(per_q.mean()), float(per_c.mean()), p.mean(axis=0))


def _one_hot(arms: np.ndarray, m: int) -> np.ndarray:
    probs = np.zeros((len(arms), m))
    probs[np.arange(len(arms)), arms] = 1.0
    return probs


def single_arms(outcomes, costs) -> tuple[np.ndarray, np.ndarray]:
    """(mean outcome, mean cost) of every single arm, one entry per arm: the rows every router
    must beat at their cost."""
    y, c = checked_pair_tables(outcomes, costs)
    return y.mean(axis=0), c.mean(axis=0)


def oracle_route(outcomes, costs) -> Route:
    """Best outcome per question, the cheaper arm on ties, then the earlier arm: ``decide`` with
    the true outcomes as scores at lam = 0 (an upper bound, never deployable)."""
    y, c = checked_pair_tables(outcomes, costs)
    return route_from_probabilities(_one_hot(_choose(y, c, 0.0), y.shape[1]), y, c)


# --------------------------------------------------------------------------------------------
# Random at a matched cost
# --------------------------------------------------------------------------------------------


class RandomMatched(NamedTuple):
    """The question-blind random route whose expected mean cost is the target."""

    route: Route
    arm_probs: np.ndarray  # the probability of each arm, the same for every question


def _maxent_probs(arm_costs: np.ndarray, target: float) -> np.ndarray:
    """pi_j proportional to exp(-beta * c_j) with sum pi_j c_j = target (beta by bisection)."""
    lo_c, hi_c = float(arm_costs.min()), float(arm_costs.max())
    if target <= lo_c or target >= hi_c:
        ends = arm_costs == (lo_c if target <= lo_c else hi_c)
        return ends / ends.sum()
    z = (arm_costs - lo_c) / (hi_c - lo_c)  # in [0, 1]: beta's scale does not depend on the unit
    t = (target - lo_c) / (hi_c - lo_c)

    def probs(beta: float) -> np.ndarray:
        w = np.exp(-beta * (z - (z.min() if beta > 0 else z.max())))
        return w / w.sum()

    lo, hi = -1.0, 1.0
    while float(probs(lo) @ z) < t:
        lo *= 2.0
    while float(probs(hi) @ z) > t:
        hi *= 2.0
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2.0
        if mid in (lo, hi):
            break
        if float(probs(mid) @ z) > t:
            lo = mid
        else:
            hi = mid
    return probs((lo + hi) / 2.0)


def random_matched(outcomes, costs, target_cost: float) -> RandomMatched:
    """Random at a matched cost: each question's arm drawn, blind to the question, from the
    maximum-entropy distribution over arms whose expected mean cost is ``target_cost``
    (pi_j proportional to exp(-beta * mean cost_j); docs/metrics.md §14).

    Why this one: binary random (``budget_rules.random_matched``) runs the extra arm on a random
    share u of questions; with two arms the cost constraint alone fixes the distribution, and
    this is it exactly (computed as mean(y_a) + q * mean(y_b - y_a), its bits). With more arms
    many blind distributions meet the cost; the maximum-entropy one assumes nothing else (at the
    arms' average cost it is the uniformly random arm) and needs no score distribution. The
    target must lie in [cheapest, costliest] arm mean cost."""
    y, c = checked_pair_tables(outcomes, costs)
    t = float(target_cost)
    arm_c = c.mean(axis=0)
    if not arm_c.min() <= t <= arm_c.max():  # NaN fails too
        raise ConfigError("target_cost", f"{t:g} is outside the arms' mean costs [{arm_c.min():g}, {arm_c.max():g}]")
    if len(np.unique(arm_c)) == 2 and y.shape[1] == 2:
        return _two_arm_random(y, c, arm_c, t)
    pi = _maxent_probs(arm_c, t)
    return RandomMatched(route_from_probabilities(np.tile(pi, (y.shape[0], 1)), y, c), pi)


def _two_arm_random(y: np.ndarray, c: np.ndarray, arm_c: np.ndarray, t: float) -> RandomMatched:
    """Two arms of different mean cost: q = (t - c_a) / (c_b - c_a) on the costlier arm b, the
    outcome as binary's mean(base) + q * mean(delta)."""
    a, b = (0, 1) if arm_c[0] < arm_c[1] else (1, 0)
    q = (t - arm_c[a]) / (arm_c[b] - arm_c[a])
    pi = np.zeros(2)
    pi[a], pi[b] = 1.0 - q, q
    route = route_from_probabilities(np.tile(pi, (y.shape[0], 1)), y, c)
    mean = float(np.mean(y[:, a]) + q * np.mean(y[:, b] - y[:, a]))
    return RandomMatched(route._replace(mean_outcome=mean), pi)


# --------------------------------------------------------------------------------------------
# The cost-matched mix of the single arms
# --------------------------------------------------------------------------------------------


class CostMatchedMix(NamedTuple):
    """The best question-blind mix of single arms at a budget: two neighbouring hull arms."""

    route: Route  # expected route: cheap arm with probability share_cheap, else costly arm
    cheap_arm: int
    costly_arm: int  # equal to cheap_arm when one arm meets the budget on its own
    share_cheap: float  # share of questions on the cheaper arm
    hull_arms: np.ndarray  # arms on the upper convex hull, by mean cost


def _hull_arms(arm_y: np.ndarray, arm_c: np.ndarray) -> np.ndarray:
    """Arm index of each vertex of the single arms' non-decreasing upper hull (the earliest arm
    where several share a vertex)."""
    hc, hq = convex_hull_upper(arm_c, arm_y)
    return np.array([int(np.flatnonzero((arm_c == x) & (arm_y == v))[0]) for x, v in zip(hc, hq)])


def cost_matched_mix(outcomes, costs, budget: float) -> CostMatchedMix:
    """The single arms' upper non-decreasing convex hull of (mean cost, mean outcome) at mean
    cost ``budget``: between two hull arms, the cheaper one on a share (c_hi - B) / (c_hi - c_lo)
    of questions; at or beyond the best hull arm's cost, that arm alone (docs/metrics.md §14).

    Why: it is the best a router that ignores the question can do at the budget, so a router
    must beat it to show that reading the question pays. The route is the expectation (each
    question's expected outcome), so no draw decides a paired comparison. A budget below the
    cheapest arm's mean cost is an error."""
    y, c = checked_pair_tables(outcomes, costs)
    b = checked_budget(budget)
    arm_y, arm_c = y.mean(axis=0), c.mean(axis=0)
    arms = _hull_arms(arm_y, arm_c)
    hc = arm_c[arms]
    if b < hc[0]:
        raise ConfigError("budget", f"{b:g} is below the cheapest arm's mean cost {hc[0]:g}")
    i = int(np.searchsorted(hc, b, side="right")) - 1  # hull vertex at or below the budget
    if i == len(arms) - 1 or hc[i] == b:
        lo = hi = int(arms[i])
        share = 1.0
    else:
        lo, hi = int(arms[i]), int(arms[i + 1])
        share = float((hc[i + 1] - b) / (hc[i + 1] - hc[i]))
    probs = np.zeros(y.shape)
    probs[:, lo] += share
    probs[:, hi] += 1.0 - share
    return CostMatchedMix(route_from_probabilities(probs, y, c), lo, hi, share, arms)

