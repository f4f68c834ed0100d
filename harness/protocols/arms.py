"""Protocol ``arms``: route among n arms under mean-cost budgets (docs/metrics.md §14-15).

Its settings (``protocol.settings.arms``) name the arm set and how each arm's cost is counted;
the budget grid is ``budget.grid``, read as shares of the cost range between the cheapest and the
costliest single arm (with two arms of cost 0 and 1 that is protocol B's share of extra calls).
Each job logs, per budget, the router's outcome and cost, the cost-matched mix it must beat, the
paired comparison and its verdict; the sweep's stage gathers them into one n-way verdict table.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import pandas as pd

from harness.arm_set import ArmSetTask, check_arm_list
from harness.errors import ConfigError
from harness.protocols.arms_run import ArmsRun, overspends, run_arms
from harness.protocols.common import shown
from harness.protocols.outputs import Output
from harness.protocols.registry import Protocol, ProtocolContext, ProtocolResult, Table
from harness.protocols.sweep_stage import SweepJob, SweepResult
from harness.stats import grouped_kfold

BUDGET_KEY = re.compile(r"arms/b([0-9.e+-]+)/outcome")  # a budget's router outcome, e.g. arms/b0.25/outcome
N_PERM = 20_000  # sign-flip patterns of each comparison (exact below 17 documents that differ)


def budget_part(share: float) -> str:
    """A budget share as metric keys spell budgets (``0.25``, ``0.50``), as the console expands them."""
    return f"{share:.2f}"


class ArmsProtocol(Protocol):
    name = "arms"
    title = "Arms"
    version = "1"
    outputs = (
        Output("arms/oracle/outcome", "oracle (best arm per question)", True, "outcome"),
        Output("arms/best_arm/outcome", "best single arm", True, "outcome"),
        Output("arms/aiq", "AIQ (router's hull, cheapest to best arm)", True, "outcome"),
        Output("arms/apgr", "APGR (cheapest vs best arm)", True, "share"),
        Output("arms/b{budget}/outcome", "router outcome @ budget {budget}", True, "outcome", headline=True,
               short="y@{budget}"),
        Output("arms/b{budget}/cost", "router mean cost @ budget {budget}", False, "cost"),
        Output("arms/b{budget}/mix_outcome", "cost-matched mix @ budget {budget}", True, "outcome"),
        Output("arms/b{budget}/gain_vs_mix", "router - mix @ budget {budget}", True, "outcome",
               ci=("arms/b{budget}/ci_low", "arms/b{budget}/ci_high")),
        Output("arms/b{budget}/violations", "halves over budget beyond sampling error @ {budget}", False, "count",
               report=False),
        Output("arms/b{budget}/overshoots", "halves over budget by more than tol @ {budget}", False, "count",
               report=False),
        Output("arms/cost/utility", "router utility at cost c", True, "utility"),
        Output("arms/cost/gain_vs_best_arm", "router - best arm, utility at cost c", True, "utility",
               ci=("arms/cost/ci_low", "arms/cost/ci_high")),
    )

    @dataclass
    class Config:
        route: List[str] = field(default_factory=list)  # the arm set, e.g. [bm25, dense, keep, hybrid]
        cost: Optional[str] = None  # measured cost column <arm>.cost.<cost>, e.g. total_ms or rerank_pairs
        per_arm: Dict[str, float] = field(default_factory=dict)  # or one unit cost per arm
        tol: float = 0.02  # an overshoot: a half whose mean cost exceeds the budget by more than tol x the cost range

        def __post_init__(self):
            check_arm_list(self.route)
            if (self.cost is None) == (not self.per_arm):
                raise ValueError("give either cost (a measured cost column) or per_arm (a cost per arm), not both")
            if not (isinstance(self.tol, (int, float)) and 0 <= self.tol <= 1):
                raise ValueError(f"tol must be in [0, 1], got {self.tol!r}")

    def min_documents(self, cfg, trainable):
        return 2 * 5 if trainable else 2, "two halves of documents, each split into grouped folds when fitting"

    def job_line(self, metrics, metric, grid):
        """The console's line: the router at the grid's middle budget, each arm's share of the
        questions there, and the mix it is judged against."""
        if not grid:
            return super().job_line(metrics, metric, grid)
        b = f"arms/b{budget_part(sorted(grid)[len(grid) // 2])}"
        if f"{b}/outcome" not in metrics:
            return None
        shares = " ".join(f"{k.rsplit('/', 1)[1]} {metrics[k]:.0%}" for k in metrics if k.startswith(f"{b}/usage/"))
        return (f"{self.title} @{b[6:]}: y={metrics[f'{b}/outcome']:.4f} cost={metrics[f'{b}/cost']:.4g} [{shares}] "
                f"mix={metrics[f'{b}/mix_outcome']:.4f}")

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        s = ctx.settings
        arms = ArmSetTask.from_table(ctx.table, s.route, task.metric, cost_column=s.cost,
                                     unit_costs=dict(s.per_arm) if s.per_arm else None, source=task.source)
        grid = [float(b) for b in ctx.cfg.get("budget", {}).get("grid", [0.1, 0.25, 0.5, 0.75, 0.9])]
        if any(not 0 <= b <= 1 for b in grid):
            raise ConfigError("budget.grid", f"protocol arms reads budgets as shares of the cost range in [0, 1], got {grid}")
        train, test = grouped_kfold(arms.groups, 2, ctx.seed)[0]
        result = run_arms(factory, arms, (train, test), grid, alpha=float(ctx.protocol.get("alpha", 0.05)),
                          n_perm=N_PERM, seed=ctx.seed, cost=ctx.cost)
        return ProtocolResult(metrics=_metrics(result, s.tol), summary=summary_text(result, s.tol),
                              tables=_tables(result), tags=_tags(result))

    def aggregate(self, jobs: list[SweepJob], ctx: Any) -> SweepResult | None:
        return arms_sweep_result(jobs)


def _over(run: ArmsRun, row, tol: float, spread: float) -> tuple[int, int]:
    return overspends(row, list(run.halves), run.task.n, tol, spread)


def _metrics(run: ArmsRun, tol: float) -> dict[str, float]:
    arm_y, arm_c = run.singles
    spread = float(arm_c.max() - arm_c.min())
    m = {"arms/oracle/outcome": run.oracle.mean_outcome, "arms/oracle/cost": run.oracle.mean_cost,
         "arms/best_arm/outcome": float(arm_y.max()), "arms/level": run.level,
         **{f"arms/{k}": float(run.summaries[k]) for k in ("aiq", "apgr", "cpt50", "cpt80") if k in run.summaries}}
    for j, arm in enumerate(run.task.arms):
        m[f"arms/single/{arm}/outcome"], m[f"arms/single/{arm}/cost"] = float(arm_y[j]), float(arm_c[j])
    if run.cost_row is not None:
        cr = run.cost_row
        m.update({"arms/cost/utility": float(cr.utility.mean()), "arms/cost/outcome": cr.route.mean_outcome,
                  "arms/cost/mean_cost": cr.route.mean_cost, "arms/cost/best_arm_utility": float(cr.best_utility.mean()),
                  "arms/cost/gain_vs_best_arm": cr.point, "arms/cost/p": cr.p, "arms/cost/ci_low": cr.ci[0],
                  "arms/cost/ci_high": cr.ci[1], "arms/cost/discordant": float(cr.discordant)})
        m.update({f"arms/cost/usage/{a}": float(u) for a, u in zip(run.task.arms, cr.route.usage)})
    for r in run.rows:
        b = f"arms/b{budget_part(r.share)}"
        m.update({f"{b}/budget": r.budget, f"{b}/outcome": r.route.mean_outcome, f"{b}/cost": r.route.mean_cost,
                  f"{b}/mix_outcome": r.mix.mean_outcome, f"{b}/random_outcome": r.random.mean_outcome,
                  f"{b}/frontier_outcome": r.frontier, f"{b}/frontier_gap": r.frontier_gap, f"{b}/gain_vs_mix": r.point, f"{b}/p": r.p,
                  f"{b}/ci_low": r.ci[0], f"{b}/ci_high": r.ci[1], f"{b}/discordant": float(r.discordant),
                  **dict(zip((f"{b}/violations", f"{b}/overshoots"), map(float, _over(run, r, tol, spread))))})
        for j, arm in enumerate(run.task.arms):
            m[f"{b}/usage/{arm}"] = float(r.route.usage[j])
    return m


def budget_frame(run: ArmsRun) -> pd.DataFrame:
    """One row per budget: the router, its usage per arm, the references and the verdict."""
    rows = []
    for r in run.rows:
        row = {"budget_share": r.share, "budget": r.budget, "router_outcome": r.route.mean_outcome,
               "router_cost": r.route.mean_cost, "mix_outcome": r.mix.mean_outcome, "mix": "/".join(r.mix_arms[:2]),
               "mix_share_cheap": r.mix_arms[2], "random_outcome": r.random.mean_outcome,
               "frontier_outcome": r.frontier, "frontier_exact": r.frontier_exact, "gain_vs_mix": r.point,
               "ci_low": r.ci[0], "ci_high": r.ci[1], "p": r.p, "level": run.level, "discordant": r.discordant,
               "verdict": r.verdict}
        row.update({f"usage_{a}": float(u) for a, u in zip(run.task.arms, r.route.usage)})
        rows.append(row)
    return pd.DataFrame(rows)


def _tables(run: ArmsRun) -> dict[str, Table]:
    per_q = pd.DataFrame({"qid": run.task.qids, "doc_id": run.task.groups})
    for j, arm in enumerate(run.task.arms):
        per_q[f"score_{arm}"] = run.scores[:, j]
    for r in run.rows:
        per_q[f"outcome_b{budget_part(r.share)}"] = r.route.outcome
        per_q[f"cost_b{budget_part(r.share)}"] = r.route.cost
    return {"arms_budgets": Table(budget_frame(run), preview=True),
            "arms_decisions": Table(per_q, per_question=True)}


def _tags(run: ArmsRun) -> dict[str, str]:
    tags = {"arms.route": ",".join(run.task.arms)}
    tags.update({f"arms.verdict.b{budget_part(r.share)}": r.verdict[:250] for r in run.rows})
    if run.cost_row is not None:
        tags["arms.verdict.cost"] = run.cost_row.verdict[:250]
    return tags


def summary_text(run: ArmsRun, tol: float) -> str:
    """The job's n-way summary: single arms, oracle, and per budget the router against the mix."""
    arm_y, arm_c = run.singles
    lines = [f"Routing among {len(run.task.arms)} arms ({', '.join(run.task.arms)}) on {run.task.n} questions, "
             f"{run.task.metric}, cost in {run.task.cost_unit}; every question routed by the rule of the other half",
             "single arms: " + "; ".join(f"{a} {y:.4f} at {c:.4g}" for a, y, c in zip(run.task.arms, arm_y, arm_c)),
             f"oracle (best arm per question, cheapest on ties): {run.oracle.mean_outcome:.4f} at "
             f"{run.oracle.mean_cost:.4g}",
             "router summaries over n arms: " + _summary_words(run.summaries),
             f"verdicts at level {run.level:.4g} (alpha over {len(run.rows) + (run.cost_row is not None)} "
             "comparisons, Bonferroni)"]
    if run.cost_row is not None:
        cr = run.cost_row
        usage = ", ".join(f"{a} {u:.0%}" for a, u in zip(run.task.arms, cr.route.usage))
        lines.append(f"at cost c={cr.c:g} (per cheapest-to-costliest arm): router utility {cr.utility.mean():.4f} "
                     f"[{usage}], best arm {cr.best_arm} {cr.best_utility.mean():.4f}; {cr.verdict}")
    lines.append("per budget, against the cost-matched mix of single arms:")
    spread = float(arm_c.max() - arm_c.min())
    for r in run.rows:
        usage = ", ".join(f"{a} {u:.0%}" for a, u in zip(run.task.arms, r.route.usage))
        over, beyond_tol = _over(run, r, tol, spread)
        lines.append(f"  budget {r.share:g} ({r.budget:.4g}): router {r.route.mean_outcome:.4f} at "
                     f"{r.route.mean_cost:.4g} [{usage}]; mix {r.mix.mean_outcome:.4f}; "
                     f"{'exact frontier' if r.frontier_exact else 'frontier bound'} {r.frontier:.4f}"
                     f"{f'; {over} of 2 halves over budget beyond sampling error' if over else ''}"
                     f"{f'; {beyond_tol} of 2 over by more than tol' if beyond_tol else ''}; {r.verdict}")
    return "\n".join(lines)


