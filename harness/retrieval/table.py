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

A cold build first prints one line (units, shards); tqdm bars show progress on a terminal, and
where stdout is not a terminal (a log file, CI) plain progress lines do (``harness.progress``):
after every computed shard and at most one per 30 s otherwise, each with the units done, the
time elapsed and the time left at the rate measured on this machine so far (from the first
computed shard on; reused shards do not count towards the rate). Inside a shard (a global pool
is one) its stages report too, on a terminal as well: encoding passages and questions (per
batch, in tokens), the BM25 index, the search and the reranking (per block of questions, in
pairs), each line with the time left in its stage at the rate measured in it, the first right
after the first measured batch. No estimate comes from anything but the work measured so far.
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
from harness.errors import ConfigError, DataError, HarnessError
from harness.io import (
    CacheCorrupt,
    atomic_write_verified,
    cache_root,
    canonical_json,
    digest_of,
    file_lock,
    move_aside,
    verify_file,
)
from harness.progress import Progress
from harness.retrieval.arms import ARMS, ArmParams, batch_independent, compute_shard
from harness.retrieval.bm25 import BM25Params
from harness.retrieval.cached_parquet import read_part, read_verified_parquet, write_verified_parquet
from harness.retrieval.dense_index import DenseIndexParams
from harness.retrieval.embedding_cache import CachedEncoder
from harness.retrieval.encoder import PACKAGED_MINILM, DenseEncoder, forward_seconds_of
from harness.retrieval.features import QPP_TOP_K
from harness.retrieval.fusion import RRF_K
from harness.retrieval.precision import DEFAULT_PRECISION, resolve_precision
from harness.retrieval.rerankers import MaxSimReranker, make_reranker

# arms-3: MaxSim drops special tokens by token id, not by position ([UNK] kept as content);
# default precision fp32
# arms-4: batch-independent encoding (one token length per forward pass, no padding); verified
# cache files (sidecar digests, key in the Parquet); shard_size out of the key where exact
CODE_VERSION = "arms-4"
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
    return ArmParams(k=k, candidates=cand, rrf_k=_int(arms_cfg, "rrf_k", RRF_K, 1), bm25=bm25,
                     qpp_k=_int(arms_cfg, "qpp_k", QPP_TOP_K, 1), dense=dense_index_params(arms_cfg, cand))


def dense_index_params(arms_cfg: Mapping, candidates: int) -> DenseIndexParams:
    """``arms.dense_index`` (exact | hnsw) and ``arms.hnsw.*`` (harness.retrieval.dense_index)."""
    kind = str(arms_cfg.get("dense_index", "exact"))
    h = arms_cfg.get("hnsw") or {}
    d = DenseIndexParams()
    p = DenseIndexParams(kind, m=_int(h, "m", d.m, 2, "arms.hnsw"),
                         ef_construction=_int(h, "ef_construction", d.ef_construction, 1, "arms.hnsw"),
                         ef_search=_int(h, "ef_search", d.ef_search, 1, "arms.hnsw"),
                         depth=_int(h, "depth", d.depth, candidates, "arms.hnsw"),
                         recall_sample=_int(h, "recall_sample", d.recall_sample, 1, "arms.hnsw"))
    return p


def dense_recall_summary(frame: pd.DataFrame) -> dict:
    """HNSW's measured recall@10 against exact search over the sampled questions (else {})."""
    col = "dense.recall@10_vs_exact"
    if col not in frame.columns:
        return {}
    vals = frame[col].astype(float).dropna()
    return {"recall@10_vs_exact": float(vals.mean()) if len(vals) else float("nan"),
            "recall_questions": int(len(vals))}


def embedding_cache_on(arms_cfg: Mapping) -> bool:
    value = arms_cfg.get("embedding_cache", True)
    if not isinstance(value, bool):
        raise ConfigError("arms.embedding_cache", f"must be true or false, got {value!r}")
    return value


