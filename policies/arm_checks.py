"""The contract checks of an n-way policy (``policies.arm_policies.ArmPolicy``), run by
``check_policy`` when the policy scores arms: one finite column per arm and row, the same scores
on a second call and from a second fit, inputs untouched, ``get_params`` rebuilding an equal
policy, and a JSON state that restores the very same scores.

Why apart from the binary checks: an n-way policy is fitted on every arm's outcomes and costs
and returns a (questions x arms) matrix; the harness relies on the same guarantees as for a
binary score, checked the same way (one named check per failure).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from harness.errors import HarnessError
from policies.arm_policies import ArmPolicy, ArmScoreContext
from policies.base import check_json_state

ARM_CHECKS = ("is_arm_policy", "get_params", "fit_score", "one_column_per_arm", "finite_scores",
              "repeatable_score", "inputs_untouched", "deterministic_fit", "state_round_trip")
N_ARMS = 3  # arms of the check table


def check_table(table: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
    """(features, outcomes, costs, groups) of a check table: the table's keep and hybrid outcomes
    and a third arm drawn from the seed (their union), with unit costs 0, 1 and 2."""
    rng = np.random.default_rng(seed)
    feats = table[[c for c in table.columns if c.startswith("feat.")]].copy()
    feats.columns = [c[len("feat."):] for c in feats.columns]
    metric = next(c.split(".", 1)[1] for c in table.columns if c.startswith("keep.hit@"))
    keep, hybrid = table[f"keep.{metric}"].to_numpy(float), table[f"hybrid.{metric}"].to_numpy(float)
    third = np.maximum(keep, hybrid) * (rng.random(len(table)) < 0.9)
    outcomes = np.column_stack([keep, hybrid, third])
    costs = np.tile(np.arange(N_ARMS, dtype=float), (len(table), 1))
    return feats.reset_index(drop=True), outcomes, costs, table["doc_id"].astype(str).to_numpy()


def run_arm_checks(policy: ArmPolicy, table: pd.DataFrame, seed: int, fail) -> tuple[str, ...]:
    """Every n-way check on copies of ``policy``; ``fail(check, message)`` raises the named error."""
    X, y, c, groups = check_table(table, seed)
    half = len(X) // 2
    dev = (X.iloc[:half].reset_index(drop=True), y[:half], c[:half], groups[:half])
    test = X.iloc[half:].reset_index(drop=True)
    ctx = ArmScoreContext(np.arange(len(test)).astype(str), ("keep", "hybrid", "third"), seed, y[half:])
    params = policy.get_params()
    clone = _rebuild(policy, params, fail)
    kept = (dev[0].copy(), dev[1].copy(), test.copy())
    fitted, scores = _fit_score(clone, dev, test, ctx, seed, fail)
    if scores.ndim != 2 or scores.shape != (len(test), N_ARMS):
        fail("one_column_per_arm", f"score_arms returned shape {scores.shape}, expected {(len(test), N_ARMS)}")
    if not np.isfinite(scores).all():
        fail("finite_scores", f"{int((~np.isfinite(scores)).sum())} score(s) are NaN or infinite")
    if not np.array_equal(np.asarray(fitted.score_arms(test.copy(), ctx), dtype=float), scores):
        fail("repeatable_score", "a second score_arms on the same rows gave other scores")
    if not (kept[0].equals(dev[0]) and np.array_equal(kept[1], dev[1]) and kept[2].equals(test)):
        fail("inputs_untouched", "fit_arms or score_arms changed the frames or arrays it was given")
    if policy.trainable:
        _, again = _fit_score(_rebuild(policy, params, fail), dev, test, ctx, seed, fail)
        if not np.array_equal(again, scores):
            fail("deterministic_fit", "a second fit_arms on the same data and seed scores differently")
    _check_round_trip(policy, params, fitted, test, ctx, scores, fail)
    return ARM_CHECKS if policy.trainable else tuple(k for k in ARM_CHECKS if k != "deterministic_fit")


def _rebuild(policy: ArmPolicy, params: dict, fail) -> ArmPolicy:
    try:
        return type(policy)(**params)
    except Exception as exc:  # noqa: BLE001 - said as the failed check
        fail("get_params", f"type(p)(**p.get_params()) raised {type(exc).__name__}: {exc}")


def _fit_score(policy: ArmPolicy, dev, test: pd.DataFrame, ctx, seed: int, fail):
    try:
        fitted = policy.fit_arms(dev[0], dev[1], dev[2], dev[3], seed) or policy
        return fitted, np.asarray(fitted.score_arms(test, ctx), dtype=float)
    except (HarnessError, ValueError, TypeError, KeyError) as exc:
        fail("fit_score", f"raised {type(exc).__name__}: {exc}")


def _check_round_trip(policy, params, fitted, test, ctx, scores, fail) -> None:
    try:
        state = json.loads(json.dumps(check_json_state(policy.name, fitted.get_state())))
        restored = type(policy)(**params)
        restored.set_state(state)
        again = np.asarray(restored.score_arms(test, ctx), dtype=float)
    except Exception as exc:  # noqa: BLE001 - said as the failed check
        fail("state_round_trip", f"get_state / set_state raised {type(exc).__name__}: {exc}")
    if not np.array_equal(again, scores):
        fail("state_round_trip", "a policy restored from get_state() scores differently from the fitted one")
