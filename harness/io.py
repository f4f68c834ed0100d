"""Atomic, content-addressed file handling shared by every cached stage.

Why: an interrupted run must never leave a half-written artifact that a later run trusts, and
two processes building the same key must not corrupt each other.

No cache file is trusted blindly. Every cached artifact ``X`` (outcome tables and their shards
and ``info.json``, converted datasets, cached plots) is written atomically and then gets a
sidecar ``X.sha256`` (JSON: its SHA-256, size, the cache key it belongs to and any extra
fields), also written atomically, *after* the file. A reader calls :func:`verify_file`: a missing
or unreadable sidecar, an unreadable file, a digest mismatch or a key other than the folder's
raises :class:`CacheCorrupt`; the owner then calls :func:`move_aside`, which renames the file
(and its sidecar) to ``X.corrupt-<UTC time>``, prints ONE line naming the file, and rebuilds.
Verifying needs no write access, so a finished artifact in a read-only cache can be read.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

CACHE_ENV = "HARNESS_CACHE_DIR"


def cache_root() -> Path:
    """Root folder of all cached artifacts: $HARNESS_CACHE_DIR, else ~/.cache/rag-route-bench."""
    env = os.environ.get(CACHE_ENV)
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "rag-route-bench"
    try:
        if os.path.lexists(root) and not root.is_dir():
            raise FileExistsError(17, "exists and is no folder (a file, FIFO or device)", str(root))
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file, FIFO or device in the way, or no permission: name the setting
        from harness.errors import StoreError

        where = f"${CACHE_ENV}" if env else "the default cache folder"
        why = exc.strerror if isinstance(exc, FileExistsError) else (exc.strerror or str(exc)).lower()
        raise StoreError(f"{where} {str(root)!r} cannot be the cache folder: {why}") from None
    return root


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


JSON_TYPES = "dict (str keys), list, str, int, float, bool or None"


def _type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _json_hint(value: Any) -> str:
    """How to turn a common non-JSON value into JSON (for error messages)."""
    mod = type(value).__module__ or ""
    if mod.startswith("numpy"):
        if getattr(value, "ndim", 0):
            return "return a list (array.tolist())"
        return "return a Python number (float(x), int(x) or bool(x))"
    if isinstance(value, (set, frozenset)):
        return "return a sorted list"
    if isinstance(value, tuple):
        return "return a list"
    return f"return one of: {JSON_TYPES}"


def json_problem(obj: Any, path: str = "", *, finite: bool = False, tuples: bool = True,
                 str_keys: bool = False) -> tuple[str, str] | None:
    """The first place where ``obj`` is not plain JSON, as ``(path, problem)``; None if it is.

    ``path`` is written like ``['weights'][0]``. Plain JSON: dict, list, str, int, float, bool,
    None (``tuples``: tuples count as lists; ``str_keys``: dict keys must be str, else str/int/
    float/bool/None keys are accepted as :func:`json.dumps` converts them; ``finite``: floats
    must be finite). Subclasses of int/float/str (e.g. ``numpy.float64``) serialise exactly and
    are accepted; anything else (numpy arrays and integer scalars, sets, objects) is a problem.
    """
    stack: list[tuple[str, Any]] = [(path, obj)]
    while stack:
        where, v = stack.pop()
        if v is None or isinstance(v, (str, bool, int)):
            continue
        if isinstance(v, float):
            if finite and not math.isfinite(v):
                return where, f"{v!r} is not a finite number (strict JSON has no NaN/Infinity)"
            continue
        if isinstance(v, dict):
            items = []
            for k, x in v.items():
                if not isinstance(k, str) and (str_keys or not (k is None or isinstance(k, (bool, int, float)))):
                    return where, f"key {k!r} ({_type_name(k)}) is not a str"
                items.append((f"{where}[{k!r}]", x))
            stack.extend(reversed(items))
            continue
        if isinstance(v, list) or (tuples and isinstance(v, tuple)):
            stack.extend(reversed([(f"{where}[{i}]", x) for i, x in enumerate(v)]))
            continue
        return where, f"{_type_name(v)} is not JSON; {_json_hint(v)}"
    return None


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace variance: the input of every content hash.

    Strict about types: a value JSON cannot hold (a NumPy array, a set, an object) is a
    TypeError naming where it is, never silently ``str()``-ed (a string form is not stable run
    to run and does not read back as the value). NaN is written as ``NaN`` (Python reads it
    back); :func:`policies.base.check_json_state` additionally refuses it in policy state.
    """
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_refuse)
    except (TypeError, ValueError) as exc:
        problem = json_problem(obj, "value")
        if problem is None:  # e.g. keys of mixed types that cannot be sorted
            raise TypeError(f"canonical JSON: {exc}") from None
        raise TypeError(f"canonical JSON: {problem[0]}: {problem[1]}") from None


def _refuse(value: Any) -> Any:
    raise TypeError(f"{_type_name(value)} is not JSON")


