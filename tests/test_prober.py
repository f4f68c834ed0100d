"""Seed 002's Internal Prober (frozen) and the query-encoder stand-in: the hidden-state features
are what the model's LM head reads (checked against the full causal LM's logits), the feature
patterns expand to the table's columns in dimension order, the cross-validated ridge chooses
its penalty as a brute-force leave-one-out loop does, and the probe's cost family follows from
what it reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError, FeatureError
from harness.retrieval.feature_names import expand


def test_patterns_expand_in_dimension_order_and_a_pattern_matching_nothing_is_missing():
    cols = ["probe_mem_0010", "probe_mem_0002", "probe_rag_0000", "dense_top1", "probe_mem_0001"]
    found, missing = expand(("dense_top1", "probe_mem_*"), cols)
    assert found == ["dense_top1", "probe_mem_0001", "probe_mem_0002", "probe_mem_0010"] and missing == []
    found, missing = expand(("qemb_*", "nope", "probe_rag_*"), cols)
    assert found == ["probe_rag_0000"] and missing == ["qemb_*", "nope"]


def test_a_policy_reading_a_pattern_the_table_lacks_is_named():
    from harness.task import RoutingTask

    table = pd.DataFrame({"qid": ["a", "b"], "doc_id": ["d1", "d2"], "keep.hit@10": [1.0, 0.0], "hybrid.hit@10": [1.0, 1.0],
                          "feat.dense_top1": [0.1, 0.2]})
    task = RoutingTask.from_table(table, cost_column=None)
    with pytest.raises(FeatureError, match=r"\['probe_mem_\*'\]"):
        task.feature_matrix(("probe_mem_*",))


def _wide(n: int = 60, d: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3.0, size=d)
    y = X[:, 0] * 0.7 - X[:, 3] * 0.4 + rng.normal(scale=1.5, size=n)
    cols = [f"probe_mem_{i:04d}" for i in range(d)]
    return pd.DataFrame(X, columns=cols), y


def test_ridge_cv_chooses_the_penalty_a_brute_force_grouped_cv_loop_chooses():
    """The penalty is the one whose sklearn pipeline (imputer, scaler, ridge), refitted in each
    grouped fold (documents, GroupKFold), has the least pooled held-out squared error; the
    policy then scores like that pipeline fitted on every training question."""
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from policies import check_policy
    from policies.base import ScoreContext
    from policies.learned import RidgeCVPolicy, ridge_cv_errors, grouped_folds

    X, y = _wide()
    X.iloc[3, 5] = np.nan  # imputed inside each fold
    groups = np.repeat([f"doc{i}" for i in range(20)], 3)
    alphas = (0.1, 1.0, 10.0, 100.0, 1000.0)
    pol = RidgeCVPolicy(features="probe_memory", alphas=alphas).fit(X, y, groups)
    loss = []
    for a in alphas:
        err = 0.0
        for train, test in GroupKFold(n_splits=5).split(X, y, groups):
            pipe = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), StandardScaler(), Ridge(alpha=a))
            err += float(((pipe.fit(X.iloc[train], y[train]).predict(X.iloc[test]) - y[test]) ** 2).sum())
        loss.append(err / len(y))
    np.testing.assert_allclose(ridge_cv_errors(X.to_numpy(), y, grouped_folds(groups, len(y)), alphas), loss, rtol=1e-8)
    assert pol.alpha_ == alphas[int(np.argmin(loss))]
    assert np.sort(loss)[1] - np.sort(loss)[0] > 1e-6 * np.min(loss)  # the choice is not a tie
    want = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), StandardScaler(),
                         Ridge(alpha=pol.alpha_)).fit(X, y).predict(X)
    np.testing.assert_allclose(pol.score(X, ScoreContext(qids=np.arange(len(y)))), want, rtol=1e-9, atol=1e-9)
    assert pol.columns_ == list(X.columns)
    one_doc = RidgeCVPolicy(features="probe_memory", alphas=alphas).fit(X, y, np.zeros(len(y)))
    assert one_doc.alpha_ == max(alphas)  # no fold to judge on: the largest penalty
    from harness.synthetic import synthetic_outcome_table

    table = synthetic_outcome_table(n_docs=40, questions_per_doc=5, seed=0)
    rng = np.random.default_rng(1)
    for i in range(12):  # a wide feature set on the contract check's table
        table[f"feat.probe_mem_{i:04d}"] = rng.normal(size=len(table)) + (table["feat.dense_top1"] if i == 0 else 0)
    check_policy(RidgeCVPolicy(features="probe_memory", alphas=alphas), table, quiet=True)  # the estimator contract
    check_policy(RidgeCVPolicy(features="probe_memory", alphas=alphas), table, quiet=True, missing_values=True)
    with pytest.raises(ConfigError, match=r"policy\.alphas"):
        RidgeCVPolicy(alphas=[1.0, -2.0])
    with pytest.raises(ConfigError, match=r"policy\.alphas"):
        RidgeCVPolicy(alphas=[])


def test_probe_families_cost_prompts_without_decoding():
    from harness.protocols.cost import expected_cost, router_family
    from policies.learned import RidgeCVPolicy, RidgePolicy

    assert router_family(RidgeCVPolicy(features="probe")) == "probe"
    assert router_family(RidgeCVPolicy(features="probe_memory")) == "probe-memory"
    assert router_family(RidgeCVPolicy(features="query_embedding")) == "query-only"
    assert router_family(RidgePolicy(features="uncertainty")) == "uncertainty"
    p, g0, g1, r = np.array([0.0, 1.0]), np.array([60.0, 70.0]), np.array([600.0, 700.0]), np.zeros(2)
    np.testing.assert_array_equal(expected_cost("probe", p, g0, g1, r, "prompt_tokens"), [660.0, 770.0])
    np.testing.assert_array_equal(expected_cost("probe-memory", p, g0, g1, r, "prompt_tokens"), [60.0, 770.0])
    np.testing.assert_array_equal(expected_cost("probe", p, np.array([5.0, 5.0]), np.array([9.0, 9.0]), r,
                                                "output_tokens"), [5.0, 9.0])
    ms0, ms1, rr = np.array([100.0, 100.0]), np.array([900.0, 900.0]), np.array([10.0, 10.0])
    np.testing.assert_array_equal(expected_cost("probe", p, ms0, ms1, rr, "ms"),
                                  expected_cost("post-generation", p, ms0, ms1, rr))  # an upper bound
    np.testing.assert_array_equal(expected_cost("probe-memory", p, ms0, ms1, rr, "ms"),
                                  expected_cost("uncertainty", p, ms0, ms1, rr))
    # read together with another family's features: the dearer family
    assert router_family(RidgeCVPolicy(features="probe_memory+uncertainty")) == "uncertainty"
    assert router_family(RidgeCVPolicy(features="probe_memory+baseline")) == "full"
    assert router_family(RidgeCVPolicy(features="probe+bm25")) == "post-generation"
    assert router_family(RidgeCVPolicy(features="probe_memory+query")) == "probe-memory"


@pytest.mark.slow
def test_hidden_state_is_what_the_lm_head_reads_for_the_arms_own_prompts(isolated_cache):
    """Two real QASPER questions through the block (packaged SmolLM2 on transformers): each
    memory-prompt state, put through the model's final layer's LM head, gives the full causal
    LM's next-token logits for the no-retrieval arm's prompt; the RAG state likewise for the
    RAG prompt over BM25's top k units; the block's settings are refused by name."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.data import load_dataset
    from harness.generation import EvidenceUnit, no_retrieval_messages, rag_messages
    from harness.generation.generator import packaged_model_path
    from harness.generation.hidden_state import HiddenStateFeatures
    from tests.helpers.qasper import FIXTURE

    ds = load_dataset({"name": "qasper", "loader": "qasper", "path": str(FIXTURE)})
    qs = [q for q in ds.questions if q.answer_type == "yes_no"][:1] + [ds.questions[0]]
    units = {u.unit_id: u for doc in ds.documents.values() for u in doc}
    ranked = {q.qid: [u.unit_id for u in ds.documents[q.doc_id]][::-1][:10] for q in qs}
    rows = pd.DataFrame({"qid": [q.qid for q in qs], "bm25.top10": [ranked[q.qid] for q in qs]})
    out = HiddenStateFeatures(k=2).compute(rows, ds).set_index("qid")
    mem_cols = [c for c in out.columns if c.startswith("feat.probe_mem_")]
    rag_cols = [c for c in out.columns if c.startswith("feat.probe_rag_")]
    assert len(mem_cols) == len(rag_cols) == 576 and mem_cols == sorted(mem_cols)

    gguf = packaged_model_path()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    lm = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32).eval()
    for q in qs:
        boolean = q.answer_type == "yes_no"
        evidence = [EvidenceUnit(u, units[u].text, units[u].kind) for u in ranked[q.qid][:2]]
        for cols, prompt in ((mem_cols, no_retrieval_messages(q.text, boolean=boolean)),
                             (rag_cols, rag_messages(q.text, evidence, boolean=boolean))):
            enc = tok.apply_chat_template(list(prompt.messages), add_generation_prompt=True, tokenize=True,
                                          return_dict=True)
            with torch.inference_mode():
                logits = lm(input_ids=torch.tensor([list(enc["input_ids"])])).logits[0, -1]
                state = torch.tensor(out.loc[q.qid, cols].to_numpy(dtype=np.float32))
                np.testing.assert_allclose(lm.lm_head(state).numpy(), logits.numpy(), rtol=0, atol=2e-3)
    assert not np.allclose(out[mem_cols].to_numpy(), out[rag_cols].to_numpy())
    assert (out["feat.probe_ms"] > 0).all()
    memory_only = HiddenStateFeatures(rag=False).compute(rows, ds)
    assert not any(c.startswith("feat.probe_rag_") for c in memory_only.columns)
    for bad, key in (({"retrieval": "bm26"}, "retrieval"), ({"k": 11}, "k"), ({"generator": "http://x"}, "generator"),
                     ({"rag": "yes"}, "rag")):
        with pytest.raises(ConfigError, match=key):
            HiddenStateFeatures(**bad)


