"""Protocol B's calibration-size diagnostic (``budget.cal_sizes``; docs/metrics.md §6).

Why: seed 003 reruns its splits at calibration sizes from 32 to 250 and finds nominal
(deployable) thresholds violating the held-out budget in about half of the method-setting
combinations, while budget-safe (conservative, DKW) thresholds nearly never do. A threshold set
on fewer calibration questions is noisier, and the DKW slack grows as 1 / sqrt(n_cal): this
diagnostic shows both on our halves.

For each split of protocol B and each size n_cal: take n_cal questions of that split's
calibration half (``subsample_order``: by document, nested across sizes), recompute the
deployable threshold (target rho) and the conservative one (rho_safe = max(0, rho - eps), eps
the DKW slack of n_cal questions) with ``budget_rules.calibrated_rule`` from the policy's scores of
those questions, and apply them unchanged to the split's whole test half. The scores are the
out-of-fold calibration scores of the full half (and the test scores of the same fold models):
nothing is refitted, so only the threshold sees fewer questions, not the router. A size larger
than the smallest calibration half of the run is skipped (a row per split with the reason).
Choices are written down in docs/protocols.md, "Calibration-size diagnostic".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.protocols.budget_rules import USAGE_TOL, budget_key, calibrated_rule, expected_outcome, run_probability
from harness.protocols.common import text_table
from harness.stats import dkw_epsilon

CAL_SIZE_FRONTIERS = ("deployable", "conservative")
CAL_SIZE_STREAM = 3  # the subsample's seed: [split seed, 3], a stream of its own
MAX_CAL_SIZE = 10**7
MAX_CAL_SIZES = 100
STATS = (("violation_rate", "violated"), ("tolerance_overshoot_rate", "overshoot"),
         ("realized_usage", "realized_usage"))


@dataclass(frozen=True)
class SplitScores:
    """What one split of protocol B leaves for the diagnostic: the calibration half's documents
    and out-of-fold scores, and the test half's scores and outcomes."""

    split: int
    split_seed: int
    cal_groups: np.ndarray
    cal_scores: np.ndarray
    test_scores: np.ndarray
    test_base: np.ndarray
    test_extra: np.ndarray


def check_cal_sizes(sizes) -> tuple[int, ...]:
    """``budget.cal_sizes`` as a tuple of ints (empty: off); ConfigError naming the key (and the
    entry) otherwise. A size must be an integer >= 2 (one question has no quantile to speak of)."""
    if sizes is None:
        return ()
    if isinstance(sizes, (str, bytes, int, float)) or not hasattr(sizes, "__iter__"):
        raise ConfigError("budget.cal_sizes", f"must be a list of integers >= 2 (e.g. [32, 64, 125, 250]) or [] "
                                              f"(off), got {sizes!r}")
    sizes = list(sizes)
    if len(sizes) > MAX_CAL_SIZES:
        raise ConfigError("budget.cal_sizes", f"has {len(sizes)} sizes; at most {MAX_CAL_SIZES}")
    for i, n in enumerate(sizes):
        whole = isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and float(n).is_integer()
        if not (whole and 2 <= n <= MAX_CAL_SIZE):
            raise ConfigError(f"budget.cal_sizes[{i}]", f"must be an integer in [2, {MAX_CAL_SIZE}], got {n!r}")
        if n in sizes[:i]:
            raise ConfigError(f"budget.cal_sizes[{i}]", f"size {n} appears twice")
    return tuple(int(n) for n in sizes)


def subsample_order(groups, seed) -> np.ndarray:
    """Indices of the calibration half in the order the subsamples take them: documents in a
    seeded random order, each document's questions together (seeded random order inside it).
    The size-n subsample is the first n: whole documents plus at most one cut document, so it
    holds exactly n questions, and a smaller subsample is part of a larger one (nested)."""
    groups = np.asarray(groups)
    rng = np.random.default_rng(seed)
    docs, inverse = np.unique(groups, return_inverse=True)
    doc_key = rng.random(len(docs))
    within = rng.random(len(groups))
    return np.lexsort((within, doc_key[inverse]))


def _size_rows(sp: SplitScores, n: int, idx: np.ndarray, budgets, dkw_delta: float, tol: float) -> list[dict]:
    """The rows of one split at one size: each budget's deployable and conservative rules
    calibrated on the subsample ``idx`` and applied to the whole test half."""
    cal = np.asarray(sp.cal_scores, dtype=float)[idx]
    eps = dkw_epsilon(n, dkw_delta)
    n_test = len(sp.test_scores)
    common = {"split": sp.split, "split_seed": sp.split_seed, "cal_size": n, "n_cal_half": len(sp.cal_scores),
              "n_cal_docs": int(len(np.unique(np.asarray(sp.cal_groups)[idx]))), "n_test": n_test, "dkw_eps": eps,
              "skipped": False, "reason": ""}
    rows = []
    for rho in budgets:
        for frontier, target in (("deployable", rho), ("conservative", max(0.0, rho - eps))):
            t, p = calibrated_rule(cal, target)
            prob = run_probability(sp.test_scores, t, p)
            realized = float(prob.sum()) / n_test  # as protocol B computes it: the same number at full size
            rows.append(common | {
                "budget": rho, "frontier": frontier, "target_usage": target, "threshold": t, "tie_prob": p,
                "realized_usage": realized, "usage_error": realized - rho,
                "violated": realized > rho + USAGE_TOL, "overshoot": realized > rho + tol + USAGE_TOL,
                "outcome": expected_outcome(prob, sp.test_base, sp.test_extra),
            })
    return rows


