"""Protocol ``cascade``: arms tried in a fixed order, each stage stopping or going on, under
mean-cost budgets (docs/metrics.md §17).

Its settings (``protocol.settings.cascade``) name the stages (arms of the outcome table, in
order), each stage's stop rule (``stop``: a built-in or plugin ``policies.cascade_stages``
class), how each arm's cost is counted and which stage's work a later arm reuses. The budget
grid is ``budget.grid`` read as protocol ``arms`` reads it. The job's policy is not used: a
cascade's decisions are its stop rules and thresholds (sweep ``protocol.settings.cascade.stop``).
Each job logs, per budget, the cascade's outcome and cost, its per-stage stops and costs, the
cost-matched mix it must beat and the verdict; the sweep's stage gathers them into one table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np
import pandas as pd

from harness.arm_set import ArmSetTask, check_arm_list
from harness.errors import ConfigError
from harness.protocols.arms import N_PERM, budget_part
from harness.protocols.arms_run import overspends
from harness.protocols.cascade_eval import incremental_costs
from harness.protocols.cascade_run import CascadeRun, available_features, run_cascade
from harness.protocols.cascade_search import MAX_LEVELS
from harness.protocols.outputs import Output
from harness.protocols.registry import Protocol, ProtocolContext, ProtocolResult, Table
from harness.protocols.sweep_stage import SweepJob, SweepResult
from harness.stats import grouped_kfold
from policies.cascade_stages import make_stage, stage_spec

KEY = "protocol.settings.cascade"
BUDGET_KEY = re.compile(r"cascade/b([0-9.e+-]+)/outcome")


class CascadeProtocol(Protocol):
    name = "cascade"
    title = "Cascade"
    version = "1"
    outputs = (
        Output("cascade/b{budget}/outcome", "cascade outcome @ budget {budget}", True, "outcome", headline=True,
               short="y@{budget}"),
        Output("cascade/b{budget}/cost", "cascade mean cost @ budget {budget}", False, "cost"),
        Output("cascade/b{budget}/mix_outcome", "cost-matched mix @ budget {budget}", True, "outcome"),
        Output("cascade/b{budget}/gain_vs_mix", "cascade - mix @ budget {budget}", True, "outcome",
               ci=("cascade/b{budget}/ci_low", "cascade/b{budget}/ci_high")),
        Output("cascade/b{budget}/violations", "halves over budget beyond sampling error @ {budget}", False, "count",
               report=False),
    )

    @dataclass
    class Config:
        stages: List[str] = field(default_factory=lambda: ["bm25", "dense", "keep"])  # arms, in cascade order
        stop: Any = "top_score"  # one stop rule for every stage but the last, or a list of them (one per stage)
        cost: Optional[str] = "total_ms"  # measured cost column <arm>.cost.<cost>
        per_arm: Dict[str, float] = field(default_factory=dict)  # or one unit cost per arm (then cost: null)
        contains: Dict[str, str] = field(default_factory=dict)  # arm -> an earlier stage whose work it reuses
        features: Dict[str, List[str]] = field(default_factory=dict)  # arm -> features its stage makes available
        grid: int = 20  # quantile levels of each stage's threshold grid
        tol: float = 0.02  # a half's mean cost may exceed the budget by tol x the single arms' cost range

        def __post_init__(self):
            try:
                check_arm_list(self.stages)
            except ConfigError as exc:
                raise ConfigError(f"{KEY}.stages", exc.problem) from None
            self.stop = stop_list(self.stop, len(self.stages))
            if (self.cost is None) == (not self.per_arm):
                raise ConfigError(f"{KEY}.cost", "give either cost (a measured cost column) or per_arm, not both")
            for arm, inner in self.contains.items():
                if arm not in self.stages or inner not in self.stages[: self.stages.index(arm)]:
                    raise ConfigError(f"{KEY}.contains.{arm}", f"expected a stage that reuses an earlier stage of "
                                                               f"{list(self.stages)}, got {arm} -> {inner}")
            if not (isinstance(self.grid, int) and 1 <= self.grid <= MAX_LEVELS):
                raise ConfigError(f"{KEY}.grid", f"expected an integer in [1, {MAX_LEVELS}], got {self.grid!r}")
            if not (isinstance(self.tol, (int, float)) and 0 <= self.tol <= 1):
                raise ConfigError(f"{KEY}.tol", f"must be in [0, 1], got {self.tol!r}")

    def min_documents(self, cfg, trainable):
        return 2 * 5, "two halves of documents, each split into grouped folds when fitting stop rules"

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        s = ctx.settings
        arms = ArmSetTask.from_table(ctx.table, s.stages, task.metric, cost_column=s.cost,
                                     unit_costs=dict(s.per_arm) if s.per_arm else None, source=task.source)
        contains = [s.stages.index(s.contains[a]) if a in s.contains else None for a in s.stages]
        paid = np.cumsum(incremental_costs(arms.costs, contains), axis=1)
        available = available_features(arms.arms, list(arms.features.columns), dict(s.features))
        grid = [float(b) for b in ctx.cfg.get("budget", {}).get("grid", [0.1, 0.25, 0.5, 0.75, 0.9])]
        if any(not 0 <= b <= 1 for b in grid):
            raise ConfigError("budget.grid", f"protocol cascade reads budgets as shares of the cost range in [0, 1], "
                                             f"got {grid}")
        halves = grouped_kfold(arms.groups, 2, ctx.seed)[0]
        run = run_cascade(arms, paid, s.stop, available, halves, grid, alpha=float(ctx.protocol.get("alpha", 0.05)),
                          n_perm=N_PERM, seed=ctx.seed, levels=int(s.grid))
        return ProtocolResult(metrics=cascade_metrics(run, s.tol), summary=summary_text(run, s.tol),
                              tables=_tables(run), tags=_tags(run), raw=run)

    def aggregate(self, jobs: list[SweepJob], ctx: Any) -> SweepResult | None:
        return cascade_sweep_result(jobs)


def stop_list(stop: Any, n_stages: int) -> list:
    """``stop`` as one rule entry per stage but the last (a single entry is used for each), every
    entry made once now so that an unknown name or parameter fails before any work."""
    rules = list(stop) if isinstance(stop, (list, tuple)) else [stop] * (n_stages - 1)
    if len(rules) != n_stages - 1:
        raise ConfigError(f"{KEY}.stop", f"expected one stop rule, or one per stage but the last ({n_stages - 1}), "
                                         f"got {len(rules)}")
    for i, rule in enumerate(rules):
        make_stage(rule, f"{KEY}.stop[{i}]" if isinstance(stop, (list, tuple)) else f"{KEY}.stop")
    return rules


def _rule_name(rule: Any) -> str:
    name, params = stage_spec(rule, f"{KEY}.stop")
    return name + (f"({', '.join(f'{k}={v}' for k, v in sorted(params.items()))})" if params else "")


def _over(run: CascadeRun, row, tol: float, spread: float) -> tuple[int, int]:
    """(violations beyond sampling error, overshoots beyond tol x range) over the two test halves."""
    return overspends(row, [np.flatnonzero(run.half == h) for h in (0, 1)], run.task.n, tol, spread)


def cascade_metrics(run: CascadeRun, tol: float) -> dict[str, float]:
    """Every logged number (docs/metrics.md §17): single arms, oracle, and per budget the cascade,
    its stages (stops, reached, cost share), thresholds' quantile indices, references, verdict."""
    arm_y, arm_c = run.singles
    spread = float(arm_c.max() - arm_c.min())
    m = {"cascade/oracle/outcome": run.oracle.mean_outcome, "cascade/oracle/cost": run.oracle.mean_cost,
         "cascade/level": run.level}
    for j, arm in enumerate(run.task.arms):
        m[f"cascade/single/{arm}/outcome"], m[f"cascade/single/{arm}/cost"] = float(arm_y[j]), float(arm_c[j])
    for cb in run.rows:
        r, st = cb.row, cb.stages
        b = f"cascade/b{budget_part(r.share)}"
        m.update({f"{b}/budget": r.budget, f"{b}/outcome": r.route.mean_outcome, f"{b}/cost": r.route.mean_cost,
                  f"{b}/mix_outcome": r.mix.mean_outcome, f"{b}/random_outcome": r.random.mean_outcome,
                  f"{b}/frontier_outcome": r.frontier, f"{b}/gain_vs_mix": r.point, f"{b}/p": r.p,
                  f"{b}/ci_low": r.ci[0], f"{b}/ci_high": r.ci[1], f"{b}/discordant": float(r.discordant),
                  **dict(zip((f"{b}/violations", f"{b}/overshoots"), map(float, _over(run, r, tol, spread)))),
                  f"{b}/infeasible": float(sum(not s.feasible for s in cb.searches))})
        for k, arm in enumerate(run.task.arms):
            m.update({f"{b}/stops/{arm}": float(st.stops[k]), f"{b}/reached/{arm}": float(st.reached[k]),
                      f"{b}/stage_cost/{arm}": float(st.stage_cost[k])})
        for h, found in enumerate(cb.searches):
            m.update({f"{b}/h{h}/threshold_index/{arm}": float(i) for arm, i in zip(run.task.arms, found.index)})
    return m


