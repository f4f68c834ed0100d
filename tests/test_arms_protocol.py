"""Routing among n arms: the arm-set task view, the n-way policies' contract, the protocol's
reference rows against an independent computation, and a plugin n-way policy in a real sweep."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from harness.arm_set import ArmSetTask, check_arm_list
from harness.errors import ConfigError, FeatureError
from harness.protocols.arms_run import run_arms
from harness.stats import grouped_kfold
from policies.arm_policies import (
    ArmGBM,
    ArmKNN,
    ArmLogistic,
    ArmOracle,
    ArmRandom,
    ArmRidge,
    ArmScoreContext,
    CheapestSuffices,
    cheapest_best_arm,
)
from policies.base import check_json_state
from tests.helpers.plugin_tools import activate, write_plugin

ARMS = ("bm25", "dense", "keep")


def _table(n: int = 120, seed: int = 0) -> pd.DataFrame:
    """Four features; each arm's hit depends on them differently; measured costs per arm."""
    rng = np.random.default_rng(seed)
    f = rng.normal(size=(n, 4))
    t = pd.DataFrame({"qid": [f"q{i:04d}" for i in range(n)], "doc_id": [f"d{i // 2:03d}" for i in range(n)],
                      "has_evidence": True})
    for j in range(4):
        t[f"feat.f{j}"] = f[:, j]
    for a, arm in enumerate(ARMS):
        t[f"{arm}.hit@1"] = (f[:, a] + 0.8 * rng.normal(size=n) > 0.3 - 0.4 * a).astype(float)
        t[f"{arm}.cost.ms"] = 1.0 + 10.0 * a + rng.random(n)
    return t


def _task(**kw) -> ArmSetTask:
    return ArmSetTask.from_table(_table(**kw), ARMS, "hit@1", cost_column="ms")


# ---- the task view ----------------------------------------------------------------------------
def test_arm_set_task_reads_outcomes_and_costs_in_arm_order_sorted_by_question():
    t = _table()
    task = ArmSetTask.from_table(t.iloc[::-1], ARMS, "hit@1", cost_column="ms")
    assert list(task.qids) == sorted(t["qid"])
    assert np.array_equal(task.outcomes[:, 2], t.sort_values("qid")["keep.hit@1"].to_numpy())
    assert np.array_equal(task.costs[:, 0], t.sort_values("qid")["bm25.cost.ms"].to_numpy())
    unit = ArmSetTask.from_table(t, ARMS, "hit@1", unit_costs={"bm25": 0, "dense": 2, "keep": 3.5})
    assert np.array_equal(unit.costs, np.tile([0.0, 2.0, 3.5], (len(t), 1))) and unit.cost_unit == "unit"


def test_arm_set_task_keeps_only_questions_with_evidence_for_gold_metrics():
    t = _table()
    t.loc[:9, "has_evidence"] = False
    assert _task().n == 120 and ArmSetTask.from_table(t, ARMS, "hit@1", cost_column="ms").n == 110


@pytest.mark.parametrize("arms, match", [(["keep"], "2 to"), (["keep", "keep"], "more than once"),
                                         ("keep", "a list"), (["keep", ""], "non-empty")])
def test_arm_list_refused_naming_the_key(arms, match):
    with pytest.raises(ConfigError, match=match) as e:
        check_arm_list(arms)
    assert "arms.route" in str(e.value)


@pytest.mark.parametrize("change, kwargs, match", [
    (lambda t: t.drop(columns=["dense.hit@1"]), {"cost_column": "ms"}, "no column 'dense.hit@1'"),
    (lambda t: t.drop(columns=["keep.cost.ms"]), {"cost_column": "ms"}, "no cost column 'keep.cost.ms'"),
    (lambda t: t.assign(**{"bm25.hit@1": 0.5}), {"cost_column": "ms"}, "0/1 metric"),
    (lambda t: t.assign(**{"dense.cost.ms": -1.0}), {"cost_column": "ms"}, "negative or missing"),
    (lambda t: t, {"unit_costs": {"bm25": 1.0}}, "no cost for arm"),
    (lambda t: t, {"unit_costs": {"bm25": 1.0, "dense": float("nan"), "keep": 1.0}}, "cost.per_arm.dense"),
    (lambda t: t, {"cost_column": "ms", "unit_costs": {"bm25": 1.0}}, "not both"),
])
def test_arm_set_task_bad_input_is_one_named_error(change, kwargs, match):
    with pytest.raises((ConfigError, FeatureError), match=match):
        ArmSetTask.from_table(change(_table()), ARMS, "hit@1", **kwargs)


