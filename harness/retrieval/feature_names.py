"""Names of the router features (docs/metrics.md §3), grouped into named feature sets.

The outcome table stores feature ``name`` in column ``feat.<name>``. Policies select a feature
set by name (``baseline``, ``bm25``, ``qpp``, ``query``, ``all``, or a set an installed arm block
provides) or list names directly.
"""

from __future__ import annotations

FEATURE_PREFIX = "feat."
# The "10" in the baseline names is the arm's k (``arms.k``, 10 by default, as in docs/metrics.md §3): with
# another k, overlap and caption share are computed over the top k.

BASELINE = (
    "dense_top1",  # top-1 dense cosine
    "dense_margin12",  # top-1 minus top-2 dense cosine
    "dense_mean_top5",  # mean of the top-5 dense cosines
    "overlap_dense_rerank10",  # |dense top-10 ∩ reranked top-10| / 10
    "rerank_top1_dense_rank",  # dense rank (1-based) of the reranked top-1; 11 if not in top 10
    "caption_frac_rerank10",  # share of captions in the reranked top 10
)
BM25 = ("bm25_top1", "bm25_margin12")
# Query-performance predictors (seed 002 section 4.2) over the dense and the BM25 score lists.
QPP_BASE = ("wig", "uwig", "nqc", "qc", "smv", "usmv")
QPP = tuple(f"qpp_{p}_{src}" for src in ("dense", "bm25") for p in QPP_BASE)
WH_WORDS = ("what", "how", "which", "who", "when", "where", "why", "yesno", "other")
QUERY = ("q_len_words", "q_has_digit", "q_n_capitalised") + tuple(f"q_wh_{w}" for w in WH_WORDS)

# Uncertainty of the no-retrieval answer (seed 003), written by the answer arm block
# ``no_retrieval`` (harness/generation/arms.py): only in tables that hold it.
UNCERTAINTY = ("unc_mean_entropy", "unc_max_entropy", "unc_min_confidence", "unc_answer_tokens")

# The option distribution of an option-scored memory answer (``mode: options``): margin between
# the two best options' log-likelihoods and the options' share of the next-token mass.
OPTION_UNCERTAINTY = ("unc_option_margin", "unc_option_mass")
# Internal states (harness/generation/hidden_state.py), one column per dimension, so named by a
# pattern: "prefix*" stands for every feature column starting with the prefix, in name order
# (the indices are zero-padded, so name order is dimension order).
PROBE_MEMORY = ("probe_mem_*",)  # the generator's final hidden state for the memory prompt
PROBE_RAG = ("probe_rag_*",)  # ... for the RAG prompt (question + retrieved units)
QUERY_EMBEDDING = ("qemb_*",)  # the question's sentence embedding (packaged MiniLM)
PATTERN = "*"

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "baseline": BASELINE,
    "bm25": BM25,
    "qpp": QPP,
    "query": QUERY,
    "uncertainty": UNCERTAINTY,
    "option_uncertainty": OPTION_UNCERTAINTY,
    "probe_memory": PROBE_MEMORY,
    "probe_rag": PROBE_RAG,
    "probe": PROBE_MEMORY + PROBE_RAG,
    "query_embedding": QUERY_EMBEDDING,
}
FEATURE_SETS["all"] = tuple(n for s in ("baseline", "bm25", "qpp", "query") for n in FEATURE_SETS[s])


def column(name: str) -> str:
    return FEATURE_PREFIX + name


def expand(names, available) -> tuple[list[str], list[str]]:
    """(the feature names with every pattern ``prefix*`` replaced by the ``available`` names
    starting with ``prefix``, sorted; the names and patterns not found). A pattern matching
    nothing is missing, like a missing name."""
    available = [str(a) for a in available]
    have = set(available)
    out: list[str] = []
    missing: list[str] = []
    for name in names:
        name = str(name)
        if name.endswith(PATTERN):
            found = sorted(a for a in available if a.startswith(name[:-1]))
            (out.extend(found) if found else missing.append(name))
        elif name in have:
            out.append(name)
        else:
            missing.append(name)
    return list(dict.fromkeys(out)), missing


def shown(columns, limit: int = 40) -> str:
    """Column names for an error message: all of them, or the first ``limit`` and a count (a
    table with embedding features has hundreds)."""
    names = sorted(map(str, columns))
    return str(names) if len(names) <= limit else f"{names[:limit]} and {len(names) - limit} more"


def plugin_feature_sets() -> dict[str, tuple[str, ...]]:
    """Named feature sets that installed arm blocks provide (``feature_sets`` of the classes in
    the entry-point group ``rag_route_bench.arms``, see ``harness.arm_blocks``); a built-in set
    name wins. Loaded only when a name is not a built-in set."""
    from importlib import metadata

    out: dict[str, tuple[str, ...]] = {}
    for ep in metadata.entry_points(group="rag_route_bench.arms"):
        try:
            sets = getattr(ep.load(), "feature_sets", None) or {}
        except Exception:  # noqa: BLE001 - a broken plugin is reported where it is used as an arm
            continue
        for name, members in dict(sets).items():
            if name not in FEATURE_SETS:
                out.setdefault(str(name), tuple(str(m) for m in members))
    return out


def resolve(spec: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Feature names for a set name, a '+'-joined list of set names, or an explicit list. Set
    names are the built-in ones and those of installed arm blocks (``plugin_feature_sets``)."""
    if isinstance(spec, str):
        names: list[str] = []
        plugged: dict[str, tuple[str, ...]] | None = None
        for part in spec.split("+"):
            part = part.strip()
            if part in FEATURE_SETS:
                names.extend(FEATURE_SETS[part])
                continue
            if plugged is None:
                plugged = plugin_feature_sets()
            names.extend(plugged.get(part, (part,)))
        spec = names
    seen: dict[str, None] = {}
    for n in spec:
        seen.setdefault(str(n), None)
    return tuple(seen)