def digest_of(obj: Any) -> str:
    """SHA-256 of the canonical JSON of ``obj``."""
    return sha256_bytes(canonical_json(obj).encode("utf-8"))


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` then rename onto ``path``; on any error remove the temp file.

    The rename is atomic on POSIX, so readers see either the old file or the whole new one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        write(tmp_path)
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual mode
        with open(tmp_path, "rb") as f:  # on disk before the rename: no empty file after a crash
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        if exc.filename is None:  # a full disk in a library's write names no file: name the target
            exc.filename = str(path)
        raise
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return path


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask has no read-only form


def _umask() -> int:
    return _UMASK


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda p: p.write_bytes(data))


# ---- verified cache files ----------------------------------------------------------------------
SIDECAR_SUFFIX = ".sha256"


class CacheCorrupt(Exception):
    """A cache file failed verification; ``reason`` says why (for :func:`move_aside`)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"cache file {self.path} is corrupt ({reason})")


def sidecar_path(path: str | os.PathLike) -> Path:
    """``X.sha256`` next to ``X``: the digest record of a cache file."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def write_sidecar(path: str | os.PathLike, *, key: str | None = None, **extra: Any) -> dict:
    """Record ``path``'s SHA-256 and size (and ``key``, ``extra``) in its sidecar, atomically.

    Call it after the file itself is in place: a file without a sidecar is never trusted.
    """
    path = Path(path)
    record = {"file": path.name, "sha256": sha256_file(path), "bytes": path.stat().st_size, "key": key, **extra}
    atomic_write_text(sidecar_path(path), json.dumps(record, sort_keys=True, indent=1))
    return record


def atomic_write_verified(path: str | os.PathLike, write: Callable[[Path], None], *, key: str | None = None,
                          **extra: Any) -> Path:
    """:func:`atomic_write` then :func:`write_sidecar` (see module docstring)."""
    path = atomic_write(path, write)
    write_sidecar(path, key=key, **extra)
    return path


def verify_file(path: str | os.PathLike, *, key: str | None = None) -> dict:
    """The sidecar record of ``path`` after checking the file against it; read-only.

    Raises FileNotFoundError when ``path`` does not exist (nothing to verify: build it) and
    :class:`CacheCorrupt` when it exists but cannot be trusted: no or unreadable sidecar,
    unreadable file, SHA-256 or size mismatch, or (``key`` given) a recorded key other than
    ``key``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(str(path))
    side = sidecar_path(path)
    try:
        record = json.loads(side.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CacheCorrupt(path, f"no digest recorded in {side.name}: an interrupted write or an older harness") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CacheCorrupt(path, f"its digest file {side.name} is unreadable: {type(exc).__name__}") from None
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        raise CacheCorrupt(path, f"its digest file {side.name} holds no SHA-256")
    try:
        actual = sha256_file(path)
    except OSError as exc:
        raise CacheCorrupt(path, f"unreadable: {type(exc).__name__}: {exc.strerror or exc}") from None
    if actual != record["sha256"]:
        raise CacheCorrupt(path, f"SHA-256 {actual[:12]}... differs from the recorded {record['sha256'][:12]}...; "
                                 "truncated, overwritten or swapped")
    if key is not None and record.get("key") != key:
        raise CacheCorrupt(path, f"it records cache key {str(record.get('key'))[:16]}..., its folder's key is {key[:16]}...")
    return record


def move_aside(path: str | os.PathLike, reason: str, *, then: str = "rebuilt") -> Path:
    """Rename a corrupt cache file (and its sidecar) to ``X.corrupt-<UTC time>``; report it once.

    Prints one line to stderr: ``cache file X is corrupt (reason); moved aside to Y and rebuilt``.
    Raises :class:`harness.errors.HarnessError` naming the file when it cannot be moved (e.g. a
    read-only cache), so a corrupt file is never used.
    """
    from harness.errors import HarnessError

    path = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while dest.exists() or sidecar_path(dest).exists():
        n += 1
        dest = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        if path.exists():
            os.replace(path, dest)
        if sidecar_path(path).exists():
            os.replace(sidecar_path(path), sidecar_path(dest))
    except OSError as exc:
        raise HarnessError(
            f"cache file {path} is corrupt ({reason}) and cannot be moved aside "
            f"({exc.strerror or exc}); remove it or make the cache folder writable, then run again"
        ) from None
    print(f"cache file {path} is corrupt ({reason}); moved aside to {dest.name} and {then}", file=sys.stderr, flush=True)
    return dest


def ensure_verified(path: str | os.PathLike, build: Callable[[Path], None], *, key: str | None = None,
                    lock: str | os.PathLike | None = None, what: str = "rebuilt", **extra: Any) -> Path:
    """``path`` once verified; built with ``build(tmp_path)`` when missing, or corrupt (moved aside).

    Lock-free when the verified file is there (works in a read-only cache). Otherwise holds
    ``lock`` (default ``.<name>.lock`` next to ``path``) while checking again and building.
    """
    path = Path(path)
    try:
        verify_file(path, key=key)
        return path
    except (FileNotFoundError, CacheCorrupt):
        pass
    with file_lock(lock if lock is not None else path.with_name(f".{path.name}.lock")):
        try:
            verify_file(path, key=key)
            return path
        except FileNotFoundError:
            pass
        except CacheCorrupt as exc:
            move_aside(path, exc.reason, then=what)
        return atomic_write_verified(path, build, key=key, **extra)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, *, wait: bool = True) -> Iterator[bool]:
    """Exclusive inter-process lock on ``path`` (created if missing). With ``wait`` (the default)
    blocks until held and yields True; with ``wait=False`` yields False at once when another
    process (or another open file in this one) holds it, and the body runs without the lock."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            held = False
        if not held:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
