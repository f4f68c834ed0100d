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
- Reference = the deployable policy with the best DEVELOPMENT estimate, i.e. the policy a team
  would pick before looking at held-out data, chosen inside each unit (a seed, or a seed and
  repeat: ``dev_by_unit``, the nested development utility each job logged per seed or per
  repeat) and compared on that unit's held-out questions only (``ReferenceChoice``): a seed's
  development data holds the held-out questions of the other seeds, so a choice on the mean
  over seeds has seen them. When every unit chose the same policy it is the reference row;
  else the reference is the per-unit choice ("best on development per seed (a 2, b 1)"), no
  row is the reference and every policy is tested against it. ``dev_scores`` (one value per
  policy) is the fallback and is shown in ``dev_utility``. Choosing it by held-out utility and then testing the
  others against it on the same held-out questions is a winner's-curse selection that Holm does
  not correct (10 exchangeable policies: about 14% "worse" verdicts at a nominal 5%). Without
  development estimates the held-out best is used and the table says the choice is optimistic.
  The oracle (``not_deployable``) is compared but never the reference and not in the Holm
  family. A tie for the reference is broken by name and reported as a tie.
- Difference d_i = utility(policy)_i - utility(reference)_i (``diff_vs_ref`` > 0: the policy
  is better; the sign of every table and CSV of the harness). Documents are the units (all
  seeds' and repeats' questions of a document form one document total). Test:
  ``stats.sign_flip_test`` on the document totals of d (exact up to 16 discordant documents,
  else sampled), Holm-adjusted. Interval: the (1 - alpha) interval obtained by inverting that
  test (``harness.paired.sign_flip_interval``) at the level of the policy's Holm step
  (``verdict_stats.stepdown_levels``: alpha * p / its uncapped Holm value), so it excludes 0
  exactly when the Holm-adjusted p < alpha; NaN where no shift can be rejected. Equivalence and
  the sample-size plan are at that level too.
- Verdicts: "reference"; "same decisions" (d = 0 on every question); "worse than reference" /
  "better than reference" when the Holm-adjusted p < alpha; otherwise "cannot be told from
  reference". What the held-out set can resolve (``harness.paired``, docs/metrics.md §12):
  the largest difference it could show (``max_diff``), the minimum detectable difference
  (``mdd``, power ``power``, unadjusted) shown only when below it, and the sample-size plan
  (``plan_questions`` / ``plan_docs``) for the policies that cannot be told apart.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.paired import (
    equivalence_words, interval_words, p_words, paired_comparison, plan_words, resolution_words,
)
from harness.protocols.verdict_stats import at_level, stepdown_levels

TIE_TOL = 1e-12
PAIR_KEYS = ("seed", "repeat", "qid")
COLUMNS = (
    "policy", "n_questions", "dev_utility", "utility", "diff_vs_ref", "ci_low", "ci_high", "level", "p", "p_holm",
    "mdd", "max_diff", "detectable", "discordant_docs", "discordant_questions", "plan_questions", "plan_docs",
    "p_better", "equivalent", "verdict",
)
# per-row facts kept for the text (``attrs["details"]``), not CSV columns
DETAIL_KEYS = ("p_exact", "n_patterns", "min_p", "cost_only", "plan_capped", "plan_why", "same")


def pair_frame(
    decisions: Mapping[str, pd.DataFrame], pair_keys: tuple[str, ...] = PAIR_KEYS, column: str = "utility"
) -> tuple[pd.DataFrame, list[str]]:
    """One row per paired question: the pair keys (those of ``pair_keys`` the frames have; the
    decision table pairs on (seed, split, qid)), ``doc_id`` and one ``column`` (utility by
    default) column per policy."""
    keys: list[str] | None = None
    merged: pd.DataFrame | None = None
    labels = list(decisions)
    for label in labels:
        frame = decisions[label]
        missing = {"qid", "doc_id", column} - set(frame.columns)
        if missing:
            raise HarnessError(f"policy {label!r}: decisions lack column(s) {sorted(missing)}")
        these = [k for k in pair_keys if k in frame.columns]
        if keys is None:
            keys = these
        elif these != keys:
            raise HarnessError(f"policy {label!r}: decisions keyed by {these}, others by {keys}")
        part = frame[keys + ["doc_id", column]].rename(columns={column: label})
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


