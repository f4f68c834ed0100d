"""Run life cycle pieces in-process (tmp SQLite stores): process liveness from run tags, the
atomic job claim (reuse, wait, stale claims, timeout), the skip key, store opening (schema race,
corrupt file, unreachable server) and a store error while a sweep job creates its run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir

from harness import app
from harness.runner import job as runner
from harness.store_schema import TAG_CONFIG_HASH, TAG_END_REASON, TAG_ERROR, TAG_HOST, TAG_PID, TAG_PROC_START, TAG_ROLE, TAG_SKIP_KEY, TAG_SWEEP_ID
from harness.runner.sweep_state import SweepState
from harness.tracking import mlflow_tracker as mt, naming, processes, store_client


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    return mt.Tracker(f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---- liveness ------------------------------------------------------------------------------------
def test_process_alive_from_tags():
    me = processes.process_identity()
    assert me[TAG_PID] == str(os.getpid()) and me[TAG_HOST]
    assert processes.process_alive(me) is True
    assert processes.process_alive({**me, TAG_PID: str(_dead_pid())}) is False
    if me[TAG_PROC_START]:  # a live pid whose start time differs: the pid was reused
        parent = processes.process_identity(os.getppid())
        assert processes.process_alive(parent) is True
        assert processes.process_alive({**parent, TAG_PROC_START: "1@" + me[TAG_PROC_START].split("@")[1]}) is False
    assert processes.process_alive({**me, TAG_HOST: "another-host.example"}) is None  # never declared stale
    assert processes.process_alive({}) is None


# ---- claims --------------------------------------------------------------------------------------
def _job_tags(sweep: str) -> dict:
    return {TAG_ROLE: "job", TAG_SWEEP_ID: sweep, TAG_CONFIG_HASH: "h"}


def test_claim_creates_then_reuses_a_finished_run_across_sweeps(tracker):
    exp = tracker.ensure_experiment("claims/reuse")
    first = tracker.claim_job(exp, "a", _job_tags("s1"), "key-1")
    assert first.reused is None and first.run_id
    run = tracker.client.get_run(first.run_id)
    assert run.info.status == "RUNNING" and run.data.tags[TAG_SKIP_KEY] == "key-1"
    assert run.data.tags[TAG_PID] == str(os.getpid())
    tracker.end_run(first.run_id, "FINISHED")
    again = tracker.claim_job(exp, "a", _job_tags("s2"), "key-1")  # another sweep id
    assert again.run_id is None and again.reused.info.run_id == first.run_id
    other = tracker.claim_job(exp, "a", _job_tags("s2"), "key-2")  # another key runs
    assert other.run_id and other.run_id != first.run_id
    forced = tracker.claim_job(exp, "a", _job_tags("s2"), "key-1", reuse_finished=False)
    assert forced.run_id not in (None, first.run_id)


def test_stale_claim_of_a_dead_process_is_failed_with_a_reason(tracker):
    exp = tracker.ensure_experiment("claims/stale")
    dead = {**processes.process_identity(), TAG_PID: str(_dead_pid())}
    stale = tracker.start_job_run(exp, "a", {**_job_tags("s"), TAG_SKIP_KEY: "k", **dead})
    claim = tracker.claim_job(exp, "a", _job_tags("s"), "k", timeout_s=5)
    assert claim.run_id and claim.run_id != stale and claim.waited_for is None
    run = tracker.client.get_run(stale)
    assert run.info.status == "FAILED"
    assert run.data.tags[TAG_END_REASON].startswith(f"stale: process {dead[TAG_PID]} on ")
    # the sweep-level sweep does the same for its own sweep id only
    dead2 = tracker.start_job_run(exp, "b", {**_job_tags("s"), **dead})
    other_sweep = tracker.start_job_run(exp, "b", {**_job_tags("t"), **dead})
    assert tracker.mark_stale_runs(exp, "s") == [dead2]
    assert tracker.client.get_run(other_sweep).info.status == "RUNNING"


def test_live_claim_is_waited_for_then_reused_or_times_out(tracker):
    exp = tracker.ensure_experiment("claims/wait")
    holder = tracker.start_job_run(exp, "a", {**_job_tags("s"), TAG_SKIP_KEY: "k", **processes.process_identity()})
    with pytest.raises(mt.ClaimTimeout, match=holder):
        tracker.claim_job(exp, "a", _job_tags("s"), "k", timeout_s=0.5, poll_s=0.1)
    seen = []

    def holder_finishes(run):  # the holder ends once the claim waits for it: no clock involved
        seen.append(run)
        tracker.end_run(holder, "FINISHED")

    claim = tracker.claim_job(exp, "a", _job_tags("s"), "k", timeout_s=600, poll_s=0.01, on_wait=holder_finishes)
    assert claim.reused.info.run_id == holder and claim.waited_for == holder
    assert [r.info.run_id for r in seen] == [holder]


def test_a_claim_that_ends_between_the_two_searches_is_reused_not_run_again(tracker, monkeypatch):
    """The other sweep's run is RUNNING when this claim looks for a FINISHED one and has FINISHED
    when it looks for a live one (ending a run takes no lock): the job must be reused, not run a
    second time (seen under saturation: two FINISHED runs with one skip key)."""
    exp = tracker.ensure_experiment("claims/ends-between")
    holder = tracker.start_job_run(exp, "a", {**_job_tags("s"), TAG_SKIP_KEY: "k", **processes.process_identity()})
    original = tracker._live_claim

    def ends_first(*args, **kwargs):
        tracker.end_run(holder, "FINISHED")
        return original(*args, **kwargs)

    monkeypatch.setattr(tracker, "_live_claim", ends_first)
    claim = tracker.claim_job(exp, "a", _job_tags("s"), "k", timeout_s=600, poll_s=0.01)
    assert claim.run_id is None and claim.reused is not None and claim.reused.info.run_id == holder
    assert [r.info.run_id for r in tracker.search(exp, f"tags.`{TAG_SKIP_KEY}` = 'k'")] == [holder]


def test_server_style_claim_yields_to_an_older_claim(tracker, monkeypatch):
    """Without a store lock (a server), a claim that finds an older RUNNING claim after creating
    its own deletes its run and waits."""
    exp = tracker.ensure_experiment("claims/server")
    original = tracker.start_job_run
    made = []

    def racing_start(*args, **kwargs):  # another process claims just before this one
        if not made:
            made.append(original(exp, "other", {**_job_tags("s"), TAG_SKIP_KEY: "k", **processes.process_identity()}))
            time.sleep(0.01)
        return original(*args, **kwargs)

    monkeypatch.setattr(tracker, "start_job_run", racing_start)
    monkeypatch.setattr(tracker, "store_lock", lambda *a, **k: _no_lock())
    waited = []

    def other_finishes(holder):  # the older claim ends once this one has yielded: no clock involved
        waited.append(holder.info.run_id)
        tracker.end_run(made[0], "FINISHED")

    claim = tracker.claim_job(exp, "a", _job_tags("s"), "k", timeout_s=600, poll_s=0.01, on_wait=other_finishes)
    assert waited == [made[0]] and claim.waited_for == made[0]
    assert claim.reused is not None and claim.reused.info.run_id == made[0]
    active = tracker.search(exp, f"tags.`{TAG_SKIP_KEY}` = 'k'")
    assert [r.info.run_id for r in active] == [made[0]]  # the yielded claim was deleted


class _no_lock:
    def __enter__(self):
        return False

    def __exit__(self, *exc):
        return False


# ---- skip key ------------------------------------------------------------------------------------
def test_skip_key_covers_config_table_and_code(monkeypatch):
    t1 = app.TableHandle(frame=None, key="k1", info={"table_sha256": "a" * 64})
    t2 = app.TableHandle(frame=None, key="k1", info={"table_sha256": "b" * 64})
    syn = app.TableHandle(frame=None, key="synthetic-x", info={})
    base = runner.skip_key("h1", t1)
    assert base == runner.skip_key("h1", t1)
    assert len({base, runner.skip_key("h2", t1), runner.skip_key("h1", t2), runner.skip_key("h1", syn)}) == 4
    monkeypatch.setattr(runner, "RESULTS_VERSION", runner.RESULTS_VERSION + 1)
    assert runner.skip_key("h1", t1) != base


def test_config_hash_is_independent_of_override_order():
    from harness.app import to_plain

    overrides = ["dataset=synthetic", "policy=ridge", "cost.c=0.05", "seed=3", "budget=fine"]
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        a = compose(config_name="config", overrides=overrides)
        b = compose(config_name="config", overrides=list(reversed(overrides)))
    assert naming.config_hash(to_plain(a)) == naming.config_hash(to_plain(b))


# ---- opening a store -----------------------------------------------------------------------------
def test_schema_creation_race_is_retried(tmp_path, monkeypatch):
    import mlflow.tracking
    from sqlalchemy.exc import OperationalError

    real = mlflow.tracking.MlflowClient
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("ALTER TABLE metrics ADD COLUMN step", {}, Exception("duplicate column name: step"))
        return real(*args, **kwargs)

    monkeypatch.setattr(mlflow.tracking, "MlflowClient", flaky)
    t = mt.Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(calls) == 2 and t.ensure_experiment("x")


def test_corrupt_or_folder_store_is_a_tracking_store_error(tmp_path):
    bad = tmp_path / "mlflow.db"
    bad.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(store_client.TrackingStoreError, match=str(bad)):
        mt.Tracker(f"sqlite:///{bad}")
    folder = tmp_path / "dir.db"
    folder.mkdir()
    with pytest.raises(store_client.TrackingStoreError, match="is a folder"):
        mt.Tracker(f"sqlite:///{folder}")


def test_probe_fails_fast_on_a_closed_port_and_passes_a_live_server():
    import http.server

    t0 = time.monotonic()
    with pytest.raises(store_client.TrackingStoreError, match=r"http://127\.0\.0\.1:9 does not answer"):
        store_client.probe_store("http://127.0.0.1:9")
    assert time.monotonic() - t0 < 15

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - what an MLflow server answers for an experiment no one made
            body = json.dumps({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no experiment"}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        store_client.probe_store(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
    store_client.probe_store("sqlite:///anything.db")  # other stores are not probed


# ---- a store error while a sweep job creates its run ---------------------------------------------
def test_store_error_creating_the_run_fails_the_job_not_the_sweep(tmp_path, monkeypatch, isolated_cache, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    records = tmp_path / "records"
    records.mkdir()
    out_dir = tmp_path / "job0"
    out_dir.mkdir()
    sweep = SweepState(sweep_id="sweep-x", parent_run_id="parent-x", sweep_pid=os.getpid(), records_dir=str(records),
                       start=time.time())

    def refuse(self, *args, **kwargs):
        raise RuntimeError("store refused: disk I/O error")

    monkeypatch.setattr(mt.Tracker, "start_job_run", refuse)
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset=synthetic", "dataset.n_docs=30", "experiment=none",
                                                       "protocol=threshold", "policy=always_keep", f"tracking.uri={uri}"])
    job = SimpleNamespace(job=SimpleNamespace(num=0), overrides=SimpleNamespace(task=["policy=always_keep"]),
                          runtime=SimpleNamespace(output_dir=str(out_dir)))
    out = runner.run_job(cfg, sweep=sweep, job=job)
    assert out["status"] == "FAILED" and out["run_id"] is None and "disk I/O error" in out["error"]
    result = json.loads((out_dir / "result.json").read_text())
    assert result["status"] == "FAILED" and result["run_id"] is None
    record = json.loads((records / "0.json").read_text())
    assert record["status"] == "FAILED" and record["run_id"] is None  # the sweep counts it
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "FAILED (no run): RuntimeError: store refused: disk I/O error" in line


# ---- the sweep's state file and the one context manager that ends a job's run -------------------
def test_sweep_state_round_trips_through_its_file_and_a_bad_file_is_one_clear_error(tmp_path, monkeypatch):
    from harness.errors import StoreError
    from harness.runner.sweep_state import ENV_SWEEP_STATE

    state = SweepState(sweep_id="abc", parent_run_id="p1", sweep_pid=123, records_dir=str(tmp_path), start=1.5,
                       table_handle=None, n_jobs=4, swept_keys=["policy", "cost.c"])
    path = state.write(tmp_path / "sweep.json")
    assert SweepState.read(path) == state
    monkeypatch.delenv(ENV_SWEEP_STATE, raising=False)
    assert SweepState.from_env() is None  # a single run
    monkeypatch.setenv(ENV_SWEEP_STATE, str(path))
    assert SweepState.from_env() == state
    (tmp_path / "bad.json").write_text("{not json")
    for bad in (tmp_path / "missing.json", tmp_path / "bad.json"):
        with pytest.raises(StoreError, match=ENV_SWEEP_STATE) as err:
            SweepState.read(bad)
        assert str(bad) in str(err.value)


def _small_cfg(uri: str, *extra: str):
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=["dataset=synthetic", "dataset.n_docs=30", "experiment=none",
                                                        "protocol=threshold", "policy=always_keep", f"tracking.uri={uri}",
                                                        *extra])


def _sweep_job(tmp_path, num: int = 0):
    records = tmp_path / "records"
    records.mkdir(exist_ok=True)
    sweep = SweepState(sweep_id="sweep-y", parent_run_id="parent-y", sweep_pid=os.getpid(), records_dir=str(records),
                       start=time.time(), n_jobs=1, swept_keys=[])
    job = SimpleNamespace(job=SimpleNamespace(num=num), overrides=SimpleNamespace(task=["policy=always_keep"]),
                          runtime=SimpleNamespace(output_dir=None))
    return sweep, job, records


def _only_run(uri: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    [exp] = [e for e in client.search_experiments() if e.name != "Default"]
    [run] = client.search_runs([exp.experiment_id])
    return client, run


def test_a_run_whose_logging_fails_ends_failed_never_finished(tmp_path, monkeypatch, isolated_cache):
    """The last logging step fails after every metric is logged: FAILED with error.txt, a single
    run re-raises, a sweep job returns FAILED (the sweep goes on) and records it."""
    def refuse(self, run_id, folder):
        raise RuntimeError("artifact store full")

    monkeypatch.setattr(mt.Tracker, "log_artifacts", refuse)
    uri = f"sqlite:///{tmp_path / 'single.db'}"
    with pytest.raises(RuntimeError, match="artifact store full"):
        runner.run_job(_small_cfg(uri))
    client, run = _only_run(uri)
    assert run.info.status == "FAILED" and run.data.metrics  # half-logged: metrics there, not FINISHED
    assert "artifact store full" in run.data.tags[TAG_ERROR]

    uri = f"sqlite:///{tmp_path / 'sweep.db'}"
    sweep, job, records = _sweep_job(tmp_path)
    out = runner.run_job(_small_cfg(uri), sweep=sweep, job=job)
    client, run = _only_run(uri)
    assert out["status"] == "FAILED" and out["run_id"] == run.info.run_id and run.info.status == "FAILED"
    assert json.loads((records / "0.json").read_text())["status"] == "FAILED"


def test_a_sweep_job_failing_before_its_run_exists_gets_a_failed_run(tmp_path, monkeypatch, isolated_cache):
    def broken(*args, **kwargs):
        raise ValueError("table unreadable")

    monkeypatch.setattr(runner, "load_table", broken)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    sweep, job, records = _sweep_job(tmp_path)
    out = runner.run_job(_small_cfg(uri), sweep=sweep, job=job)
    client, run = _only_run(uri)
    assert out["status"] == "FAILED" and out["run_id"] == run.info.run_id and run.info.status == "FAILED"
    assert run.data.params["policy.name"] == "always_keep" and run.data.tags[TAG_SWEEP_ID] == "sweep-y"
    assert "error.txt" in {a.path for a in client.list_artifacts(run.info.run_id)}


@pytest.mark.parametrize("signal_exc", [KeyboardInterrupt(), runner.Terminated(15)], ids=["sigint", "sigterm"])
def test_a_signal_during_the_compute_ends_the_run_killed_and_propagates(tmp_path, monkeypatch, isolated_cache,
                                                                       signal_exc):
    def interrupted(*args, **kwargs):
        raise signal_exc

    monkeypatch.setattr(runner, "compute_job", interrupted)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    sweep, job, records = _sweep_job(tmp_path)
    with pytest.raises(type(signal_exc)):
        runner.run_job(_small_cfg(uri), sweep=sweep, job=job)
    client, run = _only_run(uri)
    assert run.info.status == "KILLED" and run.data.tags[TAG_END_REASON].startswith("killed: SIG")
    assert json.loads((records / "0.json").read_text())["status"] == "KILLED"
