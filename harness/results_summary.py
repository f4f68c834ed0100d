"""The one-screen table that opens ``docs/results.md``: each seed paper's finding, whether our runs
reproduce it, and why not.

Why: the page is hundreds of lines of numbers beside the papers'; a reader asks first which
findings hold here. Each row is judged by a rule from our logged numbers (the same values the
page cites below), never typed by hand:
- "reproduced": our runs show the paper's finding (its direction, and its interval or test
  verdict where it states one);
- "partly": the direction holds but our questions cannot confirm it (an interval that includes
  zero, a p above alpha), or one of a finding's two parts holds;
- "not reproduced": our runs show the opposite, or the number is not logged.
The reasons are collapsed: a reason shared by several rows (another generator, other data) is one
footnote, cited by its letter; the table's cells hold words only, so no column mixes units (the
numbers, each cited, are in the sections below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

REPRODUCED, PARTLY, NOT_REPRODUCED = "reproduced", "partly", "not reproduced"
# why a seed's numbers cannot be the paper's, whatever the verdict (the sections' "Why our numbers
# differ" say it in full); one text per difference, so rows of several seeds share its footnote
DATA = "other data: the dataset in the 'on' column (QASPER's yes/no questions, or a HotpotQA sample), not the papers' sets"
GENERATOR = "another generator: SmolLM2-135M-Instruct, far smaller than the papers' 1.5B to 10B models"
SETTING = {
    "000": (DATA, "another reranker: MaxSim over MiniLM, not the ms-marco cross-encoder"),
    "003": (DATA, GENERATOR),
    "002": (DATA, GENERATOR, "other quality: yes/no accuracy or token F1, not the paper's similarity scores",
            "other predictors: ridge on a few features, not ModernBERT fine-tuned on 24,000 questions"),
}


@dataclass
class Claim:
    """One paper finding judged on one dataset."""

    seed: str
    finding: str
    dataset: str
    status: str
    reasons: list[str] = field(default_factory=list)  # why not (fully) reproduced, in words
    # how it was judged: the rule (a function of this module) and its arguments after
    # (seed, finding, dataset); the page's sidecar keeps them, so a test re-applies the rule and
    # finds every input among the page's cited numbers
    rule: str = ""
    args: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)


def recorded(rule):
    """A rule whose Claim records the rule's name and its arguments after (seed, finding,
    dataset): positional ones are our numbers, keyword ones are settings (alpha, the half)."""
    import functools

    @functools.wraps(rule)
    def judge(seed: str, finding: str, dataset: str, *numbers, **settings) -> Claim:
        claim = rule(seed, finding, dataset, *numbers, **settings)
        claim.rule, claim.args, claim.settings = rule.__name__, list(numbers), dict(settings)
        return claim

    return judge


def _finite(*values: float) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


def includes_zero(low: float, high: float) -> bool:
    return _finite(low, high) and low <= 0.0 <= high


@recorded
def both_include_zero(seed: str, finding: str, dataset: str, *bounds: float, names: tuple[str, ...] = ()) -> Claim:
    """The paper: each named difference's 95% interval includes zero (no difference shown);
    ``bounds`` are (low, high) of each of ``names`` in turn."""
    intervals = {name: (bounds[2 * i], bounds[2 * i + 1]) for i, name in enumerate(names)}
    missing = [name for name, (lo, hi) in intervals.items() if not _finite(lo, hi)]
    if missing:
        return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"not logged: {', '.join(missing)}"])
    apart = [f"our interval of {name} excludes zero" for name, (lo, hi) in intervals.items() if not includes_zero(lo, hi)]
    status = REPRODUCED if not apart else PARTLY if len(apart) < len(intervals) else NOT_REPRODUCED
    return Claim(seed, finding, dataset, status, apart)


@recorded
def more_than(seed: str, finding: str, dataset: str, more: float, less: float, *, what: str) -> Claim:
    """The paper: ``more`` exceeds ``less`` (e.g. rescues over harms)."""
    if not _finite(more, less):
        return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"not logged: {what}"])
    if more > less:
        return Claim(seed, finding, dataset, REPRODUCED)
    return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"here {what} the other way round" if more < less
                                                          else f"here {what} equal"])


@recorded
def share_above(seed: str, finding: str, dataset: str, share: float, *, what: str, half: float = 0.5) -> Claim:
    """The paper: ``share`` is above ``half`` (most); some but not most is "partly"."""
    if not _finite(share):
        return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"not logged: {what}"])
    if share > half:
        return Claim(seed, finding, dataset, REPRODUCED)
    if share > 0:
        return Claim(seed, finding, dataset, PARTLY, [f"{what} in fewer than half here"])
    return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"{what} never here"])


@recorded
def positive_and_significant(seed: str, finding: str, dataset: str, value: float, p: float, *, alpha: float,
                             what: str) -> Claim:
    """The paper: ``value`` is positive and told from zero; positive but p >= alpha is "partly"."""
    if not _finite(value, p):
        return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"not logged: {what}"])
    if value > 0 and p < alpha:
        return Claim(seed, finding, dataset, REPRODUCED)
    if value > 0:
        return Claim(seed, finding, dataset, PARTLY, [f"{what} is positive but cannot be told from zero here"])
    return Claim(seed, finding, dataset, NOT_REPRODUCED, [f"{what} is not positive here"])


def _letter(i: int) -> str:
    return "abcdefghijklmnopqrstuvwxyz"[i] if i < 26 else f"z{i}"


def summary_lines(claims: list[Claim]) -> list[str]:
    """The table (finding | on | status | why) and its footnotes: each distinct reason once,
    lettered in order of first use; every row also cites its seed's setting differences
    (``SETTING``): a finding reproduced here is reproduced on other data and models."""
    if not claims:
        return []
    notes: dict[str, str] = {}

    def ref(text: str) -> str:
        return notes.setdefault(text, _letter(len(notes)))

    rows = []
    for c in claims:
        why = [ref(r) for r in c.reasons] + [ref(s) for s in SETTING.get(c.seed, ())]
        rows.append(f"| {c.finding} (seed {c.seed}) | {c.dataset} | {c.status} | {', '.join(why)} |")
    counts = {s: sum(c.status == s for c in claims) for s in (REPRODUCED, PARTLY, NOT_REPRODUCED)}
    head = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return ["## Summary", "",
            f"Each seed paper's finding on each dataset we ran, judged from the numbers below ({head}); the "
            "reasons and the differences of setting, each given once, are lettered under the table.", "",
            "| finding (paper) | on | status | why, and what differs |", "|---|---|---|---|", *rows, "",
            *[f"- ({letter}) {text}" for text, letter in notes.items()], ""]
