"""The kept (memoized) sign-flip numbers: a kept value is the value computed afresh, and a changed
input (one document total, another seed, another level) is computed, not served from the memo."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from harness import paired, sign_patterns, sign_stream, stats
from harness import sign_test_power as stp
from harness.paired import document_totals, sample_size_plan, sign_flip_interval
from harness.protocols import verdict_stats
from harness.protocols.verdict_stats import tost_p
from harness.sign_patterns import Memo, pattern_sums


def _forget() -> None:
    stats._kept_sign_flip_p.cache_clear()
    sign_stream._SIGN_STREAMS.clear()
    sign_stream._PACKED.clear()
    sign_patterns._SUMS.clear()
    sign_patterns._PATTERNS.clear()
    paired._INTERVALS.clear()
    paired._PLANS.clear()
    verdict_stats._TOST.clear()


@pytest.fixture(autouse=True)
def forget():
    _forget()
    yield
    _forget()


def _data(n_docs: int = 60, seed: int = 3):
    rng = np.random.default_rng(seed)
    groups = np.repeat([f"d{i:03d}" for i in range(n_docs)], 2)
    diffs = rng.choice([-1.0, 0.0, 0.0, 1.0, 1.0], size=len(groups)) - 0.01 * rng.random(len(groups))
    return diffs, groups


def _reference_sign_flip_p(diffs, groups, n_perm, seed) -> float:
    """The sign-flip test as written before it was kept: one draw per call."""
    _, doc_of = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    totals = np.bincount(doc_of, weights=np.asarray(diffs, dtype=float))
    totals = totals[np.abs(totals) > stats.SIGN_FLIP_ZERO_TOL]
    observed, tol = abs(float(totals.sum())), 1e-12 * max(1.0, float(np.abs(totals).sum()))
    if len(totals) <= stats.SIGN_FLIP_EXACT_MAX:
        patterns = ((np.arange(2 ** len(totals))[:, None] >> np.arange(len(totals))) & 1) * 2 - 1
        return float(np.mean(np.abs(patterns @ totals) >= observed - tol))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_perm, 4096):
        signs = rng.integers(0, 2, size=(min(4096, n_perm - start), len(totals))) * 2 - 1
        hits += int(np.sum(np.abs(signs @ totals) >= observed - tol))
    return float((1 + hits) / (1 + n_perm))


def _reference_signs(n_docs, n_perm, seed):
    """The sampled patterns as drawn before they were kept: int8, in the same blocks."""
    rng = np.random.default_rng(seed)
    block = max(1, min(4096, 2_000_000 // n_docs))
    signs = np.empty((n_perm, n_docs), dtype=np.int8)
    for start in range(0, n_perm, block):
        m = min(block, n_perm - start)
        signs[start:start + m] = rng.integers(0, 2, size=(m, n_docs), dtype=np.int8) * 2 - 1
    return signs


def _reference_pattern_sums(totals, sizes, n_perm, seed):
    """The sampled pattern sums by a float matrix product (BLAS: its own order of additions)."""
    signs = _reference_signs(len(totals), n_perm, seed).astype(np.float64)
    return signs @ totals, signs @ sizes


def _canonical(signs_row, values) -> float:
    """One pattern's sum in the documented order, by a plain loop: per chunk of eight documents
    the signed values added in document order, then the chunks in order."""
    total = None
    for c in range(0, len(values), 8):
        part = float(signs_row[c]) * float(values[c])
        for j in range(c + 1, c + 8):
            part = part + (float(signs_row[j]) * float(values[j]) if j < len(values) else -0.0)
        total = part if total is None else total + part
    return total


def _assert_sums(got, values, n_perm, seed, reference):
    """The kept sums: the plain loop's to the bit on the first patterns, and the matrix
    product's within float rounding (1e-12 of the sum of |values|) on all of them."""
    signs = _reference_signs(len(values), n_perm, seed)
    for i in range(min(64, n_perm)):
        assert got[i] == _canonical(signs[i], values), i
    assert np.abs(got - reference).max() <= 1e-12 * max(1.0, float(np.abs(values).sum()))


