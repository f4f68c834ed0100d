"""The tracked job and the Hydra entry point: compose -> compute (``harness.app``) -> log (MLflow).

``conf/`` is located next to the packages (the repository root of a source checkout or an
editable install: ``<root>/harness/app.py`` -> ``<root>/conf``). Hydra does not change the
working directory (``hydra.job.chdir: false``), so relative paths (``mlruns/``) mean the
launch directory; ``launch_dir()`` still asks Hydra for the original cwd to be safe.

In a sweep (``-m``) the callback ``harness.runner.sweep.SweepTrackingCallback`` has
already validated every job, opened the store, built the outcome table, created the experiment
and the parent run, and handed their ids to every job through environment variables
(``hydra.job.env_set``). A job that raises is logged as a FAILED child run and the sweep goes
on; a single run re-raises after logging.

What a job prints and leaves behind (``harness.console``): a sweep job one ``[k/N] <run name> ->
<headline> (eta)`` line, a single run (or ``verbose=true``) its full summary; always the full
text in the Hydra job's log file and ``result.json`` (run id, status, experiment, tracking URI)
in the job's folder.

Guarantees (issue "reliability"; see ``harness.tracking.mlflow_tracker`` for the store side):

- **Every run ends.** Any exception ends the job's run FAILED (``error.txt``); Ctrl-C
  (KeyboardInterrupt) and SIGTERM (turned into :class:`Terminated` by a handler installed in
  every job process and in the sweep process) end it KILLED, with ``route_bench.end_reason``,
  and stop the sweep: ``main`` ends the sweep's parent run KILLED and exits 130 / 143 after one
  line. A store error while the job's run is created fails that job only (a FAILED line,
  ``result.json`` with no run id; the sweep counts it). A joblib worker runs a watchdog thread
  that ends it when the sweep process dies (kill -9), its running job KILLED first.
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

import json
import os
import signal
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

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
from harness.config import validate
from harness.generation.http_client import redact_secrets
from harness.io import atomic_write_text, digest_of
from policies.registry import display_name

# Environment handed from the sweep callback to each job (``harness.runner.sweep``).
ENV_SWEEP_ID = "ROUTE_BENCH_SWEEP_ID"
ENV_PARENT_RUN_ID = "ROUTE_BENCH_PARENT_RUN_ID"
ENV_SWEEP_PID = "ROUTE_BENCH_SWEEP_PID"  # pid of the launching process (worker watchdog)
ENV_SWEEP_RESULTS = "ROUTE_BENCH_SWEEP_RESULTS"  # folder: one <job>.json record per job
ENV_CLAIM_TIMEOUT = "ROUTE_BENCH_CLAIM_TIMEOUT_S"  # how long a job waits for another's claim

# Bump when a code change changes any job's numbers: runs of the older code are then not reused
# by the skip check (the skip key holds the package version and this number).
RESULTS_VERSION = 1
CLAIM_TIMEOUT_S = 3600.0
WATCHDOG_GRACE_S = 10.0  # a worker whose sweep died: time to end its run KILLED, then exit


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


def protocol_versions(cfg: Mapping[str, Any]) -> list:
    """[(name, class, version)] of the job's plugin protocols (the built-ins are covered by the
    harness's own code version): a plugin author bumps ``version`` when its numbers change."""
    from harness.protocols.registry import BUILTIN_PROTOCOLS, make_protocol

    out = []
    for name in cfg["protocol"]["run"]:
        if name not in BUILTIN_PROTOCOLS:
            p = make_protocol(str(name))
            out.append([str(name), f"{type(p).__module__}.{type(p).__qualname__}", str(p.version)])
    return out


_TRACKERS: dict[tuple[str, int], Any] = {}


def open_tracker(uri: str, retries: int):
    """The process's tracker for ``uri``: opened (probed, schema checked) by the first job, then
    reused by the next jobs of a sweep that run in this process (opening costs tens of ms)."""
    from harness.tracking import mlflow_tracker as mt

    key = (uri, int(retries))
    if key not in _TRACKERS:
        _TRACKERS[key] = mt.Tracker(uri, retries=retries)
    return _TRACKERS[key]


def claim_timeout_s() -> float:
    raw = os.environ.get(ENV_CLAIM_TIMEOUT)
    try:
        return float(raw) if raw else CLAIM_TIMEOUT_S
    except ValueError:
        return CLAIM_TIMEOUT_S


