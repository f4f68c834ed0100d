"""Server answers are checked before anything is cached (a fake OpenAI-compatible server on
127.0.0.1 that each test starts): token counts present and >= 0, logprobs finite and <= 0, text
present, a size cap, a wall-time limit per request and a total deadline, retries with backoff
for 429/5xx; each failure is one line naming the server and the field; credentials in the URL
or the API key are never shown, logged or keyed."""

from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from harness.arm_blocks.build import build_block
from harness.errors import HarnessError
from harness.generation import GenerationError, OpenAICompatibleGenerator, no_retrieval_messages
from harness.generation.arms import NoRetrievalArm
from harness.generation.http_client import redact_url
from harness.secrets import redact_secrets

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "data" / "qasper-fixture-v0.3.json"
PROMPT = no_retrieval_messages("Is Paris in France?", boolean=True)
SECRET = "s3cr3t-pw"


def good_answer(**change) -> dict:
    body = {
        "choices": [{"message": {"role": "assistant", "content": "Yes."}, "finish_reason": "stop",
                     "logprobs": {"content": [
                         {"token": "Yes", "logprob": -0.1, "top_logprobs": [{"token": "Yes", "logprob": -0.1},
                                                                             {"token": "No", "logprob": -2.4}]},
                         {"token": ".", "logprob": -0.01, "top_logprobs": [{"token": ".", "logprob": -0.01}]}]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 3},
    }
    for path, value in change.items():  # "usage.prompt_tokens" style paths; None deletes
        *parents, last = path.split(".")
        node = body
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is None:
            del node[int(last) if last.isdigit() else last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return body


class FakeServer:
    """A loopback server answering from a script of (status, body) steps; the last step
    repeats. A step may be "stall" (no answer until the test ends) or "trickle" (headers, then
    one byte at a time, never finishing). It records every request's path and headers."""

    def __init__(self, steps):
        self.steps, self.requests, self.release = list(steps), [], threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                server.requests.append((self.path, dict(self.headers)))
                step = server.steps.pop(0) if len(server.steps) > 1 else server.steps[0]
                try:
                    if step == "stall":
                        server.release.wait()
                        return
                    if step == "trickle":
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", "100000")
                        self.end_headers()
                        while not server.release.wait(0.05):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        return
                    status, body = step
                    data = body if isinstance(body, bytes) else json.dumps(body).encode()
                    if status == "chunked":  # no Content-Length: the size is known only by reading
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Transfer-Encoding", "chunked")
                        self.end_headers()
                        for i in range(0, len(data), 65536):
                            part = data[i:i + 65536]
                            self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        self.wfile.write(b"0\r\n\r\n")
                        return
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = _answer

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def _gen(server, **kw) -> OpenAICompatibleGenerator:
    kw.setdefault("backoff_s", 0.01)
    return OpenAICompatibleGenerator(f"http://alice:{SECRET}@127.0.0.1:{server.port}", model="m", **kw)


def _refused(server_steps, match: str, **kw) -> str:
    with FakeServer(server_steps) as srv:
        with pytest.raises(GenerationError, match=match) as info:
            _gen(srv, **kw).generate(PROMPT)
    msg = str(info.value)
    assert "\n" not in msg and SECRET not in msg and "alice" not in msg
    assert f"openai-http server http://127.0.0.1:{srv.port}/v1" in msg  # names the server
    return msg


def test_a_good_answer_passes_and_credentials_go_only_into_the_header():
    with FakeServer([(200, good_answer())]) as srv:
        gen = _gen(srv)
        g = gen.generate(PROMPT)
        assert (g.text, g.prompt_tokens, g.output_tokens, g.logprobs) == ("Yes.", 20, 3, [-0.1, -0.01])
        _, headers = srv.requests[0]
        assert headers["Authorization"] == "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
        assert SECRET not in json.dumps(gen.describe()) and SECRET not in gen.base_url
    assert redact_url(f"https://alice:{SECRET}@example.org:8443/v1") == "https://example.org:8443/v1"


def test_an_api_key_is_sent_and_never_described(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    with FakeServer([(200, good_answer())]) as srv:
        gen = OpenAICompatibleGenerator(srv.url, model="m")
        gen.generate(PROMPT)
        assert srv.requests[0][1]["Authorization"] == "Bearer sk-never-shown"
        assert "sk-never-shown" not in json.dumps(gen.describe()) + repr(vars(gen).get("base_url"))


@pytest.mark.parametrize("change, field", [
    ({"usage": None}, "answer field usage is missing"),
    ({"usage.prompt_tokens": None}, r"usage\.prompt_tokens is missing"),
    ({"usage.prompt_tokens": -1}, r"usage\.prompt_tokens is -1"),
    ({"usage.completion_tokens": -5}, r"usage\.completion_tokens is -5"),
    ({"usage.completion_tokens": 2.5}, r"usage\.completion_tokens is 2\.5"),
    ({"usage.prompt_tokens": "20"}, r"usage\.prompt_tokens is \"20\""),
    ({"choices.0.logprobs.content.0.logprob": 3.2}, r"content\[0\]\.logprob is 3\.2"),
    ({"choices.0.logprobs.content.1.logprob": float("nan")}, r"content\[1\]\.logprob is nan"),
    ({"choices.0.logprobs.content.0.top_logprobs.1.logprob": float("-inf")}, r"top_logprobs\[1\]\.logprob is -inf"),
    ({"choices.0.logprobs.content.0.logprob": None}, r"content\[0\]\.logprob is null"),
    ({"choices.0.message.content": ""}, r"message\.content is empty"),
    ({"choices.0.message.content": "  \n"}, r"message\.content is empty"),
    ({"choices.0.message.content": ["Yes"]}, r"message\.content is a list"),
    ({"choices.0.logprobs": None}, r"no logprobs \(field choices\[0\]\.logprobs\.content"),
    ({"choices": []}, r"choices\[0\]\.message is missing"),
])
def test_a_bad_answer_is_one_line_naming_server_and_field(change, field):
    _refused([(200, good_answer(**change))], field)


def test_an_answer_over_the_size_cap_is_refused():
    big = good_answer(**{"choices.0.message.content": "Yes " * 8_000_000})  # about 32 MB
    _refused([(200, big)], r"over the cap of 8,388,608 bytes \(max_response_bytes\)")
    _refused([(200, good_answer())], r"384 bytes, over the cap of 100 bytes", max_response_bytes=100)
    _refused([("chunked", big)], r"the answer is over the cap of 8,388,608 bytes")
    with FakeServer([("chunked", good_answer())]) as srv:  # under the cap, chunked: read whole
        assert _gen(srv).generate(PROMPT).text == "Yes."


def test_a_stalled_or_trickling_server_ends_at_timeout_s_and_the_total_deadline():
    _refused(["stall"], r"no answer within timeout_s", timeout_s=0.5)
    _refused(["trickle"], r"did not finish within timeout_s", timeout_s=0.5)
    _refused(["stall"], r"no answer within the total deadline \(deadline_s\)", timeout_s=60, deadline_s=0.5)


def test_5xx_is_retried_with_backoff_and_4xx_is_not():
    with FakeServer([(503, b"busy"), (502, b"bad gateway"), (200, good_answer())]) as srv:
        assert _gen(srv, retries=3).generate(PROMPT).text == "Yes."
        assert len(srv.requests) == 3
    msg = _refused([(500, b"boom\ntrace line")], r"HTTP 500 \(after 3 attempts\): boom trace line", retries=2)
    assert "\n" not in msg
    with FakeServer([(400, b"bad request")]) as srv:
        with pytest.raises(GenerationError, match="HTTP 400: bad request"):
            _gen(srv, retries=3).generate(PROMPT)
        assert len(srv.requests) == 1


def test_bad_bounds_are_refused():
    for kw, match in (({"timeout_s": 0}, "timeout_s"), ({"deadline_s": -1}, "deadline_s"), ({"retries": -1}, "retries")):
        with pytest.raises(GenerationError, match=match):
            OpenAICompatibleGenerator("http://127.0.0.1:9", model="m", **kw)
        with pytest.raises(ValueError, match=match):
            NoRetrievalArm(generator="http://127.0.0.1:9", **kw)


def _dataset():
    from harness.data import load_dataset

    return load_dataset({"name": "qasper", "loader": "qasper", "path": str(FIXTURE)})


def test_a_bad_answer_caches_nothing_and_a_good_one_caches_no_secret(tmp_path):
    dataset = _dataset()
    rows = pd.DataFrame({"qid": sorted(q.qid for q in dataset.questions)})
    with FakeServer([(200, good_answer()), (200, good_answer()), (200, good_answer(**{"usage": None}))]) as srv:
        arm = NoRetrievalArm(generator=f"http://alice:{SECRET}@127.0.0.1:{srv.port}", model="m", retries=0)
        with pytest.raises(HarnessError, match="usage is missing") as info:
            build_block(arm, rows, dataset, base_key="b", required_keys={"base": "b"}, cache_dir=tmp_path / "blocks")
        assert SECRET not in str(info.value)
    assert not list((tmp_path / "blocks").rglob("*.parquet"))  # nothing half-written
    with FakeServer([(200, good_answer())]) as srv:
        url = f"http://alice:{SECRET}@127.0.0.1:{srv.port}"
        frame, build = build_block(NoRetrievalArm(generator=url, model="m"), rows, dataset, base_key="b",
                                   required_keys={"base": "b"}, cache_dir=tmp_path / "blocks")
        # the bounds are not what is answered: another timeout_s reads the same cache
        _, again = build_block(NoRetrievalArm(generator=url, model="m", timeout_s=5.0, retries=0), rows, dataset,
                               base_key="b", required_keys={"base": "b"}, cache_dir=tmp_path / "blocks")
    assert len(frame) == len(rows) and set(frame["no_retrieval.cost.prompt_tokens"]) == {20.0}
    assert again.key == build.key and again.chunks_computed == 0
    for f in (tmp_path / "blocks").rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes() and b"alice" not in f.read_bytes(), f


def test_run_parameters_and_config_artifact_hold_no_credentials():
    plain = {"arms": {"blocks": [{"name": "no_retrieval", "generator": f"http://alice:{SECRET}@10.0.0.2:8080/v1"}]},
             "tracking": {"uri": f"https://bob:{SECRET}@mlflow.example:5000"}, "cost": {"c": 0.02}}
    from harness.tracking.naming import flatten_params

    shown = json.dumps(flatten_params(redact_secrets(plain)))
    assert SECRET not in shown and "alice" not in shown and "http://10.0.0.2:8080/v1" in shown
    assert redact_secrets(plain)["cost"] == {"c": 0.02}


@pytest.mark.slow
def test_the_command_line_shows_one_line_and_no_secret(tmp_path):
    """``table build`` against a server that answers without usage: exit 2, one line on stderr
    naming the server and field, the password nowhere in the output, no answer cached."""
    with FakeServer([(200, good_answer(**{"usage": None}))]) as srv:
        url = f"http://alice:{SECRET}@127.0.0.1:{srv.port}"
        env = {**os.environ, "HARNESS_CACHE_DIR": str(tmp_path / "cache"),
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        cmd = [sys.executable, "-m", "harness", "table", "build", "dataset=qasper", f"dataset.path={FIXTURE}",
               "arms.base=keep", "arms.extra=no_retrieval", "arms.metric=correct", "reranker=maxsim",
               f"arms.blocks=[{{name: no_retrieval, generator: '{url}', model: m, retries: 0}}]"]
        proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]  # (progress bars aside)
    assert len(lines) == 1 and "usage is missing" in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    assert f"127.0.0.1:{srv.port}" in lines[0]
    assert SECRET not in proc.stdout + proc.stderr
    assert not list((tmp_path / "cache" / "blocks").rglob("*.parquet"))


def test_settings_the_chosen_generator_ignores_are_refused():
    """A server's bounds on the in-process engine, or a thread count on a server, would be logged
    as parameters and change nothing: refused, naming the setting."""
    from harness.generation.arms import AnswerSettingError, NoRetrievalArm

    for kwargs, key in (({"timeout_s": 30.0}, "timeout_s"), ({"retries": 0}, "retries"), ({"deadline_s": 60.0}, "deadline_s")):
        with pytest.raises(AnswerSettingError, match=f"{key}.*applies to a server generator"):
            NoRetrievalArm(**kwargs)
    with pytest.raises(AnswerSettingError, match="n_threads.*applies to an in-process generator"):
        NoRetrievalArm(generator="http://127.0.0.1:9", model="m", n_threads=2)
    NoRetrievalArm(generator="http://127.0.0.1:9", model="m", timeout_s=5.0, retries=0, deadline_s=60.0)  # its own
