"""What one paired comparison of two decision rules can show (docs/metrics.md §12).

Why a module of its own: a verdict ("better", "worse", "cannot be told apart") is only as good
as the questions behind it. Every protocol that prints one (protocol A's summary, the policy
comparison, the decision table) reports the same five facts, computed here once:

- the sign-flip ``p`` on document totals (``stats.sign_flip_test``), exact or sampled;
- an interval for the mean difference that AGREES with that test: the shifts the test does not
  reject (``sign_flip_interval``), or none where no shift is ever rejected;
- the largest difference the data could show (``max_showable_difference``) and whether any
  difference is detectable at all (smallest reachable p below alpha, MDD below the largest);
- a sample-size plan from the observed discordance (``sample_size_plan``): about how many
  questions (documents) the exact test needs for the asked power.

Differences are per question, ``policy - reference``; documents are the units of every test.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from harness.errors import ConfigError
from harness.sign_patterns import Memo, array_key, pattern_sums, seed_key
from harness.sign_test_power import first_powered, sign_test_power_given_discordant
from harness.stats import (
    SIGN_FLIP_EXACT_MAX,
    SIGN_FLIP_ZERO_TOL,
    _doc_index,
    _per_question,
    min_detectable_difference,
    sign_flip_test,
)

PLAN_MAX_DOCS = 100_000  # beyond this a plan is reported as "more than"
# the plan's discordant split is the posterior mean under this Beta prior (pos + a) / (k + a + b):
# shrunk toward even, so 8 discordant documents all one way plan with 0.83, not with certainty
PLAN_PRIOR = (2.0, 2.0)


def document_totals(diffs, groups) -> tuple[np.ndarray, np.ndarray]:
    """(per-document total difference T_d, per-document number of questions n_d), documents
    sorted by id as ``stats`` orders them."""
    d, g = _per_question("document_totals", diffs, groups)
    _, doc_of = _doc_index(g)
    return np.bincount(doc_of, weights=d), np.bincount(doc_of).astype(float)


def min_reachable_p(k: int) -> float:
    """The smallest two-sided sign-flip p reachable with ``k`` documents whose totals differ
    from 0: every one of them pointing the same way, 2 of 2^k patterns, p = min(1, 2^(1 - k)).
    With k <= 5 it is >= 0.0625: no outcome is significant at alpha 0.05."""
    if k < 0:
        raise ValueError(f"min_reachable_p: negative count {k}")
    return 1.0 if k == 0 else min(1.0, 2.0 ** (1 - int(k)))


def max_showable_difference(diffs, groups) -> float:
    """The largest mean difference the sign-flip test's data could show: sum_d |T_d| / n, the
    mean difference if every discordant document pointed the same way. For 0/1 hits with one
    question per document this is (rescues + harms) / n."""
    totals, sizes = document_totals(diffs, groups)
    return float(np.abs(totals).sum() / sizes.sum())


# ---- Sample-size plan: exact power of the sign test on discordant documents


def normal_plan_docs(q: float, pi: float, alpha: float, power: float) -> float:
    """Connor's (1987) normal approximation of the sign test's sample size, in documents:
    ((z_{1-alpha/2} sqrt(q) + z_power sqrt(q - mu^2)) / mu)^2 with mu = q (2 pi - 1). It is a
    few percent below the exact size (discreteness); used only to start and bound the search."""
    mu = q * (2 * pi - 1)
    za, zb = sps.norm.ppf(1 - alpha / 2), sps.norm.ppf(power)
    return ((za * math.sqrt(q) + zb * math.sqrt(max(q - mu * mu, 0.0))) / abs(mu)) ** 2


def sample_size_plan(diffs, groups, alpha: float = 0.05, power: float = 0.8, n_questions: int | None = None,
                     prior: tuple[float, float] = PLAN_PRIOR) -> dict:
    """About how many documents (and questions) the exact test would need for ``power`` at
    two-sided ``alpha``, from the observed discordance (docs/metrics.md §12):

    - q = k / n_docs, the share of documents whose total difference is not 0 (discordant);
    - pi = the share of those whose total is positive (the policy's rescues : harms, by document),
      shrunk by the Beta ``prior`` (a, b): (pos + a) / (k + a + b); (0, 0) plans with the observed
      share, which all-one-way data make certain and the plan too small;
    - documents = the smallest M (searched upward from half the normal approximation, in unit
      steps below 400 documents, else in steps of 1/200 of it and then in unit steps) at which
      the exact two-sided sign test on the discordant documents of M new documents, each
      discordant with probability q and positive with probability pi, has power >= ``power``;
    - questions = ceil(M * n / n_docs), n / n_docs the observed questions per document; n is
      ``n_questions`` (the distinct questions behind the rows) when the rows repeat questions
      (seeds, repeats or splits stacked), else the number of rows.

    The sign test is the sign-flip test when every discordant document carries the same total
    (0/1 hits, one discordant question per document); with unequal totals (several discordant
    questions in a document, a cost) the plan is an approximation. Returns a dict with
    ``docs``, ``questions`` (NaN when there is no plan), ``q``, ``pi``, ``capped`` (more than
    ``PLAN_MAX_DOCS`` needed) and ``why`` (the reason when there is no plan). Plans are kept
    (``Memo``) by all they depend on: the positive and negative totals, documents, n and settings."""
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ConfigError("alpha/power", f"must be in (0, 1), got alpha={alpha}, power={power}")
    totals, sizes = document_totals(diffs, groups)
    n_docs, n = len(totals), float(sizes.sum() if n_questions is None else n_questions)
    pos = int(np.sum(totals > SIGN_FLIP_ZERO_TOL))
    neg = int(np.sum(totals < -SIGN_FLIP_ZERO_TOL))
    key = (pos, neg, n_docs, n, float(alpha), float(power), tuple(float(x) for x in prior))
    return dict(_PLANS.get(key, lambda: _plan(pos, neg, n_docs, n, alpha, power, prior)))


NO_PLAN = {"docs": math.nan, "questions": math.nan, "q": math.nan, "pi": math.nan, "capped": False, "why": ""}
PLANS_KEPT = 4096  # plans kept (``Memo``): a plan depends only on its counts and settings
_PLANS = Memo(PLANS_KEPT)


def _plan(pos: int, neg: int, n_docs: int, n: float, alpha: float, power: float, prior: tuple[float, float]
          ) -> dict:
    """``sample_size_plan`` from the counts of positive and negative document totals, the
    documents, the questions ``n`` and the settings (all it depends on)."""
    k = pos + neg
    out = {"docs": math.nan, "questions": math.nan, "q": k / n_docs, "pi": (pos / k) if k else math.nan,
           "capped": False, "why": ""}
    if k == 0:
        out["why"] = "no discordant document to plan from"
        return out
    if pos == neg:
        out["why"] = "the discordant documents split evenly: no number of questions gives the power"
        return out
    q, pi = k / n_docs, (pos + prior[0]) / (k + prior[0] + prior[1])
    out["pi"] = pi
    approx = normal_plan_docs(q, pi, alpha, power)
    if approx > PLAN_MAX_DOCS:
        out.update(docs=float(PLAN_MAX_DOCS), questions=float(math.ceil(PLAN_MAX_DOCS * n / n_docs)), capped=True)
        return out
    start = max(1, int(approx // 2))
    limit = min(PLAN_MAX_DOCS, int(math.ceil(3 * approx)) + 50)
    g = sign_test_power_given_discordant(limit, pi, alpha)
    step = max(1, int(approx) // 200)  # unit steps below 400 documents; coarse, then unit, above
    m = first_powered(start, limit, step, q, g, power)
    if m > limit:
        out.update(docs=float(limit), questions=float(math.ceil(limit * n / n_docs)), capped=True)
        return out
    m = first_powered(max(start, m - step + 1), m, 1, q, g, power)
    out.update(docs=float(m), questions=float(math.ceil(m * n / n_docs)))
    return out


# ---- The interval that agrees with the test: inverting the sign-flip test on document totals


INTERVALS_KEPT = 4096  # interval ends kept (``Memo``): a few numbers each
_INTERVALS = Memo(INTERVALS_KEPT)


def sign_flip_interval(
    diffs, groups, *, alpha: float = 0.05, n_perm: int = 20_000, seed: int = 0, p_at_zero: float | None = None,
    tol: float = 1e-10,
) -> tuple[float, float]:
    """The (1 - alpha) interval for the mean per-question difference obtained by inverting the
    sign-flip test (docs/metrics.md §12): the shifts delta for which the sign-flip test of
    "the residual document totals r_d = T_d - delta * n_d are symmetric around 0" gives
    p >= alpha. Model: T_d = delta * n_d + e_d with e_d independent and symmetric, so at the true
    delta the residuals are exchangeable in sign and the test has its size; the interval then
    covers delta with probability >= 1 - alpha.

    Computed by bisection on each side of the estimate (where p = 1), between it and the shift
    at which every residual has the same sign (p = 2 / 2^n_docs); 0 is decided by the test's
    own p (``p_at_zero``, ``stats.sign_flip_test`` by default), so the interval excludes 0
    exactly when that p < alpha: it never contradicts the verdict. Patterns: exact (all 2^n)
    for up to 16 documents, else ``n_perm`` seeded random patterns with the +1 correction.
    Returns (nan, nan) when no shift is rejected on a side (too few documents: no informative
    interval). Ends are accurate to ``tol`` times the range searched. The ends are kept
    (``Memo``) by the document totals and sizes, alpha, p_at_zero, tol, n_perm and seed."""
    d, g = _per_question("sign_flip_interval", diffs, groups)
    if not 0 < alpha < 1:
        raise ConfigError("alpha", f"must be in (0, 1), got {alpha}")
    totals, sizes = document_totals(d, g)
    if p_at_zero is None:
        p_at_zero = sign_flip_test(d, g, n_perm=n_perm, seed=seed)

    def ends() -> tuple[float, float]:
        return _inverted_test(totals, sizes, alpha=alpha, p_at_zero=p_at_zero, tol=tol, n_perm=n_perm, seed=seed)

    sk = seed_key(seed)
    if sk is None:
        return ends()
    key = (array_key(totals), array_key(sizes), float(alpha), float(p_at_zero), float(tol), int(n_perm), sk)
    return _INTERVALS.get(key, ends)


def _inverted_test(totals: np.ndarray, sizes: np.ndarray, *, alpha: float, p_at_zero: float, tol: float,
                   n_perm: int, seed: int) -> tuple[float, float]:
    """``sign_flip_interval``'s ends from the document totals and sizes (bisection per side)."""
    n = sizes.sum()
    point = float(totals.sum() / n)
    a, b, exact = pattern_sums(totals, sizes, int(n_perm), seed)
    scale = max(1.0, float(np.abs(totals).sum()))

    def p_of(delta: float) -> float:
        observed = abs(float(totals.sum() - delta * n))
        hits = int(np.sum(np.abs(a - delta * b) >= observed - 1e-12 * scale))
        return hits / len(a) if exact else (1 + hits) / (1 + len(a))

    ratio = totals / sizes
    span = float(ratio.max() - ratio.min()) + 1.0
    ends = []
    for side in (-1.0, 1.0):
        outer = float(ratio.min() - span) if side < 0 else float(ratio.max() + span)
        if p_of(outer) >= alpha:
            return math.nan, math.nan
        inner = point
        if (outer < 0 < point) or (point < 0 < outer):
            if p_at_zero < alpha:
                outer = 0.0  # rejected: the end lies between 0 and the estimate
            else:
                inner = 0.0  # accepted: the end lies beyond 0
        width = abs(outer - inner)
        while abs(outer - inner) > tol * max(width, 1e-300):
            mid = (outer + inner) / 2
            if p_of(mid) >= alpha:
                inner = mid
            else:
                outer = mid
        ends.append(inner)
    return float(ends[0]), float(ends[1])


# ---- Equivalence and the probability that the policy is better

DEFAULT_EQUIVALENCE_MARGIN = 0.01  # protocol.equivalence_margin: a utility difference too small to matter


def equivalence_interval(diffs, groups, *, alpha: float = 0.05, n_perm: int = 20_000, seed: int = 0,
                         p_at_zero: float | None = None) -> tuple[float, float]:
    """The (1 - 2 alpha) interval of ``sign_flip_interval``: two one-sided sign-flip tests at
    ``alpha`` (TOST) reject both "delta <= -margin" and "delta >= margin" exactly when it lies
    inside (-margin, margin) (the sign-flip statistic is symmetric, so the two-sided p at level
    2 alpha is twice the one-sided p). (nan, nan) when not informative."""
    if not 0 < alpha < 0.5:
        raise ConfigError("alpha", f"must be in (0, 0.5) for two one-sided tests, got {alpha}")
    return sign_flip_interval(diffs, groups, alpha=2 * alpha, n_perm=n_perm, seed=seed, p_at_zero=p_at_zero)


def posterior_better(diffs, groups, prior: tuple[float, float] = (1.0, 1.0)) -> float:
    """P(the policy beats the reference | the discordant documents), a Beta-binomial model: each
    discordant document points the policy's way with probability pi, pi ~ Beta(a, b) (uniform by
    default); with pos / neg documents whose total is positive / negative the posterior is
    Beta(a + pos, b + neg) and the reported probability is P(pi > 1/2). 0.5 with no discordant
    document. It ignores the sizes of the totals (a cost paid on a document counts as one harm)."""
    totals, _ = document_totals(diffs, groups)
    pos = int(np.sum(totals > SIGN_FLIP_ZERO_TOL))
    neg = int(np.sum(totals < -SIGN_FLIP_ZERO_TOL))
    return float(sps.beta.sf(0.5, prior[0] + pos, prior[1] + neg))


# ---------------------------------------------------------------------- one comparison, in full


def paired_comparison(
    diffs, groups, *, seed: int = 0, alpha: float = 0.05, power: float = 0.8, n_perm: int = 20_000,
    outcome_diffs=None, n_questions: int | None = None, margin: float = DEFAULT_EQUIVALENCE_MARGIN,
    n_boot: int | None = None, at_alpha: bool = True,
) -> dict:
    """Every number of one paired comparison of per-question differences ``diffs`` (policy -
    reference; documents ``groups`` as clusters), written once for protocol A, the policy
    comparison and the decision table (docs/metrics.md §12):

    ``point`` (mean); ``ci_low`` / ``ci_high`` (``sign_flip_interval`` at 1 - alpha, NaN when
    not informative; [0, 0] when every difference is 0); ``p`` (sign-flip, 1.0 when every
    difference is 0), ``p_exact`` and ``n_patterns`` (2^k or ``n_perm``); ``mdd``
    (``stats.min_detectable_difference``), ``max_diff`` (``max_showable_difference``),
    ``min_p`` (``min_reachable_p``), ``detectable`` (min_p < alpha and mdd < max_diff);
    ``discordant_docs``; ``discordant_questions`` (questions whose OUTCOME differs when
    ``outcome_diffs`` is given, else whose difference is not 0) and ``cost_only`` (differences
    exist but no outcome differs: the difference is the cost alone); ``plan_docs`` /
    ``plan_questions`` / ``plan_capped`` / ``plan_why`` (``sample_size_plan`` of the outcome
    differences when ``outcome_diffs`` is given and some outcome differs: the plan rests on the
    rescues and harms, not on the cost a policy pays; else of ``diffs``; ``n_questions`` the
    distinct questions behind stacked rows); ``same``; ``equivalent`` (two one-sided sign-flip
    tests at alpha against +-``margin``: the ``equivalence_interval`` inside (-margin, margin);
    ``tost_low`` / ``tost_high`` that interval) and ``p_better`` (``posterior_better``).
    ``n_boot`` is accepted and ignored (the bootstrap interval is gone). ``at_alpha`` False: the
    caller decides at another level and computes the interval, equivalence and plan there
    (``verdict_stats.at_level``), so they are NaN here (not equivalent) unless ``same``."""
    del n_boot
    d, g = _per_question("paired_comparison", diffs, groups)
    totals, sizes = document_totals(d, g)
    same = bool(np.all(d == 0))
    k = int(np.sum(np.abs(totals) > SIGN_FLIP_ZERO_TOL))
    p = 1.0 if same else sign_flip_test(d, g, n_perm=n_perm, seed=seed)
    later = not (at_alpha or same)
    lo, hi, t_lo, t_hi = _intervals(d, g, same=same, later=later, alpha=alpha, n_perm=n_perm, seed=seed, p=p)
    mdd = min_detectable_difference(d, g, alpha=alpha, power=power)
    max_diff = max_showable_difference(d, g)
    min_p = min_reachable_p(k)
    o = None
    if outcome_diffs is not None:
        o = np.asarray(outcome_diffs, dtype=float)
        if o.shape != d.shape:
            raise ValueError(f"paired_comparison: outcome_diffs {o.shape} and diffs {d.shape} must align")
        discordant_q = int(np.sum(np.abs(o) > SIGN_FLIP_ZERO_TOL))
    else:
        discordant_q = int(np.sum(np.abs(d) > SIGN_FLIP_ZERO_TOL))
    # the plan rests on the questions whose outcome differs (rescues and harms); a cost alone
    # (no outcome differs) is planned from the utility totals
    basis = o if outcome_diffs is not None and discordant_q > 0 else d
    plan = NO_PLAN if later else sample_size_plan(basis, g, alpha=alpha, power=power, n_questions=n_questions)
    return {
        "equivalent": bool(math.isfinite(t_lo) and math.isfinite(t_hi) and -margin < t_lo and t_hi < margin),
        "tost_low": t_lo,
        "tost_high": t_hi,
        "p_better": posterior_better(d, g),
        "point": float(d.mean()),
        "ci_low": lo,
        "ci_high": hi,
        "p": p,
        "p_exact": k <= SIGN_FLIP_EXACT_MAX,
        "n_patterns": 2**k if k <= SIGN_FLIP_EXACT_MAX else int(n_perm),
        "mdd": mdd,
        "max_diff": max_diff,
        "min_p": min_p,
        "detectable": bool(min_p < alpha and mdd < max_diff),
        "discordant_docs": k,
        "discordant_questions": discordant_q,
        "cost_only": bool(outcome_diffs is not None and not same and discordant_q == 0),
        "plan_docs": plan["docs"],
        "plan_questions": plan["questions"],
        "plan_capped": plan["capped"],
        "plan_why": plan["why"],
        "same": same,
    }


def _intervals(d, g, *, same: bool, later: bool, alpha: float, n_perm: int, seed: int, p: float) -> tuple:
    """(ci_low, ci_high, tost_low, tost_high) of ``paired_comparison`` at alpha: 0 when every
    difference is 0, NaN when its caller computes them at another level (``later``)."""
    if later:
        return math.nan, math.nan, math.nan, math.nan
    if same:
        return 0.0, 0.0, 0.0, 0.0
    lo, hi = sign_flip_interval(d, g, alpha=alpha, n_perm=n_perm, seed=seed, p_at_zero=p)
    t_lo, t_hi = equivalence_interval(d, g, alpha=alpha, n_perm=n_perm, seed=seed, p_at_zero=p)
    return lo, hi, t_lo, t_hi


# ---------------------------------------------------------------------------------------- words


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.1e}"


