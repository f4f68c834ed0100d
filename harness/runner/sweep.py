"""Hydra callback that turns a multirun into one tracked sweep.

Why a callback: work that every job would repeat (building the outcome table, creating the
MLflow experiment and the sweep's parent run) is done ONCE, in the launching process, before any
job starts; parallel joblib workers then only read the cached Parquet and add child runs to an
existing experiment.

The callback hands the sweep's state to its jobs in one file (``harness.runner.sweep_state``:
the sweep id, the parent run id, the table-handle file, the sweep process's pid for the joblib
workers' watchdog, a folder for per-job records, the number of jobs, the swept keys and the
start time) and names it in one variable, ``ROUTE_BENCH_SWEEP_STATE``, appended as
``hydra.job.env_set`` to the sweep's Hydra overrides (every launcher composes each job from them).

Sweep id: the first 12 hex digits of the digest of (the command line's task overrides, the
sweeper's params, the resolved base config without ``hydra``; ``verbose`` left out). The same
sweep command gives the same id, hence the same parent run. Jobs are skipped by their skip key
(``harness.runner.job.skip_key``), across sweeps.

Order of ``on_multirun_start``, and why:

1. every job's config is composed with Hydra's own loader (``load_sweep_config``, the
   launcher's call) and validated (``harness.runner.sweep_check``): a mistyped value
   (``policy=ridge,ridgee``) ends the sweep in one line naming the key and value, exit 2,
   before any run exists (Hydra only composes a job when it launches it);
2. the store is opened (``Tracker``: an unreachable server or a corrupt file fails in seconds);
3. the outcome table is built, and every job's policy checked against it
   (``sweep_check.check_applicable``): a policy named on the command line that reads features
   the table lacks ends the sweep in one line (exit 2); such jobs of the preset's policy list
   create no run and are listed as not applicable at the end (their own lines say why);
4. RUNNING job runs of this sweep id whose process is provably gone (kill -9) are ended FAILED
   with a reason; the parent run is found or created under the store's lock, and gets the
   table's rescued/lost list (``rescued_lost-<base>-vs-<extra>-<metric>.csv``, as ``table build``
   writes it).
5. the sweep's state file is written and named in every job's environment.

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
from harness.store_schema import TAG_DATASET, TAG_END_REASON, TAG_GIT_COMMIT
from harness.runner.sweep_check import check_applicable, skip_hydra_revalidation, sweeper_params, validate_sweep_jobs

JOB_RECORDS = "jobs"  # the sweep folder's subfolder where each job leaves its record


NOT_A_SWEEP = ("executor", "limits")  # top-level keys that change no number: not part of the sweep id


def sweep_id_of(config: DictConfig) -> str:
    """Deterministic id of a sweep (see module docstring)."""
    from harness.app import to_plain
    from harness.console import PRESENTATION_KEYS

    # keys that only change what is printed (verbose), where a build runs (executor) or how long
    # a plugin may take (limits) do not make another sweep
    def shown_only(override: str) -> bool:
        key = override.lstrip("+~").partition("=")[0]
        return key in PRESENTATION_KEYS or key.split(".", 1)[0] in NOT_A_SWEEP

    task_overrides = [o for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False) if not shown_only(o)]
    base = {k: v for k, v in to_plain(config).items() if k not in PRESENTATION_KEYS and k not in NOT_A_SWEEP}
    return digest_of({"task_overrides": task_overrides, "sweeper_params": sweeper_params(config), "base": base})[:12]


def _plan(config: DictConfig) -> tuple[int | None, list[str] | None]:
    """The sweep's size and swept keys (run names, ``[k/N] ... (eta)`` lines); (None, None) if a
    sweep syntax needs more than the basic sweeper's expansion."""
    from hydra.core.global_hydra import GlobalHydra

    from harness import console

    try:
        loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
        return console.sweep_plan(list(config.hydra.overrides.task), sweeper_params(config), loader)
    except Exception:  # noqa: BLE001 - only the console and the run names lose detail
        return None, None


