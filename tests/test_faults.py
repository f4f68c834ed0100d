"""Fault suite (issue "reliability": runs and reruns). Every scenario really runs the CLI in
subprocesses on small data with a temporary cache and tracking store, then checks the MLflow
store: no run is left RUNNING after Ctrl-C, SIGTERM or kill -9 (a rerun ends the stale ones
FAILED with a reason and finishes the sweep), a mistyped sweep value opens no parent run, two
concurrent sweeps never run a job twice, data fixed in place are not skipped, an unreachable
server or a corrupt store ends in one line, and a killed joblib sweep leaves no worker behind.

A job is made slow with the test-only policy ``tests.fault_policy.SlowKeep`` (environment
``ROUTE_BENCH_TEST_SLOW_S``), which also drops a marker file when it starts sleeping: the cue to
send the signal while the job runs.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.store_schema import TAG_CONFIG_HASH, TAG_END_REASON, TAG_PID, TAG_ROLE, TAG_SKIP_KEY
from tests.helpers.faults import (
    ANSWER_BLOCKS,
    ANSWER_BUILD,
    ANSWER_CHUNKS,
    CEILING_S,
    REPO,
    _block_folder,
    _env,
    _table_folder,
    run,
)
from tests.helpers.qasper import _copies

SMALL = ["dataset=synthetic", "dataset.n_docs=30", "dataset.questions_per_doc=4", "experiment=none",
         "protocol=threshold"]
SLOW = ["policy=always_keep", "policy._target_=tests.fault_policy.SlowKeep"]
SWEEP = ["-m", *SMALL, *SLOW, "cost.c=0,0.02"]
EXPERIMENT = "synthetic/keep-vs-hybrid"
ONE_LINE_ERROR = "error: "


def default_signals() -> None:
    """In the child, before exec: Ctrl-C's default disposition. A shell without job control
    starts background commands with SIGINT ignored, and an ignored signal is inherited: a suite
    run as ``make test &`` would otherwise give the harness a Ctrl-C it was told to ignore."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(args, cwd: Path, extra_env: dict | None = None) -> subprocess.Popen:
    """A sweep in its own session (so a test can signal it alone, or its whole group), with
    Ctrl-C's default disposition (``default_signals``)."""
    return subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=cwd, env=_env(cwd / "cache", extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_signals)


def slow_env(markers: Path, seconds: float = 120) -> dict:
    return {"ROUTE_BENCH_TEST_SLOW_S": str(seconds), "ROUTE_BENCH_TEST_MARKERS": str(markers)}


def wait_for_markers(proc: subprocess.Popen, markers: Path, n: int = 1, timeout: float = CEILING_S) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(markers.glob("started-*")) if markers.is_dir() else []
        if len(found) >= n:
            return [int(p.name.split("-")[1]) for p in found]
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"sweep ended before a job started: {proc.returncode}\n{out[-2000:]}\n{err[-2000:]}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("no job started in time")


def store_uri(cwd: Path) -> str:
    return f"sqlite:///{cwd / 'mlruns' / 'mlflow.db'}"


def all_runs(cwd: Path) -> tuple[list, list]:
    """(parent runs, job runs) of the test experiment."""
    client = MlflowClient(tracking_uri=store_uri(cwd))
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], max_results=1000) if exp is not None else []
    parents = [r for r in runs if r.data.tags.get(TAG_ROLE) == "sweep"]
    jobs = [r for r in runs if r.data.tags.get(TAG_ROLE) == "job"]
    return parents, jobs


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(ONE_LINE_ERROR)]


def assert_rerun_finishes(cwd: Path, args=SWEEP, n_jobs: int = 2):
    proc = run(args, cwd)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    parents, jobs = all_runs(cwd)
    assert [p.info.status for p in parents] == ["FINISHED"]
    assert not [j for j in jobs if j.info.status == "RUNNING"]
    finished = {j.data.tags[TAG_SKIP_KEY] for j in jobs if j.info.status == "FINISHED"}
    assert len(finished) == n_jobs
    assert f"{n_jobs} jobs, 0 failed -> parent run FINISHED" in proc.stdout
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_job_ends_every_run_and_rerun_finishes(tmp_path, sig, code):
    markers = tmp_path / "markers"
    proc = start(SWEEP, tmp_path, slow_env(markers))
    wait_for_markers(proc, markers)
    proc.send_signal(sig)  # the sweep process alone (basic launcher: it runs the job)
    out, err = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == code, out[-2000:] + err[-2000:]
    lines = error_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: Interrupted: ") and "KILLED" in lines[0], err[-2000:]
    assert "Traceback" not in err
    parents, jobs = all_runs(tmp_path)
    assert [p.info.status for p in parents] == ["KILLED"]
    assert [j.info.status for j in jobs] == ["KILLED"]  # the job that ran; the second never started
    assert jobs[0].data.tags[TAG_END_REASON].startswith("killed: SIG")
    assert "-> KILLED (run " in out
    assert_rerun_finishes(tmp_path)


