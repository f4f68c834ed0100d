"""Structured config schema of the Hydra app, registered in Hydra's ConfigStore.

Why: a typo in a key (``cost.cc=1``) or a wrong type (``cost.c=abc``) must fail at composition
time, before any table is built or any run is logged, with a message naming the key. Hydra
checks overrides against these dataclasses. The groups owned by other modules (``dataset``,
``arms``, ``reranker``, ``policy``) are free-form dicts here: their own code validates them.

The top-level schema is stored as ``route_bench_schema`` and is the first entry of the defaults
list of ``conf/config.yaml``; since it types ``cost``, ``budget``, ``protocol`` and ``tracking``
as dataclasses, every YAML file of those groups (and every override) is checked against them.
Value checks a type cannot express (a budget outside (0, 1), an unknown protocol name) are done
by ``harness.config.validation.validate`` before any work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from harness.conf_files import CONF_DIR

PROTOCOL_NAMES = ("threshold", "budget", "gain")
CALIBRATIONS = ("oof", "in_sample")


@dataclass
class ProtocolConfig:
    """Which protocols a job runs (docs/metrics.md §5-7) and their options.

    ``run`` lists protocol names in order (built-ins and plugins, ``harness.protocols.registry``);
    the group files ``threshold``, ``budget``, ``gain`` and ``all`` only set it. ``n_boot`` must
    be >= 1000 (docs/metrics.md §5).
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
    # the fewest questions a held-out or test set may hold (harness/preflight.py): below 6 no
    # outcome can reach p < 0.05, so such a job is refused before it runs; lower it to run anyway
    min_heldout: int = 6
    # power statements: significance level and power of the minimum detectable difference
    alpha: float = 0.05
    power: float = 0.8
    # a utility difference too small to matter: a policy whose (1 - 2 alpha) sign-flip interval
    # against its reference lies inside +-margin is "equivalent" (two one-sided tests,
    # docs/metrics.md §12); 0.01 = one question in a hundred
    equivalence_margin: float = 0.01
    # the sweep's verdicts (docs/metrics.md §9): "as good" needs the router within min(margin,
    # equivalence_fraction x the oracle's headroom over the fixed decision) of it, so the margin
    # is never wider than what any router could gain there and the test can fail
    equivalence_fraction: float = 0.5
    # which calibrated rule the decision table and the verdicts test: "deployable" (calibrated at
    # rho) or "conservative" (calibrated at rho minus the DKW slack: budget-safe)
    verdict_frontier: str = "deployable"
    # settings of plugin protocols: protocol.settings.<name>.<key>, typed by the protocol's Config
    settings: Dict[str, Any] = field(default_factory=dict)


VERDICT_FRONTIERS = ("deployable", "conservative")  # protocol.verdict_frontier
COST_UNITS = ("ms", "tokens")  # cost.unit: what a measured cost is counted in


@dataclass
class CostConfig:
    """``c``: cost per extra-arm call in utility units (docs/metrics.md §5, default 0.02).

    Either ``c`` is given (an abstract penalty; ``unit`` and ``price`` null), or it is derived
    from the extra arm's measured cost: ``unit`` (``ms`` or ``tokens``) names the measured
    column and ``price`` the utility one unit costs, and ``c`` must be null; the job sets it to
    ``price * mean measured cost per question`` (``harness.app.resolve_cost``) before its
    parameters are logged. Milliseconds were measured on the machine that built the outcome
    table (cached in it, pinned by its fingerprint); tokens are the same on every machine.
    A null ``unit`` and ``price`` are left out of the job's plain config (``app.to_plain``), so
    the config hash of a job with an abstract ``c`` is what it was before these keys existed.
    """

    name: str = "default"
    c: Optional[float] = 0.02
    unit: Optional[str] = None
    price: Optional[float] = None


@dataclass
class BudgetConfig:
    """Budget grid and calibration options of protocol B (docs/metrics.md §6)."""

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
    # the calibration-size diagnostic (docs/metrics.md §6): per split, re-calibrate the
    # deployable and conservative thresholds on n_cal questions of the calibration half for each
    # size, e.g. [32, 64, 125, 250]; [] = off
    cal_sizes: List[Any] = field(default_factory=list)


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
    # switches (true | false), typed Any: OmegaConf would turn 2 or "yes" into true silently;
    # ``validate`` refuses anything but a boolean (BOOLEAN_KEYS)
    skip_finished: Any = True  # sweeps skip jobs whose config hash already FINISHED
    log_plots: Any = True
    log_decisions: Any = True
    retries: int = 5  # attempts for a store call that hits "database is locked"


@dataclass
class ExecutorConfig:
    """Where a build's shards and chunks are computed (``harness.executor``): ``local`` (this
    process, the default) or ``ray`` (tasks on the Ray cluster at ``address``: ``auto``, ``local``
    or host:port, each declaring ``num_cpus`` (``auto``: this process's torch threads; a task
    runs that many threads) and ``num_gpus``, retried ``max_retries`` times when a worker dies).
    Not in the config hash nor the sweep id: it does not change a number (harness/executor.py)."""

    name: str = "local"
    address: str = "auto"
    num_cpus: Any = "auto"
    num_gpus: float = 0.0
    max_retries: int = 3


@dataclass
class LimitsConfig:
    """Time limits of a plugin policy's calls, in seconds per call (``harness.plugin_guard``):
    ``fit_s`` bounds each ``fit``, ``score_s`` each ``score``; null (the default): no limit. A
    call past its limit ends the job FAILED with one line naming the plugin, the method and the
    limit. Built-in policies are the harness's own code and are not timed. Left out of the job's
    config while null (``app.to_plain``), and never in the config hash nor the sweep id: a
    limit changes no number."""

    fit_s: Optional[float] = None
    score_s: Optional[float] = None


@dataclass
class PipelineConfig:
    """The RAG pipeline the routing question is about, in its own words (``harness.config.pipeline``):
    ``rerank_depth`` is how many first-stage candidates the reranker sees (it sets
    ``arms.candidates``), ``passages_to_llm`` how many reranked passages the LLM reads (it sets the
    outcome metric's k: ``arms.metric`` = hit@k, all@k on a dataset routed on all@). Null (the
    default): the arms' own settings, as before; left out of the job's config while null
    (``app.to_plain``), so a default job's config hash is what it was before these keys existed."""

    rerank_depth: Optional[int] = None
    passages_to_llm: Optional[int] = None


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
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    experiment: Dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # where the encoder, the reranker and the answer arms' in-process generator run: cpu (the
    # default: the same numbers on every machine) | cuda | mps | auto (cuda, else mps, else cpu).
    # Not cpu: part of every cache key it touches
    device: str = "cpu"
    # sweeps print one line per job; true prints every job's full protocol summaries too (the
    # full text is always in the job's log file and the run's summary.txt). Not in the config hash.
    # true | false (typed Any like the tracking switches: BOOLEAN_KEYS)
    verbose: Any = False


# the schema's switches: only true or false (``harness.config.values._check_booleans``)
BOOLEAN_KEYS = ("verbose", "tracking.skip_finished", "tracking.log_plots", "tracking.log_decisions")


def register_configs() -> None:
    """Register the schemas (idempotent: ConfigStore overwrites same-named entries)."""
    ConfigStore.instance().store(name="route_bench_schema", node=RootConfig)
    from harness.data.registry import register_dataset_configs  # loaders without a YAML as dataset=<name>
    from policies.registry import register_policy_configs  # installed entry points as policy=<name>

    register_policy_configs()
    register_dataset_configs(CONF_DIR)
