"""Rerankers: MaxSim late interaction (default) and a sentence-transformers CrossEncoder.

Both score (question, unit) pairs given by index into a shard's questions and units; the arm
layer caches scores per pair so the extra arm only pays for pairs the base arm did not score.

MaxSim (docs/metrics.md §2): score = sum over question tokens of the max cosine to the unit's
tokens, over the encoder's L2-normalised token embeddings with [CLS]/[SEP]/padding dropped
(by token id, see :mod:`harness.retrieval.encoder`).
Choice where docs/metrics.md is silent: a unit (or question) with no tokens scores 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from harness import progress
from harness.errors import ConfigError
from harness.retrieval.encoder import model_identity, resolve_model_path
from harness.retrieval.precision import autocast, resolve_device, resolve_precision

CROSS_ENCODER_DEFAULT = "cross-encoder/ms-marco-MiniLM-L6-v2"


@dataclass
class RerankInputs:
    """What a reranker may read for one shard: texts and token embeddings, by index."""

    question_texts: Sequence[str]
    question_tokens: Sequence[np.ndarray]
    unit_texts: Sequence[str]
    unit_tokens: Sequence[np.ndarray]


def maxsim(q_tokens: np.ndarray, u_tokens: np.ndarray) -> float:
    """Sum over question tokens of the max dot product with the unit's tokens (0 if either empty)."""
    if len(q_tokens) == 0 or len(u_tokens) == 0:
        return 0.0
    return float((q_tokens @ u_tokens.T).max(axis=1).sum())


@dataclass
class MaxSimReranker:
    """Late interaction over the dense encoder's token embeddings: no extra model."""

    encoder_identity: dict = field(default_factory=dict)
    forward_seconds: float = field(default=0.0, init=False)

    def identity(self) -> dict:
        return {"name": "maxsim", "token_embeddings_of": self.encoder_identity}

    def score(self, inputs: RerankInputs, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
        out = np.zeros(len(pairs), dtype=np.float64)
        by_question: dict[int, list[int]] = {}
        for p, (qi, _) in enumerate(pairs):
            by_question.setdefault(qi, []).append(p)
        for qi, ps in by_question.items():
            q = inputs.question_tokens[qi]
            units = [inputs.unit_tokens[pairs[p][1]] for p in ps]
            lens = np.array([len(u) for u in units])
            if len(q) == 0 or lens.sum() == 0:
                continue
            sims = q @ np.concatenate([u for u in units if len(u)], axis=0).T  # (m, total)
            starts = np.concatenate([[0], np.cumsum(lens[lens > 0])[:-1]])
            per_unit = np.maximum.reduceat(sims, starts, axis=1).sum(axis=0)
            out[np.asarray(ps)[lens > 0]] = per_unit
        return out


@dataclass
class CrossEncoderReranker:
    """sentence-transformers CrossEncoder by local path or hub name (loaded lazily)."""

    model: str = CROSS_ENCODER_DEFAULT
    batch_size: int = 32
    max_length: int = 512
    precision: str = "fp32"
    device: str = "cpu"  # cpu (default) | cuda | mps | auto (precision.resolve_device)
    forward_seconds: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.precision = resolve_precision(self.precision, "reranker.precision")
        self.device = resolve_device(self.device, "device")
        self._ce = None

    def identity(self) -> dict:
        ident = {"name": "cross_encoder", **model_identity(self.model), "max_length": int(self.max_length)}
        if self.device != "cpu":
            ident["device"] = self.device
        return ident

    def __getstate__(self) -> dict:
        """Pickled without the loaded model (a Ray worker loads its own)."""
        return {**self.__dict__, "_ce": None}

    def _loaded(self):
        if self._ce is None:
            from sentence_transformers import CrossEncoder

            path = resolve_model_path(self.model)
            self._ce = CrossEncoder(str(path) if path else self.model, device=self.device, max_length=int(self.max_length))
            if hasattr(self._ce, "register_forward_hook"):  # a module (sentence-transformers >= 5)
                self._ce.register_forward_hook(_pairs_scored)
        return self._ce

    def score(self, inputs: RerankInputs, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        ce = self._loaded()
        progress.current("pairs").start_timing()  # loading the model is not the stage's rate
        texts = [(inputs.question_texts[q], inputs.unit_texts[u]) for q, u in pairs]
        t0 = time.perf_counter()
        with autocast(self.precision, self.device):
            s = ce.predict(texts, batch_size=int(self.batch_size), show_progress_bar=False, convert_to_numpy=True)
        self.forward_seconds += time.perf_counter() - t0
        return np.asarray(s, dtype=np.float64).reshape(len(pairs))


def _pairs_scored(module, args, output) -> None:
    """After each forward pass of the cross-encoder: its pairs counted in the current reranking
    stage (``harness.progress``), so one call over a block of questions shows its progress.
    Reads the batch's size only; the scores are untouched."""
    try:
        rows = int(args[0]["input_ids"].shape[0])
    except (IndexError, KeyError, TypeError, AttributeError):
        return
    progress.current("pairs").tick(0, work=rows)


def make_reranker(cfg: Mapping, encoder_identity: dict, precision: str, device: str = "cpu"):
    """Reranker from ``conf/reranker/*.yaml``: ``name: maxsim`` or ``name: cross_encoder``
    (on ``device``; MaxSim works on the encoder's token embeddings, on the encoder's device)."""
    name = str(cfg.get("name", "maxsim"))
    if name == "maxsim":
        return MaxSimReranker(encoder_identity=encoder_identity)
    if name == "cross_encoder":
        return CrossEncoderReranker(
            model=str(cfg.get("model", CROSS_ENCODER_DEFAULT)),
            batch_size=int(cfg.get("batch_size", 32)),
            max_length=int(cfg.get("max_length", 512)),
            precision=str(cfg.get("precision", precision)),
            device=device,
        )
    raise ConfigError("reranker.name", f"must be 'maxsim' or 'cross_encoder', got {name!r}")
