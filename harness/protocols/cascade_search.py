"""The joint threshold search of a cascade under a mean-cost budget (docs/metrics.md §17).

Why a fixed grid and a fixed order: the thresholds are chosen on calibration data only and must
come out the same on every machine. Each stage's candidates are quantiles of its own calibration
scores (the same grid whatever the other thresholds are), every threshold vector is judged by
the same three keys (meets the budget, mean outcome, mean cost) and a full tie goes to the
lexicographically smaller vector of quantile indices, so the answer is a function of the data.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from harness.errors import ConfigError
from harness.protocols.cascade_eval import checked_cascade
from harness.protocols.nway_inputs import checked_budget, sum_tolerance

__all__ = ["EXHAUSTIVE_MAX_STAGES", "threshold_grid", "CascadeThresholds", "search_thresholds", "search_key",
           "coordinate_ascent"]

EXHAUSTIVE_MAX_STAGES = 3  # up to 3 stages (2 thresholds) every vector of the grid is tried
MAX_ROUNDS = 100  # coordinate ascent: full passes over the stages at most (it stops when none improves)
MAX_LEVELS = 1000


class CascadeThresholds(NamedTuple):
    """The chosen thresholds and what they do on the calibration questions."""

    thresholds: np.ndarray  # one per stage but the last; +inf: never stop there
    index: tuple[int, ...]  # their quantile indices in the grid (levels + 1: +inf)
    mean_outcome: float
    mean_cost: float
    feasible: bool  # False: no vector meets the budget; the cheapest one (all stop at stage 1) is returned
    evaluated: int  # threshold vectors judged
    method: str  # "exhaustive" or "coordinate ascent"


def threshold_grid(scores, levels: int) -> list[np.ndarray]:
    """Per stage k: its calibration scores' quantiles at i / levels, i = 0..levels (numpy's
    "lower" method: each is one of the scores, so index 0 = the smallest score stops every
    question there), then +inf (index levels + 1: nobody stops there)."""
    if not isinstance(levels, int) or isinstance(levels, bool) or not 1 <= levels <= MAX_LEVELS:
        raise ConfigError("grid", f"expected an integer number of quantile levels in [1, {MAX_LEVELS}], got {levels!r}")
    s = np.asarray(scores, dtype=float)
    q = np.arange(levels + 1) / levels
    return [np.r_[np.quantile(s[:, k], q, method="lower"), math.inf] for k in range(s.shape[1])]


class _Judge:
    """Sums of outcome and cost of threshold vectors given as grid indices, with the stop masks
    of every (stage, index) computed once."""

    def __init__(self, s: np.ndarray, y: np.ndarray, c: np.ndarray, grid: list[np.ndarray]):
        self.y, self.c, self.n = y, c, y.shape[0]
        self.masks = [s[:, k][None, :] >= g[:, None] for k, g in enumerate(grid)]  # (levels + 2, n) per stage
        self.count = 0

    def sums(self, index: tuple[int, ...]) -> tuple[float, float]:
        self.count += 1
        left = np.ones(self.n, dtype=bool)
        out = cost = 0.0
        for k, i in enumerate(index):
            here = left & self.masks[k][i]
            out += float(self.y[here, k].sum())
            cost += float(self.c[here, k].sum())
            left &= ~here
        return out + float(self.y[left, -1].sum()), cost + float(self.c[left, -1].sum())


def search_key(sums: tuple[float, float], limit: float) -> tuple:
    """Larger is better: meets the budget, then outcome, then lower cost (index order: caller)."""
    out, cost = sums
    return (cost <= limit, out if cost <= limit else -cost, -cost)


def _exhaustive(judge: _Judge, sizes: list[int], limit: float) -> tuple[tuple[int, ...], tuple]:
    best, best_key = None, None
    for index in itertools.product(*(range(m) for m in sizes)):  # lexicographic: the first of equals stays
        key = search_key(judge.sums(index), limit)
        if best_key is None or key > best_key:
            best, best_key = index, key
    return best, best_key


def coordinate_ascent(judge: _Judge, sizes: list[int], limit: float) -> tuple[tuple[int, ...], tuple]:
    """From all-zero indices (every question stops at stage 1: the cheapest route), each pass
    sets one stage at a time to its best index given the others; a move is taken only when it
    is strictly better, or equally good with a lexicographically smaller vector; stops after a
    pass without a move."""
    cur = tuple(0 for _ in sizes)
    cur_key = search_key(judge.sums(cur), limit)
    for _ in range(MAX_ROUNDS):
        moved = False
        for k, m in enumerate(sizes):
            for i in range(m):
                if i == cur[k]:
                    continue
                cand = cur[:k] + (i,) + cur[k + 1:]
                key = search_key(judge.sums(cand), limit)
                if key > cur_key or (key == cur_key and cand < cur):
                    cur, cur_key, moved = cand, key, True
        if not moved:
            break
    return cur, cur_key


def search_thresholds(scores, outcomes, paid, budget: float, *, levels: int = 20) -> CascadeThresholds:
    """The threshold vector of the grid (``threshold_grid``) with the best mean outcome among
    those whose mean cost on these (calibration) questions is <= ``budget``; ties to the lower
    mean cost, then to the lexicographically smaller vector of quantile indices. Exhaustive for
    K <= ``EXHAUSTIVE_MAX_STAGES`` stages, coordinate ascent beyond (a vector no single stage's
    change improves; not always the grid's best). When no vector meets the budget the cheapest
    (all questions stop at stage 1) is returned with ``feasible`` False."""
    s, y, c = checked_cascade(scores, outcomes, paid)
    budget = checked_budget(budget)
    grid = threshold_grid(s, levels)
    total = budget * y.shape[0]
    limit = total + sum_tolerance(total)
    judge = _Judge(s, y, c, grid)
    sizes = [len(g) for g in grid]
    exhaustive = y.shape[1] <= EXHAUSTIVE_MAX_STAGES
    index, key = (_exhaustive if exhaustive else coordinate_ascent)(judge, sizes, limit)
    out, cost = judge.sums(index)
    n = y.shape[0]
    return CascadeThresholds(np.array([g[i] for g, i in zip(grid, index)]), tuple(int(i) for i in index), out / n,
                             cost / n, bool(key[0]), judge.count - 1,
                             "exhaustive" if exhaustive else "coordinate ascent")
