"""``pipeline.*``: the RAG pipeline in its own words, checked against the arms settings it sets.

Why: a team asks "does hybrid retrieval help at OUR rerank depth and OUR number of passages to
the LLM?", and the arms say it as ``arms.candidates`` and ``arms.metric`` (hit@k). conf/arms/*.yaml
read ``pipeline.rerank_depth`` into ``arms.candidates`` and ``pipeline.passages_to_llm`` into the
metric's k, so one setting moves both consistently; this module refuses, in one line naming the
``pipeline`` key, the combinations that would not mean what they say (an arms setting given
too, with another value; more passages than the arms rank; a table that reranks nothing).
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.config.arm_checks import SYNTHETIC_K
from harness.errors import ConfigError
from harness.retrieval.settings import MAX_CANDIDATES

RERANK_DEPTH = "pipeline.rerank_depth"
PASSAGES = "pipeline.passages_to_llm"


def _count(key: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ConfigError(key, f"must be null or an integer in [1, {high}], got {value!r}")
    return int(value)


def check_pipeline(pipeline: Mapping[str, Any] | None, arms: Mapping[str, Any], loader: Any) -> None:
    """ConfigError naming ``pipeline.<key>`` when a set pipeline value disagrees with the arms
    settings it sets, or cannot apply to the job's table (``loader``: the dataset's loader)."""
    pipeline = pipeline or {}
    depth, passages = pipeline.get("rerank_depth"), pipeline.get("passages_to_llm")
    if depth is not None:
        _check_depth(_count(RERANK_DEPTH, depth, MAX_CANDIDATES), arms, loader)
    if passages is not None:
        _check_passages(_count(PASSAGES, passages, MAX_CANDIDATES), arms, loader)  # <= arms.k <= the depth


def _check_depth(depth: int, arms: Mapping[str, Any], loader: Any) -> None:
    if loader in ("synthetic", "outcomes"):
        what = "the synthetic table reranks nothing" if loader == "synthetic" else \
            "an outcome table read from a file (dataset=outcomes) was reranked where it was made"
        raise ConfigError(RERANK_DEPTH, f"is {depth}, but {what}; drop it or use a dataset the harness retrieves on")
    candidates, k = arms.get("candidates"), arms.get("k", 10)
    if candidates != depth:
        raise ConfigError(RERANK_DEPTH, f"is {depth}, but arms.candidates={candidates!r} is set too (the rerank depth "
                                        "it sets); give one of them")
    if isinstance(k, int) and depth < k:
        raise ConfigError(RERANK_DEPTH, f"is {depth}, below arms.k={k}: the reranker must see at least the k passages "
                                        f"each arm ranks (raise it to {k} or more, or lower arms.k)")


def _check_passages(passages: int, arms: Mapping[str, Any], loader: Any) -> None:
    k, metric = arms.get("k", 10), str(arms.get("metric", ""))
    if loader == "synthetic" and passages != SYNTHETIC_K:
        raise ConfigError(PASSAGES, f"is {passages}, but the synthetic table's metrics are @{SYNTHETIC_K} only (it "
                                    "ranks nothing); drop it or use a dataset the harness retrieves on")
    if isinstance(k, int) and passages > k:
        raise ConfigError(PASSAGES, f"is {passages}, above arms.k={k} (the ranks each arm keeps); raise arms.k to "
                                    f"{passages} or more")
    if "@" not in metric:
        raise ConfigError(PASSAGES, f"is {passages}, but the pair's outcome arms.metric={metric!r} judges answers, not "
                                    "retrieved passages; drop it (an answer arm's passages are its block's k)")
    if metric.rpartition("@")[2] != str(passages):
        raise ConfigError(PASSAGES, f"is {passages}, but arms.metric={metric!r} is set too and judges another number "
                                    f"of passages; drop arms.metric (it becomes hit@{passages}) or give one of them")
