"""Retrieval components against hand computation or brute-force loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.retrieval.arms import outcome
from harness.retrieval.bm25 import BM25Params, BM25Pool, tokenize
from harness.retrieval.features import keep_features, qpp, query_features, wh_class
from harness.retrieval.fusion import order_by_score, rank_order, rrf_scores
from harness.retrieval.precision import resolve_precision
from harness.retrieval.rerankers import MaxSimReranker, RerankInputs, maxsim


def test_rank_order_breaks_ties_by_pool_order():
    assert rank_order(np.array([0.5, 0.9, 0.5, 0.9, 0.1])).tolist() == [1, 3, 0, 2, 4]
    # candidates given out of pool order: ties still go to the lower pool index
    assert order_by_score(np.array([4, 2, 0]), np.array([1.0, 1.0, 2.0])).tolist() == [0, 2, 4]


def test_rrf_matches_hand_computation():
    dense = np.array([0, 1, 3, 2])  # best first
    bm25 = np.array([2, 0, 1, 3])
    fused = rrf_scores([dense, bm25], 4, k=60)
    expected = [1 / 61 + 1 / 62, 1 / 62 + 1 / 63, 1 / 64 + 1 / 61, 1 / 63 + 1 / 64]
    assert fused == pytest.approx(expected, abs=1e-15)
    assert rank_order(fused).tolist() == [0, 2, 1, 3]
    # an exact tie (mirror rankings) is broken by pool order
    tie = rrf_scores([np.array([0, 1]), np.array([1, 0])], 2, k=60)
    assert tie[0] == tie[1] and rank_order(tie).tolist() == [0, 1]


def test_maxsim_matches_brute_force_loop():
    rng = np.random.default_rng(0)

    def unit_rows(n):
        m = rng.normal(size=(n, 8))
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    qs = [unit_rows(5), unit_rows(3)]
    us = [unit_rows(n) for n in (4, 1, 7, 0, 2)]
    pairs = [(0, 0), (0, 1), (0, 2), (0, 3), (1, 4), (1, 0), (0, 4)]
    got = MaxSimReranker().score(RerankInputs(["a", "b"], qs, ["u"] * 5, us), pairs)
    for (qi, ui), g in zip(pairs, got):
        brute = 0.0
        for qt in qs[qi]:
            best = -math.inf
            for ut in us[ui]:
                best = max(best, sum(float(a) * float(b) for a, b in zip(qt, ut)))
            brute += best if us[ui].shape[0] else 0.0
        assert g == pytest.approx(brute, abs=1e-9), (qi, ui)
    assert maxsim(qs[0], us[3]) == 0.0


def test_bm25_matches_okapi_formula():
    texts = ["Alpha beta beta", "gamma, delta!", "alpha gamma epsilon zeta", "eta"]
    assert tokenize(texts[1]) == ["gamma", "delta"]
    k1, b = 1.5, 0.75
    got = BM25Pool(texts, BM25Params(k1, b)).scores("ALPHA delta?")
    docs = [tokenize(t) for t in texts]
    avgdl = sum(map(len, docs)) / len(docs)
    n = len(docs)
    expected = []
    for d in docs:
        s = 0.0
        for term in ("alpha", "delta"):
            df = sum(term in x for x in docs)
            idf = math.log((n - df + 0.5) / (df + 0.5))
            tf = d.count(term)
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
        expected.append(s)
    assert got == pytest.approx(expected, rel=1e-12)
    assert BM25Pool(["", "..."]).scores("alpha").tolist() == [0.0, 0.0]


def test_bm25_params_validated():
    with pytest.raises(ConfigError, match="bm25.b"):
        BM25Params(1.5, 1.5)


def test_outcome_metrics_hand_case():
    out = outcome(["a", "b", "c", "d"], {"c", "z"}, k=3)
    assert [out[f"hit@{j}"] for j in (1, 2, 3)] == [0, 0, 1]
    assert out["recall@3"] == 0.5 and out["mrr@3"] == pytest.approx(1 / 3) and out["first_gold_rank"] == 3
    miss = outcome(["a", "b"], {"z"}, k=2)
    assert miss["hit@2"] == 0 and miss["mrr@2"] == 0.0 and math.isnan(miss["first_gold_rank"])
    none = outcome(["a"], set(), k=1)
    assert none["hit@1"] == 0 and math.isnan(none["recall@1"])


def test_qpp_hand_case():
    got = qpp(np.array([1.0, 4.0, 2.0, 1.0]), k=2)  # corpus mean 2, top [4, 2], mu 3
    usmv = (4 * abs(math.log(4 / 3)) + 2 * abs(math.log(2 / 3))) / 2
    assert got == pytest.approx({"wig": 1.0, "uwig": 3.0, "qc": 1.0, "nqc": 0.5, "usmv": usmv, "smv": usmv / 2})
    zero = qpp(np.array([1.0, -1.0]), k=1)
    assert math.isnan(zero["nqc"]) and math.isnan(zero["smv"]) and zero["wig"] == 1.0


def test_query_features_and_wh_classes():
    f = query_features("Does BERT use 12 layers?")
    assert f["q_len_words"] == 5 and f["q_has_digit"] == 1 and f["q_n_capitalised"] == 1
    assert f["q_wh_yesno"] == 1 and sum(v for k, v in f.items() if k.startswith("q_wh_")) == 1
    assert wh_class("In which dataset do they test?") == "which"
    assert wh_class("Whose model wins?") == "who"
    assert wh_class("Are results significant?") == "yesno"
    assert wh_class("Name the datasets.") == "other"
    assert wh_class("") == "other"


def test_keep_features_hand_case():
    dense = np.array([0.9, 0.8, 0.1, 0.5])
    f = keep_features(dense, rank_order(dense), [1, 0], ["paragraph", "caption", "paragraph", "heading"])
    assert f["dense_top1"] == 0.9 and f["dense_margin12"] == pytest.approx(0.1)
    assert f["dense_mean_top5"] == pytest.approx(0.575)
    assert f["overlap_dense_rerank10"] == 0.2 and f["rerank_top1_dense_rank"] == 2
    assert f["caption_frac_rerank10"] == 0.5
    # reranked top-1 outside the dense top 10 -> 11
    many = np.linspace(1, 0, 12)
    assert keep_features(many, rank_order(many), [11], ["paragraph"] * 12)["rerank_top1_dense_rank"] == 11


def test_precision_flag():
    assert resolve_precision("fp32") == "fp32" and resolve_precision("BF16") == "bf16"
    assert resolve_precision("auto") in ("bf16", "fp32")
    with pytest.raises(ConfigError, match="precision"):
        resolve_precision("fp16")


def test_special_tokens_dropped_by_id_not_position():
    """[CLS]=101, [SEP]=102, [PAD]=0 (BERT ids): a literal "[SEP]" inside the text (the tokenizer
    maps it to 102) is dropped too, while a real word at the edges is kept."""
    from harness.retrieval.encoder import content_token_mask

    ids = np.array([[101, 7592, 102, 2088, 101, 1060, 102],   # "hello [SEP] world [CLS] x"
                    [101, 5810, 3793, 102, 0, 0, 0]])          # "plain text", padded
    att = np.array([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]])
    got = content_token_mask(ids, att, [100, 102, 0, 101, 103])
    assert got.tolist() == [[False, True, False, True, False, True, False],
                            [False, True, True, False, False, False, False]]
    # a tokenizer without a leading CLS: nothing real is lost at position 0
    assert content_token_mask(np.array([[5, 6, 2]]), np.ones((1, 3)), [2]).tolist() == [[True, True, False]]
    assert content_token_mask(np.zeros((0, 4), dtype=np.int64), np.zeros((0, 4)), [0]).shape == (0, 4)
