"""How a results page's numbers are checked against the runs they cite: the page's own number
format (written again here, not imported from harness.results), where a number stands as a whole
token, every cited number read back from the MLflow store in page order, and every table cell of
ours being a cited number.

Why here: the results-page tests and the BoolQ answers test check their pages the same way.
"""

from __future__ import annotations

import math
import re
import tempfile

import pandas as pd


def _fmt(value: float, scale: float, decimals: int) -> str:
    """Written here again (not imported): nan -> n/a, no negative zero."""
    if value is None or not math.isfinite(value):
        return "n/a"
    text = f"{value * scale:.{decimals}f}"
    return text.lstrip("-") if float(text) == 0 else text


NUMBER = r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+"
# a number standing alone: not part of a word (bm25, top1), a longer number or a signed one
TOKEN = re.compile(rf"(?<![\w.\-])(?:{NUMBER})(?![\w])")


def _value_tokens(text: str) -> list[str]:
    return [t.rstrip(".") for t in TOKEN.findall(re.sub(r"`[^`]*`", "", text))]


def _find_token(page: str, text: str, pos: int) -> int:
    """Where ``text`` stands as a whole token in ``page`` at or after ``pos`` (-1: nowhere)."""
    m = re.compile(rf"(?<![\w.\-]){re.escape(text)}(?![\w]|\.\d)").search(page, pos)
    return m.start() if m else -1


def _check_cites(page: str, sidecar: dict, client) -> int:
    """Every cited number is the store's value (read here), and the page shows them in order."""
    import mlflow  # noqa: F401 - the client's artifact download needs the package

    pos = 0
    artifacts: dict[tuple[str, str], pd.DataFrame] = {}
    runs: dict[str, object] = {}

    def metric(run_id: str, name: str) -> float:
        if run_id not in runs:
            runs[run_id] = client.get_run(run_id)
        assert name in runs[run_id].data.metrics, f"run {run_id} has no metric {name!r}"  # a typo is not a nan
        return float(runs[run_id].data.metrics[name])

    for cite in sidecar["numbers"]:
        op, sources = cite["op"], cite["sources"]
        if op == "metric":
            value = metric(*sources[0])
        elif op == "ratio":
            den = metric(*sources[1])
            value = metric(*sources[0]) / den if den else math.nan
        elif op == "mean":
            vals = [metric(r, n) for r, n in sources]
            value = sum(vals) / len(vals)
        else:
            assert op == "artifact", cite
            key = (sources[0][0], cite["path"])
            if key not in artifacts:
                with tempfile.TemporaryDirectory() as tmp:
                    artifacts[key] = pd.read_csv(client.download_artifacts(key[0], key[1], tmp))
            rows = artifacts[key]
            for col, want in cite["match"].items():
                rows = rows[rows[col].astype(str) == want]
            assert len(rows) == 1, cite
            value = float(rows.iloc[0][cite["column"]])
        text = _fmt(value, cite["scale"], cite["decimals"])
        assert text == cite["text"], (cite, value)
        at = _find_token(page, text, pos)
        assert at >= 0, f"cited number {text} not found in the page after position {pos}: {cite}"
        pos = at + len(text)
    return len(sidecar["numbers"])


def _ours_cells_are_cited(page: str, sidecar: dict) -> None:
    """Every number in a table cell, except the label column and the papers' columns, is a cited
    number, in page order."""
    cited = [c["text"] for c in sidecar["numbers"]]
    seen: list[str] = []
    header: list[str] = []
    for line in page.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not header:
            header = cells
            continue
        if set(line) <= set("|-"):
            continue
        for head, cell in list(zip(header, cells))[1:]:
            if not head.startswith("paper"):
                seen += _value_tokens(cell)
    assert seen, "no table numbers found"
    i = 0
    for token in seen:
        while i < len(cited) and cited[i] != token:
            i += 1
        assert i < len(cited), f"number {token} in a table is not a cited number (or out of order)"
        i += 1
