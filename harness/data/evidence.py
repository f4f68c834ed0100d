"""Match evidence strings to units (SPEC section 1): exact on normalised text, else fuzzy.

Choices where the SPEC is silent:

* An exact match makes *every* unit with that normalised text gold (a paper may repeat a
  paragraph verbatim); a fuzzy match picks the single best unit, ties broken by document order.
* ``FLOAT SELECTED: `` evidence is matched against caption units only (the prefix marks a
  figure/table); all other evidence is matched against every unit of the document.
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
    """Per-document index of unit texts; ``match`` maps evidence strings to gold unit ids."""

    def __init__(self, units: Sequence[Unit]):
        self.units = list(units)
        self._exact: dict[str, list[int]] = {}
        self._tokens: list[tuple[Counter, int]] = []
        for i, u in enumerate(self.units):
            self._exact.setdefault(normalize_text(u.text), []).append(i)
            toks = word_tokens(u.text)
            self._tokens.append((Counter(toks), len(toks)))

    def match_one(self, evidence: str) -> tuple[str, list[str]]:
        """("exact" | "fuzzy" | "unmatched", gold unit ids) for one evidence string."""
        captions_only = evidence.startswith(FLOAT_PREFIX)
        text = evidence[len(FLOAT_PREFIX) :] if captions_only else evidence

        def allowed(i: int) -> bool:
            return not captions_only or self.units[i].kind == "caption"

        exact = [i for i in self._exact.get(normalize_text(text), []) if allowed(i)]
        if exact:
            return "exact", [self.units[i].unit_id for i in exact]
        toks = word_tokens(text)
        ev_counts, ev_len = Counter(toks), len(toks)
        best_i, best_f1 = -1, -1.0
        for i, (counts, n) in enumerate(self._tokens):
            if not allowed(i):
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
