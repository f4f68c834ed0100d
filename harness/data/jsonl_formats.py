"""Your own data in a common format: BEIR folders and FlashRAG-style JSONL files.

Why: a team's corpus and question log rarely look like QASPER or HotpotQA. BEIR's layout
(``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) is what retrieval benchmarks and
most converters already write; FlashRAG's question JSONL (``id``, ``question``,
``golden_answers``) with a corpus JSONL is what RAG pipelines write. Both load into one *global
pool*: every question retrieves from the whole corpus, stored once.

Choices (docs/metrics.md is silent; written down in docs/datasets.md):

* A corpus entry is one unit and its own document (``doc_id = unit_id = _id``), kind
  "paragraph", in file order (the pool's tie-break order). Its text is ``title + " " + text``
  when the title is not empty (the convention of BEIR's own evaluation code), else ``text``.
* A question is its own group (``Question.doc_id = "query:<id>"``): queries are independent,
  so splits, folds and bootstraps resample questions.
* A passage whose title and text are both blank is left out and counted
  (``meta["left_out"]["passages_without_text"]``), not refused: real corpora have them (BEIR's
  FiQA corpus.jsonl holds entries with neither), and nothing can retrieve it by its text.
  BEIR's own evaluation would encode it as an empty string; here it is not in the pool, and a
  qrels or ``gold_ids`` entry naming it is dropped from the gold and counted too.
* BEIR gold = the corpus ids a query's qrels give a score > 0. Queries of the split without a
  relevant passage (with text) are left out and counted (``meta["left_out"]``); queries.jsonl
  entries not in the split are ignored. Answers: ``answers`` (a list of strings) or
  ``metadata.answers``.
* A qrels line (of any score) naming a corpus id that corpus.jsonl lacks is left out and
  counted, and so is a query id of the qrels that queries.jsonl lacks; not refused: BEIR's own
  folders have them (ArguAna's test qrels name a passage its corpus lacks, beir-cellar/beir#101;
  NFCorpus's name queries its queries.jsonl lacks, #202). BEIR's evaluation keeps a relevant
  passage that is missing as one that is never found; here it is no gold, and a query left
  with none is left out and counted apart from queries never judged relevant. When no line
  names a passage of the corpus, or no query id is in queries.jsonl, the files do not belong
  together and the folder is refused in one line.
* JSONL gold = the optional ``gold_ids`` list (corpus ids); answers = ``golden_answers``. A lone
  string in ``answers``, ``golden_answers`` or ``gold_ids`` counts as a list of one.
* Every id (``_id``, ``id``, ``gold_ids``, the qrels' columns) is stripped of surrounding
  whitespace, so ``" p1"`` and ``"p1"`` name one passage (and appear twice if both are given).
* A qrels file is read by ``harness.data.qrels``: an optional header line, BEIR's 3 columns or
  TREC's 4, every line read or refused.
* Every problem is one line naming the file, the line and the field: a duplicate id, an id
  ``gold_ids`` names that the corpus lacks, qrels of which nothing resolves, an empty query, a
  corpus with no passage that has text, a score that is not an integer, a split whose qrels
  file does not exist (with the splits that do), an empty reference list or a blank reference
  (the rule of every loader: leave the key out instead).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

from harness.data.base import REQUIRED, DatasetLoader, check_path
from harness.data.qrels import Qrels, check_split_name, qrels_splits, read_qrels
from harness.data.schema import Dataset, Question, Unit
from harness.data.validate import check_no_lone_surrogate, check_regular, decode_utf8, read_bytes
from harness.errors import DataError
from harness.io import sha256_bytes

GLOBAL_POOL = "global"


def _lines(path: Path) -> tuple[Iterator[tuple[int, str]], str]:
    """(line number, text) of the non-blank lines of a UTF-8 file, and the file's SHA-256."""
    data = read_bytes(path)
    text = decode_utf8(data, path.name)
    return ((i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()), sha256_bytes(data)


def read_jsonl(path: Path) -> tuple[list[tuple[int, dict]], str]:
    """[(line number, object)] of a JSON Lines file (one JSON object per non-blank line). A file
    that is one JSON list (as some public copies of JSONL datasets are) is said to be one."""
    rows, (lines, digest) = [], _lines(path)
    for n, line in lines:
        where = f"{path.name}:{n}"
        if not rows and line.lstrip().startswith("["):
            raise DataError(where, None, f"{path.name} is one JSON list; expected JSON Lines (JSONL): one JSON "
                                         "object per line (e.g. jq -c '.[]' FILE > FILE.jsonl)")
        obj = _json_line(line, where)
        if not isinstance(obj, dict):
            raise DataError(where, None, f"expected a JSON object, got {type(obj).__name__} (JSON Lines: one JSON "
                                         "object per line)")
        check_no_lone_surrogate(obj, where)
        rows.append((n, obj))
    if not rows:
        raise DataError(path.name, None, "is empty (expected one JSON object per line)")
    return rows, digest


def _json_line(line: str, where: str) -> Any:
    """One line's JSON value; a syntax error, a line that ends before its value does (an object
    spread over several lines) or a value nested too deeply for the parser is one DataError."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        split = "; a JSON object spread over several lines? JSON Lines holds one whole object per line" \
            if exc.pos >= len(line.rstrip()) else ""
        raise DataError(where, None, f"not a JSON object: {exc.msg} at column {exc.colno}{split}") from None
    except RecursionError:
        raise DataError(where, None, "JSON nested too deeply to read (over the parser's recursion limit, "
                                     f"{sys.getrecursionlimit()} levels); expected one JSON object per line") from None


def _text_field(obj: dict, key: str, where: str, *, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise DataError(where, key, f"must be a string, got {type(value).__name__}" if value is not None else "is missing")
    return value


def _id(obj: dict, key: str, where: str) -> str:
    value = obj.get(key)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # numeric ids are common in converted corpora
    if not isinstance(value, str) or not value.strip():
        raise DataError(where, key, f"must be a non-empty string id, got {value!r}")
    return value.strip()  # as the qrels' ids are: " p1" and "p1" name one passage


def unique_ids(rows: list[tuple[int, dict]], key: str, file_name: str) -> Iterator[tuple[dict, str, str]]:
    """(object, its id, "file:line") of each row, refusing an id seen on an earlier line."""
    seen: dict[str, int] = {}
    for n, obj in rows:
        where = f"{file_name}:{n}"
        uid = _id(obj, key, where)
        if uid in seen:
            raise DataError(where, key, f"id {uid!r} appears twice (first on line {seen[uid]})")
        seen[uid] = n
        yield obj, uid, where


def _answers(value: Any, where: str, key: str, *, references: bool = False) -> tuple[str, ...]:
    """A list of strings (a lone string counts as one). ``references``: reference answers, where
    an empty list or a blank string is refused (the same rule as QASPER's empty ``answers`` and
    HotpotQA's empty ``answer``): leave the key out for a question without references."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(a, str) for a in items):
        raise DataError(where, key, "must be a list of strings")
    if references:
        if not items:
            raise DataError(where, key, "empty list; give at least one reference answer, or leave the key out for "
                                        "a question without references")
        blank = next((i for i, a in enumerate(items) if not a.strip()), None)
        if blank is not None:
            raise DataError(where, key if isinstance(value, str) else f"{key}[{blank}]",
                            "empty reference answer (blank text)")
    return tuple(items)


def read_corpus(path: Path, *, id_key: str, text_keys: tuple[str, ...]) -> tuple[list[Unit], set[str], str]:
    """(units, ids of the passages without text, SHA-256) of a corpus JSONL (see the module
    docstring), refusing duplicate ids. ``text_keys``: ("title", "text") for BEIR; FlashRAG
    also accepts "contents". A passage whose title and text are both blank is left out (BEIR's
    own FiQA corpus has such entries); a corpus with no passage left is refused."""
    rows, digest = read_jsonl(path)
    units, blank = [], set()
    for obj, uid, where in unique_ids(rows, id_key, path.name):
        if "contents" in text_keys and "contents" in obj:
            text = _text_field(obj, "contents", where)
        else:
            title = _text_field(obj, "title", where, required=False)
            body = _text_field(obj, "text", where)
            text = f"{title} {body}" if title.strip() else body
        if not text.strip():
            blank.add(uid)
            continue
        units.append(Unit(uid, uid, 0, "paragraph", text, section=str(obj.get("title") or "")))
    if not units:
        raise DataError(path.name, "text", f"every passage is empty ({len(blank)}): nothing can be retrieved")
    return units, blank, digest


def load_beir(path: str | Path, split: str = "test", name: str = "beir") -> Dataset:
    """A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) as one global pool."""
    folder = Path(path).expanduser()
    qrels_path = _beir_qrels_path(folder, path, split)
    units, blank, corpus_sha = read_corpus(folder / "corpus.jsonl", id_key="_id", text_keys=("title", "text"))
    qrels = read_qrels(qrels_path, {u.unit_id for u in units} | blank)
    if qrels.dangling and not qrels.resolved:  # not a few stale lines: files that do not belong together
        raise DataError(qrels.dangling[0], "corpus-id", f"names no _id of corpus.jsonl, and neither does any other of "
                                                        f"the split's {len(qrels.dangling)} line(s): are these the "
                                                        "qrels of this corpus?")
    rows, queries_sha = read_jsonl(folder / "queries.jsonl")
    questions, seen, left = _beir_questions(rows, qrels, blank)
    unknown = sorted(set(qrels.relevant) - seen)
    if unknown and not set(qrels.relevant) & seen:
        raise DataError(qrels_path.name, "query-id", f"none of its {len(unknown)} query id(s) is in queries.jsonl "
                                                     f"(e.g. {unknown[0]!r}): are these the queries of this split?")
    sources = [{"file": "corpus.jsonl", "sha256": corpus_sha}, {"file": "queries.jsonl", "sha256": queries_sha},
               {"file": f"qrels/{split}.tsv", "sha256": qrels.sha256}]
    meta = {"source": str(folder.name), "format": "beir", "split": split, "sources": sources,
            "left_out": {"queries_without_relevant_passage": left["no_relevant"],
                         "queries_whose_relevant_passages_are_missing_or_blank": left["relevant_missing"],
                         "passages_without_text": len(blank),
                         "qrels_lines_naming_a_blank_passage": left["blank_lines"],
                         "qrels_lines_naming_no_passage": len(qrels.dangling),
                         "qrels_queries_not_in_queries_file": len(unknown)}}
    return Dataset(name, {u.unit_id: [u] for u in units}, questions, {GLOBAL_POOL: [u.unit_id for u in units]},
                   meta=meta, options={"pool": "global"})


def _beir_qrels_path(folder: Path, path: str | Path, split: str) -> Path:
    """The split's ``qrels/<split>.tsv`` of a BEIR folder; a missing folder or split (with the
    splits there are), or a qrels path that is no regular file, is said as such."""
    if not folder.is_dir():
        raise DataError(str(path), None, "is not a folder (expected a BEIR folder: corpus.jsonl, queries.jsonl, qrels/)")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if os.path.lexists(qrels_path):
        check_regular(qrels_path)  # there, but a FIFO, a device or a folder: said as such
    else:
        have = qrels_splits(folder)
        raise DataError(f"{folder.name}/qrels", None, f"has no split {split!r} ({split}.tsv); splits: "
                                                       f"{', '.join(have) if have else 'none'}")
    return qrels_path


def _beir_questions(rows, qrels: Qrels, blank: set[str]) -> tuple[list[Question], set[str], dict[str, int]]:
    """The split's queries with a relevant passage that has text, as questions; every query id
    seen; and the counts of what was left out (no relevant passage, relevant ones missing or
    blank, qrels lines naming a blank passage)."""
    questions, seen = [], set()
    left = {"no_relevant": 0, "relevant_missing": 0, "blank_lines": 0}
    for obj, qid, where in unique_ids(rows, "_id", "queries.jsonl"):
        seen.add(qid)
        if qid not in qrels.relevant:
            continue  # not in this split
        text = _text_field(obj, "text", where)
        if not text.strip():
            raise DataError(where, "text", "is empty")
        judged = qrels.relevant[qid]
        gold = tuple(g for g in judged if g not in blank)
        left["blank_lines"] += len(judged) - len(gold)
        if not gold:  # never judged relevant, or its relevant passages are missing or blank
            left["relevant_missing" if judged or qid in qrels.missing else "no_relevant"] += 1
            continue
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        key = "answers" if "answers" in obj else "metadata.answers"
        answers = _answers(obj.get("answers", meta.get("answers")), where, key, references=True)
        questions.append(Question(qid, f"query:{qid}", GLOBAL_POOL, text, gold_unit_ids=gold, answers=answers,
                                  evidence_match={"exact": len(gold)}))
    return questions, seen, left


def load_jsonl(questions: str | Path, corpus: str | Path, name: str = "jsonl") -> Dataset:
    """FlashRAG-style questions (``id``, ``question``, ``golden_answers``, optional ``gold_ids``)
    over a corpus JSONL (``id`` and ``contents``, or ``title`` / ``text``), as one global pool."""
    qpath, cpath = Path(questions).expanduser(), Path(corpus).expanduser()
    units, blank, corpus_sha = read_corpus(cpath, id_key="id", text_keys=("contents", "title", "text"))
    known = {u.unit_id for u in units} | blank
    rows, questions_sha = read_jsonl(qpath)
    out, blank_gold = [], 0
    for obj, qid, where in unique_ids(rows, "id", qpath.name):
        text = _text_field(obj, "question", where)
        if not text.strip():
            raise DataError(where, "question", "is empty")
        answers = _answers(obj.get("golden_answers"), where, "golden_answers", references=True)
        gold = tuple(g.strip() for g in _answers(obj.get("gold_ids"), where, "gold_ids"))  # ids are stripped
        if isinstance(obj.get("gold_ids"), list) and not gold:  # the rule of golden_answers: leave it out
            raise DataError(where, "gold_ids", "empty list; give at least one corpus id, or leave the key out for a "
                                               "question without gold passages")
        missing = [g for g in gold if g not in known]
        if missing:
            raise DataError(where, "gold_ids", f"{missing[0]!r} is not an id of {cpath.name}")
        gold = tuple(dict.fromkeys(gold))
        with_text = tuple(g for g in gold if g not in blank)
        blank_gold += len(gold) - len(with_text)
        gold = with_text  # a question whose gold passages all lack text keeps its answers, without gold
        out.append(Question(qid, f"query:{qid}", GLOBAL_POOL, text, gold_unit_ids=tuple(dict.fromkeys(gold)),
                            answers=answers, evidence_match={"exact": len(set(gold))} if gold else {}))
    sources = [{"file": cpath.name, "sha256": corpus_sha}, {"file": qpath.name, "sha256": questions_sha}]
    meta = {"source": qpath.name, "format": "jsonl", "sources": sources,
            "left_out": {"passages_without_text": len(blank), "gold_passages_without_text": blank_gold}}
    return Dataset(name, {u.unit_id: [u] for u in units}, out, {GLOBAL_POOL: [u.unit_id for u in units]},
                   meta=meta, options={"pool": "global"})


class BeirLoader(DatasetLoader):
    """``dataset=beir path=DIR [split=test]``: a BEIR folder as one global pool."""

    name = "beir"
    options = {"path": REQUIRED, "split": "test"}

    def check(self, opts: dict) -> None:
        check_path(opts, "path")
        check_split_name(opts.get("split"), "dataset.split")

    def fingerprint_inputs(self, opts: dict) -> list[Path]:
        folder = Path(opts["path"]).expanduser()
        return [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{opts['split']}.tsv"]

    def load(self, opts: dict, name: str) -> Dataset:
        return load_beir(opts["path"], split=opts["split"], name=name)


class JsonlLoader(DatasetLoader):
    """``dataset=jsonl questions=FILE corpus=FILE``: FlashRAG-style questions over a corpus."""

    name = "jsonl"
    options = {"questions": REQUIRED, "corpus": REQUIRED}

    def check(self, opts: dict) -> None:
        check_path(opts, "questions")
        check_path(opts, "corpus")

    def fingerprint_inputs(self, opts: dict) -> list[Path]:
        return [Path(opts["questions"]).expanduser(), Path(opts["corpus"]).expanduser()]

    def load(self, opts: dict, name: str) -> Dataset:
        return load_jsonl(opts["questions"], opts["corpus"], name=name)
