"""A real two-node Ray cluster on this machine: a head on 127.0.0.1 and a second raylet joined
with ``ray start --address``, each with its own CPUs. ``executor=ray`` builds the base table and
the answer blocks through it (llama.cpp generating in the workers); every number equals a local
build's (timings aside) under the same keys, and a worker killed during the build is retried by
Ray, with nothing half-written. A sweep sent to the cluster by the Hydra Ray launcher
(``hydra/launcher=ray_cluster``), its jobs logging to an ``mlflow server``, gives the basic
launcher's metrics to the last digit. The cluster is stopped at the end.

Skipped where Ray is not installed, and where a Ray of someone else's already runs here (stopping
the test's cluster stops every Ray on the machine). The killed worker was seen running a shard
when it was killed; that Ray then ran its task again is shown by the table being whole, not
observed directly (a worker may finish between the look and the kill)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.executor import local_threads
from harness.tracking.server import start_server
from tests.helpers.faults import ANSWER_BLOCKS, ANSWER_BUILD, _block_folder, _table_folder, run
from tests.helpers.mlflow_layout import same_metrics
from tests.helpers.qasper import _copies

pytest.importorskip("ray")

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
FIXTURE = REPO / "tests" / "fixtures" / "data" / "qasper-fixture-v0.3.json"
CEILING_S = 900


def _ray_env() -> dict:
    # a test cluster on loopback: no token to share between the nodes and the driver
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}


def _ray_running() -> bool:
    return subprocess.run(["pgrep", "-f", "raylet"], capture_output=True).returncode == 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    if shutil.which("pgrep") is None or _ray_running():
        pytest.skip("a Ray already runs on this machine (or pgrep is missing): stopping the test's cluster would stop it")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rb-ray-")  # short: Ray's socket paths must fit in 107 bytes
    # the nodes' own environment has no usable cache folder and no tracking URI: what a build or
    # a sweep job needs of the driver's must be handed over, not inherited by chance
    blocked = Path(temp) / "no-cache-here"
    blocked.write_text("a file, not a folder")
    env = {**_ray_env(), "HARNESS_CACHE_DIR": str(blocked)}
    env.pop("MLFLOW_TRACKING_URI", None)
    # each node holds one task of the default size (executor.num_cpus=auto: this machine's torch
    # threads) and at least 2 CPUs; logical CPUs, as Ray counts them
    cpus = max(2, local_threads())
    try:
        subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", f"--num-cpus={cpus}",
                        "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats"],
                       env=env, check=True, capture_output=True, timeout=300)
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", f"--num-cpus={cpus}"], env=env, check=True,
                       capture_output=True, timeout=300)
        deadline = time.monotonic() + 120
        while True:  # both raylets registered
            status = subprocess.run([RAY, "status", f"--address=127.0.0.1:{port}"], env=env, capture_output=True,
                                    text=True, timeout=120).stdout
            if f"/{2 * cpus}.0 CPU" in status:
                break
            assert time.monotonic() < deadline, status
            time.sleep(1)
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=300)
        shutil.rmtree(temp, ignore_errors=True)


def _non_timing(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[[c for c in frame.columns if not c.endswith("_ms") and "seconds" not in c]]


def _ray_build(args: list[str], cwd: Path, address: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args, "executor=ray", f"executor.address={address}"],
                          cwd=cwd, env={**_ray_env(), "HARNESS_CACHE_DIR": str(cwd / "cache")}, capture_output=True,
                          text=True, timeout=CEILING_S)


@pytest.mark.slow
def test_a_table_and_answer_blocks_built_on_two_raylets_equal_a_local_build(tmp_path, cluster):
    args = [*ANSWER_BUILD, f"dataset.path={FIXTURE}", "arms.shard_size=1"]
    local, remote = tmp_path / "local", tmp_path / "ray"
    local.mkdir()
    remote.mkdir()
    ref = run(args, local)
    assert ref.returncode == 0, ref.stderr[-2000:]
    got = _ray_build(args, remote, cluster)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    a, b = _table_folder(local / "cache"), _table_folder(remote / "cache")
    assert a.name == b.name  # the same key
    assert json.loads((b / "info.json").read_text())["executor"] == "ray"
    assert json.loads((b / "info.json").read_text())["counts"]["shards_computed"] == 2
    pd.testing.assert_frame_equal(_non_timing(pd.read_parquet(b / "table.parquet")),
                                  _non_timing(pd.read_parquet(a / "table.parquet")))
    for name in ANSWER_BLOCKS:
        x, y = _block_folder(local / "cache", name), _block_folder(remote / "cache", name)
        assert x.name == y.name
        frame = pd.read_parquet(y / "block.parquet")
        assert len(frame) == 6 and frame.filter(like=".answer").notna().all().all()
        pd.testing.assert_frame_equal(_non_timing(frame), _non_timing(pd.read_parquet(x / "block.parquet")))


def _task_workers() -> list[int]:
    """Ray workers running a shard now (Ray titles a busy worker ``ray::<task name>``)."""
    found = subprocess.run(["pgrep", "-f", "route-bench:shard_frame"], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


@pytest.mark.slow
def test_a_worker_killed_during_the_build_is_retried_and_the_table_is_whole(tmp_path, cluster):
    data = _copies(tmp_path / "qasper.json", 24)  # 48 pools, one shard each
    args = ["table", "build", "dataset=qasper", f"dataset.path={data}", "arms.shard_size=1"]
    local, remote = tmp_path / "local", tmp_path / "ray"
    local.mkdir()
    remote.mkdir()
    ref = run(args, local)
    assert ref.returncode == 0, ref.stderr[-2000:]
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args, "executor=ray", f"executor.address={cluster}"],
                            cwd=remote, env={**_ray_env(), "HARNESS_CACHE_DIR": str(remote / "cache")},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    try:
        deadline = time.monotonic() + CEILING_S
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            busy = _task_workers()
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed = busy[0]
            time.sleep(0.05)
        out, err = proc.communicate(timeout=CEILING_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed is not None, "no worker was seen running a shard"
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    folder = _table_folder(remote / "cache")
    info = json.loads((folder / "info.json").read_text())
    assert info["counts"]["shards_computed"] == 48 and info["executor"] == "ray"
    assert not list(folder.rglob("*.tmp"))
    pd.testing.assert_frame_equal(_non_timing(pd.read_parquet(folder / "table.parquet")),
                                  _non_timing(pd.read_parquet(_table_folder(local / "cache") / "table.parquet")))


@pytest.mark.parametrize("setting, key", [("executor.num_cpus=4096", "executor.num_cpus"),
                                          ("executor.num_gpus=1", "executor.num_gpus")])
@pytest.mark.slow
def test_a_task_no_node_can_hold_is_one_line_not_a_wait(tmp_path, cluster, setting, key):
    args = ["table", "build", "dataset=qasper", f"dataset.path={FIXTURE}", setting]
    got = _ray_build(args, tmp_path, cluster)
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2 and lines[-1].startswith(f"error: ConfigError: config key '{key}'"), got.stderr[-2000:]
    assert "Traceback" not in got.stderr and not list((tmp_path / "cache").glob("tables/*/table.parquet"))


def _jobs(uri: str) -> tuple[set[str], dict[str, dict[str, float]], set[str]]:
    """The sweep ids, each job's metrics (by policy) and the processes that ran the jobs (their
    pids, without the sweep's own) in a store; every run FINISHED."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert runs and all(r.info.status == "FINISHED" for r in runs), [(r.info.run_name, r.info.status) for r in runs]
    jobs = [r for r in runs if r.data.tags.get("route_bench.role") == "job"]
    (sweep,) = [r for r in runs if r.data.tags.get("route_bench.role") == "sweep"]
    return ({r.data.tags["route_bench.sweep_id"] for r in runs},
            {r.data.tags["route_bench.policy"]: dict(r.data.metrics) for r in jobs},
            {r.data.tags["route_bench.pid"] for r in jobs} - {sweep.data.tags["route_bench.pid"]})


