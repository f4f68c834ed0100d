"""Loader for the official QASPER v0.3 JSON layout (``qasper-{train,dev,test}-v0.3.json``).

QASPER: Dasigi, Lo, Beltagy, Cohan, Smith, Gardner (2021), "A Dataset of Information-Seeking
Questions and Answers Anchored in Research Papers", NAACL. Licence: CC BY 4.0.

Units (docs/metrics.md §1), in document order, ``unit_id = f"{paper_id}#{index}"``:
for each ``full_text`` section its heading (kind "heading") then its paragraphs (kind
"paragraph"); then every figure/table caption (kind "caption"). The abstract is not a unit.
Choices where docs/metrics.md is silent:

* Empty or whitespace-only paragraphs, headings and captions are skipped (they cannot be
  evidence and would only add ties).
* Every unit of a section keeps QASPER's full ``section_name``, whitespace collapsed (nested
  names read ``"Method ::: Encoder"``), in ``Unit.section``; a heading unit's evidence is
  matched against that full name (QASPER's heading evidence cites it; see
  :mod:`harness.data.evidence`). Which text the retrievers see for a heading (``Unit.text``) is
  the recorded option ``heading_text`` (``dataset.heading_text``): ``"full"`` (default, docs/metrics.md
  §1) the full name, ``"last"`` only its last non-empty part (``"Encoder"``). The option
  is stored in ``Dataset.options`` and so changes the fingerprint and the table cache key.
  A section name with no non-empty part (``""``, ``" ::: "``, null) gives no heading unit.
* Reference answers of every annotator, in order, by the precedence of the official QASPER
  evaluator: unanswerable -> "Unanswerable"; extractive spans -> the spans joined with ", "
  and, when there are several, each span; free-form answer; yes_no -> "Yes"/"No". Duplicates
  are dropped. ``answer_type`` is the first annotator's. An annotator with nothing filled in
  (the evaluator raises on it) counts as "abstractive" with no reference string.
* Gold units: the ``evidence`` strings (not ``highlighted_evidence``) of all annotators, matched
  by :mod:`harness.data.evidence`.
* ``pool_id = doc_id = paper_id``: arms search only the question's own paper.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

from harness.data.base import REQUIRED, DatasetLoader
from harness.data.evidence import EvidenceMatcher
from harness.data.schema import Dataset, Question, Unit
from harness.data.validate import expect_type, load_json_file, require, str_list
from harness.errors import ConfigError, DataError, did_you_mean

LICENCE = "CC BY 4.0"
CITATION = (
    "Pradeep Dasigi, Kyle Lo, Iz Beltagy, Arman Cohan, Noah A. Smith, Matt Gardner. 2021. "
    "A Dataset of Information-Seeking Questions and Answers Anchored in Research Papers. "
    "In Proceedings of NAACL-HLT 2021."
)
SPLITS = ("train", "dev", "test")


def split_file_name(split: str) -> str:
    return f"qasper-{split}-v0.3.json"


HEADING_TEXTS = ("full", "last")
DEFAULT_HEADING_TEXT = "full"


def check_heading_text(value: object) -> str:
    """The validated ``dataset.heading_text`` option (``None`` means the default, ``"full"``)."""
    if value is None:
        return DEFAULT_HEADING_TEXT
    if not isinstance(value, str) or value not in HEADING_TEXTS:
        raise ConfigError(
            "dataset.heading_text",
            f"must be one of {', '.join(repr(h) for h in HEADING_TEXTS)} (which text the "
            f"retrievers see for a section heading), got {value!r}",
        )
    return value


def full_section_name(section_name: str) -> str:
    """QASPER's section name with whitespace collapsed (nested names keep ``" ::: "``)."""
    return " ".join(section_name.split())


def last_section_part(section_name: str) -> str:
    """Last non-empty part of a ``" ::: "``-nested section name ("" if none)."""
    parts = [p.strip() for p in section_name.split(":::")]
    parts = [p for p in parts if p]
    return " ".join(parts[-1].split()) if parts else ""


def heading_unit_text(section_name: str, heading_text: str = DEFAULT_HEADING_TEXT) -> str:
    """The text retrievers see for a heading ("" when the name has no non-empty part)."""
    last = last_section_part(section_name)
    if not last:
        return ""
    return full_section_name(section_name) if heading_text == "full" else last