def p_words(c: dict) -> str:
    """"exact sign-flip" or "sampled sign-flip, N patterns" for the p of ``c``."""
    return "exact sign-flip" if c["p_exact"] else f"sampled sign-flip, {int(c['n_patterns'])} patterns"


def interval_words(c: dict, alpha: float) -> str:
    """The interval of ``c`` in words, or that there is none."""
    if not (math.isfinite(c["ci_low"]) and math.isfinite(c["ci_high"])):
        return "no informative interval (too few documents for the sign-flip test to reject any difference)"
    return f"{(1 - alpha) * 100:.4g}% interval [{_num(c['ci_low'])}, {_num(c['ci_high'])}] (inverted sign-flip test)"


def plan_words(c: dict, alpha: float, power: float, comparison: str) -> str:
    """"about N questions (M documents) for P% power at alpha A (X vs Y)", or why there is no
    plan: every plan names the comparison it sizes (``comparison``: "ridge vs always-keep") and
    its units, so a plan read out of its line still says what it is for."""
    if c["plan_why"]:
        return f"no sample-size plan for {comparison}: {c['plan_why']}"
    more = "more than " if c["plan_capped"] else "about "
    return (f"{more}{int(c['plan_questions'])} questions ({int(c['plan_docs'])} documents) for "
            f"{power:.0%} power at alpha {alpha:.2g} ({comparison})")


