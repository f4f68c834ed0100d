"""The store's experiments and runs: experiments, parent/child runs, FAILED and stale runs, and
skip-if-finished claims of jobs (``Tracker``).

Layout (shared with the report command; see docs/sweeps.md; names and params:
``harness.tracking.naming``):

- Experiment ``<dataset.name>/<base>-vs-<extra>``; one parent run per sweep (``<id[:8]> sweep``,
  tags ``route_bench.sweep_id``, ``route_bench.role=sweep``); one child run per job (tags
  ``mlflow.parentRunId``, ``route_bench.sweep_id``, ``route_bench.role=job``,
  ``route_bench.config_hash``, ``route_bench.policy``). A single run (no -m) has role ``single``
  and no parent. Every job run also carries ``route_bench.dataset``, ``route_bench.arms``,
  ``route_bench.budget_grid``, ``route_bench.git_commit``, a description (``mlflow.note.content``:
  headline and summary) and its input dataset (``log_dataset``).
- Run names (``harness.console.run_name``): a single run ``<policy> c=<c> seed=<seed>``; a sweep
  job the policy name plus every key the sweep varies (``ridge(features=qpp) seed=1``).
- Metric names: the protocol's slash-separated names passed through ``mlflow_name``
  (``harness.tracking.naming``: ``heldout/hit@10`` is logged as ``heldout/hit_at_10``).
- Frontier series: ``frontier/<frontier>/<column>`` with step = budget in percent.
- Headline metrics (a few columns to compare runs by; each protocol's
  ``Protocol.headline_metrics``): the built-ins' ``headline/utility``, ``headline/<metric>``,
  ``headline/extra_share``, ``headline/deployable_utility@<budget>``.

Where: opening the store and retrying its calls ``harness.tracking.store_client``; which process
runs a run ``harness.tracking.processes``; descriptions ``harness.tracking.run_notes``; what a
run logs ``harness.tracking.run_logging``; here, the experiments, the runs' lifecycle and the
claims of jobs.

Reliability guarantees (docs/sweeps.md):

- **Fail fast on a store that cannot work.** ``Tracker(uri)`` probes an HTTP(S) tracking server
  (one MLflow API call, 6 s in all: ``store_client.probe_store``) before anything else and
  raises :class:`TrackingStoreError` naming the URL when it does not answer, errs or answers
  something other than MLflow (MLflow's own client would retry for minutes); a SQLite file that
  is not an MLflow store (another program's database, an empty file, a folder, unreadable) is a
  TrackingStoreError naming the file, before anything is written to it. Both end the command in
  one line (``error: TrackingStoreError: ...``). Transient errors of a working store ("database
  is locked") are still retried with backoff; a write the storage refuses (a full disk) is a
  ``StoreWriteError`` at once (``harness.tracking.store_space``).
- **Schema creation is serialised and atomic.** Opening a SQLite store holds a file lock in the
  store's folder (``.route-bench.lock``); a missing store is built in a temporary file and
  renamed into place, a half-created one that holds nothing is made anew
  (``harness.tracking.store_file``), and MLflow's schema-creation race with processes outside
  that lock ("duplicate column name", "table ... already exists") is retried, so two sweeps on
  a fresh store both start.
- **Every run says which process runs it.** Job and sweep runs carry ``route_bench.host``,
  ``route_bench.pid`` and ``route_bench.proc_start`` (the process's start time from
  ``/proc/<pid>/stat``, so a reused pid is not mistaken for the original process). A RUNNING run
  whose host is this host and whose process is gone is *stale* (:func:`process_alive` False);
  it is ended FAILED with the reason in ``route_bench.end_reason``. Runs of another host are
  never declared stale (their process cannot be checked from here).
- **A job is claimed atomically** (:meth:`Tracker.claim_job`). Its *skip key* (config hash,
  outcome-table fingerprint, code version; ``harness.runner.job.skip_key``) is a run tag. For a SQLite
  store, under the store folder's claim lock (``.route-bench-claims.lock``): a FINISHED job run
  with the key is reused; a live RUNNING one (another sweep running the same job now) is waited
  for, polling, until it ends; else this process creates its RUNNING run with the key. So two
  concurrent sweeps of one command never run a job twice. A server store has no shared lock:
  the claim is "search, create, search again"; of several RUNNING claims the oldest (start
  time, then run id) wins and the others delete their run and wait. What remains there: a
  server that answers searches with stale data (e.g. a replicated database) could let both
  run; on a single-database server the second search always sees the first claim.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from harness.errors import HarnessError
from harness.store_schema import (
    TAG_CONFIG_HASH, TAG_END_REASON, TAG_ERROR, TAG_HOST, TAG_PARENT, TAG_PID, TAG_ROLE, TAG_SKIP_KEY, TAG_SWEEP_ID,
)
from harness.tracking.naming import sweep_run_name
from harness.tracking.processes import process_alive, process_identity
from harness.tracking.run_logging import RunLogging

# MLflow's experiment kind ("custom model development": the runs table first, for the 3.x UIs
# that read it; 3.17 decides by the address instead, ``naming.experiment_ui_path``) and the
# metric its UI treats as the experiment's primary one
EXPERIMENT_TAGS = {
    "mlflow.experimentKind": "custom_model_development",
    "mlflow.experiment.primaryMetric.name": "heldout/utility",
    "mlflow.experiment.primaryMetric.greaterIsBetter": "true",
}


class ClaimTimeout(HarnessError):
    """Another live process kept a job claimed longer than the wait allows."""


@dataclass
class Claim:
    """What :meth:`Tracker.claim_job` decided: run the job as ``run_id`` (a new RUNNING run),
    or reuse the FINISHED run ``reused``; ``waited_for``: the run of another process that
    was waited for first (None if none)."""

    run_id: str | None = None
    reused: Any = None
    waited_for: str | None = None


class Tracker(RunLogging):
    """A thin, retrying wrapper of ``MlflowClient`` bound to one tracking URI.

    Parallel joblib workers share one SQLite file: every store call is retried with backoff
    when SQLite reports the database as locked (``retries`` attempts). Opening probes a server
    and checks a SQLite file first (``TrackingStoreError`` in seconds, naming the URL or file).
    """

    # ---- experiments and runs -------------------------------------------------------------
    def ensure_experiment(self, name: str, artifact_location: str | None = None) -> str:
        """Id of experiment ``name``, created if missing (safe when two processes race), with
        ``EXPERIMENT_TAGS``: the MLflow UIs that read the kind then open it on its runs table,
        not on the GenAI views (traces, evaluation runs) they guess for an experiment of unknown
        kind. MLflow 3.17's UI ignores the tag: the address does it (``experiment_ui_path``)."""
        from mlflow.exceptions import MlflowException

        from harness.tracking.artifact_root import ROOT_NAME, ROOT_TAG, own_root, relocate

        if artifact_location is not None and artifact_location == own_root(self.uri):
            # the store's own artifacts/ folder: tagged as relative to the store, and a copied
            # store's recorded roots rewritten to it before any run is created (``artifact_root``)
            self._retry(lambda: relocate(self.uri))
            own_root = {ROOT_TAG: ROOT_NAME}
        else:
            own_root = {}
        exp = self._retry(lambda: self.client.get_experiment_by_name(name))
        if exp is None:
            try:
                exp_id = self._retry(lambda: self.client.create_experiment(name, artifact_location=artifact_location))
            except MlflowException:
                exp = self._retry(lambda: self.client.get_experiment_by_name(name))
                if exp is None:
                    raise
                exp_id = exp.experiment_id
        else:
            exp_id = exp.experiment_id
        tags = dict(exp.tags) if exp is not None else {}
        if exp is not None and own_root and exp.artifact_location.rstrip("/") != artifact_location.rstrip("/"):
            own_root = {}  # an experiment with a root of its own (made elsewhere) keeps it, untagged
        for key, value in {**EXPERIMENT_TAGS, **own_root}.items():
            if key not in tags:  # a kind the user chose in the UI stays
                self._retry(lambda k=key, v=value: self.client.set_experiment_tag(exp_id, k, v))
        return exp_id

    def search(self, experiment_id: str, filter_string: str, max_results: int = 10_000) -> list:
        return self._retry(
            lambda: self.client.search_runs(
                [experiment_id], filter_string=filter_string, max_results=max_results,
                order_by=["attributes.start_time ASC"],
            )
        )

    def find_sweep_run(self, experiment_id: str, sweep_id: str):
        runs = self.search(
            experiment_id, f"tags.`{TAG_SWEEP_ID}` = '{sweep_id}' and tags.`{TAG_ROLE}` = 'sweep'"
        )
        return runs[0] if runs else None

    def start_sweep_run(self, experiment_id: str, sweep_id: str, params: Mapping[str, str]) -> str:
        """The parent run of sweep ``sweep_id``: reused (set RUNNING again) when the same sweep
        is rerun, so its children stay under one parent. Found or created under the store's
        claim lock, so two concurrent sweeps of one command share one parent."""
        ident = process_identity()
        self.check_room()
        with self.store_lock():
            existing = self.find_sweep_run(experiment_id, sweep_id)
            if existing is not None:
                run_id = existing.info.run_id
                self._retry(lambda: self.client.update_run(run_id, status="RUNNING"))
                self.set_tags(run_id, ident)
                if TAG_END_REASON in existing.data.tags:  # why the last attempt ended is history now
                    self._retry(lambda: self.client.delete_tag(run_id, TAG_END_REASON))
                return run_id
            run = self._retry(
                lambda: self.client.create_run(
                    experiment_id,
                    run_name=sweep_run_name(sweep_id),
                    tags={TAG_SWEEP_ID: sweep_id, TAG_ROLE: "sweep", **ident},
                )
            )
        self.log_params(run.info.run_id, params)
        return run.info.run_id

    def find_finished_job(self, experiment_id: str, sweep_id: str, cfg_hash: str):
        runs = self.search(
            experiment_id,
            f"tags.`{TAG_SWEEP_ID}` = '{sweep_id}' and tags.`{TAG_CONFIG_HASH}` = '{cfg_hash}'"
            " and attributes.status = 'FINISHED'",
        )
        return runs[0] if runs else None

    def find_finished_key(self, experiment_id: str, skip_key: str):
        """The newest FINISHED job run with skip key ``skip_key`` in the experiment, any sweep."""
        runs = self.search(
            experiment_id,
            f"tags.`{TAG_SKIP_KEY}` = '{skip_key}' and tags.`{TAG_ROLE}` = 'job' and attributes.status = 'FINISHED'",
        )
        return runs[-1] if runs else None

    def end_stale(self, run, reason: str, status: str = "FAILED") -> None:
        """End a RUNNING run whose process is gone, saying why (``route_bench.end_reason``)."""
        run_id = run.info.run_id
        self.set_tags(run_id, {TAG_END_REASON: reason})
        self.end_run(run_id, status)

    def _stale_reason(self, run, found_by: str) -> str:
        tags = run.data.tags
        return (f"stale: process {tags.get(TAG_PID)} on {tags.get(TAG_HOST)} that ran it is gone "
                f"(found by {found_by}, pid {os.getpid()}, {time.strftime('%Y-%m-%dT%H:%M:%S%z')})")

    def mark_stale_runs(self, experiment_id: str, sweep_id: str, found_by: str = "a new sweep") -> list[str]:
        """End FAILED every RUNNING job run of sweep ``sweep_id`` whose process is provably gone
        (same host, pid not alive or reused); runs of live or unknown processes stay."""
        runs = self.search(
            experiment_id,
            f"tags.`{TAG_SWEEP_ID}` = '{sweep_id}' and tags.`{TAG_ROLE}` = 'job' and attributes.status = 'RUNNING'",
        )
        ended = []
        for run in runs:
            if process_alive(run.data.tags) is False:
                self.end_stale(run, self._stale_reason(run, found_by))
                ended.append(run.info.run_id)
        return ended

    def end_orphans(self, experiment_id: str, parent_run_id: str, status: str, reason: str,
                    wait_s: float = 5.0) -> list[str]:
        """End the RUNNING children of ``parent_run_id`` whose process is gone (a killed worker),
        waiting up to ``wait_s`` for live ones to end themselves; returns the ended run ids."""
        deadline = time.monotonic() + wait_s
        ended: list[str] = []
        while True:
            running = [r for r in self.child_runs(experiment_id, parent_run_id) if r.info.status == "RUNNING"]
            live = []
            for run in running:
                mine = run.data.tags.get(TAG_PID) == str(os.getpid()) and run.data.tags.get(TAG_HOST) == socket.gethostname()
                alive = process_alive(run.data.tags)
                if alive is False or mine:  # this process runs no job any more when it ends its sweep
                    self.end_stale(run, reason, status)
                    ended.append(run.info.run_id)
                elif alive is True:
                    live.append(run)
            if not live or time.monotonic() >= deadline:
                return ended
            time.sleep(0.25)

    def claim_job(
        self, experiment_id: str, run_name: str, tags: Mapping[str, str], skip_key: str,
        parent_run_id: str | None = None, *, reuse_finished: bool = True, timeout_s: float = 3600.0,
        poll_s: float = 1.0, on_wait: Callable[[Any], None] | None = None,
    ) -> Claim:
        """Reuse a FINISHED run with ``skip_key``, wait for a live RUNNING one, or create this
        process's RUNNING run tagged with it (see the module docstring: atomic under the claim
        lock for SQLite, search-create-search for servers). A RUNNING claim of a process that is
        gone is ended FAILED (stale) and does not count. Raises ClaimTimeout when a live claim
        is held longer than ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        self.check_room()  # after a full disk stopped a job, the next ones start no run
        tags = {**dict(tags), TAG_SKIP_KEY: skip_key, **process_identity()}
        waited_for: str | None = None
        while True:
            with self.store_lock() as locked:
                if reuse_finished:
                    done = self.find_finished_key(experiment_id, skip_key)
                    if done is not None:
                        return Claim(reused=done, waited_for=waited_for)
                holder = self._live_claim(experiment_id, skip_key)
                if holder is None and reuse_finished:
                    # a claim can end (FINISHED) between the two searches above, since ending a run
                    # takes no lock: runs only go RUNNING -> ended, so looking again closes the gap
                    done = self.find_finished_key(experiment_id, skip_key)
                    if done is not None:
                        return Claim(reused=done, waited_for=waited_for)
                if holder is None:
                    run_id = self.start_job_run(experiment_id, run_name, tags, parent_run_id=parent_run_id)
                    if locked:
                        return Claim(run_id=run_id, waited_for=waited_for)
                    holder = self._older_claim(experiment_id, skip_key, run_id)
                    if holder is None:
                        return Claim(run_id=run_id, waited_for=waited_for)
                    self._retry(lambda: self.client.delete_run(run_id))  # yield to the older claim
            if waited_for is None:
                waited_for = holder.info.run_id
                if on_wait is not None:
                    on_wait(holder)
            if time.monotonic() >= deadline:
                t = holder.data.tags
                raise ClaimTimeout(
                    f"job is still being run by process {t.get(TAG_PID, '?')} on {t.get(TAG_HOST, '?')} "
                    f"(run {holder.info.run_id}) after {timeout_s:.0f}s of waiting"
                )
            time.sleep(poll_s)

    def _running_with_key(self, experiment_id: str, skip_key: str) -> list:
        return self.search(
            experiment_id,
            f"tags.`{TAG_SKIP_KEY}` = '{skip_key}' and tags.`{TAG_ROLE}` = 'job' and attributes.status = 'RUNNING'",
        )

    def _live_claim(self, experiment_id: str, skip_key: str):
        """The RUNNING run holding ``skip_key`` whose process is alive (or on another host)."""
        for run in self._running_with_key(experiment_id, skip_key):
            if process_alive(run.data.tags) is False:
                self.end_stale(run, self._stale_reason(run, "a job claiming the same skip key"))
                continue
            return run
        return None

    def _older_claim(self, experiment_id: str, skip_key: str, mine: str):
        """A live RUNNING claim older than run ``mine`` (start time, then run id), else None."""
        runs = [r for r in self._running_with_key(experiment_id, skip_key)
                if r.info.run_id == mine or process_alive(r.data.tags) is not False]
        if not runs:
            return None
        first = min(runs, key=lambda r: (r.info.start_time or 0, r.info.run_id))
        return None if first.info.run_id == mine else first

    def start_job_run(
        self, experiment_id: str, run_name: str, tags: Mapping[str, str], parent_run_id: str | None = None
    ) -> str:
        tags = dict(tags)
        if parent_run_id:
            tags[TAG_PARENT] = parent_run_id
        self.check_room()
        run = self._retry(lambda: self.client.create_run(experiment_id, run_name=run_name, tags=tags))
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self._retry(lambda: self.client.set_terminated(run_id, status=status))

    def child_runs(self, experiment_id: str, parent_run_id: str) -> list:
        return self.search(experiment_id, f"tags.`{TAG_PARENT}` = '{parent_run_id}'")

    def fail_run(self, run_id: str, error_text: str, artifact_dir: str | os.PathLike | None = None) -> None:
        """Mark a run FAILED with the error as tag (first 5000 chars) and ``error.txt``."""
        try:
            self.set_tags(run_id, {TAG_ERROR: error_text})
            if artifact_dir is not None:
                path = Path(artifact_dir) / "error.txt"
                path.write_text(error_text, encoding="utf-8")
                self._retry(lambda: self.client.log_artifact(run_id, str(path)))
        finally:
            self.end_run(run_id, "FAILED")
