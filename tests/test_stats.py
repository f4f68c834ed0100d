"""Each statistic against an independent computation (brute-force loops, scipy, by hand)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy import stats as sps

from harness.errors import ConfigError
from harness import stats


def _grouped_values(n_docs=40, seed=1):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, size=n_docs)
    groups = np.repeat([f"d{i:03d}" for i in range(n_docs)], sizes)
    values = rng.normal(size=len(groups)) + np.repeat(rng.normal(size=n_docs), sizes)
    perm = rng.permutation(len(groups))  # rows need not be sorted by document
    return values[perm], groups[perm]


def test_doc_bootstrap_equals_brute_force_loop():
    values, groups = _grouped_values()
    n_boot, seed = 300, 7
    point, lo, hi = stats.doc_bootstrap_ci(values, groups, n_boot=n_boot, seed=seed)
    # independent replay: same draws, a plain python loop over resamples
    docs = sorted(set(groups.tolist()))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(docs), size=(n_boot, len(docs)))
    boot = []
    for b in range(n_boot):
        resample = []
        for d in draws[b]:
            resample.extend(values[groups == docs[d]].tolist())
        boot.append(sum(resample) / len(resample))
    assert point == pytest.approx(np.mean(values))
    assert lo == pytest.approx(np.percentile(boot, 2.5), abs=1e-12)
    assert hi == pytest.approx(np.percentile(boot, 97.5), abs=1e-12)
    # the callable (loop) path gives the same numbers
    assert stats.doc_bootstrap_ci(values, groups, n_boot=n_boot, seed=seed, statistic=np.mean) == pytest.approx(
        (point, lo, hi), abs=1e-12
    )


def test_doc_bootstrap_coverage_is_near_nominal():
    """95% intervals of a mean with a document effect cover the true mean ~95% of the time."""
    rng = np.random.default_rng(0)
    covered = 0
    reps = 200
    for r in range(reps):
        n_docs = 60
        groups = np.repeat(np.arange(n_docs).astype(str), 4)
        values = np.repeat(rng.normal(size=n_docs), 4) + rng.normal(size=len(groups))
        _, lo, hi = stats.doc_bootstrap_ci(values, groups, n_boot=400, seed=r)
        covered += lo <= 0.0 <= hi
    assert 0.88 <= covered / reps <= 0.99


def test_doc_bootstrap_wider_than_question_bootstrap_with_document_effect():
    """Clustering matters: resampling documents must give a wider interval than if each
    question were its own document (strong shared document effect)."""
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(50).astype(str), 6)
    values = np.repeat(rng.normal(size=50), 6) + 0.1 * rng.normal(size=300)
    _, lo_d, hi_d = stats.doc_bootstrap_ci(values, groups, n_boot=1000, seed=0)
    _, lo_q, hi_q = stats.doc_bootstrap_ci(values, np.arange(300).astype(str), n_boot=1000, seed=0)
    assert (hi_d - lo_d) > 1.5 * (hi_q - lo_q)


def test_doc_bootstrap_speed_printed(capsys):
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(500).astype(str), 4)
    values = rng.random(2000)
    t0 = time.perf_counter()
    point, lo, hi = stats.doc_bootstrap_ci(values, groups, n_boot=1000, seed=0)
    print(f"doc bootstrap 1000 x 500 docs: {time.perf_counter() - t0:.3f}s")
    assert lo < point < hi


def test_doc_bootstrap_bad_input():
    with pytest.raises(ConfigError, match="n_boot"):
        stats.doc_bootstrap_ci([1.0, 2.0], ["a", "b"], n_boot=0)
    with pytest.raises(Exception, match="align"):
        stats.doc_bootstrap_ci([1.0, 2.0], ["a"])


def test_dkw_epsilon_by_hand():
    # one-sided: sqrt(ln(1/delta) / (2n))
    assert stats.dkw_epsilon(100, 0.05) == pytest.approx(math.sqrt(math.log(20) / 200))
    assert stats.dkw_epsilon(150) == pytest.approx(0.0999288, abs=1e-6)  # ln(20)=2.995732; /300 = 0.0099858; sqrt
    with pytest.raises(ConfigError):
        stats.dkw_epsilon(0)


def test_dkw_one_sided_bound_holds_by_simulation():
    """The one-sided slack keeps P(F_n - F > eps) <= delta for uniform scores (Massart)."""
    rng = np.random.default_rng(0)
    n, delta, reps = 50, 0.1, 4000
    eps = stats.dkw_epsilon(n, delta)
    u = np.sort(rng.random((reps, n)), axis=1)
    # sup_s (F_n(s) - s) is attained just at the order statistics: i/n - u_(i)
    sup = np.max(np.arange(1, n + 1) / n - u, axis=1)
    assert np.mean(sup > eps) <= delta


def test_min_mcnemar_p_is_the_all_on_one_side_p():
    for n in range(0, 12):
        # all n discordant pairs on one side: scipy's exact binomial test
        expected = 1.0 if n == 0 else sps.binomtest(n, n, 0.5).pvalue
        assert stats.min_mcnemar_p(n) == pytest.approx(expected)
        if n:
            assert stats.mcnemar_exact([1] * n, [0] * n)[2] == pytest.approx(stats.min_mcnemar_p(n))
    assert stats.min_mcnemar_p(4) == 0.125  # the held-out set: 4 rescues + 1 harm -> 5 -> 0.0625


def test_min_detectable_difference_closed_form_and_clusters():
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    # one question per document, hits: 3 + 2 discordant pairs among 50 questions
    diffs = np.array([1] * 3 + [-1] * 2 + [0] * 45, dtype=float)
    groups = np.arange(50).astype(str)
    b, c, n = 3, 2, 50
    assert stats.min_detectable_difference(diffs, groups) == pytest.approx(z * math.sqrt((b + c) - (b - c) ** 2 / n) / n)
    # independent: the centred cluster-robust SE, by a loop over documents
    g2 = groups.copy()
    g2[1] = g2[0]  # two discordant questions in one document form one cluster
    mean = diffs.mean()
    totals = {}
    for v, doc in zip(diffs, g2):
        t, k = totals.get(doc, (0.0, 0))
        totals[doc] = (t + v, k + 1)
    se = math.sqrt(sum((t - k * mean) ** 2 for t, k in totals.values())) / n
    assert stats.min_detectable_difference(diffs, g2) == pytest.approx(z * se)
    # a constant cost shift is not noise: same MDD with and without it
    assert stats.min_detectable_difference(diffs - 0.2, groups) == pytest.approx(stats.min_detectable_difference(diffs, groups))
    # the z-test of the mean at MDD has power 0.8 (normal approximation)
    mdd = stats.min_detectable_difference(diffs, groups, alpha=0.05, power=0.8)
    se = mdd / z
    achieved = sps.norm.sf(sps.norm.ppf(0.975) - mdd / se) + sps.norm.cdf(-sps.norm.ppf(0.975) - mdd / se)
    assert achieved == pytest.approx(0.8, abs=1e-3)
    assert stats.min_detectable_difference(np.zeros(5), list("abcde")) == 0.0


def test_sign_flip_equals_exact_mcnemar_with_one_question_per_document():
    rng = np.random.default_rng(4)
    for _ in range(25):
        n = int(rng.integers(5, 40))
        a = (rng.random(n) < 0.5).astype(float)
        b = np.where(rng.random(n) < 0.25, 1 - a, a)
        _, _, p = stats.mcnemar_exact(a, b)
        assert stats.sign_flip_test(a - b, np.arange(n).astype(str)) == pytest.approx(p)
    # four discordant questions all one way: 0.125, never "significant"
    assert stats.sign_flip_test([1, 1, 1, 1, 0, 0], list("abcdef")) == pytest.approx(0.125)
    assert stats.sign_flip_test([0, 0], ["a", "b"]) == 1.0


def test_sign_flip_by_brute_force_over_documents_and_monte_carlo():
    import itertools

    values, groups = _grouped_values(n_docs=10, seed=2)
    docs = sorted(set(groups.tolist()))
    totals = np.array([values[groups == d].sum() for d in docs])
    observed = abs(totals.sum())
    count = sum(abs(np.dot(s, totals)) >= observed - 1e-9 for s in itertools.product((-1, 1), repeat=len(docs)))
    assert stats.sign_flip_test(values, groups) == pytest.approx(count / 2 ** len(docs))
    # beyond 16 non-zero documents: Monte Carlo, close to the normal approximation
    v, g = _grouped_values(n_docs=60, seed=3)
    v = v + 0.3
    p = stats.sign_flip_test(v, g, n_perm=20_000, seed=1)
    t = np.array([v[g == d].sum() for d in sorted(set(g.tolist()))])
    z = abs(t.sum()) / math.sqrt(np.sum(t**2))
    assert p == pytest.approx(2 * sps.norm.sf(z), abs=0.01)


def test_holm_adjust_by_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(30):
        m = int(rng.integers(1, 8))
        p = rng.random(m) ** 2
        got = stats.holm_adjust(p)
        # textbook definition: adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)) in sorted order
        order = np.argsort(p, kind="stable")
        expected = np.empty(m)
        running = 0.0
        for rank, idx in enumerate(order):
            running = max(running, min(1.0, (m - rank) * p[idx]))
            expected[idx] = running
        np.testing.assert_allclose(got, expected)
    out = stats.holm_adjust([0.01, np.nan, 0.04])
    assert np.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.04)


def test_bootstrap_means_are_the_draws_behind_the_interval():
    values, groups = _grouped_values(seed=5)
    for shift in (0.0, 0.3, 1.0):
        v = values + shift
        boot = stats.doc_bootstrap_means(v, groups, n_boot=2000, seed=1)
        _, lo, hi = stats.doc_bootstrap_ci(v, groups, n_boot=2000, seed=1)
        assert np.isclose(np.percentile(boot, 2.5), lo) and np.isclose(np.percentile(boot, 97.5), hi)


@pytest.mark.parametrize("seed", range(6))
def test_mcnemar_matches_scipy_binomtest(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    a = (rng.random(n) < rng.random()).astype(int)
    b = (rng.random(n) < rng.random()).astype(int)
    n01, n10, p = stats.mcnemar_exact(a, b)
    assert n01 == sum(1 for x, y in zip(a, b) if x == 1 and y == 0)
    assert n10 == sum(1 for x, y in zip(a, b) if x == 0 and y == 1)
    expected = 1.0 if n01 + n10 == 0 else sps.binomtest(n01, n01 + n10, 0.5).pvalue
    assert p == pytest.approx(expected, rel=1e-12)


def test_mcnemar_hand_cases():
    assert stats.mcnemar_exact([1, 1, 0], [1, 1, 0]) == (0, 0, 1.0)
    # 5 vs 0 discordant: p = 2 * 0.5**5
    assert stats.mcnemar_exact([1] * 5, [0] * 5)[2] == pytest.approx(2 / 32)
    with pytest.raises(Exception, match="0/1"):
        stats.mcnemar_exact([0.5], [1])


@pytest.mark.parametrize(
    "ours,theirs",
    [(stats.pearson, sps.pearsonr), (stats.spearman, sps.spearmanr), (stats.kendall, sps.kendalltau)],
)
def test_correlations_match_scipy(ours, theirs):
    rng = np.random.default_rng(0)
    x = rng.normal(size=80)
    y = np.sign(x + rng.normal(size=80))  # ties, like delta in {-1, 0, 1}
    r, p = ours(x, y)
    ref = theirs(x, y)
    assert r == pytest.approx(ref.statistic, rel=1e-12)
    assert p == pytest.approx(ref.pvalue, rel=1e-12)
    assert all(math.isnan(v) for v in ours(np.ones(10), y[:10]))
    assert all(math.isnan(v) for v in ours(x[:10], np.zeros(10)))


def _williams_textbook(r12, r13, r23, n):
    """Steiger (1980) eq. 3 written out from the paper, with |R| from numpy's determinant."""
    R = np.array([[1, r12, r13], [r12, 1, r23], [r13, r23, 1]])
    det = np.linalg.det(R)
    rbar = (r12 + r13) / 2
    t = (r12 - r13) * np.sqrt(((n - 1) * (1 + r23)) / (2 * ((n - 1) / (n - 3)) * det + rbar**2 * (1 - r23) ** 3))
    return t, 2 * sps.t.sf(abs(t), df=n - 3)


