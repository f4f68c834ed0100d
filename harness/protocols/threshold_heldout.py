"""Protocol A's held-out side (docs/metrics.md §5): the policy rebuilt from the frozen folder scores
the held-out questions once; its utility against always-base and always-extra (the paired
comparisons of docs/metrics.md §12, McNemar for 0/1 outcomes) and what the held-out set itself can
resolve.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.errors import ConfigError
from harness.paired import paired_comparison
from harness.protocols.common import PolicyFactory, score_task
from harness.protocols.threshold_freeze import load_frozen
from harness.stats import MIN_BOOTSTRAP, mcnemar_exact, min_mcnemar_p
from harness.task import RoutingTask

N_PERM = 20_000  # random sign patterns of the sign-flip test beyond SIGN_FLIP_EXACT_MAX documents


def check_alpha_power(alpha: float, power: float) -> None:
    """alpha and power must lie in (0, 1): checked before anything is frozen or scored."""
    for key, value in (("alpha", alpha), ("power", power)):
        if not 0.0 < value < 1.0:  # NaN fails too
            raise ConfigError(f"protocol.{key}", f"must be in (0, 1), got {value}")


def _is_binary(*outcomes) -> bool:
    return all(np.isin(np.asarray(o, dtype=float), (0.0, 1.0)).all() for o in outcomes)


def comparison_metrics(diffs: np.ndarray, groups: np.ndarray, **kwargs) -> dict[str, float]:
    """``heldout/diff_vs_<name>/utility`` and its sub-metrics from ``paired.paired_comparison``:
    the same numbers for one split and for the pooled decisions of R > 1 (documents as clusters
    in both)."""
    c = paired_comparison(diffs, np.asarray(groups).astype(str), **kwargs)
    return {"": c["point"], "/ci_low": c["ci_low"], "/ci_high": c["ci_high"], "/mdd": c["mdd"], "/p": c["p"],
            "/discordant_docs": c["discordant_docs"], "/all_zero": int(c["same"]), "/max_diff": c["max_diff"],
            "/min_p": c["min_p"], "/detectable": int(c["detectable"]), "/p_exact": int(c["p_exact"]),
            "/n_patterns": c["n_patterns"], "/discordant_questions": c["discordant_questions"],
            "/cost_only": int(c["cost_only"]), "/plan_questions": c["plan_questions"], "/plan_docs": c["plan_docs"],
            "/plan_capped": int(c["plan_capped"]), "/equivalent": int(c["equivalent"]), "/tost_low": c["tost_low"],
            "/tost_high": c["tost_high"], "/p_better": c["p_better"]}


def evaluate_heldout(
    frozen_dir: Path,
    heldout_task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    n_boot: int = 1000,
    alpha: float = 0.05,
    power: float = 0.8,
    n_perm: int = N_PERM,
    equivalence_margin: float = 0.01,
) -> tuple[dict[str, float], pd.DataFrame]:
    """Score held-out with the policy rebuilt from the frozen folder and report docs/metrics.md §5's numbers.

    Returns (metrics, per-question decisions). The comparisons with the fixed decisions
    (``harness.paired.paired_comparison``, docs/metrics.md §12) use the frozen config's seed:
    the sign-flip test (``n_perm`` random patterns only beyond 16 discordant documents), its
    inverted (1 - ``alpha``) interval (``ci_low`` / ``ci_high``, which replaced the percentile
    bootstrap: it did not cover with few discordant documents), the largest showable
    difference, the MDD and the sample-size plan at ``power``. ``n_boot`` is still checked
    (>= 1000, docs/metrics.md §5) for the protocols' other bootstraps.
    """
    if n_boot < MIN_BOOTSTRAP:
        raise ConfigError("protocol.n_boot", f"docs/metrics.md §5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {n_boot}")
    check_alpha_power(alpha, power)
    policy, tau, config = load_frozen(frozen_dir, policy_factory)
    seed, cost = int(config["seed"]), float(config["cost"])
    t = heldout_task
    scores = score_task(policy, t, seed)
    ran = scores >= tau
    chosen = np.where(ran, t.extra, t.base)
    u_pol = chosen - cost * ran
    u_base = t.base.astype(float)
    u_extra = t.extra - cost
    metrics = _heldout_means(t, ran, chosen, u_pol, u_base, u_extra)
    for name, other, outcome in (("base", u_base, t.base), ("extra", u_extra, t.extra)):
        for key, value in comparison_metrics(
            u_pol - other, t.groups, n_perm=n_perm, seed=seed, alpha=alpha, power=power,
            outcome_diffs=chosen - np.asarray(outcome, dtype=float), margin=equivalence_margin,
        ).items():
            metrics[f"heldout/diff_vs_{name}/utility{key}"] = value
    binary = _is_binary(t.base, t.extra)
    metrics.update(_mcnemar_metrics(chosen, t, binary))
    metrics.update(_heldout_resolution(t, binary))
    decisions = pd.DataFrame(
        {
            "qid": t.qids,
            "doc_id": t.groups,
            "score": scores,
            "ran_extra": ran,
            "base": t.base,
            "extra": t.extra,
            "chosen": chosen,
            "utility": u_pol,
        }
    )
    return metrics, decisions


def _heldout_means(t: RoutingTask, ran, chosen, u_pol, u_base, u_extra) -> dict[str, float]:
    """The policy's and the two fixed decisions' held-out means, the policy's extra calls and the
    oracle bound: the head of the summary's table."""
    delta = t.delta
    m = t.metric
    return {
        f"heldout/{m}": float(chosen.mean()),
        "heldout/utility": float(u_pol.mean()),
        "heldout/extra_calls": int(ran.sum()),
        "heldout/extra_share": float(ran.mean()),
        "heldout/rescues": int(np.sum(ran & (delta > 0))),
        "heldout/harms": int(np.sum(ran & (delta < 0))),
        f"heldout/base/{m}": float(t.base.mean()),
        f"heldout/extra/{m}": float(t.extra.mean()),
        "heldout/base/utility": float(u_base.mean()),
        "heldout/extra/utility": float(u_extra.mean()),
        f"heldout/oracle_bound/{m}": float(np.maximum(t.base, t.extra).mean()),
    }


