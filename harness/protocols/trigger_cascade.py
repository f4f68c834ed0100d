"""Protocol ``trigger_cascade``: seed 003's three-stage retrieval trigger (docs/metrics.md §18).

A question first meets a query-only router; the questions it is unsure of pay the no-retrieval
answer and meet an uncertainty router; those still unsure pay a probe retrieval and meet the
full router (BUR-linear), which decides. Its settings (``protocol.settings.trigger_cascade``)
name the stages as policy configs (built-in or plugin), in order; the cascade runs in the job
whose policy is its last stage (that job's policy is the last stage, so seed 003's sweep runs
it once, beside BUR-linear's own numbers), and every other job says so in one line. Budgets
are ``budget.grid`` read as shares of the cost range of the two fixed decisions (always memory,
always RAG), in ``cost`` (ms by default: a probe retrieval costs no tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, List

import numpy as np
import pandas as pd

from harness.errors import ConfigError, did_you_mean
from harness.protocols.arms import N_PERM, budget_part
from harness.protocols.arms_run import overspends
from harness.protocols.cascade_search import MAX_LEVELS
from harness.protocols.cost import UNITS, answer_pair_costs, check_answer_pair, router_family
from harness.protocols.outputs import Output
from harness.protocols.registry import Protocol, ProtocolContext, ProtocolResult, Table
from harness.protocols.sweep_stage import SweepJob, SweepResult
from harness.protocols.trigger_eval import COMPONENTS, stage_components
from harness.protocols.trigger_run import Judged, TriggerRun, run_triggers, singles
from policies.registry import builtin_policy_configs, entry_point_config, entry_point_policies, make_policy

KEY = "protocol.settings.trigger_cascade"
PREFIX = "trigger_cascade"
BUDGET_KEY = re.compile(rf"{PREFIX}/b([0-9.e+-]+)/outcome")


def stage_config(name: str, key: str) -> dict:
    """The policy config of a stage: a ``conf/policy`` file's, else an installed plugin's."""
    configs = builtin_policy_configs()
    if name in configs:
        return configs[name]
    plugins = entry_point_policies()
    if name in plugins:
        return entry_point_config(name, plugins[name])
    raise ConfigError(key, f"no policy {name!r}{did_you_mean(name, [*configs, *plugins])}")


class TriggerCascadeProtocol(Protocol):
    name = "trigger_cascade"
    title = "Trigger cascade"
    version = "1"
    outputs = (
        Output(f"{PREFIX}/b{{budget}}/outcome", "trigger cascade outcome @ budget {budget}", True, "outcome",
               headline=True, short="y@{budget}"),
        Output(f"{PREFIX}/b{{budget}}/cost", "trigger cascade mean cost @ budget {budget}", False, "cost"),
        Output(f"{PREFIX}/b{{budget}}/probes", "probe retrievals @ budget {budget}", False, "count"),
        Output(f"{PREFIX}/b{{budget}}/gain_vs_last", "cascade - its last stage alone @ budget {budget}", True,
               "outcome", ci=(f"{PREFIX}/b{{budget}}/ci_low_vs_last", f"{PREFIX}/b{{budget}}/ci_high_vs_last")),
        Output(f"{PREFIX}/b{{budget}}/gain_vs_mix", "cascade - cost-matched mix @ budget {budget}", True, "outcome",
               ci=(f"{PREFIX}/b{{budget}}/ci_low", f"{PREFIX}/b{{budget}}/ci_high")),
    )

    @dataclass
    class Config:
        stages: List[str] = field(default_factory=lambda: ["query_ridge", "uncertainty_ridge", "bur_linear"])
        cost: str = "ms"  # the budget's unit: ms, prompt_tokens or output_tokens
        grid: int = 10  # quantile levels of each stage's thresholds
        tol: float = 0.02  # a half's mean cost may exceed the budget by tol x the fixed decisions' cost range

        def __post_init__(self):
            if not self.stages or len(set(self.stages)) != len(self.stages) or not all(
                    isinstance(s, str) and s for s in self.stages):
                raise ConfigError(f"{KEY}.stages", f"expected distinct policy names, got {self.stages!r}")
            for i, name in enumerate(self.stages):
                stage_config(name, f"{KEY}.stages[{i}]")
            if self.cost not in UNITS:
                raise ConfigError(f"{KEY}.cost", f"expected one of {list(UNITS)}, got {self.cost!r}")
            if not (isinstance(self.grid, int) and 1 <= self.grid <= MAX_LEVELS):
                raise ConfigError(f"{KEY}.grid", f"expected an integer in [1, {MAX_LEVELS}], got {self.grid!r}")
            if not (isinstance(self.tol, (int, float)) and 0 <= self.tol <= 1):
                raise ConfigError(f"{KEY}.tol", f"must be in [0, 1], got {self.tol!r}")

    def check(self, cfg) -> None:
        check_answer_pair(cfg, self.name)

    def min_documents(self, cfg, trainable):
        node = ((cfg.get("protocol") or {}).get("settings") or {}).get(self.name) or {}
        stages = list(node.get("stages") or self.Config().stages)
        if str((cfg.get("policy") or {}).get("name", "")) != str(stages[-1]):
            return None  # it does not run in this job
        return 2 * 5, "two halves of documents, each split into grouped folds to fit the stage routers"

    def run(self, task, factory, ctx: ProtocolContext) -> ProtocolResult:
        s = ctx.settings
        job_policy = str((ctx.cfg.get("policy") or {}).get("name", ""))
        if job_policy != s.stages[-1]:
            return ProtocolResult(metrics={}, summary=f"trigger cascade {' -> '.join(s.stages)}: runs in the job of "
                                                      f"its last stage (policy {s.stages[-1]}), not this one")
        if ctx.table is None:
            raise ConfigError("protocol.run", "the trigger cascade needs the outcome table's cost columns")
        factories = [_stage_factory(name) for name in s.stages[:-1]] + [factory]
        families = [router_family(make()) for make in factories]
        if "oracle" in families:
            raise ConfigError(f"{KEY}.stages", f"stage {s.stages[families.index('oracle')]!r} reads the true outcome: "
                                               "an oracle cannot be a trigger stage")
        pays = stage_components(families)
        raw = answer_pair_costs(ctx.table, task.base_arm, task.extra_arm, task.qids)
        comps = {u: np.c_[g0, r, g1] for u, (g0, g1, r) in raw.items()}
        grid = [float(b) for b in ctx.cfg.get("budget", {}).get("grid", [0.1, 0.25, 0.5, 0.75, 0.9])]
        run = run_triggers(task, factories, s.stages, families, pays, comps, s.cost, grid,
                           alpha=float(ctx.protocol.get("alpha", 0.05)), n_perm=N_PERM, seed=ctx.seed,
                           levels=int(s.grid))
        return ProtocolResult(metrics=trigger_metrics(run, s.tol), summary=summary_text(run, s.tol),
                              tables=_tables(run), tags=_tags(run), raw=run)

    def aggregate(self, jobs: list[SweepJob], ctx: Any) -> SweepResult | None:
        return trigger_sweep_result(jobs)


def _stage_factory(name: str):
    cfg = stage_config(name, f"{KEY}.stages")
    return lambda: make_policy(cfg)


def _spread(run: TriggerRun) -> float:
    return float(np.ptp(singles(run)[1]))


def _judged_metrics(prefix: str, j: Judged) -> dict[str, float]:
    r = j.route
    m = {f"{prefix}/outcome": r.mean_outcome, f"{prefix}/cost": r.mean_cost, f"{prefix}/usage": r.usage,
         f"{prefix}/probes": float(j.parts.probes), f"{prefix}/infeasible": float(sum(not s.feasible for s in j.searches))}
    m.update({f"{prefix}/cost_{u}": v for u, v in j.unit_costs.items()})
    return m


def trigger_metrics(run: TriggerRun, tol: float) -> dict[str, float]:
    """Every logged number (docs/metrics.md §18)."""
    arm_y, arm_c = singles(run)
    m = {f"{PREFIX}/level": run.level}
    for j, arm in enumerate(run.task.arms):
        m[f"{PREFIX}/single/{arm}/outcome"], m[f"{PREFIX}/single/{arm}/cost"] = float(arm_y[j]), float(arm_c[j])
    tests = [np.flatnonzero(run.half == h) for h in (0, 1)]
    for tb in run.rows:
        r, c, b = tb.row, tb.cascade, f"{PREFIX}/b{budget_part(tb.row.share)}"
        m.update(_judged_metrics(b, c))
        violations, overshoots = overspends(r, tests, run.task.n, tol, _spread(run))
        m.update({f"{b}/budget": r.budget, f"{b}/answer_cost": c.parts.answer_cost,
                  f"{b}/mix_outcome": r.mix.mean_outcome, f"{b}/random_outcome": r.random.mean_outcome,
                  f"{b}/frontier_outcome": r.frontier, f"{b}/gain_vs_mix": r.point, f"{b}/p": r.p,
                  f"{b}/ci_low": r.ci[0], f"{b}/ci_high": r.ci[1], f"{b}/discordant": float(r.discordant),
                  f"{b}/gain_vs_last": tb.vs_last.point, f"{b}/p_vs_last": tb.vs_last.p,
                  f"{b}/ci_low_vs_last": tb.vs_last.ci[0], f"{b}/ci_high_vs_last": tb.vs_last.ci[1],
                  f"{b}/discordant_vs_last": float(tb.vs_last.discordant),
                  f"{b}/violations": float(violations), f"{b}/overshoots": float(overshoots)})
        for k, stage in enumerate(run.stages):
            st = f"{b}/stage/{stage}"
            m.update({f"{st}/reached": float(c.parts.reached[k]), f"{st}/memory": float(c.parts.memory[k]),
                      f"{st}/retrieve": float(c.parts.retrieve[k]), f"{st}/cost": float(c.parts.stage_cost[k])})
            m.update(_judged_metrics(f"{b}/alone/{stage}", tb.alone[k]))
        m.update({f"{b}/paid/{comp}": float(v) for comp, v in zip(COMPONENTS, c.parts.paid)})
    return m


def budget_frame(run: TriggerRun) -> pd.DataFrame:
    """One row per budget and rule (the cascade, then each stage alone)."""
    rows = []
    for tb in run.rows:
        for who, j in [("cascade", tb.cascade)] + [(f"{s} alone", a) for s, a in zip(run.stages, tb.alone)]:
            row = {"budget_share": tb.row.share, "budget": tb.row.budget, "rule": who,
                   "outcome": j.route.mean_outcome, "cost": j.route.mean_cost, "usage": j.route.usage,
                   "probes": j.parts.probes, **{f"cost_{u}": v for u, v in j.unit_costs.items()},
                   "thresholds": "; ".join(f"h{h}: " + ", ".join(f"[{lo:.4g}, {hi:.4g}]" for lo, hi in
                                                                   zip(s.lows, s.highs)) + ("" if s.feasible else
                                                                                            " (budget not met)")
                                           for h, s in enumerate(j.searches))}
            if who == "cascade":
                row.update({f"reached_{s}": int(v) for s, v in zip(run.stages, j.parts.reached)})
                row.update({"verdict_vs_last": tb.vs_last.verdict, "verdict_vs_mix": tb.row.verdict})
            rows.append(row)
    return pd.DataFrame(rows)


def _tables(run: TriggerRun) -> dict[str, Table]:
    t = run.task
    per_q = pd.DataFrame({"qid": t.qids, "doc_id": t.groups, "half": run.half})
    for k, stage in enumerate(run.stages):
        per_q[f"score_{stage}"] = run.scores[:, k]
    for comp_i, comp in enumerate(COMPONENTS):
        per_q[f"{comp}_{run.unit}"] = run.components[run.unit][:, comp_i]
    for tb in run.rows:
        b, r = budget_part(tb.row.share), tb.cascade.route
        per_q[f"stage_b{b}"] = np.asarray(run.stages, dtype=object)[r.stage]
        per_q[f"retrieve_b{b}"] = r.decision
        per_q[f"cost_b{b}"] = r.cost
        per_q[f"outcome_b{b}"] = r.outcome
    return {"trigger_budgets": Table(budget_frame(run), preview=True),
            "trigger_decisions": Table(per_q, per_question=True)}


def _tags(run: TriggerRun) -> dict[str, str]:
    tags = {f"{PREFIX}.stages": ",".join(run.stages), f"{PREFIX}.families": ",".join(run.families)}
    for tb in run.rows:
        b = budget_part(tb.row.share)
        tags[f"{PREFIX}.verdict.b{b}"] = tb.row.verdict[:250]
        tags[f"{PREFIX}.verdict_vs_last.b{b}"] = tb.vs_last.verdict[:250]
    return tags


def summary_text(run: TriggerRun, tol: float) -> str:
    """The job's trigger-cascade summary: stages, fixed decisions, and per budget the cascade
    beside its last stage alone, with the probe retrievals and each stage's cost."""
    t, arm_y, arm_c = run.task, *singles(run)
    lines = [f"Trigger cascade {' -> '.join(f'{s} ({f})' for s, f in zip(run.stages, run.families))} on {t.n} "
             f"questions, {t.metric}, cost in {run.unit}; every question routed by the thresholds of the other half",
             "fixed decisions: " + "; ".join(f"{a} {y:.4f} at {c:.4g}" for a, y, c in zip(t.arms, arm_y, arm_c)),
             f"verdicts at level {run.level:.4g} (alpha over {len(run.rows)} budgets x 2 comparisons, Bonferroni):"]
    tests = [np.flatnonzero(run.half == h) for h in (0, 1)]
    for tb in run.rows:
        c, last = tb.cascade, tb.alone[-1]
        stages = ", ".join(f"{s} {int(n)} ({cost:.4g})" for s, n, cost in
                           zip(run.stages, c.parts.reached, c.parts.stage_cost))
        over, _ = overspends(tb.row, tests, t.n, tol, _spread(run))
        lines += [f"  budget {tb.row.share:g} ({tb.row.budget:.4g}): cascade {c.route.mean_outcome:.4f} at "
                  f"{c.route.mean_cost:.4g}, retrieves {c.route.usage:.1%}, {c.parts.probes} probe retrievals "
                  f"[reached (cost): {stages}; answers {c.parts.answer_cost:.4g}]"
                  f"{f'; {over} of 2 halves over budget beyond sampling error' if over else ''}",
                  f"    {run.stages[-1]} alone {last.route.mean_outcome:.4f} at {last.route.mean_cost:.4g}, "
                  f"{last.parts.probes} probe retrievals: {tb.vs_last.verdict}",
                  f"    mix {tb.row.mix.mean_outcome:.4f}: {tb.row.verdict}"]
    return "\n".join(lines)


