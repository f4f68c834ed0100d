"""Stores that are not what they seem, or not ready (issue "nothing accepted silently, nothing left
RUNNING"): a file that is no MLflow store is refused before anything is written to it; a new store
is created whole, once, by concurrent openers; a half-created store is made anew or named with its
fix; a tracking server that errs, answers something else or nothing is refused within its budget;
a store that cannot take a write (a full disk) ends in one line with every run ended FAILED.

In-process where the process is not the point; the last tests run the CLI in a subprocess.
"""

from __future__ import annotations

import errno
import hashlib
import http.server
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness import app
from harness.errors import ConfigError
from harness.runner import job as runner
from harness.tracking import mlflow_tracker as mt, store_client, store_file, store_space
from harness.tracking.store_reader import existing_store_uri
from tests.helpers.faults import REPO, run

SMALL = ["dataset=synthetic", "dataset.n_docs=30", "dataset.questions_per_doc=4", "experiment=none",
         "protocol=threshold", "policy=always_keep"]
FULL = "(sqlite3.OperationalError) database or disk is full"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tables(path: Path) -> list[str]:
    con = sqlite3.connect(path)
    try:
        return sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        con.close()


@pytest.fixture(scope="module")
def fresh_store(tmp_path_factory) -> Path:
    """One store made by the harness (copied by the tests that break it)."""
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    mt.Tracker(f"sqlite:///{path}")
    return path


def copy_store(fresh_store: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(fresh_store, folder / "mlflow.db"))


