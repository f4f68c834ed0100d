"""Protocol B: exact frontier with ties at their expectation (vs enumerated and random tie
orders), matched random/oracle and AUC vs brute force; the randomised calibrated rule; cross-
fitted calibration; fixed decisions; power; metric aggregation; determinism; and the old
numbers where the new rules must not change them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from harness.protocols import run_budget_protocol
from harness.protocols.common import KeyedFactory, forget_reused
from harness.protocols.budget_rules import (
    calibrated_rule,
    calibrated_threshold,
    exact_frontier_curve,
    exact_run_probability,
    oracle_matched,
    random_matched,
    run_probability,
)
from harness.stats import dkw_epsilon
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from policies.base import Policy
from tests.helpers.policies import ConstantPolicy, LstsqPolicy, OraclePolicy, RandomPolicy

BUDGETS = (0.1, 0.25, 0.5, 0.75, 0.9)


def _task(n_docs=60, seed=0):
    return RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed))


# --------------------------------------------------------------------------------------------
# Reference implementations of the previous protocol (ties by qid, strict "> threshold",
# policy fitted and thresholded on the calibration half): distinct scores and in-sample
# calibration must reproduce them exactly.
# --------------------------------------------------------------------------------------------


def _old_exact_selection(scores, qids, rho):
    n = len(scores)
    k = int(math.floor(rho * n + 1e-9))
    ran = np.zeros(n, dtype=bool)
    ran[np.lexsort((np.asarray(qids).astype(str), -np.asarray(scores, dtype=float)))[:k]] = True
    return ran


def _old_exact_curve(scores, qids, base, delta):
    order = np.lexsort((np.asarray(qids).astype(str), -np.asarray(scores, dtype=float)))
    n = len(base)
    return np.arange(n + 1) / n, base.mean() + np.r_[0.0, np.cumsum(delta[order])] / n


def _old_rows(task, factory, budgets, n_splits, seed, dkw_delta):
    from harness.protocols.common import fit_policy, score_task
    from harness.stats import stratified_grouped_halves

    rows, aucs = [], []
    for s, split_seed in enumerate(np.random.default_rng(seed).integers(0, 2**31 - 1, size=n_splits)):
        cal_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        cal, test = task.take(cal_idx), task.take(test_idx)
        policy = fit_policy(factory(), cal, seed)
        cal_s, test_s = score_task(policy, cal, seed), score_task(policy, test, seed)
        eps = dkw_epsilon(cal.n, dkw_delta)
        u, c = _old_exact_curve(test_s, test.qids, test.base, test.delta)
        aucs.append(float(np.sum((u[1:] - u[:-1]) * (c[1:] + c[:-1]) / 2)))
        for rho in budgets:
            def thr(r):
                return -np.inf if r >= 1 else float(np.quantile(cal_s, 1 - r, method="inverted_cdf"))
            sel = {
                "exact": _old_exact_selection(test_s, test.qids, rho),
                "deployable": test_s > thr(rho),
                "conservative": test_s > thr(max(0.0, rho - eps)),
            }
            for fr, ran in sel.items():
                k = int(ran.sum())
                rows.append({"split": s, "budget": rho, "frontier": fr, "extra_calls": float(k),
                             "realized_usage": k / test.n,
                             "outcome": float(np.where(ran, test.extra, test.base).mean())})
    return pd.DataFrame(rows), aucs


# --------------------------------------------------------------------------------------------
# Exact frontier: ties at their expectation
# --------------------------------------------------------------------------------------------


def _enumerated_tie_orders(scores, k):
    """Average over every order of the questions (n! permutations) of "the k first by
    (-score, position in the order)": ties broken uniformly at random, exactly."""
    n = len(scores)
    total = np.zeros(n)
    count = 0
    for perm in itertools.permutations(range(n)):
        rank = np.empty(n, int)
        rank[list(perm)] = np.arange(n)
        chosen = sorted(range(n), key=lambda i: (-scores[i], rank[i]))[:k]
        total[chosen] += 1
        count += 1
    return total / count