def budget_frame(run: CascadeRun) -> pd.DataFrame:
    """One row per budget: the cascade, its stages, each half's thresholds, references, verdict."""
    rows = []
    for cb in run.rows:
        r, st = cb.row, cb.stages
        row = {"budget_share": r.share, "budget": r.budget, "cascade_outcome": r.route.mean_outcome,
               "cascade_cost": r.route.mean_cost, "mix_outcome": r.mix.mean_outcome, "mix": "/".join(r.mix_arms[:2]),
               "mix_share_cheap": r.mix_arms[2], "random_outcome": r.random.mean_outcome,
               "frontier_outcome": r.frontier, "gain_vs_mix": r.point, "ci_low": r.ci[0], "ci_high": r.ci[1],
               "p": r.p, "level": run.level, "discordant": r.discordant, "verdict": r.verdict}
        for k, arm in enumerate(run.task.arms):
            row.update({f"stops_{arm}": int(st.stops[k]), f"stage_cost_{arm}": float(st.stage_cost[k])})
        for h, found in enumerate(cb.searches):
            row.update({f"h{h}_threshold_{arm}": float(t) for arm, t in zip(run.task.arms, found.thresholds)})
            row[f"h{h}_search"] = found.method + ("" if found.feasible else ", budget not met on calibration")
        rows.append(row)
    return pd.DataFrame(rows)


