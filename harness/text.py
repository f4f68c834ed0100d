"""Text normalisation and token-overlap scores shared by evidence matching and answer metrics.

Two normalisations exist on purpose:

* ``normalize_text`` (SPEC section 1): casefold + whitespace collapse. It decides whether an
  evidence string *is* a unit, so it must not discard anything that distinguishes paragraphs.
* ``squad_normalize`` (SPEC section 7): the SQuAD evaluation normalisation (lowercase, drop
  punctuation and the articles a/an/the, collapse whitespace), used to score answers.

``token_f1`` compares word tokens (``word_tokens``: runs of Unicode word characters of the
``normalize_text`` form) and serves fuzzy evidence matching; ``answer_f1``/``max_token_f1``
compare whitespace tokens of the SQuAD-normalised strings and serve answer quality.
Empty-token convention (as the official SQuAD v2 script): if either side has no token, F1 is
1.0 when both are empty and 0.0 otherwise.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Iterable, Sequence

_WORD_RE = re.compile(r"\w+")
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)


def normalize_text(s: str) -> str:
    """Casefold and collapse every run of (Unicode) whitespace to one space; strip the ends."""
    return " ".join(s.casefold().split())


def word_tokens(s: str) -> list[str]:
    """Lower-cased word tokens: maximal runs of Unicode word characters (punctuation dropped)."""
    return _WORD_RE.findall(normalize_text(s))


def _f1(a_tokens: Sequence[str], b_tokens: Sequence[str]) -> float:
    if not a_tokens or not b_tokens:
        return float(len(a_tokens) == len(b_tokens))
    common = Counter(a_tokens) & Counter(b_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(a_tokens)
    recall = overlap / len(b_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(a: str, b: str) -> float:
    """Token-overlap F1 (multiset intersection) between the word tokens of ``a`` and ``b``."""
    return _f1(word_tokens(a), word_tokens(b))


def squad_normalize(s: str) -> str:
    """SQuAD answer normalisation: lowercase, remove punctuation, articles, extra whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES_RE.sub(" ", s)
    return " ".join(s.split())


def answer_f1(pred: str, gold: str) -> float:
    """SQuAD token F1 between one prediction and one reference answer."""
    return _f1(squad_normalize(pred).split(), squad_normalize(gold).split())


def exact_match(pred: str, golds: Iterable[str]) -> float:
    """1.0 if the SQuAD-normalised prediction equals any normalised reference, else 0.0."""
    p = squad_normalize(pred)
    return float(any(p == squad_normalize(g) for g in golds))


def max_token_f1(pred: str, golds: Iterable[str]) -> float:
    """Best SQuAD token F1 of the prediction over the references (0.0 with no reference)."""
    return max((answer_f1(pred, g) for g in golds), default=0.0)
