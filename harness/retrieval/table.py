"""The cached outcome table: one row per question, every arm's outcome and cost, and features.

Why cached and sharded: encoding a corpus and reranking is the expensive stage; every policy,
protocol and sweep reads the same table. The table is content-addressed: its key is the digest
of the dataset fingerprint, the models' identities and weight digests, every parameter, the
resolved precision and ``CODE_VERSION`` (bump it whenever arm, cost or feature logic changes).
Same key -> the Parquet is loaded and no model is loaded at all (models load lazily).

Layout under ``cache_root()/tables/<key>/``: ``shards/shard-NNNNN.parquet`` (pools in sorted
order, ``shard_size`` pools per shard), then ``table.parquet`` + ``info.json``. Every file is
written atomically, and the build holds ``<key>/.lock`` so two processes cannot interleave; an
interrupted build resumes from the shards already written. ``table.parquet`` only appears once
all shards are done, so a failed build never leaves a table behind.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pandas as pd

from harness.data.schema import Dataset
from harness.errors import ConfigError
from harness.io import atomic_write, atomic_write_text, cache_root, canonical_json, digest_of, file_lock
from harness.retrieval.arms import ARMS, ArmParams, compute_shard
from harness.retrieval.bm25 import BM25Params
from harness.retrieval.encoder import PACKAGED_MINILM, DenseEncoder, forward_seconds_of
from harness.retrieval.features import QPP_TOP_K
from harness.retrieval.fusion import RRF_K
from harness.retrieval.precision import DEFAULT_PRECISION, resolve_precision
from harness.retrieval.rerankers import make_reranker

# arms-3: MaxSim drops special tokens by token id, not by position ([UNK] kept as content);
# default precision fp32
CODE_VERSION = "arms-3"
DEFAULT_SHARD_SIZE = 32


@dataclass
class OutcomeTable:
    frame: pd.DataFrame
    key: str
    path: Path
    info: dict = field(default_factory=dict)


def _int(cfg: Mapping, key: str, default: int, minimum: int, prefix: str = "arms") -> int:
    v = cfg.get(key, default)
    try:
        iv = int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{prefix}.{key}", f"must be an integer, got {v!r}") from None
    if iv < minimum:
        raise ConfigError(f"{prefix}.{key}", f"must be >= {minimum}, got {iv}")
    return iv


def arm_params(arms_cfg: Mapping) -> ArmParams:
    """ArmParams from an ``conf/arms/*.yaml`` mapping (unknown keys are left to other stages)."""
    bm = arms_cfg.get("bm25") or {}
    try:
        bm25 = BM25Params(k1=float(bm.get("k1", 1.5)), b=float(bm.get("b", 0.75)))
    except (TypeError, ValueError) as e:
        raise ConfigError("arms.bm25", f"k1 and b must be numbers ({e})") from None
    k = _int(arms_cfg, "k", 10, 1)
    cand = _int(arms_cfg, "candidates", 30, 1)
    if cand < k:
        raise ConfigError("arms.candidates", f"must be >= k ({k}), got {cand}")
    return ArmParams(k=k, candidates=cand, rrf_k=_int(arms_cfg, "rrf_k", RRF_K, 0), bm25=bm25,
                     qpp_k=_int(arms_cfg, "qpp_k", QPP_TOP_K, 1))


def make_encoder(arms_cfg: Mapping) -> DenseEncoder:
    enc = arms_cfg.get("encoder") or {}
    return DenseEncoder(
        model=str(enc.get("model", PACKAGED_MINILM)),
        batch_size=_int(enc, "batch_size", 64, 1, "arms.encoder"),
        max_seq_length=_int(enc, "max_seq_length", 256, 8, "arms.encoder"),
        precision=str(arms_cfg.get("precision", DEFAULT_PRECISION)),
    )


def _progress_enabled(progress: bool | None) -> bool:
    if progress is not None:
        return bool(progress)
    return not os.environ.get("CI") and sys.stderr.isatty()


def _shards(dataset: Dataset, shard_size: int) -> list[list[str]]:
    used = sorted({q.pool_id for q in dataset.questions})
    for p in used:
        if p not in dataset.pools:
            raise ConfigError("dataset.pools", f"question pool {p!r} is not in dataset {dataset.name!r}")
    return [used[i : i + shard_size] for i in range(0, len(used), shard_size)]


def _write_parquet(path: Path, frame: pd.DataFrame) -> None:
    atomic_write(path, lambda p: frame.to_parquet(p, index=False))


def build_outcome_table(
    dataset: Dataset,
    arms_cfg: Mapping,
    reranker_cfg: Mapping,
    *,
    cache_dir: Path | None = None,
    progress: bool | None = None,
    encoder=None,
    reranker=None,
) -> OutcomeTable:
    """Load or build the outcome table for ``dataset`` (see module docstring).

    ``encoder``/``reranker`` override the configured components (tests inject deterministic
    fakes); their ``identity()`` goes into the key like a real model's.
    """
    t_start = time.perf_counter()
    params = arm_params(arms_cfg)
    shard_size = _int(arms_cfg, "shard_size", DEFAULT_SHARD_SIZE, 1)
    precision = resolve_precision(str(arms_cfg.get("precision", DEFAULT_PRECISION)), "arms.precision")
    if encoder is None:
        encoder = make_encoder(arms_cfg)
    enc_id = encoder.identity()
    if reranker is None:
        reranker = make_reranker(reranker_cfg, enc_id, precision)
    rr_id = reranker.identity()
    key_material = {
        "dataset": dataset.fingerprint(),
        "encoder": enc_id,
        "reranker": rr_id,
        "params": {"k": params.k, "candidates": params.candidates, "rrf_k": params.rrf_k,
                   "bm25": {"k1": params.bm25.k1, "b": params.bm25.b}, "qpp_k": params.qpp_k,
                   "shard_size": shard_size},
        "precision": precision,
        "code_version": CODE_VERSION,
    }
    key = digest_of(key_material)
    root = Path(cache_dir) if cache_dir is not None else cache_root() / "tables"
    folder = root / key
    table_path, info_path = folder / "table.parquet", folder / "info.json"

    with file_lock(folder / ".lock"):
        if table_path.exists() and info_path.exists():
            info = json.loads(info_path.read_text(encoding="utf-8"))
            return OutcomeTable(pd.read_parquet(table_path), key, table_path, info)

        shards = _shards(dataset, shard_size)
        show = _progress_enabled(progress)
        from tqdm.auto import tqdm

        bar_pools = tqdm(total=sum(map(len, shards)), desc="pools encoded", unit="pool", disable=not show)
        bar_q = tqdm(total=len(dataset.questions), desc="questions reranked", unit="q", disable=not show)
        reused = computed = 0
        fwd0 = forward_seconds_of(encoder) + forward_seconds_of(reranker)
        try:
            frames = []
            for i, pools in enumerate(shards):
                shard_path = folder / "shards" / f"shard-{i:05d}.parquet"
                if shard_path.exists():
                    frame = pd.read_parquet(shard_path)
                    reused += 1
                    bar_pools.update(len(pools))
                else:
                    rows, _ = compute_shard(dataset, pools, encoder, reranker, params, bar_pools.update)
                    frame = pd.DataFrame(rows)
                    _write_parquet(shard_path, frame)
                    computed += 1
                bar_q.update(len(frame))
                frames.append(frame)
        finally:
            bar_pools.close()
            bar_q.close()
        table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if len(table):
            table = table.sort_values("qid", kind="stable").reset_index(drop=True)
        info = {
            "key": key,
            "key_material": json.loads(canonical_json(key_material)),
            "dataset": dataset.name,
            "models": {"encoder": enc_id, "reranker": rr_id},
            "precision": precision,
            "params": key_material["params"],
            "code_version": CODE_VERSION,
            "arms": list(ARMS),
            "base_arm": "keep",
            "build_seconds": time.perf_counter() - t_start,
            "model_forward_seconds": forward_seconds_of(encoder) + forward_seconds_of(reranker) - fwd0,
            "counts": {
                "questions": int(len(table)),
                "questions_with_evidence": int(table["has_evidence"].sum()) if len(table) else 0,
                "pools": int(sum(map(len, shards))),
                "units": int(sum(len(dataset.pools[p]) for s in shards for p in s)),
                "shards": len(shards),
                "shards_computed": computed,
                "shards_reused": reused,
            },
        }
        _write_parquet(table_path, table)
        atomic_write_text(info_path, json.dumps(info, indent=2, sort_keys=True, default=str))
        # read back so a cold and a warm build return identical dtypes (lists come back as arrays)
        return OutcomeTable(pd.read_parquet(table_path), key, table_path, info)
