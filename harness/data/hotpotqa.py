"""Loader for HotpotQA in the official distractor format (a JSON list of questions).

Each item: ``_id``, ``question``, ``answer``, ``type``, ``level``, ``supporting_facts``
(``[[title, sentence index], ...]``) and ``context`` (``[[title, [sentence, ...]], ...]``, the
two gold paragraphs plus eight distractors).

Choices (docs/metrics.md is silent):

* ``dataset.pool=question`` (default): a document is one question's candidate set:
  ``doc_id = pool_id = _id``; its units are the context paragraphs in the given order, kind
  "paragraph", ``unit_id = f"{_id}#{index}"``. ``dataset.pool=global``: one pool of every
  candidate paragraph of the file, deduplicated by (title, text) (``harness.data.multihop``).
* Unit text = ``title + ": " + "".join(sentences).strip()``. HotpotQA sentences carry their own
  leading spaces, so joining with "" restores the Wikipedia paragraph; the title is kept
  because it often is the bridge entity the question names. ``Unit.section`` = the title.
* Gold = every context paragraph whose title appears in ``supporting_facts``. Evidence counts are
  over distinct supporting titles: "exact" when the title is in the context, else "unmatched".
  A sentence index must point into its paragraph: a negative one, or one past the paragraph's
  last sentence, is a DataError naming the field (``dataset.past_end_facts=skip`` drops facts
  past the end instead, for files that hold a few). Titles are unique within one context (gold
  is found by title).
* Answers = ``[answer]``; ``answer_type`` = "yes_no" for yes/no answers, else "span". An empty
  ``answer`` is refused (an empty reference, as QASPER's empty ``answers``).
* Paragraphs with no text (empty sentence list) are still units if the title is non-empty.

Data: Yang, Qi, Zhang, Bengio, Cohen, Salakhutdinov, Manning (2018), "HotpotQA: A Dataset for
Diverse, Explainable Multi-hop Question Answering", EMNLP. Licence: CC BY-SA 4.0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from harness.data.base import REQUIRED, DatasetLoader, check_path
from harness.data.multihop import Item, Paragraph, answer_type, check_pool, multihop_dataset
from harness.data.schema import Dataset
from harness.data.validate import expect_type, load_json_file, require, str_list
from harness.errors import ConfigError, DataError, did_you_mean

LICENCE = "CC BY-SA 4.0"
CITATION = (
    "Zhilin Yang, Peng Qi, Saizheng Zhang, Yoshua Bengio, William W. Cohen, Ruslan Salakhutdinov, "
    "Christopher D. Manning. 2018. HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question "
    "Answering. In Proceedings of EMNLP 2018."
)


PAST_END_FACTS = ("refuse", "skip")


def hotpot_sentences(sents: list[str]) -> str:
    """HotpotQA's sentences carry their own leading spaces: joined with "" they restore the
    Wikipedia paragraph."""
    return "".join(sents).strip()


def parse_distractor(items: list, source: str, past_end: str = "refuse",
                     join: Callable[[list[str]], str] = hotpot_sentences) -> list[Item]:
    """The questions of a distractor-format JSON list (HotpotQA's, which 2WikiMultiHopQA
    shares), checked field by field; ``join`` makes a paragraph's body of its sentences."""
    seen: set[str] = set()
    out: list[Item] = []
    for i, item in enumerate(items):
        where = f"[{i}]"
        expect_type(item, dict, source, where)
        qid, text, answer = _question_fields(item, where, source, seen)
        context = require(item, "context", list, source, f"{where}.context")
        paragraphs, sentences_of = _paragraphs(context, where, source, join)
        if not paragraphs:
            raise DataError(source, f"{where}.context", "no paragraphs (no units)")
        facts = require(item, "supporting_facts", list, source, f"{where}.supporting_facts")
        titles = _fact_titles(facts, where, source, sentences_of, past_end)
        counts = {"exact": 0, "fuzzy": 0, "unmatched": 0}
        gold: set[int] = set()
        for t in dict.fromkeys(titles):
            hits = [j for j, p in enumerate(paragraphs) if p.title == t]
            counts["exact" if hits else "unmatched"] += 1
            gold.update(hits)
        out.append(Item(qid, text, (answer,) if answer else (), answer_type(answer), paragraphs, sorted(gold), counts))
    return out


def _question_fields(item: dict, where: str, source: str, seen: set[str]) -> tuple[str, str, str]:
    """An item's id (new and not empty; added to ``seen``), question and reference answer."""
    qid = require(item, "_id", str, source, f"{where}._id")
    if not qid:
        raise DataError(source, f"{where}._id", "empty id")
    if qid in seen:
        raise DataError(source, f"{where}._id", f"duplicate id {qid!r}")
    seen.add(qid)
    text = require(item, "question", str, source, f"{where}.question").strip()
    if not text:
        raise DataError(source, f"{where}.question", "empty question")
    answer = require(item, "answer", str, source, f"{where}.answer").strip()
    if not answer:  # an empty reference: nothing an answer arm could be scored against
        raise DataError(source, f"{where}.answer", "empty answer; each question needs its reference answer")
    return qid, text, answer


