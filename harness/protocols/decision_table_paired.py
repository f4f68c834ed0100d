"""The decision table's paired tests: the reference at each budget, every policy against it,
Holm within the budget and over the whole table.

Why apart: ``harness.protocols.decision_table`` builds the rows (one per cell, policy and budget)
from the jobs' frontiers; this module fills in their test columns (``mark``, ``diff_vs_ref``,
the interval, p, ``p_holm``, ``p_holm_table``, the plan and ``note``) as that module's docstring
describes, and hands the router of each budget to ``harness.protocols.router_comparisons``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from harness.paired import paired_comparison
from harness.protocols.compare import ReferenceChoice, choose_per_unit, pair_frame
from harness.protocols.router_comparisons import UNIT_KEYS, router_comparisons
from harness.protocols.verdict_stats import at_level, stepdown_levels
from harness.stats import holm_adjust

PAIR_KEYS = ("seed", "split", "qid")
BUDGET_DIGITS = 9


def _reference_choice(labels: list[str], cal_by_unit: dict, test_utility: dict[str, float]) -> ReferenceChoice:
    """Inside each (seed, split) on that split's calibration half, disjoint from its test half
    (``compare.ReferenceChoice``); without calibration utilities on test (optimistic)."""
    if cal_by_unit and all(
        all(label in got and math.isfinite(got[label]) for label in labels) for got in cal_by_unit.values()
    ):
        return choose_per_unit(cal_by_unit, UNIT_KEYS, labels, "calibration")
    return ReferenceChoice.one(test_utility, labels, "test (optimistic)")


@dataclass
class _Paired:
    """One budget's paired per-question frames (utility, expected outcome, run probability)
    and the reference's values in them; ``frame`` None, with ``reason``, when no paired test is
    possible."""

    frame: pd.DataFrame | None
    reason: str
    groups: np.ndarray | None = None
    outcomes: pd.DataFrame | None = None
    probs: pd.DataFrame | None = None
    ref_utility: np.ndarray | None = None
    ref_outcome: np.ndarray | None = None
    ref_prob: np.ndarray | None = None


def compare_at_budget(rows: list[dict], decisions: dict[str, pd.DataFrame | None], oracles: set[str], *,
                      n_boot: int, seed: int, alpha: float, power: float, margin: float = 0.01,
                      cal_by_unit: dict | None = None, vs_fixed: list | None = None,
                      sizes_by_unit: dict | None = None, arm_names: dict | None = None) -> None:
    """Choose the reference among ``rows`` (one budget of one cell) and fill in the paired test
    of every other row, in place; the router against the fixed decisions goes to ``vs_fixed``."""
    deployable = [r for r in rows if r["policy"] not in oracles]
    if not deployable:
        for r in rows:
            r.update(mark="?", note="no deployable policy at this budget")
        return
    labels = sorted(r["policy"] for r in deployable)
    choice = _reference_choice(labels, cal_by_unit, {r["policy"]: r["utility"] for r in deployable})
    tied = _name_reference(rows, choice)
    have = {p: d for p, d in decisions.items() if d is not None and not d.empty}
    frame, reason = _paired_frame(choice, have)
    if vs_fixed is not None and rows:
        router_comparisons(rows[0], choice, have, vs_fixed, alpha=alpha, power=power, margin=margin, seed=seed,
                           sizes=sizes_by_unit or {}, arm_names=arm_names or {})
    paired = _paired_values(frame, reason, choice, have)
    for r in rows:
        _test_against_reference(r, choice.single, paired, have, oracles, tied, seed=seed, alpha=alpha, power=power,
                                margin=margin)
    _holm_within_budget(rows, choice, paired, have, oracles)


def _name_reference(rows: list[dict], choice: ReferenceChoice) -> list[str]:
    """Write the reference, how it was chosen and its ties into every row of the budget; return
    the labels tied for it, the chosen one first (``choice.single`` None: the splits chose
    differently, and every policy is tested against the choice)."""
    tied = [choice.single or choice.name] + choice.tied_labels
    for r in rows:
        r.update(reference=choice.name, reference_from=choice.source, reference_tied=", ".join(tied[1:]))
    return tied


def _test_against_reference(r: dict, ref: str | None, paired: _Paired, have: dict, oracles: set[str],
                            tied: list[str], **test) -> None:
    """One row of the budget: the reference marked "ref", a row without a paired test "?" (the
    oracle "") with the reason, every other row tested (``_test_row``)."""
    label = r["policy"]
    if label == ref:
        r.update(mark="ref", diff_vs_ref=0.0)
        if tied[1:]:
            r["note"] = f"tied on calibration utility with {', '.join(tied[1:])}; reference by name"
        return
    if paired.frame is None or label not in have:
        r.update(mark="" if label in oracles else "?", note=paired.reason)
        return
    _test_row(r, paired, oracles, tied, **test)


def _holm_within_budget(rows: list[dict], choice: ReferenceChoice, paired: _Paired, have: dict,
                        oracles: set[str]) -> None:
    """Holm over the deployable policies tested at this budget (``p_holm``), and what each of
    them decides between (``_decisions_key``) for the table-wide family."""
    ref = choice.single
    family = [r for r in rows if r["policy"] != ref and r["policy"] not in oracles and paired.frame is not None
              and r["policy"] in have]
    if family:
        adjusted = holm_adjust([r["p"] for r in family])
        for r, p in zip(family, adjusted):
            r["p_holm"] = float(p)
            r["_hypothesis"] = _decisions_key(paired.probs, r["policy"], choice.name, paired.ref_prob,
                                              rows[0]["budget"])


def _paired_frame(choice: ReferenceChoice, have: dict[str, pd.DataFrame]) -> tuple[pd.DataFrame | None, str]:
    """(the policies' expected test utility paired on (seed, split, qid), "") or (None, why not):
    a paired test needs the decisions of every label the reference was chosen from."""
    frame = None
    reason = "no per-question decisions (budget_decisions.parquet)"
    if all(label in have for label, _ in choice.counts):
        try:
            frame, _ = pair_frame(have, PAIR_KEYS)
        except HarnessError as exc:
            reason = str(exc)
    else:
        reason += f" for the reference {choice.name}"
    return frame, reason


def _paired_values(frame: pd.DataFrame | None, reason: str, choice: ReferenceChoice,
                   have: dict[str, pd.DataFrame]) -> _Paired:
    """The paired frames of one budget and the reference's values in them (``_Paired``); the
    expected outcome (utility + cost * run probability) tells a difference of the cost alone."""
    if frame is None:
        return _Paired(None, reason)
    groups = frame["doc_id"].astype(str).to_numpy()
    outcomes, _ = pair_frame({p: d.assign(outcome=d["base"] + d["prob"] * (d["extra"] - d["base"]))
                              for p, d in have.items()}, PAIR_KEYS, column="outcome")
    probs, _ = pair_frame(have, PAIR_KEYS, column="prob")
    try:
        ref_utility, ref_outcome, ref_prob = (choice.values(f) for f in (frame, outcomes, probs))
    except HarnessError as exc:
        return _Paired(None, str(exc), groups, outcomes, probs)
    return _Paired(frame, reason, groups, outcomes, probs, ref_utility, ref_outcome, ref_prob)


def _test_row(r: dict, paired: _Paired, oracles: set[str], tied: list[str], *, seed: int, alpha: float,
              power: float, margin: float) -> None:
    """One policy's paired test against the reference at one budget, in place (its mark and
    the table-level interval come later, ``_mark_over_the_table``)."""
    label, frame = r["policy"], paired.frame
    d = frame[label].to_numpy(dtype=float) - paired.ref_utility
    o = paired.outcomes[label].to_numpy(dtype=float) - paired.ref_outcome
    groups = paired.groups
    # a tested router's interval, equivalence and plan are computed at its table level (``_at_level``)
    stats = paired_comparison(d, groups, seed=seed, alpha=alpha, power=power, outcome_diffs=o,
                              n_questions=int(frame["qid"].nunique()), margin=margin, at_alpha=label in oracles)
    r.update(diff_vs_ref=float(d.mean()), **{k: stats[k] for k in (
        "ci_low", "ci_high", "p", "mdd", "max_diff", "detectable", "discordant_docs", "discordant_questions",
        "plan_questions", "plan_docs", "p_better", "equivalent")}, questions=int(frame["qid"].nunique()))
    if not stats["same"] and label not in oracles:  # for the interval and plan at the table's level
        r["_data"] = (d, o if stats["discordant_questions"] else d, groups, int(frame["qid"].nunique()), margin,
                      power, seed)
    if label in oracles:
        r["p"] = math.nan  # an upper bound is shown, not tested
    notes = _row_notes(label in oracles, label in tied, tied[0], stats)
    if notes:
        r["note"] = "; ".join(notes)


def _row_notes(oracle: bool, tied: bool, first: str, stats: dict) -> list[str]:
    """Why a tested row reads as it does: an upper bound, a tie for the reference, the same
    decisions, a cost-only difference, a sampled sign-flip."""
    notes = []
    if oracle:
        notes.append("upper bound, not deployable: shown, not tested")
    elif tied:
        notes.append(f"tied with {first} on calibration utility in a split")
    if stats["same"]:
        notes.append("same decisions as the reference")
    elif stats["cost_only"]:
        notes.append("the difference is the cost alone (0 discordant questions)")
    if not stats["same"] and not stats["p_exact"]:
        notes.append(f"sampled sign-flip, {stats['n_patterns']} patterns")
    return notes


def _decisions_key(probs: pd.DataFrame, label: str, ref: str, ref_prob: np.ndarray, budget: float) -> str:
    """What one comparison decides between: the policy's and the reference's run probability on
    every paired question (and the budget). Two costs that leave all of it unchanged test the
    same decisions, and count once in the table's Holm family."""
    h = hashlib.sha256(repr((label, ref, round(float(budget), BUDGET_DIGITS))).encode())
    for col in [c for c in PAIR_KEYS if c in probs.columns] + ["doc_id"]:
        h.update("\x1f".join(map(str, probs[col].tolist())).encode())
    h.update(np.ascontiguousarray(probs[label].to_numpy(dtype=float)).tobytes())
    h.update(np.ascontiguousarray(np.asarray(ref_prob, dtype=float)).tobytes())
    return h.hexdigest()


