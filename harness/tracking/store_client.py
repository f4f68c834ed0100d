"""Opening a tracking store that can work, and calling it through retries.

- **Fail fast on a store that cannot work.** ``StoreClient(uri)`` probes an HTTP(S) tracking
  server (``GET /health``, a few seconds) before anything else and raises
  :class:`TrackingStoreError` naming the URL when it does not answer (MLflow's own client would
  retry for minutes); a SQLite file that is not a database (or a folder, or unreadable, or
  read-only) is a TrackingStoreError naming the file. Transient errors of a working store
  ("database is locked") are retried with backoff (``_retry``).
- **Schema creation is serialised.** Opening a SQLite store holds a file lock in the store's
  folder (``.route-bench.lock``), and MLflow's schema-creation race between processes outside
  that lock is retried, so two sweeps on a fresh store both start.
"""

from __future__ import annotations

import contextlib
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, TypeVar

from harness.errors import HarnessError
from harness.io import file_lock

try:  # newer harness.errors has a StoreError family; keep working without it
    from harness.errors import StoreError as _StoreErrorBase
except ImportError:  # pragma: no cover - depends on the errors module's version
    _StoreErrorBase = HarnessError

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database is busy" in text or "unable to open database" in text


def is_dataset_race(exc: BaseException) -> bool:
    """Two parallel jobs logging the same dataset: the slower insert of the shared dataset row
    fails on its UNIQUE key. Retried, the store finds the row and only links it to the run."""
    return "unique constraint failed: datasets." in str(exc).lower()


class TrackingStoreError(_StoreErrorBase):
    """The tracking store cannot be used: an HTTP server that does not answer, a SQLite file that
    is not a database. The message names the URL or the file."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


SQLITE_HEADER = b"SQLite format 3\x00"
PROBE_TIMEOUT_S = 3.0
PROBE_ATTEMPTS = 3


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (None for other stores)."""
    if not uri.startswith("sqlite:///"):
        return None
    raw = uri[len("sqlite:///"):].split("?", 1)[0]
    return Path(raw) if raw and raw != ":memory:" else None


def check_sqlite_file(path: Path) -> None:
    """A SQLite store file that exists must be a readable SQLite database (one line otherwise)."""
    if not path.exists():
        return
    if path.is_dir():
        raise TrackingStoreError(f"MLflow store {path} is a folder, not an SQLite database file")
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise TrackingStoreError(f"MLflow store {path} cannot be read: {exc.strerror or exc}") from None
    if head and head != SQLITE_HEADER:
        raise TrackingStoreError(
            f"MLflow store {path} is not an SQLite database (corrupt or another kind of file); "
            "move it aside or point tracking.uri elsewhere"
        )


def check_writable_store(path: Path) -> None:
    """A SQLite store a job writes to must be writable: the file, and its folder (SQLite keeps
    its journal next to the file). Said naming the file, before SQLAlchemy's autoflush noise."""
    folder = path.parent
    if not folder.is_dir():
        return
    flags = getattr(os.statvfs(folder), "f_flag", 0) if hasattr(os, "statvfs") else 0
    if flags & getattr(os, "ST_RDONLY", 0):
        raise TrackingStoreError(f"MLflow store {path} is on a read-only file system; point tracking.uri at a "
                                 "writable folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise TrackingStoreError(f"MLflow store {path} is read-only (no write permission); make it writable or "
                                 "point tracking.uri elsewhere")
    if not os.access(folder, os.W_OK):
        raise TrackingStoreError(f"MLflow store {path}: its folder {folder} is read-only (SQLite writes its "
                                 "journal there); make it writable or point tracking.uri elsewhere")


def probe_store(uri: str, timeout: float = PROBE_TIMEOUT_S, attempts: int = PROBE_ATTEMPTS) -> None:
    """An HTTP(S) tracking server must answer ``GET /health`` within a few seconds.

    Any HTTP answer below 500 counts (the server is there; MLflow's calls report the rest).
    Other URIs are not probed. Raises TrackingStoreError naming the URL.
    """
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    reason = "no answer"
    for attempt in range(max(1, attempts)):
        try:
            with urllib.request.urlopen(url, timeout=timeout):
                return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
            reason = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            cause = getattr(exc, "reason", exc)
            reason = str(getattr(cause, "strerror", None) or cause)
        if attempt + 1 < attempts:
            time.sleep(0.5 * (attempt + 1))
    raise TrackingStoreError(
        f"tracking server {uri} does not answer ({reason}); start it, or point tracking.uri / "
        "MLFLOW_TRACKING_URI at a running one"
    )


def _is_schema_race(exc: BaseException) -> bool:
    """Two processes creating MLflow's schema in one fresh SQLite file at once."""
    text = str(exc).lower()
    return ("duplicate column name" in text or ("table" in text and "already exists" in text)
            or "out-of-date database schema" in text)


class StoreClient:
    """A retrying ``MlflowClient`` bound to one tracking URI, opened only on a store that can work
    (a server that answers, a SQLite file that is a writable database)."""

    def __init__(self, uri: str, retries: int = 5, probe: bool = True):
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.retries = max(1, int(retries))
        self.db_path = sqlite_path(uri)
        from harness.config.store import tracking_uri_problem

        if tracking_uri_problem(uri):  # e.g. $MLFLOW_TRACKING_URI=garbage://x
            raise TrackingStoreError(f"tracking store: {tracking_uri_problem(uri)}")
        if probe:
            probe_store(uri)
        if self.db_path is not None:
            check_sqlite_file(self.db_path)
            check_writable_store(self.db_path)
        race = lambda exc: is_transient(exc) or _is_schema_race(exc)  # noqa: E731
        try:
            with self.store_lock(".route-bench.lock"):  # one schema creation at a time
                self.client = self._retry(lambda: MlflowClient(tracking_uri=uri), transient=race)
        except Exception as exc:
            if self.db_path is None:
                raise
            raise TrackingStoreError(f"MLflow store {self.db_path} cannot be opened: {_first_line(exc)}") from exc

    @contextlib.contextmanager
    def store_lock(self, name: str = ".route-bench-claims.lock"):
        """An inter-process lock in a SQLite store's folder; no lock for other stores or where
        the folder cannot hold one (a read-only folder)."""
        folder = self.db_path.parent if self.db_path is not None else None
        if folder is None or not folder.is_dir():
            yield False
            return
        try:
            lock = file_lock(folder / name)
            lock.__enter__()
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            lock.__exit__(None, None, None)

    def _retry(self, call: Callable[[], T], transient: Callable[[BaseException], bool] = is_transient) -> T:
        delay = 0.2
        for attempt in range(self.retries):
            try:
                return call()
            except Exception as exc:  # noqa: BLE001 - re-raised unless transient
                if attempt == self.retries - 1 or not transient(exc):
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")
