"""Answer quality (docs/metrics.md §7; seed 003's correctness rule).

* ``normalize_answer``: the SQuAD v1.1 normalisation, in the official order: lowercase, drop
  every ``string.punctuation`` character, replace the articles a/an/the (whole words) by a
  space, collapse whitespace.
* ``exact_match`` / ``token_f1``: the SQuAD v1.1 definitions, each the **maximum over the
  reference answers**. F1 is the harmonic mean of token precision and recall over the multiset
  intersection of whitespace tokens; as in the official v1.1 script, F1 is 0 whenever the
  intersection is empty (so an empty prediction against an empty reference has EM 1, F1 0;
  references are never empty in the datasets).
* ``correct`` = EM == 1 or F1 >= 0.8 (seed 003: "exact match or token F1 above 0.80"; the
  boundary 0.8 itself counts as correct).
* **Citations** such as ``[2]`` or ``[1, 3]`` are removed before scoring (the RAG prompt asks
  for them; they are not part of the answer).
* **Abstention** (docs/metrics.md §7): an answer whose normalised text starts with "insufficient
  evidence" (the prompt's exact string ``"Insufficient evidence."``, tolerating a trailing
  citation or remark) counts as wrong (EM = F1 = 0) unless the question is unanswerable, where
  it counts as right (EM = F1 = 1). A question is unanswerable when the caller says so, or by
  default when any reference answer normalises to "unanswerable" (QASPER's convention in
  ``harness.data.qasper``: an annotator who marked it unanswerable). A non-abstaining answer to
  such a question is scored against the references as they are.
* **Yes/no questions** (``boolean``; by default: every reference normalises to "yes" or "no"):
  the answer is mapped to ``yes`` / ``no`` / ``other`` by the first word that is "yes" or "no"
  (``yes_no_label``: "The answer is no." says no; small models rarely start with the word
  itself, though the prompt asks them to); ``correct`` is then yes/no accuracy (the label
  equals a reference label), while EM and F1 are still reported on the text. The words are
  found after NFKC normalisation and case folding, with every Unicode punctuation, symbol,
  separator, control and format character (``unicodedata`` categories P*, S*, Z*, Cc, Cf) read
  as a space: "“Yes”", "Yes—it does.", "Yes…", "«Yes»", "¡Yes!" and a full-width "Ｙｅｓ" all
  say yes (SQuAD's normalisation drops only ASCII punctuation and glues "Yes—it" into one
  word). A consequence: "No-one knows" says no.
* **Multiple-choice questions** (``choices``: the options shown to the model as A, B, C, ...):
  the answer names an option (``choice_of``) when its text equals an option's (exactly, else
  after SQuAD's normalisation; an answer that normalises to nothing names none), else when it
  starts (after "Answer:", "The answer is") with an option's letter: a capital closed by
  nothing or by ".", ")", ":", "]", "," or "*" ("B", "B.", "(B) ...", "**B**", "B: ..."), or a
  lower-case letter closed by one of ".", ")", ":", "]" ("b)"); not "Because", not "A bird"
  (an article). ``correct`` = the named option normalises to a reference answer (the gold
  option); an answer naming no option is wrong. EM = correct; F1 is the named option's token F1
  against the references (the raw text's when it names none). Options that normalise alike
  cannot be told apart by this rule, so a loader keeps one of them (``harness.data.sciq``).
* ``quality``: the continuous answer quality Q in [0, 1] for docs/metrics.md §7's gain: token F1,
  or yes/no (multiple-choice) accuracy for boolean (multiple-choice) questions.
* ``utility_class``: seed 003's u in {-1, 0, +1} of RAG over no-retrieval:
  ``int(correct_rag) - int(correct_no_retrieval)``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import asdict, dataclass
from typing import Iterable, Sequence

from harness.generation.prompts import ABSTAIN
from harness.text import normalize_answer, overlap_f1  # normalize_answer: SQuAD's, kept where data loaders reach it

CORRECT_F1 = 0.8
_CITATION = re.compile(r"\[\s*\d+(?:\s*(?:[,;]|-|–|and)\s*\d+)*\s*\]")


_ABSTAIN_NORM = normalize_answer(ABSTAIN)  # "insufficient evidence"


def strip_citations(text: str) -> str:
    """Remove bracketed numeric citations (``[2]``, ``[1, 3]``, ``[2-4]``) and tidy spaces."""
    out = _CITATION.sub(" ", text)
    out = re.sub(r"\s+([.,;:!?])", r"\1", out)
    return " ".join(out.split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised reference, else 0.0."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in golds))


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """Best SQuAD v1.1 token F1 of the prediction over the references (0.0 with none)."""
    p = normalize_answer(prediction).split()
    return max((overlap_f1(p, normalize_answer(g).split()) for g in golds), default=0.0)


def is_correct(em: float, f1: float) -> bool:
    """Seed 003: exact match, or token F1 of at least 0.8."""
    return em == 1.0 or f1 >= CORRECT_F1


def is_abstention(text: str) -> bool:
    """True if the answer is the abstention string (normalised prefix match, citations removed)."""
    n = normalize_answer(strip_citations(text))
    return n == _ABSTAIN_NORM or n.startswith(_ABSTAIN_NORM + " ")


_SEPARATOR_CATEGORIES = ("P", "S", "Z")  # punctuation, symbols, separators (any subcategory)
_INVISIBLE_CATEGORIES = ("Cc", "Cf")  # controls, format characters (zero-width space, BOM)


def _spaced(text: str) -> str:
    return "".join(" " if (cat := unicodedata.category(ch))[0] in _SEPARATOR_CATEGORIES
                   or cat in _INVISIBLE_CATEGORIES else ch for ch in text)


def label_words(text: str) -> list[str]:
    """The words of ``text`` for the yes/no label: split at every Unicode punctuation, symbol,
    separator, control or format character, NFKC-normalised and case-folded (module
    docstring). Separators go first, so a symbol NFKC spells with letters ("℡" -> "TEL")
    still separates; and again after, for what NFKC turns into punctuation."""
    return _spaced(unicodedata.normalize("NFKC", _spaced(text)).casefold()).split()


def yes_no_label(text: str) -> str:
    """``"yes"``, ``"no"`` or ``"other"``: the first word of the answer that is "yes" or "no"
    (whole words: "Yesterday" and "not" are neither; Unicode quotes, dashes and ellipses
    separate words like spaces)."""
    if is_abstention(text):
        return "other"
    for word in label_words(strip_citations(text)):
        if word in ("yes", "no"):
            return word
    return "other"


def is_boolean_reference(golds: Sequence[str]) -> bool:
    """True if there is at least one reference and every one normalises to yes or no."""
    norm = [normalize_answer(g) for g in golds]
    return bool(norm) and all(n in ("yes", "no") for n in norm)


def is_unanswerable_reference(golds: Sequence[str]) -> bool:
    """True if any reference normalises to "unanswerable" (QASPER's convention)."""
    return any(normalize_answer(g) == "unanswerable" for g in golds)


@dataclass(frozen=True)
class AnswerScore:
    em: float
    f1: float
    correct: bool
    abstained: bool
    boolean: bool
    unanswerable: bool
    yes_no: str | None = None  # the mapped label, for boolean questions
    quality: float = 0.0  # Q in [0, 1]: F1, or yes/no accuracy for boolean questions

    def to_dict(self) -> dict:
        return asdict(self)


# a letter alone: "B", "B.", "(B)", "**B**", "B: ...", "b)"; a capital may end the text, a
# lower-case letter needs its closing mark ("a" alone is an article, not an option)
_LETTER_ANSWER = re.compile(r"^[\W_]*(?:([A-Z])(?:$|[.):\],*])|([a-z])[.):\]])")
_ANSWER_PREFIX = re.compile(r"^(?:the\s+)?answer(?:\s+is)?\s*[:\-]?\s*", re.IGNORECASE)


def choice_of(text: str, choices: Sequence[str]) -> str | None:
    """The option an answer names among ``choices`` (shown as A, B, ...), or None (module
    docstring): the option's exact text first, then its text after SQuAD's normalisation, then a
    letter."""
    stripped = text.strip()
    for c in choices:
        if str(c).strip() == stripped:
            return str(c)
    norm = normalize_answer(text)
    for c in choices:
        if norm and normalize_answer(str(c)) == norm:
            return str(c)
    m = _LETTER_ANSWER.match(_ANSWER_PREFIX.sub("", stripped))
    if m:
        i = ord((m.group(1) or m.group(2)).upper()) - ord("A")
        if 0 <= i < len(choices):
            return str(choices[i])
    return None


def score_answer(
    prediction: str,
    golds: Sequence[str],
    *,
    boolean: bool | None = None,
    unanswerable: bool | None = None,
    choices: Sequence[str] | None = None,
) -> AnswerScore:
    """Score one generated answer against the reference answers (see the module docstring)."""
    golds = [str(g) for g in golds]
    if choices:
        cleaned = strip_citations(prediction)
        named = choice_of(cleaned, choices)
        ok = named is not None and normalize_answer(named) in {normalize_answer(g) for g in golds}
        f1 = token_f1(named if named is not None else cleaned, golds)
        return AnswerScore(em=float(ok), f1=f1, correct=ok, abstained=is_abstention(cleaned),
                           boolean=False, unanswerable=False, yes_no=None, quality=float(ok))
    if boolean is None:
        boolean = is_boolean_reference(golds)
    if unanswerable is None:
        unanswerable = is_unanswerable_reference(golds)
    cleaned = strip_citations(prediction)
    abstained = is_abstention(cleaned)
    if abstained:
        v = 1.0 if unanswerable else 0.0
        return AnswerScore(
            em=v, f1=v, correct=bool(v), abstained=True, boolean=boolean,
            unanswerable=unanswerable, yes_no="other" if boolean else None, quality=v,
        )
    em = exact_match(cleaned, golds)
    f1 = token_f1(cleaned, golds)
    if boolean:
        label = yes_no_label(cleaned)
        gold_labels = {normalize_answer(g) for g in golds}
        ok = label in gold_labels
        return AnswerScore(
            em=em, f1=f1, correct=ok, abstained=False, boolean=True,
            unanswerable=unanswerable, yes_no=label, quality=float(ok),
        )
    ok = is_correct(em, f1)
    return AnswerScore(
        em=em, f1=f1, correct=ok, abstained=False, boolean=False,
        unanswerable=unanswerable, yes_no=None, quality=f1,
    )


def utility_class(rag_correct: bool, no_retrieval_correct: bool) -> int:
    """Seed 003's u in {-1, 0, +1}: +1 RAG right and memory wrong, -1 the reverse, else 0."""
    return int(bool(rag_correct)) - int(bool(no_retrieval_correct))


def quality_gain(q_extra: float, q_base: float, eps: float = 0.01) -> float:
    """docs/metrics.md §7's continuous gain: log((Q_extra + eps) / (Q_base + eps))."""
    return math.log((q_extra + eps) / (q_base + eps))
