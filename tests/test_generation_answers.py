"""Answer metrics: hand-checked cases (arithmetic in the comments) and an independent
re-implementation of the official SQuAD v1.1 evaluation logic."""

import math
import random
import re
import string
from collections import Counter

import pytest

from harness.generation.answers import (
    exact_match,
    is_abstention,
    normalize_answer,
    quality_gain,
    score_answer,
    strip_citations,
    token_f1,
    utility_class,
    yes_no_label,
)


# ---- the official SQuAD v1.1 evaluate-v1.1.py logic, written out again independently ----
def _official_normalize(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _official_f1(prediction, ground_truth):
    p = _official_normalize(prediction).split()
    g = _official_normalize(ground_truth).split()
    common = Counter(p) & Counter(g)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(p)
    recall = 1.0 * num_same / len(g)
    return (2 * precision * recall) / (precision + recall)


def _official_em(prediction, ground_truth):
    return _official_normalize(prediction) == _official_normalize(ground_truth)


def _max_over(fn, prediction, golds):
    return max(fn(prediction, g) for g in golds)


def test_matches_official_squad_v11_on_random_strings():
    rng = random.Random(7)
    vocab = ["The", "the", "a", "An", "cat", "Cat,", "sat", "on", "mat.", "BERT-base", "(BERT)",
             "F1", "score!", "theory", "an-other", "  ", "\t", "Über", "naïve", "–", "a.b", "x"]
    checked = 0
    for _ in range(400):
        pred = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 6)))
        golds = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 3))]
        assert normalize_answer(pred) == _official_normalize(pred)
        assert exact_match(pred, golds) == float(_max_over(_official_em, pred, golds))
        assert token_f1(pred, golds) == pytest.approx(_max_over(_official_f1, pred, golds), abs=1e-12)
        checked += 1
    assert checked == 400
    # the random cases hit every branch: some exact matches, some partial F1, some zero
    ems = [exact_match("cat sat", ["The cat sat."]), token_f1("cat", ["cat sat"]), token_f1("x", ["cat"])]
    assert ems == [1.0, pytest.approx(2 / 3), 0.0]


def test_normalisation_by_hand():
    # lower -> "the  cat, sat on a mat!" -> drop punctuation -> "the  cat sat on a mat"
    # -> articles to spaces -> "  cat sat on   mat" -> whitespace -> "cat sat on mat"
    assert normalize_answer("The  Cat, sat on a MAT!") == "cat sat on mat"
    # punctuation inside a word is deleted, not split: "BERT-base" -> "bertbase"
    assert normalize_answer("BERT-base") == "bertbase"
    # "theory" keeps its "the": articles are whole words only
    assert normalize_answer("A theory") == "theory"


@pytest.mark.parametrize(
    "pred, golds, em, f1",
    [
        # equal after normalisation (article and case dropped)
        ("the Eiffel Tower", ["Eiffel Tower"], 1.0, 1.0),
        # "large transformer model" vs "transformer model": common 2, P = 2/3, R = 2/2
        # F1 = 2 * (2/3) * 1 / (2/3 + 1) = (4/3) / (5/3) = 0.8
        ("a large transformer model", ["transformer model"], 0.0, 0.8),
        # "model uses transformer layers" vs "transformer model": common 2, P = 2/4, R = 1
        # F1 = 2 * 0.5 * 1 / 1.5 = 2/3
        ("the model uses transformer layers", ["transformer model"], 0.0, 2 / 3),
        # max over references: "paris" vs "london" -> 0; vs "paris france": P = 1, R = 1/2,
        # F1 = 2 * 1 * 0.5 / 1.5 = 2/3
        ("Paris", ["London", "Paris, France"], 0.0, 2 / 3),
        # multiset overlap: "cat cat cat" vs "cat": common min(3, 1) = 1, P = 1/3, R = 1
        # F1 = 2 * (1/3) / (4/3) = 0.5
        ("the cat cat cat", ["cat"], 0.0, 0.5),
        # "BERT base encoder" vs "BERT-base" -> ["bert","base","encoder"] vs ["bertbase"]: 0 common
        ("BERT base encoder", ["BERT-base"], 0.0, 0.0),
    ],
)
def test_em_f1_by_hand(pred, golds, em, f1):
    assert exact_match(pred, golds) == em
    assert token_f1(pred, golds) == pytest.approx(f1, abs=1e-12)
    s = score_answer(pred, golds, boolean=False)
    assert (s.em, s.f1) == (em, pytest.approx(f1, abs=1e-12))
    # correct = EM or F1 >= 0.8; the 0.8 boundary counts as correct
    assert s.correct == (em == 1.0 or f1 >= 0.8 - 1e-12)
    assert s.quality == pytest.approx(f1)