@pytest.mark.parametrize("seed", range(4))
def test_exact_run_probability_equals_enumerated_tie_orders(seed):
    rng = np.random.default_rng(seed)
    n = 7
    scores = rng.integers(0, 3, size=n).astype(float)  # heavy ties
    for rho in (0.0, 0.15, 0.3, 0.5, 0.72, 0.9, 1.0):
        k = math.floor(rho * n + 1e-9)
        prob = exact_run_probability(scores, rho)
        np.testing.assert_allclose(prob, _enumerated_tie_orders(scores, k), atol=1e-12)
        assert prob.sum() == pytest.approx(k)


@pytest.mark.parametrize("seed", range(3))
def test_exact_curve_equals_enumerated_tie_orders_at_every_k(seed):
    rng = np.random.default_rng(10 + seed)
    n = 7
    scores = rng.integers(0, 3, size=n).astype(float)
    base = (rng.random(n) < 0.5).astype(float)
    extra = (rng.random(n) < 0.6).astype(float)
    usage, curve = exact_frontier_curve(scores, base, extra - base)
    for k in range(n + 1):
        p = _enumerated_tie_orders(scores, k)
        assert curve[k] == pytest.approx(np.mean((1 - p) * base + p * extra), abs=1e-12)
    np.testing.assert_allclose(usage, np.arange(n + 1) / n)


def test_exact_curve_matches_average_of_random_tie_breaks():
    """Larger n: average the curve of many uniformly random tie-breaks (Monte Carlo)."""
    rng = np.random.default_rng(5)
    n = 40
    scores = np.round(rng.random(n), 1)  # ~11 distinct values
    base = (rng.random(n) < 0.5).astype(float)
    extra = (rng.random(n) < 0.6).astype(float)
    delta = extra - base
    _, curve = exact_frontier_curve(scores, base, delta)
    draws = 20000
    acc = np.zeros(n + 1)
    for _ in range(draws):
        order = np.lexsort((rng.random(n), -scores))
        acc += base.mean() + np.r_[0.0, np.cumsum(delta[order])] / n
    # each point is a mean of bounded values (|.| <= 1): 5 sd of 20000 draws is < 0.02
    np.testing.assert_allclose(curve, acc / draws, atol=0.01)


def test_distinct_scores_reproduce_the_old_selection_and_curve_exactly():
    rng = np.random.default_rng(3)
    n = 37
    scores = rng.normal(size=n)
    qids = np.array([f"q{i:02d}" for i in rng.permutation(n)])
    base = (rng.random(n) < 0.5).astype(float)
    extra = rng.random(n)  # continuous: bitwise equality is a real check
    for rho in (0.0, 0.1, 0.25, 0.5, 0.9, 1.0):
        np.testing.assert_array_equal(exact_run_probability(scores, rho), _old_exact_selection(scores, qids, rho))
    usage, curve = exact_frontier_curve(scores, base, extra - base)
    old_usage, old_curve = _old_exact_curve(scores, qids, base, extra - base)
    np.testing.assert_array_equal(curve, old_curve)
    np.testing.assert_array_equal(usage, old_usage)


def test_exact_frontier_auc_vs_brute_force():
    rng = np.random.default_rng(1)
    n = 17
    scores = rng.permutation(n).astype(float)
    base = (rng.random(n) < 0.5).astype(float)
    extra = (rng.random(n) < 0.6).astype(float)
    usage, curve = exact_frontier_curve(scores, base, extra - base)
    brute = []
    for k in range(n + 1):
        chosen = sorted(range(n), key=lambda i: -scores[i])[:k]
        brute.append(np.mean([extra[i] if i in chosen else base[i] for i in range(n)]))
    np.testing.assert_allclose(curve, brute)
    assert curve[0] == pytest.approx(base.mean()) and curve[-1] == pytest.approx(extra.mean())
    assert np.trapezoid(curve, usage) == pytest.approx(sum((brute[i] + brute[i + 1]) / 2 / n for i in range(n)))


def test_constant_score_curve_is_random_at_every_k():
    rng = np.random.default_rng(2)
    n = 31
    base = (rng.random(n) < 0.5).astype(float)
    extra = (rng.random(n) < 0.6).astype(float)
    _, curve = exact_frontier_curve(np.zeros(n), base, extra - base)
    for k in range(n + 1):
        assert curve[k] == pytest.approx(random_matched(base, extra - base, k), abs=1e-12)


