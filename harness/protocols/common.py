"""What all three protocols share: fitting and scoring a policy on a RoutingTask, and the
fixed-width text tables that ``summary()`` prints.

Why one place: "how a policy sees questions" (which features, when the oracle gets the true
delta, when fit is called) must be identical in every protocol.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from harness.errors import HarnessError
from harness.task import RoutingTask
from policies.base import Policy, ScoreContext

PolicyFactory = Callable[[], Policy]


def policy_label(policy: Policy) -> str:
    return f"{getattr(policy, 'name', 'policy')} ({type(policy).__name__})"


def fit_policy(policy: Policy, task: RoutingTask, seed: int) -> Policy:
    """Fit on ``task`` only when the policy is trainable; untrainable policies are left as is."""
    if policy.trainable:
        X = task.feature_matrix(policy.features)
        policy.fit(X, task.delta, task.groups, seed)
    return policy


def score_task(policy: Policy, task: RoutingTask, seed: int) -> np.ndarray:
    """One float score per question of ``task``.

    The oracle (``policy.oracle``) is handed the true delta (SPEC 4: an upper bound, never
    deployable); every other policy sees only its features. A wrong length or a non-finite score
    (NaN, +-inf) is a HarnessError naming the policy: a NaN would silently never trigger, and an
    infinite score would collide with the "never run" threshold tau = +inf.
    """
    X = task.feature_matrix(policy.features)
    ctx = ScoreContext(qids=task.qids, seed=seed, true_delta=task.delta if policy.oracle else None)
    scores = np.asarray(policy.score(X, ctx), dtype=float).reshape(-1)
    if len(scores) != task.n:
        raise HarnessError(f"policy {policy_label(policy)} returned {len(scores)} scores for {task.n} questions")
    bad = ~np.isfinite(scores)
    if bad.any():
        raise HarnessError(
            f"policy {policy_label(policy)} returned non-finite (NaN or inf) scores for {int(bad.sum())} questions"
        )
    return scores


def fmt(value: float) -> str:
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    if value != 0 and abs(value) < 1e-4:
        return f"{value:.1e}"
    return f"{value:.4f}"


def text_table(header: list[str], rows: list[list[object]]) -> str:
    """Fixed-width, left-aligned first column, right-aligned numbers: readable in a terminal."""
    cells = [[str(h) for h in header]] + [
        [c if isinstance(c, str) else fmt(c) for c in row] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for j, row in enumerate(cells):
        parts = [row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in range(1, len(row))]
        lines.append("  ".join(parts))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
