"""Evaluation protocols (docs/metrics.md §5-7): frozen threshold, budgets/frontiers, gain prediction.

Each runner takes a RoutingTask and a ``policy_factory`` (a fresh unfitted policy per fold or
split) and returns plain data (metrics dict, DataFrames) with a ``summary()`` text table.
"""

from harness.protocols.budget import BudgetResult, run_budget_protocol
from harness.protocols.common import fit_policy, score_task
from harness.protocols.gain import compare_policies_williams, run_gain_protocol
from harness.protocols.gain_result import GainResult
from harness.protocols.threshold import run_threshold_protocol
from harness.protocols.threshold_result import ThresholdResult

__all__ = [
    "BudgetResult",
    "GainResult",
    "ThresholdResult",
    "compare_policies_williams",
    "fit_policy",
    "run_budget_protocol",
    "run_gain_protocol",
    "run_threshold_protocol",
    "score_task",
]
