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
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from harness.stats import MIN_BOOTSTRAP

from harness.conf_files import CONF_DIR, CONF_SOURCE, initialize_conf  # noqa: F401 - the app's config

PROTOCOL_NAMES = ("threshold", "budget", "gain")

# Upper bounds of every count a user sets: a typo'd zero too many ends in one line naming the
# key and the bound, not in minutes of work or an out-of-memory kill. The bootstrap's draw
# matrices are n_boot x documents (8 bytes each, a few alive at once): 20,000 draws over 7,405
# HotpotQA questions stay near a gigabyte each.
MAX_SEED = 2**32 - 1  # numpy's seed range
MAX_BOOTSTRAP = 20_000
MAX_FOLDS = 100  # protocol.n_folds, protocol.nested_folds, budget.cal_folds
MAX_REPEATS = 100  # protocol.repeats, budget.n_splits: each one a full pass of the protocol
MAX_GRID = 100  # budget.grid entries
MAX_MIN_DISCORDANT = 1_000_000
MAX_RETRIES = 100
MAX_SWEEP_JOBS = 10_000  # jobs of one sweep (each validated before any run starts)
MAX_WORKERS = 256  # hydra.launcher.n_jobs: parallel worker processes of a sweep
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
    skip_finished: bool = True  # sweeps skip jobs whose config hash already FINISHED
    log_plots: bool = True
    log_decisions: bool = True
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
    experiment: Dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    # where the encoder, the reranker and the answer arms' in-process generator run: cpu (the
    # default: the same numbers on every machine) | cuda | mps | auto (cuda, else mps, else cpu).
    # Not cpu: part of every cache key it touches
    device: str = "cpu"
    # sweeps print one line per job; true prints every job's full protocol summaries too (the
    # full text is always in the job's log file and the run's summary.txt). Not in the config hash
    verbose: bool = False


def register_configs() -> None:
    """Register the schemas (idempotent: ConfigStore overwrites same-named entries)."""
    ConfigStore.instance().store(name="route_bench_schema", node=RootConfig)
    from harness.data.registry import register_dataset_configs  # loaders without a YAML as dataset=<name>
    from policies.registry import register_policy_configs  # installed entry points as policy=<name>

    register_policy_configs()
    register_dataset_configs(CONF_DIR)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _in_range(key: str, value: Any, low: float | None = None, high: float | None = None, *,
              low_open: bool = False, high_open: bool = False, integer: bool = False) -> None:
    """ConfigError naming ``key`` unless ``value`` is a finite number (an integer if asked) in the
    interval given by ``low``/``high`` (``*_open``: that end excluded). NaN and inf always fail."""
    from harness.errors import ConfigError

    def fmt(v: float) -> str:
        return str(int(v)) if integer and float(v).is_integer() else f"{v:g}"

    lo = "" if low is None else ("(" if low_open else "[") + fmt(low)
    hi = "" if high is None else fmt(high) + (")" if high_open else "]")
    if low is not None and high is not None:
        want = f"in {lo}, {hi}"
    elif low is not None:
        want = f"{'>' if low_open else '>='} {fmt(low)}"
    else:
        want = f"{'<' if high_open else '<='} {fmt(high)}"
    what = "an integer" if integer else "a finite number"
    ok = _is_number(value) and math.isfinite(value) and (not integer or float(value).is_integer())
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        raise ConfigError(key, f"must be {what} {want}, got {value!r}")


