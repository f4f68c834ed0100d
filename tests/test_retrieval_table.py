"""Arms, features, costs and the cached outcome table, on a hand-built pool with a fake encoder.

The fake encoder (tests/helpers/retrieval.py) returns fixed vectors, so every ranking below is
computed by hand:
dense cosines u0..u3 = 0.9, 0.8, 0.1, 0.5; BM25 matches only u2 ("zeta"); MaxSim scores
u0 = 1, u1 = 2, u2 = 1.4, u3 = 0. With candidates = 2 and k = 2:
keep   = rerank{u0, u1}       -> [u1, u0]  (gold u1: hit@1)
RRF    = u0 1/61+1/62, u2 1/64+1/61, u1 1/62+1/63, u3 1/63+1/64 -> u0, u2, u1, u3
hybrid = rerank{u0, u2}       -> [u2, u0]  (loses keep's hit: a harm); 1 new pair of 2
bm25   = [u2, u0] (u0 by pool order among zero scores); dense = [u0, u1].
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from harness.data.schema import Dataset, Question
from harness.errors import ConfigError
from harness.retrieval import arms as arms_mod
from harness.retrieval.feature_names import FEATURE_SETS, column
from harness.retrieval.table import build_outcome_table
from tests.helpers.retrieval import ARMS_CFG, MAXSIM, FakeEncoder, tiny_dataset


def _build(tmp_path, **kw):
    enc = kw.pop("encoder", None) or FakeEncoder()
    cfg = {**ARMS_CFG, **kw.pop("cfg", {})}
    return build_outcome_table(kw.pop("dataset", None) or tiny_dataset(), cfg, MAXSIM,
                               cache_dir=tmp_path / "tables", progress=False, encoder=enc, **kw), enc


def test_arms_rankings_outcomes_and_costs_match_hand_computation(tmp_path):
    t, _ = _build(tmp_path)
    row = t.frame.set_index("qid").loc["q0"]
    assert list(row["keep.top2"]) == ["d0#1", "d0#0"]
    assert list(row["keep.scores2"]) == pytest.approx([2.0, 1.0])
    assert list(row["hybrid.top2"]) == ["d0#2", "d0#0"]
    assert list(row["hybrid.scores2"]) == pytest.approx([1.4, 1.0])
    assert list(row["bm25.top2"]) == ["d0#2", "d0#0"]
    assert row["bm25.scores2"][0] == pytest.approx(math.log(7 / 3)) and row["bm25.scores2"][1] == 0
    assert list(row["dense.top2"]) == ["d0#0", "d0#1"]
    assert list(row["dense.scores2"]) == pytest.approx([0.9, 0.8], abs=1e-6)
    assert (row["keep.hit@1"], row["hybrid.hit@2"], row["dense.hit@1"], row["dense.hit@2"]) == (1, 0, 0, 1)
    assert row["dense.mrr@2"] == 0.5 and row["dense.first_gold_rank"] == 2 and row["keep.recall@2"] == 1.0
    assert math.isnan(row["hybrid.first_gold_rank"])
    # reranker pairs: stand-alone vs marginal (hybrid reuses keep's score for u0)
    assert (row["keep.cost.rerank_pairs"], row["hybrid.cost.rerank_pairs"]) == (2, 2)
    assert (row["keep.marginal.rerank_pairs"], row["hybrid.marginal.rerank_pairs"]) == (0, 1)
    assert row["bm25.cost.rerank_pairs"] == 0 and row["dense.cost.rerank_pairs"] == 0
    assert row["bm25.cost.encode_ms"] == 0 and row["dense.cost.bm25_ms"] == 0
    for arm in ("keep", "hybrid", "bm25", "dense"):
        parts = sum(row[f"{arm}.cost.{s}"] for s in ("encode_ms", "bm25_ms", "fusion_ms", "rerank_ms"))
        assert row[f"{arm}.cost.total_ms"] == pytest.approx(parts)
    assert row["hybrid.marginal.total_ms"] < row["hybrid.cost.total_ms"]
    assert row["keep.marginal.total_ms"] == 0


def test_features_on_hand_case(tmp_path):
    t, _ = _build(tmp_path, cfg={"qpp_k": 2})  # QPP top-2: dense [0.9, 0.8], BM25 [ln 7/3, 0]
    row = t.frame.set_index("qid").loc["q0"]
    assert set(column(n) for n in FEATURE_SETS["all"]) <= set(t.frame.columns)
    exp = {"dense_top1": 0.9, "dense_margin12": 0.1, "dense_mean_top5": 0.575, "overlap_dense_rerank10": 0.2,
           "rerank_top1_dense_rank": 2, "caption_frac_rerank10": 0.5, "bm25_top1": math.log(7 / 3),
           "bm25_margin12": math.log(7 / 3), "q_len_words": 4, "q_has_digit": 0, "q_n_capitalised": 0,
           "q_wh_which": 1, "q_wh_yesno": 0, "qpp_uwig_dense": 0.85, "qpp_wig_dense": 0.85 - 0.575,
           "qpp_qc_dense": 0.05, "qpp_nqc_dense": 0.05 / 0.575,
           "qpp_wig_bm25": math.log(7 / 3) / 4, "qpp_qc_bm25": math.log(7 / 3) / 2,
           "qpp_usmv_bm25": math.log(7 / 3) * math.log(2) / 2, "qpp_smv_bm25": 2 * math.log(2)}
    for name, v in exp.items():
        assert row[column(name)] == pytest.approx(v, abs=1e-6), name


def test_table_columns_rows_and_evidence(tmp_path):
    t, _ = _build(tmp_path)
    f = t.frame
    assert f["qid"].tolist() == sorted(f["qid"]) == ["q0", "q1"]
    assert f["has_evidence"].tolist() == [True, False] and f["n_gold"].tolist() == [1, 0]
    for arm in ("keep", "hybrid", "bm25", "dense"):
        for c in ("hit@1", "hit@2", "recall@2", "mrr@2", "first_gold_rank", "top2", "scores2", "cost.encode_ms",
                  "cost.bm25_ms", "cost.fusion_ms", "cost.rerank_ms", "cost.total_ms", "cost.rerank_pairs",
                  "marginal.total_ms", "marginal.rerank_pairs"):
            assert f"{arm}.{c}" in f.columns
    assert f.loc[1, "keep.hit@2"] == 0 and math.isnan(f.loc[1, "keep.recall@2"])
    assert t.path.name == "table.parquet" and t.path.parent.name == t.key
    info = json.loads((t.path.parent / "info.json").read_text())
    assert info["precision"] == "fp32" and info["counts"]["questions"] == 2 and info["code_version"]


def test_second_build_loads_cache_without_model_work(tmp_path, monkeypatch):
    t1, enc1 = _build(tmp_path, dataset=tiny_dataset(3))
    assert enc1.calls > 0

    def boom(*a, **k):
        raise AssertionError("computed again")

    monkeypatch.setattr(arms_mod, "compute_shard", boom)
    monkeypatch.setattr("harness.retrieval.table.compute_shard", boom)
    t2, enc2 = _build(tmp_path, dataset=tiny_dataset(3))
    assert enc2.calls == 0 and t2.key == t1.key
    pd.testing.assert_frame_equal(t1.frame, t2.frame)
    monkeypatch.undo()
    # a different parameter is a different key
    t3, enc3 = _build(tmp_path / "other", dataset=tiny_dataset(3), cfg={"rrf_k": 10})
    assert t3.key != t1.key


def test_interrupted_build_resumes_from_written_shards(tmp_path):
    ds = tiny_dataset(3)  # 4 pools -> 4 shards of one pool; 2 encoder calls per shard
    with pytest.raises(RuntimeError, match="simulated crash"):
        _build(tmp_path, dataset=ds, encoder=FakeEncoder(fail_after_calls=2))
    folder = next((tmp_path / "tables").iterdir())
    assert [p.name for p in sorted((folder / "shards").glob("*.parquet"))] == ["shard-00000.parquet"]
    assert not (folder / "table.parquet").exists() and not (folder / "info.json").exists()
    assert not list(folder.rglob("*.tmp"))
    enc = FakeEncoder()
    t, _ = _build(tmp_path, dataset=ds, encoder=enc)
    assert enc.calls == 2 * 3  # only the three remaining shards
    assert t.info["counts"]["shards_reused"] == 1 and t.info["counts"]["shards_computed"] == 3
    fresh, _ = _build(tmp_path / "fresh", dataset=ds)
    cols = [c for c in fresh.frame.columns if ".cost." not in c and ".marginal." not in c]
    pd.testing.assert_frame_equal(t.frame[cols], fresh.frame[cols])


def test_same_numbers_whatever_the_shard_size(tmp_path):
    ds = tiny_dataset(4)
    a, _ = _build(tmp_path / "a", dataset=ds, cfg={"shard_size": 1})
    b, _ = _build(tmp_path / "b", dataset=ds, cfg={"shard_size": 32})
    cols = [c for c in a.frame.columns if "_ms" not in c]
    pd.testing.assert_frame_equal(a.frame[cols], b.frame[cols])


def test_failed_build_leaves_no_table(tmp_path):
    with pytest.raises(RuntimeError):
        _build(tmp_path, encoder=FakeEncoder(fail_after_calls=0))
    assert not list((tmp_path / "tables").rglob("table.parquet"))
    assert not list((tmp_path / "tables").rglob("*.parquet"))


@pytest.mark.parametrize("cfg,key", [({"candidates": 1}, "arms.candidates"), ({"k": "ten"}, "arms.k"),
                                     ({"precision": "half"}, "precision"), ({"bm25": {"b": 2}}, "bm25.b")])
def test_bad_config_names_the_key(tmp_path, cfg, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        _build(tmp_path, cfg=cfg)
    assert not (tmp_path / "tables").exists() or not list((tmp_path / "tables").rglob("*.parquet"))


def test_unknown_reranker_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="reranker.name"):
        build_outcome_table(tiny_dataset(), ARMS_CFG, {"name": "colbert"}, cache_dir=tmp_path, encoder=FakeEncoder())


def test_two_concurrent_builds_of_one_key_compute_once(tmp_path):
    import threading
    import time as _time

    class SlowEncoder(FakeEncoder):
        def encode(self, texts):
            _time.sleep(0.05)
            return super().encode(texts)

    encs, results, errors = [SlowEncoder(), SlowEncoder()], [], []

    def run(enc):
        try:
            results.append(_build(tmp_path, dataset=tiny_dataset(2), encoder=enc)[0])
        except Exception as e:  # pragma: no cover - surfaced by the assert below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(e,)) for e in encs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(e.calls for e in encs) == [0, 2 * 3]  # one built all 3 shards, the other loaded
    pd.testing.assert_frame_equal(results[0].frame, results[1].frame)


def test_shipped_configs_parse_with_spec_defaults():
    from pathlib import Path

    from omegaconf import OmegaConf

    import harness.config  # noqa: F401 - registers ${route_bench.retrieval_metric:...} (the per-dataset metric)
    from harness.retrieval.table import arm_params, make_encoder

    conf = Path(__file__).resolve().parents[1] / "conf"
    cfg = OmegaConf.load(conf / "arms" / "keep_hybrid.yaml")
    p = arm_params(cfg)
    assert (p.k, p.candidates, p.rrf_k, p.bm25.k1, p.bm25.b, p.qpp_k) == (10, 30, 60, 1.5, 0.75, 5)
    assert (cfg.base, cfg.extra, cfg.metric) == ("keep", "hybrid", "hit@10")
    assert make_encoder(cfg).model == "packaged-minilm"
    for f in sorted((conf / "arms").glob("*.yaml")):
        c = OmegaConf.load(f)
        arm_params(c)
        pair = (c.base, c.extra)
        assert pair in (("keep", "hybrid"), ("keep", "dense"), ("keep", "bm25"), ("no_retrieval", "rag_keep"),
                        ("no_retrieval", "rag_bm25")), f.name
    assert OmegaConf.load(conf / "reranker" / "maxsim.yaml").name == "maxsim"
    assert OmegaConf.load(conf / "reranker" / "cross_encoder.yaml").model == "cross-encoder/ms-marco-MiniLM-L6-v2"


def test_precision_is_fp32_by_default_everywhere(tmp_path):
    """Reproducible by default: every shipped arms config and every code default is fp32."""
    from pathlib import Path

    from omegaconf import OmegaConf

    from harness.retrieval.encoder import DenseEncoder
    from harness.retrieval.rerankers import CrossEncoderReranker, make_reranker
    from harness.retrieval.table import make_encoder

    conf = Path(__file__).resolve().parents[1] / "conf"
    files = sorted((conf / "arms").glob("*.yaml"))
    assert files and all(OmegaConf.load(f).precision == "fp32" for f in files)
    assert DenseEncoder().precision == "fp32" and make_encoder({}).precision == "fp32"
    assert CrossEncoderReranker().precision == "fp32"
    assert make_reranker({"name": "cross_encoder"}, {}, "fp32").precision == "fp32"
    cfg = {k: v for k, v in ARMS_CFG.items() if k != "precision"}
    table = build_outcome_table(tiny_dataset(), cfg, MAXSIM, cache_dir=tmp_path, progress=False, encoder=FakeEncoder())
    assert table.info["precision"] == "fp32" and table.info["key_material"]["precision"] == "fp32"
    bf16 = build_outcome_table(tiny_dataset(), {**cfg, "precision": "bf16"}, MAXSIM, cache_dir=tmp_path,
                               progress=False, encoder=FakeEncoder())
    assert bf16.key != table.key  # opt-in bf16 is its own table


def test_code_version_in_key_after_special_token_fix(tmp_path, monkeypatch):
    """Dropping special tokens by id changed MaxSim scores: the code version (part of the key)
    moved past arms-1, so no table built before the fix is reused."""
    from harness.retrieval import table as table_mod

    first = build_outcome_table(tiny_dataset(), ARMS_CFG, MAXSIM, cache_dir=tmp_path, progress=False, encoder=FakeEncoder())
    assert table_mod.CODE_VERSION != "arms-1" and first.info["code_version"] == table_mod.CODE_VERSION
    monkeypatch.setattr(table_mod, "CODE_VERSION", "arms-1")
    old = build_outcome_table(tiny_dataset(), ARMS_CFG, MAXSIM, cache_dir=tmp_path, progress=False, encoder=FakeEncoder())
    assert old.key != first.key


def test_dataset_heading_option_changes_table_key(tmp_path):
    from harness.data.qasper import load_qasper_files

    fixture = Path(__file__).parent / "fixtures" / "data" / "qasper-headings-v0.3.json"
    keys = {mode: build_outcome_table(load_qasper_files([fixture], heading_text=mode), ARMS_CFG, MAXSIM,
                                      cache_dir=tmp_path, progress=False, encoder=FakeEncoder()).key
            for mode in ("full", "last")}
    assert keys["full"] != keys["last"]


def test_progress_bars_off_under_ci(monkeypatch):
    from harness.retrieval.table import _progress_enabled

    monkeypatch.setenv("CI", "true")
    assert _progress_enabled(None) is False and _progress_enabled(True) is True


def test_hybrid_reuses_keep_reranker_scores(tmp_path):
    from harness.retrieval.rerankers import MaxSimReranker

    class CountingMaxSim(MaxSimReranker):
        requested: list = []

        def score(self, inputs, pairs):
            self.requested.append(list(pairs))
            return super().score(inputs, pairs)

    rr = CountingMaxSim()
    build_outcome_table(tiny_dataset(), ARMS_CFG, MAXSIM, cache_dir=tmp_path, progress=False,
                        encoder=FakeEncoder(), reranker=rr)
    # one call for keep's pairs, one for hybrid's NEW pairs only; no pair is scored twice
    assert len(rr.requested) == 2
    flat = [p for call in rr.requested for p in call]
    assert len(flat) == len(set(flat))
    q0 = [p for p in flat if p[0] == 0]  # q0: keep {u0, u1} + hybrid's new {u2}
    assert sorted(u for _, u in q0) == [0, 1, 2]


def test_empty_pool_gives_misses_and_nan_features(tmp_path):
    ds = tiny_dataset()
    ds2 = Dataset("tiny-empty", ds.documents, ds.questions + [Question("q9", "d0", "empty", "What?", ("d0#0",))],
                  {**ds.pools, "empty": []})
    t, _ = _build(tmp_path, dataset=ds2)
    row = t.frame.set_index("qid").loc["q9"]
    assert row["keep.hit@2"] == 0 and row["hybrid.hit@2"] == 0 and len(row["keep.top2"]) == 0
    assert row["keep.cost.rerank_pairs"] == 0 and math.isnan(row[column("dense_top1")])
