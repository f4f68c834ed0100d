"""Protocols as plugins: one base class, one result type, found by name.

Why: the app should not know which protocols exist. A job runs the protocols its config lists
(``protocol.run``), each returns a ``ProtocolResult`` (metrics, tables, series, plots, summary),
and the app logs whatever came back the same way, so a fourth protocol is one file.

A protocol is a class with a ``name`` and ``run(task, factory, ctx)``; its settings are the
shared ``protocol`` keys (``ctx.cfg["protocol"]``) plus its own node ``protocol.settings.<name>``,
typed by an optional dataclass ``Config`` (unknown or mistyped keys are a ConfigError naming the
key) and handed over as ``ctx.settings``.
Found like every plugin (``harness.registry``): the built-ins below, then the entry-point group
``rag_route_bench.protocols`` (``my_protocol = "my_pkg:MyProtocol"``).

Artifacts: each table is written as ``<table name>.parquet`` (and ``.csv`` when ``preview``, so
the MLflow UI previews it); per-question tables (``per_question``) are skipped when
``tracking.log_decisions`` is false; plots are drawn into ``<plot name>`` unless
``tracking.log_plots`` is false. Table and plot names are the artifact names the sweep's decision
table and the report read (``decisions.parquet``, ``frontiers.parquet``, ...), so they are part
of the contract.
"""

from __future__ import annotations

import abc
import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

import pandas as pd

from harness.errors import ConfigError, HarnessError, did_you_mean
from harness.protocols.outputs import Output, expand, headline_line
from harness.plugin_guard import guard_methods, plugin_call
from harness.registry import Kind, lookup, names

ENTRY_POINT_GROUP = "rag_route_bench.protocols"


@dataclass(frozen=True)
class Table:
    """A table artifact: ``frame`` as Parquet; ``preview``: also as CSV; ``per_question``: one
    row per question (skipped when ``tracking.log_decisions`` is false)."""

    frame: pd.DataFrame
    preview: bool = False
    per_question: bool = False


@dataclass
class ProtocolResult:
    """What a protocol hands back to the app (module docstring)."""

    metrics: dict[str, float]
    summary: str
    tables: dict[str, Table] = field(default_factory=dict)
    series: list[tuple[str, float, int]] = field(default_factory=list)  # (name, value, step)
    plots: dict[str, Callable[[Path], Path]] = field(default_factory=dict)  # file name -> draw(path)
    tags: dict[str, str] = field(default_factory=dict)  # run tags (e.g. digests of frozen files)
    raw: Any = None  # the protocol's own result object (ThresholdResult, BudgetResult, ...)


@dataclass(frozen=True)
class ProtocolContext:
    """What a protocol may read besides the task and the policy factory."""

    cfg: Mapping[str, Any]  # the job's resolved config (plain dict)
    artifact_dir: Path  # files written here end up in the run's artifacts
    settings: Any = None  # ``protocol.settings.<name>`` checked against the protocol's ``Config``
    where: str | None = None  # how summaries name the run's artifacts ("run <id>"), if known
    table: Any = None  # the outcome table (pandas), for protocols that read more than the task

    @property
    def seed(self) -> int:
        return int(self.cfg["seed"])

    @property
    def cost(self) -> float:
        return float(self.cfg["cost"]["c"])

    @property
    def protocol(self) -> Mapping[str, Any]:
        return self.cfg["protocol"]


class Protocol(abc.ABC):
    """Base class of protocols (module docstring)."""

    name: ClassVar[str] = "protocol"
    Config: ClassVar[type | None] = None  # a dataclass typing ``protocol.settings.<name>``
    version: ClassVar[str] = "1"  # bump when the numbers change: part of a job's skip key
    title: ClassVar[str] = ""  # how the console's job line names its numbers (default: the name)
    outputs: ClassVar[tuple[Output, ...]] = ()  # its logged metrics, declared (harness.protocols.outputs)

    @abc.abstractmethod
    def run(self, task: Any, factory: Callable[[], Any], ctx: ProtocolContext) -> ProtocolResult:
        """Evaluate the policies ``factory`` makes on ``task``."""

    def check(self, cfg: Mapping[str, Any]) -> None:
        """Refuse a job config this protocol cannot run (a ConfigError naming the key), before
        any work; called by ``harness.config.validation.validate``. Default: nothing to check."""

    def min_documents(self, cfg: Mapping[str, Any], trainable: bool) -> tuple[int, str] | None:
        """(the fewest documents this protocol can split under the job config ``cfg``, why), for
        the pre-flight (``harness.preflight.check_sizes``); None: no more than any protocol's
        two. ``trainable``: whether the policy fits (folds need documents)."""
        return None

    def smallest_test_set(self, task: Any, cfg: Mapping[str, Any]) -> tuple[int, str] | None:
        """(questions in the smallest set this protocol judges a policy on, what the set is
        called), for the pre-flight's ``protocol.min_heldout``; None: it judges on no held-out
        set."""
        return None

    def job_line(self, metrics: Mapping[str, float], metric: str, grid: Sequence[float]) -> str | None:
        """The few numbers of one job the console prints for this protocol (``metrics`` as the
        job computed them, ``metric`` the task metric, ``grid`` the budgets); default: its
        headline outputs, ``<title>: short=value ...``; None when it logged none of them."""
        return headline_line(self.title or self.name, expand(self.outputs, metric, [f"{b:.2f}" for b in grid]),
                             metrics)

    def headline_metrics(self, metrics: Mapping[str, float], metric: str, grid: Sequence[float]) -> dict[str, float]:
        """``headline/...`` metrics of one job (what a dashboard sorts by); default: each
        headline output the job logged, as ``headline/<its key>``."""
        shown = expand(self.outputs, metric, [f"{b:.2f}" for b in grid])
        return {f"headline/{o.key}": float(metrics[o.key]) for o in shown if o.headline and o.key in metrics}

    def aggregate(self, jobs: list, ctx: Any) -> Any:
        """The protocol's sweep stage (``harness.protocols.sweep_stage``): what it concludes
        from every job of a sweep (``jobs``: ``SweepJob`` records, FINISHED or not; ``ctx``: a
        ``SweepContext``), as a ``SweepResult`` shown on the console, in the report and on the
        sweep's parent run; None (the default) when it has no sweep-level conclusion."""
        return None


