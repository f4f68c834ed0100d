"""The exact power of the two-sided sign test on discordant documents: the maths the sample-size
plans of ``harness.paired`` search over (docs/metrics.md §12).

Why a module: the plan's search (``harness.paired.sample_size_plan``) reads these, and a
sweep's end runs hundreds of plans at many Holm levels, so each piece is vectorised over the
counts of discordant documents and the candidate sizes, and tested against exact integer sums.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import stats as sps


@functools.lru_cache(maxsize=64)
def critical_counts(n_max: int, alpha: float) -> np.ndarray:
    """c_D for D = 0..n_max: the largest c with 2 P(X <= c) < alpha, X ~ Bin(D, 1/2) (-1: none),
    shared by every plan of a sweep. From the normal approximation with a continuity correction
    (exact for all but about 0.3% of D), stepped down while 2 P(X <= c) >= alpha, then up while
    the next c holds: the counts of scipy's quantile stepped down, a few times faster."""
    D = np.arange(n_max + 1, dtype=np.int64)
    holds = lambda c, d: (c < 0) | (2 * sps.binom.cdf(c, d, 0.5) < alpha)  # noqa: E731 - c = -1: always
    c = np.clip(np.floor(D / 2 + sps.norm.ppf(alpha / 2) * np.sqrt(D) / 2 - 0.5), -1, D).astype(np.int64)
    todo = np.flatnonzero(~holds(c, D))
    while len(todo):
        c[todo] -= 1
        todo = todo[~holds(c[todo], D[todo])]
    todo = np.flatnonzero(c < D)
    while len(todo):
        todo = todo[(c[todo] < D[todo]) & holds(c[todo] + 1, D[todo])]
        c[todo] += 1
    out = c.astype(np.float64)
    out.setflags(write=False)
    return out


def sign_test_power_given_discordant(n_max: int, pi: float, alpha: float) -> np.ndarray:
    """g[D] for D = 0..n_max: the power of the exact two-sided sign test with D discordant
    documents, each pointing the policy's way with probability ``pi``. The test rejects when
    p = min(1, 2 P(X <= min(x, D - x))) < alpha under X ~ Bin(D, 1/2), i.e. when x <= c_D or
    x >= D - c_D with c_D the largest c with 2 P(X <= c) < alpha (no c: never). Vectorised
    over D."""
    D = np.arange(n_max + 1)
    c = critical_counts(1 << max(10, int(n_max).bit_length()), float(alpha))[: n_max + 1]  # shared, sliced
    g = sps.binom.cdf(c, D, pi) + sps.binom.sf(D - c - 1, D, pi)
    return np.where(c >= 0, g, 0.0)


POWER_BATCH = 64  # candidate sizes whose powers are computed in one vectorized call


def powers_at(ms: np.ndarray, q: float, g: np.ndarray) -> np.ndarray:
    """sum_D Bin(D; m, q) g[D] for every size m of ``ms``, over the D that carry any probability
    (1e-12 tails left out): the tails' bounds and the binomial probabilities in one elementwise
    call each (vectorized, the same numbers as one call per size), then each size's own product."""
    ms = np.asarray(ms, dtype=np.int64)
    lo = np.maximum(0, sps.binom.ppf(1e-12, ms, q) - 1).astype(np.int64)
    hi = np.minimum(ms, sps.binom.isf(1e-12, ms, q) + 1).astype(np.int64)
    counts = hi - lo + 1
    pmf = sps.binom.pmf(np.concatenate([np.arange(a, b + 1) for a, b in zip(lo, hi)]), np.repeat(ms, counts), q)
    ends = np.cumsum(counts)
    return np.array([float(pmf[e - c:e].copy() @ g[a:b + 1]) for e, c, a, b in zip(ends, counts, lo, hi)])


def first_powered(first: int, last: int, step: int, q: float, g: np.ndarray, power: float) -> int:
    """The first of the sizes first, first + step, ... (up to ``last``) whose power is not below
    ``power``, else the first size past ``last``: the plan's search, in vectorized batches."""
    m = first
    while m <= last:
        ms = np.arange(m, min(last, m + step * (POWER_BATCH - 1)) + 1, step)
        reached = np.flatnonzero(~(powers_at(ms, q, g) < power))
        if len(reached):
            return int(ms[reached[0]])
        m = int(ms[-1]) + step
    return m


def sign_test_power(n_docs: int, q: float, pi: float, alpha: float = 0.05) -> float:
    """Power of the exact sign test on ``n_docs`` documents, each discordant with probability
    ``q`` and, when discordant, pointing the policy's way with probability ``pi``:
    sum_D Bin(D; n_docs, q) g[D] (``sign_test_power_given_discordant``)."""
    return float(powers_at([int(n_docs)], q, sign_test_power_given_discordant(int(n_docs), pi, alpha))[0])
