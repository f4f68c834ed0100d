"""Protocol B (docs/metrics.md §6): budgets, and the exact / deployable / conservative frontiers.

Why: a threshold picked on one half of the documents need not spend the same share of extra
calls on the other half. Repeating over seeded calibration/test halves shows both the ranking
quality (exact frontier) and how well a calibrated threshold keeps its budget (deployable,
conservative). The choices where docs/metrics.md is silent (splits, ties at their expectation, the
randomised threshold, cross-fitted calibration scores, the DKW slack, references at matched
usage, per-question decisions, fixed decisions, routing summaries, cost, power) are written
down in docs/protocols.md, "Protocol B, budget".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.protocols.common import PolicyFactory, fit_policy, fmt, policy_label, reused, score_task, text_table
from harness.protocols.routing_curves import apgr, cpt, expected_gains, pgr_curve, pgr_summaries
from harness.protocols.routing_summaries import (
    N_RANDOM_ORDERINGS,
    GapCheck,
    aiq,
    gap_check,
    random_ordering_reference,
)
from harness.paired import document_totals, max_showable_difference, min_reachable_p, sample_size_plan
from harness.stats import dkw_epsilon, grouped_kfold, min_detectable_difference, stratified_grouped_halves
from harness.task import RoutingTask

DEFAULT_BUDGETS = (0.10, 0.25, 0.50, 0.75, 0.90)
FRONTIERS = ("exact", "deployable", "conservative")
FIXED = "fixed"
QUANTILE_METHOD = "inverted_cdf"
CALIBRATIONS = ("oof", "in_sample")
USAGE_TOL = 1e-12  # float noise in an expected usage is never a violation
POWER_ALPHA, POWER = 0.05, 0.8


def budget_key(rho: float) -> str:
    return f"{rho:.2f}"


def exact_count(n: int, rho: float) -> int:
    """floor(rho * n) (1e-9: 0.3 * 10 must be 3, not 2.9999)."""
    return int(math.floor(rho * n + 1e-9))


def run_probability(scores, threshold: float, tie_prob: float) -> np.ndarray:
    """Per question: 1 if score > threshold, ``tie_prob`` if score == threshold, else 0."""
    s = np.asarray(scores, dtype=float)
    return np.where(s > threshold, 1.0, np.where(s == threshold, float(tie_prob), 0.0))


def exact_rule(scores, k: int) -> tuple[float, float]:
    """(t, p) of the exact frontier with k calls: the (k+1)-th highest score and the share of
    its tied block that runs, so that the expected number of calls is exactly k."""
    s = np.asarray(scores, dtype=float)
    n = len(s)
    if k >= n:
        return -math.inf, 1.0
    t = float(np.sort(s)[::-1][k])
    above, tied = int(np.sum(s > t)), int(np.sum(s == t))
    return t, (k - above) / tied


def exact_run_probability(scores, rho: float) -> np.ndarray:
    """Expected run indicator of the exact frontier at budget rho (ties at their expectation):
    sums to floor(rho * n)."""
    s = np.asarray(scores, dtype=float)
    return run_probability(s, *exact_rule(s, exact_count(len(s), rho)))


def calibrated_threshold(cal_scores, rho: float) -> float:
    """The (1 - rho) empirical quantile of calibration scores (see docs/protocols.md)."""
    if rho >= 1.0:
        return -math.inf
    return float(np.quantile(np.asarray(cal_scores, dtype=float), 1.0 - rho, method=QUANTILE_METHOD))


def calibrated_rule(cal_scores, target: float) -> tuple[float, float]:
    """(t, p): run when score > t, and with probability p when score == t; on the calibration
    scores the expected usage is ``target`` (docs/protocols.md)."""
    s = np.asarray(cal_scores, dtype=float)
    t = calibrated_threshold(s, target)
    if math.isinf(t):
        return t, 1.0
    goal = target * len(s)
    above = int(np.sum(s > t))
    while above > goal + 1e-9:  # float artefact of the quantile only: move t up one score
        t = float(np.min(s[s > t]))
        above = int(np.sum(s > t))
    tied = int(np.sum(s == t))
    return t, float(min(1.0, max(0.0, (goal - above) / tied)))


def expected_outcome(prob, base, extra) -> float:
    """Mean outcome when question i runs the extra arm with probability prob_i. For 0/1
    probabilities it equals the mean of ``where(ran, extra, base)`` bit for bit."""
    p = np.asarray(prob, dtype=float)
    return float(np.mean((1.0 - p) * np.asarray(base, dtype=float) + p * np.asarray(extra, dtype=float)))


def exact_frontier_curve(scores, base, delta) -> tuple[np.ndarray, np.ndarray]:
    """(usage k/n, expected mean outcome) for k = 0..n along the score ordering, tied blocks
    at their expectation (linear inside the block): ``routing_summaries.expected_exact_curve``."""
    base = np.asarray(base, dtype=float)
    return np.arange(len(base) + 1) / len(base), base.mean() + expected_gains(scores, delta) / len(base)


def oracle_curve(base, delta) -> np.ndarray:
    """Best mean outcome reachable with k extra calls, for k = 0..n (largest deltas first)."""
    d = np.sort(np.asarray(delta, dtype=float))[::-1]
    return float(np.mean(base)) + np.r_[0.0, np.cumsum(d)] / len(d)


def oracle_matched(base, delta, k: float) -> float:
    """Best mean outcome reachable with k extra calls; a fractional expected count k is
    interpolated between floor(k) and ceil(k)."""
    curve = oracle_curve(base, delta)
    n = len(curve) - 1
    k = min(max(float(k), 0.0), float(n))
    lo = int(math.floor(k))
    if k == lo:
        return float(curve[lo])
    return float(curve[lo] + (k - lo) * (curve[lo + 1] - curve[lo]))


def random_matched(base, delta, k: float) -> float:
    """Expected mean outcome of running extra on k uniformly random questions."""
    n = len(base)
    return float(np.mean(base) + (k / n) * np.mean(delta))


def _trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


ROUTING_STATS = ("apgr", "cpt50", "cpt80", "aiq")
ROUTING_CURVES = ("exact", "deployable", "random", "oracle")


def cost_axis(test: RoutingTask) -> tuple[float, np.ndarray, str]:
    """(mean base cost per question, what the extra arm adds per question, unit) for AIQ; with
    no measured costs (synthetic table) the cost is the usage itself (base 0, extra 1 each)."""
    if test.base_cost is None or test.extra_cost is None:
        return 0.0, np.ones(test.n), "usage"
    return float(np.mean(test.base_cost)), np.asarray(test.extra_cost, dtype=float), test.cost_unit


def split_gap(test: RoutingTask, min_discordant: int, alpha: float) -> GapCheck:
    """Whether the test half's base-to-extra gap is told from zero (``gap_check``: discordant
    count, positive net gap, McNemar or document sign-flip p < alpha)."""
    return gap_check(test.base, test.extra, min_discordant, alpha, groups=test.groups)


def exact_routing_summaries(scores, test: RoutingTask, gap: GapCheck) -> dict:
    """APGR, CPT(50%), CPT(80%) (``pgr_summaries``, exact curve with ties at their
    expectation; NaN unless ``gap.ok``) and AIQ over the (expected cost, outcome) points of
    every k = 0..n."""
    base_cost, extra_cost, _ = cost_axis(test)
    r = pgr_summaries(scores, test.base, test.extra)
    _, outcome = exact_frontier_curve(scores, test.base, test.delta)
    costs = base_cost + expected_gains(scores, extra_cost) / test.n
    ok = bool(gap.ok) and not math.isnan(r["apgr"])
    reason = gap.reason if not gap.ok else ("" if ok else "net gap is not positive; PGR/APGR/CPT not defined")
    pgr = {k: (r[k] if ok else math.nan) for k in ("apgr", "cpt50", "cpt80")}
    return pgr | {"aiq": aiq(costs, outcome), "defined": ok, "reason": reason}


def random_routing_summaries(test: RoutingTask, gap: GapCheck, seed, n_orders: int = N_RANDOM_ORDERINGS) -> dict:
    """Random's row: APGR of the straight line (random's exact expectation, 0.5), AIQ and
    CPT(50%) / CPT(80%) the mean over ``n_orders`` seeded random orderings of the test half
    (``random_ordering_reference`` with the same cost axis as the policy's AIQ; CPT NaN unless
    ``gap.ok``). ``seed``: ``[run seed, split index]`` in the protocol (docs/protocols.md)."""
    base_cost, extra_cost, _ = cost_axis(test)
    line = exact_routing_summaries(np.zeros(test.n), test, gap)
    ref = random_ordering_reference(test.base, test.extra, seed, extra_cost=extra_cost, base_cost=base_cost,
                                    n_orders=n_orders)
    ok = line["defined"]
    return line | {"aiq": ref["aiq"], "cpt50": ref["cpt50"] if ok else math.nan,
                   "cpt80": ref["cpt80"] if ok else math.nan}


def points_routing_summaries(points, test: RoutingTask, defined: bool) -> dict:
    """The same summaries over a handful of operating points (usage, outcome, expected added
    cost) such as the deployable frontier's budgets, with always-base and always-extra as the
    ends; points are joined by straight lines (a seeded coin between two thresholds)."""
    base_cost, extra_cost, _ = cost_axis(test)
    b, e = float(test.base.mean()), float(test.extra.mean())
    usage = np.r_[0.0, [p[0] for p in points], 1.0]
    outcome = np.r_[b, [p[1] for p in points], e]
    costs = base_cost + np.r_[0.0, [p[2] for p in points], float(extra_cost.mean())]
    out = {"apgr": math.nan, "cpt50": math.nan, "cpt80": math.nan, "aiq": aiq(costs, outcome)}
    if defined:
        pgr = pgr_curve(usage, outcome, b, e)
        out.update(apgr=apgr(usage, pgr), cpt50=cpt(usage, pgr, 0.5), cpt80=cpt(usage, pgr, 0.8))
    return out


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
            line += f"; about {plan:.0f} test questions would give 80% power at alpha 0.05 (exact sign test)"
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
            from harness.protocols.calibration_size import calibration_size_block

            text += "\n" + calibration_size_block(self.cal_sizes, m)
        return text


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
    """A fixed decision's row at cost 0 (``_CostFree.at_cost`` subtracts the cost)."""
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


