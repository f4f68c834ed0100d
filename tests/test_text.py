"""Hand-computed cases for the text normalisation and overlap scores (harness/text.py)."""

from __future__ import annotations

import pytest

from harness.text import (
    answer_f1,
    exact_match,
    max_token_f1,
    normalize_text,
    squad_normalize,
    token_f1,
    word_tokens,
)


def test_normalize_text_casefolds_and_collapses_whitespace():
    assert normalize_text("  The\tQUICK\n\n brown\u00a0Fox  ") == "the quick brown fox"
    assert normalize_text("Straße") == "strasse"  # casefold, not lower
    assert normalize_text("a, b.") == "a, b."  # punctuation is kept


def test_word_tokens_drop_punctuation():
    assert word_tokens("Hit@10 of BM25-only, (dense)!") == ["hit", "10", "of", "bm25", "only", "dense"]
    assert word_tokens("  ") == []


def test_token_f1_hand_computed():
    # a: [we, study, qasper, papers, here] (5); b adds "the" (6); overlap 5
    # P = 5/5, R = 5/6 -> F1 = 2 * 1 * (5/6) / (1 + 5/6) = 10/11
    assert token_f1("We study QASPER papers here.", "We study the QASPER papers here.") == pytest.approx(10 / 11)
    # multiset overlap: a=[a, a, b], b=[a, c] -> overlap 1, P=1/3, R=1/2, F1 = 0.4
    assert token_f1("a a b", "a c") == pytest.approx(0.4)
    assert token_f1("x y", "z") == 0.0
    assert token_f1("", "") == 1.0
    assert token_f1("", "x") == 0.0


def test_squad_normalize():
    assert squad_normalize("The  Cat's hat, an apple!") == "cats hat apple"
    assert squad_normalize("Theory of a thing") == "theory of thing"  # 'the' inside a word stays


def test_exact_match_and_max_f1():
    assert exact_match("the Eiffel tower.", ["Eiffel Tower", "Paris"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert exact_match("x", []) == 0.0
    # pred [eiffel] vs gold [eiffel, tower]: P=1, R=1/2 -> 2/3
    assert answer_f1("Eiffel", "the Eiffel Tower") == pytest.approx(2 / 3)
    assert max_token_f1("Eiffel", ["Paris", "the Eiffel Tower", "Louvre"]) == pytest.approx(2 / 3)
    assert max_token_f1("Eiffel", []) == 0.0
    # only articles/punctuation on both sides: both empty -> 1.0 (SQuAD v2 convention)
    assert answer_f1("the", "a.") == 1.0
    assert answer_f1("the", "Paris") == 0.0
