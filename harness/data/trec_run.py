"""Reading a TREC run file (``qid Q0 docid rank score tag``, plain or gzip) into rankings.

Why a module of its own: a run file is a system's output handed to the harness as an arm
(docs/own_arms.md), and its metrics must equal trec_eval's on the same file. So the file is
ordered exactly as trec_eval orders it, and every line is either read or refused in one line
naming the file, the line and the field:

* Six whitespace-separated fields per non-blank line; the second (``Q0``) and the sixth (the
  run's tag) are not read. gzip is recognised by its magic bytes, whatever the file's name.
* ``rank`` must be an integer and ``score`` a finite number; the rank is otherwise ignored, as
  trec_eval ignores it: a query's documents are ordered by **score descending, ties broken by
  docid descending** (byte order of the ids; trec_eval's ``comp_sim_docno`` in
  ``form_res_rels.c``), whatever ranks the file wrote.
* A (qid, docid) pair given twice is refused (trec_eval would keep both; pytrec_eval and
  ir_measures cannot hold both), naming both lines. A file without any line is refused.
* The content's SHA-256 (of the bytes as stored: a gzip file's compressed bytes) keys the cache.
"""

from __future__ import annotations

import gzip
import math
import zlib
from pathlib import Path
from typing import NamedTuple

from harness.data.validate import decode_utf8, read_bytes
from harness.errors import DataError
from harness.io import sha256_bytes

FIELDS = "qid Q0 docid rank score tag"
GZIP_MAGIC = b"\x1f\x8b"


class Run(NamedTuple):
    """A run file's rankings: qid -> [(docid, score)] in trec_eval's order, best first."""

    name: str  # the file's name, in messages
    rankings: dict[str, list[tuple[str, float]]]
    lines: dict[tuple[str, str], int]  # (qid, docid) -> its line, for messages
    sha256: str


def _text(path: Path, data: bytes) -> str:
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(path.name, None, f"starts like a gzip file but cannot be decompressed ({exc})") from None
    return decode_utf8(data, path.name)


def _number(where: str, field: str, text: str, integer: bool) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise DataError(where, field, f"must be {kind}, got {text!r} (a run line is {FIELDS})") from None
    if not integer and not math.isfinite(value):
        raise DataError(where, field, f"must be a finite number, got {text!r}")
    return value


def trec_order(docs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """``docs`` ordered as trec_eval orders a query's results: score descending, then docid
    descending (``strcmp`` on the ids' bytes; UTF-8 byte order is code-point order)."""
    return sorted(docs, key=lambda d: (d[1], d[0]), reverse=True)


def read_run(path: str | Path) -> Run:
    """A run file's rankings (module docstring), or a DataError naming file, line and field."""
    path = Path(path).expanduser()
    data = read_bytes(path, "run file")
    text = _text(path, data)
    found: dict[str, list[tuple[str, float]]] = {}
    lines: dict[tuple[str, str], int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        where = f"{path.name}:{n}"
        if len(fields) != 6:
            raise DataError(where, None, f"expected 6 whitespace-separated fields ({FIELDS}), got {len(fields)}")
        qid, _, docid, rank, score, _ = fields
        _number(where, "rank", rank, integer=True)
        value = _number(where, "score", score, integer=False)
        first = lines.setdefault((qid, docid), n)
        if first != n:
            raise DataError(where, "docid", f"{docid!r} is ranked twice for query {qid!r} (first at line {first}); "
                                            "a run ranks each document at most once per query")
        found.setdefault(qid, []).append((docid, value))
    if not found:
        raise DataError(path.name, None, f"is empty: no run line ({FIELDS})")
    return Run(path.name, {q: trec_order(d) for q, d in found.items()}, lines, sha256_bytes(data))


def read_costs(path: str | Path) -> tuple[dict[str, float], str]:
    """A run's per-query cost sidecar: ``qid cost`` per line (whitespace-separated, an optional
    header line whose cost is no number); (qid -> cost >= 0, SHA-256). Bad lines name file, line
    and field; a qid given twice is refused."""
    path = Path(path).expanduser()
    data = read_bytes(path, "cost file")
    costs: dict[str, float] = {}
    first_line: dict[str, int] = {}
    rows = [(n, line.split()) for n, line in enumerate(_text(path, data).splitlines(), start=1) if line.split()]
    if rows and len(rows[0][1]) == 2 and not _is_number(rows[0][1][1]):
        rows = rows[1:]  # a header (qid cost)
    if not rows:
        raise DataError(path.name, None, "is empty: expected lines 'qid cost'")
    for n, fields in rows:
        where = f"{path.name}:{n}"
        if len(fields) != 2:
            raise DataError(where, None, f"expected 2 whitespace-separated fields (qid cost), got {len(fields)}")
        qid, text = fields
        value = _number(where, "cost", text, integer=False)
        if value < 0:
            raise DataError(where, "cost", f"must be >= 0, got {text!r}")
        if qid in costs:
            raise DataError(where, "qid", f"{qid!r} is given twice (first at line {first_line[qid]})")
        costs[qid], first_line[qid] = value, n
    return costs, sha256_bytes(data)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
