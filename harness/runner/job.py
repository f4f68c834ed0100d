"""The tracked job and the Hydra entry point: a job in three steps, then logged.

``run_job`` = ``prepare`` (table, task, policy factory, cost, skip key) -> ``compute`` (the
protocols' metrics, series, tags, files, summary: ``RunOutputs``, no store) -> ``TrackedRun.log``
(the tracker), inside ``harness.runner.lifecycle.tracked_run``, the one context manager that
ends the run FINISHED, FAILED or KILLED.

``conf/`` is located next to the packages (the repository root of a source checkout or an
editable install: ``<root>/harness/app.py`` -> ``<root>/conf``). Hydra does not change the
working directory (``hydra.job.chdir: false``), so relative paths (``mlruns/``) mean the
launch directory; ``launch_dir()`` still asks Hydra for the original cwd to be safe.

In a sweep (``-m``) the callback ``harness.runner.sweep.SweepTrackingCallback`` has
already validated every job, opened the store, built the outcome table, created the experiment
and the parent run, and written what the jobs need to know into one state file
(``harness.runner.sweep_state.SweepState``, named by ``ROUTE_BENCH_SWEEP_STATE``); the Hydra
task function reads it and passes it to ``run_job``. A job that raises is logged as a FAILED
child run and the sweep goes on; a single run re-raises after logging.

What a job prints and leaves behind (``harness.console``): a sweep job one ``[k/N] <run name> ->
<headline> (eta)`` line, a single run (or ``verbose=true``) its full summary; always the full
text in the Hydra job's log file and ``result.json`` (run id, status, experiment, tracking URI)
in the job's folder.

Guarantees (issue "reliability"; see ``harness.tracking.mlflow_tracker`` for the store side):

- **Every run ends.** Any exception ends the job's run FAILED (``error.txt``); Ctrl-C
  (KeyboardInterrupt) and SIGTERM (turned into :class:`Terminated` by a handler installed in
  every job process and in the sweep process, ``harness.runner.process``) end it KILLED, with
  ``route_bench.end_reason``, and stop the sweep: ``main`` ends the sweep's parent run KILLED and
  exits 130 / 143 after one line. A store error while the job's run is created fails that job
  only (a FAILED line, ``result.json`` with no run id; the sweep counts it). A joblib worker runs
  a watchdog thread that ends it when the sweep process dies (kill -9), its running job KILLED
  first.
- **Skip only what is truly the same.** A sweep job's *skip key* is the digest of its config
  hash, the outcome table's fingerprint (``table_sha256``: the Parquet's bytes; for the synthetic
  table the digest of its columns) and the code version (package version + ``RESULTS_VERSION``,
  bumped when a change alters numbers). It is computed after the table is loaded, so data fixed
  in place (a new table) never reuse old numbers, and it is looked up in the whole experiment
  (any sweep, any override order). The job then *claims* it atomically
  (``Tracker.claim_job``): reuse a FINISHED run (the line names it and its sweep), wait for a
  live RUNNING one of another process, or create its own RUNNING run; two concurrent sweeps
  of one command thus never run a job twice.
- **The store first.** The tracker is opened (an unreachable server or a broken file fails in
  seconds, in one line) before any table is built.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import hydra
from omegaconf import DictConfig, OmegaConf

from harness.app import (
    TableHandle,
    compute_job,
    launch_dir,
    load_table,
    make_task,
    policy_factory,
    resolve_cost,
    table_facts,
    to_plain,
    write_protocol_artifacts,
)
from harness.conf_files import CONF_SOURCE
from harness.config.validation import validate
from harness.store_schema import PREFIX, TAG_ARMS, TAG_BUDGET_GRID, TAG_CODE_VERSION, TAG_CONFIG_HASH, TAG_DATASET, TAG_GIT_COMMIT, TAG_MLFLOW_GIT_COMMIT, TAG_NOTE, TAG_POLICY, TAG_ROLE, TAG_SWEEP_ID, TAG_TABLE_KEY
from harness.secrets import redact_secrets
from harness.io import digest_of
from harness.runner.lifecycle import JobContext, tracked_run
from harness.runner.process import (  # noqa: F401 - Terminated, signal_name: imported from here by __main__
    Terminated,
    install_signal_handlers,
    signal_name,
    start_parent_watchdog,
)
from harness.runner.sweep_state import NOT_APPLICABLE, SweepState
from policies.registry import display_name

# Bump when a code change changes any job's numbers: runs of the older code are then not reused
# by the skip check (the skip key holds the package version and this number).
RESULTS_VERSION = 1


def code_version() -> str:
    """``<package version>+r<RESULTS_VERSION>``: the code part of a job's skip key."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("rag-route-bench")
    except PackageNotFoundError:
        v = "0+unknown"
    return f"{v}+r{RESULTS_VERSION}"


