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


def parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(source, None, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None


def read_json_file(path: str | Path) -> Any:
    """Load a JSON file (UTF-8, strict). Errors name the file by its base name."""
    path = Path(path)
    source = path.name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(source, None, f"file not found: {path}") from None
    except IsADirectoryError:
        raise DataError(source, None, f"is a directory, expected a JSON file: {path}") from None
    return parse_json(decode_utf8(data, source), source)


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
