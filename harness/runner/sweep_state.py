"""What a sweep hands to each of its jobs: one JSON file, named by one environment variable.

The sweep callback (``harness.runner.sweep``) writes ``<sweep folder>/sweep.json`` once,
atomically, before any job starts, and sets ``ROUTE_BENCH_SWEEP_STATE=<that file>`` in every
job's process (``hydra.job.env_set``: the basic, joblib and Ray launchers all apply it). The
Hydra task function reads it once (``SweepState.from_env``) and passes it to ``run_job`` as an
argument; nothing else reads the environment for sweep state. No file: a single run.

The file's fields (all JSON):

- ``sweep_id``: the sweep's id (``harness.runner.sweep.sweep_id_of``), a tag of every job run;
- ``parent_run_id``: the sweep's parent run, the parent of every job run;
- ``sweep_pid``: the launching process (a joblib worker's watchdog exits when it dies);
- ``records_dir``: a folder where each job leaves ``<job number>.json`` (status, run id, error,
  the reason of a job not applicable to the table): the sweep counts jobs that failed without
  a run, lists the jobs not applicable and shows runs reused from other sweeps;
- ``start``: epoch seconds when the jobs began (the ``(eta ...)`` of each job's line);
- ``table_handle``: the built outcome table's handle file (``harness.app.write_table_handle``),
  null when the table has no file (synthetic: each job rebuilds it);
- ``n_jobs`` and ``swept_keys``: the sweep's size and the keys whose value differs between its
  jobs (``harness.console.sweep_plan``: ``[k/N]`` lines, run names), null when unknown.

User settings are not sweep state and stay environment variables of their own
(``ROUTE_BENCH_CLAIM_TIMEOUT_S``, ``ROUTE_BENCH_MAX_FILE_MB``, ``ROUTE_BENCH_DEBUG``).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from harness.io import atomic_write_text

ENV_SWEEP_STATE = "ROUTE_BENCH_SWEEP_STATE"
STATE_FILE = "sweep.json"
RECORD_KEYS = ("status", "run_id", "run_name", "error", "config_hash", "skip_key", "reused_sweep_id", "store_error",
               "reason")
# a job's status when its policy reads what the table lacks (harness.preflight.not_applicable):
# no run, the reason in its record; the sweep lists it apart and does not fail for it
NOT_APPLICABLE = "NOT_APPLICABLE"


@dataclass
class SweepState:
    """The sweep's state as its jobs see it (see the module docstring for each field)."""

    sweep_id: str
    parent_run_id: str
    sweep_pid: int
    records_dir: str
    start: float
    table_handle: str | None = None
    n_jobs: int | None = None
    swept_keys: list[str] | None = None
    jobs_validated: bool = False  # the sweep composed and validated every job before any ran

    def write(self, path: str | os.PathLike) -> Path:
        """Write the state to ``path`` atomically (a job never reads half a file)."""
        return atomic_write_text(Path(path), json.dumps(asdict(self), sort_keys=True, indent=1) + "\n")

    @classmethod
    def read(cls, path: str | os.PathLike) -> "SweepState":
        """The state in ``path``; StoreError naming the file when it is missing or not a state."""
        from harness.errors import StoreError

        try:
            body = json.loads(Path(path).read_text(encoding="utf-8"))
            known = {f.name for f in fields(cls)}
            return cls(**{k: v for k, v in body.items() if k in known})
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            raise StoreError(f"sweep state {str(path)!r} (${ENV_SWEEP_STATE}) cannot be read: "
                             f"{type(exc).__name__}: {exc}") from exc

    @classmethod
    def from_env(cls) -> "SweepState | None":
        """The state of the sweep this process's job belongs to; None for a single run."""
        path = os.environ.get(ENV_SWEEP_STATE)
        return cls.read(path) if path else None

    def write_record(self, job: Any, body: Mapping[str, Any]) -> Path | None:
        """The job's outcome for the sweep process (``<records_dir>/<k>.json``): it counts jobs
        that failed without a run and lists reused runs of other sweeps."""
        folder = Path(self.records_dir)
        if not folder.is_dir():
            return None
        try:
            num = str(int(job.job.num))
        except Exception:  # noqa: BLE001 - no Hydra job number
            num = f"pid{os.getpid()}-{time.time_ns()}"
        try:
            return atomic_write_text(folder / f"{num}.json",
                                     json.dumps({k: body.get(k) for k in RECORD_KEYS}, default=str, sort_keys=True))
        except OSError:
            return None
