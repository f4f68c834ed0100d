"""The bad inputs of the bad-input tests: the data files written into each case's folder (and
the FIFOs, and the file that reads as permission denied), and how a case runs the CLI entry
in-process and what it left behind.

Why here: tests/test_bad_inputs.py and tests/test_bad_inputs_more.py run their cases in the same
folder (the ``workdir`` fixture, tests/helpers/fixtures.py, writes these files).
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path

from harness.__main__ import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "data"
QASPER = FIXTURES / "qasper-fixture-v0.3.json"
HOTPOT = FIXTURES / "hotpot-fixture.json"


def _qasper() -> dict:
    return json.loads(QASPER.read_text(encoding="utf-8"))


def _no_evidence() -> dict:
    data = _qasper()
    for paper in data.values():
        for qa in paper["qas"]:
            for annot in qa["answers"]:
                annot["answer"]["evidence"] = []
    return data


def _wrong_type() -> dict:
    data = _qasper()
    data["P1"]["full_text"] = "not a list"
    return data


def _bad_question_id() -> dict:
    data = _qasper()
    data["P2"]["qas"][0]["question_id"] = 7
    return data


def _hotpot_missing_id() -> list:
    data = json.loads(HOTPOT.read_text(encoding="utf-8"))
    del data[1]["_id"]
    return data


def _duplicate_paper() -> str:
    """The same paper id twice inside one JSON object (``json`` would keep only the last)."""
    data = _qasper()
    p1 = json.dumps(data["P1"])
    return '{"P1": ' + p1 + ', "P2": ' + json.dumps(data["P2"]) + ', "P1": ' + p1 + "}"


def _duplicate_field() -> str:
    data = copy.deepcopy(_qasper())
    text = json.dumps(data, indent=1)
    return text.replace('"title": "Routing Retrieval",', '"title": "Routing Retrieval", "title": "Again",', 1)


def _hotpot() -> list:
    return json.loads(HOTPOT.read_text(encoding="utf-8"))


def _qasper_no_answers() -> dict:
    data = _qasper()
    data["P1"]["qas"][0]["answers"] = []
    return data


def _hotpot_fact_index(index: int) -> list:
    data = _hotpot()
    data[0]["supporting_facts"][0][1] = index  # 'Alpha Weekly' has one sentence
    return data


def _hotpot_duplicate_title() -> list:
    data = _hotpot()
    data[0]["context"][1][0] = data[0]["context"][0][0]  # two paragraphs titled 'Gamma Daily'
    return data


def _with_surrogate(text: str, target: str) -> bytes:
    """``text`` (JSON) with ``target`` followed by a lone ``\\ud800`` escape."""
    assert target in text
    return text.replace(target, target + "\\ud800", 1).encode()


FILES = {
    "empty.json": b"",
    "blank.json": b"  \n\n",
    "truncated.json": QASPER.read_bytes()[:400],  # ends inside a string
    "cut.json": QASPER.read_bytes().rstrip()[:-3],  # ends before the closing brackets
    "syntax.json": b'{"P1": {"title": "x",, }}',
    "latin1.json": '{"P1": "caf\u00e9"}'.encode("latin-1"),
    "list.json": b"[1, 2]",
    "nopapers.json": b"{}",
    "dup-paper.json": _duplicate_paper().encode(),
    "dup-field.json": _duplicate_field().encode(),
    "wrong-type.json": json.dumps(_wrong_type()).encode(),
    "bad-qid.json": json.dumps(_bad_question_id()).encode(),
    "no-evidence.json": json.dumps(_no_evidence()).encode(),
    "hotpot-noid.json": json.dumps(_hotpot_missing_id()).encode(),
    "hotpot-object.json": b'{"_id": "h1"}',
    "denied.json": QASPER.read_bytes(),  # made unreadable in the case (see DENIED)
    "qasper-no-answers.json": json.dumps(_qasper_no_answers()).encode(),
    "qasper-surrogate.json": _with_surrogate(QASPER.read_text(encoding="utf-8"), "Which encoder is used?"),
    "hotpot-index-99.json": json.dumps(_hotpot_fact_index(99)).encode(),
    "hotpot-index-1.json": json.dumps(_hotpot_fact_index(1)).encode(),  # one past the last sentence
    "hotpot-index-neg.json": json.dumps(_hotpot_fact_index(-1)).encode(),
    "hotpot-dup-title.json": json.dumps(_hotpot_duplicate_title()).encode(),
    "hotpot-surrogate.json": _with_surrogate(json.dumps(_hotpot()), "Gamma Daily"),
}
CORPUS = b'{"id": "c1", "contents": "alpha beta"}\n{"id": "c2", "contents": "gamma delta"}\n'
BEIR_CORPUS = b'{"_id": "c1", "text": "alpha beta"}\n{"_id": "c2", "text": "gamma delta"}\n'
BEIR_QRELS = b"query-id\tcorpus-id\tscore\nq1\tc1\t1\n"


def _hotpot_empty_answer() -> list:
    data = _hotpot()
    data[0]["answer"] = " "
    return data


FILES.update({
    "hotpot-no-answer.json": json.dumps(_hotpot_empty_answer()).encode(),
    "corpus.jsonl": CORPUS,
    "q-empty-answers.jsonl": b'{"id": "q1", "question": "alpha?", "golden_answers": [], "gold_ids": ["c1"]}\n',
    "q-blank-answer.jsonl": b'{"id": "q1", "question": "alpha?", "golden_answers": ["a", " "], "gold_ids": ["c1"]}\n',
    "q-surrogate.jsonl": b'{"id": "q1", "question": "alpha\\ud800?", "golden_answers": ["a"], "gold_ids": ["c1"]}\n',
    # folders: a BEIR folder whose qrels file is a FIFO, one with an empty answer list; a model
    # folder and a policy config folder whose config file is a FIFO (made by the fixture)
    "beir-fifo/corpus.jsonl": BEIR_CORPUS,
    "beir-fifo/queries.jsonl": b'{"_id": "q1", "text": "alpha?"}\n',
    "beir-empty/corpus.jsonl": BEIR_CORPUS,
    "beir-empty/queries.jsonl": b'{"_id": "q1", "text": "alpha?", "answers": []}\n',
    "beir-empty/qrels/test.tsv": BEIR_QRELS,
    "conf-bad-yaml/policy/x.yaml": b"name: x\n_target_: [unclosed\n",
})
FIFO = "pipe.json"  # a named pipe (made in the case's folder): opening it would block forever
FIFOS = [FIFO, "pipe.gguf", "beir-fifo/qrels/test.tsv", "model-fifo/config.json", "conf-fifo/policy/x.yaml"]
DENIED = "denied.json"


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # an entry point must return, but count an exit the same way
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _finished_runs(folder: Path) -> int:
    n = 0
    for db in folder.rglob("*.db"):
        with sqlite3.connect(db) as con:
            try:
                n += con.execute("select count(*) from runs where status = 'FINISHED'").fetchone()[0]
            except sqlite3.DatabaseError:
                pass
    return n


def _cached_files(cache: Path) -> list[Path]:
    """Outcome tables and converted datasets (a lock file is not a cached artifact), and a
    sweep's state folder (made before its jobs are composed; gone when the sweep cannot start)."""
    if not cache.exists():
        return []
    return [p for p in cache.rglob("*") if (p.is_file() and p.suffix in (".parquet", ".json", ".whl"))
            or p.name.startswith("route-bench-sweep-")]
