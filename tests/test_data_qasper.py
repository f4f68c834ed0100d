"""Official-layout QASPER loader on a hand-written fixture; validation errors name file + field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from harness.data import load_dataset
from harness.data.qasper import load_qasper_files
from harness.errors import DataError

FIXTURE = Path(__file__).parent / "fixtures" / "data" / "qasper-fixture-v0.3.json"


@pytest.fixture
def ds():
    return load_qasper_files([FIXTURE])


def _units(ds, doc):
    return [(u.unit_id, u.kind, u.text, u.section) for u in ds.documents[doc]]


def test_units_in_document_order(ds):
    assert _units(ds, "P1") == [
        ("P1#0", "heading", "Introduction", "Introduction"),
        ("P1#1", "paragraph", "Routing decides  when to retrieve more.", "Introduction"),
        # the whitespace-only paragraph is skipped
        ("P1#2", "paragraph", "We study QASPER papers here.", "Introduction"),
        # default dataset.heading_text=full: the heading keeps QASPER's full nested name
        ("P1#3", "heading", "Method ::: Encoder", "Method ::: Encoder"),
        ("P1#4", "paragraph", "The encoder maps each paragraph to a dense vector of size 384 using MiniLM.", "Method ::: Encoder"),
        ("P1#5", "paragraph", "Untitled tail paragraph.", ""),  # null section name: no heading unit
        ("P1#6", "caption", "Table 1: Hit@10 of both arms.", ""),
        ("P1#7", "caption", "Figure 1: The pipeline.", ""),
    ]
    assert _units(ds, "P2") == [
        ("P2#0", "heading", "Results", "Results"),
        ("P2#1", "paragraph", "Hybrid wins on 5 questions.", "Results"),
        ("P2#2", "paragraph", "Keep wins on 2 questions.", "Results"),
    ]
    assert [u.index for u in ds.documents["P1"]] == list(range(8))
    assert not any("abstract" in u.text.lower() for us in ds.documents.values() for u in us)
    assert ds.pools == {"P1": [f"P1#{i}" for i in range(8)], "P2": ["P2#0", "P2#1", "P2#2"]}


def test_questions_gold_answers_and_match_counts(ds):
    q = {x.qid: x for x in ds.questions}
    assert [x.qid for x in ds.questions] == ["q1", "q2", "q3", "q4", "q5", "q6"]
    assert all(x.doc_id == x.pool_id for x in ds.questions)
    assert q["q1"].doc_id == "P1" and q["q5"].doc_id == "P2"
    # q1: exact match despite case/newline (annotator A) == annotator B's copy (deduplicated);
    # FLOAT SELECTED caption matched exactly after stripping the prefix
    assert q["q1"].gold_unit_ids == ("P1#4", "P1#6")
    assert q["q1"].evidence_match == {"exact": 2, "fuzzy": 0, "unmatched": 0}
    assert q["q1"].answers == ("MiniLM", "MiniLM, dense vector", "dense vector")
    assert q["q1"].answer_type == "extractive"
    # q2: fuzzy F1 = 10/11 >= 0.8 -> P1#2; the unrelated string stays unmatched
    assert q["q2"].gold_unit_ids == ("P1#2",)
    assert q["q2"].evidence_match == {"exact": 0, "fuzzy": 1, "unmatched": 1}
    assert q["q2"].answers == ("Yes", "No") and q["q2"].answer_type == "yes_no"
    # q3/q4: no evidence at all -> kept, has_evidence False
    assert q["q3"].gold_unit_ids == () and not q["q3"].has_evidence
    assert q["q3"].answers == ("384 dimensions",) and q["q3"].answer_type == "abstractive"
    assert q["q3"].evidence_match == {"exact": 0, "fuzzy": 0, "unmatched": 0}
    assert q["q4"].answers == ("Unanswerable",) and q["q4"].answer_type == "unanswerable"
    # q5: "Keep wins on 3 questions." vs P2#2: overlap 4 of 5 and 5 tokens -> F1 = 0.8 exactly
    # (fuzzy, threshold inclusive); "Keep loses on 3 questions." -> F1 0.6 -> unmatched
    assert q["q5"].gold_unit_ids == ("P2#2",)
    assert q["q5"].evidence_match == {"exact": 0, "fuzzy": 1, "unmatched": 1}
    assert q["q5"].answers == ("2", "two") and q["q5"].answer_type == "extractive"
    # q6: FLOAT SELECTED only matches captions; P2 has none, though a paragraph has that text
    assert q["q6"].gold_unit_ids == () and q["q6"].evidence_match == {"exact": 0, "fuzzy": 0, "unmatched": 1}


def test_stats_and_meta(ds):
    s = ds.stats()
    assert (s["documents"], s["questions"], s["questions_with_evidence"], s["units"]) == (2, 6, 3, 11)
    assert s["units_by_kind"] == {"paragraph": 6, "heading": 3, "caption": 2}
    assert s["evidence_strings"] == {"exact": 2, "fuzzy": 2, "unmatched": 3}
    assert ds.meta["licence"] == "CC BY 4.0" and "Dasigi" in ds.meta["citation"]
    assert ds.meta["sources"][0]["file"] == FIXTURE.name


def test_fingerprint_stable_and_sensitive(tmp_path, ds):
    assert load_qasper_files([FIXTURE]).fingerprint() == ds.fingerprint()
    data = json.loads(FIXTURE.read_text())
    data["P2"]["full_text"][0]["paragraphs"][0] = "Hybrid wins on 6 questions."
    changed = tmp_path / "qasper-changed.json"
    changed.write_text(json.dumps(data))
    assert load_qasper_files([changed]).fingerprint() != ds.fingerprint()


def test_load_dataset_directory_and_split(tmp_path):
    (tmp_path / "qasper-dev-v0.3.json").write_bytes(FIXTURE.read_bytes())
    ds = load_dataset({"loader": "qasper", "path": str(tmp_path), "split": "dev"})
    assert ds.name == "qasper" and len(ds.questions) == 6 and ds.meta["split"] == "dev"
    with pytest.raises(DataError, match="qasper-train-v0.3.json"):
        load_dataset({"loader": "qasper", "path": str(tmp_path)})  # default split train: absent


def test_duplicate_question_id_across_files(tmp_path):
    data = json.loads(FIXTURE.read_text())
    other = {"P3": copy.deepcopy(data["P2"])}
    other["P3"]["qas"] = [other["P3"]["qas"][0]]  # q5 again
    f2 = tmp_path / "qasper-dev.json"
    f2.write_text(json.dumps(other))
    with pytest.raises(DataError) as e:
        load_qasper_files([FIXTURE, f2])
    assert str(e.value).startswith("qasper-dev.json, field 'P3.qas[0].question_id': duplicate id 'q5'")


def _write(tmp_path, mutate) -> Path:
    data = json.loads(FIXTURE.read_text())
    mutate(data)
    p = tmp_path / "qasper-dev.json"
    p.write_text(json.dumps(data))
    return p


def _del_qid(d):
    del d["P1"]["qas"][1]["question_id"]


def _bad_yes_no(d):
    d["P1"]["qas"][1]["answers"][0]["answer"]["yes_no"] = "yes"


def _empty_paper(d):
    d["P2"]["full_text"] = [{"section_name": "", "paragraphs": ["  "]}]
    d["P2"]["figures_and_tables"] = []


def _dup_qid(d):
    d["P2"]["qas"][1]["question_id"] = "q5"


def _para_not_str(d):
    d["P1"]["full_text"][1]["paragraphs"][0] = 7


def _missing_figs(d):
    del d["P2"]["figures_and_tables"]


@pytest.mark.parametrize(
    "mutate, field, problem",
    [
        (_del_qid, "P1.qas[1].question_id", "missing key"),
        (_bad_yes_no, "P1.qas[1].answers[0].answer.yes_no", "expected a boolean or null, got str"),
        (_empty_paper, "P2.full_text", "no units"),
        (_dup_qid, "P2.qas[1].question_id", "duplicate id 'q5'"),
        (_para_not_str, "P1.full_text[1].paragraphs[0]", "expected a string, got int"),
        (_missing_figs, "P2.figures_and_tables", "missing key"),
    ],
)
def test_validation_errors_name_file_and_field(tmp_path, mutate, field, problem):
    p = _write(tmp_path, mutate)
    with pytest.raises(DataError) as e:
        load_dataset({"loader": "qasper", "path": str(p)})
    assert e.value.source == "qasper-dev.json"
    assert e.value.field == field
    assert problem in str(e.value)
    assert str(e.value).startswith(f"qasper-dev.json, field {field!r}: ")


def test_bad_encoding_and_bad_json(tmp_path):
    p = tmp_path / "qasper-dev.json"
    p.write_bytes(FIXTURE.read_bytes().replace(b"Routing decides", b"Routing d\xffcides"))
    with pytest.raises(DataError, match=r"^qasper-dev.json: not valid UTF-8: byte 0xff at offset \d+"):
        load_qasper_files([p])
    p.write_bytes(FIXTURE.read_bytes()[:-20])
    with pytest.raises(DataError, match=r"^qasper-dev.json: invalid JSON at line \d+ column \d+"):
        load_qasper_files([p])
    p.write_text("[1, 2]")
    with pytest.raises(DataError, match=r"qasper-dev.json, field '<top level>': expected an object, got list"):
        load_qasper_files([p])


def test_evidence_without_word_tokens_is_never_fuzzy_matched():
    """Punctuation-only evidence must not become gold on a punctuation-only unit (F1 of two
    empty token lists is no match)."""
    from harness.data.evidence import EvidenceMatcher
    from harness.data.schema import Unit

    units = [Unit("d#0", "d", 0, "paragraph", "A real paragraph about BERT."),
             Unit("d#1", "d", 1, "paragraph", "\\\\"),
             Unit("d#2", "d", 2, "caption", "Table 1: x")]
    gold, counts = EvidenceMatcher(units).match(["---"])
    assert gold == () and counts == {"exact": 0, "fuzzy": 0, "unmatched": 1}
    # an exact (normalised) match of the same text still counts
    gold, counts = EvidenceMatcher(units).match(["\\\\"])
    assert gold == ("d#1",) and counts["exact"] == 1


def test_answer_precedence_follows_the_official_evaluator():
    """unanswerable > extractive spans > free form > yes/no (qasper_evaluator.py's order)."""
    from harness.data.qasper import _answer_texts

    def ans(**kw):
        base = {"unanswerable": False, "extractive_spans": [], "yes_no": None, "free_form_answer": ""}
        return _answer_texts({**base, **kw}, "f.json", "p.qas[0].answers[0].answer")

    assert ans(unanswerable=True, extractive_spans=["x"]) == ("unanswerable", ["Unanswerable"])
    assert ans(extractive_spans=["BERT"], yes_no=True, free_form_answer="y") == ("extractive", ["BERT"])
    assert ans(extractive_spans=["a", "b"]) == ("extractive", ["a, b", "a", "b"])
    assert ans(free_form_answer=" about 3% ", yes_no=False) == ("abstractive", ["about 3%"])
    assert ans(yes_no=False) == ("yes_no", ["No"])
    assert ans() == ("abstractive", [])
