"""Protocol A's development side (docs/metrics.md §5): the document-level dev/held-out split and its
repeats, tau chosen on out-of-fold development scores, fixed decisions, and the nested development
estimate. Nothing here sees held-out outcomes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.errors import ConfigError, HarnessError
from harness.protocols.common import PolicyFactory, fit_policy, reused, score_task
from harness.stats import grouped_kfold, grouped_split
from harness.task import RoutingTask

UTILITY_TIE_TOL = 1e-12


# --------------------------------------------------------------------------------------------
# Threshold selection
# --------------------------------------------------------------------------------------------


def select_tau(scores, base, delta, cost: float) -> tuple[float, float, int]:
    """Tau maximising mean utility over candidates {distinct scores} U {+inf}.

    Utility of a question = base + ran * (delta - cost), ran = score >= tau. Sorting scores in
    descending order makes "score >= tau" a prefix, so every candidate is evaluated from one
    cumulative sum. Returns (tau, mean utility, number of extra calls).
    """
    scores = np.asarray(scores, dtype=float)
    base = np.asarray(base, dtype=float)
    delta = np.asarray(delta, dtype=float)
    n = len(scores)
    if n == 0:
        raise HarnessError("select_tau: no development questions")
    order = np.argsort(-scores, kind="stable")
    s_sorted = scores[order]
    gains = np.cumsum(delta[order] - cost)
    # candidate = each distinct score: k = number of questions with score >= it
    last_of_value = np.flatnonzero(np.r_[s_sorted[1:] != s_sorted[:-1], True])
    cand_tau = np.r_[np.inf, s_sorted[last_of_value]]
    cand_k = np.r_[0, last_of_value + 1]
    cand_u = base.sum() / n + np.r_[0.0, gains[last_of_value]] / n
    best = cand_u.max()
    ok = np.flatnonzero(cand_u >= best - UTILITY_TIE_TOL)
    pick = ok[np.argmin(cand_k[ok])]
    return float(cand_tau[pick]), float(cand_u[pick]), int(cand_k[pick])


def oof_scores(task: RoutingTask, policy_factory: PolicyFactory, *, n_folds: int, seed: int) -> np.ndarray:
    """Out-of-fold scores by document-grouped k-fold: a fresh policy per fold. They do not
    depend on the cost: a ``KeyedFactory`` reuses them across the costs of a sweep."""

    def compute() -> np.ndarray:
        scores = np.empty(task.n)
        for train_idx, test_idx in grouped_kfold(task.groups, n_folds, seed):
            policy = fit_policy(policy_factory(), task.take(train_idx), seed)
            scores[test_idx] = score_task(policy, task.take(test_idx), seed)
        return scores

    return reused("oof", policy_factory, task, {"n_folds": int(n_folds), "seed": int(seed)}, compute).copy()


# --------------------------------------------------------------------------------------------
# Split
# --------------------------------------------------------------------------------------------


def split_dev_heldout(task: RoutingTask, dev_frac: float = 0.8, seed: int = 0) -> tuple[RoutingTask, RoutingTask]:
    """(development, held-out) tasks, split by document."""
    dev_idx, held_idx = grouped_split(task.groups, dev_frac, seed)
    return task.take(dev_idx), task.take(held_idx)


def repeat_seeds(seed: int, repeats: int) -> list[int]:
    """Split seeds of the ``repeats`` dev/held-out splits: s_0 = ``seed`` (so one repeat is the
    plain single-split run), s_r = SeedSequence([seed, r]).generate_state(1)[0] % 2**31 for
    r >= 1 (a hash of (seed, r): runs with neighbouring seeds do not share repeats)."""
    if int(repeats) < 1:
        raise ConfigError("protocol.repeats", f"must be >= 1, got {repeats}")
    seed = int(seed)
    return [seed] + [
        int(np.random.SeedSequence([seed, r]).generate_state(1)[0]) % 2**31 for r in range(1, int(repeats))
    ]

# --------------------------------------------------------------------------------------------
# Fixed decisions, nested development estimate
# --------------------------------------------------------------------------------------------


def fixed_tau(policy_factory: PolicyFactory, dev_task: RoutingTask, cost: float) -> tuple[float, float, int] | None:
    """(tau, utility, extra calls) for a fixed-decision policy (``fixed_route``), else None.

    always-keep is tau = +inf (never extra), always-extra tau = -inf (always): reference
    policies are decisions, not rankings, so their threshold is not tuned.
    """
    route = getattr(policy_factory(), "fixed_route", None)
    if route is None:
        return None
    if route not in ("base", "extra"):
        raise ConfigError("policy", f"fixed_route must be 'base' or 'extra', got {route!r}")
    if route == "base":
        return math.inf, float(np.mean(dev_task.base)), 0
    return -math.inf, float(np.mean(dev_task.extra) - cost), dev_task.n


@dataclass(frozen=True)
class NestedEstimate:
    """Nested development estimate: pooled utility and extra share over development questions,
    each question's decision (``ran``), its outer-test score (nan for fixed decisions) and the
    tau of each outer fold."""

    utility: float
    extra_share: float
    ran: np.ndarray
    scores: np.ndarray
    taus: list[float]


def nested_dev_estimate(
    dev_task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    cost: float = 0.02,
    seed: int = 0,
    n_folds: int = 5,
    nested_folds: int = 5,
) -> NestedEstimate:
    """Honest development utility: the tau search is inside the cross-validation.

    Outer folds: ``grouped_kfold(dev groups, nested_folds, seed)``. In each, tau =
    ``select_tau`` on ``oof_scores(outer-train, n_folds, seed)``; the policy is fitted on the
    outer-train part (seed ``seed``), scores the outer-test part, which runs the extra arm at
    score >= tau. Fixed-decision policies use their fixed tau on every question.
    """
    if int(nested_folds) < 2:
        raise ConfigError("protocol.nested_folds", f"must be >= 2 here (0 switches the estimate off), got {nested_folds}")
    n = dev_task.n
    fixed = fixed_tau(policy_factory, dev_task, cost)
    scores = np.full(n, np.nan)
    if fixed is not None:
        taus = [fixed[0]]
        ran = np.full(n, fixed[0] == -math.inf)
    else:
        n_docs = len(np.unique(dev_task.groups))
        if nested_folds > n_docs:
            raise ConfigError("protocol.nested_folds", f"{nested_folds} outer folds need as many development documents, got {n_docs}")
        ran = np.zeros(n, dtype=bool)
        taus = []
        for train_idx, test_idx in grouped_kfold(dev_task.groups, nested_folds, seed):
            outer_train = dev_task.take(train_idx)
            try:
                inner = oof_scores(outer_train, policy_factory, n_folds=n_folds, seed=seed)
            except ConfigError as exc:
                raise ConfigError(
                    "protocol.nested_folds",
                    f"an outer-training part of {len(np.unique(outer_train.groups))} documents cannot hold "
                    f"{n_folds} inner folds ({exc.problem}); lower protocol.nested_folds or protocol.n_folds",
                ) from exc
            tau, _, _ = select_tau(inner, outer_train.base, outer_train.delta, cost)
            policy = fit_policy(policy_factory(), outer_train, seed)
            scores[test_idx] = score_task(policy, dev_task.take(test_idx), seed)
            ran[test_idx] = scores[test_idx] >= tau
            taus.append(tau)
    utility = dev_task.base + ran * (dev_task.delta - cost)
    return NestedEstimate(float(utility.mean()), float(ran.mean()), ran, scores, taus)
