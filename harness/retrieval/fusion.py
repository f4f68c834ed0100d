"""Deterministic rankings and reciprocal rank fusion (docs/metrics.md §2).

Every ranking sorts by score descending and breaks ties by position in the pool, which is the
unit order in the document (a stable sort over pool order does exactly that).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

RRF_K = 60


def rank_order(scores: np.ndarray) -> np.ndarray:
    """Pool indices by score descending; equal scores keep pool (document) order."""
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def order_by_score(candidates: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Reorder ``candidates`` (pool indices) by ``scores`` descending, ties by pool index."""
    candidates = np.asarray(candidates)
    keys = np.lexsort((candidates, -np.asarray(scores, dtype=np.float64)))
    return candidates[keys]


def rrf_scores(orders: Sequence[np.ndarray], n: int, k: int = RRF_K) -> np.ndarray:
    """``score(u) = sum_r 1 / (k + rank_r(u))`` with ranks from 1; ``orders[r]`` lists pool indices
    best first. A unit missing from a ranking contributes nothing for it."""
    fused = np.zeros(n, dtype=np.float64)
    for order in orders:
        order = np.asarray(order)
        fused[order] += 1.0 / (k + np.arange(1, len(order) + 1, dtype=np.float64))
    return fused