# ---- the n-way policies' contract -----------------------------------------------------------------
POLICIES = [ArmRidge(features=["f0", "f1", "f2", "f3"]), ArmLogistic(features=["f0", "f1", "f2", "f3"]),
            ArmGBM(features=["f0", "f1", "f2", "f3"], num_boost_round=20), ArmKNN(features=["f0", "f1", "f2", "f3"], k=7),
            CheapestSuffices(features=["f0", "f1", "f2", "f3"]), ArmRandom(), ArmOracle()]


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.name)
def test_n_way_policy_scores_one_finite_column_per_arm_deterministically_and_round_trips(policy):
    task = _task()
    train, test = grouped_kfold(task.groups, 2, 0)[0]
    tr, te = task.take(train), task.take(test)
    ctx = ArmScoreContext(te.qids, te.arms, 3, te.outcomes)

    def fitted():
        return type(policy)(**policy.get_params()).fit_arms(tr.features, tr.outcomes, tr.costs, tr.groups, 3)

    first = fitted().score_arms(te.features, ctx)
    assert first.shape == (te.n, 3) and np.isfinite(first).all()
    assert np.array_equal(first, fitted().score_arms(te.features, ctx))  # same data, same seed: same bits
    state = json.loads(json.dumps(check_json_state(policy.name, fitted().get_state())))
    restored = type(policy)(**policy.get_params())
    restored.set_state(state)
    assert np.array_equal(restored.score_arms(te.features, ctx), first)


def test_per_arm_ridge_is_sklearns_ridge_on_each_arm():
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    task = _task()
    p = ArmRidge(features=["f0", "f1", "f2", "f3"], alpha=3.0).fit_arms(task.features, task.outcomes, task.costs, task.groups)
    got = p.score_arms(task.features, ArmScoreContext(task.qids, task.arms))
    for j in range(3):
        ref = make_pipeline(StandardScaler(), Ridge(alpha=3.0)).fit(task.features.to_numpy(), task.outcomes[:, j])
        assert np.allclose(got[:, j], ref.predict(task.features.to_numpy()), atol=1e-10)


def test_cheapest_best_arm_is_the_cheapest_of_the_best_then_the_earliest():
    y = np.array([[1, 1, 1], [0, 1, 1], [0, 0, 0], [0.2, 0.7, 0.7]])
    assert cheapest_best_arm(y, np.array([3.0, 1.0, 1.0])).tolist() == [1, 1, 1, 1]
    assert cheapest_best_arm(y, np.array([0.0, 2.0, 1.0])).tolist() == [0, 2, 0, 2]


def test_an_n_way_policy_in_a_binary_protocol_is_one_named_error():
    with pytest.raises(Exception, match="scores arms"):
        ArmRidge().fit(pd.DataFrame({"f": [1.0]}), np.zeros(1))


# ---- the protocol's references, recomputed independently ----------------------------------------
def test_references_and_budgets_match_an_independent_computation():
    task = _task(n=160, seed=4)
    halves = grouped_kfold(task.groups, 2, 0)[0]
    shares = [0.1, 0.5, 0.9]
    run = run_arms(lambda: ArmRidge(features=["f0", "f1", "f2", "f3"]), task, halves, shares, alpha=0.05,
                   n_perm=2000, seed=0)
    y, c = task.outcomes, task.costs
    n, k = y.shape
    # single arms and the oracle by plain loops
    for j in range(k):
        assert run.singles[0][j] == sum(y[i, j] for i in range(n)) / n
    best = [min(range(k), key=lambda j: (-y[i, j], c[i, j], j)) for i in range(n)]
    assert run.oracle.mean_outcome == pytest.approx(sum(y[i, best[i]] for i in range(n)) / n, abs=0)
    arm_y, arm_c = y.mean(axis=0), c.mean(axis=0)
    for share, row in zip(shares, run.rows):
        budget = arm_c.min() + share * (arm_c.max() - arm_c.min())
        assert row.budget == pytest.approx(budget, rel=1e-15)
        # the cost-matched mix: the best blind mix of at most two arms at the budget, by brute force
        mixes = [arm_y[a] for a in range(k) if arm_c[a] <= budget]
        for a, b in itertools.permutations(range(k), 2):
            if arm_c[a] < budget < arm_c[b]:
                q = (arm_c[b] - budget) / (arm_c[b] - arm_c[a])
                mixes.append(q * arm_y[a] + (1 - q) * arm_y[b])
        assert row.mix.mean_outcome == pytest.approx(max(mixes), abs=1e-12)
        # every question routed once; each half's overshoot recounted from the per-question costs
        assert np.allclose(row.route.probs.sum(axis=1), 1.0)
        for h, test in enumerate((halves[1], halves[0])):
            assert row.over[h] == pytest.approx(row.route.cost[test].mean() - budget, abs=1e-9)
        assert row.verdict.startswith(("deploy", "cannot tell"))


