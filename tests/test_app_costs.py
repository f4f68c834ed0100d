"""Cost facts logged per job: mean stand-alone and marginal cost of the two arms (docs/metrics.md §2)."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.app import cost_facts


def test_cost_facts_hand_computed():
    frame = pd.DataFrame(
        {
            "keep.cost.total_ms": [10.0, 30.0],
            "keep.cost.rerank_pairs": [30, 30],
            "hybrid.cost.total_ms": [12.0, 34.0],
            "hybrid.cost.rerank_pairs": [30, 30],
            "hybrid.marginal.total_ms": [2.0, 4.0],
            "hybrid.marginal.rerank_pairs": [5, 8],
        }
    )
    facts = cost_facts(frame, ("keep", "hybrid"))
    assert facts == pytest.approx(
        {
            "table/keep/cost_total_ms_mean": 20.0,
            "table/keep/cost_rerank_pairs_mean": 30.0,
            "table/hybrid/cost_total_ms_mean": 23.0,
            "table/hybrid/cost_rerank_pairs_mean": 30.0,
            "table/hybrid/marginal_total_ms_mean": 3.0,
            "table/hybrid/marginal_rerank_pairs_mean": 6.5,
        }
    )


def test_cost_facts_skip_missing_columns(planted_table):
    assert cost_facts(planted_table, ("keep", "hybrid")) == {}


def test_dataset_facts_from_stats():
    from harness.app import dataset_facts
    from harness.data.qasper import load_qasper_files
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "data" / "qasper-fixture-v0.3.json"
    ds = load_qasper_files([fixture])
    stats = ds.stats()
    facts = dataset_facts(stats)
    # independent count straight from the dataset object
    assert facts["dataset/documents"] == len(ds.documents)
    assert facts["dataset/questions"] == len(ds.questions)
    assert facts["dataset/units"] == sum(len(u) for u in ds.documents.values())
    assert facts["dataset/units_caption"] == sum(u.kind == "caption" for us in ds.documents.values() for u in us)
    for kind in ("exact", "fuzzy", "unmatched"):
        assert facts[f"dataset/evidence_{kind}"] == sum(q.evidence_match.get(kind, 0) for q in ds.questions)
    assert dataset_facts({}) == {}
