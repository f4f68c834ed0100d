"""Pre-flight checks of a job's routing task, before any protocol runs (docs/datasets.md).

Why: two situations make every later number meaningless, and both are known as soon as the
outcome table is there. (1) The two arms agree on every question: no policy can gain or lose
anything, every comparison is a tie; the job still runs (a user may want the cost figures),
with one warning line on the console and the tag ``route_bench.preflight`` on its run.
(2) A split's held-out or test set holds so few questions that no outcome on it can be
significant: with k questions, even all k discordant the same way give an exact two-sided
p = 2^(1 - k), so fewer than 6 can never reach p < 0.05. Such a job is refused (DataSizeError,
exit 2) naming ``protocol.min_heldout``, the floor, which a user may lower to run anyway.

Each protocol says what it needs (``Protocol.min_documents``, ``Protocol.smallest_test_set``):
the held-out / test sets are its own splits, drawn with its own functions and seeds (protocol A's
development / held-out splits, B's test halves, C's test half), so a plugin protocol gets the
same pre-flight with no edit here.

(3) The job's policy reads features (or the question text) its outcome table does not have:
an outcome file of logged answers holds no retrieval, QPP or uncertainty feature. The query
features (docs/metrics.md §3) are computed from the question text where the table has the text
but not the columns (``with_text_features``); anything else missing makes the job not
applicable to the table (``not_applicable``): one line naming the policy and the missing
feature set. A single run refuses it (exit 2); a sweep reports the job and goes on
(docs/own_arms.md, "Policies a table cannot feed").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from harness.errors import DataSizeError
from harness.protocols.registry import PlannedProtocol
from harness.retrieval.feature_names import FEATURE_SETS, QUERY, expand
from harness.retrieval.features import query_features
from harness.stats import check_bootstrap_size
from harness.store_schema import TAG_PREFLIGHT

NOTHING_TO_ROUTE = "nothing to route: the arms agree on every question"
TAG = TAG_PREFLIGHT
MIN_HELDOUT = 6  # protocol.min_heldout's default: 2^(1 - 6) = 0.03 < 0.05 <= 2^(1 - 5)
# every setting that can leave the two arms with the same outcome on every question: the
# outcome metric and its k (a metric every arm reaches), the rerank depth (a pool no larger than
# it: keep and hybrid rerank the same set), the pair itself, and the dataset's pools
ROUTING_SETTINGS = ("arms.metric and pipeline.passages_to_llm (the outcome and its k), arms.k, "
                    "pipeline.rerank_depth / arms.candidates (the rerank depth: a pool no larger than it "
                    "gives keep and hybrid the same set), arms.base / arms.extra, and the dataset's pools "
                    "(python -m harness data NAME)")


def nothing_to_route(task) -> str | None:
    """The warning line when the pair's arms have the same outcome on every question, else None."""
    if task.n == 0 or not np.array_equal(np.asarray(task.base, float), np.asarray(task.extra, float)):
        return None
    return (f"{NOTHING_TO_ROUTE} ({task.base_arm} and {task.extra_arm} have the same {task.metric} on all "
            f"{task.n} questions): every policy ties; check {ROUTING_SETTINGS}")


def preflight_tags(task) -> dict[str, str]:
    """The run tag of the warning (empty when there is nothing to say)."""
    warning = nothing_to_route(task)
    return {TAG: warning} if warning else {}


def smallest_test_sets(task, planned: Sequence[PlannedProtocol], cfg: Mapping) -> dict[str, tuple[int, str]]:
    """Per protocol of the job that judges on a held-out set: (its fewest questions, the set's
    name), as the protocol itself draws its splits (``Protocol.smallest_test_set``)."""
    out = {}
    for pp in planned:
        got = pp.protocol.smallest_test_set(task, cfg)
        if got is not None:
            out[pp.name] = got
    return out


def check_documents(task, planned: Sequence[PlannedProtocol], cfg: Mapping, trainable: bool = True) -> None:
    """DataSizeError (counts, not a blamed setting) when the task has fewer documents than a
    protocol of the job needs (``Protocol.min_documents``), or than its bootstrap can resample."""
    n_docs = len(set(task.groups))
    check_bootstrap_size(int(cfg["protocol"].get("n_boot", 1000)), n_docs, str(task.source))
    for pp in planned:
        need = pp.protocol.min_documents(cfg, trainable)
        if need is not None and n_docs < need[0]:
            raise DataSizeError(
                task.source, None,
                f"too few documents for protocol {pp.name}: {task.n} usable questions in {n_docs} documents, it needs "
                f"at least {need[0]} ({need[1]}); use a larger dataset or relax the protocol settings",
            )