# ---- signals and process life ------------------------------------------------------------------
class Terminated(BaseException):
    """SIGTERM (or SIGHUP) turned into an exception, like Ctrl-C's KeyboardInterrupt: not an
    ``Exception``, so a sweep does not catch it as one failed job and go on."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(signal_name(self))


def signal_name(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "SIGINT (Ctrl-C)"
    signum = getattr(exc, "signum", None)
    try:
        return signal.Signals(signum).name
    except (TypeError, ValueError):
        return type(exc).__name__


_SIGNALED = False


def _on_signal(signum, frame) -> None:  # noqa: ARG001
    global _SIGNALED
    if _SIGNALED:  # a second signal during the cleanup: die the default way
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _SIGNALED = True
    raise Terminated(signum)


def install_signal_handlers() -> None:
    """SIGTERM (and SIGHUP where it is not ignored) raise :class:`Terminated` in the main
    thread; idempotent; a no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        current = signal.getsignal(sig)
        if current is _on_signal or (sig != signal.SIGTERM and current == signal.SIG_IGN):
            continue
        signal.signal(sig, _on_signal)


_JOB_ACTIVE = False  # a job of this process is between its claim and its end
_WATCHDOG: threading.Thread | None = None


def start_parent_watchdog(sweep_pid: str | int | None) -> None:
    """In a worker process the sweep started (joblib/loky: its parent is the sweep process),
    a daemon thread that ends the worker when the sweep process dies (kill -9): the running
    job is sent SIGTERM (its run ends KILLED), and after WATCHDOG_GRACE_S the worker exits.
    Without it an orphaned loky worker waits for its next task for up to 300 s. A no-op in the
    sweep process itself and in workers of other launchers (Ray: the parent is a raylet)."""
    global _WATCHDOG
    try:
        pid = int(sweep_pid) if sweep_pid else None
    except ValueError:
        return
    if pid is None or _WATCHDOG is not None or os.getpid() == pid or os.getppid() != pid:
        return

    def watch() -> None:
        while os.getppid() == pid:
            time.sleep(0.5)
        if _JOB_ACTIVE:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
            except OSError:
                pass
            deadline = time.monotonic() + WATCHDOG_GRACE_S
            while _JOB_ACTIVE and time.monotonic() < deadline:
                time.sleep(0.1)
        os._exit(128 + signal.SIGTERM)

    _WATCHDOG = threading.Thread(target=watch, name="route-bench-sweep-watchdog", daemon=True)
    _WATCHDOG.start()