# --------------------------------------------------------------------------------------------
# Matched references
# --------------------------------------------------------------------------------------------


def test_matched_random_and_oracle_vs_all_subsets():
    base = np.array([1, 0, 0, 1, 1, 0, 1, 0], float)
    extra = np.array([1, 1, 0, 0, 1, 1, 0, 0], float)
    delta = extra - base
    best = []
    for k in range(9):
        outcomes = [np.where(np.isin(np.arange(8), s), extra, base).mean() for s in itertools.combinations(range(8), k)]
        best.append(max(outcomes))
        assert oracle_matched(base, delta, k) == pytest.approx(max(outcomes))
        assert random_matched(base, delta, k) == pytest.approx(np.mean(outcomes))
    # a fractional expected count: the best mix of floor(k) and ceil(k) calls
    for k in (0.25, 2.5, 7.9):
        lo = math.floor(k)
        assert oracle_matched(base, delta, k) == pytest.approx((1 - (k - lo)) * best[lo] + (k - lo) * best[lo + 1])
        assert random_matched(base, delta, k) == pytest.approx(base.mean() + k / 8 * delta.mean())


# --------------------------------------------------------------------------------------------
# Calibrated rule randomised at the threshold
# --------------------------------------------------------------------------------------------


def test_tie_probability_hand_case():
    cal = np.array([1.0, 2.0, 2.0, 2.0, 3.0])
    # rho = 0.5: F(1) = 0.2 < 0.5 <= F(2) = 0.8 -> t = 2; one score above; 2.5 calls wanted
    t, p = calibrated_rule(cal, 0.5)
    assert (t, p) == (2.0, pytest.approx(0.5))
    assert run_probability(cal, t, p).mean() == pytest.approx(0.5)  # (1 + 3 * 0.5) / 5
    # rho = 0.1: t = 3 (the max), 0.5 calls wanted of its one question
    assert calibrated_rule(cal, 0.1) == (3.0, pytest.approx(0.5))
    # rho = 0.2: F(2) = 0.8 >= 0.8 -> t = 2, the max runs for sure and the tie never
    assert calibrated_rule(cal, 0.2) == (2.0, pytest.approx(0.0))
    # rho = 1: run all, even test scores below every calibration score
    t, p = calibrated_rule(cal, 1.0)
    assert t == -np.inf and run_probability(np.array([-5.0]), t, p)[0] == 1.0
    # a test set: score 2.5 runs, 2 runs with p, 1 never
    np.testing.assert_allclose(run_probability([2.5, 2.0, 1.0, 3.0], *calibrated_rule(cal, 0.5)), [1, 0.5, 0, 1])


@pytest.mark.parametrize("n", [7, 10, 20, 101, 150, 333])
def test_calibrated_rule_spends_the_target_on_calibration(n):
    """Brute force over budgets, distinct and tied scores: p in [0, 1], the threshold is the
    inverted_cdf quantile (a calibration score, F(t) >= 1 - rho), never more above it than the
    target, and the expected calibration usage equals the target."""
    rng = np.random.default_rng(n)
    for scores in (rng.permutation(n).astype(float), np.round(rng.random(n), 1), np.zeros(n)):
        for rho in (0.0, 0.003, 0.05, 0.1, 0.25, 0.3, 0.5, 0.7, 0.75, 0.9, 0.99):
            t, p = calibrated_rule(scores, rho)
            assert t in scores and 0.0 <= p <= 1.0
            assert t == calibrated_threshold(scores, rho)  # no float artefact for these
            assert np.mean(scores > t) <= rho + 1e-12
            assert np.mean(scores <= t) >= 1 - rho - 1e-12
            assert run_probability(scores, t, p).mean() == pytest.approx(rho, abs=1e-12)


def test_calibrated_threshold_spends_floor_rho_n_strictly_above():
    """With distinct scores exactly floor(rho n) calibration questions lie strictly above t
    (the old strict rule's count); the tie coin adds the fraction frac(rho n)."""
    for n in (10, 20, 101, 150):
        scores = np.random.default_rng(n).permutation(n).astype(float)
        for rho in (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9):
            t, p = calibrated_rule(scores, rho)
            assert int(np.sum(scores > t)) == int(np.floor(rho * n + 1e-9)), (n, rho)
            assert p == pytest.approx(rho * n - np.floor(rho * n + 1e-9), abs=1e-9)


