"""Real sweeps through the CLI (``python -m harness``) on a small synthetic table, and the
MLflow store they log to: the arguments, the runner and the runs by role.

Why here: the app-sweep, console, decision-table, gain-comparison and store-copy tests all run
such sweeps and read them back the same way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mlflow.tracking import MlflowClient

from harness.store_schema import TAG_ROLE

SMALL = ["dataset=synthetic", "dataset.n_docs=30", "dataset.questions_per_doc=4", "experiment=none"]
EXPERIMENT = "synthetic/keep-vs-hybrid"


def run_cli(args, cwd: Path, cache: Path, env_extra=None):
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache), **(env_extra or {})}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=540)
    return proc


def store_uri(directory: Path) -> str:
    return f"sqlite:///{directory / 'mlruns' / 'mlflow.db'}"


def runs_by_role(uri: str):
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get(TAG_ROLE) == "sweep"]
    jobs = [r for r in runs if r.data.tags.get(TAG_ROLE) == "job"]
    return client, parents, jobs
