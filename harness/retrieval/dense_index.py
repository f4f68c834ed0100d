"""Dense search over a pool: exact inner product (default) or faiss HNSW, with its recall measured.

Why two: exact search scores every unit of the pool for every question (a matrix-vector product
per question), which is the reference and what every table so far holds; its cost grows with
the pool, about linearly (benchmarks/bench_global_pool.py). HNSW (faiss ``IndexHNSWFlat``,
inner product) visits a small part of the graph per question, so the search stays fast on
global pools of 10^5-10^6 units, at the price of missing some true neighbours. That price is
measured, never assumed: in every shard a sample of questions is also searched exactly and the
share of the exact top 10 that HNSW found is stored per sampled question
(``dense.recall@10_vs_exact``) and reported as the table's ``dense_recall@10_vs_exact``.

Choices where the spec is silent:
- ``arms.dense_index: exact`` (default; unit vectors, so inner product = cosine) is the
  harness's own matrix-vector product in float32, the numbers every earlier table holds.
  Equality with an independent search (sentence-transformers' ``semantic_search``, faiss
  ``IndexFlatIP``) is checked on real passages in tests/test_dense_index.py.
- ``hnsw`` returns the ``depth`` best units per question (default 100, at least
  ``arms.candidates``); units it does not return have no dense score: they take no part in the
  dense ranking that RRF fuses (a unit missing from a ranking contributes nothing, as RRF
  defines) and the dense QPP features read the returned scores, with the corpus score
  (the mean score over ALL units) computed exactly as centroid . query (the mean of inner
  products is the inner product with the mean vector; equal up to rounding).
- The HNSW graph is built with one thread: faiss builds it in parallel otherwise, and the
  graph (so the neighbours found) would depend on thread timing. A graph can still differ
  between CPUs whose distance kernels round differently; the exact default does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import ConfigError

DENSE_INDEXES = ("exact", "hnsw")


@dataclass(frozen=True)
class DenseIndexParams:
    kind: str = "exact"
    m: int = 32  # HNSW graph degree
    ef_construction: int = 200
    ef_search: int = 128
    depth: int = 100  # units an HNSW search returns per question
    recall_sample: int = 64  # questions per shard also searched exactly (recall measured on them)

    def __post_init__(self) -> None:
        if self.kind not in DENSE_INDEXES:
            raise ConfigError("arms.dense_index", f"must be one of {', '.join(DENSE_INDEXES)}, got {self.kind!r}")

    def key(self) -> dict | None:
        """What enters the outcome table's key: nothing for exact search (earlier keys unchanged)."""
        if self.kind == "exact":
            return None
        return {"kind": self.kind, "m": self.m, "ef_construction": self.ef_construction,
                "ef_search": self.ef_search, "depth": self.depth, "recall_sample": self.recall_sample}


def exact_scores(unit_vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """Inner product of the query with every unit (float32 product, returned as float64)."""
    if not len(unit_vectors):
        return np.zeros(0)
    return (unit_vectors @ query_vector).astype(np.float64)


class HNSWIndex:
    """faiss HNSW over one pool's unit vectors (positions are pool positions)."""

    def __init__(self, unit_vectors: np.ndarray, params: DenseIndexParams):
        import faiss

        vecs = np.ascontiguousarray(unit_vectors, dtype=np.float32)
        self.n, dim = vecs.shape
        self.params = params
        self.index = faiss.IndexHNSWFlat(dim, int(params.m), faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = int(params.ef_construction)
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # a graph independent of thread timing (module docstring)
        try:
            self.index.add(vecs)
        finally:
            faiss.omp_set_num_threads(threads)
        self.index.hnsw.efSearch = max(int(params.ef_search), int(params.depth))
        self.centroid = vecs.astype(np.float64).mean(axis=0) if self.n else np.zeros(dim)

    def search(self, query_vectors: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per question: (pool positions best first, their float64 scores); ties by position."""
        q = np.ascontiguousarray(query_vectors, dtype=np.float32)
        if not len(q):
            return []
        scores, ids = self.index.search(q, min(int(self.params.depth), self.n))
        out = []
        for s, i in zip(scores, ids):
            ok = i >= 0
            pos, sc = i[ok].astype(np.int64), s[ok].astype(np.float64)
            order = np.lexsort((pos, -sc))
            out.append((pos[order], sc[order]))
        return out

    def corpus_score(self, query_vector: np.ndarray) -> float:
        """The mean score of the query over ALL units of the pool (see module docstring)."""
        return float(self.centroid @ np.asarray(query_vector, dtype=np.float64))


def recall_at(found: np.ndarray, exact_order: np.ndarray, k: int = 10) -> float:
    """Share of the exact top ``k`` that the approximate top ``k`` holds."""
    truth = [int(x) for x in exact_order[:k]]
    if not truth:
        return float("nan")
    return len(set(truth) & {int(x) for x in found[:k]}) / len(truth)
