"""The exact frontier of n-way routing (docs/metrics.md §14): the best mean outcome any route
reaches under a mean-cost budget B, knowing every outcome (the oracle under a budget).

Why its own module: it is the ceiling a router's budget curve is read against. For 0/1 outcomes
it is solved exactly by a greedy; for graded outcomes it is a multiple-choice knapsack, NP-hard
in general, so the LP relaxation (an upper bound, exact by a greedy) is reported together with
the best integral route found and the gap between them.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.nway_decide import _choose
from harness.protocols.nway_inputs import checked_budget, checked_pair_tables, sum_tolerance
from harness.protocols.nway_references import Route, route_from_probabilities
from harness.protocols.routing_summaries import convex_hull_upper

__all__ = ["Frontier", "binary_frontier", "graded_frontier", "exact_frontier", "frontier_curve"]


class Frontier(NamedTuple):
    """The oracle under a mean-cost budget: its continuous (LP) value and an integral route."""

    budget: float
    upper_bound: float  # mean outcome of the continuous / LP solution (>= every integral route)
    integral: float  # mean outcome of the best integral route found
    gap: float  # upper_bound - integral
    proven: bool  # True when ``integral`` is the integral optimum (0/1 outcomes)
    route: np.ndarray  # arm per question of that integral route
    integral_cost: float  # its mean cost (<= budget)
    lp: Route  # the continuous solution as an expected route (at most one question split)


def _start(y: np.ndarray, c: np.ndarray, budget: float) -> tuple[np.ndarray, float, float]:
    """(cheapest arm per question, budget left over the cheapest route, its float tolerance)."""
    n = y.shape[0]
    cheap = _choose(y, c, math.inf)
    total = budget * n
    base = float(np.sum(c[np.arange(n), cheap]))
    if base > total + sum_tolerance(total):
        raise ConfigError("budget", f"{budget:g} is below the cheapest route's mean cost {base / n:g}")
    return cheap, total - base, sum_tolerance(total)


def binary_frontier(outcomes, costs, budget: float) -> Frontier:
    """Exact frontier for 0/1 outcomes: every question starts on its cheapest arm (best outcome
    among the cheapest, then the earlier arm); a question whose cheapest arm fails and some arm
    succeeds can be rescued for e = cost of its cheapest successful arm - cost of its cheapest
    arm. Rescues are taken in increasing e while they fit: the most rescues a budget buys (each
    is worth one), so the integral route is optimal. The continuous frontier adds the next
    rescue's fraction left / e in expectation (the LP relaxation's optimum)."""
    y, c = checked_pair_tables(outcomes, costs)
    if not np.isin(y, (0.0, 1.0)).all():
        raise HarnessError("binary_frontier: outcomes must be 0/1 (graded_frontier takes graded outcomes)")
    b = checked_budget(budget)
    n = y.shape[0]
    rows = np.arange(n)
    cheap, left, tol = _start(y, c, b)
    succ = np.argmin(np.where(y == 1.0, c, np.inf), axis=1)
    need = np.flatnonzero((y[rows, cheap] == 0.0) & (y[rows, succ] == 1.0))
    extra = c[need, succ[need]] - c[need, cheap[need]]
    order = need[np.argsort(extra, kind="stable")]
    cum = np.cumsum(np.sort(extra, kind="stable"))
    k = int(np.searchsorted(cum, left + tol, side="right"))
    route = cheap.copy()
    route[order[:k]] = succ[order[:k]]
    probs = np.zeros(y.shape)
    probs[rows, route] = 1.0
    frac = 0.0
    if k < len(order):
        q = order[k]
        frac = min(1.0, max(0.0, (left - (cum[k - 1] if k else 0.0)) / (cum[k] - (cum[k - 1] if k else 0.0))))
        probs[q, cheap[q]], probs[q, succ[q]] = 1.0 - frac, frac
    hits = float(np.sum(y[rows, cheap]))
    integral = (hits + k) / n
    upper = (hits + k + frac) / n
    lp = route_from_probabilities(probs, y, c)
    return Frontier(b, upper, integral, upper - integral, True, route, float(np.mean(c[rows, route])), lp)


def _segments(y: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """First hull arm per question and every hull segment (question, position, from arm, to arm,
    added cost, added outcome, efficiency), efficiencies non-increasing within a question."""
    first = np.zeros(y.shape[0], dtype=np.int64)
    segs: list[tuple] = []
    for q in range(y.shape[0]):
        hc, hq = convex_hull_upper(c[q], y[q])
        arms = [int(np.flatnonzero((c[q] == x) & (y[q] == v))[0]) for x, v in zip(hc, hq)]
        first[q] = arms[0]
        eff = math.inf
        for t in range(1, len(arms)):
            dc, dy = float(hc[t] - hc[t - 1]), float(hq[t] - hq[t - 1])
            eff = min(eff, dy / dc)  # float noise only: a concave hull's slopes fall
            segs.append((q, t, arms[t - 1], arms[t], dc, dy, eff))
    return first, segs


def _greedy_order(segs: list[tuple]) -> list[tuple]:
    """Segments by efficiency, largest first (then question, then position along its hull)."""
    return sorted(segs, key=lambda s: (-s[6], s[0], s[1]))


def graded_frontier(outcomes, costs, budget: float) -> Frontier:
    """Frontier for graded outcomes (a multiple-choice knapsack): the LP relaxation's optimum,
    an upper bound, and the best integral route a greedy finds, with the gap between them.

    LP (Sinha and Zoltners 1979): each question starts at the first vertex of its non-decreasing
    upper hull of (cost, outcome) points (the best of its cheapest arms); the hull's segments of
    every question are bought in decreasing efficiency (added outcome / added cost) while they
    fit, the last one fractionally. Integral route: the same order, a segment bought when it
    fits whole; a question whose segment does not fit stops there (its later segments build on
    it). Equal to ``binary_frontier`` on 0/1 outcomes."""
    y, c = checked_pair_tables(outcomes, costs)
    b = checked_budget(budget)
    n = y.shape[0]
    rows = np.arange(n)
    _, left, tol = _start(y, c, b)
    first, segs = _segments(y, c)
    order = _greedy_order(segs)
    lp_arm, frac_seg, frac, room = first.copy(), None, 0.0, left
    for seg in order:
        if seg[4] <= room + tol:
            lp_arm[seg[0]], room = seg[3], room - seg[4]
        else:
            frac_seg, frac = seg, min(1.0, max(0.0, room / seg[4]))
            break
    probs = np.zeros(y.shape)
    probs[rows, lp_arm] = 1.0
    if frac_seg is not None:
        q = frac_seg[0]
        probs[q, frac_seg[2]], probs[q, frac_seg[3]] = 1.0 - frac, frac
    lp = route_from_probabilities(probs, y, c)
    route = _integral_greedy(first, order, left, tol)
    integral = float(np.mean(y[rows, route]))
    upper = max(lp.mean_outcome, integral)  # equal up to float rounding when nothing is split
    proven = bool(np.isin(y, (0.0, 1.0)).all())
    return Frontier(b, upper, integral, upper - integral, proven, route, float(np.mean(c[rows, route])), lp)


def _integral_greedy(first: np.ndarray, order: list[tuple], left: float, tol: float) -> np.ndarray:
    route = first.copy()
    stopped: set[int] = set()
    for q, _, _, to, dc, _, _ in order:
        if q in stopped:
            continue
        if dc <= left + tol:
            route[q], left = to, left - dc
        else:
            stopped.add(q)
    return route


def exact_frontier(outcomes, costs, budget: float) -> Frontier:
    """``binary_frontier`` when every outcome is 0 or 1, else ``graded_frontier``."""
    y = np.asarray(outcomes, dtype=float)
    if y.ndim == 2 and np.isin(y, (0.0, 1.0)).all():
        return binary_frontier(outcomes, costs, budget)
    return graded_frontier(outcomes, costs, budget)


def frontier_curve(outcomes, costs) -> tuple[np.ndarray, np.ndarray]:
    """(mean cost, mean outcome) vertices of the continuous (LP) frontier from the cheapest route
    to the oracle: the frontier at any budget between two vertices is the straight line between
    them (exact for 0/1 outcomes; an upper bound for graded ones). Why: a router's budget curve
    and its AIQ are read against this whole curve, not one budget."""
    y, c = checked_pair_tables(outcomes, costs)
    n = y.shape[0]
    first, segs = _segments(y, c)
    order = _greedy_order(segs)
    rows = np.arange(n)
    dc = np.array([s[4] for s in order])
    dy = np.array([s[5] for s in order])
    cost0 = float(np.sum(c[rows, first]))
    out0 = float(np.sum(y[rows, first]))
    return (cost0 + np.r_[0.0, np.cumsum(dc)]) / n, (out0 + np.r_[0.0, np.cumsum(dy)]) / n