@pytest.mark.slow
def test_query_embedding_is_the_encoders_sentence_vector(isolated_cache):
    from sentence_transformers import SentenceTransformer

    from harness.data import load_dataset
    from harness.generation.hidden_state import QueryEmbeddingFeatures
    from harness.retrieval.encoder import packaged_minilm_path
    from tests.helpers.qasper import FIXTURE

    ds = load_dataset({"name": "qasper", "loader": "qasper", "path": str(FIXTURE)})
    rows = pd.DataFrame({"qid": [q.qid for q in ds.questions]})
    out = QueryEmbeddingFeatures().compute(rows, ds)
    cols = [c for c in out.columns if c.startswith("feat.qemb_")]
    want = SentenceTransformer(str(packaged_minilm_path()), device="cpu").encode(
        [q.text for q in ds.questions], normalize_embeddings=True, batch_size=1)
    assert len(cols) == want.shape[1] == 384
    np.testing.assert_allclose(out[cols].to_numpy(), want, rtol=0, atol=1e-5)


def test_a_pattern_matching_other_columns_at_score_time_is_named():
    from policies.base import ScoreContext
    from policies.learned import RidgeCVPolicy

    X, y = _wide(d=8)
    pol = RidgeCVPolicy(features="probe_memory", alphas=(1.0,)).fit(X, y)
    ctx = ScoreContext(qids=np.arange(len(y)))
    with pytest.raises(FeatureError, match=r"fitted on the columns .* matches"):
        pol.score(X.drop(columns=["probe_mem_0003"]), ctx)
    renamed = X.rename(columns={"probe_mem_0003": "probe_mem_0099"})  # as many columns, not the same ones
    with pytest.raises(FeatureError, match=r"fitted on the columns"):
        pol.score(renamed, ctx)
    restored = RidgeCVPolicy(features="probe_memory", alphas=(1.0,))
    restored.set_state(pol.get_state())
    with pytest.raises(FeatureError, match=r"fitted on the columns"):
        restored.score(renamed, ctx)
