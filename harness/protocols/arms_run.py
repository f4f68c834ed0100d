"""The n-way budget protocol's computation (docs/metrics.md §14-15): cross-fitted scores, lambda
calibrated to each budget on the training half only, and every question judged once.

Why cross-fitting: documents are split into two halves; a policy is fitted on one half, its
lambda calibrated on that half's out-of-fold scores, and it routes the other half. Swapping the
halves routes every question exactly once with a rule that never saw it, so the paired
comparison by document uses all the questions, and no threshold is judged on its fitting data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

from harness.arm_set import ArmSetTask
from harness.errors import HarnessError
from harness.paired import sign_flip_interval
from harness.protocols.nway_decide import calibrate_lambda, decide, decide_probabilities, lambda_breakpoints
from harness.protocols.nway_frontier import exact_frontier
from harness.protocols.nway_summaries import nway_aiq, nway_pgr_summaries
from harness.protocols.nway_references import (
    Route,
    cost_matched_mix,
    oracle_route,
    random_matched,
    route_from_probabilities,
    single_arms,
)
from harness.protocols.verdict_stats import OVERSPEND_LEVEL
from harness.stats import grouped_kfold, sign_flip_test
from policies.arm_policies import ArmPolicy, ArmScoreContext

OOF_FOLDS = 5  # grouped folds of the training half whose out-of-fold scores calibrate lambda


@dataclass
class BudgetRow:
    """One budget's numbers: the router, its fixed competitor (the cost-matched mix) and context."""

    share: float  # the budget as a share of the cost range between the cheapest and costliest arm
    budget: float  # in cost units: cheapest + share * (costliest - cheapest), single arms' means
    route: Route  # the router's expected route over all questions (each judged by the other half's rule)
    over: list[float]  # per half: mean cost - budget (> tolerance: a violation)
    mix: Route
    mix_arms: tuple[str, str, float]  # (cheap arm, costly arm, share on the cheap arm)
    random: Route
    frontier: float  # the exact frontier's mean outcome at the budget (upper bound for graded outcomes)
    frontier_exact: bool
    frontier_gap: float  # LP bound - best integral route found (0 when exact)
    point: float = 0.0  # router - mix, mean per question
    p: float = 1.0
    ci: tuple[float, float] = (float("nan"), float("nan"))
    discordant: int = 0  # questions whose expected outcomes differ
    verdict: str = ""


@dataclass
class CostRow:
    """The router at a cost penalty c: lambda chosen per half on the training half's out-of-fold
    scores by the training utility (protocol A's choice, n-way), against the best single arm."""

    c: float  # penalty for going from the cheapest to the costliest arm's mean cost
    lams: list[float]  # lambda chosen on each training half (in outcome per cost unit)
    route: Route
    utility: np.ndarray  # per question: outcome - c * normalised cost of the router
    best_arm: str  # the single arm with the best mean utility over all questions (hindsight)
    best_utility: np.ndarray
    point: float = 0.0
    p: float = 1.0
    ci: tuple[float, float] = (float("nan"), float("nan"))
    discordant: int = 0
    verdict: str = ""


@dataclass
class ArmsRun:
    """Everything the protocol logs for one job."""

    task: ArmSetTask
    singles: tuple[np.ndarray, np.ndarray]  # (mean outcome, mean cost) per arm, all questions
    oracle: Route
    rows: list[BudgetRow] = field(default_factory=list)
    scores: np.ndarray | None = None  # cross-fitted scores (questions x arms)
    level: float = 0.05  # the per-comparison level (Bonferroni over the job's budgets and its cost row)
    cost_row: CostRow | None = None
    summaries: dict = field(default_factory=dict)  # AIQ, APGR, CPT over the router's operating points
    halves: tuple = ()  # (idx_a, idx_b): the two halves of documents


