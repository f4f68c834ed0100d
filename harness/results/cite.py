"""The page being written and the citation of every number of ours on it.

Why a model of its own: each number the page shows is cited as it is written (``Page.metric``,
``ratio``, ``mean``, ``cell``), so the sidecar lists, in page order, the text, the value, where it
comes from and how it was formatted; ``tests/test_results_page.py`` re-reads each from the store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from harness.results_summary import Claim

NA = "n/a"
NOT_RUN = "not in this sweep"


def fmt(value: float, scale: float = 1.0, decimals: int = 4) -> str:
    """How a cited number is written: ``value * scale`` to ``decimals`` places; nan -> n/a; no
    negative zero."""
    if value is None or not math.isfinite(float(value)):
        return NA
    text = f"{float(value) * scale:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


@dataclass
class Cite:
    """One number of ours on the page and where it comes from.

    ``op``: ``metric`` (``sources[0]``'s logged metric), ``ratio`` (sources[0] / sources[1]),
    ``mean`` (the mean of the sources), ``artifact`` (``column`` of the row of the run's CSV
    artifact ``path`` whose columns equal ``match``). ``sources`` are ``[run_id, metric]``
    pairs (metric names as logged)."""

    text: str
    op: str
    value: float
    scale: float = 1.0
    decimals: int = 4
    sources: list = field(default_factory=list)
    path: str | None = None
    match: dict | None = None
    column: str | None = None


class Page:
    """Markdown lines plus the citations of every number of ours, in page order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cites: list[Cite] = []
        self.missing: list[list[str]] = []  # [run_id, metric] asked for but not logged: shown as n/a
        self.claims: list[Claim] = []  # each paper finding judged on each dataset: the page's summary

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)

    def _cite(self, cite: Cite) -> str:
        self.cites.append(cite)
        return cite.text

    def metric(self, run, name: str, scale: float = 1.0, decimals: int = 4) -> str:
        if run is None:
            return NA  # no run: nothing cited, the cell says so
        if not self._logged(run, name):
            return NA
        value = run.data.metrics[name]
        return self._cite(Cite(fmt(value, scale, decimals), "metric", float(value), scale, decimals,
                               [[run.info.run_id, name]]))

    def _logged(self, run, *names: str) -> bool:
        """Whether ``run`` logged every metric in ``names``; the ones it lacks are listed in
        ``missing`` (shown as n/a, never cited: a typo'd name is not a nan)."""
        lacking = [n for n in names if n not in run.data.metrics]
        self.missing.extend([run.info.run_id, n] for n in lacking)
        return not lacking

    def ratio(self, run, num: str, den: str, scale: float = 1.0, decimals: int = 4) -> str:
        if run is None or not self._logged(run, num, den):
            return NA
        a, b = run.data.metrics[num], run.data.metrics[den]
        value = a / b if b else math.nan
        return self._cite(Cite(fmt(value, scale, decimals), "ratio", float(value), scale, decimals,
                               [[run.info.run_id, num], [run.info.run_id, den]]))

    def mean(self, pairs: list, scale: float = 1.0, decimals: int = 4) -> str:
        pairs = [(r, n) for r, n in pairs if r is not None]
        if not pairs or not all([self._logged(r, n) for r, n in pairs]):
            return NA
        vals = [r.data.metrics[n] for r, n in pairs]
        value = sum(vals) / len(vals)
        return self._cite(Cite(fmt(value, scale, decimals), "mean", float(value), scale, decimals,
                               [[r.info.run_id, n] for r, n in pairs]))

    def cell(self, run_id: str, path: str, frame, match: dict, column: str, scale: float = 1.0,
             decimals: int = 4) -> str:
        rows = frame
        for k, v in match.items():
            rows = rows[rows[k].astype(str) == str(v)]
        if len(rows) != 1:
            return NA
        value = float(rows.iloc[0][column])
        return self._cite(Cite(fmt(value, scale, decimals), "artifact", value, scale, decimals,
                               [[run_id, ""]], path, {k: str(v) for k, v in match.items()}, column))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.add("| " + " | ".join(header) + " |", "|" + "---|" * len(header))
        self.add(*("| " + " | ".join(str(c) for c in row) + " |" for row in rows))
        self.add("")
