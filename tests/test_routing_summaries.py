"""Routing summaries (PGR, APGR, CPT, AIQ) against independent computations: every tie order
enumerated, Monte-Carlo tie breaking, formulas worked out by hand, and brute-force hulls."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from harness.errors import ConfigError, HarnessError
from harness.protocols import routing_curves as rc
from harness.protocols import routing_summaries as rs


def _curve_for_order(order, base, extra):
    """Mean outcome for k = 0..n when the extra arm runs on order[:k] (plain loop)."""
    n = len(base)
    out = []
    for k in range(n + 1):
        chosen = set(order[:k])
        out.append(sum(extra[i] if i in chosen else base[i] for i in range(n)) / n)
    return np.array(out)


def _binary_pair(n_rescue, n_harm, n_both, n_neither, seed=0):
    """base/extra hits with the given rescues (0 -> 1), harms (1 -> 0) and agreements, shuffled."""
    base = np.array([0] * n_rescue + [1] * n_harm + [1] * n_both + [0] * n_neither, dtype=float)
    extra = np.array([1] * n_rescue + [0] * n_harm + [1] * n_both + [0] * n_neither, dtype=float)
    perm = np.random.default_rng(seed).permutation(len(base))
    return base[perm], extra[perm]


# --------------------------------------------------------------------------------------------
# Exact curve with ties at their expectation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores",
    [
        [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 0.0],  # tied blocks of 3 and 2
        [1.0] * 7,  # constant score: one block
        [0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.4],  # distinct
        [np.inf, 1.0, 1.0, -np.inf, -np.inf, 1.0, 0.0],  # infinite scores tie too
    ],
)
def test_expected_curve_equals_average_over_all_tie_orders(scores):
    rng = np.random.default_rng(3)
    n = len(scores)
    for base, extra in [
        (rng.integers(0, 2, n).astype(float), rng.integers(0, 2, n).astype(float)),
        (rng.random(n), rng.random(n)),  # continuous outcomes (e.g. recall)
    ]:
        usage, curve = rc.expected_exact_curve(scores, base, extra)
        # every permutation of the questions that respects the score order is one tie order;
        # ties broken uniformly at random = the uniform average over these permutations
        curves = [
            _curve_for_order(p, base, extra)
            for p in itertools.permutations(range(n))
            if all(scores[p[i]] >= scores[p[i + 1]] for i in range(n - 1))
        ]
        assert np.allclose(curve, np.mean(curves, axis=0), atol=1e-12)
        assert np.allclose(usage, np.arange(n + 1) / n)
        assert curve[0] == pytest.approx(base.mean()) and curve[-1] == pytest.approx(extra.mean())


def test_expected_curve_equals_monte_carlo_tie_breaking():
    rng = np.random.default_rng(11)
    n = 40
    scores = rng.integers(0, 5, n).astype(float)  # 5 score levels: large tied blocks
    base = rng.integers(0, 2, n).astype(float)
    extra = rng.integers(0, 2, n).astype(float)
    _, curve = rc.expected_exact_curve(scores, base, extra)
    draws = 20000
    sims = np.empty((draws, n + 1))
    delta = extra - base
    for t in range(draws):
        order = np.lexsort((rng.random(n), -scores))  # score descending, random tie break
        sims[t] = base.mean() + np.r_[0.0, np.cumsum(delta[order])] / n
    se = sims.std(axis=0) / math.sqrt(draws)
    assert np.all(np.abs(sims.mean(axis=0) - curve) <= 5 * se + 1e-12)


def test_constant_score_is_random_straight_line_apgr_half():
    base, extra = _binary_pair(n_rescue=16, n_harm=4, n_both=10, n_neither=10)  # McNemar p 0.012
    n = len(base)
    usage, curve = rc.expected_exact_curve(np.zeros(n), base, extra)
    # random's expectation: base_mean + u * (extra_mean - base_mean)
    assert np.allclose(curve, base.mean() + usage * (extra.mean() - base.mean()), atol=1e-12)
    pgr = rc.pgr_curve(usage, curve, base.mean(), extra.mean())
    assert np.allclose(pgr, usage, atol=1e-12)
    # APGR of the line PGR(u) = u: integral_0^1 u du = 1/2
    assert rc.apgr(usage, pgr) == pytest.approx(0.5, abs=1e-12)
    summary = rs.routing_summaries(np.full(n, 7.0), base, extra)
    assert summary["defined"] and summary["reason"] == ""
    assert summary["apgr"] == pytest.approx(0.5, abs=1e-12)
    assert summary["cpt50"] == pytest.approx(0.5, abs=1e-12)
    assert summary["cpt80"] == pytest.approx(0.8, abs=1e-12)
    assert (summary["n_rescues"], summary["n_harms"]) == (16, 4)
    assert summary["gap_test"] == "mcnemar" and summary["gap_p"] == pytest.approx(2 * sum(
        math.comb(20, i) for i in range(5)) / 2**20, rel=1e-12)


# --------------------------------------------------------------------------------------------
# Oracle: CPT(x) = x (R - H) / n
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n_rescue,n_harm,n_both,n_neither", [(12, 4, 9, 15), (20, 0, 5, 5), (7, 6, 3, 4)])
def test_oracle_cpt_and_apgr_by_hand(n_rescue, n_harm, n_both, n_neither):
    base, extra = _binary_pair(n_rescue, n_harm, n_both, n_neither, seed=5)
    n, R, H = len(base), n_rescue, n_harm
    delta = extra - base
    # the formulas do not depend on whether the gap is significant: pgr_summaries skips the check
    s = rc.pgr_summaries(delta, base, extra)
    checked = rs.routing_summaries(delta, base, extra, min_discordant=R + H)
    p = min(1.0, 2 * sum(math.comb(R + H, i) for i in range(min(R, H) + 1)) / 2 ** (R + H))
    assert checked["gap_p"] == pytest.approx(p, rel=1e-12)
    assert checked["defined"] == (p < 0.05)
    for k in ("apgr", "cpt50", "cpt80"):
        assert checked[k] == s[k] if checked["defined"] else math.isnan(checked[k])
    # the oracle spends its first calls on rescues, one net question recovered per call:
    # PGR(k/n) = k / (R - H) for k <= R, so PGR reaches x at k = x (R - H) calls
    assert s["cpt50"] == pytest.approx(0.5 * (R - H) / n, rel=1e-12)
    assert s["cpt80"] == pytest.approx(0.8 * (R - H) / n, rel=1e-12)
    # PGR rises to R/(R-H) after the rescues, stays flat over the neutrals, falls back to 1 over
    # the harms (they sort last): area by hand
    P = R / (R - H)
    by_hand = (R / n) * P / 2 + ((n - R - H) / n) * P + (H / n) * (P + 1) / 2
    assert s["apgr"] == pytest.approx(by_hand, rel=1e-12)
    usage, curve = rc.expected_exact_curve(delta, base, extra)
    pgr = rc.pgr_curve(usage, curve, base.mean(), extra.mean())
    # the peak, reached at the last rescue (a hair below P: pgr_curve divides two rounded means)
    assert rc.cpt(usage, pgr, P - 1e-9) == pytest.approx(R / n, abs=1e-9)
    assert math.isnan(rc.cpt(usage, pgr, P + 0.01))  # never reached
    # ties inside the delta classes change nothing: distinct scores in the same class order
    jitter = delta + 1e-6 * np.random.default_rng(1).random(n)
    s2 = rc.pgr_summaries(jitter, base, extra)
    assert (s2["cpt50"], s2["cpt80"], s2["apgr"]) == pytest.approx((s["cpt50"], s["cpt80"], s["apgr"]), rel=1e-12)


# --------------------------------------------------------------------------------------------
# APGR / CPT on a handful of operating points
# --------------------------------------------------------------------------------------------


def test_apgr_and_cpt_on_operating_points_by_hand():
    usage, pgr = [0.5, 0.25], [0.6, 0.5]  # unsorted on purpose; (0, 0) and (1, 1) get added
    # trapezoids: [0, .25] (0 + .5)/2 * .25 + [.25, .5] (.5 + .6)/2 * .25 + [.5, 1] (.6 + 1)/2 * .5
    assert rc.apgr(usage, pgr) == pytest.approx(0.0625 + 0.1375 + 0.4)
    assert rc.cpt(usage, pgr, 0.5) == pytest.approx(0.25)
    assert rc.cpt(usage, pgr, 0.8) == pytest.approx(0.5 + (0.8 - 0.6) / (1 - 0.6) * 0.5)
    assert rc.cpt(usage, pgr, 0.3) == pytest.approx(0.25 * 0.3 / 0.5)  # on the first segment
    assert math.isnan(rc.cpt(usage, pgr, 1.01))
    # points sharing a usage are averaged: (.25, .4) and (.25, .6) act as (.25, .5)
    assert rc.apgr([0.25, 0.25, 0.5], [0.4, 0.6, 0.6]) == pytest.approx(rc.apgr(usage, pgr))
    # given endpoints are kept, not duplicated
    assert rc.apgr([0.0, 0.25, 0.5, 1.0], [0.0, 0.5, 0.6, 1.0]) == pytest.approx(rc.apgr(usage, pgr))
    # a zero gap: NaN all the way through
    nan_pgr = rc.pgr_curve([0.0, 1.0], [0.3, 0.3], 0.3, 0.3)
    assert np.isnan(nan_pgr).all() and math.isnan(rc.apgr([0.0, 1.0], nan_pgr))
    with pytest.raises(HarnessError):
        rc.apgr([1.2], [0.5])
    with pytest.raises(ConfigError):
        rc.cpt([0.5], [0.5], math.nan)


# --------------------------------------------------------------------------------------------
# Undefined summaries
# --------------------------------------------------------------------------------------------


def test_undefined_below_min_discordant_and_without_gap():
    base, extra = _binary_pair(n_rescue=6, n_harm=3, n_both=20, n_neither=20)
    scores = extra - base
    ok, reason = rs.gap_is_resolvable(base, extra, min_discordant=10)
    assert not ok and "9 discordant" in reason and "min_discordant=10" in reason
    s = rs.routing_summaries(scores, base, extra, min_discordant=10)
    assert not s["defined"] and s["reason"] == reason
    assert all(math.isnan(s[k]) for k in ("apgr", "cpt50", "cpt80"))
    assert (s["n_rescues"], s["n_harms"]) == (6, 3)
    # at the threshold the count passes, but 6 rescues vs 3 harms are noise (McNemar p 0.51)
    ok, reason = rs.gap_is_resolvable(base, extra, min_discordant=9)
    assert not ok and reason.startswith("gap not told from zero: exact McNemar test of 6 rescues vs 3 harms")
    assert "p = 0.508 >= alpha=0.05" in reason
    # a level above that p defines it (alpha is a parameter)
    assert rs.gap_is_resolvable(base, extra, min_discordant=9, alpha=0.6) == (True, "")
    assert rs.routing_summaries(scores, base, extra, min_discordant=9, alpha=0.6)["defined"]
    # many discordant questions but no net gap (or a negative one): undefined
    for r, h in [(8, 8), (5, 9)]:
        b, e = _binary_pair(n_rescue=r, n_harm=h, n_both=5, n_neither=5)
        ok, reason = rs.gap_is_resolvable(b, e, min_discordant=10)
        assert not ok and "does not beat base" in reason
        assert math.isnan(rs.routing_summaries(e - b, b, e)["apgr"])
    with pytest.raises(ConfigError):
        rs.gap_is_resolvable(base, extra, min_discordant=-1)
    for alpha in (0.0, 1.0, math.nan):
        with pytest.raises(ConfigError):
            rs.gap_is_resolvable(base, extra, alpha=alpha)


@pytest.mark.parametrize("rescues,harms", [(30, 22), (33, 19), (35, 15), (40, 10)])
def test_gap_p_at_or_above_alpha_is_undefined_with_the_test_and_its_p(rescues, harms):
    """The synthetic table's test halves hold about 30 rescues vs 22 harms: a net gap, many
    discordant questions, and still noise (McNemar p about 0.33)."""
    base, extra = _binary_pair(n_rescue=rescues, n_harm=harms, n_both=60, n_neither=40)
    from harness.stats import mcnemar_exact

    p = mcnemar_exact(extra, base)[2]
    check = rs.gap_check(base, extra, min_discordant=10, alpha=0.05)
    assert (check.test, check.n_rescues, check.n_harms) == ("mcnemar", rescues, harms)
    assert check.p == p
    s = rs.routing_summaries(extra - base, base, extra)
    if p >= 0.05:
        assert not check.ok and not s["defined"]
        assert check.reason == (
            f"gap not told from zero: exact McNemar test of {rescues} rescues vs {harms} harms "
            f"p = {p:.3g} >= alpha=0.05; PGR/APGR/CPT not defined"
        )
        assert s["reason"] == check.reason and all(math.isnan(s[k]) for k in ("apgr", "cpt50", "cpt80"))
    else:
        assert check.ok and s["defined"] and not math.isnan(s["apgr"])
    # the boundary: p < alpha strictly
    assert rs.gap_check(base, extra, alpha=p).ok is False
    assert rs.gap_check(base, extra, alpha=min(0.999, p * 1.0001)).ok is (p * 1.0001 < 1)


def test_continuous_gap_uses_the_document_sign_flip_test():
    from harness.stats import sign_flip_test

    rng = np.random.default_rng(4)
    n_docs, per_doc = 30, 4
    groups = np.repeat([f"d{i}" for i in range(n_docs)], per_doc)
    base = 0.2 + 0.6 * rng.random(n_docs * per_doc)
    for shift, expect_ok in ((0.05, True), (0.002, False)):
        extra = base + shift + 0.2 * (rng.random(len(base)) - 0.5)
        assert np.sum(extra - base) > 0  # a net gap either way: only the test tells them apart
        check = rs.gap_check(base, extra, groups=groups)
        p = sign_flip_test(extra - base, groups)
        assert check.test == "sign_flip" and check.p == p and check.ok == (p < 0.05) == expect_ok
        if not expect_ok:
            assert check.reason.startswith(f"gap not told from zero: sign-flip test of extra - base on {n_docs} "
                                           "document totals")
            assert f"p = {p:.3g} >= alpha=0.05" in check.reason
    # questions of one document move together: the gap rests on documents, not questions. Here
    # extra beats base by 0.05 on every question of 10 documents and loses 0.05 on 6: McNemar-like
    # counting of 64 questions would call it significant, the document test does not
    g = np.repeat([f"d{i}" for i in range(16)], 4)
    b = np.full(64, 0.5)
    e = b + np.repeat(np.r_[np.full(10, 0.05), np.full(6, -0.05)], 4)
    check = rs.gap_check(b, e, groups=g)
    assert not check.ok and check.p == pytest.approx(sign_flip_test(e - b, g))
    assert check.p == pytest.approx(2 * sum(math.comb(16, i) for i in range(7)) / 2**16)  # exact: 6 of 16
    # continuous outcomes without documents: an error, not a silent per-question test
    with pytest.raises(HarnessError):
        rs.gap_check(b, e)
    with pytest.raises(HarnessError):
        rs.routing_summaries(e - b, b, e)
    with pytest.raises(HarnessError):
        rs.gap_check(b, e, groups=g[:10])


def test_bad_inputs_raise():
    with pytest.raises(HarnessError):
        rc.expected_exact_curve([0.1, np.nan], [0, 1], [1, 1])
    with pytest.raises(HarnessError):
        rc.expected_exact_curve([0.1, 0.2], [0, 1, 0], [1, 1, 0])
    with pytest.raises(HarnessError):
        rc.expected_exact_curve([], [], [])


# --------------------------------------------------------------------------------------------
# Non-decreasing convex hull and AIQ
# --------------------------------------------------------------------------------------------


def _brute_hull_vertices(c, q):
    """Indices (one per distinct point) that are vertices of the non-decreasing upper hull,
    found by checking every pair for dominance and every triple for convexity."""
    n = len(c)
    keep = []
    for i in range(n):
        dominated = any(
            c[j] <= c[i] and q[j] >= q[i] and ((c[j], q[j]) != (c[i], q[i]) or j < i) for j in range(n) if j != i
        )
        if not dominated:
            keep.append(i)
    vertices = []
    for i in keep:
        under_chord = any(
            c[j] < c[i] < c[k] and (c[k] - c[j]) * (q[i] - q[j]) - (q[k] - q[j]) * (c[i] - c[j]) <= 0
            for j in keep
            for k in keep
        )
        if not under_chord:
            vertices.append(i)
    return sorted(vertices, key=lambda i: c[i])


def _brute_hull_height(c, q, x):
    """Best quality reachable at expected cost <= x by one point or a coin between two."""
    best = max(q[i] for i in range(len(c)) if c[i] <= x)
    for j in range(len(c)):
        for k in range(len(c)):
            if c[j] <= x < c[k]:
                lam = (x - c[j]) / (c[k] - c[j])
                best = max(best, (1 - lam) * q[j] + lam * q[k])
    return best


@pytest.mark.parametrize("seed", range(6))
def test_hull_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    cases = [
        (rng.random(15), rng.random(15)),  # general position
        (rng.integers(0, 5, 15).astype(float), rng.integers(0, 5, 15).astype(float)),  # ties, collinear
    ]
    for c, q in cases:
        hc, hq = rs.convex_hull_upper(c, q)
        v = _brute_hull_vertices(c.tolist(), q.tolist())
        assert np.array_equal(hc, c[v]) and np.array_equal(hq, q[v])
        assert np.all(np.diff(hq) > 0) and np.all(np.diff(hc) > 0)  # increasing
        slopes = np.diff(hq) / np.diff(hc)
        assert np.all(np.diff(slopes) < 1e-12)  # concave
        grid = np.unique(c)  # the brute-force height is linear between point costs
        brute = np.array([_brute_hull_height(c, q, x) for x in grid])
        assert np.allclose(np.interp(grid, hc, hq), brute, atol=1e-12)
        assert np.all(q <= np.interp(c, hc, hq) + 1e-12)  # every point on or below
        if grid[-1] > grid[0]:
            area = np.sum(np.diff(grid) * (brute[1:] + brute[:-1]) / 2)
            assert rs.aiq(c, q) == pytest.approx(area / (grid[-1] - grid[0]), abs=1e-12)


def test_aiq_by_hand():
    # (3, .7) is dominated by (2, .8): hull (1, .5) - (2, .8), flat at .8 up to cost 3
    # area = (.5 + .8)/2 * 1 + .8 * 1 = 1.45 over a range of 2
    assert rs.aiq([1, 2, 3], [0.5, 0.8, 0.7]) == pytest.approx(0.725)
    hc, hq = rs.convex_hull_upper([1, 2, 3], [0.5, 0.8, 0.7])
    assert hc.tolist() == [1, 2] and hq.tolist() == [0.5, 0.8]
    # (1, .3) lies under the chord (0, .2) - (2, .8) (height .5 there): hull is the chord
    assert rs.aiq([0, 1, 2], [0.2, 0.3, 0.8]) == pytest.approx((0.2 + 0.8) / 2)
    assert rs.convex_hull_upper([0, 1, 2], [0.2, 0.3, 0.8])[0].tolist() == [0, 2]
    # degenerate cost range: the best quality
    assert rs.aiq([2, 2, 2], [0.1, 0.6, 0.4]) == pytest.approx(0.6)
    # a shared cost range: flat extension to the right
    assert rs.aiq([1, 2, 3], [0.5, 0.8, 0.7], cost_range=(1, 5)) == pytest.approx((0.65 + 0.8 * 3) / 4)
    with pytest.raises(ConfigError):
        rs.aiq([1, 2], [0.5, 0.8], cost_range=(0, 2))


def test_aiq_of_exact_curve_via_operating_cost():
    base, extra = _binary_pair(n_rescue=10, n_harm=4, n_both=12, n_neither=14)
    n = len(base)
    usage, curve = rc.expected_exact_curve(np.zeros(n), base, extra)
    costs = rs.operating_cost(usage, base_cost=2.0, marginal_extra_cost=3.0)
    assert np.allclose(costs, 2.0 + 3.0 * usage)
    assert rs.operating_cost(0.5, 2.0, 3.0) == 3.5
    # random's straight line: AIQ = (base_mean + extra_mean) / 2 = base + APGR(0.5) * gap
    assert rs.aiq(costs, curve) == pytest.approx((base.mean() + extra.mean()) / 2, abs=1e-12)
    with pytest.raises(HarnessError):
        rs.operating_cost([0.5, 1.5], 0.0, 1.0)


# --------------------------------------------------------------------------------------------
# Random's reference: the mean over seeded random orderings
# --------------------------------------------------------------------------------------------


def test_random_reference_is_the_mean_over_seeded_orderings():
    base, extra = _binary_pair(n_rescue=12, n_harm=3, n_both=8, n_neither=7, seed=2)
    n = len(base)
    cost = np.random.default_rng(0).integers(0, 5, n).astype(float)
    ref = rs.random_ordering_reference(base, extra, [3, 1], extra_cost=cost, base_cost=2.0, n_orders=40)
    rng = np.random.default_rng([3, 1])  # the same generator, replayed by hand
    aiqs, c50, c80 = [], [], []
    for _ in range(40):
        order = rng.permutation(n)
        curve = _curve_for_order(list(order), base, extra)
        costs = [2.0 + sum(cost[order[:k]]) / n for k in range(n + 1)]
        grid = np.unique(costs)
        height = np.array([_brute_hull_height(costs, curve.tolist(), x) for x in grid])
        aiqs.append(np.sum(np.diff(grid) * (height[1:] + height[:-1]) / 2) / (grid[-1] - grid[0]))
        pgr = (curve - base.mean()) / (extra.mean() - base.mean())
        for level, out in ((0.5, c50), (0.8, c80)):
            k = next(k for k in range(n + 1) if pgr[k] >= level - 1e-12)  # first crossing, by a loop
            out.append(k / n if k == 0 else (k - 1 + (level - pgr[k - 1]) / (pgr[k] - pgr[k - 1])) / n)
    assert ref["n_orders"] == 40
    assert ref["aiq"] == pytest.approx(np.mean(aiqs), abs=1e-12)
    assert ref["aiq_sd"] == pytest.approx(np.std(aiqs), abs=1e-12)
    assert ref["cpt50"] == pytest.approx(np.mean(c50), abs=1e-9)
    assert ref["cpt80"] == pytest.approx(np.mean(c80), abs=1e-9)
    # the orderings are exposed for replay, seeded, one permutation per row
    orders = rs.random_orderings(n, [3, 1], 40)
    assert orders.shape == (40, n) and all(sorted(o) == list(range(n)) for o in orders)
    assert np.array_equal(orders, rs.random_orderings(n, [3, 1], 40))
    assert not np.array_equal(orders, rs.random_orderings(n, [3, 2], 40))


def test_random_reference_carries_the_selection_a_single_curve_gets():
    """One noisy curve's hull lies above the straight line and its first crossing of 50% comes
    early; the straight line (random's expectation) would flatter any single curve."""
    base, extra = _binary_pair(n_rescue=30, n_harm=12, n_both=40, n_neither=38, seed=1)
    n = len(base)
    ref = rs.random_ordering_reference(base, extra, 0)
    line_aiq = (base.mean() + extra.mean()) / 2
    assert ref["n_orders"] == rs.N_RANDOM_ORDERINGS == 200
    assert ref["aiq"] > line_aiq + 3 * ref["aiq_sd"] / math.sqrt(200)
    assert ref["cpt50"] < 0.5 - 3 * ref["cpt50_sd"] / math.sqrt(200)
    # APGR needs no such reference: it is linear, its mean over orderings is the line's 0.5
    orders = rs.random_orderings(n, 0)
    apgrs = [rc.pgr_summaries(-np.argsort(o).astype(float), base, extra)["apgr"] for o in orders]
    assert abs(np.mean(apgrs) - 0.5) < 3 * np.std(apgrs) / math.sqrt(len(orders))
    # no positive net gap: CPT undefined for every ordering, AIQ still defined
    flat = rs.random_ordering_reference(base, base, 0, n_orders=5)
    assert math.isnan(flat["cpt50"]) and flat["aiq"] == pytest.approx(base.mean())
    with pytest.raises(ConfigError):
        rs.random_ordering_reference(base, extra, 0, n_orders=0)


# --------------------------------------------------------------------------------------------
# Mixed policy
# --------------------------------------------------------------------------------------------


def test_mixed_policy_realises_target_cost_in_expectation():
    a, b = (1.0, 0.5), (4.0, 0.9)
    m = rs.mixed_policy(a, b, target_cost=2.5, seed=7, n=200_000)
    assert m.q == pytest.approx(0.5)
    assert m.expected_cost == pytest.approx(2.5)
    assert m.expected_quality == pytest.approx(0.7)  # on the segment a-b
    realised = np.where(m.take_b, b[0], a[0]).mean()
    se = (b[0] - a[0]) * math.sqrt(m.q * (1 - m.q) / len(m.take_b))
    assert abs(realised - 2.5) <= 5 * se
    # over many seeds the average realised cost converges to the target
    q = rs.mixed_policy(a, b, 1.6, seed=0, n=0).q
    assert q == pytest.approx(0.2)
    means = [np.where(rs.mixed_policy(a, b, 1.6, seed=s, n=50).take_b, b[0], a[0]).mean() for s in range(2000)]
    assert abs(np.mean(means) - 1.6) <= 5 * (b[0] - a[0]) * math.sqrt(0.2 * 0.8 / (50 * 2000))
    # seeded: same seed, same coins; order of the two points does not matter for the cost
    assert np.array_equal(rs.mixed_policy(a, b, 2.5, 3, 100).take_b, rs.mixed_policy(a, b, 2.5, 3, 100).take_b)
    assert rs.mixed_policy(b, a, 2.5, 3, 10).expected_cost == pytest.approx(2.5)
    # endpoints and degenerate pairs
    assert not rs.mixed_policy(a, b, 1.0, 0, 100).take_b.any()
    assert rs.mixed_policy(a, b, 4.0, 0, 100).take_b.all()
    assert rs.mixed_policy((2.0, 0.1), (2.0, 0.3), 2.0, 0, 5).q == 0.0
    with pytest.raises(ConfigError):
        rs.mixed_policy(a, b, 5.0, 0, 10)
