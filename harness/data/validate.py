"""Reading raw dataset files and checking their fields, with errors that name file and field.

Why a module of its own: every loader must fail the same way on bad input (DataError naming
the file and the dotted field path, e.g. ``2003.07723.qas[3].question_id``) and must never
leave a half-built artifact behind; they share these helpers so the messages are uniform.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from harness.errors import DataError

_TYPE_NAMES = {
    str: "a string",
    list: "a list",
    dict: "an object",
    bool: "a boolean",
    int: "an integer",
    type(None): "null",
}


def decode_utf8(data: bytes, source: str) -> str:
    """Strict UTF-8 decoding; a bad byte becomes a DataError with its offset."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(source, None, f"not valid UTF-8: byte {data[e.start]:#04x} at offset {e.start}") from None


def os_problem(exc: OSError, path: Path, what: str = "file") -> DataError:
    """A DataError naming ``path`` for an OSError met while reading it."""
    import errno

    if isinstance(exc, FileNotFoundError):
        problem = f"{what} not found: {path}"
    elif isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
        problem = f"is a directory, expected a {what}: {path}"
    elif isinstance(exc, PermissionError):
        problem = f"permission denied: cannot read {path}"
    elif isinstance(exc, NotADirectoryError):
        problem = f"{what} not found (a parent is not a directory): {path}"
    else:
        problem = f"cannot read {path}: {exc.strerror or exc}"
    return DataError(path.name or str(path), None, problem)


MAX_FILE_MB_ENV = "ROUTE_BENCH_MAX_FILE_MB"  # the named override of the size cap below
DEFAULT_MAX_FILE_MB = 2048  # the largest official file read (HotpotQA train) is about 560 MB


def max_file_bytes() -> int:
    """The size cap of one dataset file: $ROUTE_BENCH_MAX_FILE_MB megabytes, else 2048."""
    import os

    raw = os.environ.get(MAX_FILE_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_FILE_MB * 2**20
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not (mb > 0 and mb < 2**40):
        from harness.errors import ConfigError

        raise ConfigError(MAX_FILE_MB_ENV, f"must be a positive number of megabytes, got {raw!r}")
    return int(mb * 2**20)


_KINDS = (("S_ISCHR", "a character device"), ("S_ISBLK", "a block device"), ("S_ISFIFO", "a FIFO (named pipe)"),
          ("S_ISSOCK", "a socket"))


def check_regular(path: str | Path, what: str = "file") -> int:
    """The size of ``path`` if it is a regular file under the size cap; else a DataError naming it
    (missing, a folder, a device, a FIFO, a socket, too large). Checked with ``stat`` before
    anything opens it: opening a FIFO blocks, reading /dev/zero never ends."""
    import stat

    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise os_problem(exc, path, what) from None
    if stat.S_ISDIR(st.st_mode):
        raise DataError(path.name or str(path), None, f"is a directory, expected a {what}: {path}")
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if getattr(stat, test)(st.st_mode)), "not a regular file")
        raise DataError(path.name or str(path), None, f"is {kind}, expected a regular {what}: {path}")
    cap = max_file_bytes()
    if st.st_size > cap:
        raise DataError(path.name or str(path), None,
                        f"is {st.st_size} bytes, above the {cap / 2**20:g} MB cap for a {what} "
                        f"(set {MAX_FILE_MB_ENV}=<megabytes> to raise it)")
    return int(st.st_size)


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """THE reader of every dataset file (JSON, wheel): its bytes, or a DataError naming the file
    (missing, a directory, a device or FIFO, above the size cap, permission denied, unreadable).
    A file that grows while it is read (another process appending) is read at most to the cap
    plus one byte: the cap holds on the bytes read, not only on ``stat``'s size before."""
    path = Path(path)
    check_regular(path, what)
    cap = max_file_bytes()
    try:
        data = _read_capped(path, cap)
    except OSError as exc:
        raise os_problem(exc, path, what) from None
    if len(data) > cap:
        raise DataError(path.name or str(path), None, f"grew above the {cap / 2**20:g} MB cap for a {what} "
                                                      f"while it was read (set {MAX_FILE_MB_ENV} to raise it)")
    return data


