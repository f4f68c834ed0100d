"""Loader for MuSiQue's official JSON Lines files (``musique_ans_v1.0_dev.jsonl``, ``musique_full_*``).

Each line: ``id``, ``question``, ``answer``, ``answer_aliases``, ``paragraphs``
(``[{idx, title, paragraph_text, is_supporting}, ...]``: the supporting paragraphs plus
distractors, 20 in the official files) and ``answerable``.

Choices (docs/datasets.md, "Multi-hop pool modes"):

* Pool modes as ``harness.data.multihop``: ``question`` (default: a question searches its own
  paragraphs) or ``global`` (one pool of every distinct (title, text) paragraph of the file).
* Gold = the paragraphs with ``is_supporting: true`` (found by flag, not by title: a title may
  repeat within one question's paragraphs, an ``idx`` may not). Evidence counts: "exact" = the
  number of supporting paragraphs.
* Unanswerable questions (``answerable: false``, MuSiQue-Full) have no answer to find: left out
  and counted (``meta["left_out"]``), as BEIR's queries without a relevant passage are.
* Answers = ``answer`` then ``answer_aliases`` (distinct, in order), for the answer-level arms;
  ``answer_type`` "yes_no" for a yes/no answer, else "span".
* Every file problem is one line naming file, line and field.

Data: Trivedi, Balasubramanian, Khot, Sabharwal (2022), "MuSiQue: Multihop Questions via
Single-hop Question Composition", TACL. Licence: CC BY 4.0.
"""

from __future__ import annotations

from pathlib import Path

from harness.data.base import REQUIRED, DatasetLoader, check_path
from harness.data.jsonl_formats import read_jsonl, unique_ids
from harness.data.multihop import Item, Paragraph, answer_type, check_pool, multihop_dataset
from harness.data.schema import Dataset
from harness.errors import DataError

LICENCE = "CC BY 4.0"
CITATION = (
    "Harsh Trivedi, Niranjan Balasubramanian, Tushar Khot, Ashish Sabharwal. 2022. MuSiQue: Multihop "
    "Questions via Single-hop Question Composition. Transactions of the Association for Computational "
    "Linguistics 10."
)


def _typed(obj: dict, key: str, typ: type, where: str, field: str | None = None) -> object:
    field = field or key
    if key not in obj:
        raise DataError(where, field, "missing key")
    value = obj[key]
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is not bool):
        names = {str: "a string", list: "a list", dict: "an object", bool: "a boolean", int: "an integer"}
        raise DataError(where, field, f"expected {names[typ]}, got {type(value).__name__ if value is not None else 'null'}")
    return value


def _paragraphs(obj: dict, where: str) -> tuple[list[Paragraph], list[int]]:
    raw = _typed(obj, "paragraphs", list, where)
    paragraphs: list[Paragraph] = []
    gold: list[int] = []
    seen_idx: dict[int, int] = {}
    for i, para in enumerate(raw):
        field = f"paragraphs[{i}]"
        if not isinstance(para, dict):
            raise DataError(where, field, f"expected an object, got {type(para).__name__}")
        idx = _typed(para, "idx", int, where, f"{field}.idx")
        if idx in seen_idx:
            raise DataError(where, f"{field}.idx", f"idx {idx} appears twice in one question (first at "
                                                  f"paragraphs[{seen_idx[idx]}])")
        seen_idx[idx] = i
        title = _typed(para, "title", str, where, f"{field}.title")
        body = _typed(para, "paragraph_text", str, where, f"{field}.paragraph_text").strip()
        supporting = _typed(para, "is_supporting", bool, where, f"{field}.is_supporting")
        if not body:
            raise DataError(where, f"{field}.paragraph_text", "is empty: a paragraph without text cannot be retrieved")
        if supporting:
            gold.append(len(paragraphs))
        paragraphs.append(Paragraph(title, body))
    if not paragraphs:
        raise DataError(where, "paragraphs", "no paragraphs (no units)")
    return paragraphs, gold


def parse_musique(path: Path) -> tuple[list[Item], int, str]:
    """(answerable questions, unanswerable ones left out, SHA-256 of the file)."""
    rows, digest = read_jsonl(path)
    items: list[Item] = []
    unanswerable = 0
    for obj, qid, where in unique_ids(rows, "id", path.name):
        text = _typed(obj, "question", str, where).strip()
        if not text:
            raise DataError(where, "question", "empty question")
        answerable = obj.get("answerable", True)
        if not isinstance(answerable, bool):
            raise DataError(where, "answerable", f"expected a boolean, got {type(answerable).__name__}")
        paragraphs, gold = _paragraphs(obj, where)
        if not answerable:
            unanswerable += 1
            continue
        answer = _typed(obj, "answer", str, where).strip()
        aliases = obj.get("answer_aliases") or []
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise DataError(where, "answer_aliases", "expected a list of strings")
        answers = tuple(dict.fromkeys(a.strip() for a in [answer, *aliases] if a.strip()))
        if not answer:  # the same rule as HotpotQA's and 2WikiMultiHopQA's empty ``answer``
            raise DataError(where, "answer", "empty answer; an answerable question needs its reference answer")
        if not gold:
            raise DataError(where, "paragraphs", "an answerable question with no paragraph is_supporting: true")
        items.append(Item(qid, text, answers, answer_type(answer), paragraphs, gold,
                          {"exact": len(gold), "fuzzy": 0, "unmatched": 0}))
    return items, unanswerable, digest


def load_musique(path: str | Path, name: str = "musique", pool: str = "question") -> Dataset:
    path = Path(path).expanduser()
    items, unanswerable, digest = parse_musique(path)
    if not items:
        raise DataError(path.name, None, f"no answerable question ({unanswerable} unanswerable left out)")
    meta = {"licence": LICENCE, "citation": CITATION, "sources": [{"file": path.name, "sha256": digest}],
            "left_out": {"unanswerable_questions": unanswerable}}
    return multihop_dataset(name, path.name, items, pool, meta)


class MusiqueLoader(DatasetLoader):
    """``dataset=musique path=FILE [pool=question|global]``: a MuSiQue JSONL file. Its questions
    need 2 to 4 paragraphs; the retrieval pairs route on all@2 like HotpotQA's unless
    ``arms.metric`` is set (a question with more than 2 gold paragraphs scores 0 on all@2: set
    ``arms.metric=all@5`` or ``recall@5`` for 3- and 4-hop questions)."""

    name = "musique"
    options = {"path": REQUIRED, "pool": "question"}
    licence, citation = LICENCE, CITATION
    retrieval_metric = "all@2"

    def check(self, opts: dict) -> None:
        check_path(opts, "path")
        check_pool(opts)

    def fingerprint_inputs(self, opts: dict) -> list[Path]:
        return [Path(opts["path"]).expanduser()]

    def load(self, opts: dict, name: str) -> Dataset:
        return load_musique(opts["path"], name=name, pool=opts["pool"])
