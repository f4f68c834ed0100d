"""The report's columns: which logged metrics the per-job table shows, under which header, and
which direction is better. Kept apart (and small) so the columns can later come from the
protocols' own declarations."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NON_OUTCOME = {
    "utility", "realized_usage", "usage_error", "violation_rate", "tolerance_overshoot_rate",
    "target_usage", "extra_calls", "random_matched", "oracle_matched",
}


@dataclass
class Column:
    """A table column: header, the metric key it shows, and which direction is better."""

    header: str
    key: str
    better: str | None  # "high", "low" or None (never marked)
    ci: tuple[str, str] | None = None
    # a 0/1 metric: where the run logged 0, the cell says ``unless[1]`` instead of the value (the
    # MDD is shown only when a difference is detectable at all, docs/metrics.md §12)
    unless: tuple[str, str] | None = None


def outcome_metric_of(metric_keys: set[str]) -> str | None:
    """The logged outcome name (e.g. ``hit_at_10``) found among the metric keys."""
    names = set()
    for k in metric_keys:
        m = re.fullmatch(r"frontier/(?:exact|deployable|conservative)/([^/]+)", k)
        if m and m.group(1) not in _NON_OUTCOME:
            names.add(m.group(1))
        m = re.fullmatch(r"heldout/([^/]+)", k)
        if m and m.group(1) not in _NON_OUTCOME and (
            m.group(1).startswith(("hit_at_", "accuracy", "f1", "em", "recall_at_", "mrr_at_"))
        ):
            names.add(m.group(1))
    if not names:
        return None
    return sorted(names, key=lambda n: (not n.startswith("hit_at_"), n))[0]


def display_name(mlflow_metric: str) -> str:
    """MLflow forbids ``@`` in names; the tracker logs ``hit@10`` as ``hit_at_10``. Show ``hit@10``."""
    return mlflow_metric.replace("_at_", "@")


def _budgets(metric_keys: set[str]) -> list[str]:
    found = set()
    for k in metric_keys:
        m = re.fullmatch(r"budget/([0-9.]+)/deployable/violation_rate", k)
        if m:
            found.add(m.group(1))
    return sorted(found, key=float)


def build_columns(metric_keys: set[str], outcome: str | None) -> list[Column]:
    """Columns shown, in order; a column appears only if some job logged its metric."""
    cols = []
    if outcome:
        cols.append(Column(f"heldout {display_name(outcome)}", f"heldout/{outcome}", "high"))
    cols += [
        Column("heldout utility", "heldout/utility", "high"),
        Column("extra share", "heldout/extra_share", None),
        Column(
            "utility diff vs base [95% CI]", "heldout/diff_vs_base/utility", "high",
            ci=("heldout/diff_vs_base/utility/ci_low", "heldout/diff_vs_base/utility/ci_high"),
        ),
        Column(
            "utility diff vs extra [95% CI]", "heldout/diff_vs_extra/utility", "high",
            ci=("heldout/diff_vs_extra/utility/ci_low", "heldout/diff_vs_extra/utility/ci_high"),
        ),
        Column("MDD vs base", "heldout/diff_vs_base/utility/mdd", None,
               unless=("heldout/diff_vs_base/utility/detectable", "none detectable")),
        Column("exact-frontier AUC", "frontier/exact_auc", "high"),
        Column("APGR (exact)", "routing/exact/apgr", "high"),
        Column("APGR (deployable)", "routing/deployable/apgr", "high"),
        Column("CPT(50%) (deployable)", "routing/deployable/cpt50", "low"),
        Column("AIQ (exact)", "routing/exact/aiq", "high"),
    ]
    for b in _budgets(metric_keys):
        cols.append(
            Column(f"deployable violation @{b}", f"budget/{b}/deployable/violation_rate", "low")
        )
    cols.append(Column("gain spearman", "gain/spearman", "high"))
    return [c for c in cols if c.key in metric_keys]
