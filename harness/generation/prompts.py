"""Prompts for answer generation (seed 000's rules), with and without retrieved evidence.

Rules (seed 000, "Generation"; docs/metrics.md §7):

* **RAG prompt** (``rag_messages``): answer only from the given evidence units; cite the units
  used as ``[n]`` (n = the unit's 1-based position in the evidence block, i.e. its retrieval
  rank); when the evidence does not answer the question, reply with exactly
  ``"Insufficient evidence."`` (``ABSTAIN``).
* **No-retrieval prompt** (``no_retrieval_messages``): answer from memory, briefly; no evidence,
  no citations. It has no abstention instruction: the no-retrieval arm is scored as a plain
  answer (seed 003's "the model first answers from memory").
* **Yes/no questions** (``boolean=True``): the answer must start with "Yes" or "No".
* **Multiple-choice questions** (``choices``): the options follow the question as lines
  "A. ...", "B. ..." and the answer must be the letter of the correct option.
* **Evidence cap**: the evidence block (labels, texts and the blank lines between them, exactly
  as put into the prompt) has at most ``MAX_EVIDENCE_CHARS = 12,000`` characters. Units are
  added in rank order; the first unit that does not fit whole is cut to the remaining room (when
  at least ``MIN_PARTIAL_CHARS`` remain, else dropped) and every later unit is dropped. Which
  units went in, and whether one was cut, is recorded on the ``Prompt``.
* **Output cap**: ``MAX_OUTPUT_TOKENS = 256`` new tokens (the backends' default ``max_tokens``).

Choices where seed 000 is silent (it names the rules, not the wording): the wording below;
citations as bracketed ranks rather than unit ids (short, and a small model copies them more
reliably); unit kind shown only for captions and headings (``[3] (caption) ...``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from harness.generation.options import choice_letters

ABSTAIN = "Insufficient evidence."
MAX_EVIDENCE_CHARS = 12_000
MAX_OUTPUT_TOKENS = 256
MIN_PARTIAL_CHARS = 200  # a cut unit shorter than this is dropped instead

RAG_SYSTEM = (
    "You answer questions about a scientific paper using only the numbered evidence units "
    "given by the user. Rules:\n"
    "1. Use only the evidence units; do not use outside knowledge.\n"
    "2. Cite every unit you used by its number in square brackets, e.g. [1] or [2][3].\n"
    f'3. If the evidence does not answer the question, reply exactly: {ABSTAIN}\n'
    "4. Keep the answer short: a phrase or one sentence."
)
RAG_BOOLEAN = "This is a yes/no question: start the answer with Yes or No, then cite."
RAG_BOOLEAN_RULE = "5. " + RAG_BOOLEAN  # the rule as numbered when it is the only extra one

NO_RETRIEVAL_SYSTEM = (
    "You answer questions from your own knowledge. Keep the answer short: a phrase or one "
    "sentence. Do not explain your reasoning."
)
NO_RETRIEVAL_BOOLEAN_RULE = "This is a yes/no question: start the answer with Yes or No."
CHOICE_RULE = "This is a multiple-choice question: answer with the letter of the correct option only."
RAG_CHOICE_RULE = "This is a multiple-choice question: start the answer with the letter of the correct option, then cite."


def _question_text(question: str, choices: Sequence[str]) -> str:
    """The question, then its lettered options when it has any."""
    text = f"Question: {question.strip()}"
    if choices:
        text += "".join(f"\n{letter}. {str(c).strip()}" for letter, c in zip(choice_letters(len(choices)), choices))
    return text


@dataclass(frozen=True)
class EvidenceUnit:
    """One retrieved unit as the prompt shows it (``kind`` as in ``harness.data.schema.Unit``)."""

    unit_id: str
    text: str
    kind: str = "paragraph"


@dataclass(frozen=True)
class Prompt:
    """Chat messages plus what the evidence block holds (for the run's records)."""

    messages: tuple[dict, ...]
    unit_ids: tuple[str, ...] = ()  # units put into the prompt, in citation order [1], [2], ...
    evidence_chars: int = 0  # len() of the evidence block as put into the prompt
    truncated: bool = False  # a unit was cut or dropped by the cap
    kind: str = "rag"  # "rag" | "no_retrieval"

    def as_list(self) -> list[dict]:
        return [dict(m) for m in self.messages]


def _label(rank: int, unit: EvidenceUnit) -> str:
    kind = f"({unit.kind}) " if unit.kind in ("caption", "heading") else ""
    return f"[{rank}] {kind}"


def evidence_block(
    units: Iterable[EvidenceUnit], max_chars: int = MAX_EVIDENCE_CHARS
) -> tuple[str, tuple[str, ...], bool]:
    """The numbered evidence block under the cap: ``(text, unit ids included, truncated)``."""
    if max_chars <= 0:
        raise ValueError(f"max_chars must be positive, got {max_chars}")
    parts: list[str] = []
    ids: list[str] = []
    used = 0
    truncated = False
    for rank, unit in enumerate(units, start=1):
        sep = "\n\n" if parts else ""
        text = " ".join(unit.text.split())
        piece = sep + _label(rank, unit) + text
        room = max_chars - used
        if len(piece) <= room:
            parts.append(piece)
            ids.append(unit.unit_id)
            used += len(piece)
            continue
        truncated = True
        head = sep + _label(rank, unit)
        if room - len(head) >= MIN_PARTIAL_CHARS:
            piece = head + text[: room - len(head)]
            parts.append(piece)
            ids.append(unit.unit_id)
            used += len(piece)
        break
    block = "".join(parts)
    assert len(block) <= max_chars
    return block, tuple(ids), truncated


def _as_units(units: Sequence[EvidenceUnit | str | tuple]) -> list[EvidenceUnit]:
    out = []
    for i, u in enumerate(units):
        if isinstance(u, EvidenceUnit):
            out.append(u)
        elif isinstance(u, str):
            out.append(EvidenceUnit(unit_id=str(i), text=u))
        elif hasattr(u, "unit_id") and hasattr(u, "text"):  # harness.data.schema.Unit
            out.append(EvidenceUnit(u.unit_id, u.text, getattr(u, "kind", "paragraph")))
        else:
            out.append(EvidenceUnit(*u))
    return out


def rag_messages(
    question: str,
    units: Sequence[EvidenceUnit | str | tuple],
    *,
    boolean: bool = False,
    max_chars: int = MAX_EVIDENCE_CHARS,
    choices: Sequence[str] = (),
) -> Prompt:
    """Messages for answering ``question`` from ``units`` (ranked best first)."""
    block, ids, truncated = evidence_block(_as_units(units), max_chars)
    extra = ([RAG_BOOLEAN] if boolean else []) + ([RAG_CHOICE_RULE] if choices else [])
    system = RAG_SYSTEM + "".join(f"\n{n}. {rule}" for n, rule in enumerate(extra, start=5))
    user = f"Evidence:\n{block if block else '(none)'}\n\n{_question_text(question, choices)}\nAnswer:"
    return Prompt(
        messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
        unit_ids=ids,
        evidence_chars=len(block),
        truncated=truncated,
        kind="rag",
    )


def no_retrieval_messages(question: str, *, boolean: bool = False, choices: Sequence[str] = ()) -> Prompt:
    """Messages for answering ``question`` from the model's memory (no evidence)."""
    system = NO_RETRIEVAL_SYSTEM + (" " + NO_RETRIEVAL_BOOLEAN_RULE if boolean else "") + (
        " " + CHOICE_RULE if choices else "")
    user = f"{_question_text(question, choices)}\nAnswer:"
    return Prompt(
        messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
        kind="no_retrieval",
    )