def test_memo_is_bounded_and_least_recently_used():
    memo, calls = Memo(2), []
    for key in ("a", "b", "a", "c", "b"):
        memo.get(key, lambda key=key: calls.append(key) or key.upper())
    assert calls == ["a", "b", "c", "b"] and len(memo) == 2  # "b" was the least recently used when "c" came


def test_sign_flip_p_kept_equals_fresh_and_a_changed_input_is_recomputed():
    d, g = _data()
    first = stats.sign_flip_test(d, g, n_perm=3000, seed=5)
    assert first == _reference_sign_flip_p(d, g, 3000, 5)
    assert stats.sign_flip_test(d, g, n_perm=3000, seed=5) == first
    assert stats._kept_sign_flip_p.cache_info().hits == 1
    changed = d.copy()
    changed[np.flatnonzero(d != 0)[0]] += 1.0  # one document total changed
    for args, kwargs in (((changed, g), {"n_perm": 3000, "seed": 5}), ((d, g), {"n_perm": 3000, "seed": 6}),
                         ((d, g), {"n_perm": 2999, "seed": 5})):
        assert stats.sign_flip_test(*args, **kwargs) == _reference_sign_flip_p(*args, kwargs["n_perm"], kwargs["seed"])
    assert stats._kept_sign_flip_p.cache_info().hits == 1  # none of them was served from the memo


def test_pattern_sums_kept_equal_fresh_and_are_read_only():
    d, g = _data()
    totals, sizes = document_totals(d, g)
    a, b, exact = pattern_sums(totals, sizes, 2500, 1)
    ref_a, ref_b = _reference_pattern_sums(totals, sizes, 2500, 1)
    assert not exact
    _assert_sums(a, totals, 2500, 1, ref_a)
    _assert_sums(b, sizes, 2500, 1, ref_b)
    again = pattern_sums(totals, sizes, 2500, 1)
    assert again[0] is a and again[1] is b and not a.flags.writeable
    other = totals.copy()
    other[np.flatnonzero(totals)[0]] += 1.0
    a2, _, _ = pattern_sums(other, sizes, 2500, 1)
    _assert_sums(a2, other, 2500, 1, _reference_pattern_sums(other, sizes, 2500, 1)[0])
    a3, b3, _ = pattern_sums(totals, sizes, 2500, 2)
    ref3 = _reference_pattern_sums(totals, sizes, 2500, 2)
    _assert_sums(a3, totals, 2500, 2, ref3[0])
    _assert_sums(b3, sizes, 2500, 2, ref3[1])


def test_interval_tost_and_plan_kept_equal_fresh():
    d, g = _data()
    totals, sizes = document_totals(d, g)
    p = stats.sign_flip_test(d, g, n_perm=2000, seed=0)
    ends = sign_flip_interval(d, g, alpha=0.05, n_perm=2000, seed=0, p_at_zero=p)
    fresh = paired._inverted_test(totals, sizes, alpha=0.05, p_at_zero=p, tol=1e-10, n_perm=2000, seed=0)
    assert ends == fresh and sign_flip_interval(d, g, alpha=0.05, n_perm=2000, seed=0, p_at_zero=p) == ends
    assert len(paired._INTERVALS) == 1
    at_level = sign_flip_interval(d, g, alpha=0.01, n_perm=2000, seed=0, p_at_zero=p)
    assert at_level == paired._inverted_test(totals, sizes, alpha=0.01, p_at_zero=p, tol=1e-10, n_perm=2000, seed=0)
    assert len(paired._INTERVALS) == 2 and at_level != ends
    assert tost_p(d, g, 0.05, n_perm=2000, seed=0) == verdict_stats._tost_p(totals, sizes, 0.05, 2000, 0)
    assert tost_p(d, g, 0.02, n_perm=2000, seed=0) == verdict_stats._tost_p(totals, sizes, 0.02, 2000, 0)
    assert len(verdict_stats._TOST) == 2
    plan = sample_size_plan(d, g, alpha=0.01)
    plan["docs"] = -1.0  # a caller's change does not reach the kept plan
    again = sample_size_plan(d, g, alpha=0.01)
    pos, neg = int(np.sum(totals > 1e-12)), int(np.sum(totals < -1e-12))
    assert again == paired._plan(pos, neg, len(totals), float(sizes.sum()), 0.01, 0.8, paired.PLAN_PRIOR)
    assert again["docs"] > 0 and sample_size_plan(d, g, alpha=0.02)["docs"] != again["docs"]


