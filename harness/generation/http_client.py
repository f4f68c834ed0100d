"""Talking to a server: credentials kept out of sight, and every request bounded.

Why: ``http://user:password@host:8080`` is a common way to give a server's credentials, and the
URL travels into error messages, run tags and cache keys. The user info is split off once,
here; what remains is the URL everyone else sees, and the credentials go only into the
request's ``Authorization`` header. And a server can stall, trickle, answer 30 MB or fail for
a moment: each request has a wall-time limit, a total deadline, a size cap and retries with
backoff for 429/5xx (``request_json``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Mapping

from harness.generation.errors import GenerationError


def split_credentials(url: str) -> tuple[str, str | None]:
    """(the URL without user info, a Basic ``Authorization`` header value or None)."""
    parts = urllib.parse.urlsplit(str(url))
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return str(url), None
    clean = urllib.parse.urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}".encode("utf-8")
    return clean, "Basic " + base64.b64encode(pair).decode("ascii")


def redact_url(url: str) -> str:
    """The URL without its user info (``user:password@``): safe to print, log and key."""
    return split_credentials(url)[0]


# ---- one request, bounded -------------------------------------------------------------------
MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # a 256-token answer with 20 alternatives a token is ~0.2 MB
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_READ = 64 * 1024


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def request_json(url: str, body: Any = None, *, headers: Mapping[str, str], source: str, timeout_s: float,
                 deadline_at: float | None = None, max_bytes: int = MAX_RESPONSE_BYTES, retries: int = 3,
                 backoff_s: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> Any:
    """The JSON answer of ``url`` (GET, or POST of ``body``), bounded: each attempt within
    ``timeout_s`` of wall time (not only per socket read: a server that trickles bytes is cut
    too), all of them before ``deadline_at`` (``time.monotonic()``), at most ``max_bytes``;
    answers 429 and 5xx are retried ``retries`` times after ``backoff_s``, 2x, 4x, ... seconds.
    Every failure is one ``GenerationError`` line naming ``source`` (never credentials)."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    hdrs = {"Accept": "application/json", **dict(headers)}
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    path = urllib.parse.urlsplit(url).path
    attempt = 0
    while True:
        now = time.monotonic()
        if deadline_at is not None and now >= deadline_at:
            raise GenerationError(f"{source}: the total deadline (deadline_s) passed before {path} could be asked")
        limit = timeout_s if deadline_at is None else min(timeout_s, deadline_at - now)
        why = "timeout_s" if deadline_at is None or timeout_s <= deadline_at - now else "the total deadline (deadline_s)"
        req = urllib.request.Request(url, data=data, headers=hdrs, method="POST" if data is not None else "GET")
        try:
            payload = _read_bounded(req, limit, max_bytes, source, path, why)
            break
        except urllib.error.HTTPError as e:
            detail = _one_line(e.read(500).decode("utf-8", "replace"))
            if e.code in RETRY_STATUSES and attempt < retries:
                wait = backoff_s * (2 ** attempt)
                if deadline_at is None or time.monotonic() + wait < deadline_at:
                    attempt += 1
                    sleep(wait)
                    continue
            tried = f" (after {attempt + 1} attempts)" if attempt else ""
            raise GenerationError(f"{source}: {path}: HTTP {e.code}{tried}: {detail}") from None
        except (TimeoutError, socket.timeout):
            raise GenerationError(f"{source}: {path}: no answer within {why} ({limit:.3g} s)") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise GenerationError(f"{source}: {path}: no answer within {why} ({limit:.3g} s)") from None
            raise GenerationError(f"{source}: cannot reach the server: {_one_line(reason)}") from None
    return _decoded(payload, source, path)


def _decoded(payload: bytes, source: str, path: str) -> Any:
    """The answer's JSON; not JSON, or nested deeper than the parser reads, is one line."""
    try:
        return json.loads(payload)
    except ValueError:
        raise GenerationError(f"{source}: {path} did not answer JSON") from None
    except RecursionError:
        raise GenerationError(f"{source}: {path} answered JSON nested too deeply to read") from None


def _read_bounded(req: urllib.request.Request, limit: float, max_bytes: int, source: str, path: str,
                  why: str) -> bytes:
    if limit <= 0:
        raise TimeoutError
    end = time.monotonic() + limit
    with urllib.request.urlopen(req, timeout=limit) as r:
        declared = r.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise GenerationError(f"{source}: {path}: the answer is {int(declared):,} bytes, over the cap of "
                                  f"{max_bytes:,} bytes (max_response_bytes)")
        parts, size = [], 0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise GenerationError(f"{source}: {path}: the answer did not finish within {why} ({limit:.3g} s)")
            if r.fp is not None and getattr(r.fp, "raw", None) is not None:
                with contextlib.suppress(OSError, AttributeError):
                    r.fp.raw._sock.settimeout(left)
            try:
                chunk = r.read1(_READ) if hasattr(r, "read1") else r.read(_READ)
            except (TimeoutError, socket.timeout):
                raise GenerationError(f"{source}: {path}: the answer did not finish within {why} "
                                      f"({limit:.3g} s)") from None
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise GenerationError(f"{source}: {path}: the answer is over the cap of {max_bytes:,} bytes "
                                      "(max_response_bytes)")
            parts.append(chunk)
    return b"".join(parts)
