"""What each router feature measures, in one line, for ``python -m harness features``.

Why a table of its own: a team reading an outcome table's ``feat.*`` columns needs to know what
each one is before choosing a policy's features; the definitions are spread over the modules that
compute them (``harness.retrieval.features``, ``harness.generation.uncertainty`` / ``arms`` /
``hidden_state``, ``harness.arm_blocks.runs``). Every name of ``feature_names.FEATURE_SETS`` has a
line here (tested), and the names made per arm or per dimension match a pattern. An installed
arm block describes its own features with a ``feature_descriptions`` mapping on its class.
"""

from __future__ import annotations

import re

from harness.retrieval.feature_names import QPP_BASE, WH_WORDS

_QPP = {
    "wig": "weighted information gain: mean of the top-k scores minus the pool's mean score",
    "uwig": "unnormalised WIG: mean of the top-k scores",
    "nqc": "normalised query commitment: std of the top-k scores / |the pool's mean score|",
    "qc": "query commitment: std (population) of the top-k scores",
    "smv": "score magnitude and variance: U_SMV / |the pool's mean score|",
    "usmv": "unnormalised SMV: mean of t * |ln(t / mean)| over the top-k scores t",
}
_SOURCES = {"dense": "dense cosine", "bm25": "BM25"}
_WH = {w: f"1 if the question's wh-class is '{w}' (first word, else first wh-word anywhere), else 0"
       for w in WH_WORDS}
_WH["yesno"] = "1 if the question opens with a yes/no auxiliary (is, does, can, ...), else 0"
_WH["other"] = "1 if the question has no wh-word and no yes/no opening, else 0"
_UNC = {
    "unc_mean_entropy": "mean token entropy (nats, over the top-k alternatives) of the no-retrieval answer",
    "unc_max_entropy": "largest token entropy (nats) of the no-retrieval answer",
    "unc_min_confidence": "1 - the smallest top-token probability over the no-retrieval answer's tokens",
    "unc_answer_tokens": "number of tokens of the no-retrieval answer",
    "unc_option_margin": "log-likelihood margin between the two best options (option-scored answer)",
    "unc_option_mass": "the options' share of the next-token probability mass (option-scored answer)",
}

DESCRIPTIONS: dict[str, str] = {
    "dense_top1": "top-1 dense cosine between the question and the pool's units",
    "dense_margin12": "top-1 minus top-2 dense cosine",
    "dense_mean_top5": "mean of the top-5 dense cosines",
    "overlap_dense_rerank10": "|dense top-10 and reranked top-10 in common| / 10 (keep arm)",
    "rerank_top1_dense_rank": "dense rank (1-based) of the reranked top-1 unit; 11 if not in the dense top 10",
    "caption_frac_rerank10": "share of captions in the reranked top 10 (keep arm)",
    "bm25_top1": "top-1 BM25 score of the question over its pool",
    "bm25_margin12": "top-1 minus top-2 BM25 score",
    **{f"qpp_{p}_{src}": f"{_QPP[p]} ({_SOURCES[src]} scores, top-k = arms.qpp_k)"
       for p in QPP_BASE for src in _SOURCES},
    "q_len_words": "number of whitespace-separated words of the question",
    "q_has_digit": "1 if the question holds a digit, else 0",
    "q_n_capitalised": "number of capitalised words of the question, its first word left out",
    **{f"q_wh_{w}": text for w, text in _WH.items()},
    **_UNC,
    "probe_ms": "wall time (ms) of the hidden-state forward passes: the prober's cost, not a routing signal",
}

# names made per dimension or per arm: (pattern, description; {0}, {1} = the pattern's groups)
PATTERNS: tuple[tuple[str, str], ...] = (
    (r"probe_mem_(\d+)", "dimension {0} of the generator's final hidden state for the memory (no-retrieval) prompt"),
    (r"probe_rag_(\d+)", "dimension {0} of the generator's final hidden state for the RAG prompt"),
    (r"qemb_(\d+)", "dimension {0} of the question's sentence embedding"),
    (r"run_(.+)_top1", "top-1 score of run file arm {0}"),
    (r"run_(.+)_margin12", "top-1 minus top-2 score of run file arm {0}"),
    *((rf"run_(.+)_qpp_{p}", f"{_QPP[p]} (scores of run file arm {{0}})") for p in QPP_BASE),
    *((rf"(.+)_{name}", f"answer arm {{0}}: {text.replace('no-retrieval answer', 'answer')}")
      for name, text in _UNC.items()),
)


def describe(name: str, extra: dict[str, str] | None = None) -> str | None:
    """What feature ``name`` (without ``feat.``) measures, or None when neither the harness nor
    ``extra`` (installed blocks' ``feature_descriptions``) describes it."""
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    if extra and name in extra:
        return extra[name]
    for pattern, text in PATTERNS:
        m = re.fullmatch(pattern, name)
        if m:
            return text.format(*m.groups())
    return None


def plugin_descriptions() -> dict[str, str]:
    """``feature_descriptions`` of the installed arm blocks (entry-point group
    ``rag_route_bench.arms``); a broken plugin is reported where it is used, not here."""
    from importlib import metadata

    out: dict[str, str] = {}
    for ep in metadata.entry_points(group="rag_route_bench.arms"):
        try:
            found = getattr(ep.load(), "feature_descriptions", None) or {}
        except Exception:  # noqa: BLE001 - reported where the block is used as an arm
            continue
        for name, text in dict(found).items():
            out.setdefault(str(name), str(text))
    return out