def test_an_unseeded_draw_is_never_kept():
    d, g = _data()
    totals, sizes = document_totals(d, g)
    pattern_sums(totals, sizes, 500, None)
    sign_flip_interval(d, g, n_perm=500, seed=None, p_at_zero=0.5)
    assert len(sign_patterns._SUMS) == 0 and len(paired._INTERVALS) == 0
    assert stats._kept_sign_flip_p.cache_info().currsize == 0
    assert math.isfinite(stats.sign_flip_test(d, g, n_perm=500, seed=None))
    assert stats._kept_sign_flip_p.cache_info().currsize == 0


def test_sign_draws_of_every_width_are_the_same_bits():
    for seed, shape in ((0, (7, 33)), (5, (4096, 19)), (11, (3, 1))):
        wide = np.random.default_rng(seed).integers(0, 2, size=shape)
        narrow = np.random.default_rng(seed).integers(0, 2, size=shape, dtype=np.int32)
        assert np.array_equal(wide, narrow)


@pytest.mark.parametrize("n_docs, n_nonzero, n_perm", [
    (17, 17, 9000),  # more than one block of 4,096 draws
    (40, 3, 700),  # few documents with a total: short sums
    (2100, 2000, 2001),  # 1,000 patterns a block: the last block one pattern
    (300, 150, 4097),
])
def test_kept_sums_and_p_equal_the_computation_before_them(n_docs, n_nonzero, n_perm):
    rng = np.random.default_rng(n_docs)
    totals = np.zeros(n_docs)
    totals[rng.choice(n_docs, n_nonzero, replace=False)] = rng.normal(size=n_nonzero) * rng.integers(1, 4, n_nonzero)
    sizes = rng.integers(1, 4, size=n_docs).astype(float)
    a, b, _ = pattern_sums(totals, sizes, n_perm, 7)
    ref_a, ref_b = _reference_pattern_sums(totals, sizes, n_perm, 7)
    _assert_sums(a, totals, n_perm, 7, ref_a)
    _assert_sums(b, sizes, n_perm, 7, ref_b)
    groups = np.array([f"d{i:05d}" for i in range(n_docs)])
    assert stats.sign_flip_test(totals, groups, n_perm=n_perm, seed=7) == _reference_sign_flip_p(
        totals, groups, n_perm, 7)


def test_powers_at_equal_one_call_per_size():
    rng = np.random.default_rng(1)
    for _ in range(20):
        limit, pi, q = int(rng.integers(5, 3000)), float(rng.uniform(0.05, 0.95)), float(rng.uniform(0.001, 1))
        alpha = float(rng.uniform(0.0005, 0.1))
        g = stp.sign_test_power_given_discordant(limit, pi, alpha)
        ms = rng.integers(1, limit + 1, size=int(rng.integers(1, 70)))
        ref = []
        for m in ms:  # one size at a time, as the plan's search computed it
            lo = int(max(0, sps.binom.ppf(1e-12, int(m), q) - 1))
            hi = int(min(int(m), sps.binom.isf(1e-12, int(m), q) + 1))
            ref.append(float(sps.binom.pmf(np.arange(lo, hi + 1), int(m), q) @ g[lo:hi + 1]))
        assert stp.powers_at(ms, q, g).tobytes() == np.array(ref).tobytes()


