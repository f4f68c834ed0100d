"""Markdown text shown as typed: names and console tables escaped for tables, code spans and
code blocks (a policy name holding ``|``, a backtick or ``<script>``).

Why one module: the decision table, the verdicts, the report and the results page all write
Markdown from user-chosen names; one escape rule means one place to get it right.
"""

from __future__ import annotations

import html
import re


def md_escape(text: object) -> str:
    """A name or cell as Markdown text: HTML markup (``<script>``) escaped as in the HTML report,
    ``|`` escaped (a table cell), a line break made a space (a table row is one line)."""
    return html.escape(" ".join(str(text).splitlines()), quote=False).replace("|", "\\|")


def md_code(text: object) -> str:
    """``text`` as an inline Markdown code span shown as typed (an experiment name holding a
    backtick or ``<b>``): the delimiter is longer than any run of backticks inside it."""
    body = " ".join(str(text).splitlines())
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    tick = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{tick}{pad}{body}{pad}{tick}"


def md_code_block(text: object) -> str:
    """``text`` as a fenced Markdown code block shown as typed (a console table holding names such
    as ``<script>``): the fence is longer than any run of backticks inside it."""
    body = str(text)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{body}\n{fence}"
