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
from harness.generation.backends import (
    BackendUnavailable,
    GenerationConfig,
    GenerationError,
    Generator,
    LlamaCppGenerator,
    MLXGenerator,
    OpenAICompatibleGenerator,
    TransformersGenerator,
    cached_hf_folder,
    gguf_to_hf_folder,
    load_generator,
    packaged_model_path,
)
from harness.generation.prompts import (
    ABSTAIN,
    MAX_EVIDENCE_CHARS,
    MAX_OUTPUT_TOKENS,
    EvidenceUnit,
    Prompt,
    no_retrieval_messages,
    rag_messages,
)
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