@pytest.mark.slow
def test_kill9_leaves_stale_runs_that_the_rerun_ends_failed_with_a_reason(tmp_path):
    markers = tmp_path / "markers"
    proc = start(SWEEP, tmp_path, slow_env(markers))
    (pid,) = wait_for_markers(proc, markers)
    proc.kill()  # SIGKILL: nothing of the process runs any more
    proc.communicate(timeout=CEILING_S)
    parents, jobs = all_runs(tmp_path)
    assert [p.info.status for p in parents] == ["RUNNING"] and [j.info.status for j in jobs] == ["RUNNING"]
    stale_id = jobs[0].info.run_id
    assert jobs[0].data.tags[TAG_PID] == str(pid)
    rerun = assert_rerun_finishes(tmp_path)
    assert "1 run(s) left RUNNING by a process that is gone marked FAILED" in rerun.stdout
    client = MlflowClient(tracking_uri=store_uri(tmp_path))
    stale = client.get_run(stale_id)
    assert stale.info.status == "FAILED"
    reason = stale.data.tags[TAG_END_REASON]
    assert reason.startswith(f"stale: process {pid} on ") and "is gone" in reason


@pytest.mark.slow
@pytest.mark.parametrize("entry", [None, ["-c", "from harness.runner.job import main; main()"]], ids=["cli", "hydra-app"])
def test_mistyped_sweep_value_opens_no_parent_and_says_one_line(tmp_path, entry):
    """``python -m harness`` and the Hydra app itself (the sweep callback's own check)."""
    proc = run(["-m", *SMALL, "policy=always_keep,always_keepp", "cost.c=0,0.02"], tmp_path, entry=entry)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "policy" in lines[0] and "always_keepp" in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    db = tmp_path / "mlruns" / "mlflow.db"
    if db.exists():
        parents, jobs = all_runs(tmp_path)
        assert parents == [] and jobs == []
    assert "Launching" not in proc.stdout + proc.stderr  # no job started


@pytest.mark.slow
def test_bad_value_of_one_job_stops_the_sweep_before_its_parent(tmp_path):
    proc = run(["-m", *SMALL, "policy=always_keep", "cost.c=0.02,-0.1"], tmp_path,
               entry=["-c", "from harness.runner.job import main; main()"])
    assert proc.returncode == 2
    (line,) = error_lines(proc.stderr)
    assert "cost.c" in line and "-0.1" in line, line
    assert not (tmp_path / "mlruns" / "mlflow.db").exists() or all_runs(tmp_path) == ([], [])


