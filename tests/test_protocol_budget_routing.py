"""Protocol B's routing summaries (APGR, CPT, AIQ for the policy, random and oracle) against
closed forms and brute-force recomputations on each split's test half."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.protocols import run_budget_protocol
from harness.protocols.routing_summaries import N_RANDOM_ORDERINGS, aiq, convex_hull_upper
from harness.stats import mcnemar_exact, sign_flip_test, stratified_grouped_halves
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from tests.helpers.policies import ConstantPolicy, LstsqPolicy, OraclePolicy, RandomPolicy

BUDGETS = (0.1, 0.25, 0.5, 0.75, 0.9)


def _task(n_docs=80, seed=0, with_costs=False, gap=True):
    """The synthetic table; with ``gap`` the extra arm also rescues 60% (a seeded coin) of the
    questions both arms miss, so every test half's gap is told from zero (McNemar p about
    0.002-0.004 with the defaults). Without it a test half holds about 38 rescues vs 30 harms
    (p 0.3-0.5): noise, PGR undefined."""
    task = RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed))
    if gap:
        neither = (task.base == 0) & (task.extra == 0)
        coin = np.random.default_rng(seed + 1).random(task.n) < 0.6
        task = replace(task, extra=np.where(neither & coin, 1.0, task.extra))
    if not with_costs:
        return task
    rng = np.random.default_rng(seed)
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


def _random_reference_by_hand(test, seed, split, n_orders=N_RANDOM_ORDERINGS):
    """Random's AIQ / CPT(50%) / CPT(80%) by a plain Monte Carlo: ``n_orders`` orderings from
    np.random.default_rng([seed, split]) (one rng.permutation per ordering), each ordering's
    curve built question by question, CPT by scanning for the first crossing."""
    rng = np.random.default_rng([seed, split])
    n = test.n
    extra_cost = test.extra_cost if test.extra_cost is not None else np.ones(n)
    base_cost = float(test.base_cost.mean()) if test.base_cost is not None else 0.0
    gap = float(test.delta.sum())
    aiqs, c50, c80 = [], [], []
    for _ in range(n_orders):
        order = rng.permutation(n)
        gains, spent, costs, outcome = 0.0, 0.0, [base_cost], [test.base.mean()]
        for i in order:
            gains += test.delta[i]
            spent += extra_cost[i]
            costs.append(base_cost + spent / n)
            outcome.append(test.base.mean() + gains / n)
        aiqs.append(aiq(costs, outcome))
        pgr = (np.array(outcome) - test.base.mean()) * n / gap
        for level, out in ((0.5, c50), (0.8, c80)):
            k = 0
            while pgr[k] < level - 1e-12:
                k += 1
            out.append(0.0 if k == 0 else (k - 1 + (level - pgr[k - 1]) / (pgr[k] - pgr[k - 1])) / n)
    return np.mean(aiqs), np.mean(c50), np.mean(c80)


def test_constant_policy_apgr_equals_random_and_oracle_cpt_is_one_net_question_per_call():
    task = _task()
    res = run_budget_protocol(task, ConstantPolicy, budgets=BUDGETS, seed=0)
    m = res.metrics
    assert m["routing/gap_defined_splits"] == 5
    assert res.routing["gap_test"].eq("sign_flip").all() and (res.routing["gap_p"] < 0.05).all()
    # APGR is linear in the curve: a constant score (ties at their expectation) is random's line
    assert m["routing/exact/apgr"] == m["routing/random/apgr"]
    assert m["routing/random/apgr"] == pytest.approx(0.5)
    assert m["routing/exact/cpt50"] == pytest.approx(0.5)
    assert m["routing/exact/cpt80"] == pytest.approx(0.8)
    # random's CPT and AIQ are the mean over random orderings: a single noisy curve crosses a level
    # early and its hull lies above the line, so the reference is below x (CPT) and above the
    # line (AIQ), where the constant score (no noise) sits exactly on the line
    assert m["routing/random/cpt50"] < 0.5 and m["routing/random/cpt80"] < 0.8
    assert m["routing/random/aiq"] > m["routing/exact/aiq"]
    # the oracle recovers one net question per call: CPT(x) = x (rescues - harms) / n per half
    for x, key in ((0.5, "cpt50"), (0.8, "cpt80")):
        expected = [x * (np.sum(t.delta > 0) - np.sum(t.delta < 0)) / t.n for t in _test_halves(task)]
        assert m[f"routing/oracle/{key}"] == pytest.approx(np.mean(expected), rel=1e-9)
    oracle = run_budget_protocol(task, OraclePolicy, budgets=BUDGETS, seed=0).metrics
    assert oracle["routing/exact/cpt50"] == pytest.approx(m["routing/oracle/cpt50"])


def test_aiq_on_the_cost_axis_matches_a_brute_force_hull():
    task = _task(with_costs=True)
    # in_sample: one fit per split scores the test half, which the loop below refits by hand
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, n_splits=2, calibration="in_sample")
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
        # random: the mean over seeded orderings (each with its own cost and quality path), which
        # lies above the straight line in cost and quality (every ordering's hull is above its chord)
        by_hand = _random_reference_by_hand(test, 0, s)
        assert r.loc[s, "random/aiq"] == pytest.approx(by_hand[0], abs=1e-12)
        assert (r.loc[s, "random/cpt50"], r.loc[s, "random/cpt80"]) == pytest.approx(by_hand[1:], abs=1e-9)
        assert r.loc[s, "random/aiq"] > (test.base.mean() + test.extra.mean()) / 2
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


def test_random_reference_equals_a_brute_force_monte_carlo_over_orderings():
    task = _task(n_docs=40)
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=7, n_splits=2)
    r = res.routing
    assert r["gap_defined"].all()
    halves = list(_test_halves(task, seed=7, n_splits=2))
    for s, test in enumerate(halves):
        aiq_mc, c50, c80 = _random_reference_by_hand(test, 7, s)
        assert r.loc[s, "random/aiq"] == pytest.approx(aiq_mc, abs=1e-12)
        assert r.loc[s, "random/cpt50"] == pytest.approx(c50, abs=1e-9)
        assert r.loc[s, "random/cpt80"] == pytest.approx(c80, abs=1e-9)
        assert r.loc[s, "random/apgr"] == pytest.approx(0.5)  # the exact expectation, not a draw
    # the seed is [run seed, split index]: another index draws other orderings of the same half
    assert r.loc[0, "random/aiq"] != pytest.approx(_random_reference_by_hand(halves[0], 7, 1)[0], abs=1e-12)


def test_random_policy_aiq_is_not_systematically_above_the_random_row():
    """A random ranking's exact curve is one noisy realisation; its hull picks the lucky points.
    Against random's noiseless line that beat "random" in 8 of 8 seeds (+0.013); against the
    mean over random orderings the difference is noise around 0."""
    task = _task(gap=False)
    diff, vs_line = [], []
    for seed in range(8):
        res = run_budget_protocol(task, RandomPolicy, budgets=BUDGETS, seed=seed)
        r = res.routing
        diff.append(float((r["exact/aiq"] - r["random/aiq"]).mean()))
        line = [(t.base.mean() + t.extra.mean()) / 2 for t in _test_halves(task, seed=seed)]
        vs_line.append(float((r["exact/aiq"] - np.array(line)).mean()))
    se = np.std(diff, ddof=1) / math.sqrt(len(diff))
    assert abs(np.mean(diff)) < 2.5 * se  # within noise (observed: -0.0003, se 0.003)
    assert np.mean(vs_line) > 0.008 and sum(v > 0 for v in vs_line) == 8  # the old, flattering reference


def test_gap_that_is_noise_makes_pgr_undefined_with_the_test_and_its_p():
    task = _task(gap=False)
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0)
    r, m = res.routing, res.metrics
    assert m["routing/gap_defined_splits"] == 0
    for s, test in enumerate(_test_halves(task)):
        rescues, harms, _ = mcnemar_exact(test.extra, test.base)
        assert rescues + harms >= 10 and rescues > harms  # count and net gap pass ...
        p = sign_flip_test(test.extra - test.base, test.groups)  # documents as clusters
        assert p >= 0.05  # ... but the gap is noise
        assert r.loc[s, "gap_p"] == p and r.loc[s, "gap_test"] == "sign_flip" and not r.loc[s, "gap_defined"]
        n_docs = len(set(test.groups.tolist()))
        assert r.loc[s, "reason"] == (
            f"gap not told from zero: sign-flip test of extra - base on {n_docs} document totals "
            f"({rescues} rescues, {harms} harms) p = {p:.3g} >= alpha=0.05; PGR/APGR/CPT not defined"
        )
        for curve in ("exact", "deployable", "random", "oracle"):
            assert all(math.isnan(r.loc[s, f"{curve}/{stat}"]) for stat in ("apgr", "cpt50", "cpt80"))
    for curve in ("exact", "deployable", "random", "oracle"):
        assert math.isnan(m[f"routing/{curve}/apgr"]) and math.isnan(m[f"routing/{curve}/cpt50_std"])
        assert not math.isnan(m[f"routing/{curve}/aiq"])  # AIQ is no ratio
    assert "gap not told from zero: sign-flip test" in res.summary()
    # alpha is a parameter: at a level above every split's p the same halves are defined
    loose = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, alpha=0.6).metrics
    assert loose["routing/gap_defined_splits"] == 5 and not math.isnan(loose["routing/exact/apgr"])
    with pytest.raises(ConfigError):
        run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, alpha=1.5)


def test_one_noisy_split_makes_the_mean_over_splits_undefined():
    """Every split defined, or NaN: a mean over the lucky splits would be selected by the gap."""
    task = _task()
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0)
    p = res.routing["gap_p"].to_numpy()
    alpha = float(np.sort(p)[-1])  # the largest p is not < alpha: exactly one split is undefined
    strict = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, seed=0, alpha=alpha)
    assert strict.metrics["routing/gap_defined_splits"] == int(np.sum(p < alpha)) < 5
    assert math.isnan(strict.metrics["routing/exact/apgr"]) and math.isnan(strict.metrics["routing/random/cpt50"])
    assert strict.metrics["routing/random/aiq"] == pytest.approx(res.metrics["routing/random/aiq"])


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
