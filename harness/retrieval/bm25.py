"""BM25 over one pool: rank-bm25's BM25Okapi with lowercase word tokens (docs/metrics.md §2).

Tokens are ``re.findall(r"\\w+", text.lower())`` (letters, digits, underscore; punctuation
dropped). rank-bm25 floors negative IDF (terms in more than half the pool) at
``epsilon * mean IDF`` (epsilon = 0.25, the library default); we keep that behaviour.
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
        self._bm25 = BM25Okapi(corpus, k1=params.k1, b=params.b) if any(corpus) else None

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every unit of the pool for ``query`` (float64, pool order)."""
        if self._bm25 is None:
            return np.zeros(self.n, dtype=np.float64)
        return np.asarray(self._bm25.get_scores(tokenize(query)), dtype=np.float64)
