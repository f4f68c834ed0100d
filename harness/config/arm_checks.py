"""Checks of the ``arms`` group: the pair's arms exist and differ, the routed metric is one the
job's table has, and arm blocks a table cannot run are refused before any work."""

from __future__ import annotations

from typing import Any

from harness.config.values import _in_range
from harness.errors import ConfigError, did_you_mean


def metric_names(k: int) -> list[str]:
    """The per-arm outcome metrics an outcome table holds for top ``k`` (``harness.retrieval.arms``
    writes them: hit@1..k, recall@k, mrr@k)."""
    return [f"hit@{j}" for j in range(1, k + 1)] + [f"recall@{k}", f"mrr@{k}"]


def gold_metric_names(k: int) -> list[str]:
    """The metrics the built-in ``gold_at_k`` block derives from an outcome table's top ``k`` and
    the dataset's gold units (``harness.metric_blocks``; added to a job when ``arms.metric`` names
    one): all@1..k (every gold unit in the top j), recall@1..k-1 (recall@k is a table column)."""
    return [f"all@{j}" for j in range(1, k + 1)] + [f"recall@{j}" for j in range(1, k)]


SYNTHETIC_K = 10  # the synthetic table's metrics are @10 (harness.synthetic)


def _check_arms(arms: Any, synthetic: bool) -> None:
    """The ``arms`` group of a job on the synthetic table or a real one; a ConfigError names the key."""
    from harness.arm_blocks import blocks_for
    from harness.arm_blocks.runs import run_specs
    from harness.retrieval.arms import ARMS
    from harness.retrieval.settings import check_retrieval_settings

    # every table kind: the synthetic one would ignore arms.k=0 yet log it; an answer pair's base
    # table is built with these settings
    check_retrieval_settings(arms, synthetic=synthetic, synthetic_k=SYNTHETIC_K)
    base, extra = arms.get("base", "keep"), arms.get("extra", "hybrid")
    _check_pair(arms, base, extra)
    if arms.get("runs"):  # every run and cost file read and hashed now, before any work
        from harness.arm_blocks.runs import run_blocks

        if synthetic:
            raise ConfigError("arms.runs", "run files are scored against a dataset's gold passages; the synthetic "
                                           "table has none (use dataset=beir dataset.path=DIR)")
        for block in run_blocks(arms):
            block.check_files()
    if synthetic and (arms.get("blocks") or base not in ARMS or extra not in ARMS):
        _refuse_answer_blocks(arms)
    if base not in ARMS or extra not in ARMS:
        blocks_for(arms, [*ARMS, *run_specs(arms)])  # the blocks a job would add can be made (parameters, identity)
        return  # a block's arm: its block names its outcome columns; the task checks the metric
    _check_metric(arms, synthetic)


def _check_pair(arms: Any, base: Any, extra: Any) -> None:
    """Both arms are table arms or arms of listed or installed blocks, and they differ."""
    from harness.arm_blocks import block_arms
    from harness.retrieval.arms import ARMS

    from harness.arm_blocks.runs import run_specs

    plugged = block_arms(arms.get("blocks") or [])  # arms of listed and installed blocks
    plugged.update({name: "arms.runs" for name in run_specs(arms)})  # run files as arms
    known = [*ARMS, *sorted(a for a in plugged if a not in ARMS)]
    for key, arm in (("arms.base", base), ("arms.extra", extra)):
        if arm not in known:
            raise ConfigError(key, f"unknown arm {arm!r}{did_you_mean(arm, known)}; the outcome table has {', '.join(ARMS)}"
                                   + (f", arm blocks add {', '.join(sorted(plugged))}" if plugged else ""))
    if base == extra:
        raise ConfigError("arms.extra", f"must differ from arms.base (both are {base!r}): the task compares two arms")


def _refuse_answer_blocks(arms: Any) -> None:
    """An answer arm on the synthetic table, found now, not after the store and the table are
    opened: its questions have no text to generate answers from."""
    from harness.arm_blocks import blocks_for
    from harness.generation.arms import AnswerArm
    from harness.retrieval.arms import ARMS

    for block in blocks_for(arms, list(ARMS)):
        if isinstance(block, AnswerArm):
            raise ConfigError("dataset", f"arm block {block.name!r} generates answers from the questions' text; "
                                         "the synthetic table has none (use a real dataset, e.g. dataset=qasper_yesno)")


def _check_metric(arms: Any, synthetic: bool) -> None:
    """``arms.k`` and ``arms.metric`` of a retrieval pair: a metric the job's outcome table has."""
    k = arms.get("k", 10)
    if not synthetic:
        _in_range("arms.k", k, 1, integer=True)
    metric = arms.get("metric", "hit@10")
    n = SYNTHETIC_K if synthetic else int(k)
    # the synthetic table holds the @10 metrics only (harness.synthetic): hit@5 there would pass
    # here and fail at the first job
    known = [f"hit@{n}", f"recall@{n}", f"mrr@{n}"] if synthetic else metric_names(n) + gold_metric_names(n)
    if metric not in known:
        if synthetic:
            has = (f"the synthetic table has hit@{n}, recall@{n}, mrr@{n} only (hit@k, all@k and recall@k at another k "
                   "need a real dataset's rankings and gold units)")
        else:
            has = (f"an outcome table with arms.k={k} has hit@1..hit@{n}, recall@{n}, mrr@{n}, and all@1..all@{n}, "
                   f"recall@1..recall@{n} from its rankings and the dataset's gold units")
        raise ConfigError("arms.metric", f"unknown metric {metric!r}{did_you_mean(metric, known)}; {has}")
