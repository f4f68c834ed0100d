"""Outcome metrics derived from the base table's rankings and the dataset's gold units.

Why: on HotpotQA distractor every question searches only its own 10 candidate paragraphs, so
every arm's top 10 holds every gold paragraph and Hit@10 is 1 for every arm: no question can be
rescued or harmed and nothing can be routed. What tells the arms apart there is how high they
put the gold paragraphs, e.g. "both supporting paragraphs in the top 2". The base table stores
each arm's ranked unit ids (``<arm>.top<N>``, N = ``arms.k``) and ``n_gold``, but not the gold
unit ids, so such metrics need the dataset; and the base table's columns and key must not change
(its key keys every cached block, LLM answers included). Hence a small built-in block,
``gold_at_k``, that reads the rankings and the dataset's gold units and writes, for each of the
four retrieval arms (``keep``, ``hybrid``, ``bm25``, ``dense``) and every k = 1..N:

- ``<arm>.all@k``: 1.0 when EVERY gold unit of the question is in the arm's top k, else 0.0. On
  HotpotQA (2 supporting paragraphs per question) ``all@2`` is "both supporting paragraphs in the
  top 2". A question with more gold units than k scores 0 (they cannot all fit); one with a
  single gold unit scores like ``hit@k``. Binary, so rescues, harms and McNemar apply.
- ``<arm>.recall@k``: the share of the question's gold units in the top k, in [0, 1]
  (continuous: protocol C's gain is the log ratio of docs/metrics.md §7). ``recall@N`` itself is a base
  column and is not rewritten.

Questions without gold units get NaN (hit-type metrics count only questions with evidence, docs/metrics.md
§1; ``harness.task``). The block is added without being listed whenever ``arms.metric``
names a metric only it provides (``all@k``, or ``recall@k`` with k != ``arms.k``;
``harness.gold_metrics``, ``harness.arm_blocks.blocks_for``); it owns no arm: it declares the retrieval arms in
``metrics_for``, which lets it write their outcome columns that no other block wrote. Its key is
the base table's key (which covers the dataset fingerprint, hence the gold units) and its
version: computing it takes well under a second, and caching it keeps the joined table's
fingerprint on the same footing as every other block's.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from harness.arm_blocks import BASE, ArmBlock
from harness.errors import HarnessError
from harness.gold_metrics import BLOCK_NAME
from harness.retrieval.arms import ARMS


def _ranking_column(columns, arm: str) -> tuple[str, int] | None:
    """(the arm's ranked-unit-ids column ``<arm>.top<N>``, N); the longest when several."""
    found = [(c, int(m.group(1))) for c in columns if (m := re.fullmatch(rf"{re.escape(arm)}\.top([0-9]+)", str(c)))]
    return max(found, key=lambda x: x[1]) if found else None


def gold_at_k(ranked, gold: set[str], k: int) -> tuple[float, float]:
    """(all@k, recall@k) of one ranking: every gold unit in the top k (0/1), share of gold units
    in the top k; (nan, nan) without gold units."""
    if not gold:
        return float("nan"), float("nan")
    found = len(gold & {str(u) for u in list(ranked)[:k]})
    return float(found == len(gold)), found / len(gold)


class GoldAtK(ArmBlock):
    """``<arm>.all@k`` and ``<arm>.recall@k`` of the retrieval arms (module docstring)."""

    name = BLOCK_NAME
    arms = ()  # provides no arm
    metrics_for = ARMS  # writes outcome columns of the base table's arms
    requires = (BASE,)
    version = "1"
    chunk_size = 4096

    def compute(self, rows: pd.DataFrame, dataset: Any) -> pd.DataFrame:
        if dataset is None or not getattr(dataset, "questions", None):
            raise HarnessError("metrics all@k / recall@k need the dataset's gold units and the arms' rankings: the "
                               "synthetic table has neither (use hit@k, recall@10 or mrr@10 there, or a real dataset)")
        gold = {q.qid: {str(u) for u in q.gold_unit_ids} for q in dataset.questions}
        missing = [str(q) for q in rows["qid"] if str(q) not in gold]
        if missing:
            raise HarnessError(f"arm block {self.name!r}: question(s) {missing[:3]} of the table are not in dataset "
                               f"{getattr(dataset, 'name', '?')!r}")
        golds = [gold[str(q)] for q in rows["qid"]]
        out: dict[str, Any] = {"qid": list(rows["qid"])}
        for arm in self.metrics_for:
            found = _ranking_column(rows.columns, arm)
            if found is None:
                continue
            column, n = found
            rankings = list(rows[column])
            for k in range(1, n + 1):
                pairs = np.array([gold_at_k(r, g, k) for r, g in zip(rankings, golds)], dtype=float).reshape(-1, 2)
                out[f"{arm}.all@{k}"] = pairs[:, 0]
                if f"{arm}.recall@{k}" not in rows.columns:  # the base table's recall@N stays its own
                    out[f"{arm}.recall@{k}"] = pairs[:, 1]
        if len(out) == 1:
            raise HarnessError(f"arm block {self.name!r}: the table has no ranking column <arm>.top<N> of "
                               f"{', '.join(self.metrics_for)} to score all@k / recall@k on")
        return pd.DataFrame(out)
