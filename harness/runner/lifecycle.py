"""One job's run from its creation to its end: who the job is (``JobContext``) and the one
context manager that ends its run FINISHED, FAILED or KILLED (``tracked_run``).

Why one place: every way a job can stop must leave its run ended, and only one of them may say
FINISHED, after the last thing is logged:

- the body returns: the run ends FINISHED (a run reused from an earlier FINISHED one is left
  as it is); a half-logged run is never FINISHED, since ending it is the last step;
- any ``Exception``: the run ends FAILED with the traceback in ``error.txt``; a sweep job that
  failed before its run existed still gets a FAILED run with its params (unless the store
  itself failed); a sweep job's error is swallowed (``TrackedRun.failure`` holds its result, the
  sweep goes on), a single run's re-raised;
- KeyboardInterrupt or :class:`harness.runner.process.Terminated` (SIGTERM): the run ends
  KILLED with the reason in ``route_bench.end_reason`` (naming the plugin call it hit, if any:
  ``harness.plugin_guard``), and the signal propagates;
- SystemExit (``sys.exit``) or any other exception that is neither: the run ends FAILED like
  on an ``Exception``, the error naming where it was raised (a plugin's calls are guarded
  where they are made and say so themselves; this is the net under code no guard wraps), so a
  job never ends with its run RUNNING nor a command with status 0 because a plugin said so.

Each end leaves one line (a sweep job: ``[k/N] ...``), the full text in the job's log file and
``result.json`` (``JobContext.finish``).
"""

from __future__ import annotations

import os
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.plugin_guard import ended_early, stopped_in
from harness.store_schema import TAG_END_REASON, TAG_HOST, TAG_PID, TAG_SKIP_KEY
from harness.runner.process import Terminated, set_job_active, signal_name
from harness.runner.sweep_state import SweepState
from harness.secrets import redact_secrets

ENV_CLAIM_TIMEOUT = "ROUTE_BENCH_CLAIM_TIMEOUT_S"  # how long a job waits for another's claim
CLAIM_TIMEOUT_S = 3600.0


def claim_timeout_s() -> float:
    raw = os.environ.get(ENV_CLAIM_TIMEOUT)
    try:
        return float(raw) if raw else CLAIM_TIMEOUT_S
    except ValueError:
        return CLAIM_TIMEOUT_S


_TRACKERS: dict[tuple[str, int], Any] = {}


def open_tracker(uri: str, retries: int):
    """The process's tracker for ``uri``: opened (probed, schema checked) by the first job, then
    reused by the next jobs of a sweep that run in this process (opening costs tens of ms)."""
    from harness.tracking import mlflow_tracker as mt

    key = (uri, int(retries))
    if key not in _TRACKERS:
        _TRACKERS[key] = mt.Tracker(uri, retries=retries)
    return _TRACKERS[key]


@dataclass
class JobContext:
    """Who the job is, fixed before anything is tracked: config, run name, store, tags."""

    plain: dict  # the resolved config; ``prepare`` sets a derived cost.c in it before params are logged
    checked: Any  # the config as a DictConfig (validated)
    job: Any  # the Hydra job's config (number, overrides, folder), None outside Hydra
    sweep: SweepState | None  # None: a single run
    name: str
    uri: str
    experiment: str
    config_hash: str
    tags: dict
    verbose: bool
    log: Any  # the job's log file (``harness.console.job_logger``)
    result: dict = field(default_factory=dict)  # result.json's body so far

    @property
    def in_sweep(self) -> bool:
        return self.sweep is not None

    def finish(self, status: str, run_id: str | None, line: str, text: str, **extra) -> None:
        """One line to the console (in a sweep), the full text to the job's log, result.json."""
        from harness import console

        exp_id = self.result.get("experiment_id")
        self.log.info("%s -> run %s (%s, experiment %s, %s)\n%s\n\n%s", self.name, run_id, status, self.experiment,
                      self.uri, line, text)
        body = {**self.result, "status": status, "run_id": run_id,
                "ui_path": f"#/experiments/{exp_id}/runs/{run_id}" if run_id and exp_id else None, **extra}
        console.write_result(self.job, body)
        if self.sweep is not None:
            self.sweep.write_record(self.job, body)
            print(console.progress_line(self.job, self.name, line, self.sweep.n_jobs, self.sweep.start), flush=True)