def _check_missing(cfg: Any, prefix: str = "") -> None:
    """A ``???`` value left anywhere (e.g. ``policy=plugin`` without ``policy.plugin``)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    from harness.errors import ConfigError

    if isinstance(cfg, DictConfig):
        items = [(str(k), k) for k in cfg.keys()]
    elif isinstance(cfg, ListConfig):
        items = [(f"[{i}]", i) for i in range(len(cfg))]
    else:
        return
    for name, k in items:
        if prefix == "" and name == "hydra":
            continue
        key = f"{prefix}{name}" if name.startswith("[") or not prefix else f"{prefix}.{name}"
        if OmegaConf.is_missing(cfg, k):
            raise ConfigError(key, f"is required but not set (???); set {key}=...")
        node = cfg._get_node(k)
        if isinstance(node, (DictConfig, ListConfig)):
            _check_missing(node, key)


def metric_names(k: int) -> list[str]:
    """The per-arm outcome metrics an outcome table holds for top ``k`` (``harness.retrieval.arms``
    writes them: hit@1..k, recall@k, mrr@k)."""
    return [f"hit@{j}" for j in range(1, k + 1)] + [f"recall@{k}", f"mrr@{k}"]


def gold_metric_names(k: int) -> list[str]:
    """The metrics the built-in ``gold_at_k`` block derives from an outcome table's top ``k`` and
    the dataset's gold units (``harness.metric_blocks``; added to a job when ``arms.metric`` names
    one): all@1..k (every gold unit in the top j), recall@1..k-1 (recall@k is a table column)."""
    return [f"all@{j}" for j in range(1, k + 1)] + [f"recall@{j}" for j in range(1, k)]


# The outcome metric a retrieval pair routes on unless arms.metric is set, by dataset loader:
# conf/arms/keep_*.yaml say ``metric: ${route_bench.retrieval_metric:${oc.select:dataset.loader,null}}``,
# which reads the loader class's ``retrieval_metric`` (harness.data.base). HotpotQA distractor
# searches each question's own 10 paragraphs, so every arm's Hit@10 is 1 and nothing can be
# routed on it; "both supporting paragraphs in the top 2" (all@2) tells the arms apart
# (docs/arms.md, "Outcome metrics per dataset"). Every other dataset keeps hit@10, so their
# composed configs (and config hashes) are what they were with the literal "hit@10".
# (The value cannot live in conf/dataset/*.yaml: dataset configs accept only loader options.)
DEFAULT_RETRIEVAL_METRIC = "hit@10"
METRIC_RESOLVER = "route_bench.retrieval_metric"


def default_retrieval_metric(loader: Any = None) -> str:
    """The retrieval pair's default ``arms.metric`` for a dataset loader (see above)."""
    from harness.data.registry import retrieval_metric

    return retrieval_metric(loader) or DEFAULT_RETRIEVAL_METRIC


