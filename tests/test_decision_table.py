"""The decision table against independent computations: protocol B's per-question decisions
and calibration-half utility replayed; the table's means and sds by a loop over the frontiers;
the interval by replaying ``stats.bootstrap_draws``; p by brute-force sign-flip enumeration; Holm
by hand; the reference chosen on calibration utility (not the test outcome); ties named; the
oracle and fixed decisions shown, never tested; the filters of the report command."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from harness import stats
from harness.protocols.decision_table import COLUMNS, JobRecord, decision_table, select
from harness.protocols.decision_table_render import format_console, format_text
from harness.errors import HarnessError
from harness.protocols import run_budget_protocol
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from policies.builtin import AlwaysBase, AlwaysExtra
from tests.helpers.policies import ConstantPolicy, LstsqPolicy, OraclePolicy, RandomPolicy

BUDGETS = (0.1, 0.25, 0.5)


def _task(n_docs=40, seed=0):
    return RoutingTask.from_table(synthetic_outcome_table(n_docs=n_docs, questions_per_doc=4, seed=seed))


@pytest.fixture(scope="module")
def protocol_records():
    """Real protocol B results: 4 ranking policies and 2 fixed decisions, 2 seeds, 2 costs."""
    task = _task()
    records, results = [], {}
    for cost in (0.0, 0.05):
        for factory in (LstsqPolicy, RandomPolicy, ConstantPolicy, OraclePolicy, AlwaysBase, AlwaysExtra):
            for seed in (0, 1):
                res = run_budget_protocol(task, factory, budgets=BUDGETS, n_splits=3, seed=seed, cost=cost)
                results[(factory.name, seed, cost)] = res
                records.append(JobRecord(factory.name, seed, cost, res.frontiers, res.decisions,
                                         cell=f"cost.c={cost:g}"))
    return task, records, results


# --------------------------------------------------------------------------------------------
# Protocol B: per-question decisions and the calibration-half utility
# --------------------------------------------------------------------------------------------


def test_budget_decisions_reproduce_the_frontiers_table():
    from harness.stats import stratified_grouped_halves

    task = _task()
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, n_splits=3, seed=2, cost=0.05)
    dec, f = res.decisions, res.frontiers
    assert {"qid", "doc_id", "split", "budget", "frontier", "prob", "base", "extra"} <= set(dec.columns)
    split_seeds = np.random.default_rng(2).integers(0, 2**31 - 1, size=3)
    for row in f.itertuples():
        part = dec[(dec.split == row.split) & (dec.budget == row.budget) & (dec.frontier == row.frontier)]
        _, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seeds[row.split]))
        assert sorted(part.qid) == sorted(task.qids[test_idx])  # the test half, every question once
        p = part.prob.to_numpy()
        assert ((p >= 0) & (p <= 1)).all()
        outcome = np.mean((1 - p) * part.base + p * part.extra)
        assert outcome == pytest.approx(row.outcome, abs=1e-12)
        assert p.sum() == pytest.approx(row.extra_calls, abs=1e-9)
        assert part.utility.mean() == pytest.approx(row.utility, abs=1e-12)
        truth = dict(zip(task.qids, zip(task.base, task.extra, task.groups)))
        for q, b, e, d in zip(part.qid, part.base, part.extra, part.doc_id):
            assert truth[q] == (b, e, d)


def test_fixed_decisions_log_prob_zero_or_one():
    task = _task()
    for factory, prob in ((AlwaysBase, 0.0), (AlwaysExtra, 1.0)):
        res = run_budget_protocol(task, factory, n_splits=2, seed=0, cost=0.1)
        assert (res.decisions.frontier == "fixed").all() and res.decisions.budget.isna().all()
        assert (res.decisions.prob == prob).all()
        assert res.frontiers.cal_utility.isna().all()


def test_cal_utility_replays_the_calibration_half():
    """In-sample calibration: refit on the calibration half, replay the logged rule (threshold,
    tie probability) on its scores and compute the expected utility there by hand."""
    from harness.protocols.common import fit_policy, score_task
    from harness.stats import stratified_grouped_halves

    task, cost = _task(), 0.05
    res = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, n_splits=2, seed=3, cost=cost,
                              calibration="in_sample")
    f = res.frontiers
    for s, split_seed in enumerate(np.random.default_rng(3).integers(0, 2**31 - 1, size=2)):
        cal_idx, _ = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        cal = task.take(cal_idx)
        scores = score_task(fit_policy(LstsqPolicy(), cal, 3), cal, 3)
        for row in f[(f.split == s) & (f.frontier != "exact")].itertuples():
            q = [1.0 if x > row.threshold else (row.tie_prob if x == row.threshold else 0.0) for x in scores]
            want = sum((1 - qi) * b + qi * e for qi, b, e in zip(q, cal.base, cal.extra)) / cal.n - cost * np.mean(q)
            assert row.cal_utility == pytest.approx(want, abs=1e-12)
    assert f.loc[f.frontier == "exact", "cal_utility"].isna().all()
    # the default (cross-fitted) calibration spends the target on calibration and has a utility
    oof = run_budget_protocol(task, LstsqPolicy, budgets=BUDGETS, n_splits=2, seed=3, cost=cost).frontiers
    dep = oof[oof.frontier == "deployable"]
    assert dep.cal_utility.notna().all()
    np.testing.assert_allclose(dep.cal_usage, dep.target_usage, atol=1e-12)


# --------------------------------------------------------------------------------------------
# The table's numbers against loops over the logged frontiers
# --------------------------------------------------------------------------------------------


def test_means_and_sds_are_a_loop_over_the_frontiers(protocol_records):
    _, records, results = protocol_records
    table = decision_table(records, n_boot=200)
    assert list(table.columns) == list(COLUMNS)
    ranking = table[table.kind != "fixed"]
    assert len(ranking) == 2 * len(BUDGETS) * 4  # costs x budgets x ranking policies
    for row in ranking.itertuples():
        dep, exact = [], []
        for r in records:
            if r.policy != row.policy or r.cost != row.cost:
                continue
            for fr in r.frontiers.itertuples():
                if fr.budget == row.budget and fr.frontier == "deployable":
                    dep.append(fr)
                if fr.budget == row.budget and fr.frontier == "exact":
                    exact.append(fr)
        assert len(dep) == row.n_runs == 6  # 2 seeds x 3 splits
        u = [x.utility for x in dep]
        assert row.utility == pytest.approx(sum(u) / len(u))
        assert row.utility_sd == pytest.approx(math.sqrt(sum((x - sum(u) / len(u)) ** 2 for x in u) / len(u)))
        assert row.outcome == pytest.approx(np.mean([x.outcome for x in dep]))
        assert row.outcome_sd == pytest.approx(np.std([x.outcome for x in dep]))
        assert row.usage == pytest.approx(np.mean([x.realized_usage for x in dep]))
        assert row.usage_sd == pytest.approx(np.std([x.realized_usage for x in dep]))
        assert row.violation_rate == pytest.approx(np.mean([x.realized_usage > row.budget + 1e-12 for x in dep]))
        assert row.random_utility == pytest.approx(np.mean([x.random_matched - row.cost * x.realized_usage for x in dep]))
        assert row.oracle_utility == pytest.approx(np.mean([x.oracle_matched - row.cost * x.realized_usage for x in dep]))
        assert row.cal_utility == pytest.approx(np.mean([x.cal_utility for x in dep]))
        assert row.exact_utility == pytest.approx(np.mean([x.utility for x in exact]))
        assert row.exact_utility_sd == pytest.approx(np.std([x.utility for x in exact]))
    # one seed: the same numbers as the job's own metrics
    one = decision_table([r for r in records if r.seed == 0], n_boot=50)
    for row in one[one.kind != "fixed"].itertuples():
        m = results[(row.policy, 0, row.cost)].metrics
        assert row.utility == pytest.approx(m[f"budget/{row.budget:.2f}/deployable/utility"])
        assert row.utility_sd == pytest.approx(m[f"budget/{row.budget:.2f}/deployable/utility_std"])
        assert row.usage == pytest.approx(m[f"budget/{row.budget:.2f}/deployable/realized_usage"])
        assert row.exact_utility == pytest.approx(m[f"budget/{row.budget:.2f}/exact/utility"])


def test_fixed_decisions_and_the_oracle_are_shown_never_tested(protocol_records):
    _, records, results = protocol_records
    table = decision_table(records, n_boot=100)
    fixed = table[table.kind == "fixed"]
    assert sorted(fixed.policy.unique()) == ["always_extra", "always_keep"] and len(fixed) == 4  # x 2 costs
    assert fixed.budget.isna().all() and (fixed.mark == "").all() and fixed.p.isna().all()
    for row in fixed.itertuples():
        assert row.usage == (1.0 if row.policy == "always_extra" else 0.0)
        m0, m1 = (results[(row.policy, s, row.cost)].metrics for s in (0, 1))
        assert row.utility == pytest.approx((m0["budget/fixed/utility"] + m1["budget/fixed/utility"]) / 2)
    oracle = table[table.policy == "oracle"]
    assert (oracle.kind == "oracle").all() and (oracle.mark == "").all() and oracle.p_holm.isna().all()
    assert (table.reference != "oracle").all()
    # the oracle's calibration utility is the best, yet it is never the reference
    for (cost, budget), part in table[table.kind != "fixed"].groupby(["cost", "budget"]):
        assert part.loc[part.policy == "oracle", "cal_utility"].iloc[0] >= part.cal_utility.max() - 1e-12
        ref = part[part.mark == "ref"]
        assert len(ref) == 1 and ref.policy.iloc[0] == ref.reference.iloc[0] != "oracle"
    text = format_console(table)
    assert "fixed (usage 0" in text and "fixed (usage 1" in text and "oracle (upper bound)" in text


def _paired_diffs(records, policy, ref, cost, budget, outcome=False):
    """d = u(policy) - u(ref) per (seed, split, qid), with the document of each, by a loop; with
    ``outcome`` the expected outcome base + prob * (extra - base) instead of the utility."""
    units = {}
    for r in records:
        if r.cost != cost or r.policy not in (policy, ref):
            continue
        for row in r.decisions.itertuples():
            if row.frontier == "deployable" and abs(row.budget - budget) < 1e-9:
                value = row.base + row.prob * (row.extra - row.base) if outcome else row.utility
                units.setdefault((r.seed, row.split, row.qid), {})[r.policy] = (value, row.doc_id)
    keys = sorted(units)
    d = np.array([units[k][policy][0] - units[k][ref][0] for k in keys])
    docs = np.array([units[k][ref][1] for k in keys])
    return d, docs


def test_interval_inverts_the_test_and_the_budget_lines_plan(protocol_records):
    from harness import paired
    from harness.protocols.decision_table_render import conclusions

    _, records, _ = protocol_records
    table = decision_table(records, seed=0)
    row = table[(table.cost == 0.05) & (table.budget == 0.25) & (table.policy == "random")].iloc[0]
    d, docs = _paired_diffs(records, "random", row.reference, 0.05, 0.25)
    assert len(d) == 2 * 3 * 80  # seeds x splits x test-half questions
    assert row.diff_vs_ref == pytest.approx(d.mean())  # policy - reference
    # the interval inverts the test at the level the row's mark was decided at (its Holm step over
    # the whole table): it excludes 0 exactly when the table-wide Holm p < alpha
    assert 0 < row.level <= 0.05
    lo, hi = paired.sign_flip_interval(d, docs, alpha=row.level, seed=0)
    assert row.ci_low == pytest.approx(lo) and row.ci_high == pytest.approx(hi)
    assert (row.ci_low <= 0 <= row.ci_high) == (row.p_holm_table >= 0.05)
    assert row.mdd == pytest.approx(stats.min_detectable_difference(d, docs))
    assert row.max_diff == pytest.approx(paired.max_showable_difference(d, docs))
    # the plan rests on the expected outcomes (rescues and harms, not the cost) and converts
    # documents to questions by the distinct questions per document (160 on 40)
    outcome, _ = _paired_diffs(records, "random", row.reference, 0.05, 0.25, outcome=True)
    plan = paired.sample_size_plan(outcome, docs, alpha=row.level, n_questions=160)
    assert row.plan_docs == plan["docs"] and row.plan_questions == math.ceil(plan["docs"] * 160 / 40)
    # one line per budget of the cell, in the console text and at the sweep's end
    part = table[table.cost == 0.05]
    lines = [x for x in conclusions(table).splitlines() if x.startswith("Decision table at cost.c=0.05, rho=")]
    budgets = sorted(set(part[part["mark"].isin(["<", ">", "="])]["budget"]))
    assert [x.split(":")[0].split("rho=")[1] for x in lines] == [f"{b:g}" for b in budgets]
    for x, budget in zip(lines, budgets):
        at = part[(part["budget"] == budget) & part["mark"].isin(["<", ">", "="])]
        told = int(at["mark"].isin(["<", ">"]).sum())
        assert x.startswith(f"Decision table at cost.c=0.05, rho={budget:g}: {told} of {len(at)} policies told from "
                            f"the reference {row.reference}")
        assert x.split(", ", 1)[1] in format_console(table)  # the console block carries the same line


# --------------------------------------------------------------------------------------------
# Planted cases: hand-made records
# --------------------------------------------------------------------------------------------

N_DOCS = 24


def _planted_base():
    rng = np.random.default_rng(5)
    docs = np.repeat([f"d{i:02d}" for i in range(N_DOCS)], 2)
    qids = np.array([f"q{i:03d}" for i in range(len(docs))])
    base = rng.integers(0, 2, len(docs)).astype(float)
    extra = base.copy()
    return qids, docs, base, extra


def _hand_record(policy, utility, cal_utility, *, budget=0.25, cost=0.0, oracle=False):
    """A one-seed, one-split job whose per-question deployable utilities are ``utility``."""
    qids, docs, _, _ = _planted_base()
    u = np.asarray(utility, dtype=float)
    decisions = pd.DataFrame({
        "qid": qids, "doc_id": docs, "split": 0, "budget": budget, "frontier": "deployable",
        "prob": 0.25, "base": u, "extra": u, "utility": u, "oracle": oracle,
    })
    common = {"split": 0, "budget": budget, "fixed": False, "realized_usage": 0.25, "violated": False,
              "outcome": u.mean(), "utility": u.mean(), "random_matched": 0.5, "oracle_matched": 0.9}
    frontiers = pd.DataFrame([
        {**common, "frontier": "exact", "cal_utility": math.nan},
        {**common, "frontier": "deployable", "cal_utility": cal_utility},
    ])
    return JobRecord(policy, 0, cost, frontiers, decisions)


def _brute_sign_flip(d, docs):
    totals = np.array([d[docs == u].sum() for u in sorted(set(docs.tolist()))])
    totals = totals[np.abs(totals) > 1e-12]
    obs = abs(totals.sum())
    assert len(totals) <= 16
    hits = sum(abs(np.dot(s, totals)) >= obs - 1e-9 for s in itertools.product((-1, 1), repeat=len(totals)))
    return hits / 2 ** len(totals)


def _planted_records():
    """steady: the calibration best; lucky: the test best (better than steady on 7 documents);
    worse: worse than steady on 9 documents; close: differs on 3 documents; oracle: best of all."""
    qids, docs, base, _ = _planted_base()
    steady = base.copy()
    lucky, worse, close, oracle = steady.copy(), steady.copy(), steady.copy(), np.ones_like(steady)
    for i in range(7):
        lucky[2 * i] = steady[2 * i] + 1.0
    for i in range(9):
        worse[2 * i + 1] = steady[2 * i + 1] - 1.0
    close[[0, 5, 9]] += [0.5, -0.5, 0.5]
    return [
        _hand_record("steady", steady, 0.70),
        _hand_record("lucky", lucky, 0.60),
        _hand_record("worse", worse, 0.65),
        _hand_record("close", close, 0.55),
        _hand_record("oracle", oracle, 0.95, oracle=True),
    ]


def test_reference_is_the_calibration_best_not_the_test_best():
    records = _planted_records()
    table = decision_table(records, n_boot=200).set_index("policy")
    test_best = table.loc[table.kind == "deployable", "utility"].idxmax()
    assert test_best == "lucky"
    assert (table.reference == "steady").all() and (table.reference_from == "calibration").all()
    assert table.loc["steady", "mark"] == "ref"
    assert table.loc["lucky", "diff_vs_ref"] > 0  # the test says lucky did better ...
    assert table.loc["oracle", "mark"] == "" and math.isnan(table.loc["oracle", "p_holm"])


def test_budget_line_says_nothing_is_detectable_and_plans():
    """close differs from steady on 3 documents (+0.5, -0.5, +0.5): the smallest reachable p is
    0.25, so the budget's line says no difference is detectable and how many questions would
    be needed (the plan of its differences; 48 questions on 24 documents: 2 per document)."""
    from harness import paired
    from harness.protocols.decision_table_render import conclusions

    records = _planted_records()
    table = decision_table(records)
    qids, docs, base, _ = _planted_base()
    rec = {r.policy: r for r in records}
    d = rec["close"].decisions["utility"].to_numpy() - rec["steady"].decisions["utility"].to_numpy()
    level = float(table.set_index("policy").loc["close", "level"])  # its Holm step over the table
    assert 0 < level <= 0.05
    plan = paired.sample_size_plan(d, docs, alpha=level)
    assert plan["questions"] == 2 * plan["docs"] and plan["questions"] > 48
    line = conclusions(table)
    assert line == (
        "Decision table at cost.c=0, rho=0.25: 2 of 3 policies told from the reference steady; no difference is "
        "detectable with these questions for the 1 that cannot be told apart; 0 of them equivalent within +-0.01 "
        "(two one-sided tests), the others inconclusive; the closest (close) needs about "
        f"{int(plan['questions'])} questions ({int(plan['docs'])} documents) for 80% power at alpha {level:.2g} "
        "(close vs steady)."
    )
    close = table.set_index("policy").loc["close"]
    assert close.max_diff == pytest.approx(1.5 / 48) and not close.detectable
    # TOST: the 90% inverted interval is not inside +-0.01 (three documents of 24 reject nothing near it)
    lo90, hi90 = paired.sign_flip_interval(d, docs, alpha=0.1)
    assert not close.equivalent and not (-0.01 < lo90 and hi90 < 0.01)
    # P(better): 2 of the 3 discordant documents point close's way; Beta(1 + 2, 1 + 1) > 1/2
    assert close.p_better == pytest.approx(1 - (0.5**3 * (1 + 3 * 0.5)))  # 1 - I_0.5(3, 2), by hand
    assert close.ci_low <= 0 <= close.ci_high


def test_p_is_an_exact_sign_flip_and_holm_is_by_hand():
    records = _planted_records()
    alpha = 0.05
    table = decision_table(records, n_boot=200, alpha=alpha).set_index("policy")
    raw = {}
    for name in ("lucky", "worse", "close"):
        rec = {r.policy: r for r in records}
        d = rec[name].decisions.utility.to_numpy() - rec["steady"].decisions.utility.to_numpy()
        docs = rec[name].decisions.doc_id.to_numpy()
        raw[name] = _brute_sign_flip(d, docs)
        assert table.loc[name, "p"] == pytest.approx(raw[name])
    # Holm by hand: sort, multiply by (m - i), running maximum, cap at 1
    order = sorted(raw, key=raw.get)
    adjusted, running = {}, 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * raw[name]))
        adjusted[name] = running
    for name in raw:
        assert table.loc[name, "p_holm"] == pytest.approx(adjusted[name])
        want = ("<" if table.loc[name, "diff_vs_ref"] < 0 else ">") if adjusted[name] < alpha else "="
        assert table.loc[name, "mark"] == want
    # 9 documents one way: 2 * 0.5^9, Holm x 3; 7 one way: 2 * 0.5^7, Holm x 2; 3 documents
    # +0.5, -0.5, +0.5: every sign pattern is as extreme, p = 1
    assert raw["worse"] == pytest.approx(2 * 0.5**9) and adjusted["worse"] == pytest.approx(3 * 2 * 0.5**9)
    assert raw["lucky"] == pytest.approx(2 * 0.5**7) and adjusted["lucky"] == pytest.approx(2 * 2 * 0.5**7)
    assert raw["close"] == 1.0
    assert table.loc["worse", "mark"] == "<" and table.loc["lucky", "mark"] == ">" and table.loc["close", "mark"] == "="


def _holm_by_hand(raw: dict) -> dict:
    order = sorted(raw, key=raw.get)
    adjusted, running = {}, 0.0
    for i, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - i) * raw[name]))
        adjusted[name] = running
    return adjusted


def test_holm_runs_over_the_whole_table_and_costs_with_the_same_decisions_count_once():
    """Two budgets x three tested policies at two costs whose decisions are the same: six
    hypotheses (not twelve), Holm by hand over them; the mark follows the table-wide p. A third
    cost whose ``close`` decides differently (other run probabilities) adds one hypothesis."""
    planted = _planted_records()
    utilities = {r.policy: r.decisions["utility"].to_numpy() for r in planted}
    cals = {"steady": 0.70, "lucky": 0.60, "worse": 0.65, "close": 0.55}

    def records(cost, budgets, close_prob=0.25):
        out = []
        for name, u in utilities.items():
            parts = [_hand_record(name, u, cals.get(name, 0.95), budget=b, cost=cost, oracle=name == "oracle")
                     for b in budgets]
            rec = JobRecord(name, 0, cost, pd.concat([x.frontiers for x in parts], ignore_index=True),
                            pd.concat([x.decisions for x in parts], ignore_index=True), cell=f"cost.c={cost:g}")
            if name == "close":
                rec.decisions["prob"] = close_prob
            out.append(rec)
        return out

    recs = [r for cost in (0.0, 0.05) for r in records(cost, (0.25, 0.5))]
    table = decision_table(recs)
    tested = table[table["p"].notna() & (table["kind"] == "deployable")]
    assert len(tested) == 12
    raw = {}
    for r in tested.itertuples():  # the same decisions at both costs: one hypothesis each
        raw.setdefault((r.budget, r.policy), set()).add(r.p)
    assert all(len(v) == 1 for v in raw.values()) and len(raw) == 6
    adjusted = _holm_by_hand({k: max(v) for k, v in raw.items()})
    for r in tested.itertuples():
        want = adjusted[(r.budget, r.policy)]
        assert r.p_holm_table == pytest.approx(want)
        assert r.mark == (("<" if r.diff_vs_ref < 0 else ">") if want < 0.05 else "=")
    # worse: 2 * 0.5^9 x 6 hypotheses = 0.0234 < 0.05; lucky: 2 * 0.5^7 = 0.0156, 4th smallest of
    # six after the two worse: x 4 = 0.0625 > 0.05, so the whole table no longer calls lucky better
    assert adjusted[(0.25, "worse")] == pytest.approx(6 * 2 * 0.5**9)
    lucky = tested[tested["policy"] == "lucky"]
    assert (lucky["p_holm"] < 0.05).all() and (lucky["mark"] == "=").all()
    # another cost at which close runs with other probabilities: a hypothesis of its own
    more = decision_table(recs + records(0.1, (0.25,), close_prob=0.5))
    assert more["p_holm_table"].notna().sum() == 15
    assert more.loc[more["policy"] == "worse", "p_holm_table"].iloc[0] == pytest.approx(7 * 2 * 0.5**9)


def test_ties_for_the_reference_are_named():
    qids, docs, base, _ = _planted_base()
    other = base.copy()
    other[:4] = 1.0 - other[:4]
    records = [_hand_record("beta", base, 0.7), _hand_record("alpha", other, 0.7), _hand_record("gamma", base, 0.5)]
    table = decision_table(records, n_boot=100)
    assert (table.reference == "alpha").all()  # broken by name ...
    assert (table.reference_tied == "beta").all()  # ... and named on every row
    ref = table[table.mark == "ref"].iloc[0]
    assert "beta" in ref.note
    assert "tied with alpha" in table.set_index("policy").loc["beta", "note"]
    assert "tie for the reference at rho=0.25: alpha = beta" in format_console(table)


def test_missing_decisions_are_marked_untested():
    qids, docs, base, _ = _planted_base()
    a, b, c = _hand_record("a", base, 0.7), _hand_record("b", base, 0.6), _hand_record("c", base, 0.5)
    b.decisions = None
    table = decision_table([a, b, c], n_boot=50)
    by = table.set_index("policy")
    assert by.loc["a", "mark"] == "ref" and by.loc["b", "mark"] == "?" and by.loc["c", "mark"] == "="
    assert "budget_decisions.parquet" in by.loc["b", "note"] and math.isnan(by.loc["b", "p"])
    assert by.loc["c", "p_holm"] == 1.0  # a family of one: b is not in it
    assert "not tested: b: no per-question decisions" in format_console(table)
    a.decisions = None  # without the reference's decisions nothing is tested
    by = decision_table([a, b, c], n_boot=50).set_index("policy")
    assert list(by["mark"]) == ["ref", "?", "?"] and "for the reference a" in by.loc["c", "note"]


def test_select_filters_and_names_the_flag_and_values(protocol_records):
    _, records, _ = protocol_records
    table = decision_table(records, n_boot=50)
    one = select(table, budget=0.25, cost=0.05)
    assert set(one.cost) == {0.05}
    assert set(one.loc[one.kind != "fixed", "budget"]) == {0.25}
    assert sorted(one.policy) == sorted(["lstsq", "random", "constant", "oracle", "always_keep", "always_extra"])
    with pytest.raises(HarnessError, match=r"--budget 0.3 is not in this sweep; its budgets: 0.1, 0.25, 0.5"):
        select(table, budget=0.3)
    with pytest.raises(HarnessError, match=r"--cost 0.02 is not in this sweep; its costs: 0, 0.05"):
        select(table, cost=0.02)
    text = format_text(one)
    assert text.splitlines()[0].startswith("cost") and "calibration utility" in text


def test_violation_rates_print_their_resolution():
    """A rate over n splits x seeds moves in steps of 1 / n: the text says "k of n" beside it."""
    from harness.protocols.decision_table import COLUMNS
    from harness.protocols.decision_table_render import format_text

    rows = []
    for policy, rate, n in (("a", 0.4, 5), ("b", 0.0, 10), ("c", float("nan"), 5)):
        row = {c: float("nan") for c in COLUMNS}
        row.update(cell="x", cost=0.0, budget=0.25, policy=policy, kind="deployable", mark="=", violation_rate=rate,
                   n_runs=n, reference="a", reference_from="calibration", reference_tied="", note="")
        rows.append(row)
    text = format_text(pd.DataFrame(rows, columns=list(COLUMNS)))
    assert "0.4000 (2 of 5)" in text and "0.0000 (0 of 10)" in text and "(0 of 5)" not in text
