"""Reading the tracking store: which URI, which experiments, which sweep, which runs.

Why one module: the report, the results page and the sweep's end all find a sweep's runs the
same way (by the tags of ``harness.store_schema``, one run per config hash); reading a store
is one concern, apart from writing it (``mlflow_tracker``).
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.config.store import tracking_uri_problem
from harness.errors import ConfigError, HarnessError
from harness.store_schema import DEFAULT_TRACKING_URI, TAG_CONFIG_HASH, TAG_ROLE, TAG_SWEEP_ID
from harness.tracking import store_file
from harness.tracking.store_client import TrackingStoreError, probe_store


class SweepNotFound(HarnessError):
    """No run carries the requested sweep id (or no sweep at all, for --latest)."""



def existing_store_uri(explicit: str | None) -> str:
    """--tracking-uri, else $MLFLOW_TRACKING_URI, else the harness default local store.

    A SQLite URI whose file does not exist or is no MLflow store is an error (reading must not
    create tables in a file).
    """
    uri = explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI
    # the key the URI came from: the option, the environment, or the default store
    key = ("--tracking-uri" if explicit else "MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI")
           else "--tracking-uri (default)")
    problem = tracking_uri_problem(uri)
    if problem:
        raise ConfigError(key, problem)
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        if not db.is_file():
            raise ConfigError(key, f"tracking store {uri} does not exist (no file {db})")
        # another program's database, an empty file, a half-created store: said before MLflow
        # would write its tables into it
        problem = store_file.refusal(db, store_file.inspect_store(db), reading=True)
        if problem:
            raise ConfigError(key, problem)
    return uri


def open_client(uri: str):
    """A client of the store ``uri``; a server that does not answer as MLflow does is refused in
    seconds first (``probe_store``), naming ``--tracking-uri``."""
    from mlflow.tracking import MlflowClient

    try:
        probe_store(uri)
    except TrackingStoreError as exc:
        raise TrackingStoreError(f"--tracking-uri: {exc}") from None
    return MlflowClient(tracking_uri=uri)


def experiments(client, name: str | None, uri: str) -> list:
    if name is not None:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise ConfigError("--experiment", f"no experiment named {name!r} in {uri}")
        return [exp]
    out, token = [], None
    while True:
        page = client.search_experiments(max_results=1000, page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def search_runs(client, exp_ids: list[str], filter_string: str, order_by=None) -> list:
    out, token = [], None
    while True:
        page = client.search_runs(
            exp_ids, filter_string=filter_string, max_results=1000,
            order_by=order_by, page_token=token,
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def newest_job(client, exp_ids: list[str]):
    runs = client.search_runs(
        exp_ids, filter_string=f"tags.`{TAG_ROLE}` = 'job'", max_results=1,
        order_by=["attributes.start_time DESC"],
    )
    return runs[0] if runs and runs[0].data.tags.get(TAG_SWEEP_ID) else None


def find_latest_sweep_id(client, exp_ids: list[str], uri: str) -> str:
    """The sweep whose newest job run started last (a rerun reuses its sweep's parent run, so
    the parent's own start time would point at the sweep first launched, not the last one run)."""
    run = newest_job(client, exp_ids)
    if run is None:
        raise SweepNotFound(f"no sweep (job run tagged {TAG_SWEEP_ID}) in tracking store {uri}")
    return run.data.tags[TAG_SWEEP_ID]


def pick_latest_sweep(client, exps: list, uri: str, explicit: bool) -> tuple[str, object, str]:
    """``--latest``: (sweep id, its experiment, why). The sweep whose newest job run started
    last, in ONE experiment (the one of that run; with ``--experiment``, that one): a sweep id is
    only compared within its experiment. ``why`` names the experiment and, without
    ``--experiment``, the other experiments that hold sweeps."""
    run = newest_job(client, [e.experiment_id for e in exps])
    if run is None:
        raise SweepNotFound(f"no sweep (job run tagged {TAG_SWEEP_ID}) in tracking store {uri}")
    sweep_id = run.data.tags[TAG_SWEEP_ID]
    exp = next(e for e in exps if e.experiment_id == run.info.experiment_id)
    why = f"picked sweep {sweep_id}: the sweep with the most recent job run in experiment {exp.name!r}"
    if explicit:
        return sweep_id, exp, why + " (--experiment)"
    others = [e.name for e in exps
              if e.experiment_id != exp.experiment_id and newest_job(client, [e.experiment_id]) is not None]
    if others:
        why += (f"; other experiments: {', '.join(repr(n) for n in sorted(others))} "
                f"({len(others) + 1} experiments hold sweeps; --experiment NAME picks the latest of one)")
    else:
        why += "; other experiments: none hold sweeps"
    return sweep_id, exp, why


def metric_series(client, run_id: str, keys: list[str]) -> dict[str, list[tuple[int, float]]]:
    out = {}
    for key in keys:
        hist = client.get_metric_history(run_id, key)
        by_step = {}
        for m in sorted(hist, key=lambda m: (m.step, m.timestamp)):
            by_step[int(m.step)] = float(m.value)  # last logged value per step wins
        out[key] = sorted(by_step.items())
    return out


def pick_runs(children: list) -> list:
    """One run per config hash: latest FINISHED, else latest of any status (see module doc)."""
    groups: dict[str, list] = {}
    for r in children:
        groups.setdefault(r.data.tags.get(TAG_CONFIG_HASH, r.info.run_id), []).append(r)
    picked = []
    for runs in groups.values():
        runs = sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True)
        finished = [r for r in runs if r.info.status == "FINISHED"]
        picked.append(finished[0] if finished else runs[0])
    return sorted(picked, key=lambda r: (r.info.run_name or "", r.info.run_id))
