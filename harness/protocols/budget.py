"""Protocol B (SPEC 6): budgets, and the exact / deployable / conservative frontiers.

Why: a threshold picked on one half of the documents need not spend the same share of extra
calls on the other half. Repeating over seeded calibration/test halves shows both the ranking
quality (exact frontier) and how well a calibrated threshold keeps its budget (deployable,
conservative).

Choices where the SPEC is silent (documented here and in the README):
- Split seeds: ``np.random.default_rng(seed).integers(0, 2**31 - 1, n_splits)``; each split is
  ``stats.stratified_grouped_halves`` (calibration = first half, test = second).
- Deployable threshold = ``np.quantile(cal_scores, 1 - rho, method="inverted_cdf")`` (the
  empirical quantile: the smallest calibration score s with F(s) >= 1 - rho), run when
  score > threshold. On calibration the strict rule then runs on exactly floor(rho * n)
  questions when scores are distinct (the exact frontier's count) and never on more (ties are
  all kept out). An interpolated ('linear') threshold can overspend with ties; 'higher' indexes
  positions 0..n-1 and spends one question too few. rho = 1 means threshold -inf (run all).
- The policy is fitted on the calibration half and the threshold is the quantile of its scores
  on that same half (SPEC 6: "quantile of calibration scores"). For a flexible learner those
  in-sample scores can be more extreme than test scores; the realized usage on test, which the
  protocol reports, shows the effect.
- Random at matched usage is the exact expectation, not a draw: running the extra arm on k of
  n questions chosen uniformly gives base_mean + (k / n) * mean(delta) (and the same for
  utility with - cost * k / n). No noise, so it is a fair reference line.
- Oracle at matched usage: the best outcome with k extra calls = run extra on the largest
  deltas first (rescues, then neutral) - base_mean + sum(top-k delta) / n.
- Exact-frontier AUC: outcome vs usage k / n for every k = 0..n (k = 0 is always-base, k = n is
  always-extra), trapezoid rule; averaged over splits. Random and oracle AUCs are reported
  alongside on the same grid.
- Violation and overshoot rates are shares of splits; their "std" is the std of the 0/1
  indicator across splits. All stds are population stds (ddof = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.protocols.common import PolicyFactory, fit_policy, fmt, policy_label, score_task, text_table
from harness.stats import dkw_epsilon, stratified_grouped_halves
from harness.task import RoutingTask

DEFAULT_BUDGETS = (0.10, 0.25, 0.50, 0.75, 0.90)
FRONTIERS = ("exact", "deployable", "conservative")
QUANTILE_METHOD = "inverted_cdf"


def budget_key(rho: float) -> str:
    return f"{rho:.2f}"


def exact_order(scores, qids) -> np.ndarray:
    """Question indices from most to least worth the extra arm; ties broken by qid ascending."""
    return np.lexsort((np.asarray(qids).astype(str), -np.asarray(scores, dtype=float)))


def exact_selection(scores, qids, rho: float) -> np.ndarray:
    """Boolean mask: the floor(rho * n) highest-scored questions (SPEC 6 exact frontier)."""
    n = len(scores)
    k = int(math.floor(rho * n + 1e-9))  # 1e-9: 0.3 * 10 must be 3, not 2.9999
    ran = np.zeros(n, dtype=bool)
    ran[exact_order(scores, qids)[:k]] = True
    return ran


def calibrated_threshold(cal_scores, rho: float) -> float:
    """The (1 - rho) empirical quantile of calibration scores (see module docstring)."""
    if rho >= 1.0:
        return -math.inf
    return float(np.quantile(np.asarray(cal_scores, dtype=float), 1.0 - rho, method=QUANTILE_METHOD))


def exact_frontier_curve(scores, qids, base, delta) -> tuple[np.ndarray, np.ndarray]:
    """(usage k/n, mean outcome) for k = 0..n along the exact ordering."""
    base = np.asarray(base, dtype=float)
    delta = np.asarray(delta, dtype=float)
    n = len(base)
    gains = np.r_[0.0, np.cumsum(delta[exact_order(scores, qids)])]
    return np.arange(n + 1) / n, base.mean() + gains / n


def oracle_curve(base, delta) -> np.ndarray:
    """Best mean outcome reachable with k extra calls, for k = 0..n (largest deltas first)."""
    d = np.sort(np.asarray(delta, dtype=float))[::-1]
    return float(np.mean(base)) + np.r_[0.0, np.cumsum(d)] / len(d)


def oracle_matched(base, delta, k: int) -> float:
    """Best mean outcome reachable with k extra calls."""
    return float(oracle_curve(base, delta)[k])


def random_matched(base, delta, k: int) -> float:
    """Expected mean outcome of running extra on k uniformly random questions."""
    n = len(base)
    return float(np.mean(base) + (k / n) * np.mean(delta))


def _trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2))


@dataclass
class BudgetResult:
    """metrics (stable names), the long per-split ``frontiers`` table, and per-split AUCs."""

    metrics: dict[str, float]
    frontiers: pd.DataFrame
    aucs: pd.DataFrame
    policy: str = "policy"
    metric: str = "hit@10"

    def summary(self) -> str:
        m, k = self.metrics, self.metric
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
        return (
            f"Protocol B (budgets, {int(m['n/splits'])} splits) - {self.policy}\n{table}\n"
            f"exact-frontier AUC {fmt(m['frontier/exact_auc'])} (sd {fmt(m['frontier/exact_auc_std'])})"
            f"  random {fmt(m['frontier/random_auc'])}  oracle {fmt(m['frontier/oracle_auc'])}"
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
) -> BudgetResult:
    """Protocol B: per split, fit on calibration, score both halves, evaluate every frontier."""
    budgets = tuple(float(b) for b in budgets)
    for b in budgets:
        if not 0 <= b <= 1:
            raise ConfigError("budgets", f"each budget must be in [0, 1], got {b}")
    if n_splits < 1:
        raise ConfigError("n_splits", f"must be >= 1, got {n_splits}")
    split_seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=n_splits)
    rows: list[dict] = []
    auc_rows: list[dict] = []
    label = "policy"
    for s, split_seed in enumerate(split_seeds):
        cal_idx, test_idx = stratified_grouped_halves(task.groups, task.delta_class, int(split_seed))
        cal, test = task.take(cal_idx), task.take(test_idx)
        policy = fit_policy(policy_factory(), cal, seed)
        label = policy_label(policy)
        cal_scores = score_task(policy, cal, seed)
        test_scores = score_task(policy, test, seed)
        n = test.n
        eps = dkw_epsilon(cal.n, dkw_delta)
        usage, curve = exact_frontier_curve(test_scores, test.qids, test.base, test.delta)
        auc_rows.append(
            {
                "split": s,
                "exact_auc": _trapezoid(usage, curve),
                "oracle_auc": _trapezoid(usage, oracle_curve(test.base, test.delta)),
                "random_auc": float((test.base.mean() + test.extra.mean()) / 2),
            }
        )
        for rho in budgets:
            rho_safe = max(0.0, rho - eps)
            selections = {
                "exact": exact_selection(test_scores, test.qids, rho),
                "deployable": test_scores > calibrated_threshold(cal_scores, rho),
                "conservative": test_scores > calibrated_threshold(cal_scores, rho_safe),
            }
            for frontier, ran in selections.items():
                k = int(ran.sum())
                realized = k / n
                outcome = float(np.where(ran, test.extra, test.base).mean())
                rows.append(
                    {
                        "split": s,
                        "split_seed": int(split_seed),
                        "budget": rho,
                        "frontier": frontier,
                        "target_usage": rho_safe if frontier == "conservative" else rho,
                        "n_cal": cal.n,
                        "n_test": n,
                        "extra_calls": k,
                        "realized_usage": realized,
                        "usage_error": realized - rho,
                        "violated": realized > rho,
                        "overshoot": realized > rho + tol,
                        "outcome": outcome,
                        "utility": outcome - cost * realized,
                        "random_matched": random_matched(test.base, test.delta, k),
                        "oracle_matched": oracle_matched(test.base, test.delta, k),
                    }
                )
    frontiers = pd.DataFrame(rows)
    aucs = pd.DataFrame(auc_rows)
    m = task.metric
    metrics: dict[str, float] = {"n/splits": n_splits, "n/questions": task.n, "cost": float(cost)}
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
    return BudgetResult(metrics, frontiers, aucs, policy=label, metric=m)
