"""The routing task a policy and a protocol see: one row per question, base vs extra arm.

Why a separate view: the outcome table holds every arm; a protocol compares exactly two (keep
vs hybrid, no-RAG vs RAG) on one metric. Building the view in one place keeps "which questions
count" (only those with evidence for hit metrics, docs/metrics.md §1) written once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.errors import DataSizeError, FeatureError
from harness.retrieval.feature_names import FEATURE_PREFIX

GAIN_EPS = 0.01  # docs/metrics.md §7
# outcomes in {0, 1} besides hit@k and all@k: an answer judged correct (harness/generation/arms.py)
BINARY_METRICS = ("correct",)
# outcomes scored against gold units: only questions with evidence count (docs/metrics.md §1).
# hit@k: some gold unit in the top k; all@k: every gold unit in the top k (harness.metric_blocks);
# recall@k: the share of gold units in the top k; mrr@k
GOLD_METRIC_PREFIXES = ("hit@", "all@", "recall@", "mrr@")
# of those, the 0/1 ones (delta in {-1, 0, +1}: rescues, harms, McNemar); recall and MRR are continuous
BINARY_GOLD_PREFIXES = ("hit@", "all@")


def is_binary_metric(metric: str) -> bool:
    """Whether ``metric``'s outcomes are 0/1 (hit@k, all@k, an answer judged correct)."""
    return str(metric).startswith(BINARY_GOLD_PREFIXES) or metric in BINARY_METRICS


TEXT_COLUMN = "question"  # an outcome table's question text (harness.data.outcome_table), optional