def test_correct_at_the_boundary_and_below():
    assert score_answer("a large transformer model", ["transformer model"]).correct  # F1 = 0.8
    assert not score_answer("the model uses transformer layers", ["transformer model"]).correct  # 2/3


def test_citations_are_not_part_of_the_answer():
    assert strip_citations("BERT-base [2].") == "BERT-base."
    assert strip_citations("Yes [1, 3] and [2-4] [5][6]") == "Yes and"
    s = score_answer("BERT-base [2].", ["BERT-base"])
    assert (s.em, s.f1, s.correct) == (1.0, 1.0, True)
    # without stripping, "bertbase 2" vs "bertbase" would give P = 1/2, R = 1, F1 = 2/3
    assert token_f1("BERT-base [2].", ["BERT-base"]) == pytest.approx(2 / 3)


def test_abstention_wrong_unless_unanswerable():
    assert is_abstention("Insufficient evidence.")
    assert is_abstention("insufficient evidence [1]")
    assert is_abstention("Insufficient evidence. The units do not say.")
    assert not is_abstention("Insufficient")
    assert not is_abstention("The evidence is insufficient evidence")  # must start with it
    right = score_answer("Insufficient evidence.", ["Unanswerable"])
    assert (right.em, right.f1, right.correct, right.abstained, right.unanswerable) == (1.0, 1.0, True, True, True)
    # any annotator marking it unanswerable makes abstention right (QASPER convention)
    assert score_answer("Insufficient evidence.", ["BERT", "Unanswerable"]).correct
    wrong = score_answer("Insufficient evidence.", ["BERT"])
    assert (wrong.em, wrong.f1, wrong.correct, wrong.abstained) == (0.0, 0.0, False, True)
    # explicit flag wins over the references
    assert score_answer("Insufficient evidence.", ["BERT"], unanswerable=True).correct
    # a real answer to an unanswerable question is scored against the references as they are
    s = score_answer("BERT", ["Unanswerable"])
    assert (s.em, s.f1, s.correct) == (0.0, 0.0, False)


def test_yes_no_mapping_and_accuracy():
    assert yes_no_label("Yes, they do [1].") == "yes"
    assert yes_no_label("no.") == "no"
    assert yes_no_label("[2] No") == "no"  # citation first
    assert yes_no_label("They do not.") == "other"
    assert yes_no_label("Yesterday") == "other"
    assert yes_no_label("The answer to this question is no. The evidence ...") == "no"  # first yes/no word
    assert yes_no_label("1. The answer is yes.\n2. The answer is no.") == "yes"
    assert yes_no_label("It is not known") == "other"
    assert yes_no_label("Insufficient evidence.") == "other"
    s = score_answer("Yes, they do [1].", ["Yes"])
    # boolean inferred from the references; EM on the text: "yes they do" != "yes" -> 0;
    # F1: common 1, P = 1/3, R = 1 -> 2 * (1/3) / (4/3) = 0.5
    assert (s.boolean, s.yes_no, s.correct, s.quality, s.em) == (True, "yes", True, 1.0, 0.0)
    assert s.f1 == pytest.approx(0.5)
    assert not score_answer("No.", ["Yes"]).correct
    assert not score_answer("They do.", ["Yes"]).correct
    assert not score_answer("Insufficient evidence.", ["No"]).correct
    # annotators disagreeing: either label is right
    assert score_answer("No", ["Yes", "No"]).correct


def _chars_of(categories: tuple[str, ...]) -> list[str]:
    """Every code point whose Unicode category starts with one of ``categories``."""
    import sys
    import unicodedata

    return [chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)).startswith(categories)]


