"""Loader for 2WikiMultiHopQA's official JSON files (``dev.json``: a JSON list of questions).

Each item: ``_id``, ``question``, ``answer``, ``type``, ``context`` (``[[title, [sentence, ...]],
...]``) and ``supporting_facts`` (``[[title, sentence index], ...]``), HotpotQA's layout: it is
parsed and checked by the same code (``harness.data.hotpotqa.parse_distractor``), so titles are
unique within one context, a sentence index must point into its paragraph
(``dataset.past_end_facts=skip`` drops those that do not), and gold = the paragraphs whose title
a supporting fact names. One difference: a paragraph's body is its sentences stripped and
joined with one space (2Wiki's sentences do not all carry the leading space HotpotQA's do).

Pool modes as ``harness.data.multihop``: ``question`` (default) or ``global``. Answers =
``[answer]`` for the answer-level arms.

Data: Ho, Duong Nguyen, Sugawara, Aizawa (2020), "Constructing A Multi-hop QA Dataset for
Comprehensive Evaluation of Reasoning Steps", COLING. Licence: Apache-2.0.
"""

from __future__ import annotations

from pathlib import Path

from harness.data.hotpotqa import HotpotQALoader, parse_distractor
from harness.data.multihop import multihop_dataset
from harness.data.schema import Dataset
from harness.data.validate import expect_type, load_json_file

LICENCE = "Apache-2.0"
CITATION = (
    "Xanh Ho, Anh-Khoa Duong Nguyen, Saku Sugawara, Akiko Aizawa. 2020. Constructing A Multi-hop QA "
    "Dataset for Comprehensive Evaluation of Reasoning Steps. In Proceedings of COLING 2020."
)


def spaced_sentences(sents: list[str]) -> str:
    return " ".join(s.strip() for s in sents if s.strip())


def load_twowiki(path: str | Path, name: str = "2wikimultihopqa", past_end_facts: str | None = None,
                 pool: str = "question") -> Dataset:
    path = Path(path).expanduser()
    obj, digest = load_json_file(path)
    items = expect_type(obj, list, path.name, "<top level>")
    parsed = parse_distractor(items, path.name, past_end_facts or "refuse", join=spaced_sentences)
    meta = {"licence": LICENCE, "citation": CITATION, "sources": [{"file": path.name, "sha256": digest}]}
    return multihop_dataset(name, path.name, parsed, pool, meta)


class TwoWikiLoader(HotpotQALoader):
    """``dataset=2wikimultihopqa path=FILE [pool=question|global]``: HotpotQA's options and
    checks (the same distractor layout); routes on all@2 (its questions need 2 paragraphs, 4 for
    bridge-comparison) unless ``arms.metric`` is set."""

    name = "2wikimultihopqa"
    licence, citation = LICENCE, CITATION

    def load(self, opts: dict, name: str) -> Dataset:
        return load_twowiki(opts["path"], name=name, past_end_facts=opts.get("past_end_facts"), pool=opts["pool"])
