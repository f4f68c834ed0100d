"""Routing summaries for one base/extra pair: PGR, APGR and CPT (RouteLLM) and AIQ (RouterBench).

Why: the budget protocol (docs/metrics.md §6) reports outcome against usage; the routing literature
summarises the same curve in standard units. RouteLLM (Ong et al. 2024, "RouteLLM: Learning to
Route LLMs with Preference Data") routes between a weak and a strong model, which here are the
cheap **base** arm and the **extra** arm; it reports the performance gap recovered (PGR), its
average over usage (APGR) and the call-performance threshold (CPT). RouterBench (Hu et al. 2024,
"RouterBench: A Benchmark for Multi-LLM Routing System") reports the average improvement in
quality (AIQ): the mean height of the non-decreasing convex hull of a router's (cost, quality)
operating points.

The exact curve and the PGR, APGR and CPT formulas are in ``harness.protocols.routing_curves``;
this module says whether they are defined (``gap_check``), gives random's reference and AIQ.
Everything here is a pure function over numpy arrays (one entry per question or per operating
point); randomness only in ``mixed_policy``, through ``np.random.default_rng(seed)``.

Choices where the papers leave a detail open (each also in its function's docstring):
- Ties in the exact curve count at their expectation (docs/metrics.md §6), so a constant score is random's
  straight line: APGR 0.5, CPT(x) = x.
- Operating points are joined by straight lines (APGR, CPT): a point on the segment between two
  operating points is what a seeded coin mixing the two achieves in expectation
  (``mixed_policy``). (0, PGR 0) and (1, PGR 1) are added where missing; operating points that
  share a usage are averaged (the 50/50 mix).
- PGR, APGR and CPT are NaN with a plain reason unless the base-to-extra gap is told from zero
  (``gap_is_resolvable``): at least ``min_discordant`` discordant questions, a positive net gap,
  and a paired test of "extra = base" with p < ``alpha`` (exact McNemar for 0/1 outcomes, a
  sign-flip test on document totals for continuous ones). A ratio whose denominator is noise is
  not reported.
- Random's reference for AIQ and CPT is the mean of the statistic over ``N_RANDOM_ORDERINGS``
  seeded uniformly random orderings (``random_ordering_reference``), not the straight line of
  random's expectation: a policy's exact curve is one noisy realisation whose hull (AIQ) and
  first crossing (CPT) pick its lucky points, and the reference must carry the same selection.
  APGR is linear in the curve, so random's APGR stays the straight line's exact 0.5.
- AIQ integrates over [min cost, max cost] of the points and divides by that range (the paper's
  formula); the hull is extended flat to the right of its best point. RouterBench's published
  script divides by the largest cost instead (as if the cheapest cost were 0); pass
  ``cost_range`` to integrate several routers over one shared range.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.routing_curves import cpt, pgr_summaries
from harness.protocols.routing_inputs import aligned_length, checked_pair, checked_vector
from harness.stats import mcnemar_exact, min_mcnemar_p, sign_flip_test

__all__ = [
    "GapCheck",
    "gap_check",
    "gap_is_resolvable",
    "routing_summaries",
    "N_RANDOM_ORDERINGS",
    "random_ordering_reference",
    "convex_hull_upper",
    "aiq",
    "MixedPolicy",
    "mixed_policy",
    "operating_cost",
]

# --------------------------------------------------------------------------------------------
# Is the gap told from zero
# --------------------------------------------------------------------------------------------


class GapCheck(NamedTuple):
    """Whether the base-to-extra gap is told from zero (``gap_check``)."""

    ok: bool
    reason: str  # "" when ok
    test: str  # "mcnemar" (0/1 outcomes) or "sign_flip" (continuous, by document)
    p: float  # two-sided p-value of that test (NaN when not reached: too few discordant)
    n_rescues: int
    n_harms: int


def _is_binary(*arrays: np.ndarray) -> bool:
    return all(np.isin(a, (0.0, 1.0)).all() for a in arrays)


def _check_alpha(alpha) -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ConfigError("alpha", f"must be in (0, 1), got {alpha!r}")
    return a


def gap_check(base, extra, min_discordant: int = 10, alpha: float = 0.05, groups=None) -> GapCheck:
    """Whether the base-to-extra gap is worth dividing by, with the test behind the answer.

    PGR divides by extra_mean - base_mean. When that gap cannot be told from zero, PGR, APGR
    and CPT are ratios whose denominator is noise (a gap of 30 rescues vs 22 harms, McNemar p
    about 0.3, gives APGRs of 2 to 5); they are then reported as undefined (NaN) with the
    reason. The checks, in this order (the reason names the first that fails):

    1. rescues + harms >= ``min_discordant``, a rescue being a question with extra > base and a
       harm one with extra < base (for 0/1 hits: McNemar's discordant pairs; the reason quotes
       the smallest McNemar p-value that many pairs allow);
    2. the net gap sum(extra - base) > 0 (for 0/1 hits: rescues - harms > 0): otherwise there is
       no gap to recover;
    3. the gap is told from zero at level ``alpha`` by a two-sided paired test of "extra and
       base are exchangeable": with ``groups`` (document ids) the sign-flip test on document
       totals of extra - base (``harness.stats.sign_flip_test(extra - base, groups)``, exact up
       to 16 non-zero documents, else 20,000 sign patterns with seed 0), the clustered version
       of McNemar's test (identical to the exact McNemar test when every document holds one
       question); without groups, for 0/1 outcomes, the exact McNemar test of rescues vs harms
       (``harness.stats.mcnemar_exact(extra, base)``), which counts questions as independent.
       Required: p < ``alpha``. With check 2 passed this amounts to a one-sided test at
       alpha / 2 that extra beats base.

    ``groups`` are required for continuous outcomes; protocol B always passes them.
    """
    b, e = checked_pair(base, extra)
    if isinstance(min_discordant, bool) or int(min_discordant) != min_discordant or min_discordant < 0:
        raise ConfigError("min_discordant", f"must be a non-negative integer, got {min_discordant!r}")
    min_discordant = int(min_discordant)
    alpha = _check_alpha(alpha)
    binary = _is_binary(b, e)
    if not binary:
        if groups is None:
            raise HarnessError(
                "gap_check: continuous outcomes need groups (document ids) for the sign-flip test of the gap"
            )
        g = np.asarray(groups)
        if g.ndim != 1 or len(g) != len(b):
            raise HarnessError(f"groups must be one-dimensional and align with the outcomes, got shape {g.shape}")
    test = "sign_flip" if groups is not None else "mcnemar"
    rescues = int(np.sum(e > b))
    harms = int(np.sum(e < b))
    discordant = rescues + harms
    counts = f"{rescues} rescues, {harms} harms"
    if discordant < min_discordant:
        return GapCheck(False, (
            f"gap rests on {discordant} discordant questions ({counts}), fewer "
            f"than min_discordant={min_discordant} (smallest McNemar p they allow: "
            f"{min_mcnemar_p(discordant):.3g}); PGR/APGR/CPT not defined"
        ), test, math.nan, rescues, harms)
    net = float(np.sum(e - b))
    if net <= 0:
        return GapCheck(False, (
            f"extra does not beat base: net gap {net:+.6g} over {len(b)} questions "
            f"({counts}); PGR/APGR/CPT not defined"
        ), test, math.nan, rescues, harms)
    if groups is None:
        p = mcnemar_exact(e, b)[2]
        what = f"exact McNemar test of {rescues} rescues vs {harms} harms"
    else:
        p = sign_flip_test(e - b, groups)
        n_docs = len(np.unique(np.asarray(groups).astype(str)))
        what = f"sign-flip test of extra - base on {n_docs} document totals ({counts})"
    if not p < alpha:
        return GapCheck(False, (
            f"gap not told from zero: {what} p = {p:.3g} >= alpha={alpha:g}; PGR/APGR/CPT not defined"
        ), test, float(p), rescues, harms)
    return GapCheck(True, "", test, float(p), rescues, harms)


def gap_is_resolvable(base, extra, min_discordant: int = 10, alpha: float = 0.05, groups=None) -> tuple[bool, str]:
    """(True, "") or (False, reason): ``gap_check`` without the test's details. Undefined when
    fewer than ``min_discordant`` questions are discordant, when extra does not beat base on
    net, or when the paired test of the gap (exact McNemar for 0/1 outcomes, the document
    sign-flip test, which needs ``groups``, for continuous ones) gives p >= ``alpha``."""
    c = gap_check(base, extra, min_discordant, alpha, groups)
    return c.ok, c.reason

# --------------------------------------------------------------------------------------------
# Summaries, random's reference
# --------------------------------------------------------------------------------------------


def routing_summaries(scores, base, extra, min_discordant: int = 10, alpha: float = 0.05, groups=None) -> dict:
    """APGR, CPT(50%) and CPT(80%) of a score on the exact curve (ties at their expectation).

    Returns {"apgr", "cpt50", "cpt80", "defined", "reason", "gap_test", "gap_p", "n_rescues",
    "n_harms"}. When ``gap_check`` (``min_discordant``, ``alpha``; ``groups`` for continuous
    outcomes) says no, the three summaries are NaN, ``defined`` is False and ``reason`` says
    why; otherwise ``reason`` is "". ``gap_p`` is the p-value of the gap's test (NaN when an
    earlier check failed).

    Oracle (scores = delta, 0/1 hits, R rescues, H harms, n questions): the R rescues come
    first, each call recovers one question, so PGR(k / n) = k / (R - H) for k <= R, flat at
    R / (R - H) over the neutral questions, back down to 1 over the H harms (they sort last).
    Hence CPT(x) = x (R - H) / n for every level x <= R / (R - H) (in particular 0.5 and 0.8),
    and APGR = [R^2 / 2 + (n - R - H) R + H (2R - H) / 2] / (n (R - H)) > 1 when H > 0.
    Constant score: the straight line, APGR 0.5, CPT(x) = x. (Random's CPT reference in
    protocol B is not this line but ``random_ordering_reference``.)
    """
    check = gap_check(base, extra, min_discordant, alpha, groups)
    out = {
        "apgr": math.nan,
        "cpt50": math.nan,
        "cpt80": math.nan,
        "defined": check.ok,
        "reason": check.reason,
        "gap_test": check.test,
        "gap_p": check.p,
        "n_rescues": check.n_rescues,
        "n_harms": check.n_harms,
    }
    summaries = pgr_summaries(scores, base, extra)  # validates the scores even when undefined
    if not check.ok:
        return out
    if math.isnan(summaries["apgr"]):  # only reachable through rounding of a near-zero continuous gap
        out["defined"], out["reason"] = False, "net gap is not positive; PGR/APGR/CPT not defined"
        return out
    out.update(summaries)
    return out


N_RANDOM_ORDERINGS = 200  # M: seeded uniformly random orderings behind random's AIQ and CPT


def random_orderings(n: int, seed, n_orders: int = N_RANDOM_ORDERINGS) -> np.ndarray:
    """The (n_orders x n) matrix of orderings behind ``random_ordering_reference``: row m is
    the m-th ``rng.permutation(n)`` of ``rng = np.random.default_rng(seed)`` (``seed`` an int
    or a sequence of non-negative ints). Exposed so that tests can replay the same orderings."""
    if isinstance(n_orders, bool) or int(n_orders) != n_orders or n_orders < 1:
        raise ConfigError("n_orders", f"must be a positive integer, got {n_orders!r}")
    rng = np.random.default_rng(seed)
    n, n_orders = int(n), int(n_orders)
    return np.array([rng.permutation(n) for _ in range(n_orders)], dtype=np.int64).reshape(n_orders, n)


def random_ordering_reference(
    base,
    extra,
    seed,
    *,
    extra_cost=None,
    base_cost: float = 0.0,
    n_orders: int = N_RANDOM_ORDERINGS,
) -> dict:
    """Random's reference for AIQ and CPT: the mean of each statistic over ``n_orders`` seeded
    uniformly random orderings of the questions (``random_orderings``).

    Why not random's expectation (the straight line from always-base to always-extra): a
    policy's exact curve is one noisy realisation of its ordering, and AIQ (the upper convex
    hull) and CPT (the first crossing of a level) are not linear in the curve: they pick the
    realisation's lucky points. A uniformly random ordering's curve wiggles around the straight
    line too, so its hull lies above the line and its first crossing comes early; comparing a
    policy's hulled curve with the un-hulled line favours the policy (a random policy beat the
    line's AIQ in 8 of 8 seeds by about +0.013 on the synthetic table). Averaging the same
    statistic over random orderings of the same questions gives the reference the same
    selection effect: a policy that ranks no better than chance now sits at the reference in
    expectation. APGR is linear in the curve (its mean over orderings is the line's exactly),
    so it needs no such reference: random's APGR stays the exact 0.5.

    Per ordering o (distinct positions, so no ties): outcome(k) = mean(base) + sum(delta over
    o[:k]) / n and cost(k) = ``base_cost`` + sum(extra_cost over o[:k]) / n for k = 0..n
    (``extra_cost`` per question, default 1: cost = usage); AIQ = ``aiq`` of those n + 1
    points; CPT(x) = ``cpt`` of PGR(k / n) = sum(delta over o[:k]) / sum(delta) (NaN for every
    ordering when the net gap is not positive; whether the gap is resolvable is the caller's
    question). Returns {"aiq", "cpt50", "cpt80"} (means) and their population sds over the
    orderings ("aiq_sd", "cpt50_sd", "cpt80_sd") and "n_orders".
    """
    b, e = checked_pair(base, extra)
    n = len(b)
    if extra_cost is None:
        c = np.ones(n)
    else:
        c = checked_vector("extra_cost", extra_cost)
        aligned_length(base=b, extra_cost=c)
    base_cost = float(base_cost)
    if not math.isfinite(base_cost):
        raise ConfigError("base_cost", f"must be finite, got {base_cost!r}")
    orders = random_orderings(n, seed, n_orders)
    delta = e - b
    zeros = np.zeros((len(orders), 1))
    gains = np.hstack([zeros, np.cumsum(delta[orders], axis=1)])  # (M, n + 1)
    costs = base_cost + np.hstack([zeros, np.cumsum(c[orders], axis=1)]) / n
    outcome = b.mean() + gains / n
    usage = np.arange(n + 1) / n
    total = float(delta.sum())
    aiqs = np.array([aiq(costs[m], outcome[m]) for m in range(len(orders))])
    out = {"aiq": float(aiqs.mean()), "aiq_sd": float(aiqs.std()), "n_orders": len(orders)}
    for key, level in (("cpt50", 0.5), ("cpt80", 0.8)):
        if total > 0:
            vals = np.array([cpt(usage, gains[m] / gains[m, -1], level) for m in range(len(orders))])
            out[key], out[f"{key}_sd"] = float(vals.mean()), float(vals.std())
        else:
            out[key], out[f"{key}_sd"] = math.nan, math.nan
    return out


# --------------------------------------------------------------------------------------------
# AIQ (RouterBench)
# --------------------------------------------------------------------------------------------


def convex_hull_upper(costs, qualities) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (costs, qualities) of the non-decreasing upper convex hull of operating points
    (RouterBench, Hu et al. 2024), sorted by cost.

    A point is dropped when another point is at most as costly and at least as good (one of the
    two strictly; of exact duplicates one is kept), and then when it lies on or below the
    segment joining two remaining points around it. What is left starts at the best of the
    cheapest points and ends at the cheapest of the best points; joined by straight lines it is
    concave and strictly increasing in cost. Every point on it is achievable in expectation by
    mixing its two neighbouring vertices with a seeded coin (``mixed_policy``); to the right of
    the last vertex nothing better is available, so the hull is flat there (see ``aiq``).
    """
    c = checked_vector("costs", costs)
    q = checked_vector("qualities", qualities)
    aligned_length(costs=c, qualities=q)
    order = np.lexsort((-q, c))  # cost ascending, best quality first within a cost
    pareto: list[tuple[float, float]] = []
    for i in order:
        if not pareto or q[i] > pareto[-1][1]:
            pareto.append((float(c[i]), float(q[i])))
    hull: list[tuple[float, float]] = []
    for x2, y2 in pareto:  # monotone chain, upper part: keep only right (clockwise) turns
        while len(hull) >= 2:
            (x0, y0), (x1, y1) = hull[-2], hull[-1]
            if (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0) >= 0:
                hull.pop()  # hull[-1] is on or below the segment hull[-2] -> new point
            else:
                break
        hull.append((x2, y2))
    arr = np.asarray(hull, dtype=float)
    return arr[:, 0], arr[:, 1]


def aiq(costs, qualities, cost_range: tuple[float, float] | None = None) -> float:
    """Average improvement in quality (RouterBench, Hu et al. 2024):

        AIQ = 1 / (c_max - c_min) * integral_{c_min}^{c_max} H(c) dc,

    H the non-decreasing upper convex hull (``convex_hull_upper``) joined by straight lines and
    extended flat to the right of its best point (as RouterBench's evaluation script does when
    it appends (max cost, last hull quality)). [c_min, c_max] is the cost range of the given
    points, or ``cost_range`` to put several routers on one shared range (its lower end may
    not be below the cheapest point: the hull is not defined there).

    Degenerate range (all costs equal, or cost_range with equal ends): the hull's height there,
    which for equal costs is the best quality. Note that RouterBench's script divides the area
    by the largest cost rather than by the range; the paper's formula, used here, differs
    unless the cheapest cost is 0.
    """
    hc, hq = convex_hull_upper(costs, qualities)
    c = np.asarray(costs, dtype=float)
    if cost_range is None:
        lo, hi = float(c.min()), float(c.max())
    else:
        lo, hi = (float(v) for v in cost_range)
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise ConfigError("cost_range", f"must be finite (low, high) with low <= high, got {cost_range!r}")
        if lo < hc[0]:
            raise ConfigError("cost_range", f"low end {lo} is below the cheapest operating point {hc[0]}")
    if hi == lo:
        return float(np.interp(lo, hc, hq))
    inside = hc[(hc > lo) & (hc < hi)]
    grid = np.r_[lo, inside, hi]
    h = np.interp(grid, hc, hq)  # np.interp holds the last value to the right: the flat extension
    area = float(np.sum((grid[1:] - grid[:-1]) * (h[1:] + h[:-1]) / 2))
    return area / (hi - lo)


class MixedPolicy(NamedTuple):
    """A seeded coin between two operating points: take b with probability q."""

    q: float  # probability of operating point b
    expected_cost: float  # q * cost_b + (1 - q) * cost_a (= the target)
    expected_quality: float  # q * quality_b + (1 - q) * quality_a
    take_b: np.ndarray  # bool per question: True = route this question by operating point b


def mixed_policy(point_a, point_b, target_cost: float, seed: int, n: int) -> MixedPolicy:
    """Mix two operating points (cost, quality) to reach ``target_cost`` in expectation.

    q = (target_cost - cost_a) / (cost_b - cost_a), so q * cost_b + (1 - q) * cost_a =
    target_cost; each of the n questions independently follows operating point b when
    ``np.random.default_rng(seed).random(n) < q`` (a seeded coin), else a. Expected cost and
    quality lie on the segment a-b: this is what makes every point of the convex hull (and of
    the straight lines APGR and CPT draw between operating points) achievable. The realised
    share of b is Binomial(n, q) / n, so the cost is met in expectation, not exactly.
    ``target_cost`` must lie between the two costs; equal costs give q = 0.
    """
    ca, qa = (float(v) for v in point_a)
    cb, qb = (float(v) for v in point_b)
    t = float(target_cost)
    if not all(math.isfinite(v) for v in (ca, qa, cb, qb, t)):
        raise ConfigError("target_cost", "operating points and target cost must be finite")
    if not min(ca, cb) <= t <= max(ca, cb):
        raise ConfigError("target_cost", f"{t} is not between the two operating points' costs {ca} and {cb}")
    if int(n) != n or n < 0:
        raise ConfigError("n", f"must be a non-negative integer, got {n!r}")
    q = 0.0 if cb == ca else min(1.0, max(0.0, (t - ca) / (cb - ca)))
    take_b = np.random.default_rng(seed).random(int(n)) < q
    return MixedPolicy(q, q * cb + (1 - q) * ca, q * qb + (1 - q) * qa, take_b)


def operating_cost(usage, base_cost: float, marginal_extra_cost: float):
    """Mean cost per question of an operating point that runs the extra arm on a share
    ``usage`` of the questions: base_cost + usage * marginal_extra_cost.

    base_cost is the mean measured cost per question of the base arm; marginal_extra_cost the
    mean measured cost the extra arm adds on a question where it runs (cost_extra - cost_base if
    it replaces the base arm, cost_extra if it runs on top of it). Maps an exact curve
    (usage, outcome) to (cost, quality) points for ``aiq``. Scalar in, float out; array in,
    array out. Usage outside [0, 1] is an error.
    """
    u = np.asarray(usage, dtype=float)
    if np.isnan(u).any() or (u < 0).any() or (u > 1).any():
        raise HarnessError("operating_cost: usage must lie in [0, 1]")
    for name, v in (("base_cost", base_cost), ("marginal_extra_cost", marginal_extra_cost)):
        if not math.isfinite(float(v)):
            raise ConfigError(name, f"must be finite, got {v!r}")
    cost = float(base_cost) + u * float(marginal_extra_cost)
    return float(cost) if cost.ndim == 0 else cost