def register_metric_resolver() -> None:
    """Register ``${route_bench.retrieval_metric:<loader>}`` with OmegaConf (idempotent); done on
    import, as composing conf/ needs this module anyway (it registers the schema)."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver(METRIC_RESOLVER):
        OmegaConf.register_new_resolver(METRIC_RESOLVER, default_retrieval_metric)


register_metric_resolver()

ENV_RESOLVER = "route_bench.forwarded_env"


def register_env_resolver() -> None:
    """Register ``${route_bench.forwarded_env:}`` (the driver's cache folder and tracking URI,
    for the jobs a Ray cluster runs; see harness.executor.forwarded_env); idempotent."""
    from omegaconf import OmegaConf

    from harness.executor import forwarded_env

    if not OmegaConf.has_resolver(ENV_RESOLVER):
        OmegaConf.register_new_resolver(ENV_RESOLVER, forwarded_env)


register_env_resolver()


SYNTHETIC_K = 10  # the synthetic table's metrics are @10 (harness.synthetic)


def _check_arms(arms: Any, synthetic: bool) -> None:
    from harness.arm_blocks import block_arms
    from harness.errors import ConfigError, did_you_mean
    from harness.retrieval.arms import ARMS

    from harness.retrieval.settings import check_retrieval_settings

    # every table kind: the synthetic one would ignore arms.k=0 yet log it; an answer pair's base
    # table is built with these settings
    check_retrieval_settings(arms, synthetic=synthetic, synthetic_k=SYNTHETIC_K)
    base, extra = arms.get("base", "keep"), arms.get("extra", "hybrid")
    plugged = block_arms(arms.get("blocks") or [])  # arms of listed and installed blocks
    known = [*ARMS, *sorted(a for a in plugged if a not in ARMS)]
    for key, arm in (("arms.base", base), ("arms.extra", extra)):
        if arm not in known:
            raise ConfigError(key, f"unknown arm {arm!r}{did_you_mean(arm, known)}; the outcome table has {', '.join(ARMS)}"
                                   + (f", arm blocks add {', '.join(sorted(plugged))}" if plugged else ""))
    if base == extra:
        raise ConfigError("arms.extra", f"must differ from arms.base (both are {base!r}): the task compares two arms")
    if synthetic and (arms.get("blocks") or base not in ARMS or extra not in ARMS):
        from harness.arm_blocks import blocks_for
        from harness.generation.arms import AnswerArm

        for block in blocks_for(arms, list(ARMS)):  # found now, not after the store and the table are opened
            if isinstance(block, AnswerArm):
                raise ConfigError("dataset", f"arm block {block.name!r} generates answers from the questions' text; "
                                             "the synthetic table has none (use a real dataset, e.g. dataset=qasper_yesno)")
    if base not in ARMS or extra not in ARMS:
        from harness.arm_blocks import blocks_for

        blocks_for(arms, list(ARMS))  # the blocks a job would add can be made (parameters, identity)
        return  # a block's arm: its block names its outcome columns; the task checks the metric
    k = arms.get("k", 10)
    if not synthetic:
        _in_range("arms.k", k, 1, integer=True)
    metric = arms.get("metric", "hit@10")
    n = SYNTHETIC_K if synthetic else int(k)
    known = metric_names(n) + ([] if synthetic else gold_metric_names(n))
    if metric not in known:
        if synthetic:
            has = (f"the synthetic table has hit@1..hit@{n}, recall@{n}, mrr@{n} (all@k and recall@k below {n} need "
                   "a real dataset's rankings and gold units)")
        else:
            has = (f"an outcome table with arms.k={k} has hit@1..hit@{n}, recall@{n}, mrr@{n}, and all@1..all@{n}, "
                   f"recall@1..recall@{n} from its rankings and the dataset's gold units")
        raise ConfigError("arms.metric", f"unknown metric {metric!r}{did_you_mean(metric, known)}; {has}")


def _check_cost(cost: Any) -> None:
    """``cost.c`` given (``unit``/``price`` null), or derived (``unit`` in COST_UNITS, ``price`` a
    finite number >= 0, ``c`` null): one ConfigError naming the key otherwise."""
    from harness.errors import ConfigError, did_you_mean

    c, unit, price = cost.get("c"), cost.get("unit"), cost.get("price")
    if unit is None:
        if c is None:
            raise ConfigError("cost.c", "is null but cost.unit is null too; give cost.c=<number >= 0>, or derive it "
                                        "from a measured cost with cost.unit (ms | tokens) and cost.price")
        _in_range("cost.c", c, 0)
        if price is not None:
            raise ConfigError("cost.price", f"is set ({price!r}) but cost.unit is null; a price needs a unit "
                                            f"(cost.unit=ms | tokens, cost.c=null), or drop it (cost.price=null)")
        return
    if unit not in COST_UNITS:
        raise ConfigError("cost.unit", f"unknown unit {unit!r}{did_you_mean(unit, COST_UNITS)}; choose from "
                                       f"{', '.join(COST_UNITS)}, or null for an abstract cost.c")
    if c is not None:
        raise ConfigError("cost.c", f"is {c!r} but cost.unit={unit} derives it (cost.price x the extra arm's measured "
                                    f"{unit} per question); set cost.c=null (or use cost=measured_{unit}), or "
                                    "cost.unit=null to keep an abstract c")
    if price is None:
        raise ConfigError("cost.price", f"is required with cost.unit={unit}: the utility one "
                                        f"{'token' if unit == 'tokens' else unit} of the extra arm costs "
                                        f"(e.g. cost=measured_{unit})")
    _in_range("cost.price", price, 0)


def _check_cost_source(cost: Any, arms: Any, synthetic: bool) -> None:
    """A measured cost the job's table cannot have: tokens of a retrieval pair (no generator
    runs), anything of the synthetic table (no cost columns). The table itself is checked when
    the cost is derived (``harness.app.resolve_cost``)."""
    from harness.errors import ConfigError
    from harness.retrieval.arms import ARMS

    unit = cost.get("unit")
    if unit is None:
        return
    base, extra = arms.get("base", "keep"), arms.get("extra", "hybrid")
    if unit == "tokens" and base in ARMS and extra in ARMS:
        raise ConfigError("cost.unit", f"tokens, but {base}-vs-{extra} is a retrieval pair: no generator runs, so "
                                       f"its table has no {extra}.cost.tokens (it has {extra}.cost.total_ms, "
                                       f"{extra}.cost.rerank_pairs, {extra}.marginal.total_ms); use cost.unit=ms "
                                       "or an answer pair")
    if synthetic:
        raise ConfigError("cost.unit", f"{unit}, but the synthetic table has no measured costs (no cost columns); "
                                       "give an abstract cost.c (cost=default) or use a real dataset")


# the URI schemes MLflow opens a tracking store for (mlflow.tracking._tracking_service.utils),
# plus those of installed tracking-store plugins (entry points "mlflow.tracking_store")
TRACKING_SCHEMES = ("", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks",
                    "databricks-uc", "uc")


def tracking_uri_problem(uri: str) -> str | None:
    """Why MLflow cannot open ``uri`` as a tracking store (an unknown scheme), else None; checked
    before any work so ``garbage://x`` is named, not MLflow's model-registry message."""
    from importlib.metadata import entry_points
    from urllib.parse import urlparse

    from harness.errors import did_you_mean

    text = str(uri).strip()
    scheme = urlparse(text).scheme.lower() if "://" in text or text.startswith("file:") else ""
    base = scheme.split("+", 1)[0]  # postgresql+psycopg2
    if base in TRACKING_SCHEMES:
        return _store_target_problem(text, base)
    try:
        plugins = {ep.name for ep in entry_points(group="mlflow.tracking_store")}
    except Exception:  # noqa: BLE001 - no plugins
        plugins = set()
    if scheme in plugins or base in plugins:
        return None
    known = [s for s in TRACKING_SCHEMES if s] + sorted(plugins)
    return (f"unsupported scheme {scheme + '://'!r} in {text!r}{did_you_mean(base, known)}; MLflow stores "
            f"are {', '.join(s + '://' for s in known)} or a plain folder path")