def paper_units(paper_id: str, paper: dict, source: str, heading_text: str = DEFAULT_HEADING_TEXT) -> list[Unit]:
    """The units of one paper in document order (validated); see the module docstring."""
    units: list[Unit] = []

    def add(kind: str, text: str, section: str) -> None:
        units.append(Unit(f"{paper_id}#{len(units)}", paper_id, len(units), kind, text, section))

    full_text = require(paper, "full_text", list, source, f"{paper_id}.full_text")
    for s_i, sec in enumerate(full_text):
        where = f"{paper_id}.full_text[{s_i}]"
        expect_type(sec, dict, source, where)
        name = require(sec, "section_name", (str, type(None)), source, f"{where}.section_name") or ""
        paragraphs = str_list(
            require(sec, "paragraphs", list, source, f"{where}.paragraphs"), source, f"{where}.paragraphs"
        )
        section = full_section_name(name)
        head = heading_unit_text(name, heading_text)
        if head:
            add("heading", head, section)
        for para in paragraphs:
            if para.strip():
                add("paragraph", para, section)
    figs = require(paper, "figures_and_tables", list, source, f"{paper_id}.figures_and_tables")
    for f_i, fig in enumerate(figs):
        where = f"{paper_id}.figures_and_tables[{f_i}]"
        expect_type(fig, dict, source, where)
        caption = require(fig, "caption", (str, type(None)), source, f"{where}.caption") or ""
        if caption.strip():
            add("caption", caption, "")
    if not units:
        raise DataError(source, f"{paper_id}.full_text", "paper has no units (no heading, paragraph or caption)")
    return units


def _answer_texts(ans: dict, source: str, where: str) -> tuple[str, list[str]]:
    """(answer type, reference strings) of one annotator's ``answer`` object."""
    unanswerable = require(ans, "unanswerable", bool, source, f"{where}.unanswerable")
    spans = str_list(require(ans, "extractive_spans", list, source, f"{where}.extractive_spans"), source, f"{where}.extractive_spans")
    yes_no = require(ans, "yes_no", (bool, type(None)), source, f"{where}.yes_no")
    free = require(ans, "free_form_answer", str, source, f"{where}.free_form_answer")
    if unanswerable:
        return "unanswerable", ["Unanswerable"]
    spans = [s.strip() for s in spans if s.strip()]
    if spans:
        return "extractive", [", ".join(spans)] + (spans if len(spans) > 1 else [])
    if free.strip():
        return "abstractive", [free.strip()]
    if yes_no is not None:
        return "yes_no", ["Yes" if yes_no else "No"]
    return "abstractive", []


def paper_questions(
    paper_id: str, paper: dict, units: Sequence[Unit], source: str, seen_qids: dict[str, str]
) -> list[Question]:
    """The questions of one paper with answers and gold units; ``seen_qids`` spans all files."""
    qas = require(paper, "qas", list, source, f"{paper_id}.qas")
    matcher = EvidenceMatcher(units)
    questions = []
    for q_i, qa in enumerate(qas):
        where = f"{paper_id}.qas[{q_i}]"
        expect_type(qa, dict, source, where)
        text = require(qa, "question", str, source, f"{where}.question").strip()
        qid = require(qa, "question_id", str, source, f"{where}.question_id")
        if not qid:
            raise DataError(source, f"{where}.question_id", "empty id")
        if not text:
            raise DataError(source, f"{where}.question", "empty question")
        if qid in seen_qids:
            raise DataError(source, f"{where}.question_id", f"duplicate id {qid!r} (first seen in {seen_qids[qid]})")
        seen_qids[qid] = f"paper {paper_id}"
        answers = require(qa, "answers", list, source, f"{where}.answers")
        if not answers:
            raise DataError(source, f"{where}.answers", "empty list; each question needs at least one annotated "
                                                        "answer (its references and evidence)")
        refs: list[str] = []
        evidence: list[str] = []
        first_type = ""
        for a_i, annot in enumerate(answers):
            a_where = f"{where}.answers[{a_i}]"
            expect_type(annot, dict, source, a_where)
            ans = require(annot, "answer", dict, source, f"{a_where}.answer")
            a_type, texts = _answer_texts(ans, source, f"{a_where}.answer")
            first_type = first_type or a_type
            refs.extend(texts)
            evidence.extend(str_list(require(ans, "evidence", list, source, f"{a_where}.answer.evidence"), source, f"{a_where}.answer.evidence"))
        if not refs:  # the official evaluator raises on an annotation without an answer
            raise DataError(source, f"{where}.answers", f"none of its {len(answers)} annotator(s) gives an answer "
                                                        "(not unanswerable, no extractive span, no free-form answer, "
                                                        "yes_no null): no reference to score against")
        gold, counts = matcher.match(evidence)
        questions.append(
            Question(
                qid=qid,
                doc_id=paper_id,
                pool_id=paper_id,
                text=text,
                gold_unit_ids=gold,
                answers=tuple(dict.fromkeys(refs)),
                answer_type=first_type,
                evidence_match=counts,
            )
        )
    return questions


