"""Protocol A (docs/metrics.md §5): choose a threshold under a cost on development, freeze, then evaluate
once on held-out documents.

Why the code is split in three functions: ``split_dev_heldout`` (threshold_select) separates the
documents; ``develop`` (threshold_freeze) receives ONLY the development RoutingTask, picks tau,
refits and writes the frozen router (policy state, tau, config) with SHA-256 digests;
``evaluate_heldout`` (threshold_heldout) receives the held-out task and the frozen folder, rebuilds
the policy from the frozen file with a fresh ``policy_factory()`` + ``set_state()`` after checking
the digests, and only then looks at held-out outcomes. So nothing held-out can reach tau or the
fitted model by construction. This module runs them per split and aggregates repeated splits;
``threshold_result.ThresholdResult`` holds the outcome and writes the summary.

The choices where docs/metrics.md is silent, the power metrics, the development estimates, repeated
splits and the ceiling warning are written down in docs/protocols.md, "Protocol A, threshold".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.protocols.common import PolicyFactory, policy_label
from harness.protocols.threshold_freeze import develop, frozen_info
from harness.protocols.threshold_heldout import N_PERM, check_alpha_power, comparison_metrics, evaluate_heldout
from harness.protocols.threshold_result import ThresholdResult
from harness.protocols.threshold_select import nested_dev_estimate, repeat_seeds, split_dev_heldout
from harness.stats import MIN_BOOTSTRAP
from harness.task import RoutingTask


def _one_split(
    task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    cost: float,
    seed: int,
    dev_frac: float,
    n_folds: int,
    n_boot: int,
    freeze_dir: Path,
    nested_folds: int,
    alpha: float,
    power: float,
    n_perm: int,
    extra_config: dict[str, Any],
    equivalence_margin: float = 0.01,
) -> tuple[dict[str, float], pd.DataFrame, dict[str, Any]]:
    """One dev/held-out split: develop (nested estimate, then tau + freeze) on development only,
    then evaluate held-out from the frozen folder."""
    dev_task, held_task = split_dev_heldout(task, dev_frac, seed)
    nested = None
    if nested_folds:
        nested = nested_dev_estimate(
            dev_task, policy_factory, cost=cost, seed=seed, n_folds=n_folds, nested_folds=nested_folds
        )
    frozen = develop(
        dev_task,
        policy_factory,
        cost=cost,
        seed=seed,
        n_folds=n_folds,
        freeze_dir=freeze_dir,
        extra_config=extra_config,
    )
    del dev_task  # evaluation below works from the frozen folder only
    metrics, decisions = evaluate_heldout(
        frozen.dir, held_task, policy_factory, n_boot=n_boot, alpha=alpha, power=power, n_perm=n_perm,
        equivalence_margin=equivalence_margin,
    )
    metrics.update(
        {
            "dev/tau": frozen.tau,
            "dev/oof_utility": frozen.oof_utility,
            "dev/oof_extra_calls": frozen.oof_extra_calls,
            "n/dev": frozen.n_dev,
            "cost": float(cost),
        }
    )
    if nested is not None:
        metrics["dev/nested_utility"] = nested.utility
        metrics["dev/nested_extra_share"] = nested.extra_share
    return metrics, decisions, frozen_info(frozen)


POOLED_SUFFIXES = tuple(
    f"/utility/{k}" for k in (
        "ci_low", "ci_high", "mdd", "p", "discordant_docs", "all_zero", "max_diff", "min_p", "detectable", "p_exact",
        "n_patterns", "discordant_questions", "cost_only", "plan_questions", "plan_docs", "plan_capped",
        "equivalent", "tost_low", "tost_high", "p_better",
    )
)


def _mean_sd(values: list[float]) -> tuple[float, float]:
    """Mean and population sd over repeats; (value, 0) when all repeats agree (also +-inf)."""
    v = np.asarray(values, dtype=float)
    if np.all(v == v[0]):
        return float(v[0]), 0.0
    return float(v.mean()), float(v.std(ddof=0))


def _aggregate_repeats(
    per_repeat: list[dict[str, float]],
    pooled: pd.DataFrame,
    *,
    cost: float,
    seed: int,
    n_boot: int,
    alpha: float,
    power: float,
    n_perm: int,
    equivalence_margin: float = 0.01,
) -> dict[str, float]:
    """R > 1: means and population sds over repeats; intervals, MDD, sign-flip p, discordant
    documents and the all-zero flag from the pooled decisions with documents as clusters;
    McNemar p nan; ``dev/tau_median`` instead of ``dev/tau`` (docs/protocols.md)."""
    out: dict[str, float] = {}
    for key in per_repeat[0]:
        if key == "cost":
            out[key] = float(cost)
        elif key == "dev/tau":
            out["dev/tau_median"] = float(np.median([m[key] for m in per_repeat]))
        elif key.endswith(POOLED_SUFFIXES):
            continue
        elif key.startswith("heldout/mcnemar_vs_") and key.endswith("/p"):
            out[key] = math.nan
        else:
            out[key], out[f"{key}_std"] = _mean_sd([m[key] for m in per_repeat])
    groups = pooled["doc_id"].to_numpy()
    utility = pooled["utility"].to_numpy(float)
    chosen = pooled["chosen"].to_numpy(float)
    for name, other, outcome in (("base", pooled["base"].to_numpy(float), pooled["base"].to_numpy(float)),
                                 ("extra", pooled["extra"].to_numpy(float) - cost, pooled["extra"].to_numpy(float))):
        pre = f"heldout/diff_vs_{name}/utility"
        for key, value in comparison_metrics(
            utility - other, groups, n_perm=n_perm, seed=seed, alpha=alpha, power=power,
            outcome_diffs=chosen - outcome, n_questions=int(pooled["qid"].nunique()), margin=equivalence_margin,
        ).items():
            if key:  # the point estimate stays the mean over repeats
                out[f"{pre}{key}"] = value
    return out


def run_threshold_protocol(
    task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    cost: float = 0.02,
    seed: int = 0,
    dev_frac: float = 0.8,
    n_folds: int = 5,
    n_boot: int = 1000,
    freeze_dir: Path,
    repeats: int = 1,
    nested_folds: int = 5,
    alpha: float = 0.05,
    power: float = 0.8,
    n_perm: int = N_PERM,
    equivalence_margin: float = 0.01,
) -> ThresholdResult:
    """Protocol A end to end, over ``repeats`` document-level splits: per split, develop +
    freeze on development, then evaluate held-out; R > 1 aggregated as docs/protocols.md
    says. ``nested_folds = 0`` switches the nested development estimate off; ``n_perm`` is the
    number of random sign patterns of the sign-flip test (used only beyond 16 discordant
    documents); ``equivalence_margin`` is the margin of the two one-sided tests
    (docs/metrics.md §12)."""
    _check_protocol_options(n_boot, alpha, power, nested_folds, n_perm, equivalence_margin)
    seeds = repeat_seeds(seed, repeats)
    R = len(seeds)
    per_repeat, frames, frozen_infos = _run_splits(
        task,
        policy_factory,
        seeds,
        Path(freeze_dir),
        cost=cost,
        dev_frac=dev_frac,
        n_folds=n_folds,
        n_boot=n_boot,
        nested_folds=nested_folds,
        alpha=alpha,
        power=power,
        n_perm=int(n_perm),
        equivalence_margin=float(equivalence_margin),
    )
    decisions = frames[0] if R == 1 else pd.concat(frames, ignore_index=True)
    if R == 1:
        metrics = dict(per_repeat[0])
    else:
        metrics = _aggregate_repeats(
            per_repeat, decisions, cost=cost, seed=seed, n_boot=n_boot, alpha=alpha, power=power, n_perm=int(n_perm),
            equivalence_margin=float(equivalence_margin),
        )
    metrics["n/repeats"] = R
    policy = policy_factory()
    extras = {
        "repeat_seeds": seeds,
        "per_repeat": per_repeat,
        "frozen_per_repeat": frozen_infos,
        "fixed_route": getattr(policy, "fixed_route", None),
    }
    return ThresholdResult(
        metrics,
        decisions,
        frozen_infos[0],
        policy=policy_label(policy),
        metric=task.metric,
        extras=extras,
        alpha=float(alpha),
        power=float(power),
        repeats=R,
        equivalence_margin=float(equivalence_margin),
    )


def _check_protocol_options(
    n_boot: int, alpha: float, power: float, nested_folds: int, n_perm: int, equivalence_margin: float
) -> None:
    """Everything checked before anything is frozen: a bad option fails before the first split."""
    if n_boot < MIN_BOOTSTRAP:
        raise ConfigError("protocol.n_boot", f"docs/metrics.md §5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {n_boot}")
    check_alpha_power(alpha, power)
    if nested_folds != 0 and nested_folds < 2:
        raise ConfigError("protocol.nested_folds", f"must be 0 (off) or >= 2, got {nested_folds}")
    if int(n_perm) < 1:
        raise ConfigError("protocol.n_perm", f"must be >= 1, got {n_perm}")
    if not (alpha < 0.5 and equivalence_margin > 0):
        raise ConfigError("protocol.equivalence_margin" if alpha < 0.5 else "protocol.alpha",
                          f"two one-sided tests need alpha < 0.5 and a margin > 0, got alpha={alpha}, "
                          f"margin={equivalence_margin}")


def _run_splits(
    task: RoutingTask,
    policy_factory: PolicyFactory,
    seeds: list[int],
    freeze_dir: Path,
    *,
    dev_frac: float,
    **options: Any,
) -> tuple[list[dict[str, float]], list[pd.DataFrame], list[dict[str, Any]]]:
    """Every repeat's split (one freeze folder each when R > 1): its metrics, its decisions
    (tagged with the repeat and, for R > 1, its own development estimates) and its frozen
    folder, in repeat order."""
    R = len(seeds)
    per_repeat, frames, frozen_infos = [], [], []
    for r, split_seed in enumerate(seeds):
        extra_config: dict[str, Any] = {"dev_frac": float(dev_frac)}
        if R > 1:
            extra_config.update({"repeat": r, "repeats": R})
        metrics_r, decisions_r, frozen_r = _one_split(
            task,
            policy_factory,
            seed=split_seed,
            dev_frac=dev_frac,
            freeze_dir=freeze_dir if R == 1 else freeze_dir / f"repeat_{r}",
            extra_config=extra_config,
            **options,
        )
        decisions_r["repeat"] = r
        if R > 1:  # each repeat's own development estimate: the policy comparison chooses its reference per repeat
            for name in ("dev/nested_utility", "dev/oof_utility"):
                if name in metrics_r:
                    decisions_r[name] = float(metrics_r[name])
        per_repeat.append(metrics_r)
        frames.append(decisions_r)
        frozen_infos.append(frozen_r)
    return per_repeat, frames, frozen_infos
