"""Pools no larger than the rerank depth: keep and hybrid rerank the same set, said before a build.

Why: keep reranks dense's top ``arms.candidates`` of a question's pool, hybrid the fused top
``arms.candidates``. When every question's pool holds no more units than that depth, both take
the whole pool, the reranker orders the same set the same way, and the two arms cannot differ on
any question; the table would take minutes to show "nothing to route". The pool sizes are known
as soon as the dataset is loaded, so ``data`` and ``table build`` (and every job that builds its
table) say it first, naming both settings and the depth that would let the arms differ.
"""

from __future__ import annotations

from typing import Any, Mapping

DEFAULT_RERANK_DEPTH = 30  # arms.candidates in conf/arms/*.yaml while pipeline.rerank_depth is null
DEPTH_SETTINGS = "pipeline.rerank_depth, arms.candidates"


def question_pool_sizes(ds: Any) -> list[int]:
    """The number of units each question's arms search (its pool), in question order."""
    return [len(ds.pools[q.pool_id]) for q in ds.questions]


def same_rerank_set(ds: Any, depth: int, k: int = 10) -> str | None:
    """The warning line when no question's pool is larger than ``depth`` (keep and hybrid then
    rerank the same set on every question), else None. The fix named: a depth below the
    largest pool (and at least ``k``, the ranks each arm keeps), or larger pools."""
    sizes = question_pool_sizes(ds)
    if not sizes or max(sizes) > depth:
        return None
    largest = max(sizes)
    one = len({q.pool_id for q in ds.questions}) == 1
    where = f"the one pool holds {largest} units" if one else f"every question's pool holds at most {largest} units"
    head = (f"{where}, no more than the rerank depth {depth} ({DEPTH_SETTINGS}): "
            "keep and hybrid would rerank the same set (the whole pool) and cannot differ on any question")
    if largest - 1 >= k:
        return f"{head}; set pipeline.rerank_depth={largest - 1} or lower (at least arms.k={k}) so they rerank different sets"
    return (f"{head}; the pools are no larger than arms.k={k} either, so no rerank depth can tell them apart: "
            "use a dataset (or dataset.pool setting) with larger pools")


def warn_same_rerank_set(ds: Any, arms: Mapping[str, Any]) -> None:
    """Before a table build: when the pair is keep vs hybrid and no pool is larger than the rerank
    depth, one warning line on the console (``same_rerank_set``)."""
    if {str(arms.get("base", "keep")), str(arms.get("extra", "hybrid"))} != {"keep", "hybrid"}:
        return
    line = same_rerank_set(ds, int(arms.get("candidates", DEFAULT_RERANK_DEPTH)), int(arms.get("k", 10)))
    if line:
        print(f"[route-bench] warning: {line}", flush=True)


def pool_size_range(ds: Any) -> str:
    """The smallest and largest pool a question searches, as the ``data`` table shows it."""
    sizes = question_pool_sizes(ds)
    if not sizes:
        return "0"
    low, high = min(sizes), max(sizes)
    return str(high) if low == high else f"{low}-{high}"
