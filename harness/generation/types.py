"""Plain data the generator backends return (no heavy imports here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class TopLogprob:
    """One alternative at a generation step: its text piece and natural-log probability."""

    token: str
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its text piece, log-probability, and the top-k alternatives.

    ``top`` holds the k most likely tokens at that step under the model's full (unmodified,
    temperature-1) distribution, most likely first; under greedy decoding the chosen token is
    ``top[0]``. ``entropy`` is the exact full-vocabulary entropy (nats) where the backend sees
    the whole distribution (transformers, mlx-lm), else ``None`` (llama.cpp, HTTP servers).
    """

    token: str
    logprob: float
    top: tuple[TopLogprob, ...] = ()
    entropy: float | None = None


@dataclass(frozen=True)
class Generation:
    """What every backend returns for one prompt.

    ``tokens`` are the answer's tokens: the end-of-sequence token that stopped generation is
    not among them (nor in ``text``), but it is counted in ``output_tokens``, as servers bill
    it. ``ms`` is the wall time of the whole ``generate`` call as the harness sees it (prompt
    templating, tokenising, the model, the HTTP round trip, parsing); ``model_ms`` is the time
    the engine itself reports or the time spent inside the model call only (``None`` if
    unknown).
    """

    text: str
    tokens: tuple[TokenLogprob, ...]
    prompt_tokens: int
    output_tokens: int
    ms: float
    model_ms: float | None = None
    finish_reason: str = ""  # "stop" (end-of-sequence) | "length" (max_tokens reached)
    backend: str = ""
    model: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def logprobs(self) -> list[float]:
        return [t.logprob for t in self.tokens]

    @property
    def token_texts(self) -> list[str]:
        return [t.token for t in self.tokens]

    def to_dict(self) -> dict:
        return asdict(self)
