"""Hydra callback that turns a multirun into one tracked sweep.

Why a callback: work that every job would repeat (building the outcome table, creating the
MLflow experiment and the sweep's parent run) is done ONCE, in the launching process, before any
job starts; parallel joblib workers then only read the cached Parquet and add child runs to an
existing experiment.

The callback hands values to the jobs by appending ``hydra.job.env_set.<VAR>=...`` to the
sweep's Hydra overrides (both the basic and the joblib launcher compose each job from them):
the sweep id, the parent run id and the table-handle file (see ``harness.app``), the sweep
process's pid (the joblib workers' watchdog) and a folder for per-job records, and the number
of jobs, the swept keys and the start time (``harness.console``: run names, ``[k/N]`` lines).

Sweep id: the first 12 hex digits of the digest of (the command line's task overrides, the
sweeper's params, the resolved base config without ``hydra``; ``verbose`` left out). The same
sweep command gives the same id, hence the same parent run. Jobs are skipped by their skip key
(``harness.runner.job.skip_key``), across sweeps.

Order of ``on_multirun_start``, and why:

1. every job's config is composed with Hydra's own loader (``load_sweep_config``, the
   launcher's call) and validated (``validate_sweep_jobs``): a mistyped value
   (``policy=ridge,ridgee``) ends the sweep in one line naming the key and value, exit 2,
   before any run exists (Hydra only composes a job when it launches it);
2. the store is opened (``Tracker``: an unreachable server or a corrupt file fails in seconds);
3. the outcome table is built;
4. RUNNING job runs of this sweep id whose process is provably gone (kill -9) are ended FAILED
   with a reason; the parent run is found or created under the store's lock.

Every start failure is one line ``error: <Kind>: <message>`` on stderr (exit 2 for bad input
and an unusable store, 1 otherwise; ``HYDRA_FULL_ERROR=1`` shows the traceback). The parent run
always ends: FINISHED / FAILED in ``on_multirun_end``; KILLED when a signal stops the sweep
(Hydra calls no callback then: ``harness.runner.job.main`` calls :func:`end_active_sweeps`, and an
``atexit`` hook covers any other exit), after ending the children whose process is gone.
``on_multirun_end`` reads the per-job records too: a job that failed without a run (a store
error) counts as failed, and a job that reused a run of another sweep shows that run.
"""

from __future__ import annotations

import atexit
import sys
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from harness.io import digest_of

def sweep_id_of(config: DictConfig) -> str:
    """Deterministic id of a sweep (see module docstring)."""
    from harness.app import to_plain
    from harness.console import PRESENTATION_KEYS

    # keys that only change what is printed (verbose) do not make another sweep
    def shown_only(override: str) -> bool:
        return override.lstrip("+~").partition("=")[0] in PRESENTATION_KEYS

    task_overrides = [o for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False) if not shown_only(o)]
    from harness.config import MAX_WORKERS

    workers = OmegaConf.select(config, "hydra.launcher.n_jobs", default=None)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers == 0
                                or not -MAX_WORKERS <= workers <= MAX_WORKERS):
        raise ConfigError("hydra.launcher.n_jobs", f"must be an integer in [1, {MAX_WORKERS}] (or joblib's "
                                                   f"negative count from the CPUs), got {workers!r}")
    params_node = OmegaConf.select(config, "hydra.sweeper.params")
    params = OmegaConf.to_container(params_node, resolve=False) if params_node is not None else {}
    base = {k: v for k, v in to_plain(config).items() if k not in PRESENTATION_KEYS}
    return digest_of({"task_overrides": task_overrides, "sweeper_params": params, "base": base})[:12]


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _culprit(job: list[str], exc: BaseException, good: list[list[str]]) -> tuple[str, str] | None:
    """(key, value) of the override that breaks a job: one named in the error, else the one
    whose change turns a composable job into this one; None if it cannot be told."""
    text = f"{exc} {exc.__cause__ or ''}"
    items = [item for item in job if not item.partition("=")[0].lstrip("+~").startswith("hydra")]
    for item in items:
        key, _, value = item.partition("=")
        key = key.lstrip("+~")
        if item in text or f"{key.replace('.', '/')}/{value}" in text or f"'{key}'" in text:
            return key, value
    for item in items:
        rest = [o for o in job if o != item]
        key = item.partition("=")[0]
        for other in good:
            if [o for o in other if o.partition("=")[0] != key] == rest and len(other) == len(job):
                k, _, v = item.partition("=")
                return k.lstrip("+~"), v
    return None


