"""The numbers behind a verdict, each at the level the verdict is decided at (docs/metrics.md §9).

Why a module of its own: a verdict claims one thing at one level. Its difference test is
Holm-adjusted over the sweep's cells, so its interval, its equivalence test and its sample-size
plan must be at that same level, or a reader sees "as good" beside an interval that excludes 0.
The pieces here are pure functions of per-question rows; ``harness.protocols.verdict`` decides
and words the verdicts with them.

- ``stepdown_levels``: Holm's adjusted p (with Shaffer's count of the hypotheses that can be
  true together) and each hypothesis's own level alpha * p / h (h its uncapped value): the
  unadjusted p is below that level exactly when the adjusted p is below alpha, so an interval
  or plan at it agrees with the decision.
- ``tost_p``: the p of two one-sided sign-flip tests against +-margin on document totals.
- ``oracle_rows``: the best any router could do at a budget on the same questions (the headroom).
- ``tie_alternatives``: every equally valid calibration choice when a split's choice was a tie.
- ``overspent``: whether a split's realized usage exceeds the budget beyond its sampling error.
"""

from __future__ import annotations

import hashlib
import itertools
import math

import numpy as np
import pandas as pd
from scipy import stats as sps

from harness.paired import document_totals, equivalence_interval, paired_comparison, sample_size_plan, sign_flip_interval
from harness.sign_patterns import Memo, array_key, pattern_sums, seed_key

FIXED_ARMS = (("always_keep", 0.0), ("always_extra", 1.0))  # the fixed decisions and their usage
MAX_TIE_ALTERNATIVES = 64  # beyond this many equally valid calibration choices a cell says "cannot tell"
OVERSPEND_LEVEL = 0.05  # a split is over budget when its usage exceeds rho by more than z_(1-level) SE


class Comparisons(list):
    """The router-vs-fixed comparisons a decision table carries in ``attrs`` for its verdicts.
    They hold per-question arrays; pandas deep-copies ``attrs`` on every operation on the table,
    so this list is shared, not copied (it is never changed after the table is built)."""

    def __deepcopy__(self, memo) -> "Comparisons":
        return self


