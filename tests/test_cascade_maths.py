"""Cascade maths (docs/metrics.md §17): stop stages, costs paid and the joint threshold search,
each against a plain per-question loop or a brute force over every threshold vector."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.errors import ConfigError, HarnessError
from harness.protocols.cascade_eval import evaluate, incremental_costs, route_of_stops, stop_stages
from harness.protocols.cascade_search import search_thresholds, threshold_grid


def _tables(n: int, k: int, seed: int):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.normal(size=(n, k - 1)), 1)  # rounded: ties between questions happen
    outcomes = (rng.random((n, k)) < np.linspace(0.4, 0.8, k)).astype(float)
    own = rng.random((n, k)) * np.arange(1, k + 1)
    return scores, outcomes, np.cumsum(own, axis=1)


def _loop(scores, outcomes, paid, thresholds):
    """Per question by hand: the first stage whose score clears its threshold, else the last."""
    stops, outs, costs = [], [], []
    for q in range(len(outcomes)):
        k = next((j for j in range(len(thresholds)) if scores[q][j] >= thresholds[j]), len(thresholds))
        stops.append(k)
        outs.append(outcomes[q][k])
        costs.append(paid[q][k])
    return stops, outs, costs


def test_evaluate_matches_a_per_question_loop_with_counts_and_stage_costs():
    scores, y, paid = _tables(40, 4, 0)
    t = [0.3, -0.2, 0.5]
    r = evaluate(scores, y, paid, t)
    stops, outs, costs = _loop(scores, y, paid, t)
    assert r.stop.tolist() == stops and r.outcome.tolist() == outs and r.cost.tolist() == costs
    assert r.mean_outcome == pytest.approx(sum(outs) / 40, abs=1e-15)
    for k in range(4):
        assert r.stops[k] == stops.count(k) and r.reached[k] == sum(s >= k for s in stops)
        own = [paid[q][k] - (paid[q][k - 1] if k else 0.0) for q in range(40) if stops[q] >= k]
        assert r.stage_cost[k] == pytest.approx(sum(own) / 40, rel=1e-12)
    assert r.stage_cost.sum() == pytest.approx(r.mean_cost, rel=1e-12)


def test_infinite_thresholds_and_never_stop_scores():
    scores = np.array([[1.0, -math.inf], [-math.inf, 0.0]])
    assert stop_stages(scores, [math.inf, 0.5]).tolist() == [2, 2]  # +inf: nobody stops; -inf scores never clear 0.5
    assert stop_stages(scores, [-math.inf, math.inf]).tolist() == [0, 0]  # -inf: everybody stops, -inf scores too
    assert stop_stages(scores, [0.5, -math.inf]).tolist() == [0, 1]


def test_incremental_costs_of_a_stage_that_reuses_an_earlier_one():
    arm = np.array([[1.0, 60.0, 65.0], [2.0, 70.0, 69.0]])  # bm25, dense, keep = dense + rerank
    own = incremental_costs(arm, [None, None, 1])
    assert own.tolist() == [[1.0, 60.0, 5.0], [2.0, 70.0, 0.0]]  # keep after dense adds the rerank (>= 0)
    assert np.cumsum(own, axis=1)[0].tolist() == [1.0, 61.0, 66.0]  # stopping at keep pays bm25 + keep
    with pytest.raises(ConfigError, match="earlier stage"):
        incremental_costs(arm, [None, 2, None])


@pytest.mark.parametrize("bad, match", [
    (lambda s, y, c: (s, y, c[:, ::-1]), "must not decrease"),
    (lambda s, y, c: (s[:, :1], y, c), "questions x \\(stages - 1\\)"),
    (lambda s, y, c: (np.where(s > 0, np.nan, s), y, c), "NaN or \\+inf"),
    (lambda s, y, c: (s, y * 2, c), "\\[0, 1\\]"),
])
def test_bad_cascade_input_is_one_named_error(bad, match):
    s, y, c = _tables(10, 3, 1)
    with pytest.raises(HarnessError, match=match):
        evaluate(*bad(s, y, c), [0.0, 0.0])


def test_route_of_stops_refuses_a_stage_out_of_range():
    _, y, c = _tables(5, 3, 2)
    with pytest.raises(HarnessError, match="stage index"):
        route_of_stops([0, 1, 2, 3, 0], y, c)


def test_grid_is_the_lower_quantiles_of_each_stage_then_infinity():
    s = np.array([[3.0, 1.0], [1.0, 2.0], [2.0, 0.0], [5.0, 4.0]])
    g = threshold_grid(s, 2)
    assert g[0].tolist() == [1.0, 2.0, 5.0, math.inf] and g[1].tolist() == [0.0, 1.0, 4.0, math.inf]
    with pytest.raises(ConfigError, match="grid"):
        threshold_grid(s, 0)


def _brute_best(scores, y, paid, budget):
    """Every threshold vector over each stage's distinct scores and +inf (every stop pattern a
    threshold rule can make), judged by a plain loop: the best mean outcome within the budget,
    then the lowest mean cost."""
    n = len(y)
    cands = [sorted(set(scores[:, k])) + [math.inf] for k in range(scores.shape[1])]
    best = None
    for t in itertools.product(*cands):
        _, outs, costs = _loop(scores, y, paid, t)
        if sum(costs) <= budget * n + 1e-9:
            key = (sum(outs), -sum(costs))
            best = key if best is None or key > best else best
    return best[0] / n, -best[1] / n


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("share", [0.0, 0.3, 0.7, 1.0])
def test_exhaustive_search_finds_the_brute_force_best_with_three_stages(seed, share):
    n = 14
    scores, y, paid = _tables(n, 3, seed)
    lo, hi = paid[:, 0].mean(), paid[:, -1].mean()
    budget = lo + share * (hi - lo)
    res = search_thresholds(scores, y, paid, budget, levels=n - 1)  # the grid holds every score
    want = _brute_best(scores, y, paid, budget)
    assert res.method == "exhaustive" and res.feasible
    assert res.mean_outcome == pytest.approx(want[0], abs=1e-12) and res.mean_cost == pytest.approx(want[1], rel=1e-12)
    again = evaluate(scores, y, paid, res.thresholds)  # the reported numbers are the thresholds' own
    assert again.mean_outcome == res.mean_outcome and again.mean_cost == pytest.approx(res.mean_cost, rel=1e-12)


def test_ties_go_to_the_cheaper_then_the_smaller_quantile_index():
    scores = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    y = np.ones((3, 3))  # every stage answers right: only cost separates vectors
    paid = np.tile([1.0, 2.0, 3.0], (3, 1))
    res = search_thresholds(scores, y, paid, 3.0, levels=2)
    assert res.index == (0, 0) and res.mean_cost == 1.0  # everyone stops at stage 1, the cheapest
    paid_flat = np.tile([1.0, 1.0, 1.0], (3, 1))  # every vector costs the same: the smallest index
    assert search_thresholds(scores, y, paid_flat, 3.0, levels=2).index == (0, 0)
    y2 = np.array([[0.0, 1.0, 1.0]] * 3)  # stage 2 is needed; stage 2's threshold then breaks no tie
    res2 = search_thresholds(scores, y2, paid, 3.0, levels=2)
    assert res2.index == (3, 0) and res2.mean_outcome == 1.0 and res2.mean_cost == 2.0


def test_an_unreachable_budget_returns_the_cheapest_vector_marked_infeasible():
    scores, y, paid = _tables(12, 3, 5)
    res = search_thresholds(scores, y, paid, paid[:, 0].mean() * 0.5, levels=4)
    assert not res.feasible and res.index == (0, 0) and res.mean_cost == pytest.approx(paid[:, 0].mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_coordinate_ascent_with_four_stages_is_a_coordinate_optimum_within_budget(seed):
    n = 16
    scores, y, paid = _tables(n, 4, seed)
    budget = paid[:, 0].mean() + 0.5 * (paid[:, -1].mean() - paid[:, 0].mean())
    res = search_thresholds(scores, y, paid, budget, levels=5)
    assert res.method == "coordinate ascent" and res.feasible and res.mean_cost <= budget + 1e-12
    grid = threshold_grid(scores, 5)

    def judged(index):
        _, outs, costs = _loop(scores, y, paid, [g[i] for g, i in zip(grid, index)])
        return sum(outs), sum(costs)

    o, c = judged(res.index)
    assert o / n == pytest.approx(res.mean_outcome) and c / n == pytest.approx(res.mean_cost)
    for k in range(3):  # no single stage's change is better within the budget
        for i in range(len(grid[k])):
            oo, cc = judged(res.index[:k] + (i,) + res.index[k + 1:])
            assert not (cc <= budget * n + 1e-9 and (oo > o or (oo == o and cc < c - 1e-12)))
    full = max((judged(ix) for ix in itertools.product(*(range(len(g)) for g in grid))
                if judged(ix)[1] <= budget * n + 1e-9), key=lambda t: (t[0], -t[1]))
    assert o <= full[0]  # never above the grid's true best


def test_search_is_deterministic():
    scores, y, paid = _tables(30, 3, 9)
    a = search_thresholds(scores, y, paid, paid.mean(), levels=10)
    b = search_thresholds(scores.copy(), y.copy(), paid.copy(), paid.mean(), levels=10)
    assert a.index == b.index and np.array_equal(a.thresholds, b.thresholds) and a.evaluated == 12 * 12