class TrackedRun:
    """The job's store and run while the job works (``tracked_run`` ends the run)."""

    def __init__(self, ctx: JobContext, tmp: Path):
        self.ctx, self.tmp = ctx, Path(tmp)
        self.artifacts = self.tmp / "artifacts"  # what the run logs as artifacts
        self.artifacts.mkdir()
        self.tracker: Any = None
        self.experiment_id: str | None = None
        self.run_id: str | None = None
        self.reused: Any = None  # the claim whose FINISHED run (same skip key) this job reuses
        self.failure: dict | None = None  # run_job's result when a sweep job FAILED

    def open_store(self) -> None:
        """The store first: an unreachable server or a broken file fails before any table work."""
        from harness.tracking import naming

        ctx = self.ctx
        self.tracker = open_tracker(ctx.uri, int(ctx.plain["tracking"].get("retries", 5)))
        self.experiment_id = self.tracker.ensure_experiment(ctx.experiment, naming.artifact_location(ctx.uri))
        ctx.result["experiment_id"] = self.experiment_id

    def start(self, key: str) -> bool:
        """Claim the job (a sweep job: reuse a FINISHED run with skip key ``key``, wait for a
        live one, or create its own) or create its run (a single run), then log its params.
        False when a FINISHED run is reused (``self.reused``): nothing to compute."""
        from harness.tracking import naming, processes

        ctx = self.ctx
        if ctx.sweep is not None:
            claim = self.tracker.claim_job(
                self.experiment_id, ctx.name, ctx.tags, key, ctx.sweep.parent_run_id,
                reuse_finished=bool(ctx.plain["tracking"].get("skip_finished", True)),
                timeout_s=claim_timeout_s(), on_wait=self._waiting,
            )
            if claim.reused is not None:
                self.reused = claim
                return False
            self.run_id = claim.run_id
        else:
            self.run_id = self.tracker.start_job_run(self.experiment_id, ctx.name,
                                                     {**ctx.tags, TAG_SKIP_KEY: key, **processes.process_identity()})
        set_job_active(True)
        self.tracker.log_params(self.run_id, naming.flatten_params(redact_secrets(ctx.plain)))
        return True

    def _waiting(self, holder) -> None:
        t = holder.data.tags
        msg = (f"{self.ctx.name}: waiting for run {holder.info.run_id} (process {t.get(TAG_PID, '?')} on "
               f"{t.get(TAG_HOST, '?')} is running the same job)")
        self.ctx.log.info(msg)
        print(f"[route-bench] {msg}", flush=True)

    def log(self, outputs: Any) -> None:
        """Log what the job computed (``harness.runner.job.RunOutputs``): metrics and series,
        tags, the description, the input dataset, the artifact folder."""
        from harness.tracking import run_notes

        self.tracker.log_metrics(self.run_id, outputs.series)
        self.tracker.set_tags(self.run_id, outputs.tags)
        self.tracker.set_note(self.run_id, run_notes.description(f"{self.ctx.name} -> {outputs.headline}", outputs.summary))
        self.tracker.log_dataset(self.run_id, **outputs.dataset)
        self.tracker.log_artifacts(self.run_id, outputs.files)

    # ---- the three ends (``tracked_run`` calls them) ----
    def _end_finished(self) -> None:
        if self.run_id is not None and self.reused is None:
            self.tracker.end_run(self.run_id, "FINISHED")

    def _end_killed(self, exc: BaseException) -> None:
        how = signal_name(exc)
        if stopped_in(exc):  # it hit a plugin's call (harness.plugin_guard): named
            how = f"{how} in {stopped_in(exc)}"
        if self.run_id is not None and self.tracker is not None:
            try:  # quickly: a second signal would cut this short
                self.tracker.set_tags(self.run_id, {TAG_END_REASON: f"killed: {how} while the job ran"})
                self.tracker.end_run(self.run_id, "KILLED")
            except Exception:  # noqa: BLE001 - the next sweep ends it as stale
                pass
        self.ctx.finish("KILLED", self.run_id, f"KILLED (run {self.run_id}): {how}", f"interrupted by {how}", error=how)

    def _end_failed(self, exc: Exception) -> None:
        from harness.tracking import store_client

        ctx = self.ctx
        error = self._fail_run("".join(traceback.format_exception(exc)), exc)
        first = (str(exc).strip().splitlines() or [""])[0]
        first = first if len(first) <= 160 else first[:157] + "..."  # all of it: app.log, error.txt
        where = f"run {self.run_id}" if self.run_id else "no run"
        # a store that cannot take writes (a full disk) stops the sweep at its end (``store_error``)
        extra = {"store_error": str(exc)} if isinstance(exc, store_client.StoreWriteError) else {}
        ctx.finish("FAILED", self.run_id, f"FAILED ({where}): {type(exc).__name__}: {first}", error, error=str(exc), **extra)
        if not ctx.in_sweep and self.run_id is not None:  # nothing tracked: the error line on stderr says it all
            print(f"[route-bench] FAILED {ctx.name} ({where}): {type(exc).__name__}: {exc}", flush=True)
        self.failure = {"status": "FAILED", "run_id": self.run_id, "metrics": {}, "error": str(exc)}

    def _fail_run(self, error: str, exc: Exception) -> str:
        """A FAILED run with the error, also when a sweep job failed before its run existed;
        returns ``error``, plus a line when the store could not take it."""
        from harness.tracking import naming, processes, store_client

        if self.tracker is None:
            return error
        ctx = self.ctx
        try:
            if self.run_id is None and ctx.sweep is not None and not isinstance(exc, store_client.TrackingStoreError):
                self.run_id = self.tracker.start_job_run(self.experiment_id, ctx.name, {**ctx.tags, **processes.process_identity()},
                                                         parent_run_id=ctx.sweep.parent_run_id)
                self.tracker.log_params(self.run_id, naming.flatten_params(redact_secrets(ctx.plain)))
            if self.run_id is not None:
                self.tracker.fail_run(self.run_id, error, artifact_dir=self.tmp)
        except Exception as store_exc:  # noqa: BLE001 - the store itself fails: say so
            error += f"\n(the run could not be marked FAILED: {type(store_exc).__name__}: {store_exc})\n"
        return error


@contextmanager
def tracked_run(ctx: JobContext, tmp: Path) -> Iterator[TrackedRun]:
    """The job's run, ended FINISHED when the body returns, FAILED on an exception (a single
    run re-raises, a sweep job's result is ``TrackedRun.failure``), KILLED on a signal (which
    propagates); see the module docstring. ``tmp``: a folder that outlives the block."""
    run = TrackedRun(ctx, tmp)
    try:
        yield run
        run._end_finished()  # last: a half-logged run is never FINISHED
    except (KeyboardInterrupt, Terminated) as exc:
        run._end_killed(exc)
        raise
    except Exception as exc:
        run._end_failed(exc)
        if not ctx.in_sweep:
            raise
    except BaseException as exc:  # sys.exit (or the like) from code no plugin guard wraps: FAILED too
        error = ended_early(exc)
        error.__cause__ = exc
        run._end_failed(error)
        if not ctx.in_sweep:
            raise error from exc
    finally:
        set_job_active(False)
