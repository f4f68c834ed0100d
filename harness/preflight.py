"""Pre-flight checks of a job's routing task, before any protocol runs (docs/datasets.md).

Why: two situations make every later number meaningless, and both are known as soon as the
outcome table is there. (1) The two arms agree on every question: no policy can gain or lose
anything, every comparison is a tie; the job still runs (a user may want the cost figures),
with one warning line on the console and the tag ``route_bench.preflight`` on its run.
(2) A split's held-out or test set holds so few questions that no outcome on it can be
significant: with k questions, even all k discordant the same way give an exact two-sided
p = 2^(1 - k), so fewer than 6 can never reach p < 0.05. Such a job is refused (DataSizeError,
exit 2) naming ``protocol.min_heldout``, the floor, which a user may lower to run anyway.

The held-out / test sets are the protocols' own splits, drawn with their own functions and seeds:
protocol A's development / held-out splits (``repeat_seeds``), protocol B's test halves (its
``n_splits`` split seeds), protocol C's test half.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from harness.errors import DataSizeError
from harness.store_schema import TAG_PREFLIGHT

NOTHING_TO_ROUTE = "nothing to route: the arms agree on every question"
TAG = TAG_PREFLIGHT
MIN_HELDOUT = 6  # protocol.min_heldout's default: 2^(1 - 6) = 0.03 < 0.05 <= 2^(1 - 5)


def nothing_to_route(task) -> str | None:
    """The warning line when the pair's arms have the same outcome on every question, else None."""
    if task.n == 0 or not np.array_equal(np.asarray(task.base, float), np.asarray(task.extra, float)):
        return None
    return (f"{NOTHING_TO_ROUTE} ({task.base_arm} and {task.extra_arm} have the same {task.metric} on all "
            f"{task.n} questions): every policy ties; check the dataset's pools and arms.metric")


def preflight_tags(task) -> dict[str, str]:
    """The run tag of the warning (empty when there is nothing to say)."""
    warning = nothing_to_route(task)
    return {TAG: warning} if warning else {}


def smallest_heldout(task, protocol: Mapping, budget: Mapping, seed: int) -> dict[str, int]:
    """Per configured protocol, the fewest questions any of its held-out / test sets holds."""
    from harness.stats import grouped_split, stratified_grouped_halves

    run = list(protocol.get("run", ()))
    out: dict[str, int] = {}
    if "threshold" in run:
        from harness.protocols.threshold_select import repeat_seeds

        frac = float(protocol.get("dev_frac", 0.8))
        out["threshold"] = min(len(grouped_split(task.groups, frac, s)[1])
                               for s in repeat_seeds(seed, int(protocol.get("repeats", 1))))
    if "budget" in run:
        n_splits = int(budget.get("n_splits", 5))
        seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=n_splits)  # as run_budget_protocol draws them
        out["budget"] = min(len(stratified_grouped_halves(task.groups, task.delta_class, int(s))[1]) for s in seeds)
    if "gain" in run:
        out["gain"] = len(stratified_grouped_halves(task.groups, task.delta_class, seed)[1])
    return out


def check_heldout_size(task, protocol: Mapping, budget: Mapping, seed: int) -> None:
    """DataSizeError naming ``protocol.min_heldout`` when a held-out or test set is below it."""
    floor = protocol.get("min_heldout", MIN_HELDOUT)
    floor = MIN_HELDOUT if floor is None else int(floor)
    what = {"threshold": "held-out set", "budget": "smallest test half", "gain": "test half"}
    for name, n in smallest_heldout(task, protocol, budget, seed).items():
        if n < floor:
            raise DataSizeError(
                task.source, None,
                f"protocol {name}'s {what[name]} holds {n} question(s) ({task.n} questions in "
                f"{len(set(task.groups))} documents), below protocol.min_heldout={floor}: with fewer than "
                f"{MIN_HELDOUT} no outcome can reach p < 0.05; use a larger dataset, or set "
                f"protocol.min_heldout={max(n, 1)} to run anyway",
            )
