"""The verdict rules under simulation (docs/metrics.md §9): under the null, false verdicts stay at
or below alpha plus two Monte Carlo standard errors, ties included; where even the oracle is
within the margin the verdict is never "as good" but "no room to route"; the overspend flag of
a rule calibrated at the budget fires at about its nominal level, not half of the time.

Why simulations: each rule is a claim about error rates, and a hand case cannot show a rate."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.protocols import verdict as vd
from harness.protocols.decision_table import JobRecord, decision_table
from harness.protocols.verdict_stats import OVERSPEND_LEVEL, overspent, stepdown_levels

ALPHA = 0.05


def _job(policy, base, extra, prob, cal, budget, cost=0.0, split=0):
    n = len(base)
    docs = np.array([f"d{i:04d}" for i in range(n)])
    utility = base + prob * (extra - base) - cost * prob
    decisions = pd.DataFrame({"qid": [f"q{i:04d}" for i in range(n)], "doc_id": docs, "split": split,
                              "budget": budget, "frontier": "deployable", "prob": prob, "base": base,
                              "extra": extra, "utility": utility, "oracle": False})
    common = {"split": split, "budget": budget, "fixed": False, "realized_usage": prob.mean(),
              "violated": prob.mean() > budget, "outcome": (utility + cost * prob).mean(),
              "utility": utility.mean(), "random_matched": 0.5, "oracle_matched": 0.9, "n_cal": n, "n_test": n}
    frontiers = pd.DataFrame([{**common, "frontier": "exact", "cal_utility": math.nan},
                              {**common, "frontier": "deployable", "cal_utility": cal}])
    return JobRecord(policy, 0, cost, frontiers, decisions, cell=f"cost.c={cost:g}", arms=("keep", "hybrid"))


def _null_sweep(rng, n=60, budget=0.25, tie=False):
    """One sweep of one cell: 60 one-question documents, rescues and harms equally likely (20%
    discordant), routers that run the extra arm on a random quarter: no router differs from
    always-keep, and the oracle's headroom (about 10 rescues of 60) is far above the margin."""
    base = (rng.random(n) < 0.5).astype(float)
    flip = rng.random(n) < 0.2
    extra = np.where(flip, 1.0 - base, base)
    jobs = [_job("a", base, extra, (rng.random(n) < budget).astype(float), 0.7, budget)]
    if tie:  # a second router tied with it on calibration, with other decisions
        jobs.append(_job("b", base, extra, (rng.random(n) < budget).astype(float), 0.7, budget))
    table = decision_table(jobs)
    return vd.verdicts(table, table.attrs["fixed_comparisons"])


@pytest.mark.slow  # 150 sweeps each: about a minute
@pytest.mark.parametrize("tie", [False, True], ids=["one-router", "tied-routers"])
def test_under_the_null_false_verdicts_stay_at_alpha(tie):
    """A false verdict: any difference claimed (deploy, over budget, always keep is better) or
    "no room to route" (the oracle's headroom is far above the margin). "As good" is true here."""
    rng = np.random.default_rng(7 + tie)
    sims = 150
    false = 0
    for _ in range(sims):
        [row] = _null_sweep(rng, tie=tie).itertuples()
        false += row.kind in ("deploy", "over budget") or " is better than " in row.verdict or \
            "no room to route" in row.verdict
    se = math.sqrt(ALPHA * (1 - ALPHA) / sims)
    assert false / sims <= ALPHA + 2 * se, f"{false} of {sims} false verdicts"


def test_where_the_oracle_is_within_the_margin_there_is_no_room_never_as_good():
    """2,000 one-question documents, the extra arm rescues 2 of them: the oracle gains 0.001, well
    inside the margin 0.01, so a router that makes keep's decisions is not "as good" (nothing
    could have been better) but "no room to route"; with the old fixed margin "as good" passed."""
    n = 2000
    base = np.zeros(n)
    extra = base.copy()
    extra[:2] = 1.0
    prob = np.zeros(n)
    prob[100:600] = 1.0  # runs the extra arm where it changes nothing
    table = decision_table([_job("a", base, extra, prob, 0.7, 0.25)])
    [row] = vd.verdicts(table, table.attrs["fixed_comparisons"]).itertuples()
    assert row.kind == "no router" and "no room to route" in row.verdict and " as good " not in row.verdict
    assert row.headroom == pytest.approx(2 / n)
    assert row.margin == pytest.approx(0.5 * 2 / n)  # the router's margin: half the headroom, not 0.01