def _summary_words(summaries: dict) -> str:
    """AIQ, APGR and CPTs in words; an undefined one says so with the reason."""
    text = ", ".join(f"{label} {shown(summaries.get(key, math.nan), '.4f')}" for label, key in
                     (("AIQ", "aiq"), ("APGR", "apgr"), ("CPT(50%)", "cpt50"), ("CPT(80%)", "cpt80")))
    return text + (f" ({summaries['reason']})" if not summaries.get("defined", True) and summaries.get("reason") else "")


def arms_sweep_result(jobs: list[SweepJob]) -> SweepResult | None:
    """The sweep's n-way verdict table: per policy and budget the router, the mix and the verdict,
    with the single arms and the oracle once (they are the same for every job of a table)."""
    rows, refs, costs = [], {}, []
    for j in jobs:
        if not j.finished or "arms/oracle/outcome" not in j.metrics:
            continue
        shares = sorted({float(m.group(1)) for m in map(BUDGET_KEY.fullmatch, j.metrics) if m})
        for share in shares:
            b = f"arms/b{budget_part(share)}"
            rows.append({"policy": j.policy, "seed": j.params.get("seed"), "budget": share,
                         "router": j.metrics[f"{b}/outcome"], "cost": j.metrics[f"{b}/cost"],
                         "mix": j.metrics[f"{b}/mix_outcome"], "frontier": j.metrics.get(f"{b}/frontier_outcome"),
                         "verdict": j.tags.get(f"arms.verdict.b{budget_part(share)}", "")})
        if "arms/cost/utility" in j.metrics:
            costs.append({"policy": j.policy, "seed": j.params.get("seed"), "cost.c": j.params.get("cost.c"),
                          "router_utility": j.metrics["arms/cost/utility"],
                          "best_arm_utility": j.metrics["arms/cost/best_arm_utility"],
                          "verdict": j.tags.get("arms.verdict.cost", "")})
        refs.update({k.split("/")[2]: (j.metrics[k], j.metrics[k.replace("/outcome", "/cost")])
                     for k in j.metrics if k.startswith("arms/single/") and k.endswith("/outcome")})
        refs["oracle"] = (j.metrics["arms/oracle/outcome"], j.metrics["arms/oracle/cost"])
    if not rows:
        return None
    frame = pd.DataFrame(rows).sort_values(["budget", "router", "policy"], ascending=[True, False, True], kind="stable")
    ref = pd.DataFrame([{"reference": k, "outcome": v[0], "cost": v[1]} for k, v in refs.items()])
    text = ("n-way routing: each policy's router against the cost-matched mix of single arms, per budget\n"
            + frame.to_string(index=False, float_format=lambda v: f"{v:.4f}")
            + "\n\nreferences (all questions):\n" + ref.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    tables = {"arms_verdicts": frame, "arms_references": ref}
    if costs:
        tables["arms_cost_verdicts"] = pd.DataFrame(costs)
        text += ("\n\nat each job's cost c (lambda chosen on the training half), against the best single arm:\n"
                 + tables["arms_cost_verdicts"].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return SweepResult(title="n-way routing", text=text, tables=tables,
                       ui_tables=("arms_verdicts",), text_files=("arms_verdicts",),
                       metrics={"sweep/arms/jobs": float(len({r['policy'] for r in rows}))})

