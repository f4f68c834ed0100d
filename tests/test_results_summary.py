"""The rules that judge each seed paper's finding for docs/results.md's opening table, and the
table itself: a reason shared by rows is one footnote, the cells hold words only."""

from __future__ import annotations

import math
import re

import pytest

from harness import results_summary as rs

NAMES = ("a minus b", "a minus c")


@pytest.mark.parametrize("bounds, status, reasons", [
    ((-0.01, 0.02, -0.03, 0.01), rs.REPRODUCED, []),
    ((0.01, 0.02, -0.03, 0.01), rs.PARTLY, ["our interval of a minus b excludes zero"]),
    ((0.01, 0.02, -0.03, -0.01), rs.NOT_REPRODUCED,
     ["our interval of a minus b excludes zero", "our interval of a minus c excludes zero"]),
    ((math.nan, 0.02, -0.03, 0.01), rs.NOT_REPRODUCED, ["not logged: a minus b"]),
])
def test_intervals_that_include_zero(bounds, status, reasons):
    c = rs.both_include_zero("000", "f", "d", *bounds, names=NAMES)
    assert (c.status, c.reasons) == (status, reasons)
    assert c.rule == "both_include_zero" and c.args == list(bounds) and c.settings == {"names": NAMES}


def test_direction_share_and_significance_rules():
    assert rs.more_than("003", "f", "d", 8, 3, what="x are").status == rs.REPRODUCED
    assert rs.more_than("003", "f", "d", 3, 8, what="x are").reasons == ["here x are the other way round"]
    assert rs.more_than("003", "f", "d", 3, 3, what="x are").status == rs.NOT_REPRODUCED
    assert rs.share_above("003", "f", "d", 0.57, what="w").status == rs.REPRODUCED
    assert rs.share_above("003", "f", "d", 0.2, what="w").status == rs.PARTLY
    assert rs.share_above("003", "f", "d", 0.0, what="w").status == rs.NOT_REPRODUCED
    assert rs.positive_and_significant("002", "f", "d", 0.3, 0.01, alpha=0.05, what="r").status == rs.REPRODUCED
    assert rs.positive_and_significant("002", "f", "d", 0.3, 0.2, alpha=0.05, what="r").status == rs.PARTLY
    assert rs.positive_and_significant("002", "f", "d", -0.3, 0.01, alpha=0.05, what="r").status == rs.NOT_REPRODUCED
    assert rs.positive_and_significant("002", "f", "d", math.nan, 0.01, alpha=0.05, what="r").reasons == ["not logged: r"]


def test_a_shared_reason_is_one_footnote_and_cells_hold_words_only():
    claims = [rs.more_than("003", "rescues over harms", "qasper_yesno", 3, 8, what="x are"),
              rs.more_than("003", "rescues over harms", "hotpotqa", 3, 8, what="x are"),
              rs.positive_and_significant("002", "r over zero", "hotpotqa", 0.1, 0.5, alpha=0.05, what="r")]
    lines = rs.summary_lines(claims)
    assert lines[0] == "## Summary" and "(1 partly, 2 not reproduced)" in lines[2]
    notes = [line for line in lines if line.startswith("- (")]
    texts = [line.split(") ", 1)[1] for line in notes]
    assert len(texts) == len(set(texts))  # each reason once
    assert texts.count(rs.GENERATOR) == 1 and texts.count(rs.DATA) == 1  # shared by seeds 002 and 003
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| finding")]
    assert len(rows) == 3
    letters = [set(row.split("|")[4].replace(",", " ").split()) for row in rows]
    assert letters[0] == letters[1]  # the same reasons: the same letters
    for row in rows:  # after the finding: words only, no number in any cell
        assert not re.search(r"\d", "|".join(row.split("|")[2:]))
    assert rs.summary_lines([]) == []