@pytest.mark.parametrize("case", [(0.4, 0.5, 0.1, 103), (0.6, 0.3, 0.5, 50), (-0.2, 0.35, -0.4, 200)])
def test_williams_matches_textbook_form(case):
    t, p = stats.williams_test(*case)
    t_ref, p_ref = _williams_textbook(*case)
    assert t == pytest.approx(t_ref, rel=1e-10)
    assert p == pytest.approx(p_ref, rel=1e-10)


def test_williams_published_example():
    """psych::r.test(n=103, r12=.4, r13=.5, r23=.1), documented output: t = -0.89, p = 0.37."""
    t, p = stats.williams_test(0.4, 0.5, 0.1, 103)
    assert round(t, 2) == -0.89
    assert round(p, 2) == 0.37
    assert stats.williams_test(0.3, 0.3, 0.2, 40)[0] == 0.0


def test_grouped_kfold_keeps_documents_on_one_side():
    rng = np.random.default_rng(0)
    groups = np.array([f"d{i}" for i in rng.integers(0, 37, size=400)])
    folds = stats.grouped_kfold(groups, 5, seed=3)
    assert len(folds) == 5
    seen = np.zeros(len(groups), int)
    for train, test in folds:
        assert not set(groups[train]) & set(groups[test])
        assert len(train) + len(test) == len(groups)
        seen[test] += 1
    assert (seen == 1).all()
    sizes = [len(t) for _, t in folds]
    assert max(sizes) - min(sizes) <= 30  # balanced by question count
    again = stats.grouped_kfold(groups, 5, seed=3)
    assert all((a[1] == b[1]).all() for a, b in zip(folds, again))
    other = stats.grouped_kfold(groups, 5, seed=4)
    assert any(not np.array_equal(a[1], b[1]) for a, b in zip(folds, other))
    with pytest.raises(ConfigError, match="n_folds"):
        stats.grouped_kfold(groups[:3], 5)


