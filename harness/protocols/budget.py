"""Protocol B (docs/metrics.md §6): budgets, and the exact / deployable / conservative frontiers.

Why: a threshold picked on one half of the documents need not spend the same share of extra
calls on the other half. Repeating over seeded calibration/test halves shows both the ranking
quality (exact frontier) and how well a calibrated threshold keeps its budget (deployable,
conservative). The choices where docs/metrics.md is silent (splits, ties at their expectation, the
randomised threshold, cross-fitted calibration scores, the DKW slack, references at matched
usage, per-question decisions, fixed decisions, routing summaries, cost, power) are written
down in docs/protocols.md, "Protocol B, budget".

This module runs the protocol and reports it; the rules are in ``budget_rules``, the cost-free
split loop in ``budget_splits`` and the per-split routing summaries in ``budget_routing``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from harness.errors import ConfigError
from harness.protocols.budget_routing import ROUTING_CURVES, ROUTING_STATS
from harness.protocols.budget_rules import budget_key
from harness.protocols.budget_splits import FIXED, POWER_ALPHA, cost_free_splits
from harness.protocols.calibration_size import (
    calibration_size_block,
    calibration_size_metrics,
    calibration_size_table,
    check_cal_sizes,
)
from harness.protocols.common import PolicyFactory, fmt, reused, text_table
from harness.protocols.routing_summaries import N_RANDOM_ORDERINGS
from harness.task import RoutingTask

DEFAULT_BUDGETS = (0.10, 0.25, 0.50, 0.75, 0.90)
FRONTIERS = ("exact", "deployable", "conservative")
CALIBRATIONS = ("oof", "in_sample")


@dataclass
class BudgetResult:
    """metrics (stable names), the long per-split ``frontiers`` table, per-split AUCs, and the
    per-split facts (sizes, discordant questions, power) in ``splits``."""

    metrics: dict[str, float]
    frontiers: pd.DataFrame
    aucs: pd.DataFrame
    policy: str = "policy"
    metric: str = "hit@10"
    splits: pd.DataFrame | None = None
    calibration: str = "oof"
    fixed_route: str | None = None
    routing: pd.DataFrame | None = None  # per split: APGR, CPT, AIQ of each curve (routing/...)
    # per test question, split, budget and frontier: run probability and expected utility
    # (docs/protocols.md, "Per-question decisions"); the app logs it as budget_decisions.parquet
    decisions: pd.DataFrame | None = None
    # the calibration-size diagnostic (budget.cal_sizes; harness.protocols.calibration_size),
    # per split, size, budget and frontier; the app logs it as budget_cal_sizes.parquet
    cal_sizes: pd.DataFrame | None = None

    def _routing_lines(self) -> str:
        m, r = self.metrics, self.routing
        unit = str(r["cost_unit"].iloc[0]) if r is not None and len(r) else "usage"
        rows = [
            [name] + [m[f"routing/{curve}/{stat}"] for stat in ROUTING_STATS]
            for name, curve in (("policy, exact", "exact"), ("policy, deployable", "deployable"),
                                ("random", "random"), ("oracle", "oracle"))
        ]
        table = text_table(["routing summaries", "APGR", "CPT(50%)", "CPT(80%)", f"AIQ (cost: {unit})"], rows)
        n_def, n_splits = int(m["routing/gap_defined_splits"]), int(m["n/splits"])
        if n_def < n_splits:
            reasons = sorted({str(x).removesuffix("; PGR/APGR/CPT not defined")
                              for x in r.loc[~r["gap_defined"].astype(bool), "reason"]}) if r is not None else []
            note = (
                f"PGR, APGR and CPT are undefined: the base-to-extra gap is resolvable in {n_def} of "
                f"{n_splits} test halves ({'; '.join(reasons)})"
            )
        else:
            note = "PGR = share of the base-to-extra gap recovered; CPT(x) = smallest usage with PGR >= x"
        note += (
            f"\nrandom: APGR of its expectation (the line, 0.5); CPT and AIQ the mean over "
            f"{N_RANDOM_ORDERINGS} seeded random orderings (the hull and the first crossing favour a "
            "single noisy curve, the policy's and random's alike)"
        )
        return f"{table}\n{note}"

    def _power_line(self) -> str:
        """What a test half can resolve (docs/metrics.md §12): the largest difference from
        always-base it could show, the MDD only when below it, and the plan (means over splits)."""
        m = self.metrics
        line = (
            f"power: the test halves hold (mean over splits) {m['budget/power/n_test']:.1f} questions, "
            f"{m['budget/power/rescues']:.1f} rescues + {m['budget/power/harms']:.1f} harms = "
            f"{m['budget/power/discordant']:.1f} discordant questions (all differences rest on them); "
        )
        largest, mdd = m.get("budget/power/max_diff_vs_base", math.nan), m["budget/power/mdd_vs_base"]
        min_p = m.get("budget/power/min_p_vs_base", math.nan)
        if not (mdd < largest and min_p < POWER_ALPHA):
            line += (f"largest difference from always-base a test half could show {fmt(largest)}: no difference is "
                     "detectable with these questions")
        else:
            line += (f"largest difference from always-base a test half could show {fmt(largest)}, minimum detectable "
                     f"{fmt(mdd)} (80% power, alpha 0.05, grouped by document)")
        plan = m.get("budget/power/plan_questions_vs_base", math.nan)
        if plan == plan:
            line += (f"; about {plan:.0f} test questions would give 80% power at alpha 0.05 for policy vs always-base "
                     "(exact sign test)")
        return line

    def summary(self) -> str:
        m, k = self.metrics, self.metric
        head = f"Protocol B (budgets, {int(m['n/splits'])} splits) - {self.policy}"
        if self.fixed_route is not None:
            table = text_table(
                ["fixed decision", "usage", k, f"{k} sd", "utility", "utility sd"],
                [[
                    f"always {self.fixed_route}",
                    m[f"budget/{FIXED}/realized_usage"],
                    m[f"budget/{FIXED}/{k}"],
                    m[f"budget/{FIXED}/{k}_std"],
                    m[f"budget/{FIXED}/utility"],
                    m[f"budget/{FIXED}/utility_std"],
                ]],
            )
            return (
                f"{head}\n{table}\n"
                "a fixed decision is a reference point, not a budget frontier (no per-budget rows, no AUC)\n"
                f"{self._power_line()}"
            )
        rows = []
        for rho in sorted(self.frontiers["budget"].unique()):
            b = budget_key(rho)
            for fr in FRONTIERS:
                p = f"budget/{b}/{fr}"
                rows.append(
                    [
                        f"{b} {fr}",
                        m[f"{p}/{k}"],
                        m[f"{p}/utility"],
                        m[f"{p}/realized_usage"],
                        m[f"{p}/realized_usage_std"],
                        m[f"{p}/violation_rate"],
                        m[f"{p}/tolerance_overshoot_rate"],
                        m[f"{p}/random_matched/{k}"],
                        m[f"{p}/oracle_matched/{k}"],
                    ]
                )
        table = text_table(
            ["budget frontier", k, "utility", "usage", "usage sd", "viol", "overshoot", f"random {k}", f"oracle {k}"],
            rows,
        )
        folds = int(m["budget/cal_folds"])
        if folds:
            how = (f"{folds} document-grouped folds; each test fold scored by the model of its fold, fitted on the "
                   "other calibration folds")
        elif self.calibration == "oof":
            how = "untrainable policy: no folds, its scores do not depend on fitting"
        else:
            how = "the policy fitted on the calibration half scores that same half"
        cal = (
            f"calibration scores: {self.calibration} ({how}); a score equal to the threshold runs "
            "with the probability that spends the target on calibration (expectation reported)"
        )
        text = (
            f"{head}\n{table}\n"
            f"exact-frontier AUC {fmt(m['frontier/exact_auc'])} (sd {fmt(m['frontier/exact_auc_std'])})"
            f"  random {fmt(m['frontier/random_auc'])}  oracle {fmt(m['frontier/oracle_auc'])}\n"
            f"{cal}\n{self._routing_lines()}\n{self._power_line()}"
        )
        if self.cal_sizes is not None:
            text += "\n" + calibration_size_block(self.cal_sizes, m)
        return text


def run_budget_protocol(
    task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    budgets: tuple[float, ...] = DEFAULT_BUDGETS,
    n_splits: int = 5,
    seed: int = 0,
    cost: float = 0.0,
    dkw_delta: float = 0.05,
    tol: float = 0.02,
    calibration: str = "oof",
    cal_folds: int = 5,
    min_discordant: int = 10,
    alpha: float = 0.05,
    cal_sizes=(),
) -> BudgetResult:
    """Protocol B: per split, calibrate on one half (out-of-fold scores by default: K fold
    models, each fitted on the other calibration folds, and test fold k is scored by fold model
    k, ``calibration_scores``), apply the calibrated threshold unchanged to the test half,
    evaluate every frontier. With ``calibration="in_sample"`` or an untrainable policy one
    policy fitted on the whole calibration half scores both halves.

    ``min_discordant`` and ``alpha`` decide whether a test half's base-to-extra gap is told
    from zero (PGR, APGR and CPT are NaN otherwise; docs/protocols.md, "Routing summaries").

    With a ``KeyedFactory`` (``protocols.common``), the cost-free part (fitting, scores,
    frontiers, decisions, routing summaries) is kept in memory and reused by the next call with
    the same task, policy and settings at another cost: only utilities depend on the cost
    (docs/protocols.md, "Cost"), so a sweep over costs fits each policy once per seed. The
    numbers are bit for bit those of a fresh run (tested).

    ``cal_sizes``: the calibration-size diagnostic (``harness.protocols.calibration_size``) at
    these sizes, on the same splits and scores (nothing refitted); off when empty, and never for
    a fixed decision (it has no threshold)."""
    sizes = check_cal_sizes(cal_sizes)
    budgets = _checked_settings(alpha, budgets, n_splits, calibration, cal_folds)
    settings = dict(budgets=budgets, n_splits=int(n_splits), seed=int(seed), dkw_delta=float(dkw_delta),
                    tol=float(tol), calibration=calibration, cal_folds=int(cal_folds),
                    min_discordant=int(min_discordant), alpha=float(alpha))
    free = reused("budget", policy_factory, task, settings,
                  lambda: cost_free_splits(task, policy_factory, **settings))
    frontiers, decisions = free.at_cost(cost)
    aucs, splits, route, label = free.aucs.copy(), free.splits.copy(), free.route, free.label
    m = task.metric
    metrics: dict[str, float] = {
        "n/splits": n_splits,
        "n/questions": task.n,
        "cost": float(cost),
        "budget/calibration_oof": float(calibration == "oof"),
        "budget/cal_folds": float(splits["cal_folds"].max()),
    }
    metrics.update(_power_metrics(splits))
    if route is not None:
        metrics.update(_fixed_metrics(frontiers, m))
        return BudgetResult(metrics, frontiers, aucs, policy=label, metric=m, splits=splits,
                            calibration=calibration, fixed_route=route, decisions=decisions)
    metrics.update(_frontier_metrics(frontiers, aucs, m, cost))
    routing = free.routing.copy()
    metrics.update(_routing_metrics(routing))
    by_size = None
    if sizes:
        by_size = calibration_size_table(free.scores, sizes, budgets, dkw_delta=float(dkw_delta), tol=float(tol))
        metrics.update(calibration_size_metrics(by_size))
    return BudgetResult(metrics, frontiers, aucs, policy=label, metric=m, splits=splits, calibration=calibration,
                        fixed_route=None, routing=routing, decisions=decisions, cal_sizes=by_size)


def _checked_settings(alpha, budgets, n_splits: int, calibration: str, cal_folds: int) -> tuple[float, ...]:
    """The budgets as floats, after a ConfigError naming the key of the first bad setting."""
    if not 0.0 < float(alpha) < 1.0:
        raise ConfigError("protocol.alpha", f"must be in (0, 1), got {alpha!r}")
    budgets = tuple(float(b) for b in budgets)
    for b in budgets:  # the same rule and key as harness.config.validation.validate
        if not 0 < b <= 1:
            raise ConfigError("budget.grid", f"each budget must be in (0, 1], got {b}")
    if n_splits < 1:
        raise ConfigError("budget.n_splits", f"must be >= 1, got {n_splits}")
    if calibration not in CALIBRATIONS:
        raise ConfigError("budget.calibration", f"unknown {calibration!r}; choose from {CALIBRATIONS}")
    if calibration == "oof" and cal_folds < 2:
        raise ConfigError("budget.cal_folds", f"must be >= 2, got {cal_folds}")
    return budgets


def _power_metrics(splits: pd.DataFrame) -> dict[str, float]:
    """``budget/power/...``: what the test halves can resolve, means over splits."""
    metrics: dict[str, float] = {}
    for name, col in (
        ("n_test", "n_test"),
        ("rescues", "test_rescues"),
        ("harms", "test_harms"),
        ("mdd_vs_base", "test_mdd_vs_base"),
        ("max_diff_vs_base", "test_max_diff_vs_base"),
        ("min_p_vs_base", "test_min_p_vs_base"),
        ("plan_questions_vs_base", "test_plan_questions_vs_base"),
    ):
        metrics[f"budget/power/{name}"] = float(splits[col].mean())
    metrics["budget/power/discordant"] = float((splits["test_rescues"] + splits["test_harms"]).mean())
    return metrics


def _fixed_metrics(frontiers: pd.DataFrame, m: str) -> dict[str, float]:
    """``budget/fixed/...``: a fixed decision's outcome, utility and usage, mean and sd over splits."""
    metrics: dict[str, float] = {}
    for name, col in ((m, "outcome"), ("utility", "utility"), ("realized_usage", "realized_usage")):
        vals = frontiers[col].astype(float).to_numpy()
        metrics[f"budget/{FIXED}/{name}"] = float(vals.mean())
        metrics[f"budget/{FIXED}/{name}_std"] = float(vals.std())
    return metrics