def make_encoder(arms_cfg: Mapping) -> DenseEncoder:
    enc = arms_cfg.get("encoder") or {}
    return DenseEncoder(
        model=str(enc.get("model", PACKAGED_MINILM)),
        batch_size=_int(enc, "batch_size", 64, 1, "arms.encoder"),
        max_seq_length=_int(enc, "max_seq_length", 256, 8, "arms.encoder"),
        precision=str(arms_cfg.get("precision", DEFAULT_PRECISION)),
        device=str(arms_cfg.get("device", "cpu")),
    )


def _progress_enabled(progress: bool | None) -> bool:
    if progress is not None:
        return bool(progress)
    return not os.environ.get("CI") and sys.stderr.isatty()


def _progress_lines(progress: bool | None) -> bool:
    """Plain progress lines on stdout (a log file, CI) where a tqdm bar would not be seen:
    ``progress=None`` (auto) and stdout not a terminal."""
    return progress is None and not sys.stdout.isatty()


def _shards(dataset: Dataset, shard_size: int) -> list[list[str]]:
    used = sorted({q.pool_id for q in dataset.questions})
    for p in used:
        if p not in dataset.pools:
            raise ConfigError("dataset.pools", f"question pool {p!r} is not in dataset {dataset.name!r}")
    return [used[i : i + shard_size] for i in range(0, len(used), shard_size)]


