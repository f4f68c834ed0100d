"""Answer generation for answer-level routing: backends, prompts, answer metrics, uncertainty.

Importing this package is cheap: engines (xllamacpp, torch, mlx) load only when a backend is
built. See ``docs/generation.md``.
"""

from harness.generation.answers import (
    AnswerScore,
    exact_match,
    is_abstention,
    normalize_answer,
    quality_gain,
    score_answer,
    token_f1,
    utility_class,
    yes_no_label,
)
from harness.generation.backends import load_generator
from harness.generation.errors import BackendUnavailable, GenerationError
from harness.generation.generator import GenerationConfig, Generator, packaged_model_path
from harness.generation.llamacpp import LlamaCppGenerator
from harness.generation.mlx_backend import MLXGenerator, cached_hf_folder, gguf_to_hf_folder
from harness.generation.openai_http import OpenAICompatibleGenerator
from harness.generation.prompts import (
    ABSTAIN,
    MAX_EVIDENCE_CHARS,
    MAX_OUTPUT_TOKENS,
    EvidenceUnit,
    Prompt,
    no_retrieval_messages,
    rag_messages,
)
from harness.generation.transformers_backend import TransformersGenerator
from harness.generation.types import Generation, TokenLogprob, TopLogprob
from harness.generation.uncertainty import UncertaintyFeatures, topk_entropy, uncertainty_features

__all__ = [
    "ABSTAIN", "MAX_EVIDENCE_CHARS", "MAX_OUTPUT_TOKENS", "AnswerScore", "BackendUnavailable",
    "EvidenceUnit", "Generation", "GenerationConfig", "GenerationError", "Generator",
    "LlamaCppGenerator", "MLXGenerator", "OpenAICompatibleGenerator", "Prompt", "TokenLogprob",
    "TopLogprob", "TransformersGenerator", "UncertaintyFeatures", "cached_hf_folder",
    "exact_match", "gguf_to_hf_folder", "is_abstention", "load_generator", "no_retrieval_messages",
    "normalize_answer", "packaged_model_path", "quality_gain", "rag_messages", "score_answer",
    "token_f1", "topk_entropy", "uncertainty_features", "utility_class", "yes_no_label",
]
