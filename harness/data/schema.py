"""The in-memory shape every dataset loader produces and every later stage reads.

A document is cut into units (docs/metrics.md §1); a question points at its document, at the pool
of units its arms search, and at its gold units. Splits are always grouped by ``doc_id``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from numbers import Integral
from typing import Iterable, Mapping

from harness.io import digest_of

UNIT_KINDS = ("paragraph", "heading", "caption")


@dataclass(frozen=True)
class Unit:
    """One retrievable piece of a document, in document order (``index`` breaks ranking ties)."""

    unit_id: str  # globally unique, e.g. "<doc_id>#<index>"
    doc_id: str
    index: int  # position within its document, 0-based
    kind: str  # one of UNIT_KINDS
    text: str
    section: str = ""


@dataclass(frozen=True)
class Question:
    """A question, the pool its arms search, its gold units and its reference answers."""

    qid: str
    doc_id: str  # grouping key for every split, fold and bootstrap
    pool_id: str  # key into Dataset.pools: the units the arms search for this question
    text: str
    gold_unit_ids: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()  # reference answers (all annotators), normalised to strings
    answer_type: str = ""  # extractive | abstractive | yes_no | unanswerable | span | ...
    # how each evidence string was matched: counts of "exact", "fuzzy", "unmatched"
    evidence_match: Mapping[str, int] = field(default_factory=dict)
    # a multiple-choice question's options, in the order shown (A, B, ...); the gold is in answers
    choices: tuple[str, ...] = ()

    @property
    def has_evidence(self) -> bool:
        return len(self.gold_unit_ids) > 0


def _question_material(q: Question) -> dict:
    """A question's fingerprinted fields; ``choices`` only when it has some, so questions without
    options keep the fingerprint they had before options existed."""
    out = {**asdict(q), "evidence_match": dict(q.evidence_match)}
    if not q.choices:
        out.pop("choices")
    return out


@dataclass
class Dataset:
    """Units grouped into pools plus questions over them; ``fingerprint`` hashes both."""

    name: str
    documents: dict[str, list[Unit]]  # doc_id -> units in document order
    questions: list[Question]
    pools: dict[str, list[str]]  # pool_id -> unit_ids searched (in tie-break order)
    meta: dict = field(default_factory=dict)  # licence, source file, citation, ...
    # loader options that shape units or gold (e.g. {"heading_text": "full"}); in the fingerprint
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._units: dict[str, Unit] = {u.unit_id: u for us in self.documents.values() for u in us}
        self._fingerprint: str | None = None

    def unit(self, unit_id: str) -> Unit:
        return self._units[unit_id]

    def pool_units(self, pool_id: str) -> list[Unit]:
        return [self._units[u] for u in self.pools[pool_id]]

    @property
    def n_units(self) -> int:
        return len(self._units)

    def fingerprint(self) -> str:
        """SHA-256 over the name and every unit and question (ids, texts, gold, answers, pools),
        plus ``options`` when a loader recorded any (so e.g. ``dataset.heading_text`` changes it
        even for papers without nested section names).

        Computed once (about 0.5 s on QASPER): a loaded dataset is not modified afterwards."""
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    def _compute_fingerprint(self) -> str:
        material = {
            "name": self.name,
            "units": [asdict(u) for us in self.documents.values() for u in us],
            "questions": [_question_material(q) for q in self.questions],
            "pools": self.pools,
        }
        if self.options:  # absent when empty: datasets without options keep their fingerprint
            material["options"] = dict(self.options)
        return digest_of(material)

    def stats(self) -> dict:
        """Counts a user checks first: documents, questions, units by kind, evidence matching."""
        kinds = {k: 0 for k in UNIT_KINDS}
        for us in self.documents.values():
            for u in us:
                kinds[u.kind] = kinds.get(u.kind, 0) + 1
        match = {"exact": 0, "fuzzy": 0, "unmatched": 0}
        for q in self.questions:
            for k, v in q.evidence_match.items():
                match[k] = match.get(k, 0) + int(v)
        return {
            "dataset": self.name,
            "documents": len(self.documents),
            "questions": len(self.questions),
            "questions_with_evidence": sum(q.has_evidence for q in self.questions),
            "units": self.n_units,
            "units_by_kind": kinds,
            "evidence_strings": match,
            "pools": len(self.pools),
            "fingerprint": self.fingerprint()[:16],
            # what the loader read from its files but left out, by reason (BEIR: queries without a
            # relevant passage, ...): counts of the whole files, also after max_questions / subset
            "left_out": _counts(self.meta.get("left_out")),
        }


def _counts(value) -> dict[str, int]:
    """``meta["left_out"]`` as {reason: count}; a plugin's free-form value that is not such a
    mapping is not a count and is not shown."""
    if not isinstance(value, Mapping):
        return {}
    return {str(k): int(v) for k, v in value.items() if isinstance(v, Integral) and not isinstance(v, bool)}


def left_out_said(stats: Mapping) -> list[tuple[str, int]]:
    """The non-zero ``stats()["left_out"]`` counts as (reason in words, count), for people."""
    return [(reason.replace("_", " "), n) for reason, n in stats.get("left_out", {}).items() if n]


def subset(ds: Dataset, qids: Iterable[str]) -> Dataset:
    """The dataset restricted to some questions (and the documents/pools they use)."""
    keep = set(qids)
    qs = [q for q in ds.questions if q.qid in keep]
    docs = {q.doc_id for q in qs}
    pools = {q.pool_id for q in qs}
    pool_map = {p: ds.pools[p] for p in pools}
    needed_docs = docs | {ds.unit(u).doc_id for p in pools for u in ds.pools[p]}
    return Dataset(
        name=ds.name,
        documents={d: ds.documents[d] for d in ds.documents if d in needed_docs},
        questions=qs,
        pools=pool_map,
        meta=dict(ds.meta),
        options=dict(ds.options),
    )

