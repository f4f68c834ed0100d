"""The report's data: one sweep's jobs (``JobRow``), its columns and its protocols' sweep-stage
results (``SweepReport``), as ``harness.report.loading`` reads them from the store."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.report.columns import Column


@dataclass
class JobRow:
    run_id: str
    run_name: str
    status: str
    policy: str
    cost: str
    metrics: dict[str, float]
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    alpha: float = 0.05  # the job's protocol.alpha param (default 0.05)


@dataclass
class SweepReport:
    sweep_id: str
    tracking_uri: str
    experiment: str
    parent_run_id: str | None
    rows: list[JobRow]
    columns: list[Column]
    outcome_metric: str | None
    results: dict = field(default_factory=dict)  # protocol -> its sweep stage's SweepResult, in the sweep's order
    alpha: float = 0.05
    decision_filter: str = ""  # e.g. "budget 0.25, cost 0.02" when the table was filtered

    @property
    def decision_table(self):
        """Protocol B's decision table (pandas), None when no job ran protocol B."""
        result = self.results.get("budget")
        return None if result is None else result.raw
    picked: str = ""  # why --latest picked this sweep (empty for --sweep)
    warnings: list[str] = field(default_factory=list)  # see sweep_warnings