@pytest.mark.slow
def test_a_sweep_on_the_cluster_logs_the_basic_launchers_metrics_to_a_served_store(tmp_path, cluster):
    """The same sweep twice: the basic launcher into a local SQLite store, and the Ray launcher
    on the two-raylet cluster into an ``mlflow server``. The tracking URI comes from
    MLFLOW_TRACKING_URI and the cache from HARNESS_CACHE_DIR, both only in the driver's
    environment (the nodes have no tracking URI and an unusable cache folder): the jobs log
    where the driver logs only if the launcher hands the URI over, and use the driver's cache
    (the sweep's state, the table) with the folder handed over too. Both nodes are on this
    machine, so a shared folder is shared by construction here; on separate machines the cache
    must be on shared storage (docs/launchers.md)."""
    data = _copies(tmp_path / "qasper.json", 8)  # 16 papers, 24 yes/no questions
    sweep = ["-m", "experiment=none", "dataset=qasper", f"dataset.path={data}", "policy=ridge,random",
             "protocol.min_heldout=4"]

    def run_sweep(name: str, uri: str, launcher: list[str]) -> subprocess.CompletedProcess:
        work = tmp_path / name
        work.mkdir()
        env = {**_ray_env(), "HARNESS_CACHE_DIR": str(tmp_path / "cache"), "MLFLOW_TRACKING_URI": uri}
        got = subprocess.run([sys.executable, "-m", "harness", *sweep, f"hydra.sweep.dir={work / 'multirun'}",
                              *launcher], cwd=work, env=env, capture_output=True, text=True, timeout=CEILING_S)
        assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-3000:]
        assert not (work / "mlruns").exists()
        return got

    local_uri = f"sqlite:///{tmp_path / 'basic.db'}"
    run_sweep("basic", local_uri, [])
    with start_server(tmp_path / "server") as server:
        got = run_sweep("cluster", server.url, ["hydra/launcher=ray_cluster",
                                                f"hydra.launcher.ray.init.address={cluster}"])
        served_ids, served, workers = _jobs(server.url)
        assert list((server.workdir / "artifacts").rglob("decisions.parquet"))  # stored by the server
    local_ids, local, in_sweep = _jobs(local_uri)
    # the basic launcher runs its jobs in the sweep's process; the cluster in Ray's workers
    assert not in_sweep and workers, (in_sweep, workers)
    assert served_ids == local_ids and len(local_ids) == 1  # the same sweep
    assert sorted(served) == sorted(local) == ["random", "ridge"]
    for policy in local:
        assert "heldout/utility" in local[policy] and "frontier/exact_auc" in local[policy]
        assert same_metrics(served[policy], local[policy]), policy
