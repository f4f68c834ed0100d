"""The decision table: which policy to deploy at a budget and a cost, and is the difference real?

Why: protocol B reports each policy's frontiers on its own; the question a team asks is the
comparison at ONE operating point (a cost c and a budget rho): which deployable rule spends the
budget best, how sure are we, and what random and the oracle would do with the same usage. This
module is pure (job records in, one DataFrame out); ``harness.protocols.sweep_comparisons`` reads the
records from MLflow (``frontiers.parquet`` and ``budget_decisions.parquet`` of each job), the
sweep callback logs the table on the parent run and the report command rebuilds it.

Rows and cells
- A *cell* is a set of jobs that differ only in policy and seed (the cell logic of
  ``harness.protocols.sweep_comparisons``; its name, e.g. ``cost.c=0.02``, and its cost are columns).
- Per cell, one row per policy and budget for every ranking policy (``kind`` "deployable" or
  "oracle"), and one row per fixed decision (always-keep / always-extra: ``kind`` "fixed",
  budget NaN, usage 0 or 1), which is a reference point shown with every budget, never marked
  and never tested.
- Numbers per row (``JobRecord.frontiers``, one row per seed and split): deployable ``utility``
  and ``outcome`` (mean and sd), realized ``usage`` (mean and sd), ``violation_rate`` (share of
  seeds x splits with usage > rho), ``random_utility`` and ``oracle_utility`` at the
  deployable rule's realized usage (mean), exact-frontier utility (mean and sd), and
  ``cal_utility``: the deployable rule's expected utility on the CALIBRATION half (mean). The
  mean and sd run over all seeds x splits together (population sd, ddof = 0, as protocol B's
  ``_std`` metrics; with one seed they equal the job's ``budget/<rho>/deployable/utility`` and
  ``..._std``).

The reference and the test
- Reference (per cell and budget), chosen inside each (seed, split): the deployable policy with
  the best ``cal_utility`` on THAT split's calibration half, which is disjoint from that split's
  test half; each split's test questions are then compared with that split's choice, and the
  splits are combined (``compare.ReferenceChoice``). What a team can see BEFORE deploying, and
  never the data it is tested on: the calibration half of one split holds the test questions of
  the others, so a choice on the mean over splits has seen them (a null simulation found
  9-10% of sweeps with a false "<" at a nominal 5%, against 1.5-2% for an independent choice).
  When every split chose the same policy, ``reference`` is its name and its row is marked
  "ref"; otherwise ``reference`` reads "best on calibration per split (a 3, b 2)", no row is
  "ref" and every deployable policy is tested against that choice. A tie within 1e-12 is
  named in ``reference_tied`` (broken by name, never silently). Without ``cal_utility`` (runs
  logged before it existed) the test utility is used and ``reference_from`` says "test
  (optimistic)".
- Per policy: the per-question expected test utility (``budget_decisions.parquet``, deployable
  frontier) minus the reference's, paired on (seed, split, qid). ``diff_vs_ref`` = policy -
  reference (> 0: better than the reference), the sign of every table of the harness. p from
  ``stats.sign_flip_test`` on document totals (a document's questions of all seeds and splits
  form one total; exact up to 16 non-zero documents, else sampled), Holm-adjusted across the
  deployable policies of the cell and budget (the reference and the oracle are not in the
  family); the interval inverting that test at the level the row's mark is decided at (the
  table-wide Holm step, ``level``: it excludes 0 exactly when ``p_holm_table`` < alpha; NaN
  when no shift can be rejected), equivalence and the plan at that level too; the largest
  difference the test halves could show (``max_diff``), the minimum detectable difference
  (``mdd``) and the sample-size plan (``plan_questions``, ``plan_docs``; docs/metrics.md §12).
  These are ``harness.protocols.compare``'s pieces (``pair_frame``, ``choose_reference``) and
  ``harness.paired.paired_comparison``, shared, not copied.
- Multiplicity: ``p_holm`` is Holm within the cell and budget; ``p_holm_table`` is Holm over
  every tested comparison of the table (budgets x policies of every cost), a comparison whose
  decisions (both rules' run probabilities on every paired question) are the same at several
  costs counted once, with the largest of its p-values. The mark follows ``p_holm_table``.
- The verdicts (``harness.protocols.verdict``): at each budget the reference, and any router tied
  with it, is also compared with the fixed decisions on its own test questions
  (``verdict.fixed_comparisons``); the table carries them in ``attrs["fixed_comparisons"]``.
- ``mark``: "ref"; "<" / ">" worse / better than the reference at table-wide Holm-adjusted alpha; "="
  cannot be told apart (identical decisions included); "" for the oracle (an upper bound,
  shown, never tested) and the fixed decisions; "?" when no paired test was possible (``note``
  says why, e.g. the decisions were not logged).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from harness.markdown import md_escape
from harness.protocols.compare import ReferenceChoice, choose_per_unit, pair_frame
from harness.errors import HarnessError, UsageError
from harness.paired import paired_comparison, plan_words
from harness.protocols.verdict_stats import Comparisons, at_level, stepdown_levels
from harness.stats import holm_adjust

NOT_DEPLOYABLE = ("oracle",)
PAIR_KEYS = ("seed", "split", "qid")
BUDGET_DIGITS = 9
# the answer first (who, where, mark, utility), the evidence after it; ``cell`` last (empty when
# the sweep has one cell)
COLUMNS = (
    "cost", "budget", "policy", "kind", "mark", "utility", "utility_sd", "cal_utility", "outcome", "outcome_sd",
    "usage", "usage_sd", "violation_rate", "random_utility", "oracle_utility", "exact_utility", "exact_utility_sd",
    "diff_vs_ref", "ci_low", "ci_high", "level", "questions", "p", "p_holm", "p_holm_table", "mdd", "max_diff", "detectable", "discordant_docs",
    "discordant_questions", "plan_questions", "plan_docs", "p_better", "equivalent", "n_runs", "reference",
    "reference_from",
    "reference_tied", "note", "cell",
)


@dataclass
class JobRecord:
    """One job of a sweep as the decision table needs it: its policy label, seed, cost, cell
    name, protocol B's ``frontiers`` table and its per-question ``decisions`` (None when not
    logged: the row then gets no paired test)."""

    policy: str
    seed: int
    cost: float
    frontiers: pd.DataFrame
    decisions: pd.DataFrame | None = None
    cell: str = ""
    arms: tuple[str, str] = ("", "")  # the base and extra arms' names (the fixed decisions are named by them)

    @property
    def fixed(self) -> bool:
        f = self.frontiers
        return bool(len(f)) and bool((f["frontier"] == "fixed").all())

    def oracle(self, not_deployable: tuple[str, ...]) -> bool:
        if self.policy in not_deployable:
            return True
        d = self.decisions
        return d is not None and "oracle" in d.columns and bool(d["oracle"].astype(bool).any())


def _mean(values) -> float:
    v = np.asarray(values, dtype=float)
    return float(v.mean()) if len(v) else math.nan


def _sd(values) -> float:
    v = np.asarray(values, dtype=float)
    return float(v.std()) if len(v) else math.nan


def _stack(records: list[JobRecord], attr: str) -> pd.DataFrame:
    frames = [getattr(r, attr).assign(seed=int(r.seed)) for r in records if getattr(r, attr) is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _empty_row(cell: str, cost: float, budget: float, policy: str, kind: str) -> dict:
    row = {c: math.nan for c in COLUMNS}
    row.update(cell=cell, cost=cost, budget=budget, policy=policy, kind=kind, mark="", reference="",
               reference_from="", reference_tied="", note="")
    return row


def _operating_point(fr: pd.DataFrame, cost: float) -> dict:
    """Mean and sd over seeds x splits of one operating point's rows (a deployable budget or a
    fixed decision): utility, outcome, usage, and random / oracle utility at that usage."""
    usage = fr["realized_usage"].astype(float)
    return dict(
        n_runs=len(fr),
        utility=_mean(fr["utility"]),
        utility_sd=_sd(fr["utility"]),
        outcome=_mean(fr["outcome"]),
        outcome_sd=_sd(fr["outcome"]),
        usage=_mean(usage),
        usage_sd=_sd(usage),
        random_utility=_mean(fr["random_matched"].astype(float) - cost * usage),
        oracle_utility=_mean(fr["oracle_matched"].astype(float) - cost * usage),
    )


def _budget_row(cell, cost, budget, policy, kind, fr: pd.DataFrame, frontier: str = "deployable") -> dict:
    dep = fr[fr["frontier"] == frontier]
    exact = fr[fr["frontier"] == "exact"]
    row = _empty_row(cell, cost, budget, policy, kind)
    row.update(
        _operating_point(dep, cost),
        cal_utility=_mean(dep["cal_utility"]) if "cal_utility" in dep.columns else math.nan,
        violation_rate=_mean(dep["violated"].astype(float)),
        exact_utility=_mean(exact["utility"]),
        exact_utility_sd=_sd(exact["utility"]),
    )
    return row


def _fixed_row(cell, cost, policy, fr: pd.DataFrame) -> dict:
    row = _empty_row(cell, cost, math.nan, policy, "fixed")
    row.update(_operating_point(fr, cost))
    return row


UNIT_KEYS = ("seed", "split")


def calibration_by_unit(frontiers: dict[str, pd.DataFrame], frontier: str = "deployable"
                        ) -> dict[tuple, dict[str, float]]:
    """Unit (seed, split) -> policy -> the calibrated rule's calibration-half utility there,
    from each policy's frontiers rows at one budget (NaN where not logged)."""
    out: dict[tuple, dict[str, float]] = {}
    for label, fr in frontiers.items():
        dep = fr[fr["frontier"] == frontier]
        if "cal_utility" not in dep.columns:
            continue
        for seed, split, value in zip(dep["seed"], dep["split"], dep["cal_utility"].astype(float)):
            out.setdefault((int(seed), int(split)), {})[label] = float(value)
    return out