# --------------------------------------------------------------------------------------------
# The protocol
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [ConstantPolicy, RandomPolicy])
def test_constant_and_random_policies_spend_like_random(policy):
    """A constant score: exact and deployable frontiers equal random's exact expectation at
    every budget, deployable usage = rho exactly, AUC = random's AUC, no violation. Random
    scores (distinct) keep their own numbers; their calibrated usage is still close to rho."""
    res = run_budget_protocol(_task(), policy, budgets=BUDGETS, n_splits=3, seed=0, cost=0.05)
    f, m = res.frontiers, res.metrics
    if policy is ConstantPolicy:
        for fr in ("exact", "deployable", "conservative"):
            g = f[f.frontier == fr]
            np.testing.assert_allclose(g.outcome, g.random_matched, atol=1e-12)
        d = f[f.frontier == "deployable"]
        np.testing.assert_allclose(d.realized_usage, d.budget, atol=1e-12)
        np.testing.assert_allclose(d.tie_prob, d.budget, atol=1e-12)
        assert m["frontier/exact_auc"] == pytest.approx(m["frontier/random_auc"], abs=1e-12)
        for rho in BUDGETS:
            key = f"budget/{rho:.2f}"
            for fr in ("exact", "deployable", "conservative"):
                assert m[f"{key}/{fr}/violation_rate"] == 0.0
                assert m[f"{key}/{fr}/hit@10"] == pytest.approx(m[f"{key}/{fr}/random_matched/hit@10"], abs=1e-12)
                assert m[f"{key}/{fr}/utility"] == pytest.approx(m[f"{key}/{fr}/random_matched/utility"], abs=1e-12)
    c = f[f.frontier != "exact"]
    np.testing.assert_allclose(c.cal_usage, c.target_usage, atol=1e-12)


def test_deployable_and_conservative_rows_replayed_independently():
    """Recompute split 0's deployable and conservative rows from scratch (same split seed, same
    fit, in-sample calibration, a brute-force threshold and tie probability)."""
    from harness.protocols.common import fit_policy, score_task
    from harness.stats import stratified_grouped_halves

    task = _task()
    budgets = (0.1, 0.25, 0.5)
    res = run_budget_protocol(task, LstsqPolicy, budgets=budgets, n_splits=2, seed=3, dkw_delta=0.05,
                              calibration="in_sample")
    split_seed = int(np.random.default_rng(3).integers(0, 2**31 - 1, size=2)[0])
    cal_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, split_seed)
    cal, test = task.take(cal_idx), task.take(test_idx)
    policy = fit_policy(LstsqPolicy(), cal, 3)
    cal_s, test_s = score_task(policy, cal, 3), score_task(policy, test, 3)
    eps = np.sqrt(np.log(1 / 0.05) / (2 * cal.n))  # one-sided DKW

    def brute_rule(r):  # smallest calibration score with empirical CDF >= 1 - r; its coin
        t = min(s for s in cal_s if np.mean(cal_s <= s) >= 1 - r - 1e-12)
        return t, (r * cal.n - np.sum(cal_s > t)) / np.sum(cal_s == t)

    f = res.frontiers[res.frontiers.split == 0]
    for rho in budgets:
        for frontier, r in (("deployable", rho), ("conservative", max(0.0, rho - eps))):
            t, p = brute_rule(r)
            prob = np.where(test_s > t, 1.0, np.where(test_s == t, p, 0.0))
            row = f[(f.budget == rho) & (f.frontier == frontier)].iloc[0]
            assert row.threshold == t and row.tie_prob == pytest.approx(p), (rho, frontier)
            assert row.extra_calls == pytest.approx(prob.sum())
            assert row.outcome == pytest.approx(np.mean(np.where(prob > 0, test.extra, test.base)))
            assert row.target_usage == pytest.approx(r) and row.dkw_eps == pytest.approx(eps)