def _tables(run: CascadeRun) -> dict[str, Table]:
    per_q = pd.DataFrame({"qid": run.task.qids, "doc_id": run.task.groups, "half": run.half})
    for k, arm in enumerate(run.task.arms[:-1]):
        per_q[f"stop_score_{arm}"] = run.scores[:, k]
    for cb in run.rows:
        b = budget_part(cb.row.share)
        per_q[f"stage_b{b}"] = np.asarray(run.task.arms, dtype=object)[cb.stages.stop]
        per_q[f"cost_b{b}"] = cb.stages.cost
        per_q[f"outcome_b{b}"] = cb.stages.outcome
    return {"cascade_budgets": Table(budget_frame(run), preview=True),
            "cascade_decisions": Table(per_q, per_question=True)}


def _tags(run: CascadeRun) -> dict[str, str]:
    tags = {"cascade.stages": ",".join(run.task.arms), "cascade.stop": ",".join(_rule_name(s) for s in run.stops)}
    tags.update({f"cascade.verdict.b{budget_part(cb.row.share)}": cb.row.verdict[:250] for cb in run.rows})
    return tags


def summary_text(run: CascadeRun, tol: float) -> str:
    """The job's cascade summary: stages, stop rules, single arms, and per budget the cascade's
    stops per stage against the cost-matched mix."""
    arm_y, arm_c = run.singles
    t = run.task
    lines = [f"Cascade {' -> '.join(t.arms)} on {t.n} questions, {t.metric}, cost in {t.cost_unit} (a question pays "
             f"every stage it reaches); stop rules: {', '.join(_rule_name(s) for s in run.stops)}; every question "
             "routed by the thresholds of the other half",
             "single arms: " + "; ".join(f"{a} {y:.4f} at {c:.4g}" for a, y, c in zip(t.arms, arm_y, arm_c)),
             f"oracle (best arm per question, cheapest on ties): {run.oracle.mean_outcome:.4f} at "
             f"{run.oracle.mean_cost:.4g}",
             f"verdicts at level {run.level:.4g} (alpha over {len(run.rows)} budgets, Bonferroni), against the "
             "cost-matched mix of single arms:"]
    spread = float(arm_c.max() - arm_c.min())
    for cb in run.rows:
        r, st = cb.row, cb.stages
        stops = ", ".join(f"{a} {int(c)}" for a, c in zip(t.arms, st.stops))
        over, _ = _over(run, r, tol, spread)
        lines.append(f"  budget {r.share:g} ({r.budget:.4g}): cascade {r.route.mean_outcome:.4f} at "
                     f"{r.route.mean_cost:.4g} [stops: {stops}]; mix {r.mix.mean_outcome:.4f}"
                     f"{f'; {over} of 2 halves over budget beyond sampling error' if over else ''}; {r.verdict}")
    return "\n".join(lines)


