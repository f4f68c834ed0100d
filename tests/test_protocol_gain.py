"""Protocol C: selective-use metrics by hand, the threshold rule per policy (0 for gain
estimates, the fixed route, the dev-half protocol-A tau otherwise, a given number), bootstrap
intervals against a brute-force replay of the draws, undefined gap closed, non-neutral
accuracy, power statements, correlations vs scipy, Williams comparison, planted signal
ordering, continuous gain, determinism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from harness.protocols import compare_policies_williams, run_gain_protocol
from harness.protocols import gain as gain_mod
from harness.protocols.common import fmt
from harness.protocols.gain import RULE_CODES, selective_bootstrap, selective_metrics
from harness.protocols.threshold_select import oof_scores
from harness.stats import bootstrap_draws, stratified_grouped_halves, williams_test
from harness.synthetic import synthetic_outcome_table
from harness.task import RoutingTask
from policies.base import Policy, ScoreContext
from policies.builtin import AlwaysBase, AlwaysExtra
from policies.builtin import OraclePolicy as BuiltinOracle
from policies.builtin import RandomPolicy as BuiltinRandom
from policies.learned import RidgePolicy
from tests.helpers.policies import ConstantPolicy, LstsqPolicy, OraclePolicy, RandomPolicy


class GainOracle(OraclePolicy):
    estimates_gain = True


class GainLstsq(LstsqPolicy):
    estimates_gain = True


class NegTop1(Policy):
    """A single-signal router: low top-1 cosine = run the extra arm (scores around -0.6)."""

    name = "neg_top1"
    features = ("dense_top1",)

    def score(self, X, ctx: ScoreContext):
        return -X["dense_top1"].to_numpy(float)


def _task(n_docs=60, seed=0, arms=("keep", "hybrid")):
    table = synthetic_outcome_table(n_docs=n_docs, questions_per_doc=5, seed=seed, arms=arms)
    return RoutingTask.from_table(table)


def _harmful_extra_task(n_docs=80, seed=2):
    """The planted table with the arms swapped: the extra arm loses on average, so always-extra
    is not optimal (and keeping everywhere beats it)."""
    t = _task(n_docs=n_docs, seed=seed, arms=("hybrid", "keep"))
    assert t.extra.mean() < t.base.mean()
    return t


def _fit_half(task, seed):
    fit_idx, _ = stratified_grouped_halves(task.groups, task.delta_class, seed)
    return task.take(fit_idx)


def _brute_force_tau(scores, base, delta):
    """Max mean quality of "extra when score >= c" over c in {distinct scores} U {+inf}; ties
    to fewer extra calls."""
    best = None
    for c in list(np.unique(scores)) + [math.inf]:
        ran = scores >= c
        u, k = float(np.mean(base + ran * delta)), int(ran.sum())
        if best is None or u > best[0] + 1e-12 or (abs(u - best[0]) <= 1e-12 and k < best[1]):
            best = (u, k, c)
    return float(best[2])


# ---- selective metrics by hand ------------------------------------------------------------------


def test_selective_metrics_hand_case():
    scores = np.array([0.5, -0.2, 0.1, -1.0, 0.0])
    base = np.array([0, 1, 1, 0, 1.0])
    extra = np.array([1, 0, 1, 1, 0.0])
    # ran: T F T F F -> chosen 1,1,1,0,1 = 0.8; correct: T(1>=0) T(1>=0) T(tie) F(0<1) T(1>=0) = 0.8
    # Q(extra)=0.6, Q(oracle)=mean(1,1,1,1,1)=1.0 -> gap closed (0.8-0.6)/(1.0-0.6) = 0.5
    # non-neutral: all but q2 (1,1): correct T T F T -> 3/4
    m = selective_metrics(scores, base, extra, threshold=0.0)
    assert m["quality"] == pytest.approx(0.8)
    assert m["decision_accuracy"] == pytest.approx(0.8)
    assert m["decision_accuracy_nonneutral"] == pytest.approx(0.75)
    assert m["n_nonneutral"] == 4
    assert m["gap_closed"] == pytest.approx(0.5)
    assert m["extra_share"] == pytest.approx(0.4)
    assert math.isnan(selective_metrics(scores, base, np.maximum(base, extra))["gap_closed"])
    # >= runs q4 (score 0.0) too: chosen 1,1,1,0,0 = 0.6, q4 now wrong -> non-neutral 2/4
    inc = selective_metrics(scores, base, extra, threshold=0.0, inclusive=True)
    assert inc["quality"] == pytest.approx(0.6)
    assert inc["extra_share"] == pytest.approx(0.6)
    assert inc["decision_accuracy_nonneutral"] == pytest.approx(0.5)
    # all neutral: non-neutral accuracy undefined, plain accuracy 1
    same = selective_metrics(scores, base, base)
    assert same["n_nonneutral"] == 0 and math.isnan(same["decision_accuracy_nonneutral"])
    assert same["decision_accuracy"] == 1.0


def test_nonneutral_accuracy_by_hand():
    res = run_gain_protocol(_task(), LstsqPolicy, seed=1, n_boot=50)
    d = res.tables["decisions"]
    m = res.metrics
    nn = d[d.base != d.extra]
    correct = [(e >= b) if r else (b >= e) for r, b, e in zip(nn.ran_extra, nn.base, nn.extra)]
    assert m["gain/selective/n_nonneutral"] == len(nn) > 0
    assert m["gain/selective/decision_accuracy_nonneutral"] == pytest.approx(np.mean(correct))
    # every neutral question counts as correct in the plain accuracy
    n_neutral = int((d.base == d.extra).sum())
    assert m["gain/selective/decision_accuracy"] == pytest.approx((sum(correct) + n_neutral) / len(d))
    assert m["gain/selective/decision_accuracy_nonneutral"] < m["gain/selective/decision_accuracy"]


# ---- the threshold rule -------------------------------------------------------------------------


@pytest.mark.parametrize("factory", [GainOracle, GainLstsq, BuiltinOracle, lambda: RidgePolicy(features="baseline")])
def test_estimates_gain_policies_use_zero(factory, monkeypatch):
    def no_oof(*a, **k):
        raise AssertionError("a gain-estimating policy needs no development threshold")

    monkeypatch.setattr(gain_mod, "oof_scores", no_oof)
    res = run_gain_protocol(_task(), factory, seed=0, n_boot=50)
    m, d = res.metrics, res.tables["decisions"]
    assert res.rule == "zero" and m["gain/selective/rule"] == RULE_CODES["zero"]
    assert m["gain/selective/threshold"] == 0.0 and m["gain/selective/run_at_threshold"] == 0
    np.testing.assert_array_equal(d.ran_extra, d.score > 0)
    assert "score > 0.0000" in res.summary()


def test_dev_tau_matches_manual_oof_select_tau():
    task = _task(n_docs=60, seed=4)
    for factory in (RandomPolicy, NegTop1, LstsqPolicy, ConstantPolicy):
        res = run_gain_protocol(task, factory, seed=3, n_folds=4, n_boot=50)
        fit = _fit_half(task, 3)
        oof = oof_scores(fit, factory, n_folds=4, seed=3)
        tau = _brute_force_tau(oof, fit.base, fit.delta)
        m, d = res.metrics, res.tables["decisions"]
        assert res.rule == "dev_tau" and m["gain/selective/rule"] == RULE_CODES["dev_tau"]
        assert m["gain/selective/threshold"] == tau, factory
        assert m["gain/selective/run_at_threshold"] == 1
        np.testing.assert_array_equal(d.ran_extra, d.score >= tau)
        chosen = np.where(d.score >= tau, d.extra, d.base)
        assert m["gain/selective/quality"] == pytest.approx(chosen.mean())
        assert f"score >= {fmt(tau)}" in res.summary()


def test_single_signal_scale_no_longer_means_always_keep():
    # NegTop1 scores are all negative: "score > 0" never ran the extra arm (= always-keep)
    task = _task(n_docs=100, seed=1)
    old = run_gain_protocol(task, NegTop1, seed=0, threshold=0.0, n_boot=50).metrics
    new = run_gain_protocol(task, NegTop1, seed=0, n_boot=50).metrics
    assert old["gain/selective/extra_share"] == 0.0
    assert 0.0 < new["gain/selective/extra_share"] < 1.0


@pytest.mark.parametrize("factory", [RandomPolicy, BuiltinRandom])
def test_random_is_not_always_extra_on_planted_case(factory):
    task = _harmful_extra_task()
    res = run_gain_protocol(task, factory, seed=0, n_boot=50)
    m = res.metrics
    assert res.rule == "dev_tau"
    assert m["gain/selective/extra_share"] < 1.0
    assert m["gain/selective/quality"] != m["gain/selective/extra_quality"]
    # the old fixed threshold 0 (now only when given explicitly) put random's [0, 1) scores
    # all above it: its numbers were exactly always-extra's
    old = run_gain_protocol(task, factory, seed=0, threshold=0.0, n_boot=50).metrics
    assert old["gain/selective/extra_share"] == 1.0
    assert old["gain/selective/quality"] == old["gain/selective/extra_quality"]
    assert old["gain/selective/rule"] == RULE_CODES["given"]


def test_fixed_route_policies_keep_their_decision(monkeypatch):
    monkeypatch.setattr(gain_mod, "oof_scores", lambda *a, **k: pytest.fail("fixed policies are not tuned"))
    task = _harmful_extra_task()
    keep = run_gain_protocol(task, AlwaysBase, seed=0, n_boot=50)
    extra = run_gain_protocol(task, AlwaysExtra, seed=0, n_boot=50)
    for res, share, thr in ((keep, 0.0, math.inf), (extra, 1.0, -math.inf)):
        m = res.metrics
        assert res.rule == "fixed" and m["gain/selective/rule"] == RULE_CODES["fixed"]
        assert m["gain/selective/extra_share"] == share and m["gain/selective/threshold"] == thr
    assert keep.metrics["gain/selective/quality"] == keep.metrics["gain/selective/base_quality"]
    assert extra.metrics["gain/selective/quality"] == extra.metrics["gain/selective/extra_quality"]
    assert extra.metrics["gain/selective/vs_extra/discordant"] == 0
    assert "no discordant questions" in extra.summary()


def test_given_threshold_overrides_everything(monkeypatch):
    monkeypatch.setattr(gain_mod, "oof_scores", lambda *a, **k: pytest.fail("a given threshold is not tuned"))
    task = _task()
    for factory, thr in ((AlwaysBase, -2.0), (GainOracle, 0.5), (RandomPolicy, 0.25)):
        res = run_gain_protocol(task, factory, seed=0, threshold=thr, n_boot=50)
        d = res.tables["decisions"]
        assert res.rule == "given" and res.metrics["gain/selective/threshold"] == thr
        assert res.metrics["gain/selective/run_at_threshold"] == 0
        np.testing.assert_array_equal(d.ran_extra, d.score > thr)
    # strict: a score equal to the given threshold keeps the base arm
    res = run_gain_protocol(task, GainOracle, seed=0, threshold=1.0, n_boot=50)
    assert res.metrics["gain/selective/extra_share"] == 0.0
    with pytest.raises(Exception, match="gain_threshold"):
        run_gain_protocol(task, GainOracle, seed=0, threshold=math.nan)


# ---- intervals, undefined gap closed, power -----------------------------------------------------


def _replay(d: pd.DataFrame, n_boot: int, seed: int):
    """Brute force: replay stats.bootstrap_draws over the sorted test documents, recompute each
    statistic from the questions of the drawn documents, skip zero denominators."""
    docs = np.unique(d.doc_id.astype(str))
    members = {doc: np.flatnonzero(d.doc_id.astype(str).to_numpy() == doc) for doc in docs}
    ran, base, extra = d.ran_extra.to_numpy(), d.base.to_numpy(float), d.extra.to_numpy(float)
    out = {"decision_accuracy": [], "decision_accuracy_nonneutral": [], "gap_closed": []}
    for draw in bootstrap_draws(len(docs), n_boot, seed):
        idx = np.concatenate([members[docs[j]] for j in draw])
        r, b, e = ran[idx], base[idx], extra[idx]
        chosen = np.where(r, e, b)
        correct = np.array([(ee >= bb) if rr else (bb >= ee) for rr, bb, ee in zip(r, b, e)])
        out["decision_accuracy"].append(correct.mean())
        nn = b != e
        if nn.any():
            out["decision_accuracy_nonneutral"].append(correct[nn].mean())
        if (b > e).any():
            q_or = np.maximum(b, e).mean()
            out["gap_closed"].append((chosen.mean() - e.mean()) / (q_or - e.mean()))
    return {k: (np.percentile(v, [2.5, 97.5]) if v else (math.nan, math.nan), len(v)) for k, v in out.items()}


@pytest.mark.parametrize("factory", [LstsqPolicy, RandomPolicy])
def test_intervals_match_brute_force_replay(factory):
    n_boot, seed = 300, 2
    res = run_gain_protocol(_task(n_docs=40), factory, seed=seed, n_boot=n_boot, min_discordant=1)
    m, d = res.metrics, res.tables["decisions"]
    for name, ((lo, hi), used) in _replay(d, n_boot, seed).items():
        assert m[f"gain/selective/{name}_ci_low"] == pytest.approx(lo, abs=1e-12), name
        assert m[f"gain/selective/{name}_ci_high"] == pytest.approx(hi, abs=1e-12), name
        assert m[f"gain/selective/{name}_n_boot_used"] == used, name
        assert m[f"gain/selective/{name}_ci_low"] <= m[f"gain/selective/{name}"] <= m[f"gain/selective/{name}_ci_high"]
    assert "usable resamples" in res.summary()


def test_bootstrap_skips_resamples_with_zero_denominator():
    # 30 documents of 3 questions; extra loses only in doc 0 and is neutral everywhere but
    # docs 0-2: most resamples have no harm (gap undefined) and few non-neutral questions
    groups = np.repeat([f"d{i:02d}" for i in range(30)], 3)
    base = np.ones(90)
    extra = np.ones(90)
    base[0], extra[0] = 1, 0  # harm in d00
    base[3], extra[3] = 0, 1  # rescue in d01
    base[6], extra[6] = 0, 1  # rescue in d02
    ran = np.zeros(90, bool)
    ran[3] = True
    d = pd.DataFrame({"doc_id": groups, "ran_extra": ran, "base": base, "extra": extra})
    out = selective_bootstrap(ran, base, extra, groups, n_boot=400, seed=5)
    replay = _replay(d, 400, 5)
    for name, ((lo, hi), used) in replay.items():
        assert out[f"{name}_n_boot_used"] == used
        assert out[f"{name}_ci_low"] == pytest.approx(lo, abs=1e-12)
        assert out[f"{name}_ci_high"] == pytest.approx(hi, abs=1e-12)
    assert 0 < out["gap_closed_n_boot_used"] < 400  # P(d00 drawn) = 1 - (29/30)^30 ~ 0.64
    assert out["decision_accuracy_n_boot_used"] == 400
    # no resample usable -> nan interval, count 0
    none = selective_bootstrap(ran, base, base, groups, n_boot=50, seed=0)
    assert none["gap_closed_n_boot_used"] == 0 and math.isnan(none["gap_closed_ci_low"])


def test_gap_closed_undefined_below_min_discordant():
    task = _task()
    ref = run_gain_protocol(task, LstsqPolicy, seed=0, n_boot=50, min_discordant=0)
    d = ref.tables["decisions"]
    harms = int((d.base > d.extra).sum())
    assert harms == ref.metrics["gain/discordant/harms"] > 0
    assert ref.metrics["gain/selective/gap_closed_defined"] == 1
    assert not math.isnan(ref.metrics["gain/selective/gap_closed"])

    same = run_gain_protocol(task, LstsqPolicy, seed=0, n_boot=50, min_discordant=harms).metrics
    assert same["gain/selective/gap_closed_defined"] == 1
    assert same["gain/selective/gap_closed"] == ref.metrics["gain/selective/gap_closed"]

    res = run_gain_protocol(task, LstsqPolicy, seed=0, n_boot=50, min_discordant=harms + 1)
    m = res.metrics
    assert m["gain/selective/gap_closed_defined"] == 0
    assert math.isnan(m["gain/selective/gap_closed"])
    assert math.isnan(m["gain/selective/gap_closed_ci_low"]) and math.isnan(m["gain/selective/gap_closed_ci_high"])
    assert m["gain/selective/gap_closed_n_boot_used"] == 0
    assert f"undefined: the gap rests on {harms} questions (< min_discordant" in res.summary()
    # the other numbers do not depend on min_discordant
    for key in ("quality", "decision_accuracy", "decision_accuracy_ci_low", "decision_accuracy_nonneutral"):
        assert m[f"gain/selective/{key}"] == ref.metrics[f"gain/selective/{key}"]


def test_gap_closed_undefined_on_continuous_outcome_with_few_losses():
    t = _task()
    rng = np.random.default_rng(0)
    base = 0.1 + rng.random(t.n) * 0.5
    extra = base + 0.1
    loss_idx = np.arange(0, t.n, 50)  # 6 questions where base > extra
    extra[loss_idx] = base[loss_idx] - 0.05
    cont = RoutingTask(t.qids, t.groups, base, extra, t.features, metric="f1", continuous=True)
    res = run_gain_protocol(cont, GainOracle, seed=0, n_boot=50, min_discordant=10)
    n_loss = int((res.tables["decisions"].base > res.tables["decisions"].extra).sum())
    assert n_loss < 10 and res.metrics["gain/selective/gap_closed_defined"] == 0
    assert f"undefined: the gap rests on {n_loss} questions" in res.summary()
    assert math.isnan(res.metrics["gain/selective/vs_extra/min_mcnemar_p"])  # McNemar is for hits


def test_power_statements_by_hand():
    res = run_gain_protocol(_task(), LstsqPolicy, seed=0, n_boot=50)
    m, d = res.metrics, res.tables["decisions"]
    delta = d.extra - d.base
    assert m["gain/discordant/rescues"] == int((delta > 0).sum())
    assert m["gain/discordant/harms"] == int((delta < 0).sum())
    assert m["gain/selective/rescues"] == int((d.ran_extra & (delta > 0)).sum())
    assert m["gain/selective/harms"] == int((d.ran_extra & (delta < 0)).sum())
    diff = np.where(d.ran_extra, d.extra, d.base) - d.extra
    n_disc = int((diff != 0).sum())
    assert m["gain/selective/vs_extra/discordant"] == n_disc
    # cluster-robust MDD by hand: (z_.975 + z_.8) * sqrt(sum_doc (T_doc - n_doc * mean)^2) / n
    grouped = pd.Series(diff).groupby(d.doc_id.to_numpy())
    centred = grouped.sum() - grouped.size() * diff.mean()
    mdd = (sps.norm.ppf(0.975) + sps.norm.ppf(0.8)) * math.sqrt(float((centred**2).sum())) / len(d)
    assert m["gain/selective/vs_extra/mdd"] == pytest.approx(mdd)
    assert m["gain/selective/vs_extra/min_mcnemar_p"] == pytest.approx(min(1.0, 2 * 0.5**n_disc))
    s = res.summary()
    assert f"{m['gain/discordant/rescues']} rescues, {m['gain/discordant/harms']} harms" in s
    # the largest difference the test half could show: every discordant document one way
    largest = float(grouped.sum().abs().sum()) / len(d)
    assert m["gain/selective/vs_extra/max_diff"] == pytest.approx(largest)
    k = int((grouped.sum().abs() > 1e-12).sum())
    detectable = min(1.0, 2.0 ** (1 - k)) < 0.05 and mdd < largest
    assert m["gain/selective/vs_extra/detectable"] == int(detectable)
    if detectable:  # the MDD is offered only below what the data could show
        assert "minimum detectable difference" in s
    else:
        assert "no difference is detectable with these questions" in s and "minimum detectable" not in s
    plan = m["gain/selective/vs_extra/plan_questions"]
    if plan == plan:  # the plan names its comparison and unit
        assert (f"(about {plan:.0f} test questions for 80% power at alpha 0.05, policy vs always-extra)") in s


# ---- correlations, Williams, planted ordering, continuous gain, determinism ---------------------


def test_correlations_and_decisions_match_scipy():
    res = run_gain_protocol(_task(), LstsqPolicy, seed=1, n_boot=50)
    d = res.tables["decisions"]
    assert res.metrics["gain/pearson"] == pytest.approx(sps.pearsonr(d.score, d.gain).statistic)
    assert res.metrics["gain/spearman"] == pytest.approx(sps.spearmanr(d.score, d.gain).statistic)
    assert res.metrics["gain/kendall"] == pytest.approx(sps.kendalltau(d.score, d.gain).statistic)
    assert res.metrics["gain/kendall_p"] == pytest.approx(sps.kendalltau(d.score, d.gain).pvalue)
    chosen = np.where(d.ran_extra, d.extra, d.base)
    assert res.metrics["gain/selective/quality"] == pytest.approx(chosen.mean())
    np.testing.assert_array_equal(d.chosen, chosen)
    assert res.metrics["n/fit"] + res.metrics["n/test"] == 300
    assert "gap closed" in res.summary()


def test_constant_policy_has_nan_correlation_not_an_error():
    task = _task()
    res = run_gain_protocol(task, ConstantPolicy, seed=0, n_boot=50)
    assert math.isnan(res.metrics["gain/pearson"]) and math.isnan(res.metrics["gain/kendall"])
    # a constant score is in effect a fixed decision: dev_tau picks all or nothing, by which
    # arm is better on the fit half
    fit = _fit_half(task, 0)
    expected = 1.0 if fit.delta.mean() > 0 else 0.0
    assert res.metrics["gain/selective/extra_share"] == expected
    # always-keep stays always-keep
    assert run_gain_protocol(task, AlwaysBase, seed=0, n_boot=50).metrics["gain/selective/extra_share"] == 0.0


def test_compare_policies_williams():
    rng = np.random.default_rng(0)
    gain = rng.normal(size=200)
    a = gain + rng.normal(size=200)
    b = gain + 3 * rng.normal(size=200)
    out = compare_policies_williams(a, b, gain)
    r_a, r_b, r_ab = np.corrcoef([a, b, gain])[[0, 1, 0], [2, 2, 1]]
    assert (out["r_a"], out["r_b"], out["r_ab"]) == pytest.approx((r_a, r_b, r_ab))
    assert (out["t"], out["p"]) == pytest.approx(williams_test(r_a, r_b, r_ab, 200))
    assert out["t"] > 0 and out["p"] < 0.01  # a is clearly the better predictor


def test_planted_signal_ordering():
    task = _task(n_docs=200, seed=1)
    r = {name: run_gain_protocol(task, f, seed=0, n_boot=100).metrics for name, f in
         (("oracle", GainOracle), ("trained", GainLstsq), ("random", RandomPolicy))}
    assert r["oracle"]["gain/pearson"] > r["trained"]["gain/pearson"] > r["random"]["gain/pearson"]
    assert r["oracle"]["gain/selective/gap_closed"] == pytest.approx(1.0)
    assert r["oracle"]["gain/selective/decision_accuracy"] == 1.0
    assert r["oracle"]["gain/selective/decision_accuracy_nonneutral"] == 1.0
    assert r["trained"]["gain/selective/quality"] > r["random"]["gain/selective/quality"]


def test_continuous_gain_is_log_ratio():
    t = _task()
    rng = np.random.default_rng(0)
    cont = RoutingTask(t.qids, t.groups, rng.random(t.n), rng.random(t.n), t.features, metric="f1", continuous=True)
    res = run_gain_protocol(cont, GainOracle, seed=0, n_boot=50)
    d = res.tables["decisions"]
    np.testing.assert_allclose(d.gain, np.log((d.extra + 0.01) / (d.base + 0.01)))
    # the oracle's delta has the sign of the log ratio: every decision is right
    assert res.metrics["gain/selective/decision_accuracy"] == 1.0
    assert res.metrics["gain/selective/gap_closed"] == pytest.approx(1.0)


def test_deterministic():
    a = run_gain_protocol(_task(), LstsqPolicy, seed=3, n_boot=100)
    b = run_gain_protocol(_task(), LstsqPolicy, seed=3, n_boot=100)
    assert a.metrics.keys() == b.metrics.keys()
    for k in a.metrics:
        assert a.metrics[k] == b.metrics[k] or (math.isnan(a.metrics[k]) and math.isnan(b.metrics[k])), k
    pd.testing.assert_frame_equal(a.tables["decisions"], b.tables["decisions"])
    assert a.summary() == b.summary()


def test_pearson_interval_resamples_documents_like_a_brute_force_loop():
    """The document-bootstrap interval of Pearson's r equals a loop that builds each resample
    (the same draws) question by question and asks scipy for r; resampling documents of
    correlated questions gives a wider interval than treating the questions as independent."""
    from harness.protocols.gain import pearson_bootstrap
    from harness.stats import bootstrap_draws

    rng = np.random.default_rng(3)
    groups = np.repeat([f"d{i:02d}" for i in range(30)], 4)
    doc_effect = np.repeat(rng.normal(size=30), 4)
    x = doc_effect + 0.3 * rng.normal(size=120)
    y = 0.4 * doc_effect + rng.normal(size=120)
    got = pearson_bootstrap(x, y, groups, n_boot=300, seed=7)
    docs, doc_of = np.unique(groups, return_inverse=True)
    rs = []
    for draw in bootstrap_draws(len(docs), 300, 7):
        idx = np.concatenate([np.flatnonzero(doc_of == d) for d in draw])
        rs.append(sps.pearsonr(x[idx], y[idx])[0])
    lo, hi = np.percentile(rs, [2.5, 97.5])
    assert got["pearson_n_boot_used"] == 300
    assert got["pearson_ci_low"] == pytest.approx(lo, abs=1e-9) and got["pearson_ci_high"] == pytest.approx(hi, abs=1e-9)
    independent = pearson_bootstrap(x, y, np.arange(120), n_boot=300, seed=7)
    assert hi - lo > independent["pearson_ci_high"] - independent["pearson_ci_low"]
    flat = pearson_bootstrap(np.ones(120), y, groups, n_boot=50, seed=0)  # a constant score has no r
    assert flat["pearson_n_boot_used"] == 0 and math.isnan(flat["pearson_ci_low"])
