"""Unit embeddings cached by content hash: a rebuild, a grown corpus and a corrupt cache file
give the same outcome table as encoding everything afresh, and a grown corpus encodes only its
new texts (real packaged MiniLM on a slice of real BoolQ passages)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.data import load_dataset
from harness.retrieval.table import build_outcome_table

ARMS = {"k": 10, "candidates": 30, "precision": "fp32"}
MAXSIM = {"name": "maxsim"}


def _numbers(frame: pd.DataFrame) -> pd.DataFrame:
    """Every column but measured wall times (they differ between any two builds)."""
    return frame[[c for c in frame.columns if not c.endswith("_ms")]].reset_index(drop=True)


def _texts(ds) -> set[str]:
    return {ds.unit(u).text for u in ds.pools["global"]} | {q.text for q in ds.questions}


@pytest.mark.slow
def test_cached_embeddings_equal_fresh_ones_and_only_new_texts_are_encoded(tmp_path, capsys):
    small = load_dataset({"loader": "boolq", "n_questions": 30})
    grown = load_dataset({"loader": "boolq", "n_questions": 45})
    tables = tmp_path / "tables"

    fresh = build_outcome_table(grown, {**ARMS, "embedding_cache": False}, MAXSIM, cache_dir=tmp_path / "nocache",
                                progress=False)
    assert fresh.info["embedding_cache"] is None
    assert not (tmp_path / "nocache" / "_embeddings").exists()

    first = build_outcome_table(small, ARMS, MAXSIM, cache_dir=tables, progress=False)
    assert first.info["embedding_cache"] == {"texts_encoded": len(_texts(small)), "texts_read": 0}
    first_segments = sorted((tables / "_embeddings").glob("*/seg-*.parquet"))  # units' call, questions' call

    grown_table = build_outcome_table(grown, ARMS, MAXSIM, cache_dir=tables, progress=False)
    new = _texts(grown) - _texts(small)
    assert 0 < len(new) < len(_texts(grown))
    assert grown_table.info["embedding_cache"] == {"texts_encoded": len(new),
                                                   "texts_read": len(_texts(grown)) - len(new)}
    pd.testing.assert_frame_equal(_numbers(grown_table.frame), _numbers(fresh.frame))

    # corrupt cache files: one line each, moved aside, their texts encoded again, the same numbers
    assert len(first_segments) == 2
    for seg in first_segments:
        data = bytearray(seg.read_bytes())
        data[len(data) // 2] ^= 0xFF
        seg.write_bytes(bytes(data))
    import shutil

    shutil.rmtree(tables / grown_table.key)
    again = build_outcome_table(grown, ARMS, MAXSIM, cache_dir=tables, progress=False)
    err = capsys.readouterr().err
    assert all(f"cache file {seg} is corrupt" in err for seg in first_segments) and "encoded again" in err
    assert again.info["embedding_cache"]["texts_encoded"] == len(_texts(small))
    pd.testing.assert_frame_equal(_numbers(again.frame), _numbers(fresh.frame))
    assert np.isfinite(again.frame["keep.hit@10"]).all()
