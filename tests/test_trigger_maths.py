"""Trigger cascades' maths (docs/metrics.md §18): what each path pays (hand-computed), the staged
decision rule, the cost decomposition, and the threshold search against a brute-force loop over
every vector of the grid (ties included), the same whatever the question order."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harness.errors import ConfigError, HarnessError
from harness.protocols.cascade_search import threshold_grid
from harness.protocols.trigger_eval import breakdown, decide, path_costs, route_of, stage_components
from harness.protocols.trigger_search import pairs, search_triggers

SEED_003 = ["query-only", "uncertainty", "full"]


def test_each_path_pays_every_component_once_by_hand():
    # G0 (memory) = 2, R (retrieval) = 1, G1 (rag) = 5
    c = path_costs([[2.0, 1.0, 5.0]], stage_components(SEED_003))[0]
    assert c.tolist() == [[2.0, 6.0],   # query-only decides: memory G0 | retrieve R + G1
                          [2.0, 8.0],   # after the memory answer: keep it | G0 + R + G1
                          [3.0, 8.0]]   # after the probe: G0 + R | G0 + R + G1 (the probe's list is RAG's)
    probe_first = path_costs([[2.0, 1.0, 5.0]], stage_components(["retrieval-score", "uncertainty"]))[0]
    assert probe_first.tolist() == [[3.0, 6.0], [3.0, 8.0]]


def test_an_oracle_or_unknown_family_cannot_be_a_stage():
    with pytest.raises(ConfigError, match="cannot be a trigger stage"):
        stage_components(["query-only", "oracle"])


def test_decide_retrieves_above_high_answers_from_memory_below_low_else_goes_on():
    s = np.array([[0.9, 0.0], [0.1, 0.0], [0.5, 0.7], [0.5, 0.2]])
    stage, dec = decide(s, [0.3, 0.5], [0.8, 0.5])
    assert stage.tolist() == [0, 0, 1, 1] and dec.tolist() == [1, 0, 1, 0]
    stage, dec = decide(s, [np.inf, 0.5], [np.inf, 0.5])  # low = high = +inf: everyone answers from memory at once
    assert stage.tolist() == [0] * 4 and dec.tolist() == [0] * 4
    with pytest.raises(HarnessError, match="low <= high"):
        decide(s, [0.6, 0.5], [0.4, 0.5])
    with pytest.raises(HarnessError, match="one value at the last stage"):
        decide(s, [0.3, 0.4], [0.8, 0.5])


def _loop_breakdown(stage, dec, comps, families):
    """Per question, the set of components paid, stage by stage: an independent recount."""
    from harness.protocols.trigger_eval import COMPONENTS, DECISION_PAYS, FAMILY_PAYS

    k = len(families)
    reached, stage_cost, answer, probes, total = [0] * k, [0.0] * k, 0.0, 0, []
    for q in range(len(stage)):
        paid = set()
        for j in range(stage[q] + 1):
            reached[j] += 1
            for comp in FAMILY_PAYS[families[j]]:
                if comp not in paid:
                    paid.add(comp)
                    stage_cost[j] += comps[q, COMPONENTS.index(comp)]
        probes += "retrieval" in paid
        for comp in DECISION_PAYS[dec[q]]:
            if comp not in paid:
                paid.add(comp)
                answer += comps[q, COMPONENTS.index(comp)]
        total.append(sum(comps[q, COMPONENTS.index(c)] for c in paid))
    n = len(stage)
    return reached, [v / n for v in stage_cost], answer / n, probes, np.array(total)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_breakdown_equals_a_per_question_recount(seed):
    rng = np.random.default_rng(seed)
    n = 50
    comps = rng.uniform(0, 4, size=(n, 3))
    stage, dec = rng.integers(0, 3, size=n), rng.integers(0, 2, size=n)
    pays = stage_components(SEED_003)
    parts = breakdown(stage, dec, comps, pays)
    reached, stage_cost, answer, probes, total = _loop_breakdown(stage, dec, comps, SEED_003)
    assert parts.reached.tolist() == reached and parts.probes == probes
    assert parts.stage_cost == pytest.approx(stage_cost, rel=1e-12) and parts.answer_cost == pytest.approx(answer)
    route = route_of(stage, dec, rng.integers(0, 2, size=(n, 2)), path_costs(comps, pays))
    assert route.cost == pytest.approx(total, rel=1e-12)
    assert parts.stage_cost.sum() + parts.answer_cost == pytest.approx(route.mean_cost, rel=1e-12)
    assert (parts.memory + parts.retrieve).tolist() == np.bincount(stage, minlength=3).tolist()


def _brute(s, y, c, budget, levels):
    """Every vector of the grid, judged in order: within budget, outcome, lower cost, first."""
    n, k = s.shape
    grid = threshold_grid(s, levels)
    pr = pairs(len(grid[0]))
    best = None
    for index in itertools.product(*([range(len(pr))] * (k - 1) + [range(len(grid[-1]))])):
        lows = [grid[j][pr[p][0]] for j, p in enumerate(index[:-1])] + [grid[-1][index[-1]]]
        highs = [grid[j][pr[p][1]] for j, p in enumerate(index[:-1])] + [grid[-1][index[-1]]]
        stage, dec = decide(s, lows, highs)
        out, cost = y[np.arange(n), dec].sum(), c[np.arange(n), stage, dec].sum()
        ok = cost <= budget * n + 1e-9
        key = (ok, out if ok else -cost, -cost)
        if best is None or key > best[0]:
            best = (key, index)
    return best[1]


@pytest.mark.parametrize("k, seed", [(1, 0), (2, 1), (2, 2), (3, 3), (3, 4)])
def test_search_is_the_grids_best_vector_with_its_tie_rule(k, seed):
    rng = np.random.default_rng(seed)
    n = 40
    s = rng.integers(0, 6, size=(n, k)).astype(float)  # integer scores: many ties
    y = rng.integers(0, 2, size=(n, 2)).astype(float)
    comps = rng.integers(1, 5, size=(n, 3)).astype(float)  # integer costs: many equal sums
    c = path_costs(comps, stage_components(SEED_003[-k:]))
    for budget in (2.0, 4.0, 6.0, 9.0):
        found = search_triggers(s, y, c, budget, levels=3)
        assert found.index == _brute(s, y, c, budget, 3), (budget, found)
        stage, dec = decide(s, found.lows, found.highs)
        assert found.mean_cost == pytest.approx(c[np.arange(n), stage, dec].mean())
        assert found.feasible == (found.mean_cost <= budget + 1e-9)


def test_search_does_not_depend_on_the_question_order():
    rng = np.random.default_rng(7)
    n = 300
    s, y = rng.normal(size=(n, 3)), rng.integers(0, 2, size=(n, 2)).astype(float)
    c = path_costs(rng.uniform(0, 3, size=(n, 3)), stage_components(SEED_003))
    order = rng.permutation(n)
    for budget in (1.0, 2.5):
        a = search_triggers(s, y, c, budget, levels=8)
        b = search_triggers(s[order], y[order], c[order], budget, levels=8)
        assert a.index == b.index and a.mean_outcome == pytest.approx(b.mean_outcome)


def test_four_stages_use_coordinate_ascent_to_a_vector_no_single_stage_improves():
    from harness.protocols.cascade_search import search_key
    from harness.protocols.trigger_search import UNITS, _Judge, _quantize

    rng = np.random.default_rng(3)
    n = 80
    s, y = rng.normal(size=(n, 4)), rng.integers(0, 2, size=(n, 2)).astype(float)
    c = path_costs(rng.uniform(0, 3, size=(n, 3)), stage_components(["query-only", "uncertainty", "retrieval-score",
                                                                       "full"]))
    found = search_triggers(s, y, c, 2.0, levels=4)
    assert found.method == "coordinate ascent" and found.feasible and found.mean_cost <= 2.0 + 1e-9
    q, scale = _quantize(s, y, c, 4)
    judge, limit = _Judge(q), int(np.floor(2.0 * n * scale * (1 + 1e-9)))
    here = search_key(judge.sums(found.index), limit)
    assert here[1] == round(found.mean_outcome * n * UNITS)
    sizes = [len(q.pairs)] * 3 + [len(q.grid[-1])]
    for k, size in enumerate(sizes):
        for i in range(size):
            cand = found.index[:k] + (i,) + found.index[k + 1:]
            assert search_key(judge.sums(cand), limit) <= here, cand


def test_an_unreachable_budget_returns_the_cheapest_vector_marked_infeasible():
    s = np.array([[0.1], [0.2], [0.3]])
    y = np.array([[0.0, 1.0]] * 3)
    c = path_costs(np.array([[2.0, 1.0, 5.0]] * 3), stage_components(["full"]))
    found = search_triggers(s, y, c, 1.0, levels=2)
    assert not found.feasible and found.mean_cost == pytest.approx(3.0)  # G0 + R: nobody retrieves
