"""Protocol A (SPEC 5): choose a threshold under a cost on development, freeze, then evaluate
once on held-out documents.

Why the code is split in three functions: ``split_dev_heldout`` separates the documents;
``develop`` receives ONLY the development RoutingTask, picks tau, refits and writes the frozen
router (policy state, tau, config) with SHA-256 digests; ``evaluate_heldout`` receives the
held-out task and the frozen folder, rebuilds the policy from the frozen file with a fresh
``policy_factory()`` + ``set_state()`` after checking the digests, and only then looks at
held-out outcomes. So nothing held-out can reach tau or the fitted model by construction.

Choices where the SPEC is silent (seed 000 agrees):
- The extra arm runs when score >= tau (seed 000: "hybrid runs when predicted delta >= tau").
- Utility ties between candidate taus are compared up to 1e-12 (float sums); the tie goes to
  the candidate with fewer extra calls.
- The oracle is scored with the true delta on development folds and on held-out (upper bound).
- McNemar p-values are reported only for binary outcomes (hits); nan for continuous quality.
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
from harness.protocols.common import PolicyFactory, fit_policy, fmt, policy_label, score_task, text_table
from harness.stats import doc_bootstrap_ci, grouped_kfold, grouped_split, mcnemar_exact
from harness.task import RoutingTask

STATE_FILE = "policy_state.json"
ROUTER_FILE = "router.json"
MANIFEST_FILE = "manifest.json"
UTILITY_TIE_TOL = 1e-12
MIN_BOOTSTRAP = 1000  # SPEC 5: at least 1,000 document-level resamples


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
    """Out-of-fold scores by document-grouped k-fold: a fresh policy per fold."""
    scores = np.empty(task.n)
    for train_idx, test_idx in grouped_kfold(task.groups, n_folds, seed):
        policy = fit_policy(policy_factory(), task.take(train_idx), seed)
        scores[test_idx] = score_task(policy, task.take(test_idx), seed)
    return scores


# --------------------------------------------------------------------------------------------
# Split, develop + freeze, evaluate
# --------------------------------------------------------------------------------------------


def split_dev_heldout(task: RoutingTask, dev_frac: float = 0.8, seed: int = 0) -> tuple[RoutingTask, RoutingTask]:
    """(development, held-out) tasks, split by document."""
    dev_idx, held_idx = grouped_split(task.groups, dev_frac, seed)
    return task.take(dev_idx), task.take(held_idx)


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
    config = {
        "protocol": "threshold",
        "cost": float(cost),
        "seed": int(seed),
        "n_folds": int(n_folds),
        "policy_class": f"{type(policy).__module__}.{type(policy).__qualname__}",
        "policy_name": getattr(policy, "name", "policy"),
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
    policy.set_state(state)
    return policy, _tau_from_json(router["tau"]), config


def evaluate_heldout(
    frozen_dir: Path, heldout_task: RoutingTask, policy_factory: PolicyFactory, *, n_boot: int = 1000
) -> tuple[dict[str, float], pd.DataFrame]:
    """Score held-out with the policy rebuilt from the frozen folder and report SPEC 5's numbers.

    Returns (metrics, per-question decisions). Bootstrap intervals resample documents
    (``n_boot`` >= 1000 per SPEC 5) with the frozen config's seed.
    """
    if n_boot < MIN_BOOTSTRAP:
        raise ConfigError("protocol.n_boot", f"SPEC 5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {n_boot}")
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
    for name, other in (("base", u_base), ("extra", u_extra)):
        point, lo, hi = doc_bootstrap_ci(u_pol - other, t.groups, n_boot=n_boot, seed=seed)
        metrics[f"heldout/diff_vs_{name}/utility"] = point
        metrics[f"heldout/diff_vs_{name}/utility/ci_low"] = lo
        metrics[f"heldout/diff_vs_{name}/utility/ci_high"] = hi
    binary = np.isin(t.base, (0, 1)).all() and np.isin(t.extra, (0, 1)).all()
    for name, other in (("base", t.base), ("extra", t.extra)):
        if binary:
            b, c, p = mcnemar_exact(chosen, other)
        else:
            b, c, p = 0, 0, math.nan
        metrics[f"heldout/mcnemar_vs_{name}/policy_only"] = b
        metrics[f"heldout/mcnemar_vs_{name}/other_only"] = c
        metrics[f"heldout/mcnemar_vs_{name}/p"] = p
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
    """Plain data: metrics (stable names), held-out decisions, frozen paths and digests."""

    metrics: dict[str, float]
    decisions: pd.DataFrame
    frozen: dict[str, Any]
    policy: str = "policy"
    metric: str = "hit@10"
    extras: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        m, k = self.metrics, self.metric
        rows = [
            ["policy", m[f"heldout/{k}"], m["heldout/utility"], m["heldout/extra_calls"], m["heldout/extra_share"]],
            ["always-base", m[f"heldout/base/{k}"], m["heldout/base/utility"], 0, 0.0],
            ["always-extra", m[f"heldout/extra/{k}"], m["heldout/extra/utility"], int(m["n/heldout"]), 1.0],
        ]
        head = text_table(["held-out", k, "utility", "extra calls", "share"], rows)
        diffs = text_table(
            ["utility difference", "point", "95% CI low", "95% CI high", "McNemar p"],
            [
                [
                    f"policy - {name}",
                    m[f"heldout/diff_vs_{name}/utility"],
                    m[f"heldout/diff_vs_{name}/utility/ci_low"],
                    m[f"heldout/diff_vs_{name}/utility/ci_high"],
                    m[f"heldout/mcnemar_vs_{name}/p"],
                ]
                for name in ("base", "extra")
            ],
        )
        return (
            f"Protocol A (frozen threshold) - {self.policy}\n"
            f"dev: n={int(m['n/dev'])}  tau={fmt(m['dev/tau'])}  OOF utility={fmt(m['dev/oof_utility'])}"
            f"  | held-out: n={int(m['n/heldout'])}  rescues={int(m['heldout/rescues'])}"
            f"  harms={int(m['heldout/harms'])}\n{head}\n\n{diffs}\n"
            f"frozen: {self.frozen['dir']}  state sha256={self.frozen['sha256'][STATE_FILE][:16]}"
        )


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
) -> ThresholdResult:
    """Protocol A end to end: split by document, develop + freeze, then evaluate held-out."""
    if n_boot < MIN_BOOTSTRAP:  # checked before anything is frozen
        raise ConfigError("protocol.n_boot", f"SPEC 5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {n_boot}")
    dev_task, held_task = split_dev_heldout(task, dev_frac, seed)
    frozen = develop(
        dev_task,
        policy_factory,
        cost=cost,
        seed=seed,
        n_folds=n_folds,
        freeze_dir=freeze_dir,
        extra_config={"dev_frac": float(dev_frac)},
    )
    del dev_task  # evaluation below works from the frozen folder only
    metrics, decisions = evaluate_heldout(frozen.dir, held_task, policy_factory, n_boot=n_boot)
    metrics.update(
        {
            "dev/tau": frozen.tau,
            "dev/oof_utility": frozen.oof_utility,
            "dev/oof_extra_calls": frozen.oof_extra_calls,
            "n/dev": frozen.n_dev,
            "cost": float(cost),
        }
    )
    frozen_info = {
        "dir": str(frozen.dir),
        "files": {name: str(frozen.dir / name) for name in (STATE_FILE, ROUTER_FILE, MANIFEST_FILE)},
        "sha256": dict(frozen.digests),
    }
    policy = policy_factory()
    return ThresholdResult(metrics, decisions, frozen_info, policy=policy_label(policy), metric=task.metric)