def test_grouped_split_by_document():
    groups = np.repeat([f"d{i}" for i in range(50)], 3)
    dev, held = stats.grouped_split(groups, 0.8, seed=1)
    assert not set(groups[dev]) & set(groups[held])
    assert len(set(groups[dev])) == 40 and len(set(groups[held])) == 10
    assert sorted(np.r_[dev, held].tolist()) == list(range(150))
    with pytest.raises(ConfigError, match="dev_frac"):
        stats.grouped_split(groups, 1.0)


def test_stratified_grouped_halves():
    rng = np.random.default_rng(0)
    groups = np.repeat([f"d{i}" for i in range(100)], 4)
    y = rng.choice([-1, 0, 1], p=[0.1, 0.7, 0.2], size=400)
    cal, test = stats.stratified_grouped_halves(groups, y, seed=5)
    assert not set(groups[cal]) & set(groups[test])
    assert len(cal) + len(test) == 400 and abs(len(cal) - len(test)) <= 40
    for c in (-1, 0, 1):  # stratified: class shares close on both halves
        assert abs(np.mean(y[cal] == c) - np.mean(y[test] == c)) < 0.06
    cal2, _ = stats.stratified_grouped_halves(groups, y, seed=5)
    assert np.array_equal(cal, cal2)
    # a single class is not an error ("where possible")
    cal3, test3 = stats.stratified_grouped_halves(groups, np.zeros(400, int), seed=0)
    assert len(cal3) and len(test3)