DECISION_COLUMNS = ("qid", "doc_id", "split", "budget", "frontier", "prob", "base", "extra", "utility", "oracle")


def _decision_rows(test: RoutingTask, split: int, budget: float, frontier: str, prob, oracle: bool) -> pd.DataFrame:
    """The test half's per-question run probabilities under one rule (docs/protocols.md), with
    the expected utility at cost 0 (``_CostFree.at_cost`` subtracts the cost)."""
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
class _CostFree:
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


def _cost_free_splits(
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
) -> _CostFree:
    """Every split's fits, frontiers, decisions and routing summaries at cost 0 (utilities are
    then outcomes); ``_CostFree.at_cost`` subtracts the cost with the expressions a run at that
    cost would evaluate, so the numbers are identical bit for bit (tested)."""
    from harness.protocols.calibration_size import SplitScores  # it imports this module

    route = fixed_route_of(policy_factory)
    split_seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=n_splits)
    rows: list[dict] = []
    auc_rows: list[dict] = []
    split_rows: list[dict] = []
    routing_rows: list[dict] = []
    decision_parts: list[pd.DataFrame] = []
    score_parts: list = []
    first = policy_factory()
    label = policy_label(first)
    is_oracle = bool(getattr(first, "oracle", False))
    for s, split_seed in enumerate(split_seeds):
        cal_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        cal, test = task.take(cal_idx), task.take(test_idx)
        if route is not None:
            facts = _split_facts(s, int(split_seed), cal, test, calibration, 0)
            split_rows.append(facts)
            rows.append(_fixed_row(facts, test, route))
            decision_parts.append(
                _decision_rows(test, s, math.nan, FIXED, np.full(test.n, 1.0 if route == "extra" else 0.0),
                               is_oracle)
            )
            continue
        cal_scores, test_scores, folds = calibration_scores(
            cal, test, policy_factory, calibration=calibration, cal_folds=cal_folds, seed=seed
        )
        facts = _split_facts(s, int(split_seed), cal, test, calibration, folds)
        split_rows.append(facts)
        score_parts.append(SplitScores(s, int(split_seed), cal.groups, cal_scores, test_scores, test.base, test.extra))
        n = test.n
        eps = dkw_epsilon(cal.n, dkw_delta)
        usage, curve = exact_frontier_curve(test_scores, test.base, test.delta)
        auc_rows.append(
            {
                "split": s,
                "exact_auc": _trapezoid(usage, curve),
                "oracle_auc": _trapezoid(usage, oracle_curve(test.base, test.delta)),
                "random_auc": float((test.base.mean() + test.extra.mean()) / 2),
            }
        )
        deploy_points = []
        for rho in budgets:
            rho_safe = max(0.0, rho - eps)
            rules = {
                "exact": (rho, exact_rule(test_scores, exact_count(n, rho))),
                "deployable": (rho, calibrated_rule(cal_scores, rho)),
                "conservative": (rho_safe, calibrated_rule(cal_scores, rho_safe)),
            }
            for frontier, (target, (t, p)) in rules.items():
                prob = run_probability(test_scores, t, p)
                # the exact frontier's expected count is floor(rho n) by construction: keep it an
                # integer (a float sum of tie probabilities could read 4.999999999999)
                k = float(exact_count(n, rho)) if frontier == "exact" else float(prob.sum())
                realized = k / n
                outcome = expected_outcome(prob, test.base, test.extra)
                if frontier == "exact":
                    cal_usage = cal_utility = math.nan
                else:
                    cal_prob = run_probability(cal_scores, t, p)
                    cal_usage = float(cal_prob.mean())
                    cal_utility = expected_outcome(cal_prob, cal.base, cal.extra)
                decision_parts.append(_decision_rows(test, s, rho, frontier, prob, is_oracle))
                if frontier == "deployable":
                    deploy_points.append((realized, outcome, float(np.mean(prob * cost_axis(test)[1]))))
                rows.append(
                    {
                        "split": s,
                        "split_seed": int(split_seed),
                        "budget": rho,
                        "frontier": frontier,
                        "fixed": False,
                        "calibration": calibration,
                        "cal_folds": folds,
                        "target_usage": target,
                        "n_cal": cal.n,
                        "n_cal_docs": facts["n_cal_docs"],
                        "n_test": n,
                        "dkw_eps": eps,
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
                )
        gap = split_gap(test, min_discordant, alpha)
        exact = exact_routing_summaries(test_scores, test, gap)
        curves = {
            "exact": exact,
            "deployable": points_routing_summaries(deploy_points, test, exact["defined"]),
            "random": random_routing_summaries(test, gap, [int(seed), s]),
            "oracle": exact_routing_summaries(test.delta, test, gap),
        }
        routing_rows.append(
            {"split": s, "gap_defined": exact["defined"], "reason": exact["reason"], "gap_test": gap.test,
             "gap_p": gap.p, "cost_unit": cost_axis(test)[2]}
            | {f"{curve}/{stat}": values[stat] for curve, values in curves.items() for stat in ROUTING_STATS}
        )
    return _CostFree(
        frontiers=pd.DataFrame(rows),
        decisions=pd.concat(decision_parts, ignore_index=True)[list(DECISION_COLUMNS)],
        aucs=pd.DataFrame(auc_rows, columns=["split", "exact_auc", "oracle_auc", "random_auc"]),
        splits=pd.DataFrame(split_rows),
        routing=pd.DataFrame(routing_rows) if routing_rows else None,
        route=route,
        label=label,
        scores=tuple(score_parts),
    )


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
    from harness.protocols.calibration_size import calibration_size_metrics, calibration_size_table, check_cal_sizes

    sizes = check_cal_sizes(cal_sizes)
    if not 0.0 < float(alpha) < 1.0:
        raise ConfigError("protocol.alpha", f"must be in (0, 1), got {alpha!r}")
    budgets = tuple(float(b) for b in budgets)
    for b in budgets:  # the same rule and key as harness.config.validate
        if not 0 < b <= 1:
            raise ConfigError("budget.grid", f"each budget must be in (0, 1], got {b}")
    if n_splits < 1:
        raise ConfigError("budget.n_splits", f"must be >= 1, got {n_splits}")
    if calibration not in CALIBRATIONS:
        raise ConfigError("budget.calibration", f"unknown {calibration!r}; choose from {CALIBRATIONS}")
    if calibration == "oof" and cal_folds < 2:
        raise ConfigError("budget.cal_folds", f"must be >= 2, got {cal_folds}")
    settings = dict(budgets=budgets, n_splits=int(n_splits), seed=int(seed), dkw_delta=float(dkw_delta),
                    tol=float(tol), calibration=calibration, cal_folds=int(cal_folds),
                    min_discordant=int(min_discordant), alpha=float(alpha))
    free = reused("budget", policy_factory, task, settings,
                  lambda: _cost_free_splits(task, policy_factory, **settings))
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
    if route is not None:
        for name, col in ((m, "outcome"), ("utility", "utility"), ("realized_usage", "realized_usage")):
            vals = frontiers[col].astype(float).to_numpy()
            metrics[f"budget/{FIXED}/{name}"] = float(vals.mean())
            metrics[f"budget/{FIXED}/{name}_std"] = float(vals.std())
        return BudgetResult(metrics, frontiers, aucs, policy=label, metric=m, splits=splits,
                            calibration=calibration, fixed_route=route, decisions=decisions)
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
    routing = free.routing.copy()
    all_defined = bool(routing["gap_defined"].all())
    metrics["routing/gap_defined_splits"] = float(routing["gap_defined"].sum())
    for curve in ROUTING_CURVES:
        for stat in ROUTING_STATS:
            vals = routing[f"{curve}/{stat}"].astype(float).to_numpy()
            ratio = stat != "aiq"  # PGR-based: undefined unless every split's gap is defined
            ok = all_defined or not ratio
            metrics[f"routing/{curve}/{stat}"] = float(vals.mean()) if ok else math.nan
            metrics[f"routing/{curve}/{stat}_std"] = float(vals.std()) if ok else math.nan
    by_size = None
    if sizes:
        by_size = calibration_size_table(free.scores, sizes, budgets, dkw_delta=float(dkw_delta), tol=float(tol))
        metrics.update(calibration_size_metrics(by_size))
    return BudgetResult(metrics, frontiers, aucs, policy=label, metric=m, splits=splits, calibration=calibration,
                        fixed_route=None, routing=routing, decisions=decisions, cal_sizes=by_size)
