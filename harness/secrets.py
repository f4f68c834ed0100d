"""Secrets kept out of what a run logs: the user info (``user:password@``) of every URL in a
plain config removed before it becomes parameters or the config artifact.

Why a module of its own: the job runner logs every run's config and needs this redaction, not
the LLM's HTTP client; it imports nothing of the harness, so every layer may use it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def redact_secrets(obj: Any) -> Any:
    """``obj`` (plain config: mappings, lists, strings) with the user info of every URL in it
    removed: what a run logs as parameters and as its config artifact."""
    if isinstance(obj, str):
        return _USERINFO.sub(r"\1", obj)
    if isinstance(obj, Mapping):
        return {k: redact_secrets(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_secrets(v) for v in obj]
    return obj
