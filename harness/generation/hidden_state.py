"""Feature providers read from models' internal states: seed 002's Internal Prober (frozen) and a
query-encoder stand-in for its BERT-based family.

Why: seed 002's strongest affordable predictor reads the LLM's final hidden state for the
question alone and for the question with its retrieved passages, one forward pass each, no
decoding, and learns a linear map from the two states to the RAG gain. The harness records
those states as features (``hidden_state`` block) so that any learned router can read them
(``policy=probe_ridge``), and records the packaged MiniLM's question embedding
(``query_embedding`` block, ``policy=query_encoder_ridge``) as the stand-in for seed 002's
Bert-Ret family (a fine-tuned ModernBERT over the question and passages), which needs training
a 400M-parameter encoder the harness does not do.

Choices where the paper leaves freedom or where this harness differs (docs/metrics.md §13):

- The model is the answer arms' model (the packaged SmolLM2-135M-Instruct GGUF, dequantised to
  float32 by transformers), the prompts are the answer arms' own prompts (``no_retrieval`` and
  the RAG arm named by ``retrieval`` with its ``k``), with the chat template's generation
  prompt: the states the model holds just before it would answer.
- The state is the base model's ``last_hidden_state`` (after the final RMSNorm: what the LM
  head reads) at the prompt's last token. The paper trains LoRA adapters on all layers and
  linear heads for three quality measures; here the model is frozen and the linear map is the
  router's own (ridge with its penalty chosen by cross-validation inside the training
  questions), so this is the classical linear probe the paper contrasts itself with.
- One prompt per forward pass (no padding: a padded batch computes other floats), torch on
  ``n_threads`` threads (1 by default; part of the key, since another count can change the last
  bits). Across CPUs (AVX2 / AVX-512) the states agree to float32 rounding, not bit for bit.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from harness.arm_blocks import BASE, ArmBlock
from harness.errors import ConfigError, HarnessError
from harness.generation.arms import (
    PROMPT_VERSION,
    NoRetrievalArm,
    RagBM25Arm,
    RagHybridArm,
    RagKeepArm,
    engine_identity,
    model_identity,
    torch_threads,
)
from harness.generation.generator import package_version
from harness.generation.transformers_backend import TransformersGenerator
from harness.retrieval.encoder import DenseEncoder
from harness.retrieval.encoder import model_identity as encoder_identity
from harness.retrieval.feature_names import FEATURE_SETS

RETRIEVALS = ("keep", "hybrid", "bm25")  # the retrieval arms a RAG answer arm reads
MEMORY_PREFIX = "probe_mem_"
RAG_PREFIX = "probe_rag_"
QUERY_PREFIX = "qemb_"


def state_features(prefix: str, vector: np.ndarray) -> dict[str, float]:
    """``{prefix + "0000": v0, ...}``: zero-padded indices, so name order is index order."""
    return {f"{prefix}{i:04d}": float(v) for i, v in enumerate(np.asarray(vector, dtype=np.float64).reshape(-1))}


def _questions(block: ArmBlock, dataset: Any) -> dict:
    if dataset is None or not getattr(dataset, "questions", None):
        raise HarnessError(f"arm block {block.name!r} reads the dataset's question texts: the synthetic table has "
                           "none (use a real dataset, e.g. dataset=qasper_yesno)")
    return {q.qid: q for q in dataset.questions}


def _question(questions: dict, qid: Any, block: ArmBlock, dataset: Any):
    q = questions.get(str(qid))
    if q is None:
        raise HarnessError(f"arm block {block.name!r}: question {qid!r} of the table is not in dataset "
                           f"{getattr(dataset, 'name', '?')!r}")
    return q


class HiddenStateFeatures(ArmBlock):
    """The generator's final hidden state for the memory prompt (``feat.probe_mem_NNNN``) and,
    unless ``rag`` is false, for the RAG prompt over ``retrieval``'s top ``k`` units
    (``feat.probe_rag_NNNN``); ``feat.probe_ms``: the forward passes' wall time (the prober's
    cost, measured, not a routing feature of any shipped policy)."""

    name = "hidden_state"
    arms = ()
    requires = (BASE,)
    version = "1"
    chunk_size = 32
    feature_sets: ClassVar[dict[str, tuple[str, ...]]] = {
        name: FEATURE_SETS[name] for name in ("probe_memory", "probe_rag", "probe")}

    def __init__(self, generator: str = "default", retrieval: str = "bm25", k: int = 5, n_threads: int = 1,
                 rag: bool = True):
        spec = str(generator)
        if spec.startswith(("http://", "https://")) or spec.startswith("mlx"):
            raise ConfigError("generator", f"{spec!r}: the hidden state is read in-process with transformers "
                                           "(default, a .gguf file or transformers:PATH), not from a server or mlx")
        if retrieval not in RETRIEVALS:
            raise ConfigError("retrieval", f"expected one of {list(RETRIEVALS)}, got {retrieval!r}")
        for key, value, high in (("k", k, 10), ("n_threads", n_threads, 512)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise ConfigError(key, f"expected an integer in [1, {high}], got {value!r}")
        if not isinstance(rag, bool):
            raise ConfigError("rag", f"expected true or false, got {rag!r}")
        self.generator = spec
        self.rag = rag  # false: the memory prompt's state only (one short forward pass per question)
        self.retrieval = retrieval
        self.k = k
        self.n_threads = n_threads
        self._built_with: dict | None = None

    def _model_path(self) -> str | None:
        name, _, arg = self.generator.partition(":")
        if name in ("default", "llamacpp", "llama.cpp", "transformers"):
            return arg or None
        return self.generator  # a bare .gguf path

    def identity(self) -> dict:
        path = self._model_path()
        # the weights' digests (a GGUF's, or every file of a model folder), the engine that reads
        # them (torch, transformers, and gguf, which dequantises a GGUF) and the prompts
        return {**super().identity(), "model": model_identity(self.generator),
                "engine": {**engine_identity(f"transformers:{path}" if path else "transformers", self.n_threads),
                           "transformers_version": package_version("transformers"),
                           "gguf_version": package_version("gguf")},
                "prompt_version": PROMPT_VERSION, "state": "last_hidden_state at the prompt's last token"}

    def built_with(self) -> dict | None:
        return self._built_with

    def compute(self, rows: pd.DataFrame, dataset: Any) -> pd.DataFrame:
        questions = _questions(self, dataset)
        units = {u.unit_id: u for doc in dataset.documents.values() for u in doc}
        ranking = f"{self.retrieval}.top10"
        if ranking not in rows.columns:
            raise HarnessError(f"arm block {self.name!r}: the base table has no {ranking!r} column")
        # the answer arms' own prompt builders, so the probe reads exactly the prompts they answer
        memory_arm = NoRetrievalArm()
        rag_arm = {arm.retrieval: arm for arm in (RagKeepArm, RagHybridArm, RagBM25Arm)}[self.retrieval](k=self.k)
        out: list[dict] = []
        with torch_threads(self.n_threads):
            gen = TransformersGenerator(self._model_path())
            try:
                self._built_with = gen.describe()
                for _, row in rows.iterrows():
                    q = _question(questions, row["qid"], self, dataset)
                    boolean = q.answer_type == "yes_no"
                    t0 = time.perf_counter()
                    mem = gen.final_hidden_state(list(memory_arm.prompt(q, row, units, boolean).messages))
                    rec = {"qid": q.qid}
                    rec.update({"feat." + k: v for k, v in state_features(MEMORY_PREFIX, mem).items()})
                    if self.rag:
                        state = gen.final_hidden_state(list(rag_arm.prompt(q, row, units, boolean).messages))
                        rec.update({"feat." + k: v for k, v in state_features(RAG_PREFIX, state).items()})
                    rec["feat.probe_ms"] = (time.perf_counter() - t0) * 1000.0
                    out.append(rec)
            finally:
                gen.close()
        return pd.DataFrame(out)


class QueryEmbeddingFeatures(ArmBlock):
    """The question's sentence embedding by a sentence-transformers encoder (default: the packaged
    all-MiniLM-L6-v2, unit length), ``feat.qemb_NNNN``: what a query-only learned router reads
    when it stands in for a fine-tuned BERT-style predictor."""

    name = "query_embedding"
    arms = ()
    requires = (BASE,)
    version = "1"
    chunk_size = 512
    feature_sets: ClassVar[dict[str, tuple[str, ...]]] = {"query_embedding": FEATURE_SETS["query_embedding"]}

    def __init__(self, model: str = "packaged-minilm", max_seq_length: int = 256):
        if isinstance(max_seq_length, bool) or not isinstance(max_seq_length, int) or not 8 <= max_seq_length <= 8192:
            raise ConfigError("max_seq_length", f"expected an integer in [8, 8192], got {max_seq_length!r}")
        self.model = str(model)
        self.max_seq_length = max_seq_length

    def identity(self) -> dict:
        return {**super().identity(), "encoder": encoder_identity(self.model)}

    def compute(self, rows: pd.DataFrame, dataset: Any) -> pd.DataFrame:
        questions = _questions(self, dataset)
        texts = [_question(questions, qid, self, dataset).text for qid in rows["qid"]]
        # the encoder batches texts of equal token length only, so a vector does not depend on its batch
        encoded = DenseEncoder(model=self.model, max_seq_length=self.max_seq_length).encode(texts)
        out = [{"qid": str(qid), **{"feat." + k: v for k, v in state_features(QUERY_PREFIX, vec).items()}}
               for qid, vec in zip(rows["qid"], encoded.vectors)]
        return pd.DataFrame(out)
