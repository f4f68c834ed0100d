"""The outcome table's warm-up: a few units of real work timed on this machine before a cold build.

Why: a constant rate ("expect roughly 5m00s") was off by 8x on a loaded 2-core machine. One pool
of the first shard still to compute is encoded and reranked (``compute_shard``, the build's own
work; its rows are discarded), so the up-front estimate and the first progress lines use this
machine's speed under its current load (the model and ranking work; writing a shard is not
timed, so a build of many tiny shards takes longer than the first line says). The pool: the median-sized one of that shard, and none
when it holds more than ``MAX_UNITS`` units or ``MAX_SHARE`` of the build (it runs twice, so the
warm-up adds at most twice that share; a global pool holds every unit: a warm-up would be a
second build), in which case the time left is measured as shards are computed
(``harness.progress``).
"""

from __future__ import annotations

from pathlib import Path

MAX_UNITS = 256
MAX_SHARE = 0.02


def warm_up_pool(dataset, shards: list[list[str]], folder: Path, n_units: int) -> list[str] | None:
    """The pool to time (as a one-pool list), or None (nothing to compute, or too large)."""
    todo = [pools for i, pools in enumerate(shards) if not (folder / "shards" / f"shard-{i:05d}.parquet").exists()]
    if not todo:
        return None
    pools = sorted(todo[0], key=lambda p: (len(dataset.pools[p]), p))
    pick = pools[len(pools) // 2]
    size = len(dataset.pools[pick])
    return [pick] if 0 < size <= min(MAX_UNITS, MAX_SHARE * n_units) else None


def table_rate(dataset, shards: list[list[str]], folder: Path, n_units: int, encoder, reranker, params) -> float | None:
    """Units per second of this build's work on this machine (``progress.warm_up_rate``), None
    when there is no pool to time."""
    from harness.progress import warm_up_rate
    from harness.retrieval.arms import compute_shard

    pool = warm_up_pool(dataset, shards, folder, n_units)
    if pool is None:
        return None
    units = len(dataset.pools[pool[0]])
    return warm_up_rate(lambda: compute_shard(dataset, pool, encoder, reranker, params), units)
