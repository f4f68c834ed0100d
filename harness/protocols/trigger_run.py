"""Protocol ``trigger_cascade``'s computation (docs/metrics.md §18): the stage routers cross-fitted
as protocol ``arms`` fits its router, thresholds searched per budget on the training half only,
every question judged once by the rule of the other half, each stage's router alone under the
same budget, and the cascade judged against the cost-matched mix of the fixed decisions and
against its last stage alone (seed 003's comparison: the cascade beside BUR-linear).

Why it shares ``arms_run``: the halves, the out-of-fold scores, the references and the paired
comparison are those of every other n-way judgement, not copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from harness.arm_set import ArmSetTask
from harness.protocols.arms_run import (BudgetRow, by_question, compare_with_mix, cross_fit, overspent_most,
                                        paired_at_level, reference_row, share_budget, spent_beyond, verdict_words)
from harness.protocols.common import fit_policy, score_task
from harness.protocols.nway_references import Route, single_arms
from harness.protocols.trigger_eval import Breakdown, TriggerRoute, breakdown, decide, path_costs, route_of
from harness.protocols.trigger_search import TriggerThresholds, search_triggers
from harness.stats import grouped_kfold
from harness.task import RoutingTask


@dataclass
class Judged:
    """One rule (the cascade, or one stage alone) at one budget: its route, where its cost went
    and each half's thresholds (``searches[h]`` routed test half h)."""

    route: TriggerRoute
    parts: Breakdown
    searches: list[TriggerThresholds]
    unit_costs: dict[str, float]  # mean cost in every unit of the decisions taken


@dataclass
class Comparison:
    """The cascade against its last stage alone, paired by document."""

    point: float
    p: float
    ci: tuple[float, float]
    discordant: int
    verdict: str


@dataclass
class TriggerBudget:
    row: BudgetRow  # the cascade as a route, with the mix, random, frontier and the verdict vs the mix
    cascade: Judged
    alone: list[Judged]  # per stage: its router alone (one stage) under the same budget
    vs_last: Comparison


@dataclass
class TriggerRun:
    """Everything the protocol logs for one job."""

    task: ArmSetTask  # the two fixed decisions (memory, RAG) with their whole costs in the budget unit
    stages: list[str]
    families: list[str]
    pays: np.ndarray  # (stages x components): what each stage's family pays
    unit: str
    components: dict[str, np.ndarray]  # unit -> (questions x 3) memory, retrieval, rag costs
    half: np.ndarray  # per question: the half whose test it is
    scores: np.ndarray  # questions x stages: the test scores (each half scored by its training half's models)
    rows: list[TriggerBudget] = field(default_factory=list)
    level: float = 0.05


def stage_scorer(factories: Sequence[Callable]):
    """``fit_score(train, rows, seed)`` for ``arms_run.cross_fit``: each stage's router (a fresh
    policy) fitted on ``train`` and scoring ``rows``, one column per stage."""
    def fit_score(train: RoutingTask, rows: RoutingTask, seed: int) -> np.ndarray:
        cols = []
        for make in factories:
            policy = fit_policy(make(), train, seed)
            cols.append(score_task(policy, rows, seed))
        return np.column_stack(cols)
    return fit_score


def _judge(scores_oof, scores_test, halves, y, comps, pays, budget: float, levels: int, units) -> Judged:
    """The search on each training half, its rule on the other half; the route over all questions."""
    costs = path_costs(comps, pays)
    n = len(y)
    stage, dec = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    searches = []
    for h, (train, test) in enumerate((halves, halves[::-1])):
        found = search_triggers(scores_oof[h], y[train], costs[train], budget, levels=levels)
        stage[test], dec[test] = decide(scores_test[h], found.lows, found.highs)
        searches.append(found)
    rows = np.arange(n)
    per_unit = {u: float(path_costs(c, pays)[rows, stage, dec].mean()) for u, c in units.items()}
    return Judged(route_of(stage, dec, y, costs), breakdown(stage, dec, comps, pays), searches, per_unit)


def _as_route(r: TriggerRoute) -> Route:
    probs = np.c_[1 - r.decision, r.decision].astype(float)
    return Route(probs, r.outcome, r.cost, r.mean_outcome, r.mean_cost, probs.mean(axis=0))


def trigger_budget(run: TriggerRun, halves, oof, test, share: float, *, levels: int, n_perm: int,
                   seed: int) -> TriggerBudget:
    """One budget: the cascade, each stage alone, the references and both comparisons."""
    t = run.task
    budget = share_budget(t, share)
    comps = run.components[run.unit]
    cascade = _judge(oof, test, halves, t.outcomes, comps, run.pays, budget, levels, run.components)
    alone = [_judge([o[:, [k]] for o in oof], [s[:, [k]] for s in test], halves, t.outcomes, comps,
                    run.pays[k:k + 1], budget, levels, run.components) for k in range(len(run.stages))]
    tests = [halves[1], halves[0]]  # the test half of each direction
    over = [float(cascade.route.cost[idx].mean()) - budget for idx in tests]
    row = reference_row(t, share, budget, _as_route(cascade.route), over)
    compare_with_mix(row, t, run.level, n_perm, seed, tests, who="cascade")
    point, p, ci, discordant = paired_at_level(cascade.route.outcome - alone[-1].route.outcome, t.groups, run.level,
                                               n_perm, seed)
    last = alone[-1].route
    last_over = [float(last.cost[idx].mean()) - budget for idx in tests]
    words = verdict_words(f"{run.stages[-1]} alone", point, p, ci, discordant, run.level, who="cascade",
                          overspent=overspent_most(row, tests, t.n),
                          rival_overspent=spent_beyond(last.cost, budget, last_over, tests, t.n))
    return TriggerBudget(row, cascade, alone, Comparison(point, p, ci, discordant, words))


def run_triggers(task: RoutingTask, factories: Sequence[Callable], stages: Sequence[str], families: Sequence[str],
                 pays: np.ndarray, components: dict[str, np.ndarray], unit: str, shares: Sequence[float], *,
                 alpha: float, n_perm: int, seed: int, levels: int) -> TriggerRun:
    """The whole protocol: cross-fitted stage scores, one row per budget; two comparisons per
    budget (vs the mix, vs the last stage alone) at alpha / (2 x budgets)."""
    y = np.c_[task.base, task.extra].astype(float)
    comps = components[unit]
    arms = ArmSetTask(task.qids, task.groups, (task.base_arm, task.extra_arm), y,
                      np.c_[comps[:, 0], comps[:, 1] + comps[:, 2]], task.features, task.metric, unit, task.source)
    halves = grouped_kfold(task.groups, 2, seed)[0]
    oof, test = cross_fit(stage_scorer(factories), task, halves, seed)
    half = np.zeros(task.n, dtype=int)
    half[halves[0]] = 1  # rule 0 (fitted on halves[0]) routes halves[1]
    run = TriggerRun(arms, list(stages), list(families), pays, unit, components, half, by_question(halves, test),
                     level=alpha / max(1, 2 * len(shares)))
    for share in shares:
        run.rows.append(trigger_budget(run, halves, oof, test, float(share), levels=levels, n_perm=n_perm, seed=seed))
    return run


def singles(run: TriggerRun) -> tuple[np.ndarray, np.ndarray]:
    """(mean outcome, mean whole cost) of always-memory and always-RAG."""
    return single_arms(run.task.outcomes, run.task.costs)