def _check_finished(folder: Path, key: str) -> tuple[OutcomeTable | None, list[CacheCorrupt]]:
    """The verified finished table, else (None, the corrupt files). Reads only."""
    table_path, info_path = folder / "table.parquet", folder / "info.json"
    problems: list[CacheCorrupt] = []
    frame = record = info = None
    try:
        frame, record = read_verified_parquet(table_path, key)
    except FileNotFoundError:
        pass
    except CacheCorrupt as exc:
        problems.append(exc)
    try:
        verify_file(info_path, key=key)
        try:
            info = json.loads(info_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CacheCorrupt(info_path, f"not valid JSON: {type(exc).__name__}") from None
        if not isinstance(info, dict) or info.get("key") != key:
            got = info.get("key") if isinstance(info, dict) else None
            raise CacheCorrupt(info_path, f"it names cache key {str(got)[:16]}..., its folder's key is {key[:16]}...")
        if record is not None and info.get("table_sha256") != record["sha256"]:
            raise CacheCorrupt(info_path, "it describes another table.parquet (table_sha256 differs)")
    except FileNotFoundError:
        info = None
    except CacheCorrupt as exc:
        problems.append(exc)
        info = None
    if frame is not None and info is not None and not problems:
        return OutcomeTable(frame, key, table_path, info), []
    return None, problems


def _require_writable(folder: Path, key: str, problems: list[CacheCorrupt]) -> None:
    """Fail with one clear line when the build (or repair) cannot write to ``folder``."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a"):
            pass
    except OSError as exc:
        why = exc.strerror or str(exc)
        if problems:
            p = problems[0]
            raise HarnessError(f"cache file {p.path} is corrupt ({p.reason}) and the cache folder is not writable "
                               f"({why}): cannot move it aside and rebuild; fix the permissions or remove the file") from None
        raise HarnessError(f"outcome table {key[:16]}... is not in the cache and {folder} is not writable ({why}); "
                           "build it once where the cache is writable, or set HARNESS_CACHE_DIR") from None


def _dataset_source(dataset: Dataset) -> str:
    files = [s.get("file") for s in dataset.meta.get("sources", []) if isinstance(s, dict) and s.get("file")]
    return ", ".join(files) or str(dataset.meta.get("source") or dataset.name)


def _shard_path(folder: Path, i: int) -> Path:
    return folder / "shards" / f"shard-{i:05d}.parquet"


def shard_frame(dataset: Dataset, encoder, reranker, params: ArmParams, pools: list[str]) -> pd.DataFrame:
    """One shard's rows (a piece an executor runs: a pure function of its arguments)."""
    rows, _ = compute_shard(dataset, pools, encoder, reranker, params)
    return pd.DataFrame(rows)


def _shards_elsewhere(executor, dataset: Dataset, shards: list[list[str]], folder: Path, key: str, encoder,
                      reranker, params: ArmParams, eta: Progress, bars: tuple) -> tuple[list[pd.DataFrame], int, int]:
    """The shards on disk read here, the others computed by ``executor`` and written here as they
    arrive (so an interrupted build resumes from them, as a local one). The workers get the
    encoder itself, not the embedding cache (its vectors equal the encoder's: the same numbers)."""
    frames: dict[int, pd.DataFrame] = {}
    todo: list[int] = []
    for i, pools in enumerate(shards):
        frame = read_part(_shard_path(folder, i), key, "pools", digest_of(pools))
        if frame is None:
            todo.append(i)
        else:
            frames[i] = frame
            eta.skip(int(sum(len(dataset.pools[p]) for p in pools)))
            bars[0].update(len(pools))
            bars[1].update(len(frame))
    plain = encoder.inner if isinstance(encoder, CachedEncoder) else encoder
    for j, frame in executor.map(shard_frame, [(shards[i],) for i in todo], shared=(dataset, plain, reranker, params)):
        i = todo[j]
        write_verified_parquet(_shard_path(folder, i), frame, key=key, pools=digest_of(shards[i]), shard=i)
        frames[i] = frame
        eta.advance(int(sum(len(dataset.pools[p]) for p in shards[i])))
        bars[0].update(len(shards[i]))
        bars[1].update(len(frame))
        eta.report(force=True)  # after every computed shard, as a local build
    return [frames[i] for i in range(len(shards))], len(todo), len(shards) - len(todo)


def _shards_here(dataset: Dataset, shards: list[list[str]], folder: Path, key: str, encoder, reranker,
                 params: ArmParams, eta: Progress, bars: tuple) -> tuple[list[pd.DataFrame], int, int]:
    """Each shard read from disk, else computed in this process and written (so an interrupted
    build resumes from it). Returns the frames, the shards computed and the shards reused."""
    bar_pools, bar_q = bars
    frames = []
    computed = reused = 0
    for i, pools in enumerate(shards):
        eta.where = f"shard {i + 1}/{len(shards)}"  # named in the lines of the shard's stages
        shard_path = _shard_path(folder, i)
        pools_digest = digest_of(pools)
        frame = read_part(shard_path, key, "pools", pools_digest)
        units = int(sum(len(dataset.pools[p]) for p in pools))
        fresh = frame is None
        if fresh:
            rows, _ = compute_shard(dataset, pools, encoder, reranker, params, bar_pools.update)
            frame = pd.DataFrame(rows)
            write_verified_parquet(shard_path, frame, key=key, pools=pools_digest, shard=i)
            computed += 1
            eta.advance(units)
        else:
            reused += 1
            bar_pools.update(len(pools))
            eta.skip(units)
        bar_q.update(len(frame))
        frames.append(frame)
        eta.report(force=fresh)  # after every computed shard, else at most every 30 s
    return frames, computed, reused


@dataclass
class _ShardRun:
    """The shards of one build and when their computing started (model forward time included),
    for the table's info."""

    frames: list[pd.DataFrame]
    computed: int
    reused: int
    started: float
    forward_before: float


def _run_shards(dataset: Dataset, shards: list[list[str]], folder: Path, key: str, encoder, reranker,
                params: ArmParams, progress: bool | None, executor) -> _ShardRun:
    """The notice of a cold build, then every shard read or computed (here or by ``executor``)
    under the tqdm bars and the plain progress lines."""
    show = _progress_enabled(progress)
    from tqdm.auto import tqdm

    n_units = int(sum(len(dataset.pools[p]) for s in shards for p in s))
    # the stages inside a shard report on a terminal too (tqdm.write keeps the bars whole)
    eta = Progress(f"outcome table {key[:12]}", n_units, "units", emit=_progress_lines(progress),
                   stages=progress is not False, out=lambda line: (tqdm.write(line), sys.stdout.flush()))
    bar_pools = tqdm(total=sum(map(len, shards)), desc="pools encoded", unit="pool", disable=not show)
    bar_q = tqdm(total=len(dataset.questions), desc="questions reranked", unit="q", disable=not show)
    if progress is not False:  # the notice shows on a terminal too; the shards' lines only off it
        print(f"[route-bench] building outcome table {key[:12]} for {dataset.name}: {n_units} units in "
              f"{len(shards)} shards (shards already on disk are reused); the time left is measured as the work "
              "is done", flush=True)
    fwd0 = forward_seconds_of(encoder) + forward_seconds_of(reranker)
    t_start = time.perf_counter()
    try:
        with eta.active():  # its heartbeat: a line at least every interval, a shard computed elsewhere too
            if executor is not None and executor.name != "local":
                frames, computed, reused = _shards_elsewhere(executor, dataset, shards, folder, key, encoder,
                                                             reranker, params, eta, (bar_pools, bar_q))
            else:
                frames, computed, reused = _shards_here(dataset, shards, folder, key, encoder, reranker, params,
                                                        eta, (bar_pools, bar_q))
    finally:
        bar_pools.close()
        bar_q.close()
    return _ShardRun(frames, computed, reused, t_start, fwd0)


def _models(arms_cfg: Mapping, reranker_cfg: Mapping, precision: str, encoder, reranker, cache_dir: Path | None):
    """The encoder and reranker (the configured ones unless injected), their identities (taken
    before the encoder is wrapped in the embedding cache) and the cache folder of tables."""
    if encoder is None:
        encoder = make_encoder(arms_cfg)
    enc_id = encoder.identity()
    if reranker is None:
        reranker = make_reranker(reranker_cfg, enc_id, precision, str(arms_cfg.get("device", "cpu")))
    rr_id = reranker.identity()
    root = Path(cache_dir) if cache_dir is not None else cache_root() / "tables"
    if embedding_cache_on(arms_cfg) and batch_independent(encoder) and not isinstance(encoder, CachedEncoder):
        # a cached vector equals a fresh one only for a batch-independent encoder (embedding_cache.py)
        encoder = CachedEncoder(encoder, root / "_embeddings" if cache_dir is not None else cache_root() / "embeddings",
                                precision)
    return encoder, reranker, enc_id, rr_id, root


def _key_params(params: ArmParams, shard_size: int, exact: bool) -> dict:
    """The parameters in the table's key; ``shard_size`` stays in it unless the numbers are proven
    independent of it (``exact``)."""
    key_params = {"k": params.k, "candidates": params.candidates, "rrf_k": params.rrf_k,
                  "bm25": {"k1": params.bm25.k1, "b": params.bm25.b}, "qpp_k": params.qpp_k}
    if params.dense.key() is not None:  # exact search: earlier keys unchanged
        key_params["dense_index"] = params.dense.key()
    if not exact:
        key_params["shard_size"] = shard_size
    return key_params


def build_outcome_table(
    dataset: Dataset,
    arms_cfg: Mapping,
    reranker_cfg: Mapping,
    *,
    cache_dir: Path | None = None,
    progress: bool | None = None,
    encoder=None,
    reranker=None,
    executor=None,
) -> OutcomeTable:
    """Load or build the outcome table for ``dataset`` (see module docstring).

    ``encoder``/``reranker`` override the configured components (tests inject deterministic
    fakes); their ``identity()`` goes into the key like a real model's. ``executor``
    (``harness.executor``; None: this process) computes the missing shards; this process writes
    them, so the files and the key do not depend on it.
    """
    params = arm_params(arms_cfg)
    shard_size = _int(arms_cfg, "shard_size", DEFAULT_SHARD_SIZE, 1)
    precision = resolve_precision(str(arms_cfg.get("precision", DEFAULT_PRECISION)), "arms.precision")
    if not dataset.questions:
        raise DataError(_dataset_source(dataset), None,
                        f"dataset {dataset.name!r} has 0 questions: no outcome table is built or cached")
    encoder, reranker, enc_id, rr_id, root = _models(arms_cfg, reranker_cfg, precision, encoder, reranker, cache_dir)
    # shard_size stays in the key unless the numbers are proven independent of it
    exact = precision == "fp32" and batch_independent(encoder) and isinstance(reranker, MaxSimReranker)
    key_material = {
        "dataset": dataset.fingerprint(),
        "encoder": enc_id,
        "reranker": rr_id,
        "params": _key_params(params, shard_size, exact),
        "precision": precision,
        "code_version": CODE_VERSION,
    }
    key = digest_of(key_material)
    folder = root / key

    # a verified finished table is read without the lock: no write access needed
    found, problems = _check_finished(folder, key)
    if found is not None:
        return found
    _require_writable(folder, key, problems)
    with file_lock(folder / ".lock"):
        found, problems = _check_finished(folder, key)  # again: another process may have built it
        if found is not None:
            return found
        for p in problems:
            move_aside(p.path, p.reason)
        shards = _shards(dataset, shard_size)
        run = _run_shards(dataset, shards, folder, key, encoder, reranker, params, progress, executor)
        return _write_table(dataset, folder, key, key_material, shards, run, encoder, reranker, params,
                            shard_size, exact, executor)


def _write_table(dataset: Dataset, folder: Path, key: str, key_material: dict, shards: list[list[str]],
                 run: _ShardRun, encoder, reranker, params: ArmParams, shard_size: int, exact: bool,
                 executor) -> OutcomeTable:
    """``table.parquet`` from the shards and its ``info.json``, written and read back (so a cold
    and a warm build return identical dtypes: lists come back as arrays)."""
    table_path, info_path = folder / "table.parquet", folder / "info.json"
    table = pd.concat(run.frames, ignore_index=True)
    table = table.sort_values("qid", kind="stable").reset_index(drop=True)
    if not len(table):  # pragma: no cover - every shard holds the questions of its pools
        raise DataError(_dataset_source(dataset), None, f"dataset {dataset.name!r}: the outcome table has 0 rows")
    write_verified_parquet(table_path, table, key=key)
    info = {
        "key": key,
        "key_material": json.loads(canonical_json(key_material)),
        "dataset": dataset.name,
        "models": {"encoder": key_material["encoder"], "reranker": key_material["reranker"]},
        "precision": key_material["precision"],
        "params": {**key_material["params"], "shard_size": shard_size},
        "shard_size_in_key": not exact,
        "code_version": CODE_VERSION,
        "arms": list(ARMS),
        "base_arm": "keep",
        "table_sha256": verify_file(table_path, key=key)["sha256"],
        "dense_index": {"kind": params.dense.kind, **dense_recall_summary(table)},
        "embedding_cache": ({"texts_encoded": encoder.encoded_texts, "texts_read": encoder.cached_texts}
                            if isinstance(encoder, CachedEncoder) else None),
        "build_seconds": time.perf_counter() - run.started,
        "executor": getattr(executor, "name", "local"),
        "model_forward_seconds": forward_seconds_of(encoder) + forward_seconds_of(reranker) - run.forward_before,
        "counts": {
            "questions": int(len(table)),
            "questions_with_evidence": int(table["has_evidence"].sum()),
            "pools": int(sum(map(len, shards))),
            "units": int(sum(len(dataset.pools[p]) for s in shards for p in s)),
            "shards": len(shards),
            "shards_computed": run.computed,
            "shards_reused": run.reused,
        },
    }
    text = json.dumps(info, indent=2, sort_keys=True, default=str)
    atomic_write_verified(info_path, lambda p: p.write_text(text, encoding="utf-8"), key=key)
    frame, _ = read_verified_parquet(table_path, key)
    return OutcomeTable(frame, key, table_path, json.loads(text))
