"""Shared fixtures. Tests never need ../shared; real-data tests fetch what they need themselves."""

from __future__ import annotations

import pytest

from harness.synthetic import synthetic_outcome_table


@pytest.fixture
def planted_table():
    """Synthetic outcome table (300 questions, 60 documents) with a planted routing signal."""
    return synthetic_outcome_table(n_docs=60, questions_per_doc=5, seed=0)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """Point the harness cache at a fresh temporary folder for this test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    return cache
