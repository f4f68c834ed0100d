"""The joint threshold search of a trigger cascade under a mean-cost budget (docs/metrics.md §18).

Why exact integers: every threshold vector of the grid is judged by the sums of its outcomes and
costs over the calibration questions, and the best is picked by comparing those sums, ties
included. Outcomes and costs are counted in integer units (2^-20 of an outcome of 1, and of the
largest per-question cost), so that every sum is exact whatever order a machine adds in: the
chosen thresholds are the same on every CPU.

Grid and order: per stage, its calibration scores' quantiles at i / G, i = 0..G (numpy's "lower"
method), then +inf (``cascade_search.threshold_grid``). A stage before the last takes a pair
(low, high) of grid indices with low <= high (score >= high retrieves, score < low answers from
memory, between goes on), in lexicographic order; the last stage one index (low = high). A vector
is (pair of stage 1, ..., index of the last stage); the best mean outcome among the vectors whose
mean cost is within the budget, ties to the lower cost, then to the lexicographically smaller
vector; none within the budget: the cheapest (then the smaller vector), marked infeasible.
Exhaustive up to 3 stages (the two last stages are summed for every pair and index at once over
the questions sorted by score); coordinate ascent (``cascade_search.coordinate_ascent``) beyond.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from harness.errors import HarnessError
from harness.protocols.cascade_search import coordinate_ascent, threshold_grid
from harness.protocols.nway_inputs import checked_budget, checked_outcomes, sum_tolerance
from harness.protocols.trigger_eval import decide

__all__ = ["UNITS", "EXHAUSTIVE_MAX_STAGES", "pairs", "TriggerThresholds", "search_triggers"]

UNITS = 2 ** 20  # integer units per outcome of 1, and per the largest per-question cost
EXHAUSTIVE_MAX_STAGES = 3


def pairs(size: int) -> np.ndarray:
    """Every (low, high) pair of grid indices with low <= high, in lexicographic order."""
    return np.array([(a, b) for a in range(size) for b in range(a, size)], dtype=int)


class TriggerThresholds(NamedTuple):
    """The chosen thresholds and what they do on the calibration questions."""

    lows: np.ndarray  # per stage (the last: lows == highs)
    highs: np.ndarray
    index: tuple[int, ...]  # pair index per stage but the last, then the last stage's grid index
    mean_outcome: float
    mean_cost: float
    feasible: bool
    evaluated: int
    method: str


class _Quantized(NamedTuple):
    s: np.ndarray  # (n x K) scores
    y: np.ndarray  # (n x 2) integer outcomes
    c: np.ndarray  # (n x K x 2) integer costs
    grid: list[np.ndarray]
    pairs: np.ndarray


def _quantize(scores, outcomes, costs, levels: int) -> tuple[_Quantized, float]:
    s = np.asarray(scores, dtype=float)
    y = checked_outcomes(outcomes)
    c = np.asarray(costs, dtype=float)
    if s.ndim != 2 or s.shape[0] != y.shape[0] or y.shape[1] != 2 or c.shape != (s.shape[0], s.shape[1], 2):
        raise HarnessError(f"trigger search: scores (n x K), outcomes (n x 2) and costs (n x K x 2) must align, got "
                           f"{s.shape}, {y.shape}, {c.shape}")
    if not np.isfinite(s).all() or not np.isfinite(c).all() or (c < 0).any():
        raise HarnessError("trigger search: scores and costs must be finite, costs non-negative")
    scale = UNITS / max(float(c.max()), 1e-300) if c.size and c.max() > 0 else 1.0
    grid = threshold_grid(s, levels)
    q = _Quantized(s, np.rint(y * UNITS).astype(np.int64), np.rint(c * scale).astype(np.int64), grid,
                   pairs(len(grid[0])))
    return q, scale


def _decided(s: np.ndarray, lo: float, hi: float, y: np.ndarray, c: np.ndarray, mask: np.ndarray):
    """(outcome sum, cost sum, mask of those that go on) of one stage's pair over ``mask``."""
    up, down = mask & (s >= hi), mask & (s < lo)
    return (int(y[up, 1].sum() + y[down, 0].sum()), int(c[up, 1].sum() + c[down, 0].sum()), mask & ~(up | down))


