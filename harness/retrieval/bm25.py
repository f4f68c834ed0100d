"""BM25 over one pool: rank-bm25's BM25Okapi scores, computed through an inverted index.

Tokens are ``re.findall(r"\\w+", text.lower())`` (letters, digits, underscore; punctuation
dropped). rank-bm25 floors negative IDF (terms in more than half the pool) at
``epsilon * mean IDF`` (epsilon = 0.25, the library default); we keep that behaviour.

Why an inverted index: ``BM25Okapi.get_scores`` looks every query word up in every unit's
dictionary (a Python loop over the whole pool per word), which is fine for a paper's 100 units
and minutes per question for a global pool of 10^5. Here rank-bm25 still builds the statistics
(IDF, unit lengths, mean length), and scoring visits only the units that contain the word:
for a unit with term frequency ``tf`` the added term is the library's own expression,
``idf * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avgdl)))``, evaluated with the same
float64 operations in the same order, and a unit without the word gets nothing (the library
adds an exact 0.0). So the scores are bit-identical to ``get_scores`` (tests/test_bm25_index.py
checks ``array_equal`` on real passages). One choice where the library is undefined: where its
denominator is 0 for an absent word (k1 = 0, or b = 1 and a unit with no word), rank-bm25
returns NaN (0 / 0); an absent word adds 0 here, as BM25's definition says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from harness.errors import ConfigError

_WORD = re.compile(r"\w+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class BM25Params:
    k1: float = 1.5
    b: float = 0.75

    def __post_init__(self) -> None:
        if not self.k1 >= 0:
            raise ConfigError("bm25.k1", f"must be >= 0, got {self.k1}")
        if not 0 <= self.b <= 1:
            raise ConfigError("bm25.b", f"must be in [0, 1], got {self.b}")


class BM25Pool:
    """BM25 index over the texts of one pool, in pool order."""

    def __init__(self, texts: list[str], params: BM25Params = BM25Params()):
        from rank_bm25 import BM25Okapi

        self.n = len(texts)
        corpus = [tokenize(t) for t in texts]
        # rank-bm25 divides by the mean document length: an all-empty pool cannot be scored.
        if not any(corpus):
            self._idf: dict[str, float] = {}
            self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
            return
        okapi = BM25Okapi(corpus, k1=params.k1, b=params.b)
        self._k1 = okapi.k1
        self._idf = okapi.idf
        doc_len = np.array(okapi.doc_len)
        # the library's per-unit length normalisation, the same float64 operations and order
        self._norm = okapi.k1 * (1 - okapi.b + okapi.b * doc_len / okapi.avgdl)
        docs: dict[str, list[int]] = {}
        freqs: dict[str, list[int]] = {}
        for i, counts in enumerate(okapi.doc_freqs):
            for word, tf in counts.items():
                docs.setdefault(word, []).append(i)
                freqs.setdefault(word, []).append(tf)
        self._postings = {w: (np.asarray(docs[w], dtype=np.int64), np.asarray(freqs[w], dtype=np.int64))
                          for w in docs}

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every unit of the pool for ``query`` (float64, pool order)."""
        score = np.zeros(self.n, dtype=np.float64)
        for word in tokenize(query):
            posting = self._postings.get(word)
            if posting is None:
                continue  # not in the pool: the library adds idf 0 times 0 everywhere
            idx, tf = posting
            score[idx] += (self._idf.get(word) or 0) * (tf * (self._k1 + 1) / (tf + self._norm[idx]))
        return score