def cross_fitted_scores(factory, task: ArmSetTask, halves, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per half h: (the out-of-fold scores of the training half, the scores of the test half) from
    policies fitted on parts of the training half only (``halves`` = (idx_a, idx_b): train on a,
    test b, and the other way; ``cross_fit``)."""
    return cross_fit(lambda train, test, s: _fit_score(factory, train, test, s), task, halves, seed)


def cross_fit(fit_score, task: ArmSetTask, halves, seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``cross_fitted_scores`` for any scorer: ``fit_score(train, rows, seed)`` fits on the task
    ``train`` and returns one row of scores per question of ``rows`` (the n-way router's, or a
    cascade's stop scores).

    Per direction (train on one half, route the other): both halves are cut into the same number
    K of grouped folds (same seed); fold model k is fitted on the training half without its fold
    k and scores that fold (the out-of-fold calibration scores) and the test half's fold k. So a
    calibration score and a test score come from the same K models, each on questions it never
    saw, as the calibrated lambda assumes (protocol B's cross-fitting, budget_splits); one refit
    on the whole half would score the test half on another scale than the one lambda was set on."""
    oof_all, test_all = [], []
    for train, test in (halves, halves[::-1]):
        k = min(OOF_FOLDS, len(np.unique(task.groups[train])), len(np.unique(task.groups[test])))
        folds = zip(grouped_kfold(task.groups[train], k, seed), grouped_kfold(task.groups[test], k, seed))
        oof = tst = None
        for (fit_i, held_i), (_, test_i) in folds:
            rows = np.r_[train[held_i], test[test_i]]
            part = np.asarray(fit_score(task.take(train[fit_i]), task.take(rows), seed), dtype=float)
            if oof is None:
                oof, tst = np.empty((len(train),) + part.shape[1:]), np.empty((len(test),) + part.shape[1:])
            oof[held_i], tst[test_i] = part[:len(held_i)], part[len(held_i):]
        oof_all.append(oof)
        test_all.append(tst)
    return oof_all, test_all


def by_question(halves, test_scores: list[np.ndarray]) -> np.ndarray:
    """The two test halves' scores as one array in the task's question order."""
    out = np.zeros((len(halves[0]) + len(halves[1]),) + test_scores[0].shape[1:])
    for (_, test), s in zip((halves, halves[::-1]), test_scores):
        out[test] = s
    return out


def _fit_score(factory, train: ArmSetTask, test: ArmSetTask, seed: int) -> np.ndarray:
    policy = factory()
    if not isinstance(policy, ArmPolicy):
        raise HarnessError(f"protocol 'arms' routes among arms: policy {getattr(policy, 'name', policy)!r} scores "
                           "one extra arm; choose an n-way policy (arm_ridge, arm_logistic, arm_gbm, arm_knn, "
                           "cheapest_suffices, arm_random, arm_oracle or a plugin of policies.arm_policies.ArmPolicy)")
    policy.fit_arms(train.features, train.outcomes, train.costs, train.groups, seed)
    truth = test.outcomes if policy.oracle else None
    scores = np.asarray(policy.score_arms(test.features, ArmScoreContext(test.qids, test.arms, seed, truth)),
                        dtype=float)
    if scores.shape != test.outcomes.shape or not np.isfinite(scores).all():
        raise HarnessError(f"policy {policy.name!r}: score_arms returned shape {scores.shape} (finite floats "
                           f"expected, shape {test.outcomes.shape}: questions x arms)")
    return scores


def route_at_budget(task: ArmSetTask, halves, oof, test_scores, budget: float) -> tuple[Route, list[float]]:
    """The router's expected route over all questions at ``budget``: per half, lambda and its tie
    coin calibrated on the training half's out-of-fold scores, applied to the test half."""
    probs = np.zeros_like(task.outcomes)
    over = []
    for h, (train, test) in enumerate((halves, halves[::-1])):
        cal = calibrate_lambda(oof[h], task.costs[train], budget)
        probs[test] = decide_probabilities(test_scores[h], task.costs[test], cal.lam, cal.tie_prob)
        over.append(float(np.sum(probs[test] * task.costs[test]) / len(test)) - budget)
    return route_from_probabilities(probs, task.outcomes, task.costs), over


def share_budget(task: ArmSetTask, share: float) -> float:
    """A budget share as a mean cost: cheapest + share x (costliest - cheapest) single arm."""
    arm_c = task.costs.mean(axis=0)
    return float(arm_c.min() + share * (arm_c.max() - arm_c.min()))


def budget_row(task: ArmSetTask, halves, oof, test_scores, share: float) -> BudgetRow:
    """One budget's row: the router, the cost-matched mix, random at the router's cost, the frontier."""
    budget = share_budget(task, share)
    route, over = route_at_budget(task, halves, oof, test_scores, budget)
    return reference_row(task, share, budget, route, over)


def reference_row(task: ArmSetTask, share: float, budget: float, route: Route, over: list[float]) -> BudgetRow:
    """A route's row at a budget with its references: the cost-matched mix at the budget, random
    at the route's mean cost (clipped to the single arms' range), the exact frontier."""
    arm_y, arm_c = single_arms(task.outcomes, task.costs)
    mix = cost_matched_mix(task.outcomes, task.costs, budget)
    target = min(max(route.mean_cost, float(arm_c.min())), float(arm_c.max()))
    rnd = random_matched(task.outcomes, task.costs, target).route
    front = exact_frontier(task.outcomes, task.costs, max(budget, float(task.costs.min(axis=1).mean())))
    return BudgetRow(share, budget, route, over, mix.route,
                     (task.arms[mix.cheap_arm], task.arms[mix.costly_arm], float(mix.share_cheap)), rnd,
                     float(front.upper_bound), bool(front.proven), float(front.gap))


def paired_at_level(diffs: np.ndarray, groups: np.ndarray, level: float, n_perm: int, seed: int
                    ) -> tuple[float, float, tuple[float, float], int]:
    """(mean difference, sign-flip p, the interval that inverts the test at ``level``, questions
    whose difference is not 0), paired by document: one comparison of a verdict."""
    point = float(diffs.mean())
    discordant = int(np.sum(np.abs(diffs) > 1e-12))
    if not discordant:
        return point, 1.0, (float("nan"), float("nan")), 0
    p = float(sign_flip_test(diffs, groups, n_perm=n_perm, seed=seed))
    return point, p, sign_flip_interval(diffs, groups, alpha=level, n_perm=n_perm, seed=seed, p_at_zero=p), discordant


def compare_with_mix(row: BudgetRow, task: ArmSetTask, level: float, n_perm: int, seed: int, tests: list[np.ndarray],
                     oracle: bool = False, who: str = "router") -> None:
    """Router vs the cost-matched mix, paired by document at ``level``: the sign-flip p, the interval
    that inverts it, and the verdict (docs/metrics.md §15). ``tests``: each half's test questions,
    in the order of ``row.over`` (``overspent_most``)."""
    row.point, row.p, row.ci, row.discordant = paired_at_level(row.route.outcome - row.mix.outcome, task.groups,
                                                               level, n_perm, seed)
    cheap, costly, share = row.mix_arms
    fixed = cheap if cheap == costly else f"mix {cheap} {share:.0%} / {costly}"
    row.verdict = verdict_words(fixed, row.point, row.p, row.ci, row.discordant, level, oracle, who,
                                overspent_most(row, tests, task.n))


def overspent_most(row: BudgetRow, tests: list[np.ndarray], n: int) -> str:
    """What the route spent when it overspent the budget beyond sampling error on more than half
    of the halves (``overspends``), else "": a route judged against references that kept to the
    budget gets no deploy verdict then (protocol B's rule, docs/metrics.md §9)."""
    return spent_beyond(row.route.cost, row.budget, row.over, tests, n)


def spent_beyond(cost: np.ndarray, budget: float, over: list[float], tests: list[np.ndarray], n: int) -> str:
    """``overspent_most`` of any route: per-question ``cost``, each half's ``over`` (mean cost
    on its test questions - budget)."""
    violations, _ = overspend_counts(cost, budget, over, tests, n, 0.0, 0.0)
    if 2 * violations <= len(tests):
        return ""
    return (f"it spent {float(np.mean(cost)):.4g} against the budget {budget:.4g} ({violations} of {len(tests)} "
            "halves beyond sampling error)")


def verdict_words(fixed: str, point: float, p: float, ci: tuple[float, float], discordant: int, level: float,
                  oracle: bool = False, who: str = "router", overspent: str = "", rival_overspent: str = "") -> str:
    """"deploy the router" / "deploy the fixed choice" only when the test rejects at ``level``;
    otherwise "cannot tell" with the questions the comparison rests on. An oracle is never
    deployable: its row says how much a perfect router could gain. ``who``: what is judged
    (a router, a cascade); ``fixed``: the choice it is judged against; ``overspent`` /
    ``rival_overspent``: what the one or the other spent when it overspent its budget
    (``overspent_most``): its win is then "over budget", never "deploy"."""
    if oracle:
        return f"upper bound (oracle, not deployable): {point:+.4f} over {fixed}"
    if p < level and point > 0 and overspent:
        return f"over budget: {who} {point:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}] over {fixed}, but {overspent}: no deploy verdict"
    if p < level and point < 0 and rival_overspent:
        return (f"over budget: {fixed} {-point:+.4f} [{-ci[1]:+.4f}, {-ci[0]:+.4f}] over {who}, but {rival_overspent}: "
                "no deploy verdict")
    if p < level and point > 0:
        return f"deploy {who}: beats {fixed} by {point:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"
    if p < level and point < 0:
        return f"deploy {fixed}, no {who}: {who} {point:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"
    return f"cannot tell: {discordant} questions differ (p={p:.3g} >= {level:.3g})"


def overspends(row: BudgetRow, tests: list[np.ndarray], n: int, tol: float, spread: float) -> tuple[int, int]:
    """(violations, overshoots) of a budget row's route (``overspend_counts``)."""
    return overspend_counts(row.route.cost, row.budget, row.over, tests, n, tol, spread)


def overspend_counts(cost: np.ndarray, budget: float, over: list[float], tests: list[np.ndarray], n: int, tol: float,
                     spread: float) -> tuple[int, int]:
    """(violations, overshoots) over the test halves ``tests`` (index arrays, one per direction;
    ``over``: each half's mean cost - budget): a half whose mean cost exceeds the budget beyond
    its sampling error, z_(1 - 0.05) x sd of its per-question costs x sqrt(1 / n_train + 1 /
    n_test) (the spread of a rule calibrated on n_train questions and applied to n_test new ones,
    as protocol B's ``overspent``), and one whose mean cost exceeds it by more than ``tol`` x the
    cost range (the stated tolerance)."""
    violations = overshoots = 0
    eps = 1e-9 * max(1.0, abs(budget))
    for half_over, test in zip(over, tests):
        part = cost[test]
        sd = float(np.std(part, ddof=1)) if len(test) > 1 else 0.0
        allow = float(sps.norm.ppf(1 - OVERSPEND_LEVEL)) * sd * math.sqrt(1 / max(1, n - len(test)) + 1 / len(test))
        violations += half_over > allow + eps
        overshoots += half_over > tol * spread + eps
    return int(violations), int(overshoots)


def router_summaries(task: ArmSetTask, rows: list[BudgetRow],
                     singles: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """AIQ, APGR and CPT(50%/80%) over n arms (docs/metrics.md §14) of the router's operating
    points: its expected (mean cost, mean outcome) at every budget, and the rule at lambda = +inf
    (every question on its cheapest arm), where every router starts."""
    rows_idx = np.arange(task.n)
    cheapest = np.argmin(task.costs, axis=1)  # the first of equally cheap arms: the earlier one
    arm_y, arm_c = singles if singles is not None else single_arms(task.outcomes, task.costs)
    # the mean of per-question minima is at most the cheapest arm's mean; min() drops rounding above it
    pc = [min(float(task.costs[rows_idx, cheapest].mean()), float(arm_c.min())), *(r.route.mean_cost for r in rows)]
    pq = [float(task.outcomes[rows_idx, cheapest].mean()), *(r.route.mean_outcome for r in rows)]
    out = nway_pgr_summaries(pc, pq, arm_y, arm_c)
    out["aiq"] = nway_aiq(pc, pq, arm_y, arm_c)
    return out


def normalised_costs(task: ArmSetTask) -> np.ndarray:
    """Costs on the scale the penalty c is paid on: (cost - c_min) / (c_max - c_min), the single
    arms' mean costs (binary with costs 0 / 1: one extra call costs c, as in protocol A)."""
    arm_c = task.costs.mean(axis=0)
    spread = float(arm_c.max() - arm_c.min())
    return (task.costs - arm_c.min()) / (spread if spread > 0 else 1.0)


def chosen_lambda(scores: np.ndarray, outcomes: np.ndarray, norm_costs: np.ndarray, costs: np.ndarray, c: float) -> float:
    """The lambda >= 0 (or +inf: the cheapest route) whose rule has the largest mean utility
    outcome - c * normalised cost on these questions; ties to the larger lambda (the cheaper route).
    Candidates: every breakpoint of the rule and the float just below it (both sides of a switch)."""
    lams, _ = lambda_breakpoints(scores, costs)
    cands = {math.inf, 0.0}
    for lam in lams[lams >= 0]:
        cands.update((float(lam), float(np.nextafter(lam, -np.inf))))
    rows = np.arange(len(scores))
    best, best_u = math.inf, -math.inf
    for lam in sorted((x for x in cands if x >= 0), reverse=True):
        arm = decide(scores, costs, lam)
        u = float(np.mean(outcomes[rows, arm] - c * norm_costs[rows, arm]))
        if u > best_u + 1e-12:
            best, best_u = lam, u
    return best


def cost_row(task: ArmSetTask, halves, oof, test_scores, c: float) -> CostRow:
    """The router at penalty c: lambda chosen on each training half, applied to the other half."""
    norm = normalised_costs(task)
    arm_of = np.zeros(task.n, dtype=int)
    lams = []
    for h, (train, test) in enumerate((halves, halves[::-1])):
        lam = chosen_lambda(oof[h], task.outcomes[train], norm[train], task.costs[train], c)
        lams.append(lam)
        arm_of[test] = decide(test_scores[h], task.costs[test], lam)
    probs = np.eye(len(task.arms))[arm_of]
    route = route_from_probabilities(probs, task.outcomes, task.costs)
    rows = np.arange(task.n)
    utility = task.outcomes[rows, arm_of] - c * norm[rows, arm_of]
    per_arm = task.outcomes - c * norm
    best = int(np.argmax(per_arm.mean(axis=0)))  # first of equal means: the earlier arm
    return CostRow(c, lams, route, utility, task.arms[best], per_arm[:, best])


def compare_with_best_arm(row: CostRow, task: ArmSetTask, level: float, n_perm: int, seed: int, oracle: bool) -> None:
    """Router vs the best single arm in utility at penalty c, paired by document at ``level``."""
    row.point, row.p, row.ci, row.discordant = paired_at_level(row.utility - row.best_utility, task.groups, level,
                                                               n_perm, seed)
    row.verdict = verdict_words(row.best_arm, row.point, row.p, row.ci, row.discordant, level, oracle)


def run_arms(factory, task: ArmSetTask, halves, shares, *, alpha: float, n_perm: int, seed: int,
             cost: float | None = None) -> ArmsRun:
    """The whole protocol: cross-fitted scores, one row per budget and one at the job's cost
    penalty (when given), comparisons at alpha / (budgets + 1)."""
    oracle = bool(getattr(factory(), "oracle", False))
    oof, test_scores = cross_fitted_scores(factory, task, halves, seed)
    out = ArmsRun(task, single_arms(task.outcomes, task.costs), oracle_route(task.outcomes, task.costs),
                  scores=by_question(halves, test_scores), level=alpha / max(1, len(shares) + (cost is not None)))
    if cost is not None:
        out.cost_row = cost_row(task, halves, oof, test_scores, float(cost))
        compare_with_best_arm(out.cost_row, task, out.level, n_perm, seed, oracle)
    tests = [halves[1], halves[0]]  # the test half of each direction, as row.over
    for share in shares:
        row = budget_row(task, halves, oof, test_scores, float(share))
        compare_with_mix(row, task, out.level, n_perm, seed, tests, oracle)
        out.rows.append(row)
    out.summaries = router_summaries(task, out.rows, out.singles)
    out.halves = (halves[1], halves[0])  # the test half of each direction
    return out
