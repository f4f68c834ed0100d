"""Protocol A's freeze: ``develop`` chooses tau on development only, refits and writes the frozen
router (policy state, tau, config) with SHA-256 digests; ``load_frozen`` rebuilds the policy from
that folder after checking the digests. The frozen folder is the only channel from development
to held-out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.io import atomic_write_text, canonical_json, digest_of, sha256_file
from harness.protocols.common import PolicyFactory, fit_policy
from harness.protocols.threshold_select import fixed_tau, oof_scores, select_tau
from harness.task import RoutingTask
from policies.base import check_json_state, policy_params

STATE_FILE = "policy_state.json"
ROUTER_FILE = "router.json"
MANIFEST_FILE = "manifest.json"


def _tau_to_json(tau: float) -> float | str:
    if math.isinf(tau):
        return "+inf" if tau > 0 else "-inf"
    return float(tau)


def _tau_from_json(value: float | str) -> float:
    if value in ("+inf", "-inf"):
        return math.inf if value == "+inf" else -math.inf
    return float(value)


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


def frozen_info(frozen: FrozenRouter) -> dict[str, Any]:
    """The frozen folder, its files and their digests, as the protocol's result holds them."""
    return {
        "dir": str(frozen.dir),
        "files": {name: str(frozen.dir / name) for name in (STATE_FILE, ROUTER_FILE, MANIFEST_FILE)},
        "sha256": dict(frozen.digests),
    }
