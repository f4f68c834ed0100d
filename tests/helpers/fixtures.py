"""Pytest fixtures that more than one test module uses, registered once for the whole suite
(``pytest_plugins`` in tests/conftest.py), each with the scope it always had.

Why here: a test module must not import another one for its fixtures.

- ``installed_plugin``: tests/plugin_example pip-installed (policy registry, check_policy);
- ``chromium``: a headless browser for the MLflow UI tests (tests/helpers/browser.py);
- ``cli``: the CLI entry point in-process, from a fresh folder with its own cache;
- ``empty_store``, ``closed_port``, ``workdir``: the folder, store and port a bad-input case
  runs with (tests/helpers/bad_inputs.py).
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.bad_inputs import DENIED, FIFOS, FILES
from tests.helpers.browser import CHROMIUM, _install_chromium

REPO = Path(__file__).resolve().parents[2]


# ---- plugins ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory):
    """pip-install tests/plugin_example (a copy, so no build files land in the repo) into a
    folder of its own beside the harness, never into its venv: on ``sys.path`` for this
    process and on ``PYTHONPATH`` for the commands it starts, both undone after. A pip install
    into the shared venv would be seen, and uninstalled, by tests running on another worker."""
    root = tmp_path_factory.mktemp("plugin")
    src, target = root / "plugin_example", root / "site"
    shutil.copytree(REPO / "tests" / "plugin_example", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["install", "--no-deps", "--no-build-isolation", "--no-index", "--target", str(target), str(src)],
                   check=True, timeout=300)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(target))  # also invalidates the import caches
        patch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(target), os.environ.get("PYTHONPATH")) if p))
        try:
            yield "long_question"
        finally:
            sys.modules.pop("route_bench_example_plugin", None)
    importlib.invalidate_caches()


# ---- the browser --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def chromium() -> str:
    path = _install_chromium()
    if path is None:
        msg = (f"{CHROMIUM} is missing and could not be installed "
               "(run `apt-get install -y chromium` as root)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


# ---- bad inputs ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def empty_store(tmp_path_factory) -> str:
    """An MLflow SQLite store with no runs (created once: MLflow's schema takes seconds)."""
    from mlflow.tracking import MlflowClient

    db = tmp_path_factory.mktemp("store") / "mlflow.db"
    uri = f"sqlite:///{db}"
    MlflowClient(tracking_uri=uri).search_experiments()
    return uri


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends


@pytest.fixture
def workdir(tmp_path, monkeypatch, isolated_cache):
    """A fresh launch folder with the bad files, its own cache and tracking store."""
    data = tmp_path / "data"
    data.mkdir()
    for name, body in FILES.items():
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(body)
    (data / "not-a-wheel.whl").write_bytes(b"not a zip")
    for name in FIFOS:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(data / name)
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(run)
    for var in ("HYDRA_FULL_ERROR", "MLFLOW_TRACKING_URI", "HARNESS_OLMO_WHEEL", "ROUTE_BENCH_DEBUG",
                "ROUTE_BENCH_MAX_FILE_MB"):
        monkeypatch.delenv(var, raising=False)
    # "permission denied" without depending on the user (root reads everything): the reader sees
    # the error a chmod 000 file gives
    real_open = Path.open

    def path_open(self, *args, **kwargs):
        if self.name == DENIED:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", path_open)
    return data, run, isolated_cache


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """``cli(argv) -> (exit code, stdout, stderr)``: ``python -m harness`` in-process, launched
    from ``tmp_path`` with its own cache and Hydra's short errors (where a real process is not
    the point of the test)."""
    from tests.helpers.bad_inputs import _run

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    return lambda argv: _run(argv, capsys)
