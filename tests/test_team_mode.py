"""Team mode: a real ``mlflow server`` (SQLite backend, served artifacts) reached over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.report.cli import main as report_main
from harness.tracking.server import start_server
from tests.helpers.mlflow_layout import EXPERIMENT, JOBS, SWEEP_ID, populate_sweep

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with start_server(tmp_path_factory.mktemp("mlflow-server")) as srv:
        yield srv
    assert srv.process.poll() is not None, "server still running after stop()"


@pytest.mark.slow
def test_layout_over_http(server, tmp_path):
    from mlflow.tracking import MlflowClient

    ids = populate_sweep(server.url, tmp_dir=tmp_path)
    client = MlflowClient(tracking_uri=server.url)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None and exp.experiment_id == ids["experiment_id"]
    # artifacts are proxied by the server, not written to a path the client must reach
    assert exp.artifact_location.startswith("mlflow-artifacts:")

    runs = client.search_runs([exp.experiment_id], f"tags.`route_bench.sweep_id` = '{SWEEP_ID}'")
    parents = [r for r in runs if r.data.tags["route_bench.role"] == "sweep"]
    children = [r for r in runs if r.data.tags["route_bench.role"] == "job"]
    assert [p.info.run_id for p in parents] == [ids["parent"]]
    assert len(children) == len(JOBS) + 1  # + the failed attempt
    assert all(c.data.tags["mlflow.parentRunId"] == ids["parent"] for c in children)

    for name, rid in ids["jobs"].items():
        run = client.get_run(rid)
        assert run.info.status == "FINISHED"
        for k, v in JOBS[name]["metrics"].items():
            assert run.data.metrics[k] == pytest.approx(v)
        hist = client.get_metric_history(rid, "frontier/deployable/realized_usage")
        assert [h.value for h in sorted(hist, key=lambda h: h.step)] == list(JOBS[name]["usage"])
        dest = tmp_path / "dl" / rid
        dest.mkdir(parents=True)
        local = client.download_artifacts(rid, "decisions.parquet", str(dest))
        assert pd.read_parquet(local)["qid"].tolist() == ["q1", "q2"]
        summary = client.download_artifacts(rid, "summary.txt", str(dest))
        assert Path(summary).read_text() == f"policy={JOBS[name]['policy']}\n"
    # the artifact bytes live under the server's own artifacts folder
    assert list((server.workdir / "artifacts").rglob("decisions.parquet"))

    out = tmp_path / "report"
    assert report_main(["--sweep", SWEEP_ID, "--tracking-uri", server.url, "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert all(f"| {name} |" in md for name in JOBS)
    assert (out / "frontier.png").stat().st_size > 0


def test_missing_sweep_over_http_names_server(server, tmp_path, capsys):
    rc = report_main(["--sweep", "absent-sweep", "--tracking-uri", server.url,
                      "--out", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "absent-sweep" in err and server.url in err


@pytest.mark.slow
def test_app_sweep_against_server(server, tmp_path):
    """``python -m harness -m ... tracking=server tracking.uri=http://...``, then read it back."""
    from mlflow.tracking import MlflowClient

    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [
        sys.executable, "-m", "harness", "-m", "experiment=none", "dataset=synthetic",
        "policy=ridge,random", "protocol=threshold_budget", "tracking=server",
        f"tracking.uri={server.url}", "tracking.experiment=team-mode-e2e",
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "mlruns").exists(), "the sweep wrote a local store instead of the server"

    client = MlflowClient(tracking_uri=server.url)
    exp = client.get_experiment_by_name("team-mode-e2e")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("route_bench.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("route_bench.role") == "job"]
    assert len(parents) == 1, [r.data.tags.get("route_bench.role") for r in runs]
    assert sorted(c.data.tags["route_bench.policy"] for c in children) == ["random", "ridge"]
    for c in children:
        assert c.info.status == "FINISHED"
        assert c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert 0.0 <= c.data.metrics["heldout/hit_at_10"] <= 1.0
        names = {a.path for a in client.list_artifacts(c.info.run_id)}
        assert {"decisions.parquet", "config.yaml", "summary.txt"} <= names, names
        local = client.download_artifacts(c.info.run_id, "decisions.parquet", str(tmp_path))
        assert len(pd.read_parquet(local)) > 0
    sweep_id = parents[0].data.tags["route_bench.sweep_id"]
    out = tmp_path / "report"
    assert report_main(["--sweep", sweep_id, "--tracking-uri", server.url, "--out", str(out)]) == 0
    assert (out / "frontier.png").stat().st_size > 0
