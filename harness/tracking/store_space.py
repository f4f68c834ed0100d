"""A store that cannot take a write (a full disk, a quota, a file system gone read-only), and the
room kept to end its runs anyway.

Why: on a full disk every write fails, the one that would end a run FAILED too, so the runs
stayed RUNNING and MLflow's traceback was all a user saw. Two pieces:

- :func:`write_failure` says, from an exception (its chain included), whether it is the store's
  storage failing ("database or disk is full", ENOSPC, EDQUOT, EROFS, "disk I/O error", a
  read-only database, any other OSError) rather than a bad call, in a few words;
- a *reserve*: a local SQLite store keeps ``.route-bench.reserve`` (``RESERVE_BYTES``, allocated)
  next to the database. On a write failure the reserve is released (:func:`release_reserve`), so
  the writes that end the runs FAILED find room; it is made again at the next opening of the
  store, and a store whose disk has no room for it is refused at that opening
  (:func:`ensure_reserve`), before any run is created.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

RESERVE_NAME = ".route-bench.reserve"
RESERVE_BYTES = 2 * 1024 * 1024  # ending a few runs FAILED (status, tags, a journal) needs far less

_REASONS = {
    errno.ENOSPC: "its disk is full",
    errno.EDQUOT: "its disk quota is exceeded",
    errno.EROFS: "its file system is read-only",
    errno.EIO: "its disk failed (I/O error)",
}
_NOT_STORAGE = (errno.ENOENT, errno.ENOTDIR, errno.EISDIR)  # a path that is wrong, not storage that fails
_TEXTS = (
    ("database or disk is full", "its disk is full"),
    ("no space left on device", "its disk is full"),
    ("disk quota exceeded", "its disk quota is exceeded"),
    ("attempt to write a readonly database", "it became read-only"),
    ("read-only file system", "its file system is read-only"),
    ("disk i/o error", "its disk failed (I/O error)"),
)


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def write_failure(exc: BaseException) -> str | None:
    """Why the store's storage refused a write, in a few words ("its disk is full"), found in
    ``exc`` or the exceptions it was raised from; None for any other error."""
    for link in _chain(exc):
        text = str(link).lower()
        for needle, reason in _TEXTS:
            if needle in text:
                return reason
        if isinstance(link, OSError) and link.errno is not None and link.errno not in _NOT_STORAGE:
            return _REASONS.get(link.errno, f"it cannot be written ({link.strerror or link})")
    return None


def failure_line(exc: BaseException) -> str:
    """The line of ``exc`` (or of what it was raised from) that names the storage failure
    ("(sqlite3.OperationalError) database or disk is full"), not SQLAlchemy's preamble."""
    for link in _chain(exc):
        for line in str(link).splitlines():
            if any(needle in line.lower() for needle, _ in _TEXTS):
                return line.strip()[:300]
    for link in _chain(exc):
        if isinstance(link, OSError):
            return str(link)[:300]
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def reserve_path(db_path: Path) -> Path:
    return db_path.parent / RESERVE_NAME


def ensure_reserve(db_path: Path) -> str | None:
    """Make the reserve next to the store if it is missing; returns why it cannot be made (the
    disk has no room), else None. Nothing is left behind when it fails."""
    path = reserve_path(db_path)
    try:
        if path.stat().st_size >= RESERVE_BYTES:
            return None
    except OSError:
        pass
    tmp = path.with_name(f"{RESERVE_NAME}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _allocate(fd, RESERVE_BYTES)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return None  # a folder that cannot be written: the writability checks say it
        return _REASONS.get(exc.errno or 0, exc.strerror or str(exc))
    return None


def _allocate(fd: int, size: int) -> None:
    """Really take ``size`` bytes of the disk (a sparse file would take none)."""
    if hasattr(os, "posix_fallocate"):
        try:
            os.posix_fallocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", -1)):
                raise
    block = b"\0" * 65536
    for _ in range(size // len(block)):
        os.write(fd, block)
    os.fsync(fd)


def release_reserve(db_path: Path) -> bool:
    """Free the reserve (a write failed: the runs must still be ended); True when it was there."""
    try:
        reserve_path(db_path).unlink()
        return True
    except OSError:
        return False