@dataclass(frozen=True)
class ReferenceChoice:
    """The reference chosen inside each unit (a seed and split or repeat) on data disjoint from
    that unit's test questions, so no question tests a reference that was chosen on it.

    Why per unit: a split's calibration (or development) half holds the test questions of the
    other splits; a reference chosen on the mean over splits has seen them, and in a null
    simulation it beat the others on test beyond chance (9-10% sweeps with a false "<" at a
    nominal 5%). Per unit, the reference is a procedure ("the best on this split's own
    calibration data"); when every unit picks the same policy it is that policy.
    ``by_unit`` maps a unit (its values of ``keys``) to the chosen label, ``tied`` to the labels
    tied with it there (within TIE_TOL; broken by name)."""

    keys: tuple[str, ...]
    by_unit: dict
    tied: dict = field(default_factory=dict)
    source: str = "development"

    @classmethod
    def one(cls, basis: Mapping[str, float], candidates, source: str) -> "ReferenceChoice":
        """One choice for every unit (``choose_reference`` on ``basis``)."""
        ref, ties = choose_reference(basis, candidates)
        return cls((), {(): ref}, {(): tuple(ties[1:])}, source)

    @property
    def single(self) -> str | None:
        """The label every unit chose, or None when the units chose differently."""
        chosen = set(self.by_unit.values())
        return next(iter(chosen)) if len(chosen) == 1 else None

    @property
    def counts(self) -> list[tuple[str, int]]:
        """(label, number of units that chose it), most often first (ties by name)."""
        return sorted(Counter(self.by_unit.values()).items(), key=lambda kv: (-kv[1], kv[0]))

    @property
    def name(self) -> str:
        """The reference as tables print it: the policy, or the per-unit choice and its counts."""
        if self.single is not None:
            return self.single
        unit = self.keys[-1] if self.keys else "unit"
        return f"best on {self.source} per {unit} (" + ", ".join(f"{k} {n}" for k, n in self.counts) + ")"

    @property
    def tied_labels(self) -> list[str]:
        """Every label tied with a unit's choice in some unit (sorted), the choices excluded."""
        chosen = set(self.by_unit.values())
        return sorted({t for ts in self.tied.values() for t in ts} - chosen)

    def values(self, frame: pd.DataFrame) -> np.ndarray:
        """Per row of a paired ``frame`` (pair keys + one column per label), the value of the
        label its unit chose."""
        if not self.keys:
            return frame[self.single].to_numpy(dtype=float)
        units = list(zip(*(frame[k].to_numpy() for k in self.keys)))
        try:
            chosen = [self.by_unit[tuple(_plain(v) for v in u)] for u in units]
        except KeyError as exc:
            raise HarnessError(f"reference: no choice for the unit {dict(zip(self.keys, exc.args[0]))}") from None
        out = np.empty(len(frame), dtype=float)
        for label in set(chosen):
            mask = np.fromiter((c == label for c in chosen), dtype=bool, count=len(chosen))
            out[mask] = frame.loc[mask, label].to_numpy(dtype=float)
        return out


def _plain(value):
    """A unit key value as a plain Python scalar (numpy ints and floats hash like Python's, but
    keep the keys one type)."""
    return value.item() if hasattr(value, "item") else value


def choose_per_unit(
    basis: Mapping[tuple, Mapping[str, float]], keys: tuple[str, ...], candidates, source: str
) -> ReferenceChoice:
    """Choose the reference in each unit of ``basis`` (unit -> label -> value) among
    ``candidates`` (``choose_reference`` per unit)."""
    by_unit, tied = {}, {}
    for unit, values in basis.items():
        ref, ties = choose_reference(values, candidates)
        key = tuple(_plain(v) for v in unit)
        by_unit[key], tied[key] = ref, tuple(ties[1:])
    return ReferenceChoice(tuple(keys), by_unit, tied, source)


def _reference_choice(frame: pd.DataFrame, candidates: list[str], dev_by_unit, dev: dict, means: dict) -> ReferenceChoice:
    """Per unit on development data when every unit of ``frame`` has every candidate's
    development value; else one choice on ``dev`` (the mean development value; said to be
    optimistic when ``dev_by_unit`` is ``((), {})``: repeats whose means overlap the other
    repeats' held-out questions), else on held-out data (optimistic)."""
    if dev_by_unit:
        keys, basis = dev_by_unit
        units = {tuple(_plain(v) for v in u) for u in zip(*(frame[k].to_numpy() for k in keys))} if keys else set()
        if keys and all(k in frame.columns for k in keys) and units and all(
            u in basis and all(c in basis[u] and math.isfinite(float(basis[u][c])) for c in candidates) for u in units
        ):
            return choose_per_unit({u: basis[u] for u in units}, keys, candidates, "development")
    if all(label in dev for label in candidates):
        # dev_by_unit given without keys: the caller knows the means overlap other units' held-out data
        source = "development (mean over repeats: optimistic)" if dev_by_unit is not None else "development"
        return ReferenceChoice.one(dev, candidates, source)
    return ReferenceChoice.one(means, candidates, "held-out (optimistic)")