class _ValidationProgress:
    """A stdout line while a large sweep is validated (a few ms a job: 3,000 jobs take a minute
    and a half): one at the start, then one every ``every_s`` seconds."""

    MIN_JOBS = 200

    def __init__(self, n_jobs: int, every_s: float = 5.0, clock=None):
        import time

        self.n, self.every_s, self.clock = n_jobs, every_s, clock or time.monotonic
        self.last = self.clock()
        if n_jobs >= self.MIN_JOBS:
            print(f"[route-bench] validating {n_jobs} sweep jobs before any run starts ...", flush=True)

    def tick(self, done: int) -> None:
        """Called before job ``done`` (1-based) is validated."""
        if self.n < self.MIN_JOBS:
            return
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            print(f"[route-bench] validated {done - 1}/{self.n} sweep jobs", flush=True)


def validate_sweep_jobs(config: DictConfig) -> int | None:
    """Compose and validate every job of the sweep before anything is tracked.

    Each job's override list comes from ``harness.console.sweep_jobs`` (the basic sweeper's
    expansion) and is composed by Hydra's own config loader exactly as the launcher will
    (``load_sweep_config``), then checked by ``harness.config.validate`` and resolved. The first
    job that fails raises ConfigError naming the key and value (``policy=ridgee``). Returns the
    number of distinct jobs checked, or None when the sweep cannot be expanded here (another
    sweeper's syntax: each job then validates itself).
    """
    from hydra.core.global_hydra import GlobalHydra

    from harness import app
    from harness.config import as_bad_input, validate
    from harness.console import sweep_jobs
    from harness.errors import ConfigError

    from harness.config import MAX_WORKERS

    workers = OmegaConf.select(config, "hydra.launcher.n_jobs", default=None)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers == 0
                                or not -MAX_WORKERS <= workers <= MAX_WORKERS):
        raise ConfigError("hydra.launcher.n_jobs", f"must be an integer in [1, {MAX_WORKERS}] (or joblib's "
                                                   f"negative count from the CPUs), got {workers!r}")
    params_node = OmegaConf.select(config, "hydra.sweeper.params")
    params = OmegaConf.to_container(params_node, resolve=False) if params_node is not None else {}
    try:
        jobs = sweep_jobs(list(config.hydra.overrides.task), params)
    except Exception:  # noqa: BLE001 - not the basic sweeper's syntax
        return None
    if not GlobalHydra.instance().is_initialized():
        return None
    from harness.config import MAX_SWEEP_JOBS

    if len(jobs) > MAX_SWEEP_JOBS:
        raise ConfigError("(sweep)", f"{len(jobs)} jobs; at most {MAX_SWEEP_JOBS} in one sweep (split it, e.g. "
                                     "seed=range(0,1000) then seed=range(1000,2000))")
    loader = GlobalHydra.instance().config_loader()
    outcome: dict[tuple[str, ...], BaseException | None] = {}
    progress = _ValidationProgress(len(jobs))
    for i, job in enumerate(jobs, start=1):
        progress.tick(i)
        if tuple(job) in outcome:
            continue
        try:
            cfg = loader.load_sweep_config(config, list(job))
            validate(cfg)
            app.to_plain(cfg)  # resolves every interpolation
            outcome[tuple(job)] = None
        except Exception as exc:  # noqa: BLE001 - reported below, naming the value
            outcome[tuple(job)] = exc
    good = [list(j) for j, e in outcome.items() if e is None]
    for n, (job, exc) in enumerate(outcome.items(), start=1):
        if exc is None:
            continue
        found = _culprit(list(job), exc, good)
        explained = as_bad_input(exc, list(job))  # Hydra's errors said as the key they concern
        if isinstance(explained, ConfigError):
            where = f"{explained.problem}; sweep job {' '.join(job)}"
        else:
            lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()] or [type(exc).__name__]
            detail = lines[0]
            if exc.__cause__ is not None and str(exc.__cause__).strip():
                detail += f" ({str(exc.__cause__).strip().splitlines()[0]})"
            where = f"{type(exc).__name__}: {detail}; sweep job {' '.join(job)}"
        if found is not None:
            key, value = found
            raise ConfigError(key, f"bad sweep value {value!r}: {where}") from exc
        raise ConfigError("(sweep)", f"a job cannot be composed: {where}") from exc
    return len(outcome)


def skip_hydra_revalidation() -> None:
    """Hydra's sweeper composes every job once more before launching it, only to see that it
    composes (``Sweeper.validate_batch_is_legal``). ``validate_sweep_jobs`` has just composed
    them all with the same loader and validated them, so the second pass is switched off for
    this process: it cost a third of a sweep's overhead (about 60 ms a job)."""
    from hydra.plugins.sweeper import Sweeper

    Sweeper.validate_batch_is_legal = lambda self, batch: None  # type: ignore[method-assign]


# Sweeps of this process whose parent run is open: ended KILLED / FAILED when the process stops
# before on_multirun_end (Ctrl-C, SIGTERM, an exception: Hydra calls no callback then).
_ACTIVE: list["SweepTrackingCallback"] = []


