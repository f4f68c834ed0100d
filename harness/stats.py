"""Statistics every protocol reports: document bootstrap, DKW slack, McNemar, correlations,
Williams' test, and document-grouped splits.

Why one module: each number here has exactly one implementation, tested against an independent
computation (scipy, sklearn or a brute-force loop), so every protocol reports the same thing
under the same name. All randomness comes from ``np.random.default_rng(seed)``.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Callable

import numpy as np
from scipy import stats as sps

from harness.errors import ConfigError, HarnessError
from harness.sign_stream import exact_patterns, signed_sums, stream_patterns

# --------------------------------------------------------------------------------------------
# Document-level bootstrap
# --------------------------------------------------------------------------------------------

MIN_BOOTSTRAP = 1000  # docs/metrics.md §5: at least 1,000 document-level resamples
# Bootstrap draw matrices are n_boot x documents (8 bytes a cell, a few alive at once): a job's
# draws times documents is bounded, so a large table with many draws ends in one line naming
# protocol.n_boot, not in an out-of-memory kill (measured: 20,000 draws over 100,000 synthetic
# documents peaked at 16 GB; 1,000 over 100,000, at this bound, at 1.8 GB). 13,500 draws over
# HotpotQA's 7,405 documents fit.
MAX_BOOTSTRAP_CELLS = 100_000_000


def check_bootstrap_size(n_boot: int, n_docs: int, where: str) -> None:
    """ConfigError naming ``protocol.n_boot`` when ``n_boot`` draws over ``n_docs`` documents
    (``where`` says whose) are above MAX_BOOTSTRAP_CELLS, with the largest n_boot that fits."""
    if n_docs > 0 and int(n_boot) * int(n_docs) > MAX_BOOTSTRAP_CELLS:
        fits = MAX_BOOTSTRAP_CELLS // int(n_docs)
        hint = (f"at most {fits} draws fit" if fits >= MIN_BOOTSTRAP else
                f"even {MIN_BOOTSTRAP} draws do not fit; use fewer documents")
        raise ConfigError("protocol.n_boot", f"{n_boot} draws over {n_docs} documents ({where}) are "
                                             f"{int(n_boot) * int(n_docs):,} bootstrap cells, above the "
                                             f"{MAX_BOOTSTRAP_CELLS:,} a job may hold in memory; {hint}")


def _doc_index(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique documents, document index of each question).

    Documents are sorted so the resample draws depend only on the set of documents, not on row
    order: the same questions give the same interval.
    """
    g = np.asarray(groups).astype(str)
    return _kept_doc_index(g.dtype.str, g.shape, g.tobytes())


DOC_INDEX_KEPT = 32  # document indexes kept: every test of a comparison indexes the same documents


