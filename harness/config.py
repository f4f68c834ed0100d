"""Structured config schema of the Hydra app, registered in Hydra's ConfigStore.

Why: a typo in a key (``cost.cc=1``) or a wrong type (``cost.c=abc``) must fail at composition
time, before any table is built or any run is logged, with a message naming the key. Hydra
checks overrides against these dataclasses. The groups owned by other modules (``dataset``,
``arms``, ``reranker``, ``policy``) are free-form dicts here: their own code validates them.

The top-level schema is stored as ``route_bench_schema`` and is the first entry of the defaults
list of ``conf/config.yaml``; since it types ``cost``, ``budget``, ``protocol`` and ``tracking``
as dataclasses, every YAML file of those groups (and every override) is checked against them.
Value checks a type cannot express (a budget outside (0, 1), an unknown protocol name) are done
by ``validate`` before any work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from harness.protocols.threshold import MIN_BOOTSTRAP

PROTOCOL_NAMES = ("threshold", "budget", "gain")
CALIBRATIONS = ("oof", "in_sample")


@dataclass
class ProtocolConfig:
    """Which protocols a job runs (SPEC sections 5-7) and their options.

    ``run`` lists protocol names in order; the group files ``threshold``, ``budget``, ``gain``
    and ``all`` only set it. ``n_boot`` must be >= 1000 (SPEC 5).
    """

    name: str = "all"
    run: List[str] = field(default_factory=lambda: list(PROTOCOL_NAMES))
    dev_frac: float = 0.8
    n_folds: int = 5
    n_boot: int = 1000
    # protocol A over R document-level dev/held-out splits (1 = one split, seeded by ``seed``)
    repeats: int = 1
    # nested development estimate: outer grouped folds around the tau search (0 = off)
    nested_folds: int = 5
    # protocol C's selective-use threshold: null = chosen per policy (0 for policies whose score
    # estimates the gain, else the cost-0 protocol-A tau on the fit half); a number forces it
    gain_threshold: Optional[float] = None
    # a ratio (gap closed, later PGR) whose denominator rests on fewer discordant questions than
    # this is reported as undefined, with the reason
    min_discordant: int = 10
    # power statements: significance level and power of the minimum detectable difference
    alpha: float = 0.05
    power: float = 0.8


@dataclass
class CostConfig:
    """``c``: cost per extra-arm call in utility units (SPEC section 5, default 0.02)."""

    name: str = "default"
    c: float = 0.02


@dataclass
class BudgetConfig:
    """Budget grid and calibration options of protocol B (SPEC section 6)."""

    name: str = "default"
    grid: List[float] = field(default_factory=lambda: [0.10, 0.25, 0.50, 0.75, 0.90])
    dkw_delta: float = 0.05
    tol: float = 0.02
    n_splits: int = 5
    # where the deployable / conservative thresholds come from: "oof" = document-grouped
    # cross-fitted scores on the calibration half (default), "in_sample" = the policy fitted on
    # the whole calibration half scores that same half
    calibration: str = "oof"
    cal_folds: int = 5


@dataclass
class TrackingConfig:
    """Where and how runs are logged.

    ``uri``: explicit tracking URI; null means $MLFLOW_TRACKING_URI if set, else a SQLite store
    ``<store_dir>/mlflow.db`` with artifacts in ``<store_dir>/artifacts``, relative to the
    directory the command was launched from.
    """

    name: str = "local"
    uri: Optional[str] = None
    store_dir: str = "mlruns"
    experiment: Optional[str] = None  # override of "<dataset>/<base>-vs-<extra>"
    skip_finished: bool = True  # sweeps skip jobs whose config hash already FINISHED
    log_plots: bool = True
    log_decisions: bool = True
    retries: int = 5  # attempts for a store call that hits "database is locked"


@dataclass
class RootConfig:
    """The whole job config. ``seed`` seeds splits, folds, bootstrap and random policies;
    ``verbose`` only changes what a sweep prints."""

    dataset: Dict[str, Any] = field(default_factory=dict)
    arms: Dict[str, Any] = field(default_factory=dict)
    reranker: Dict[str, Any] = field(default_factory=dict)
    policy: Dict[str, Any] = field(default_factory=dict)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    cost: CostConfig = field(default_factory=CostConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    experiment: Dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # sweeps print one line per job; true prints every job's full protocol summaries too (the
    # full text is always in the job's log file and the run's summary.txt). Not in the config hash
    verbose: bool = False


def register_configs() -> None:
    """Register the schemas (idempotent: ConfigStore overwrites same-named entries)."""
    ConfigStore.instance().store(name="route_bench_schema", node=RootConfig)


def validate(cfg: Any) -> None:
    """Range and name checks of the harness-owned groups; raises ConfigError naming the key."""
    from harness.errors import ConfigError

    run = list(cfg.protocol.run)
    for i, name in enumerate(run):
        if name not in PROTOCOL_NAMES:
            raise ConfigError(f"protocol.run[{i}]", f"unknown protocol {name!r}; choose from {PROTOCOL_NAMES}")
    if not run:
        raise ConfigError("protocol.run", "is empty; name at least one protocol")
    if not 0.0 < cfg.protocol.dev_frac < 1.0:
        raise ConfigError("protocol.dev_frac", f"must be in (0, 1), got {cfg.protocol.dev_frac}")
    if cfg.protocol.n_folds < 2:
        raise ConfigError("protocol.n_folds", f"must be >= 2, got {cfg.protocol.n_folds}")
    if cfg.protocol.n_boot < MIN_BOOTSTRAP:
        raise ConfigError("protocol.n_boot", f"SPEC 5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {cfg.protocol.n_boot}")
    if cfg.protocol.repeats < 1:
        raise ConfigError("protocol.repeats", f"must be >= 1, got {cfg.protocol.repeats}")
    if cfg.protocol.nested_folds != 0 and cfg.protocol.nested_folds < 2:
        raise ConfigError("protocol.nested_folds", f"must be 0 (off) or >= 2, got {cfg.protocol.nested_folds}")
    if cfg.protocol.gain_threshold is not None and not math.isfinite(cfg.protocol.gain_threshold):
        raise ConfigError("protocol.gain_threshold", f"must be a finite number or null, got {cfg.protocol.gain_threshold}")
    if cfg.protocol.min_discordant < 1:
        raise ConfigError("protocol.min_discordant", f"must be >= 1, got {cfg.protocol.min_discordant}")
    for key in ("alpha", "power"):
        value = getattr(cfg.protocol, key)
        if not 0.0 < value < 1.0:  # NaN fails too
            raise ConfigError(f"protocol.{key}", f"must be in (0, 1), got {value}")
    if not (cfg.cost.c >= 0 and math.isfinite(cfg.cost.c)):
        raise ConfigError("cost.c", f"must be a finite number >= 0, got {cfg.cost.c}")
    if cfg.budget.calibration not in CALIBRATIONS:
        raise ConfigError("budget.calibration", f"unknown {cfg.budget.calibration!r}; choose from {CALIBRATIONS}")
    if cfg.budget.cal_folds < 2:
        raise ConfigError("budget.cal_folds", f"must be >= 2, got {cfg.budget.cal_folds}")
    for i, rho in enumerate(cfg.budget.grid):
        if not 0.0 < rho < 1.0:  # NaN fails too
            raise ConfigError(f"budget.grid[{i}]", f"budget must be in (0, 1), got {rho}")
    if not 0.0 < cfg.budget.dkw_delta < 1.0:
        raise ConfigError("budget.dkw_delta", f"must be in (0, 1), got {cfg.budget.dkw_delta}")
    if not (cfg.budget.tol >= 0 and math.isfinite(cfg.budget.tol)):
        raise ConfigError("budget.tol", f"must be a finite number >= 0, got {cfg.budget.tol}")
    if cfg.budget.n_splits < 1:
        raise ConfigError("budget.n_splits", f"must be >= 1, got {cfg.budget.n_splits}")
    if "name" not in cfg.dataset:
        raise ConfigError("dataset.name", "missing (each dataset config names itself)")
    if "name" not in cfg.policy:
        raise ConfigError("policy.name", "missing (each policy config names itself)")


register_configs()

__all__ = [
    "PROTOCOL_NAMES",
    "ProtocolConfig",
    "CostConfig",
    "BudgetConfig",
    "TrackingConfig",
    "RootConfig",
    "register_configs",
    "validate",
    "MISSING",
]
