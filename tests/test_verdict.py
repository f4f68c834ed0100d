"""The verdict per cost and budget (``harness.protocols.verdict``) on hand-built cases: a router
that rescues 10 documents is deployed, one that harms them loses to always-keep, one that makes
always-keep's decisions or differs by a hair is "as good", three rescues cannot tell (with the
sample size of the exact sign test at the verdict's level, computed here from the binomial), a
tie with another verdict never decides, the family runs over the sweep's cells (each cell's
difference / equivalence slot and its oracle's room claim), always-extra is a rival only where
it fits the budget, where even the oracle gains nothing there is no room to route, and a router
that overspends beyond sampling error is "over budget". The console table fits 100 characters;
the MLflow params and metrics carry the same words and numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from harness.paired import equivalence_interval, sign_flip_interval
from harness.protocols import verdict as vd
from harness.protocols import verdict_render as vr
from harness.protocols.decision_table import decision_table
from tests.helpers.verdicts import DOCS, _arms, _record


def _verdicts(records, **kw):
    table = decision_table(records, **kw)
    return vd.verdicts(table, table.attrs["fixed_comparisons"])


def test_a_router_that_rescues_ten_documents_is_deployed():
    base, extra = _arms(rescues=10)
    prob = extra.copy()  # runs the extra arm exactly on the rescues
    v = _verdicts([_record("router", base, extra, prob, 0.7), _record("other", base, extra, prob * 0, 0.5)])
    [row] = v.itertuples()
    d = 10 / 48
    p = 2 / 2**10  # all 10 discordant documents point its way: 2 of 2^10 sign patterns
    assert row.kind == "deploy" and row.policy == "router" and row.arm == "always_keep"
    assert row.chosen == "best on calibration"
    # the family: this cell's difference / equivalence slot and its oracle's room claim (2 slots)
    assert row.diff == pytest.approx(d) and row.p == pytest.approx(p) and row.p_holm == pytest.approx(2 * p)
    assert row.level == pytest.approx(0.025)  # the interval inverts the test at the level it was decided at
    assert 0 < row.ci_low < d < row.ci_high
    assert (row.ci_low, row.ci_high) == pytest.approx(sign_flip_interval(prob - base, DOCS, alpha=0.025), abs=1e-9)
    assert row.verdict == (f"deploy router: router beats always_keep by {d:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}] "
                           f"at level 0.025, usage {10 / 48:.2f}, violations 0 of 1")
    assert row.flag == ""


def test_a_router_that_harms_loses_to_always_keep():
    base, extra = _arms(harms=10)
    prob = base.copy()  # runs the extra arm exactly where it harms
    [row] = _verdicts([_record("router", base, extra, prob, 0.7)]).itertuples()
    assert row.kind == "no router" and row.arm == "always_keep"
    assert row.diff == pytest.approx(-10 / 48) and row.p == pytest.approx(2 / 2**10)
    assert row.verdict.startswith(f"deploy no router: always_keep is better than router by {10 / 48:.3f} [")
    # the oracle never runs the extra arm (it only harms): its room claim holds exactly, first in
    # the family, so the difference is decided at the full level
    assert row.p_holm == pytest.approx(row.p) and row.level == pytest.approx(0.05)


def test_same_decisions_and_equivalence_are_as_good():
    base, extra = _arms(rescues=10)
    [row] = _verdicts([_record("router", base, extra, np.zeros(len(DOCS)), 0.7)]).itertuples()
    assert row.verdict == "deploy no router: always_keep is as good as router (the same decisions)"
    # a hair either way on every document: 12 rescues and 12 harms, each run with probability 0.002
    base, extra = _arms(rescues=12, harms=12)
    prob = np.where(base != extra, 0.002, 0.0)
    [row] = _verdicts([_record("router", base, extra, prob, 0.7)]).itertuples()
    assert row.diff == pytest.approx(0.0, abs=1e-15)
    assert row.margin == pytest.approx(0.01)  # min(0.01, half the oracle's headroom 12/48)
    lo, hi = equivalence_interval(prob * (extra - base), DOCS, alpha=row.level)
    assert -0.01 < lo < 0 < hi < 0.01
    assert row.verdict == (f"deploy no router: always_keep is as good as router (equivalent within +-0.01 "
                           f"[{lo:.2g}, {hi:.2g}] at level {row.level:.2g})")


def _sign_test_power(m: int, q: float, pi: float, level: float) -> float:
    """Brute force: M new documents, D ~ Bin(M, q) discordant, X ~ Bin(D, pi) the router's way;
    the exact two-sided sign test rejects when 2 P(Bin(D, 1/2) <= min(X, D - X)) < level."""
    power = 0.0
    for d in range(m + 1):
        x = np.arange(d + 1)
        reject = 2 * sps.binom.cdf(np.minimum(x, d - x), d, 0.5) < level
        power += sps.binom.pmf(d, m, q) * float(sps.binom.pmf(x, d, pi)[reject].sum())
    return power


def test_three_rescues_cannot_tell_and_say_how_many_questions():
    """3 discordant documents reach p = 0.25 at best. The plan is at the verdict's level (0.025:
    the family holds the cell's difference slot and its oracle's room claim), with the rescue
    share shrunk by the Beta(2, 2) prior to (3 + 2) / (3 + 4) = 5/7, not the observed 3 of 3; a
    new document is discordant with q = 3/24; the smallest M with 80% power, two questions per
    document, found here by brute force over the binomials."""
    base, extra = _arms(rescues=3)
    [row] = _verdicts([_record("router", base, extra, extra.copy(), 0.7)]).itertuples()
    assert row.kind == "cannot tell" and row.p == pytest.approx(0.25) and row.level == pytest.approx(0.025)
    m = next(m for m in range(300, 1000) if _sign_test_power(m, 3 / 24, 5 / 7, 0.025) >= 0.8)
    assert _sign_test_power(m - 1, 3 / 24, 5 / 7, 0.025) < 0.8
    assert row.plan_questions == 2 * m
    assert row.verdict == (f"cannot tell (router vs always_keep): about {2 * m} questions needed for 80% power at "
                           "level 0.025 (here 48)")


def test_a_tie_with_another_verdict_never_decides():
    base, extra = _arms(rescues=10)
    records = [_record("alpha", base, extra, extra.copy(), 0.7), _record("beta", base, extra, np.zeros(len(DOCS)), 0.7)]
    [row] = _verdicts(records).itertuples()
    assert row.policy == "alpha" and row.note == "the calibration choice tied: 2 equally valid routers tested"
    assert row.verdict == "cannot tell (alpha): the 2 equally valid routers of a calibration tie reach different verdicts"
    # tied routers that make the same decisions are one router: deploy, nothing to break
    records[1] = _record("beta", base, extra, extra.copy(), 0.7)
    [row] = _verdicts(records).itertuples()
    assert row.kind == "deploy" and row.note == ""


def test_holm_runs_over_the_sweeps_cells():
    """Two costs: 10 rescues (p = 2^-9) and 5 rescues (p = 2^-4 = 0.0625). The family: each
    cell's difference / equivalence slot and each oracle's room claim, 4 slots: 4 x 2^-9 < 0.05
    deploys, 0.0625 cannot tell."""
    strong, weak = _arms(rescues=10), _arms(rescues=5)
    records = [_record("router", *strong, strong[1].copy(), 0.7, cost=0.0),
               _record("router", *weak, weak[1].copy(), 0.7, cost=0.01)]
    v = _verdicts(records).set_index("cost")
    assert v.loc[0.0, "p_holm"] == pytest.approx(4 * 2 / 2**10) and v.loc[0.0, "kind"] == "deploy"
    assert v.loc[0.01, "p"] == pytest.approx(2 / 2**5) and v.loc[0.01, "kind"] == "cannot tell"
    assert v.attrs["family"] == 6  # 2 cells x (difference, equivalence, room)
    # a router that never runs the extra arm has the same differences at every cost: its
    # difference is one hypothesis; its equivalence margins and its oracles differ by cost
    idle = [_record("router", *weak, np.zeros(len(DOCS)), 0.7, cost=c) for c in (0.0, 0.01, 0.05)]
    # (the margin is 0.01 at each cost: below half the oracle's headroom, so one equivalence claim)
    assert _verdicts(idle).attrs["family"] == 1 + 1 + 3


def test_always_extra_is_a_rival_only_where_it_fits_and_violations_flag():
    base, extra = _arms(rescues=10)
    prob = extra.copy()
    # at budget 1, with cost 0, always-extra makes the same outcomes as the router: as good
    [row] = _verdicts([_record("router", base, extra, prob, 0.7, budget=1.0)]).itertuples()
    # ... and so does the oracle: no room to route (not "as good": nothing could have been better)
    assert row.verdict == ("deploy no router: no room to route: the oracle itself makes always_extra's decisions "
                           "(so router cannot gain what matters)")
    # at a cost, always-extra pays on every question: the router beats both, named by the closer
    [row] = _verdicts([_record("router", base, extra, prob, 0.7, budget=1.0, cost=0.05)]).itertuples()
    assert row.kind == "deploy" and row.arm == "always_keep" and row.p == pytest.approx(2 / 2**10)
    # the same router at budget 0.25: always-extra (usage 1) does not fit; usage 10/48 is under it
    [row] = _verdicts([_record("router", base, extra, prob, 0.7)]).itertuples()
    assert row.kind == "deploy" and row.flag == "" and row.overspent == 0
    # at budget 0.1 usage 10/48 = 0.208 is over 0.1 by more than 1.645 x sqrt(0.1 x 0.9 x (1/48 + 1/48))
    # = 0.101: it overspends beyond sampling error in its one split, so it is "over budget", not deployed
    [row] = _verdicts([_record("router", base, extra, prob, 0.7, budget=0.1, violated=True)]).itertuples()
    assert row.kind == "over budget" and row.overspent == 1 and row.violation_rate == 1.0
    assert row.flag == "overspends the budget beyond sampling error in 1 of 1 splits"
    assert row.verdict.startswith("over budget: router beats always_keep by 0.208")


def test_console_table_mlflow_params_and_metrics():
    strong, weak = _arms(rescues=10), _arms(rescues=3)
    long_name = "signal_rerank_top1_dense_rank"
    records = [_record(long_name, *strong, strong[1].copy(), 0.7, cost=0.0, violated=True, budget=0.1),
               _record(long_name, *weak, weak[1].copy(), 0.7, cost=0.02)]
    v = _verdicts(records)
    text = vr.format_console(v)
    assert max(len(line) for line in text.splitlines()) <= vr.WIDTH
    assert f"over budget: {long_name}" in text and "cannot tell: about" in text
    assert f"{v['plan_questions'].iat[1]:,.0f} questions needed" in text
    flag = "overspends the budget beyond sampling error in 1 of 1 splits"
    assert "1 of 1 !" in text and f"! {long_name} at c=0, rho=0.1: {flag}" in " ".join(text.split())
    params, metrics = vd.mlflow_params(v), vd.mlflow_metrics(v)
    assert params["verdict/c0/b0.1"] == v["verdict"].iat[0] and params["verdict/c0.02/b0.25/policy"] == long_name
    assert metrics["verdict/c0/b0.1/deploy"] == -2.0 and metrics["verdict/c0.02/b0.25/deploy"] == -1.0
    assert metrics["verdict/c0/b0.1/diff"] == pytest.approx(10 / 48)
    assert metrics["verdict/c0.02/b0.25/questions_needed"] == v["plan_questions"].iat[1]
    assert "verdict/c0/b0.1/questions_needed" not in metrics
    from harness.tracking.naming import mlflow_name

    assert all(mlflow_name(k) == k for k in [*params, *metrics])  # names MLflow takes as they are
    assert vr.sentences(v).splitlines()[0] == f"c=0, rho=0.1: {v['verdict'].iat[0]} ({flag})"


def test_each_job_run_gets_its_verdict_as_a_sortable_tag():
    """``verdict.job_tags``: the job whose policy is a cell's router at its cost gets the kinds
    of its cells in KINDS order with their budgets; another policy at that cost names the
    router; a cost without verdicts, an unfinished job or one without cost.c gets none."""
    from harness.protocols.sweep_stage import SweepJob

    v = pd.DataFrame({"cost": [0.0, 0.0, 0.0, 0.02], "budget": [0.1, 0.25, 0.5, 0.25],
                      "policy": ["router"] * 4, "kind": ["over budget", "deploy", "deploy", "cannot tell"]})

    def job(run_id, policy, cost, status="FINISHED"):
        params = {"policy.name": policy} if cost is None else {"policy.name": policy, "cost.c": str(cost)}
        return SweepJob(run_id, run_id, status, params, {}, {})

    tags = vd.job_tags(v, [job("a", "router", 0), job("b", "router", 0.02), job("c", "other", 0.02),
                           job("d", "router", 0.05), job("e", "router", 0, "FAILED"), job("f", "router", None)])
    assert tags == {"a": {"verdict": "deploy (b0.25 b0.5); over budget (b0.1)"},
                    "b": {"verdict": "cannot tell (b0.25)"},
                    "c": {"verdict": "not compared (the router at c=0.02: router)"}}


def test_sweep_end_prints_the_verdict_table_and_verbose_the_full_tables(capsys):
    """The console's end (``sweep_end.print_outcome``) on a result made from hand-built records:
    the verdict table, not the decision table; ``verbose=true`` prints the decision table too."""
    from harness.protocols.builtin import decision_table_result
    from harness.runner.sweep_end import SweepOutcome, print_outcome

    base, extra = _arms(rescues=10)
    result = decision_table_result(decision_table([_record("router", base, extra, extra.copy(), 0.7)]))
    outcome = SweepOutcome(frame=pd.DataFrame(), runless=[], failed=0, status="FINISHED", results={"budget": result})
    print_outcome(outcome, "s1", "sqlite:///mlruns/mlflow.db", experiment_id="3", parent_run_id="abc")
    out = capsys.readouterr().out
    assert "deploy router" in out and "Decision table at" not in out
    assert out.rstrip().splitlines()[-2:] == ["Parent run: http://127.0.0.1:5000/#/experiments/3/runs/abc",
                                              "Serve it:   mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db"]
    print_outcome(outcome, "s1", "sqlite:///mlruns/mlflow.db", verbose=True, experiment_id="3", parent_run_id="abc")
    out = capsys.readouterr().out
    assert "Decision table at" in out and "deploy router" in out
