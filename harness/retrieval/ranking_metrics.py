"""Per-question outcomes of any ranked list against a question's gold units (docs/metrics.md §2).

Why: an arm built from a run file (``harness.arm_blocks.runs``, docs/own_arms.md) is scored
with the very definitions of the harness's own arms, and its numbers must equal trec_eval's
(pytrec_eval, ir_measures) on the same run and qrels to the last digit. So each metric is
computed as trec_eval computes it, in the same order of floating-point operations:

- ``hit@k``: 1 if a gold unit is in the top k (trec_eval ``success_k``, ir_measures ``Success@k``);
- ``recall@k``: gold units in the top k / gold units (``recall_k``, ``R@k``);
- ``all@k``: 1 if every gold unit is in the top k (``harness.metric_blocks``);
- ``mrr@k``: 1 / rank of the first gold unit within the top k, else 0 (``RR@k``);
- ``ndcg@k``: binary gains (a gold unit gains 1): DCG = sum over gold units at rank r <= k of
  1 / log2(r + 1), divided by the ideal DCG of min(#gold, k) gold units at the top
  (``ndcg_cut_k``, ``nDCG@k`` on qrels whose relevant judgements have relevance 1);
- ``first_gold_rank``: rank of the first gold unit within the top k, NaN if none.

A question without gold units gets hits 0 and NaN for the rest, as the base table's arms
(``harness.retrieval.arms.outcome``); such questions are excluded from these metrics.
"""

from __future__ import annotations

import math
from typing import Sequence

from harness.retrieval.arms import outcome


def ndcg_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Binary-gain nDCG@k (module docstring); NaN without gold units. Summed in rank order with
    ``math.log2`` as trec_eval's ``m_ndcg_cut.c`` does, so the values are bit-identical."""
    if not gold:
        return float("nan")
    dcg = 0.0
    for r, unit in enumerate(list(ranked)[:k], start=1):
        if unit in gold:
            dcg += 1.0 / math.log2(r + 1)
    ideal = 0.0
    for r in range(1, min(len(gold), k) + 1):
        ideal += 1.0 / math.log2(r + 1)
    return dcg / ideal


def ranking_outcomes(ranked: Sequence[str], gold: set[str], k: int) -> dict[str, float]:
    """Every outcome of one ranked list at depth ``k`` (module docstring): hit@1..k,
    recall@1..k, all@1..k, mrr@k, ndcg@k, first_gold_rank."""
    out = outcome(ranked, gold, k)  # hit@1..k, recall@k, mrr@k, first_gold_rank
    top = list(ranked)[:k]
    for j in range(1, k + 1):
        if not gold:
            out[f"recall@{j}"] = out[f"all@{j}"] = float("nan")
            continue
        found = len(gold & set(top[:j]))
        out[f"recall@{j}"] = found / len(gold)
        out[f"all@{j}"] = float(found == len(gold))
    out[f"ndcg@{k}"] = ndcg_at(ranked, gold, k)
    return out
