"""A copied store reads its own artifacts: a tiny sweep, its ``mlruns/`` copied elsewhere and the
original deleted; the report and a run's artifacts are read from the copy (the store records
absolute paths, ``harness.tracking.artifact_root``), and the first write on the copy rewrites
them, so plain MLflow (what ``mlflow ui`` reads) finds the copy's artifacts too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from harness.tracking import mlflow_tracker as mt, naming
from harness.store_schema import TAG_POLICY
from harness.tracking.artifact_root import ROOT_NAME, ROOT_TAG, own_root
from harness.tracking.sweep_jobs import local_artifact
from tests.helpers.sweeps import EXPERIMENT, SMALL, run_cli, runs_by_role, store_uri

pytestmark = pytest.mark.slow


def test_a_copied_store_reads_its_own_artifacts(tmp_path):
    first, second = tmp_path / "first", tmp_path / "moved" / "here"
    first.mkdir()
    second.mkdir(parents=True)
    proc = run_cli(["-m", *SMALL, "policy=always_keep,ridge", "cost.c=0.02", "protocol=threshold_budget"], first,
                   tmp_path / "cache")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    client, _, jobs = runs_by_role(store_uri(first))
    assert client.get_experiment_by_name(EXPERIMENT).tags.get(ROOT_TAG) == ROOT_NAME
    ridge = next(j for j in jobs if j.data.tags[TAG_POLICY] == "ridge")
    shutil.copytree(first / "mlruns", second / "mlruns")
    shutil.rmtree(first / "mlruns")

    uri = store_uri(second)
    copy = MlflowClient(tracking_uri=uri)
    run = copy.get_run(ridge.info.run_id)
    assert str(first) in run.info.artifact_uri  # what MLflow recorded: the deleted original
    own = local_artifact(run, "frontiers.parquet", uri)
    assert own is not None and own.is_relative_to(second / "mlruns" / ROOT_NAME)
    assert len(pd.read_parquet(own))

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    rep = subprocess.run([sys.executable, "-m", "harness", "report", "--latest", "--tracking-uri", uri, "--out",
                          str(second / "report")], cwd=second, env=env, capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    md = (second / "report" / "report.md").read_text(encoding="utf-8")
    verdicts = md[md.index("## Verdicts"):md.index("## Decision table")]
    assert "| 0.02 | 0.25 |" in verdicts  # the verdicts need the jobs' per-question artifacts
    assert "### Budget 0.25" in md and "ridge" in md[md.index("### Budget 0.25"):]
    assert not (first / "mlruns").exists()  # reading wrote nothing back to the old place
    assert str(first) in copy.get_run(ridge.info.run_id).info.artifact_uri  # nor into the store

    # the first write on the copy moves the recorded roots to it: plain MLflow reads the copy
    tracker = mt.Tracker(uri)
    tracker.ensure_experiment(EXPERIMENT, naming.artifact_location(uri))
    run = copy.get_run(ridge.info.run_id)
    assert run.info.artifact_uri.startswith(own_root(uri) + "/")
    assert copy.get_experiment_by_name(EXPERIMENT).artifact_location == own_root(uri)
    got = copy.download_artifacts(run.info.run_id, "frontiers.parquet", str(tmp_path / "dl"))
    assert pd.read_parquet(got).equals(pd.read_parquet(own))
    assert not (first / "mlruns").exists()
