"""What a named experiment's spec declares: its paper and title, the claims the page's summary
judges (the paper's finding, the published figure it rests on, our numbers, the rule), how its
section renders the tables of one dataset's sweep, and why our numbers differ from the paper's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from harness.published import figure
from harness.results.cite import Page
from harness.results.sweeps import SweepView
from harness.results_summary import Claim


@dataclass(frozen=True)
class ClaimSpec:
    """One paper finding, judged on each dataset's sweep by a ``harness.results_summary`` rule.

    ``numbers(view)``: our numbers, the rule's positional inputs (each one the page cites);
    ``settings(view)``: the rule's keyword settings (alpha, names, what...); ``figures``: the keys
    of the paper's published figures the finding rests on (``harness.published``)."""

    seed: str
    finding: str
    rule: Callable[..., Claim]
    numbers: Callable[[SweepView], tuple]
    settings: Callable[[SweepView], dict] = lambda view: {}
    figures: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for key in self.figures:
            figure(key)  # a key harness.published lacks fails at import, not on a page

    def judge(self, view: SweepView) -> Claim:
        return self.rule(self.seed, self.finding, view.dataset, *self.numbers(view), **self.settings(view))


@dataclass(frozen=True)
class Experiment:
    """A named experiment (``conf/experiment/<name>.yaml``) and its section of the page.

    ``render(page, view, client)`` writes one dataset's tables and sentences; the page adds the
    provenance before and the claims' judgements (in ``claims`` order) after it."""

    name: str
    paper: str  # the seed paper's key in harness.published.PAPERS
    title: str
    render: Callable[[Page, SweepView, Any], None]
    claims: tuple[ClaimSpec, ...] = ()
    differences: tuple[str, ...] = ()