def test_verdict_says_cannot_tell_when_the_router_is_the_mix():
    task = _task(n=60, seed=1)
    halves = grouped_kfold(task.groups, 2, 0)[0]
    run = run_arms(ArmRandom, task, halves, [1.0], alpha=0.05, n_perm=2000, seed=0)
    row = run.rows[0]  # budget = the costliest arm: random scores vs the best arm alone
    assert row.verdict.startswith(("cannot tell", "deploy")) and row.p <= 1.0
    if row.p >= run.level:
        assert row.verdict.startswith("cannot tell") and f"{row.discordant} questions differ" in row.verdict


# ---- a plugin n-way policy in a real sweep with the built-ins --------------------------------------
PLUGIN = '''
import numpy as np
from policies.arm_policies import ArmPolicy


class CheapFirst(ArmPolicy):
    """Prefers earlier arms: score = -arm index (a fixed preference, fitted on nothing)."""

    name = "cheap_first"
    requires_fit = False

    def score_arms(self, X, ctx):
        return np.tile(-np.arange(len(ctx.arms), dtype=float), (len(X), 1))
'''


@pytest.mark.slow  # a real sweep through the CLI
def test_a_plugin_n_way_policy_runs_in_a_sweep_with_the_built_ins(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    root = write_plugin(tmp_path / "site", "nway_ext", {"cheap.py": PLUGIN},
                        {"rag_route_bench.policies": {"cheap_first": "nway_ext.cheap:CheapFirst"}})
    env = activate(monkeypatch, root)
    env["HARNESS_CACHE_DIR"] = str(tmp_path / "cache")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", "-m", "dataset=synthetic", "dataset.n_docs=40", "experiment=none",
           "protocol=arms", "protocol.settings.arms.route=[keep,hybrid]", "protocol.settings.arms.cost=null",
           "+protocol.settings.arms.per_arm={keep:0,hybrid:1}", "policy=cheap_first,arm_ridge,arm_oracle",
           f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "n-way routing" in proc.stdout and "cheap_first" in proc.stdout
    client = MlflowClient(tracking_uri=uri)
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    jobs = {r.data.tags["route_bench.policy"]: r for r in runs if r.data.tags.get("route_bench.role") == "job"}
    assert sorted(jobs) == ["arm_oracle", "arm_ridge", "cheap_first"]
    cheap = jobs["cheap_first"].data.metrics
    # always the first arm (cost 0): usage 100% keep, its outcome is keep's
    assert cheap["arms/b0.50/usage/keep"] == 1.0 and cheap["arms/b0.50/outcome"] == cheap["arms/single/keep/outcome"]
    assert jobs["arm_oracle"].data.metrics["arms/b0.90/outcome"] >= max(
        cheap["arms/single/keep/outcome"], cheap["arms/single/hybrid/outcome"])
    assert all(r.info.status == "FINISHED" for r in runs)


class _TwoColumns(ArmRandom):
    name = "two_columns"

    def score_arms(self, X, ctx):
        return np.zeros((len(X), 2))


class _Drifting(ArmRandom):
    name = "drifting"
    calls = 0

    def score_arms(self, X, ctx):
        type(self).calls += 1
        return np.full((len(X), len(ctx.arms)), float(type(self).calls))


@pytest.mark.parametrize("policy, check", [(_TwoColumns(), "one_column_per_arm"), (_Drifting(), "repeatable_score")],
                         ids=["shape", "repeatable"])
def test_check_policy_names_the_failed_n_way_check(policy, check):
    from policies.checks import PolicyCheckError, check_policy

    with pytest.raises(PolicyCheckError) as e:
        check_policy(policy, quiet=True)
    assert e.value.check == check


def test_lambda_at_a_cost_is_the_best_training_utility_over_a_fine_grid():
    from harness.protocols.arms_run import chosen_lambda, normalised_costs
    from harness.protocols.nway_decide import decide

    task = _task(n=120, seed=2)
    rng = np.random.default_rng(0)
    scores = task.outcomes * 0.5 + rng.random(task.outcomes.shape)
    norm = normalised_costs(task)
    rows = np.arange(task.n)
    for c in (0.0, 0.05, 0.3, 2.0):
        lam = chosen_lambda(scores, task.outcomes, norm, task.costs, c)

        def utility(x):
            arm = decide(scores, task.costs, x)
            return float(np.mean(task.outcomes[rows, arm] - c * norm[rows, arm]))

        grid = [np.inf, *np.linspace(0, 0.2, 2001)]
        assert utility(lam) >= max(utility(x) for x in grid) - 1e-12


def test_normalised_costs_of_two_arms_costing_0_and_1_are_the_binary_extra_call():
    from harness.protocols.arms_run import normalised_costs

    t = _table(n=20)
    task = ArmSetTask.from_table(t, ("bm25", "dense"), "hit@1", unit_costs={"bm25": 0, "dense": 1})
    assert np.array_equal(normalised_costs(task), task.costs)


def test_router_summaries_use_the_cheapest_route_and_the_budget_points():
    from harness.protocols.arms_run import router_summaries
    from harness.protocols.routing_summaries import aiq

    task = _task(n=160, seed=4)
    halves = grouped_kfold(task.groups, 2, 0)[0]
    run = run_arms(lambda: ArmRidge(features=["f0", "f1", "f2", "f3"]), task, halves, [0.2, 0.6, 1.0], alpha=0.05,
                   n_perm=500, seed=0)
    cheap = [min(range(3), key=lambda j: (task.costs[i, j], j)) for i in range(task.n)]
    arm_c0 = task.costs.mean(axis=0).min()
    pc = [min(np.mean([task.costs[i, cheap[i]] for i in range(task.n)]), arm_c0), *(r.route.mean_cost for r in run.rows)]
    pq = [np.mean([task.outcomes[i, cheap[i]] for i in range(task.n)]), *(r.route.mean_outcome for r in run.rows)]
    arm_y, arm_c = task.outcomes.mean(axis=0), task.costs.mean(axis=0)
    best = int(np.argmax(arm_y))
    assert run.summaries["aiq"] == pytest.approx(aiq(pc, pq, cost_range=(arm_c.min(), arm_c[best])), abs=1e-12)
    # the cheapest arm also the best: APGR is undefined, with its reason
    flat = task.take(np.arange(task.n))
    flat.outcomes[:, 0] = 1.0
    s = router_summaries(flat, run.rows)
    assert s["apgr"] != s["apgr"] and "not better than the cheapest" in s["reason"]


def test_a_router_that_beats_the_mix_by_overspending_is_over_budget_not_deployed():
    """The mix keeps to the budget; a router compared with it while spending twice the budget on
    both halves gets no deploy verdict, while the same gain within the budget does."""
    from harness.protocols.arms_run import compare_with_mix, reference_row
    from harness.protocols.nway_references import route_from_probabilities

    n = 40
    y = np.c_[np.zeros(n), (np.arange(n) < 20).astype(float)]  # the costly arm helps questions 0-19
    c = np.c_[np.zeros(n), np.ones(n)]
    task = ArmSetTask(np.array([f"q{i:02d}" for i in range(n)]), np.array([f"d{i:02d}" for i in range(n)]),
                      ("cheap", "costly"), y, c, pd.DataFrame(index=range(n)), "hit@1", "unit")
    tests = [np.arange(0, n, 2), np.arange(1, n, 2)]
    for costly, expected in ((np.arange(n) < 20, "deploy router"), (np.ones(n, dtype=bool), "over budget")):
        probs = np.c_[~costly, costly].astype(float)
        route = route_from_probabilities(probs, y, c)
        row = reference_row(task, 0.5, 0.5, route, [float(route.cost[t].mean()) - 0.5 for t in tests])
        compare_with_mix(row, task, 0.05, 2000, 0, tests)
        assert row.point == pytest.approx(0.25) and row.p < 0.05
        assert row.verdict.startswith(expected), row.verdict


def test_a_win_by_either_side_that_overspent_is_no_deploy_verdict():
    from harness.protocols.arms_run import verdict_words

    args = ("bur_linear alone", -0.2, 0.001, (-0.3, -0.1), 12, 0.01)
    assert verdict_words(*args, who="cascade").startswith("deploy bur_linear alone, no cascade")
    said = verdict_words(*args, who="cascade", rival_overspent="it spent 9 against the budget 5 (2 of 2 halves ...)")
    assert said.startswith("over budget: bur_linear alone +0.2000 [+0.1000, +0.3000] over cascade, but it spent 9")
    # the side that lost may have overspent: its loss stands
    assert verdict_words(*args, who="cascade", overspent="it spent 9").startswith("deploy bur_linear alone")
    assert verdict_words("mix", 0.2, 0.001, (0.1, 0.3), 12, 0.01, overspent="it spent 9").startswith("over budget: router")