def check_heldout_size(task, planned: Sequence[PlannedProtocol], cfg: Mapping) -> None:
    """DataSizeError naming ``protocol.min_heldout`` when a held-out or test set is below it."""
    floor = cfg["protocol"].get("min_heldout", MIN_HELDOUT)
    floor = MIN_HELDOUT if floor is None else int(floor)
    for name, (n, what) in smallest_test_sets(task, planned, cfg).items():
        if n < floor:
            raise DataSizeError(
                task.source, None,
                f"protocol {name}'s {what} holds {n} question(s) ({task.n} questions in "
                f"{len(set(task.groups))} documents), below protocol.min_heldout={floor}: with fewer than "
                f"{MIN_HELDOUT} no outcome can reach p < 0.05; use a larger dataset, or set "
                f"protocol.min_heldout={max(n, 1)} to run anyway",
            )


def check_sizes(task, planned: Sequence[PlannedProtocol], cfg: Mapping, trainable: bool = True) -> None:
    """Both pre-flight size checks of a job, in order: documents to split, then questions to judge."""
    check_documents(task, planned, cfg, trainable)
    check_heldout_size(task, planned, cfg)


# ---- does the policy apply to the table? ---------------------------------------------------------
# the feature sets a missing feature is named by (the composites "all" and "probe" left out)
NAMED_SETS = ("baseline", "bm25", "qpp", "query", "uncertainty", "option_uncertainty", "probe_memory", "probe_rag",
              "query_embedding")


def _text_derivable(task) -> set[str]:
    """The features computed from the question text when the table has the text (the query set)."""
    return set(QUERY) if task.texts is not None else set()


def not_applicable(policy: Any, task, label: str) -> str | None:
    """Why ``policy`` (named ``label``) cannot run on ``task``'s table, in one line, else None:
    it reads the question text the table lacks, or declared features that are neither columns
    of the table nor computable from its text (``with_text_features``)."""
    from harness.task import TEXT_COLUMN

    if getattr(policy, "needs_text", False) and task.texts is None:
        return (f"policy {label} reads the question text (needs_text = True); the outcome table has no "
                f"'{TEXT_COLUMN}' column")
    declared = [str(n) for n in (getattr(policy, "features", ()) or ())]
    _, missing = expand(declared, [*task.features.columns, *_text_derivable(task)])
    if not missing:
        return None
    sets = [s for s in NAMED_SETS if any(n in FEATURE_SETS[s] for n in missing)]
    others = [n for n in missing if not any(n in FEATURE_SETS[s] for s in NAMED_SETS)]
    what = "/".join(sets + (["other"] if sets and others else [])) + " features" if sets else "features"
    names = missing[0] + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
    has = "has none" if len(missing) == len(declared) else f"lacks {len(missing)} of {len(declared)}"
    hint = f", or a '{TEXT_COLUMN}' column to compute the query features from" if "query" in sets else ""
    return f"policy {label} reads {what} ({names}); the outcome table {has} (give feat.<name> columns{hint})"


def with_text_features(task, names: Sequence[str]):
    """``task`` with the query features among ``names`` that its table lacks computed from the
    question text (``harness.retrieval.features.query_features``, as a retrieval table's are):
    an outcome file with a ``question`` column feeds a query-feature policy. Unchanged when
    nothing is missing or the table has no text."""
    wanted = [n for n in QUERY if n in set(map(str, names)) and n not in task.features.columns]
    if not wanted or task.texts is None:
        return task
    derived = pd.DataFrame([query_features(str(t)) for t in task.texts])[wanted].astype(float)
    return replace(task, features=pd.concat([task.features, derived], axis=1))


def frame_with_text_features(frame: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """The outcome table with the query features among ``names`` that it lacks computed from its
    question text, as ``feat.`` columns: the protocols that read the table itself (n-way,
    cascades) see what ``with_text_features`` gives the task. Unchanged when nothing is missing
    or the table has no text."""
    from harness.task import FEATURE_PREFIX, TEXT_COLUMN

    wanted = [n for n in QUERY if n in set(map(str, names)) and f"{FEATURE_PREFIX}{n}" not in frame.columns]
    if not wanted or TEXT_COLUMN not in frame.columns:
        return frame
    derived = pd.DataFrame([query_features(str(t)) for t in frame[TEXT_COLUMN]], index=frame.index)[wanted]
    return pd.concat([frame, derived.astype(float).add_prefix(FEATURE_PREFIX)], axis=1)