@pytest.mark.slow
def test_two_concurrent_sweeps_never_run_a_job_twice(tmp_path):
    """Same command, same fresh SQLite store (schema creation races too), started together.
    Each process sleeps in its first job, so one sweep finds the other's RUNNING claim."""
    args = ["-m", *SMALL, *SLOW, "cost.c=0,0.01,0.02"]
    env = slow_env(tmp_path / "markers", seconds=3)
    procs = [start(args, tmp_path, env) for _ in range(2)]
    outs = [p.communicate(timeout=CEILING_S) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
    parents, jobs = all_runs(tmp_path)
    assert len(parents) == 1
    finished = [j for j in jobs if j.info.status == "FINISHED"]
    keys = [j.data.tags[TAG_SKIP_KEY] for j in finished]
    assert len(keys) == len(set(keys)) == 3, (
        [(j.info.run_name, j.info.status, j.data.tags.get(TAG_PID), j.info.start_time) for j in jobs],
        [out[-3000:] for out, _ in outs])
    assert not [j for j in jobs if j.info.status == "RUNNING"]
    text = "".join(out for out, _ in outs)
    # each job ran once and the other sweep reused it, whether it found the run finished or first
    # waited for the other's live claim (which of the two depends on the machine's load; the
    # waiting itself is tested without a race in tests/test_run_lifecycle.py)
    assert text.count("-> skipped: finished as run ") == 3


def _qasper_file(path: Path) -> Path:
    """The tiny QASPER fixture copied 8 times under new ids (16 papers, 48 questions)."""
    src = json.loads((REPO / "tests" / "fixtures" / "data" / "qasper-fixture-v0.3.json").read_text())
    out = {}
    for i in range(8):
        for pid, paper in src.items():
            paper = json.loads(json.dumps(paper))
            for qa in paper["qas"]:
                qa["question_id"] = f"{qa['question_id']}_{i}"
                qa["question"] = f"{qa['question']} (copy {i})"
            out[f"{pid}_{i}"] = paper
    path.write_text(json.dumps(out), encoding="utf-8")
    return path


@pytest.mark.slow
def test_data_fixed_in_place_is_not_skipped(tmp_path):
    data = _qasper_file(tmp_path / "qasper-dev-v0.3.json")
    # 24 questions with evidence: a held-out set of 4, below the pre-flight floor; this test is about skipping
    args = ["-m", "dataset=qasper", f"dataset.path={data}", "experiment=none", "protocol=threshold",
            "policy=always_keep,always_extra", "protocol.min_heldout=4"]
    experiment = "qasper/keep-vs-hybrid"
    first = run(args, tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # fix the data in place: the first question's evidence now points at another paragraph
    body = json.loads(data.read_text())
    answer = body["P1_0"]["qas"][0]["answers"][0]["answer"]
    answer["evidence"] = ["We study QASPER papers here."]
    data.write_text(json.dumps(body), encoding="utf-8")
    second = run(args, tmp_path)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "skipped" not in second.stdout
    client = MlflowClient(tracking_uri=store_uri(tmp_path))
    exp = client.get_experiment_by_name(experiment)
    jobs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get(TAG_ROLE) == "job"]
    assert len(jobs) == 4 and all(j.info.status == "FINISHED" for j in jobs)
    assert len({j.data.tags["route_bench.table_sha256"] for j in jobs}) == 2  # a new table fingerprint
    assert len({j.data.tags[TAG_SKIP_KEY] for j in jobs}) == 4
    assert len({j.data.tags[TAG_CONFIG_HASH] for j in jobs}) == 2  # the config did not change
    # the unchanged data again: now everything is skipped
    third = run(args, tmp_path)
    assert third.returncode == 0 and third.stdout.count("-> skipped: finished as run ") == 2


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sweep", "single"])
def test_unreachable_server_fails_within_seconds_naming_the_url(tmp_path, mode):
    """No retry loop of minutes: the refusal comes within seconds of what the same command needs
    to start and refuse a bad value (measured just before, so a loaded machine slows both)."""
    url = "http://127.0.0.1:9"
    args = (["-m"] if mode == "sweep" else []) + [*SMALL, "policy=always_keep", f"tracking.uri={url}"]
    t0 = time.monotonic()
    start_up = run([*args, "seed=-1"], tmp_path)  # the same start, refused at validation, before the store
    start_up_s = time.monotonic() - t0
    assert start_up.returncode == 2 and "seed" in start_up.stderr, start_up.stderr[-2000:]
    t0 = time.monotonic()
    proc = run(args, tmp_path)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert elapsed - start_up_s < 20, (elapsed, start_up_s)  # the probe's own budget is ~4 s
    (line,) = error_lines(proc.stderr)
    assert line.startswith("error: TrackingStoreError: ") and url in line
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sweep", "single"])
def test_corrupt_store_file_is_one_line_naming_it(tmp_path, mode):
    db = tmp_path / "mlruns" / "mlflow.db"
    db.parent.mkdir()
    db.write_bytes(b"this is not a database\n" * 200)
    args = (["-m"] if mode == "sweep" else []) + [*SMALL, "policy=always_keep"]
    proc = run(args, tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert line.startswith("error: TrackingStoreError: ") and str(db) in line
    assert "Traceback" not in proc.stderr
    assert db.read_bytes() == b"this is not a database\n" * 200  # left as it was


def _processes_with(token: str) -> list[int]:
    """Pids whose environment holds ``token`` (the sweep and everything it started)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc to find the workers")
def test_kill9_of_a_joblib_sweep_leaves_no_worker_and_rerun_finishes(tmp_path):
    token = f"fault-{uuid.uuid4().hex}"
    markers = tmp_path / "markers"
    args = [*SWEEP, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    proc = start(args, tmp_path, {**slow_env(markers), "ROUTE_BENCH_TEST_TOKEN": token})
    workers = wait_for_markers(proc, markers, n=2)
    assert proc.pid not in workers and len(_processes_with(token)) >= 3  # the sweep and two workers
    proc.kill()
    proc.communicate(timeout=CEILING_S)
    deadline = time.monotonic() + CEILING_S
    while _processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_with(token) == []  # no worker (nor its resource tracker) survives the sweep
    _, jobs = all_runs(tmp_path)
    # each worker ended its own run KILLED before exiting (watchdog: the sweep process was gone)
    assert sorted(j.info.status for j in jobs) == ["KILLED", "KILLED"]
    assert {j.data.tags[TAG_PID] for j in jobs} == {str(w) for w in workers}
    assert_rerun_finishes(tmp_path, args)


@pytest.mark.slow
def test_sigterm_of_a_joblib_sweep_ends_every_run(tmp_path):
    """SIGTERM to the sweep process only: loky kills the busy workers, the sweep ends their runs
    KILLED (their processes are gone) and its parent KILLED."""
    markers = tmp_path / "markers"
    args = [*SWEEP, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    proc = start(args, tmp_path, slow_env(markers))
    wait_for_markers(proc, markers, n=2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 143, out[-2000:] + err[-2000:]
    parents, jobs = all_runs(tmp_path)
    assert [p.info.status for p in parents] == ["KILLED"]
    assert sorted(j.info.status for j in jobs) == ["KILLED", "KILLED"]


@pytest.fixture(scope="module")
def big_qasper(tmp_path_factory):
    """A 48-paper QASPER copy (one pool per shard: 48 shards) and its table built once, never
    interrupted: the reference every interrupted build must equal."""
    import pandas as pd

    root = tmp_path_factory.mktemp("big_qasper")
    src = json.loads(_qasper_file(root / "base.json").read_text())
    big = {f"{pid}_{k}": json.loads(json.dumps(paper)) for k in range(3) for pid, paper in src.items()}
    for key, paper in big.items():
        for qa in paper["qas"]:
            qa["question_id"] = f"{qa['question_id']}_{key}"
    data = root / "qasper.json"
    data.write_text(json.dumps(big), encoding="utf-8")
    args = ["table", "build", "dataset=qasper", f"dataset.path={data}", "arms.shard_size=1"]
    fresh = run(args, root)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    return args, pd.read_parquet(_table_folder(root / "cache") / "table.parquet")


def assert_nothing_half_written(folder: Path, sig) -> None:
    """No file under its final name is half-written: each one a digest sidecar vouches for
    verifies. Ctrl-C and SIGTERM also leave no temporary file; kill -9 can leave the one it was
    writing (hidden, ``.NAME.XXXX.tmp``, never read: every read goes through the final name and
    its digest)."""
    from harness.io import verify_file

    temps = list(folder.rglob("*.tmp"))
    if sig != signal.SIGKILL:
        assert not temps, f"a temporary file left: {temps}"
    assert all(t.name.startswith(".") for t in temps), temps
    for digest in folder.rglob("*.parquet.sha256"):
        verify_file(digest.with_name(digest.name.removesuffix(".sha256")))


#: what an interrupted `table build` ends with: exit code and the one error line (None: kill -9)
INTERRUPTED_BUILD = {
    signal.SIGKILL: (-signal.SIGKILL, None),
    signal.SIGINT: (130, "error: Interrupted: SIGINT"),
    signal.SIGTERM: (143, "error: Interrupted: SIGTERM"),
}


@pytest.mark.slow
@pytest.mark.parametrize("sig", list(INTERRUPTED_BUILD), ids=["kill-9", "sigint", "sigterm"])
def test_killed_table_build_resumes_with_identical_numbers(tmp_path, sig, big_qasper):
    """kill -9, Ctrl-C or SIGTERM of a real `table build` (MiniLM on a 48-paper QASPER copy, one
    pool per shard) once its first shard is on disk: no table and no half-written file is left,
    one error line says so (but after kill -9), the rerun reuses the written shards, and every
    non-timing column equals a build that was never interrupted. A build that finished before
    the signal landed is a valid outcome too, and must then be whole."""
    import pandas as pd

    args, reference = big_qasper
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=tmp_path, env=_env(tmp_path / "cache"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    deadline = time.monotonic() + CEILING_S
    while not list((tmp_path / "cache").glob("tables/*/shards/shard-00000.parquet")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no shard written in time"
        time.sleep(0.01)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=CEILING_S)
    folder = _table_folder(tmp_path / "cache")
    code, line = INTERRUPTED_BUILD[sig]
    if proc.returncode == 0:
        # the build finished before the signal landed (a loaded machine can starve this test
        # between seeing the first shard and signalling)
        assert (folder / "table.parquet").exists() and "Traceback" not in err
        info = json.loads((folder / "info.json").read_text())
        assert info["counts"]["shards_reused"] + info["counts"]["shards_computed"] == 48
    else:
        assert proc.returncode == code, out[-2000:] + err[-2000:]
        assert not (folder / "table.parquet").exists(), "an interrupted build must not leave a finished table"
        assert_nothing_half_written(folder, sig)
        if line is not None:
            lines = err.strip().splitlines()
            # the last line (the model loader's progress bar may precede it), and no traceback
            assert lines[-1].startswith(line) and "Traceback" not in err, err[-2000:]
            assert sum(x.startswith(ONE_LINE_ERROR) for x in lines) == 1, err[-2000:]
        written = len(list((folder / "shards").glob("shard-*.parquet")))
        assert 1 <= written <= 48
        rerun = run(args, tmp_path)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        info = json.loads((folder / "info.json").read_text())
        assert info["counts"]["shards_reused"] >= written - 1
        assert info["counts"]["shards_reused"] + info["counts"]["shards_computed"] == 48
        if written < 48:
            assert info["counts"]["shards_computed"] >= 1
    a = pd.read_parquet(folder / "table.parquet")
    cols = [c for c in a.columns if "_ms" not in c]
    assert len(a) == 144 and list(a.columns) == list(reference.columns)
    pd.testing.assert_frame_equal(a[cols], reference[cols])


@pytest.mark.slow
def test_sigterm_of_a_sweep_during_its_base_table_build_resumes_and_leaves_no_run_running(tmp_path, big_qasper):
    """SIGTERM to a sweep while it builds its base table (the same 48-shard QASPER copy), once the
    first shard is on disk: exit 143 with one error line, no finished table, no half-written
    shard and no run left RUNNING (the parent is opened only after the table); the rerun reuses
    the shards written whole, finishes every job, and its table equals the uninterrupted one."""
    import pandas as pd

    args, reference = big_qasper
    data = next(a for a in args if a.startswith("dataset.path="))
    sweep = ["-m", "dataset=qasper", data, "arms.shard_size=1", "experiment=none", "protocol=threshold",
             "policy=always_keep", "cost.c=0,0.02"]
    proc = start(sweep, tmp_path)
    deadline = time.monotonic() + CEILING_S
    while not list((tmp_path / "cache").glob("tables/*/shards/shard-00000.parquet")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no shard written in time"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=CEILING_S)
    assert proc.returncode == 143, out[-2000:] + err[-2000:]
    lines = error_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: Interrupted: SIGTERM") and "Traceback" not in err, err[-2000:]
    folder = _table_folder(tmp_path / "cache")
    assert not list(folder.rglob("*.tmp")), "no half-written file"
    if (tmp_path / "mlruns" / "mlflow.db").exists():  # the store is opened before the table
        client = MlflowClient(tracking_uri=store_uri(tmp_path))
        runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
        assert not [r for r in runs if r.info.status == "RUNNING"], [(r.info.run_id, r.info.status) for r in runs]
    finished_table = (folder / "table.parquet").exists()  # the signal may land once the table is whole
    written = len(list((folder / "shards").glob("shard-*.parquet"))) if (folder / "shards").is_dir() else 48
    for shard in (folder / "shards").glob("shard-*.parquet") if not finished_table else []:
        pd.read_parquet(shard)  # every shard on disk is whole
    rerun = run(sweep, tmp_path)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert "2 jobs, 0 failed -> parent run FINISHED" in rerun.stdout
    if not finished_table:
        info = json.loads((folder / "info.json").read_text())
        assert info["counts"]["shards_reused"] >= written - 1
        assert info["counts"]["shards_reused"] + info["counts"]["shards_computed"] == 48
    client = MlflowClient(tracking_uri=store_uri(tmp_path))
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert runs and not [r for r in runs if r.info.status == "RUNNING"]
    a = pd.read_parquet(folder / "table.parquet")
    cols = [c for c in a.columns if "_ms" not in c]
    pd.testing.assert_frame_equal(a[cols], reference[cols])


def _chunks_on_disk(folder: Path) -> int:
    """Chunks written whole: a chunk's digest sidecar is written after its Parquet."""
    return len(list((folder / "chunks").glob("chunk-*.parquet.sha256"))) if (folder / "chunks").is_dir() else 0


def _computed(stdout: str, name: str) -> int:
    """How many chunks of block ``name`` the build computed (its last progress line)."""
    lines = [x for x in stdout.splitlines() if x.startswith(f"[route-bench] arm block {name}: {ANSWER_CHUNKS}/")]
    assert lines, stdout[-3000:]
    return int(lines[-1].split("(")[1].split(" computed")[0])


def _answers(folder: Path):
    """What was said and what it cost in tokens (never the wall times)."""
    import pandas as pd

    frame = pd.read_parquet(folder / "block.parquet")
    cols = [c for c in frame.columns if c == "qid" or c.endswith((".answer", ".units", "_tokens", ".tokens"))]
    return frame[cols]


@pytest.fixture(scope="module")
def answer_reference(tmp_path_factory):
    """The 18-question answer build (real llama.cpp), built once, never interrupted: the
    reference every interrupted answer build must equal (its folder is only read)."""
    root = tmp_path_factory.mktemp("answer_reference")
    data = _copies(root / "qasper.json", 3)  # 18 questions
    args = [*ANSWER_BUILD, f"dataset.path={data}"]
    reference = root / "reference"
    reference.mkdir()
    fresh = run(args, reference)
    assert fresh.returncode == 0, fresh.stdout[-2000:] + fresh.stderr[-2000:]
    return args, reference


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_kill_of_a_real_llama_cpp_generation_resumes_with_identical_answers(tmp_path, sig, answer_reference):
    """kill -9 or SIGTERM of a real answer build (llama.cpp generating) once its first answer
    chunk is on disk: no finished block and no half-written file or chunk is left (SIGTERM: exit
    143 and one error line), the rerun reuses every chunk written whole, and the answers (text,
    units, token counts) equal a build that was never interrupted. A build that finished before
    the signal landed is valid too, and must be whole."""
    import shutil

    import pandas as pd

    args, reference = answer_reference
    killed = tmp_path / "killed"
    # the retrieval table is not what is tested here: the same verified one, so only answers are built
    shutil.copytree(reference / "cache" / "tables", killed / "cache" / "tables")
    proc = subprocess.Popen([sys.executable, "-m", "harness", *args], cwd=killed, env=_env(killed / "cache"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = "blocks/no_retrieval/*/chunks/chunk-00000.parquet.sha256"
    deadline = time.monotonic() + CEILING_S
    while not list((killed / "cache").glob(first)) and proc.poll() is None:
        assert time.monotonic() < deadline, "no answer chunk written in time"
        time.sleep(0.01)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=CEILING_S)
    cache = killed / "cache"
    if proc.returncode == 0:  # the build finished before the kill landed: it must be whole
        print("answer build finished before the kill landed")
        assert "Traceback" not in err
        for name in ANSWER_BLOCKS:
            assert (_block_folder(cache, name) / "block.parquet").exists()
    else:
        code, line = INTERRUPTED_BUILD[sig]
        assert proc.returncode == code, out[-2000:] + err[-2000:]
        if line is not None:
            assert error_lines(err) == [x for x in err.splitlines() if x.startswith(line)] and len(error_lines(err)) == 1, err
            assert "Traceback" not in err, err[-2000:]
        assert_nothing_half_written(cache, sig)
        written = {}
        for name in ANSWER_BLOCKS:
            folder = cache / "blocks" / name
            written[name] = _chunks_on_disk(_block_folder(cache, name)) if folder.is_dir() else 0
            if written[name] < ANSWER_CHUNKS:  # a block is finished only once every chunk is
                assert not list(folder.glob("*/block.parquet")), f"{name}: a killed build left a finished block"
        assert written["no_retrieval"] >= 1 and written["rag_keep"] < ANSWER_CHUNKS
        print(f"killed with answer chunks on disk: {written}")
        rerun = run(args, killed)
        assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
        for name in ANSWER_BLOCKS:
            if written[name] < ANSWER_CHUNKS:  # every chunk written whole is reused, the rest computed
                assert _computed(rerun.stdout, name) == ANSWER_CHUNKS - written[name], (name, written)
    for name in ANSWER_BLOCKS:
        got, want = _block_folder(cache, name), _block_folder(reference / "cache", name)
        assert got.name == want.name  # the same key: same model, engine, settings and inputs
        pd.testing.assert_frame_equal(_answers(got), _answers(want))
        assert len(_answers(got)) == 18
