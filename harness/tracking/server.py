"""Start and stop a local ``mlflow server`` (team mode) for tests, docs and demos.

Why: team mode means every sweep logs over HTTP to one shared tracking server backed by a
database; the tests must exercise exactly that path (REST store + proxied artifacts), not a
local file store that only looks similar. This module owns nothing but the server's life
cycle: pick a free port, launch ``python -m mlflow server`` in its own process group, wait for
``/health``, and stop the whole group (uvicorn workers included) on exit.

Choices (docs/metrics.md is silent here): the backend is a SQLite file and artifacts are served by
the server itself (``--serve-artifacts --artifacts-destination``), so clients need no access
to the server's disk; one worker, because tests are small and the machine has two cores.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it; tiny race accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def server_command(
    backend_store_uri: str,
    artifacts_destination: str,
    host: str,
    port: int,
    workers: int = 1,
) -> list[str]:
    """The exact ``mlflow server`` command line team mode documents (see docs/team_mode.md)."""
    return [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", backend_store_uri,
        "--serve-artifacts",
        "--artifacts-destination", artifacts_destination,
        "--host", host,
        "--port", str(port),
        "--workers", str(workers),
    ]


@dataclass
class MlflowServer:
    """A running ``mlflow server`` subprocess; use as a context manager or call ``stop()``."""

    url: str
    workdir: Path
    process: subprocess.Popen
    log_path: Path
    command: list[str] = field(default_factory=list)

    @property
    def backend_store_uri(self) -> str:
        return f"sqlite:///{self.workdir / 'mlflow.db'}"

    def log_tail(self, n_chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the server's process group, wait for the server, then SIGKILL the group.

        The final SIGKILL reaches helper processes that outlive the main one (uvicorn workers,
        MLflow's job consumers), so nothing of the server is left running.
        """
        pgid = self.process.pid
        if self.process.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(pgid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.wait(timeout=timeout)

    def __enter__(self) -> "MlflowServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def start_server(
    workdir: str | os.PathLike,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    startup_timeout: float = 90.0,
    workers: int = 1,
) -> MlflowServer:
    """Launch ``mlflow server`` with a SQLite backend and served artifacts under ``workdir``.

    Blocks until ``GET /health`` answers 200; raises HarnessError with the server's log tail
    if it exits or does not become healthy within ``startup_timeout`` seconds.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    artifacts = workdir / "artifacts"
    artifacts.mkdir(exist_ok=True)
    port = port or free_port(host)
    cmd = server_command(
        f"sqlite:///{workdir / 'mlflow.db'}", str(artifacts), host, port, workers
    )
    log_path = workdir / "server.log"
    log = open(log_path, "wb")
    env = dict(os.environ)
    env.pop("MLFLOW_TRACKING_URI", None)  # the server must not log to some other store
    # MLflow's background job runner (GenAI jobs: several huey consumer processes) is not
    # needed to track runs; off, the server starts faster and uses fewer processes.
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    process = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env=env, start_new_session=True
    )
    log.close()
    server = MlflowServer(f"http://{host}:{port}", workdir, process, log_path, cmd)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise HarnessError(
                f"mlflow server exited with code {process.returncode} before answering "
                f"{server.url}/health; log tail:\n{server.log_tail()}"
            )
        if _healthy(server.url):
            return server
        time.sleep(0.5)
    server.stop()
    raise HarnessError(
        f"mlflow server at {server.url} did not answer /health within {startup_timeout:.0f}s; "
        f"log tail:\n{server.log_tail()}"
    )