def table_fingerprint(table: "TableHandle") -> str:
    """The outcome table's fingerprint: SHA-256 of its Parquet (synthetic: of its columns),
    else its cache key."""
    return str(table.info.get("table_sha256") or table.key)


def skip_key(config_hash: str, table: "TableHandle", protocols: list | None = None) -> str:
    """What makes two jobs the same: the config hash, the table fingerprint and the code
    version (the harness's, and each plugin protocol's ``version``: ``protocols``, see
    ``protocol_versions``). A FINISHED job run with this key (any sweep) is reused instead of
    rerun."""
    body = {"config": config_hash, "table": table_fingerprint(table), "code": code_version()}
    if protocols:  # absent for the built-ins alone, so their keys stay as they were
        body["protocols"] = protocols
    return digest_of(body)[:16]


def protocol_versions(planned) -> list:
    """[(name, class, version)] of the job's plugin protocols (the built-ins are covered by the
    harness's own code version): a plugin author bumps ``version`` when its numbers change."""
    from harness.protocols.registry import BUILTIN_PROTOCOLS

    return [[pp.name, f"{type(pp.protocol).__module__}.{type(pp.protocol).__qualname__}", str(pp.protocol.version)]
            for pp in planned if pp.name not in BUILTIN_PROTOCOLS]


# ---- who the job is ----------------------------------------------------------------------------
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


def job_tags(plain: Mapping, config_hash: str, sweep: SweepState | None) -> dict:
    """The tags a job's run gets when it is created (role, config hash, policy, dataset, ...)."""
    from harness.tracking import naming

    arms = plain.get("arms") or {}
    commit = naming.git_commit()
    tags = {
        TAG_ROLE: "job" if sweep is not None else "single",
        TAG_CONFIG_HASH: config_hash,
        TAG_POLICY: display_name(plain["policy"]),
        TAG_DATASET: str((plain.get("dataset") or {}).get("name", "")),
        TAG_ARMS: f"{arms.get('base', 'keep')}-vs-{arms.get('extra', 'hybrid')}",
        TAG_BUDGET_GRID: naming.short_param(list((plain.get("budget") or {}).get("grid") or [])),
        TAG_GIT_COMMIT: commit,
    }
    if commit != "unknown":
        tags[TAG_MLFLOW_GIT_COMMIT] = commit
    if sweep is not None:
        tags[TAG_SWEEP_ID] = sweep.sweep_id
    return tags


def job_context(cfg: DictConfig | Mapping, sweep: SweepState | None, job: Any) -> JobContext:
    """Who the job is, before anything is tracked. A single run's config is validated here
    (nothing is tracked on a typo); a sweep job's worker starts watching the sweep process."""
    from harness import console
    from harness.tracking import naming

    plain = to_plain(cfg)
    checked = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(plain)
    if sweep is None:
        validate(checked)
    else:
        start_parent_watchdog(sweep.sweep_pid)
    overrides = [str(o) for o in job.overrides.task] if job is not None else None
    name = run_name(plain, sweep.swept_keys if sweep is not None else None, overrides)
    log = console.job_logger()
    if overrides is not None:  # what Hydra's launch line said; the console leaves it out (hydra_logging: quiet)
        log.info("%s: overrides %s", name, " ".join(overrides) or "(none)")
    uri = naming.resolve_tracking_uri(plain["tracking"], launch_dir())
    exp_name = naming.experiment_name(plain)
    chash = naming.config_hash(plain)
    result = {"run_name": name, "experiment": exp_name, "experiment_id": None, "tracking_uri": uri,
              "config_hash": chash, "sweep_id": sweep.sweep_id if sweep is not None else None,
              "parent_run_id": sweep.parent_run_id if sweep is not None else None}
    return JobContext(plain=plain, checked=checked, job=job, sweep=sweep, name=name, uri=uri, experiment=exp_name,
                      config_hash=chash, tags=job_tags(plain, chash, sweep), verbose=bool(plain.get("verbose", False)),
                      log=log, result=result)


