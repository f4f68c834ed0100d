"""Hand-computed cases for the evidence text normalisation and overlap (harness/text.py); the
answer metrics are tested in tests/test_generation_answers.py."""

from __future__ import annotations

import pytest

from harness.text import normalize_text, word_f1, word_tokens


def test_normalize_text_casefolds_and_collapses_whitespace():
    assert normalize_text("  The\tQUICK\n\n brown\u00a0Fox  ") == "the quick brown fox"
    assert normalize_text("Straße") == "strasse"  # casefold, not lower
    assert normalize_text("a, b.") == "a, b."  # punctuation is kept


def test_word_tokens_drop_punctuation():
    assert word_tokens("Hit@10 of BM25-only, (dense)!") == ["hit", "10", "of", "bm25", "only", "dense"]
    assert word_tokens("  ") == []


def test_word_f1_hand_computed():
    # a: [we, study, qasper, papers, here] (5); b adds "the" (6); overlap 5
    # P = 5/5, R = 5/6 -> F1 = 2 * 1 * (5/6) / (1 + 5/6) = 10/11
    assert word_f1("We study QASPER papers here.", "We study the QASPER papers here.") == pytest.approx(10 / 11)
    # multiset overlap: a=[a, a, b], b=[a, c] -> overlap 1, P=1/3, R=1/2, F1 = 0.4
    assert word_f1("a a b", "a c") == pytest.approx(0.4)
    assert word_f1("x y", "z") == 0.0
    assert word_f1("", "") == 1.0
    assert word_f1("", "x") == 0.0