def resolution_words(c: dict, alpha: float, power: float) -> str:
    """What the comparison can resolve, in one clause: the largest showable difference, then
    the MDD only when it is below it, else "no difference is detectable with these questions"."""
    if c["same"]:
        return "the same utility on every question: nothing to detect"
    head = f"largest difference these data could show {_num(c['max_diff'])}"
    if c["cost_only"]:
        head = "the difference is the cost alone (0 discordant questions); " + head
    if c["detectable"]:
        return f"{head}; minimum detectable difference {_num(c['mdd'])} ({power:.0%} power, alpha {alpha:g})"
    why = (f"{c['discordant_docs']} discordant documents reach p >= {_num(c['min_p'])}"
           if c["min_p"] >= alpha else f"minimum detectable difference {_num(c['mdd'])} is not below it")
    return f"{head}; no difference is detectable with these questions ({why})"


def closing_line(items: list[dict]) -> str:
    """The sweep's last line (docs/metrics.md §12) over every protocol's undecided comparisons
    (dicts: ``where``, ``detectable``, ``questions``, ``docs``, ``capped``, ``alpha`` (its level),
    ``power``; where known ``protocol``, ``unit``, ``share`` of the dataset, ``have`` tested): how
    many can detect nothing, and the smallest plan in dataset questions (questions / share),
    never a minimum over two units. "" when there is none."""
    if not items:
        return ""
    blind = sum(not it["detectable"] for it in items)
    n = len(items)
    if blind == n:
        head = f"no difference is detectable with these questions in any of the {n} comparisons that cannot be told apart"
    elif blind:
        head = (f"no difference is detectable with these questions in {blind} of the {n} comparisons that cannot be "
                "told apart")
    else:
        head = f"{n} comparisons cannot be told apart, each with a detectable difference"
    plans = [it for it in items if it["questions"] == it["questions"]]
    if not plans:
        return f"Overall: {head}; no sample-size plan (no discordant question points one way)."
    best = min(plans, key=lambda it: it["questions"] / float(it.get("share", 1.0) or 1.0))
    share = float(best.get("share", 1.0) or 1.0)
    more = "more than" if best["capped"] else "about"
    where = f"{best['protocol']}: {best['where']}" if best.get("protocol") else best["where"]
    level = f"level {best['alpha']:.2g}" if "protocol" in best else f"alpha {best['alpha']:g}"
    if share < 1.0:
        need = (f"{more} {math.ceil(best['questions'] / share):,} dataset questions ({int(best['questions']):,} "
                f"{best.get('unit', 'questions')}, {share:.0%} of the dataset; {int(best['docs']):,} documents)")
    else:
        unit = best.get("unit", "questions")
        need = f"{more} {int(best['questions']):,} {unit} ({int(best['docs']):,} documents)"
    head += f"; the closest ({where}) needs {need} for {best['power']:.0%} power at {level}"
    have = int(best.get("have", 0) or 0)
    if have and best["questions"] <= have:
        head += (f", no more than the {have:,} tested: a sample that size has that power at the planned effect, "
                 "this one fell short by chance or its effect is smaller")
    return f"Overall: {head}."


def equivalence_words(c: dict, margin: float) -> str:
    """"equivalent within +-m (two one-sided sign-flip tests)" or "inconclusive: ..."."""
    if c["equivalent"]:
        return f"equivalent within +-{margin:g} (two one-sided sign-flip tests)"
    return f"inconclusive: neither a difference nor equivalence within +-{margin:g} is shown"

