"""Credentials in a server URL: taken out before the URL is printed, logged or keyed.

Why: ``http://user:password@host:8080`` is a common way to give a server's credentials, and the
URL travels into error messages, run tags and cache keys. The user info is split off once,
here; what remains is the URL everyone else sees, and the credentials go only into the
request's ``Authorization`` header.
"""

from __future__ import annotations

import base64
import urllib.parse


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
