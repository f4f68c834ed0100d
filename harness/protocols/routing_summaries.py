"""Routing summaries for one base/extra pair: PGR, APGR and CPT (RouteLLM) and AIQ (RouterBench).

Why: the budget protocol (SPEC 6) reports outcome against usage; the routing literature
summarises the same curve in standard units. RouteLLM (Ong et al. 2024, "RouteLLM: Learning to
Route LLMs with Preference Data") routes between a weak and a strong model, which here are the
cheap **base** arm and the **extra** arm; it reports the performance gap recovered (PGR), its
average over usage (APGR) and the call-performance threshold (CPT). RouterBench (Hu et al. 2024,
"RouterBench: A Benchmark for Multi-LLM Routing System") reports the average improvement in
quality (AIQ): the mean height of the non-decreasing convex hull of a router's (cost, quality)
operating points.

Everything here is a pure function over numpy arrays (one entry per question or per operating
point); randomness only in ``mixed_policy``, through ``np.random.default_rng(seed)``.

Choices where the papers leave a detail open (each also in its function's docstring):
- Ties in the exact curve count at their expectation (SPEC 6), so a constant score is random's
  straight line: APGR 0.5, CPT(x) = x.
- Operating points are joined by straight lines (APGR, CPT): a point on the segment between two
  operating points is what a seeded coin mixing the two achieves in expectation
  (``mixed_policy``). (0, PGR 0) and (1, PGR 1) are added where missing; operating points that
  share a usage are averaged (the 50/50 mix).
- PGR, APGR and CPT are NaN with a plain reason when the base-to-extra gap rests on fewer than
  ``min_discordant`` discordant questions or is not positive (``gap_is_resolvable``): a ratio of
  two noisy small numbers is not reported.
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
from harness.stats import min_mcnemar_p

__all__ = [
    "expected_exact_curve",
    "expected_gains",
    "pgr_curve",
    "apgr",
    "cpt",
    "gap_is_resolvable",
    "routing_summaries",
    "convex_hull_upper",
    "aiq",
    "MixedPolicy",
    "mixed_policy",
    "operating_cost",
]

# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def _vector(name: str, values, allow_inf: bool = False) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise HarnessError(f"{name} must be one-dimensional, got shape {arr.shape}")
    bad = np.isnan(arr) if allow_inf else ~np.isfinite(arr)
    if bad.any():
        raise HarnessError(f"{name} holds {int(bad.sum())} non-finite value(s) (first at index {int(np.argmax(bad))})")
    return arr


def _aligned(**arrays) -> int:
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise HarnessError(f"arrays must align, got lengths {lengths}")
    n = next(iter(lengths.values()))
    if n == 0:
        raise HarnessError(f"arrays must be non-empty ({', '.join(lengths)})")
    return n


def _pair(base, extra) -> tuple[np.ndarray, np.ndarray]:
    b = _vector("base", base)
    e = _vector("extra", extra)
    _aligned(base=b, extra=e)
    return b, e


# --------------------------------------------------------------------------------------------
# Exact operating curve
# --------------------------------------------------------------------------------------------


def expected_exact_curve(scores, base, extra) -> tuple[np.ndarray, np.ndarray]:
    """(usage k / n, expected mean outcome) for k = 0..n when the extra arm runs on the k
    highest-scored questions, ties broken uniformly at random and counted at their expectation.

    Definition (SPEC 6 exact frontier): order the questions by score, descending; delta = extra -
    base. For a cut k that falls inside a block of tied scores occupying sorted positions
    [above, above + m), with ``above`` questions scored strictly higher:

        outcome(k) = (sum(base) + sum(delta of the ``above`` questions)
                      + (k - above) * mean(delta in the block)) / n.

    This is the average over all m! orders of the tied block (each tied question is among the
    first k - above of the block with probability (k - above) / m), i.e. the curve is linear
    across each tied block, with exact values at block boundaries. A constant score is a single
    block: the straight line base_mean + (k / n) * (extra_mean - base_mean), random's expectation.

    Scores may be +-inf (a policy that always or never wants the extra arm); NaN is an error.
    """
    b, e = _pair(base, extra)
    gains = _expected_gains(scores, b, e)
    n = len(b)
    return np.arange(n + 1) / n, b.mean() + gains / n


def _expected_gains(scores, b: np.ndarray, e: np.ndarray) -> np.ndarray:
    s = _vector("scores", scores, allow_inf=True)
    _aligned(scores=s, base=b, extra=e)
    return expected_gains(s, e - b)


def expected_gains(scores, delta) -> np.ndarray:
    """Expected sum of ``delta`` over the k highest-scored questions, k = 0..n (ties at their
    expectation: exact at the boundaries of tied blocks, linear inside a block); the last entry
    is sum(delta). Also the expected cumulative cost of the first k questions when ``delta``
    holds per-question costs."""
    s = _vector("scores", scores, allow_inf=True)
    delta = _vector("delta", delta)
    n = _aligned(scores=s, delta=delta)
    order = np.argsort(-s, kind="stable")
    s_sorted = s[order]
    delta = delta[order]
    # block boundaries: 0, every position where the sorted score changes, n
    bounds = np.r_[0, np.flatnonzero(s_sorted[1:] != s_sorted[:-1]) + 1, n]
    cum = np.r_[0.0, np.cumsum(delta)]
    return np.interp(np.arange(n + 1), bounds, cum[bounds])  # exact at boundaries, linear inside a block


# --------------------------------------------------------------------------------------------
# PGR, APGR, CPT (RouteLLM)
# --------------------------------------------------------------------------------------------


def pgr_curve(usage, outcome, base_mean: float, extra_mean: float) -> np.ndarray:
    """Performance gap recovered at each operating point (RouteLLM, Ong et al. 2024):

        PGR(u) = (outcome(u) - base_mean) / (extra_mean - base_mean).

    0 at always-base, 1 at always-extra; it can exceed 1 where a router avoids the extra arm's
    harms (the oracle does). ``usage`` only fixes the alignment (one PGR per operating point).
    A zero gap gives an all-NaN array; whether the gap is worth dividing by is
    ``gap_is_resolvable``'s question, not this formula's.
    """
    u = _vector("usage", usage)
    y = _vector("outcome", outcome)
    _aligned(usage=u, outcome=y)
    gap = float(extra_mean) - float(base_mean)
    if not math.isfinite(gap):
        raise HarnessError(f"pgr_curve: base_mean {base_mean!r} and extra_mean {extra_mean!r} must be finite")
    if gap == 0.0:
        return np.full(len(y), np.nan)
    return (y - float(base_mean)) / gap


def _pgr_points(usage, pgr) -> tuple[np.ndarray, np.ndarray] | None:
    """Sorted operating points with (0, 0) and (1, 1) added where missing and points of equal
    usage averaged; None when a PGR is NaN (an undefined gap)."""
    u = _vector("usage", usage)
    p = np.asarray(pgr, dtype=float)
    if p.ndim != 1:
        raise HarnessError(f"pgr must be one-dimensional, got shape {p.shape}")
    _aligned(usage=u, pgr=p)
    if np.isnan(p).any():
        return None
    if np.isinf(p).any():
        raise HarnessError("pgr holds an infinite value")
    if (u < 0).any() or (u > 1).any():
        raise HarnessError(f"usage must lie in [0, 1], got range [{u.min()}, {u.max()}]")
    if not (u == 0.0).any():
        u, p = np.r_[0.0, u], np.r_[0.0, p]
    if not (u == 1.0).any():
        u, p = np.r_[u, 1.0], np.r_[p, 1.0]
    ux, inverse = np.unique(u, return_inverse=True)
    px = np.bincount(inverse, weights=p) / np.bincount(inverse)
    return ux, px


def apgr(usage, pgr) -> float:
    """Average PGR over usage in [0, 1] (RouteLLM's APGR, Ong et al. 2024).

    The operating points (usage_i, PGR_i) are joined by straight lines and the area under that
    polyline over [0, 1] is taken with the trapezoid rule (the interval has length 1, so area =
    average). On the exact curve (``expected_exact_curve``: every k = 0..n) this is the
    trapezoid over its n + 1 points. For a handful of deployable operating points, (0, 0)
    (always-base) and (1, 1) (always-extra) are added where no point sits at usage 0 or 1;
    points that share a usage are averaged (the 50/50 mix of them). Straight lines are what a
    seeded coin mixing two neighbouring operating points achieves in expectation
    (``mixed_policy``). RouteLLM approximates the same integral on a grid of thresholds.

    Random's straight line gives 0.5; the oracle exceeds 1 when the extra arm has harms. NaN
    when a PGR is NaN (zero gap).
    """
    pts = _pgr_points(usage, pgr)
    if pts is None:
        return math.nan
    u, p = pts
    return float(np.sum((u[1:] - u[:-1]) * (p[1:] + p[:-1]) / 2))


def cpt(usage, pgr, level: float) -> float:
    """Call-performance threshold (RouteLLM, Ong et al. 2024): the smallest usage at which PGR
    reaches ``level`` (RouteLLM reports CPT(50%) and CPT(80%), i.e. level 0.5 and 0.8).

    The operating points are prepared as in ``apgr`` ((0, 0) and (1, 1) added where missing,
    equal usages averaged) and joined by straight lines; the answer is the first crossing of
    that polyline: at the first point i with PGR_i >= level, u_{i-1} + (level - PGR_{i-1}) /
    (PGR_i - PGR_{i-1}) * (u_i - u_{i-1}) (or u_0 when the first point already reaches it).
    Because always-extra is PGR 1, any level <= 1 is reached; NaN when the polyline never
    reaches ``level`` (a level above the curve's maximum) or when a PGR is NaN (zero gap).
    """
    level = float(level)
    if not math.isfinite(level):
        raise ConfigError("level", f"must be a finite number, got {level!r}")
    pts = _pgr_points(usage, pgr)
    if pts is None:
        return math.nan
    u, p = pts
    hits = np.flatnonzero(p >= level)
    if len(hits) == 0:
        return math.nan
    i = int(hits[0])
    if i == 0:
        return float(u[0])
    return float(u[i - 1] + (level - p[i - 1]) / (p[i] - p[i - 1]) * (u[i] - u[i - 1]))


def gap_is_resolvable(base, extra, min_discordant: int = 10) -> tuple[bool, str]:
    """Whether the base-to-extra gap is worth dividing by: (True, "") or (False, reason).

    PGR divides by extra_mean - base_mean. When that gap rests on a handful of discordant
    questions it is mostly noise, and PGR, APGR and CPT become large ratios of two noisy
    numbers; they are then reported as undefined (NaN) with the reason. Undefined when

    - rescues + harms < ``min_discordant``, where a rescue is a question with extra > base and a
      harm one with extra < base (for 0/1 hits: the discordant pairs of McNemar's test; the
      reason quotes the smallest McNemar p-value that many pairs allow), or
    - the net gap sum(extra - base) <= 0 (for 0/1 hits: rescues - harms <= 0): the extra arm
      does not improve on the base arm, so there is no gap to recover.
    """
    b, e = _pair(base, extra)
    if isinstance(min_discordant, bool) or int(min_discordant) != min_discordant or min_discordant < 0:
        raise ConfigError("min_discordant", f"must be a non-negative integer, got {min_discordant!r}")
    min_discordant = int(min_discordant)
    rescues = int(np.sum(e > b))
    harms = int(np.sum(e < b))
    discordant = rescues + harms
    if discordant < min_discordant:
        return False, (
            f"gap rests on {discordant} discordant questions ({rescues} rescues, {harms} harms), fewer "
            f"than min_discordant={min_discordant} (smallest McNemar p they allow: "
            f"{min_mcnemar_p(discordant):.3g}); PGR/APGR/CPT not defined"
        )
    net = float(np.sum(e - b))
    if net <= 0:
        return False, (
            f"extra does not beat base: net gap {net:+.6g} over {len(b)} questions "
            f"({rescues} rescues, {harms} harms); PGR/APGR/CPT not defined"
        )
    return True, ""


def routing_summaries(scores, base, extra, min_discordant: int = 10) -> dict:
    """APGR, CPT(50%) and CPT(80%) of a score on the exact curve (ties at their expectation).

    Returns {"apgr", "cpt50", "cpt80", "defined", "reason", "n_rescues", "n_harms"}. When
    ``gap_is_resolvable`` says no, the three summaries are NaN, ``defined`` is False and
    ``reason`` says why; otherwise ``reason`` is "".

    Oracle (scores = delta, 0/1 hits, R rescues, H harms, n questions): the R rescues come
    first, each call recovers one question, so PGR(k / n) = k / (R - H) for k <= R, flat at
    R / (R - H) over the neutral questions, back down to 1 over the H harms (they sort last).
    Hence CPT(x) = x (R - H) / n for every level x <= R / (R - H) (in particular 0.5 and 0.8),
    and APGR = [R^2 / 2 + (n - R - H) R + H (2R - H) / 2] / (n (R - H)) > 1 when H > 0.
    Constant score: the straight line, APGR 0.5, CPT(x) = x.
    """
    ok, reason = gap_is_resolvable(base, extra, min_discordant)
    b, e = _pair(base, extra)
    out = {
        "apgr": math.nan,
        "cpt50": math.nan,
        "cpt80": math.nan,
        "defined": ok,
        "reason": reason,
        "n_rescues": int(np.sum(e > b)),
        "n_harms": int(np.sum(e < b)),
    }
    gains = _expected_gains(scores, b, e)  # validates the scores even when undefined
    if not ok:
        return out
    # PGR on the sum scale, gains / gains[-1]: the same ratio as pgr_curve, without the rounding
    # of two means, so PGR is exactly 0 at usage 0 and 1 at usage 1 (and k / (R - H) for the
    # oracle on 0/1 hits).
    if not gains[-1] > 0:  # only reachable through rounding of a near-zero continuous gap
        out["defined"], out["reason"] = False, f"net gap {gains[-1]:+.6g} is not positive; PGR/APGR/CPT not defined"
        return out
    usage = np.arange(len(b) + 1) / len(b)
    pgr = gains / gains[-1]
    out["apgr"] = apgr(usage, pgr)
    out["cpt50"] = cpt(usage, pgr, 0.5)
    out["cpt80"] = cpt(usage, pgr, 0.8)
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
    c = _vector("costs", costs)
    q = _vector("qualities", qualities)
    _aligned(costs=c, qualities=q)
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