def compare_with_reference(
    decisions: Mapping[str, pd.DataFrame],
    *,
    dev_scores: Mapping[str, float] | None = None,
    dev_by_unit: tuple[tuple[str, ...], Mapping[tuple, Mapping[str, float]]] | None = None,
    not_deployable: tuple[str, ...] = ("oracle",),
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
    power: float = 0.8,
    margin: float = 0.01,
) -> pd.DataFrame:
    """Each policy against the reference (see module docstring); one row per policy, the
    reference first, then by held-out utility (ties in name order). ``dev_by_unit`` = (unit
    keys, unit -> label -> development utility): the reference is chosen inside each unit
    (``ReferenceChoice``). ``attrs["reference"]`` names it, ``attrs["reference_from"]`` says on
    what it was chosen, ``attrs["tied"]`` lists policies tied with it there."""
    if not decisions:
        raise HarnessError("compare_with_reference: no policies to compare")
    frame, labels = pair_frame(decisions)
    groups = frame["doc_id"].astype(str).to_numpy()
    means = {label: float(frame[label].mean()) for label in labels}
    candidates = sorted(label for label in labels if label not in not_deployable) or sorted(labels)
    dev = {k: float(v) for k, v in (dev_scores or {}).items() if v is not None and math.isfinite(float(v))}
    choice = _reference_choice(frame, candidates, dev_by_unit, dev, means)
    ref = choice.single  # None: the units chose differently, every policy is tested against the choice
    ref_values = choice.values(frame)
    tied = choice.tied_labels
    outcomes = ref_outcomes = None
    if all("chosen" in decisions[label].columns for label in labels):  # the outcome, to tell a cost alone
        outcomes, _ = pair_frame(decisions, column="chosen")
        ref_outcomes = choice.values(outcomes)
    rows, details, data = [], {}, {}
    for label in labels:
        d = frame[label].to_numpy(dtype=float) - ref_values
        row = {
            "policy": label,
            "n_questions": len(frame),
            "dev_utility": dev.get(label, math.nan),
            "utility": means[label],
            "diff_vs_ref": float(d.mean()),
        }
        if label == ref:
            row.update(ci_low=0.0, ci_high=0.0, p=math.nan, mdd=math.nan, max_diff=math.nan, detectable=False,
                       discordant_docs=0, discordant_questions=0, plan_questions=math.nan, plan_docs=math.nan,
                       p_better=math.nan, equivalent=True)
            details[label] = {"same": True}
        else:
            o = None
            if outcomes is not None:
                o = outcomes[label].to_numpy(dtype=float) - ref_outcomes
            c = paired_comparison(d, groups, seed=seed, alpha=alpha, power=power, outcome_diffs=o,
                                  n_questions=int(frame["qid"].nunique()), margin=margin)
            row.update({k: c[k] for k in ("ci_low", "ci_high", "p", "mdd", "max_diff", "detectable", "discordant_docs",
                                          "discordant_questions", "plan_questions", "plan_docs", "p_better",
                                          "equivalent")})
            details[label] = {k: c[k] for k in DETAIL_KEYS}
            data[label] = (d, o if o is not None and c["discordant_questions"] else d)
        rows.append(row)
    out = pd.DataFrame(rows)
    out.attrs["questions"] = int(frame["qid"].nunique())  # the distinct questions behind the plans
    family = out["policy"].isin(not_deployable) | (out["policy"] == ref)
    _holm_with_levels(out, ~family.to_numpy(), details, data, groups, alpha=alpha, margin=margin, power=power,
                      n_questions=int(frame["qid"].nunique()), seed=seed)
    out.loc[out["policy"].isin(not_deployable), "p"] = math.nan  # an upper bound is not tested
    out["verdict"] = [_verdict(row, ref, tied, choice.source.split()[0], details, not_deployable, alpha)
                      for row in out.itertuples()]
    order = sorted(range(len(out)), key=lambda i: (out["policy"].iat[i] != ref, -out["utility"].iat[i], out["policy"].iat[i]))
    result = out.iloc[order][list(COLUMNS)].reset_index(drop=True)
    result.attrs.update(reference=choice.name, reference_from=choice.source, tied=tied, details=details, alpha=alpha,
                        power=power, margin=margin, reference_choice=choice, questions=out.attrs["questions"])
    return result


