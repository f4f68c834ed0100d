"""A seeded synthetic outcome table with a planted routing signal.

Why: protocols, policies and the tracker are tested on a table where the right answer is known
(a latent "difficulty" drives both the features and the chance that the extra arm rescues a
question), so "oracle > trained router > random" is a checkable fact, and tests run in
milliseconds without models. It has the columns protocols and policies read (ids, hit@10,
recall@10, mrr@10 of the two arms, every feature); it has no rankings and no cost columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.retrieval.feature_names import FEATURE_SETS, column

# the RAG answer arms of harness/generation/arms.py whose answer uncertainty the table carries
RAG_ANSWER_ARMS = ("rag_keep", "rag_hybrid", "rag_bm25")


MODEL_STATE_DIMS = 8  # columns per model-state feature pattern (probe_mem_*, probe_rag_*, qemb_*)


def synthetic_outcome_table(
    n_docs: int = 60,
    questions_per_doc: int = 5,
    seed: int = 0,
    signal: float = 2.0,
    arms: tuple[str, str] = ("keep", "hybrid"),
) -> pd.DataFrame:
    """One row per question. ``signal`` scales how strongly the latent drives rescues."""
    rng = np.random.default_rng(seed)
    n = n_docs * questions_per_doc
    doc_id = np.repeat([f"doc{d:04d}" for d in range(n_docs)], questions_per_doc)
    qid = np.array([f"q{i:05d}" for i in range(n)])
    z = rng.normal(size=n)  # latent: high z = keep struggles, hybrid helps
    p_rescue = 1 / (1 + np.exp(-(signal * z - 2.0)))
    p_harm = 1 / (1 + np.exp(-(-signal * z - 3.0)))
    u = rng.random(n)
    rescue = u < p_rescue
    harm = (~rescue) & (u < p_rescue + p_harm)
    both = rng.random(n) < 0.75
    base = np.where(rescue, 0, np.where(harm, 1, both.astype(int)))
    extra = np.where(rescue, 1, np.where(harm, 0, both.astype(int)))

    table = pd.DataFrame({"qid": qid, "doc_id": doc_id, "pool_id": doc_id, "has_evidence": True})
    b, e = arms
    for arm, hit in ((b, base), (e, extra)):
        table[f"{arm}.hit@10"] = hit.astype(np.int8)
        table[f"{arm}.recall@10"] = hit.astype(float)
        table[f"{arm}.mrr@10"] = hit / rng.integers(1, 11, size=n)
    # features: the baseline six carry the signal (noisy), the rest are noise
    feats: dict[str, np.ndarray] = {}
    for name in FEATURE_SETS["all"]:
        feats[name] = rng.normal(size=n)
    feats["dense_top1"] = 0.6 - 0.1 * z + 0.05 * rng.normal(size=n)
    feats["dense_margin12"] = np.abs(0.05 - 0.02 * z + 0.02 * rng.normal(size=n))
    feats["dense_mean_top5"] = feats["dense_top1"] - 0.1 + 0.02 * rng.normal(size=n)
    feats["overlap_dense_rerank10"] = np.clip(np.round((0.6 - 0.15 * z + 0.1 * rng.normal(size=n)) * 10) / 10, 0, 1)
    feats["rerank_top1_dense_rank"] = np.clip(np.round(2 + 2 * z + rng.normal(size=n)), 1, 11)
    feats["caption_frac_rerank10"] = rng.integers(0, 4, size=n) / 10
    # the no-retrieval answer's uncertainty (answer-pair policies), noise here too; drawn last so
    # that every value above is what it always was
    for name in FEATURE_SETS["uncertainty"]:
        feats[name] = rng.normal(size=n)
    # each RAG answer's own uncertainty (``feat.<arm>_unc_*``, post-generation predictors such as
    # seed 002's drop in max entropy), noise as well; drawn after everything else, so every value
    # above (and every column before these) is what it always was
    for arm in RAG_ANSWER_ARMS:
        for name in FEATURE_SETS["uncertainty"]:
            feats[f"{arm}_{name}"] = rng.normal(size=n)
    # model-state features (the hidden_state and query_embedding blocks; 576 / 384 dimensions in
    # a real table, MODEL_STATE_DIMS here), the first dimension carrying the latent weakly; drawn
    # last, so every value above is what it always was
    for pattern in FEATURE_SETS["probe"] + FEATURE_SETS["query_embedding"]:
        for i in range(MODEL_STATE_DIMS):
            feats[f"{pattern[:-1]}{i:04d}"] = rng.normal(size=n) + (0.5 * z if i == 0 else 0.0)
    for name, values in feats.items():
        table[column(name)] = values.astype(float)
    return table
