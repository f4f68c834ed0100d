"""Per-arm retrieval metrics and the rescued/lost list of an outcome table (``table build``).

Why: a team comparing its own arms wants first the table BEIR papers print (each arm's nDCG@10,
Recall@10, MRR@10, Hit@1, Hit@10, each the mean over the questions with gold evidence), then
the questions behind the difference: those where the extra arm is better (rescued) or worse
(lost) than the base arm on the routed metric, with each arm's top 3 ids to look at.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


def beir_columns(k: int = 10) -> list[tuple[str, str]]:
    """(header, metric) of the per-arm table at depth ``k``."""
    return [(f"nDCG@{k}", f"ndcg@{k}"), (f"Recall@{k}", f"recall@{k}"), (f"MRR@{k}", f"mrr@{k}"),
            ("Hit@1", "hit@1"), (f"Hit@{k}", f"hit@{k}")]


def evidence_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["has_evidence"].astype(bool)] if "has_evidence" in frame.columns else frame


def per_arm_means(frame: pd.DataFrame, k: int = 10) -> dict[str, dict[str, float | None]]:
    """{arm: {metric: mean over the questions with evidence, or None without the column}} for
    the arms with at least one of ``beir_columns(k)``'s metrics, in name order."""
    rows = evidence_rows(frame)
    metrics = [m for _, m in beir_columns(k)]
    arms = sorted({c.rsplit(".", 1)[0] for c in map(str, frame.columns)
                   if not c.startswith("feat.") and "." in c and c.rsplit(".", 1)[1] in metrics})
    return {arm: {m: (float(rows[f"{arm}.{m}"].astype(float).mean()) if f"{arm}.{m}" in rows.columns else None)
                  for m in metrics} for arm in arms}


def format_per_arm(means: dict[str, dict[str, float | None]], n: int, k: int = 10) -> list[str]:
    """The per-arm table's lines (no line without an arm)."""
    if not means:
        return []
    cols = beir_columns(k)
    width = max(12, *(len(a) for a in means))
    lines = [f"per arm (mean over {n} questions with evidence; - : the table has no such column)",
             f"  {'arm':<{width}} " + " ".join(f"{h:>9}" for h, _ in cols)]
    for arm, values in means.items():
        cells = ["-" if values[m] is None else f"{values[m]:.4f}" for _, m in cols]
        lines.append(f"  {arm:<{width}} " + " ".join(f"{c:>9}" for c in cells))
    return lines


def _top(value, n: int = 3) -> str:
    return " ".join(map(str, list(value)[:n])) if isinstance(value, (list, tuple, np.ndarray)) else ""


def ranking_column(frame: pd.DataFrame, arm: str) -> str | None:
    """The arm's ranking column ``<arm>.top<k>`` (the deepest), or None."""
    found = [c for c in map(str, frame.columns) if c.startswith(f"{arm}.top") and c[len(arm) + 4:].isdigit()]
    return max(found, key=lambda c: int(c[len(arm) + 4:])) if found else None


def rescued_lost(frame: pd.DataFrame, qids: Sequence[str], base: str, extra: str, metric: str) -> pd.DataFrame:
    """The questions of ``qids`` (the routing task's) where ``extra`` and ``base`` differ on
    ``metric``: qid, question text (when the table has it), ``rescued`` (extra better) or
    ``lost``, both outcomes and each arm's top 3 ids (when the table holds its ranking)."""
    rows = frame.set_index(frame["qid"].astype(str)).loc[list(map(str, qids))]
    b, e = rows[f"{base}.{metric}"].astype(float).to_numpy(), rows[f"{extra}.{metric}"].astype(float).to_numpy()
    differ = rows[b != e]
    out = pd.DataFrame({"qid": differ.index.to_numpy()})
    if "question" in differ.columns:
        out["question"] = differ["question"].astype(str).to_numpy()
    out["change"] = np.where(e[b != e] > b[b != e], "rescued", "lost")
    out[f"{base}.{metric}"] = b[b != e]
    out[f"{extra}.{metric}"] = e[b != e]
    for arm in (base, extra):
        col = ranking_column(frame, arm)
        if col is not None:
            out[f"{arm}.top3"] = [_top(v) for v in differ[col]]
    return out
