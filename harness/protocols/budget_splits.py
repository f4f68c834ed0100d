"""Protocol B's splits at cost 0: per seeded calibration / test split, the policy's scores, every
budget's exact, deployable and conservative rule, the per-question decisions, the fixed
decisions' rows, the test half's power facts and the routing summaries (docs/protocols.md,
"Protocol B, budget").

Why apart: none of it depends on the cost, so ``harness.protocols.budget`` computes it once per
task, policy and settings (``common.reused``) and applies each cost with ``CostFree.at_cost``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.paired import document_totals, max_showable_difference, min_reachable_p, sample_size_plan
from harness.protocols.budget_routing import (
    ROUTING_STATS,
    cost_axis,
    exact_routing_summaries,
    points_routing_summaries,
    random_routing_summaries,
    split_gap,
)
from harness.protocols.budget_rules import (
    USAGE_TOL,
    calibrated_rule,
    exact_count,
    exact_frontier_curve,
    exact_rule,
    expected_outcome,
    oracle_curve,
    oracle_matched,
    random_matched,
    run_probability,
)
from harness.protocols.calibration_size import SplitScores
from harness.protocols.common import PolicyFactory, fit_policy, policy_label, score_task
from harness.stats import dkw_epsilon, grouped_kfold, min_detectable_difference, stratified_grouped_halves
from harness.task import RoutingTask

FIXED = "fixed"
POWER_ALPHA, POWER = 0.05, 0.8
DECISION_COLUMNS = ("qid", "doc_id", "split", "budget", "frontier", "prob", "base", "extra", "utility", "oracle")


def _trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


def fixed_route_of(policy_factory: PolicyFactory) -> str | None:
    """"base" / "extra" for fixed-decision policies (always-keep / always-extra), else None."""
    route = getattr(policy_factory(), "fixed_route", None)
    if route is not None and route not in ("base", "extra"):
        raise ConfigError("policy", f"fixed_route must be 'base' or 'extra', got {route!r}")
    return route


def calibration_scores(
    cal: RoutingTask, test: RoutingTask, policy_factory: PolicyFactory, *, calibration: str, cal_folds: int, seed: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """(calibration-half scores, test-half scores, folds used).

    ``calibration="oof"`` with a trainable policy: CROSS-FITTED. The calibration half's
    documents are cut into ``cal_folds`` grouped folds; fold model k is fitted on the other
    folds and scores fold k (out-of-fold calibration scores). The test half's documents are cut
    into as many grouped folds (same seed) and test fold k is scored by the same model k. So a
    calibration score and a test score come from the same K models, each on questions it never
    saw: exchangeable, as the calibrated threshold (and the DKW slack) assume. The deployed
    router is this set of K models, each question routed by the model of its document's fold.
    (Scoring test with one refit on the whole half would not match: with few rescues a fold
    model's level moves with the rescues its training part holds, and ridge then spent 0.040 at
    budget 0.10 on QASPER.)

    Otherwise (``in_sample``, or an untrainable policy whose scores do not depend on fitting):
    one policy fitted on the whole calibration half scores both halves (0 folds).
    """
    if calibration == "oof" and policy_factory().trainable:
        for half, what in ((cal, "calibration"), (test, "test")):
            n_docs = len(np.unique(half.groups))
            if cal_folds > n_docs:
                raise ConfigError("budget.cal_folds", f"{cal_folds} folds need as many {what} documents, got {n_docs}")
        cal_scores, test_scores = np.empty(cal.n), np.empty(test.n)
        test_folds = grouped_kfold(test.groups, cal_folds, seed)
        for (train_idx, held_idx), (_, test_idx) in zip(grouped_kfold(cal.groups, cal_folds, seed), test_folds):
            model = fit_policy(policy_factory(), cal.take(train_idx), seed)
            cal_scores[held_idx] = score_task(model, cal.take(held_idx), seed)
            test_scores[test_idx] = score_task(model, test.take(test_idx), seed)
        return cal_scores, test_scores, cal_folds
    policy = fit_policy(policy_factory(), cal, seed)
    return score_task(policy, cal, seed), score_task(policy, test, seed), 0


def _split_facts(s: int, split_seed: int, cal: RoutingTask, test: RoutingTask, calibration: str, folds: int) -> dict:
    d = test.delta
    return {
        "split": s,
        "split_seed": split_seed,
        "n_cal": cal.n,
        "n_cal_docs": int(len(np.unique(cal.groups))),
        "n_test": test.n,
        "test_rescues": int(np.sum(d > 0)),
        "test_harms": int(np.sum(d < 0)),
        "test_mdd_vs_base": min_detectable_difference(d, test.groups, alpha=POWER_ALPHA, power=POWER),
        # what a test half can show at all (docs/metrics.md §12): every discordant question one way
        "test_max_diff_vs_base": max_showable_difference(d, test.groups),
        "test_min_p_vs_base": min_reachable_p(int(np.sum(document_totals(d, test.groups)[0] != 0))),
        "test_plan_questions_vs_base": sample_size_plan(d, test.groups, alpha=POWER_ALPHA, power=POWER)["questions"],
        "calibration": calibration,
        "cal_folds": folds,
    }


def _fixed_row(facts: dict, test: RoutingTask, route: str) -> dict:
    """A fixed decision's row at cost 0 (``CostFree.at_cost`` subtracts the cost)."""
    usage = 1.0 if route == "extra" else 0.0
    outcome = float(test.extra.mean() if route == "extra" else test.base.mean())
    k = test.n * usage
    return {
        "split": facts["split"],
        "split_seed": facts["split_seed"],
        "budget": math.nan,
        "frontier": FIXED,
        "fixed": True,
        "calibration": "none",
        "cal_folds": 0,
        "target_usage": usage,
        "n_cal": facts["n_cal"],
        "n_cal_docs": facts["n_cal_docs"],
        "n_test": test.n,
        "dkw_eps": math.nan,
        "threshold": math.inf if route == "base" else -math.inf,
        "tie_prob": math.nan,
        "cal_usage": math.nan,
        "cal_utility": math.nan,
        "extra_calls": k,
        "realized_usage": usage,
        "usage_error": math.nan,
        "violated": math.nan,
        "overshoot": math.nan,
        "outcome": outcome,
        "utility": outcome,
        "random_matched": random_matched(test.base, test.delta, k),
        "oracle_matched": oracle_matched(test.base, test.delta, k),
    }



