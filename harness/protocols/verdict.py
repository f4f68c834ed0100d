"""One verdict per cost and budget: deploy a router, deploy none, or cannot tell (docs/numbers.md).

Why: the decision table marks every policy against a reference, and a reader takes ``ref`` for
"recommended" even where keeping the cheap arm everywhere does as well. A team asks one thing
per operating point: is there a router worth deploying over the fixed decisions it replaces?
This module answers it from numbers the harness already computes (``harness.paired``), in the
same words on the console, in MLflow and in the report (the text: ``harness.protocols.verdict_render``).

The rule, per (cost, budget) of the decision table (``verdict_cells`` decides, ``verdict_stats``
computes; docs/metrics.md §9):
- The router is the table's reference: in each split the deployable policy with the best
  calibration-half utility, chosen before any test outcome ("best on calibration"). Where a
  split's choice was a tie, every equally valid router (each combination of tied choices whose
  decisions differ) is tested, and a verdict holds only if it holds for each of them.
- Its rivals are the fixed decisions that fit the budget, named by their arms: always the base
  arm (usage 0), always the extra arm (usage 1) only at a budget of 1 or more. Each is compared
  with the router on the same test questions (per question, the router's expected utility minus
  the fixed decision's; sign-flip by document, ``harness.paired.paired_comparison``); so is the
  oracle at the budget (the best any router could do there: the headroom).
- Three claims per cell, decided in one step-down family over the sweep's cells at alpha: the
  router differs from the fixed decisions (intersection-union over the rivals when it is ahead
  of all), it is as good as one (two one-sided tests against a margin min(margin, fraction x
  the oracle's headroom): it can fail), and there is no room to route (the oracle itself is
  within the margin). Every interval and plan is at the level its claim was decided at.
- "deploy R: R beats F by X [lo, hi] at level L ..."; "over budget: ..." instead when R
  overspends rho beyond sampling error in more than half of the splits; "deploy no router: F is
  better than R by X", "... no room to route: ...", "... F is as good as R (...)"; otherwise
  "cannot tell (R vs F): about N questions needed for 80% power at level L (here n)", or why
  there is no plan.
"""

from __future__ import annotations

import math
from typing import Iterable

import pandas as pd

from harness.protocols.verdict_cells import COLUMNS, CellTest, Setting, decide_all

KINDS = ("deploy", "no router", "over budget", "cannot tell")


def _router_of(part: pd.DataFrame, ref_rows: pd.DataFrame, comps: list[dict]):
    """The router of one cell and budget: its usage, splits, violations and overspent splits,
    from its comparisons (``router_comparisons.router_comparisons``), or from the row marked
    ``ref`` for comparisons logged without them; None when there is neither."""
    c = next((c for c in comps if "router_usage" in c), None)
    if c is not None:
        splits = int(c["router_splits"])
        return {"policy": str(c["policy"]), "usage": float(c["router_usage"]), "splits": splits,
                "violations": int(c["router_violations"]), "overspent": int(c.get("router_overspent", 0)),
                "alternatives": int(c.get("alternatives", 1))}
    if ref_rows.empty:
        return None
    r = ref_rows.iloc[0]
    splits = int(r["n_runs"]) if r["n_runs"] == r["n_runs"] else 0
    v = float(r["violation_rate"])
    return {"policy": str(r["policy"]), "usage": float(r["usage"]), "splits": splits,
            "violations": int(round(v * splits)) if v == v else 0, "overspent": 0, "alternatives": 1}


