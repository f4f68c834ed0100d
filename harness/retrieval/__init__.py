"""Retrieval components (encoder, BM25, fusion, reranker), arms, features, outcome table.

Entry point: ``harness.retrieval.table.build_outcome_table(dataset, arms_cfg, reranker_cfg)``
returns an ``OutcomeTable`` (frame, key, path, info). Modules: ``encoder`` (MiniLM sentence
vectors + token embeddings in one pass), ``bm25``, ``fusion`` (RRF, tie-breaking), ``rerankers``
(MaxSim, CrossEncoder), ``arms`` (keep, hybrid, bm25, dense and their costs), ``features``
(docs/metrics.md §3), ``precision`` (fp32/bf16 flag), ``feature_names`` (shared names).
"""