# ---- a file that is no MLflow store: refused before anything is written -------------------------
def _foreign(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.execute("INSERT INTO invoices (total) VALUES (12.5)")
    con.commit()
    con.close()


def _no_tables(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 7")  # writes the header: an SQLite database, no table
    con.commit()
    con.close()


NOT_STORES = {
    "foreign sqlite": (_foreign, r"SQLite database of another program \(tables: invoices\)"),
    "empty file": (lambda p: p.write_bytes(b""), r"is an empty file"),
    "no tables": (_no_tables, r"SQLite database with no tables"),
    "not sqlite": (lambda p: p.write_text("name,total\nx,1\n"), r"not an SQLite database"),
}


@pytest.mark.parametrize("kind", sorted(NOT_STORES))
def test_a_file_that_is_no_mlflow_store_is_refused_unchanged(tmp_path, kind):
    make, said = NOT_STORES[kind]
    path = tmp_path / "store.db"
    make(path)
    before = digest(path)
    with pytest.raises(store_client.TrackingStoreError, match=said) as err:
        mt.Tracker(f"sqlite:///{path}")
    line = str(err.value)
    assert str(path) in line and "\n" not in line
    assert "expected an" in line or "is not an SQLite database" in line  # what was expected
    assert digest(path) == before  # nothing written: no MLflow table in another program's file


@pytest.mark.parametrize("kind", sorted(NOT_STORES))
def test_report_refuses_a_file_that_is_no_store_without_writing(tmp_path, kind):
    make, said = NOT_STORES[kind]
    path = tmp_path / "store.db"
    make(path)
    before = digest(path)
    with pytest.raises(ConfigError, match=said):
        existing_store_uri(f"sqlite:///{path}")
    assert digest(path) == before


def test_a_folder_named_as_the_store_is_refused(tmp_path):
    folder = tmp_path / "mlflow.db"
    folder.mkdir()
    with pytest.raises(store_client.TrackingStoreError, match=r"is a folder, expected an SQLite database file"):
        mt.Tracker(f"sqlite:///{folder}")
    assert list(folder.iterdir()) == []


def test_another_programs_table_in_a_complete_store_is_kept(fresh_store, tmp_path):
    """A real MLflow store with one table of the user's own is still an MLflow store."""
    path = copy_store(fresh_store, tmp_path)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    assert store_file.inspect_store(path).kind == "mlflow"
    mt.Tracker(f"sqlite:///{path}").ensure_experiment("kept")


# ---- a new store: created whole, once; a half-created one made anew or named ---------------------
def test_a_new_store_in_a_new_folder_is_complete_with_its_lock_and_reserve(tmp_path):
    path = tmp_path / "a" / "b" / "mlflow.db"
    mt.Tracker(f"sqlite:///{path}")
    state = store_file.inspect_store(path)
    assert state.kind == "mlflow" and state.revision == store_file.head_revision() and not state.holds_data
    names = {p.name for p in path.parent.iterdir()}
    assert {".route-bench.lock", store_space.RESERVE_NAME, "mlflow.db"} <= names
    assert not [n for n in names if ".creating-" in n]  # the temporary file was renamed into place
    assert (path.parent / store_space.RESERVE_NAME).stat().st_blocks * 512 >= store_space.RESERVE_BYTES


def _break(path: Path, how: str) -> None:
    con = sqlite3.connect(path)
    old = sorted(store_file.known_revisions() - {store_file.head_revision()})[0]
    if how == "tmp table":  # alembic's copy of a table, left by a migration killed midway
        con.execute("CREATE TABLE _alembic_tmp_experiments AS SELECT * FROM experiments")
        con.execute("UPDATE alembic_version SET version_num = ?", (old,))
    elif how == "no version row":
        con.execute("DELETE FROM alembic_version")
    elif how == "old revision":  # stopped between two migrations: a revision this MLflow knows
        con.execute("UPDATE alembic_version SET version_num = ?", (old,))
    con.commit()
    con.close()


@pytest.mark.parametrize("how", ["tmp table", "no version row", "old revision"])
def test_a_half_created_store_that_holds_nothing_is_made_anew(fresh_store, tmp_path, how, monkeypatch, capsys):
    monkeypatch.setattr(store_file, "HALF_IDLE_S", 0.0)  # no other program is creating it
    path = copy_store(fresh_store, tmp_path)
    _break(path, how)
    assert store_file.inspect_store(path).kind == "half"
    with pytest.raises(MlflowException):  # what every rerun met before
        MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    tracker = mt.Tracker(f"sqlite:///{path}")
    exp = tracker.ensure_experiment("after")
    assert tracker.client.get_experiment(exp).name == "after"
    state = store_file.inspect_store(path)
    assert state.kind == "mlflow" and state.revision == store_file.head_revision()
    assert not [t for t in state.tables if t.startswith("_alembic_tmp_")]
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if "half-created" in ln]
    assert str(path) in line and "made anew" in line


def test_a_half_created_store_that_holds_runs_is_refused_naming_the_fix(fresh_store, tmp_path):
    path = copy_store(fresh_store, tmp_path)
    client = MlflowClient(tracking_uri=f"sqlite:///{path}")
    client.create_run(client.create_experiment("kept"))
    _break(path, "tmp table")
    before = digest(path)
    with pytest.raises(store_client.TrackingStoreError) as err:
        mt.Tracker(f"sqlite:///{path}")
    line = str(err.value)
    assert str(path) in line and "_alembic_tmp_experiments" in line and "holds runs" in line
    assert "mlflow db upgrade" in line and "restore it from a backup" in line
    assert digest(path) == before
    with pytest.raises(ConfigError, match="half-created"):  # the report says it too, without writing
        existing_store_uri(f"sqlite:///{path}")


def test_a_half_created_store_still_changing_is_waited_for(fresh_store, tmp_path, monkeypatch):
    """Another program creating the store right now: waited for, not remade under it."""
    monkeypatch.setattr(store_file, "HALF_IDLE_S", 30.0)
    path = copy_store(fresh_store, tmp_path)
    _break(path, "no version row")
    os.utime(path)  # just written to

    def finish():
        time.sleep(1.0)
        con = sqlite3.connect(path)
        con.execute("INSERT INTO alembic_version VALUES (?)", (store_file.head_revision(),))
        con.commit()
        con.close()

    writer = threading.Thread(target=finish)
    writer.start()
    t0 = time.monotonic()
    store_file.prepare_store(path, say=lambda line: pytest.fail(f"remade: {line}"))
    writer.join()
    assert 0.9 <= time.monotonic() - t0 < 10
    assert store_file.inspect_store(path).kind == "mlflow"


def test_a_creation_killed_before_its_rename_leaves_no_store_and_the_next_one_cleans_up(tmp_path):
    path = tmp_path / "mlflow.db"
    code = ("import sys; from harness.tracking import mlflow_tracker as mt; "
            f"mt.Tracker('sqlite:///{path}')")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".mlflow.db.creating-*")) and time.monotonic() < deadline:
        assert proc.poll() is None, "the creation ended before it could be killed"
        time.sleep(0.02)
    time.sleep(0.3)  # inside MLflow's migrations
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not path.exists()  # no half-created store where the store belongs
    assert list(tmp_path.glob(".mlflow.db.creating-*"))
    mt.Tracker(f"sqlite:///{path}")
    assert store_file.inspect_store(path).kind == "mlflow"
    assert not list(tmp_path.glob(".mlflow.db.creating-*"))


def test_two_processes_creating_one_store_both_open_it(tmp_path):
    path = tmp_path / "new" / "mlflow.db"  # a new folder too: the lock must exist before the store
    code = ("import sys; from harness.tracking import mlflow_tracker as mt; "
            f"t = mt.Tracker('sqlite:///{path}'); print(t.ensure_experiment('shared'))")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outs]
    assert len({o[0].strip() for o in outs}) == 1  # one experiment, one store
    assert store_file.inspect_store(path).kind == "mlflow"