def cascade_sweep_result(jobs: list[SweepJob]) -> SweepResult | None:
    """The sweep's cascade table: per job (its stop rules) and budget, the cascade, its stops per
    stage, the mix and the verdict; the single arms once."""
    rows, refs = [], {}
    for j in jobs:
        if not j.finished or "cascade/oracle/outcome" not in j.metrics:
            continue
        stages = j.tags.get("cascade.stages", "").split(",")
        for share in sorted({float(m.group(1)) for m in map(BUDGET_KEY.fullmatch, j.metrics) if m}):
            b = f"cascade/b{budget_part(share)}"
            rows.append({"stop": j.tags.get("cascade.stop", "?"), "seed": j.params.get("seed"), "budget": share,
                         "cascade": j.metrics[f"{b}/outcome"], "cost": j.metrics[f"{b}/cost"],
                         "stops": "/".join(str(int(j.metrics.get(f"{b}/stops/{a}", 0))) for a in stages),
                         "mix": j.metrics[f"{b}/mix_outcome"],
                         "verdict": j.tags.get(f"cascade.verdict.b{budget_part(share)}", "")})
        refs.update({k.split("/")[2]: (j.metrics[k], j.metrics[k.replace("/outcome", "/cost")])
                     for k in j.metrics if k.startswith("cascade/single/") and k.endswith("/outcome")})
    if not rows:
        return None
    frame = pd.DataFrame(rows).sort_values(["budget", "cascade", "stop"], ascending=[True, False, True], kind="stable")
    ref = pd.DataFrame([{"arm": k, "outcome": v[0], "cost": v[1]} for k, v in refs.items()])
    text = ("cascades: each job's cascade against the cost-matched mix of single arms, per budget (stops: questions "
            "stopping at each stage, in order)\n" + frame.to_string(index=False, float_format=lambda v: f"{v:.4f}")
            + "\n\nsingle arms (all questions):\n" + ref.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return SweepResult(title="cascades", text=text, tables={"cascade_verdicts": frame, "cascade_references": ref},
                       ui_tables=("cascade_verdicts",), text_files=("cascade_verdicts",),
                       metrics={"sweep/cascade/jobs": float(len(frame.drop_duplicates(["stop", "seed"])))})
