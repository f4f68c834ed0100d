"""The n-way routing task: one row per question, one outcome and one cost per arm of a set.

Why beside ``harness.task``: a binary task compares a base arm with one extra arm; routing among
many arms (docs/metrics.md §14) needs every arm's outcome and cost per question. The questions
that count are chosen exactly as for a binary task (gold metrics keep only questions with
evidence), so the n-way numbers of two arms are those of the binary task on the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from harness.errors import ConfigError, DataSizeError, FeatureError
from harness.retrieval.feature_names import FEATURE_PREFIX
from harness.task import GOLD_METRIC_PREFIXES, MIN_DOCUMENTS, is_binary_metric

MAX_ARMS = 64  # arms.route: a longer list is a typo (every policy fits one model per arm)


@dataclass(frozen=True)
class ArmSetTask:
    """Aligned arrays for n questions and k arms: ``outcomes`` and ``costs`` are (n, k)."""

    qids: np.ndarray
    groups: np.ndarray  # document ids: every split and resample is grouped by these
    arms: tuple[str, ...]
    outcomes: np.ndarray  # float, 0/1 for hit@k / correct, in [0, 1] otherwise
    costs: np.ndarray  # float >= 0: what choosing the arm costs on the question
    features: pd.DataFrame
    metric: str = "hit@10"
    cost_unit: str = "unit"
    source: str = "outcome table"

    @property
    def n(self) -> int:
        return len(self.qids)

    @property
    def binary(self) -> bool:
        """Whether the outcomes are 0/1 (the exact frontier is then exact, docs/metrics.md §14)."""
        return is_binary_metric(self.metric)

    def take(self, idx: np.ndarray) -> "ArmSetTask":
        """The task on the rows ``idx`` (a split's part)."""
        return ArmSetTask(self.qids[idx], self.groups[idx], self.arms, self.outcomes[idx], self.costs[idx],
                          self.features.iloc[idx].reset_index(drop=True), self.metric, self.cost_unit, self.source)

    @classmethod
    def from_table(cls, table: pd.DataFrame, arms: Sequence[str], metric: str, *,
                   cost_column: str | None = None, unit_costs: Mapping[str, float] | None = None,
                   source: str = "outcome table") -> "ArmSetTask":
        """Outcome columns ``<arm>.<metric>``; costs measured (``<arm>.cost.<cost_column>``, the
        arm's whole cost on the question) or one unit cost per arm from the config. Exactly one
        of the two is given."""
        arms = check_arm_list(arms)
        _check_columns(table, arms, metric, source, cost_column)
        rows = table
        if metric.startswith(GOLD_METRIC_PREFIXES) and "has_evidence" in table.columns:
            rows = table[table["has_evidence"].astype(bool)]
        rows = rows.sort_values("qid", kind="stable").reset_index(drop=True)
        if not len(rows):
            raise DataSizeError(source, None, f"has no question usable for {metric}")
        outcomes = rows[[f"{a}.{metric}" for a in arms]].to_numpy(dtype=float)
        costs, unit = _costs(rows, arms, cost_column, unit_costs)
        _check_values(outcomes, costs, arms, metric, source, unit)
        groups = rows["doc_id"].astype(str).to_numpy()
        if len(np.unique(groups)) < MIN_DOCUMENTS:
            raise DataSizeError(source, None, f"has {len(np.unique(groups))} document(s); routing needs at least "
                                              f"{MIN_DOCUMENTS}")
        feats = rows[[c for c in rows.columns if c.startswith(FEATURE_PREFIX)]].copy()
        feats.columns = [c[len(FEATURE_PREFIX):] for c in feats.columns]
        return cls(rows["qid"].astype(str).to_numpy(), groups, arms, outcomes, costs,
                   feats.astype(float).reset_index(drop=True), metric, unit, source)


def check_arm_list(arms) -> tuple[str, ...]:
    """``arms.route``: at least two distinct arm names (ConfigError naming the key)."""
    if isinstance(arms, str) or not isinstance(arms, Sequence):
        raise ConfigError("arms.route", f"expected a list of arm names, got {arms!r}")
    names = tuple(str(a).strip() for a in arms)
    if len(names) < 2 or len(names) > MAX_ARMS or any(not a for a in names):
        raise ConfigError("arms.route", f"expected 2 to {MAX_ARMS} non-empty arm names, got {list(arms)!r}")
    twice = sorted({a for a in names if names.count(a) > 1})
    if twice:
        raise ConfigError("arms.route", f"names arm(s) {twice} more than once")
    return names


def _check_columns(table: pd.DataFrame, arms, metric: str, source: str, cost_column: str | None) -> None:
    present = sorted({c.split(".")[0] for c in table.columns if "." in c and not c.startswith(FEATURE_PREFIX)})
    for arm in arms:
        if f"{arm}.{metric}" not in table.columns:
            raise FeatureError(f"{source} has no column {arm + '.' + metric!r} for arms.route (arms: {present})")
        if cost_column and f"{arm}.cost.{cost_column}" not in table.columns:
            raise FeatureError(f"{source} has no cost column {arm + '.cost.' + cost_column!r} for cost.unit="
                               f"{cost_column} (arms.route names {arm!r})")


def _costs(rows: pd.DataFrame, arms, cost_column, unit_costs) -> tuple[np.ndarray, str]:
    if (cost_column is None) == (unit_costs is None):
        raise ConfigError("cost.per_arm", "give either measured costs (cost.unit) or one cost per arm, not both")
    if cost_column is not None:
        return rows[[f"{a}.cost.{cost_column}" for a in arms]].to_numpy(dtype=float), str(cost_column)
    missing = [a for a in arms if a not in unit_costs]
    if missing:
        raise ConfigError("cost.per_arm", f"has no cost for arm(s) {missing} of arms.route")
    row = np.array([_unit_cost(a, unit_costs[a]) for a in arms])
    return np.tile(row, (len(rows), 1)), "unit"


def _unit_cost(arm: str, value) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and 0 <= value <= 1e12
    if not ok:
        raise ConfigError(f"cost.per_arm.{arm}", f"expected a finite number in [0, 1e12], got {value!r}")
    return float(value)


def _check_values(outcomes: np.ndarray, costs: np.ndarray, arms, metric: str, source: str, unit: str) -> None:
    for j, arm in enumerate(arms):
        y, c = outcomes[:, j], costs[:, j]
        if not np.isfinite(y).all() or (y < 0).any() or (y > 1).any():
            raise FeatureError(f"{source}: column {arm + '.' + metric!r} has values outside [0, 1] or missing")
        if is_binary_metric(metric) and not np.isin(y, (0.0, 1.0)).all():
            raise FeatureError(f"{source}: column {arm + '.' + metric!r} is a 0/1 metric but holds other values")
        if not np.isfinite(c).all() or (c < 0).any():
            raise FeatureError(f"{source}: the {unit} cost of arm {arm!r} is negative or missing on some question")
