"""HotpotQA distractor loader on its own fixture (and on the shared sample when present)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.data import load_dataset
from harness.errors import DataError

FIXTURE = Path(__file__).parent / "fixtures" / "data" / "hotpot-fixture.json"


def test_hotpotqa_units_gold_answers():
    ds = load_dataset({"loader": "hotpotqa", "path": str(FIXTURE)})
    assert [(u.unit_id, u.text, u.section) for u in ds.documents["h1"]] == [
        ("h1#0", "Gamma Daily: Gamma Daily is a newspaper. It closed in 1990.", "Gamma Daily"),
        ("h1#1", "Alpha Weekly: Alpha Weekly was founded in 1844.", "Alpha Weekly"),
        ("h1#2", "Beta Monthly: Beta Monthly is a magazine. It was founded in 1989.", "Beta Monthly"),
    ]
    q = {x.qid: x for x in ds.questions}
    assert q["h1"].gold_unit_ids == ("h1#1", "h1#2")
    assert q["h1"].evidence_match == {"exact": 2, "fuzzy": 0, "unmatched": 0}
    assert (q["h1"].doc_id, q["h1"].pool_id, q["h1"].answers, q["h1"].answer_type) == ("h1", "h1", ("Alpha Weekly",), "span")
    assert q["h2"].gold_unit_ids == ("h2#0",)
    assert q["h2"].evidence_match == {"exact": 1, "fuzzy": 0, "unmatched": 1}
    assert q["h2"].answer_type == "yes_no"
    assert ds.pools == {"h1": ["h1#0", "h1#1", "h1#2"], "h2": ["h2#0", "h2#1"]}
    assert ds.meta["licence"] == "CC BY-SA 4.0"


@pytest.mark.parametrize(
    "mutate, field, problem",
    [
        (lambda d: d[1].pop("_id"), "[1]._id", "missing key"),
        (lambda d: d[1].update(_id="h1"), "[1]._id", "duplicate id 'h1'"),
        (lambda d: d[0]["context"][1].pop(), "[0].context[1]", "expected [title, [sentences]]"),
        (lambda d: d[0]["supporting_facts"][0].__setitem__(1, "0"), "[0].supporting_facts[0][1]", "expected an integer"),
        (lambda d: d[1].update(context=[]), "[1].context", "no units"),
    ],
)
def test_hotpotqa_validation(tmp_path, mutate, field, problem):
    data = json.loads(FIXTURE.read_text())
    mutate(data)
    p = tmp_path / "hotpot-bad.json"
    p.write_text(json.dumps(data))
    with pytest.raises(DataError) as e:
        load_dataset({"loader": "hotpotqa", "path": str(p)})
    assert e.value.source == "hotpot-bad.json" and e.value.field == field
    assert problem in str(e.value)


# A real 100-question distractor sample, if the developer points at one (never committed).
SAMPLE = os.environ.get("HARNESS_HOTPOTQA_SAMPLE", "")


@pytest.mark.skipif(not (SAMPLE and Path(SAMPLE).is_file()), reason="set HARNESS_HOTPOTQA_SAMPLE to a real sample")
def test_real_sample_when_present():
    ds = load_dataset({"loader": "hotpotqa", "path": SAMPLE})
    s = ds.stats()
    assert s["questions"] == 100 and s["documents"] == 100
    # every real distractor item has 10 paragraphs and 2 supporting titles
    assert s["units"] == sum(len(us) for us in ds.documents.values()) == 1000
    assert s["questions_with_evidence"] == 100
