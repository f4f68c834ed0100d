"""Protocol B's rules (docs/metrics.md §6): the exact frontier with k calls, the calibrated
threshold and its tie probability, and the outcomes of random and the oracle at a matched usage.

Why apart: these are the pure formulas the protocol (``harness.protocols.budget``) and the
calibration-size diagnostic (``harness.protocols.calibration_size``) both apply; neither runs
the other to reach them. The choices are written down in docs/protocols.md, "Protocol B, budget".
"""

from __future__ import annotations

import math

import numpy as np

from harness.protocols.routing_curves import expected_gains

QUANTILE_METHOD = "inverted_cdf"
USAGE_TOL = 1e-12  # float noise in an expected usage is never a violation


def budget_key(rho: float) -> str:
    return f"{rho:.2f}"


def exact_count(n: int, rho: float) -> int:
    """floor(rho * n) (1e-9: 0.3 * 10 must be 3, not 2.9999)."""
    return int(math.floor(rho * n + 1e-9))


def run_probability(scores, threshold: float, tie_prob: float) -> np.ndarray:
    """Per question: 1 if score > threshold, ``tie_prob`` if score == threshold, else 0."""
    s = np.asarray(scores, dtype=float)
    return np.where(s > threshold, 1.0, np.where(s == threshold, float(tie_prob), 0.0))


def exact_rule(scores, k: int) -> tuple[float, float]:
    """(t, p) of the exact frontier with k calls: the (k+1)-th highest score and the share of
    its tied block that runs, so that the expected number of calls is exactly k."""
    s = np.asarray(scores, dtype=float)
    n = len(s)
    if k >= n:
        return -math.inf, 1.0
    t = float(np.sort(s)[::-1][k])
    above, tied = int(np.sum(s > t)), int(np.sum(s == t))
    return t, (k - above) / tied


def exact_run_probability(scores, rho: float) -> np.ndarray:
    """Expected run indicator of the exact frontier at budget rho (ties at their expectation):
    sums to floor(rho * n)."""
    s = np.asarray(scores, dtype=float)
    return run_probability(s, *exact_rule(s, exact_count(len(s), rho)))


def calibrated_threshold(cal_scores, rho: float) -> float:
    """The (1 - rho) empirical quantile of calibration scores (see docs/protocols.md)."""
    if rho >= 1.0:
        return -math.inf
    return float(np.quantile(np.asarray(cal_scores, dtype=float), 1.0 - rho, method=QUANTILE_METHOD))


def calibrated_rule(cal_scores, target: float) -> tuple[float, float]:
    """(t, p): run when score > t, and with probability p when score == t; on the calibration
    scores the expected usage is ``target`` (docs/protocols.md)."""
    s = np.asarray(cal_scores, dtype=float)
    t = calibrated_threshold(s, target)
    if math.isinf(t):
        return t, 1.0
    goal = target * len(s)
    above = int(np.sum(s > t))
    while above > goal + 1e-9:  # float artefact of the quantile only: move t up one score
        t = float(np.min(s[s > t]))
        above = int(np.sum(s > t))
    tied = int(np.sum(s == t))
    return t, float(min(1.0, max(0.0, (goal - above) / tied)))


def expected_outcome(prob, base, extra) -> float:
    """Mean outcome when question i runs the extra arm with probability prob_i. For 0/1
    probabilities it equals the mean of ``where(ran, extra, base)`` bit for bit."""
    p = np.asarray(prob, dtype=float)
    return float(np.mean((1.0 - p) * np.asarray(base, dtype=float) + p * np.asarray(extra, dtype=float)))


def exact_frontier_curve(scores, base, delta) -> tuple[np.ndarray, np.ndarray]:
    """(usage k/n, expected mean outcome) for k = 0..n along the score ordering, tied blocks
    at their expectation (linear inside the block): ``routing_curves.expected_exact_curve``."""
    base = np.asarray(base, dtype=float)
    return np.arange(len(base) + 1) / len(base), base.mean() + expected_gains(scores, delta) / len(base)


def oracle_curve(base, delta) -> np.ndarray:
    """Best mean outcome reachable with k extra calls, for k = 0..n (largest deltas first)."""
    d = np.sort(np.asarray(delta, dtype=float))[::-1]
    return float(np.mean(base)) + np.r_[0.0, np.cumsum(d)] / len(d)


def oracle_matched(base, delta, k: float) -> float:
    """Best mean outcome reachable with k extra calls; a fractional expected count k is
    interpolated between floor(k) and ceil(k)."""
    curve = oracle_curve(base, delta)
    n = len(curve) - 1
    k = min(max(float(k), 0.0), float(n))
    lo = int(math.floor(k))
    if k == lo:
        return float(curve[lo])
    return float(curve[lo] + (k - lo) * (curve[lo + 1] - curve[lo]))


def random_matched(base, delta, k: float) -> float:
    """Expected mean outcome of running extra on k uniformly random questions."""
    n = len(base)
    return float(np.mean(base) + (k / n) * np.mean(delta))

