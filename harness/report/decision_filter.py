"""``--budget`` / ``--cost``: protocol B's decision table restricted to those values (the fixed
decisions of the selected cost stay, as references); a value the sweep does not have is one
error naming the flag."""

from __future__ import annotations

from harness.errors import HarnessError
from harness.protocols.builtin import decision_table_result
from harness.protocols.decision_table import select
from harness.report.model import SweepReport


def filter_decision_table(rep: SweepReport, budget: float | None, cost: float | None) -> None:
    """Restrict ``rep.decision_table`` to ``budget`` / ``cost`` (HarnessError naming the flag
    and the sweep's values when one is not in the sweep)."""
    if budget is None and cost is None:
        return
    table = rep.decision_table
    if table is None or not len(table):
        flag = "--budget" if budget is not None else "--cost"
        raise HarnessError(f"{flag}: sweep {rep.sweep_id} has no decision table (no protocol B results in its jobs)")
    rep.decision_filter = ", ".join(
        part for part in (f"budget {budget:g}" if budget is not None else "", f"cost {cost:g}" if cost is not None else "")
        if part
    )
    filtered = decision_table_result(select(table, budget=budget, cost=cost), rep.decision_filter)
    if filtered is None:
        rep.results.pop("budget", None)
    else:
        rep.results["budget"] = filtered