def test_in_sample_calibration_reproduces_the_old_numbers():
    """A continuous learner never ties with the threshold on test, so with calibration=in_sample
    every test number equals the previous protocol's, bit for bit (exact frontier included)."""
    task = _task()
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, n_splits=3, seed=1, calibration="in_sample")
    old, old_aucs = _old_rows(task, LstsqPolicy, BUDGETS, 3, 1, 0.05)
    new = res.frontiers[["split", "budget", "frontier", "extra_calls", "realized_usage", "outcome"]]
    pd.testing.assert_frame_equal(new.reset_index(drop=True), old, check_dtype=False, check_exact=True)
    assert list(res.aucs.exact_auc) == old_aucs
    assert (res.frontiers.calibration == "in_sample").all() and (res.frontiers.cal_folds == 0).all()
    assert res.metrics["budget/calibration_oof"] == 0.0 and res.metrics["budget/cal_folds"] == 0.0


class RecordingPolicy(Policy):
    """Records the documents it was fitted on and, per scoring call, which questions it scored
    with which fit: the test checks that no calibration question is scored by a fit that saw
    its own document."""

    trainable = True
    name = "recording"
    features = ("dense_top1",)
    log: list = []

    def __init__(self):
        self.fitted_on: frozenset | None = None

    def fit(self, X, delta, groups, seed=0):
        self.fitted_on = frozenset(np.asarray(groups).astype(str))
        return self

    def score(self, X, ctx):
        RecordingPolicy.log.append((tuple(ctx.qids), self.fitted_on))
        return X.to_numpy(float)[:, 0]


def test_oof_calibration_uses_no_question_s_own_fit():
    from harness.stats import stratified_grouped_halves

    task = _task()
    doc = dict(zip(task.qids, task.groups))
    assert "dense_top1" in task.features.columns

    def run(calibration):
        RecordingPolicy.log = []
        res = run_budget_protocol(task, RecordingPolicy, budgets=(0.25,), n_splits=2, seed=7,
                                  calibration=calibration, cal_folds=4)
        return res, list(RecordingPolicy.log)

    res, log = run("oof")
    seeds = np.random.default_rng(7).integers(0, 2**31 - 1, size=2)
    for s, split_seed in enumerate(seeds):
        cal_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        cal_q, test_q = set(task.qids[cal_idx]), set(task.qids[test_idx])
        cal_docs = {doc[q] for q in cal_q}
        scored_cal = [(q, fit) for qs, fit in log for q in qs if q in cal_q and fit is not None and fit <= cal_docs]
        # every calibration question scored exactly once (by its out-of-fold fit) ...
        assert sorted(q for q, _ in scored_cal) == sorted(cal_q)
        # ... by a model that never saw its document, fitted on calibration documents only
        assert all(doc[q] not in fit and fit < cal_docs for q, fit in scored_cal)
        # the test half is cross-fitted: every test question scored exactly once, by one of the
        # same fold models that gave the calibration scores (each fitted on 3 of 4 folds)
        fold_fits = {fit for _, fit in scored_cal}
        scored_test = [(q, fit) for qs, fit in log for q in qs if q in test_q and fit in fold_fits]
        assert sorted(q for q, _ in scored_test) == sorted(test_q)
        assert len(fold_fits) == 4 and {fit for _, fit in scored_test} == fold_fits
    assert (res.frontiers.calibration == "oof").all() and (res.frontiers.cal_folds == 4).all()
    assert res.metrics["budget/calibration_oof"] == 1.0 and res.metrics["budget/cal_folds"] == 4.0

    # in_sample: calibration questions are scored by the fit that saw them (the check bites)
    _, log = run("in_sample")
    assert any(doc[q] in fit for qs, fit in log for q in qs if fit is not None)


def test_untrainable_policies_need_no_folds():
    a = run_budget_protocol(_task(), RandomPolicy, n_splits=2, seed=0, calibration="oof")
    b = run_budget_protocol(_task(), RandomPolicy, n_splits=2, seed=0, calibration="in_sample")
    cols = ["threshold", "tie_prob", "extra_calls", "outcome", "realized_usage"]
    pd.testing.assert_frame_equal(a.frontiers[cols], b.frontiers[cols])
    assert (a.frontiers.cal_folds == 0).all() and (a.frontiers.calibration == "oof").all()


