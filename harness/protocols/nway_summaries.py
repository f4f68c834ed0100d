"""Routing summaries over n arms (docs/metrics.md §14): AIQ (RouterBench) between the cheapest
and the best single arm, and APGR / CPT (RouteLLM) with the cheapest single arm as the weak
reference and the best single arm as the strong one.

Why its own module: the binary summaries (``routing_summaries``, ``routing_curves``) take a base
and an extra arm; here the two references are picked from n arms and a router's operating
points are placed on a normalised cost axis, so that with two arms and unit costs (0, 1) the
numbers are the binary ones bit for bit (tests/test_nway_summaries.py). Whether the weak-to-strong
gap is worth dividing by stays ``routing_summaries.gap_check``'s question, asked by the caller on
the two reference arms' outcome columns.
"""

from __future__ import annotations

import math

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.routing_curves import apgr, cpt
from harness.protocols.routing_inputs import aligned_length, checked_vector
from harness.protocols.routing_summaries import aiq

__all__ = ["reference_arms", "nway_aiq", "nway_pgr_summaries"]

AIQ_UPPER = ("best", "costliest")


def _arm_means(arm_outcomes, arm_costs) -> tuple[np.ndarray, np.ndarray]:
    y = checked_vector("arm_outcomes", arm_outcomes)
    c = checked_vector("arm_costs", arm_costs)
    aligned_length(arm_outcomes=y, arm_costs=c)
    return y, c


def reference_arms(arm_outcomes, arm_costs) -> tuple[int, int]:
    """(weak, strong): the cheapest single arm (the better one among equally cheap, then the
    earlier) and the best single arm (the cheaper one among equally good, then the earlier),
    from each arm's mean outcome and mean cost. Why: RouteLLM's weak and strong models, read off
    n arms without choosing by hand."""
    y, c = _arm_means(arm_outcomes, arm_costs)
    weak = int(np.lexsort((np.arange(len(c)), -y, c))[0])
    strong = int(np.lexsort((np.arange(len(c)), c, -y))[0])
    return weak, strong


def nway_aiq(point_costs, point_outcomes, arm_outcomes, arm_costs, upper: str = "best") -> float:
    """AIQ of a router's operating points (mean cost, mean outcome): the mean height of their
    non-decreasing upper convex hull (``routing_summaries.aiq``, flat beyond the best point)
    between the cheapest single arm's mean cost and the best single arm's (``upper="best"``,
    docs/metrics.md §14) or the costliest arm's (``upper="costliest"``).

    Why both: the specification integrates up to the best arm; the binary protocol integrates
    over its points' whole range, base to extra. The two agree whenever the best arm is the
    costliest (binary: extra beats base); "costliest" reproduces the binary AIQ in every case.
    The router's points must reach down to the cheapest arm's cost (its lam = +inf route does)."""
    if upper not in AIQ_UPPER:
        raise ConfigError("upper", f"must be one of {AIQ_UPPER}, got {upper!r}")
    y, c = _arm_means(arm_outcomes, arm_costs)
    pc = checked_vector("point_costs", point_costs)
    pq = checked_vector("point_outcomes", point_outcomes)
    aligned_length(point_costs=pc, point_outcomes=pq)
    lo = float(c.min())
    hi = float(c[reference_arms(y, c)[1]]) if upper == "best" else float(c.max())
    if pc.min() > lo:
        raise HarnessError(f"point_costs: the router's cheapest point {pc.min():g} lies above the cheapest arm's cost {lo:g}")
    return aiq(pc, pq, cost_range=(lo, hi))


def _clipped_points(x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The polyline through (x, p) (equal x averaged; (0, 0) and (1, 1) added where no point
    lies at or beyond that end) cut to x in [0, 1]."""
    if not (x <= 0).any():
        x, p = np.r_[0.0, x], np.r_[0.0, p]
    if not (x >= 1).any():
        x, p = np.r_[x, 1.0], np.r_[p, 1.0]
    ux, inverse = np.unique(x, return_inverse=True)
    px = np.bincount(inverse, weights=p) / np.bincount(inverse)
    inside = (ux > 0) & (ux < 1)
    grid = np.r_[0.0, ux[inside], 1.0]
    return grid, np.interp(grid, ux, px)


def _sum_scale(gain_sums, n_points: int) -> np.ndarray:
    gains = checked_vector("gain_sums[0]", gain_sums[0])
    aligned_length(point_outcomes=np.zeros(n_points), gain_sums=gains)
    total = float(gain_sums[1])
    if not total > 0 or not math.isfinite(total):
        raise HarnessError(f"gain_sums[1]: the strong arm's summed gain must be positive and finite, got {total!r}")
    return gains / total


def nway_pgr_summaries(point_costs, point_outcomes, arm_outcomes, arm_costs, *, gain_sums=None) -> dict:
    """APGR, CPT(50%), CPT(80%) of a router's operating points over n arms.

    Weak w and strong s = ``reference_arms``; each point (cost, outcome) maps to x = (cost -
    c_w) / (c_s - c_w) (the share of calls to the strong arm when two arms have unit costs 0
    and 1) and PGR = (outcome - y_w) / (y_s - y_w) (``routing_curves.pgr_curve``). Points with x
    in [0, 1] go to the binary ``apgr`` and ``cpt`` unchanged (so two arms give the binary
    numbers bit for bit); points outside are joined to the rest by straight lines and the
    polyline is cut at x = 0 and 1. Returns {"apgr", "cpt50", "cpt80", "defined", "reason",
    "weak", "strong"}; NaN with a reason when the best arm is not better than the cheapest.

    ``gain_sums`` = (per point: sum over questions of outcome - weak arm's outcome; the same sum
    for the strong arm) puts PGR on the sum scale, gains / strong gain, as the binary exact curve
    does (``routing_curves.pgr_summaries``): exactly 0.8 where 80% of the gap is recovered,
    which the ratio of two rounded means can miss by one float step (and a CPT by a whole step)."""
    y, c = _arm_means(arm_outcomes, arm_costs)
    pc = checked_vector("point_costs", point_costs)
    pq = checked_vector("point_outcomes", point_outcomes)
    aligned_length(point_costs=pc, point_outcomes=pq)
    weak, strong = reference_arms(y, c)
    out = {"apgr": math.nan, "cpt50": math.nan, "cpt80": math.nan, "defined": False, "weak": weak, "strong": strong}
    if not (y[strong] > y[weak] and c[strong] > c[weak]):
        return out | {"reason": f"the best arm {strong} is not better than the cheapest arm {weak}; PGR/APGR/CPT not defined"}
    x = (pc - c[weak]) / (c[strong] - c[weak])
    p = (pq - y[weak]) / (y[strong] - y[weak]) if gain_sums is None else _sum_scale(gain_sums, len(pq))
    if (x < 0).any() or (x > 1).any():
        x, p = _clipped_points(x, p)
    out.update(apgr=apgr(x, p), cpt50=cpt(x, p, 0.5), cpt80=cpt(x, p, 0.8), defined=True, reason="")
    return out
