"""Numbers independent of batching: a question's scores do not depend on the shard or batch size.

The packaged MiniLM (fp32) encodes each text in batches of texts of one token length, without
padding, with enough token rows per forward pass (``DenseEncoder.encode``):
every text's vector and token embeddings are then bit-identical whatever the other texts of
its call. That is what lets the outcome-table key leave ``arms.shard_size`` out, so these tests
compare EXACTLY, not approximately.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.retrieval.arms import batch_independent
from harness.retrieval.encoder import EXACT_MIN_TOKENS, DenseEncoder, same_length_batches
from harness.retrieval.table import build_outcome_table
from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset

FIXTURE = Path(__file__).parent / "fixtures" / "data" / "qasper-fixture-v0.3.json"


def _fixture():
    from harness.data.qasper import load_qasper_files

    return load_qasper_files([FIXTURE])


@pytest.fixture(scope="module")
def minilm():
    return DenseEncoder(precision="fp32", batch_size=64)


def _same(a, b) -> bool:
    return np.array_equal(a.vectors, b.vectors) and all(np.array_equal(x, y) for x, y in zip(a.tokens, b.tokens))


@pytest.mark.slow
def test_each_text_is_encoded_the_same_whatever_its_batch(minilm):
    ds = _fixture()
    texts = [u.text for us in ds.documents.values() for u in us][:60] + [q.text for q in ds.questions]
    texts += ["", "a", "[SEP]", "ok then"]  # shorter than EXACT_MIN_TOKENS: filled with copies
    ref = minilm.encode(texts)
    rng = random.Random(0)
    for batch_size in (1, 3, 16, 64):
        enc = DenseEncoder(precision="fp32", batch_size=batch_size)
        enc._st = minilm._loaded()  # same weights, no second load
        order = list(range(len(texts)))
        rng.shuffle(order)
        part = order[: len(order) // 2 + batch_size]  # another subset, another order
        got = enc.encode([texts[i] for i in part])
        for row, i in enumerate(part):
            assert np.array_equal(got.vectors[row], ref.vectors[i]), (batch_size, texts[i][:40])
            assert np.array_equal(got.tokens[row], ref.tokens[i]), (batch_size, texts[i][:40])
        assert enc.batch_size == batch_size, "the batch size is restored"
    assert got.n_tokens.tolist() == [ref.n_tokens[i] for i in part]
    # the same vectors as the encoder's own call, up to float rounding
    plain = minilm.encode(texts)
    assert np.allclose(plain.vectors, ref.vectors, atol=1e-5)
    assert all(np.allclose(x, y, atol=1e-5) for x, y in zip(plain.tokens, ref.tokens))
    assert EXACT_MIN_TOKENS >= 12
    # the plan of forward passes: one length per pass, input order, short passes filled
    plan = same_length_batches(np.array([3, 40, 3, 3, 40]), 2)
    assert plan == [([1, 4], [1, 4]), ([0, 2], [0, 2] + [2] * 20), ([3], [3] * 22)]


def test_the_passes_run_in_an_order_that_spreads_the_lengths_over_every_prefix():
    """``spread_order``: a permutation (bit-reversed), longest pass first, and the first 2^j of
    64 passes are every (64 / 2^j)-th: the passes measured first are a sample of all lengths."""
    from harness.retrieval.encoder import spread_order

    assert spread_order(0) == [] and spread_order(1) == [0] and spread_order(5) == [0, 4, 2, 1, 3]
    for n in range(1, 130):
        assert sorted(spread_order(n)) == list(range(n))
    order = spread_order(64)
    for j in range(7):
        assert sorted(order[: 2**j]) == list(range(0, 64, 64 // 2**j))


@pytest.mark.slow
def test_real_table_is_identical_for_every_shard_and_batch_size(tmp_path, isolated_cache, minilm):
    """Tiny QASPER fixture (2 papers, 6 questions), real packaged MiniLM, fp32: shard sizes 1
    and 2 (one pool per shard vs both in one) and encoder batch sizes 64, 5 and 2 give the same
    table, every non-timing column compared exactly."""
    ds = _fixture()
    assert len(ds.pools) == 2
    builds = {}
    for shard_size, batch_size in ((1, 64), (2, 5), (1, 2)):
        enc = DenseEncoder(precision="fp32", batch_size=batch_size)
        enc._st = minilm._loaded()
        cfg = {"k": 10, "candidates": 30, "precision": "fp32", "shard_size": shard_size,
               "encoder": {"batch_size": batch_size}}
        builds[(shard_size, batch_size)] = build_outcome_table(
            ds, cfg, MAXSIM, cache_dir=tmp_path / f"s{shard_size}-b{batch_size}", progress=False, encoder=enc)
    tables = list(builds.values())
    assert len({t.key for t in tables}) == 1, "shard size and batch size are not in the key"
    assert all(t.info["shard_size_in_key"] is False for t in tables)
    assert "shard_size" not in tables[0].info["key_material"]["params"]
    assert [t.info["counts"]["shards"] for t in tables] == [2, 1, 2]
    cols = [c for c in tables[0].frame.columns if not c.endswith("_ms")]
    assert any(c.startswith("keep.scores") for c in cols) and any(c.startswith("feat.") for c in cols)
    for t in tables[1:]:
        pd.testing.assert_frame_equal(tables[0].frame[cols], t.frame[cols], check_exact=True)


def test_shard_size_stays_in_the_key_unless_proven(tmp_path):
    assert batch_independent(DenseEncoder(precision="fp32"))
    assert not batch_independent(DenseEncoder(precision="bf16")), "bf16 is not proven batch-independent"
    assert not batch_independent(FakeEncoder()), "an injected encoder must declare it"
    a = build_outcome_table(tiny_dataset(3), ARMS_CFG, MAXSIM, cache_dir=tmp_path / "a", progress=False,
                            encoder=FakeEncoder())
    b = build_outcome_table(tiny_dataset(3), {**ARMS_CFG, "shard_size": 2}, MAXSIM, cache_dir=tmp_path / "a",
                            progress=False, encoder=FakeEncoder())
    assert a.info["shard_size_in_key"] and a.key != b.key


class ExactFake(FakeEncoder):
    batch_independent = True


def test_resume_with_another_shard_size_recomputes_only_other_partitions(tmp_path, capsys):
    ds = tiny_dataset(3)  # 4 pools
    cache = tmp_path / "tables"
    first = build_outcome_table(ds, ARMS_CFG, MAXSIM, cache_dir=cache, progress=False, encoder=ExactFake())
    assert not first.info["shard_size_in_key"] and first.info["counts"]["shards"] == 4
    folder = first.path.parent
    for name in ("table.parquet", "info.json"):  # interrupted before the table was written
        (folder / name).unlink()
    enc = ExactFake()
    again = build_outcome_table(ds, {**ARMS_CFG, "shard_size": 3}, MAXSIM, cache_dir=cache, progress=False, encoder=enc)
    assert again.key == first.key
    # shard 0 (3 pools now, 1 before) and shard 1 (1 pool, another one) are recomputed, silently
    assert again.info["counts"] == {**again.info["counts"], "shards": 2, "shards_computed": 2, "shards_reused": 0}
    assert "corrupt" not in capsys.readouterr().err
    cols = [c for c in first.frame.columns if not c.endswith("_ms")]
    pd.testing.assert_frame_equal(first.frame[cols], again.frame[cols])
