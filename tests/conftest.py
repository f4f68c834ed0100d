"""Shared fixtures and the suite's setup. Tests never need ../shared; real-data tests fetch
what they need themselves.

- The suite's cache: every test that does not name its own cache (``HARNESS_CACHE_DIR``) uses
  one fresh folder per run, shared by the pytest-xdist workers, never the user's
  ``~/.cache/rag-route-bench``. Builds are content-addressed and safe to run concurrently
  (a lock per shard and chunk), so what one test built (a converted dataset, a real-model
  table) is read, not rebuilt, by the next. ``HARNESS_CACHE_DIR`` set before the run is kept.
- Files run heaviest first (tests/helpers/order.py), so the workers end together.
- Ray's workers at normal priority (``RAY_worker_niceness=0``; Ray's own default is 15): beside
  other CPU-bound work a niced worker starves, and a cluster test hit its 900 s ceiling with
  two busy processes on the machine. Nothing the tests check depends on the niceness.
- OpenMP's idle threads sleep instead of spinning (``OMP_WAIT_POLICY=PASSIVE``, set before any
  library that reads it is loaded; a value set before the run is kept). Three workers on two
  cores each run torch's thread pool: spinning, the waiting threads took the cores from the
  working ones (the real-encoder test files beside one busy process: 127 s, 185 CPU-s; passive:
  67 s, 82 CPU-s). The thread count and so every number stay the same.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch (libgomp) is loaded anywhere

import pytest  # noqa: E402 - after the variable above

from harness.synthetic import synthetic_outcome_table  # noqa: E402
from tests.helpers.order import file_seconds, heaviest_first  # noqa: E402

pytest_plugins = ["tests.helpers.fixtures"]


@pytest.hookimpl(trylast=True)  # after pytest's own configure made the temporary-path factory
def pytest_configure(config):
    os.environ.setdefault("RAY_worker_niceness", "0")
    if os.environ.get("HARNESS_CACHE_DIR"):
        return
    # the run's root temporary folder: the same for every xdist worker of one run
    root = config._tmp_path_factory.getbasetemp()  # noqa: SLF001 - pytest's own factory, made at configure
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    os.environ["HARNESS_CACHE_DIR"] = str(root / "suite-cache")


def pytest_collection_modifyitems(config, items):
    items[:] = heaviest_first(items, file_seconds())


@pytest.fixture
def planted_table():
    """Synthetic outcome table (300 questions, 60 documents) with a planted routing signal."""
    return synthetic_outcome_table(n_docs=60, questions_per_doc=5, seed=0)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """Point the harness cache at a fresh temporary folder for this test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    return cache
