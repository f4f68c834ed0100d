"""Policy against policy: which of a sweep's policies can be told apart from the best one?

Why: the held-out utilities of a sweep's policies often differ by less than one question, and a
table sorted by them reads like a ranking that the data cannot support. Each policy is compared
with the best deployable policy of its cell on the SAME held-out questions (same seeds, same
splits), by a paired document bootstrap of the per-question utility difference, and the
p-values are Holm-adjusted across the policies of the cell, so "worse than the best" is a
family-wise statement at level ``alpha``.

Choices (the SPEC asks for paired document-bootstrap intervals and Holm's adjustment; the rest
is written down here and in the README):
- Input: protocol A's per-question held-out decisions of each policy (``decisions.parquet``:
  ``qid``, ``doc_id``, ``utility``; with ``seed`` and ``repeat`` columns when a policy was run
  under several seeds or repeated splits). Rows are paired on (seed, repeat, qid); every policy
  of a cell must cover the same rows, else the cell is refused with a reason (different
  questions are not a paired comparison).
- Reference ("best") = the highest mean held-out utility among deployable policies: the oracle
  (``not_deployable``) is compared but never chosen. When several policies share the highest
  mean (within 1e-12), the first by name is the reference and the others are marked "tied with
  best": a tie never decides a ranking.
- Difference d_i = utility(reference)_i - utility(policy)_i (>= 0 on average means the reference
  is better). Bootstrap: resample DOCUMENTS (all seeds' and repeats' questions of a document
  move together, the conservative choice when a document is held out in several seeds),
  ``n_boot`` resamples drawn once per cell from ``seed`` and shared by all its comparisons,
  95% percentile interval, two-sided p = ``stats.bootstrap_p_value``.
- Verdicts: "best"; "tied with best" (equal mean); "same decisions" (d = 0 on every question);
  "worse than best" when the Holm-adjusted p < alpha; otherwise "cannot be told from best". The
  minimum detectable difference (``stats.min_detectable_difference``, power 0.8) says how large
  a difference this held-out set could have shown.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.stats import bootstrap_p_value, doc_bootstrap_means, holm_adjust, min_detectable_difference

TIE_TOL = 1e-12
PAIR_KEYS = ("seed", "repeat", "qid")
COLUMNS = (
    "policy", "n_questions", "utility", "diff_vs_best", "ci_low", "ci_high", "p", "p_holm", "mdd", "verdict",
)


def _pair_frame(decisions: Mapping[str, pd.DataFrame]) -> tuple[pd.DataFrame, list[str]]:
    """One row per paired question: the pair keys, ``doc_id`` and one utility column per policy."""
    keys: list[str] | None = None
    merged: pd.DataFrame | None = None
    labels = list(decisions)
    for label in labels:
        frame = decisions[label]
        missing = {"qid", "doc_id", "utility"} - set(frame.columns)
        if missing:
            raise HarnessError(f"policy {label!r}: decisions lack column(s) {sorted(missing)}")
        these = [k for k in PAIR_KEYS if k in frame.columns]
        if keys is None:
            keys = these
        elif these != keys:
            raise HarnessError(f"policy {label!r}: decisions keyed by {these}, others by {keys}")
        part = frame[keys + ["doc_id", "utility"]].rename(columns={"utility": label})
        if part.duplicated(keys).any():
            raise HarnessError(f"policy {label!r}: a question appears twice under the same {keys}")
        if merged is None:
            merged = part
            continue
        before = len(merged)
        merged = merged.merge(part.drop(columns="doc_id"), on=keys, how="inner", validate="one_to_one")
        if len(merged) != before or len(part) != before:
            raise HarnessError(
                f"policy {label!r} was evaluated on other held-out questions than {labels[0]!r} "
                f"({len(part)} vs {before} rows, {len(merged)} shared): not a paired comparison"
            )
    assert merged is not None and keys is not None
    return merged.sort_values(keys, kind="stable").reset_index(drop=True), labels


def compare_with_best(
    decisions: Mapping[str, pd.DataFrame],
    *,
    not_deployable: tuple[str, ...] = ("oracle",),
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> pd.DataFrame:
    """Each policy against the best deployable one (see module docstring); one row per policy,
    sorted by mean utility (best first), ties in name order."""
    if not decisions:
        raise HarnessError("compare_with_best: no policies to compare")
    frame, labels = _pair_frame(decisions)
    groups = frame["doc_id"].astype(str).to_numpy()
    means = {label: float(frame[label].mean()) for label in labels}
    candidates = sorted((label for label in labels if label not in not_deployable)) or sorted(labels)
    top = max(means[label] for label in candidates)
    tied = [label for label in candidates if means[label] >= top - TIE_TOL]
    ref = tied[0]
    rows = []
    for label in labels:
        d = frame[ref].to_numpy(dtype=float) - frame[label].to_numpy(dtype=float)
        row = {"policy": label, "n_questions": len(frame), "utility": means[label], "diff_vs_best": float(d.mean())}
        if label == ref:
            row.update(ci_low=0.0, ci_high=0.0, p=math.nan, mdd=math.nan)
        else:
            boot = doc_bootstrap_means(d, groups, n_boot=n_boot, seed=seed)
            lo, hi = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
            row.update(
                ci_low=float(lo),
                ci_high=float(hi),
                p=bootstrap_p_value(boot) if np.any(d != 0) else math.nan,
                mdd=min_detectable_difference(d, groups, alpha=alpha, power=power),
            )
        row["same"] = bool(np.all(d == 0))
        rows.append(row)
    out = pd.DataFrame(rows)
    out["p_holm"] = holm_adjust(out["p"].to_numpy())
    verdicts = []
    for row in out.itertuples():
        if row.policy == ref:
            verdicts.append("best" if len(tied) == 1 else "best (tied)")
        elif row.policy in tied:
            verdicts.append("tied with best")
        elif row.same:
            verdicts.append("same decisions")
        elif row.p_holm < alpha:
            verdicts.append("worse than best" if row.diff_vs_best > 0 else "better than best")
        else:
            verdicts.append("cannot be told from best")
        if row.policy in not_deployable:
            verdicts[-1] += " (upper bound, not deployable)"
    out["verdict"] = verdicts
    out = out.drop(columns="same")
    order = sorted(range(len(out)), key=lambda i: (-out["utility"].iat[i], out["policy"].iat[i]))
    return out.iloc[order][list(COLUMNS)].reset_index(drop=True)


def format_comparison(table: pd.DataFrame, alpha: float = 0.05) -> str:
    """A fixed-width text table plus one plain sentence about what it allows to conclude."""
    from harness.protocols.common import text_table

    rows = [
        [r.policy, int(r.n_questions), r.utility, r.diff_vs_best, r.ci_low, r.ci_high, r.p_holm, r.mdd, r.verdict]
        for r in table.itertuples()
    ]
    text = text_table(
        ["policy", "n", "utility", "best - policy", "95% CI low", "95% CI high", "Holm p", "MDD", "verdict"], rows
    )
    worse = int(table["verdict"].str.startswith("worse").sum())
    unresolved = int(table["verdict"].str.startswith("cannot").sum())
    sentence = (
        f"{worse} polic{'y is' if worse == 1 else 'ies are'} worse than the best at Holm-adjusted alpha {alpha:g}; "
        f"{unresolved} cannot be told from it on these held-out questions"
    )
    if unresolved:
        mdd = table.loc[table["verdict"].str.startswith("cannot"), "mdd"].min()
        sentence += f" (differences below about {mdd:.3f} in utility cannot be resolved here)"
    return f"{text}\n{sentence}."