def _frontier_metrics(frontiers: pd.DataFrame, aucs: pd.DataFrame, m: str, cost: float) -> dict[str, float]:
    """``budget/<rho>/<frontier>/...`` (mean and sd over splits, random and the oracle at the
    realized usage) and the frontier AUCs."""
    columns = {
        m: "outcome",
        "utility": "utility",
        "realized_usage": "realized_usage",
        "usage_error": "usage_error",
        "violation_rate": "violated",
        "tolerance_overshoot_rate": "overshoot",
        f"random_matched/{m}": "random_matched",
        f"oracle_matched/{m}": "oracle_matched",
    }
    metrics: dict[str, float] = {}
    for (rho, frontier), g in frontiers.groupby(["budget", "frontier"], sort=True):
        prefix = f"budget/{budget_key(rho)}/{frontier}"
        for name, col in columns.items():
            vals = g[col].astype(float).to_numpy()
            metrics[f"{prefix}/{name}"] = float(vals.mean())
            metrics[f"{prefix}/{name}_std"] = float(vals.std())
        random_u = g["random_matched"] - cost * g["realized_usage"]
        oracle_u = g["oracle_matched"] - cost * g["realized_usage"]
        metrics[f"{prefix}/random_matched/utility"] = float(random_u.mean())
        metrics[f"{prefix}/oracle_matched/utility"] = float(oracle_u.mean())
    for col in ("exact_auc", "oracle_auc", "random_auc"):
        metrics[f"frontier/{col}"] = float(aucs[col].mean())
        metrics[f"frontier/{col}_std"] = float(aucs[col].std(ddof=0))
    return metrics


def _routing_metrics(routing: pd.DataFrame) -> dict[str, float]:
    """``routing/<curve>/<stat>`` (mean and sd over splits); the PGR-based ones NaN unless every
    split's gap is defined."""
    all_defined = bool(routing["gap_defined"].all())
    metrics = {"routing/gap_defined_splits": float(routing["gap_defined"].sum())}
    for curve in ROUTING_CURVES:
        for stat in ROUTING_STATS:
            vals = routing[f"{curve}/{stat}"].astype(float).to_numpy()
            ratio = stat != "aiq"  # PGR-based: undefined unless every split's gap is defined
            ok = all_defined or not ratio
            metrics[f"routing/{curve}/{stat}"] = float(vals.mean()) if ok else math.nan
            metrics[f"routing/{curve}/{stat}_std"] = float(vals.std()) if ok else math.nan
    return metrics
