"""The router of one budget against the fixed decisions: what the verdicts are decided from.

Why apart: the decision table (``harness.protocols.decision_table``) chooses the reference at
each budget; the verdicts (``harness.protocols.verdict``) ask whether that router beats the fixed
decisions it replaces. This module pairs the two on the router's own test questions
(``verdict_stats.fixed_comparisons``) and hands the decision table one record per comparison.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.protocols.compare import ReferenceChoice
from harness.protocols.verdict_stats import fixed_comparisons, oracle_rows, overspent, tie_alternatives

UNIT_KEYS = ("seed", "split")


def choice_rows(choice: ReferenceChoice, have: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
    """The per-question decisions of the calibration choice: in each unit, the rows of the
    label that unit chose (None when one of them logged no decisions)."""
    parts = []
    for unit, label in sorted(choice.by_unit.items()):
        rows = have.get(label)
        if rows is None:
            return None
        mask = np.ones(len(rows), dtype=bool)
        for key, value in zip(choice.keys, unit):
            mask &= rows[key].to_numpy() == value
        parts.append(rows[mask])
    return pd.concat(parts, ignore_index=True) if parts else None


def router_comparisons(r0: dict, choice: ReferenceChoice, have: dict, vs_fixed: list, *, alpha: float,
                       power: float, margin: float, seed: int, sizes: dict, arm_names: dict) -> None:
    """The router of one budget (the calibration choice, and every equally valid choice where a
    split's choice was a tie: ``verdict_stats.tie_alternatives``) and the best rule at the
    budget (``verdict_stats.oracle_rows``, role "oracle") against the fixed decisions, appended
    to ``vs_fixed`` with the router's usage, splits and the splits that overspent the budget."""
    where = {"cell": r0["cell"], "cost": float(r0["cost"]), "budget": float(r0["budget"]), "policy": choice.name,
             "alpha": alpha}
    chosen = choice_rows(choice, have)
    if chosen is None:
        return
    units = chosen.groupby(list(UNIT_KEYS))["prob"].mean()
    n_cal = [sizes.get(tuple(int(v) for v in u), (math.nan, math.nan))[0] for u in units.index]
    n_test = chosen.groupby(list(UNIT_KEYS))["qid"].size().to_numpy(dtype=float)
    alternatives, count = tie_alternatives(choice, have)
    usage = {"router_usage": float(units.mean()), "router_splits": len(units),
             "router_violations": int(np.sum(units.to_numpy(dtype=float) > float(r0["budget"]) + 1e-12)),
             "router_overspent": int(np.sum(overspent(units.to_numpy(dtype=float), float(r0["budget"]), n_cal, n_test))),
             "alternatives": count}
    if alternatives is None:  # too many to test: only the room claim can still be decided
        vs_fixed.append({**where, "role": "ties", **usage})
        alternatives = []
    cost = float(r0["cost"])
    for i, (name, rows) in enumerate(alternatives):
        for c in fixed_comparisons(rows, cost, alpha=alpha, power=power, margin=margin, seed=seed):
            vs_fixed.append({**where, "role": "router", "alternative": i, "router": name, **usage, **c,
                             "arm_name": arm_names.get(c["arm"], c["arm"])})
    for c in fixed_comparisons(oracle_rows(chosen, float(r0["budget"]), cost), cost, alpha=alpha, power=power,
                               margin=margin, seed=seed):
        vs_fixed.append({**where, "role": "oracle", "router": "oracle", **c, "arm_name": arm_names.get(c["arm"], c["arm"])})