@pytest.mark.parametrize("route", ["base", "extra"])
def test_fixed_policies_report_only_their_fixed_point(route, tmp_path, isolated_cache):
    from policies.builtin import AlwaysBase, AlwaysExtra

    from harness.protocols.builtin import frontier_png, frontier_series
    from harness.plots import frontier_points, plot_frontiers
    from harness.stats import stratified_grouped_halves

    task = _task()
    factory = AlwaysBase if route == "base" else AlwaysExtra
    res = run_budget_protocol(task, factory, n_splits=3, seed=2, cost=0.1)
    f, m = res.frontiers, res.metrics
    assert len(f) == 3 and (f.frontier == "fixed").all() and f.fixed.all() and f.budget.isna().all()
    assert not any(k.startswith("frontier/") for k in m), "no AUC for a fixed decision"
    assert not any(k.startswith("budget/0.") for k in m), "no per-budget metrics for a fixed decision"
    outcomes = []
    for split_seed in np.random.default_rng(2).integers(0, 2**31 - 1, size=3):
        _, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        arm = task.extra if route == "extra" else task.base
        outcomes.append(arm[test_idx].mean())
    usage = 1.0 if route == "extra" else 0.0
    assert m["budget/fixed/realized_usage"] == usage and m["budget/fixed/realized_usage_std"] == 0.0
    assert m["budget/fixed/hit@10"] == pytest.approx(np.mean(outcomes))
    assert m["budget/fixed/hit@10_std"] == pytest.approx(np.std(outcomes))
    assert m["budget/fixed/utility"] == pytest.approx(np.mean(outcomes) - 0.1 * usage)
    assert res.aucs.empty
    assert "fixed decision" in res.summary() and "AUC" not in res.summary().split("\n")[2]
    # plots and series: a point, no crash
    assert frontier_series(f, "hit@10") == []
    pts = frontier_points(f)
    assert list(pts.frontier) == ["fixed"] and pts.realized_usage.iloc[0] == usage
    assert plot_frontiers(f, tmp_path / "a.png").stat().st_size > 0
    cfg = {"policy": {"name": factory.name}, "seed": 2}
    assert frontier_png(f, tmp_path / "b.png", "hit@10", cfg).stat().st_size > 0


def test_frontier_series_and_plot_of_a_ranking_policy(tmp_path, isolated_cache):
    from harness.protocols.builtin import frontier_png, frontier_series

    res = run_budget_protocol(_task(), LstsqPolicy, n_splits=2, seed=0)
    series = frontier_series(res.frontiers, "hit@10")
    got = {(name, step): v for name, v, step in series}
    m = res.metrics
    assert got[("frontier/deployable/realized_usage", 25)] == pytest.approx(m["budget/0.25/deployable/realized_usage"])
    assert got[("frontier/exact/hit@10", 50)] == pytest.approx(m["budget/0.50/exact/hit@10"])
    assert got[("frontier/conservative/violation_rate", 10)] == pytest.approx(m["budget/0.10/conservative/violation_rate"])
    assert len(series) == 3 * 5 * 8
    cfg = {"policy": {"name": "lstsq"}, "seed": 0}
    assert frontier_png(res.frontiers, tmp_path / "f.png", "hit@10", cfg).stat().st_size > 0


