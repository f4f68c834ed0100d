"""Text normalisation and token overlap for evidence matching (docs/metrics.md §1).

``normalize_text``: casefold + whitespace collapse. It decides whether an evidence string *is*
a unit, so it must not discard anything that distinguishes paragraphs. ``word_f1`` compares
word tokens (``word_tokens``: runs of Unicode word characters of the ``normalize_text`` form);
if either side has no token, it is 1.0 when both are empty and 0.0 otherwise (fuzzy evidence
matching, ``harness.data.evidence``, counts the same tokens but scores an empty side 0).
Answers are scored elsewhere, by SQuAD's rules (``harness.generation.answers.token_f1``);
their normalisation, ``normalize_answer`` (SQuAD v1.1: lowercase, drop ``string.punctuation``,
articles a/an/the, collapse whitespace), lives here so that data loaders can apply it too
(a multiple-choice loader merges options that scoring could not tell apart).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Sequence

_WORD_RE = re.compile(r"\w+")
_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """SQuAD v1.1 answer normalisation (lower, punctuation, articles, whitespace)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def normalize_text(s: str) -> str:
    """Casefold and collapse every run of (Unicode) whitespace to one space; strip the ends."""
    return " ".join(s.casefold().split())


def word_tokens(s: str) -> list[str]:
    """Lower-cased word tokens: maximal runs of Unicode word characters (punctuation dropped)."""
    return _WORD_RE.findall(normalize_text(s))


def overlap_f1(a_tokens: Sequence[str], b_tokens: Sequence[str]) -> float:
    """Harmonic mean of token precision and recall over the multiset intersection; 0 when the
    intersection is empty (SQuAD v1.1's rule, also for two empty sides)."""
    common = Counter(a_tokens) & Counter(b_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(a_tokens)
    recall = overlap / len(b_tokens)
    return 2 * precision * recall / (precision + recall)


def word_f1(a: str, b: str) -> float:
    """Token-overlap F1 (multiset intersection) between the word tokens of ``a`` and ``b``;
    1.0 when both have no token, 0.0 when one has none."""
    ta, tb = word_tokens(a), word_tokens(b)
    if not ta or not tb:
        return float(len(ta) == len(tb))
    return overlap_f1(ta, tb)
