"""The OpenAI-compatible HTTP backend: any server with ``/v1/chat/completions`` and logprobs
(vLLM, llama.cpp server, Ollama, ...), standard library only."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Mapping, Sequence

from harness.generation.chat_response import parse_chat_completion
from harness.generation.errors import GenerationError
from harness.generation.generator import GenerationConfig, Generator, chat_request_body
from harness.generation.http_client import MAX_RESPONSE_BYTES, redact_url, request_json, split_credentials
from harness.generation.types import Generation


class OpenAICompatibleGenerator(Generator):
    """Any OpenAI-compatible server: ``POST {base_url}/v1/chat/completions`` with logprobs.

    ``base_url`` may end in ``/v1`` or not, and may hold ``user:password@`` (sent as Basic
    authorisation, never shown: ``base_url`` and every message hold the URL without it).
    ``model`` defaults to the first id of ``GET /v1/models``. The API key comes from ``api_key``
    or ``$OPENAI_API_KEY`` (sent as a Bearer token only when set; never shown). ``concurrency``
    requests run at once in ``generate_batch``. Bounds (``harness.generation.http_client``):
    ``timeout_s`` of wall time per request, ``deadline_s`` for all requests of this generator
    (None: no limit), ``max_response_bytes``, ``retries`` with backoff (``backoff_s``, doubling)
    for 429 and 5xx. Every answer is checked before it is returned
    (``harness.generation.chat_response``): a bad one is one line naming the server and field.
    """

    backend = "openai-http"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        config: GenerationConfig | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        deadline_s: float | None = None,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        concurrency: int = 1,
        extra_body: Mapping | None = None,
    ):
        super().__init__(config)
        clean, basic = split_credentials(str(base_url).strip())
        base = clean.rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise GenerationError(f"openai-http: base_url must start with http:// or https://, got {base!r}")
        self.base_url = base if base.endswith("/v1") else base + "/v1"
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._auth = f"Bearer {key}" if key else basic  # private: never in describe() or a message
        for name, value in (("timeout_s", timeout_s), ("deadline_s", deadline_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise GenerationError(f"openai-http: {name} must be a number of seconds > 0, got {value!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise GenerationError(f"openai-http: retries must be an integer >= 0, got {retries!r}")
        self.timeout_s = float(timeout_s)
        self.deadline_s = None if deadline_s is None else float(deadline_s)
        self._deadline_at = None if deadline_s is None else time.monotonic() + float(deadline_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_response_bytes = int(max_response_bytes)
        self.concurrency = max(1, int(concurrency))
        self.extra_body = dict(extra_body or {})
        self.source = f"openai-http server {self.base_url}"
        t0 = time.perf_counter()
        self.model = model if model else self.list_models()[0]
        self.load_ms = (time.perf_counter() - t0) * 1000.0

    def _request(self, path: str, body: Mapping | None = None) -> Any:
        headers = {"Authorization": self._auth} if self._auth else {}
        return request_json(self.base_url + path, body, headers=headers, source=self.source, timeout_s=self.timeout_s,
                            deadline_at=self._deadline_at, max_bytes=self.max_response_bytes, retries=self.retries,
                            backoff_s=self.backoff_s)

    def list_models(self) -> list[str]:
        data = self._request("/models")
        rows = data.get("data") if isinstance(data, Mapping) else None
        ids = [m.get("id") for m in (rows or []) if isinstance(m, Mapping) and m.get("id")]
        if not ids:
            raise GenerationError(f"{self.source}: /models lists no model (field data[].id); pass model=")
        return ids

    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        body = {"model": self.model, **chat_request_body(self, messages, max_tokens), **self.extra_body}
        t0 = time.perf_counter()
        resp = self._request("/chat/completions", body)
        g = parse_chat_completion(resp, backend=self.backend, model=self.model, source=self.source,
                                  require_content=True, top_k=self.config.top_k)
        if g.model_ms is None:  # no server timing: the round trip is the model time we know
            g = replace(g, model_ms=(time.perf_counter() - t0) * 1000.0)
        return g

    def generate_batch(self, prompts: Sequence[Any], *, max_tokens: int | None = None) -> list[Generation]:
        if self.concurrency == 1 or len(prompts) < 2:
            return super().generate_batch(prompts, max_tokens=max_tokens)
        with ThreadPoolExecutor(self.concurrency) as ex:
            return list(ex.map(lambda p: self.generate(p, max_tokens=max_tokens), prompts))

    def describe(self) -> dict:
        return {**super().describe(), "base_url": redact_url(self.base_url)}