def write_job_record(job: Any, body: Mapping[str, Any]) -> Path | None:
    """The job's outcome for the sweep process (``$ROUTE_BENCH_SWEEP_RESULTS/<k>.json``): it
    counts jobs that failed without a run and lists reused runs of other sweeps."""
    folder = os.environ.get(ENV_SWEEP_RESULTS)
    if not folder or not Path(folder).is_dir():
        return None
    try:
        num = str(int(job.job.num))
    except Exception:  # noqa: BLE001 - no Hydra job number
        num = f"pid{os.getpid()}-{time.time_ns()}"
    keep = ("status", "run_id", "run_name", "error", "config_hash", "skip_key", "reused_sweep_id")
    try:
        return atomic_write_text(Path(folder) / f"{num}.json",
                                 json.dumps({k: body.get(k) for k in keep}, default=str, sort_keys=True))
    except OSError:
        return None


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

    Order (see the module docstring): store opened (fails fast) -> table loaded -> skip key ->
    claim (sweep jobs) or a new run (single runs) -> compute -> FINISHED. Any exception ends the
    run FAILED (a sweep goes on, a single run re-raises); KeyboardInterrupt and SIGTERM
    (:class:`Terminated`) end it KILLED and propagate.
    """
    global _JOB_ACTIVE
    from harness import console
    from harness.task import check_task_size
    from harness.tracking import mlflow_tracker as mt

    install_signal_handlers()
    plain = to_plain(cfg)
    sweep_id = os.environ.get(ENV_SWEEP_ID)
    parent = os.environ.get(ENV_PARENT_RUN_ID)
    if in_sweep is None:
        in_sweep = bool(sweep_id and parent)
    checked = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(plain)
    if not in_sweep:
        validate(checked)  # a single run fails before anything is tracked
    else:
        start_parent_watchdog(os.environ.get(ENV_SWEEP_PID))
    tracking = plain["tracking"]
    verbose = bool(plain.get("verbose", False))
    overrides = [str(o) for o in job.overrides.task] if job is not None else None
    name = run_name(plain, console.swept_keys_from_env() if in_sweep else None, overrides)
    log = console.job_logger()
    uri = mt.resolve_tracking_uri(tracking, launch_dir())
    exp_name = mt.experiment_name(plain)
    chash = mt.config_hash(plain)
    result = {"run_name": name, "experiment": exp_name, "experiment_id": None, "tracking_uri": uri,
              "config_hash": chash, "sweep_id": sweep_id if in_sweep else None,
              "parent_run_id": parent if in_sweep else None}

    def finish(status: str, run_id: str | None, line: str, text: str, **extra) -> None:
        """One line to the console (in a sweep), the full text to the job's log, result.json."""
        exp_id = result.get("experiment_id")
        log.info("%s -> run %s (%s, experiment %s, %s)\n%s\n\n%s", name, run_id, status, exp_name, uri, line, text)
        body = {**result, "status": status, "run_id": run_id,
                "ui_path": f"#/experiments/{exp_id}/runs/{run_id}" if run_id and exp_id else None, **extra}
        console.write_result(job, body)
        if in_sweep:
            write_job_record(job, body)
            print(console.progress_line(job, name, line), flush=True)

    arms = plain.get("arms") or {}
    commit = mt.git_commit()
    tags = {
        mt.TAG_ROLE: "job" if in_sweep else "single",
        mt.TAG_CONFIG_HASH: chash,
        mt.TAG_POLICY: display_name(plain["policy"]),
        mt.TAG_DATASET: str((plain.get("dataset") or {}).get("name", "")),
        mt.TAG_ARMS: f"{arms.get('base', 'keep')}-vs-{arms.get('extra', 'hybrid')}",
        mt.TAG_BUDGET_GRID: mt._short(list((plain.get("budget") or {}).get("grid") or [])),
        mt.TAG_GIT_COMMIT: commit,
    }
    if commit != "unknown":
        tags[mt.TAG_MLFLOW_GIT_COMMIT] = commit
    if in_sweep:
        tags[mt.TAG_SWEEP_ID] = sweep_id
    tracker = None
    run_id: str | None = None
    with tempfile.TemporaryDirectory(prefix="route-bench-run-") as tmp:
        art = Path(tmp) / "artifacts"
        art.mkdir()
        try:
            # the store first: an unreachable server or a broken file fails before any table work
            tracker = open_tracker(uri, int(tracking.get("retries", 5)))
            exp_id = tracker.ensure_experiment(exp_name, mt.artifact_location(uri))
            result["experiment_id"] = exp_id
            if in_sweep:
                validate(checked)  # the sweep validated every job first; this is a backstop
            table = load_table(plain)  # before the skip check: the skip key covers the table
            task = make_task(plain, table)
            # cost.unit set: cost.c = price x the extra arm's measured cost, before the params are
            # logged (the config hash above holds unit and price; the table fingerprint the costs)
            given_cost = dict(plain["cost"])  # config.yaml keeps what was given: it can be run again
            cost_metrics = resolve_cost(plain, table, task)
            factory = policy_factory(plain["policy"])
            # a dataset too small for the protocols' folds is a data-size problem, said with counts
            check_task_size(task, plain["protocol"], plain["budget"], trainable=bool(getattr(factory(), "trainable", True)))
            key = skip_key(chash, table, protocol_versions(plain))
            result["skip_key"] = key
            if in_sweep:
                def waiting(holder) -> None:
                    t = holder.data.tags
                    msg = (f"{name}: waiting for run {holder.info.run_id} (process {t.get(mt.TAG_PID, '?')} on "
                           f"{t.get(mt.TAG_HOST, '?')} is running the same job)")
                    log.info(msg)
                    print(f"[route-bench] {msg}", flush=True)

                claim = tracker.claim_job(
                    exp_id, name, tags, key, parent, reuse_finished=bool(tracking.get("skip_finished", True)),
                    timeout_s=claim_timeout_s(), on_wait=waiting,
                )
                if claim.reused is not None:
                    return _skipped(claim, finish, verbose, name, sweep_id)
                run_id = claim.run_id
            else:
                run_id = tracker.start_job_run(exp_id, name, {**tags, mt.TAG_SKIP_KEY: key, **mt.process_identity()})
            _JOB_ACTIVE = True
            tracker.log_params(run_id, mt.flatten_params(redact_secrets(plain)))
            (art / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(redact_secrets({**plain, "cost": given_cost}))),
                                             encoding="utf-8")
            out = compute_job(plain, task, factory, art, where=f"run {run_id}", table=table.frame)
            metrics = {**table_facts(task, table), **cost_metrics, **out.metrics()}
            triples = [(k, v, 0) for k, v in metrics.items()]
            for done in out.results.values():
                triples += done.series
            run_tags = {"route_bench.table_key": table.key, "route_bench.code_version": code_version()}
            for fact in ("dataset_fingerprint", "table_sha256"):
                if table.info.get(fact):
                    run_tags[f"route_bench.{fact}"] = str(table.info[fact])
            run_tags.update(mt.block_tags(table.info.get("blocks") or {}))
            for done in out.results.values():
                run_tags.update(done.tags)
            write_protocol_artifacts(out, art, tracking)
            summary = out.summary()
            note = console.cost_note(plain["cost"], cost_metrics)
            summary = f"{note}\n\n{summary}" if note else summary
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
        except (KeyboardInterrupt, Terminated) as exc:
            how = signal_name(exc)
            if run_id is not None and tracker is not None:
                try:  # quickly: a second signal would cut this short
                    tracker.set_tags(run_id, {mt.TAG_END_REASON: f"killed: {how} while the job ran"})
                    tracker.end_run(run_id, "KILLED")
                except Exception:  # noqa: BLE001 - the next sweep ends it as stale
                    pass
            finish("KILLED", run_id, f"KILLED (run {run_id}): {how}", f"interrupted by {how}", error=how)
            raise
        except Exception as exc:
            error = "".join(traceback.format_exception(exc))
            if tracker is not None:
                try:  # a FAILED run with the error, also when the job failed before its run existed
                    if run_id is None and in_sweep and not isinstance(exc, mt.TrackingStoreError):
                        run_id = tracker.start_job_run(result["experiment_id"], name,
                                                       {**tags, **mt.process_identity()}, parent_run_id=parent)
                        tracker.log_params(run_id, mt.flatten_params(redact_secrets(plain)))
                    if run_id is not None:
                        tracker.fail_run(run_id, error, artifact_dir=Path(tmp))
                except Exception as store_exc:  # noqa: BLE001 - the store itself fails: say so
                    error += f"\n(the run could not be marked FAILED: {type(store_exc).__name__}: {store_exc})\n"
            first = (str(exc).strip().splitlines() or [""])[0]
            first = first if len(first) <= 160 else first[:157] + "..."  # all of it: app.log, error.txt
            where = f"run {run_id}" if run_id else "no run"
            finish("FAILED", run_id, f"FAILED ({where}): {type(exc).__name__}: {first}", error, error=str(exc))
            if not in_sweep:
                if run_id is not None:  # nothing tracked: the error line on stderr says it all
                    print(f"[route-bench] FAILED {name} ({where}): {type(exc).__name__}: {exc}", flush=True)
                raise
            return {"status": "FAILED", "run_id": run_id, "metrics": {}, "error": str(exc)}
        finally:
            _JOB_ACTIVE = False
    heads = console.headline_metrics(metrics, task.metric, grid)
    finish("FINISHED", run_id, head, summary, headline={mt.mlflow_name(k): v for k, v in heads.items()})
    if verbose or not in_sweep:  # a single run: a person asked for this one job
        print(f"[route-bench] {name} -> run {run_id}\n{summary}", flush=True)
    return {"status": "FINISHED", "run_id": run_id, "metrics": metrics}


def _skipped(claim, finish, verbose: bool, name: str, sweep_id: str | None) -> dict:
    """A job whose skip key already FINISHED (any sweep of the experiment): reuse that run."""
    from harness.tracking import mlflow_tracker as mt

    done = claim.reused
    other = done.data.tags.get(mt.TAG_SWEEP_ID)
    line = f"skipped: finished as run {done.info.run_id}"
    if other and other != sweep_id:
        line += f" (sweep {other})"
    if claim.waited_for:
        line += ", after waiting for it"
    summary = mt.note_text(done.data.tags.get(mt.TAG_NOTE, ""))
    finish("SKIPPED", done.info.run_id, line, summary, reused_sweep_id=other)
    if verbose and summary:
        print(f"[route-bench] {name} -> run {done.info.run_id} (finished before)\n{summary}", flush=True)
    return {"status": "SKIPPED", "run_id": done.info.run_id, "metrics": dict(done.data.metrics)}


@hydra.main(config_path=CONF_SOURCE, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> dict:
    """The Hydra task function: one job (a single run, or one job of a sweep)."""
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
        how = signal_name(exc)
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