def _read_capped(path: Path, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of ``path``, whatever ``stat`` said (0 for a /proc file; less
    than is there by now for one another process writes): an endless one ends at the cap, not in
    the memory."""
    with path.open("rb") as f:
        return f.read(cap + 1)


def ensure_readable(path: str | Path, what: str = "file") -> Path:
    """``path`` if it is a readable file, else the DataError ``read_bytes`` would raise (for
    files read by a library: zip members, digests)."""
    path = Path(path)
    check_regular(path, what)  # before open: a FIFO would block
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise os_problem(exc, path, what) from None
    return path


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


# a \\uD800-\\uDFFF escape: a lone one decodes to a str no file, tokenizer or store can encode
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _lone_surrogate(text: str) -> int:
    return next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), -1)


def check_no_lone_surrogate(obj: Any, source: str, field: str = "") -> None:
    """A DataError naming the field of the first string (or key) holding a lone UTF-16 surrogate
    (``"\\ud800"`` without its pair: JSON allows the escape, UTF-8 cannot encode it)."""
    stack = [(obj, field)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            at = _lone_surrogate(value)
            if at >= 0:
                raise DataError(source, where or "<top level>",
                                f"holds a lone UTF-16 surrogate \\u{ord(value[at]):04x} at character {at} "
                                "(an escape without its pair; not encodable as UTF-8)")
        elif isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                key_at = where + ("." if where else "") + str(k)
                if _lone_surrogate(str(k)) >= 0:
                    raise DataError(source, (where or "<top level>"), f"a key holds a lone UTF-16 surrogate: {k!r}")
                stack.append((v, key_at))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))


def parse_json(text: str, source: str) -> Any:
    """Strict JSON: an empty or truncated text, a syntax error or a key repeated inside one object
    (``json`` would silently keep the last value) is a DataError naming ``source``."""
    if not text.strip():
        raise DataError(source, None, "is empty (expected JSON)")
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        if _SURROGATE_ESCAPE.search(text):  # rare: only then walk the tree for the field
            check_no_lone_surrogate(obj, source)
        return obj
    except _DuplicateKey as e:
        raise DataError(
            source, e.key, "key appears twice in one JSON object (the second would silently replace the first)"
        ) from None
    except json.JSONDecodeError as e:
        ends_early = e.pos >= len(text.rstrip()) or (
            e.msg.startswith("Unterminated string") and '"' not in text[e.pos + 1:]
        )
        if ends_early:
            raise DataError(source, None, f"invalid JSON at line {e.lineno} column {e.colno}: truncated JSON, the "
                                          f"text ends before the document is complete ({e.msg})") from None
        lines = " (a JSON Lines file? expected one JSON document)" if e.msg == "Extra data" else ""
        raise DataError(source, None, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}{lines}") from None
    except RecursionError:
        raise DataError(source, None, "JSON nested too deeply to read (over the parser's recursion limit, "
                                      f"{sys.getrecursionlimit()} levels)") from None


def load_json_file(path: str | Path) -> tuple[Any, str]:
    """(parsed JSON, SHA-256 of the bytes read) of a UTF-8 JSON file, in one read. Errors name the
    file by its base name."""
    import hashlib

    path = Path(path)
    data = read_bytes(path, "JSON file")
    return parse_json(decode_utf8(data, path.name), path.name), hashlib.sha256(data).hexdigest()


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return type(value).__name__


def expect_type(value: Any, typ: type | tuple[type, ...], source: str, field: str) -> Any:
    """Return ``value`` if it has type ``typ`` (bool is not accepted as int), else DataError."""
    types = typ if isinstance(typ, tuple) else (typ,)
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        raise DataError(source, field, f"expected {want}, got {type_name(value)}")
    return value


def require(obj: dict, key: str, typ: type | tuple[type, ...], source: str, field: str) -> Any:
    """``obj[key]`` checked for presence and type; ``field`` is the full dotted path of the key."""
    if key not in obj:
        raise DataError(source, field, "missing key")
    return expect_type(obj[key], typ, source, field)


def str_list(value: Any, source: str, field: str, allow_null: bool = False) -> list:
    """A list whose every item is a string (or null if allowed); items are named ``field[i]``."""
    expect_type(value, list, source, field)
    typ = (str, type(None)) if allow_null else str
    for i, item in enumerate(value):
        expect_type(item, typ, source, f"{field}[{i}]")
    return value