def parse_qasper(
    obj: Any, source: str, documents: dict[str, list[Unit]], questions: list[Question], seen_qids: dict[str, str],
    heading_text: str = DEFAULT_HEADING_TEXT,
) -> None:
    """Add the papers and questions of one parsed QASPER file (``source`` names it in errors)."""
    expect_type(obj, dict, source, "<top level>")
    for paper_id, paper in obj.items():
        if not paper_id.strip():
            raise DataError(source, "<top level>", "empty paper id")
        if paper_id in documents:
            raise DataError(source, paper_id, f"duplicate paper id {paper_id!r}")
        expect_type(paper, dict, source, paper_id)
        units = paper_units(paper_id, paper, source, heading_text)
        qs = paper_questions(paper_id, paper, units, source, seen_qids)
        documents[paper_id] = units
        questions.extend(qs)


def load_qasper_files(paths: Iterable[str | Path], name: str = "qasper", meta: dict | None = None,
                      heading_text: str | None = DEFAULT_HEADING_TEXT) -> Dataset:
    """A Dataset from one or more official-layout QASPER files (question ids unique across all).

    ``heading_text``: ``"full"`` | ``"last"`` (see module docstring), recorded in ``options``."""
    heading_text = check_heading_text(heading_text)
    documents: dict[str, list[Unit]] = {}
    questions: list[Question] = []
    seen: dict[str, str] = {}
    sources = []
    for p in paths:
        p = Path(p)
        obj, digest = load_json_file(p)
        parse_qasper(obj, p.name, documents, questions, seen, heading_text)
        sources.append({"file": p.name, "sha256": digest})
    pools = {doc_id: [u.unit_id for u in units] for doc_id, units in documents.items()}
    full_meta = {"licence": LICENCE, "citation": CITATION, "sources": sources}
    full_meta.update(meta or {})
    return Dataset(name=name, documents=documents, questions=questions, pools=pools, meta=full_meta,
                   options={"heading_text": heading_text})


def resolve_paths(path: str | Path | Sequence[str | Path], split: str | None) -> list[Path]:
    """File paths from a file, a list of files, or a directory plus split name(s)."""
    if isinstance(path, (str, Path)):
        p = Path(path).expanduser()
        if p.is_dir():
            splits = [split] if isinstance(split, str) or split is None else list(split)
            return [p / split_file_name(s or "train") for s in splits]
        return [p]
    return [Path(x).expanduser() for x in path]


class QasperLoader(DatasetLoader):
    """``dataset.loader=qasper``: official-layout QASPER files (conf/dataset/qasper.yaml)."""

    name = "qasper"
    options = {"path": REQUIRED, "split": "train", "heading_text": DEFAULT_HEADING_TEXT}
    licence, citation = LICENCE, CITATION

    def check(self, opts: dict) -> None:
        check_heading_text(opts.get("heading_text"))
        split = opts.get("split") or "train"
        splits = [split] if isinstance(split, str) else split
        if not isinstance(splits, list):
            raise ConfigError("dataset.split", f"expected a split name or a list of them, got {type(split).__name__}")
        for s in splits:
            if s not in SPLITS:
                raise ConfigError("dataset.split", f"unknown split {s!r}{did_you_mean(s, SPLITS)}; expected one of {', '.join(SPLITS)}")
        path = opts["path"]
        if not (isinstance(path, str) and path.strip()) and not (
            isinstance(path, list) and path and all(isinstance(p, str) and p.strip() for p in path)
        ):
            raise ConfigError("dataset.path", f"expected a path or a non-empty list of paths, got {path!r}")

    def fingerprint_inputs(self, opts: dict) -> list[Path]:
        return resolve_paths(opts["path"], opts.get("split") or "train")

    def load(self, opts: dict, name: str) -> Dataset:
        split = opts.get("split") or "train"
        path = opts["path"]
        # ``split`` selects files only inside a folder; for explicit files it would be a false label
        meta = {"split": split} if isinstance(path, str) and Path(path).is_dir() else {}
        return load_qasper_files(self.fingerprint_inputs(opts), name=name, meta=meta, heading_text=opts.get("heading_text"))