def mark_over_the_table(rows: list[dict], alpha: float) -> None:
    """Holm over every tested comparison of the table (all budgets x policies of every cost,
    docs/metrics.md §12), the comparisons that decide between the same decisions at several costs
    counted once with the largest of their p (the conclusion must hold at each of those costs);
    ``p_holm_table`` and the mark follow it, in place."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("_hypothesis"):
            groups.setdefault(r["_hypothesis"], []).append(r)
    keys = list(groups)
    adjusted, levels = stepdown_levels([max(r["p"] for r in groups[k]) for k in keys], alpha=alpha)
    for key, p, level in zip(keys, adjusted, levels):
        for r in groups[key]:
            r["p_holm_table"] = float(p)
            r["mark"] = ("<" if r["diff_vs_ref"] < 0 else ">") if p < alpha else "="
            _at_level(r, float(level))


def _at_level(r: dict, level: float) -> None:
    """A row's interval, equivalence and plan at the level its mark was decided at (the table's
    Holm step, ``verdict_stats.stepdown_levels``): the interval excludes 0 exactly when the mark
    is "<" or ">"; the TOST interval at 1 - 2 level; the plan at that level."""
    r["level"] = level
    if "_data" not in r:
        return
    d, basis, groups, n_q, margin, power, seed = r.pop("_data")
    got = at_level(d, basis, groups, level=level, p=r["p"], margin=margin, power=power, n_questions=n_q, seed=seed)
    r.update({k: got[k] for k in ("ci_low", "ci_high", "equivalent", "plan_questions", "plan_docs")})
