"""Opening a tracking store that can work, and calling it through retries.

- **Fail fast on a store that cannot work.** ``StoreClient(uri)`` probes an HTTP(S) tracking
  server before anything else (``probe_store``: one MLflow API call, which must answer as MLflow
  does, within ``PROBE_BUDGET_S`` seconds in all) and raises :class:`TrackingStoreError` naming
  the URL and ``tracking.uri`` when it does not answer, errs (HTTP 5xx) or answers something
  else (MLflow's own client would retry for minutes); a SQLite file that is not an MLflow store
  (``harness.tracking.store_file``: another program's database, an empty file, a folder, a
  read-only file) is a TrackingStoreError naming the file, before anything is written to it.
  Transient errors of a working store ("database is locked") are retried with backoff
  (``_retry``).
- **Schema creation is serialised and atomic.** Opening a SQLite store holds a file lock in the
  store's folder (``.route-bench.lock``, the folder made first); a missing store is built in a
  temporary file and renamed into place, a half-created one that holds nothing is made anew
  (``store_file.prepare_store``), so concurrent sweeps on a new store all start and a kill -9
  leaves no half-created store. MLflow's schema-creation race with a process outside that
  lock is still retried.
- **A store that cannot take a write is one line.** A write refused by the store's storage (a
  full disk, ``harness.tracking.store_space.write_failure``) is a :class:`StoreWriteError` naming
  the store; the space kept next to a SQLite store (``.route-bench.reserve``) is released first,
  so the runs can still be ended FAILED.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Callable, TypeVar

from harness.errors import HarnessError
from harness.io import file_lock
from harness.tracking import store_file, store_space

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


class StoreWriteError(TrackingStoreError):
    """The store's storage refused a write (a full disk, a quota, a read-only file system)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


SQLITE_HEADER = store_file.SQLITE_HEADER
PROBE_TIMEOUT_S = 3.0  # one request of the probe
PROBE_BUDGET_S = 6.0  # the whole probe, retries of a refused connection or an HTTP 5xx included
PROBE_ATTEMPTS = 3
ENV_PROBE_BUDGET = "ROUTE_BENCH_STORE_PROBE_S"
# an experiment name no one creates: an MLflow server answers 404 RESOURCE_DOES_NOT_EXIST
PROBE_EXPERIMENT = "route-bench store probe (never created)"
PROBE_ENDPOINT = "/api/2.0/mlflow/experiments/get-by-name"


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


def probe_budget_s() -> float:
    raw = os.environ.get(ENV_PROBE_BUDGET)
    try:
        return max(0.5, float(raw)) if raw else PROBE_BUDGET_S
    except ValueError:
        return PROBE_BUDGET_S


def _judge(resp) -> tuple[bool, str | None]:
    """(retry?, what is wrong with the server, said after its URL; None: it answered as MLflow
    does) for one probe answer."""
    code = resp.status_code
    if code >= 500:
        return True, f"answers HTTP {code} (a server error)"
    if code in (401, 403):
        return False, (f"refuses the request (HTTP {code}; set MLFLOW_TRACKING_USERNAME / "
                       "MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN)")
    try:
        body = json.loads(resp.text)
    except ValueError:
        kind = resp.headers.get("Content-Type", "no content type").split(";")[0]
        return False, f"is not an MLflow tracking server (HTTP {code}, {kind}, not MLflow's JSON)"
    if code == 200 and isinstance(body, dict) and isinstance(body.get("experiment"), dict):
        return False, None
    if code == 404 and isinstance(body, dict) and body.get("error_code") == "RESOURCE_DOES_NOT_EXIST":
        return False, None
    return False, f"is not an MLflow tracking server (HTTP {code}, JSON that MLflow does not send)"


def probe_store(uri: str, budget_s: float | None = None) -> None:
    """An HTTP(S) tracking server must answer one MLflow API call as MLflow does (an experiment
    looked up by a name no one uses: 404 ``RESOURCE_DOES_NOT_EXIST``), within ``budget_s``
    seconds in all (``PROBE_BUDGET_S``, $ROUTE_BENCH_STORE_PROBE_S): no answer and an HTTP 5xx
    are tried ``PROBE_ATTEMPTS`` times within it, a request waits ``PROBE_TIMEOUT_S`` at most. The request
    carries MLflow's own credentials and TLS settings. Other URIs are not probed. Raises
    TrackingStoreError naming the URL and ``tracking.uri``."""
    if not uri.startswith(("http://", "https://")):
        return
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    budget = probe_budget_s() if budget_s is None else budget_s
    deadline = time.monotonic() + budget
    for attempt in range(PROBE_ATTEMPTS):
        left = deadline - time.monotonic()
        try:
            resp = http_request(get_default_host_creds(uri), PROBE_ENDPOINT, "GET", max_retries=0, backoff_factor=0,
                                timeout=max(0.2, min(PROBE_TIMEOUT_S, left)), raise_on_status=False,
                                params={"experiment_name": PROBE_EXPERIMENT})
            retry, reason = _judge(resp)
        except Exception as exc:  # noqa: BLE001 - no answer: refused, timed out, reset, TLS
            retry, reason = True, f"does not answer ({_no_answer(exc)})"
        if reason is None:
            return
        if not retry or time.monotonic() + 0.5 * (attempt + 1) >= deadline:
            break
        time.sleep(0.5 * (attempt + 1))
    tries = f" ({attempt + 1} tries in {budget - max(0.0, deadline - time.monotonic()):.1f} s)" if attempt else ""
    raise TrackingStoreError(
        f"tracking server {uri} {reason}{tries}; start it, or point tracking.uri / MLFLOW_TRACKING_URI at a "
        "running MLflow tracking server"
    )


