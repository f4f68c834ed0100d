"""Match evidence strings to units (docs/metrics.md §1): exact on normalised text, else fuzzy.

What an evidence string is compared with: a paragraph's or caption's ``text``; a heading's full
section name, ``Unit.section`` (QASPER's nested ``"A ::: B"`` name, whitespace collapsed), never
the heading's displayed ``text`` (which the ``dataset.heading_text`` option may shorten to
``"B"``). A heading with an empty ``section`` is compared by its ``text``. Both sides are
normalised with :func:`harness.text.normalize_text` (casefold, whitespace collapsed).

Exact matching prefers the unit kind the evidence points at:

1. ``FLOAT SELECTED: `` evidence (prefix stripped) is matched against captions only (the prefix
   marks a figure/table), exactly, else fuzzily among captions.
2. Any other evidence: if it equals the text of one or more **paragraphs**, those are gold and
   nothing else; else, if it equals the full section name of one or more **headings**, those
   are gold; else, if it equals a **caption**'s text (an evidence string missing its prefix),
   that caption is gold. So a heading is gold only when the evidence is its full section name
   and no paragraph has that text: a paragraph "Reasoning methods" and a heading "Reasoning
   Methods" never both become gold for one evidence string.
3. No exact match: the single unit (of the kinds allowed in 1) with the highest token-overlap
   F1 (headings by their full section name) if that F1 >= 0.8, ties broken by document order;
   else the evidence is unmatched.

Other choices where docs/metrics.md is silent:

* Within the winning kind an exact match makes *every* unit with that normalised text gold (a
  paper may repeat a paragraph verbatim).
* Evidence strings are de-duplicated per question after normalisation before counting, so the
  exact/fuzzy/unmatched counts are over *distinct* evidence strings of all annotators; empty
  evidence strings are ignored.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from harness.data.schema import Unit
from harness.text import normalize_text, word_tokens

FLOAT_PREFIX = "FLOAT SELECTED: "
FUZZY_MIN_F1 = 0.8
# exact-match preference for evidence without the FLOAT SELECTED prefix (first kind that matches wins)
EXACT_KIND_ORDER = ("paragraph", "heading", "caption")


def match_text(unit: Unit) -> str:
    """The text evidence is compared with: a heading's full section name, else the unit text."""
    if unit.kind == "heading" and unit.section.strip():
        return unit.section
    return unit.text


def _f1_counts(a: Counter, a_len: int, b: Counter, b_len: int) -> float:
    """Token F1 for fuzzy evidence matching. A side with no word tokens (e.g. "---") scores 0:
    unlike answer scoring, two empty texts are no evidence that they are the same passage."""
    if a_len == 0 or b_len == 0:
        return 0.0
    overlap = sum((a & b).values())
    if overlap == 0:
        return 0.0
    p, r = overlap / a_len, overlap / b_len
    return 2 * p * r / (p + r)


class EvidenceMatcher:
    """Per-document index of unit match texts; ``match`` maps evidence strings to gold unit ids."""

    def __init__(self, units: Sequence[Unit]):
        self.units = list(units)
        self._exact: dict[str, list[int]] = {}
        self._tokens: list[tuple[Counter, int]] = []
        for i, u in enumerate(self.units):
            text = match_text(u)
            self._exact.setdefault(normalize_text(text), []).append(i)
            toks = word_tokens(text)
            self._tokens.append((Counter(toks), len(toks)))

    def _exact_ids(self, norm: str, captions_only: bool) -> list[int]:
        hits = self._exact.get(norm, [])
        if captions_only:
            return [i for i in hits if self.units[i].kind == "caption"]
        for kind in EXACT_KIND_ORDER:
            of_kind = [i for i in hits if self.units[i].kind == kind]
            if of_kind:
                return of_kind
        return []

    def match_one(self, evidence: str) -> tuple[str, list[str]]:
        """("exact" | "fuzzy" | "unmatched", gold unit ids) for one evidence string."""
        captions_only = evidence.startswith(FLOAT_PREFIX)
        text = evidence[len(FLOAT_PREFIX) :] if captions_only else evidence
        exact = self._exact_ids(normalize_text(text), captions_only)
        if exact:
            return "exact", [self.units[i].unit_id for i in exact]
        toks = word_tokens(text)
        ev_counts, ev_len = Counter(toks), len(toks)
        best_i, best_f1 = -1, -1.0
        for i, (counts, n) in enumerate(self._tokens):
            if captions_only and self.units[i].kind != "caption":
                continue
            f1 = _f1_counts(ev_counts, ev_len, counts, n)
            if f1 > best_f1:  # strict: earlier unit wins ties
                best_i, best_f1 = i, f1
        if best_i >= 0 and best_f1 >= FUZZY_MIN_F1:
            return "fuzzy", [self.units[best_i].unit_id]
        return "unmatched", []

    def match(self, evidence: Iterable[str]) -> tuple[tuple[str, ...], dict[str, int]]:
        """Gold unit ids (document order) and counts of exact/fuzzy/unmatched evidence strings."""
        counts = {"exact": 0, "fuzzy": 0, "unmatched": 0}
        gold: set[str] = set()
        seen: set[tuple[bool, str]] = set()
        for ev in evidence:
            is_float = ev.startswith(FLOAT_PREFIX)
            key = (is_float, normalize_text(ev[len(FLOAT_PREFIX) :] if is_float else ev))
            if not key[1] or key in seen:
                continue
            seen.add(key)
            how, ids = self.match_one(ev)
            counts[how] += 1
            gold.update(ids)
        ordered = tuple(u.unit_id for u in self.units if u.unit_id in gold)
        return ordered, counts
