"""An OpenAI chat-completion response turned into a ``Generation``, checked field by field.

Why checked: whatever parses here is cached as an answer table and its numbers become costs
and features. A missing ``usage`` once cached -1 prompt tokens, a positive logprob gave a
minimum confidence of -1095.6, NaN logprobs and empty answers gave NaN features. So every
number is checked (token counts present, integers >= 0; logprobs finite and <= 0), and a
server's answer must have text where logprobs are required, and every token its top-k
alternatives where they were asked for (without them every entropy reads 0); a failure is one line naming the
source (the server's URL, never its credentials) and the field, and nothing is cached.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from harness.generation.errors import GenerationError, ServerAnswerError
from harness.generation.types import Generation, TokenLogprob, TopLogprob

LOGPROB_TOLERANCE = 1e-6  # a logprob above this is not a log-probability (rounding may give +1e-7)


def _error(source: str, field: str, problem: str) -> Exception:
    return ServerAnswerError(f"{source}: answer field {field} {problem}")


def checked_logprob(value: Any, source: str, field: str) -> float:
    """An answer's log-probability field as a float, checked: a finite number <= 0 (a rounding
    excess up to ``LOGPROB_TOLERANCE`` is clipped to 0); else a ``ServerAnswerError`` naming
    ``source`` and ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _error(source, field, f"is {json.dumps(value)[:40]}: expected a number <= 0")
    x = float(value)
    if not math.isfinite(x) or x > LOGPROB_TOLERANCE:
        raise _error(source, field, f"is {x!r}: expected a finite log-probability <= 0")
    return min(x, 0.0)