def _last_stage_values(q: _Quantized, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(n x T) outcome and cost of each question deciding at stage k by each grid index."""
    up = q.s[:, k][:, None] >= q.grid[k][None, :]
    return (np.where(up, q.y[:, 1:2], q.y[:, 0:1]), np.where(up, q.c[:, k, 1:2], q.c[:, k, 0:1]))


def _tail(q: _Quantized, mask: np.ndarray, last_y: np.ndarray, last_c: np.ndarray):
    """(P x T) sums over ``mask`` for every pair of stage K-2 and index of stage K-1."""
    k = q.s.shape[1] - 2
    order = np.argsort(q.s[:, k], kind="stable")
    s_sorted, m = q.s[order, k], mask[order].astype(np.int64)
    def prefix(v):  # (n + 1, ...) cumulative sums over the sorted, masked questions
        v = v[order] * (m if v.ndim == 1 else m[:, None])
        return np.concatenate([np.zeros((1,) + v.shape[1:], dtype=np.int64), np.cumsum(v, axis=0)])
    g = q.grid[k]
    lo, hi = np.searchsorted(s_sorted, g[q.pairs[:, 0]], "left"), np.searchsorted(s_sorted, g[q.pairs[:, 1]], "left")
    out = []
    for base, up, on in ((q.y[:, 0], q.y[:, 1], last_y), (q.c[:, k, 0], q.c[:, k, 1], last_c)):
        pb, pu, po = prefix(base), prefix(up), prefix(on)
        out.append((pb[lo] + pu[-1] - pu[hi])[:, None] + po[hi] - po[lo])
    return out


def _exhaustive(q: _Quantized) -> tuple[np.ndarray, np.ndarray, list[tuple[int, ...]]]:
    """Outcome and cost sums of every vector, in lexicographic order, and the vectors' shape."""
    n, K = q.s.shape
    last_y, last_c = _last_stage_values(q, K - 1)
    if K == 1:
        return last_y.sum(axis=0), last_c.sum(axis=0), [(len(q.grid[0]),)]
    ys, cs = [], []
    heads = list(itertools.product(*(range(len(q.pairs)) for _ in range(K - 2))))
    for head in heads:
        mask, oy, oc = np.ones(n, dtype=bool), 0, 0
        for k, p in enumerate(head):
            a, b = q.pairs[p]
            dy, dc, mask = _decided(q.s[:, k], q.grid[k][a], q.grid[k][b], q.y, q.c[:, k], mask)
            oy, oc = oy + dy, oc + dc
        ty, tc = _tail(q, mask, last_y, last_c)
        ys.append((oy + ty).ravel())
        cs.append((oc + tc).ravel())
    return np.concatenate(ys), np.concatenate(cs), [(len(q.pairs),) * (K - 1) + (len(q.grid[-1]),)]


def _best(ys: np.ndarray, cs: np.ndarray, limit: int) -> tuple[int, bool]:
    """Index of the best vector (module docstring's order) and whether it meets the budget."""
    ok = cs <= limit
    if ok.any():
        top = ys[ok].max()
        cand = np.flatnonzero(ok & (ys == top))
        return int(cand[np.argmin(cs[cand])]), True  # argmin: the first of equal costs
    return int(np.argmin(cs)), False


class _Judge:
    """Sums of one vector (for coordinate ascent), in the same integer units."""

    def __init__(self, q: _Quantized):
        self.q, self.count = q, 0

    def thresholds(self, index: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        g = self.q.grid
        lows = [g[k][self.q.pairs[p][0]] for k, p in enumerate(index[:-1])] + [g[-1][index[-1]]]
        highs = [g[k][self.q.pairs[p][1]] for k, p in enumerate(index[:-1])] + [g[-1][index[-1]]]
        return np.array(lows), np.array(highs)

    def sums(self, index: tuple[int, ...]) -> tuple[int, int]:
        self.count += 1
        stage, dec = decide(self.q.s, *self.thresholds(index))
        rows = np.arange(len(stage))
        return int(self.q.y[rows, dec].sum()), int(self.q.c[rows, stage, dec].sum())


def search_triggers(scores, outcomes, costs, budget: float, *, levels: int = 10) -> TriggerThresholds:
    """The grid's best threshold vector on these (calibration) questions under a mean-cost
    ``budget`` (module docstring): ``scores`` (n x K stages), ``outcomes`` (n x 2: memory, RAG),
    ``costs`` (n x K x 2: ``trigger_eval.path_costs``)."""
    q, scale = _quantize(scores, outcomes, costs, levels)
    n, K = q.s.shape
    total = checked_budget(budget) * n
    limit = int(math.floor((total + sum_tolerance(total)) * scale))
    judge = _Judge(q)
    if K <= EXHAUSTIVE_MAX_STAGES:
        ys, cs, (shape,) = _exhaustive(q)
        flat, feasible = _best(ys, cs, limit)
        index, evaluated, method = tuple(int(i) for i in np.unravel_index(flat, shape)), len(ys), "exhaustive"
    else:
        sizes = [len(q.pairs)] * (K - 1) + [len(q.grid[-1])]
        index, key = coordinate_ascent(judge, sizes, limit)
        feasible, evaluated, method = bool(key[0]), judge.count, "coordinate ascent"
    lows, highs = judge.thresholds(index)
    stage, dec = decide(q.s, lows, highs)
    rows = np.arange(n)
    y, c = np.asarray(outcomes, dtype=float), np.asarray(costs, dtype=float)
    return TriggerThresholds(lows, highs, index, float(y[rows, dec].mean()), float(c[rows, stage, dec].mean()),
                             feasible, int(evaluated), method)
