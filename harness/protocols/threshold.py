"""Protocol A (docs/metrics.md §5): choose a threshold under a cost on development, freeze, then evaluate
once on held-out documents.

Why the code is split in three functions: ``split_dev_heldout`` separates the documents;
``develop`` receives ONLY the development RoutingTask, picks tau, refits and writes the frozen
router (policy state, tau, config) with SHA-256 digests; ``evaluate_heldout`` receives the
held-out task and the frozen folder, rebuilds the policy from the frozen file with a fresh
``policy_factory()`` + ``set_state()`` after checking the digests, and only then looks at
held-out outcomes. So nothing held-out can reach tau or the fitted model by construction.

The choices where docs/metrics.md is silent, the power metrics, the development estimates, repeated
splits and the ceiling warning are written down in docs/protocols.md, "Protocol A, threshold".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.errors import ConfigError, HarnessError
from harness.io import atomic_write_text, canonical_json, digest_of, sha256_file
from harness.protocols.common import PolicyFactory, fit_policy, fmt, policy_label, reused, score_task, text_table
from harness.paired import (
    equivalence_words, interval_words, p_words, paired_comparison, plan_words, resolution_words,
)
from harness.stats import MIN_BOOTSTRAP, grouped_kfold, grouped_split, mcnemar_exact, min_mcnemar_p
from harness.task import RoutingTask
from policies.base import check_json_state, policy_params

# the base arm's held-out mean at which the summary warns that nothing can be rescued (the same
# threshold as the report's sweep warning, harness.report.CEILING)
CEILING = 0.999


def ceiling_warning(metric: str, value: float, where: str = "held-out") -> str | None:
    """The summary's one warning line when the base arm's mean ``value`` of ``metric`` on
    ``where`` is at ceiling (>= ``CEILING``), else None (also for nan)."""
    value = float(value)
    if not value >= CEILING:
        return None
    none = "no question" if value >= 1.0 else "almost no question"
    return (f"warning: the base arm is at ceiling ({metric} = {value:.3f} on {where}): {none} can be rescued; "
            "choose a metric that can tell the arms apart (e.g. arms.metric=all@2 on HotpotQA)")


STATE_FILE = "policy_state.json"
ROUTER_FILE = "router.json"
MANIFEST_FILE = "manifest.json"
UTILITY_TIE_TOL = 1e-12
N_PERM = 20_000  # random sign patterns of the sign-flip test beyond SIGN_FLIP_EXACT_MAX documents
MDD_ZERO_TOL = 1e-12  # an MDD below this is float noise of a spread that is 0 (e.g. a constant cost shift)


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
# Split, develop + freeze, evaluate
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


def _tau_to_json(tau: float) -> float | str:
    if math.isinf(tau):
        return "+inf" if tau > 0 else "-inf"
    return float(tau)


def _tau_from_json(value: float | str) -> float:
    if value in ("+inf", "-inf"):
        return math.inf if value == "+inf" else -math.inf
    return float(value)


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
class FrozenRouter:
    """What ``develop`` froze: where, tau, the config, and the SHA-256 of every frozen file."""

    dir: Path
    tau: float
    config: dict[str, Any]
    digests: dict[str, str]
    oof_utility: float
    oof_extra_calls: int
    n_dev: int


def develop(
    dev_task: RoutingTask,
    policy_factory: PolicyFactory,
    *,
    cost: float = 0.02,
    seed: int = 0,
    n_folds: int = 5,
    freeze_dir: Path,
    extra_config: dict[str, Any] | None = None,
) -> FrozenRouter:
    """Choose tau on out-of-fold development scores, refit on all development, freeze.

    Only development questions are visible here. The frozen folder holds ``policy_state.json``
    (``policy.get_state()``), ``router.json`` (tau, config) and ``manifest.json`` (their
    SHA-256 digests, plus the digests of tau and config); each written atomically, the manifest
    last, so a folder with a valid manifest is a complete freeze.
    """
    if not (cost >= 0 and math.isfinite(cost)):
        raise ConfigError("cost", f"must be a finite number >= 0, got {cost}")
    fixed = fixed_tau(policy_factory, dev_task, cost)
    if fixed is not None:
        tau, oof_u, oof_k = fixed
    else:
        scores = oof_scores(dev_task, policy_factory, n_folds=n_folds, seed=seed)
        tau, oof_u, oof_k = select_tau(scores, dev_task.base, dev_task.delta, cost)
    policy = fit_policy(policy_factory(), dev_task, seed)
    state = policy.get_state()
    check_json_state(getattr(policy, "name", type(policy).__name__), state)  # strict JSON, or one clear error
    config = {
        "protocol": "threshold",
        "cost": float(cost),
        "seed": int(seed),
        "n_folds": int(n_folds),
        "policy_class": f"{type(policy).__module__}.{type(policy).__qualname__}",
        "policy_name": getattr(policy, "name", "policy"),
        "policy_params": policy_params(policy),  # constructor parameters (get_params), strict JSON
        "policy_features": list(policy.features),
        "oracle": bool(policy.oracle),
        "metric": dev_task.metric,
        "base_arm": dev_task.base_arm,
        "extra_arm": dev_task.extra_arm,
        "dev_qids_sha256": digest_of(sorted(dev_task.qids.tolist())),
        **(extra_config or {}),
    }
    freeze_dir = Path(freeze_dir)
    freeze_dir.mkdir(parents=True, exist_ok=True)
    (freeze_dir / MANIFEST_FILE).unlink(missing_ok=True)  # an old manifest must not vouch for new files
    router = {"tau": _tau_to_json(tau), "config": config, "oof_utility": oof_u, "oof_extra_calls": oof_k}
    atomic_write_text(freeze_dir / STATE_FILE, canonical_json(state))
    atomic_write_text(freeze_dir / ROUTER_FILE, canonical_json(router))
    digests = {
        STATE_FILE: sha256_file(freeze_dir / STATE_FILE),
        ROUTER_FILE: sha256_file(freeze_dir / ROUTER_FILE),
        "tau": digest_of(_tau_to_json(tau)),
        "config": digest_of(config),
    }
    atomic_write_text(freeze_dir / MANIFEST_FILE, json.dumps({"sha256": digests}, indent=2, sort_keys=True))
    return FrozenRouter(freeze_dir, tau, config, digests, oof_u, oof_k, dev_task.n)


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


def load_frozen(frozen_dir: Path, policy_factory: PolicyFactory):
    """(policy rebuilt from the frozen state, tau, config); a digest mismatch or a different
    policy class is a HarnessError naming the file."""
    frozen_dir = Path(frozen_dir)
    manifest_path = frozen_dir / MANIFEST_FILE
    if not manifest_path.exists():
        raise HarnessError(f"{manifest_path}: no manifest; the router was not (completely) frozen")
    digests = json.loads(manifest_path.read_text(encoding="utf-8"))["sha256"]
    for name in (STATE_FILE, ROUTER_FILE):
        path = frozen_dir / name
        if not path.exists() or sha256_file(path) != digests.get(name):
            raise HarnessError(f"{path}: SHA-256 does not match {manifest_path}; frozen file changed")
    state = json.loads((frozen_dir / STATE_FILE).read_text(encoding="utf-8"))
    router = json.loads((frozen_dir / ROUTER_FILE).read_text(encoding="utf-8"))
    config = router["config"]
    policy = policy_factory()
    cls = f"{type(policy).__module__}.{type(policy).__qualname__}"
    if cls != config["policy_class"]:
        raise HarnessError(f"{frozen_dir / ROUTER_FILE}: frozen policy_class {config['policy_class']!r}, factory gives {cls!r}")
    if "policy_params" in config and policy_params(policy) != config["policy_params"]:
        raise HarnessError(
            f"{frozen_dir / ROUTER_FILE}: frozen policy_params {config['policy_params']} differ from the factory's "
            f"{policy_params(policy)}"
        )
    policy.set_state(state)
    return policy, _tau_from_json(router["tau"]), config


def _check_alpha_power(alpha: float, power: float) -> None:
    for key, value in (("alpha", alpha), ("power", power)):
        if not 0.0 < value < 1.0:  # NaN fails too
            raise ConfigError(f"protocol.{key}", f"must be in (0, 1), got {value}")


def _is_binary(*outcomes) -> bool:
    return all(np.isin(np.asarray(o, dtype=float), (0.0, 1.0)).all() for o in outcomes)


def _comparison_metrics(diffs: np.ndarray, groups: np.ndarray, **kwargs) -> dict[str, float]:
    """``heldout/diff_vs_<name>/utility`` and its sub-metrics from ``stats.paired_comparison``:
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
    _check_alpha_power(alpha, power)
    policy, tau, config = load_frozen(frozen_dir, policy_factory)
    seed, cost = int(config["seed"]), float(config["cost"])
    t = heldout_task
    scores = score_task(policy, t, seed)
    ran = scores >= tau
    chosen = np.where(ran, t.extra, t.base)
    u_pol = chosen - cost * ran
    u_base = t.base.astype(float)
    u_extra = t.extra - cost
    delta = t.delta
    m = t.metric
    metrics: dict[str, float] = {
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
    for name, other, outcome in (("base", u_base, t.base), ("extra", u_extra, t.extra)):
        for key, value in _comparison_metrics(
            u_pol - other, t.groups, n_perm=n_perm, seed=seed, alpha=alpha, power=power,
            outcome_diffs=chosen - np.asarray(outcome, dtype=float), margin=equivalence_margin,
        ).items():
            metrics[f"heldout/diff_vs_{name}/utility{key}"] = value
    binary = _is_binary(t.base, t.extra)
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
    # what the held-out set itself can resolve: always-extra vs always-base
    arm_rescues, arm_harms = int(np.sum(delta > 0)), int(np.sum(delta < 0))
    metrics["heldout/extra_vs_base/rescues"] = arm_rescues
    metrics["heldout/extra_vs_base/harms"] = arm_harms
    metrics["heldout/extra_vs_base/discordant"] = arm_rescues + arm_harms
    metrics["heldout/extra_vs_base/min_p"] = min_mcnemar_p(arm_rescues + arm_harms) if binary else math.nan
    metrics["heldout/n_docs"] = int(len(np.unique(t.groups)))
    metrics["n/heldout"] = int(t.n)
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


@dataclass
class ThresholdResult:
    """Plain data: metrics (stable names), held-out decisions, frozen paths and digests.

    ``frozen`` is repeat 0's freeze; ``extras`` holds ``repeat_seeds``, ``per_repeat`` (each
    repeat's own metrics), ``frozen_per_repeat`` (every repeat's freeze, index = repeat) and
    ``fixed_route`` (the policy's fixed decision, or None)."""

    metrics: dict[str, float]
    decisions: pd.DataFrame
    frozen: dict[str, Any]
    policy: str = "policy"
    metric: str = "hit@10"
    extras: dict[str, Any] = field(default_factory=dict)
    alpha: float = 0.05
    power: float = 0.8
    repeats: int = 1
    equivalence_margin: float = 0.01

    def _count(self, value: float) -> str:
        """A count: an integer for one split, a mean (2 decimals) over repeats."""
        return str(int(value)) if self.repeats == 1 else f"{float(value):.2f}"

    def _direction(self, name: str) -> float:
        """The mean utility difference the sign-flip test is on: the point estimate for R = 1,
        the pooled mean of the decisions for R > 1 (docs/protocols.md)."""
        if self.repeats == 1:
            return float(self.metrics[f"heldout/diff_vs_{name}/utility"])
        d = self.decisions
        other = d["base"] if name == "base" else d["extra"] - self.metrics["cost"]
        return float((d["utility"] - other).mean())

    def _comparison(self, name: str) -> dict:
        """The logged numbers of ``policy - <name>`` as ``harness.paired``'s word helpers read them."""
        m, pre = self.metrics, f"heldout/diff_vs_{name}/utility"
        c = {k: m.get(f"{pre}/{k}", math.nan) for k in (
            "ci_low", "ci_high", "mdd", "p", "max_diff", "min_p", "plan_questions", "plan_docs", "n_patterns")}
        for k in ("detectable", "p_exact", "cost_only", "plan_capped", "equivalent"):
            c[k] = bool(m.get(f"{pre}/{k}", 0))
        c.update(same=bool(m[f"{pre}/all_zero"]), discordant_docs=int(m[f"{pre}/discordant_docs"]),
                 discordant_questions=int(m.get(f"{pre}/discordant_questions", 0)))
        c["plan_why"] = "" if c["plan_questions"] == c["plan_questions"] else (
            "no discordant document to plan from" if c["discordant_docs"] == 0 else
            "the discordant documents split evenly: no number of questions gives the power")
        return c

    def _verdict(self, name: str) -> str:
        """One plain sentence per comparison (unadjusted: each job's two comparisons are not
        corrected for the other jobs of a sweep): which side is better (only when the sign-flip
        p < alpha), else what the held-out questions can resolve and how many would."""
        ref, a = f"always-{name}", self.alpha
        c = self._comparison(name)
        k = c["discordant_docs"]
        if c["same"]:
            return f"policy - {name}: the same utility as {ref} on every held-out question; no difference can be resolved"
        pooled = "" if self.repeats == 1 else ", pooled over repeats"
        test = f"{p_words(c)} p = {fmt(c['p'])}"
        on = f"unadjusted, {k} discordant documents{pooled}"
        cost = "; the difference is the cost alone (0 discordant questions)" if c["cost_only"] else ""
        if c["p"] < a:
            detail = f"({test} < alpha = {a:g}, {on}; {interval_words(c, a)}{cost})"
            if self._direction(name) > 0:
                return f"policy - {name}: the policy is better than {ref} {detail}"
            return f"policy - {name}: {ref} is better than the policy {detail}"
        return (f"policy - {name}: cannot be told from {ref} ({test} >= alpha = {a:g}, {on}; {interval_words(c, a)}); "
                f"{equivalence_words(c, self.equivalence_margin)}; {resolution_words(c, a, self.power)}; "
                f"{plan_words(c, a, self.power)}")

    def _heldout_resolution(self) -> str:
        """What the held-out set itself can resolve: always-extra vs always-base."""
        m, a = self.metrics, self.alpha
        rescues, harms = m["heldout/extra_vs_base/rescues"], m["heldout/extra_vs_base/harms"]
        min_p = m["heldout/extra_vs_base/min_p"]
        if math.isnan(min_p):
            return (
                f"held-out set: the arms differ on {self._count(m['heldout/extra_vs_base/discordant'])} questions"
                f"{'' if self.repeats == 1 else ' per split on average'} (continuous outcome, no McNemar test)"
            )
        if self.repeats == 1:
            line = (
                f"held-out set: always-extra vs always-base rests on {self._count(rescues)} rescues + "
                f"{self._count(harms)} harms; the smallest reachable McNemar p is {fmt(min_p)}"
            )
            if min_p > a:
                line += (
                    " > alpha: no policy can be shown to differ from always-base in hits on this held-out set "
                    f"at alpha = {a:g}"
                )
            return line
        per = [r["heldout/extra_vs_base/min_p"] for r in self.extras.get("per_repeat", [])]
        blind = sum(p > a for p in per)
        line = (
            f"held-out sets: always-extra vs always-base rests on {self._count(rescues)} rescues + "
            f"{self._count(harms)} harms per split on average; in {blind} of {self.repeats} splits the "
            f"smallest reachable McNemar p exceeds alpha = {a:g}"
        )
        if per and blind == len(per):
            line += (
                ": no policy can be shown to differ from always-base in hits on any of these held-out sets "
                f"at alpha = {a:g}"
            )
        elif blind:
            line += " (on those, no policy can be shown to differ from always-base in hits)"
        return line

    def summary(self) -> str:
        m, k, R = self.metrics, self.metric, self.repeats
        n_held = int(m["n/heldout"]) if R == 1 else m["n/heldout"]
        rows = [
            ["policy", m[f"heldout/{k}"], m["heldout/utility"], m["heldout/extra_calls"], m["heldout/extra_share"]],
            ["always-base", m[f"heldout/base/{k}"], m["heldout/base/utility"], 0, 0.0],
            ["always-extra", m[f"heldout/extra/{k}"], m["heldout/extra/utility"], n_held, 1.0],
        ]
        head = text_table(["held-out", k, "utility", "extra calls", "share"], rows)
        diffs = text_table(
            [
                "utility difference", "point", f"{1 - self.alpha:.0%} CI low", f"{1 - self.alpha:.0%} CI high",
                "sign-flip p", "P(better)", "McNemar p", "discordant", "min p", "MDD",
            ],
            [
                [
                    f"policy - {name}",
                    m[f"heldout/diff_vs_{name}/utility"],
                    m[f"heldout/diff_vs_{name}/utility/ci_low"],
                    m[f"heldout/diff_vs_{name}/utility/ci_high"],
                    m[f"heldout/diff_vs_{name}/utility/p"],
                    m.get(f"heldout/diff_vs_{name}/utility/p_better", float("nan")),
                    m[f"heldout/mcnemar_vs_{name}/p"],
                    m[f"heldout/mcnemar_vs_{name}/discordant"],
                    m[f"heldout/mcnemar_vs_{name}/min_p"],
                    m[f"heldout/diff_vs_{name}/utility/mdd"],
                ]
                for name in ("base", "extra")
            ],
        )
        if self.extras.get("fixed_route") is not None:
            oof = f"OOF utility (fixed decision, not tuned)={fmt(m['dev/oof_utility'])}"
        else:
            oof = f"OOF utility (optimistic: maximum over thresholds)={fmt(m['dev/oof_utility'])}"
        if "dev/nested_utility" in m:
            nested = (
                f"nested utility={fmt(m['dev/nested_utility'])} (extra share {fmt(m['dev/nested_extra_share'])})"
            )
        else:
            nested = "nested estimate off"
        lines = [f"Protocol A (frozen threshold) - {self.policy}"]
        warning = ceiling_warning(k, m[f"heldout/base/{k}"])
        if warning:
            lines.append(warning)
        if R > 1:
            lines.append(
                f"repeats: {R} document-level dev/held-out splits (split seeds {self.extras.get('repeat_seeds')}); "
                "every number is the mean over repeats (sd: <name>_std metrics) except tau (median over repeats); "
                "CIs, MDD and sign-flip p from the pooled decisions with documents as clusters (the point is the "
                "mean over repeats, the CI that of the pooled mean: they can differ slightly); "
                "McNemar p not reported (nan)"
            )
        tau = f"tau={fmt(m['dev/tau'])}" if R == 1 else f"tau median={fmt(m['dev/tau_median'])}"
        lines += [
            f"dev: n={self._count(m['n/dev'])}  {tau}  {oof}  {nested}",
            f"held-out: n={self._count(m['n/heldout'])}  rescues={self._count(m['heldout/rescues'])}"
            f"  harms={self._count(m['heldout/harms'])}",
            head,
            "",
            diffs,
            self._verdict("base"),
            self._verdict("extra"),
            self._heldout_resolution(),
            f"frozen: {self.frozen.get('shown_as', self.frozen['dir'])}  state sha256={self.frozen['sha256'][STATE_FILE][:16]}"
            + ("" if R == 1 else f"  (repeat 0 of {R})"),
        ]
        return "\n".join(lines)


def _frozen_info(frozen: FrozenRouter) -> dict[str, Any]:
    return {
        "dir": str(frozen.dir),
        "files": {name: str(frozen.dir / name) for name in (STATE_FILE, ROUTER_FILE, MANIFEST_FILE)},
        "sha256": dict(frozen.digests),
    }


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
    return metrics, decisions, _frozen_info(frozen)


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
        for key, value in _comparison_metrics(
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
    # everything checked before anything is frozen
    if n_boot < MIN_BOOTSTRAP:
        raise ConfigError("protocol.n_boot", f"docs/metrics.md §5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {n_boot}")
    _check_alpha_power(alpha, power)
    if nested_folds != 0 and nested_folds < 2:
        raise ConfigError("protocol.nested_folds", f"must be 0 (off) or >= 2, got {nested_folds}")
    if int(n_perm) < 1:
        raise ConfigError("protocol.n_perm", f"must be >= 1, got {n_perm}")
    if not (alpha < 0.5 and equivalence_margin > 0):
        raise ConfigError("protocol.equivalence_margin" if alpha < 0.5 else "protocol.alpha",
                          f"two one-sided tests need alpha < 0.5 and a margin > 0, got alpha={alpha}, "
                          f"margin={equivalence_margin}")
    seeds = repeat_seeds(seed, repeats)
    R = len(seeds)
    freeze_dir = Path(freeze_dir)
    per_repeat, frames, frozen_infos = [], [], []
    for r, split_seed in enumerate(seeds):
        extra_config: dict[str, Any] = {"dev_frac": float(dev_frac)}
        if R > 1:
            extra_config.update({"repeat": r, "repeats": R})
        metrics_r, decisions_r, frozen_r = _one_split(
            task,
            policy_factory,
            cost=cost,
            seed=split_seed,
            dev_frac=dev_frac,
            n_folds=n_folds,
            n_boot=n_boot,
            freeze_dir=freeze_dir if R == 1 else freeze_dir / f"repeat_{r}",
            nested_folds=nested_folds,
            alpha=alpha,
            power=power,
            n_perm=int(n_perm),
            extra_config=extra_config,
            equivalence_margin=float(equivalence_margin),
        )
        decisions_r["repeat"] = r
        if R > 1:  # each repeat's own development estimate: the policy comparison chooses its reference per repeat
            for name in ("dev/nested_utility", "dev/oof_utility"):
                if name in metrics_r:
                    decisions_r[name] = float(metrics_r[name])
        per_repeat.append(metrics_r)
        frames.append(decisions_r)
        frozen_infos.append(frozen_r)
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