def sizes_by_unit(frontiers: dict[str, pd.DataFrame]) -> dict[tuple, tuple[float, float]]:
    """Unit (seed, split) -> (calibration questions, test questions), from any policy's rows."""
    out: dict[tuple, tuple[float, float]] = {}
    for fr in frontiers.values():
        if {"n_cal", "n_test"} <= set(fr.columns):
            for seed, split, n_cal, n_test in zip(fr["seed"], fr["split"], fr["n_cal"], fr["n_test"]):
                out.setdefault((int(seed), int(split)), (float(n_cal), float(n_test)))
    return out


def _arm_names(records: list[JobRecord]) -> dict[str, str]:
    """The fixed decisions named by their arms ("always keep", "always hybrid"), as the jobs of a
    cell logged them; the generic names where they did not."""
    base, extra = next((r.arms for r in records if all(r.arms)), ("", ""))
    return {"always_keep": f"always {base}", "always_extra": f"always {extra}"} if base and extra else {}


def _reference_choice(labels: list[str], cal_by_unit: dict, test_utility: dict[str, float]) -> ReferenceChoice:
    """Inside each (seed, split) on that split's calibration half, disjoint from its test half
    (``compare.ReferenceChoice``); without calibration utilities on test (optimistic)."""
    if cal_by_unit and all(
        all(label in got and math.isfinite(got[label]) for label in labels) for got in cal_by_unit.values()
    ):
        return choose_per_unit(cal_by_unit, UNIT_KEYS, labels, "calibration")
    return ReferenceChoice.one(test_utility, labels, "test (optimistic)")


