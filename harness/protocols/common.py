"""What all three protocols share: fitting and scoring a policy on a RoutingTask, and the
fixed-width text tables that ``summary()`` prints.

Why one place: "how a policy sees questions" (which features, when the oracle gets the true
delta, when fit is called) must be identical in every protocol.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Callable, TypeVar

import numpy as np

from harness.errors import FeatureError
from harness.task import TEXT_COLUMN, RoutingTask
from policies.base import Policy, ScoreContext
from policies.scores import checked_scores

T = TypeVar("T")
PolicyFactory = Callable[[], Policy]


class KeyedFactory:
    """A policy factory that names what it makes: ``key`` (e.g. the digest of the policy's
    config) is equal for two factories exactly when they make the same policy.

    Why: nothing a policy fits depends on the cost, so a sweep over costs fits the same policy
    on the same questions again and again. With a key, the protocols keep such cost-free work in
    memory (``reused``) and compute it once per process.
    """

    def __init__(self, make: PolicyFactory, key: str) -> None:
        self.make = make
        self.key = str(key)

    def __call__(self) -> Policy:
        return self.make()


def task_fingerprint(task: RoutingTask) -> str:
    """Digest of everything of a task that a protocol reads (questions, documents, outcomes,
    features, measured costs): two tasks with the same fingerprint give the same numbers."""
    import hashlib

    import pandas as pd

    h = hashlib.sha256()
    for part in (task.qids, task.groups):
        h.update("\x1f".join(map(str, part)).encode("utf-8") + b"\x1e")
    for arr in (task.base, task.extra, task.base_cost, task.extra_cost):
        h.update(b"none" if arr is None else np.ascontiguousarray(arr, dtype=float).tobytes())
        h.update(b"\x1e")
    h.update("\x1f".join(map(str, task.features.columns)).encode("utf-8"))
    h.update(pd.util.hash_pandas_object(task.features, index=False).to_numpy().tobytes())
    h.update(repr((task.base_arm, task.extra_arm, task.metric, task.continuous, task.cost_unit)).encode("utf-8"))
    return h.hexdigest()


# per kind of work, the most recent results kept (a sweep runs one policy's costs in a row)
REUSE_LIMITS = {"budget": 4, "oof": 64}
_REUSED: dict[str, "OrderedDict[str, object]"] = {}


def reused(kind: str, factory: PolicyFactory, task: RoutingTask, settings: dict, compute: Callable[[], T]) -> T:
    """``compute()``, or its earlier result for the same kind of work, policy (the factory's
    ``key``), task and settings in this process. A factory without a key is never reused.
    Callers must treat the result as read-only (or copy it)."""
    key = getattr(factory, "key", None)
    if key is None:
        return compute()
    from harness.io import digest_of

    memo = _REUSED.setdefault(kind, OrderedDict())
    full = digest_of({"policy": key, "task": task_fingerprint(task), "settings": settings})
    if full in memo:
        memo.move_to_end(full)
        return memo[full]  # type: ignore[return-value]
    value = compute()
    memo[full] = value
    while len(memo) > REUSE_LIMITS.get(kind, 8):
        memo.popitem(last=False)
    return value


def forget_reused() -> None:
    """Drop every kept result (benchmarks measuring work from scratch; tests)."""
    _REUSED.clear()


def policy_label(policy: Policy) -> str:
    return f"{getattr(policy, 'name', 'policy')} ({type(policy).__name__})"


def fit_policy(policy: Policy, task: RoutingTask, seed: int) -> Policy:
    """Fit on ``task`` only when the policy is trainable; untrainable policies are left as is."""
    if policy.trainable:
        X = task.feature_matrix(policy.features)
        policy.fit(X, task.delta, task.groups, seed)
    return policy


def question_texts(policy: Policy, task: RoutingTask) -> np.ndarray | None:
    """The questions' text for a policy that declares ``needs_text`` (None for every other); a
    FeatureError naming the policy and the table when the table has no question text."""
    if not getattr(policy, "needs_text", False):
        return None
    if task.texts is None:
        raise FeatureError(f"policy {policy_label(policy)} reads the question text (needs_text = True), but "
                           f"{task.source} has no '{TEXT_COLUMN}' column")
    return task.texts


def score_task(policy: Policy, task: RoutingTask, seed: int) -> np.ndarray:
    """One float score per question of ``task``.

    The oracle (``policy.oracle``) is handed the true delta (docs/metrics.md §4: an upper bound, never
    deployable); every other policy sees only its features. The scores are read by the score
    rule (``policies.scores.checked_scores``, docs/policies.md "Scores"): a pandas Series is
    aligned by its index; a wrong length, a value that is not a real number, more than one
    dimension or a non-finite score (NaN, +-inf) is a HarnessError naming the policy: a NaN would
    silently never trigger, and an infinite score would collide with the "never run" threshold
    tau = +inf.
    """
    X = task.feature_matrix(policy.features)
    ctx = ScoreContext(qids=task.qids, seed=seed, true_delta=task.delta if policy.oracle else None,
                       texts=question_texts(policy, task))
    return checked_scores(policy.score(X, ctx), X.index, task.qids, f"policy {policy_label(policy)}")


UNDEFINED = "undefined"  # how a value the run declared undefined (a NaN) is printed, as in the report


def fmt(value: float) -> str:
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return UNDEFINED
    if isinstance(value, float) and math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    if value != 0 and abs(value) < 1e-4:
        return f"{value:.1e}"
    return f"{value:.4f}"


def shown(value: float, spec: str) -> str:
    """``value`` formatted by ``spec`` (``.4f``), or "undefined" for a NaN (a job line's numbers)."""
    value = float(value)
    return UNDEFINED if math.isnan(value) else format(value, spec)


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
