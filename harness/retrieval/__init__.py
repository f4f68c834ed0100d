"""Retrieval components (encoder, BM25, fusion, reranker), arms, features, outcome table."""
