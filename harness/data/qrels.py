"""Reading a BEIR split's qrels file (``qrels/<split>.tsv``), in BEIR's or TREC's layout.

Why a module of its own: a qrels file is where a line can be lost without a word. A reader that
always skips the first line drops a judgement of a file written without BEIR's header; one that
reads BEIR's three columns misreads TREC's four. So the layout is recognised by shape, and every
line is either read or refused (docs/datasets.md, "Qrels files"):

* **Header.** The first non-blank line is a header when its last column (the score) is not an
  integer and its corpus-id column names no passage of the corpus (BEIR writes
  ``query-id<TAB>corpus-id<TAB>score``). Otherwise it is a judgement like any other: a file
  without a header is read whole. A first line with a non-integer score that names a corpus
  passage is a judgement with a bad score, and refused.
* **Layout**, decided by the first judgement and required of every line after it: exactly 3
  tab-separated columns is BEIR's (query-id, corpus-id, score); otherwise exactly 4 columns
  separated by whitespace is TREC's (query-id, iteration, doc-id, relevance; the iteration,
  usually 0 or Q0, is ignored). Anything else is refused naming the file and the line.
* Ids are stripped of surrounding whitespace (as every id of the JSONL files is); a score is an
  integer, relevant when > 0.
* A file with a header and no judgement, or with nothing at all, is refused naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, NamedTuple

from harness.data.validate import decode_utf8, read_bytes
from harness.errors import ConfigError, DataError
from harness.io import sha256_bytes

BEIR_COLUMNS = "query-id, corpus-id, score"
TREC_COLUMNS = "query-id, iteration, doc-id, relevance"
LAYOUTS = {"beir": f"BEIR qrels (3 tab-separated columns: {BEIR_COLUMNS})",
           "trec": f"TREC qrels (4 whitespace-separated columns: {TREC_COLUMNS})"}


class Qrels(NamedTuple):
    """A split's qrels: what resolves against the corpus, and what does not."""

    relevant: dict[str, list[str]]  # query id -> relevant corpus ids (score > 0, in the corpus), file order
    missing: set[str]  # query ids with a line of score > 0 naming an id the corpus lacks
    dangling: list[str]  # "file:line" of every line (any score) naming an id the corpus lacks
    resolved: int  # lines naming an id the corpus has
    sha256: str


class _Judgement(NamedTuple):
    qid: str
    cid: str
    score: str  # as written; checked to be an integer by the caller


def check_split_name(value: object, key: str) -> None:
    """A split name is a non-empty file stem: no path separator, not "." or ".." (a ConfigError
    naming ``key`` otherwise; an empty ``split=`` never falls back to the default)."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, f"expected a split name (qrels/<split>.tsv), got {value!r}")
    if value != value.strip() or "/" in value or "\\" in value or value in (".", ".."):
        raise ConfigError(key, f"expected a split name (qrels/<split>.tsv: no path separator, no surrounding "
                               f"spaces), got {value!r}")


def qrels_splits(folder: Path) -> list[str]:
    return sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _layout_of(line: str) -> str | None:
    """"beir" (3 tab-separated columns), "trec" (4 whitespace-separated ones) or None."""
    if len(line.split("\t")) == 3:
        return "beir"
    return "trec" if len(line.split()) == 4 else None


def _judgement(line: str, layout: str) -> _Judgement | None:
    """The line's (query id, corpus id, score) in ``layout``; None when it has another shape."""
    if _layout_of(line) != layout:
        return None
    if layout == "beir":
        qid, cid, score = (p.strip() for p in line.split("\t"))
    else:
        qid, _, cid, score = line.split()
    return _Judgement(qid, cid, score)


def _shape_problem(line: str, layout: str | None, first_line: int | None) -> str:
    tabs, fields = len(line.split("\t")), len(line.split())
    got = f"got {tabs} tab-separated column(s), {fields} whitespace-separated"
    if layout is None:
        return f"expected {LAYOUTS['beir']} or {LAYOUTS['trec']}; {got}"
    return f"expected {LAYOUTS[layout]} like line {first_line}; {got}"


def _is_header(line: str, known: set[str]) -> bool:
    """The first line is a header: its last column is no integer and it names no corpus id."""
    fields = line.split()
    if not fields or _is_int(fields[-1]):
        return False
    layout = _layout_of(line)
    cid = _judgement(line, layout).cid if layout else None
    return cid not in known


def _judgements(path: Path, lines: list[tuple[int, str]], known: set[str]) -> Iterator[tuple[str, _Judgement]]:
    """("file:line", judgement) of every judgement line; the header skipped; a line of
    another shape, or a score that is no integer, refused naming the file and the line."""
    body = lines[1:] if _is_header(lines[0][1], known) else lines
    if not body:
        raise DataError(path.name, None, f"holds only a header line (line {lines[0][0]}) and no judgement; expected "
                                         f"{LAYOUTS['beir']} lines after it")
    layout, first = _layout_of(body[0][1].rstrip("\r\n")), body[0][0]
    for n, raw in body:
        where = f"{path.name}:{n}"
        line = raw.rstrip("\r\n")
        judged = _judgement(line, layout) if layout else None
        if judged is None:
            raise DataError(where, None, _shape_problem(line, layout, first if layout else None))
        if not judged.qid or not judged.cid:
            raise DataError(where, "query-id" if not judged.qid else "corpus-id", "is empty")
        if not _is_int(judged.score):
            field = "score" if layout == "beir" else "relevance"
            raise DataError(where, field, f"must be an integer, got {judged.score!r} (read as {LAYOUTS[layout]})")
        yield where, judged


def read_qrels(path: Path, known: set[str]) -> Qrels:
    """A split's qrels file (module docstring: header, layout); ``known``: the corpus's ids.
    Every query id of the file is a key of ``relevant``, even one without a relevant passage."""
    data = read_bytes(path)
    text = decode_utf8(data, path.name)
    lines = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise DataError(path.name, None, f"is empty (expected {LAYOUTS['beir']}, after an optional header line)")
    relevant: dict[str, list[str]] = {}
    missing: set[str] = set()
    dangling: list[str] = []
    read = 0
    for where, judged in _judgements(path, lines, known):
        read += 1
        score = int(judged.score)
        listed = relevant.setdefault(judged.qid, [])  # a query of the split, relevant passage or not
        if judged.cid not in known:
            dangling.append(where)
            if score > 0:
                missing.add(judged.qid)
            continue
        if score > 0 and judged.cid not in listed:
            listed.append(judged.cid)
    return Qrels(relevant, missing, dangling, read - len(dangling), sha256_bytes(data))