def test_kept_halves_equal_a_fresh_draw_and_follow_every_input():
    from harness import stats

    rng = np.random.default_rng(3)
    groups = np.array([f"d{i // 3}" for i in range(60)])
    y = rng.integers(-1, 2, size=60)
    stats._kept_halves.cache_clear()
    first = stats.stratified_grouped_halves(groups, y, seed=7)
    fresh = stats._draw_halves(groups.astype(str), y.astype(int), 7)
    again = stats.stratified_grouped_halves(groups, y, seed=7)  # served from the kept draw
    assert all(np.array_equal(a, b) for a, b in zip(first, fresh)) and all(np.array_equal(a, b) for a, b in zip(again, fresh))
    first[0][:] = -1  # a caller's change never reaches the kept halves
    assert np.array_equal(stats.stratified_grouped_halves(groups, y, seed=7)[0], fresh[0])
    other_seed = stats.stratified_grouped_halves(groups, y, seed=8)
    other_y = stats.stratified_grouped_halves(groups, np.where(np.arange(60) == 0, -y[0] if y[0] else 1, y), seed=7)
    other_groups = stats.stratified_grouped_halves(np.array([f"e{i // 3}" for i in range(60)]), y, seed=7)
    for got, groups_, y_, seed in ((other_seed, groups, y, 8), (other_groups, np.array([f"e{i // 3}" for i in range(60)]), y, 7)):
        assert all(np.array_equal(a, b) for a, b in zip(got, stats._draw_halves(groups_.astype(str), y_.astype(int), seed)))
    assert stats._kept_halves.cache_info().currsize == 4
