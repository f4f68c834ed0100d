"""Policy against policy: which of a sweep's policies can be told apart from the one a team
would deploy?

Why: the held-out utilities of a sweep's policies often differ by less than one question, and a
table sorted by them reads like a ranking that the data cannot support. Each policy is compared
with a reference policy of its cell on the SAME held-out questions (same seeds, same splits),
by the paired per-question utility difference, and the p-values are Holm-adjusted across the
deployable policies of the cell.

Choices (docs/metrics.md asks for paired document-bootstrap intervals and Holm's adjustment; the rest
is written down here and in docs/numbers.md):
- Input: protocol A's per-question held-out decisions of each policy (``decisions.parquet``:
  ``qid``, ``doc_id``, ``utility``; with ``seed`` and ``repeat`` columns when a policy was run
  under several seeds or repeated splits). Rows are paired on (seed, repeat, qid); every policy
  of a cell must cover the same rows, else the cell is refused with a reason (different
  questions are not a paired comparison).
- Reference = the deployable policy with the best DEVELOPMENT estimate (``dev_scores``: the
  nested development utility each job logged, mean over seeds), i.e. the policy a team would
  pick before looking at held-out data. Choosing it by held-out utility and then testing the
  others against it on the same held-out questions is a winner's-curse selection that Holm does
  not correct (10 exchangeable policies: about 14% "worse" verdicts at a nominal 5%). Without
  development estimates the held-out best is used and the table says the choice is optimistic.
  The oracle (``not_deployable``) is compared but never the reference and not in the Holm
  family. A tie for the reference is broken by name and reported as a tie.
- Difference d_i = utility(reference)_i - utility(policy)_i (> 0: the reference is better).
  Interval: resample DOCUMENTS (all seeds' and repeats' questions of a document move together,
  the conservative choice when a document is held out in several seeds), ``n_boot`` resamples
  from ``seed``, 95% percentile interval (unadjusted). Test: ``stats.sign_flip_test`` on the
  document totals of d (exact up to 16 discordant documents; valid size where the bootstrap's
  own p would call 4 one-sided questions significant), Holm-adjusted.
- Verdicts: "reference"; "same decisions" (d = 0 on every question); "worse than reference" /
  "better than reference" when the Holm-adjusted p < alpha; otherwise "cannot be told from
  reference". The minimum detectable difference (``stats.min_detectable_difference``, power
  0.8, unadjusted) says how large a difference this held-out set could have shown.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.stats import holm_adjust, paired_comparison

TIE_TOL = 1e-12
PAIR_KEYS = ("seed", "repeat", "qid")
COLUMNS = (
    "policy", "n_questions", "dev_utility", "utility", "diff_vs_reference", "ci_low", "ci_high", "p", "p_holm",
    "mdd", "verdict",
)


def pair_frame(
    decisions: Mapping[str, pd.DataFrame], pair_keys: tuple[str, ...] = PAIR_KEYS
) -> tuple[pd.DataFrame, list[str]]:
    """One row per paired question: the pair keys (those of ``pair_keys`` the frames have; the
    decision table pairs on (seed, split, qid)), ``doc_id`` and one utility column per policy."""
    keys: list[str] | None = None
    merged: pd.DataFrame | None = None
    labels = list(decisions)
    for label in labels:
        frame = decisions[label]
        missing = {"qid", "doc_id", "utility"} - set(frame.columns)
        if missing:
            raise HarnessError(f"policy {label!r}: decisions lack column(s) {sorted(missing)}")
        these = [k for k in pair_keys if k in frame.columns]
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


def choose_reference(basis: Mapping[str, float], candidates) -> tuple[str, list[str]]:
    """(reference, all candidates tied with the best ``basis`` value within TIE_TOL, the
    reference first): the best candidate; a tie is broken by name and must be reported."""
    candidates = sorted(candidates)
    top = max(basis[label] for label in candidates)
    tied = [label for label in candidates if basis[label] >= top - TIE_TOL]
    return tied[0], tied


def compare_with_reference(
    decisions: Mapping[str, pd.DataFrame],
    *,
    dev_scores: Mapping[str, float] | None = None,
    not_deployable: tuple[str, ...] = ("oracle",),
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    power: float = 0.8,
) -> pd.DataFrame:
    """Each policy against the reference (see module docstring); one row per policy, the
    reference first, then by held-out utility (ties in name order). ``attrs["reference_from"]``
    says whether the reference was chosen on development ("development") or held-out data
    ("held-out (optimistic)"), ``attrs["tied"]`` lists policies tied with it there."""
    if not decisions:
        raise HarnessError("compare_with_reference: no policies to compare")
    frame, labels = pair_frame(decisions)
    groups = frame["doc_id"].astype(str).to_numpy()
    means = {label: float(frame[label].mean()) for label in labels}
    candidates = sorted(label for label in labels if label not in not_deployable) or sorted(labels)
    dev = {k: float(v) for k, v in (dev_scores or {}).items() if v is not None and math.isfinite(float(v))}
    if all(label in dev for label in candidates):
        basis, reference_from = dev, "development"
    else:
        basis, reference_from = means, "held-out (optimistic)"
    ref, tied = choose_reference(basis, candidates)
    rows = []
    for label in labels:
        d = frame[ref].to_numpy(dtype=float) - frame[label].to_numpy(dtype=float)
        row = {
            "policy": label,
            "n_questions": len(frame),
            "dev_utility": dev.get(label, math.nan),
            "utility": means[label],
            "diff_vs_reference": float(d.mean()),
            "same": bool(np.all(d == 0)),
        }
        if label == ref:
            row.update(ci_low=0.0, ci_high=0.0, p=math.nan, mdd=math.nan)
        else:
            stats = paired_comparison(d, groups, n_boot=n_boot, seed=seed, alpha=alpha, power=power)
            row.update({k: stats[k] for k in ("ci_low", "ci_high", "p", "mdd")})
        rows.append(row)
    out = pd.DataFrame(rows)
    family = out["policy"].isin(not_deployable) | (out["policy"] == ref)
    out["p_holm"] = math.nan
    out.loc[~family, "p_holm"] = holm_adjust(out.loc[~family, "p"].to_numpy())
    out.loc[out["policy"].isin(not_deployable), "p"] = math.nan  # an upper bound is not tested
    verdicts = []
    for row in out.itertuples():
        if row.policy == ref:
            others = ", ".join(tied[1:]) if len(tied) <= 3 else f"{len(tied) - 1} others"
            verdict = "reference" + (f" (tied on {reference_from.split()[0]} with {others})" if len(tied) > 1 else "")
        elif row.same:
            verdict = "same decisions"
        elif row.policy in not_deployable:
            verdict = "upper bound, not deployable"
        elif row.p_holm < alpha:
            verdict = "worse than reference" if row.diff_vs_reference > 0 else "better than reference"
        else:
            verdict = "cannot be told from reference"
        verdicts.append(verdict)
    out["verdict"] = verdicts
    out = out.drop(columns="same")
    order = sorted(range(len(out)), key=lambda i: (out["policy"].iat[i] != ref, -out["utility"].iat[i], out["policy"].iat[i]))
    result = out.iloc[order][list(COLUMNS)].reset_index(drop=True)
    result.attrs.update(reference=ref, reference_from=reference_from, tied=tied[1:])
    return result


def format_comparison(table: pd.DataFrame, alpha: float = 0.05) -> str:
    """A fixed-width text table plus plain sentences about what it allows to conclude."""
    from harness.protocols.common import text_table

    rows = [
        [r.policy, int(r.n_questions), r.dev_utility, r.utility, r.diff_vs_reference, r.ci_low, r.ci_high,
         r.p_holm, r.mdd, r.verdict]
        for r in table.itertuples()
    ]
    text = text_table(
        ["policy", "n", "dev utility", "held-out utility", "ref - policy", "95% CI low", "95% CI high",
         "Holm p", "MDD", "verdict"],
        rows,
    )
    ref = table.attrs.get("reference", table["policy"].iat[0])
    how = table.attrs.get("reference_from", "development")
    worse = int((table["verdict"] == "worse than reference").sum())
    better = int((table["verdict"] == "better than reference").sum())
    unresolved = int((table["verdict"] == "cannot be told from reference").sum())
    lines = [
        text,
        f"reference: {ref}, chosen on {how} data; intervals unadjusted, Holm p from an exact sign-flip "
        f"test by document.",
        f"{worse} polic{'y is' if worse == 1 else 'ies are'} worse and {better} better than the reference "
        f"at Holm-adjusted alpha {alpha:g}; {unresolved} cannot be told from it on these held-out questions",
    ]
    mdds = table.loc[table["verdict"] == "cannot be told from reference", "mdd"]
    mdds = mdds[mdds > 1e-12]
    if len(mdds):
        lines[-1] += f" (differences below about {mdds.median():.3f} in utility, the median MDD, cannot be resolved here)"
    lines[-1] += "."
    return "\n".join(lines)
