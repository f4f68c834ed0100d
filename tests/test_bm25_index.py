"""BM25 through the inverted index equals rank-bm25's BM25Okapi.get_scores bit for bit: on the
real BoolQ passages (one global pool, real questions) and on hand-made corner cases."""

from __future__ import annotations

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from harness.retrieval.bm25 import BM25Params, BM25Pool, tokenize


def _library(texts: list[str], query: str, params: BM25Params) -> np.ndarray:
    return np.asarray(BM25Okapi([tokenize(t) for t in texts], k1=params.k1, b=params.b).get_scores(tokenize(query)))


@pytest.mark.parametrize("params", [BM25Params(), BM25Params(1.2, 0.5), BM25Params(2.0, 1.0), BM25Params(0.5, 0.0)])
def test_equal_to_the_library_on_corner_cases(params):
    texts = ["alpha beta beta", "gamma, delta!", "alpha alpha alpha gamma", "eta", "x " * 40,
             "alpha " + "beta " * 9, "beta gamma delta eta theta"]
    # repeated words, words in more than half the units (floored IDF), unknown words, no word at all
    for query in ("alpha beta", "beta beta", "unknown words only", "Alpha, GAMMA? eta x", "...", "beta alpha x x"):
        got = BM25Pool(texts, params).scores(query)
        assert np.array_equal(got, _library(texts, query, params)), (query, params)


def test_absent_words_add_zero_where_the_library_divides_zero_by_zero():
    texts = ["alpha", "beta beta"]
    lib = _library(texts, "alpha", BM25Params(0.0, 0.75))
    assert np.isnan(lib[1])  # rank-bm25: 0 / 0 for the unit without the word
    got = BM25Pool(texts, BM25Params(0.0, 0.75)).scores("alpha")
    assert got[1] == 0.0 and got[0] == lib[0]
    assert BM25Pool(["", "..."]).scores("alpha").tolist() == [0.0, 0.0]


def test_equal_to_the_library_on_real_boolq_passages():
    """2,939 real Wikipedia passages (each "title -- passage") in one pool, 150 real BoolQ questions: every score equal."""
    from harness.data import load_dataset

    ds = load_dataset({"loader": "boolq"})
    texts = [ds.unit(u).text for u in ds.pools["global"]]
    assert len(texts) > 2000
    pool = BM25Pool(texts)
    lib = BM25Okapi([tokenize(t) for t in texts])
    for q in ds.questions[::22]:
        got = pool.scores(q.text)
        assert got.any() and np.array_equal(got, np.asarray(lib.get_scores(tokenize(q.text)))), q.qid