def _decision_rows(test: RoutingTask, split: int, budget: float, frontier: str, prob, oracle: bool) -> pd.DataFrame:
    """The test half's per-question run probabilities under one rule (docs/protocols.md), with
    the expected utility at cost 0 (``CostFree.at_cost`` subtracts the cost)."""
    p = np.asarray(prob, dtype=float)
    base, extra = np.asarray(test.base, dtype=float), np.asarray(test.extra, dtype=float)
    return pd.DataFrame(
        {
            "qid": test.qids,
            "doc_id": test.groups,
            "split": split,
            "budget": budget,
            "frontier": frontier,
            "prob": p,
            "base": base,
            "extra": extra,
            "utility": (1.0 - p) * base + p * extra,
            "oracle": oracle,
        }
    )


@dataclass(frozen=True)
class CostFree:
    """What protocol B computes before a cost enters: utilities here are at cost 0."""

    frontiers: pd.DataFrame
    decisions: pd.DataFrame
    aucs: pd.DataFrame
    splits: pd.DataFrame
    routing: pd.DataFrame | None
    route: str | None
    label: str
    scores: tuple = ()  # per split: calibration_size.SplitScores (the calibration-size diagnostic)

    def at_cost(self, cost: float) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(frontiers, decisions) at ``cost``: utility = outcome - cost * usage, per row and per
        question, written as the expressions a run at that cost evaluates."""
        f = self.frontiers.copy()
        f["utility"] = f["outcome"].astype(float) - cost * f["realized_usage"].astype(float)
        f["cal_utility"] = f["cal_utility"].astype(float) - cost * f["cal_usage"].astype(float)
        d = self.decisions.copy()
        d["utility"] = d["utility"].astype(float) - cost * d["prob"].astype(float)
        return f, d


@dataclass
class _Parts:
    """What the splits add up to: the rows of every table ``CostFree`` holds."""

    rows: list[dict] = field(default_factory=list)
    auc_rows: list[dict] = field(default_factory=list)
    split_rows: list[dict] = field(default_factory=list)
    routing_rows: list[dict] = field(default_factory=list)
    decision_parts: list[pd.DataFrame] = field(default_factory=list)
    score_parts: list = field(default_factory=list)


@dataclass(frozen=True)
class _Split:
    """One split's halves and scores, as each budget's rules read them."""

    s: int
    split_seed: int
    cal: RoutingTask
    test: RoutingTask
    cal_scores: np.ndarray
    test_scores: np.ndarray
    folds: int
    facts: dict
    eps: float
    calibration: str
    is_oracle: bool


def cost_free_splits(
    task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    budgets: tuple[float, ...],
    n_splits: int,
    seed: int,
    dkw_delta: float,
    tol: float,
    calibration: str,
    cal_folds: int,
    min_discordant: int,
    alpha: float,
) -> CostFree:
    """Every split's fits, frontiers, decisions and routing summaries at cost 0 (utilities are
    then outcomes); ``CostFree.at_cost`` subtracts the cost with the expressions a run at that
    cost would evaluate, so the numbers are identical bit for bit (tested)."""
    route = fixed_route_of(policy_factory)
    split_seeds = draw_split_seeds(seed, n_splits)
    parts = _Parts()
    first = policy_factory()
    label = policy_label(first)
    is_oracle = bool(getattr(first, "oracle", False))
    for s, split_seed in enumerate(split_seeds):
        cal_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        cal, test = task.take(cal_idx), task.take(test_idx)
        if route is not None:
            facts = _split_facts(s, int(split_seed), cal, test, calibration, 0)
            parts.split_rows.append(facts)
            parts.rows.append(_fixed_row(facts, test, route))
            parts.decision_parts.append(
                _decision_rows(test, s, math.nan, FIXED, np.full(test.n, 1.0 if route == "extra" else 0.0),
                               is_oracle)
            )
            continue
        cal_scores, test_scores, folds = calibration_scores(
            cal, test, policy_factory, calibration=calibration, cal_folds=cal_folds, seed=seed
        )
        facts = _split_facts(s, int(split_seed), cal, test, calibration, folds)
        parts.split_rows.append(facts)
        parts.score_parts.append(SplitScores(s, int(split_seed), cal.groups, cal_scores, test_scores, test.base,
                                             test.extra))
        sp = _Split(s, int(split_seed), cal, test, cal_scores, test_scores, folds, facts,
                    dkw_epsilon(cal.n, dkw_delta), calibration, is_oracle)
        parts.auc_rows.append(_auc_row(s, test, test_scores))
        deploy_points = [_budget_rules(parts, sp, rho, tol) for rho in budgets]
        parts.routing_rows.append(_routing_row(s, test, test_scores, deploy_points, seed, min_discordant, alpha))
    return CostFree(
        frontiers=pd.DataFrame(parts.rows),
        decisions=pd.concat(parts.decision_parts, ignore_index=True)[list(DECISION_COLUMNS)],
        aucs=pd.DataFrame(parts.auc_rows, columns=["split", "exact_auc", "oracle_auc", "random_auc"]),
        splits=pd.DataFrame(parts.split_rows),
        routing=pd.DataFrame(parts.routing_rows) if parts.routing_rows else None,
        route=route,
        label=label,
        scores=tuple(parts.score_parts),
    )


def _auc_row(s: int, test: RoutingTask, test_scores: np.ndarray) -> dict:
    """The areas under the test half's exact frontier, the oracle's curve and random's line."""
    usage, curve = exact_frontier_curve(test_scores, test.base, test.delta)
    return {
        "split": s,
        "exact_auc": _trapezoid(usage, curve),
        "oracle_auc": _trapezoid(usage, oracle_curve(test.base, test.delta)),
        "random_auc": float((test.base.mean() + test.extra.mean()) / 2),
    }