def _union_problem(args: tuple, value: Any) -> str | None:
    """Optional[...] / Union[...]: None when any member accepts ``value``."""
    if value is None and type(None) in args:
        return None
    problems = [_type_problem(a, value) for a in args if a is not type(None)]
    return None if any(p is None for p in problems) else problems[0]


def _list_problem(inner: Any, value: Any) -> str | None:
    """list[...] / tuple[...]: a list whose items are each an ``inner``."""
    if not isinstance(value, (list, tuple)):
        return "must be a list"
    for i, item in enumerate(value):
        problem = _type_problem(inner, item) if inner is not None else None
        if problem:
            return f"item {i}: {problem}"
    return None


def _is_int(value: Any) -> bool:
    plain = isinstance(value, int) and not isinstance(value, bool)
    return plain or (isinstance(value, float) and value.is_integer())


_SCALAR_CHECKS = {  # kind -> (accepts, why not)
    bool: (lambda v: isinstance(v, bool), "must be true or false"),
    int: (_is_int, "must be an integer"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "must be a number"),
    str: (lambda v: isinstance(v, str), "must be a string"),
}


def _type_problem(kind: Any, value: Any) -> str | None:
    """Why ``value`` is not a ``kind`` (None when it is, or when ``kind`` is not one this check
    knows: bool, int, float, str, Optional[...], list[...] / List[...], tuple[...])."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Union:
        return _union_problem(args, value)
    if kind in _SCALAR_CHECKS:
        accepts, why = _SCALAR_CHECKS[kind]
        return None if accepts(value) else why
    if kind in (list, tuple) or origin in (list, tuple):
        return _list_problem(args[0] if args else None, value)
    return None


def _plain_value(value: Any) -> Any:
    """A setting's value with config containers (OmegaConf's list and mapping nodes) as plain lists
    and dicts, so a list setting type-checks and the Config gets plain values."""
    if isinstance(value, Mapping):
        return {k: _plain_value(v) for k, v in value.items()}
    if isinstance(value, typing.Sequence) and not isinstance(value, (str, bytes)):
        return [_plain_value(v) for v in value]
    return value


def settings_of(protocol: Protocol, node: Any) -> Any:
    """``protocol.settings.<name>`` checked against the protocol's ``Config`` dataclass: unknown
    keys, wrong types and values the Config refuses (``__post_init__``) are a ConfigError under
    the real key; None without a Config."""
    cls = protocol.Config
    prefix = f"protocol.settings.{protocol.name}"
    if node is not None and not isinstance(node, Mapping):
        raise ConfigError(prefix, f"must be a mapping of settings (protocol.settings.{protocol.name}.<key>=...), got {node!r}")
    values = {key: _plain_value(value) for key, value in dict(node or {}).items()}
    if cls is None:
        if values:
            raise ConfigError(prefix, f"protocol {protocol.name!r} takes no settings, got {sorted(values)}")
        return None
    fields = {f.name: f for f in dataclasses.fields(cls)}
    try:  # string annotations (``from __future__ import annotations``) resolved to types
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an unresolvable annotation is simply not type-checked here
        hints = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"{prefix}.{key}", f"unknown setting{did_you_mean(key, fields)} "
                                                 f"(settings: {', '.join(fields) or 'none'})")
        problem = _type_problem(hints.get(key, fields[key].type), value)
        if problem:
            raise ConfigError(f"{prefix}.{key}", f"{problem}, got {value!r}")
    try:
        return cls(**values)
    except (TypeError, ValueError, AssertionError) as exc:
        raise ConfigError(prefix, f"{type(exc).__name__}: {exc}") from None


# names the app writes itself: a protocol's tables and plots may not take them
RESERVED_ARTIFACTS = ("config.yaml", "summary.txt", "error.txt", "frozen")


def check_results(results: Mapping[str, ProtocolResult]) -> None:
    """Two protocols of one job never write the same metric, artifact or tag, and artifacts are
    plain file names the app does not use itself: a HarnessError names both protocols (a clash
    would silently overwrite numbers the sweep's tables read)."""
    import re

    seen: dict[tuple[str, str], str] = {}
    for name, result in results.items():
        files = [f"{t}.parquet" for t in result.tables] + [f"{t}.csv" for t, tab in result.tables.items() if tab.preview]
        files += list(result.plots)
        for f in files:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", f) or f in RESERVED_ARTIFACTS:
                raise HarnessError(f"protocol {name!r}: artifact name {f!r} is not allowed (a plain file name, "
                                   f"not one of {', '.join(RESERVED_ARTIFACTS)})")
        items = [("metric", m) for m in result.metrics] + [("artifact", f) for f in files]
        items += [("tag", t) for t in result.tags] + [("series", n) for n, _, _ in result.series]
        for kind, item in dict.fromkeys(items):
            other = seen.setdefault((kind, item), name)
            if other != name and not (kind == "metric" and _shared_metric(item, results, other, name)):
                raise HarnessError(f"protocols {other!r} and {name!r} both write the {kind} {item!r}")


def _shared_metric(metric: str, results: Mapping[str, ProtocolResult], a: str, b: str) -> bool:
    """A metric two protocols may both report: the same value of a job setting (e.g. ``cost``)."""
    return results[a].metrics[metric] == results[b].metrics[metric] and metric in ("cost", "n/questions")


# ---- finding protocols --------------------------------------------------------------------------
BUILTIN_PROTOCOLS = {  # the harness's own entry points: name -> "module:Class" (imported when used)
    "threshold": "harness.protocols.builtin:ThresholdProtocol",
    "budget": "harness.protocols.builtin:BudgetProtocol",
    "gain": "harness.protocols.builtin:GainProtocol",
    "cost": "harness.protocols.cost:CostProtocol",
    "arms": "harness.protocols.arms:ArmsProtocol",
    "cascade": "harness.protocols.cascade:CascadeProtocol",
    "trigger_cascade": "harness.protocols.trigger_cascade:TriggerCascadeProtocol",
}
PROTOCOLS = Kind("protocol", ENTRY_POINT_GROUP, Protocol, BUILTIN_PROTOCOLS, key="protocol.run")


def protocol_names() -> list[str]:
    """Every protocol a config may name: built-ins first, then installed plugins."""
    return names(PROTOCOLS)


# the methods the harness calls on a protocol: a plugin's run under the plugin guard
PLUGIN_METHODS = ("run", "check", "min_documents", "smallest_test_set", "job_line", "headline_metrics", "aggregate")


def make_protocol(name: str, key: str = "protocol.run") -> Protocol:
    """The protocol called ``name`` (built-in, else entry point), ready to run."""
    cls = lookup(PROTOCOLS, name, key)
    label = f"protocol {name!r} ({cls.__module__}.{cls.__qualname__})"
    try:
        with plugin_call(label, "__init__"):
            protocol = cls()
    except (TypeError, ValueError) as exc:
        raise ConfigError(key, f"protocol {name!r} cannot be made without arguments: {exc}; settings belong in "
                               "its Config (protocol.settings.<name>)") from None
    if protocol.Config is not None and not dataclasses.is_dataclass(protocol.Config):
        raise ConfigError(key, f"protocol {name!r}: Config must be a dataclass")
    if protocol.name != name:
        raise HarnessError(f"protocol class {cls.__module__}.{cls.__qualname__} calls itself {protocol.name!r}, "
                           f"registered as {name!r}")
    if name not in BUILTIN_PROTOCOLS:  # a plugin's methods: sys.exit, interrupts said naming it
        guard_methods(protocol, label, PLUGIN_METHODS)
    return protocol


@dataclass(frozen=True)
class PlannedProtocol:
    """A protocol of a job, made once with its typed settings: what the job carries from its
    pre-flight through compute to its console line (nothing made twice to learn a fact)."""

    name: str
    protocol: Protocol
    settings: Any


def plan_protocols(cfg: Mapping[str, Any]) -> tuple[PlannedProtocol, ...]:
    """The job config's ``protocol.run``, each protocol made and its settings checked (a
    ConfigError naming ``protocol.run[i]`` or the setting's key)."""
    p = cfg["protocol"]
    settings = dict(p.get("settings") or {})
    planned = []
    for i, name in enumerate(p["run"]):
        protocol = make_protocol(str(name), f"protocol.run[{i}]")
        planned.append(PlannedProtocol(str(name), protocol, settings_of(protocol, settings.get(name))))
    return tuple(planned)


def display_order(names: Sequence[str]) -> list[str]:
    """Protocol names in the order screens show them: built-ins first (A, B, C, cost), then
    plugins in the order given."""
    order = list(BUILTIN_PROTOCOLS)
    return sorted(names, key=lambda n: order.index(n) if n in order else len(order))


def in_display_order(planned: Sequence[PlannedProtocol]) -> list[PlannedProtocol]:
    """The job's protocols in ``display_order``."""
    by_name = {pp.name: pp for pp in planned}
    return [by_name[n] for n in display_order(list(by_name))]