def _state_parent() -> str | None:
    """Where a sweep's state folder goes: the cache's ``app/sweeps`` (shared by a cluster's
    nodes), else (a cache that cannot be written) the system's temporary folder, which only jobs
    on this machine can read."""
    from harness.io import cache_root

    try:
        parent = cache_root() / "app" / "sweeps"
        parent.mkdir(parents=True, exist_ok=True)
        return str(parent)
    except Exception:  # noqa: BLE001 - HarnessError or OSError: a local sweep still works
        return None


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"




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
    process = sys.modules.get("harness.runner.process")  # where SIGTERM / SIGHUP are recorded
    killed = bool(process is not None and process.signaled())
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
        self.jobs_validated = False  # every job composed and validated at the start (sweep_check)

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
            self._drop_results()  # the state folder of a sweep that never started
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            print(f"error: {type(exc).__name__}: {lines[0] if lines else type(exc).__name__}", file=sys.stderr, flush=True)
            raise SystemExit(2 if isinstance(exc, HarnessError) else 1) from None
        except BaseException:  # a stop signal: with a parent run, its handler ends it and drops the folder
            if self.parent_run_id is None:
                self._drop_results()
            raise

    def _start(self, config: DictConfig) -> None:
        from harness import app
        from harness.config.validation import validate
        from harness.preflight import check_sizes, preflight_tags
        from harness.protocols.registry import plan_protocols
        from harness.runner import job

        validate(config)  # before any work
        self._reserve_state(config)  # named in the jobs' configs before they are composed: composed once
        jobs = validate_sweep_jobs(config)
        self.jobs_validated = jobs is not None
        if self.jobs_validated:  # every job composes and validates: no parent for a typo
            skip_hydra_revalidation()
        plain = app.to_plain(config)
        self._open_store(plain)  # the store before the table: an unreachable server or a broken file fails in seconds
        table = app.build_table(plain)
        task = app.make_task(plain, table)
        # before any job: a task too small for a protocol's splits (for any policy: untrained), or
        # a held-out set too small to decide anything, is refused (exit 2); arms that agree on
        # every question are said once here and tagged on the parent run
        check_sizes(task, plan_protocols(plain), plain, trainable=False)
        # policies that read what the table lacks: a named one refused now, the preset's skipped by their jobs
        check_applicable(config, jobs or {}, plain, task)
        handle_file = app.write_table_handle(plain, table)
        self.sweep_id = sweep_id_of(config)
        stale = self._open_parent(config)
        n_jobs, swept = _plan(config)
        self._describe_parent(config, plain, n_jobs, swept)
        self._log_rescued_lost(table, task)
        job.print_preflight(task)
        if preflight_tags(task):
            self.tracker.set_tags(self.parent_run_id, preflight_tags(task))
        self._hand_state(handle_file, n_jobs, swept)
        if stale:
            print(f"[route-bench] sweep {self.sweep_id}: {len(stale)} run(s) left RUNNING by a process that is gone "
                  f"marked FAILED ({', '.join(stale)})")
        print(f"[route-bench] sweep {self.sweep_id}: {n_jobs if n_jobs is not None else '?'} jobs, parent run "
              f"{self.parent_run_id} in {self.uri}; one line per job (verbose=true: full summaries; "
              "every job's full text is in its Hydra job folder: app.log, result.json)")

    def _open_store(self, plain: dict) -> None:
        from harness import app
        from harness.tracking import mlflow_tracker as mt, naming

        self.uri = naming.resolve_tracking_uri(plain["tracking"], app.launch_dir())
        self.tracker = mt.Tracker(self.uri, retries=int(plain["tracking"].get("retries", 5)))
        self.experiment_id = self.tracker.ensure_experiment(naming.experiment_name(plain), naming.artifact_location(self.uri))

    def _open_parent(self, config: DictConfig) -> list[str]:
        """End this sweep's runs left RUNNING by a process that is gone (kill -9, power loss),
        then find or create the parent run; returns the stale runs' ids."""
        from harness.tracking import naming

        preset = OmegaConf.select(config, "hydra.sweeper.params") or {}
        params = {
            "sweep.task_overrides": naming.short_param(list(config.hydra.overrides.task)),
            "sweep.params": naming.short_param([f"{k}={v}" for k, v in preset.items()]),
        }
        stale = self.tracker.mark_stale_runs(self.experiment_id, self.sweep_id, f"sweep {self.sweep_id}")
        self.parent_run_id = self.tracker.start_sweep_run(self.experiment_id, self.sweep_id, params)
        _ACTIVE.append(self)
        return stale

    def _describe_parent(self, config: DictConfig, plain: dict, n_jobs: int | None, swept: list[str] | None) -> None:
        """The parent run's description (size, swept keys, params and overrides) and tags."""
        from harness.tracking import naming, run_notes

        preset = OmegaConf.select(config, "hydra.sweeper.params") or {}
        self.tracker.set_note(self.parent_run_id, run_notes.description(
            f"Sweep {self.sweep_id}: {n_jobs if n_jobs is not None else '?'} jobs; swept keys: "
            f"{', '.join(swept) if swept else '(none)'}",
            "\n".join(["params (preset sweep):", *[f"  {k}={v}" for k, v in preset.items()],
                       "overrides (command line):", *[f"  {o}" for o in config.hydra.overrides.task]]),
        ))
        self.tracker.set_tags(self.parent_run_id, {TAG_GIT_COMMIT: naming.git_commit(), TAG_DATASET: plain["dataset"]["name"]})

    def _log_rescued_lost(self, table, task) -> None:
        """The table's rescued/lost list (questions where the pair's arms differ: text, each
        arm's top 3; ``harness.data.arm_summary``), as ``table build`` writes it, on the parent run."""
        import shutil
        import tempfile

        from harness.runner.table_commands import write_rescued_lost

        path, _ = write_rescued_lost(table, task)  # the cache's copy, written as table build writes it
        with tempfile.TemporaryDirectory(prefix="route-bench-sweep-list-") as tmp:
            shutil.copy(path, tmp)  # its folder may hold the lists of other pairs
            self.tracker.log_artifacts(self.parent_run_id, tmp)

    def _reserve_state(self, config: DictConfig) -> None:
        """A fresh folder for the sweep's state file (``harness.runner.sweep_state``) and the
        jobs' records, named in every job's environment before the jobs are composed (so the
        launcher's composition of each job is the validation's, ``keep_compositions``). The
        folder is in the cache (``app/sweeps``), which a cluster's nodes share at the same path:
        jobs that run on other machines (``hydra/launcher=ray_cluster``) read the state and
        leave their records there; removed when the sweep ends, or when it cannot start."""
        import tempfile
        from pathlib import Path

        from harness.runner.sweep_state import ENV_SWEEP_STATE, STATE_FILE

        self.results_dir = tempfile.mkdtemp(prefix="route-bench-sweep-", dir=_state_parent())
        (Path(self.results_dir) / JOB_RECORDS).mkdir()
        with read_write(config.hydra.overrides), open_dict(config.hydra.overrides):
            extra = [f"++hydra.job.env_set.{ENV_SWEEP_STATE}={_quote(str(Path(self.results_dir) / STATE_FILE))}"]
            config.hydra.overrides.hydra = list(config.hydra.overrides.hydra) + extra

    def _hand_state(self, handle_file, n_jobs: int | None, swept: list[str] | None) -> None:
        """Write the sweep's state file into the folder ``_reserve_state`` made, once the parent
        run and the table exist: the jobs read it when they start."""
        import os
        import time
        from pathlib import Path

        from harness.runner.sweep_state import STATE_FILE, SweepState

        records = Path(self.results_dir) / JOB_RECORDS
        state = SweepState(sweep_id=str(self.sweep_id), parent_run_id=str(self.parent_run_id), sweep_pid=os.getpid(),
                           records_dir=str(records), start=time.time(),  # when the jobs begin: their eta
                           table_handle=str(handle_file) if handle_file is not None else None,
                           n_jobs=n_jobs, swept_keys=list(swept) if swept is not None else None,
                           jobs_validated=self.jobs_validated)
        state.write(Path(self.results_dir) / STATE_FILE)

    def end_interrupted(self, status: str, reason: str) -> bool:
        """End the open parent run ``status`` (KILLED on a signal) with ``reason``, after ending
        its children whose process is gone (a killed worker) or is this process; idempotent."""
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
            self.tracker.set_tags(self.parent_run_id, {TAG_END_REASON: reason})
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
        if self.results_dir and (Path(self.results_dir) / JOB_RECORDS).is_dir():
            for path in sorted((Path(self.results_dir) / JOB_RECORDS).glob("*.json")):
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
        from harness.tracking.store_client import TrackingStoreError
        from harness.tracking.store_reader import pick_runs

        records = self._job_records()
        try:
            # a job whose process died without ending its run (a crashed worker) is not left RUNNING
            self.tracker.end_orphans(self.experiment_id, self.parent_run_id, "FAILED",
                                     "the job's process ended without ending its run", wait_s=2.0)
            # one run per job config: a rerun's FINISHED run replaces the FAILED attempt it retried
            runs = pick_runs(self._children(records))
            outcome = sweep_end.close(
                self.tracker, self.parent_run_id, runs, records,
                configured=[str(n) for n in OmegaConf.select(config, "protocol.run", default=[]) or []],
                alpha=float(OmegaConf.select(config, "protocol.alpha", default=0.05)),
                n_boot=int(OmegaConf.select(config, "protocol.n_boot", default=1000)),
                metric=str(OmegaConf.select(config, "arms.metric", default="hit@10")),
                title=f"Sweep {self.sweep_id}", sweep_id=str(self.sweep_id),
            )
        except TrackingStoreError as exc:  # the store itself failed (a full disk): one line, exit 2
            self._store_failed(str(exc))
        finally:
            self.closed = True
            if self in _ACTIVE:
                _ACTIVE.remove(self)
            self._drop_results()
        sweep_end.print_outcome(outcome, str(self.sweep_id), self.uri,
                                verbose=bool(OmegaConf.select(config, "verbose", default=False)),
                                experiment_id=self.experiment_id, parent_run_id=self.parent_run_id)
        store_error = next((r["store_error"] for r in records if r.get("store_error")), None)
        if store_error:
            self._store_failed(store_error)
        if outcome.failed:
            # an exception would only become a warning (Hydra callbacks): exit non-zero instead
            print(f"[route-bench] sweep {self.sweep_id}: {outcome.failed} job(s) FAILED (error.txt in their runs)",
                  file=sys.stderr)
            raise SystemExit(1)

    def _store_failed(self, error: str) -> None:
        """A store that cannot take writes (a full disk): its runs still RUNNING ended FAILED
        (``end_interrupted``, a no-op once the sweep's end closed them), then ONE line
        ``error: StoreWriteError: ...`` on stderr and exit 2 (a callback's exception would only
        be a warning)."""
        self.end_interrupted("FAILED", f"the tracking store failed: {error}")
        print(f"error: StoreWriteError: {error}".splitlines()[0], file=sys.stderr, flush=True)
        raise SystemExit(2)

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
