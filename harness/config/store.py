"""Checks of the tracking store a job names, before any work: the URI's scheme, and whether the
store it names (a SQLite file, a folder, a server, a SQL driver) can be opened or made."""

from __future__ import annotations

import os
import stat
import tempfile
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from harness.errors import ConfigError, did_you_mean


# the URI schemes MLflow opens a tracking store for (mlflow.tracking._tracking_service.utils),
# plus those of installed tracking-store plugins (entry points "mlflow.tracking_store")
TRACKING_SCHEMES = ("", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks",
                    "databricks-uc", "uc")


def tracking_uri_problem(uri: str) -> str | None:
    """Why MLflow cannot open ``uri`` as a tracking store (an unknown scheme), else None; checked
    before any work so ``garbage://x`` is named, not MLflow's model-registry message."""
    text = str(uri).strip()
    scheme = urlparse(text).scheme.lower() if "://" in text or text.startswith("file:") else ""
    base = scheme.split("+", 1)[0]  # postgresql+psycopg2
    if base in TRACKING_SCHEMES:
        return _store_target_problem(text, base)
    try:
        plugins = {ep.name for ep in entry_points(group="mlflow.tracking_store")}
    except Exception:  # noqa: BLE001 - no plugins
        plugins = set()
    if scheme in plugins or base in plugins:
        return None
    known = [s for s in TRACKING_SCHEMES if s] + sorted(plugins)
    return (f"unsupported scheme {scheme + '://'!r} in {text!r}{did_you_mean(base, known)}; MLflow stores "
            f"are {', '.join(s + '://' for s in known)} or a plain folder path")


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is no regular file (checked with ``stat``: SQLite
    opening a FIFO blocks forever), else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


SQL_SCHEMES = ("postgresql", "mysql", "mssql")


def _cannot_create(path: Path, what: str) -> str | None:
    """Why ``path`` (not there yet) cannot be created, found by creating and removing a probe file
    in its nearest existing folder (permission bits say nothing for root or /proc), else None;
    MLflow would otherwise retry its connection for minutes and end in SQLAlchemy noise."""
    parent = next((p for p in path.absolute().parents if os.path.lexists(p)), None)
    if parent is None or not parent.is_dir():
        return f"{what} {path} cannot be made: {parent} is not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".route-bench-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{what} {path} cannot be made: its folder {parent} is not writable ({exc.strerror or exc})"
    return None

def _store_target_problem(text: str, base: str) -> str | None:
    """Why the store a known scheme names cannot be opened, found before any work: a SQLite URI
    naming no file or something that is no regular file, a file store that is no folder, a SQL
    database whose driver is not installed."""
    if base == "sqlite":
        return _sqlite_problem(text)
    if base in ("", "file"):
        return _file_store_problem(text)
    if base in ("http", "https"):
        return _server_problem(text)
    if base in SQL_SCHEMES:
        return _sql_driver_problem(text, base)
    return None


def _sqlite_problem(text: str) -> str | None:
    """A ``sqlite://`` URI naming no file, something that is no regular file, or a file that
    cannot be made."""
    raw = text.split("://", 1)[1].split("?", 1)[0] if "://" in text else ""
    path = raw[1:] if raw.startswith("/") else raw  # sqlite:///rel.db, sqlite:////abs.db
    if not path or path == ":memory:":
        return (f"{text!r} names no database file (an in-memory store keeps no run); give "
                "sqlite:///<path>/mlflow.db")
    kind = _not_regular(Path(path))
    if kind:
        return f"the SQLite store {path} is {kind}, expected an SQLite database file"
    return None if Path(path).exists() else _cannot_create(Path(path), "the SQLite store")


def _file_store_problem(text: str) -> str | None:
    """A folder store that is no folder, or one this MLflow refuses without MLFLOW_ALLOW_FILE_STORE."""
    path = Path(text[len("file://"):] if text.startswith("file://") else text.removeprefix("file:"))
    kind = _not_regular(path)
    if path.exists() and kind != "a folder":
        return f"the file store {path} is {kind or 'a file'}, expected a folder"
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() not in ("true", "1"):
        return (f"{text!r} is a folder (file) store, which this MLflow refuses unless MLFLOW_ALLOW_FILE_STORE=true; "
                "give sqlite:///<path>/mlflow.db")
    return None


def _server_problem(text: str) -> str | None:
    """An ``http(s)://`` URI with a bad port or no host."""
    try:
        parsed = urlparse(text)
        parsed.port  # noqa: B018 - raises on a port outside 0..65535
    except ValueError as exc:
        return f"{text!r} is no server URL ({exc})"
    if not parsed.hostname:
        return f"{text!r} names no host (expected http://HOST:PORT)"
    return None


def _sql_driver_problem(text: str, base: str) -> str | None:
    """A SQL database URI whose driver is not installed, or one SQLAlchemy cannot parse."""
    try:
        from sqlalchemy.engine import make_url

        dialect = make_url(text).get_dialect()
        (getattr(dialect, "import_dbapi", None) or dialect.dbapi)()
    except ImportError as exc:
        return f"the database driver for {base}:// is not installed ({exc}); install it or use sqlite:///"
    except Exception as exc:  # noqa: BLE001 - a URI SQLAlchemy cannot parse
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"cannot use {text!r}: {first}"
    return None


def check_store_dir(tracking: Any) -> None:
    """``tracking.store_dir`` (used when no URI is given): a folder, or a path it can be made at;
    the ``mlflow.db`` inside a regular file. Relative to the launch folder (the current one)."""
    if tracking.uri is not None or os.environ.get("MLFLOW_TRACKING_URI"):
        return
    folder = Path(str(tracking.store_dir)).expanduser()
    kind = _not_regular(folder)
    if folder.exists() and kind != "a folder":
        raise ConfigError("tracking.store_dir", f"{folder} is {kind or 'a file'}, expected a folder for the MLflow "
                                                "store (or a path where one can be made)")
    parent = next((p for p in [folder, *folder.parents] if os.path.lexists(p)), None)
    if parent is not None and not parent.is_dir():
        raise ConfigError("tracking.store_dir", f"{parent} is not a folder, so {folder} cannot be made")
    kind = _not_regular(folder / "mlflow.db")
    if kind:
        raise ConfigError("tracking.store_dir", f"{folder / 'mlflow.db'} is {kind}, expected an SQLite database file")
    if not (folder / "mlflow.db").exists():
        problem = _cannot_create(folder / "mlflow.db", "the MLflow store")
        if problem:
            raise ConfigError("tracking.store_dir", problem)