def _details(table: pd.DataFrame, row) -> dict:
    """The row's detail facts (``DETAIL_KEYS``): from ``attrs`` when the table was just made,
    else rebuilt from its columns (a table read back from CSV)."""
    got = table.attrs.get("details", {}).get(row.policy)
    if got is not None:
        return {**got, "detectable": bool(row.detectable)}
    k = int(row.discordant_docs) if row.discordant_docs == row.discordant_docs else 0
    return {"p_exact": k <= 16, "n_patterns": 2**k if k <= 16 else 20_000, "min_p": min(1.0, 2.0 ** (1 - k)) if k else 1.0,
            "detectable": bool(row.detectable), "cost_only": False, "plan_capped": False, "plan_why": "",
            "same": row.verdict == "same decisions"}


def format_comparison(table: pd.DataFrame, alpha: float = 0.05, power: float | None = None) -> str:
    """A fixed-width text table plus plain sentences about what it allows to conclude: the
    verdicts, and for the policies that cannot be told from the reference what the held-out
    questions can resolve and how many questions would (docs/metrics.md §12)."""
    from harness.protocols.common import text_table

    power = float(table.attrs.get("power", 0.8)) if power is None else power
    level = f"{1 - alpha:.0%}"
    rows = [
        [r.policy, int(r.n_questions), r.dev_utility, r.utility, r.diff_vs_ref, r.ci_low, r.ci_high,
         r.p_holm, r.p_better, r.verdict]
        for r in table.itertuples()
    ]
    text = text_table(
        ["policy", "n", "dev utility", "held-out utility", "policy - ref", f"{level} CI low", f"{level} CI high",
         "Holm p", "P(better)", "verdict"],
        rows,
    )
    margin = float(table.attrs.get("margin", 0.01))
    ref = table.attrs.get("reference", table["policy"].iat[0])
    how = table.attrs.get("reference_from", "development")
    worse = int((table["verdict"] == "worse than reference").sum())
    better = int((table["verdict"] == "better than reference").sum())
    unresolved = int((table["verdict"] == "cannot be told from reference").sum())
    lines = [
        text,
        f"policy - ref > 0: the policy is better. Reference: {ref}, chosen on {how} data; each interval at the level "
        f"of its Holm step (the sign-flip test inverted: it excludes 0 exactly when the Holm p < {alpha:g}), Holm p "
        "from the sign-flip test on document totals; P(better): posterior probability that the policy beats the "
        "reference (Beta(1, 1) prior on the share of discordant documents pointing its way).",
        f"{worse} polic{'y is' if worse == 1 else 'ies are'} worse and {better} better than the reference "
        f"at Holm-adjusted alpha {alpha:g}; {unresolved} cannot be told from it on these held-out questions.",
    ]
    for r in table.itertuples():
        if r.verdict != "cannot be told from reference" and not r.verdict.endswith("than reference"):
            continue
        c = {**_details(table, r), "ci_low": r.ci_low, "ci_high": r.ci_high, "mdd": r.mdd, "max_diff": r.max_diff,
             "discordant_docs": int(r.discordant_docs), "plan_questions": r.plan_questions, "plan_docs": r.plan_docs}
        level = float(r.level) if r.level == r.level else alpha  # the Holm step's: interval and plan
        line = (f"  {r.policy}: {p_words(c)} p on {int(r.discordant_docs)} discordant documents "
                f"({int(r.discordant_questions)} discordant questions); {interval_words(c, level)}; "
                f"{resolution_words(c, alpha, power)}")
        if r.verdict == "cannot be told from reference":
            line += (f"; {equivalence_words({'equivalent': bool(r.equivalent)}, margin)}; "
                     f"{plan_words(c, level, power, f'{r.policy} vs {ref}')}")
        lines.append(line + ".")
    return "\n".join(lines)


def conclusion(table: pd.DataFrame, where: str, alpha: float, power: float | None = None) -> str:
    """One line for the end of a sweep: the verdict counts of a cell, and, when no policy can
    be told from the reference, whether any difference is detectable and the largest
    sample-size plan among them."""
    power = float(table.attrs.get("power", 0.8)) if power is None else power
    told = table["verdict"].str.endswith("than reference")
    open_rows = [r for r in table.itertuples() if r.verdict == "cannot be told from reference"]
    n_ref = int(table["verdict"].str.startswith("reference").sum())
    head = f"Policy vs policy at {where}: {int(told.sum())} of {len(table) - n_ref} policies told from the reference"
    if not open_rows:
        return head + "."
    dets = [_details(table, r) for r in open_rows]
    detectable = sum(bool(d["detectable"]) for d in dets)
    if detectable == 0:
        head += f"; no difference is detectable with these questions for any of the {len(open_rows)} others"
    else:
        head += f"; {len(open_rows)} cannot be told apart ({detectable} of them with a detectable difference)"
    plans = [(r.plan_questions, r.plan_docs, d, r.policy, r.level) for r, d in zip(open_rows, dets)
             if r.plan_questions == r.plan_questions]
    if plans:
        q, m, d, name, level = min(plans, key=lambda t: t[0])
        more = "more than " if d["plan_capped"] else "about "
        level = float(level) if level == level else alpha
        have = int(table.attrs.get("questions", 0))
        ref = table.attrs.get("reference", table["policy"].iat[0])
        head += (f"; the closest ({name} vs {ref}) needs {more}{int(q):,} held-out questions ({int(m):,} documents) for "
                 f"{power:.0%} power at its Holm level {level:.2g}")
        if have and q <= have:
            head += f", no more than the {have:,} tested: this sample fell short by chance or its effect is smaller"
    return head + "."


def _verdict(row, ref: str, tied: list, where: str, details: dict, not_deployable, alpha: float) -> str:
    """One policy's verdict against the reference, at the Holm-adjusted alpha."""
    if row.policy == ref:
        others = ", ".join(tied) if len(tied) <= 2 else f"{len(tied)} others"
        return "reference" + (f" (tied on {where} with {others})" if tied else "")
    if details[row.policy]["same"]:
        return "same decisions"
    if row.policy in not_deployable:
        return "upper bound, not deployable"
    if row.p_holm < alpha:
        return "better than reference" if row.diff_vs_ref > 0 else "worse than reference"
    return "cannot be told from reference"


def _holm_with_levels(out: pd.DataFrame, family: np.ndarray, details: dict, data: dict, groups, *, alpha: float,
                      margin: float, power: float, n_questions: int, seed: int) -> None:
    """``p_holm`` and ``level`` over the ``family`` rows, then each row's interval, equivalence
    and plan at its Holm step's level (``verdict_stats.at_level``), in place."""
    out["p_holm"] = out["level"] = math.nan
    adjusted, levels = stepdown_levels(out.loc[family, "p"].to_numpy(), alpha=alpha)
    out.loc[family, "p_holm"], out.loc[family, "level"] = adjusted, levels
    for i in np.flatnonzero(family):
        label = out.at[i, "policy"]
        if not details[label]["same"]:
            d, basis = data[label]
            got = at_level(d, basis, groups, level=float(out.at[i, "level"]), p=float(out.at[i, "p"]), margin=margin,
                           power=power, n_questions=n_questions, seed=seed)
            out.loc[i, ["ci_low", "ci_high", "plan_questions", "plan_docs"]] = [
                got["ci_low"], got["ci_high"], got["plan_questions"], got["plan_docs"]]
            out.at[i, "equivalent"] = got["equivalent"]
            details[label].update(plan_capped=got["plan_capped"], plan_why=got["plan_why"])


def open_comparisons(table: pd.DataFrame, where: str, alpha: float, power: float | None = None) -> list[dict]:
    """The policies that cannot be told from the reference, as ``harness.paired.closing_line``
    reads them."""
    power = float(table.attrs.get("power", 0.8)) if power is None else power
    ref = table.attrs.get("reference", table["policy"].iat[0])
    out = []
    for r in table.itertuples():
        if r.verdict == "cannot be told from reference":
            d = _details(table, r)
            out.append({"where": f"{r.policy} vs {ref} at {where}", "detectable": bool(d["detectable"]),
                        "questions": r.plan_questions, "docs": r.plan_docs, "capped": bool(d["plan_capped"]),
                        "alpha": float(r.level) if r.level == r.level else alpha, "power": power,
                        "protocol": "protocol A", "unit": "held-out questions",
                        "share": float(table.attrs.get("share", 1.0)), "have": int(table.attrs.get("questions", 0))})
    return out
