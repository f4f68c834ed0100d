"""Ranges of every retrieval setting (``arms.*``), checked before any work and before anything
is logged.

Why a module of its own: ``harness.config.validation.validate`` checks a job's settings on every
table kind (a real dataset's retrieval table, the answer pair's base table, the synthetic table,
which would otherwise ignore ``arms.k=0`` yet log it as a parameter), and the encoder's sequence
length is bounded by the model's own number of positions, read from its ``config.json``. Nothing
here loads a model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from harness.errors import ConfigError

MAX_K = 1_000  # arms.k: ranks scored per arm
MAX_CANDIDATES = 10_000  # arms.candidates: first-stage candidates reranked per question
MAX_RRF_K = 100_000  # arms.rrf_k: the fusion constant of 1 / (rrf_k + rank)
MAX_QPP_K = 1_000
MAX_BATCH = 4_096  # arms.encoder.batch_size
MIN_SEQ = 8
MAX_SHARD = 100_000  # arms.shard_size: pools per cached shard
RERANKERS = ("maxsim", "cross_encoder")  # harness.retrieval.rerankers.make_reranker
MAX_K1 = 100.0  # arms.bm25.k1: term-frequency saturation (1.2-2.0 in practice)


def _integer(key: str, value: Any, low: int, high: int) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if not ok:
        raise ConfigError(key, f"must be an integer in [{low}, {high}], got {value!r}")
    return int(value)


def _number(key: str, value: Any, low: float, high: float) -> float:
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and low <= value <= high)
    if not ok:
        raise ConfigError(key, f"must be a finite number in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def looks_like_path(model: str) -> bool:
    """A model named by a folder (absolute, ``./``, ``../``, ``~``), not by a hub name."""
    return model.startswith(("/", "./", "../", "~")) or model in (".", "..")


def model_positions(folder: Path, key: str = "arms.encoder.model") -> int | None:
    """The model's number of positions (``max_position_embeddings`` of its ``config.json``, at
    the folder's top or in a module subfolder), or None when the folder does not say. A
    ``config.json`` that is no regular file (a FIFO would block) or above the size cap is refused
    naming ``key``, through the one file gate of ``harness.data.validate``."""
    from harness.data.validate import check_regular
    from harness.errors import DataError

    configs = [cfg for cfg in [folder / "config.json", *sorted(folder.glob("*/config.json"))]
               if cfg.exists() or cfg.is_symlink()]
    if not configs:  # no transformer inside: the encoder would fail (or guess) minutes later
        raise ConfigError(key, f"model folder {folder} holds no config.json (at its top or in a module subfolder): "
                               "not a Hugging Face / sentence-transformers model folder")
    for cfg in configs:
        try:
            check_regular(cfg, "model config file")
        except DataError as exc:
            raise ConfigError(key, exc.problem) from None
        try:
            body = json.loads(cfg.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(key, f"{cfg} is not readable JSON ({type(exc).__name__}: "
                                   f"{(str(exc).splitlines() or [''])[0][:120]})") from None
        if not isinstance(body, dict):
            raise ConfigError(key, f"{cfg} is not a JSON object")
        value = body.get("max_position_embeddings")
        if value is None:
            continue
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise ConfigError(key, f"{cfg}: max_position_embeddings must be a positive integer, got {value!r}")
        return value
    return None


def _model_folder(key: str, model: Any, expected: str) -> Path | None:
    """The local folder of a model named by ``key`` (None: a hub name not cached here, fetched
    later); a folder path that does not exist, or a name that cannot be a hub name, is refused."""
    from harness.retrieval.encoder import resolve_model_path

    if not isinstance(model, str) or not model.strip():
        raise ConfigError(key, f"expected {expected} or a hub name, got {model!r}")
    if looks_like_path(model) and not Path(model).expanduser().is_dir():
        what = "is a file" if Path(model).expanduser().exists() else "not found"
        raise ConfigError(key, f"model folder {what}: {model} (expected {expected}, or a hub name in the local cache)")
    folder = resolve_model_path(model)
    if folder is None and (model.count("/") > 1 or model.endswith("/")):
        raise ConfigError(key, f"model folder not found: {model} (not a folder here, and not a hub name: expected "
                               "name or org/name)")
    return folder


def check_reranker(rr: Mapping[str, Any]) -> None:
    """``reranker.*``: a known name; for the cross-encoder a model folder that exists, its batch
    size and a sequence length within the model's positions. Checked before the base table is
    built, so a missing folder is not found minutes into the build."""
    name = rr.get("name", "maxsim")
    if name not in RERANKERS:
        raise ConfigError("reranker.name", f"must be one of {', '.join(RERANKERS)}, got {name!r}")
    if name != "cross_encoder":
        return
    from harness.retrieval.rerankers import CROSS_ENCODER_DEFAULT

    _integer("reranker.batch_size", rr.get("batch_size", 32), 1, MAX_BATCH)
    model = rr.get("model", CROSS_ENCODER_DEFAULT)
    folder = _model_folder("reranker.model", model, "a sentence-transformers cross-encoder folder")
    positions = model_positions(folder, "reranker.model") if folder is not None else None
    length = rr.get("max_length", 512)
    high = positions if positions is not None else 100_000
    ok = isinstance(length, int) and not isinstance(length, bool) and MIN_SEQ <= length <= high
    if not ok:
        bound = f" (the model's {positions} positions)" if positions else ""
        raise ConfigError("reranker.max_length", f"must be an integer in [{MIN_SEQ}, {high}]{bound}, got {length!r}")


def check_encoder(enc: Mapping[str, Any]) -> None:
    """``arms.encoder``: batch size, a model folder that exists, a sequence length within the
    model's positions."""
    from harness.retrieval.encoder import PACKAGED_MINILM

    _integer("arms.encoder.batch_size", enc.get("batch_size", 64), 1, MAX_BATCH)
    model = enc.get("model", PACKAGED_MINILM)
    folder = _model_folder("arms.encoder.model", model, "a sentence-transformers folder, packaged-minilm")
    positions = model_positions(folder) if folder is not None else None
    high = positions if positions is not None else 100_000
    seq = enc.get("max_seq_length", 256)
    ok = isinstance(seq, int) and not isinstance(seq, bool) and MIN_SEQ <= seq <= high
    if not ok:
        bound = f"the model's {positions} positions (max_position_embeddings of {model})" if positions else f"{high}"
        raise ConfigError("arms.encoder.max_seq_length", f"must be an integer in [{MIN_SEQ}, {high}] (at most "
                                                         f"{bound}), got {seq!r}")