def _budget_rules(parts: _Parts, sp: _Split, rho: float, tol: float) -> tuple[float, float, float]:
    """The exact, deployable and conservative rules of one budget on one split: a frontiers
    row and the per-question decisions each, added to ``parts``; returns the deployable rule's
    (usage, outcome, expected added cost), a point of its routing summaries."""
    n = sp.test.n
    rho_safe = max(0.0, rho - sp.eps)
    rules = {
        "exact": (rho, exact_rule(sp.test_scores, exact_count(n, rho))),
        "deployable": (rho, calibrated_rule(sp.cal_scores, rho)),
        "conservative": (rho_safe, calibrated_rule(sp.cal_scores, rho_safe)),
    }
    point = None
    for frontier, (target, (t, p)) in rules.items():
        prob = run_probability(sp.test_scores, t, p)
        row = _rule_row(sp, rho, frontier, target, t, p, prob, tol)
        parts.decision_parts.append(_decision_rows(sp.test, sp.s, rho, frontier, prob, sp.is_oracle))
        if frontier == "deployable":
            point = (row["realized_usage"], row["outcome"], float(np.mean(prob * cost_axis(sp.test)[1])))
        parts.rows.append(row)
    return point


def _rule_row(sp: _Split, rho: float, frontier: str, target: float, t: float, p: float, prob: np.ndarray,
              tol: float) -> dict:
    """One rule's frontiers row on the test half at cost 0 (``CostFree.at_cost`` subtracts the
    cost), with its usage and utility on the calibration half (none for the exact frontier)."""
    test, n = sp.test, sp.test.n
    # the exact frontier's expected count is floor(rho n) by construction: keep it an
    # integer (a float sum of tie probabilities could read 4.999999999999)
    k = float(exact_count(n, rho)) if frontier == "exact" else float(prob.sum())
    realized = k / n
    outcome = expected_outcome(prob, test.base, test.extra)
    if frontier == "exact":
        cal_usage = cal_utility = math.nan
    else:
        cal_prob = run_probability(sp.cal_scores, t, p)
        cal_usage = float(cal_prob.mean())
        cal_utility = expected_outcome(cal_prob, sp.cal.base, sp.cal.extra)
    return {
        "split": sp.s,
        "split_seed": sp.split_seed,
        "budget": rho,
        "frontier": frontier,
        "fixed": False,
        "calibration": sp.calibration,
        "cal_folds": sp.folds,
        "target_usage": target,
        "n_cal": sp.cal.n,
        "n_cal_docs": sp.facts["n_cal_docs"],
        "n_test": n,
        "dkw_eps": sp.eps,
        "threshold": t,
        "tie_prob": p,
        "cal_usage": cal_usage,
        "cal_utility": cal_utility,
        "extra_calls": k,
        "realized_usage": realized,
        "usage_error": realized - rho,
        "violated": realized > rho + USAGE_TOL,
        "overshoot": realized > rho + tol + USAGE_TOL,
        "outcome": outcome,
        "utility": outcome,
        "random_matched": random_matched(test.base, test.delta, k),
        "oracle_matched": oracle_matched(test.base, test.delta, k),
    }