# ---- a tracking server that errs, answers something else, or nothing ------------------------------
class _Answer(http.server.BaseHTTPRequestHandler):
    status, body, ctype = 200, b"", "application/json"

    def do_GET(self):  # noqa: N802
        self.send_response(self.status)
        self.send_header("Content-Type", self.ctype)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def serve(status: int, body: bytes, ctype: str = "application/json"):
    handler = type("H", (_Answer,), {"status": status, "body": body, "ctype": ctype})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


MLFLOW_404 = json.dumps({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no such experiment"}).encode()
BAD_SERVERS = {
    "HTTP 500": (500, b"Internal Server Error", "text/plain", r"answers HTTP 500"),
    "other JSON": (200, b'{"hello": "world"}', "application/json", r"is not an MLflow tracking server \(HTTP 200, JSON"),
    "HTML page": (200, b"<html>welcome</html>", "text/html", r"is not an MLflow tracking server \(HTTP 200, text/html"),
    "other 404": (404, b'{"detail": "Not Found"}', "application/json", r"is not an MLflow tracking server \(HTTP 404"),
    "login wall": (401, b'{"error": "login"}', "application/json", r"refuses the request \(HTTP 401; set MLFLOW_TRACKING"),
}


@pytest.mark.parametrize("kind", sorted(BAD_SERVERS))
def test_a_server_that_is_no_mlflow_server_is_refused_within_its_budget(kind):
    status, body, ctype, said = BAD_SERVERS[kind]
    server, url = serve(status, body, ctype)
    try:
        t0 = time.monotonic()
        with pytest.raises(store_client.TrackingStoreError, match=said) as err:
            store_client.probe_store(url, budget_s=3.0)
        assert time.monotonic() - t0 < 3.0 + 2.0
    finally:
        server.shutdown()
    line = str(err.value)
    assert url in line and "tracking.uri" in line and "\n" not in line


def test_a_server_that_accepts_and_never_answers_is_refused_within_its_budget():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # connections are accepted by the kernel, never answered
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        t0 = time.monotonic()
        with pytest.raises(store_client.TrackingStoreError, match=r"does not answer \(timed out\)"):
            store_client.probe_store(url, budget_s=2.0)
        elapsed = time.monotonic() - t0
    finally:
        listener.close()
    assert 1.5 <= elapsed < 2.0 + 2.0


def test_the_probe_budget_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv(store_client.ENV_PROBE_BUDGET, "1.5")
    assert store_client.probe_budget_s() == 1.5
    monkeypatch.setenv(store_client.ENV_PROBE_BUDGET, "soon")
    assert store_client.probe_budget_s() == store_client.PROBE_BUDGET_S


def test_a_server_answering_as_mlflow_does_passes():
    server, url = serve(404, MLFLOW_404)
    try:
        store_client.probe_store(url, budget_s=3.0)
    finally:
        server.shutdown()


# ---- a store that cannot take a write -------------------------------------------------------------
def test_storage_failures_are_told_apart_from_other_errors():
    sql = MlflowException(f"(raised as a result of Query-invoked autoflush)\n{FULL}\n[SQL: INSERT INTO tags]")
    assert store_space.write_failure(sql) == "its disk is full"
    assert store_space.failure_line(sql) == FULL
    try:
        try:
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        except OSError as inner:
            raise RuntimeError("copying the artifacts failed") from inner
    except RuntimeError as chained:
        assert store_space.write_failure(chained) == "its disk quota is exceeded"
    assert store_space.write_failure(OSError(errno.ENOSPC, "No space left on device")) == "its disk is full"
    assert store_space.write_failure(sqlite3.OperationalError("attempt to write a readonly database")) == "it became read-only"
    assert store_space.write_failure(MlflowException("Invalid value '' for parameter 'run_id'")) is None
    assert store_space.write_failure(FileNotFoundError(errno.ENOENT, "No such file", "x.txt")) is None
    assert store_space.write_failure(sqlite3.OperationalError("database is locked")) is None  # retried instead


def _job_cfg(uri: str):
    with initialize_config_dir(config_dir=str(app.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[*SMALL, f"tracking.uri={uri}"])


def _runs(path: Path) -> list[tuple[str, str]]:
    con = sqlite3.connect(path)
    try:
        return sorted(con.execute("SELECT name, status FROM runs").fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("where", ["metrics", "artifacts"])
def test_a_full_disk_while_logging_ends_the_run_failed_in_one_line(fresh_store, tmp_path, monkeypatch, isolated_cache,
                                                                   where):
    path = copy_store(fresh_store, tmp_path / "store")
    monkeypatch.setattr("harness.runner.lifecycle._TRACKERS", {})
    calls = []

    def full(*args, **kwargs):
        calls.append(where)
        if where == "metrics":
            raise MlflowException(f"(raised as a result of Query-invoked autoflush)\n{FULL}")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mt.Tracker, "log_metrics" if where == "metrics" else "log_artifacts",
                        lambda self, *a, **k: self._retry(lambda: full()))
    with pytest.raises(store_client.StoreWriteError) as err:
        runner.run_job(_job_cfg(f"sqlite:///{path}"))
    line = str(err.value)
    assert calls == [where]  # not retried: a full disk does not pass
    assert line.startswith(f"MLflow store {path} cannot be written: its disk is full") and "\n" not in line
    ((name, status),) = _runs(path)
    assert status == "FAILED"
    # the reserve was released to end the run; the next opening makes it again
    assert not (path.parent / store_space.RESERVE_NAME).exists()
    mt.Tracker(f"sqlite:///{path}")
    assert (path.parent / store_space.RESERVE_NAME).exists()


def test_no_run_starts_on_a_disk_with_no_room_left(fresh_store, tmp_path, monkeypatch):
    path = copy_store(fresh_store, tmp_path)
    tracker = mt.Tracker(f"sqlite:///{path}")
    exp = tracker.ensure_experiment("full")
    store_space.release_reserve(path)

    def no_room(fd, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_space, "_allocate", no_room)
    with pytest.raises(store_client.StoreWriteError, match=r"its disk is full \(no room for the 2 MiB"):
        tracker.claim_job(exp, "job", {}, "key-1")
    with pytest.raises(store_client.StoreWriteError, match=r"its disk is full"):
        tracker.start_job_run(exp, "single", {})
    with pytest.raises(store_client.StoreWriteError, match=r"its disk is full"):
        mt.Tracker(f"sqlite:///{path}")
    assert _runs(path) == []
    assert not list(path.parent.glob(f"{store_space.RESERVE_NAME}*"))  # nothing half-made left


def test_a_new_store_on_a_full_disk_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "mlflow.db"

    def full(path_):
        raise MlflowException("(sqlite3.OperationalError) database or disk is full\n[SQL: CREATE TABLE x]")

    monkeypatch.setattr(store_file, "create_store", full)
    with pytest.raises(store_client.StoreWriteError, match=r"cannot be created: its disk is full"):
        mt.Tracker(f"sqlite:///{path}")
    assert not path.exists()


# ---- the CLI, in a subprocess: exit code and one stderr line --------------------------------------
def error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error: ")]


@pytest.mark.slow
def test_cli_sweep_on_another_programs_database_is_refused_untouched(tmp_path):
    path = tmp_path / "app.db"
    _foreign(path)
    before = digest(path)
    proc = run(["-m", *SMALL, "cost.c=0,0.02", f"tracking.uri=sqlite:///{path}"], tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert line.startswith("error: TrackingStoreError: ") and str(path) in line and "another program" in line
    assert "Traceback" not in proc.stderr
    assert digest(path) == before and tables(path) == ["invoices"]


@pytest.mark.slow
def test_cli_sweep_against_a_server_sending_other_json_is_refused(tmp_path):
    server, url = serve(200, b'{"hello": "world"}')
    try:
        t0 = time.monotonic()
        proc = run([*SMALL, f"tracking.uri={url}"], tmp_path, extra_env={store_client.ENV_PROBE_BUDGET: "3"})
        elapsed = time.monotonic() - t0
    finally:
        server.shutdown()
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert url in line and "is not an MLflow tracking server" in line and "tracking.uri" in line
    assert "Traceback" not in proc.stderr and "UserWarning" not in proc.stderr
    assert elapsed < 120  # the start-up of a Python process on a busy machine, not a retry loop


FULL_DISK_ENTRY = """
import sqlite3
from harness.tracking import mlflow_tracker as mt
def full(self, *args, **kwargs):
    return self._retry(lambda: (_ for _ in ()).throw(sqlite3.OperationalError("database or disk is full")))
mt.Tracker.log_metrics = full
from harness.__main__ import entry
entry()
"""


@pytest.mark.slow
def test_cli_sweep_on_a_full_disk_is_one_line_exit_2_and_no_run_left_running(tmp_path):
    path = tmp_path / "store" / "mlflow.db"
    proc = run(["-m", *SMALL, "cost.c=0,0.02", f"tracking.uri=sqlite:///{path}"], tmp_path,
               entry=["-c", FULL_DISK_ENTRY])
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = error_lines(proc.stderr)
    assert line.startswith(f"error: StoreWriteError: MLflow store {path} cannot be written: its disk is full")
    assert "Traceback" not in proc.stderr and [ln for ln in proc.stderr.splitlines() if ln.strip()] == [line]
    runs = _runs(path)
    assert len(runs) == 3 and all(status == "FAILED" for _, status in runs), runs  # the parent and both jobs
