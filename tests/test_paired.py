"""What one paired comparison can show (harness.paired, docs/metrics.md §12): the interval that
inverts the sign-flip test against a brute-force inversion and in a coverage simulation, the
sample-size plan against a brute-force exact power loop (no scipy), the largest showable
difference and the words."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness import paired, stats
from harness import sign_test_power as stp


def _brute_p(totals, sizes, delta):
    """Two-sided sign-flip p of the residual totals T_d - delta * n_d, every pattern enumerated."""
    r = np.asarray(totals, float) - delta * np.asarray(sizes, float)
    obs = abs(r.sum())
    hits = sum(abs(np.dot(s, r)) >= obs - 1e-9 for s in itertools.product((-1, 1), repeat=len(r)))
    return hits / 2 ** len(r)


def _docs(values_per_doc):
    groups = np.concatenate([[f"d{i:02d}"] * len(v) for i, v in enumerate(values_per_doc)])
    return np.concatenate([np.asarray(v, float) for v in values_per_doc]), groups


def test_largest_showable_difference_and_smallest_reachable_p_by_hand():
    # 70 questions, one per document, 4 rescues and 1 harm: all 5 one way would be 5 / 70
    d = np.zeros(70)
    d[:4], d[4] = 1.0, -1.0
    docs = np.array([f"d{i}" for i in range(70)])
    assert paired.max_showable_difference(d, docs) == pytest.approx(5 / 70)
    assert paired.min_reachable_p(5) == pytest.approx(0.0625)  # 2 of 32 patterns
    assert paired.min_reachable_p(0) == 1.0 and paired.min_reachable_p(1) == 1.0
    c = paired.paired_comparison(d, docs)
    assert c["discordant_docs"] == 5 and c["min_p"] == pytest.approx(0.0625)
    assert not c["detectable"]  # p >= 0.0625 > alpha whatever the data
    words = paired.resolution_words(c, 0.05, 0.8)
    assert words.startswith("largest difference these data could show 0.0714")
    assert "no difference is detectable with these questions (5 discordant documents reach p >= 0.0625)" in words
    assert "minimum detectable" not in words
    # document totals, not questions: two +1 in one document and a -1 in another
    d2, g2 = _docs([[1, 1, 0], [-1], [0, 0]])
    assert paired.max_showable_difference(d2, g2) == pytest.approx(3 / 6)


def test_mdd_is_shown_only_below_the_largest_showable_difference():
    rng = np.random.default_rng(4)
    n = 400
    docs = np.array([f"d{i:03d}" for i in range(n)])
    d = rng.choice([-1.0, 0.0, 1.0], p=[0.1, 0.6, 0.3], size=n)
    c = paired.paired_comparison(d, docs)
    assert c["mdd"] == pytest.approx(stats.min_detectable_difference(d, docs))
    assert c["mdd"] < c["max_diff"] and c["detectable"]
    assert f"minimum detectable difference {c['mdd']:.3g}" in paired.resolution_words(c, 0.05, 0.8)
    # many discordant documents but evenly split and few: the MDD exceeds what they can show
    d = np.zeros(40)
    d[:3], d[3:6] = 1.0, -1.0
    c = paired.paired_comparison(d, docs[:40])
    assert c["mdd"] >= c["max_diff"] and not c["detectable"]
    assert "is not below it" in paired.resolution_words(c, 0.05, 0.8)


def test_paired_comparison_is_its_parts():
    rng = np.random.default_rng(6)
    d, groups = _docs([rng.integers(-1, 2, size=int(k)) for k in rng.integers(1, 4, size=12)])
    c = paired.paired_comparison(d, groups, seed=2)
    assert c["point"] == pytest.approx(d.mean())
    assert c["p"] == stats.sign_flip_test(d, groups, seed=2)
    assert (c["ci_low"], c["ci_high"]) == paired.sign_flip_interval(d, groups, seed=2, p_at_zero=c["p"])
    assert c["mdd"] == stats.min_detectable_difference(d, groups)
    totals = {}
    for v, g in zip(d, groups):
        totals[g] = totals.get(g, 0.0) + v
    k = sum(abs(t) > 1e-12 for t in totals.values())
    assert c["discordant_docs"] == k and c["p_exact"] and c["n_patterns"] == 2**k
    assert c["same"] is False and c["cost_only"] is False
    zero = paired.paired_comparison(np.zeros(6), list("aabbcc"))
    assert zero["same"] is True and zero["p"] == 1.0 and zero["discordant_docs"] == 0
    assert (zero["ci_low"], zero["ci_high"]) == (0.0, 0.0)
    # a cost alone: utilities differ on 20 documents, outcomes on none
    docs = [f"d{i}" for i in range(30)]
    cost = paired.paired_comparison(np.r_[np.full(20, -0.02), np.zeros(10)], docs, outcome_diffs=np.zeros(30))
    assert cost["cost_only"] and cost["discordant_questions"] == 0 and cost["discordant_docs"] == 20
    assert not cost["p_exact"] and cost["n_patterns"] == 20_000
    assert paired.p_words(cost) == "sampled sign-flip, 20000 patterns"
    assert "the difference is the cost alone (0 discordant questions)" in paired.resolution_words(cost, 0.05, 0.8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interval_is_the_brute_force_inversion_of_the_test(seed):
    """Ends against a grid of brute-force exact p-values (every sign pattern) on 9 documents:
    inside the interval p >= alpha, just outside p < alpha."""
    rng = np.random.default_rng(seed)
    d, groups = _docs([rng.integers(-1, 2, size=int(k)) + rng.normal(0, 0.1, size=int(k)) for k in rng.integers(1, 4, size=9)])
    alpha = 0.1
    lo, hi = paired.sign_flip_interval(d, groups, alpha=alpha)
    uniq = sorted(set(groups))
    totals = [d[groups == u].sum() for u in uniq]
    sizes = [np.sum(groups == u) for u in uniq]
    assert lo < d.mean() < hi
    step = 1e-6 * (hi - lo)
    for end, outward in ((lo, -1), (hi, 1)):
        assert _brute_p(totals, sizes, end - outward * step) >= alpha
        assert _brute_p(totals, sizes, end + outward * step * 2) < alpha
    # a grid: accepted exactly between the ends
    for delta in np.linspace(lo - (hi - lo), hi + (hi - lo), 41):
        if abs(delta - lo) > 1e-4 and abs(delta - hi) > 1e-4:
            assert (_brute_p(totals, sizes, delta) >= alpha) == (lo <= delta <= hi)


def test_interval_agrees_with_the_test_and_says_when_it_has_none():
    rng = np.random.default_rng(9)
    for trial in range(60):
        n_docs = int(rng.integers(6, 30))
        sizes = rng.integers(1, 3, size=n_docs)
        groups = np.repeat([f"d{i:02d}" for i in range(n_docs)], sizes)
        d = rng.choice([-1.0, 0.0, 1.0], p=[0.15, 0.6, 0.25], size=len(groups))
        p = stats.sign_flip_test(d, groups, n_perm=2000, seed=trial)
        lo, hi = paired.sign_flip_interval(d, groups, n_perm=2000, seed=trial)
        assert (lo <= 0 <= hi) == (p >= 0.05), (trial, lo, hi, p)
    # five documents: 2 of 32 patterns is the smallest p, no shift is ever rejected at 0.05
    lo, hi = paired.sign_flip_interval([1, 1, 1, 1, 1], list("abcde"))
    assert math.isnan(lo) and math.isnan(hi)
    c = paired.paired_comparison(np.array([1.0, 1, 1, 1, 1]), list("abcde"))
    assert paired.interval_words(c, 0.05).startswith("no informative interval")


def test_interval_covers_under_the_null_at_the_real_tables_shapes():
    """About 50 held-out documents (1-2 questions each), k discordant documents whose signs are
    fair coins (no difference): the interval covers 0 in >= 94% of 1,000 fixed-seed simulations
    for every k (the percentile bootstrap excluded 0 in 13.8% of null simulations at k = 4)."""
    rng = np.random.default_rng(2026)
    for k in (3, 5, 8, 12, 20):
        covered = 0
        sims = 1000
        for s in range(sims):
            sizes = rng.integers(1, 3, size=50)
            groups = np.repeat([f"d{i:02d}" for i in range(50)], sizes)
            d = np.zeros(len(groups))
            first = np.r_[0, np.cumsum(sizes)[:-1]]
            d[first[rng.choice(50, k, replace=False)]] = rng.choice([-1.0, 1.0], size=k)
            lo, hi = paired.sign_flip_interval(d, groups, n_perm=2000, seed=s)
            covered += bool(lo <= 0 <= hi)
        assert covered / sims >= 0.94, (k, covered / sims)


def _binom_pmf(x: int, n: int, p: float) -> float:
    """Bin(x; n, p) from math.comb in logs (no scipy; no overflow for n beyond 1,000)."""
    if p in (0.0, 1.0):
        return float(x == (n if p == 1.0 else 0))
    return math.exp(math.log(math.comb(n, x)) + x * math.log(p) + (n - x) * math.log1p(-p))


def _brute_exact_plan(q, pi, alpha=0.05, power=0.8, n_max=2000):
    """The smallest number of documents at which the exact two-sided sign test on the
    discordant ones (each discordant with probability q, the policy's way with probability pi)
    has the power: every binomial term by math.comb, no scipy."""
    def reject_power(D):
        tail = [0.0] * (D + 1)
        acc = 0
        for j in range(D + 1):
            acc += math.comb(D, j)
            tail[j] = acc / 2**D  # P(X <= j), X ~ Bin(D, 1/2)
        total = 0.0
        for x in range(D + 1):
            if min(1.0, 2 * tail[min(x, D - x)]) < alpha:
                total += _binom_pmf(x, D, pi)
        return total

    g: list[float] = []
    for n in range(1, n_max + 1):
        while len(g) <= n:
            g.append(reject_power(len(g)))
        if sum(_binom_pmf(D, n, q) * g[D] for D in range(n + 1)) >= power:
            return n
    raise AssertionError("no plan below n_max")


@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.05 / 7, 0.2, 1e-4, 0.5])
def test_critical_counts_are_the_exact_sign_test_regions(alpha):
    """c_D, the largest c with 2 P(X <= c) < alpha under Bin(D, 1/2) (-1: none), for D up to
    400 by exact integer sums (math.comb), and up to 2^16 equal to scipy's quantile stepped
    down (the earlier computation)."""
    from scipy import stats as sps

    got = stp.critical_counts(1024, alpha)
    for D in range(401):
        c, acc = -1, 0
        for j in range(D + 1):
            acc += math.comb(D, j)
            if 2 * acc / 2**D >= alpha:
                break
            c = j
        assert got[D] == c, (D, got[D], c)
    D = np.arange(2**16 + 1)
    ref = np.where(np.isnan(q := sps.binom.ppf(alpha / 2, D, 0.5)), -1, q)
    for _ in range(3):
        ref = np.where((ref >= 0) & (2 * sps.binom.cdf(ref, D, 0.5) >= alpha), ref - 1, ref)
    assert np.array_equal(stp.critical_counts(2**16, alpha), ref)


@pytest.mark.parametrize("rescues,harms,n", [(8, 1, 40), (6, 1, 52), (9, 3, 60), (5, 0, 80), (10, 2, 30)])
def test_sample_size_plan_matches_a_brute_force_exact_power_loop(rescues, harms, n):
    """One question per document, 0/1 differences: the plan's N is the brute-force exact N (the
    issue asks within 10%), with the rescue share shrunk by the Beta(2, 2) prior ((r + 2) /
    (k + 4)); with the prior (0, 0), the observed share."""
    d = np.zeros(n)
    d[:rescues], d[rescues:rescues + harms] = 1.0, -1.0
    docs = [f"d{i:03d}" for i in range(n)]
    k = rescues + harms
    plan = paired.sample_size_plan(d, docs)
    want = _brute_exact_plan(k / n, (rescues + 2) / (k + 4))
    assert abs(plan["questions"] - want) <= 0.1 * want
    assert plan["docs"] == plan["questions"] == want  # the same computation, exactly
    assert plan["pi"] == pytest.approx((rescues + 2) / (k + 4))
    observed = paired.sample_size_plan(d, docs, prior=(0.0, 0.0))
    assert observed["docs"] == _brute_exact_plan(k / n, rescues / k) < want  # all one way: certain, too small
    # Connor's normal approximation is a few percent below the exact size
    approx = paired.normal_plan_docs(k / n, (rescues + 2) / (k + 4), 0.05, 0.8)
    assert 0.85 * want <= approx <= want


def test_sample_size_plan_in_questions_scales_by_questions_per_document():
    # 20 documents of 3 questions; 6 discordant documents (5 up, 1 down)
    d = np.zeros(60)
    for doc, sign in zip(range(6), (1, 1, 1, 1, 1, -1)):
        d[3 * doc] = sign
    docs = np.repeat([f"d{i:02d}" for i in range(20)], 3)
    plan = paired.sample_size_plan(d, docs)
    want = _brute_exact_plan(6 / 20, 7 / 10)  # 5 of 6 shrunk by Beta(2, 2): (5 + 2) / (6 + 4)
    assert plan["docs"] == want and plan["questions"] == math.ceil(want * 3)
    # no direction, no plan; nothing discordant, no plan
    even = paired.sample_size_plan(np.r_[1.0, -1.0, np.zeros(8)], [f"d{i}" for i in range(10)])
    assert math.isnan(even["questions"]) and "split evenly" in even["why"]
    none = paired.sample_size_plan(np.zeros(10), [f"d{i}" for i in range(10)])
    assert math.isnan(none["questions"]) and none["why"]
    c = {"plan_why": "", "plan_capped": False, "plan_questions": 324.0, "plan_docs": 324.0}
    assert paired.plan_words(c, 0.05, 0.8, "ridge vs always-keep") == (
        "about 324 questions (324 documents) for 80% power at alpha 0.05 (ridge vs always-keep)")
    assert paired.plan_words({**c, "plan_why": "no discordant question"}, 0.05, 0.8, "a vs b") == (
        "no sample-size plan for a vs b: no discordant question")


def test_closing_line_counts_the_blind_comparisons_and_names_the_smallest_plan():
    def item(where, detectable, q, m):
        return {"where": where, "detectable": detectable, "questions": q, "docs": m, "capped": False,
                "alpha": 0.05, "power": 0.8}

    assert paired.closing_line([]) == ""
    line = paired.closing_line([item("a vs r at c=0", False, 324.0, 324.0), item("b vs r at c=0", False, 900.0, 300.0)])
    assert line == ("Overall: no difference is detectable with these questions in any of the 2 comparisons that "
                    "cannot be told apart; the closest (a vs r at c=0) needs about 324 questions (324 documents) for "
                    "80% power at alpha 0.05.")
    line = paired.closing_line([item("a", True, 50.0, 10.0), item("b", False, math.nan, math.nan)])
    assert line.startswith("Overall: no difference is detectable with these questions in 1 of the 2 comparisons")
    assert line.endswith("the closest (a) needs about 50 questions (10 documents) for 80% power at alpha 0.05.")
    # protocol A's held-out plan (20% of the dataset) and protocol B's: compared in dataset questions,
    # the line names the protocol and the unit; a plan within the questions tested says why
    a = {**item("ridge vs keep", False, 653.0, 580.0), "alpha": 0.0025, "protocol": "protocol A",
         "unit": "held-out questions", "share": 0.2, "have": 662}
    b = {**item("gbm vs keep", False, 2000.0, 1800.0), "alpha": 0.0021, "protocol": "protocol B",
         "unit": "questions of the test halves", "share": 1.0, "have": 3270}
    line = paired.closing_line([a, b])
    assert ("the closest (protocol B: gbm vs keep) needs about 2,000 questions of the test halves (1,800 documents) "
            "for 80% power at level 0.0021, no more than the 3,270 tested: ") in line  # 2,000 < 653 / 0.2 = 3,265
    line = paired.closing_line([{**a, "questions": 600.0}, {**b, "questions": 4000.0}])
    assert ("the closest (protocol A: ridge vs keep) needs about 3,000 dataset questions (600 held-out questions, 20% "
            "of the dataset; 580 documents) for 80% power at level 0.0025, no more than the 662 tested") in line


@pytest.mark.parametrize("pos,neg", [(0, 0), (4, 1), (3, 3), (0, 5), (12, 2)])
def test_posterior_probability_better_is_the_beta_binomial_by_hand(pos, neg):
    """P(pi > 1/2) under Beta(1 + pos, 1 + neg) by the identity I_x(a, b) = P(Bin(a + b - 1, x) >= a),
    every term by math.comb (no scipy)."""
    n = pos + neg + 7
    d = np.r_[np.ones(pos), -np.ones(neg), np.zeros(7)]
    docs = [f"d{i:02d}" for i in range(n)]
    a, b = 1 + pos, 1 + neg
    m = a + b - 1
    cdf_half = sum(math.comb(m, j) for j in range(a, m + 1)) / 2**m  # I_0.5(a, b)
    assert paired.posterior_better(d, docs) == pytest.approx(1 - cdf_half)
    c = paired.paired_comparison(d, docs)
    assert c["p_better"] == pytest.approx(1 - cdf_half)


def test_equivalence_is_two_one_sided_tests_against_the_margin():
    """Many documents, tiny symmetric differences: the 90% inverted interval lies inside +-0.01,
    so the two one-sided tests at 0.05 call the policies equivalent at margin 0.02; at 0.001 not."""
    rng = np.random.default_rng(3)
    n = 400
    docs = [f"d{i:03d}" for i in range(n)]
    d = np.zeros(n)
    idx = rng.choice(n, 8, replace=False)
    d[idx] = [1, -1, 1, -1, 1, -1, 1, -1]
    lo, hi = paired.sign_flip_interval(d, docs, alpha=0.10)
    assert (lo, hi) == paired.equivalence_interval(d, docs, alpha=0.05)
    c = paired.paired_comparison(d, docs, margin=0.02)
    assert (c["tost_low"], c["tost_high"]) == pytest.approx((lo, hi))
    assert c["equivalent"] == (-0.02 < lo and hi < 0.02) and c["equivalent"]
    assert paired.equivalence_words(c, 0.02) == "equivalent within +-0.02 (two one-sided sign-flip tests)"
    strict = paired.paired_comparison(d, docs, margin=0.001)
    assert not strict["equivalent"]
    assert paired.equivalence_words(strict, 0.001).startswith("inconclusive: neither a difference nor equivalence")
    # five documents: no interval, never equivalent
    assert not paired.paired_comparison(np.array([1.0, -1, 1, -1, 0]), list("abcde"))["equivalent"]


def test_a_plan_beyond_the_cap_says_more_than_and_stays_quick():
    """Discordant documents nearly balanced (101 : 99 of 2,000): the normal approximation already
    exceeds the cap, so the plan is "more than" PLAN_MAX_DOCS documents, found without a search;
    a plan of thousands of documents (11 : 9 of 200) is searched in coarse steps, quickly."""
    import time

    d = np.zeros(2000)
    d[:101], d[101:200] = 1.0, -1.0
    start = time.process_time()
    plan = paired.sample_size_plan(d, [f"d{i:04d}" for i in range(2000)])
    assert plan["capped"] and plan["docs"] == paired.PLAN_MAX_DOCS
    assert paired.normal_plan_docs(200 / 2000, 101 / 200, 0.05, 0.8) > paired.PLAN_MAX_DOCS
    mid = paired.sample_size_plan(np.r_[np.ones(11), -np.ones(9), np.zeros(180)],
                                  [f"d{i:03d}" for i in range(200)])
    approx = paired.normal_plan_docs(20 / 200, 13 / 24, 0.05, 0.8)  # 11 of 20 shrunk: (11 + 2) / (20 + 4)
    assert not mid["capped"] and approx <= mid["docs"] <= 1.1 * approx  # exact: a few percent above Connor
    assert stp.sign_test_power(int(mid["docs"]), 0.1, 13 / 24) >= 0.8
    assert time.process_time() - start < 30  # generous: no scan over a million sizes
    c = {"plan_why": "", "plan_capped": True, "plan_questions": plan["questions"], "plan_docs": plan["docs"]}
    assert paired.plan_words(c, 0.05, 0.8, "a vs b").startswith("more than 100000 questions (100000 documents)")