def test_the_equivalence_margin_can_fail():
    """A router that gains 0.05 against a headroom of 0.2 is not "as good": its margin is
    min(0.01, 0.5 x 0.2) = 0.01 and its difference is five times that."""
    n = 400
    base = np.zeros(n)
    extra = base.copy()
    extra[:80] = 1.0  # 80 rescues: the oracle at budget 0.25 takes all of them (headroom 0.2)
    prob = np.zeros(n)
    prob[:20] = 1.0  # the router takes 20
    table = decision_table([_job("a", base, extra, prob, 0.7, 0.25)])
    [row] = vd.verdicts(table, table.attrs["fixed_comparisons"]).itertuples()
    assert row.headroom == pytest.approx(0.2) and row.margin == pytest.approx(0.01)
    assert row.kind == "deploy" and not row.equivalent


def test_the_overspend_flag_fires_at_its_nominal_level_under_a_calibrated_rule():
    """A threshold at the (1 - rho) quantile of n_cal calibration scores applied to n_test new
    ones (all from one distribution): test usage lands above rho in about half of the splits,
    but beyond its sampling error in about OVERSPEND_LEVEL of them."""
    rng = np.random.default_rng(3)
    rho, n_cal, n_test, sims = 0.25, 200, 200, 4000
    usage = np.empty(sims)
    for i in range(sims):
        threshold = np.quantile(rng.random(n_cal), 1 - rho)
        usage[i] = np.mean(rng.random(n_test) > threshold)
    above = np.mean(usage > rho)
    flagged = np.mean(overspent(usage, rho, n_cal, n_test))
    se = math.sqrt(OVERSPEND_LEVEL * (1 - OVERSPEND_LEVEL) / sims)
    assert 0.4 < above < 0.6  # the old flag: a coin flip
    assert abs(flagged - OVERSPEND_LEVEL) <= 0.02 + 2 * se, flagged


def test_stepdown_levels_are_holm_and_agree_with_each_decision():
    rng = np.random.default_rng(0)
    from harness.stats import holm_adjust

    for _ in range(200):
        p = rng.uniform(0, 0.1, size=rng.integers(1, 12))
        adjusted, level = stepdown_levels(p, alpha=ALPHA)
        assert np.allclose(adjusted, holm_adjust(p))
        assert np.array_equal(p < level, adjusted < ALPHA)
    # two hypotheses that cannot both be true (one slot) count once: 0.03 x 1 and then 0.04 x 1
    adjusted, level = stepdown_levels([0.03, 0.04], slots=["s", "s"], alpha=ALPHA)
    assert list(adjusted) == pytest.approx([0.03, 0.04]) and list(level) == pytest.approx([ALPHA, ALPHA])
    adjusted, _ = stepdown_levels([0.03, 0.04], alpha=ALPHA)  # distinct: Holm 0.06, 0.06
    assert list(adjusted) == pytest.approx([0.06, 0.06])


def test_tost_p_is_the_larger_one_sided_sign_flip_p_by_brute_force():
    """Six documents of unequal sizes: every one of the 2^6 sign patterns enumerated by hand.
    H0 delta >= +m: shifted totals r = T - m n, p = share of patterns s with s.r <= sum r;
    H0 delta <= -m: r = T + m n, p = share with s.r >= sum r; TOST p = the larger."""
    import itertools

    from harness.protocols.verdict_stats import tost_p

    diffs = np.array([0.0, 0.01, -0.02, 0.0, 0.03, 0.0, -0.01, 0.02, 0.0, 0.01])
    docs = np.array(["a", "a", "b", "c", "c", "d", "e", "e", "f", "f"])
    totals = np.array([diffs[docs == d].sum() for d in "abcdef"])
    sizes = np.array([(docs == d).sum() for d in "abcdef"], dtype=float)
    for m in (0.005, 0.02, 0.05):
        signs = np.array(list(itertools.product((-1, 1), repeat=6)), dtype=float)
        up, lo = totals - m * sizes, totals + m * sizes
        p_up = np.mean(signs @ up <= up.sum() + 1e-12)
        p_lo = np.mean(signs @ lo >= lo.sum() - 1e-12)
        assert tost_p(diffs, docs, m) == pytest.approx(max(p_up, p_lo))
    assert tost_p(diffs, docs, 0.0) == 1.0