def _mcnemar_metrics(chosen, t: RoutingTask, binary: bool) -> dict[str, float]:
    """McNemar's test of the policy's outcome against each fixed decision's (0/1 outcomes only;
    for continuous ones the discordant count and nan p-values)."""
    metrics: dict[str, float] = {}
    for name, other in (("base", t.base), ("extra", t.extra)):
        if binary:
            b, c, p = mcnemar_exact(chosen, other)
            discordant, min_p = b + c, min_mcnemar_p(b + c)
        else:
            b, c, p = 0, 0, math.nan
            discordant, min_p = int(np.sum(chosen != other)), math.nan
        metrics[f"heldout/mcnemar_vs_{name}/policy_only"] = b
        metrics[f"heldout/mcnemar_vs_{name}/other_only"] = c
        metrics[f"heldout/mcnemar_vs_{name}/p"] = p
        metrics[f"heldout/mcnemar_vs_{name}/discordant"] = discordant
        metrics[f"heldout/mcnemar_vs_{name}/min_p"] = min_p
    return metrics


def _heldout_resolution(t: RoutingTask, binary: bool) -> dict[str, float]:
    """What the held-out set itself can resolve: always-extra vs always-base, and its size."""
    metrics: dict[str, float] = {}
    delta = t.delta
    arm_rescues, arm_harms = int(np.sum(delta > 0)), int(np.sum(delta < 0))
    metrics["heldout/extra_vs_base/rescues"] = arm_rescues
    metrics["heldout/extra_vs_base/harms"] = arm_harms
    metrics["heldout/extra_vs_base/discordant"] = arm_rescues + arm_harms
    metrics["heldout/extra_vs_base/min_p"] = min_mcnemar_p(arm_rescues + arm_harms) if binary else math.nan
    metrics["heldout/n_docs"] = int(len(np.unique(t.groups)))
    metrics["n/heldout"] = int(t.n)
    return metrics