def _choice_rows(choice: ReferenceChoice, have: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
    """The per-question decisions of the calibration choice: in each unit, the rows of the
    label that unit chose (None when one of them logged no decisions)."""
    parts = []
    for unit, label in sorted(choice.by_unit.items()):
        rows = have.get(label)
        if rows is None:
            return None
        mask = np.ones(len(rows), dtype=bool)
        for key, value in zip(choice.keys, unit):
            mask &= rows[key].to_numpy() == value
        parts.append(rows[mask])
    return pd.concat(parts, ignore_index=True) if parts else None


def _router_comparisons(r0: dict, choice: ReferenceChoice, have: dict, vs_fixed: list, *, alpha: float,
                        power: float, margin: float, seed: int, sizes: dict, arm_names: dict) -> None:
    """The router of one budget (the calibration choice, and every equally valid choice where a
    split's choice was a tie: ``verdict_stats.tie_alternatives``) and the best rule at the
    budget (``verdict_stats.oracle_rows``, role "oracle") against the fixed decisions, appended
    to ``vs_fixed`` with the router's usage, splits and the splits that overspent the budget."""
    from harness.protocols.verdict_stats import fixed_comparisons, oracle_rows, overspent, tie_alternatives

    where = {"cell": r0["cell"], "cost": float(r0["cost"]), "budget": float(r0["budget"]), "policy": choice.name,
             "alpha": alpha}
    chosen = _choice_rows(choice, have)
    if chosen is None:
        return
    units = chosen.groupby(list(UNIT_KEYS))["prob"].mean()
    n_cal = [sizes.get(tuple(int(v) for v in u), (math.nan, math.nan))[0] for u in units.index]
    n_test = chosen.groupby(list(UNIT_KEYS))["qid"].size().to_numpy(dtype=float)
    alternatives, count = tie_alternatives(choice, have)
    usage = {"router_usage": float(units.mean()), "router_splits": len(units),
             "router_violations": int(np.sum(units.to_numpy(dtype=float) > float(r0["budget"]) + 1e-12)),
             "router_overspent": int(np.sum(overspent(units.to_numpy(dtype=float), float(r0["budget"]), n_cal, n_test))),
             "alternatives": count}
    if alternatives is None:  # too many to test: only the room claim can still be decided
        vs_fixed.append({**where, "role": "ties", **usage})
        alternatives = []
    cost = float(r0["cost"])
    for i, (name, rows) in enumerate(alternatives):
        for c in fixed_comparisons(rows, cost, alpha=alpha, power=power, margin=margin, seed=seed):
            vs_fixed.append({**where, "role": "router", "alternative": i, "router": name, **usage, **c,
                             "arm_name": arm_names.get(c["arm"], c["arm"])})
    for c in fixed_comparisons(oracle_rows(chosen, float(r0["budget"]), cost), cost, alpha=alpha, power=power,
                               margin=margin, seed=seed):
        vs_fixed.append({**where, "role": "oracle", "router": "oracle", **c, "arm_name": arm_names.get(c["arm"], c["arm"])})


def _test_budget(rows: list[dict], decisions: dict[str, pd.DataFrame | None], oracles: set[str], *,
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
    ref = choice.single  # None: the splits chose differently; every policy is tested against the choice
    tied = [ref or choice.name] + choice.tied_labels
    for r in rows:
        r.update(reference=choice.name, reference_from=choice.source, reference_tied=", ".join(tied[1:]))
    have = {p: d for p, d in decisions.items() if d is not None and not d.empty}
    frame = None
    reason = "no per-question decisions (budget_decisions.parquet)"
    if all(label in have for label, _ in choice.counts):
        try:
            frame, _ = pair_frame(have, PAIR_KEYS)
        except HarnessError as exc:
            reason = str(exc)
    else:
        reason += f" for the reference {choice.name}"
    groups = frame["doc_id"].astype(str).to_numpy() if frame is not None else None
    if vs_fixed is not None and rows:
        _router_comparisons(rows[0], choice, have, vs_fixed, alpha=alpha, power=power, margin=margin, seed=seed,
                            sizes=sizes_by_unit or {}, arm_names=arm_names or {})
    outcomes = probs = None
    if frame is not None:  # the expected outcome (utility + cost * run probability): to tell a cost alone
        outcomes, _ = pair_frame({p: d.assign(outcome=d["base"] + d["prob"] * (d["extra"] - d["base"]))
                                  for p, d in have.items()}, PAIR_KEYS, column="outcome")
        probs, _ = pair_frame(have, PAIR_KEYS, column="prob")
        try:
            ref_utility, ref_outcome, ref_prob = (choice.values(f) for f in (frame, outcomes, probs))
        except HarnessError as exc:
            frame, reason = None, str(exc)
    for r in rows:
        label = r["policy"]
        if label == ref:
            r.update(mark="ref", diff_vs_ref=0.0)
            if tied[1:]:
                r["note"] = f"tied on calibration utility with {', '.join(tied[1:])}; reference by name"
            continue
        if frame is None or label not in have:
            r.update(mark="" if label in oracles else "?", note=reason)
            continue
        d = frame[label].to_numpy(dtype=float) - ref_utility
        o = outcomes[label].to_numpy(dtype=float) - ref_outcome
        stats = paired_comparison(d, groups, seed=seed, alpha=alpha, power=power, outcome_diffs=o,
                                  n_questions=int(frame["qid"].nunique()), margin=margin)
        r.update(diff_vs_ref=float(d.mean()), **{k: stats[k] for k in (
            "ci_low", "ci_high", "p", "mdd", "max_diff", "detectable", "discordant_docs", "discordant_questions",
            "plan_questions", "plan_docs", "p_better", "equivalent")}, questions=int(frame["qid"].nunique()))
        if not stats["same"] and label not in oracles:  # for the interval and plan at the table's level
            r["_data"] = (d, o if stats["discordant_questions"] else d, groups, int(frame["qid"].nunique()), margin,
                          power, seed)
        notes = []
        if label in oracles:
            r["p"] = math.nan  # an upper bound is shown, not tested
            notes.append("upper bound, not deployable: shown, not tested")
        elif label in tied:
            notes.append(f"tied with {tied[0]} on calibration utility in a split")
        if stats["same"]:
            notes.append("same decisions as the reference")
        elif stats["cost_only"]:
            notes.append("the difference is the cost alone (0 discordant questions)")
        if not stats["same"] and not stats["p_exact"]:
            notes.append(f"sampled sign-flip, {stats['n_patterns']} patterns")
        if notes:
            r["note"] = "; ".join(notes)
    family = [r for r in rows if r["policy"] != ref and r["policy"] not in oracles and frame is not None
              and r["policy"] in have]
    if family:
        adjusted = holm_adjust([r["p"] for r in family])
        for r, p in zip(family, adjusted):
            r["p_holm"] = float(p)
            r["_hypothesis"] = _decisions_key(probs, r["policy"], choice.name, ref_prob, rows[0]["budget"])


def _decisions_key(probs: pd.DataFrame, label: str, ref: str, ref_prob: np.ndarray, budget: float) -> str:
    """What one comparison decides between: the policy's and the reference's run probability on
    every paired question (and the budget). Two costs that leave all of it unchanged test the
    same decisions, and count once in the table's Holm family."""
    import hashlib

    h = hashlib.sha256(repr((label, ref, round(float(budget), BUDGET_DIGITS))).encode())
    for col in [c for c in PAIR_KEYS if c in probs.columns] + ["doc_id"]:
        h.update("\x1f".join(map(str, probs[col].tolist())).encode())
    h.update(np.ascontiguousarray(probs[label].to_numpy(dtype=float)).tobytes())
    h.update(np.ascontiguousarray(np.asarray(ref_prob, dtype=float)).tobytes())
    return h.hexdigest()


def _mark_over_the_table(rows: list[dict], alpha: float) -> None:
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


def decision_table(
    records: Iterable[JobRecord],
    *,
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
    power: float = 0.8,
    not_deployable: tuple[str, ...] = NOT_DEPLOYABLE,
    margin: float = 0.01,
    fraction: float = 0.5,
    frontier: str = "deployable",
) -> pd.DataFrame:
    """The decision table of a sweep's jobs (module docstring): one row per cell, policy and
    budget, plus one per fixed decision and cell; columns ``COLUMNS``. Within a cell and budget
    the reference comes first, then by deployable test utility (ties by name); the fixed
    decisions close each cell. ``attrs["alpha"]``, ``attrs["n_boot"]`` record the test."""
    records = list(records)
    groups: dict[tuple[str, float], list[JobRecord]] = {}
    for r in records:
        groups.setdefault((r.cell, float(r.cost)), []).append(r)
    out: list[dict] = []
    vs_fixed: list[dict] = []
    for (cell, cost), members in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        by_policy: dict[str, list[JobRecord]] = {}
        for r in members:
            by_policy.setdefault(r.policy, []).append(r)
        for label, recs in by_policy.items():
            seeds = [int(r.seed) for r in recs]
            if len(set(seeds)) != len(seeds):
                raise HarnessError(f"decision table: policy {label!r} has two jobs with one seed in cell {cell!r}")
        oracles = {label for label, recs in by_policy.items() if any(r.oracle(not_deployable) for r in recs)}
        fixed = sorted(label for label, recs in by_policy.items() if all(r.fixed for r in recs))
        ranking = sorted(label for label in by_policy if label not in fixed)
        frontiers = {label: _stack(by_policy[label], "frontiers") for label in by_policy}
        decisions_all = {
            label: (_stack(by_policy[label], "decisions") if all(r.decisions is not None for r in by_policy[label]) else None)
            for label in ranking
        }
        budgets = sorted(
            {round(float(b), BUDGET_DIGITS) for label in ranking for b in frontiers[label]["budget"].dropna()}
        )
        for budget in budgets:
            rows, decisions, at_budget = [], {}, {}
            for label in ranking:
                f = frontiers[label]
                at = f[f["budget"].astype(float).round(BUDGET_DIGITS) == budget]
                if at.empty:
                    continue
                kind = "oracle" if label in oracles else "deployable"
                rows.append(_budget_row(cell, cost, budget, label, kind, at, frontier))
                if kind == "deployable":
                    at_budget[label] = at
                dec = decisions_all[label]
                if dec is not None:
                    dec = dec[(dec["frontier"] == frontier) & (dec["budget"].astype(float).round(BUDGET_DIGITS) == budget)]
                decisions[label] = dec
            first = len(vs_fixed)
            _test_budget(rows, decisions, oracles, n_boot=n_boot, seed=seed, alpha=alpha, power=power, margin=margin,
                         cal_by_unit=calibration_by_unit(at_budget, frontier), vs_fixed=vs_fixed,
                         sizes_by_unit=sizes_by_unit(at_budget), arm_names=_arm_names(members))
            for c in vs_fixed[first:]:  # the cell's verdict settings travel with its comparisons
                c.update(margin=margin, fraction=fraction, power=power, seed=seed)
            ref = rows[0]["reference"] if rows else ""
            rows.sort(key=lambda r: (r["policy"] != ref, r["kind"] == "oracle", -r["utility"], r["policy"]))
            out += rows
        for label in fixed:
            out.append(_fixed_row(cell, cost, label, frontiers[label]))
    _mark_over_the_table(out, alpha)
    table = pd.DataFrame(out, columns=list(COLUMNS))
    # the router chosen at each budget against the fixed decisions: the verdicts (harness.protocols.verdict)
    table.attrs.update(alpha=alpha, n_boot=n_boot, power=power, margin=margin, fraction=fraction, frontier=frontier,
                       fixed_comparisons=Comparisons(vs_fixed))
    return table


def open_comparisons(table: pd.DataFrame) -> list[dict]:
    """The deployable policies marked "=" (other decisions than the reference, not told apart),
    as ``harness.paired.closing_line`` reads them."""
    out = []
    for (cost, cell), part in table.groupby(["cost", "cell"], sort=True):
        alpha, power = _alpha_power(table, part)
        rows = part[(part["mark"] == "=") & ~part["note"].astype(str).str.contains("same decisions", regex=False)]
        for r in rows.itertuples():
            out.append({"where": f"{r.policy} vs {r.reference} at {_cell_title(cell, cost)}, rho={float(r.budget):g}",
                        "detectable": bool(r.detectable), "questions": float(r.plan_questions),
                        "docs": float(r.plan_docs), "capped": False,
                        "alpha": float(r.level) if r.level == r.level else alpha, "power": power,
                        "protocol": "protocol B", "unit": "questions of the test halves", "share": 1.0,
                        "have": int(r.questions) if r.questions == r.questions else 0})
    return out


def conclusions(table: pd.DataFrame) -> str:
    """The decision table's lines for the sweep's end: per cost, one line per budget
    (``budget_conclusions``)."""
    lines = []
    for (cost, cell), part in table.groupby(["cost", "cell"], sort=True):
        lines += budget_conclusions(table, part, prefix=f"Decision table at {_cell_title(cell, cost)}, ")
    return "\n".join(lines)


# ---------------------------------------------------------------- filters and rendering


def select(table: pd.DataFrame, *, budget: float | None = None, cost: float | None = None) -> pd.DataFrame:
    """Rows at ``budget`` and / or ``cost`` (values as the table holds them, within 1e-9); the
    fixed decisions of the selected costs stay (they are references at every budget). Raises
    UsageError naming the flag and the values the table has when a value is not in it."""
    out = table
    if cost is not None:
        costs = sorted(set(table["cost"].astype(float)))
        if not any(abs(c - cost) <= 1e-9 for c in costs):
            raise UsageError(f"--cost {cost:g} is not in this sweep; its costs: {', '.join(f'{c:g}' for c in costs)}")
        out = out[(out["cost"].astype(float) - cost).abs() <= 1e-9]
    if budget is not None:
        budgets = sorted(set(table["budget"].dropna().astype(float)))
        if not any(abs(b - budget) <= 1e-9 for b in budgets):
            raise UsageError(
                f"--budget {budget:g} is not in this sweep; its budgets: {', '.join(f'{b:g}' for b in budgets)}"
            )
        b = out["budget"].astype(float)
        out = out[b.isna() | ((b - budget).abs() <= 1e-9)]
    return out.reset_index(drop=True)


def _pm() -> str:
    """"±" where the console can print it, else "+-"."""
    enc = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        "±".encode(enc)
        return "±"
    except (LookupError, UnicodeEncodeError):
        return "+-"


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if v != 0 and abs(v) < 1e-4:
            return f"{v:.1e}"
        return f"{float(v):.{digits}f}"
    return str(v)


def _cell_title(cell: str, cost: float) -> str:
    return cell if cell else f"cost.c={cost:g}"


def legend(table: pd.DataFrame) -> str:
    alpha = table.attrs.get("alpha", 0.05)
    alpha = f"{alpha:g}" if isinstance(alpha, (int, float)) else str(alpha)
    return (
        f"ref: the reference, the deployable policy best on calibration (on each split's own calibration half, "
        "chosen before any test outcome) | =: cannot be told apart | "
        f"< >: worse / better than ref (paired by question, sign-flip by document, Holm alpha {alpha} over the "
        "table's budgets x policies, a comparison whose decisions no cost changes counted once) | "
        "policy - ref > 0: better, its interval at the level its mark was decided at (level) | ub: oracle, upper "
        "bound, not tested | fixed: one arm everywhere, a reference"
    )


def _alpha_power(table: pd.DataFrame, part: pd.DataFrame) -> tuple[float, float]:
    alpha = table.attrs.get("alpha", 0.05)
    return (float(alpha) if isinstance(alpha, (int, float)) else 0.05), float(table.attrs.get("power", 0.8))


def budget_conclusions(table: pd.DataFrame, part: pd.DataFrame, prefix: str = "") -> list[str]:
    """One line per budget of one cost's rows ``part``: how many policies were told from the
    reference, whether any difference is detectable with these test questions, and the smallest
    sample-size plan among the policies that cannot be told apart (docs/metrics.md §12)."""
    alpha, power = _alpha_power(table, part)
    lines = []
    tested = part[part["mark"].isin(["<", ">", "="])]
    for budget in sorted(set(tested["budget"].dropna().astype(float))):
        rows = tested[(tested["budget"].astype(float) - budget).abs() <= 1e-9]
        told = int(rows["mark"].isin(["<", ">"]).sum())
        open_rows = rows[rows["mark"] == "="]
        same = open_rows["note"].astype(str).str.contains("same decisions", regex=False)
        open_rows = open_rows[~same]
        line = f"{prefix}rho={budget:g}: {told} of {len(rows)} policies told from the reference {rows['reference'].iat[0]}"
        if len(open_rows):
            detectable = int(open_rows["detectable"].astype(bool).sum())
            if detectable == 0:
                line += (f"; no difference is detectable with these questions for the {len(open_rows)} that "
                         "cannot be told apart")
            else:
                line += f"; {len(open_rows)} cannot be told apart ({detectable} with a detectable difference)"
            equivalent = int(open_rows["equivalent"].astype(bool).sum())
            line += (f"; {equivalent} of them equivalent within +-{float(table.attrs.get('margin', 0.01)):g} "
                     "(two one-sided tests), the others inconclusive")
            plans = open_rows[open_rows["plan_questions"].notna()]
            if len(plans):
                best = plans.loc[plans["plan_questions"].astype(float).idxmin()]
                c = {"plan_why": "", "plan_capped": False, "plan_questions": best["plan_questions"],
                     "plan_docs": best["plan_docs"]}
                level = float(best["level"]) if best["level"] == best["level"] else alpha
                line += f"; the closest ({best['policy']}) needs {plan_words(c, level, power)}"
                if best["questions"] == best["questions"] and best["plan_questions"] <= best["questions"]:
                    line += (f", no more than the {int(best['questions']):,} tested: this sample fell short by chance "
                             "or its effect is smaller")
        lines.append(line + ".")
    return lines


def format_console(table: pd.DataFrame) -> str:
    """Per cell (cost), one line per policy with the budgets as columns, each cell
    "utility±sd mark" (deployable test utility, sd over splits x seeds); fixed decisions as one
    value at their usage; a legend and the named reference ties under it."""
    if table.empty:
        return "Decision table: no protocol B results in this sweep"
    pm = _pm()
    blocks = []
    for (cost, cell), part in table.groupby(["cost", "cell"], sort=True):
        budgets = sorted(set(part["budget"].dropna().astype(float)))
        ranking = part[part["kind"] != "fixed"]
        n_runs = ranking["n_runs"].max() if len(ranking) else part["n_runs"].max()
        header = ["policy"] + [f"rho={b:g}" for b in budgets]
        lines: list[list[str]] = []
        order = list(dict.fromkeys(ranking.sort_values("utility", ascending=False, kind="stable")["policy"]))
        for label in order:
            rows = ranking[ranking["policy"] == label]
            cells = []
            for b in budgets:
                at = rows[(rows["budget"].astype(float) - b).abs() <= 1e-9]
                if at.empty:
                    cells.append("")
                    continue
                r = at.iloc[0]
                mark = r["mark"] if r["kind"] != "oracle" else "ub"
                cells.append(f"{r['utility']:.3f}{pm}{r['utility_sd']:.3f} {mark}".rstrip())
            lines.append([label + (" (upper bound)" if (rows["kind"] == "oracle").any() else "")] + cells)
        widths = [max(len(x[i]) for x in [header] + lines) for i in range(len(header))]
        body = ["  ".join(x[i].ljust(widths[i]) for i in range(len(header))).rstrip() for x in [header] + lines]
        for r in part[part["kind"] == "fixed"].itertuples():  # one value at every budget: not widened
            body.append(f"{r.policy.ljust(widths[0])}  {r.utility:.3f}{pm}{r.utility_sd:.3f} fixed (usage {r.usage:g}, any budget)")
        title = (
            f"Decision table at {_cell_title(cell, cost)}: deployable test utility {pm} its spread (sd) over "
            f"{int(n_runs) if n_runs == n_runs else 0} overlapping test halves (splits x seeds; not a standard "
            "error), marked against the reference at each budget"
        )
        ties = [
            f"tie for the reference at rho={float(r.budget):g}: {r.reference} = {r.reference_tied} "
            f"(calibration utility; {r.reference} used)"
            for r in part[(part["mark"] == "ref") & (part["reference_tied"] != "")].itertuples()
        ]
        unresolved = sorted({f"{r.policy}: {r.note}" for r in part[part["mark"] == "?"].itertuples() if r.note})
        if (part["reference_from"] == "test (optimistic)").any():
            ties.append("reference chosen on TEST utility (these runs logged no cal_utility): optimistic")
        blocks.append("\n".join([title, *body, legend(table), *ties, *(f"not tested: {u}" for u in unresolved),
                                 *budget_conclusions(table, part)]))
    return "\n\n".join(blocks)


HEADERS = {
    "cell": "cell", "cost": "cost", "budget": "budget", "policy": "policy", "kind": "kind", "n_runs": "splits x seeds",
    "cal_utility": "calibration utility", "utility": "utility", "utility_sd": "utility sd", "outcome": "outcome",
    "outcome_sd": "outcome sd", "usage": "usage", "usage_sd": "usage sd", "violation_rate": "violation rate",
    "random_utility": "random utility (matched usage)", "oracle_utility": "oracle utility (matched usage)",
    "exact_utility": "exact-frontier utility", "exact_utility_sd": "exact-frontier utility sd",
    "diff_vs_ref": "policy - ref", "ci_low": "CI low (sign-flip)", "ci_high": "CI high (sign-flip)",
    "level": "interval level (Holm step)", "questions": "questions tested", "p": "p",
    "p_holm": "Holm p (budget)", "p_holm_table": "Holm p (whole table)", "mdd": "MDD", "max_diff": "largest showable difference", "detectable": "detectable",
    "discordant_docs": "discordant documents", "discordant_questions": "discordant questions",
    "plan_questions": "questions for the power", "plan_docs": "documents for the power",
    "p_better": "P(better)", "equivalent": "equivalent (TOST)", "mark": "mark", "reference": "reference", "reference_from": "reference chosen on",
    "reference_tied": "tied for reference", "note": "note",
}


def _finite(v) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def _text_cells(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = [HEADERS[c] for c in COLUMNS]
    rows = []
    for r in table[list(COLUMNS)].itertuples(index=False):
        cells = []
        n_runs = r[COLUMNS.index("n_runs")]
        for col, v in zip(COLUMNS, r):
            if col in ("cost", "budget"):
                cells.append("" if v is None or math.isnan(float(v)) else f"{float(v):g}")
            elif col == "violation_rate" and _finite(v) and _finite(n_runs) and n_runs > 0:
                # its resolution: a rate over n splits x seeds moves in steps of 1 / n
                cells.append(f"{_num(v)} ({round(float(v) * n_runs)} of {int(n_runs)})")
            else:
                cells.append(_num(v))
        rows.append(cells)
    return header, rows


def format_text(table: pd.DataFrame) -> str:
    """Every column, fixed width (the report command's stdout), with the legend."""
    header, rows = _text_cells(table)
    widths = [max(len(x[i]) for x in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(x[i].ljust(widths[i]) for i in range(len(header))).rstrip() for x in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + [legend(table)])


def format_markdown(table: pd.DataFrame) -> str:
    header, rows = _text_cells(table)
    esc = md_escape
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines + ["", md_escape(legend(table))])


BUDGET_HEADER = ("cost", "policy", "mark", "utility", "usage", "over budget", "policy - ref [95%]", "Holm p", "note")


def budget_cells(table: pd.DataFrame, budget: float) -> list[list[str]]:
    """The decision table at one budget, the columns a decision needs (``BUDGET_HEADER``; every
    column: ``decision_table.csv``): per cost, the reference first (``ref``, named by how it was
    chosen), then the policies by utility, then the fixed decisions."""
    from harness.protocols.verdict_cells import ref_name

    pm = "±"
    at = table[((table["budget"].astype(float) - budget).abs() <= 1e-9) | (table["kind"] == "fixed")]
    rows = []
    for r in at.itertuples():
        mark = r.mark
        if r.mark == "ref":
            mark = f"ref ({ref_name(r.reference_from)})"
        elif r.kind == "oracle":
            mark = "upper bound"
        elif r.kind == "fixed":
            mark = f"fixed (usage {r.usage:g})"
        diff = ""
        if r.mark in ("<", ">", "=") and r.diff_vs_ref == r.diff_vs_ref:
            ci = (f" [{r.ci_low:.3f}, {r.ci_high:.3f}]" if r.ci_low == r.ci_low and r.ci_high == r.ci_high
                  else " [no interval]")
            diff = f"{r.diff_vs_ref:+.3f}{ci}"
        over = "" if r.kind == "fixed" or r.violation_rate != r.violation_rate else (
            f"{int(round(r.violation_rate * r.n_runs))} of {int(r.n_runs)}")
        rows.append([f"{r.cost:g}", str(r.policy), str(mark), f"{r.utility:.3f}{pm}{r.utility_sd:.3f}",
                     f"{r.usage:.2f}", over, diff, _num(r.p_holm_table, 3), str(r.note)])
    return rows


def budget_markdown(table: pd.DataFrame, budget: float) -> str:
    """The decision table at one budget as a small Markdown table that the MLflow UI renders
    whole (``decision_table_rho<budget>.md`` on the parent run; ``budget_cells``)."""
    lines = [f"# Decision table at budget {budget:g}", "", "| " + " | ".join(BUDGET_HEADER) + " |",
             "|" + "---|" * len(BUDGET_HEADER)]
    lines += ["| " + " | ".join(md_escape(c) for c in cells) + " |" for cells in budget_cells(table, budget)]
    return "\n".join(lines + ["", md_escape(legend(table)), ""])


def budget_html(table: pd.DataFrame, budget: float) -> str:
    """``budget_cells`` as an HTML table (the report's decision table at one budget)."""
    import html

    e = html.escape
    out = [f'<table class="decision-budget" data-budget="{budget:g}">',
           "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in BUDGET_HEADER) + "</tr></thead>", "<tbody>"]
    out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>" for cells in budget_cells(table, budget)]
    return "\n".join(out + ["</tbody>", "</table>"])


def format_keyvalue(table: pd.DataFrame, width: int = 100) -> str:
    """Every column as ``key: value`` lines, one block per row (the report command's stdout for
    ``--budget`` / ``--cost``: a row of every column is hundreds of characters wide); no line
    longer than ``width``; empty values left out; the legend last, wrapped."""
    import textwrap

    header, rows = _text_cells(table)
    lead = ("cost", "budget", "policy", "kind", "mark")
    at = {c: i for i, c in enumerate(COLUMNS)}
    pad = max(len(h) for h in header) + 2
    lines: list[str] = []
    for cells in rows:
        where = ", ".join(f"{c} {cells[at[c]]}" for c in ("cost", "budget") if cells[at[c]])
        mark = f", mark {cells[at['mark']]}" if cells[at["mark"]] else ""
        lines += ["", *textwrap.wrap(f"{cells[at['policy']]} ({where}; {cells[at['kind']]}{mark})", width)]
        for col, name, value in zip(COLUMNS, header, cells):
            if col in lead or value == "":
                continue
            lines += textwrap.wrap(value, width, initial_indent=f"  {name + ':':<{pad}}", subsequent_indent=" " * (pad + 2),
                                   break_long_words=True)
    legend_lines = textwrap.wrap(legend(table), width, subsequent_indent="  ")
    return "\n".join([*lines[1:], "", *legend_lines])


def format_html(table: pd.DataFrame, *, standalone: bool = False) -> str:
    import html

    e = html.escape
    header, rows = _text_cells(table)
    out = ['<table id="decision-table">', "<thead><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr></thead>",
           "<tbody>"]
    for row in rows:
        out.append("<tr>" + "".join(f'<td data-col="{c}">{e(v)}</td>' for c, v in zip(COLUMNS, row)) + "</tr>")
    out += ["</tbody>", "</table>", f"<p>{e(legend(table))}</p>"]
    if not standalone:
        return "\n".join(out)
    head = ('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Decision table</title>\n'
            "<style>table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 6px}</style>\n</head>\n"
            "<body>\n<h1>Decision table</h1>")
    return "\n".join([head, *out, "</body>", "</html>", ""])