def end_active_sweeps(status: str, reason: str) -> list[str]:
    """End the parent run of every open sweep of this process (and its children whose process
    is gone); returns the parent run ids ended."""
    ended = []
    for cb in list(_ACTIVE):
        if cb.end_interrupted(status, reason):
            ended.append(str(cb.parent_run_id))
    return ended


def _at_exit() -> None:
    app = sys.modules.get("harness.app")
    killed = bool(app is not None and getattr(app, "_SIGNALED", False))
    end_active_sweeps("KILLED" if killed else "FAILED",
                      "killed: a signal stopped the sweep" if killed else "the sweep process exited before the sweep ended")


atexit.register(_at_exit)


class SweepTrackingCallback(Callback):
    """Validates every job, opens the store, builds the table, opens the parent run, and closes
    it with a comparison table (or KILLED / FAILED when the sweep is stopped)."""

    def __init__(self) -> None:
        self.tracker = None
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.sweep_id: str | None = None
        self.uri: str | None = None
        self.results_dir: str | None = None
        self.closed = False

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Hydra turns a callback's exception into a warning and would launch the jobs anyway:
        a failure here exits instead, with ONE line ``error: <Kind>: <message>`` on stderr
        (exit 2 for bad input and an unusable store, 1 otherwise; ``HYDRA_FULL_ERROR=1`` shows
        the traceback). A parent run opened before the failure is ended FAILED."""
        import os

        from harness.errors import HarnessError
        from harness.runner import job

        job.install_signal_handlers()
        try:
            self._start(config)
        except Exception as exc:
            if self.parent_run_id is not None:
                self.end_interrupted("FAILED", f"the sweep could not start: {type(exc).__name__}: {exc}")
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            print(f"error: {type(exc).__name__}: {lines[0] if lines else type(exc).__name__}", file=sys.stderr, flush=True)
            raise SystemExit(2 if isinstance(exc, HarnessError) else 1) from None

    def _start(self, config: DictConfig) -> None:
        import os
        import tempfile

        from harness import app, console
        from harness.runner import job
        from harness.config import validate
        from harness.tracking import mlflow_tracker as mt

        validate(config)  # before any work
        if validate_sweep_jobs(config) is not None:  # every job composes and validates: no parent for a typo
            skip_hydra_revalidation()
        plain = app.to_plain(config)
        self.uri = mt.resolve_tracking_uri(plain["tracking"], app.launch_dir())
        # the store before the table: an unreachable server or a broken file fails in seconds
        self.tracker = mt.Tracker(self.uri, retries=int(plain["tracking"].get("retries", 5)))
        self.experiment_id = self.tracker.ensure_experiment(mt.experiment_name(plain), mt.artifact_location(self.uri))
        table = app.build_table(plain)
        handle_file = app.write_table_handle(plain, table)
        self.sweep_id = sweep_id_of(config)
        sweeper_params = OmegaConf.select(config, "hydra.sweeper.params") or {}
        params = {
            "sweep.task_overrides": mt._short(list(config.hydra.overrides.task)),
            "sweep.params": mt._short([f"{k}={v}" for k, v in sweeper_params.items()]),
        }
        # runs of this sweep left RUNNING by a process that is gone (kill -9, power loss)
        stale = self.tracker.mark_stale_runs(self.experiment_id, self.sweep_id, f"sweep {self.sweep_id}")
        self.parent_run_id = self.tracker.start_sweep_run(self.experiment_id, self.sweep_id, params)
        _ACTIVE.append(self)
        # the sweep's size and swept keys (run names, "[k/N] ... (eta)" lines); None if a sweep
        # syntax needs more than the basic sweeper's expansion
        try:
            n_jobs, swept = console.sweep_plan(
                list(config.hydra.overrides.task),
                OmegaConf.to_container(sweeper_params) if OmegaConf.is_config(sweeper_params) else dict(sweeper_params),
            )
        except Exception:  # noqa: BLE001 - only the console and the run names lose detail
            n_jobs, swept = None, None
        self.tracker.set_note(self.parent_run_id, mt.description(
            f"Sweep {self.sweep_id}: {n_jobs if n_jobs is not None else '?'} jobs; swept keys: "
            f"{', '.join(swept) if swept else '(none)'}",
            "\n".join(["params (preset sweep):", *[f"  {k}={v}" for k, v in sweeper_params.items()],
                       "overrides (command line):", *[f"  {o}" for o in config.hydra.overrides.task]]),
        ))
        self.tracker.set_tags(self.parent_run_id, {mt.TAG_GIT_COMMIT: mt.git_commit(), mt.TAG_DATASET: plain["dataset"]["name"]})
        self.results_dir = tempfile.mkdtemp(prefix="route-bench-sweep-")
        env = {job.ENV_SWEEP_ID: self.sweep_id, job.ENV_PARENT_RUN_ID: self.parent_run_id,
               job.ENV_SWEEP_PID: str(os.getpid()), job.ENV_SWEEP_RESULTS: self.results_dir}
        if handle_file is not None:
            env[app.ENV_TABLE_HANDLE] = str(handle_file)
        env.update(console.sweep_env(n_jobs, swept))  # last: its start time is when jobs begin
        with read_write(config.hydra.overrides), open_dict(config.hydra.overrides):
            extra = [f"++hydra.job.env_set.{k}={_quote(v)}" for k, v in env.items()]
            config.hydra.overrides.hydra = list(config.hydra.overrides.hydra) + extra
        if stale:
            print(f"[route-bench] sweep {self.sweep_id}: {len(stale)} run(s) left RUNNING by a process that is gone "
                  f"marked FAILED ({', '.join(stale)})")
        print(f"[route-bench] sweep {self.sweep_id}: {n_jobs if n_jobs is not None else '?'} jobs, parent run "
              f"{self.parent_run_id} in {self.uri}; one line per job (verbose=true: full summaries; "
              "every job's full text is in its Hydra job folder: app.log, result.json)")

    def end_interrupted(self, status: str, reason: str) -> bool:
        """End the open parent run ``status`` (KILLED on a signal) with ``reason``, after ending
        its children whose process is gone (a killed worker) or is this process; idempotent."""
        from harness.tracking import mlflow_tracker as mt

        if self.closed or self.tracker is None or self.parent_run_id is None:
            return False
        self.closed = True
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        try:
            self.tracker.end_orphans(self.experiment_id, self.parent_run_id, "KILLED" if status == "KILLED" else "FAILED",
                                     f"{reason} (the sweep stopped while this job ran)")
        except Exception:  # noqa: BLE001 - the next sweep ends them as stale
            pass
        try:
            self.tracker.set_tags(self.parent_run_id, {mt.TAG_END_REASON: reason})
            self.tracker.end_run(self.parent_run_id, status)
        except Exception:  # noqa: BLE001 - nothing more can be done on the way out
            return False
        finally:
            self._drop_results()
        return True

    def _drop_results(self) -> None:
        import shutil

        if self.results_dir:
            shutil.rmtree(self.results_dir, ignore_errors=True)
            self.results_dir = None

    def _job_records(self) -> list[dict]:
        import json
        from pathlib import Path

        records = []
        if self.results_dir and Path(self.results_dir).is_dir():
            for path in sorted(Path(self.results_dir).glob("*.json")):
                try:
                    records.append(json.loads(path.read_text(encoding="utf-8")))
                except (OSError, ValueError):
                    continue
        return records

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """The sweep's end (``harness.runner.sweep_end``): the job rows and every protocol's sweep
        stage on the parent run, which ends FINISHED (FAILED when a job failed); exit 1 then."""
        if self.tracker is None or self.closed:
            return
        from harness.runner import sweep_end
        from harness.tracking.mlflow_tracker import pick_runs

        # a job whose process died without ending its run (a crashed worker) is not left RUNNING
        self.tracker.end_orphans(self.experiment_id, self.parent_run_id, "FAILED",
                                 "the job's process ended without ending its run", wait_s=2.0)
        records = self._job_records()
        # one run per job config: a rerun's FINISHED run replaces the FAILED attempt it retried
        runs = pick_runs(self._children(records))
        try:
            outcome = sweep_end.close(
                self.tracker, self.parent_run_id, runs, records,
                configured=[str(n) for n in OmegaConf.select(config, "protocol.run", default=[]) or []],
                alpha=float(OmegaConf.select(config, "protocol.alpha", default=0.05)),
                n_boot=int(OmegaConf.select(config, "protocol.n_boot", default=1000)),
                metric=str(OmegaConf.select(config, "arms.metric", default="hit@10")),
            )
        finally:
            self.closed = True
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            self._drop_results()
        sweep_end.print_outcome(outcome, str(self.sweep_id), self.uri)
        if outcome.failed:
            # an exception would only become a warning (Hydra callbacks): exit non-zero instead
            print(f"[route-bench] sweep {self.sweep_id}: {outcome.failed} job(s) FAILED (error.txt in their runs)",
                  file=sys.stderr)
            raise SystemExit(1)

    def _children(self, records: list[dict]) -> list:
        """The sweep's child runs, plus the runs of other sweeps its jobs reused (same skip key)."""
        children = self.tracker.child_runs(self.experiment_id, self.parent_run_id)
        known = {r.info.run_id for r in children}
        for rec in records:
            rid = rec.get("run_id")
            if rec.get("status") == "SKIPPED" and rid and rid not in known:
                try:
                    children.append(self.tracker.client.get_run(rid))
                    known.add(rid)
                except Exception:  # noqa: BLE001 - deleted meanwhile: the job line said it
                    pass
        return children
