"""Protocol B's routing summaries (APGR, CPT, AIQ for the policy, random and oracle) against
closed forms and brute-force recomputations on each split's test half."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.protocols import run_budget_protocol
from harness.protocols.routing_summaries import convex_hull_upper
from harness.stats import stratified_grouped_halves
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.test_protocol_policies import ConstantPolicy, LstsqPolicy, OraclePolicy

BUDGETS = (0.1, 0.25, 0.5, 0.75, 0.9)


def _task(n_docs=80, seed=0, with_costs=False):
    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed))
    if not with_costs:
        return task
    rng = np.random.default_rng(seed)
    from dataclasses import replace

    return replace(task, base_cost=np.full(task.n, 30.0), extra_cost=rng.integers(0, 12, size=task.n).astype(float),
                   cost_unit="rerank_pairs")


def _test_halves(task, seed=0, n_splits=5):
    for split_seed in np.random.default_rng(seed).integers(0, 2**31 - 1, size=n_splits):
        _, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        yield task.take(test_idx)


def _brute_aiq(costs, qualities):
    """Area under the best quality reachable at each cost by mixing two points (a fine grid,
    every pair of points tried), normalised by the cost range: an independent route to
    RouterBench's AIQ."""
    c, q = np.asarray(costs, float), np.asarray(qualities, float)
    grid = np.linspace(c.min(), c.max(), 2001)
    best = np.full(len(grid), -np.inf)
    for i in range(len(c)):
        for j in range(len(c)):
            if c[j] < c[i]:
                continue
            w = np.clip((grid - c[i]) / (c[j] - c[i]), 0.0, 1.0) if c[j] > c[i] else np.ones(len(grid))
            mix = (1 - w) * q[i] + w * q[j]
            mix = np.where(grid >= c[j], max(q[i], q[j]), mix)  # past both: flat at the better one
            best = np.where(grid >= c[i], np.maximum(best, mix), best)
    return float(np.trapezoid(best, grid) / (grid[-1] - grid[0]))


def test_constant_policy_apgr_equals_random_and_oracle_cpt_is_one_net_question_per_call():
    task = _task()
    res = run_budget_protocol(task, ConstantPolicy, budgets=BUDGETS, seed=0)
    m = res.metrics
    assert m["routing/gap_defined_splits"] == 5
    for stat in ("apgr", "cpt50", "cpt80"):
        assert m[f"routing/exact/{stat}"] == pytest.approx(m[f"routing/random/{stat}"], abs=1e-12)
    assert m["routing/random/apgr"] == pytest.approx(0.5)
    assert m["routing/random/cpt50"] == pytest.approx(0.5)
    assert m["routing/random/cpt80"] == pytest.approx(0.8)
    # the oracle recovers one net question per call: CPT(x) = x (rescues - harms) / n per half
    for x, key in ((0.5, "cpt50"), (0.8, "cpt80")):
        expected = [x * (np.sum(t.delta > 0) - np.sum(t.delta < 0)) / t.n for t in _test_halves(task)]
        assert m[f"routing/oracle/{key}"] == pytest.approx(np.mean(expected), rel=1e-9)
    oracle = run_budget_protocol(task, OraclePolicy, budgets=BUDGETS, seed=0).metrics
    assert oracle["routing/exact/cpt50"] == pytest.approx(m["routing/oracle/cpt50"])


def test_aiq_on_the_cost_axis_matches_a_brute_force_hull():
    task = _task(with_costs=True)
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, n_splits=2)
    r = res.routing
    assert set(r["cost_unit"]) == {"rerank_pairs"}
    for s, test in enumerate(_test_halves(task, n_splits=2)):
        # the policy's exact curve, recomputed: expected cost and outcome at every k
        from harness.protocols.common import fit_policy, score_task

        cal_idx, _ = stratified_grouped_halves(
            task.groups, task.delta_class, int(np.random.default_rng(0).integers(0, 2**31 - 1, size=2)[s])
        )
        policy = fit_policy(LstsqPolicy(), task.take(cal_idx), 0)
        scores = score_task(policy, test, 0)
        order = np.argsort(-scores, kind="stable")  # distinct scores: no ties to average
        costs = 30.0 + np.r_[0.0, np.cumsum(test.extra_cost[order])] / test.n
        quality = test.base.mean() + np.r_[0.0, np.cumsum(test.delta[order])] / test.n
        assert r.loc[s, "exact/aiq"] == pytest.approx(_brute_aiq(costs, quality), abs=2e-4)
        # random: a straight line in both cost and quality -> the mean of its ends
        assert r.loc[s, "random/aiq"] == pytest.approx(max(test.base.mean(), (test.base.mean() + test.extra.mean()) / 2))
        hc, hq = convex_hull_upper(costs, quality)
        assert np.all(np.diff(hq) > 0)


def test_deployable_summaries_use_the_operating_points_and_the_ends():
    task = _task()
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, n_splits=1)
    f = res.frontiers[res.frontiers["frontier"] == "deployable"].sort_values("budget")
    test = next(_test_halves(task, n_splits=1))
    b, e = test.base.mean(), test.extra.mean()
    u = np.r_[0.0, f["realized_usage"], 1.0]
    pgr = (np.r_[b, f["outcome"], e] - b) / (e - b)
    order = np.argsort(u, kind="stable")
    u, pgr = u[order], pgr[order]
    apgr = float(np.sum((u[1:] - u[:-1]) * (pgr[1:] + pgr[:-1]) / 2))
    assert res.metrics["routing/deployable/apgr"] == pytest.approx(apgr)
    # CPT(50%): first crossing, linear between neighbours
    i = int(np.argmax(pgr >= 0.5))
    cpt50 = u[i - 1] + (0.5 - pgr[i - 1]) / (pgr[i] - pgr[i - 1]) * (u[i] - u[i - 1])
    assert res.metrics["routing/deployable/cpt50"] == pytest.approx(cpt50)


def test_too_few_discordant_questions_make_pgr_undefined_with_the_reason():
    task = _task(n_docs=20)
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, min_discordant=1000)
    assert res.metrics["routing/gap_defined_splits"] == 0
    for curve in ("exact", "deployable", "random", "oracle"):
        assert math.isnan(res.metrics[f"routing/{curve}/apgr"])
        assert not math.isnan(res.metrics[f"routing/{curve}/aiq"])  # AIQ is no ratio
    assert "undefined" in res.summary() and "fewer than min_discordant=1000" in res.summary()


def test_fixed_decisions_report_no_routing_summaries():
    from policies.builtin import AlwaysExtra

    res = run_budget_protocol(_task(), AlwaysExtra, budgets=BUDGETS, seed=0)
    assert not any(k.startswith("routing/") for k in res.metrics)