def test_power_in_summary_and_metrics():
    from harness.stats import stratified_grouped_halves

    task = _task()
    res = run_budget_protocol(task, LstsqPolicy, n_splits=3, seed=4)
    resc, harm, mdd, largest = [], [], [], []
    for split_seed in np.random.default_rng(4).integers(0, 2**31 - 1, size=3):
        _, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        d, g = task.delta[test_idx], task.groups[test_idx]
        resc.append(np.sum(d > 0))
        harm.append(np.sum(d < 0))
        # cluster-robust SE, centred: document totals minus their size times the mean difference
        per_doc = [d[g == doc].sum() - np.sum(g == doc) * d.mean() for doc in np.unique(g)]
        mdd.append((1.959963984540054 + 0.8416212335729143) * math.sqrt(sum(x * x for x in per_doc)) / len(d))
        largest.append(sum(abs(d[g == doc].sum()) for doc in np.unique(g)) / len(d))  # all discordant one way
    m = res.metrics
    assert m["budget/power/rescues"] == pytest.approx(np.mean(resc))
    assert m["budget/power/harms"] == pytest.approx(np.mean(harm))
    assert m["budget/power/discordant"] == pytest.approx(np.mean(resc) + np.mean(harm))
    assert m["budget/power/mdd_vs_base"] == pytest.approx(np.mean(mdd), rel=1e-9)
    text = res.summary()
    assert f"{np.mean(resc):.1f} rescues + {np.mean(harm):.1f} harms" in text
    assert m["budget/power/max_diff_vs_base"] == pytest.approx(np.mean(largest))
    from harness.protocols.common import fmt

    assert f"largest difference from always-base a test half could show {fmt(np.mean(largest))}" in text
    if np.mean(mdd) < np.mean(largest):
        assert f"minimum detectable {fmt(np.mean(mdd))} (80% power" in text
    else:  # the MDD is never offered when the data could not show it
        assert "no difference is detectable with these questions" in text and "minimum detectable" not in text
    assert "test questions would give 80% power at alpha 0.05 for policy vs always-base (exact sign test)" in text
    # the calibration sentence says what the code does: each test fold by its fold model
    assert ("calibration scores: oof (5 document-grouped folds; each test fold scored by the model of its fold, "
            "fitted on the other calibration folds)") in text
    assert "fitted on the whole half" not in text
    np.testing.assert_allclose(res.splits.test_mdd_vs_base, mdd, rtol=1e-9)


def test_metrics_aggregate_the_frontier_table():
    task = _task()
    res = run_budget_protocol(task, LstsqPolicy, seed=0, cost=0.1)
    f, m = res.frontiers, res.metrics
    assert len(f) == 5 * 5 * 3
    g = f[(f.budget == 0.25) & (f.frontier == "deployable")]
    assert m["budget/0.25/deployable/realized_usage"] == pytest.approx(g.realized_usage.mean())
    assert m["budget/0.25/deployable/realized_usage_std"] == pytest.approx(g.realized_usage.std(ddof=0))
    assert m["budget/0.25/deployable/violation_rate"] == pytest.approx(np.mean(g.realized_usage > 0.25 + 1e-12))
    assert m["budget/0.25/deployable/tolerance_overshoot_rate"] == pytest.approx(np.mean(g.realized_usage > 0.27 + 1e-12))
    assert m["budget/0.25/deployable/usage_error"] == pytest.approx(g.realized_usage.mean() - 0.25)
    assert m["budget/0.25/deployable/utility"] == pytest.approx((g.outcome - 0.1 * g.realized_usage).mean())
    assert "budget/0.25/exact/hit@10" in m and "budget/0.25/conservative/violation_rate" in m
    for rho in BUDGETS:
        key = f"budget/{rho:.2f}"
        assert m[f"{key}/exact/violation_rate"] == 0.0  # floor(rho n) never exceeds rho
        for fr in ("exact", "deployable", "conservative"):
            assert m[f"{key}/{fr}/random_matched/hit@10"] <= m[f"{key}/{fr}/oracle_matched/hit@10"]
    # conservative calibrates to rho - eps: never spends more than deployable on calibration
    assert (f[f.frontier == "conservative"].cal_usage.to_numpy() <= f[f.frontier == "deployable"].cal_usage.to_numpy()).all()
    cons = f[f.frontier == "conservative"]
    eps = dkw_epsilon(int(cons.n_cal.iloc[0]))
    assert cons.target_usage.iloc[0] == pytest.approx(max(0.0, cons.budget.iloc[0] - eps))
    assert "exact-frontier AUC" in res.summary()


def test_violation_tolerates_float_noise():
    """A rule whose expected usage equals rho up to float noise is no violation: a constant
    score at rho = 0.1, 0.3, 0.7 (p * n sums are inexact) gives violation rate 0."""
    res = run_budget_protocol(_task(), ConstantPolicy, budgets=(0.1, 0.3, 0.7), n_splits=5, seed=0)
    d = res.frontiers[res.frontiers.frontier == "deployable"]
    assert not d.violated.any() and not d.overshoot.any()


