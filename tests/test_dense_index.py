"""Dense search: the exact default equals independent exact searches (faiss IndexFlatIP and a
float64 brute force) on real passages; HNSW's recall@10 against exact search is measured, stored
per sampled question and reported in the table's info; HNSW settings are keyed and checked."""

from __future__ import annotations

import numpy as np
import pytest

from harness.data import load_dataset
from harness.errors import ConfigError
from harness.retrieval.dense_index import DenseIndexParams, HNSWIndex, exact_scores, recall_at
from harness.retrieval.fusion import rank_order
from harness.retrieval.table import build_outcome_table

MAXSIM = {"name": "maxsim"}


def _random_unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_recall_at_by_hand():
    assert recall_at(np.array([3, 2, 9]), np.array([3, 9, 1, 4]), k=2) == 0.5  # exact top 2 {3, 9}; found {3, 2}
    assert recall_at(np.array([1, 2, 3]), np.array([3, 9, 1, 4]), k=2) == 0.0
    assert recall_at(np.array([9, 3]), np.array([3, 9, 1]), k=2) == 1.0
    assert np.isnan(recall_at(np.array([1]), np.array([], dtype=int)))


def test_hnsw_recall_against_a_brute_force_loop():
    units, queries = _random_unit_vectors(4000, 24, 0), _random_unit_vectors(50, 24, 1)
    index = HNSWIndex(units, DenseIndexParams("hnsw", m=8, ef_construction=16, ef_search=12, depth=30))
    found = index.search(queries)
    recalls = []
    for q, (pos, scores) in zip(queries, found):
        brute = sorted(range(len(units)), key=lambda i: -float(np.dot(units[i].astype(np.float64), q)))
        recalls.append(len(set(brute[:10]) & set(pos[:10].tolist())) / 10)
        assert np.allclose(scores, units[pos].astype(np.float64) @ q.astype(np.float64), atol=1e-5)
        assert np.all(np.diff(scores) <= 0)  # best first
        assert recall_at(pos, rank_order(exact_scores(units, q))) == recalls[-1]
    assert 0.3 < np.mean(recalls) < 1.0  # a small graph with a small beam misses neighbours: measured, not 1
    # the mean of all scores is centroid . query
    assert index.corpus_score(queries[0]) == pytest.approx(float((units @ queries[0]).astype(np.float64).mean()), abs=1e-6)
    # one thread: the same graph, the same neighbours, every time
    again = HNSWIndex(units, DenseIndexParams("hnsw", m=8, ef_construction=16, ef_search=12, depth=30)).search(queries)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(found, again))


@pytest.mark.slow
def test_exact_and_hnsw_on_real_boolq_passages(tmp_path):
    import faiss

    from harness.retrieval.encoder import DenseEncoder

    ds = load_dataset({"loader": "boolq", "n_questions": 120})
    units = [ds.unit(u).text for u in ds.pools["global"]]
    enc = DenseEncoder()
    uv, qv = enc.encode(units).vectors, enc.encode([q.text for q in ds.questions]).vectors
    flat = faiss.IndexFlatIP(uv.shape[1])
    flat.add(uv)
    _, flat_ids = flat.search(qv, 10)
    for qi in range(len(qv)):
        ours = rank_order(exact_scores(uv, qv[qi]))[:10]
        f64 = uv.astype(np.float64) @ qv[qi].astype(np.float64)
        assert np.allclose(exact_scores(uv, qv[qi]), f64, atol=1e-6)
        gaps = np.abs(np.diff(np.sort(f64)[::-1][:11]))
        if gaps.min() > 1e-5:  # no near tie in the top 10: every exact search agrees on the order
            assert ours.tolist() == flat_ids[qi].tolist() == np.argsort(-f64, kind="stable")[:10].tolist()

    arms = {"k": 10, "candidates": 30, "precision": "fp32", "dense_index": "hnsw",
            "hnsw": {"m": 16, "ef_search": 64, "depth": 40, "recall_sample": 20}}
    table = build_outcome_table(ds, arms, MAXSIM, cache_dir=tmp_path, progress=False)
    exact = build_outcome_table(ds, {"k": 10, "candidates": 30, "precision": "fp32"}, MAXSIM, cache_dir=tmp_path,
                                progress=False)
    assert table.key != exact.key and "dense.recall@10_vs_exact" not in exact.frame.columns
    sampled = table.frame["dense.recall@10_vs_exact"].dropna()
    assert 20 <= len(sampled) <= 21
    assert table.info["dense_index"] == {"kind": "hnsw", "recall@10_vs_exact": pytest.approx(sampled.mean()),
                                         "recall_questions": len(sampled)}
    # recomputed independently: HNSW's dense top 10 against the exact table's dense top 10
    by_qid = exact.frame.set_index("qid")["dense.top10"]
    mine = [len(set(a) & set(by_qid[q])) / 10 for q, a in zip(table.frame["qid"], table.frame["dense.top10"])]
    assert np.mean(mine) >= 0.9 and all(np.isfinite(table.frame["feat.qpp_wig_dense"]))
    for r, m in zip(table.frame["dense.recall@10_vs_exact"], mine):
        if np.isfinite(r):
            assert r == pytest.approx(m)


@pytest.mark.parametrize("hnsw, key", [({"m": 1}, "arms.hnsw.m"), ({"depth": 5}, "arms.hnsw.depth"),
                                       ({"ef": 3}, "arms.hnsw.ef"), ({"ef_search": 0}, "arms.hnsw.ef_search")])
def test_bad_hnsw_settings_name_the_key(hnsw, key):
    from harness.retrieval.settings import check_retrieval_settings

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_retrieval_settings({"dense_index": "hnsw", "hnsw": hnsw, "encoder": {}})
    with pytest.raises(ConfigError, match="arms.dense_index"):
        check_retrieval_settings({"dense_index": "ivf", "encoder": {}})


def test_recall_becomes_a_run_metric_only_for_hnsw():
    from harness.app import dense_index_facts

    assert dense_index_facts({"kind": "exact"}) == {}
    assert dense_index_facts({"kind": "hnsw", "recall@10_vs_exact": 0.97, "recall_questions": 64}) == {
        "table/dense_recall@10_vs_exact": 0.97, "table/dense_recall_questions": 64.0}
