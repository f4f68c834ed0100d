"""Router features (docs/metrics.md §3), computed from the keep arm and the query alone.

Choices where docs/metrics.md is silent (also in docs/costs.md):
- Pools with fewer units than a feature needs: margins are NaN (one unit), means use what
  exists. ``overlap_dense_rerank10`` divides by 10 as docs/metrics.md writes; ``caption_frac_rerank10``
  divides by the length of the reranked list ("fraction of").
- QPP (seed 002 section 4.2), top-k = 5 by default, over a score list ``s`` of the whole pool:
  "corpus score" C = the mean score of the query over ALL units of the pool (the pool acts as
  the pseudo non-relevant document). With T = the top-k scores and mu = mean(T):
  U_WIG = mu; WIG = mu - C; QC = std(T) (population, ddof=0); NQC = QC / |C|;
  U_SMV = mean(t * |ln(t / mu)|) over t in T; SMV = U_SMV / |C|. Terms with t <= 0 (or mu <= 0)
  are left out of the SMV sum because the log is undefined; a zero corpus score gives NaN for
  the normalised predictors (policies impute NaN).
- Query features: words = whitespace tokens; capitalised tokens exclude the first word (it is
  capitalised in every question); the wh-class is the first word if it is a wh-word or a yes/no
  auxiliary, else the first wh-word anywhere in the question, else "other".
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from harness.retrieval.feature_names import QPP_BASE, WH_WORDS

QPP_TOP_K = 5
WH_MAP = {"what": "what", "how": "how", "which": "which", "who": "who", "whom": "who",
          "whose": "who", "when": "when", "where": "where", "why": "why"}
YESNO_AUX = frozenset(
    "is are was were am be do does did can could will would should shall may might must "
    "has have had isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't "
    "wouldn't shouldn't hasn't haven't hadn't".split()
)


def _nan_div(a: float, b: float) -> float:
    return a / abs(b) if b != 0 and math.isfinite(b) else float("nan")


def qpp(scores: np.ndarray, k: int = QPP_TOP_K, corpus: float | None = None) -> dict[str, float]:
    """WIG, U_WIG, NQC, QC, SMV, U_SMV of one score list (see module docstring). ``corpus``: the
    pool's mean score when ``scores`` holds only the best units (an approximate search)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return {p: float("nan") for p in QPP_BASE}
    corpus = float(s.mean()) if corpus is None else float(corpus)
    top = np.sort(s)[::-1][: max(1, int(k))]
    mu = float(top.mean())
    qc = float(top.std(ddof=0))
    if mu > 0:
        pos = top[top > 0]
        usmv = float((pos * np.abs(np.log(pos / mu))).sum() / len(top))
    else:
        usmv = float("nan")
    return {
        "wig": mu - corpus,
        "uwig": mu,
        "nqc": _nan_div(qc, corpus),
        "qc": qc,
        "smv": _nan_div(usmv, corpus),
        "usmv": usmv,
    }


def wh_class(question: str) -> str:
    words = [w.strip("\"'()[],.?!:;").lower() for w in question.split()]
    words = [w for w in words if w]
    if not words:
        return "other"
    if words[0] in WH_MAP:
        return WH_MAP[words[0]]
    if words[0] in YESNO_AUX:
        return "yesno"
    for w in words[1:]:
        if w in WH_MAP:
            return WH_MAP[w]
    return "other"


def query_features(question: str) -> dict[str, float]:
    words = question.split()
    wh = wh_class(question)
    feats = {
        "q_len_words": float(len(words)),
        "q_has_digit": float(bool(re.search(r"\d", question))),
        "q_n_capitalised": float(sum(1 for w in words[1:] if w[:1].isupper())),
    }
    for w in WH_WORDS:
        feats[f"q_wh_{w}"] = float(wh == w)
    return feats


def keep_features(
    dense_scores: np.ndarray,
    dense_order: np.ndarray,
    reranked_top: Sequence[int],
    unit_kinds: Sequence[str],
) -> dict[str, float]:
    """The baseline six (docs/metrics.md §3) from the keep arm; indices are pool positions."""
    d = np.asarray(dense_scores, dtype=np.float64)[np.asarray(dense_order)]
    dense10 = [int(i) for i in dense_order[:10]]
    top = [int(i) for i in reranked_top]
    if top:
        rank = dense10.index(top[0]) + 1 if top[0] in dense10 else 11
        cap = sum(unit_kinds[i] == "caption" for i in top) / len(top)
    else:
        rank, cap = float("nan"), float("nan")
    return {
        "dense_top1": float(d[0]) if d.size else float("nan"),
        "dense_margin12": float(d[0] - d[1]) if d.size > 1 else float("nan"),
        "dense_mean_top5": float(d[:5].mean()) if d.size else float("nan"),
        "overlap_dense_rerank10": len(set(dense10) & set(top[:10])) / 10.0,
        "rerank_top1_dense_rank": float(rank),
        "caption_frac_rerank10": float(cap),
    }


def bm25_features(bm25_scores: np.ndarray) -> dict[str, float]:
    s = np.sort(np.asarray(bm25_scores, dtype=np.float64))[::-1]
    return {
        "bm25_top1": float(s[0]) if s.size else float("nan"),
        "bm25_margin12": float(s[0] - s[1]) if s.size > 1 else float("nan"),
    }


def all_features(
    question: str,
    dense_scores: np.ndarray,
    dense_order: np.ndarray,
    bm25_scores: np.ndarray,
    reranked_top: Sequence[int],
    unit_kinds: Sequence[str],
    qpp_k: int = QPP_TOP_K,
    dense_corpus: float | None = None,
) -> dict[str, float]:
    """Every feature of FEATURE_SETS['all'] for one question (names without the feat. prefix).

    ``dense_corpus``: the pool's exact mean score when an approximate dense search scored only the
    units of ``dense_order`` (harness.retrieval.dense_index); the dense QPP then reads those."""
    feats = keep_features(dense_scores, dense_order, reranked_top, unit_kinds)
    feats.update(bm25_features(bm25_scores))
    dense_qpp = dense_scores if dense_corpus is None else np.asarray(dense_scores)[np.asarray(dense_order)]
    for src, scores, corpus in (("dense", dense_qpp, dense_corpus), ("bm25", bm25_scores, None)):
        for p, v in qpp(scores, qpp_k, corpus).items():
            feats[f"qpp_{p}_{src}"] = v
    feats.update(query_features(question))
    return feats