@functools.lru_cache(maxsize=DOC_INDEX_KEPT)
def _kept_doc_index(dtype: str, shape: tuple, data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """``_doc_index`` kept by the exact bytes of the documents as strings (read-only arrays)."""
    docs, inverse = np.unique(np.frombuffer(data, dtype=dtype).reshape(shape), return_inverse=True)
    docs.setflags(write=False)
    inverse.setflags(write=False)
    return docs, inverse


def _per_question(caller: str, values, groups) -> tuple[np.ndarray, np.ndarray]:
    """(values as floats, groups) checked to be 1-D, aligned and non-empty, or a HarnessError
    naming the caller."""
    v = np.asarray(values, dtype=float)
    g = np.asarray(groups)
    if v.ndim != 1 or len(v) != len(g):
        raise HarnessError(f"{caller}: values ({v.shape}) and groups ({g.shape}) must align")
    if len(v) == 0:
        raise HarnessError(f"{caller}: no questions")
    return v, g


def bootstrap_draws(n_docs: int, n_boot: int, seed: int) -> np.ndarray:
    """The (n_boot x n_docs) matrix of drawn document indices (with replacement).

    Exposed so that tests can replay exactly the draws of ``doc_bootstrap_ci`` in a loop.
    """
    rng = np.random.default_rng(seed)
    return rng.integers(0, n_docs, size=(n_boot, n_docs))


def _bootstrap_means(values: np.ndarray, doc_of: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Mean of each resample without a loop: mean_b = sum_d C[b,d] S[d] / sum_d C[b,d] N[d],
    C the (n_boot x n_docs) count matrix, S and N the per-document sums and counts."""
    n_boot, n_docs = draws.shape
    sums = np.bincount(doc_of, weights=values, minlength=n_docs)
    counts = np.bincount(doc_of, minlength=n_docs).astype(float)
    offsets = (np.arange(n_boot) * n_docs)[:, None]
    count_matrix = np.bincount((draws + offsets).ravel(), minlength=n_boot * n_docs)
    count_matrix = count_matrix.reshape(n_boot, n_docs).astype(float)
    return (count_matrix @ sums) / (count_matrix @ counts)


def doc_bootstrap_means(values_by_question, groups, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """The ``n_boot`` document-resampled means behind ``doc_bootstrap_ci`` (same draws, same
    seed), for comparing several statistics on the same resamples."""
    values, groups = _per_question("doc_bootstrap_means", values_by_question, groups)
    if n_boot < 1:
        raise ConfigError("n_boot", f"must be >= 1, got {n_boot}")
    docs, doc_of = _doc_index(groups)
    return _bootstrap_means(values, doc_of, bootstrap_draws(len(docs), n_boot, seed))


def doc_bootstrap_ci(
    values_by_question,
    groups,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    statistic: str | Callable[[np.ndarray], float] = "mean",
) -> tuple[float, float, float]:
    """Percentile bootstrap interval resampling DOCUMENTS with replacement (docs/metrics.md §5).

    A resample draws n_docs documents; the statistic is taken over all questions of the drawn
    documents, counted with multiplicity. For ``statistic="mean"`` (the default, and what the
    protocols use) this is computed without a loop: mean_b = sum_d C[b,d] S[d] / sum_d C[b,d]
    with C the (n_boot x n_docs) count matrix and S, N the per-document sums and counts. Any
    other callable falls back to a loop over resamples. Percentiles use numpy's default
    ('linear') method. Returns (point estimate on the original questions, lo, hi).
    """
    values, groups = _per_question("doc_bootstrap_ci", values_by_question, groups)
    if n_boot < 1:
        raise ConfigError("n_boot", f"must be >= 1, got {n_boot}")
    if not 0 < alpha < 1:
        raise ConfigError("alpha", f"must be in (0, 1), got {alpha}")
    docs, doc_of = _doc_index(groups)
    n_docs = len(docs)
    draws = bootstrap_draws(n_docs, n_boot, seed)
    if statistic == "mean":
        point = float(values.mean())
        boot = _bootstrap_means(values, doc_of, draws)
    elif callable(statistic):
        point = float(statistic(values))
        members = [np.flatnonzero(doc_of == d) for d in range(n_docs)]
        boot = np.empty(n_boot)
        for b in range(n_boot):
            idx = np.concatenate([members[d] for d in draws[b]])
            boot[b] = statistic(values[idx])
    else:
        raise ConfigError("statistic", f"must be 'mean' or a callable, got {statistic!r}")
    lo, hi = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return point, float(lo), float(hi)


# --------------------------------------------------------------------------------------------
# Budget slack and paired tests
# --------------------------------------------------------------------------------------------


def dkw_epsilon(n: int, delta: float = 0.05) -> float:
    """One-sided DKW slack sqrt(ln(1/delta) / (2n)) (docs/metrics.md §6; Massart's constant).

    P(sup_s (F_n(s) - F(s)) > eps) <= exp(-2 n eps^2) = delta: with probability >= 1 - delta
    the true share of questions scoring above a calibrated threshold exceeds the calibration
    share by at most eps, so calibrating to max(0, rho - eps) keeps usage <= rho. Only the
    upper side matters (overspending), hence ln(1/delta), not the two-sided ln(2/delta).

    The bound assumes the n calibration scores are i.i.d. and exchangeable with test scores.
    Questions of one document are correlated and the halves are split by document, so the
    effective sample size lies between the number of documents and n: the slack computed from
    n questions is a lower bound on the honest slack when documents hold several questions.
    """
    if n < 1:
        raise ConfigError("n_cal", f"DKW slack needs at least one calibration question, got {n}")
    if not 0 < delta < 1:
        raise ConfigError("dkw_delta", f"must be in (0, 1), got {delta}")
    return math.sqrt(math.log(1.0 / delta) / (2.0 * n))


def mcnemar_exact(a_hits, b_hits) -> tuple[int, int, float]:
    """Exact two-sided McNemar test on paired binary outcomes.

    Returns (b, c, p): b = pairs where A hit and B missed, c = the reverse; p is the two-sided
    exact binomial p-value of b successes in b + c trials at 1/2, i.e. min(1, 2 * P(X <= min)).
    With no discordant pair p = 1. Non-binary input is an error (the test is for hits).
    """
    a = np.asarray(a_hits, dtype=float)
    b_arr = np.asarray(b_hits, dtype=float)
    if a.shape != b_arr.shape:
        raise HarnessError(f"mcnemar_exact: shapes differ ({a.shape} vs {b_arr.shape})")
    for name, arr in (("a_hits", a), ("b_hits", b_arr)):
        if not np.isin(arr, (0.0, 1.0)).all():
            raise HarnessError(f"mcnemar_exact: {name} must be 0/1 hits")
    b = int(np.sum((a == 1) & (b_arr == 0)))
    c = int(np.sum((a == 0) & (b_arr == 1)))
    n = b + c
    if n == 0:
        return b, c, 1.0
    p = min(1.0, 2.0 * float(sps.binom.cdf(min(b, c), n, 0.5)))
    return b, c, p


# --------------------------------------------------------------------------------------------
# Power: what a comparison can resolve
# --------------------------------------------------------------------------------------------


def min_mcnemar_p(n_discordant: int) -> float:
    """The smallest two-sided exact McNemar p-value reachable with ``n_discordant`` discordant
    pairs: all of them on one side, p = min(1, 2 * 0.5**n). With 4 pairs it is 0.125, so no
    outcome of such a comparison is significant at 0.05."""
    n = int(n_discordant)
    if n < 0:
        raise HarnessError(f"min_mcnemar_p: negative number of discordant pairs {n}")
    return min(1.0, 2.0 * 0.5**n)


def min_detectable_difference(diffs, groups, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable mean difference (two-sided level ``alpha``, given ``power``) of paired
    per-question differences ``diffs``, from their observed spread, grouped by document.

    MDD = (z_{1 - alpha/2} + z_{power}) * SE, SE = sqrt(sum_d (T_d - n_d * mean)^2) / n, T_d
    the document's total difference and n_d its number of questions: the cluster-robust
    standard error of the mean difference (questions of a document summed first, as the
    document bootstrap treats them), centred, so that a constant shift (a cost paid on every
    question) is not counted as noise. For hits without a cost and one question per document
    with b + c discordant pairs, SE^2 n^2 = (b + c) - (b - c)^2 / n, so MDD is about
    2.80 * sqrt(b + c) / n, the normal approximation of McNemar's power. No variation at all
    gives 0: nothing can be measured (callers say so, not "perfect resolution").
    """
    d, g = _per_question("min_detectable_difference", diffs, groups)
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ConfigError("alpha/power", f"must be in (0, 1), got alpha={alpha}, power={power}")
    _, doc_of = _doc_index(g)
    per_doc = np.bincount(doc_of, weights=d)
    sizes = np.bincount(doc_of)
    se = math.sqrt(float(np.sum((per_doc - sizes * d.mean()) ** 2))) / len(d)
    return float((sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)) * se)


def holm_adjust(pvalues) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error), in the input order; NaN stays
    NaN and is not counted in the family. Equals statsmodels' ``multipletests(method="holm")``.
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out[order] = adj
    return out


SIGN_FLIP_EXACT_MAX = 16  # up to 2**16 sign patterns are enumerated; beyond, Monte Carlo
SIGN_FLIP_ZERO_TOL = 1e-12  # a document total within this of 0 does not count


def sign_flip_test(diffs, groups, n_perm: int = 20_000, seed: int = 0) -> float:
    """Two-sided paired sign-flip (permutation) test of "no difference", by document.

    H0: each document's total difference sum_{i in d} diff_i is symmetric around 0 (the two
    policies are exchangeable within the document). The statistic is |sum_d s_d T_d| over sign
    patterns s; p = share of patterns at least as extreme as the observed one (with a 1e-12
    tolerance). Documents whose total is 0 do not change the statistic and are dropped. Exact
    (all 2^k patterns) for k <= 16 non-zero documents, else ``n_perm`` seeded random patterns
    with the +1 correction p = (1 + hits) / (1 + n_perm), which keeps the test's size.

    Why not the bootstrap's p: when all k discordant documents point one way no bootstrap
    resample crosses 0, so its p is about 2 e^-k and calls 4 discordant questions significant,
    where the exact test says 2 * 0.5^4 = 0.125. For 0/1 differences with one question per
    document this IS the exact McNemar test (p = ``mcnemar_exact``'s p). The p is kept by the
    non-zero totals, n_perm and seed (``_kept_sign_flip_p``) when the seed is an integer.
    """
    d, g = _per_question("sign_flip_test", diffs, groups)
    _, doc_of = _doc_index(g)
    totals = np.bincount(doc_of, weights=d)
    totals = totals[np.abs(totals) > SIGN_FLIP_ZERO_TOL]
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        return _sign_flip_p(totals, n_perm, seed)  # not reproducible from a key: never kept
    return _kept_sign_flip_p(totals.tobytes(), int(n_perm), int(seed))


SIGN_FLIP_KEPT = 4096  # sign-flip p-values kept by their document totals, n_perm and seed


@functools.lru_cache(maxsize=SIGN_FLIP_KEPT)
def _kept_sign_flip_p(totals: bytes, n_perm: int, seed: int) -> float:
    """``_sign_flip_p`` kept by the exact bytes of the non-zero document totals (float64), n_perm
    and seed: a sweep's end asks the same test of the same totals many times."""
    return _sign_flip_p(np.frombuffer(totals, dtype=np.float64).copy(), n_perm, seed)


def _sign_flip_p(totals: np.ndarray, n_perm: int, seed) -> float:
    """``sign_flip_test``'s p from the non-zero document totals."""
    k = len(totals)
    if k == 0:
        return 1.0
    observed = abs(float(totals.sum()))
    tol = 1e-12 * max(1.0, float(np.abs(totals).sum()))
    if k <= SIGN_FLIP_EXACT_MAX:
        return float(np.mean(np.abs(signed_sums(exact_patterns(k), totals)) >= observed - tol))
    sums = signed_sums(stream_patterns(seed, n_perm, k), totals)  # pattern i: the stream's signs i*k .. (i+1)*k - 1
    hits = int(np.sum(np.abs(sums) >= observed - tol))
    return float((1 + hits) / (1 + n_perm))


# --------------------------------------------------------------------------------------------
# Correlations
# --------------------------------------------------------------------------------------------


def _corr_inputs(x, y) -> tuple[np.ndarray, np.ndarray] | None:
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise HarnessError(f"correlation: inputs must be 1-D and aligned ({x.shape} vs {y.shape})")
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return x, y


def pearson(x, y) -> tuple[float, float]:
    """(r, two-sided p) as scipy.stats.pearsonr; (nan, nan) when an input is constant or n < 3
    (a constant score, e.g. always-keep, has no defined correlation; not an error)."""
    xy = _corr_inputs(x, y)
    if xy is None:
        return math.nan, math.nan
    res = sps.pearsonr(*xy)
    return float(res.statistic), float(res.pvalue)


def spearman(x, y) -> tuple[float, float]:
    """(rho, p) as scipy.stats.spearmanr (average ranks for ties); nan as in ``pearson``."""
    xy = _corr_inputs(x, y)
    if xy is None:
        return math.nan, math.nan
    res = sps.spearmanr(*xy)
    return float(res.statistic), float(res.pvalue)


def kendall(x, y) -> tuple[float, float]:
    """(tau-b, p) as scipy.stats.kendalltau (tau-b handles the many ties of delta in {-1,0,1});
    nan as in ``pearson``."""
    xy = _corr_inputs(x, y)
    if xy is None:
        return math.nan, math.nan
    res = sps.kendalltau(*xy)
    return float(res.statistic), float(res.pvalue)


def williams_test(r_jk: float, r_jh: float, r_kh: float, n: int) -> tuple[float, float]:
    """Williams' t for H0: r_jk == r_jh, two dependent correlations sharing variable j.

    Steiger (1980), eq. 3: t = (r_jk - r_jh) * sqrt((n-1)(1+r_kh) /
    (2 (n-1)/(n-3) |R| + rbar^2 (1-r_kh)^3)), |R| = 1 - r_jk^2 - r_jh^2 - r_kh^2 +
    2 r_jk r_jh r_kh, rbar = (r_jk + r_jh)/2, with n - 3 degrees of freedom. Here j is the gain
    and k, h are two policies' scores on the same questions. Returns (t, two-sided p); nan when
    any correlation is nan.
    """
    if n <= 3:
        raise HarnessError(f"williams_test needs n > 3 questions, got {n}")
    if any(math.isnan(r) for r in (r_jk, r_jh, r_kh)):
        return math.nan, math.nan
    det = 1 - r_jk**2 - r_jh**2 - r_kh**2 + 2 * r_jk * r_jh * r_kh
    rbar = (r_jk + r_jh) / 2
    denom = 2 * ((n - 1) / (n - 3)) * det + rbar**2 * (1 - r_kh) ** 3
    if denom <= 0:
        return math.nan, math.nan
    t = (r_jk - r_jh) * math.sqrt((n - 1) * (1 + r_kh) / denom)
    p = 2 * float(sps.t.sf(abs(t), n - 3))
    return float(t), p


# --------------------------------------------------------------------------------------------
# Document-grouped splits
# --------------------------------------------------------------------------------------------


def _shuffled_docs(groups: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    docs, doc_of = _doc_index(groups)
    order = np.random.default_rng(seed).permutation(len(docs))
    return docs[order], doc_of


def grouped_kfold(groups, n_splits: int = 5, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """K folds by document: list of (train_idx, test_idx), every question in exactly one test.

    Choice (docs/metrics.md is silent): shuffle the sorted unique documents with the seed, then give
    each document in turn to the fold with the fewest questions so far (lowest index on ties),
    as sklearn's GroupKFold balances fold sizes, but seeded rather than size-ordered.
    """
    groups = np.asarray(groups).astype(str)
    docs, _ = _doc_index(groups)
    if n_splits < 2:
        raise ConfigError("n_folds", f"must be >= 2, got {n_splits}")
    if n_splits > len(docs):
        raise ConfigError("n_folds", f"{n_splits} folds need at least as many documents, got {len(docs)}")
    shuffled, _ = _shuffled_docs(groups, seed)
    sizes = {d: c for d, c in zip(*np.unique(groups, return_counts=True))}
    load = np.zeros(n_splits, dtype=int)
    fold_of_doc: dict[str, int] = {}
    for d in shuffled:
        f = int(np.argmin(load))
        fold_of_doc[str(d)] = f
        load[f] += sizes[d]
    fold = np.array([fold_of_doc[g] for g in groups])
    return [(np.flatnonzero(fold != f), np.flatnonzero(fold == f)) for f in range(n_splits)]


def grouped_split(groups, frac: float = 0.8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(first_idx, second_idx): round(frac * n_docs) shuffled documents go to the first part.

    Used for development / held-out (docs/metrics.md §5). Both parts must be non-empty.
    """
    groups = np.asarray(groups).astype(str)
    if not 0 < frac < 1:
        raise ConfigError("dev_frac", f"must be in (0, 1), got {frac}")
    shuffled, _ = _shuffled_docs(groups, seed)
    n_first = int(round(frac * len(shuffled)))
    if n_first == 0 or n_first == len(shuffled):
        raise ConfigError("dev_frac", f"{frac} of {len(shuffled)} documents leaves one side empty")
    first = np.isin(groups, shuffled[:n_first])
    return np.flatnonzero(first), np.flatnonzero(~first)


HALVES_KEPT = 64  # a sweep's splits (seeds x tables) fit; each entry is two index arrays


def stratified_grouped_halves(groups, delta_class, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(calibration_idx, test_idx): two halves by document, stratified by delta class where
    possible (docs/metrics.md §6).

    Uses sklearn StratifiedGroupKFold(n_splits=2, shuffle=True, random_state=seed) and takes its
    first fold as test. When stratification is impossible (e.g. a single delta class) sklearn
    still returns grouped halves; its warning about tiny classes is silenced because "where
    possible" is docs/metrics.md's wording. Needs at least two documents.

    Kept per process by the exact inputs (the pre-flight and protocol B draw the same halves
    for every job of a sweep; sklearn's search costs a good part of a second on thousands of
    questions); the arrays handed out are copies of the kept ones.
    """
    g = np.asarray(groups).astype(str)
    y = np.asarray(delta_class).astype(int)
    cal, test = _kept_halves(g.dtype.str, g.shape, g.tobytes(), y.tobytes(), int(seed))
    return cal.copy(), test.copy()


@functools.lru_cache(maxsize=HALVES_KEPT)
def _kept_halves(dtype: str, shape: tuple, groups: bytes, classes: bytes, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``_draw_halves`` kept by the exact bytes of the documents (as strings) and classes."""
    g = np.frombuffer(groups, dtype=dtype).reshape(shape)
    return _draw_halves(g, np.frombuffer(classes, dtype=int), seed)


def _draw_halves(groups: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.model_selection import StratifiedGroupKFold

    if len(np.unique(groups)) < 2:
        raise HarnessError("stratified_grouped_halves needs at least two documents")
    cv = StratifiedGroupKFold(n_splits=2, shuffle=True, random_state=int(seed) % (2**32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        cal, test = next(cv.split(np.zeros(len(y)), y, groups))
    return np.sort(cal), np.sort(test)