def stepdown_levels(pvalues, slots=None, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(adjusted p, the level each hypothesis is decided at) of Holm's step-down procedure with
    Shaffer's refinement for hypotheses that cannot all be true: ``slots[i]`` names a group of
    which at most one hypothesis is true (a router's "no difference" and "not equivalent" cannot
    both hold). At step j (p sorted ascending) the divisor is the number of slots that still hold
    an untested hypothesis, the most true hypotheses left; every slot distinct (the default) is
    Holm. Adjusted p_(j) = min(1, h_j), h_j = max over steps i <= j of divisor_i * p_(i); the
    level of a hypothesis is alpha * p / h, so its unadjusted p is below its level exactly when
    the adjusted p is below alpha: an interval or plan at that level agrees with the decision.
    For the smallest p it is alpha / divisor (Bonferroni); it never exceeds alpha."""
    p = np.asarray(pvalues, dtype=float)
    slots = list(range(len(p))) if slots is None else list(slots)
    adjusted, level = np.full(p.shape, np.nan), np.full(p.shape, np.nan)
    ok = [i for i in np.argsort(p, kind="stable") if not np.isnan(p[i])]
    left: dict = {}
    for i in ok:
        left[slots[i]] = left.get(slots[i], 0) + 1
    h = 0.0
    for i in ok:
        divisor = sum(1 for n in left.values() if n > 0)
        h = max(h, divisor * float(p[i]))
        adjusted[i] = min(1.0, h)
        level[i] = min(alpha, alpha * float(p[i]) / h) if h > 0 else alpha / max(divisor, 1)
        left[slots[i]] -= 1
    return adjusted, level


def at_level(diffs, basis, groups, *, level: float, p: float, margin: float, power: float, n_questions: int,
             seed: int = 0) -> dict:
    """One comparison's interval, equivalence and plan at ``level`` (its step-down level, p its
    unadjusted p): ``ci_low`` / ``ci_high`` invert the sign-flip test there (0 outside exactly
    when p < level), ``equivalent`` is the (1 - 2 level) interval inside +-``margin``, the plan
    (``plan_questions``, ``plan_docs``, ``plan_capped``, ``plan_why``) rests on ``basis`` (the
    outcome differences where some differ, else the utility differences)."""
    lo, hi = sign_flip_interval(diffs, groups, alpha=level, p_at_zero=p, seed=seed)
    t_lo, t_hi = equivalence_interval(diffs, groups, alpha=level, p_at_zero=p, seed=seed)
    plan = sample_size_plan(basis, groups, alpha=level, power=power, n_questions=n_questions)
    return {"ci_low": lo, "ci_high": hi,
            "equivalent": bool(math.isfinite(t_lo) and math.isfinite(t_hi) and -margin < t_lo and t_hi < margin),
            "plan_questions": plan["questions"], "plan_docs": plan["docs"], "plan_capped": plan["capped"],
            "plan_why": plan["why"]}


def tost_p(diffs, groups, margin: float, *, n_perm: int = 20_000, seed: int = 0) -> float:
    """The p of two one-sided sign-flip tests of "the mean difference is at least +margin" and
    "at most -margin" (the larger of the two one-sided p): each shifts the document totals by
    margin * n_d and asks how often a sign pattern of the residuals is as far on its side as the
    observed one (exact for up to 16 documents, else ``n_perm`` seeded patterns with the +1
    correction, the patterns of ``paired_comparison``). 1.0 when margin <= 0."""
    if not margin > 0:
        return 1.0
    totals, sizes = document_totals(diffs, groups)
    sk = seed_key(seed)
    if sk is None:
        return _tost_p(totals, sizes, margin, n_perm, seed)
    key = (array_key(totals), array_key(sizes), float(margin), int(n_perm), sk)
    return _TOST.get(key, lambda: _tost_p(totals, sizes, margin, n_perm, seed))


TOST_KEPT = 4096  # TOST p-values kept (``Memo``) by the document totals, sizes, margin, n_perm and seed
_TOST = Memo(TOST_KEPT)


def _tost_p(totals: np.ndarray, sizes: np.ndarray, margin: float, n_perm: int, seed) -> float:
    """``tost_p`` from the document totals and sizes."""
    a, b, exact = pattern_sums(totals, sizes, int(n_perm), seed)
    total, n = float(totals.sum()), float(sizes.sum())
    tol = 1e-12 * max(1.0, float(np.abs(totals).sum()) + margin * n)
    upper = int(np.sum(a - margin * b <= total - margin * n + tol))  # H0: delta >= +margin
    lower = int(np.sum(a + margin * b >= total + margin * n - tol))  # H0: delta <= -margin
    hits = max(upper, lower)
    return hits / len(a) if exact else (1 + hits) / (1 + len(a))


def oracle_rows(rows: pd.DataFrame, budget: float, cost: float, unit_keys=("seed", "split")) -> pd.DataFrame:
    """The rows of the best rule at ``budget`` on the same questions: in each unit (seed,
    split), the extra arm runs on the questions it gains most on (extra - base - cost > 0), at
    most budget * n of them in expectation (the last one fractionally). Its utility is the
    largest any router could reach there: the headroom a verdict measures margins against."""
    keys = [k for k in unit_keys if k in rows.columns]
    out = rows.copy()
    gain = out["extra"].to_numpy(dtype=float) - out["base"].to_numpy(dtype=float) - cost
    prob = np.zeros(len(out))
    parts = out.groupby(keys, sort=True).indices.values() if keys else [np.arange(len(out))]
    for idx in parts:
        idx = np.asarray(idx)
        order = idx[np.argsort(-gain[idx], kind="stable")]
        allowed = float(budget) * len(idx)
        full = int(math.floor(allowed + 1e-9))
        take = np.zeros(len(order))
        take[:full] = 1.0
        if full < len(order):
            take[full] = allowed - full
        prob[order] = np.where(gain[order] > 0, take, 0.0)
    out["prob"] = prob
    out["utility"] = out["base"].to_numpy(dtype=float) + prob * gain
    return out


def fixed_comparisons(decisions: pd.DataFrame, cost: float, *, alpha: float = 0.05, power: float = 0.8,
                      margin: float = 0.01, seed: int = 0) -> list[dict]:
    """The rules of ``decisions`` (deployable per-question rows at one budget, stacked over
    seeds and splits: ``doc_id``, ``qid``, ``prob``, ``base``, ``extra``, ``utility`` at the
    cost) against each fixed decision on the same questions: always-keep's utility is the base
    outcome, always-extra's the extra outcome minus ``cost``. One dict per arm with the
    ``paired_comparison`` numbers of rule - arm (unadjusted; ``harness.protocols.verdict``
    recomputes them at the verdict's level from ``data``), the outcome part ``diff_outcome`` and
    the cost part ``diff_cost`` (diff = outcome - cost), and ``key``: the hypothesis (the arm and
    the per-question differences), the same only at costs that change no difference."""
    d = decisions
    groups = d["doc_id"].astype(str).to_numpy()
    base, extra = d["base"].to_numpy(dtype=float), d["extra"].to_numpy(dtype=float)
    prob, utility = d["prob"].to_numpy(dtype=float), d["utility"].to_numpy(dtype=float)
    outcome = base + prob * (extra - base)
    n_q = int(d["qid"].nunique())
    out = []
    for arm, usage in FIXED_ARMS:
        arm_outcome = extra if usage else base
        diffs = utility - (arm_outcome - cost * usage)
        c = paired_comparison(diffs, groups, seed=seed, alpha=alpha, power=power,
                              outcome_diffs=outcome - arm_outcome, n_questions=n_q, margin=margin)
        h = hashlib.sha256(arm.encode())
        for col in [k for k in ("seed", "split", "qid", "doc_id") if k in d.columns]:
            h.update("\x1f".join(map(str, d[col].tolist())).encode())
        h.update(np.ascontiguousarray(np.round(diffs, 12) + 0.0).tobytes())
        diff_outcome = float((outcome - arm_outcome).mean())
        out.append({"arm": arm, "arm_usage": usage, "diff": c["point"], "key": h.hexdigest(),
                    "diff_outcome": diff_outcome, "diff_cost": diff_outcome - c["point"],
                    "n_questions": n_q, "data": (diffs, outcome - arm_outcome, groups),
                    **{k: c[k] for k in ("ci_low", "ci_high", "p", "equivalent", "detectable", "plan_questions",
                                         "plan_docs", "plan_why", "plan_capped", "same", "discordant_docs",
                                         "discordant_questions", "cost_only")}})
    return out


def _unit_rows(rows: pd.DataFrame, keys, unit) -> pd.DataFrame:
    mask = np.ones(len(rows), dtype=bool)
    for key, value in zip(keys, unit):
        mask &= rows[key].to_numpy() == value
    return rows[mask]


def tie_alternatives(choice, have: dict[str, pd.DataFrame], cap: int = MAX_TIE_ALTERNATIVES):
    """Every equally valid router of a calibration ``choice`` (``compare.ReferenceChoice``):
    in each unit the chosen label or any label tied with it there, labels whose decisions in
    that unit are the same counted once. Returns (alternatives, count): alternatives a list of
    (name, rows), the choice itself first (its name ``choice.name``), each other named by where
    it differs ("ridge, gbm at split 3"); None for the list when a label has no rows or there
    are more than ``cap`` of them (``count`` says how many)."""
    units = sorted(choice.by_unit)
    options = []
    for unit in units:
        labels = [choice.by_unit[unit], *[t for t in choice.tied.get(unit, ()) if t != choice.by_unit[unit]]]
        if any(label not in have for label in labels):
            return None, 0
        seen, kept = set(), []
        for label in labels:
            part = _unit_rows(have[label], choice.keys, unit) if choice.keys else have[label]
            sig = np.ascontiguousarray(part["prob"].to_numpy(dtype=float)).tobytes()
            if sig not in seen:
                seen.add(sig)
                kept.append((label, part))
        options.append(kept)
    count = math.prod(len(o) for o in options)
    if count > cap:
        return None, count
    out = []
    for combo in itertools.product(*options):
        rows = pd.concat([part for _, part in combo], ignore_index=True)
        moved = [f"{label} at {_unit_words(choice.keys, unit)}" for unit, (label, _), first in
                 zip(units, combo, options) if label != first[0][0]]
        out.append((choice.name if not moved else f"{choice.name}, with {', '.join(moved)}", rows))
    return out, count


def _unit_words(keys, unit) -> str:
    return " ".join(f"{k} {v}" for k, v in zip(keys, unit)) if keys else "every split"


def overspent(usage, budget: float, n_cal, n_test, level: float = OVERSPEND_LEVEL) -> np.ndarray:
    """Per split: realized test usage above ``budget`` by more than its sampling error,
    z_(1 - level) * sqrt(rho (1 - rho) (1 / n_cal + 1 / n_test)): the spread of a threshold set
    at the (1 - rho) quantile of n_cal calibration scores and applied to n_test new questions.
    A rule calibrated at rho exceeds it in about ``level`` of the splits; usage that merely
    lands above rho (about half of them) is not overspending."""
    u = np.asarray(usage, dtype=float)
    rho = min(max(float(budget), 0.0), 1.0)
    se = np.sqrt(rho * (1 - rho) * (1 / np.asarray(n_cal, dtype=float) + 1 / np.asarray(n_test, dtype=float)))
    return u > rho + sps.norm.ppf(1 - level) * se + 1e-12