def test_yes_no_label_reads_unicode_punctuation_as_a_word_boundary():
    # the cases, each once
    for text in ("\u201cYes\u201d", "Yes\u2014it does.", "Yes\u2026", "\u00abYes\u00bb", "\u00a1Yes!", "\u00bfNo?",
                 "\u300cYes\u300d", "\u201eNo\u201c, it does not.", "\uff39\uff45\uff53", "\u200bYes", "Yes\u00a0they do"):
        assert yes_no_label(text) in ("yes", "no"), text
    assert yes_no_label("\u201cNo\u201d \u2014 yes elsewhere") == "no"  # still the first word
    # the category: every punctuation, symbol and separator character around or after the word,
    # and every control and format character before it
    marks = _chars_of(("P", "S", "Z"))
    assert len(marks) > 7000
    for ch in marks:
        assert yes_no_label(f"{ch}Yes{ch}") == "yes", hex(ord(ch))
        assert yes_no_label(f"No{ch}it does not") == "no", hex(ord(ch))
    for ch in _chars_of(("Cc", "Cf")):
        assert yes_no_label(f"{ch}Yes") == "yes", hex(ord(ch))
    # letters are not boundaries: still whole words only
    for text in ("Yesterday", "\u00abNot\u00bb", "\u201cYesss\u201d", "Nope\u2026", "no\u0301"):
        assert yes_no_label(text) == "other", text
    assert score_answer("\u201cYes\u201d \u2014 it does.", ["Yes"]).correct


def test_utility_class_and_gain():
    assert utility_class(True, False) == 1  # RAG rescues
    assert utility_class(False, True) == -1  # RAG harms
    assert utility_class(True, True) == 0
    assert utility_class(False, False) == 0
    # log((1 + 0.01) / (0 + 0.01)) = log(101) = 4.61512...
    assert quality_gain(1.0, 0.0) == pytest.approx(math.log(101))
    assert quality_gain(0.5, 0.5) == 0.0


CHOICES = ("mitochondria", "A bird", "nucleus", "ribosome")


@pytest.mark.parametrize("text, named", [
    ("B", "A bird"), ("B.", "A bird"), ("(C) nucleus", "nucleus"), ("D: because", "ribosome"), ("[A]", "mitochondria"),
    ("A", "mitochondria"), ("nucleus", "nucleus"), ("The nucleus.", "nucleus"), ("a bird", "A bird"),
    ("A bird", "A bird"),  # the option's text, not the letter A followed by a word
    ("**B**", "A bird"), ("B, because", "A bird"), ("b)", "A bird"), ("(c)", "nucleus"), ("Answer: D", "ribosome"),
    ("The answer is C.", "nucleus"),
    ("Because", None), ("E", None), ("a", None), ("b", None), ("nucleus and ribosome", None), ("", None), ("...", None),
])
def test_the_option_an_answer_names(text, named):
    from harness.generation.answers import choice_of

    assert choice_of(text, CHOICES) == named


def test_multiple_choice_correct_means_the_gold_option_was_named():
    from harness.generation.answers import score_answer

    right = score_answer("C. [1]", ["nucleus"], choices=CHOICES)
    assert (right.correct, right.em, right.f1, right.quality) == (True, 1.0, 1.0, 1.0)
    wrong = score_answer("D", ["nucleus"], choices=CHOICES)
    assert (wrong.correct, wrong.em, wrong.quality) == (False, 0.0, 0.0) and wrong.f1 == 0.0
    # a wrong option that contains the gold's words is wrong, though its F1 is not 0
    contains = score_answer("B", ["nucleus"], choices=("nucleus", "cell nucleus"))
    assert not contains.correct and contains.f1 == pytest.approx(2 / 3)  # precision 1/2, recall 1
    none = score_answer("I think the cell", ["nucleus"], choices=CHOICES)
    assert not none.correct and none.em == 0.0
    # exact text before SQuAD's normalisation: "the liver" and "liver" normalise alike
    from harness.generation.answers import choice_of

    assert choice_of("liver", ("the liver", "liver")) == "liver" and choice_of("the liver", ("the liver", "liver")) == "the liver"
    assert choice_of("-", ("-", "x")) == "-" and choice_of("...", ("-", "x")) is None  # nothing left after normalising