def _count(usage: Mapping, name: str, source: str) -> int:
    value = usage.get(name)
    if value is None:
        raise _error(source, f"usage.{name}", "is missing: expected the token count (an integer >= 0)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        raise _error(source, f"usage.{name}", f"is {json.dumps(value)[:40]}: expected an integer >= 0")
    return int(value)


def _drop_stop_token(tokens: list[TokenLogprob], content: str, finish: str) -> list[TokenLogprob]:
    """Drop the end-of-sequence entry some servers put last in ``logprobs.content``.

    llama.cpp lists it as an empty piece (``""``); others as a special-token string that is
    not in the message text. Only with ``finish_reason == "stop"``.
    """
    if finish != "stop" or not tokens:
        return tokens
    last = tokens[-1].token
    if last == "" or (last.strip() and not content.rstrip().endswith(last.strip())):
        return tokens[:-1]
    return tokens


def _first_choice(resp: Mapping, src: str, require_content: bool) -> tuple[Mapping, str]:
    """The response's first choice and its message text, checked: a server error, a missing
    message, a non-text content (and, with ``require_content``, an empty one) are refused."""
    if not isinstance(resp, Mapping):
        raise GenerationError(f"{src}: response is not a JSON object")
    if resp.get("error"):
        raise GenerationError(f"{src}: server error: {' '.join(json.dumps(resp['error']).split())[:300]}")
    try:
        choice = resp["choices"][0]
        message = choice["message"]
        content = message.get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise _error(src, "choices[0].message", "is missing: expected a chat completion") from None
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise _error(src, "choices[0].message.content", f"is a {type(content).__name__}: expected text")
    if require_content and not content.strip():
        raise _error(src, "choices[0].message.content", "is empty: expected the answer's text")
    return choice, content


def _token_logprob(entry: Any, where: str, src: str) -> TokenLogprob:
    """One ``logprobs.content`` entry, its chosen token's and its alternatives' logprobs checked."""
    if not isinstance(entry, Mapping):
        raise _error(src, where, "is not an object")
    alts = entry.get("top_logprobs") or []
    if not isinstance(alts, list):
        raise _error(src, f"{where}.top_logprobs", "is not a list")
    top = []
    for j, a in enumerate(alts):
        if not isinstance(a, Mapping):
            raise _error(src, f"{where}.top_logprobs[{j}]", "is not an object")
        top.append(TopLogprob(str(a.get("token", "")), checked_logprob(a.get("logprob"), src, f"{where}.top_logprobs[{j}].logprob")))
    return TokenLogprob(str(entry.get("token", "")), checked_logprob(entry.get("logprob"), src, f"{where}.logprob"),
                        tuple(top), None)


def _answer_tokens(choice: Mapping, content: str, finish: str, src: str, want_logprobs: bool) -> list[TokenLogprob]:
    """The answer's tokens with their logprobs (the end-of-sequence entry dropped); a text
    without logprobs is refused when they are wanted."""
    logprobs = choice.get("logprobs") or {}
    entries = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    entries = entries or []
    if want_logprobs and content and not entries:
        raise GenerationError(
            f"{src}: the server returned no logprobs (field choices[0].logprobs.content; it must support "
            "'logprobs': true and 'top_logprobs' on /v1/chat/completions)"
        )
    if not isinstance(entries, list):
        raise _error(src, "choices[0].logprobs.content", "is not a list")
    tokens = [_token_logprob(e, f"choices[0].logprobs.content[{i}]", src) for i, e in enumerate(entries)]
    return _drop_stop_token(tokens, content, finish)


def _require_alternatives(tokens: list[TokenLogprob], src: str, top_k: int) -> None:
    """Every answer token carries its top-k alternatives: without them each token's entropy
    would be 0 and the answer arms' uncertainty features (``feat.unc_*``) cached as certainty."""
    bare = next((i for i, t in enumerate(tokens) if not t.top), None)
    if bare is not None:
        raise _error(src, f"choices[0].logprobs.content[{bare}].top_logprobs",
                     f"is missing or empty: the answer arm's uncertainty features need the top_k={top_k} "
                     "alternatives of every token (the server must return 'top_logprobs' on /v1/chat/completions; "
                     "set arms.blocks[].generator to one that does)")


def _token_counts(resp: Mapping, src: str) -> tuple[int, int]:
    """(prompt tokens, completion tokens) from ``usage``: both present, integers >= 0."""
    usage = resp.get("usage")
    if not isinstance(usage, Mapping):
        raise _error(src, "usage", "is missing: expected prompt_tokens and completion_tokens (integers >= 0)")
    return _count(usage, "prompt_tokens", src), _count(usage, "completion_tokens", src)


def _engine_ms(timings: Any, src: str) -> float | None:
    """llama.cpp's own time for the answer (prompt + generation, ms) when it reports it."""
    model_ms = None
    if isinstance(timings, Mapping) and "prompt_ms" in timings and "predicted_ms" in timings:  # llama.cpp's own
        try:
            model_ms = float(timings["prompt_ms"]) + float(timings["predicted_ms"])
        except (TypeError, ValueError):
            raise _error(src, "timings", "holds a non-number prompt_ms or predicted_ms") from None
        if not math.isfinite(model_ms) or model_ms < 0:
            raise _error(src, "timings", f"gives {model_ms!r} ms: expected a finite time >= 0")
    return model_ms


def parse_chat_completion(resp: Mapping, *, backend: str, model: str, want_logprobs: bool = True,
                          source: str | None = None, require_content: bool = False,
                          top_k: int | None = None) -> Generation:
    """A checked ``Generation`` from an OpenAI chat-completion response (``ms`` left at 0).

    ``source`` names where the answer came from in errors (default: ``backend``);
    ``require_content``: an empty answer is refused (a server's; the in-process engine's empty
    answer is a real answer, with NaN uncertainty features); ``top_k`` (with ``want_logprobs``):
    the alternatives asked for per token, so a token without them is refused."""
    src = source or backend
    choice, content = _first_choice(resp, src, require_content)
    finish = choice.get("finish_reason") or ""
    tokens = _answer_tokens(choice, content, finish, src, want_logprobs)
    if want_logprobs and top_k:
        _require_alternatives(tokens, src, top_k)
    prompt_tokens, output_tokens = _token_counts(resp, src)
    timings = resp.get("timings") or {}
    model_ms = _engine_ms(timings, src)
    return Generation(
        text=content,
        tokens=tuple(tokens),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        ms=0.0,
        model_ms=model_ms,
        finish_reason=finish,
        backend=backend,
        model=model,
        extra={"timings": dict(timings)} if timings else {},
    )