def _no_answer(exc: BaseException) -> str:
    """A short reason for a request that got no answer ("timed out", "connection refused")."""
    text = " ".join(str(e) for e in store_space._chain(exc)).lower()
    for needle, said in (("timed out", "timed out"), ("timeout", "timed out"), ("refused", "connection refused"),
                         ("reset", "connection reset"), ("name or service not known", "unknown host"),
                         ("certificate", "TLS certificate rejected"), ("remote end closed", "connection closed")):
        if needle in text:
            return said
    return _first_line(exc)


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
            self._make_folder()
        _quiet_store_errors()
        race = lambda exc: is_transient(exc) or _is_schema_race(exc)  # noqa: E731
        try:
            with self.store_lock(".route-bench.lock"):  # one schema creation at a time
                if self.db_path is not None:
                    self._prepare_file()
                self.client = self._retry(lambda: MlflowClient(tracking_uri=uri), transient=race)
        except TrackingStoreError:
            raise
        except Exception as exc:
            if self.db_path is None:
                raise
            raise TrackingStoreError(f"MLflow store {self.db_path} cannot be opened: {_first_line(exc)}") from exc

    def _make_folder(self) -> None:
        """The store's folder, so its lock exists before the store does (two sweeps on a new
        store in a new folder then create it one after the other)."""
        try:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TrackingStoreError(f"MLflow store {self.db_path}: its folder cannot be made "
                                     f"({exc.strerror or exc})") from None

    def _prepare_file(self) -> None:
        """Under the lock: an MLflow store, made whole if missing or half-created
        (``store_file.prepare_store``), with room kept to end its runs (``store_space``)."""
        try:
            store_file.prepare_store(self.db_path)
        except ValueError as exc:
            raise TrackingStoreError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - creating it failed: a full disk, a read-only folder
            reason = store_space.write_failure(exc)
            if reason is None:
                raise
            raise StoreWriteError(f"MLflow store {self.db_path} cannot be created: {reason} ({store_space.failure_line(exc)}); "
                                  "free space or point tracking.uri elsewhere") from None
        self.check_room()

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
            except TrackingStoreError:
                raise
            except Exception as exc:  # noqa: BLE001 - re-raised unless transient
                reason = store_space.write_failure(exc)
                if reason is not None:
                    raise self.write_error(reason, exc) from exc
                if attempt == self.retries - 1 or not transient(exc):
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")

    def check_room(self) -> None:
        """Before a run is created: the room kept next to a SQLite store is there (made again if
        a failed write released it), else StoreWriteError: no run is started on a full disk."""
        if self.db_path is None:
            return
        problem = store_space.ensure_reserve(self.db_path)
        if problem:
            raise StoreWriteError(
                f"MLflow store {self.db_path} cannot be written: {problem} (no room for the "
                f"{store_space.RESERVE_BYTES // 2**20} MiB kept next to it to end runs, {store_space.RESERVE_NAME}); "
                "free space on its disk (or point tracking.uri elsewhere) and rerun")

    def write_error(self, reason: str, exc: BaseException) -> StoreWriteError:
        """The one-line error of a write the store's storage refused; the room kept next to a
        SQLite store is released first, so the runs can still be ended."""
        where = f"MLflow store {self.db_path}" if self.db_path is not None else f"tracking store {self.uri}"
        if self.db_path is not None:
            store_space.release_reserve(self.db_path)
        return StoreWriteError(f"{where} cannot be written: {reason} ({store_space.failure_line(exc)}); free space on its "
                               "disk (or point tracking.uri elsewhere) and rerun")


def _quiet_store_errors() -> None:
    """MLflow logs every SQLAlchemy error with its traceback before raising it; the harness says
    each store error in one line itself (the traceback: the job's log, ``--debug``)."""
    logger = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _DropErrors) for f in logger.filters):
        logger.addFilter(_DropErrors())


class _DropErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR
