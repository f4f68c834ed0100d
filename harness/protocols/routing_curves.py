"""The exact operating curve of a score and RouteLLM's summaries of it: PGR, APGR and CPT (Ong et
al. 2024, "RouteLLM: Learning to Route LLMs with Preference Data"), for one base/extra pair.

Why its own module: these are the formulas on a curve; whether a pair's gap is worth dividing by,
random's reference and AIQ are in ``harness.protocols.routing_summaries`` (whose docstring gives
the whole picture and the choices where the papers leave a detail open).

Choices (each also in its function's docstring):
- Ties in the exact curve count at their expectation (docs/metrics.md §6), so a constant score is random's
  straight line: APGR 0.5, CPT(x) = x.
- Operating points are joined by straight lines (APGR, CPT): a point on the segment between two
  operating points is what a seeded coin mixing the two achieves in expectation
  (``routing_summaries.mixed_policy``). (0, PGR 0) and (1, PGR 1) are added where missing;
  operating points that share a usage are averaged (the 50/50 mix).
"""

from __future__ import annotations

import math

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.routing_inputs import aligned_length, checked_pair, checked_vector

__all__ = [
    "expected_exact_curve",
    "expected_gains",
    "pgr_curve",
    "apgr",
    "cpt",
    "pgr_summaries",
]

# --------------------------------------------------------------------------------------------
# Exact operating curve
# --------------------------------------------------------------------------------------------


def expected_exact_curve(scores, base, extra) -> tuple[np.ndarray, np.ndarray]:
    """(usage k / n, expected mean outcome) for k = 0..n when the extra arm runs on the k
    highest-scored questions, ties broken uniformly at random and counted at their expectation.

    Definition (docs/metrics.md §6 exact frontier): order the questions by score, descending; delta = extra -
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
    b, e = checked_pair(base, extra)
    gains = _expected_gains(scores, b, e)
    n = len(b)
    return np.arange(n + 1) / n, b.mean() + gains / n


def _expected_gains(scores, b: np.ndarray, e: np.ndarray) -> np.ndarray:
    s = checked_vector("scores", scores, allow_inf=True)
    aligned_length(scores=s, base=b, extra=e)
    return expected_gains(s, e - b)


def expected_gains(scores, delta) -> np.ndarray:
    """Expected sum of ``delta`` over the k highest-scored questions, k = 0..n (ties at their
    expectation: exact at the boundaries of tied blocks, linear inside a block); the last entry
    is sum(delta). Also the expected cumulative cost of the first k questions when ``delta``
    holds per-question costs."""
    s = checked_vector("scores", scores, allow_inf=True)
    delta = checked_vector("delta", delta)
    n = aligned_length(scores=s, delta=delta)
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
    u = checked_vector("usage", usage)
    y = checked_vector("outcome", outcome)
    aligned_length(usage=u, outcome=y)
    gap = float(extra_mean) - float(base_mean)
    if not math.isfinite(gap):
        raise HarnessError(f"pgr_curve: base_mean {base_mean!r} and extra_mean {extra_mean!r} must be finite")
    if gap == 0.0:
        return np.full(len(y), np.nan)
    return (y - float(base_mean)) / gap


def _pgr_points(usage, pgr) -> tuple[np.ndarray, np.ndarray] | None:
    """Sorted operating points with (0, 0) and (1, 1) added where missing and points of equal
    usage averaged; None when a PGR is NaN (an undefined gap)."""
    u = checked_vector("usage", usage)
    p = np.asarray(pgr, dtype=float)
    if p.ndim != 1:
        raise HarnessError(f"pgr must be one-dimensional, got shape {p.shape}")
    aligned_length(usage=u, pgr=p)
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


def pgr_summaries(scores, base, extra) -> dict:
    """{"apgr", "cpt50", "cpt80"} of a score on the exact curve (ties at their expectation),
    without asking whether the gap is resolvable (``routing_summaries`` asks); NaN when the net
    gap is not positive.

    PGR is taken on the sum scale, gains / gains[-1]: the same ratio as ``pgr_curve`` without
    the rounding of two means, so PGR is exactly 0 at usage 0 and 1 at usage 1 (and k / (R - H)
    for the oracle on 0/1 hits).
    """
    b, e = checked_pair(base, extra)
    gains = _expected_gains(scores, b, e)
    if not gains[-1] > 0:
        return {"apgr": math.nan, "cpt50": math.nan, "cpt80": math.nan}
    usage = np.arange(len(b) + 1) / len(b)
    pgr = gains / gains[-1]
    return {"apgr": apgr(usage, pgr), "cpt50": cpt(usage, pgr, 0.5), "cpt80": cpt(usage, pgr, 0.8)}