@dataclass(frozen=True)
class RoutingTask:
    """Aligned arrays for n questions. ``base``/``extra`` are outcomes in [0, 1]."""

    qids: np.ndarray  # str, unique
    groups: np.ndarray  # str document ids: every split is grouped by these
    base: np.ndarray  # float outcome of the base arm (hit@k in {0,1}, or quality in [0,1])
    extra: np.ndarray  # float outcome of the extra arm
    features: pd.DataFrame  # feature columns without prefix, row i = question i
    base_arm: str = "keep"
    extra_arm: str = "hybrid"
    metric: str = "hit@10"
    continuous: bool = False  # True for answer quality: gain is a log ratio (docs/metrics.md §7)
    source: str = "outcome table"  # named in error messages
    # measured cost per question (``cost_unit``, e.g. reranker pairs): what the base arm costs,
    # and what running the extra arm adds on a question; None when the table has no cost columns
    base_cost: np.ndarray | None = None
    extra_cost: np.ndarray | None = None
    cost_unit: str = ""
    # the questions' text (the table's ``question`` column), for policies with ``needs_text``;
    # None when the table has none. Never a feature: policies get it in ScoreContext.texts
    texts: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.qids)
        for name in ("groups", "base", "extra"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"RoutingTask.{name} has {len(getattr(self, name))} rows, expected {n}")
        if len(self.features) != n:
            raise ValueError(f"RoutingTask.features has {len(self.features)} rows, expected {n}")
        for name in ("base_cost", "extra_cost", "texts"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(f"RoutingTask.{name} has {len(value)} rows, expected {n}")

    @property
    def n(self) -> int:
        return len(self.qids)

    @property
    def delta(self) -> np.ndarray:
        """extra - base: in {-1, 0, +1} for hits (docs/metrics.md §2)."""
        return self.extra.astype(float) - self.base.astype(float)

    @property
    def gain(self) -> np.ndarray:
        """delta for hits; log((Q_extra + eps) / (Q_base + eps)) for continuous quality."""
        if not self.continuous:
            return self.delta
        return np.log((self.extra + GAIN_EPS) / (self.base + GAIN_EPS))

    @property
    def delta_class(self) -> np.ndarray:
        """sign of delta as int in {-1, 0, +1}: the target of the classifiers."""
        return np.sign(self.delta).astype(int)

    def take(self, idx: np.ndarray) -> "RoutingTask":
        idx = np.asarray(idx)
        return RoutingTask(
            qids=self.qids[idx],
            groups=self.groups[idx],
            base=self.base[idx],
            extra=self.extra[idx],
            features=self.features.iloc[idx].reset_index(drop=True),
            base_arm=self.base_arm,
            extra_arm=self.extra_arm,
            metric=self.metric,
            continuous=self.continuous,
            source=self.source,
            base_cost=None if self.base_cost is None else self.base_cost[idx],
            extra_cost=None if self.extra_cost is None else self.extra_cost[idx],
            cost_unit=self.cost_unit,
            texts=None if self.texts is None else self.texts[idx],
        )

    def feature_matrix(self, names: tuple[str, ...] | list[str]) -> pd.DataFrame:
        """The named feature columns (a pattern ``prefix*`` stands for every column starting with
        the prefix, in name order); a missing one is a FeatureError naming it and the table."""
        from harness.retrieval.feature_names import expand, shown

        found, missing = expand(names, self.features.columns)
        if missing:
            raise FeatureError(f"feature(s) {missing} not in {self.source} (it has: {shown(self.features.columns)})")
        return self.features.loc[:, found]

    @classmethod
    def from_table(
        cls,
        table: pd.DataFrame,
        base_arm: str = "keep",
        extra_arm: str = "hybrid",
        metric: str = "hit@10",
        source: str = "outcome table",
        continuous: bool | None = None,
        cost_column: str | None = "rerank_pairs",
        marginal_base: str = "keep",
    ) -> "RoutingTask":
        """Select base/extra outcome columns ``<arm>.<metric>``; metrics scored against gold units
        (hit@k, all@k, recall@k, mrr@k) keep only questions with evidence (the others stay in the
        table but cannot score a hit). 0/1 metrics (hit@k, all@k, correct) give delta in
        {-1, 0, +1}; the others are continuous (gain = log ratio, docs/metrics.md §7).

        Costs (``cost_column``, default reranker pairs: a count, so the same on every machine,
        where milliseconds are not): the base arm's ``<base>.cost.<col>``, and what the extra
        arm adds where it runs: its marginal cost ``<extra>.marginal.<col>`` when the base arm
        is the arm marginal costs are measured against (``marginal_base``, keep), else its
        stand-alone ``<extra>.cost.<col>`` (an upper bound: work shared with the base arm is
        counted twice). Tables without these columns (synthetic) leave the costs None.
        """
        for arm in (base_arm, extra_arm):
            col = f"{arm}.{metric}"
            if col not in table.columns:
                arms = sorted({c.split(".")[0] for c in table.columns if "." in c and not c.startswith(FEATURE_PREFIX)})
                hint = ("; all@k and recall@k come from the gold_at_k block (harness.metric_blocks), which a job adds "
                        "when arms.metric names one" if metric.startswith(("all@", "recall@")) else "")
                raise FeatureError(f"{source} has no column {col!r} (arms: {arms}){hint}")
        rows = table
        is_hit_metric = metric.startswith(GOLD_METRIC_PREFIXES)
        if is_hit_metric and "has_evidence" in table.columns:
            rows = table[table["has_evidence"].astype(bool)]
        rows = rows.sort_values("qid", kind="stable").reset_index(drop=True)
        check_rows(rows, table, source, metric, base_arm, extra_arm, is_hit_metric)
        feats = rows[[c for c in rows.columns if c.startswith(FEATURE_PREFIX)]].copy()
        feats.columns = [c[len(FEATURE_PREFIX):] for c in feats.columns]
        if continuous is None:  # 0/1 outcomes (a hit, a correct answer) give delta in {-1, 0, +1}
            continuous = not is_binary_metric(metric)
        base_cost = extra_cost = None
        if cost_column:
            extra_col = (
                f"{extra_arm}.marginal.{cost_column}" if base_arm == marginal_base else f"{extra_arm}.cost.{cost_column}"
            )
            base_col = f"{base_arm}.cost.{cost_column}"
            if base_col in rows.columns and extra_col in rows.columns:
                base_cost = rows[base_col].astype(float).to_numpy()
                extra_cost = rows[extra_col].astype(float).to_numpy()
        return cls(
            qids=rows["qid"].astype(str).to_numpy(),
            groups=rows["doc_id"].astype(str).to_numpy(),
            base=rows[f"{base_arm}.{metric}"].astype(float).to_numpy(),
            extra=rows[f"{extra_arm}.{metric}"].astype(float).to_numpy(),
            features=feats.astype(float).reset_index(drop=True),
            base_arm=base_arm,
            extra_arm=extra_arm,
            metric=metric,
            continuous=bool(continuous),
            source=source,
            base_cost=base_cost,
            extra_cost=extra_cost,
            cost_unit=str(cost_column) if base_cost is not None else "",
            texts=rows[TEXT_COLUMN].astype(str).to_numpy() if TEXT_COLUMN in rows.columns else None,
        )


# every protocol splits by document into two non-empty parts (A: development / held-out, B and C:
# two grouped halves), so a task needs at least this many documents
MIN_DOCUMENTS = 2


def check_rows(rows: pd.DataFrame, table: pd.DataFrame, source: str, metric: str, base_arm: str, extra_arm: str,
               hit_metric: bool) -> None:
    """The task's rows are usable: some question left (with gold evidence for hit metrics), both
    outcomes finite, at least ``MIN_DOCUMENTS`` documents. A DataSizeError names the counts (a
    data problem, not a protocol setting)."""
    from harness.errors import DataError

    if not len(rows):
        if not len(table):
            raise DataSizeError(source, None, "has no questions")
        why = " with gold evidence" if hit_metric and "has_evidence" in table.columns else ""
        raise DataSizeError(source, None, f"has no question{why} ({len(table)} questions in all, 0 usable for {metric}); "
                                          "the dataset gives no gold units to score hits against")
    for arm in (base_arm, extra_arm):
        values = rows[f"{arm}.{metric}"].astype(float).to_numpy()
        bad = ~np.isfinite(values)
        if bad.any():
            raise DataError(source, f"{arm}.{metric}", f"{int(bad.sum())} of {len(values)} values are not finite "
                                                       f"(first at question {rows['qid'].iloc[int(np.argmax(bad))]!r})")
    n_docs = rows["doc_id"].nunique()
    if n_docs < MIN_DOCUMENTS:
        raise DataSizeError(source, None, f"too few documents: {len(rows)} usable questions in {n_docs} document(s); "
                                          f"every protocol splits by document and needs at least {MIN_DOCUMENTS}")