MAX_HNSW_M = 512
MAX_EF = 100_000


def check_dense_index(arms: Mapping[str, Any], candidates: int) -> None:
    """``arms.dense_index`` (exact | hnsw) and ``arms.hnsw.*`` (harness.retrieval.dense_index)."""
    from harness.retrieval.dense_index import DENSE_INDEXES, DenseIndexParams

    kind = arms.get("dense_index", "exact")
    if kind not in DENSE_INDEXES:
        raise ConfigError("arms.dense_index", f"must be one of {', '.join(DENSE_INDEXES)}, got {kind!r}")
    h = arms.get("hnsw") or {}
    if not isinstance(h, Mapping):
        raise ConfigError("arms.hnsw", f"expected a mapping (m, ef_construction, ef_search, depth, recall_sample), "
                                       f"got {h!r}")
    d = DenseIndexParams()
    unknown = sorted(str(k) for k in h if k not in ("m", "ef_construction", "ef_search", "depth", "recall_sample"))
    if unknown:
        raise ConfigError(f"arms.hnsw.{unknown[0]}", "unknown setting; expected m, ef_construction, ef_search, depth, "
                                                     "recall_sample")
    _integer("arms.hnsw.m", h.get("m", d.m), 2, MAX_HNSW_M)
    _integer("arms.hnsw.ef_construction", h.get("ef_construction", d.ef_construction), 1, MAX_EF)
    _integer("arms.hnsw.ef_search", h.get("ef_search", d.ef_search), 1, MAX_EF)
    low = candidates if isinstance(candidates, int) else 1
    _integer("arms.hnsw.depth", h.get("depth", d.depth), low, MAX_EF)  # the candidates come from it
    _integer("arms.hnsw.recall_sample", h.get("recall_sample", d.recall_sample), 1, MAX_EF)


