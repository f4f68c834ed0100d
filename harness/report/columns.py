"""The report's columns: which logged metrics the per-job table shows, under which header, and
which direction is better, from the protocols' own declarations (``Protocol.outputs``), so a
plugin protocol's numbers get columns with no edit here."""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.protocols.outputs import expand, logged_budgets

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


def declared_outputs() -> list:
    """Every known protocol's declared outputs (``Protocol.outputs``: built-ins first, then
    installed plugins), in that order; a plugin that cannot be made declares nothing here."""
    from harness.errors import HarnessError
    from harness.protocols.registry import display_order, make_protocol, protocol_names

    out = []
    for name in display_order(protocol_names()):
        try:
            out += list(make_protocol(name).outputs)
        except HarnessError:  # its own commands say why; the report shows the rest
            continue
    return out


def build_columns(metric_keys: set[str], outcome: str | None) -> list[Column]:
    """Columns shown, in order: the report outputs the protocols declare (``{metric}`` the
    sweep's outcome, ``{budget}`` each budget some job logged); a column appears only if some
    job logged its metric."""
    outputs = [o for o in declared_outputs() if o.report]
    cols = [Column(o.label, o.key, o.better, ci=o.ci, unless=o.unless)
            for o in expand(outputs, outcome, logged_budgets(metric_keys, outputs))]
    return [c for c in cols if c.key in metric_keys]