def verdicts(table: pd.DataFrame, comparisons: Iterable[dict], *, alpha: float | None = None) -> pd.DataFrame:
    """One row per cell, cost and budget of the decision table ``table``, from the router-vs-fixed
    ``comparisons`` (``router_comparisons.router_comparisons``); columns ``COLUMNS``, the sentence
    in ``verdict`` (module docstring)."""
    shown_alpha: object = alpha
    if alpha is None:  # the table's; a table of cells at several levels: each cell at its own
        shown_alpha = table.attrs.get("alpha", 0.05)
        alpha = float(shown_alpha) if isinstance(shown_alpha, (int, float)) else 0.05
    setting = Setting(margin=float(table.attrs.get("margin", 0.01)), fraction=float(table.attrs.get("fraction", 0.5)),
                      power=float(table.attrs.get("power", 0.8)))
    by: dict[tuple, list[dict]] = {}
    for c in comparisons:
        by.setdefault((c["cell"], round(float(c["cost"]), 12), round(float(c["budget"]), 9)), []).append(c)
    ranking = table[(table["kind"] != "fixed") & table["budget"].notna()]
    cells = []
    for (cell, cost, budget), part in ranking.groupby(["cell", "cost", "budget"], sort=True):
        comps = by.get((cell, round(float(cost), 12), round(float(budget), 9)), [])
        row = {k: math.nan for k in COLUMNS}
        row.update(cell=cell, cost=float(cost), budget=float(budget), arm="", note="", flag="", policy="", chosen="")
        router = _router_of(part, part[part["mark"] == "ref"], comps)
        level = next((float(c["alpha"]) for c in comps if "alpha" in c), alpha)
        own = next((Setting(float(c["margin"]), float(c["fraction"]), float(c["power"])) for c in comps
                    if "fraction" in c), setting)  # a table of cells at several settings: each its own
        cells.append(CellTest.build(row, router, comps, part, level, own))
    decide_all(cells, alpha)
    out = pd.DataFrame([c.row for c in cells], columns=list(COLUMNS))
    out.attrs.update(alpha=shown_alpha, margin=setting.margin, fraction=setting.fraction,
                     family=len({k for c in cells for k in c.keys()}),
                     frontier=table.attrs.get("frontier", "deployable"))
    return out


def _key(cost: float, budget: float) -> str:
    return f"verdict/c{float(cost):g}/b{float(budget):g}"


def mlflow_params(frame: pd.DataFrame) -> dict[str, str]:
    """``verdict/c<cost>/b<budget>`` -> the sentence (a sortable column of the runs table), and
    ``.../policy`` -> the router it is about. Cells of several sweep cells at one cost keep the
    first (the names carry cost and budget only)."""
    out: dict[str, str] = {}
    for r in frame.itertuples():
        key = _key(r.cost, r.budget)
        if key in out:
            continue
        out[key] = str(r.verdict)[:500]
        out[f"{key}/policy"] = str(r.policy)
    return out


JOB_TAG = "verdict"


def job_tags(frame: pd.DataFrame, jobs: list) -> dict[str, dict[str, str]]:
    """Each job's ``verdict`` tag: the verdicts of the cells whose router is the job's policy at
    the job's cost, kind by kind in ``KINDS`` order (``deploy (b0.25 b0.5); cannot tell
    (b0.75)``), else that another router was the one compared at that cost. Sorting the runs
    table by it groups the jobs by their best verdict."""
    out: dict[str, dict[str, str]] = {}
    for job in jobs:
        if not job.finished or "cost.c" not in job.params:
            continue
        cost = float(job.params["cost.c"])
        at_cost = frame[frame["cost"].astype(float) == cost]
        if not len(at_cost):
            continue
        mine = at_cost[at_cost["policy"].astype(str) == job.policy]
        if not len(mine):
            others = ", ".join(dict.fromkeys(at_cost["policy"].astype(str)))
            out[job.run_id] = {JOB_TAG: f"not compared (the router at c={cost:g}: {others})"}
            continue
        parts = []
        for kind in (*KINDS, *sorted(set(mine["kind"]) - set(KINDS))):
            budgets = [f"b{float(b):g}" for b in mine.loc[mine["kind"] == kind, "budget"]]
            if budgets:
                parts.append(f"{kind} ({' '.join(dict.fromkeys(budgets))})")
        out[job.run_id] = {JOB_TAG: "; ".join(parts)[:500]}
    return out


def mlflow_metrics(frame: pd.DataFrame) -> dict[str, float]:
    """Per cost and budget: ``deploy`` (1 deploy a router, 0 no router, -1 cannot tell), the
    router's difference to the fixed decision and its interval, usage, violation rate, Holm p
    and the questions a plan needs (only the finite ones)."""
    out: dict[str, float] = {}
    code = {"deploy": 1.0, "no router": 0.0, "cannot tell": -1.0, "over budget": -2.0}
    for r in frame.itertuples():
        key = _key(r.cost, r.budget)
        if f"{key}/deploy" in out:
            continue
        values = {"deploy": code.get(r.kind, -1.0), "diff": r.diff, "ci_low": r.ci_low, "ci_high": r.ci_high,
                  "usage": r.usage, "violation_rate": r.violation_rate, "p_holm": r.p_holm,
                  "questions_needed": r.plan_questions if r.kind == "cannot tell" else math.nan}
        for name, v in values.items():
            if v is not None and math.isfinite(float(v)):
                out[f"{key}/{name}"] = float(v)
    return out
