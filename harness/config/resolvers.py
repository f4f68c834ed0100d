"""OmegaConf resolvers the YAML of conf/ uses, registered when ``harness.config`` is imported."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

# The outcome metric a retrieval pair routes on unless arms.metric is set, by dataset loader:
# conf/arms/keep_*.yaml say ``metric: ${route_bench.retrieval_metric:${oc.select:dataset.loader,null}}``,
# which reads the loader class's ``retrieval_metric`` (harness.data.base). HotpotQA distractor
# searches each question's own 10 paragraphs, so every arm's Hit@10 is 1 and nothing can be
# routed on it; "both supporting paragraphs in the top 2" (all@2) tells the arms apart
# (docs/arms.md, "Outcome metrics per dataset"). Every other dataset keeps hit@10, so their
# composed configs (and config hashes) are what they were with the literal "hit@10".
# (The value cannot live in conf/dataset/*.yaml: dataset configs accept only loader options.)
DEFAULT_RETRIEVAL_METRIC = "hit@10"
METRIC_RESOLVER = "route_bench.retrieval_metric"


def default_retrieval_metric(loader: Any = None, passages_to_llm: Any = None) -> str:
    """The retrieval pair's default ``arms.metric`` for a dataset loader (see above); with
    ``pipeline.passages_to_llm`` set, the same metric at the LLM's k (hit@10 -> hit@5, all@2 ->
    all@5): the outcome is whether the passages the LLM reads hold the evidence."""
    from harness.data.registry import retrieval_metric

    metric = retrieval_metric(loader) or DEFAULT_RETRIEVAL_METRIC
    if passages_to_llm is None or "@" not in metric:
        return metric
    return f"{metric.split('@', 1)[0]}@{passages_to_llm}"


def unless_null(value: Any, default: Any) -> Any:
    """``value``, or ``default`` while it is null (``${oc.select:...,default}`` returns a null value
    as it is): conf/arms/*.yaml read ``pipeline.rerank_depth`` through it."""
    return default if value is None else value


def register_metric_resolver() -> None:
    """Register ``${route_bench.retrieval_metric:<loader>}`` with OmegaConf (idempotent); done on
    import of ``harness.config``, as composing conf/ needs that package anyway (it registers the schema)."""
    if not OmegaConf.has_resolver(METRIC_RESOLVER):
        OmegaConf.register_new_resolver(METRIC_RESOLVER, default_retrieval_metric)
    if not OmegaConf.has_resolver(UNLESS_NULL_RESOLVER):
        OmegaConf.register_new_resolver(UNLESS_NULL_RESOLVER, unless_null)


UNLESS_NULL_RESOLVER = "route_bench.unless_null"


ENV_RESOLVER = "route_bench.forwarded_env"


def register_env_resolver() -> None:
    """Register ``${route_bench.forwarded_env:}`` (the driver's cache folder and tracking URI,
    for the jobs a Ray cluster runs; see harness.executor.forwarded_env); idempotent."""
    from harness.executor import forwarded_env

    if not OmegaConf.has_resolver(ENV_RESOLVER):
        OmegaConf.register_new_resolver(ENV_RESOLVER, forwarded_env)