# ---- step 1: prepare ---------------------------------------------------------------------------
@dataclass
class Prepared:
    """What a job computes from, known before its run is claimed."""

    table: TableHandle
    task: Any  # harness.task.RoutingTask
    factory: Callable[[], Any]  # fresh policies (``harness.app.policy_factory``)
    given_cost: dict  # the cost config as given: config.yaml keeps it, so the job can be run again
    cost_metrics: dict  # ``cost/...`` when cost.c is derived from the table ({} for an abstract c)
    key: str  # the skip key
    planned: tuple = ()  # the job's protocols, made once (``harness.protocols.registry.plan_protocols``)
    features: tuple = ()  # the policy's declared features (query features an outcome file's text gives)


def prepare(plain: dict, config_hash: str, table_handle: str | None = None) -> Prepared:
    """Table (from the sweep's ``table_handle`` when it matches, else built), routing task, cost,
    policy factory and skip key. With ``cost.unit`` set, ``plain["cost"]["c"]`` becomes the
    derived cost (``resolve_cost``) before the job logs its params; ``config_hash``, computed
    before, holds unit and price and the table fingerprint in the skip key holds the costs."""
    from harness.errors import NotApplicable
    from harness.preflight import check_sizes, not_applicable, with_text_features
    from harness.protocols.registry import plan_protocols

    planned = plan_protocols(plain)  # each protocol made once: sizes, compute and console lines use these
    table = load_table(plain, table_handle)  # before the skip check: the skip key covers the table
    task = make_task(plain, table)
    given_cost = dict(plain["cost"])
    cost_metrics = resolve_cost(plain, table, task)
    factory = policy_factory(plain["policy"])
    policy = factory()
    # a policy that reads what the table lacks: before any run exists (a sweep reports the job)
    reason = not_applicable(policy, task, display_name(plain["policy"]))
    if reason is not None:
        raise NotApplicable("policy", reason)
    features = tuple(map(str, getattr(policy, "features", ()) or ()))
    task = with_text_features(task, features)  # query features from an outcome file's text
    # a dataset too small for the protocols' folds is a data-size problem, said with counts; a
    # held-out / test set too small for any significant outcome is refused, naming protocol.min_heldout
    check_sizes(task, planned, plain, trainable=bool(getattr(policy, "trainable", True)))
    key = skip_key(config_hash, table, protocol_versions(planned))
    return Prepared(table=table, task=task, factory=factory, given_cost=given_cost, cost_metrics=cost_metrics, key=key,
                    planned=planned, features=features)


# ---- step 2: compute ---------------------------------------------------------------------------
@dataclass
class RunOutputs:
    """Everything a job's run logs, computed without the store (``harness.app.JobOutputs`` is
    the protocols' own results, from which these are made)."""

    metrics: dict  # table/, cost/ and the protocols' metrics (the job's result)
    series: list  # (name, value, step) in logging order: the metrics, the protocols' series, headline/...
    tags: dict
    summary: str  # summary.txt and the run's description
    headline: str  # the job's console line
    headline_metrics: dict  # ``headline/...`` (result.json)
    files: Path  # the artifact folder: config.yaml, summary.txt, the protocols' tables, plots and files
    dataset: dict  # the run's input dataset (``dataset_input``)


def print_preflight(task) -> None:
    """The pre-flight warning (``harness.preflight``), one line on the console, if any."""
    from harness.preflight import nothing_to_route

    warning = nothing_to_route(task)
    if warning:
        print(f"[route-bench] warning: {warning}", flush=True)


def run_tags(table: TableHandle, out: Any) -> dict:
    """Tags that say which table and code produced the numbers, and the protocols' own tags."""
    from harness.tracking import naming

    tags = {TAG_TABLE_KEY: table.key, TAG_CODE_VERSION: code_version()}
    for fact in ("dataset_fingerprint", "table_sha256"):
        if table.info.get(fact):
            tags[f"{PREFIX}{fact}"] = str(table.info[fact])
    tags.update(naming.block_tags(table.info.get("blocks") or {}))
    for done in out.results.values():
        tags.update(done.tags)
    return tags