def test_planted_signal_auc_ordering():
    task = _task(n_docs=120, seed=2)
    auc = {name: run_budget_protocol(task, f, seed=0).metrics for name, f in
           (("oracle", OraclePolicy), ("trained", LstsqPolicy), ("random", RandomPolicy))}
    assert auc["oracle"]["frontier/exact_auc"] > auc["trained"]["frontier/exact_auc"] > auc["random"]["frontier/exact_auc"]
    # the oracle policy traces the oracle frontier (its ties are delta ties: same outcome)
    assert auc["oracle"]["frontier/exact_auc"] == pytest.approx(auc["oracle"]["frontier/oracle_auc"])
    assert auc["trained"]["frontier/exact_auc"] > auc["trained"]["frontier/random_auc"]


def test_bad_calibration_options_are_config_errors():
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match="budget.calibration"):
        run_budget_protocol(_task(), LstsqPolicy, calibration="nested")
    with pytest.raises(ConfigError, match="budget.cal_folds"):
        run_budget_protocol(_task(), LstsqPolicy, cal_folds=1)
    with pytest.raises(ConfigError, match="budget.cal_folds"):
        run_budget_protocol(_task(n_docs=8), LstsqPolicy, cal_folds=7)


def test_deterministic():
    a = run_budget_protocol(_task(), LstsqPolicy, seed=4)
    b = run_budget_protocol(_task(), LstsqPolicy, seed=4)
    assert a.metrics == b.metrics
    pd.testing.assert_frame_equal(a.frontiers, b.frontiers)


# --------------------------------------------------------------------------------------------
# Costs of one sweep share one fit (reuse_key): identical numbers, fewer fits
# --------------------------------------------------------------------------------------------


def _assert_same_result(a, b):
    assert a.metrics.keys() == b.metrics.keys()
    for k, x in a.metrics.items():
        y = b.metrics[k]
        assert x == y or (math.isnan(x) and math.isnan(y)), (k, x, y)
    for name in ("frontiers", "decisions", "aucs", "splits", "routing"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    assert a.summary() == b.summary()


@pytest.mark.parametrize("make", [LstsqPolicy, ConstantPolicy])
def test_reused_cost_free_part_gives_the_fresh_numbers_at_every_cost(make):
    task = _task()
    fits = []

    class Counting(make):
        def fit(self, *args, **kwargs):
            fits.append(1)
            return super().fit(*args, **kwargs)

    key = f"counting-{make.__name__}"
    forget_reused()
    for cost in (0.05, 0.0, 0.02, 0.01):  # not sorted: the reused part carries no cost
        fresh = run_budget_protocol(task, Counting, budgets=BUDGETS, n_splits=3, seed=4, cost=cost)
        n_fresh = len(fits)
        reused = run_budget_protocol(task, KeyedFactory(Counting, key), budgets=BUDGETS, n_splits=3, seed=4, cost=cost)
        _assert_same_result(fresh, reused)
        assert fresh.metrics["cost"] == cost
        # utility is outcome - cost * usage, row by row (hand formula, not the code's helper)
        f = reused.frontiers
        np.testing.assert_array_equal(f["utility"], f["outcome"] - cost * f["realized_usage"])
        if cost != 0.05:  # after the first cost, the reused call fits nothing
            assert len(fits) == n_fresh
    if make is LstsqPolicy:  # a trained policy (the constant one needs no fit)
        assert fits, "the counting policy was never fitted"


def test_reuse_never_crosses_tasks_or_settings():
    a, b = _task(seed=0), _task(seed=1)
    keyed = KeyedFactory(LstsqPolicy, "same-policy")
    ra = run_budget_protocol(a, keyed, budgets=BUDGETS, n_splits=2, seed=0)
    rb = run_budget_protocol(b, keyed, budgets=BUDGETS, n_splits=2, seed=0)
    _assert_same_result(rb, run_budget_protocol(b, LstsqPolicy, budgets=BUDGETS, n_splits=2, seed=0))
    assert not ra.frontiers.equals(rb.frontiers)
    rc = run_budget_protocol(a, keyed, budgets=BUDGETS, n_splits=2, seed=1)
    _assert_same_result(rc, run_budget_protocol(a, LstsqPolicy, budgets=BUDGETS, n_splits=2, seed=1))