def _paragraphs(context: list, where: str, source: str,
                join: Callable[[list[str]], str]) -> tuple[list[Paragraph], dict[str, int]]:
    """An item's context as paragraphs (empty ones dropped), and each title's number of
    sentences; a repeated title is refused, as gold is found by title."""
    paragraphs: list[Paragraph] = []
    sentences_of: dict[str, int] = {}  # title -> its paragraph's number of sentences
    for c_i, para in enumerate(context):
        c_where = f"{where}.context[{c_i}]"
        expect_type(para, list, source, c_where)
        if len(para) != 2:
            raise DataError(source, c_where, f"expected [title, [sentences]], got {len(para)} items")
        title = expect_type(para[0], str, source, f"{c_where}[0]")
        sents = str_list(para[1], source, f"{c_where}[1]")
        if title in sentences_of:  # gold is found by title: a repeated one makes it ambiguous
            first = next(j for j, p in enumerate(context[:c_i]) if isinstance(p, list) and p and p[0] == title)
            raise DataError(source, f"{c_where}[0]", f"title {title!r} appears twice in one context (first at "
                                                      f"{where}.context[{first}][0])")
        sentences_of[title] = len(sents)
        body = join(sents)
        if not title.strip() and not body:
            continue
        paragraphs.append(Paragraph(title, body))
    return paragraphs, sentences_of


def _fact_titles(facts: list, where: str, source: str, sentences_of: dict[str, int], past_end: str) -> list[str]:
    """The titles of an item's supporting facts; a fact citing a sentence past its paragraph's
    last is refused, or dropped with ``past_end="skip"``."""
    titles: list[str] = []
    for f_i, fact in enumerate(facts):
        f_where = f"{where}.supporting_facts[{f_i}]"
        expect_type(fact, list, source, f_where)
        if len(fact) != 2:
            raise DataError(source, f_where, f"expected [title, sentence index], got {len(fact)} items")
        title = expect_type(fact[0], str, source, f"{f_where}[0]")
        index = expect_type(fact[1], int, source, f"{f_where}[1]")
        if index < 0:
            raise DataError(source, f"{f_where}[1]", f"sentence index {index} is negative (indexes count from 0)")
        n_sents = sentences_of.get(title)
        if n_sents is not None and index >= n_sents:
            if past_end != "skip":
                raise DataError(source, f"{f_where}[1]", f"sentence index {index} is past the last sentence of "
                                                         f"paragraph {title!r} ({n_sents} sentences, indexes 0.."
                                                         f"{n_sents - 1}); dataset.past_end_facts=skip drops such "
                                                         "facts from the gold evidence")
            continue
        titles.append(title)
    return titles


def load_hotpotqa(path: str | Path, name: str = "hotpotqa", past_end_facts: str | None = None,
                  pool: str = "question") -> Dataset:
    """``past_end_facts``: a supporting fact whose sentence index is past its paragraph's last
    sentence is refused (default, naming the field) or ``skip``ped (it cites no sentence, so it
    makes no paragraph gold). ``pool``: ``question`` or ``global`` (harness.data.multihop)."""
    path = Path(path).expanduser()
    source = path.name
    obj, digest = load_json_file(path)
    items = expect_type(obj, list, source, "<top level>")
    parsed = parse_distractor(items, source, past_end_facts or "refuse")
    meta = {"licence": LICENCE, "citation": CITATION, "sources": [{"file": source, "sha256": digest}]}
    return multihop_dataset(name, source, parsed, pool, meta)


class HotpotQALoader(DatasetLoader):
    """``dataset.loader=hotpotqa``: a HotpotQA distractor file (conf/dataset/hotpotqa.yaml).
    Every arm's top 10 holds both supporting paragraphs, so the retrieval pairs route on
    all@2 here (docs/arms.md, "Outcome metrics per dataset")."""

    name = "hotpotqa"
    options = {"path": REQUIRED, "past_end_facts": None, "pool": "question"}
    licence, citation = LICENCE, CITATION
    retrieval_metric = "all@2"

    def check(self, opts: dict) -> None:
        check_path(opts, "path")
        check_pool(opts)
        v = opts.get("past_end_facts")
        if v is not None and v not in PAST_END_FACTS:
            raise ConfigError("dataset.past_end_facts", f"unknown {v!r}{did_you_mean(v, PAST_END_FACTS)}; "
                                                        f"expected one of {', '.join(PAST_END_FACTS)} or null")

    def fingerprint_inputs(self, opts: dict) -> list[Path]:
        return [Path(opts["path"]).expanduser()]

    def load(self, opts: dict, name: str) -> Dataset:
        return load_hotpotqa(opts["path"], name=name, past_end_facts=opts.get("past_end_facts"), pool=opts["pool"])
