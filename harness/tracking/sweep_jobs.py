"""MLflow runs -> the store-neutral ``SweepJob`` records a protocol's sweep stage reads.

Why here: only the tracking layer knows MLflow's run objects and artifact repositories; the
sweep stages (``harness.protocols.sweep_stage``) see params, metrics, tags and a function that
opens an artifact. The sweep's end and the ``report`` command build their records and run the
sweep stages here (``sweep_stages``), so both read a run's artifacts the same way: in place
when the run's artifacts are on this machine (a SQLite or file store's ``file://`` root), else
downloaded once into ``folder``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.protocols.sweep_stage import SweepContext, SweepJob, run_sweep_stages, sweep_protocols

PROGRESS_ENV = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


def local_artifact(run: Any, name: str, tracking_uri: str | None = None) -> Path | None:
    """The artifact's own file when the run's artifacts live on this machine, else None; in a
    local SQLite store, found in the store's own folder first (``artifact_root``: a copied
    store reads its copy, not the folder the run recorded)."""
    from harness.tracking.artifact_root import run_artifact_dir

    folder = run_artifact_dir(tracking_uri, run.info.run_id, str(getattr(run.info, "artifact_uri", "") or ""))
    path = None if folder is None else folder / name
    return path if path is not None and path.is_file() else None


def download_artifact(client: Any, run_id: str, name: str, folder: Path) -> Path | None:
    """``name`` of run ``run_id`` downloaded into ``folder`` (None when the run has none).
    MLflow's per-file progress bar is off for it (dozens of bars would bury the sweep's tables
    and the report's one-line errors) unless the user set ``MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR``."""
    quiet = PROGRESS_ENV not in os.environ
    if quiet:
        os.environ[PROGRESS_ENV] = "false"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return Path(client.download_artifacts(run_id, name, str(folder)))
    except Exception:  # noqa: BLE001 - a run without the artifact is reported by the stage, not fatal
        return None
    finally:
        if quiet:
            os.environ.pop(PROGRESS_ENV, None)


def sweep_job(client: Any, run: Any, folder: Path) -> SweepJob:
    """One MLflow run as a SweepJob; its artifacts are read in place or downloaded (once each)
    into ``folder/<run id>``."""
    run_id = run.info.run_id
    fetched: dict[str, Path | None] = {}

    def open_artifact(name: str) -> Path | None:
        if name not in fetched:
            fetched[name] = local_artifact(run, name, getattr(client, "tracking_uri", None)) or download_artifact(client, run_id, name, folder / run_id)
        return fetched[name]

    return SweepJob(run_id=run_id, run_name=run.info.run_name or run_id, status=run.info.status,
                    params=dict(run.data.params), metrics=dict(run.data.metrics), tags=dict(run.data.tags),
                    open_artifact=open_artifact)


def sweep_jobs(client: Any, runs: list, folder: Path) -> list[SweepJob]:
    """``runs`` (one per job config, see ``pick_runs``) as SweepJobs, in the same order."""
    return [sweep_job(client, r, Path(folder)) for r in runs]


def sweep_stages(client: Any, runs: list, configured: list[str], alpha: float, n_boot: int, metric: str,
                 folder: Path) -> dict:
    """Every protocol's sweep stage over the runs (``harness.protocols.sweep_stage``)."""
    jobs = sweep_jobs(client, runs, folder)
    ctx = SweepContext(alpha=alpha, n_boot=n_boot, metric=metric)
    return run_sweep_stages(jobs, sweep_protocols(jobs, configured), ctx)
