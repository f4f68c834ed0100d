"""Verified cached Parquet files of the builds (outcome tables, their shards, arm-block chunks):
each written atomically with its cache key in the Parquet's metadata and a digest sidecar
(``harness.io``), and read back only when both check out."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.io import CacheCorrupt, atomic_write_verified, move_aside, verify_file

PARQUET_META = b"rag_route_bench"


def write_verified_parquet(path: Path, frame: pd.DataFrame, *, key: str, **meta) -> dict:
    """Atomic Parquet with ``{"key": key, **meta}`` in its schema metadata, then its sidecar."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    record = {"key": key, **meta}

    def write(tmp: Path) -> None:
        t = pa.Table.from_pandas(frame, preserve_index=False)
        md = dict(t.schema.metadata or {})
        md[PARQUET_META] = json.dumps(record, sort_keys=True).encode("utf-8")
        pq.write_table(t.replace_schema_metadata(md), tmp)

    atomic_write_verified(path, write, key=key, **meta)
    return record


def read_verified_parquet(path: Path, key: str) -> tuple[pd.DataFrame, dict]:
    """(frame, sidecar record) of a cached Parquet after checking digest and recorded key.

    Read-only. Raises FileNotFoundError (missing) or :class:`harness.io.CacheCorrupt`.
    """
    import pyarrow.parquet as pq

    record = verify_file(path, key=key)
    try:
        raw = (pq.read_schema(path).metadata or {}).get(PARQUET_META)
        recorded = json.loads(raw) if raw else {}
        frame = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure means the file cannot be used
        raise CacheCorrupt(path, f"not a readable Parquet file: {type(exc).__name__}: {str(exc)[:200]}") from None
    if recorded.get("key") != key:
        raise CacheCorrupt(path, f"the Parquet records cache key {str(recorded.get('key'))[:16]}..., "
                                 f"its folder's key is {key[:16]}...")
    return frame, record


def read_part(path: Path, key: str, field: str, expected: str) -> pd.DataFrame | None:
    """A cached part of a build (a shard, a chunk) when it is verified and holds the same
    questions (``record[field] == expected``), else None: missing, or written for another
    partition (another shard size: not corrupt), or corrupt (moved aside, to be recomputed)."""
    try:
        frame, record = read_verified_parquet(path, key)
    except FileNotFoundError:
        return None
    except CacheCorrupt as exc:
        move_aside(exc.path, exc.reason, then="recomputed")
        return None
    return frame if record.get(field) == expected else None