def trigger_sweep_result(jobs: list[SweepJob]) -> SweepResult | None:
    """The sweep's trigger-cascade table: per job that ran it and budget, the cascade beside its
    last stage alone (outcome, cost, probe retrievals) and both verdicts."""
    rows = []
    for j in jobs:
        if not j.finished or f"{PREFIX}/level" not in j.metrics:
            continue
        last = j.tags.get(f"{PREFIX}.stages", "").split(",")[-1]
        for share in sorted({float(m.group(1)) for m in map(BUDGET_KEY.fullmatch, j.metrics) if m}):
            b, part = f"{PREFIX}/b{budget_part(share)}", budget_part(share)
            rows.append({"stages": j.tags.get(f"{PREFIX}.stages", "?"), "seed": j.params.get("seed"),
                         "cost_param": j.params.get("cost"), "budget": share,
                         "cascade": j.metrics[f"{b}/outcome"], "cascade_cost": j.metrics[f"{b}/cost"],
                         "cascade_probes": j.metrics[f"{b}/probes"],
                         "last_alone": j.metrics.get(f"{b}/alone/{last}/outcome"),
                         "last_cost": j.metrics.get(f"{b}/alone/{last}/cost"),
                         "last_probes": j.metrics.get(f"{b}/alone/{last}/probes"),
                         "vs_last": j.tags.get(f"{PREFIX}.verdict_vs_last.b{part}", ""),
                         "vs_mix": j.tags.get(f"{PREFIX}.verdict.b{part}", "")})
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    text = ("trigger cascades: the cascade beside its last stage alone and the cost-matched mix, per budget "
            "(probes: probe retrievals)\n" + frame.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    return SweepResult(title="trigger cascades", text=text, tables={"trigger_verdicts": frame},
                       ui_tables=("trigger_verdicts",), text_files=("trigger_verdicts",),
                       metrics={"sweep/trigger_cascade/jobs": float(len(frame.drop_duplicates(["stages", "seed",
                                                                                            "cost_param"])))})