def _routing_row(s: int, test: RoutingTask, test_scores: np.ndarray, deploy_points: list, seed: int,
                 min_discordant: int, alpha: float) -> dict:
    """One split's routing summaries (APGR, CPT, AIQ) of every curve, with whether its
    base-to-extra gap is told from zero (``split_gap``)."""
    gap = split_gap(test, min_discordant, alpha)
    exact = exact_routing_summaries(test_scores, test, gap)
    curves = {
        "exact": exact,
        "deployable": points_routing_summaries(deploy_points, test, exact["defined"]),
        "random": random_routing_summaries(test, gap, [int(seed), s]),
        "oracle": exact_routing_summaries(test.delta, test, gap),
    }
    return (
        {"split": s, "gap_defined": exact["defined"], "reason": exact["reason"], "gap_test": gap.test,
         "gap_p": gap.p, "cost_unit": cost_axis(test)[2]}
        | {f"{curve}/{stat}": values[stat] for curve, values in curves.items() for stat in ROUTING_STATS}
    )


def draw_split_seeds(seed: int, n_splits: int) -> np.ndarray:
    """Protocol B's seed of each split, drawn from the job's seed (the pre-flight draws the same
    halves to size them)."""
    return np.random.default_rng(seed).integers(0, 2**31 - 1, size=n_splits)