def _not_regular(path: "Path") -> str | None:
    """What ``path`` is when it exists and is no regular file (checked with ``stat``: SQLite
    opening a FIFO blocks forever), else None."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


SQL_SCHEMES = ("postgresql", "mysql", "mssql")


def _cannot_create(path: "Path", what: str) -> str | None:
    """Why ``path`` (not there yet) cannot be created, found by creating and removing a probe file
    in its nearest existing folder (permission bits say nothing for root or /proc), else None;
    MLflow would otherwise retry its connection for minutes and end in SQLAlchemy noise."""
    import os
    import tempfile

    parent = next((p for p in path.absolute().parents if os.path.lexists(p)), None)
    if parent is None or not parent.is_dir():
        return f"{what} {path} cannot be made: {parent} is not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".route-bench-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{what} {path} cannot be made: its folder {parent} is not writable ({exc.strerror or exc})"
    return None


def _store_target_problem(text: str, base: str) -> str | None:
    """Why the store a known scheme names cannot be opened, found before any work: a SQLite URI
    naming no file or something that is no regular file, a file store that is no folder, a SQL
    database whose driver is not installed."""
    from pathlib import Path

    if base == "sqlite":
        raw = text.split("://", 1)[1].split("?", 1)[0] if "://" in text else ""
        path = raw[1:] if raw.startswith("/") else raw  # sqlite:///rel.db, sqlite:////abs.db
        if not path or path == ":memory:":
            return (f"{text!r} names no database file (an in-memory store keeps no run); give "
                    "sqlite:///<path>/mlflow.db")
        kind = _not_regular(Path(path))
        if kind:
            return f"the SQLite store {path} is {kind}, expected an SQLite database file"
        return None if Path(path).exists() else _cannot_create(Path(path), "the SQLite store")
    if base in ("", "file"):
        path = Path(text[len("file://"):] if text.startswith("file://") else text.removeprefix("file:"))
        kind = _not_regular(path)
        if path.exists() and kind != "a folder":
            return f"the file store {path} is {kind or 'a file'}, expected a folder"
        import os

        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("true", "1"):
            return (f"{text!r} is a folder (file) store, which this MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true; "
                    "give sqlite:///<path>/mlflow.db")
        return None
    if base in ("http", "https"):
        from urllib.parse import urlparse

        try:
            parsed = urlparse(text)
            parsed.port  # noqa: B018 - raises on a port outside 0..65535
        except ValueError as exc:
            return f"{text!r} is no server URL ({exc})"
        if not parsed.hostname:
            return f"{text!r} names no host (expected http://HOST:PORT)"
        return None
    if base in SQL_SCHEMES:
        try:
            from sqlalchemy.engine import make_url

            dialect = make_url(text).get_dialect()
            (getattr(dialect, "import_dbapi", None) or dialect.dbapi)()
        except ImportError as exc:
            return f"the database driver for {base}:// is not installed ({exc}); install it or use sqlite:///"
        except Exception as exc:  # noqa: BLE001 - a URI SQLAlchemy cannot parse
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return f"cannot use {text!r}: {first}"
    return None


MAX_CONF_FILES = 10_000  # YAML files one --config-dir may hold (each is stat-ed before Hydra reads any)


def check_config_dir(folder: str, option: str = "--config-dir") -> None:
    """A ``--config-dir`` (``-cd``) Hydra would search: a folder whose every YAML file is a regular
    file under the size cap. Checked before Hydra opens any: reading a FIFO there blocks forever,
    /dev/zero never ends. A UsageError (or DataError of the file) names the option and the file."""
    import os

    from harness.data.validate import check_regular
    from harness.errors import DataError, UsageError

    from pathlib import Path

    path = Path(folder).expanduser()
    if not path.exists():
        raise UsageError(f"{option} {folder!r}: not found (expected a folder of YAML configs)")
    if not path.is_dir():
        raise UsageError(f"{option} {folder!r}: not a folder (expected a folder of YAML configs)")
    seen = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            if not name.endswith((".yaml", ".yml")):
                continue
            seen += 1
            if seen > MAX_CONF_FILES:
                raise UsageError(f"{option} {folder!r}: holds more than {MAX_CONF_FILES} YAML files")
            file = Path(root) / name
            try:
                check_regular(file, "YAML config file")
            except DataError as exc:
                problem = exc.problem.rsplit(": ", 1)[0] if exc.problem.endswith(str(file)) else exc.problem
                raise UsageError(f"{option} {folder!r}: {file.relative_to(path)}: {problem}") from None


def check_store_dir(tracking: Any) -> None:
    """``tracking.store_dir`` (used when no URI is given): a folder, or a path it can be made at;
    the ``mlflow.db`` inside a regular file. Relative to the launch folder (the current one)."""
    import os
    from pathlib import Path

    from harness.errors import ConfigError

    if tracking.uri is not None or os.environ.get("MLFLOW_TRACKING_URI"):
        return
    folder = Path(str(tracking.store_dir)).expanduser()
    kind = _not_regular(folder)
    if folder.exists() and kind != "a folder":
        raise ConfigError("tracking.store_dir", f"{folder} is {kind or 'a file'}, expected a folder for the MLflow "
                                                "store (or a path where one can be made)")
    parent = next((p for p in [folder, *folder.parents] if os.path.lexists(p)), None)
    if parent is not None and not parent.is_dir():
        raise ConfigError("tracking.store_dir", f"{parent} is not a folder, so {folder} cannot be made")
    kind = _not_regular(folder / "mlflow.db")
    if kind:
        raise ConfigError("tracking.store_dir", f"{folder / 'mlflow.db'} is {kind}, expected an SQLite database file")
    if not (folder / "mlflow.db").exists():
        problem = _cannot_create(folder / "mlflow.db", "the MLflow store")
        if problem:
            raise ConfigError("tracking.store_dir", problem)


def validate(cfg: Any) -> None:
    """Every range and name check of a composed job config, before any work; raises ConfigError
    naming the key (with "did you mean" hints for names). The one place these checks live: the
    single-run app, ``table build``, a sweep's start and each sweep job call it."""
    from dataclasses import fields

    from harness.errors import ConfigError, did_you_mean

    known_top = [f.name for f in fields(RootConfig)]
    for key in cfg.keys():
        if key != "hydra" and key not in known_top:
            raise ConfigError(str(key), f"unknown top-level key{did_you_mean(key, known_top)}; known: {', '.join(known_top)}")
    _check_missing(cfg)
    _in_range("seed", cfg.seed, 0, MAX_SEED, integer=True)
    from harness.retrieval.precision import resolve_device

    resolve_device(cfg.device, "device")  # a device this machine lacks: one line, before any work
    from omegaconf import OmegaConf

    from harness.executor import settings_of as executor_settings

    executor_settings(OmegaConf.to_container(cfg.executor, resolve=True) if "executor" in cfg else None)
    p, b = cfg.protocol, cfg.budget
    run = list(p.run)
    from harness.protocols.registry import make_protocol, settings_of

    settings = dict(p.settings or {})
    for i, name in enumerate(run):  # built-ins and installed plugins (did-you-mean on a typo)
        protocol = make_protocol(str(name), f"protocol.run[{i}]")
        settings_of(protocol, settings.get(name))  # its typed settings, checked under their keys
        protocol.check(cfg)  # what else it needs of the job (e.g. an answer pair)
    if len(set(run)) != len(run):
        raise ConfigError("protocol.run", f"names a protocol twice: {run}")
    for name in settings:
        if name not in run:
            raise ConfigError(f"protocol.settings.{name}", f"settings of a protocol that protocol.run does not list ({run})")
    if not run:
        raise ConfigError("protocol.run", "is empty; name at least one protocol")
    _in_range("protocol.dev_frac", p.dev_frac, 0, 1, low_open=True, high_open=True)
    _in_range("protocol.n_folds", p.n_folds, 2, MAX_FOLDS, integer=True)
    if not (_is_number(p.n_boot) and p.n_boot >= MIN_BOOTSTRAP):
        raise ConfigError("protocol.n_boot", f"docs/metrics.md §5 asks for at least {MIN_BOOTSTRAP} bootstrap resamples, got {p.n_boot}")
    _in_range("protocol.n_boot", p.n_boot, MIN_BOOTSTRAP, MAX_BOOTSTRAP, integer=True)
    _in_range("protocol.repeats", p.repeats, 1, MAX_REPEATS, integer=True)
    if p.nested_folds != 0:
        _in_range("protocol.nested_folds", p.nested_folds, 2, MAX_FOLDS, integer=True)
    if p.gain_threshold is not None and not math.isfinite(p.gain_threshold):
        raise ConfigError("protocol.gain_threshold", f"must be a finite number or null, got {p.gain_threshold}")
    _in_range("protocol.min_discordant", p.min_discordant, 1, MAX_MIN_DISCORDANT, integer=True)
    _in_range("protocol.min_heldout", p.min_heldout, 1, MAX_MIN_DISCORDANT, integer=True)
    for key in ("alpha", "power"):
        _in_range(f"protocol.{key}", getattr(p, key), 0, 1, low_open=True, high_open=True)
    _in_range("protocol.alpha", p.alpha, 0, 0.5, low_open=True, high_open=True)  # two one-sided tests at alpha
    _in_range("protocol.equivalence_margin", p.equivalence_margin, 0, 1, low_open=True)
    _in_range("protocol.equivalence_fraction", p.equivalence_fraction, 0, 1, low_open=True)
    if p.verdict_frontier not in VERDICT_FRONTIERS:
        raise ConfigError("protocol.verdict_frontier", f"unknown {p.verdict_frontier!r}"
                          f"{did_you_mean(p.verdict_frontier, VERDICT_FRONTIERS)}; choose from {VERDICT_FRONTIERS}")
    _check_cost(cfg.cost)
    if b.calibration not in CALIBRATIONS:
        raise ConfigError("budget.calibration", f"unknown {b.calibration!r}{did_you_mean(b.calibration, CALIBRATIONS)}; choose from {CALIBRATIONS}")
    _in_range("budget.cal_folds", b.cal_folds, 2, MAX_FOLDS, integer=True)
    grid = list(b.grid)
    if not grid:
        raise ConfigError("budget.grid", "is empty; give at least one budget in (0, 1], e.g. budget.grid=[0.25]")
    if len(grid) > MAX_GRID:
        raise ConfigError("budget.grid", f"has {len(grid)} budgets; at most {MAX_GRID}")
    for i, rho in enumerate(grid):
        _in_range(f"budget.grid[{i}]", rho, 0, 1, low_open=True)
        if rho in grid[:i]:
            raise ConfigError(f"budget.grid[{i}]", f"budget {rho} appears twice")
    _in_range("budget.dkw_delta", b.dkw_delta, 0, 1, low_open=True, high_open=True)
    _in_range("budget.tol", b.tol, 0, 1, high_open=True)  # a share of the questions, like the budgets
    _in_range("budget.n_splits", b.n_splits, 1, MAX_REPEATS, integer=True)
    from harness.protocols.calibration_size import check_cal_sizes

    check_cal_sizes(b.cal_sizes)
    _in_range("tracking.retries", cfg.tracking.retries, 1, MAX_RETRIES, integer=True)
    if not str(cfg.tracking.store_dir).strip():
        raise ConfigError("tracking.store_dir", "is empty; name a folder (default: mlruns)")
    if cfg.tracking.experiment is not None and not str(cfg.tracking.experiment).strip():
        raise ConfigError("tracking.experiment", "is empty; name the MLflow experiment, or null for "
                                                 "<dataset>/<base>-vs-<extra>")
    if cfg.tracking.uri is not None and not str(cfg.tracking.uri).strip():
        raise ConfigError("tracking.uri", "is empty; give a tracking URI or null")
    if cfg.tracking.uri is not None and tracking_uri_problem(str(cfg.tracking.uri)):
        raise ConfigError("tracking.uri", str(tracking_uri_problem(str(cfg.tracking.uri))))
    check_store_dir(cfg.tracking)
    if "name" not in cfg.dataset:
        raise ConfigError("dataset.name", "missing (each dataset config names itself)")
    from harness.data import check_dataset_config

    dataset = check_dataset_config(cfg.dataset)
    if dataset.get("loader") == "synthetic":  # its documents are known before the table is built
        from harness.stats import check_bootstrap_size

        check_bootstrap_size(p.n_boot, int(dataset.get("n_docs") or 60), "dataset.n_docs of the synthetic table")
    _check_arms(cfg.arms, synthetic=dataset.get("loader") == "synthetic")
    from harness.retrieval.settings import check_reranker, refuse_reranker_on_synthetic

    if dataset.get("loader") != "synthetic":
        check_reranker(cfg.reranker)
    else:  # the synthetic table reranks nothing: a reranker setting would be ignored yet logged
        refuse_reranker_on_synthetic(cfg.reranker)
    _check_cost_source(cfg.cost, cfg.arms, synthetic=dataset.get("loader") == "synthetic")
    if "name" not in cfg.policy:
        raise ConfigError("policy.name", "missing (each policy config names itself)")
    from policies.registry import make_policy

    make_policy(cfg.policy)  # a bad _target_, plugin or parameter is named before the store is opened