def _skipped_rows(sp: SplitScores, n: int, budgets, smallest: int) -> list[dict]:
    reason = f"larger than the smallest calibration half of the run ({smallest} questions)"
    return [{"split": sp.split, "split_seed": sp.split_seed, "cal_size": n, "n_cal_half": len(sp.cal_scores),
             "n_cal_docs": math.nan, "n_test": len(sp.test_scores), "dkw_eps": math.nan, "skipped": True,
             "reason": reason, "budget": rho, "frontier": frontier, "target_usage": math.nan,
             "threshold": math.nan, "tie_prob": math.nan, "realized_usage": math.nan, "usage_error": math.nan,
             "violated": math.nan, "overshoot": math.nan, "outcome": math.nan}
            for rho in budgets for frontier in CAL_SIZE_FRONTIERS]


def calibration_size_table(splits, sizes, budgets, *, dkw_delta: float, tol: float) -> pd.DataFrame:
    """One row per split, size, budget and frontier (deployable, conservative); a size larger
    than the smallest calibration half of ``splits`` is skipped in every split (rows with
    ``skipped`` and the reason), so every size's rates are over the same splits."""
    splits = list(splits)
    smallest = min(len(sp.cal_scores) for sp in splits) if splits else 0
    rows: list[dict] = []
    for sp in splits:
        order = subsample_order(sp.cal_groups, [int(sp.split_seed), CAL_SIZE_STREAM])
        for n in sizes:
            if n > smallest:
                rows += _skipped_rows(sp, n, budgets, smallest)
            else:
                rows += _size_rows(sp, n, np.sort(order[:n]), budgets, dkw_delta, tol)
    return pd.DataFrame(rows)


def calibration_size_metrics(table: pd.DataFrame) -> dict[str, float]:
    """``budget/cal<n>/skipped`` per size; for a size not skipped ``budget/cal<n>/dkw_eps`` and,
    per budget and frontier, the share of splits over budget and over budget + tol, and the
    mean realized usage: ``budget/<rho>/cal<n>/<frontier>/violation_rate`` (and
    ``tolerance_overshoot_rate``, ``realized_usage``)."""
    out: dict[str, float] = {}
    for n, g in table.groupby("cal_size", sort=True):
        skipped = bool(g["skipped"].astype(bool).all())
        out[f"budget/cal{int(n)}/skipped"] = float(skipped)
        if skipped:
            continue
        out[f"budget/cal{int(n)}/dkw_eps"] = float(g["dkw_eps"].iloc[0])
        for (rho, frontier), h in g.groupby(["budget", "frontier"], sort=True):
            for name, col in STATS:
                out[f"budget/{budget_key(rho)}/cal{int(n)}/{frontier}/{name}"] = float(h[col].astype(float).mean())
    return out


def calibration_size_block(table: pd.DataFrame, metrics: dict[str, float]) -> str:
    """Protocol B's console block: per size and budget, each frontier's violation rate,
    overshoot rate and mean realized usage; skipped sizes with their reason."""
    rows, notes = [], []
    for n in sorted(table["cal_size"].unique()):
        n = int(n)
        if metrics.get(f"budget/cal{n}/skipped", 1.0):
            reason = table.loc[table["cal_size"] == n, "reason"].iloc[0]
            notes.append(f"n_cal {n} skipped: {reason}")
            continue
        for rho in sorted(table["budget"].unique()):
            p = f"budget/{budget_key(rho)}/cal{n}"
            rows.append([f"{n} @ {budget_key(rho)}"] + [metrics[f"{p}/{fr}/{name}"] for fr in CAL_SIZE_FRONTIERS
                                                           for name, _ in STATS])
    n_splits = int(table["split"].nunique())
    head = (f"calibration-size diagnostic ({n_splits} splits; n_cal questions of each calibration half, whole "
            "documents in a seeded order; thresholds from the full half's out-of-fold scores, not refitted; the "
            "test halves unchanged)")
    lines = [head]
    if rows:
        lines.append(text_table(["n_cal @ budget", "deploy viol", "overshoot", "usage", "conserv viol", "overshoot",
                                 "usage"], rows))
    return "\n".join(lines + notes)
