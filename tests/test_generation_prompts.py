"""Prompt rules (seed 000): evidence cap, citations, abstention string, yes/no, no-retrieval."""

from harness.generation.prompts import (
    ABSTAIN,
    MAX_EVIDENCE_CHARS,
    MAX_OUTPUT_TOKENS,
    EvidenceUnit,
    evidence_block,
    no_retrieval_messages,
    rag_messages,
)


def test_constants():
    assert ABSTAIN == "Insufficient evidence."
    assert MAX_EVIDENCE_CHARS == 12_000
    assert MAX_OUTPUT_TOKENS == 256


def test_rag_prompt_numbers_units_and_states_the_rules():
    units = [EvidenceUnit("d#3", "We use BERT."), EvidenceUnit("d#0", "Table 1: results", "caption")]
    p = rag_messages("Which encoder?", units)
    system, user = p.messages[0]["content"], p.messages[1]["content"]
    assert [m["role"] for m in p.messages] == ["system", "user"]
    assert f"reply exactly: {ABSTAIN}" in system
    assert "Cite" in system and "[1]" in system
    assert "[1] We use BERT.\n\n[2] (caption) Table 1: results" in user
    assert user.rstrip().endswith("Question: Which encoder?\nAnswer:")
    assert p.unit_ids == ("d#3", "d#0") and not p.truncated
    assert p.evidence_chars == len("[1] We use BERT.\n\n[2] (caption) Table 1: results")
    assert "Yes or No" not in system
    assert "Yes or No" in rag_messages("Do they?", units, boolean=True).messages[0]["content"]


def test_evidence_cap_is_exact():
    # 5 units of 5,000 characters: unit 1 fits (4 + 5000 = 5004), unit 2 fits (2 + 4 + 5000 ->
    # 10010), unit 3 gets the remaining 1,990 characters (2 + 4 label + 1984 text), 4-5 dropped
    units = [EvidenceUnit(str(i), "x" * 5000) for i in range(5)]
    block, ids, truncated = evidence_block(units)
    assert len(block) == MAX_EVIDENCE_CHARS
    assert ids == ("0", "1", "2") and truncated
    assert block.count("x") == 5000 + 5000 + (12_000 - 5004 - 5006 - 6)
    # a remainder under 200 characters is dropped rather than cut
    units = [EvidenceUnit("a", "y" * 11_900), EvidenceUnit("b", "z" * 500)]
    block, ids, truncated = evidence_block(units)
    assert ids == ("a",) and truncated and len(block) == 4 + 11_900
    p = rag_messages("q", [EvidenceUnit(str(i), "w " * 4000) for i in range(10)])
    assert p.evidence_chars <= MAX_EVIDENCE_CHARS and p.truncated


def test_accepts_strings_and_dataset_units():
    from harness.data.schema import Unit

    u = Unit(unit_id="p#1", doc_id="p", index=1, kind="heading", text="Experiments ::: Setup")
    p = rag_messages("q", [u, "free text"])
    assert p.unit_ids == ("p#1", "1")
    assert "[1] (heading) Experiments ::: Setup" in p.messages[1]["content"]


def test_no_retrieval_prompt():
    p = no_retrieval_messages("What is BERT?")
    assert p.kind == "no_retrieval" and p.unit_ids == ()
    text = " ".join(m["content"] for m in p.messages)
    assert "Evidence" not in text and ABSTAIN not in text
    assert "own knowledge" in p.messages[0]["content"]
    assert "Yes or No" in no_retrieval_messages("Is it?", boolean=True).messages[0]["content"]
