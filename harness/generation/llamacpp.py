"""The llama.cpp backend: llama.cpp in-process through the prebuilt ``xllamacpp`` wheel, on a
GGUF file (the offline default; why: ``harness.generation.backends``), and every engine setting
that can change its text (``llamacpp_settings``)."""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.generation.chat_response import parse_chat_completion
from harness.generation.errors import BackendUnavailable, GenerationError
from harness.generation.generator import (
    GenerationConfig,
    Generator,
    chat_request_body,
    check_messages,
    package_version,
    packaged_model_path,
)
from harness.generation.options import YES_NO, OptionScores, check_options, option_logprobs
from harness.generation.types import Generation

FULL_DISTRIBUTION = 1 << 20  # more alternatives than any vocabulary: llama.cpp then returns them all
# first ask for this many: llama.cpp's alternatives are log-softmax over the whole vocabulary
# whatever their number (measured: equal to the last bit), so an option among them is exact;
# the whole vocabulary (49,152 entries for SmolLM2) cost about 1.2 s a question in conversion
OPTION_TOP_N = 256

LLAMACPP_THREADS = 1  # the default: answers do not depend on the machine's core count
LLAMACPP_N_CTX = 8192
LLAMACPP_N_BATCH = 2048  # llama.cpp's own defaults, pinned here so an engine upgrade that
LLAMACPP_N_UBATCH = 512  # changes them cannot change the prompt's arithmetic unnoticed
LLAMACPP_FLASH_ATTN = -1  # LLAMA_FLASH_ATTN_TYPE_AUTO, resolved by the (keyed) engine version


def llamacpp_settings(*, n_threads: int = LLAMACPP_THREADS, n_ctx: int = LLAMACPP_N_CTX, n_parallel: int = 1,
                      cache_prompt: bool = False) -> dict:
    """Every llama.cpp setting that can change the generated text, without loading the engine:
    what ``LlamaCppGenerator.describe()`` reports and what the answer arms put into their cache
    key (one function, so the two cannot drift apart). Thread count matters: 1 and 2 threads
    gave different greedy text on 5 of 10 QASPER RAG prompts."""
    return {"engine": "xllamacpp", "engine_version": package_version("xllamacpp"), "n_threads": int(n_threads),
            "n_ctx": int(n_ctx), "n_batch": LLAMACPP_N_BATCH, "n_ubatch": LLAMACPP_N_UBATCH,
            "flash_attn_type": LLAMACPP_FLASH_ATTN, "n_parallel": int(n_parallel), "cache_prompt": bool(cache_prompt)}


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
        body = chat_request_body(self, messages, max_tokens)
        body["cache_prompt"] = self.cache_prompt
        resp = self._server.handle_chat_completions(body)
        return parse_chat_completion(resp, backend=self.backend, model=self.model, top_k=self.config.top_k)

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
