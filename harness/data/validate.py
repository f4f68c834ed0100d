"""Reading raw dataset files and checking their fields, with errors that name file and field.

Why a module of its own: every loader must fail the same way on bad input (DataError naming
the file and the dotted field path, e.g. ``2003.07723.qas[3].question_id``) and must never
leave a half-built artifact behind; they share these helpers so the messages are uniform.
"""

from __future__ import annotations

import json
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


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """THE reader of every dataset file (JSON, wheel): its bytes, or a DataError naming the file
    (missing, a directory, permission denied, unreadable)."""
    path = Path(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise os_problem(exc, path, what) from None


def ensure_readable(path: str | Path, what: str = "file") -> Path:
    """``path`` if it is a readable file, else the DataError ``read_bytes`` would raise (for
    files read by a library: zip members, digests)."""
    path = Path(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise os_problem(exc, path, what) from None
    if path.is_dir():  # some platforms open directories
        raise DataError(path.name, None, f"is a directory, expected a {what}: {path}")
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


def parse_json(text: str, source: str) -> Any:
    """Strict JSON: an empty or truncated text, a syntax error or a key repeated inside one object
    (``json`` would silently keep the last value) is a DataError naming ``source``."""
    if not text.strip():
        raise DataError(source, None, "is empty (expected JSON)")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
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
        raise DataError(source, None, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise DataError(source, None, "JSON nested too deeply") from None


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