register_configs()

__all__ = [
    "PROTOCOL_NAMES",
    "ProtocolConfig",
    "CostConfig",
    "COST_UNITS",
    "BudgetConfig",
    "TrackingConfig",
    "RootConfig",
    "register_configs",
    "validate",
    "metric_names",
    "MISSING",
]


# ---- configs composed outside the Hydra app (table build) -------------------------------------
def compose_config(overrides: Sequence[str], return_hydra_config: bool = False):
    from hydra import compose

    with initialize_conf():
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra_config)


# ---- a Hydra / OmegaConf error as the bad input it is -------------------------------------------
def _hint_keys(overrides: Sequence[str], full_key: str) -> list[str]:
    """The keys next to ``full_key`` in the config composed without the override that named it."""
    from omegaconf import DictConfig, OmegaConf

    parent = full_key.rpartition(".")[0]
    rest = [o for o in overrides if o.lstrip("+~").partition("=")[0] != full_key]
    try:
        cfg = compose_config(rest)
        node = OmegaConf.select(cfg, parent) if parent else cfg
        return [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    except Exception:  # noqa: BLE001 - only a hint
        return []


def _group_options(group: str, options: Sequence[str] | None) -> list[str]:
    found = {p.stem for p in (CONF_DIR / group).glob("*.yaml")}
    return sorted(found | set(options or ()))


def as_bad_input(exc: BaseException, overrides: Sequence[str] = ()) -> Exception | None:
    """The HarnessError a bad input becomes (naming the key, file or option), else None."""
    from hydra.errors import HydraException, MissingConfigException, OverrideParseException
    from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

    from harness.errors import ConfigError, HarnessError, StoreError, UsageError, did_you_mean, os_error_message

    if isinstance(exc, HarnessError):
        return exc
    if isinstance(exc, MissingConfigException):
        missing = str(exc.missing_cfg_file or "")
        group, _, option = missing.rpartition("/")
        if group:
            options = _group_options(group, exc.options)
            listed = ", ".join(options) if len(options) <= 12 else f"{len(options)} options in conf/{group}/"
            return ConfigError(group, f"unknown option {option!r}{did_you_mean(option, options)}; choose from {listed}")
        return ConfigError("config", (str(exc).splitlines() or ["config not found"])[0])
    if isinstance(exc, OverrideParseException):
        first = (str(exc).splitlines() or [""])[0]
        return UsageError(f"cannot parse override {exc.override!r}: {first} (expected key=value; see hydra.cc override grammar)")
    cause = exc.__cause__ if isinstance(exc, HydraException) else exc
    if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
        key = str(cause.full_key)
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        if isinstance(cause, MissingMandatoryValue):
            return ConfigError(key, f"is required but not set (???); set {key}=...")
        if " not in " in first or "is not in struct" in first:
            name = key.rpartition(".")[2]
            known = _hint_keys(overrides, key)
            listed = f"; known keys here: {', '.join(known)}" if known else ""
            return ConfigError(key, f"unknown key{did_you_mean(name, known)}{listed}")
        return ConfigError(key, first)
    if isinstance(exc, (HydraException, OmegaConfBaseException)):
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return UsageError(first)
    if isinstance(exc, OSError):
        return StoreError(os_error_message(exc))
    readonly = _readonly_store(exc)
    if readonly is not None:
        return readonly
    return None


def _readonly_store(exc: BaseException) -> Exception | None:
    """SQLite's "attempt to write a readonly database" anywhere in the cause chain (behind
    SQLAlchemy's autoflush text): the store is read-only, said in one line."""
    from harness.errors import StoreError

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if "readonly database" in str(exc).lower() or "read-only file system" in str(exc).lower():
            return StoreError("the tracking store is read-only (SQLite: attempt to write a readonly database); make "
                              "it writable or point tracking.uri elsewhere")
        exc = exc.__cause__ or exc.__context__
    return None
