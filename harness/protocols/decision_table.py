"""The decision table: which policy to deploy at a budget and a cost, and is the difference real?

Why: protocol B reports each policy's frontiers on its own; the question a team asks is the
comparison at ONE operating point (a cost c and a budget rho): which deployable rule spends the
budget best, how sure are we, and what random and the oracle would do with the same usage. This
module is pure (job records in, one DataFrame out); ``harness.protocols.sweep_comparisons`` reads the
records from MLflow (``frontiers.parquet`` and ``budget_decisions.parquet`` of each job), the
sweep callback logs the table on the parent run and the report command rebuilds it. The
reference and the paired tests are filled in by ``harness.protocols.decision_table_paired``; the
table's text (console, Markdown, HTML) is ``harness.protocols.decision_table_render``.

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
  (``verdict_stats.fixed_comparisons``); the table carries them in ``attrs["fixed_comparisons"]``.
- ``mark``: "ref"; "<" / ">" worse / better than the reference at table-wide Holm-adjusted alpha; "="
  cannot be told apart (identical decisions included); "" for the oracle (an upper bound,
  shown, never tested) and the fixed decisions; "?" when no paired test was possible (``note``
  says why, e.g. the decisions were not logged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from harness.errors import HarnessError, UsageError
from harness.protocols.decision_table_paired import BUDGET_DIGITS, compare_at_budget, mark_over_the_table
from harness.protocols.verdict_stats import Comparisons

NOT_DEPLOYABLE = ("oracle",)
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


@dataclass(frozen=True)
class _Settings:
    """The test settings of one ``decision_table`` call, handed to every cell and budget."""

    alpha: float
    n_boot: int
    seed: int
    power: float
    not_deployable: tuple[str, ...]
    margin: float
    fraction: float
    frontier: str


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
    settings = _Settings(alpha, n_boot, seed, power, not_deployable, margin, fraction, frontier)
    records = list(records)
    groups: dict[tuple[str, float], list[JobRecord]] = {}
    for r in records:
        groups.setdefault((r.cell, float(r.cost)), []).append(r)
    out: list[dict] = []
    vs_fixed: list[dict] = []
    for (cell, cost), members in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        out += _cell_rows(cell, cost, members, vs_fixed, settings)
    mark_over_the_table(out, alpha)
    table = pd.DataFrame(out, columns=list(COLUMNS))
    # the router chosen at each budget against the fixed decisions: the verdicts (harness.protocols.verdict)
    table.attrs.update(alpha=alpha, n_boot=n_boot, power=power, margin=margin, fraction=fraction, frontier=frontier,
                       fixed_comparisons=Comparisons(vs_fixed))
    return table


@dataclass
class _Cell:
    """One cell's jobs by policy, as every budget of the cell reads them."""

    cell: str
    cost: float
    members: list[JobRecord]
    oracles: set[str]
    ranking: list[str]
    frontiers: dict[str, pd.DataFrame]
    decisions: dict[str, pd.DataFrame | None]


def _by_policy(cell: str, members: list[JobRecord]) -> dict[str, list[JobRecord]]:
    """A cell's jobs by policy label; HarnessError when one policy has two jobs with one seed
    (their rows would be stacked as if they were other splits)."""
    by_policy: dict[str, list[JobRecord]] = {}
    for r in members:
        by_policy.setdefault(r.policy, []).append(r)
    for label, recs in by_policy.items():
        seeds = [int(r.seed) for r in recs]
        if len(set(seeds)) != len(seeds):
            raise HarnessError(f"decision table: policy {label!r} has two jobs with one seed in cell {cell!r}")
    return by_policy


def _cell_rows(cell: str, cost: float, members: list[JobRecord], vs_fixed: list[dict], s: _Settings) -> list[dict]:
    """One cell's rows: every budget's ranking policies (tested, ``_budget_rows``), then the
    fixed decisions; the cell's router-vs-fixed comparisons are appended to ``vs_fixed``."""
    by_policy = _by_policy(cell, members)
    oracles = {label for label, recs in by_policy.items() if any(r.oracle(s.not_deployable) for r in recs)}
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
    c = _Cell(cell, cost, members, oracles, ranking, frontiers, decisions_all)
    out: list[dict] = []
    for budget in budgets:
        out += _budget_rows(c, budget, vs_fixed, s)
    for label in fixed:
        out.append(_fixed_row(cell, cost, label, frontiers[label]))
    return out


def _budget_rows(c: _Cell, budget: float, vs_fixed: list[dict], s: _Settings) -> list[dict]:
    """One cell's ranking policies at one budget, tested against the reference and sorted:
    the reference first, then by deployable test utility (the oracle after them, ties by name)."""
    rows, decisions, at_budget = [], {}, {}
    for label in c.ranking:
        f = c.frontiers[label]
        at = f[f["budget"].astype(float).round(BUDGET_DIGITS) == budget]
        if at.empty:
            continue
        kind = "oracle" if label in c.oracles else "deployable"
        rows.append(_budget_row(c.cell, c.cost, budget, label, kind, at, s.frontier))
        if kind == "deployable":
            at_budget[label] = at
        dec = c.decisions[label]
        if dec is not None:
            dec = dec[(dec["frontier"] == s.frontier) & (dec["budget"].astype(float).round(BUDGET_DIGITS) == budget)]
        decisions[label] = dec
    first = len(vs_fixed)
    compare_at_budget(rows, decisions, c.oracles, n_boot=s.n_boot, seed=s.seed, alpha=s.alpha, power=s.power,
                 margin=s.margin, cal_by_unit=calibration_by_unit(at_budget, s.frontier), vs_fixed=vs_fixed,
                 sizes_by_unit=sizes_by_unit(at_budget), arm_names=_arm_names(c.members))
    for comp in vs_fixed[first:]:  # the cell's verdict settings travel with its comparisons
        comp.update(margin=s.margin, fraction=s.fraction, power=s.power, seed=s.seed)
    ref = rows[0]["reference"] if rows else ""
    rows.sort(key=lambda r: (r["policy"] != ref, r["kind"] == "oracle", -r["utility"], r["policy"]))
    return rows


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