def compute(plain: Mapping, prepared: Prepared, art: Path, where: str) -> RunOutputs:
    """Run the configured protocols and write the run's files into ``art``; ``where`` is how
    summaries name the run's artifacts (``run <id>``)."""
    from harness import console

    table, task = prepared.table, prepared.task
    (art / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(redact_secrets({**plain, "cost": prepared.given_cost}))),
                                     encoding="utf-8")
    from harness.preflight import frame_with_text_features

    frame = frame_with_text_features(table.frame, prepared.features)  # protocols reading the table (n-way) too
    out = compute_job(plain, task, prepared.factory, art, where=where, table=frame, planned=prepared.planned)
    metrics = {**table_facts(task, table), **prepared.cost_metrics, **out.metrics()}
    series = [(k, v, 0) for k, v in metrics.items()]
    for done in out.results.values():
        series += done.series
    from harness.preflight import preflight_tags

    tags = {**run_tags(table, out), **preflight_tags(task)}
    write_protocol_artifacts(out, art, plain["tracking"])
    summary = out.summary()
    note = console.cost_note(plain["cost"], prepared.cost_metrics)
    summary = f"{note}\n\n{summary}" if note else summary
    (art / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    grid = [float(x) for x in plain["budget"]["grid"]]  # headlines show only the budgets the job logged
    heads = console.headline_metrics(prepared.planned, metrics, task.metric, grid)
    series += [(k, v, 0) for k, v in heads.items()]
    return RunOutputs(metrics=metrics, series=series, tags=tags, summary=summary,
                      headline=console.headline(prepared.planned, metrics, task.metric, grid), headline_metrics=heads, files=art,
                      dataset=dataset_input(plain, task, table))


# ---- the job -----------------------------------------------------------------------------------
def run_job(cfg: DictConfig | Mapping, *, sweep: SweepState | None = None, job: Any = None) -> dict:
    """One job, tracked. Returns ``{"status", "run_id", "metrics"}``; re-raises in single runs.
    A sweep job whose policy reads what its table lacks (``harness.preflight.not_applicable``)
    creates no run: status ``NOT_APPLICABLE``, one line saying why; a single run's is a
    ConfigError naming ``policy``.

    ``sweep``: the state of the sweep the job belongs to (``SweepState``), None for a single
    run. ``job``: the Hydra job's config (``HydraConfig.get()``, passed by ``main``): its number
    and overrides give the ``[k/N]`` line and the run name, its folder gets ``result.json``. A
    sweep job prints one line (``verbose=true``: also the full summary), a single run the full
    summary; the full text always goes to the job's log file (``<job folder>/app.log``).

    Order (see the module docstring): store opened (fails fast) -> ``prepare`` (table loaded,
    skip key) -> claim (sweep jobs) or a new run (single runs) -> ``compute`` -> logged ->
    FINISHED; ``tracked_run`` ends the run FAILED or KILLED otherwise.
    """
    install_signal_handlers()
    ctx = job_context(cfg, sweep, job)
    outputs = prepared = None
    with tempfile.TemporaryDirectory(prefix="route-bench-run-") as tmp, tracked_run(ctx, Path(tmp)) as run:
        run.open_store()  # the store first: an unreachable server or a broken file fails before any table work
        if sweep is not None and not sweep.jobs_validated:
            validate(ctx.checked)  # a job the sweep could not expand and check first checks itself
        prepared = _prepare_or_not_applicable(ctx)
        if isinstance(prepared, Prepared):
            if sweep is None:  # a sweep says it once, before its jobs (harness.runner.sweep)
                print_preflight(prepared.task)
            ctx.result["skip_key"] = prepared.key
            if run.start(prepared.key):
                outputs = compute(ctx.plain, prepared, run.artifacts, where=f"run {run.run_id}")
                run.log(outputs)
    if run.failure is not None:
        return run.failure
    if isinstance(prepared, str):
        return _not_applicable(ctx, prepared)
    if run.reused is not None:
        return _skipped(ctx, run.reused)
    return _finished(ctx, run.run_id, outputs)


def _finished(ctx: JobContext, run_id: str | None, outputs: RunOutputs) -> dict:
    from harness.tracking import naming

    ctx.finish("FINISHED", run_id, outputs.headline, outputs.summary,
               headline={naming.mlflow_name(k): v for k, v in outputs.headline_metrics.items()})
    if ctx.verbose or not ctx.in_sweep:  # a single run: a person asked for this one job
        print(f"[route-bench] {ctx.name} -> run {run_id}\n{outputs.summary}", flush=True)
    return {"status": "FINISHED", "run_id": run_id, "metrics": outputs.metrics}


def _prepare_or_not_applicable(ctx: JobContext) -> "Prepared | str":
    """``prepare``; a sweep job whose policy reads what its table lacks gets the reason instead
    (no run is created for it), a single run the ConfigError naming ``policy``."""
    from harness.errors import ConfigError, NotApplicable

    sweep = ctx.sweep
    try:
        return prepare(ctx.plain, ctx.config_hash, sweep.table_handle if sweep is not None else None)
    except NotApplicable as exc:
        if sweep is None:
            raise ConfigError(exc.key, exc.problem) from None
        return exc.problem


def _not_applicable(ctx: JobContext, reason: str) -> dict:
    """A sweep job whose policy cannot run on the table: one line, a record, no run."""
    ctx.finish(NOT_APPLICABLE, None, f"not applicable: {reason}", reason, reason=reason)
    return {"status": NOT_APPLICABLE, "run_id": None, "metrics": {}}


def _skipped(ctx: JobContext, claim: Any) -> dict:
    """A job whose skip key already FINISHED (any sweep of the experiment): reuse that run."""
    from harness.tracking import run_notes

    done = claim.reused
    other = done.data.tags.get(TAG_SWEEP_ID)
    line = f"skipped: finished as run {done.info.run_id}"
    if other and other != (ctx.sweep.sweep_id if ctx.sweep is not None else None):
        line += f" (sweep {other})"
    if claim.waited_for:
        line += ", after waiting for it"
    summary = run_notes.note_text(done.data.tags.get(TAG_NOTE, ""))
    ctx.finish("SKIPPED", done.info.run_id, line, summary, reused_sweep_id=other)
    if ctx.verbose and summary:
        print(f"[route-bench] {ctx.name} -> run {done.info.run_id} (finished before)\n{summary}", flush=True)
    return {"status": "SKIPPED", "run_id": done.info.run_id, "metrics": dict(done.data.metrics)}

@hydra.main(config_path=CONF_SOURCE, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> dict:
    """The Hydra task function: one job (a single run, or one job of a sweep)."""
    import sys

    from hydra.core.hydra_config import HydraConfig

    from harness.errors import HarnessError

    sweep = SweepState.from_env()
    try:
        return run_job(cfg, job=HydraConfig.get(), sweep=sweep)
    except HarnessError as exc:  # a single run (a sweep job returns FAILED instead of raising)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        # one line naming the key, file or field, no traceback; exit 2 like the subcommands
        print(f"error: {type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        raise SystemExit(2) from None
    except Exception as exc:  # noqa: BLE001 - said here, else Hydra adds "Error executing job ..." first
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or sweep is not None:
            raise  # a sweep's job: the sweep reports it
        from harness.config.bad_input import as_bad_input
        from harness.errors import one_line

        bad = as_bad_input(exc)  # an OSError naming its file, a read-only store
        if bad is not None:
            print(one_line(bad), file=sys.stderr)
            raise SystemExit(2) from None
        print(f"{one_line(exc)} (unexpected; rerun with --debug first for the traceback)", file=sys.stderr)
        raise SystemExit(1) from None


def main() -> Any:
    """Entry point (``python -m harness [overrides]``, ``-m`` for sweeps).

    SIGTERM becomes :class:`Terminated` (like Ctrl-C's KeyboardInterrupt), so the running job's
    run and the sweep's parent run end KILLED; the command then exits with 128 + the signal's
    number (130 for Ctrl-C) after one line on stderr (``HYDRA_FULL_ERROR=1``: the traceback).
    """
    import sys

    install_signal_handlers()
    try:
        return hydra_main()
    except (KeyboardInterrupt, Terminated) as exc:
        from harness.plugin_guard import stopped_in

        how = signal_name(exc) + (f" in {stopped_in(exc)}" if stopped_in(exc) else "")
        ended = []
        cb = sys.modules.get("harness.runner.sweep")
        if cb is not None:  # a sweep: its parent run (atexit would do it too, later)
            ended = cb.end_active_sweeps("KILLED", f"killed: {how}")
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        what = f"; sweep run {', '.join(ended)} marked KILLED" if ended else ""
        print(f"error: Interrupted: {how}: stopped{what}", file=sys.stderr, flush=True)
        raise SystemExit(130 if isinstance(exc, KeyboardInterrupt) else 128 + exc.signum) from None


if __name__ == "__main__":  # pragma: no cover
    main()