def check_retrieval_settings(arms: Mapping[str, Any], *, synthetic: bool = False, synthetic_k: int = 10) -> None:
    """Every range of the retrieval settings, raising ConfigError naming ``arms.<key>`` and the
    bound. On the synthetic table (metrics fixed @``synthetic_k``, no retrieval) ``arms.k`` must
    be that k and the encoder is not looked up."""
    k = _integer("arms.k", arms.get("k", 10), 1, MAX_K)
    if synthetic and k != synthetic_k:
        raise ConfigError("arms.k", f"the synthetic table's metrics are @{synthetic_k} (it ranks nothing), got "
                                    f"{k}; drop arms.k or use a real dataset")
    candidates = arms.get("candidates", 30)
    if isinstance(candidates, int) and not isinstance(candidates, bool) and candidates < k:
        raise ConfigError("arms.candidates", f"got {candidates}, below arms.k={k}: the first stage must rank at least k "
                                             f"candidates (raise arms.candidates to {k} or more, or lower arms.k)")
    _integer("arms.candidates", candidates, k, MAX_CANDIDATES)
    _integer("arms.rrf_k", arms.get("rrf_k", 60), 1, MAX_RRF_K)  # the fusion constant: > 0
    _integer("arms.qpp_k", arms.get("qpp_k", 5), 1, MAX_QPP_K)
    _integer("arms.shard_size", arms.get("shard_size", 32), 1, MAX_SHARD)
    check_dense_index(arms, arms.get("candidates", 30))
    cache = arms.get("embedding_cache", True)
    if not isinstance(cache, bool):
        raise ConfigError("arms.embedding_cache", f"must be true or false, got {cache!r}")
    bm = arms.get("bm25") or {}
    if not isinstance(bm, Mapping):
        raise ConfigError("arms.bm25", f"expected a mapping with k1 and b, got {bm!r}")
    _number("arms.bm25.k1", bm.get("k1", 1.5), 0.0, MAX_K1)
    _number("arms.bm25.b", bm.get("b", 0.75), 0.0, 1.0)
    enc = arms.get("encoder") or {}
    if not isinstance(enc, Mapping):
        raise ConfigError("arms.encoder", f"expected a mapping (model, batch_size, max_seq_length), got {enc!r}")
    if synthetic:
        refuse_ignored_on_synthetic(arms)
    else:
        from harness.retrieval.precision import resolve_precision

        resolve_precision(arms.get("precision", "fp32"), "arms.precision")  # before any work, not at the encoder
        check_encoder(enc)


def synthetic_ignored_defaults() -> dict[str, Any]:
    """The retrieval settings the synthetic table never reads, with the value every shipped
    ``conf/arms/*.yaml`` and the code default give them (one source: the dataclasses)."""
    from harness.retrieval.arms import ArmParams
    from harness.retrieval.encoder import PACKAGED_MINILM

    p = ArmParams()
    return {"candidates": p.candidates, "rrf_k": p.rrf_k, "qpp_k": p.qpp_k, "shard_size": 32, "precision": "fp32",
            "bm25.k1": p.bm25.k1, "bm25.b": p.bm25.b, "encoder.model": PACKAGED_MINILM, "encoder.batch_size": 64,
            "encoder.max_seq_length": 256, "embedding_cache": True, "dense_index": p.dense.kind,
            "hnsw.m": p.dense.m, "hnsw.ef_construction": p.dense.ef_construction, "hnsw.ef_search": p.dense.ef_search,
            "hnsw.depth": p.dense.depth, "hnsw.recall_sample": p.dense.recall_sample}


def _dotted(mapping: Mapping[str, Any], dotted: str, default: Any) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def refuse_ignored_on_synthetic(arms: Mapping[str, Any]) -> None:
    """The synthetic table retrieves, fuses and encodes nothing: a retrieval setting changed from
    its default would be ignored yet logged as a run parameter, so it is refused naming the key
    (as the answer arms refuse a server's settings given to the in-process engine)."""
    for key, default in synthetic_ignored_defaults().items():
        value = _dotted(arms, key, default)
        if value != default:
            raise ConfigError(f"arms.{key}", f"is {value!r}, but the synthetic table retrieves nothing, so it would "
                                             f"be ignored yet logged (default {default!r}); drop it or use a real "
                                             "dataset")


def refuse_reranker_on_synthetic(rr: Mapping[str, Any]) -> None:
    """``reranker=...`` on the synthetic table (which reranks nothing): ignored yet logged, so
    refused naming the key; only the default ``maxsim`` with no settings passes."""
    name = rr.get("name", "maxsim")
    if name != "maxsim":
        raise ConfigError("reranker.name", f"is {name!r}, but the synthetic table reranks nothing, so the reranker "
                                           "would be ignored yet logged; drop reranker= or use a real dataset")
    extra = sorted(str(k) for k in rr if k != "name")
    if extra:
        raise ConfigError(f"reranker.{extra[0]}", "the synthetic table reranks nothing, so it would be ignored yet "
                                                  "logged; drop it or use a real dataset")


__all__ = ["check_retrieval_settings", "refuse_ignored_on_synthetic", "refuse_reranker_on_synthetic", "check_encoder", "check_reranker", "model_positions", "looks_like_path"]