def test_document_index_kept_equals_fresh_and_is_read_only():
    groups = np.array(["b", "a", "c", "a"], dtype=object)
    docs, doc_of = stats._doc_index(groups)
    fresh_docs, fresh_of = np.unique(groups.astype(str), return_inverse=True)
    assert np.array_equal(docs, fresh_docs) and np.array_equal(doc_of, fresh_of)
    assert stats._doc_index(list("bcaa"))[1].tolist() == [1, 2, 0, 0]  # another order: computed, not served
    assert not docs.flags.writeable and not doc_of.flags.writeable


def test_sign_flip_p_from_the_kept_sign_stream_equals_its_own_draw_for_any_document_count():
    """One stream per seed serves tests over any number of documents, in any order, growing as
    needed and dropped for a third seed: each p is the p of the test drawing its own patterns."""
    rng = np.random.default_rng(11)
    for k, n_perm, seed in [(40, 3000, 0), (25, 5000, 0), (300, 4097, 0), (17, 100, 1), (90, 3000, 2), (40, 3000, 0)]:
        groups = np.arange(k).astype(str)
        diffs = rng.normal(size=k) if k % 2 else rng.integers(-2, 3, size=k).astype(float) + 0.5
        assert stats.sign_flip_test(diffs, groups, n_perm=n_perm, seed=seed) == _reference_sign_flip_p(
            diffs, groups, n_perm, seed), (k, n_perm, seed)
    assert len(sign_stream._SIGN_STREAMS) <= 2


def test_sign_stream_is_the_generators_draws_and_longer_streams_are_not_kept(monkeypatch):
    expected = np.random.default_rng(5).integers(0, 2, size=10_000) * 2 - 1
    assert np.array_equal(sign_stream.sign_stream(5, 10_000), expected)
    assert np.array_equal(sign_stream.sign_stream(5, 1_000), expected[:1_000])
    monkeypatch.setattr(sign_stream, "SIGN_STREAM_MAX", 500)
    sign_stream._SIGN_STREAMS.clear()
    assert np.array_equal(sign_stream.sign_stream(5, 2_000), expected[:2_000])
    assert not sign_stream._SIGN_STREAMS



def test_stream_patterns_are_the_streams_signs_packed_and_kept_per_size():
    k, n_perm = 21, 5000
    got = sign_stream.stream_patterns(3, n_perm, k)
    signs = sign_stream.sign_stream(3, n_perm * k).reshape(n_perm, k)
    unpacked = np.unpackbits(got, axis=0, bitorder="little")[:k].T.astype(np.int8) * 2 - 1
    assert np.array_equal(unpacked, signs)
    assert sign_stream.stream_patterns(3, n_perm, k) is got and not got.flags.writeable
    assert sign_stream.stream_patterns(3, n_perm, k + 1) is not got
    sign_stream.stream_patterns(None, 100, k)
    assert all(key[0] == 3 for key in sign_stream._PACKED)  # an unseeded draw is never kept


@pytest.mark.parametrize("k", [1, 7, 8, 13, 16])
def test_exact_patterns_are_every_sign_pattern_once_in_binary_order(k):
    got = np.unpackbits(sign_stream.exact_patterns(k), axis=0, bitorder="little")[:k].T.astype(int) * 2 - 1
    expected = ((np.arange(2 ** k)[:, None] >> np.arange(k)) & 1) * 2 - 1
    assert np.array_equal(got, expected)
    values = np.random.default_rng(k).normal(size=k)
    assert np.allclose(sign_stream.signed_sums(sign_stream.exact_patterns(k), values), expected @ values,
                       rtol=0, atol=1e-12 * np.abs(values).sum())
