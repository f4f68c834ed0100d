"""Multi-hop questions over candidate paragraphs, in two pool modes (HotpotQA, MuSiQue, 2Wiki).

Why one module: the three official formats give each question its own candidate paragraphs
(gold and distractors). ``pool=question`` searches those candidates only (HotpotQA's
distractor setting: 10 paragraphs, so every arm's top 10 holds the whole pool);
``pool=global`` searches ONE pool of every candidate paragraph of the file, deduplicated (seed
003's "global-candidate" setting), so retrieval has something to decide.

Choices (docs/datasets.md, "Multi-hop pool modes"):

* ``question``: a question's candidates are its document and pool (``doc_id = pool_id = qid``),
  units ``<qid>#<i>`` in the given order; the layout HotpotQA always had (its fingerprint is
  unchanged: no option is recorded in this mode).
* ``global``: paragraphs deduplicated by (title, text) exactly, in order of first appearance
  over the file, each its own document ``p<NNNNNN>``; one pool ``global`` (the id BEIR, JSONL,
  BoolQ and SciQ use); gold = the question's supporting paragraphs mapped to their
  deduplicated ids; each question is its own group (``doc_id = "query:<qid>"``), as in BEIR.
  ``Dataset.options = {"pool": "global"}``, so the two modes never share a cached table.
* Unit text = ``title + ": " + body`` (``Unit.section`` = the title): the title is often the
  bridge entity the question names.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from harness.data.schema import Dataset, Question, Unit
from harness.errors import ConfigError, DataError, did_you_mean

POOLS = ("question", "global")
GLOBAL_POOL = "global"  # the pool id of every global-pool loader (jsonl_formats, passage_pool)


class Paragraph(NamedTuple):
    title: str
    body: str  # the paragraph's text without its title

    @property
    def text(self) -> str:
        return f"{self.title}: {self.body}" if self.body else self.title


class Item(NamedTuple):
    """One parsed question with its candidate paragraphs (the ones kept as units)."""

    qid: str
    text: str
    answers: tuple[str, ...]
    answer_type: str
    paragraphs: list[Paragraph]
    gold: list[int]  # indexes into ``paragraphs``, in context order
    evidence_match: dict


def check_pool(opts: dict) -> None:
    """``dataset.pool`` is one of POOLS (ConfigError naming it)."""
    v = opts.get("pool")
    if v not in POOLS:
        raise ConfigError("dataset.pool", f"unknown {v!r}{did_you_mean(str(v), POOLS)}; expected one of "
                                          f"{', '.join(POOLS)}")


def answer_type(answer: str) -> str:
    return "yes_no" if answer.lower() in ("yes", "no") else "span"


def multihop_dataset(name: str, source: str, items: Iterable[Item], pool: str, meta: dict) -> Dataset:
    """The dataset of ``items`` in pool mode ``pool`` (module docstring)."""
    items = list(items)
    if not items:
        raise DataError(source, "<top level>", "no questions")
    if pool == "global":
        return _global(name, items, meta)
    documents: dict[str, list[Unit]] = {}
    questions: list[Question] = []
    for it in items:
        units = [Unit(f"{it.qid}#{i}", it.qid, i, "paragraph", p.text, p.title) for i, p in enumerate(it.paragraphs)]
        documents[it.qid] = units
        questions.append(Question(it.qid, it.qid, it.qid, it.text, tuple(units[i].unit_id for i in it.gold),
                                  it.answers, it.answer_type, it.evidence_match))
    pools = {qid: [u.unit_id for u in us] for qid, us in documents.items()}
    return Dataset(name=name, documents=documents, questions=questions, pools=pools, meta=meta)


def _global(name: str, items: list[Item], meta: dict) -> Dataset:
    unit_of: dict[Paragraph, str] = {}
    documents: dict[str, list[Unit]] = {}
    questions: list[Question] = []
    n_candidates = 0
    for it in items:
        ids = []
        for p in it.paragraphs:
            n_candidates += 1
            if p not in unit_of:
                uid = f"p{len(unit_of):06d}"
                unit_of[p] = uid
                documents[uid] = [Unit(uid, uid, 0, "paragraph", p.text, p.title)]
            ids.append(unit_of[p])
        gold = tuple(dict.fromkeys(ids[i] for i in it.gold))
        questions.append(Question(it.qid, f"query:{it.qid}", GLOBAL_POOL, it.text, gold, it.answers, it.answer_type,
                                  it.evidence_match))
    meta = {**meta, "candidate_paragraphs": n_candidates, "distinct_paragraphs": len(unit_of)}
    return Dataset(name, documents, questions, {GLOBAL_POOL: list(documents)}, meta=meta,
                   options={"pool": "global"})
